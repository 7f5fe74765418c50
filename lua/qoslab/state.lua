--- What this process created (namespaces, links, qdiscs), on disk, so that
-- `qoslab cleanup` can remove what a killed run left behind.
--
-- Each process appends JSON lines to `<dir>/<pid>-<start>-<boot>.jsonl` (dir:
-- $QOSLAB_STATE_DIR or /run/qoslab; start: the process's start time, field
-- 22 of /proc/PID/stat; boot: the first 8 hex digits of the kernel's boot
-- id), so a file is live only while that very process runs and a later
-- process with the same pid never takes it over. Lines:
-- `{"op":"add","id":N,"kind":...,"ident":{...}}` when something is created
-- (again, same id, when it was replaced), `{"op":"del","id":N}` when it is
-- removed. The file is deleted when nothing of the process remains.
--
-- `ident` is what identifies the object the process made, taken right after
-- creation: the namespace's nsfs device and inode (`stat /run/netns/NAME`), a
-- link's ifindex and its namespace's inode, a qdisc's kind and handle at its
-- parent on that link. `cleanup()` replays the files of dead processes and
-- removes, newest first, only what still has that identity, through
-- qoslab.core's own netlink calls (no `ip`, `tc` or shell: a recorded name is
-- only ever a name). A namespace, link or qdisc someone else made under a
-- recorded name is left alone and reported as skipped.
-- @module qoslab.state
local cjson = require 'cjson'
local lfs = require 'lfs'
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'

local M = {}

local STATE_MAX_BYTES = 16 * 1024 * 1024

local me -- nil, or {pid =, start =, boot =} once known
local live = {}   -- id -> entry, for this process
local nlive = 0
local next_id = 1
local warned = false

--- Directory of the state files.
-- @treturn string `$QOSLAB_STATE_DIR`, else "/run/qoslab"
function M.dir()
  return os.getenv('QOSLAB_STATE_DIR') or '/run/qoslab'
end

local function core()
  local ok, c = pcall(require, 'qoslab.core')
  return ok and type(c) == 'table' and c or nil
end

local function read_small(path)
  local c = core()
  if c then return (c.read_regular_file(path, 65536, 'proc file')) end
  local f = io.open(path, 'r')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function boot_id()
  local s = read_small('/proc/sys/kernel/random/boot_id') or ''
  return (s:gsub('%-', ''):match('^(%x%x%x%x%x%x%x%x)')) or '00000000'
end

-- Start time (clock ticks after boot) of a process, or nil when none runs.
local function start_time(p)
  local s = read_small('/proc/' .. p .. '/stat')
  if not s then return nil end
  local rest = s:match('%) (.*)$')
  if not rest then return nil end
  local i = 2  -- rest begins with field 3
  for tok in rest:gmatch('%S+') do
    i = i + 1
    if i == 22 then return tok end
  end
  return nil
end

local function self_id()
  if not me then
    -- /proc/self is the lua process itself (no fork in between).
    local s = read_small('/proc/self/stat') or ''
    local p = tonumber(s:match('^(%d+)')) or 0
    me = { pid = p, start = start_time(p) or '0', boot = boot_id() }
  end
  return me
end

local function file_of(id)
  return string.format('%s/%d-%s-%s.jsonl', M.dir(), id.pid, id.start, id.boot)
end

