--- What a run was measured on: qoslab version, kernel, host, CPU, the
-- qdiscs and offloads of the path's interfaces and the sysctls that decide
-- TCP's behaviour, read from the running system.
--
-- `collect` is a plain function of a namespace and its interfaces (nothing
-- is cached, nothing global is consulted), so the same record can be made
-- for any place a path runs through: the caller's namespace, a testbed's
-- client, router and server namespaces. Qdiscs come over rtnetlink
-- (`qoslab.shape.stats`, `qoslab.shape.get`, `qoslab.netem.get`), offloads
-- from the ethtool ioctl (`qoslab.link.offloads`), sysctls from `/proc/sys`
-- read inside the namespace (`qoslab.netns.run`). A part that cannot be read
-- is not fatal: the record then holds `error = "message (CODE)"` in its
-- place, so a report still shows everything else.
--
-- `qoslab run` and `qoslab demo` write `DIR/meta.json` once per results
-- folder (`write_run`): the caller's namespace and, for every testbed open
-- when the first point is recorded, each of its namespaces with their
-- interfaces.
-- @module qoslab.meta
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'

local M = {}

--- The sysctls recorded, in this order (`net.` names as sysctl(8) spells them).
-- Ones a namespace does not have (e.g. `net.core.default_qdisc` outside the
-- initial namespace) are left out of its record.
-- @table SYSCTLS
M.SYSCTLS = {
  'net.ipv4.tcp_congestion_control', 'net.ipv4.tcp_available_congestion_control',
  'net.ipv4.tcp_allowed_congestion_control',
  'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem', 'net.ipv4.tcp_mem',
  'net.core.rmem_default', 'net.core.rmem_max', 'net.core.wmem_default', 'net.core.wmem_max',
  'net.core.default_qdisc', 'net.core.netdev_max_backlog',
  'net.ipv4.tcp_ecn', 'net.ipv4.tcp_sack', 'net.ipv4.tcp_timestamps',
  'net.ipv4.tcp_window_scaling', 'net.ipv4.tcp_no_metrics_save',
  'net.ipv4.tcp_slow_start_after_idle', 'net.ipv4.tcp_notsent_lowat',
  'net.ipv4.tcp_mtu_probing', 'net.ipv4.tcp_adv_win_scale',
}

local function read_small(path)
  local f = io.open(path, 'r')
  if not f then return nil end
  local s = f:read(65536)
  f:close()
  return s
end

local function trim(s)
  return s and (s:gsub('^%s+', ''):gsub('%s+$', '')) or nil
end

local function sysctl_path(name)
  return '/proc/sys/' .. name:gsub('%.', '/')
end

-- Sysctls of the calling thread's namespace: name -> value (whitespace runs
-- become one space: "4096\t131072\t6291456" -> "4096 131072 6291456").
local function read_sysctls()
  local out = {}
  for _, name in ipairs(M.SYSCTLS) do
    local v = read_small(sysctl_path(name))
    if v then out[name] = trim(v):gsub('%s+', ' ') end
  end
  return out
end

local function qoslab_version()
  local ok, core = pcall(require, 'qoslab.core')
  return ok and type(core) == 'table' and core._VERSION or 'unknown'
end

local function cpu()
  local info = read_small('/proc/cpuinfo') or ''
  -- /proc/cpuinfo is longer than 64 KiB on large machines: the model is in
  -- the first block, the count comes from the online mask.
  local model = info:match('\nmodel name%s*:%s*([^\n]+)') or info:match('^model name%s*:%s*([^\n]+)')
    or info:match('\nHardware%s*:%s*([^\n]+)') or info:match('\ncpu model%s*:%s*([^\n]+)')
    or info:match('^Processor%s*:%s*([^\n]+)') or info:match('\nuarch%s*:%s*([^\n]+)')
  local count = 0
  local online = trim(read_small('/sys/devices/system/cpu/online'))
  if online and online ~= '' then
    for part in online:gmatch('[^,]+') do
      local a, b = part:match('^(%d+)%-(%d+)$')
      if a then count = count + tonumber(b) - tonumber(a) + 1
      elseif part:match('^%d+$') then count = count + 1 end
    end
  else
    for _ in info:gmatch('processor%s*:') do count = count + 1 end
  end
  return trim(model) or 'unknown', count > 0 and count or nil
end

local function fail_text(msg, code)
  return tostring(msg) .. (code and (' (' .. tostring(code) .. ')') or '')
end

