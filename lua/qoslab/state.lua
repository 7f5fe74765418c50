--- What this process created (namespaces, links, qdiscs), on disk, so that
-- `qoslab cleanup` can remove what a killed run left behind.
--
-- Each process appends JSON lines to `<dir>/<pid>.jsonl` (dir: $QOSLAB_STATE_DIR
-- or /run/qoslab): `{"op":"add","id":N,"kind":...}` when something is created,
-- `{"op":"del","id":N}` when it is removed. The file is deleted when nothing of
-- the process remains. `cleanup()` replays the files of dead processes and
-- removes what is still recorded, newest first, through qoslab.core's own
-- netlink calls (no `ip`, `tc` or shell: a recorded name is only ever a name).
-- @module qoslab.state
local cjson = require 'cjson'
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'

local M = {}

local pid ---@type integer|nil
local live = {}   -- id -> entry, for this process
local nlive = 0
local next_id = 1

--- Directory of the state files.
function M.dir()
  return os.getenv('QOSLAB_STATE_DIR') or '/run/qoslab'
end

local function self_pid()
  if not pid then
    local f = io.open('/proc/self/stat', 'r')
    -- /proc/self is the lua process itself (no fork in between).
    local s = f and f:read('l') or ''
    if f then f:close() end
    pid = tonumber(s:match('^(%d+)')) or 0
  end
  return pid
end

local function file_of(p) return string.format('%s/%d.jsonl', M.dir(), p) end

local function append(obj)
  local f = io.open(file_of(self_pid()), 'a')
  if not f then
    fs.mkdir_p(M.dir())
    f = io.open(file_of(self_pid()), 'a')
  end
  if not f then return end  -- best effort: a read-only /run must not stop experiments
  f:write(cjson.encode(obj), '\n')
  f:close()
end

local kinds = { netns = true, link = true, qdisc = true }

--- Record something this process created.
-- @tparam table what `{kind = "netns", name = NAME}`, `{kind = "link", ifname = IF,
--   netns = NS|nil}` or `{kind = "qdisc", ifname = IF, netns = NS|nil,
--   parent = "root"|"ingress"|"MAJ:MIN"}`
-- @treturn integer id to pass to `forget`
-- @usage local id = state.record{kind = 'netns', name = 'qlc-1234-1'}
function M.record(what)
  check.table('qoslab.state.record', 'what', what)
  if not kinds[what.kind] then
    check.fail('qoslab.state.record', 'what.kind', 'one of "netns", "link", "qdisc"', what.kind)
  end
  local id = next_id
  next_id = next_id + 1
  local e = { op = 'add', id = id, kind = what.kind, name = what.name,
              ifname = what.ifname, netns = what.netns, parent = what.parent }
  live[id] = e
  nlive = nlive + 1
  append(e)
  return id
end

--- Forget something that was removed.
-- @tparam integer id as returned by `record`
function M.forget(id)
  if not live[id] then return end
  live[id] = nil
  nlive = nlive - 1
  if nlive == 0 then
    os.remove(file_of(self_pid()))
  else
    append { op = 'del', id = id }
  end
end

local function alive(p)
  local f = io.open('/proc/' .. p .. '/stat', 'r')
  if f then f:close() return true end
  return false
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
      and not (type(e.parent) == 'string' and e.parent:match('^%x+:%x+$')) then
    return 'parent is not "root", "ingress" or "MAJ:MIN"'
  end
  return nil
end

-- Removal through qoslab.core's netlink code. Returns true (removed), false
-- (already gone), or nil, message.
local function remove(e)
  local core = require 'qoslab.core'
  local ok, msg, code
  local call_ok, err = pcall(function()
    local nsopt = e.netns and { netns = e.netns } or nil
    if e.kind == 'netns' then
      ok, msg, code = core.netns_delete(e.name)
    elseif e.kind == 'link' then
      ok, msg, code = core.link_delete(e.ifname, nsopt)
    elseif e.parent == 'ingress' then
      -- The ingress redirect of netem's ingress impairment: its ifb link is
      -- a record of its own (removed after this one, or found gone).
      local ifb
      ifb, msg, code = core.ifb_name(e.ifname, e.netns)
      if ifb then ok, msg, code = core.ifb_detach(e.ifname, ifb, e.netns) end
    elseif e.parent == nil or e.parent == 'root' then
      -- A root netem, or else a shaper (tbf/htb) at the root: what netem and
      -- shape put there. Another kind of root qdisc is not touched.
      ok, msg, code = core.netem_clear(e.ifname, e.netns, 'root')
      if ok == false then
        local shaper
        shaper, msg, code = core.shape_get(e.ifname, nsopt)
        if shaper then ok, msg, code = core.shape_clear(e.ifname, nsopt)
        elseif shaper == nil and msg == nil then ok = false end
      end
    else
      ok, msg, code = core.netem_clear(e.ifname, e.netns, e.parent)
    end
  end)
  if not call_ok then return nil, tostring(err) end
  if ok then return true end
  if ok == false or code == 'ENOENT' or code == 'ENODEV' then return false end
  return nil, tostring(msg) .. (code and (' (' .. code .. ')') or '')
end

--- Entries still recorded in one state file (in creation order).
local function replay(path)
  local f = io.open(path, 'r')
  if not f then return {} end
  local byid, order = {}, {}
  for line in f:lines() do
    local ok, obj = pcall(cjson.decode, line)
    if ok and type(obj) == 'table' then
      if obj.op == 'add' then byid[obj.id] = obj; order[#order + 1] = obj.id
      elseif obj.op == 'del' then byid[obj.id] = nil end
    end
  end
  f:close()
  local out = {}
  for _, id in ipairs(order) do if byid[id] then out[#out + 1] = byid[id] end end
  return out
end

--- Remove what dead qoslab processes left behind (or every process's, with all).
-- Entries whose names the kernel could not take (a NUL byte, "/", too long,
-- not a string) are not acted on: they are reported with `skipped`.
-- @tparam[opt] table opts `{all = false}`; `all = true` also takes live processes' files
-- @treturn table list of `{kind=, name=|ifname=, netns=, removed = bool,
--   skipped = why|nil, error = message|nil}` (`removed = false` without
--   `skipped` or `error`: it was gone already)
-- @usage for _, r in ipairs(state.cleanup()) do print(r.kind, r.name or r.ifname) end
function M.cleanup(opts)
  opts = opts or {}
  check.keys('qoslab.state.cleanup', 'opts', opts, { all = true })
  local report = {}
  for _, name in ipairs(fs.list(M.dir()) or {}) do
    local fpid = tonumber(name:match('^(%d+)%.jsonl$'))
    if fpid and fpid ~= self_pid() and (opts.all or not alive(fpid)) then
      local entries = replay(M.dir() .. '/' .. name)
      -- Newest first: qdiscs before links before namespaces.
      for i = #entries, 1, -1 do
        local e = entries[i]
        local r = { kind = e.kind, name = e.name, ifname = e.ifname, netns = e.netns,
                    removed = false }
        r.skipped = unusable(e)
        if not r.skipped then
          local ok, err = remove(e)
          r.removed = ok == true
          r.error = err
        end
        report[#report + 1] = r
      end
      os.remove(M.dir() .. '/' .. name)
    end
  end
  return report
end

return M
