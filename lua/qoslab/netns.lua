--- Named network namespaces, compatible with `ip netns` (ip-netns(8)).
--
-- A namespace `NAME` is the bind mount `/run/netns/NAME`; `/run/netns` is made
-- a shared mount point as iproute2 does, so `ip netns list`, `ip netns exec`
-- and qoslab see the same namespaces. Links inside namespaces (veth pairs,
-- addresses, MTU, offloads) are in `qoslab.link`; rate limits in
-- `qoslab.shape`; a ready-made two-namespace link in `qoslab.testbed`.
--
-- Everything created here is recorded with `qoslab.state`, so `qoslab cleanup`
-- removes what a killed process left behind; `delete` forgets the namespace
-- and whatever was recorded inside it.
--
-- Failures of the world return `nil, message, CODE`: `EEXIST` (name taken),
-- `ENOENT` (no such namespace), `EPERM` (needs CAP_SYS_ADMIN: run as root).
-- Bad arguments raise `"qoslab.netns.<fn>: <field>: expected ..."`.
-- @module qoslab.netns
local core = require 'qoslab.core'
local check = require 'qoslab.check'
local state = require 'qoslab.state'

local M = {}

-- Records of what this process created: id -> entry (for forgetting by
-- namespace when a namespace goes away with everything in it).
local tracked = {}

--- (internal) Record a created object with qoslab.state; returns its id.
function M._track(entry)
  local id = state.record(entry)
  tracked[id] = entry
  return id
end

--- (internal) Whether a `_track` id is still recorded (its namespace or link
-- not deleted since).
function M._tracked(id)
  return tracked[id] ~= nil
end

--- (internal) Record again what identifies a tracked object replaced in
-- place (no-op when forgotten).
function M._update(id)
  if tracked[id] then state.update(id) end
end

--- (internal) Forget one tracked entry (no-op when already forgotten).
function M._forget(id)
  if tracked[id] then
    tracked[id] = nil
    state.forget(id)
  end
end

--- (internal) Forget every tracked entry for which match(entry) is true.
function M._untrack(match)
  for id, e in pairs(tracked) do
    if match(e) then
      tracked[id] = nil
      state.forget(id)
    end
  end
end

--- (internal) Record again what identifies every tracked entry for which
-- match(entry) is true; returns how many there were.
function M._update_matching(match)
  local n = 0
  for id, e in pairs(tracked) do
    if match(e) then
      state.update(id)
      n = n + 1
    end
  end
  return n
end

local pid
local function self_pid()
  if not pid then
    local f = io.open('/proc/self/stat', 'r')
    local s = f and f:read('l') or ''
    if f then f:close() end
    pid = tonumber(s:match('^(%d+)')) or 0
  end
  return pid
end
M._pid = self_pid

local counter = 0

-- True when /run/netns holds `name` or a name `name-...` (a testbed's
-- "-c", "-s", "-r"): left by a process that had this pid before.
local function taken(name, existing)
  for _, e in ipairs(existing) do
    if e == name or e:sub(1, #name + 1) == name .. '-' then return true end
  end
  return false
end

--- A namespace name unique to this process and call: `PREFIX-PID-N`.
-- N skips values whose name, or a name it begins with a "-", is already
-- in /run/netns: a namespace an earlier process with the same pid left
-- behind (pids wrap) does not make the caller fail with EEXIST.
-- @tparam[opt] string prefix default "qoslab" (letters, digits, `-`, `_`, `.`; at most 64)
-- @treturn string e.g. "qoslab-4242-1"
-- @raise when prefix is not such a string
-- @usage local name = netns.unique_name('exp')
function M.unique_name(prefix)
  prefix = prefix == nil and 'qoslab' or prefix
  check.call(2, core.netns_check_prefix, 'qoslab.netns.unique_name', 'prefix', prefix)
  local existing = require('qoslab.fs').list(M._run_dir) or {}
  repeat
    counter = counter + 1
    local name = string.format('%s-%d-%d', prefix, self_pid(), counter)
    if not taken(name, existing) then return name end
  until false
end
M._run_dir = '/run/netns'

--- Create a named network namespace (like `ip netns add NAME`).
-- The new namespace has only `lo`, down.
-- @tparam string name 1..200 bytes, no "/", not "." or ".."
-- @return true, or nil, message, code ("EEXIST", "EPERM")
-- @raise when name is not a valid namespace name
-- @usage assert(netns.add('lab-1'))
function M.add(name)
  -- Made and recorded with no interruption in between: a SIGINT/SIGTERM
  -- raised between the two would leave a namespace no record names.
  return core.signals_defer(function()
    local ok, msg, code = core.netns_add(name)
    if not ok then return nil, msg, code end
    M._track { kind = 'netns', name = name }
    return true
  end)
end

--- Delete a named network namespace (like `ip netns delete NAME`).
-- Links and qdiscs inside it go with it. What this process recorded of it
-- (for `qoslab cleanup`) is forgotten, also when it was gone already
-- (ENOENT: someone else deleted it).
-- @tparam string name
-- @return true, or nil, message, code ("ENOENT", "EPERM")
-- @raise when name is not a valid namespace name
-- @usage netns.delete('lab-1')
function M.delete(name)
  local ok, msg, code = core.netns_delete(name)
  if ok or code == 'ENOENT' then
    M._untrack(function(e) return e.name == name and e.kind == 'netns' or e.netns == name end)
  end
  if not ok then return nil, msg, code end
  return true
end

--- (internal) Whether this process made the namespace `name` (with `add`)
-- and has not deleted it since.
function M._made_here(name)
  for _, e in pairs(tracked) do
    if e.kind == 'netns' and e.name == name then return true end
  end
  return false
end

--- Whether a named namespace exists (a mounted `/run/netns/NAME`).
-- @tparam string name
-- @treturn boolean
-- @raise when name is not a valid namespace name
-- @usage if not netns.exists('lab-1') then netns.add('lab-1') end
M.exists = core.netns_exists

--- Names of all named namespaces (every `ip netns list` entry), sorted.
-- @treturn {string,...}
-- @return or nil, message, code when /run/netns cannot be read ("EACCES" or
--   "EPERM" without root, "ENOMEM"; no /run/netns at all is an empty list)
-- @usage for _, n in ipairs(netns.list()) do print(n) end
M.list = core.netns_list

--- Call `fn(...)` inside a namespace on this thread and return its results.
-- The thread enters the namespace (setns(2)) for the call only; it returns to
-- its own namespace afterwards, also when `fn` raises (the error is re-raised
-- unchanged). Sockets made inside stay in the namespace; processes started
-- inside (`os.execute`, `io.popen`) run there.
-- @tparam string name namespace name
-- @tparam function fn
-- @param ... arguments for fn
-- @return fn's results, or nil, message, code ("ENOENT", "EPERM") when the
--   namespace cannot be entered
-- @raise when name or fn has the wrong type, or what fn raises
-- @usage local out = netns.run('lab-1', function() return io.popen('ip -o addr'):read('a') end)
function M.run(name, fn, ...)
  check.cstring('qoslab.netns.run', 'name', name)
  if name == nil then check.fail('qoslab.netns.run', 'name', 'a string', nil) end
  if type(fn) ~= 'function' then check.fail('qoslab.netns.run', 'fn', 'a function', fn) end
  local token, msg, code = core.netns_enter(name)
  if not token then return nil, msg, code end
  local res = table.pack(pcall(fn, ...))
  assert(core.netns_restore(token))
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

return M