-- One interface: link, offloads and qdiscs, each part or its error.
local function interface(ifname, ns)
  local o = { netns = ns }
  local link, shape = require 'qoslab.link', require 'qoslab.shape'
  local rec = { ifname = ifname }
  local info, msg, code = link.info(ifname, o)
  if not info then
    rec.error = fail_text(msg, code)
    return rec
  end
  rec.kind, rec.mtu_bytes, rec.operstate, rec.speed_mbps = info.kind, info.mtu_bytes,
    info.operstate, info.speed_mbps
  local off
  off, msg, code = link.offloads(ifname, nil, o)
  if off then rec.offloads = off else rec.offloads = { error = fail_text(msg, code) } end
  local qs
  qs, msg, code = shape.stats(ifname, o)
  if not qs then
    rec.qdiscs = { error = fail_text(msg, code) }
    return rec
  end
  rec.qdiscs = {}
  for i, q in ipairs(qs) do
    local e = { kind = q.kind, handle = q.handle, parent = q.parent }
    if q.parent == 'root' and (q.kind == 'tbf' or q.kind == 'htb') then
      local s = shape.get(ifname, o)
      if s then e.spec = s end
    elseif q.kind == 'netem' then
      local netem = require 'qoslab.netem'
      local ok, s = pcall(netem.get, ifname, { netns = ns, parent = q.parent })
      if ok and s then
        e.spec = s
        local fok, text = pcall(netem.format, s)
        if fok then e.text = text end
      end
    end
    rec.qdiscs[i] = e
  end
  return rec
end

local function collect_here(ns, ifnames)
  local out = { sysctls = read_sysctls(), interfaces = {} }
  for i, ifname in ipairs(ifnames) do out.interfaces[i] = interface(ifname, ns) end
  return out
end

--- The metadata of one place a path runs through.
-- @tparam[opt] table opts
--   * `netns` (string): a named network namespace (`ip netns`); default the
--     caller's. Sysctls are read inside it (needs root to enter it).
--   * `ifnames` ({string,...}, default {}): interfaces in that namespace whose
--     qdiscs, offloads and link state are recorded.
--   * `where` (string, "host"|"guest": where the run ran) and `backend`
--   (string, "netem"|"link": what impaired its path): stored as given.
-- @treturn table `{qoslab_version =, kernel = {release =, version =, machine =},
--   hostname =, cpu = {model =, count =}, netns = NS|nil, where =, backend =,
--   sysctls = {["net.ipv4.tcp_congestion_control"] = "cubic", ...},
--   interfaces = {{ifname =, kind =, mtu_bytes =, operstate =, speed_mbps =,
--   offloads = {tso =, gso =, gro =}, qdiscs = {{kind =, handle =, parent =,
--   spec = (tbf/htb root: as qoslab.shape.get; netem: as qoslab.netem.get),
--   text = (netem: tc-netem(8) syntax)}, ...}}, ...}}`; sysctls (those of
--   `SYSCTLS` the namespace has) as strings as /proc/sys has them, whitespace
--   runs as one space. A part that cannot be
--   read holds `error = "message (CODE)"` instead (an interface: no such device,
--   ENODEV; offloads the driver does not report, ENOTSUP; a namespace that
--   cannot be entered: `sysctls = {error = ...}` and every interface's error).
-- @raise when opts is not such a table (unknown key, wrong type)
-- @usage local m = meta.collect{netns = tb.client_netns, ifnames = {tb.client_ifname}}
function M.collect(opts)
  local ctx = 'qoslab.meta.collect'
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { netns = true, ifnames = true, where = true, backend = true })
  if opts.netns ~= nil then check.cstring(ctx, 'opts.netns', opts.netns) end
  check.string(ctx, 'opts.where', opts.where)
  check.string(ctx, 'opts.backend', opts.backend)
  local ifnames = opts.ifnames or {}
  check.table(ctx, 'opts.ifnames', ifnames)
  for i, n in ipairs(ifnames) do
    if type(n) ~= 'string' or n == '' then check.fail(ctx, 'opts.ifnames[' .. i .. ']', 'an interface name', n) end
  end
  local ok_core, core = pcall(require, 'qoslab.core')
  local u = ok_core and type(core) == 'table' and core.uname and core.uname() or {}
  local model, count = cpu()
  local rec = {
    qoslab_version = qoslab_version(),
    kernel = { release = u.release or trim(read_small('/proc/sys/kernel/osrelease')) or 'unknown',
               version = u.version or trim(read_small('/proc/sys/kernel/version')),
               machine = u.machine },
    hostname = u.nodename or trim(read_small('/proc/sys/kernel/hostname')) or 'unknown',
    cpu = { model = model, count = count },
    netns = opts.netns, where = opts.where, backend = opts.backend,
  }
  local here
  if opts.netns then
    local netns = require 'qoslab.netns'
    local res, msg, code = netns.run(opts.netns, collect_here, opts.netns, ifnames)
    if res then
      here = res
    else
      local err = fail_text(msg, code)
      here = { sysctls = { error = err }, interfaces = {} }
      for i, n in ipairs(ifnames) do here.interfaces[i] = { ifname = n, error = err } end
    end
  else
    here = collect_here(nil, ifnames)
  end
  rec.sysctls, rec.interfaces = here.sysctls, here.interfaces
  return rec
end

