--- Plans across hosts: the roles a plan names ("client", "server", ...)
-- mapped to machines on the command line, and N clients on several hosts
-- started at one moment.
--
-- A plan asks for its hosts by role:
--
--    local client <close> = qoslab.hosts.get('client')
--    local server <close> = qoslab.hosts.get('server', { ssh = 'lab@10.0.0.2' })
--
-- `qoslab run PLAN --host-map client=lab@10.0.0.1 --host-map server=10.0.0.2:2222`
-- decides which machine plays which role (`--ssh-identity`, `--ssh-option`,
-- `--remote-qoslab` apply to every one of them); a role the command line
-- leaves out takes the plan's default, and without one this machine
-- (`qoslab.host.localhost()`), so the same plan runs on one machine or on
-- several. Each handle is a `qoslab.host` (to-be-closed: closing it undoes
-- what it changed on its host).
--
-- `clients` runs one test from each of several hosts at the same instant:
-- it measures each host's clock against this one (`host:clock_offset`), picks
-- one start time on this host's monotonic clock and gives each host that time
-- on its own clock (`start_at_mono_ns`), so the tests' intervals share one
-- grid and their sum is a sum over the same seconds.
-- @module qoslab.hosts
local check = require 'qoslab.check'

local M = {}

-- The run's mapping (`configure`), the roles asked for, and each role's
-- metadata (collected once).
local config
local used = {}
local infos = {}
local info_order = {}

local function host_mod() return require 'qoslab.host' end

local function describe(v) return check.describe(v) end

--- Command-line values.
-- @section cli_values

-- A user name as ssh takes it: no "-" first (it would read as an option),
-- nothing the remote shell or ssh's own parsing would see as syntax.
local USER = '^[%w_][%w_%.%-]*$'
-- A host name or IPv4 address (labels of letters, digits, "-", "_"; no "-"
-- first: ssh would read "-oProxyCommand=..." as an option).
local NAME = '^[%w_][%w_%.%-]*$'

local function ipv6(s)
  return s:find(':', 1, true) ~= nil and s:match('^[%x:%.]+$') ~= nil and #s <= 45
end

