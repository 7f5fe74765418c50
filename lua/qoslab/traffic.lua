--- The traffic engine: iperf3-compatible TCP/UDP servers and clients.
--
-- A thin façade over `qoslab.core.traffic_server` / `traffic_client` (the
-- multithreaded C engine): it has the C core check option tables where the
-- caller wrote them, gives results a readable `tostring`, converts results
-- to iperf3's `-J` JSON schema and checks a result's bookkeeping identities.
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
-- The result table (a plain table): `res.sent`,
-- `res.received` (the test's data direction, with `side` naming which end
-- measured), `res.reverse_sent` / `res.reverse_received` with `bidir`,
-- `res.streams[i].sender|receiver` (with `sndbuf` / `rcvbuf` requested,
-- granted, clamped), `res.intervals[i]`, `res.cpu`, `res.cpu_limited`,
-- `res.warnings`, `res.peer`. This façade adds `res.options`, a copy of
-- the options the test was started with.
-- @module qoslab.traffic
local check = require 'qoslab.check'
local test = require 'qoslab.traffic.test'
local Server = require 'qoslab.traffic.server'
local summary = require 'qoslab.traffic.summary'
local iperf3_json = require 'qoslab.traffic.iperf3_json'
local invariants = require 'qoslab.traffic.invariants'
local latency = require 'qoslab.latency'

local M = {}

local core = check.core

-- ------------------------------------------------------------ options ----

