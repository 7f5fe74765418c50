--- (internal) qoslab.host's ledger: what handles changed on other hosts,
-- as JSON lines beside qoslab.state's files, so that `qoslab cleanup
-- --hosts` (`qoslab.host.cleanup_dead`) undoes it after a kill. qoslab.host
-- documents the behaviour; this module is not public.
-- @module qoslab.host.ledger
local cjson_mod = require 'cjson'
local lfs = require 'lfs'
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'
local state = require 'qoslab.state'
local ssh = require 'qoslab.host.ssh'

local cjson = cjson_mod.new()
cjson.encode_sparse_array(false)
local decode, exec, ssh_base = ssh.decode, ssh.exec, ssh.ssh_base

local M = {}

-- ------------------------------------------------------------ ledger ----

local function ledger_dir() return state.dir() .. '/hosts' end

local ledger_next = 1

local function ledger_path() return ledger_dir() .. '/' .. state._tag() .. '.jsonl' end

local ledger_warned = false

local function ledger_write(obj)
  fs.mkdir_p(ledger_dir())
  local f, err = io.open(ledger_path(), 'a')
  if not f then
    -- As qoslab.state: the run goes on, but the user must know.
    if not ledger_warned then
      ledger_warned = true
      io.stderr:write(string.format('qoslab: warning: cannot record what this run changes on other hosts '
        .. 'in %s (%s); if it is killed, `qoslab cleanup --hosts` will not find it (set QOSLAB_STATE_DIR '
        .. 'to a writable folder)\n', ledger_dir(), tostring(err)))
    end
    return
  end
  f:write(cjson.encode(obj), '\n')
  f:close()
end

local function conn_spec(self)
  return { ssh = self.ssh, port = self.port, identity = self.identity, options = self.options,
           qoslab = self.qoslab, connect_timeout_s = self.connect_timeout_s, name = self.name,
           control_path = self.control_path }
end

-- Remember a change (kind "netem", "shape" or "server") of this handle.
local function remember(self, change)
  for _, c in ipairs(self.changes) do
    if c.kind == change.kind and c.ifname == change.ifname and c.netns == change.netns
        and c.ingress == change.ingress and c.parent == change.parent and change.kind ~= 'server' then
      return c
    end
  end
  change.id = ledger_next
  ledger_next = ledger_next + 1
  self.changes[#self.changes + 1] = change
  if self.ssh then
    local e = { op = 'add', id = change.id, host = conn_spec(self) }
    for k, v in pairs(change) do if k ~= 'id' and k ~= 'handle' then e[k] = v end end
    ledger_write(e)
  end
  return change
end

local function forget(self, change)
  for i, c in ipairs(self.changes) do
    if c == change then
      table.remove(self.changes, i)
      if self.ssh then ledger_write { op = 'del', id = c.id } end
      break
    end
  end
  local live = false
  for h in pairs(M._handles) do if h.ssh and #h.changes > 0 then live = true end end
  if not live then
    os.remove(ledger_path())
    fs.rmdir_if_empty(ledger_dir())
  end
end

local function find_change(self, kind, ifname, netns, ingress, parent)
  for _, c in ipairs(self.changes) do
    if c.kind == kind and c.ifname == ifname and c.netns == netns and c.ingress == ingress
        and c.parent == parent then
      return c
    end
  end
end

-- Handles alive in this process (weak), for the ledger's removal.
M._handles = setmetatable({}, { __mode = 'k' })

-- qoslab.host.cleanup_dead (documented there).
function M.cleanup_dead(opts)
  local ctx = 'qoslab.host.cleanup_dead'
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { hosts = true }, 2)
  local only
  if opts.hosts ~= nil then
    check.table(ctx, 'opts.hosts', opts.hosts)
    only = {}
    for i, h in ipairs(opts.hosts) do check.string(ctx, 'opts.hosts[' .. i .. ']', h); only[h] = true end
  end
  local report = {}
  for _, name in ipairs(fs.list(ledger_dir()) or {}) do
    local path = ledger_dir() .. '/' .. name
    if state._owner(name) == 'dead' then
      local f = io.open(path)
      local text = f and f:read('a') or ''
      if f then f:close() end
      local byid, order = {}, {}
      for line in text:gmatch('[^\n]+') do
        local e = decode(line)
        if type(e) == 'table' and math.type(e.id) == 'integer' then
          if e.op == 'add' and not byid[e.id] then order[#order + 1] = e.id; byid[e.id] = e
          elseif e.op == 'del' then byid[e.id] = nil end
        end
      end
      local keep, masters, handles = {}, {}, {}
      for i = #order, 1, -1 do
        local e = byid[order[i]]
        if e and type(e.host) == 'table' then
          local hs = e.host
          -- "user@addr" matches that login; "addr" alone every user's
          if only and not (only[hs.ssh] or only[tostring(hs.ssh):match('@(.*)$') or hs.ssh]) then
            table.insert(keep, 1, e)
          else
            local r = { host = hs.ssh, kind = e.kind, ifname = e.ifname, netns = e.netns, pid = e.pid,
                        removed = false }
            local key = cjson.encode { hs.ssh, hs.port, hs.identity, hs.options, hs.qoslab }
            local ok, h = true, handles[key]
            if not h then
              ok, h = pcall(require('qoslab.host').new, { ssh = hs.ssh, port = hs.port, identity = hs.identity,
                options = hs.options, qoslab = hs.qoslab, connect_timeout_s = hs.connect_timeout_s,
                name = hs.name })
              if ok then handles[key] = h end
            end
            if not ok then
              r.skipped = 'not a usable connection spec: ' .. tostring(h)
            else
              if type(hs.control_path) == 'string' and hs.control_path:match('^/tmp/qoslab%-ssh%-[%w]+/%%C$') then
                masters[hs.control_path] = h
              end
              local err, code
              if e.kind == 'server' then
                local script = 'case "$(tr "\\000" " " </proc/"$1"/cmdline 2>/dev/null)" in '
                  .. '*qoslab*server*--exit-on-eof*) kill -TERM "$1" && echo stopped;; esac'
                local res
                res, err, code = exec(h, 'stop server', { 'sh', '-c', script, 'sh', tostring(e.pid) }, nil, 30)
                r.removed = res ~= nil and res.stdout:find('stopped', 1, true) ~= nil
              else
                local o = { netns = e.netns }
                local now
                if e.kind == 'shape' then now, err, code = h:shape_get(e.ifname, o)
                else
                  o.ingress, o.parent = e.ingress, e.parent
                  now, err, code = h:netem_get(e.ifname, o)
                end
                if now then
                  local kind = type(now.spec) == 'table' and now.spec.kind or now.kind
                  if e.kind == 'shape' and e.qdisc_kind and kind and kind ~= e.qdisc_kind then
                    r.skipped = string.format('not the one qoslab made: the root qdisc is %s, qoslab applied %s',
                      tostring(kind), e.qdisc_kind)
                  else
                    local done
                    if e.kind == 'shape' then done, err, code = h:shape_clear(e.ifname, { netns = e.netns })
                    else done, err, code = h:netem_clear(e.ifname, o) end
                    r.removed = done ~= nil
                  end
                elseif code == 'ENOENT' or code == 'ENODEV' then
                  err = nil   -- gone already
                  r.skipped = 'not there any more'
                elseif err == nil then
                  r.skipped = 'not there any more'
                end
              end
              if err then
                r.error = tostring(err) .. (code and (' (' .. tostring(code) .. ')') or '')
                if code ~= 'ENOENT' and code ~= 'ENODEV' then table.insert(keep, 1, e) end
              end
              h.changes = {}
            end
            report[#report + 1] = r
          end
        end
      end
      -- The dead process's master, if it lingers (ControlPersist): its
      -- socket is named by %C (a hash of the connection), in its directory.
      for cp, h in pairs(masters) do
        local d = cp:match('^(.*)/[^/]*$')
        for _, n in ipairs(fs.list(d) or {}) do
          local sock = d .. '/' .. n
          if lfs.attributes(sock, 'mode') == 'socket' then
            local argv = ssh_base(h)
            for _, w in ipairs { '-S', sock, '-O', 'exit', '--', h.ssh } do argv[#argv + 1] = w end
            local p = fs.process(argv)
            if p then p:communicate(nil, 5); p:close() end
          end
          os.remove(sock)
        end
        os.remove(d)
      end
      for _, h in pairs(handles) do h:close() end
      if #keep > 0 then
        local out = {}
        for _, e in ipairs(keep) do out[#out + 1] = cjson.encode(e) end
        fs.replace_file(path, table.concat(out, '\n') .. '\n')
      else
        os.remove(path)
      end
    end
  end
  fs.rmdir_if_empty(ledger_dir())
  return report
end

-- The pieces qoslab.host uses.
M.ledger_dir = ledger_dir
M.ledger_path = ledger_path
M.ledger_write = ledger_write
M.conn_spec = conn_spec
M.remember = remember
M.forget = forget
M.find_change = find_change

return M