--- Parse a host target as `--host-map` takes it: `[user@]addr[:port]`, where
-- addr is a host name, an IPv4 address, a bare IPv6 address (no port then) or
-- one in brackets (`[fd00::2]:2222`).
-- @tparam string s the target
-- @treturn table|nil `{ssh = "[user@]addr", port = integer|nil}` (qoslab.host's
--   `ssh` and `port`), or nil and what is wrong with it (a phrase: "expected
--   [user@]addr[:port], got ...")
-- @usage hosts.parse_target('lab@10.0.0.1:2222') --> {ssh = 'lab@10.0.0.1', port = 2222}
function M.parse_target(s)
  if type(s) ~= 'string' or s == '' then
    return nil, 'expected [user@]addr[:port], got ' .. describe(s)
  end
  local function bad(why)
    return nil, string.format('expected [user@]addr[:port]%s, got %q', why and (' (' .. why .. ')') or '', s)
  end
  local user, rest = s:match('^([^@]*)@(.*)$')
  if not user then rest = s end
  if user and not user:match(USER) then return bad('a user name of letters, digits, ".", "_", "-"') end
  local addr, port
  local b, p = rest:match('^%[([^%]]*)%](.*)$')
  if b then
    if not ipv6(b) then return bad('an IPv6 address in brackets') end
    addr = b
    if p ~= '' then
      port = p:match('^:(%d+)$')
      if not port then return bad('a port after the brackets as :PORT') end
    end
  elseif ipv6(rest) and select(2, rest:gsub(':', '')) > 1 then
    addr = rest
  else
    addr, port = rest:match('^([^:]*):(.*)$')
    if not addr then addr = rest end
    if not addr:match(NAME) then return bad('a host name or address') end
    if port and not port:match('^%d+$') then return bad('a port number 1-65535') end
  end
  if port then
    port = math.tointeger(tonumber(port))
    if not port or port < 1 or port > 65535 then return bad('a port number 1-65535') end
  end
  return { ssh = (user and (user .. '@') or '') .. addr, port = port }
end

--- Parse one `--host-map` value: `ROLE=[user@]addr[:port]`.
-- @tparam string s the value
-- @treturn string|nil the role (a letter or "_" first, then letters, digits,
--   "_", "-"), or nil and what is wrong (a phrase naming the expected form)
-- @treturn table the target as `parse_target` returns it
-- @usage local role, t = hosts.parse_map('server=lab@10.0.0.2')
function M.parse_map(s)
  if type(s) ~= 'string' then return nil, 'expected ROLE=[user@]addr[:port], got ' .. describe(s) end
  local role, target = s:match('^([^=]*)=(.*)$')
  if not role then return nil, string.format('expected ROLE=[user@]addr[:port], got %q', s) end
  if not role:match('^[%a_][%w_%-]*$') then
    return nil, string.format('expected ROLE=[user@]addr[:port] with a role of letters, digits, "_", "-", got %q', s)
  end
  local t, why = M.parse_target(target)
  if not t then return nil, 'role ' .. role .. ': ' .. why end
  return role, t
end

--- Parse one `--ssh-option` value: `KEY=VALUE` (an ssh_config(5) keyword,
-- letters and digits, and a value without control characters).
-- @tparam string s the value
-- @treturn string|nil the option as ssh's `-o` takes it ("Key=Value"), or nil
--   and what is wrong
-- @usage hosts.parse_ssh_option('StrictHostKeyChecking=no')
function M.parse_ssh_option(s)
  if type(s) ~= 'string' then return nil, 'expected KEY=VALUE, got ' .. describe(s) end
  local k, v = s:match('^([%a][%w]*)=(.+)$')
  if not k or v:find('%c') then
    return nil, string.format('expected KEY=VALUE (an ssh_config keyword, letters and digits, '
      .. '= and a value without control characters), got %q', s)
  end
  return k .. '=' .. v
end

local CONFIG_KEYS = { roles = true, identity = true, options = true, qoslab = true }

--- Set the run's host mapping (`qoslab run` calls it from its flags; a
-- script may call it itself).
-- @tparam table|nil cfg `{roles = {ROLE = {ssh = "[user@]addr", port =
--   integer|nil}, ...}, identity = FILE|nil, options = {"Key=Value", ...}|nil,
--   qoslab = PATH|nil}`; nil forgets the mapping. It also forgets the roles
--   asked for and the metadata collected so far.
-- @raise on an unknown key or a value of the wrong type, naming the field
-- @usage hosts.configure{roles = {server = {ssh = 'lab@10.0.0.2'}}}
function M.configure(cfg)
  local ctx = 'qoslab.hosts.configure'
  used, infos, info_order = {}, {}, {}
  if cfg == nil then config = nil return end
  check.table(ctx, 'cfg', cfg)
  check.keys(ctx, 'cfg', cfg, CONFIG_KEYS, 2)
  local roles = cfg.roles or {}
  check.table(ctx, 'cfg.roles', roles)
  local c = { roles = {}, identity = check.cstring(ctx, 'cfg.identity', cfg.identity),
              qoslab = check.cstring(ctx, 'cfg.qoslab', cfg.qoslab) }
  for role, t in pairs(roles) do
    if type(role) ~= 'string' or not role:match('^[%a_][%w_%-]*$') then
      check.fail(ctx, 'cfg.roles key', 'a role name (letters, digits, "_", "-")', role)
    end
    check.table(ctx, 'cfg.roles.' .. role, t)
    check.keys(ctx, 'cfg.roles.' .. role, t, { ssh = true, port = true }, 2)
    if type(t.ssh) ~= 'string' or t.ssh == '' then
      check.fail(ctx, 'cfg.roles.' .. role .. '.ssh', 'a string ([user@]addr)', t.ssh)
    end
    c.roles[role] = { ssh = t.ssh, port = check.integer(ctx, 'cfg.roles.' .. role .. '.port', t.port, 1, 65535) }
  end
  if cfg.options ~= nil then
    check.table(ctx, 'cfg.options', cfg.options)
    c.options = {}
    for i, o in ipairs(cfg.options) do
      c.options[i] = check.cstring(ctx, 'cfg.options[' .. i .. ']', o)
    end
  end
  config = c
end

--- The mapping `configure` set, as a plain table (a copy), or nil.
-- @treturn table|nil `{roles = {ROLE = {ssh =, port =}}, identity =, options =, qoslab =}`
function M.configured()
  if not config then return nil end
  local c = { roles = {}, identity = config.identity, qoslab = config.qoslab,
              options = config.options and { table.unpack(config.options) } or nil }
  for r, t in pairs(config.roles) do c.roles[r] = { ssh = t.ssh, port = t.port } end
  return c
end

--- Hosts by role.
-- @section roles