-- Every rule of the options (keys, types, ranges, the cross-field rules) is
-- the C core's, written once (csrc/core/engine/options.c) and run by the
-- binding's check-only calls; their message is raised at the line that
-- called the public function, also for a test that starts later. Returns
-- the options as the test will run them (the core's defaults filled in).
local function checked_client(ctx, opts)
  local filled = check.call(3, core().traffic_client_check, opts, ctx)
  return filled  -- not a tail call: the level counts this frame
end

-- A raw copy (no __pairs), as the check reads the options raw.
local copy = check.raw_copy

-- The test's options without `probe`, and the probe (`{ opts, filled }`,
-- checked by the core's probe rules, raised at the public function's
-- caller) or nil. `probe = true` is a probe with every default.
local function split_probe(ctx, opts)
  if type(opts) ~= 'table' or rawget(opts, 'probe') == nil then return opts, nil end
  local o = copy(opts)
  local probe = o.probe
  o.probe = nil
  if probe == true then probe = {} end
  -- `true` is taken too, so the message says so (level 2: the public caller's)
  if type(probe) ~= 'table' then check.fail(ctx, 'opts.probe', 'a table or true', probe, 2) end
  local filled = latency.check_beside(ctx, probe, 3)
  return o, { opts = copy(probe), filled = filled }
end

-- How late a test may start after its `start_at_mono_ns` and still run
-- (it then starts at once): 1 s, in ns.
M.START_LATE_MAX_NS = 1000000000

-- The options without `start_at_mono_ns`, and that time (integer ns) or
-- nil. A value that is no CLOCK_MONOTONIC time in ns (integer >= 0), or one
-- more than START_LATE_MAX_NS ago (unless any_time), is raised naming the
-- field at the public function's caller (level 3 from here).
local function split_start(ctx, opts, any_time)
  if type(opts) ~= 'table' or rawget(opts, 'start_at_mono_ns') == nil then return opts, nil end
  local o = copy(opts)
  local at = o.start_at_mono_ns
  o.start_at_mono_ns = nil
  local n = (type(at) == 'number' and at == math.floor(at)) and math.tointeger(at) or nil
  if not n or n < 0 then
    check.fail(ctx, 'opts.start_at_mono_ns', 'a CLOCK_MONOTONIC time in integer nanoseconds '
      .. '>= 0 (qoslab.timer.now_ns())', at, 2)
  end
  local now = core().now_ns()
  if not any_time and now - n > M.START_LATE_MAX_NS then
    error(string.format('%s: opts.start_at_mono_ns: expected a time at most %g s in the past '
      .. '(CLOCK_MONOTONIC now %d ns), got %d (%.3f s ago)', ctx, M.START_LATE_MAX_NS / 1e9, now,
      n, (now - n) / 1e9), 3)
  end
  return o, n
end

-- ------------------------------------------------------------- client ----

--- Metatable of result tables: only `__tostring` (the summary) and `__name`.
M.Result = require('qoslab.traffic.result').Result

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
--   handshake had fixed the clamp from the default buffer. Its
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
--   `tos_per_stream` (a list of one TOS byte 0–255 per stream, exactly
--   `parallel` entries, not with `tos`: stream i of each direction carries
--   entry i, also the streams a qoslab server sends; a stock iperf3 server
--   sends its streams unmarked and the result warns),
--   `nodelay` (TCP_NODELAY), `skip_rx_copy` (TCP receivers read with MSG_TRUNC: the kernel
--   counts and drops the data, nothing is copied out; at both ends when the peer is a
--   qoslab server, else only this end's receivers and the result warns), `zerocopy` (TCP
--   senders write with MSG_ZEROCOPY, at both ends with a qoslab server; each stream this end
--   sent reports `res.streams[i].zerocopy = { sends, completed, copied }`), `cpu_affinity` (a CPU
--   number 0–1023 or a list of 1–128: stream thread k of this end runs on entry k % n; a CPU
--   this process may not use fails with "EINVAL"), `server_cpu_affinity` (the same for the
--   server's stream threads; one CPU travels as iperf3's `server_affinity`, which a stock
--   iperf3 server applies to its whole process; a list only to a qoslab server, else the
--   result warns), `fq_rate_bps` (SO_MAX_PACING_RATE, bits/s),
--   `bind_address`, `bind_device`, `netns` (named namespace of the client
--   threads), `connect_timeout_s` (default 10), `udp_batch` (datagrams per sendmmsg,
--   1–1024, default 32), `udp_gso` (UDP_SEGMENT), `udp_drain_s` (receiver drain after the
--   sender's last datagram, 0-60 s, default max(0.25 s, 2 × the control
--   connection's smoothed RTT)), `title`,
--   `probe` (a table, or `true` for every default: a latency probe beside
--   the test, `qoslab.latency`'s options without `host`, `netns`,
--   `bind_address` and `duration_s`, which come from the test: `proto`,
--   `port` (default the test's), `interval_ms`, `tos`, `payload_bytes`,
--   `idle_s` (default 2: probed alone before the load and after it),
--   `timeout_ms`, `clock_synced`; the result gets `res.latency` and each
--   interval `latency`, see manual/results.md),
--   `start_at_mono_ns` (integer ns of CLOCK_MONOTONIC, `qoslab.timer.now_ns()`:
--   the test starts when this host's clock reaches it, waited for with the
--   precise sleep, so tests on several hosts start together; up to 1 s in the
--   past it starts at once; the result then has `start_late_ns`, how long
--   after that time it started (>= 0), `started_mono_ns`, and the time in
--   `res.options`). No string may hold a NUL byte;
--   `netns` is a namespace name (1–200 bytes, no "/"; `''` is an error).
-- @treturn qoslab.Test a pending test (see module text)
-- @raise on a wrong type, unknown key, out-of-range value or contradictory
--   combination, naming the field: "qoslab.client: opts.parallel: expected
--   an integer in [1, 128], got 0", at the caller's line (the C core's one
--   check, `core.traffic_client_check`)
-- @usage print(qoslab.client{host = '127.0.0.1', duration_s = 2})
function M.client(opts)
  local o, start_at = split_start('qoslab.client', opts)
  local probe
  o, probe = split_probe('qoslab.client', o)
  local filled = checked_client('qoslab.client', o)
  return test.pending(copy(o), filled, probe, start_at)
end

--- Run a test now and return its result (the eager form of `client`).
-- @tparam table opts as for `client`
-- @treturn table the result table (see the module text), or nil, message,
--   CODE (ECONNREFUSED, ETIMEDOUT, ENOENT for a missing namespace, EPROTO
--   for a peer that breaks the protocol, ECONNRESET
--   for one that closes mid-test, EBUSY when the server refuses the test as
--   busy or over a per-address limit, ECONNABORTED when it refuses it for
--   another reason (e.g. over its max_duration_s) or ends it, ENOTSUP or
--   EPERM for an unusable congestion control, EINVAL for a `cpu_affinity`
--   CPU this process may not run on, ENODEV for a missing `bind_device`
--   (these before anything connects); with `probe`, before any load:
--   ECONNREFUSED (nothing listens there), EPROTONOSUPPORT (no qoslab
--   responder, e.g. iperf3 -s: use `proto = "icmp"`), ETIMEDOUT (no echo reply), EACCES (ping sockets
--   refused), ...; ELINKFAILED for a test in the namespace of a
--   `qoslab.testbed` whose native link failed, before or during the test:
--   it then ends at once)
-- @raise like `client` (also when `start_at_mono_ns` is more than 1 s past);
--   and on SIGINT, SIGTERM or SIGHUP (also while waiting for
--   `start_at_mono_ns`) while qoslab's
--   signal handlers are installed (`qoslab run`, the CLI): the test stops and
--   qoslab.core's interruption error (code "EINTR", `signal` the signal's
--   name) is raised, so the plan ends and `qoslab run` exits 130/143/129
--   (also when the plan catches it with pcall). Under a plain lua5.4, the
--   interpreter raises its own "interrupted!".
-- @usage local res = assert(qoslab.traffic.run{host = '127.0.0.1', duration_s = 2})
function M.run(opts)
  local o, start_at = split_start('qoslab.traffic.run', opts)
  local probe
  o, probe = split_probe('qoslab.traffic.run', o)
  local filled = checked_client('qoslab.traffic.run', o)
  return test.run(copy(o), filled, probe, start_at)
end

--- What this host refuses of a test's options, checked without starting
-- anything (a test's start makes the same checks first, before a delayed
-- start, its probe or any connection): the `congestion` control among
-- those this kernel and user may use, the `cpu_affinity` CPUs among those
-- this process may run on, the `netns` one that can be entered, the
-- `bind_device` a device of it.
-- @tparam table opts as for `client`
-- @treturn true, or nil, message, CODE (ENOTSUP or EPERM: `congestion`;
--   EINVAL: `cpu_affinity`; ENOENT or EPERM: `netns`; ENODEV:
--   `bind_device`), FIELD (the option: "opts.cpu_affinity", ...)
-- @raise like `client`, naming qoslab.traffic.check_host
-- @usage assert(qoslab.traffic.check_host{host = '10.0.0.2', cpu_affinity = 3})
function M.check_host(opts)
  -- (when the test starts is not this host's to refuse)
  local o = split_start('qoslab.traffic.check_host', opts, true)
  o = split_probe('qoslab.traffic.check_host', o)
  checked_client('qoslab.traffic.check_host', o)
  return core().traffic_client_host_check(copy(o), 'qoslab.traffic.check_host')
end

--- Start a test now and return its live handle (`client(opts):start()`).
-- @tparam table opts as for `client`
-- @treturn qoslab.Test running handle, or nil, message, CODE when it cannot
--   start: ENOTSUP or EPERM for an unusable `congestion`, ENOMEM or EAGAIN
--   (no memory or thread); a failure once it runs (ECONNREFUSED, ENOENT
--   for a missing namespace, ... as `run`) comes from the handle's `:wait()`
-- @raise like `client`, naming qoslab.traffic.start; like `run` on a signal
--   while waiting for `start_at_mono_ns`
function M.start(opts)
  local o, start_at = split_start('qoslab.traffic.start', opts)
  local probe
  o, probe = split_probe('qoslab.traffic.start', o)
  local filled = checked_client('qoslab.traffic.start', o)
  return test.start(copy(o), filled, probe, start_at)
end

-- ------------------------------------------------------------- server ----

--- Run an iperf3-compatible server in background threads.
-- It accepts many tests at once (iperf3 serves one) and keeps each test's
-- accounting separate.
-- @tparam[opt] table opts `port` (0–65535, default 5201; 0 picks a free
--   port, read it with `:port()`), `bind_address`, `netns` (named
--   namespace the server threads enter), `one_off` (serve one test, then
--   stop), `window_bytes` / `sndbuf_bytes` / `rcvbuf_bytes` (defaults for the
--   data sockets when the client requests none; set on each accepted data
--   socket, never on the shared listener, see `client`), `idle_timeout_s` (drop a
--   control connection or TCP probe session silent for this long, 0.001-86400 s,
--   default 30; a new connection has its own, shorter cookie timeout: one
--   that has not sent its whole cookie within 10 s of its accept, or within
--   `idle_timeout_s` when that is shorter, is closed, logged as "no cookie
--   within the cookie timeout (10 s)": every client sends its cookie at once,
--   so a longer silence is no client but holds a slot of
--   `max_unidentified`), `max_tests`
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
--   (data streams of those tests, 1-65536, default 128: the client's
--   `parallel` maximum one way; a bidir test counts its streams twice, so
--   `parallel = 128, bidir = true` asks 256 and is refused, EBUSY, unless
--   this is raised), `max_unidentified_per_address`
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
-- @raise on a wrong type, unknown key or out-of-range value, naming the field,
--   at the caller's line (the C core's one check, `core.traffic_server_check`)
-- @usage local srv <close> = assert(qoslab.server{port = 0})
function M.server(opts)
  opts = opts or {}
  check.call(2, core().traffic_server_check, opts, 'qoslab.server')
  local ud, msg, code = core().traffic_server(copy(opts))
  if not ud then return nil, msg, code end
  return setmetatable({ _ud = ud }, Server)
end

-- ------------------------------------------- text, iperf3 JSON, checks ----

M.format_bytes = summary.format_bytes
M.format_rate = summary.format_rate
M.summary = summary.summary
M.interval_lines = summary.interval_lines
M.latency_lines = summary.latency_lines
M.latency_interval_line = summary.latency_interval_line
M.to_iperf3_json = iperf3_json.to_iperf3_json
M._uname = iperf3_json._uname
M.invariants = invariants.invariants

return M

