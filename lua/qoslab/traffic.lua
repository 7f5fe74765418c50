--- The traffic engine: iperf3-compatible TCP/UDP servers and clients.
--
-- A thin façade over `qoslab.core.traffic_server` / `traffic_client` (the
-- multithreaded C engine): it checks option tables where the caller wrote
-- them, gives results a readable `tostring`, converts results to iperf3's
-- `-J` JSON schema and checks a result's bookkeeping identities.
--
-- Two ways to run a client:
--
--    local res = qoslab.client{host = '10.0.0.2', duration_s = 5}   -- a result
--    local h = qoslab.client{host = '10.0.0.2'}:start()             -- a handle
--    for iv in h:intervals() do print(iv.sum.sender.bits_per_second) end
--    local res = h:wait()
--
-- How both spellings work: `client(opts)` checks `opts` at once (errors are
-- raised at the caller's line) and returns a *pending test*. Calling
-- `:start()` on it starts the test and returns it as a live handle. Reading
-- anything else from a pending test (`res.sent`, `pairs(res)`, `#res`,
-- `tostring(res)`) runs the test to completion right there and turns the
-- object into the plain result table (same keys as `wait()` returns, no
-- metatable other than the one giving `tostring`). Consequences worth
-- knowing: the test runs when the result is first read, not on the
-- `client{...}` line; a failure of the world (connection refused, no such
-- namespace) then raises an error carrying the code ("... (ECONNREFUSED)")
-- because no `nil, message, code` can be returned any more; and a C encoder
-- such as lua-cjson, which does not look at metatables, sees an empty table
-- until a field was read. Code that wants eager, conventional behaviour
-- calls `traffic.run(opts)`, which runs the test before returning and
-- returns the result or `nil, message, CODE` (plans and sweeps should).
--
-- The result table is described in TRAFFIC-CONTRACT.md: `res.sent`,
-- `res.received` (the test's data direction, with `side` naming which end
-- measured), `res.reverse_sent` / `res.reverse_received` with `bidir`,
-- `res.streams[i].sender|receiver` (with `sndbuf` / `rcvbuf` requested,
-- granted, clamped), `res.intervals[i]`, `res.cpu`, `res.cpu_limited`,
-- `res.warnings`, `res.peer`. This façade adds `res.options`, a copy of
-- the options the test was started with.
-- @module qoslab.traffic
local check = require 'qoslab.check'

local M = {}

local core_mod
local function core()
  if not core_mod then core_mod = require 'qoslab.core' end
  return core_mod
end

-- ------------------------------------------------------------ options ----

local INT_MAX = 2147483647
local BIG = 1 << 62

-- One entry per key: kind and range, the same as the C binding checks
-- (csrc/bind/traffic.c) so errors are raised here, on the caller's line,
-- even for a test that starts later. Ranges follow the kernel's limits:
-- setsockopt takes an int for buffer sizes; TCP_MAXSEG accepts 88..32767
-- (TCP_MIN_MSS, MAX_TCP_WINDOW in tcp(7)/net/ipv4/tcp.c); UDP payloads are
-- 16 (qoslab's 64-bit header) to 65507 (65535 - IP and UDP headers);
-- sendmmsg takes at most UIO_MAXIOV (1024) messages; interface and
-- congestion-control names fit in 15 characters.
local CLIENT_KEYS = {
  host = { 'string' },
  port = { 'integer', 1, 65535 },
  proto = { 'enum', { 'tcp', 'udp' } },
  parallel = { 'integer', 1, 128 },
  duration_s = { 'number', 0.001, 86400 },
  bytes = { 'integer', 1, BIG },
  packets = { 'integer', 1, BIG },
  reverse = { 'boolean' },
  bidir = { 'boolean' },
  omit_s = { 'number', 0, 3600 },
  interval_s = { 'number', 0.1, 3600 },
  window_bytes = { 'integer', 1, INT_MAX },
  sndbuf_bytes = { 'integer', 1, INT_MAX },
  rcvbuf_bytes = { 'integer', 1, INT_MAX },
  bitrate_bps = { 'integer', 0, 1 << 50 },
  length_bytes = { 'integer', 1, 1 << 24 },
  congestion = { 'string', 15 },
  mss_bytes = { 'integer', 88, 32767 },
  tos = { 'integer', 0, 255 },
  nodelay = { 'boolean' },
  fq_rate_bps = { 'integer', 1, 1 << 50 },
  bind_address = { 'string' },
  bind_device = { 'string', 15 },
  netns = { 'netns' },
  connect_timeout_s = { 'number', 0.001, 3600 },
  udp_batch = { 'integer', 1, 1024 },
  udp_gso = { 'boolean' },
  udp_drain_s = { 'number', 0, 60 },
  title = { 'string' },
}

local SERVER_KEYS = {
  port = { 'integer', 0, 65535 },
  bind_address = { 'string' },
  netns = { 'netns' },
  one_off = { 'boolean' },
  window_bytes = { 'integer', 1, INT_MAX },
  sndbuf_bytes = { 'integer', 1, INT_MAX },
  rcvbuf_bytes = { 'integer', 1, INT_MAX },
  idle_timeout_s = { 'number', 0.001, 86400 },
  max_tests = { 'integer', 1, 4096 },
  keep_results = { 'integer', 0, 100000 },
  max_tests_per_address = { 'integer', 1, 4096 },
  max_streams_per_address = { 'integer', 1, 65536 },
  max_unidentified = { 'integer', 1, 65536 },
  max_unidentified_per_address = { 'integer', 1, 65536 },
  data_idle_s = { 'number', 0.001, 86400 },
  max_duration_s = { 'number', 0.001, 2678400 },
  test_buffer_bytes = { 'integer', 1, 1 << 40 },
}

local function allowed(keys)
  local a = {}
  for k in pairs(keys) do a[k] = true end
  return a
end
local CLIENT_ALLOWED, SERVER_ALLOWED = allowed(CLIENT_KEYS), allowed(SERVER_KEYS)

-- Error levels: `depth` is the number of frames from check_opts up to the
-- public function, so errors point at the line that called that function.
-- (check.X(level) raises at level + 3 counted from check.fail; check.fail
-- at level + 2; check.keys at level + 1.)
local function check_opts(ctx, opts, keys, allowed_set, depth)
  local L = depth + 1
  check.table(ctx, 'opts', opts, L)
  check.keys(ctx, 'opts', opts, allowed_set, L + 1)
  for k, spec in pairs(keys) do
    local v, field = opts[k], 'opts.' .. k
    local kind = spec[1]
    if kind == 'string' then
      check.cstring(ctx, field, v, nil, L)
      if v == '' then check.fail(ctx, field, 'a non-empty string', v, L) end
      if v and spec[2] and #v > spec[2] then
        check.fail(ctx, field, string.format('at most %d characters (IFNAMSIZ, TCP_CA_NAME_MAX)',
          spec[2]), v, L)
      end
    elseif kind == 'netns' then check.netns(ctx, field, v, nil, L)
    elseif kind == 'integer' then check.integer(ctx, field, v, spec[2], spec[3], nil, L)
    elseif kind == 'number' then check.number(ctx, field, v, spec[2], spec[3], nil, L)
    elseif kind == 'boolean' then check.boolean(ctx, field, v, nil, L)
    elseif kind == 'enum' then check.enum(ctx, field, v, spec[2], nil, L)
    end
  end
end

-- Called directly from a public function.
local function check_client(ctx, opts)
  -- UDP's datagram range first, so -u -l 0 names it rather than TCP's
  if type(opts) == 'table' and opts.proto == 'udp' and math.type(opts.length_bytes) == 'integer'
      and (opts.length_bytes < 16 or opts.length_bytes > 65507) then
    check.fail(ctx, 'opts.length_bytes', 'an integer in [16, 65507] for UDP', opts.length_bytes, 2)
  end
  check_opts(ctx, opts, CLIENT_KEYS, CLIENT_ALLOWED, 2)
  if opts.host == nil then check.fail(ctx, 'opts.host', 'a host name or address', nil, 2) end
  local udp = opts.proto == 'udp'
  local function conflict(msg) error(ctx .. ': ' .. msg, 4) end
  if opts.duration_s and (opts.bytes or opts.packets) then
    conflict('opts.duration_s: cannot be combined with opts.bytes or opts.packets (one end condition)')
  end
  if opts.bytes and opts.packets then
    conflict('opts.packets: cannot be combined with opts.bytes (one end condition)')
  end
  if opts.packets and not udp then
    conflict('opts.packets: only for proto = "udp" (use opts.bytes for TCP)')
  end
  if opts.reverse and opts.bidir then
    conflict('opts.bidir: cannot be combined with opts.reverse (bidir already runs both directions)')
  end
  if opts.window_bytes and (opts.sndbuf_bytes or opts.rcvbuf_bytes) then
    conflict('opts.window_bytes: sets both buffers; use it or opts.sndbuf_bytes/opts.rcvbuf_bytes, not both')
  end
  if udp and opts.length_bytes and (opts.length_bytes < 16 or opts.length_bytes > 65507) then
    check.fail(ctx, 'opts.length_bytes', 'an integer in [16, 65507] for UDP', opts.length_bytes, 2)
  end
  -- TCP_CONGESTION names: what the kernel's modules register and what a
  -- qoslab server accepts from its peer; whether this kernel has it is
  -- checked when the test starts (a failure of the world, not a mistake).
  if opts.congestion and not opts.congestion:match('^[a-z0-9_]+$') then
    check.fail(ctx, 'opts.congestion', 'a congestion control name (1..15 of a-z, 0-9, _; '
      .. 'e.g. "cubic", "bbr")', opts.congestion, 2)
  end
  if udp and (opts.mss_bytes or opts.congestion or opts.nodelay ~= nil) then
    local k = opts.mss_bytes and 'mss_bytes' or opts.congestion and 'congestion' or 'nodelay'
    conflict('opts.' .. k .. ': a TCP option, not valid with proto = "udp"')
  end
  if not udp and (opts.udp_batch or opts.udp_gso ~= nil or opts.udp_drain_s) then
    local k = opts.udp_batch and 'udp_batch' or opts.udp_gso ~= nil and 'udp_gso' or 'udp_drain_s'
    conflict('opts.' .. k .. ': a UDP option, only valid with proto = "udp"')
  end
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- ------------------------------------------------------------ results ----

--- Metatable of result tables: only `__tostring` (the summary) and `__name`.
M.Result = { __name = 'qoslab.Result' }
M.Result.__tostring = function(res) return M.summary(res) end

local function as_result(res, opts)
  if type(res) == 'table' then
    if opts and res.options == nil then res.options = copy(opts) end
    setmetatable(res, M.Result)
  end
  return res
end

-- ------------------------------------------------------------- client ----

-- Private state of Test objects, so their raw table stays empty until it
-- becomes the result. mode: "pending" | "running" | "done".
local priv = setmetatable({}, { __mode = 'k' })

local Test = { __name = 'qoslab.Test' }
local methods = {}

-- A pending test that fails while being read cannot return nil, msg, code:
-- raise with the code in the message instead.
local function raise_failure(ctx, msg, code)
  error(string.format('%s: %s (%s)', ctx, tostring(msg), tostring(code or 'EFAIL')), 4)
end

-- Start the C test; returns true or nil, msg, code.
local function begin(p)
  local ud, msg, code = core().traffic_client(copy(p.opts))
  if not ud then
    p.mode = 'done'
    p.failure = { msg, code }
    return nil, msg, code
  end
  p.ud = ud
  p.mode = 'running'
  return true
end

local function finish(p)
  if p.result or p.failure then return end
  local res, msg, code = p.ud:wait()
  if res then
    p.result = as_result(res, p.opts)
  else
    p.failure = { msg, code }
  end
  p.mode = 'done'
end

-- Run a pending test and turn the object into its result table.
local function materialize(self)
  local p = priv[self]
  if p.mode == 'pending' then
    local ok, msg, code = begin(p)
    if not ok then raise_failure('qoslab.client', msg, code) end
  end
  finish(p)
  if p.failure then raise_failure('qoslab.client', p.failure[1], p.failure[2]) end
  priv[self] = nil
  for k, v in pairs(p.result) do rawset(self, k, v) end
  setmetatable(self, M.Result)
end

Test.__index = function(self, k)
  local p = priv[self]
  if p.mode == 'pending' then
    if k == 'start' then return methods.start end
    materialize(self)
    return rawget(self, k)
  end
  local m = methods[k]
  if m then return m end
  error(string.format("qoslab.Test: field '%s' of a started test: call :wait() for the result",
    tostring(k)), 2)
end
Test.__pairs = function(self)
  if priv[self] and priv[self].mode == 'pending' then materialize(self) end
  return next, self, nil
end
Test.__len = function(self)
  if priv[self] and priv[self].mode == 'pending' then materialize(self) end
  return rawlen(self)
end
Test.__tostring = function(self)
  local p = priv[self]
  if p.mode == 'pending' then
    materialize(self)
    return M.summary(self)
  end
  local o = p.opts
  return string.format('qoslab.Test (%s, %s %s:%d)', p.mode, o.proto or 'tcp',
    tostring(o.host):find(':', 1, true) and ('[' .. o.host .. ']') or o.host,
    o.port or 5201)
end
-- A handle going out of scope stops its test (the C object also stops on GC).
Test.__close = function(self)
  local p = priv[self]
  if p and p.mode == 'running' and p.ud then p.ud:stop() end
end

--- Start a pending test (from `client{...}`) and return it as a live handle.
-- The handle has `:intervals()`, `:next_interval(timeout_s)`, `:wait()` and
-- `:stop()`; it is to-be-closed (closing stops the test).
-- @treturn qoslab.Test the same object, now running; or nil, message, CODE
--   (ECONNREFUSED, ENOENT for a missing namespace, ENOTSUP or EPERM for a
--   congestion control this kernel or user cannot use, ...)
-- @usage local h <close> = qoslab.client{host = '127.0.0.1'}:start()
function methods.start(self)
  local p = priv[self]
  if not p or p.mode ~= 'pending' then
    error('qoslab.Test:start: the test was already started', 2)
  end
  local ok, msg, code = begin(p)
  if not ok then return nil, msg, code end
  return self
end

--- Next live interval report.
-- Against a qoslab server a record holds both ends' entries of its grid
-- slot, as `res.intervals[k]` will: it waits for the server's entries (at
-- most 300 ms + 2 x the control RTT after its end) and has `peer_missing =
-- true` when they did not come in time (they are then only in the final
-- result). Against iperf3 (nothing live) it holds this end's entries and
-- comes at once; `peer_missing` is absent.
-- @tparam[opt=1] number timeout_s how long to wait, seconds (>= 0)
-- @treturn table|false|nil an interval table (shape as in `res.intervals`,
--   plus `peer_missing`), false when the test is over, nil on timeout
function methods.next_interval(self, timeout_s)
  local p = priv[self]
  timeout_s = check.number('qoslab.Test:next_interval', 'timeout_s', timeout_s, 0, 86400, 1)
  if p.mode ~= 'running' then return false end
  return p.ud:next_interval(timeout_s)
end

--- Iterate over interval reports as they happen; ends when the test ends.
-- @treturn function iterator yielding interval tables
-- @usage for iv in h:intervals() do print(iv.end_s, iv.sum.receiver.bits_per_second) end
function methods.intervals(self)
  local p = priv[self]
  return function()
    while p.mode == 'running' do
      local iv = p.ud:next_interval(0.5)
      if iv then return iv end
      if iv == false then return nil end
    end
    return nil
  end
end

--- Wait for the end of the test.
-- @treturn table the result table (same table on every call), or nil,
--   message, CODE when the test failed
function methods.wait(self)
  local p = priv[self]
  finish(p)
  if p.failure then return nil, p.failure[1], p.failure[2] end
  return p.result
end

--- End the test early; `wait()` still returns a result for the time run.
function methods.stop(self)
  local p = priv[self]
  if p.mode == 'running' then p.ud:stop() end
  return true
end

--- Close: stop if running (same as leaving a `<close>` scope).
methods.close = Test.__close

--- A test against an iperf3 or qoslab server (see the module text for how the
-- pending object turns into a result or a live handle).
-- @tparam table opts all keys optional except `host`:
--   `host` (string, name or address), `port` (1–65535, default 5201),
--   `proto` ("tcp" default | "udp"), `parallel` (streams, 1–128, default 1),
--   `duration_s` (s, 0.001-86400, default 10) or `bytes` (total over the streams,
--   1-2^62: the sender emits exactly that many bytes; the last TCP write is
--   shortened, and for UDP ceil(bytes / length_bytes) datagrams go, the last
--   shortened to what is left; a remainder below the 16-byte header (24 between
--   two qoslab ends) is taken from the datagram before, so only a limit below
--   one header is rounded up, to one header-long datagram; a stock iperf3
--   server sending in reverse rounds up to whole datagrams) or for UDP `packets`
--   (whole datagrams),
--   `reverse` (server sends), `bidir` (both directions at once),
--   `omit_s` (warm-up excluded from totals, 0-3600, default 0),
--   `interval_s` (report period, 0.1-3600, default 1),
--   `window_bytes` (SO_SNDBUF and SO_RCVBUF on both ends; Linux doubles it,
--   socket(7)) or `sndbuf_bytes` / `rcvbuf_bytes` separately. The client
--   sets them, like every socket option, before connect. A qoslab server
--   sets them on each accepted data socket before the test starts, and it
--   lifts TCP_WINDOW_CLAMP to the granted receive buffer, because the
--   handshake had fixed the clamp from the default buffer (case 013). Its
--   listener carries no buffer option, so the SYN-ACK window scale covers
--   net.core.rmem_max,
--   `bitrate_bps` (integer bits/s per stream, 0-2^50; UDP default 1e6, TCP
--   default unlimited; 0 = unlimited), `length_bytes` (TCP write size, up to
--   16 MiB, default 131072; UDP payload
--   16–65507, default 1460 or from the path MSS), `congestion` (TCP_CONGESTION
--   name: 1–15 of a-z, 0-9, _; before the test starts the kernel is asked
--   whether this user may use it: if not, the test fails with "ENOTSUP"
--   (the kernel lacks it: the message lists the available ones and the
--   modprobe to run) or "EPERM" (not in tcp_allowed_congestion_control)),
--   `mss_bytes` (TCP_MAXSEG, 88–32767), `tos` (IP_TOS, 0–255),
--   `nodelay` (TCP_NODELAY), `fq_rate_bps` (SO_MAX_PACING_RATE, bits/s),
--   `bind_address`, `bind_device`, `netns` (named namespace of the client
--   threads), `connect_timeout_s` (default 10), `udp_batch` (datagrams per sendmmsg,
--   1–1024), `udp_gso` (UDP_SEGMENT), `udp_drain_s` (receiver drain after the
--   sender's last datagram, 0-60 s, default max(0.25 s, 2 × the control
--   connection's smoothed RTT)), `title`. No string may hold a NUL byte;
--   `netns` is a namespace name (1–200 bytes, no "/"; `''` is an error).
-- @treturn qoslab.Test a pending test (see module text)
-- @raise on a wrong type, unknown key, out-of-range value or contradictory
--   combination, naming the field: "qoslab.client: opts.parallel: expected ..."
-- @usage print(qoslab.client{host = '127.0.0.1', duration_s = 2})
function M.client(opts)
  check_client('qoslab.client', opts)
  local t = setmetatable({}, Test)
  priv[t] = { opts = copy(opts), mode = 'pending' }
  return t
end

--- Run a test now and return its result (the eager form of `client`).
-- @tparam table opts as for `client`
-- @treturn table the result table (TRAFFIC-CONTRACT.md), or nil, message,
--   CODE (ECONNREFUSED, ETIMEDOUT, ENOENT for a missing namespace, EINTR on
--   SIGINT/SIGTERM, EPROTO for a peer that breaks the protocol, ENOTSUP or
--   EPERM for an unusable congestion control, ...)
-- @raise like `client`
-- @usage local res = assert(qoslab.traffic.run{host = '127.0.0.1', duration_s = 2})
function M.run(opts)
  check_client('qoslab.traffic.run', opts)
  local p = { opts = copy(opts), mode = 'pending' }
  local ok, msg, code = begin(p)
  if not ok then return nil, msg, code end
  finish(p)
  if p.failure then return nil, p.failure[1], p.failure[2] end
  return p.result
end

--- Start a test now and return its live handle (`client(opts):start()`).
-- @tparam table opts as for `client`
-- @treturn qoslab.Test running handle, or nil, message, CODE
function M.start(opts)
  check_client('qoslab.traffic.start', opts)
  local t = setmetatable({}, Test)
  priv[t] = { opts = copy(opts), mode = 'pending' }
  return methods.start(t)
end

-- ------------------------------------------------------------- server ----

local Server = { __name = 'qoslab.Server' }
Server.__index = Server

--- The listening port (useful with `port = 0`).
-- @treturn integer
function Server:port() return self._ud:port() end

--- Results of the last tests this server finished, oldest first (server
-- view: `local_role = "server"`). Only the last `keep_results` (default
-- 100) are kept; older ones are freed so a long-running server stays
-- bounded in memory.
-- @treturn table list of result tables; each also has `server_test` (the
--   test's number, as in `started`'s "test N") and `peer_port` (the client's
--   control connection port), to match it with its start line
-- @treturn integer number of tests finished since the start: the last
--   result listed is test number `total`, the first `total - #list + 1`
function Server:results()
  local list, total = self._ud:results()
  for _, r in ipairs(list) do as_result(r) end
  return list, total
end

--- Number of tests finished since the start (kept or already freed).
-- @treturn integer
function Server:finished() return self._ud:finished() end

--- Number of tests running now.
-- @treturn integer
function Server:tests_running() return self._ud:tests_running() end

--- Number of control connections the server refused (bad cookie,
-- malformed or oversized messages, silent clients).
-- @treturn integer
function Server:rejected() return self._ud:rejected() end

--- What went wrong so far, for a server's log.
-- @treturn integer control connections rejected (bad cookie, malformed or
--   oversized message, silence, a client that left before its test ran, a
--   test refused by a limit, an unidentified connection closed to make room)
-- @treturn integer tests that started and did not finish (client gone,
--   connection reset, ended by the data-idle watchdog or max_duration_s, ...)
-- @treturn string|nil the last of either, naming the peer, e.g. "test failed
--   from 10.0.0.2 port 41234: peer closed the control connection during the
--   test", "closed an unidentified connection, from 10.0.0.9 port 5555 (no
--   cookie for 0.3 s; its address held 8 unidentified, 0 of them data
--   connections its tests expect): max_unidentified_per_address (8) reached"
-- @treturn table the problem log: the last 256 problems (each rejection,
--   eviction, refusal and failed test) numbered above `since_seq`, oldest
--   first, each `{ seq = n (1, 2, ... since the start), test = the server's
--   test number (0 when the connection never became a test), time_unix_s,
--   host, port (the peer's), reason = the line as above }`; `total` = problems
--   since the start, `dropped` = problems above `since_seq` no longer kept
--   (more than 256 since then)
-- @tparam[opt=0] integer since_seq list only the problems numbered above it
--   (a log polls with the last `seq` it printed)
-- @usage local _, _, _, log = srv:problems(seen)
--   for _, p in ipairs(log) do print(p.reason); seen = p.seq end
function Server:problems(since_seq)
  if since_seq ~= nil and (math.type(since_seq) ~= 'integer' or since_seq < 0) then
    error('since_seq: expected an integer >= 0, got ' .. tostring(since_seq), 2)
  end
  return self._ud:problems(since_seq)
end

--- The limits in effect (see `server`; defaults filled in).
-- @treturn table `max_tests`, `max_tests_per_address`, `max_streams_per_address`,
--   `max_unidentified`, `max_unidentified_per_address`, `data_idle_s` (0 = the
--   automatic rule), `max_duration_s`, `test_buffer_bytes`, `idle_timeout_s`
--   (0 = 10 s for the cookie, 30 s for the parameters)
-- @usage print(srv:limits().max_tests_per_address) --> 2
function Server:limits() return self._ud:limits() end

--- Tests started so far (parameters accepted), for a server's log.
-- @treturn integer tests started since the server started
-- @treturn string|nil the last one: peer address, protocol, streams,
--   direction, length and client kind, e.g. "test 3 from 10.0.0.2 port 41234: UDP,
--   4 streams, reverse (server sends), 10 s at 100 Mbit/s each, qoslab client"
function Server:started() return self._ud:started() end

--- True once a `one_off` server has served its test, or after `stop()`.
-- @treturn boolean
function Server:done() return self._ud:done() end

--- Wait until at least n tests have finished since the start.
-- @tparam[opt=1] integer n number of finished tests to wait for
-- @tparam[opt=30] number timeout_s give up after this many seconds
-- @treturn table|nil the results list (the kept ones, as `results()`), or
--   nil, message, "ETIMEDOUT" / "EINTR"
-- @treturn integer tests finished since the start
function Server:wait_results(n, timeout_s)
  n = check.integer('qoslab.Server:wait_results', 'n', n, 1, 1 << 30, 1)
  timeout_s = check.number('qoslab.Server:wait_results', 'timeout_s', timeout_s, 0, 86400, 30)
  local timer = require 'qoslab.timer'
  local deadline = timer.now() + timeout_s
  while true do
    local done = self:finished()
    if done >= n then return self:results() end
    if timer.now() >= deadline then
      return nil, string.format('%d of %d tests finished within %g s', done, n, timeout_s),
        'ETIMEDOUT'
    end
    local ok, msg, code = timer.sleep(0.05)
    if not ok then return nil, msg, code end
  end
end

--- Stop accepting and end running tests (idempotent).
function Server:stop()
  if self._ud then self._ud:stop() end
  return true
end
Server.close = Server.stop
Server.__close = Server.stop
Server.__gc = Server.stop
function Server.__tostring(s)
  return tostring(s._ud)
end

--- Run an iperf3-compatible server in background threads.
-- It accepts many tests at once (iperf3 serves one) and keeps each test's
-- accounting separate.
-- @tparam[opt] table opts `port` (0–65535, default 5201; 0 picks a free
--   port, read it with `:port()`), `bind_address`, `netns` (named
--   namespace the server threads enter), `one_off` (serve one test, then
--   stop), `window_bytes` / `sndbuf_bytes` / `rcvbuf_bytes` (defaults for the
--   data sockets when the client requests none; set on each accepted data
--   socket, never on the shared listener, see `client`), `idle_timeout_s` (drop a
--   control connection silent for this long, default 30), `max_tests`
--   (concurrent tests, 1-4096, default 64), `keep_results` (finished
--   results kept for `:results()`, 0-100000, default 100; older ones are
--   freed).
--   Limits for a server shared by untrusted peers (each refusal, eviction
--   and forced end is in `:problems()` with the peer's address; a qoslab
--   client is told which limit refused it and its value; a stock iperf3
--   client gets ACCESS_DENIED, which iperf3 prints as "the server is busy
--   running a test" whatever the limit was: its protocol has no room for the
--   reason, so the server's log is where to look):
--   `max_tests_per_address` (running tests per peer address, 1-4096, default 2:
--   one peer cannot take more than 2 of the 64 slots, and a plan's
--   one-test-at-a-time sweeps never notice), `max_streams_per_address`
--   (data streams of those tests, bidir counts both ways, 1-65536, default 128 =
--   the client's `parallel` maximum), `max_unidentified_per_address`
--   (connections not yet past the cookie and parameter exchange, per
--   address, 1-65536, default 8: a client opens its data connections one at a time,
--   so 8 leaves room for several clients behind one NAT; an address whose
--   test waits for k data connections may hold k more, so a -P 128 burst is
--   never cut) and `max_unidentified` (all addresses, 1-65536, default 256);
--   over either the newest connection is kept and an unidentified one closed:
--   of that address, or at the global cap of the address most over its
--   allowance; the one silent longest, else the oldest that sent a cookie but
--   no parameters, so a flood of silent connections (also from many
--   addresses) cannot lock others out. IPv6 peers count per /64 for every
--   per-address limit (IPv4-mapped IPv6 as IPv4). `data_idle_s` (0.001-86400
--   s; a test whose streams move no byte (a TCP sender: none acknowledged)
--   for this long is ended; its data connections must arrive within it
--   too; default max(10 s, 64 x the control connection's RTO, so at least
--   12.8 s: six back-to-back RTO backoffs), at least 3 x a paced test's gap between
--   writes; raise it for experiments that cut the path for longer, e.g. a
--   link taken down for 30 s), `max_duration_s` (0.001-2678400 s: time +
--   omit a test may ask for, else it is
--   refused with iperf3's error 37; a byte-limited test is ended there;
--   default 3600: a shared server's slot is not held for more than an
--   hour unless its owner says so), `test_buffer_bytes` (1-2^40, per-test buffer
--   budget: the server's write/read buffer per stream plus the socket
--   buffer of the stream's role the test asks for, as the kernel would
--   grant it (2 x min(request, rmem_max/wmem_max)), plus the interval
--   records kept for its result (1056 + 248 B per stream each, one per
--   interval: a timed test's ceil((time + omit) / interval) + 2 are counted
--   when it asks, so 32 streams for an hour at 0.1 s intervals, 324 MB, are
--   refused; a byte- or packet-limited test is ended, with the reason, when
--   its records reach the budget); default 128 MiB: 128
--   streams of 128 KiB writes, or 32 streams with 1 MiB windows, fit; a
--   32-stream reverse test with 16 MiB writes (512 MiB) is refused).
-- @treturn qoslab.Server to-be-closed handle with `:port()`, `:results()`,
--   `:finished()`, `:wait_results(n, timeout_s)`, `:tests_running()`, `:rejected()`,
--   `:problems()`, `:limits()`,
--   `:done()`, `:stop()`; or nil,
--   message, CODE (EADDRINUSE, EACCES, ENOENT for a missing namespace, ...)
-- @raise on a wrong type, unknown key or out-of-range value, naming the field
-- @usage local srv <close> = assert(qoslab.server{port = 0})
function M.server(opts)
  opts = opts or {}
  check_opts('qoslab.server', opts, SERVER_KEYS, SERVER_ALLOWED, 1)
  local ud, msg, code = core().traffic_server(copy(opts))
  if not ud then return nil, msg, code end
  return setmetatable({ _ud = ud }, Server)
end

-- --------------------------------------------------------- formatting ----

--- Format a byte count the way iperf3 does (1024-based units).
-- @tparam number n bytes
-- @treturn string e.g. "1.10 GBytes", "741 MBytes", "512 Bytes"
function M.format_bytes(n)
  local units = { 'Bytes', 'KBytes', 'MBytes', 'GBytes', 'TBytes' }
  local i = 1
  n = n or 0
  while math.abs(n) >= 1024 and i < #units do n = n / 1024; i = i + 1 end
  if i == 1 then return string.format('%d %s', math.floor(n), units[i]) end
  local f = math.abs(n) < 10 and '%.2f %s' or math.abs(n) < 100 and '%.1f %s' or '%.0f %s'
  return string.format(f, n, units[i])
end

--- Format a rate the way iperf3 does (1000-based units).
-- @tparam number bps bits per second
-- @treturn string e.g. "9.45 Gbits/sec"
function M.format_rate(bps)
  local units = { 'bits/sec', 'Kbits/sec', 'Mbits/sec', 'Gbits/sec', 'Tbits/sec' }
  local i = 1
  bps = bps or 0
  while math.abs(bps) >= 1000 and i < #units do bps = bps / 1000; i = i + 1 end
  local f = math.abs(bps) < 10 and '%.2f %s' or math.abs(bps) < 100 and '%.1f %s' or '%.0f %s'
  return string.format(f, bps, units[i])
end

local function sid(id)
  if id == nil then return '[SUM]' end
  return string.format('[%3s]', tostring(id))
end

local function short_dir(d) return d == 'reverse' and 'rev' or 'fwd' end

--- The end of a test that measures `role` in direction `dir`.
-- @tparam string dir "forward" (client sends) or "reverse" (server sends)
-- @tparam string role "sender" or "receiver"
-- @treturn string "client" or "server"
-- @usage traffic.measuring_side('reverse', 'receiver') --> "client"
local function measuring_side(dir, role)
  if (dir == 'reverse') == (role == 'sender') then return 'server' end
  return 'client'
end
M.measuring_side = measuring_side

local function udp_receiver_text(r)
  if not r or r.lost_packets == nil then return '' end
  local total = (r.unique_packets or 0) + (r.lost_packets or 0)
  local s = string.format('  lost %d/%d (%.3g%%)', r.lost_packets, total, r.lost_pct or 0)
  if (r.duplicate_packets or 0) > 0 then s = s .. string.format(' dup %d', r.duplicate_packets) end
  if (r.out_of_order_packets or 0) > 0 then
    s = s .. string.format(' ooo %d', r.out_of_order_packets)
  end
  if (r.late_packets or 0) > 0 then s = s .. string.format(' late %d', r.late_packets) end
  if (r.invalid_packets or 0) > 0 then
    s = s .. string.format(' invalid %d', r.invalid_packets)
  end
  if r.jitter_ms then s = s .. string.format(' jitter %.3f ms', r.jitter_ms) end
  return s
end

local function row(id, dir, role, x, udp)
  if not x then return nil end
  local extra = ''
  if role == 'sender' then
    if x.retransmits then extra = string.format('  retr %d', x.retransmits) end
    if udp and x.packets then extra = extra .. string.format('  %d datagrams', x.packets) end
  elseif udp then
    extra = udp_receiver_text(x)
  end
  return string.format('%s %s %-8s %-6s %8.2f s  %12s  %15s%s', sid(id), short_dir(dir), role,
    x.side or '?', x.seconds or 0, M.format_bytes(x.bytes), M.format_rate(x.bits_per_second),
    extra)
end

local function cpu_text(c)
  if not c then return 'unknown' end
  local s = string.format('%.1f%% (user %.1f%%, system %.1f%%)', c.total_pct or 0,
    c.user_pct or 0, c.system_pct or 0)
  if c.busiest_thread_pct then
    s = s .. string.format(', busiest thread %.1f%%', c.busiest_thread_pct)
  end
  return s
end

local function buf_text(b, name)
  if not b or not b.requested_bytes or b.requested_bytes == 0 then return nil end
  local s = string.format('%s requested %d B, granted %d B', name, b.requested_bytes,
    b.granted_bytes or 0)
  if b.clamped then s = s .. ' (clamped by ' .. tostring(b.sysctl or 'a sysctl') .. ')' end
  return s
end

--- A readable multi-line summary of a result (also the result's `tostring`).
-- Per-stream rows and a [SUM] row for the sender and the receiver of each
-- direction, each labelled with the end that measured it; UDP loss,
-- duplicates, reordering and jitter; requested vs granted buffers; CPU;
-- warnings.
-- @tparam table res a result table
-- @treturn string
-- @usage print(traffic.summary(res))
function M.summary(res)
  local out = {}
  local udp = res.proto == 'udp'
  local mode = res.bidir and 'bidirectional' or res.reverse and 'reverse (server sends)'
    or 'forward (client sends)'
  local host = tostring(res.host)
  if host:find(':', 1, true) then host = '[' .. host .. ']' end   -- IPv6, RFC 3986 style
  out[#out + 1] = string.format('qoslab %s test %s:%s, peer %s, %d stream%s, %s, %s view',
    udp and 'UDP' or 'TCP', host, tostring(res.port), tostring(res.peer),
    res.parallel or 0, (res.parallel or 0) == 1 and '' or 's', mode, tostring(res.local_role))
  out[#out + 1] = string.format('duration %.2f s measured%s', res.duration_s or 0,
    (res.omit_s or 0) > 0 and string.format(' after %.2f s omitted', res.omit_s) or '')
  out[#out + 1] = '[ ID] dir role     side    seconds      transfer          bitrate'
  local dirs = { { res.reverse and 'reverse' or 'forward', res.sent, res.received } }
  if res.bidir then dirs[2] = { 'reverse', res.reverse_sent, res.reverse_received } end
  for _, d in ipairs(dirs) do
    local dir, sent, recv = d[1], d[2], d[3]
    local n = 0
    for _, s in ipairs(res.streams or {}) do
      if (s.direction or dir) == dir then
        n = n + 1
        out[#out + 1] = row(s.id, dir, 'sender', s.sender, udp)
        out[#out + 1] = row(s.id, dir, 'receiver', s.receiver, udp)
      end
    end
    if n ~= 1 then
      out[#out + 1] = row(nil, dir, 'sender', sent, udp)
      out[#out + 1] = row(nil, dir, 'receiver', recv, udp)
    end
  end
  for _, s in ipairs(res.streams or {}) do
    local a = buf_text(s.sender and s.sender.sndbuf, 'SO_SNDBUF')
    local b = buf_text(s.receiver and s.receiver.rcvbuf, 'SO_RCVBUF')
    if a or b then
      -- either may be missing (only SO_RCVBUF requested, say)
      out[#out + 1] = string.format('%s buffers: %s', sid(s.id),
        (a and b) and (a .. '; ' .. b) or a or b)
    end
  end
  if res.cpu then
    out[#out + 1] = 'cpu client: ' .. cpu_text(res.cpu.client)
    out[#out + 1] = 'cpu server: ' .. cpu_text(res.cpu.server)
  end
  local said = false
  for _, w in ipairs(res.warnings or {}) do
    if w:find('CPU-limited', 1, true) then said = true end
  end
  if res.cpu_limited and not said then
    out[#out + 1] = 'CPU-limited: a thread used >= 90% of a core; the rate may be the '
      .. "host's limit, not the network's"
  end
  for _, w in ipairs(res.warnings or {}) do out[#out + 1] = 'warning: ' .. w end
  return table.concat(out, '\n')
end

--- Lines for one live interval report, iperf3 style: one per stream entry
-- and, with more than one stream, a [SUM] line per direction and role (the
-- mean of the streams' jitter, like iperf3).
-- @tparam table iv an interval table
-- @treturn table list of strings
function M.interval_lines(iv)
  local lines = {}
  local groups, order = {}, {}
  for _, s in ipairs(iv.streams or {}) do
    local key = (s.direction or 'forward') .. ' ' .. (s.role or '?')
    if not groups[key] then groups[key] = {}; order[#order + 1] = key end
    local g = groups[key]
    g[#g + 1] = s
  end
  local tag = iv.omitted and '  (omitted)' or ''
  local span = string.format('%6.2f-%-6.2f s', iv.start_s or 0, iv.end_s or 0)
  for _, key in ipairs(order) do
    local g = groups[key]
    local dir, role = key:match('^(%S+) (%S+)$')
    local function line(id, x)
      local extra = ''
      if x.retransmits then extra = extra .. string.format('  retr %d', x.retransmits) end
      if x.snd_cwnd_bytes then extra = extra .. '  cwnd ' .. M.format_bytes(x.snd_cwnd_bytes) end
      if x.rtt_us then extra = extra .. string.format('  rtt %.0f us', x.rtt_us) end
      if x.lost_packets then
        extra = extra .. string.format('  lost %d/%d', x.lost_packets,
          (x.unique_packets or x.packets or 0) + x.lost_packets)
      elseif x.packets and role == 'sender' then
        extra = extra .. string.format('  %d datagrams', x.packets)
      end
      if x.jitter_ms then extra = extra .. string.format('  jitter %.3f ms', x.jitter_ms) end
      return string.format('%s %s %s  %12s  %15s%s  %s%s', sid(id), short_dir(dir), span,
        M.format_bytes(x.bytes), M.format_rate(x.bits_per_second), extra, role, tag)
    end
    if #g == 1 then
      lines[#lines + 1] = line(g[1].id, g[1])
    else
      for _, s in ipairs(g) do lines[#lines + 1] = line(s.id, s) end
      local sum = { bytes = 0 }
      local jit, nj = 0, 0
      for _, s in ipairs(g) do
        sum.bytes = sum.bytes + (s.bytes or 0)
        if s.retransmits then sum.retransmits = (sum.retransmits or 0) + s.retransmits end
        if s.packets then sum.packets = (sum.packets or 0) + s.packets end
        if s.lost_packets then sum.lost_packets = (sum.lost_packets or 0) + s.lost_packets end
        if s.unique_packets then sum.unique_packets = (sum.unique_packets or 0) + s.unique_packets end
        if s.jitter_ms then jit = jit + s.jitter_ms; nj = nj + 1 end
      end
      if nj > 0 then sum.jitter_ms = jit / nj end
      local secs = iv.seconds or ((iv.end_s or 0) - (iv.start_s or 0))
      sum.bits_per_second = secs > 0 and sum.bytes * 8 / secs or 0.0
      lines[#lines + 1] = line(nil, sum)
    end
  end
  return lines
end

-- ---------------------------------------------------------- iperf3 JSON --

local function local_entry(res, dir, role)
  return measuring_side(dir, role) == res.local_role
end

-- iperf3's "sender" flag: is the local end the sender of that direction.
local function local_sends(res, dir)
  return (dir == 'forward') == (res.local_role == 'client')
end

local function data_dir(res) return res.reverse and 'reverse' or 'forward' end

local function interval_json(res, iv)
  local out = { streams = {} }
  local udp = res.proto == 'udp'
  local sums = {}
  local secs = iv.seconds or ((iv.end_s or 0) - (iv.start_s or 0))
  for _, s in ipairs(iv.streams or {}) do
    local dir = s.direction or data_dir(res)
    if local_entry(res, dir, s.role) then
      local e = { socket = s.id, start = iv.start_s, ['end'] = iv.end_s, seconds = secs,
        bytes = s.bytes, bits_per_second = s.bits_per_second, omitted = iv.omitted == true,
        sender = local_sends(res, dir) }
      if s.role == 'sender' and not udp then
        e.retransmits = s.retransmits
        e.snd_cwnd = s.snd_cwnd_bytes
        e.snd_wnd = s.snd_wnd_bytes
        e.rtt = s.rtt_us
        e.rttvar = s.rttvar_us
        e.pmtu = s.pmtu_bytes
      elseif udp then
        e.packets = s.packets
        if s.role == 'receiver' then
          e.packets = (s.packets or 0) + (s.lost_packets or 0)
          if s.unique_packets then e.packets = s.unique_packets + (s.lost_packets or 0) end
          e.jitter_ms = s.jitter_ms or 0.0
          e.lost_packets = s.lost_packets or 0
          e.lost_percent = e.packets > 0 and 100.0 * e.lost_packets / e.packets or 0.0
        end
      end
      out.streams[#out.streams + 1] = e
      local key = res.bidir and dir or 'all'
      local sum = sums[key]
      if not sum then
        sum = { start = iv.start_s, ['end'] = iv.end_s, seconds = secs, bytes = 0,
          omitted = iv.omitted == true, sender = e.sender, _jit = 0, _nj = 0 }
        sums[key] = sum
      end
      sum.bytes = sum.bytes + (s.bytes or 0)
      if e.retransmits then sum.retransmits = (sum.retransmits or 0) + e.retransmits end
      if e.packets then sum.packets = (sum.packets or 0) + e.packets end
      if e.lost_packets then sum.lost_packets = (sum.lost_packets or 0) + e.lost_packets end
      if e.jitter_ms then sum._jit = sum._jit + e.jitter_ms; sum._nj = sum._nj + 1 end
    end
  end
  for key, sum in pairs(sums) do
    sum.bits_per_second = secs > 0 and sum.bytes * 8 / secs or 0.0
    if sum._nj > 0 then sum.jitter_ms = sum._jit / sum._nj end
    if sum.lost_packets then
      sum.lost_percent = (sum.packets or 0) > 0 and 100.0 * sum.lost_packets / sum.packets or 0.0
    end
    sum._jit, sum._nj = nil, nil
    if key == 'reverse' then out.sum_bidir_reverse = sum else out.sum = sum end
  end
  if not out.sum then
    out.sum = { start = iv.start_s, ['end'] = iv.end_s, seconds = secs, bytes = 0,
      bits_per_second = 0.0, omitted = iv.omitted == true, sender = local_sends(res, data_dir(res)) }
  end
  return out
end

local function total_json(x, sender_flag, tcp_sender)
  local e = { start = 0, ['end'] = x.seconds, seconds = x.seconds, bytes = x.bytes,
    bits_per_second = x.bits_per_second, sender = sender_flag }
  if tcp_sender then e.retransmits = x.retransmits end
  return e
end

local function udp_total(sent, recv, flag, view)
  local packets = sent.packets or ((recv.unique_packets or 0) + (recv.lost_packets or 0))
  local src = view == 'sender' and sent or recv
  return { start = 0, ['end'] = src.seconds, seconds = src.seconds, bytes = src.bytes,
    bits_per_second = src.bits_per_second,
    jitter_ms = view == 'sender' and 0.0 or (recv.jitter_ms or 0.0),
    lost_packets = view == 'sender' and 0 or (recv.lost_packets or 0),
    packets = packets,
    lost_percent = view == 'sender' and 0.0 or (recv.lost_pct or 0.0),
    -- iperf3 3.12 marks UDP's sum_sent as the sender's and sum_received
    -- as the receiver's, whichever end prints them
    sender = view == 'sender' }
end

--- Convert a result to iperf3's `-J` JSON schema (as printed by iperf3 3.12).
--
-- `start` (version, system_info, timestamp, connecting_to, test_start,
-- sock_bufsize, sndbuf_actual, rcvbuf_actual, target_bitrate), `intervals`
-- (the local end's measurements: `streams`, `sum`, and with bidir
-- `sum_bidir_reverse`; omitted intervals included with `omitted = true` as
-- iperf3 does), `end` (`streams` with `sender`/`receiver` for TCP or `udp`
-- for UDP, `sum_sent`, `sum_received`, for bidir `sum_sent_bidir_reverse`
-- and `sum_received_bidir_reverse`, for UDP `sum`, and
-- `cpu_utilization_percent` with host_* from the local end and remote_*
-- from the peer). `socket` holds qoslab's stream id. Keys qoslab did not
-- measure (e.g. `snd_wnd`, `pmtu`) are left out rather than set to 0;
-- `sender` is true where the local end sent that direction's data.
-- @tparam table res a result table
-- @treturn table a plain table; encode with cjson / dkjson
-- @usage print(require('cjson').encode(traffic.to_iperf3_json(res)))
function M.to_iperf3_json(res)
  local o = res.options or {}
  local udp = res.proto == 'udp'
  local st1 = res.streams and res.streams[1] or {}
  local lsnd = local_sends(res, data_dir(res))
  local mybuf = lsnd and st1.sender or st1.receiver or {}
  local sndbuf = (lsnd and mybuf.sndbuf) or {}
  local rcvbuf = (not lsnd and mybuf.rcvbuf) or {}
  local blksize = o.length_bytes
  if not blksize then
    if udp and res.sent and (res.sent.packets or 0) > 0 then
      blksize = res.sent.bytes // res.sent.packets
    else
      blksize = udp and 1460 or 131072
    end
  end
  local target = o.bitrate_bps or (udp and 1000000 or 0)
  local start_time = res.start_time_unix_s or 0
  local start = {
    connected = {},
    version = 'qoslab ' .. tostring(require('qoslab.core')._VERSION),
    system_info = M._uname(),
    timestamp = { time = os.date('!%a, %d %b %Y %H:%M:%S GMT', math.floor(start_time)),
      timesecs = math.floor(start_time) },
    connecting_to = { host = res.host, port = res.port },
    target_bitrate = math.tointeger(target) or target,
    sock_bufsize = o.window_bytes or 0,
    sndbuf_actual = sndbuf.granted_bytes or 0,
    rcvbuf_actual = rcvbuf.granted_bytes or 0,
    test_start = {
      protocol = udp and 'UDP' or 'TCP', num_streams = res.parallel,
      blksize = blksize, omit = o.omit_s or res.omit_s or 0,
      duration = o.duration_s or ((o.bytes or o.packets) and 0 or 10),
      bytes = o.bytes or 0, blocks = o.packets or 0,
      reverse = res.reverse and 1 or 0, tos = o.tos or 0,
      target_bitrate = math.tointeger(target) or target,
    },
  }
  if o.title then start.title = o.title end
  for _, s in ipairs(res.streams or {}) do
    start.connected[#start.connected + 1] = { socket = s.id, remote_host = res.host,
      remote_port = res.port }
  end
  local intervals = {}
  for _, iv in ipairs(res.intervals or {}) do intervals[#intervals + 1] = interval_json(res, iv) end

  local e = { streams = {} }
  for _, s in ipairs(res.streams or {}) do
    local dir = s.direction or data_dir(res)
    local flag = local_sends(res, dir)
    local snd, rcv = s.sender or {}, s.receiver or {}
    if udp then
      local lview = flag and snd or rcv
      e.streams[#e.streams + 1] = { udp = { socket = s.id, start = 0, ['end'] = lview.seconds,
        seconds = lview.seconds, bytes = lview.bytes, bits_per_second = lview.bits_per_second,
        jitter_ms = rcv.jitter_ms or 0.0, lost_packets = rcv.lost_packets or 0,
        packets = snd.packets or ((rcv.unique_packets or 0) + (rcv.lost_packets or 0)),
        lost_percent = rcv.lost_pct or 0.0, out_of_order = rcv.out_of_order_packets or 0,
        sender = flag } }
    else
      local se = total_json(snd, flag, true)
      se.socket = s.id
      se.max_snd_cwnd = snd.max_snd_cwnd_bytes
      se.max_rtt, se.min_rtt, se.mean_rtt = snd.max_rtt_us, snd.min_rtt_us, snd.mean_rtt_us
      local re = total_json(rcv, flag, false)
      re.socket = s.id
      e.streams[#e.streams + 1] = { sender = se, receiver = re }
    end
  end
  local function sums(sent, recv, dir, suffix)
    if not sent or not recv then return end
    local flag = local_sends(res, dir)
    if udp then
      e['sum_sent' .. suffix] = udp_total(sent, recv, flag, 'sender')
      e['sum_received' .. suffix] = udp_total(sent, recv, flag, 'receiver')
    else
      e['sum_sent' .. suffix] = total_json(sent, flag, true)
      e['sum_received' .. suffix] = total_json(recv, flag, false)
    end
  end
  sums(res.sent, res.received, data_dir(res), '')
  if res.bidir then sums(res.reverse_sent, res.reverse_received, 'reverse', '_bidir_reverse') end
  if udp and res.sent and res.received then
    -- iperf3's UDP "sum": the local end's bytes with the receiver's loss and jitter.
    local s = udp_total(res.sent, res.received, lsnd, 'receiver')
    local lview = lsnd and res.sent or res.received
    s.bytes, s.bits_per_second = lview.bytes, lview.bits_per_second
    s.seconds, s['end'] = lview.seconds, lview.seconds
    s.sender = lsnd
    e.sum = s
  end
  local mine = res.cpu and res.cpu[res.local_role]
  local peer = res.cpu and res.cpu[res.local_role == 'client' and 'server' or 'client']
  if mine or peer then
    local c = {}
    if mine then c.host_total, c.host_user, c.host_system = mine.total_pct, mine.user_pct, mine.system_pct end
    if peer then c.remote_total, c.remote_user, c.remote_system = peer.total_pct, peer.user_pct, peer.system_pct end
    e.cpu_utilization_percent = c
  end
  if not udp and o.congestion then
    e.sender_tcp_congestion = o.congestion
    e.receiver_tcp_congestion = o.congestion
  end
  return { start = start, intervals = intervals, ['end'] = e }
end

local uname_cache
-- `uname -a` for iperf3's start.system_info (internal; cached).
function M._uname()
  if not uname_cache then
    uname_cache = require('qoslab.fs').uname_a()
  end
  return uname_cache
end

-- --------------------------------------------------------- invariants ----

local function finite_everywhere(t, path, bad, seen)
  seen = seen or {}
  if seen[t] then return end
  seen[t] = true
  for k, v in pairs(t) do
    local p = path .. '.' .. tostring(k)
    if type(v) == 'number' and (v ~= v or v == math.huge or v == -math.huge) then
      bad[#bad + 1] = p .. ' is ' .. tostring(v)
    elseif type(v) == 'table' then
      finite_everywhere(v, p, bad, seen)
    end
  end
end

local COUNTERS = { bytes = true, packets = true, retransmits = true, unique_packets = true,
  lost_packets = true, duplicate_packets = true, out_of_order_packets = true,
  late_packets = true, invalid_packets = true, writes = true }

local function integer_counters(t, path, bad, seen)
  seen = seen or {}
  if seen[t] then return end
  seen[t] = true
  for k, v in pairs(t) do
    local p = path .. '.' .. tostring(k)
    if COUNTERS[k] and type(v) == 'number' and math.type(v) ~= 'integer' then
      bad[#bad + 1] = p .. ' is not an integer (' .. tostring(v) .. ')'
    elseif COUNTERS[k] and type(v) == 'number' and v < 0 then
      bad[#bad + 1] = p .. ' is negative (' .. tostring(v) .. ')'
    elseif type(v) == 'table' then
      integer_counters(v, p, bad, seen)
    end
  end
end

--- Check a result's bookkeeping identities.
--
-- No NaN or infinity anywhere; counters are non-negative integers; per side
-- and direction the [SUM] equals the sum of its streams (bytes, retransmits,
-- UDP packets and loss counters); for UDP `lost + unique == sent` on every
-- stream and in the sums; Σ of the non-omitted interval bytes of every
-- stream, role and direction equals that stream's total wherever that side's
-- intervals are present (for UDP also a sender's packets and a receiver's
-- unique and lost datagrams); out-of-order <= unique in every interval;
-- every interval has a positive duration.
-- @tparam table res a result table
-- @treturn boolean true when every identity holds
-- @treturn table list of violated identities (strings), empty when none
-- @usage local ok, why = traffic.invariants(res); assert(ok, table.concat(why, '\n'))
function M.invariants(res)
  local bad = {}
  finite_everywhere(res, 'res', bad)
  integer_counters(res, 'res', bad)
  local udp = res.proto == 'udp'
  local function eq(a, b, what)
    if a ~= b then bad[#bad + 1] = string.format('%s: %s ~= %s', what, tostring(a), tostring(b)) end
  end
  local dirs = { { data_dir(res), res.sent, res.received } }
  if res.bidir then dirs[2] = { 'reverse', res.reverse_sent, res.reverse_received } end
  for _, d in ipairs(dirs) do
    local dir, sent, recv = d[1], d[2], d[3]
    if not sent or not recv then
      bad[#bad + 1] = dir .. ': sent/received totals missing'
    else
      local ss = { bytes = 0, retransmits = 0, packets = 0 }
      local rs = { bytes = 0, unique_packets = 0, lost_packets = 0, duplicate_packets = 0,
        out_of_order_packets = 0, invalid_packets = 0 }
      local n = 0
      for _, s in ipairs(res.streams or {}) do
        if (s.direction or dir) == dir then
          n = n + 1
          for k in pairs(ss) do ss[k] = ss[k] + ((s.sender or {})[k] or 0) end
          for k in pairs(rs) do rs[k] = rs[k] + ((s.receiver or {})[k] or 0) end
          if udp and s.sender and s.receiver then
            eq((s.receiver.lost_packets or 0) + (s.receiver.unique_packets or 0),
              s.sender.packets, string.format('%s stream %s lost + unique == sent', dir, s.id))
          end
        end
      end
      if n == 0 then bad[#bad + 1] = dir .. ': no streams' end
      eq(ss.bytes, sent.bytes, dir .. ' sender SUM bytes == sum of streams')
      eq(rs.bytes, recv.bytes, dir .. ' receiver SUM bytes == sum of streams')
      if udp then
        eq(ss.packets, sent.packets, dir .. ' sender SUM packets == sum of streams')
        for _, k in ipairs { 'unique_packets', 'lost_packets', 'duplicate_packets',
            'out_of_order_packets', 'invalid_packets' } do
          eq(rs[k], recv[k] or 0, dir .. ' receiver SUM ' .. k .. ' == sum of streams')
        end
        eq((recv.lost_packets or 0) + (recv.unique_packets or 0), sent.packets,
          dir .. ' lost + unique == sent')
      else
        eq(ss.retransmits, sent.retransmits or 0, dir .. ' sender SUM retransmits == sum of streams')
      end
    end
  end
  -- Intervals: per (stream id, direction, role) sums of non-omitted bytes.
  local acc = {}
  for i, iv in ipairs(res.intervals or {}) do
    local secs = iv.seconds or ((iv.end_s or 0) - (iv.start_s or 0))
    if not (secs > 0) then bad[#bad + 1] = string.format('interval %d has duration %s', i, secs) end
    if i > 1 and res.intervals[i - 1].end_s and iv.start_s
        and math.abs(iv.start_s - res.intervals[i - 1].end_s) > 1e-6 then
      bad[#bad + 1] = string.format('interval %d starts at %.6f, previous ended at %.6f', i,
        iv.start_s, res.intervals[i - 1].end_s)
    end
    for _, s in ipairs(iv.streams or {}) do
      if (s.out_of_order_packets or 0) > (s.unique_packets or math.huge) then
        bad[#bad + 1] = string.format('interval %d stream %s: out-of-order %d > unique %d', i,
          tostring(s.id), s.out_of_order_packets, s.unique_packets)
      end
      if not iv.omitted then
        local key = string.format('%s/%s/%s', tostring(s.id), s.direction or data_dir(res),
          tostring(s.role))
        local a = acc[key] or {}
        acc[key] = a
        for _, k in ipairs(udp and { 'bytes', 'packets', 'unique_packets', 'lost_packets' }
            or { 'bytes' }) do
          if s[k] then a[k] = (a[k] or 0) + s[k] end
        end
      end
    end
  end
  for _, s in ipairs(res.streams or {}) do
    local dir = s.direction or data_dir(res)
    for _, role in ipairs { 'sender', 'receiver' } do
      local key = string.format('%s/%s/%s', tostring(s.id), dir, role)
      for k, sum in pairs(acc[key] or {}) do
        -- UDP: a sender's packets, a receiver's unique and lost datagrams
        local counted = k == 'bytes' or (role == 'sender') == (k == 'packets')
        if s[role] and s[role][k] and counted then
          eq(sum, s[role][k], string.format('stream %s %s %s: sum of interval %s == total',
            tostring(s.id), dir, role, k))
        end
      end
    end
  end
  return #bad == 0, bad
end

return M