local function target_text(t)
  local a = t.ssh
  if t.port then
    local user, host = a:match('^(.*@)(.*)$')
    if not user then user, host = '', a end
    if host:find(':', 1, true) then host = '[' .. host .. ']' end
    a = user .. host .. ':' .. t.port
  end
  return a
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- The failures of reaching a host (qoslab.host's codes for the connection
-- and a missing qoslab there), as opposed to a far end that cannot say
-- something.
local UNREACHABLE = { EACCES = true, ECONNREFUSED = true, EHOSTUNREACH = true, ENETUNREACH = true,
                      ETIMEDOUT = true, ENOENT = true }

-- The metadata of a role's host, collected once (while a run is configured).
-- Returns nil, message, CODE when the host cannot be reached.
local function collect_info(role, h, connection)
  if infos[role] then return true end
  local ok, info, msg, code = pcall(h.info, h)
  local rec
  if ok and type(info) == 'table' then
    rec = copy(info)
  elseif ok and UNREACHABLE[code] then
    return nil, msg, code
  else
    rec = { error = ok and string.format('%s (%s)', tostring(msg), tostring(code)) or tostring(info) }
  end
  rec.role, rec.connection = role, connection
  infos[role] = rec
  info_order[#info_order + 1] = role
  return true
end

--- A `qoslab.host` handle for one of a plan's roles.
-- The mapping of `qoslab run --host-map ROLE=[user@]addr[:port]` (see
-- `configure`) wins; else `default`; else this machine. For a mapped role
-- the handle takes `ssh` and `port` from the map, `identity`, `options` and
-- `qoslab` from `--ssh-identity`, `--ssh-option`, `--remote-qoslab` (else from
-- `default`), the other fields (`timeout_s`, `connect_timeout_s`) from
-- `default`; its `name` is the role unless `default` names it. The run-wide
-- ssh flags apply to a `default` with `ssh` too. While a run is configured
-- the host is reached at once: its metadata (`host:info()`) is collected
-- once per role, for the results folder's meta.json (`infos`), and a host
-- that cannot be reached fails here, naming the role and its flag (else the
-- handle's first call fails, naming the role as the handle's name).
-- @tparam string role letters, digits, "_", "-" (a letter or "_" first)
-- @tparam[opt] table default qoslab.host options (`{ssh =, port =, identity =,
--   options =, qoslab =, connect_timeout_s =, timeout_s =, name =}`; without
--   `ssh`: `qoslab.host.localhost`'s `{qoslab =, timeout_s =, name =}`), or nil
--   for `qoslab.host.localhost()`
-- @treturn qoslab.host|nil the handle (to-be-closed), or nil, message, CODE
--   when a configured run's host cannot be reached (the message names the
--   role and, for a mapped role, the `--host-map` value; codes as
--   qoslab.host's: ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, ECONNREFUSED, EACCES,
--   ENOENT for no qoslab there)
-- @raise when role or default is not of that shape, or qoslab.host refuses
--   the options: the message names the role and the flag the value came from
-- @usage local server <close> = assert(qoslab.hosts.get('server'))
function M.get(role, default)
  local ctx = 'qoslab.hosts.get'
  if type(role) ~= 'string' or not role:match('^[%a_][%w_%-]*$') then
    check.fail(ctx, 'role', 'a role name (letters, digits, "_", "-"; a letter or "_" first)', role)
  end
  if default ~= nil then check.table(ctx, 'default', default) end
  local host = host_mod()
  local mapped = config and config.roles[role]
  local opts, where
  if mapped then
    opts = default and copy(default) or {}
    opts.ssh, opts.port = mapped.ssh, mapped.port
    where = string.format('role %s (--host-map %s=%s)', role, role, target_text(mapped))
  elseif default then
    opts = copy(default)
    where = string.format('role %s (the plan\'s default host)', role)
  end
  local h, msg, code
  if opts then
    if config and (mapped or opts.ssh ~= nil) then
      if config.identity then opts.identity = config.identity end
      if config.options then opts.options = { table.unpack(config.options) } end
      if config.qoslab then opts.qoslab = config.qoslab end
    end
    if opts.name == nil then opts.name = role end
    -- a default without ssh is this machine with those options (qoslab =, timeout_s =)
    local ok, r1, r2, r3 = pcall(opts.ssh ~= nil and host or host.localhost, opts)
    if not ok then
      local flags = ''
      if config and (config.identity or config.options or config.qoslab) then
        flags = ' with --ssh-identity/--ssh-option/--remote-qoslab as given'
      end
      local why = tostring(r1):gsub('^[^\n:]-qoslab/[%w_/]+%.lua:%d+: ', '')
      error(string.format('%s: %s%s: %s', ctx, where, flags, why), 2)
    end
    h, msg, code = r1, r2, r3
  else
    where = string.format('role %s (this machine)', role)
    h, msg, code = host.localhost { name = role }
  end
  if not h then return nil, string.format('%s: %s', where, tostring(msg)), code end
  used[role] = true
  if config then
    local connection = mapped and target_text(mapped) or (opts and opts.ssh and target_text(opts)) or 'local'
    local got
    got, msg, code = collect_info(role, h, connection)
    if not got then
      h:close()
      return nil, string.format('%s: %s', where, tostring(msg)), code
    end
  end
  return h
end

--- The metadata of the hosts `get` handed out while a run was configured,
-- by role: each `host:info()` table (`qoslab.meta.collect`'s record plus
-- `mono_ns`, `realtime_ns`) with `role` and `connection` (`[user@]addr[:port]`
-- or "local") added, or `{role =, connection =, error = "message (CODE)"}` when
-- it could not be read.
-- @treturn table ROLE -> record (a new table each call)
function M.infos()
  local out = {}
  for _, r in ipairs(info_order) do out[r] = infos[r] end
  return out
end

--- The mapped roles the plan never asked for (a misspelt `--host-map`).
-- @treturn {string,...} sorted role names
function M.unused_roles()
  local out = {}
  for r in pairs(config and config.roles or {}) do
    if not used[r] then out[#out + 1] = r end
  end
  table.sort(out)
  return out
end

--- Clients on several hosts at once.
-- @section clients

-- Totals summed over clients: each key of `sum` from the result's part.
local SUMS = {
  { 'sent_bytes', 'sent', 'bytes' }, { 'received_bytes', 'received', 'bytes' },
  { 'sent_bps', 'sent', 'bits_per_second' }, { 'received_bps', 'received', 'bits_per_second' },
  { 'retransmits', 'sent', 'retransmits' }, { 'sent_packets', 'sent', 'packets' },
  { 'received_packets', 'received', 'unique_packets' }, { 'lost_packets', 'received', 'lost_packets' },
}

--- The sum over the clients of a `clients` run (what `clients` returns as
-- `sum`): each total added in the order of the list, over the clients with a
-- result.
-- @tparam {table,...} per_client entries `{name =, result = table|nil, error = string|nil}`
-- @treturn table `{clients = n, ok = (with a result), failed = (with an error),
--   sent_bytes =, received_bytes = (integers), sent_bps =, received_bps = (floats,
--   bits/s: the rates add, as the tests ran over the same seconds), and, when
--   a result has them, retransmits (TCP), sent_packets, received_packets
--   (unique), lost_packets (UDP)}`; a key a result lacks counts 0 for it
-- @raise when per_client is not a list of tables
-- @usage local s = hosts.sum(res.per_client)
function M.sum(per_client)
  local ctx = 'qoslab.hosts.sum'
  check.table(ctx, 'per_client', per_client)
  local s = { clients = #per_client, ok = 0, failed = 0, sent_bytes = 0, received_bytes = 0,
              sent_bps = 0.0, received_bps = 0.0 }
  for i, e in ipairs(per_client) do
    check.table(ctx, 'per_client[' .. i .. ']', e)
    local r = e.result
    if type(r) == 'table' then
      s.ok = s.ok + 1
      for _, k in ipairs(SUMS) do
        local part = r[k[2]]
        local v = type(part) == 'table' and part[k[3]] or nil
        if type(v) == 'number' then s[k[1]] = (s[k[1]] or (math.type(v) == 'integer' and 0 or 0.0)) + v end
      end
    else
      s.failed = s.failed + 1
    end
  end
  return s
end

local function mbps(v) return v and string.format('%.2f', v / 1e6) or nil end
local function ms(v) return v and string.format('%.3f', v / 1e6) or nil end

local CLIENTS_KEYS = { clients = true, test = true, start_in_s = true, names = true,
                       clock_samples = true, title = true }

--- Run one test from each of several hosts at the same instant.
-- Measures each host's clock offset (`host:clock_offset{samples =}`: remote
-- CLOCK_MONOTONIC = local + offset, within half the best round trip), picks
-- one start time T = this host's CLOCK_MONOTONIC now + `start_in_s`, rounded
-- up to a whole 10 ms, and gives host i `start_at_mono_ns = T + offset_i` (its
-- own clock's reading of T), so every test starts at T and their intervals
-- lie on one grid. The tests run concurrently (one ssh process each) and are
-- waited for together. A client whose clock or test fails is in the result
-- with its error and counted in `sum.failed`, never dropped.
-- @tparam table opts
--   * `clients` ({qoslab.host, ...}, 1-64): the hosts to run a client on;
--   * `test` (table): `qoslab.traffic.run` options for every client (`host`,
--     `port`, `proto`, `duration_s`, `parallel`, ...; not `start_at_mono_ns`,
--     which this sets);
--   * `start_in_s` (0.05-3600, default 2): from now to the start, time enough
--     for every ssh to start its client;
--   * `names` ({string, ...}, one per client; default each host's `name`,
--     else "client I");
--   * `clock_samples` (1-1000, default 16): round trips per offset;
--   * `title` (string): kept in the result for `table`.
-- @treturn table `{start_mono_ns = T (this host's clock), title =,
--   per_client = {{name =, result = (the test's result table) | nil, error =
--   "message (CODE)" | nil, code =, offset_ns =, offset_error_ns =,
--   start_at_mono_ns = (on that host's clock), start_late_ns = (how long after
--   start_at_mono_ns that host's client began the test, by its own clock: the
--   result's start_late_ns)}, ...},
--   sum = (what sum(per_client) gives), start_spread_ns = (largest minus smallest
--   start_late_ns of the clients with one; nil with fewer than two)}`
-- @raise on bad opts, naming the field; and on SIGINT, SIGTERM or SIGHUP
--   while qoslab's signal handlers are installed (`qoslab run`): the tests
--   are stopped and qoslab.core's interruption error (code "EINTR") is raised,
--   as `qoslab.traffic.run` does
-- @usage local r = hosts.clients{clients = {a, b, c}, test = {host = '10.0.0.9', duration_s = 5}}
-- io.write(hosts.table(r))
function M.clients(opts)
  local ctx = 'qoslab.hosts.clients'
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, CLIENTS_KEYS, 2)
  local list = opts.clients
  check.table(ctx, 'opts.clients', list)
  if #list < 1 or #list > 64 then check.fail(ctx, 'opts.clients', 'a list of 1-64 qoslab.host handles', list) end
  for i, h in ipairs(list) do
    if (type(h) ~= 'table' and type(h) ~= 'userdata') or type(h.client) ~= 'function' then
      check.fail(ctx, 'opts.clients[' .. i .. ']', 'a qoslab.host handle', h)
    end
  end
  check.table(ctx, 'opts.test', opts.test)
  if opts.test.start_at_mono_ns ~= nil then
    error(ctx .. ': opts.test.start_at_mono_ns: set by hosts.clients (leave it out)', 2)
  end
  local start_in_s = check.number(ctx, 'opts.start_in_s', opts.start_in_s, 0.05, 3600, 2)
  local samples = check.integer(ctx, 'opts.clock_samples', opts.clock_samples, 1, 1000, 16)
  check.string(ctx, 'opts.title', opts.title)
  local names = {}
  if opts.names ~= nil then
    check.table(ctx, 'opts.names', opts.names)
    if #opts.names ~= #list then
      check.fail(ctx, 'opts.names', string.format('a list of %d names (one per client)', #list), opts.names)
    end
  end
  for i, h in ipairs(list) do
    local n = opts.names and opts.names[i]
    if n == nil then n = type(h.name) == 'string' and h.name or ('client ' .. i) end
    names[i] = check.string(ctx, 'opts.names[' .. i .. ']', n)
  end

  local per = {}
  for i, h in ipairs(list) do
    local e = { name = names[i] }
    local off, msg, code = h:clock_offset { samples = samples }
    if off then
      e.offset_ns, e.offset_error_ns = off.offset_ns, off.error_ns
    else
      e.error, e.code = string.format('%s (%s)', tostring(msg), tostring(code)), code
    end
    per[i] = e
  end
  local timer = require 'qoslab.timer'
  local grid = 10000000
  local t = timer.now_ns() + math.floor(start_in_s * 1e9)
  t = (t + grid - 1) // grid * grid
  -- Every client is started before any is waited for; a raise (a bad
  -- test option) stops those started.
  local running = {}
  local ok, err = pcall(function()
    for i, h in ipairs(list) do
      local e = per[i]
      if not e.error then
        local test = copy(opts.test)
        e.start_at_mono_ns = t + e.offset_ns
        test.start_at_mono_ns = e.start_at_mono_ns
        if test.timeout_s == nil then
          -- the handle's own margin, plus the wait for the start and the test
          test.timeout_s = (tonumber(h.timeout_s) or 60) + start_in_s + (tonumber(test.duration_s) or 10)
            + (tonumber(test.omit_s) or 0)
        end
        local job, msg, code = h:client_start(test)
        if job then running[i] = job
        else e.error, e.code = string.format('%s (%s)', tostring(msg), tostring(code)), code end
      end
    end
  end)
  if not ok then
    for _, job in pairs(running) do job:close() end
    error((tostring(err):gsub('^[^\n:]-qoslab/[%w_/]+%.lua:%d+: ', '')), 2)
  end
  local c = check.core()
  for i = 1, #list do
    local job = running[i]
    if job then
      local e = per[i]
      local wok, res, msg, code = pcall(job.wait, job)
      if not wok then
        for j = i + 1, #list do if running[j] then running[j]:close() end end
        error(res, 0)
      end
      -- A stop request ends the run as a local test's does: the tests still
      -- running are stopped (with the signal pending each handle's read
      -- ends at once, and the handle stops its process there too) and the
      -- interruption is raised.
      if not res and code == 'EINTR' and c.signal_pending and c.signal_pending() then
        for j = i + 1, #list do if running[j] then running[j]:close() end end
        error(c.interruption(), 0)
      end
      if res then
        e.result = res
        e.start_late_ns = math.tointeger(res.start_late_ns)
      else
        e.error, e.code = string.format('%s (%s)', tostring(msg), tostring(code)), code
      end
    end
  end
  local lo, hi
  for _, e in ipairs(per) do
    if e.start_late_ns then
      lo = math.min(lo or e.start_late_ns, e.start_late_ns)
      hi = math.max(hi or e.start_late_ns, e.start_late_ns)
    end
  end
  local n_late = 0
  for _, e in ipairs(per) do if e.start_late_ns then n_late = n_late + 1 end end
  return { start_mono_ns = t, title = opts.title, per_client = per, sum = M.sum(per),
           start_spread_ns = n_late >= 2 and (hi - lo) or nil }
end

--- A text table of a `clients` run: one row per client (sent and received
-- Mbit/s, retransmits or lost datagrams, clock offset and its error, how late
-- the test started, the error of a client that failed) and the sum row.
-- @tparam table res what `clients` returns
-- @treturn string the table (`qoslab.report.format_table`), lines ending in "\n"
-- @raise when res is not of that shape
-- @usage io.write(hosts.table(res))
function M.table(res)
  local ctx = 'qoslab.hosts.table'
  check.table(ctx, 'res', res)
  check.table(ctx, 'res.per_client', res.per_client)
  check.table(ctx, 'res.sum', res.sum)
  local rows = {}
  local udp = res.sum.lost_packets ~= nil
  for _, e in ipairs(res.per_client) do
    local r = type(e.result) == 'table' and e.result or {}
    local sent, recv = r.sent or {}, r.received or {}
    rows[#rows + 1] = {
      client = tostring(e.name), sent = mbps(sent.bits_per_second), received = mbps(recv.bits_per_second),
      loss = udp and recv.lost_packets or sent.retransmits,
      offset = e.offset_ns and (ms(e.offset_ns) .. ' ± ' .. ms(e.offset_error_ns or 0)) or nil,
      late = ms(e.start_late_ns), error = e.error and tostring(e.error):match('^[^\n]*') or nil,
    }
  end
  local s = res.sum
  rows[#rows + 1] = { client = string.format('sum (%d of %d)', s.ok, s.clients), sent = mbps(s.sent_bps),
                      received = mbps(s.received_bps), loss = udp and s.lost_packets or s.retransmits,
                      error = s.failed > 0 and string.format('%d failed', s.failed) or nil }
  return require('qoslab.report').format_table {
    title = res.title,
    columns = {
      { name = 'client', align = 'left' }, { name = 'sent', header = 'sent Mbit/s' },
      { name = 'received', header = 'received Mbit/s' },
      { name = 'loss', header = udp and 'lost datagrams' or 'retransmits' },
      { name = 'offset', header = 'clock offset ms' }, { name = 'late', header = 'start late ms' },
      { name = 'error', align = 'left' },
    },
    rows = rows,
  }
end

return M
