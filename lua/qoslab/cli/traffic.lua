--- `qoslab server` and `qoslab client`: iperf3-like command lines over
-- `qoslab.traffic`.
--
-- Flags follow iperf3 (3.12) where iperf3 has them, with the same unit
-- suffixes: for rates (-b, --fq-rate) K/M/G/T multiply by 1000 (either
-- case); for sizes (-l, -n, -w, --sndbuf, --rcvbuf) by 1024 (either case),
-- as iperf3's own parser does (checked with `iperf3 -J`: `-b 2K` gives
-- 2000 bit/s, `-l 1k` 1024 bytes). Unlike iperf3, an unknown suffix or a
-- malformed number is an error (exit status 2), not silently truncated.
-- @module qoslab.cli.traffic
local cli = require 'qoslab.cli'
local output = require 'qoslab.cli.output'

-- An interval record with only the entries measured by `side`.
local function side_only(iv, side)
  local c = {}
  for k, v in pairs(iv) do c[k] = v end
  c.streams = {}
  for _, e in ipairs(iv.streams or {}) do
    if e.side == side then c.streams[#c.streams + 1] = e end
  end
  return c
end

local M = {}

-- ---------------------------------------------------------- converters --

-- Returns the value, or nil, message and a code ("NEGATIVE" for a value
-- below 0, "EINVAL" for anything else) that callers decide on.
local function parse_scaled(s, base, what)
  if type(s) ~= 'string' then return nil, what .. ': expected a string', 'EINVAL' end
  if s:match('^%s*%-') then
    return nil, string.format("%s: '%s' is negative: expected %s >= 0 (%s = %d)",
      what, s, what == 'rate' and 'bits/s' or 'bytes', base == 1024 and 'K/M/G' or 'K/M/G/T',
      base), 'NEGATIVE'
  end
  local num, suffix = s:match('^%s*([%d%.]+[eE]?[%+%-]?%d*)%s*([kKmMgGtT]?)%s*$')
  local n = num and tonumber(num)
  if not n or n ~= n or n == math.huge then
    if s:find('/', 1, true) then
      return nil, string.format("%s: '%s': burst mode (rate/count) is not supported", what, s),
        'EINVAL'
    end
    -- the suffixes --help names: K/M/G for sizes (1024), K/M/G/T for rates
    return nil, string.format("%s: '%s' is not a number with an optional %s suffix (K = %d)",
      what, s, base == 1024 and 'K, M or G' or 'K, M, G or T', base), 'EINVAL'
  end
  local exp = ({ k = 1, m = 2, g = 3, t = 4 })[suffix:lower()] or 0
  return n * base ^ exp
end

--- Parse an iperf3 rate ("10M", "1.5G", "2k", "100"): bits/s, 1000-based.
-- @tparam string s
-- @treturn number bits per second, or nil, message
function M.parse_rate(s)
  local v, err = parse_scaled(s, 1000, 'rate')
  if not v then return nil, err end
  return math.tointeger(v) or v
end

--- Parse an iperf3 size ("128K", "1M", "1.5k", "1000"): bytes, 1024-based,
-- rounded down to whole bytes like iperf3.
-- @tparam string s
-- @treturn integer bytes, or nil, message
function M.parse_size(s)
  local v, err, code = parse_scaled(s, 1024, 'size')
  if not v then return nil, err, code end
  if v >= 2 ^ 63 then return nil, string.format("size: '%s' is too large", s), 'EINVAL' end
  return math.floor(v)
end

-- argparse converters: return value, or nil and a message naming the flag.
local function conv(flag, f)
  return function(s)
    local v, err = f(s)
    if v == nil then return nil, flag .. ': ' .. (err or ('bad value ' .. s)) end
    return v
  end
end

-- A size of at least 1 byte (-w, --test-buffer: 0 is not a size there).
local function size_at_least_1(s)
  local v, err, code = M.parse_size(s)
  if v ~= nil and v < 1 then v, err = nil, nil end
  if v == nil and (err == nil or code == 'NEGATIVE') then
    return nil, string.format("expected a size >= 1 byte (K/M/G = 1024), got '%s'", s)
  end
  return v, err
end

local function int_in(min, max)
  return function(s)
    local n = tonumber(s)
    if not n or math.type(n) ~= 'integer' then
      return nil, string.format("'%s' is not an integer", s)
    end
    if n < min or n > max then
      return nil, string.format('%d is out of range [%d, %d]', n, min, max)
    end
    return n
  end
end

-- `what` names the unit for the range message, e.g. "a positive number of
-- seconds (at most 86400)".
local function num_in(min, max, what)
  return function(s)
    local n = tonumber(s)
    if not n or n ~= n or n == math.huge or n == -math.huge then
      return nil, string.format("'%s' is not a number", s)
    end
    if n < min or n > max then
      return nil, string.format('expected %s, got %s', what, s)
    end
    return n
  end
end

--- Parse an IP TOS value like iperf3: decimal, 0x hex or 0-prefixed octal.
-- @tparam string s
-- @treturn integer 0-255, or nil, message
function M.parse_tos(s)
  local n
  if s:match('^0[xX]%x+$') then n = tonumber(s:sub(3), 16)
  elseif s:match('^0[0-7]+$') then n = tonumber(s:sub(2), 8)
  elseif s:match('^[1-9]%d*$') or s == '0' then n = tonumber(s) end
  if not n then return nil, string.format("'%s' is not a decimal, 0x hex or 0 octal number", s) end
  if n > 255 then return nil, string.format('%d is out of range [0, 255]', n) end
  return n
end

--- Parse iperf3's -A: `n` (this end's CPU) or `n,m` (and the server's).
-- @tparam string s
-- @treturn table `{ client = n, server = m }` (server nil without `,m`), or nil, message
function M.parse_affinity(s)
  local a, b = s:match('^(%d+),(%d+)$')
  if not a then a = s:match('^(%d+)$') end
  local n, m = tonumber(a), tonumber(b)
  if not n then return nil, string.format("expected n or n,m (CPU numbers), got '%s'", s) end
  for _, c in ipairs { n, m } do
    if c > 1023 then return nil, string.format('CPU %d is out of range [0, 1023]', c) end
  end
  return { client = n, server = m }
end

-- ---------------------------------------------------------- describers --

--- Add the `server` flags to an argparse command.
function M.describe_server(cmd)
  cmd:summary('Run an iperf3-compatible server (many tests at once).')
  local port = tostring(require('qoslab.core').traffic_defaults().port)
  cmd:option('-p --port', 'Port to listen on (0 picks a free one).', port)
    :convert(conv('-p', int_in(0, 65535)))
  cmd:flag('-1 --one-off', 'Serve one test, then exit.')
  cmd:option('-B --bind', 'Address to listen on.')
  cmd:option('--netns', 'Named network namespace to listen in.')
  cmd:option('-w --window', 'Default SO_SNDBUF/SO_RCVBUF for data sockets (K/M/G = 1024; '
    .. 'default: none, the kernel autotunes).')
    :convert(conv('-w', size_at_least_1))
  cmd:option('--idle-timeout', 'Drop control connections silent this long (s; default 30). '
    .. 'A new connection that sends no cookie within 10 s (or this, when shorter) is closed.')
    :convert(conv('--idle-timeout', num_in(0.001, 86400, 'a positive number of seconds (at most 86400)')))
  cmd:option('--max-tests', 'Tests running at once (default 64).')
    :convert(conv('--max-tests', int_in(1, 4096)))
  cmd:option('--max-tests-per-address', 'Tests running at once per peer address (default 2).')
    :convert(conv('--max-tests-per-address', int_in(1, 4096)))
  cmd:option('--max-streams-per-address', 'Data streams per peer address (default 128).')
    :convert(conv('--max-streams-per-address', int_in(1, 65536)))
  cmd:option('--max-unidentified',
    'Connections before cookie and parameters, all peers; over it the oldest is closed (default 256).')
    :convert(conv('--max-unidentified', int_in(1, 65536)))
  cmd:option('--max-unidentified-per-address', 'The same per peer address (default 8).')
    :convert(conv('--max-unidentified-per-address', int_in(1, 65536)))
  cmd:option('--data-idle', 'End a test whose streams move no byte this long (s; default '
    .. 'max(10, 64 x the control connection RTO), so at least 12.8 s).')
    :convert(conv('--data-idle', num_in(0.001, 86400, 'a positive number of seconds (at most 86400)')))
  cmd:option('--max-duration', 'Longest test time + omit accepted (s, default 3600).')
    :convert(conv('--max-duration', num_in(0.001, 2678400, 'a positive number of seconds (at most 2678400)')))
  cmd:option('--test-buffer', 'Per-test buffer budget (K/M/G = 1024; default 128M).')
    :convert(conv('--test-buffer', size_at_least_1))
  cmd:flag('-J --json', 'Print each finished test as iperf3 JSON.')
  cmd:flag('--announce', 'Once listening, print one line on stdout: '
    .. '{"event":"listening","port":N,"pid":P}.')
  cmd:flag('--exit-on-eof', 'Stop the tests and exit 0 when stdin reaches its end (the ssh '
    .. 'channel of a server started over ssh closed).')
  M.describe_output(cmd, false)
end

--- This process's id (from /proc/self).
-- @treturn integer
function M.own_pid()
  local target = require('lfs').symlinkattributes('/proc/self', 'target')
  return math.tointeger(tonumber(tostring(target):match('(%d+)$'))) or 0
end

--- Add iperf3's output flags to an argparse command: `--timestamps`,
-- `--logfile` and, for the client, `--json-stream`.
-- @param cmd argparse command
-- @tparam boolean client
function M.describe_output(cmd, client)
  if client then
    cmd:flag('--json-stream', "Print iperf3 3.17's line-delimited JSON events as they happen: "
      .. 'start, one per interval, end (an error event where the test fails).')
  end
  cmd:option('--timestamps', 'Start every output line with the local time in strftime FORMAT '
    .. '(default "%c "; write --timestamps=FORMAT).')
    :args('?'):argname('FORMAT')
  cmd:option('--logfile', 'Append all output, errors too, to FILE instead of stdout.')
    :argname('FILE')
end

--- Parse a CLOCK_MONOTONIC time in integer nanoseconds (`--start-at`).
-- @tparam string s decimal digits
-- @treturn integer ns, or nil, message
function M.parse_mono_ns(s)
  local n = type(s) == 'string' and s:match('^%d+$') and math.tointeger(tonumber(s))
  if not n then
    return nil, string.format("'%s' is not a CLOCK_MONOTONIC time in integer nanoseconds "
      .. "(as qoslab clock prints it)", tostring(s))
  end
  return n
end

--- Add the `client` flags to an argparse command.
function M.describe_client(cmd)
  cmd:summary('Run a test against an iperf3 or qoslab server.')
  cmd:argument('host', 'Server host name or address.')
  local port = tostring(require('qoslab.core').traffic_defaults().port)
  cmd:option('-p --port', 'Server port.', port):convert(conv('-p', int_in(1, 65535)))
  cmd:flag('-u --udp', 'Use UDP instead of TCP.')
  cmd:option('-b --bitrate', 'Target bitrate per stream, bits/s (K/M/G/T = 1000; 0 = unlimited).')
    :convert(conv('-b', M.parse_rate))
  cmd:option('-l --length', 'Write size (TCP) or datagram payload (UDP), bytes (K/M = 1024).')
    :convert(conv('-l', M.parse_size))
  cmd:option('-t --time', 'Test duration in seconds (default 10).')
    :convert(conv('-t', num_in(0.001, 86400, 'a positive number of seconds (at most 86400)')))
  cmd:option('-n --bytes', 'Bytes to send instead of a duration (K/M/G = 1024).')
    :convert(conv('-n', M.parse_size))
  cmd:option('-k --blockcount', 'UDP datagrams to send instead of a duration.')
    :convert(conv('-k', M.parse_size))
  cmd:option('-P --parallel', 'Parallel streams (1-128).'):convert(conv('-P', int_in(1, 128)))
  cmd:flag('-R --reverse', 'Server sends, client receives.')
  cmd:flag('--bidir', 'Both directions at once.')
  cmd:option('-w --window', 'SO_SNDBUF and SO_RCVBUF on both ends, bytes (K/M/G = 1024).')
    :convert(conv('-w', M.parse_size))
  cmd:option('--sndbuf', 'SO_SNDBUF only, both ends, bytes (K/M/G = 1024).')
    :convert(conv('--sndbuf', M.parse_size))
  cmd:option('--rcvbuf', 'SO_RCVBUF only, both ends, bytes (K/M/G = 1024).')
    :convert(conv('--rcvbuf', M.parse_size))
  cmd:option('-i --interval', 'Seconds between interval reports (>= 0.1; 0 = none).', '1')
    :convert(conv('-i', num_in(0, 3600, 'a number of seconds in [0, 3600]')))
  cmd:flag('-J --json', "Print the result as iperf3's JSON at the end.")
  cmd:option('--start-at', 'Start when this host\'s CLOCK_MONOTONIC reaches MONO_NS (integer '
    .. 'ns, as qoslab clock prints it); up to 1 s late it starts at once.'):argname('MONO_NS')
    :convert(conv('--start-at', M.parse_mono_ns))
  cmd:flag('--result-json', "Print qoslab's own result table (what qoslab.traffic.run returns) "
    .. 'as one JSON document, and nothing else on stdout.')
  M.describe_output(cmd, true)
  cmd:option('-O --omit', 'Seconds of warm-up left out of the totals.')
    :convert(conv('-O', num_in(0, 3600, 'a number of seconds in [0, 3600]')))
  cmd:option('-C --congestion', 'TCP congestion control algorithm.')
  cmd:option('-M --set-mss', 'TCP maximum segment size, bytes.')
    :convert(conv('-M', int_in(88, 32767)))
  cmd:option('-S --tos', 'IP type of service (decimal, 0x hex, 0 octal).')
    :convert(conv('-S', M.parse_tos))
  cmd:flag('-N --no-delay', 'Set TCP_NODELAY.')
  cmd:option('-A --affinity', 'CPU of the stream threads, n[,m]: the client\'s n, the '
    .. 'server\'s m (sent like iperf3\'s server_affinity).'):argname('n[,m]')
    :convert(conv('-A', M.parse_affinity))
  cmd:flag('-Z --zerocopy',
    'TCP senders write with MSG_ZEROCOPY (senders at both qoslab ends; loopback and veth '
    .. 'copy anyway).')
  cmd:flag('--skip-rx-copy',
    'TCP receivers read with MSG_TRUNC: counted, not copied (receivers at both qoslab ends).')
  cmd:option('-B --bind', 'Local address to bind.')
  cmd:option('--bind-dev', 'Local device to bind (SO_BINDTODEVICE).')
  cmd:option('-T --title', 'Prefix for every output line.')
  cmd:option('--fq-rate', 'SO_MAX_PACING_RATE per stream, bits/s (K/M/G = 1000).')
    :convert(conv('--fq-rate', M.parse_rate))
  cmd:option('--connect-timeout', 'Control connection timeout, milliseconds (like iperf3).')
    :convert(conv('--connect-timeout', num_in(1, 3600000, 'a number of milliseconds in [1, 3600000]')))
  cmd:option('--netns', 'Named network namespace to run the client in.')
  cmd:option('--udp-batch', 'UDP datagrams per sendmmsg call (1-1024).')
    :convert(conv('--udp-batch', int_in(1, 1024)))
  cmd:flag('--udp-gso', 'Send UDP with generic segmentation offload.')
  cmd:option('--udp-drain', 'Seconds the UDP receiver keeps counting after the last datagram.')
    :convert(conv('--udp-drain', num_in(0, 60, 'a number of seconds in [0, 60]')))
  cmd:option('--probe', 'Latency probe beside the test, one request every MS milliseconds '
    .. '(default 10), with 2 s idle before and after the load.')
    :args('?'):argname('MS')
  cmd:option('--probe-proto', 'Latency probe protocol: udp (a qoslab server; default), icmp '
    .. '(any host, iperf3 -s too) or tcp (a qoslab server).')
    :choices { 'udp', 'icmp', 'tcp' }
  cmd:option('--plot', 'Draw the test over time into FILE (.png or .svg), and the probe\'s '
    .. 'latency CDF into FILE-cdf.EXT when a probe ran.'):argname('FILE')
    :convert(function(v)
      -- the rule of qoslab.plot's opts.out, shared
      local _, ext = require('qoslab.plot.gnuplot').picture_path(v)
      if ext then return v end
      return nil, string.format("--plot: '%s' does not end in .png or .svg", v)
    end)
end

--- Options for `traffic.client` from parsed client flags.
-- @tparam table a argparse result of a `client` command
-- @treturn table traffic options
function M.client_opts(a)
  local udp = a.udp or nil
  local o = {
    host = a.host, port = a.port, proto = udp and 'udp' or 'tcp',
    parallel = a.parallel, duration_s = a.time, bytes = not udp and a.bytes or nil,
    reverse = a.reverse or nil, bidir = a.bidir or nil, omit_s = a.omit,
    window_bytes = a.window, sndbuf_bytes = a.sndbuf, rcvbuf_bytes = a.rcvbuf,
    bitrate_bps = a.bitrate, length_bytes = a.length, congestion = a.congestion,
    mss_bytes = a.set_mss, tos = a.tos, nodelay = a.no_delay or nil,
    fq_rate_bps = a.fq_rate, bind_address = a.bind, bind_device = a.bind_dev,
    netns = a.netns, title = a.title, udp_batch = a.udp_batch, udp_gso = a.udp_gso or nil,
    udp_drain_s = a.udp_drain, skip_rx_copy = a.skip_rx_copy or nil,
    zerocopy = a.zerocopy or nil,
    cpu_affinity = a.affinity and a.affinity.client,
    server_cpu_affinity = a.affinity and a.affinity.server,
    start_at_mono_ns = a.start_at,
  }
  if a.connect_timeout then o.connect_timeout_s = a.connect_timeout / 1000 end
  if udp and a.bytes then
    -- iperf3 -n with UDP: a byte budget; qoslab's UDP limit is in bytes too.
    o.bytes = a.bytes
  end
  if a.blockcount then
    if udp then o.packets = a.blockcount
    else return nil, '-k: block counts are for UDP (-u); use -n for TCP' end
  end
  if a.interval and a.interval > 0 then
    if a.interval < 0.1 then return nil, '-i: must be 0 (no reports) or at least 0.1 s' end
    o.interval_s = a.interval
  end
  if a.probe or a.probe_proto then
    o.probe = { proto = a.probe_proto }
    local v = a.probe and a.probe[1]
    if v then
      local n = tonumber(v)
      if not n then return nil, string.format("--probe: '%s' is not a number of milliseconds", v) end
      o.probe.interval_ms = n
    end
  end
  return o
end

--- Parse a client command line (without the leading "client").
-- @tparam table argv list of strings
-- @treturn table traffic options, table parsed flags; or nil, message
-- @usage local opts = cli_traffic.parse_client{'127.0.0.1', '-u', '-b', '10M'}
function M.parse_client(argv)
  local argparse = require 'argparse'
  local p = argparse('qoslab')
  p:command_target('command')
  local cmd = p:command('client')
  M.describe_client(cmd)
  local ok, a = p:pparse({ 'client', table.unpack(cli.join_negatives(argv, cmd)) })
  if not ok then return nil, a end
  local o, err = M.client_opts(a)
  if not o then return nil, err end
  local traffic = require 'qoslab.traffic'
  local good, e = pcall(traffic.client, o)
  if not good then return nil, M.flag_message(e) end
  return o, a
end

--- Parse a server command line (without the leading "server").
-- @treturn table traffic server options, table parsed flags; or nil, message
function M.parse_server(argv)
  local argparse = require 'argparse'
  local p = argparse('qoslab')
  p:command_target('command')
  local cmd = p:command('server')
  M.describe_server(cmd)
  local ok, a = p:pparse({ 'server', table.unpack(cli.join_negatives(argv, cmd)) })
  if not ok then return nil, a end
  return M.server_opts(a), a
end

--- Options for `traffic.server` from parsed server flags.
function M.server_opts(a)
  return { port = a.port, one_off = a.one_off or nil, bind_address = a.bind,
    netns = a.netns, window_bytes = a.window, idle_timeout_s = a.idle_timeout,
    max_tests = a.max_tests, max_tests_per_address = a.max_tests_per_address,
    max_streams_per_address = a.max_streams_per_address, max_unidentified = a.max_unidentified,
    max_unidentified_per_address = a.max_unidentified_per_address, data_idle_s = a.data_idle,
    max_duration_s = a.max_duration, test_buffer_bytes = a.test_buffer }
end

-- Option keys back to the flags that set them, for error messages.
local FLAG_OF = {
  host = 'HOST', port = '-p', proto = '-u', parallel = '-P', duration_s = '-t', bytes = '-n',
  packets = '-k', reverse = '-R', bidir = '--bidir', omit_s = '-O', interval_s = '-i',
  window_bytes = '-w', sndbuf_bytes = '--sndbuf', rcvbuf_bytes = '--rcvbuf',
  bitrate_bps = '-b', length_bytes = '-l', congestion = '-C', mss_bytes = '-M', tos = '-S',
  nodelay = '-N', skip_rx_copy = '--skip-rx-copy', zerocopy = '-Z', cpu_affinity = '-A',
  server_cpu_affinity = '-A', fq_rate_bps = '--fq-rate', bind_address = '-B',
  bind_device = '--bind-dev',
  netns = '--netns', connect_timeout_s = '--connect-timeout', title = '-T',
  udp_batch = '--udp-batch', udp_gso = '--udp-gso', udp_drain_s = '--udp-drain',
  start_at_mono_ns = '--start-at',
  ['probe.interval_ms'] = '--probe', ['probe.proto'] = '--probe-proto', probe = '--probe',
  one_off = '-1', idle_timeout_s = '--idle-timeout', max_tests = '--max-tests',
  max_tests_per_address = '--max-tests-per-address',
  max_streams_per_address = '--max-streams-per-address', max_unidentified = '--max-unidentified',
  max_unidentified_per_address = '--max-unidentified-per-address', data_idle_s = '--data-idle',
  max_duration_s = '--max-duration', test_buffer_bytes = '--test-buffer',
}

--- Rewrite "qoslab.client: opts.key: ..." as "FLAG (key): ...", and
-- advice `opts.key = "value"` as `--flag value`.
-- @tparam string msg an error message from qoslab.traffic
-- @treturn string
function M.flag_message(msg)
  msg = tostring(msg):gsub('^.-qoslab%.%a+: ', '')
  -- advice to set an option (`opts.probe.proto = "icmp"`) as its flag
  -- would be written: `--probe-proto icmp`
  msg = msg:gsub('opts%.([%w_]+%.?[%w_]*) = "([^"]*)"', function(k, v)
    if FLAG_OF[k] and FLAG_OF[k]:sub(1, 2) == '--' then return FLAG_OF[k] .. ' ' .. v end
  end)
  return (msg:gsub('opts%.([%w_]+%.?[%w_]*)', function(k)
    return FLAG_OF[k] and (FLAG_OF[k] .. ' (' .. k .. ')') or k
  end))
end

-- ------------------------------------------------------------- output ----

local function json_text(t)
  local dkjson = require 'dkjson'
  return dkjson.encode(t, { indent = true })
end

-- The test's shape and what it set up, for the JSON of a running test
-- (qoslab.traffic.iperf3_json): what its result will hold.
local function running_ctx(opts, setup)
  local ctx = { proto = opts.proto, parallel = opts.parallel or 1, reverse = opts.reverse or false,
    bidir = opts.bidir or false, host = opts.host, port = opts.port, options = opts,
    local_role = 'client' }
  for k, v in pairs(setup or {}) do ctx[k] = v end
  return ctx
end

-- The -J document of a failed test, iperf3's shape: `start` (what the
-- test had set up; `connected`, `version` and `system_info` only when it
-- never connected), the `intervals` measured before the failure, an empty
-- `end` and `error` "MESSAGE (CODE)", so that `.start` and `.end` are
-- always there.
local function failure_json(opts, setup, intervals, msg, code)
  local iperf3_json = require 'qoslab.traffic.iperf3_json'
  local start = iperf3_json.start_json(running_ctx(opts, setup))
  if not setup then
    start = { connected = setmetatable({}, { __jsontype = 'array' }), version = start.version,
      system_info = start.system_info }
  end
  local doc = { start = start, intervals = setmetatable(intervals or {}, { __jsontype = 'array' }),
    ['end'] = setmetatable({}, { __jsontype = 'object' }),
    error = string.format('%s (%s)', M.flag_message(msg), code) }
  return require('dkjson').encode(doc, { indent = true,
    keyorder = { 'start', 'intervals', 'end', 'error' } })
