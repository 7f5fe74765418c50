--- What this process created (namespaces, links, qdiscs), on disk, so that
-- `qoslab cleanup` can remove what a killed run left behind.
--
-- Each process appends JSON lines to `<dir>/<pid>.jsonl` (dir: $QOSLAB_STATE_DIR
-- or /run/qoslab): `{"op":"add","id":N,"kind":...}` when something is created,
-- `{"op":"del","id":N}` when it is removed. The file is deleted when nothing of
-- the process remains. `cleanup()` replays the files of dead processes and
-- removes what is still recorded, newest first.
-- @module qoslab.state
local cjson = require 'cjson'
local check = require 'qoslab.check'

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

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function append(obj)
  local f = io.open(file_of(self_pid()), 'a')
  if not f then
    -- io.popen rather than os.execute: system(3) ignores SIGINT while it
    -- waits, so a Ctrl-C landing then would be lost.
    local p = io.popen('mkdir -p ' .. sh_quote(M.dir()) .. ' 2>/dev/null')
    if p then p:close() end
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

-- Removal through the tools every Linux host has, so cleanup works even when
-- the module that created the object is broken.
local function remove(e)
  local nsx = e.netns and ('ip -n ' .. sh_quote(e.netns) .. ' ') or 'ip '
  if e.kind == 'netns' then
    return os.execute('ip netns del ' .. sh_quote(e.name) .. ' 2>/dev/null')
  elseif e.kind == 'link' then
    return os.execute(nsx .. 'link del ' .. sh_quote(e.ifname) .. ' 2>/dev/null')
  elseif e.kind == 'qdisc' then
    local tc = e.netns and ('tc -n ' .. sh_quote(e.netns) .. ' ') or 'tc '
    local where = (e.parent == nil or e.parent == 'root') and 'root'
      or (e.parent == 'ingress' and 'ingress') or ('parent ' .. sh_quote(e.parent))
    return os.execute(tc .. 'qdisc del dev ' .. sh_quote(e.ifname) .. ' ' .. where .. ' 2>/dev/null')
  end
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
-- @tparam[opt] table opts `{all = false}`; `all = true` also takes live processes' files
-- @treturn table list of `{kind=, name=|ifname=, netns=, removed = bool}`
-- @usage for _, r in ipairs(state.cleanup()) do print(r.kind, r.name or r.ifname) end
function M.cleanup(opts)
  opts = opts or {}
  check.keys('qoslab.state.cleanup', 'opts', opts, { all = true })
  local report = {}
  local p = io.popen('ls -1 ' .. sh_quote(M.dir()) .. ' 2>/dev/null')
  local files = {}
  if p then for name in p:lines() do files[#files + 1] = name end p:close() end
  for _, name in ipairs(files) do
    local fpid = tonumber(name:match('^(%d+)%.jsonl$'))
    if fpid and fpid ~= self_pid() and (opts.all or not alive(fpid)) then
      local entries = replay(M.dir() .. '/' .. name)
      -- Newest first: qdiscs before links before namespaces.
      for i = #entries, 1, -1 do
        local e = entries[i]
        local ok = remove(e)
        report[#report + 1] = { kind = e.kind, name = e.name, ifname = e.ifname,
                                netns = e.netns, removed = ok and true or false }
      end
      os.remove(M.dir() .. '/' .. name)
    end
  end
  return report
end

return M