--- The namespaces and interfaces a testbed's path runs through.
-- @tparam table tb a `qoslab.testbed` (or a table with its name fields)
-- @treturn {table,...} `{{role = "client"|"router"|"server", netns =, ifnames = {...}}, ...}`
--   in path order
-- @usage for _, p in ipairs(meta.testbed_places(tb)) do print(p.role, p.netns) end
function M.testbed_places(tb)
  check.table('qoslab.meta.testbed_places', 'tb', tb)
  local out = { { role = 'client', netns = tb.client_netns, ifnames = { tb.client_ifname } } }
  if tb.router_netns then
    out[#out + 1] = { role = 'router', netns = tb.router_netns,
                      ifnames = { tb.router_client_ifname, tb.router_server_ifname } }
  end
  out[#out + 1] = { role = 'server', netns = tb.server_netns, ifnames = { tb.server_ifname } }
  return out
end

--- The metadata of a run: `collect` for the caller's namespace (with its
-- loopback, the path of tests to 127.0.0.1) and for each place of each
-- testbed given.
-- @tparam[opt] table opts `{where = "host"|"guest", backend = "netem"|"link"
--   (default the first testbed's backend), testbeds = {tb, ...} (default:
--   the testbeds open now, `qoslab.testbed.open_testbeds()`), time = string
--   (default now, UTC, ISO 8601)}`
-- @treturn table the caller's `collect` record plus `time =` and `paths =
--   {{role =, testbed = i, backend = (the testbed's), netns =, sysctls =,
--   interfaces =}, ...}` (each place's own part of its `collect` record)
-- @raise on an unknown key or a wrong type
-- @usage local m = meta.run_meta{where = 'host'}
function M.run_meta(opts)
  local ctx = 'qoslab.meta.run_meta'
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { where = true, backend = true, testbeds = true, time = true })
  check.string(ctx, 'opts.where', opts.where)
  check.string(ctx, 'opts.backend', opts.backend)
  check.string(ctx, 'opts.time', opts.time)
  local tbs = opts.testbeds
  if tbs == nil then
    local ok, testbed = pcall(require, 'qoslab.testbed')
    tbs = ok and type(testbed) == 'table' and testbed.open_testbeds and testbed.open_testbeds() or {}
  end
  check.table(ctx, 'opts.testbeds', tbs)
  local has_lo = fs.kind('/sys/class/net/lo') ~= nil
  local backend = opts.backend
  if backend == nil and type(tbs[1]) == 'table' then backend = tbs[1].backend end
  local m = M.collect { where = opts.where, backend = backend, ifnames = has_lo and { 'lo' } or {} }
  m.time = opts.time or os.date('!%Y-%m-%dT%H:%M:%SZ')
  m.paths = {}
  for i, tb in ipairs(tbs) do
    for _, p in ipairs(M.testbed_places(tb)) do
      local r = M.collect { netns = p.netns, ifnames = p.ifnames }
      m.paths[#m.paths + 1] = { role = p.role, testbed = i, backend = tb.backend, netns = p.netns,
                                sysctls = r.sysctls, interfaces = r.interfaces }
    end
  end
  return m
end

--- The name of the metadata file in a results folder.
M.FILE = 'meta.json'

--- Write `DIR/meta.json` (through a temporary file and a rename, so a
-- reader never sees half of it).
-- @tparam string dir the results folder (must exist)
-- @tparam table m the metadata (`run_meta`)
-- @return true, or nil, message, CODE as `qoslab.fs.write_file`
-- @usage assert(meta.write(dir, meta.run_meta{where = 'host'}))
function M.write(dir, m)
  local ctx = 'qoslab.meta.write'
  if dir == nil then check.fail(ctx, 'dir', 'a string', nil) end
  check.cstring(ctx, 'dir', dir)
  check.table(ctx, 'm', m)
  return fs.replace_file(dir .. '/' .. M.FILE, require('qoslab.plan').encode(m) .. '\n')
end

--- Read `DIR/meta.json`.
-- @tparam string dir a results folder
-- @treturn table|nil the metadata, or nil, message, CODE ("ENOENT" when the
--   folder has none, "EINVAL" when it is not JSON, as `qoslab.report.read_json`)
function M.read(dir)
  if dir == nil then check.fail('qoslab.meta.read', 'dir', 'a string', nil) end
  check.cstring('qoslab.meta.read', 'dir', dir)
  return require('qoslab.report').read_json(dir .. '/' .. M.FILE)
end

--- Write `DIR/meta.json` unless the folder has one already (a resumed run
-- keeps the first run's).
-- @tparam string dir the results folder
-- @tparam[opt] table opts as `run_meta`
-- @treturn boolean|nil true when written now, false when it was there, or
--   nil, message, CODE
function M.write_run(dir, opts)
  if dir == nil then check.fail('qoslab.meta.write_run', 'dir', 'a string', nil) end
  check.cstring('qoslab.meta.write_run', 'dir', dir)
  if fs.kind(dir .. '/' .. M.FILE) then return false end
  local ok, err, code = M.write(dir, M.run_meta(opts))
  if not ok then return nil, err, code end
  return true
end

return M