end

local function client_body(a, sink)
  local traffic = require 'qoslab.traffic'
  local core = require 'qoslab.core'
  core.signals_install()
  local function out(title, line) sink:line(title, line) end
  local function fail(...) sink:err('qoslab client: ' .. table.concat({ ... })) end
  local opts, err = M.client_opts(a)
  if not opts then
    cli.failure(err, 'EINVAL', cli.usage_field('client', err))
    fail(err)
    return 2
  end
  local ok, t = pcall(traffic.client, opts)
  if not ok then
    cli.failure(M.flag_message(t), 'EINVAL', cli.field_of(t))
    fail(M.flag_message(t))
    return 2
  end
  -- A CPU of -A this process may not run on is bad input on this host: said
  -- before connecting, exit 2 (the test's start checks it first too; what
  -- else this host refuses, --netns, --bind-dev, -C, fails there, exit 1).
  local host_ok, hmsg, _, hfield = traffic.check_host(opts)
  if not host_ok and hfield == 'opts.cpu_affinity' then
    cli.failure(M.flag_message(hmsg), 'EINVAL', hfield)
    fail(M.flag_message(hmsg))
    return 2
  end
  -- --plot's file is checked as --logfile's, before the test runs
  if a.plot then
    local good, pmsg, pcode = output.check_writable('--plot', a.plot)
    if not good then
      cli.failure(pmsg, pcode, '--plot')
      fail(pmsg, ' (', pcode, ')')
      return 1
    end
  end
  -- --json-stream: events as they happen; -J: one document at the end
  local stream = a.json_stream and require('qoslab.cli.json_stream').new(sink)
  -- --result-json: quiet as -J, the result table at the end, errors on stderr
  local rjson = a.result_json
  local json = a.json or a.json_stream or rjson
  local title = a.title
  if not json then
    out(title, string.format('Connecting to host %s, port %d%s', opts.host, opts.port,
      opts.netns and (' from namespace ' .. opts.netns) or ''))
  end
  local h, msg, code = t:start()
  if not h then
    cli.failure(M.flag_message(msg), code)
    if rjson then fail(M.flag_message(msg), ' (', tostring(code), ')')
    elseif stream then stream:error(string.format('%s (%s)', M.flag_message(msg), code))
    elseif json then sink:json(failure_json(opts, nil, nil, msg, code))
    else fail(M.flag_message(msg), ' (', tostring(code), ')') end
    return 1
  end
  local ctx = json and running_ctx(opts)
  -- -J: what a failure's document keeps (the setup, the intervals so far)
  local jsetup, jintervals = nil, {}
  local show = not json and (a.interval or 1) > 0
  local header = false
  -- A qoslab server sends its interval entries live (iv.peer_missing is
  -- then a boolean): both ends are printed per interval. Entries that came
  -- too late for their live record are printed from the final result.
  local peer_live, missing = false, {}
  local nlive = 0
  -- SIGINT/SIGTERM end the test early, like iperf3: the summary of what ran
  -- is still printed.
  local interrupted = false
  local ok_loop, err_loop = pcall(function()
    for iv in h:intervals() do
      if rjson then -- luacheck: ignore 542
        -- the intervals are in the result
      elseif stream then
        if not stream.started then stream:start(running_ctx(opts, h:setup())) end
        -- -i 0: no interval reports, as iperf3
        if (a.interval or 1) > 0 then stream:interval(ctx, iv) end
      elseif json then
        jsetup = jsetup or h:setup()
        if (a.interval or 1) > 0 then
          jintervals[#jintervals + 1] = require('qoslab.traffic.iperf3_json').interval_json(ctx, iv)
        end
      end
      if show then
        if not header then
          out(title, '[ ID] dir   interval           transfer          bitrate')
          header = true
        end
        for _, line in ipairs(traffic.interval_lines(side_only(iv, 'client'))) do out(title, line) end
        local lat = traffic.latency_interval_line(iv)
        if lat then out(title, lat) end
        if iv.peer_missing ~= nil then
          peer_live = true
          for _, line in ipairs(traffic.interval_lines(side_only(iv, 'server'))) do
            out(title, line)
          end
          if iv.peer_missing then
            missing[#missing + 1] = nlive + 1
            out(title, string.format('[   ] %6.2f-%-6.2f s  server entries missing (late; '
              .. 'shown after the test)', iv.start_s, iv.end_s))
          end
        end
      end
      nlive = nlive + 1
      if core.signal_pending() then break end
    end
  end)
  -- A stop signal (SIGINT/SIGTERM/SIGHUP) ends the loop, also through the
  -- error its hook raises: decided on that error's code or the signal
  -- state, never on its text.
  if not ok_loop and not (cli.interrupted_by(err_loop) or core.signal_pending()) then
    error(err_loop, 0)
  end
  if not ok_loop or core.signal_pending() then
    -- 130 for SIGINT, 143 for SIGTERM, as a shell reports them.
    interrupted = cli.signal_status(err_loop) or 130
    h:stop()
    core.signal_reset()
  end
  local res
  res, msg, code = h:wait()
  if not res then
    cli.failure(M.flag_message(msg), code)
    if rjson then fail(M.flag_message(msg), ' (', tostring(code), ')')
    elseif stream then stream:error(string.format('%s (%s)', M.flag_message(msg), code))
    elseif json then sink:json(failure_json(opts, jsetup, jintervals, msg, code))
    else fail(M.flag_message(msg), ' (', tostring(code), ')') end
    return 1
  end
  local plotted = a.plot and M.write_plots(a.plot, res,
    not json and function(line) out(title, line) end, function(line) sink:err(line) end) or 0
  if rjson then
    -- dkjson: integers stay integers (ns times, byte counts); cjson writes
    -- 14 significant digits
    sink:json(require('dkjson').encode(M.plain(res)))
  elseif stream then
    stream:finish(res)
  elseif json then
    sink:json(json_text(traffic.to_iperf3_json(res)))
  else
    if show and res.peer == 'qoslab' then
      -- Without a live series (an older qoslab server) every server line
      -- comes from the result; with one, only those that were late.
      local which = {}
      if peer_live then
        which = missing
      else
        for k = 1, #(res.intervals or {}) do which[#which + 1] = k end
      end
      local first = true
      for _, k in ipairs(which) do
        local peer = side_only(res.intervals[k] or {}, 'server')
        if #peer.streams > 0 then
          if first then out(title, 'server side (sent with the results):'); first = false end
          for _, line in ipairs(traffic.interval_lines(peer)) do out(title, line) end
        end
      end
    end
    out(title, '- - - - - - - - - - - - - - - - - - - - - - - - -')
    for line in (traffic.summary(res) .. '\n'):gmatch('(.-)\n') do out(title, line) end
    out(title, interrupted and 'qoslab: interrupted, test stopped early' or 'qoslab Done.')
  end
  return interrupted or plotted
end

--- A result as plain data for JSON: a copy without metatables, its
-- non-finite numbers (no JSON for them) as strings ("inf", "-inf", "nan").
-- @param v a result table (or any value in one)
-- @return the copy
function M.plain(v)
  if type(v) == 'number' then
    if v ~= v then return 'nan' end
    if v == math.huge then return 'inf' end
    if v == -math.huge then return '-inf' end
    return v
  end
  if type(v) ~= 'table' then return v end
  local c = {}
  for k, e in next, v do c[k] = M.plain(e) end
  return c
end

--- `--plot FILE`: the time series into FILE, the latency CDF into
-- FILE-cdf.EXT when a probe ran (`qoslab.plot.test_plots`).
-- @tparam string file ends in .png or .svg
-- @tparam table res the test's result
-- @tparam function|nil say prints a line (nil: quiet, as with -J)
-- @tparam[opt] function err writes an error line (default: to stderr)
-- @treturn integer 0, or 1 when a picture could not be drawn (said on stderr,
--   or through err: the --logfile)
function M.write_plots(file, res, say, err)
  local r, msg, code = require('qoslab.plot').test_plots(res, { out = file })
  if not r then
    cli.failure('--plot: ' .. tostring(msg), code, '--plot')
    local line = 'qoslab client: --plot: ' .. tostring(msg) .. ' (' .. tostring(code) .. ')'
    if err then err(line) else io.stderr:write(line, '\n') end
    return 1
  end
  local ext = file:match('(%a+)$')
  if say then say('plot: ' .. r.timeseries[ext] .. (r.cdf and (', ' .. r.cdf[ext]) or '')) end
  return 0
end

--- The most lines of rejected connections `qoslab server` logs in a second
-- (`REJECT_WINDOW_S`): a shared server takes every peer as possibly
-- hostile, so what its peers can make it write is bounded too.
M.REJECT_LINES = 10
M.REJECT_WINDOW_S = 1.0

local Limiter = {}
Limiter.__index = Limiter

--- A cap on a kind of log line: at most `max` lines in a window of
-- `window_s` seconds (from the window's first line on); the lines over it
-- are counted, and once the window is over one line says how many:
-- `"suppressed 190 similar lines in the last 1.0 s (at most 10 are logged
-- per 1 s)"`. Times are the caller's (monotonic seconds).
-- @tparam integer max lines logged per window (>= 1)
-- @tparam number window_s the window (seconds, > 0)
-- @treturn table a limiter: `lim:line(text, now_s, emit)` emits text
--   (`emit(text)`) or counts it; `lim:count(n, now_s, emit)` counts n
--   lines that were never seen (a ring's dropped entries) as suppressed;
--   `lim:tick(now_s, emit)` ends a window that is over (emitting its count
--   line when it suppressed any); `lim:flush(now_s, emit)` ends the window
--   now; `lim.logged_total` and `lim.suppressed_total` count them all
-- @usage local lim = traffic_cli.line_limiter(10, 1); lim:line('x', timer.now(), print)
function M.line_limiter(max, window_s)
  return setmetatable({ max = max, window_s = window_s, w0 = nil, logged = 0, suppressed = 0,
    logged_total = 0, suppressed_total = 0 }, Limiter)
end

function Limiter:flush(now, emit)
  if self.suppressed > 0 then
    emit(string.format('suppressed %d similar lines in the last %.1f s (at most %d are logged per %g s)',
      self.suppressed, now - self.w0, self.max, self.window_s))
  end
  self.w0, self.logged, self.suppressed = nil, 0, 0
end

function Limiter:tick(now, emit)
  if self.w0 and now - self.w0 >= self.window_s then self:flush(now, emit) end
end

function Limiter:count(n, now, emit)
  if n <= 0 then return end
  self:tick(now, emit)
  self.w0 = self.w0 or now
  self.suppressed = self.suppressed + n
  self.suppressed_total = self.suppressed_total + n
end

function Limiter:line(text, now, emit)
  self:tick(now, emit)
  self.w0 = self.w0 or now
  if self.logged < self.max then
    self.logged, self.logged_total = self.logged + 1, self.logged_total + 1
    emit(text)
  else
    self.suppressed, self.suppressed_total = self.suppressed + 1, self.suppressed_total + 1
  end
end

-- A command's body with its output sink (--timestamps, --logfile) open,
-- closed again whatever the body does.
local function with_sink(name, body, a)
  local sink, msg, code = output.open(a)
  if not sink then
    cli.failure(msg, code, cli.usage_field(nil, msg))
    io.stderr:write('qoslab ', name, ': ', msg, ' (', code, ')\n')
    return code == 'EINVAL' and 2 or 1
  end
  local ok, status = pcall(body, a, sink)
  sink:close()
  if not ok then error(status, 0) end
  return status
end

local function run_client(a) return with_sink('client', client_body, a) end

local function server_body(a, sink)
  local traffic = require 'qoslab.traffic'
  local timer = require 'qoslab.timer'
  require('qoslab.core').signals_install()
  local function out(title, line) sink:line(title, line) end
  local opts = M.server_opts(a)
  -- --exit-on-eof: stdin must be there to reach its end (no wait here)
  if a.exit_on_eof then
    local open, emsg, ecode = timer.wait_eof(0, 0)
    if open == nil then
      cli.failure('--exit-on-eof: stdin: ' .. tostring(emsg), ecode, '--exit-on-eof')
      sink:err('qoslab server: --exit-on-eof: stdin: ' .. tostring(emsg) .. ' (' .. tostring(ecode) .. ')')
      return ecode == 'EINTR' and (cli.signal_status() or 130) or 1
    end
    if open then
      -- already at its end (e.g. </dev/null): nothing to serve for
      sink:err('qoslab server: --exit-on-eof: stdin is at its end already; not serving')
      return 0
    end
  end
  local ok, srv, msg, code = pcall(traffic.server, opts)
  if not ok then
    cli.failure(M.flag_message(srv), 'EINVAL', cli.field_of(srv))
    sink:err('qoslab server: ' .. M.flag_message(srv))
    return 2
  end
  if not srv then
    cli.failure(msg, code)
    sink:err('qoslab server: ' .. tostring(msg) .. ' (' .. tostring(code) .. ')')
    return 1
  end
  -- --announce: one JSON line on stdout, whatever -J and --logfile do, so a
  -- program that started this server learns its port and pid
  if a.announce then
    io.stdout:write(string.format('{"event":"listening","port":%d,"pid":%d}\n', srv:port(),
      M.own_pid()))
    io.stdout:flush()
  end
  local rule = '-----------------------------------------------------------'
  -- With -J stdout carries JSON only (one document per test); the log
  -- lines go to stderr (or with the JSON to --logfile).
  local log = a.json and function(_, line) sink:err(line) end or out
  log(nil, rule)
  log(nil, string.format('Server listening on %d%s%s', srv:port(),
    opts.bind_address and (' (' .. opts.bind_address .. ')') or '',
    opts.netns and (' in namespace ' .. opts.netns) or ''))
  local l = srv:limits()
  log(nil, string.format('Limits: %d tests and %d streams per address (%d tests in all), '
    .. '%d unidentified connections per address (%d in all; over either one is closed), data idle %s, '
    .. 'max duration %g s, %s of buffers per test, idle timeout %g s (cookie timeout %g s)',
    l.max_tests_per_address,
    l.max_streams_per_address, l.max_tests, l.max_unidentified_per_address, l.max_unidentified,
    l.data_idle_s > 0 and string.format('%g s', l.data_idle_s) or 'max(10 s, 64 x RTO)',
    l.max_duration_s, traffic.format_bytes(l.test_buffer_bytes), l.idle_timeout_s,
    l.cookie_timeout_s))
  log(nil, rule)
  local shown, status = 0, 0
  local problems_seen, started = 0, 0
  local rejected = M.line_limiter(M.REJECT_LINES, M.REJECT_WINDOW_S)
  local function say(line) log(nil, line) end
  local function poll()
    -- each started test with its peer and parameters (several between
    -- two polls show as a count and the last one)
    local now_started, last_started = srv:started()
    local now_running = srv:tests_running()
    if now_started > started then
      local n = now_started - started
      log(nil, (n > 1 and string.format('%d tests started, the last: ', n) or '')
        .. tostring(last_started) .. string.format(' (%d running)', now_running))
      started = now_started
    end
    -- every failed test is logged with its reason, and so is every
    -- rejected connection up to M.REJECT_LINES a second (the rest counted:
    -- rejected); the server keeps the last 256 problems, so a burst bigger
    -- than that between two polls is counted with the suppressed lines
    local now = timer.now()
    local _, _, _, plog = srv:problems(problems_seen)
    rejected:count(plog.dropped, now, say)
    for _, p in ipairs(plog) do
      if p.test > 0 then log(nil, string.format('[test %d] ', p.test) .. p.reason)
      else rejected:line(p.reason, now, say) end
    end
    rejected:tick(now, say)
    problems_seen = plog.total
    -- The server keeps only its last results: number them by the total
    -- (and copy them only when one more finished).
    if srv:finished() == shown then return end
    local results, total = srv:results()
    local first = total - #results
    for i = math.max(shown, first) + 1, total do
      local r = results[i - first]
      if a.json then
        sink:json(json_text(traffic.to_iperf3_json(r)))
      else
        out(nil, string.format('test %d from %s port %d finished', r.server_test or i,
          tostring(r.host), r.peer_port or 0))
        -- a result that cannot be printed must not stop the server
        local okp, text = pcall(traffic.summary, r)
        out(nil, okp and text or ('(cannot print this result: ' .. tostring(text) .. ')'))
        out(nil, rule)
      end
    end
    shown = total
  end
  local interrupted, stdin_closed = false, false
  local ok_loop, err_loop = pcall(function()
    while true do
      poll()
      if opts.one_off and srv:done() then poll() return end
      -- with --exit-on-eof the pause between two looks waits on stdin too
      -- (poll(2), no busy loop): its end ends the server
      local slept, wmsg, scode
      if a.exit_on_eof then
        local eof
        eof, wmsg, scode = timer.wait_eof(0, 0.1)
        if eof then stdin_closed = true poll() return end
        slept = eof ~= nil
        if not slept and scode ~= 'EINTR' then error('--exit-on-eof: stdin: ' .. tostring(wmsg), 0) end
      else
        local _
        slept, _, scode = timer.sleep(0.1)
      end
      if not slept and scode == 'EINTR' then interrupted = true return end
    end
  end)
  -- A stop signal ends the loop, also through the error its hook raises:
  -- decided on that error's code or the signal state, never on its text.
  if not ok_loop and not (cli.interrupted_by(err_loop) or require('qoslab.core').signal_pending()) then
    srv:stop()
    error(err_loop, 0)
  end
  rejected:flush(timer.now(), say)
  if interrupted or not ok_loop then
    status = cli.signal_status(err_loop) or 130
    log(nil, 'interrupted: the server has stopped')
  elseif stdin_closed then
    log(nil, 'stdin closed (--exit-on-eof): the server has stopped')
  end
  srv:stop()
  return status
end

local function run_server(a) return with_sink('server', server_body, a) end

-- flags back to the option keys they set, for the field of a usage error
local FIELDS = {}
for key, flag in pairs(FLAG_OF) do
  if flag:sub(1, 1) == '-' and (not FIELDS[flag] or #key < #FIELDS[flag]) then
    FIELDS[flag] = 'opts.' .. key
  end
end
M.FIELDS = FIELDS

cli.add('server', { describe = M.describe_server, run = run_server, fields = FIELDS })
--- Say more about a client parse error: when HOST is missing because
-- `--timestamps` or `--probe` (whose value is optional) took the word
-- after it, and that word is no strftime format (no `%`) or no number of
-- milliseconds, the message names the flag, the word and the fix.
-- @tparam string msg argparse's message
-- @tparam {string,...} words the words after `client`
-- @treturn string|nil the message to show instead, or nil
function M.explain_client(msg, words)
  if not tostring(msg):find("missing argument 'host'", 1, true) then return nil end
  for i = #words - 1, 1, -1 do
    local flag, v = words[i], words[i + 1]
    if v:sub(1, 1) ~= '-' then
      if flag == '--timestamps' and not v:find('%', 1, true) then
        return string.format('HOST: missing; --timestamps took "%s" as its FORMAT: write '
          .. '--timestamps=FORMAT or put it after HOST', v)
      elseif flag == '--probe' and not tonumber(v) then
        return string.format('HOST: missing; --probe took "%s" as its MS (milliseconds): '
          .. 'write --probe=MS or put it after HOST', v)
      end
    end
  end
  return nil
end

cli.add('client', { describe = M.describe_client, run = run_client, explain = M.explain_client,
  fields = FIELDS })

return M