--- (internal) What names this process's state file: "PID-START-BOOT"
-- (see the module's description), for records kept beside it.
function M._tag()
  local id = self_id()
  return string.format('%d-%s-%s', id.pid, id.start, id.boot)
end

--- (internal) This process's state file.
function M._file() return file_of(self_id()) end

local function append(obj)
  local path = file_of(self_id())
  local f = io.open(path, 'a')
  if not f then
    fs.mkdir_p(M.dir())
    f = io.open(path, 'a')
  end
  if not f then
    -- A read-only /run must not stop experiments, but the user must know
    -- that `qoslab cleanup` will not find what this run leaves behind.
    if not warned then
      warned = true
      local _, err = io.open(path, 'a')
      io.stderr:write(string.format('qoslab: warning: cannot record what this run creates in %s (%s); '
        .. 'if it is killed, `qoslab cleanup` will not find its leftovers '
        .. '(set QOSLAB_STATE_DIR to a writable folder)\n',
        M.dir(), tostring(err)))
    end
    return
  end
  f:write(cjson.encode(obj), '\n')
  f:close()
end

local kinds = { netns = true, link = true, qdisc = true }

-- Identity of a namespace: "dev:ino" of its nsfs file; nil when missing.
-- name nil: the namespace of this thread.
local function ns_ident(name)
  local path = name and ('/run/netns/' .. name) or '/proc/thread-self/ns/net'
  local a = lfs.attributes(path)
  if not a and not name then a = lfs.attributes('/proc/self/ns/net') end
  if not a then return nil end
  return string.format('%d:%d', a.dev, a.ino)
end

local function canon_parent(p)
  if p == nil or p == 'root' then return 'root' end
  if p == 'ingress' then return 'ffff:fff1' end
  local maj, min = p:match('^(%x+):(%x+)$')
  return string.format('%x:%x', tonumber(maj, 16), tonumber(min, 16))
end

local function gone_code(code) return code == 'ENOENT' or code == 'ENODEV' end

-- What identifies the object an entry names now: a table, or false when
-- there is no such object, or nil, message when it cannot be read.
local function identify(e)
  local c = core()
  if not c then return nil, 'qoslab.core is not loadable' end
  if e.kind == 'netns' then
    local ns = ns_ident(e.name)
    if not ns then return false end
    return { ns = ns }
  end
  local ns = ns_ident(e.netns)
  if not ns then return false end
  local nsopt = e.netns and { netns = e.netns } or nil
  local info, msg, code = c.link_info(e.ifname, nsopt)
  if not info then
    if gone_code(code) then return false end
    return nil, tostring(msg) .. (code and (' (' .. code .. ')') or '')
  end
  local id = { ns = ns, ifindex = info.ifindex }
  if e.kind == 'link' then return id end
  local qs, m2, c2 = c.qdisc_stats(e.ifname, nsopt)
  if not qs then
    if gone_code(c2) then return false end
    return nil, tostring(m2) .. (c2 and (' (' .. c2 .. ')') or '')
  end
  local want = canon_parent(e.parent)
  for _, q in ipairs(qs) do
    if q.parent == want and q.handle ~= 'none' then
      id.qdisc_kind, id.handle = q.kind, q.handle
      break
    end
  end
  if not id.qdisc_kind then return false end
  if e.parent == 'ingress' then
    -- The ingress of netem's ingress impairment: its ifb link too.
    local ifb = c.ifb_name(e.ifname, e.netns)
    local bi = ifb and c.link_info(ifb, nsopt)
    if not bi then return false end
    id.ifb_ifindex = bi.ifindex
  end
  return id
end

-- Run fn(...) with no SIGINT/SIGTERM interruption raised inside it
-- (core.signals_defer; raised right after it returns): this process's
-- entries and its state file change together (a signal between the two
-- left a state file behind after its last entry was forgotten).
local function unsplit(fn, ...)
  local c = core()
  if c and c.signals_defer then return c.signals_defer(fn, ...) end
  return fn(...)
end

--- Record something this process created.
-- What identifies it (see the module's description) is read now, so call
-- this right after creating it.
-- @tparam table what `{kind = "netns", name = NAME}`, `{kind = "link", ifname = IF,
--   netns = NS|nil}` or `{kind = "qdisc", ifname = IF, netns = NS|nil,
--   parent = "root"|"ingress"|"MAJ:MIN"}`
-- @treturn integer id to pass to `forget` and `update`
-- @usage local id = state.record{kind = 'netns', name = 'qlc-1234-1'}
function M.record(what)
  check.table('qoslab.state.record', 'what', what)
  if not kinds[what.kind] then
    check.fail('qoslab.state.record', 'what.kind', 'one of "netns", "link", "qdisc"', what.kind)
  end
  return unsplit(function()
    local id = next_id
    next_id = next_id + 1
    local e = { op = 'add', id = id, kind = what.kind, name = what.name,
                ifname = what.ifname, netns = what.netns, parent = what.parent }
    e.ident = identify(e) or nil
    live[id] = e
    nlive = nlive + 1
    append(e)
    return id
  end)
end

--- Record again what identifies an object that was replaced in place (a
-- shaper or netem applied anew): cleanup then recognises the new one.
-- @tparam integer id as returned by `record` (an id already forgotten: no-op)
function M.update(id)
  local e = live[id]
  if not e then return end
  unsplit(function()
    e.ident = identify(e) or nil
    append(e)
  end)
end

--- Forget something that was removed. The last one forgotten removes this
-- process's state file.
-- @tparam integer id as returned by `record` (an id already forgotten: no-op)
function M.forget(id)
  if not live[id] then return end
  unsplit(function()
    live[id] = nil
    nlive = nlive - 1
    if nlive == 0 then
      os.remove(file_of(self_id()))
    else
      append { op = 'del', id = id }
    end
  end)
end

-- Why a recorded entry cannot be acted on, or nil when it can. A state file
-- is plain text anyone with write access to the directory could edit: names
-- are checked here as the kernel would take them (a NUL byte would make C see
-- a shorter, different name), before anything is removed.
local function unusable(e)
  if not kinds[e.kind] then return 'kind is not "netns", "link" or "qdisc"' end
  local function bad_string(v, max, what)
    if type(v) ~= 'string' then return what .. ' is not a string' end
    if v == '' then return what .. ' is empty' end
    if v:find('\0', 1, true) then return what .. ' contains a NUL byte' end
    if #v > max then return string.format('%s is longer than %d bytes', what, max) end
    return nil
  end
  if e.netns ~= nil then
    local why = bad_string(e.netns, 200, 'netns')
    if why then return why end
    if e.netns:find('/', 1, true) or e.netns == '.' or e.netns == '..' then return 'netns is not a namespace name' end
  end
  if e.kind == 'netns' then
    local why = bad_string(e.name, 200, 'name')
    if why then return why end
    if e.name:find('/', 1, true) or e.name == '.' or e.name == '..' then return 'name is not a namespace name' end
    return nil
  end
  local why = bad_string(e.ifname, 15, 'ifname')
  if why then return why end
  if e.ifname:find('[/:%s]') then return 'ifname is not an interface name' end
  if e.kind == 'qdisc' and e.parent ~= nil and e.parent ~= 'root' and e.parent ~= 'ingress'
      and not (type(e.parent) == 'string' and e.parent:match('^%x+:%x+$')
               and #e.parent <= 9) then
    return 'parent is not "root", "ingress" or "MAJ:MIN"'
  end
  return nil
end

local IDENT_KEYS = { 'ns', 'ifindex', 'qdisc_kind', 'handle', 'ifb_ifindex' }
local IDENT_WORDS = { ns = 'namespace inode', ifindex = 'ifindex', qdisc_kind = 'kind',
                      handle = 'handle', ifb_ifindex = 'ifb ifindex' }

-- Why the object an entry names now is not the one recorded, or nil.
local function mismatch(recorded, now)
  if type(recorded) ~= 'table' then return 'no identity recorded' end
  local n = 0
  for _, k in ipairs(IDENT_KEYS) do
    local r, v = recorded[k], now[k]
    if r ~= nil then n = n + 1 end
    if (r ~= nil or v ~= nil) and r ~= v then
      local function show(x) return x == nil and 'none' or tostring(math.tointeger(x) or x) end
      return string.format('%s is %s, qoslab recorded %s', IDENT_WORDS[k], show(v), show(r))
    end
  end
  if n == 0 then return 'no identity recorded' end
  return nil
end

-- Removal through qoslab.core's netlink code. Returns true (removed), false
-- (already gone), or nil, message, gone (gone: true when the failure said
-- the object is not there).
local function remove(e)
  local c = core()
  local ok, msg, code
  local call_ok, err = pcall(function()
    local nsopt = e.netns and { netns = e.netns } or nil
    if e.kind == 'netns' then
      ok, msg, code = c.netns_delete(e.name)
    elseif e.kind == 'link' then
      ok, msg, code = c.link_delete(e.ifname, nsopt)
    elseif e.parent == 'ingress' then
      -- The ingress redirect of netem's ingress impairment and its ifb.
      local ifb
      ifb, msg, code = c.ifb_name(e.ifname, e.netns)
      if ifb then ok, msg, code = c.ifb_detach(e.ifname, ifb, e.netns) end
    elseif e.parent == nil or e.parent == 'root' then
      -- A root netem, or else a shaper (tbf/htb) at the root: what netem and
      -- shape put there (its identity was checked before).
      ok, msg, code = c.netem_clear(e.ifname, e.netns, 'root')
      if ok == false then
        local shaper
        shaper, msg, code = c.shape_get(e.ifname, nsopt)
        if shaper then ok, msg, code = c.shape_clear(e.ifname, nsopt)
        elseif shaper == nil and msg == nil then ok = false end
      end
    else
      ok, msg, code = c.netem_clear(e.ifname, e.netns, e.parent)
    end
  end)
  if not call_ok then return nil, tostring(err) end
  if ok then return true end
  if ok == false or gone_code(code) then return false end
  return nil, tostring(msg) .. (code and (' (' .. code .. ')') or '')
end

-- Entries still recorded in one state file (in creation order), the number
-- of lines that did not parse, or nil, message when it cannot be read.
local function replay(path)
  local c = core()
  local text, err
  if c then
    text, err = c.read_regular_file(path, STATE_MAX_BYTES, 'state file')
  else
    err = 'qoslab.core is not loadable'
  end
  if not text then return nil, err end
  local byid, order, bad = {}, {}, 0
  for line in text:gmatch('[^\n]+') do
    local ok, obj = pcall(cjson.decode, line)
    if ok and type(obj) == 'table' and math.type(obj.id) ~= nil then
      if obj.op == 'add' then
        if not byid[obj.id] then order[#order + 1] = obj.id end
        byid[obj.id] = obj
      elseif obj.op == 'del' then byid[obj.id] = nil
      else bad = bad + 1 end
    else
      bad = bad + 1
    end
  end
  local out = {}
  for _, id in ipairs(order) do if byid[id] then out[#out + 1] = byid[id]; byid[id] = nil end end
  return out, bad
end

-- Rewrite a state file with only the given entries (through a new file and
-- rename, so a reader never sees half of it).
local function rewrite(path, entries)
  local tmp = path .. '.tmp'
  local f, err = io.open(tmp, 'w')
  if not f then return nil, err end
  for _, e in ipairs(entries) do f:write(cjson.encode(e), '\n') end
  f:close()
  return os.rename(tmp, path)
end

-- Whether the process that wrote a state file named `name` runs now, and
-- whether the name is a state file's at all.
local function file_owner(name)
  local p, start, boot = name:match('^(%d+)%-(%d+)%-(%x+)%.jsonl$')
  if p then
    local mine = self_id()
    if tonumber(p) == mine.pid and start == mine.start and boot == mine.boot then return 'self' end
    if boot ~= mine.boot then return 'dead', tonumber(p) end
    return start_time(p) == start and 'live' or 'dead', tonumber(p)
  end
  p = name:match('^(%d+)%.jsonl$')  -- older qoslab: named by pid alone
  if p then return start_time(p) and 'live?' or 'dead', tonumber(p) end
  return nil
end

--- (internal) Whether the process that a record named `TAG.jsonl` (TAG
-- as `_tag` makes it) belongs to runs: "self", "live", "dead", or nil for
-- a name that is no such record's.
function M._owner(name)
  return (file_owner(name))
end

-- Act on one recorded entry: remove its object when it is still the one
-- recorded. Returns the report line and whether the entry must be kept for
-- another try (its object could not be read or removed).
local function settle(e)
  local r = { kind = e.kind, name = e.name, ifname = e.ifname, netns = e.netns,
              removed = false,
              qdisc_kind = type(e.ident) == 'table' and type(e.ident.qdisc_kind) == 'string'
                and e.ident.qdisc_kind or nil }
  r.skipped = unusable(e)
  if not r.skipped and type(e.ident) ~= 'table' then
    r.skipped = 'not the one qoslab made: no identity recorded'
  end
  if r.skipped then return r, false end
  local now, err = identify(e)
  if now == nil then
    r.error = err
    return r, true
  end
  if not now then return r, false end
  local why = mismatch(e.ident, now)
  if why then
    r.skipped = 'not the one qoslab made: ' .. why
    return r, false
  end
  local ok, rerr = remove(e)
  r.removed = ok == true
  r.error = rerr
  return r, ok == nil
end

-- The owner's pid in a namespace name qoslab makes itself: netns.unique_name's
-- default "qoslab-PID-N", a testbed's "qoslab-PID-N-c" / "-s" / "-r", and
-- qoslab.vm's scratch "qoslab-probe-PID-N"; nil for any other name.
local function owner_pid(name)
  local p = name:match('^qoslab%-(%d+)%-%d+$') or name:match('^qoslab%-(%d+)%-%d+%-[csr]$')
    or name:match('^qoslab%-probe%-(%d+)%-%d+$')
  return p and #p <= 9 and tonumber(p) or nil
end

--- (internal) The pid a namespace name of qoslab's own makes names as its
-- creator, or nil (see `cleanup`).
M._owner_pid = owner_pid

-- Namespaces named as qoslab names them whose creator no longer runs and
-- that no state file accounts for: a process killed (SIGKILL) between
-- creating one and recording it. The name is the only record, so only these
-- exact patterns are taken, and never while a process with that pid runs.
local function unrecorded_namespaces(report, accounted)
  local c = core()
  local names = c and c.netns_list() or {}
  local mine = self_id().pid
  for _, name in ipairs(names) do
    local p = owner_pid(name)
    if p and p ~= mine and not accounted[name] and not start_time(p) then
      local r = { kind = 'netns', name = name, removed = false, unrecorded = true }
      local ok, msg, code = c.netns_delete(name)
      if ok then r.removed = true
      elseif not gone_code(code) then r.error = tostring(msg) .. (code and (' (' .. code .. ')') or '') end
      report[#report + 1] = r
    end
  end
end

--- Remove what this process recorded and has not removed yet, newest first,
-- each only when it is still the object recorded (as `cleanup` does for a
-- dead process), and forget it. For a command ended by a signal: whatever
-- moment the signal came at, what the run made goes with it.
-- @treturn table list of report lines, as `cleanup` returns them
-- @usage if interrupted then state.remove_own() end
function M.remove_own()
  local ids = {}
  for id in pairs(live) do ids[#ids + 1] = id end
  table.sort(ids, function(a, b) return a > b end)
  local report = {}
  for _, id in ipairs(ids) do
    local e = live[id]
    if e then
      local r, again = settle(e)
      report[#report + 1] = r
      if not again then M.forget(id) end
    end
  end
  -- (nothing live: no file, whatever moment an earlier signal came at)
  if nlive == 0 then os.remove(file_of(self_id())) end
  return report
end

--- Remove what dead qoslab processes left behind (or every process's, with all).
-- Entries whose names the kernel could not take (a NUL byte, "/", too long,
-- not a string), and entries whose object is not the one qoslab made (its
-- recorded identity does not match, or none was recorded) are not acted on:
-- they are reported with `skipped`. A state file is deleted once everything
-- in it is removed or gone; when a removal failed otherwise, the file is
-- kept with what remains, for a second try.
-- @tparam[opt] table opts `{all = false}`; `all = true` also takes live processes' files
-- @treturn table list of `{kind=, name=|ifname=, netns=, removed = bool,
--   skipped = why|nil, error = message|nil, qdisc_kind = (a qdisc's, as
--   recorded: "tbf", "netem", ...)|nil}` (`removed = false` without
--   `skipped` or `error`: it was gone already); entries with `kind = "file"`
--   and `name` = the state file report a file that could not be read, lines
--   that did not parse (`bad_lines`), or a file of a process that runs
--   (`skipped`); entries with `unrecorded = true` are namespaces no state
--   file names but whose name is one qoslab makes ("qoslab-PID-N",
--   "qoslab-PID-N-c"/"-s"/"-r", "qoslab-probe-PID-N") with a PID that no
--   longer runs (a SIGKILL between creating and recording), removed by name
-- @usage for _, r in ipairs(state.cleanup()) do print(r.kind, r.name or r.ifname) end
function M.cleanup(opts)
  opts = opts or {}
  check.keys('qoslab.state.cleanup', 'opts', opts, { all = true })
  local report = {}
  local accounted = {} -- namespace names the state files spoke for
  local dir = M.dir()
  for _, name in ipairs(fs.list(dir) or {}) do
    local owner, fpid = file_owner(name)
    local path = dir .. '/' .. name
    if owner == 'live?' and not opts.all then
      report[#report + 1] = { kind = 'file', name = path, removed = false,
        skipped = string.format('pid %d runs; this file predates start-time marks, so it may be '
          .. 'that process\'s or a reused pid\'s: pass --all if no qoslab runs', fpid) }
    elseif owner == 'live' and not opts.all then
      report[#report + 1] = { kind = 'file', name = path, removed = false,
        skipped = string.format('its process (pid %d) runs: pass --all to take it too', fpid) }
    elseif owner == 'dead' or (opts.all and (owner == 'live' or owner == 'live?')) then
      local entries, bad = replay(path)
      if not entries then
        report[#report + 1] = { kind = 'file', name = path, removed = false,
          error = 'cannot read: ' .. tostring(bad) }
      else
        if bad > 0 then
          report[#report + 1] = { kind = 'file', name = path, removed = false, bad_lines = bad,
            error = string.format('%d line%s did not parse (cut by a kill, or not a state line): ignored',
              bad, bad == 1 and '' or 's') }
        end
        local keep = {}
        -- Newest first: qdiscs before links before namespaces.
        for i = #entries, 1, -1 do
          local e = entries[i]
          local r, again = settle(e)
          if again then table.insert(keep, 1, e) end
          if e.kind == 'netns' and type(e.name) == 'string' then accounted[e.name] = true end
          report[#report + 1] = r
        end
        if #keep > 0 then
          local ok, err = rewrite(path, keep)
          if not ok then
            report[#report + 1] = { kind = 'file', name = path, removed = false,
              error = 'cannot keep what remains: ' .. tostring(err) }
          end
        else
          os.remove(path)
        end
      end
    end
    if owner == 'self' or ((owner == 'live' or owner == 'live?') and not opts.all) then
      -- a running process's: the namespaces it names are its own to remove
      for _, e in ipairs(replay(path) or {}) do
        if e.kind == 'netns' and type(e.name) == 'string' then accounted[e.name] = true end
      end
    end
  end
  unrecorded_namespaces(report, accounted)
  return report
end

return M
