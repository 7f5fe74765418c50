-- bench/ceiling.lua - the traffic engine against the kernel's ceiling (bare C
-- programs on the same path with the same sizes, bench/ceiling/*.c), iperf3
-- and iperf in one interleaved run, on loopback and across a veth pair
-- between two namespaces it makes and removes: TCP 1, 4, 16 streams,
-- parallel 128, 32 concurrent tests on one server (sum and Jain's index),
-- UDP 1400 B and 64 B unpaced, UDP with GSO/GRO, and pacing at 100 Mbit/s
-- and 1 Gbit/s judged on every 10 ms window of the arrivals, with a 1 s
-- SIGSTOP of the sender in the middle. Best of N alternating runs; CPU
-- seconds per GB at each end of each tool. Each missed target carries the
-- reasons the run itself shows (CPU per GB against the program it missed
-- against, a CPU-bound end, late windows, the host's load); a row where
-- qoslab beats the bare program is noted (no ceiling there), and a load
-- average above the cores before or after is a warning.
--
--   qoslab run --host bench/ceiling.lua [quick]      (root: namespaces, packet socket)
--   QUICK=1: N = 2, 1 s runs. BENCH_PATHS=loopback (or veth): one path.
--   BENCH_ROWS=tcp1,tcp4,tcp16,tcp128,tests32,udp1400,udp64,gso1400,pace100,pace1000: some rows.
--   BENCH_OUT=FILE: where the Markdown section goes (default: the full run
--   replaces its section in bench/RESULTS.md, a quick one /tmp/qoslab-bench-ceiling.md).
--
-- Engine options beyond iperf3 3.12 (skip_rx_copy, zerocopy, cpu_affinity)
-- get their own qoslab columns when the option checker accepts them.
local lib = dofile('bench/ceiling/lib.lua')
local traffic = require 'qoslab.traffic'
local core = require 'qoslab.core'
local cjson = require 'cjson'

local QUICK = os.getenv('QUICK') == '1' or arg[1] == 'quick'
local N = QUICK and 2 or 3
local SECS = QUICK and 1 or 2
local PACE_SECS = QUICK and 3 or 4
local STALL_AT_S, STALL_S = 1.5, 1.0
local tag = tostring(math.tointeger(tonumber(io.open('/proc/self/stat'):read('*n'))) or 0)
local base_port = 30000 + (tonumber(tag) or 0) % 20000

local function sh(cmd)
  local f = io.popen(cmd .. ' 2>&1')
  local s = f:read('*a')
  f:close()
  return s
end
local function sleep(s) os.execute(string.format('sleep %.3f', s)) end
local function slurp(path)
  local f = io.open(path)
  if not f then return '' end
  local s = f:read('*a')
  f:close()
  return s
end
local tmp = sh('mktemp -d /tmp/qoslab-bench-ceiling.XXXXXX'):gsub('%s+$', '')
assert(tmp:match('^/tmp/qoslab%-bench%-ceiling%.'), 'mktemp: ' .. tmp)

local CLK_TCK = tonumber(sh('getconf CLK_TCK')) or 100
--- user + system CPU seconds of a process (all its threads) so far
local function proc_cpu_s(pid)
  local s = slurp('/proc/' .. tostring(pid) .. '/stat')
  local rest = s:match('%) (.*)$')
  if not rest then return nil end
  local f = {}
  for w in rest:gmatch('%S+') do f[#f + 1] = w end
  -- fields 14 and 15 of stat(5); rest starts at field 3
  return (tonumber(f[12]) + tonumber(f[13])) / CLK_TCK
end
local self_pid = tag

--- start cmd in the background (stdout and stderr to out), return its pid
local function spawn(cmd, out)
  return assert(sh(string.format('%s >%s 2>&1 & echo $!', cmd, out)):match('(%d+)%s*$'),
    'cannot start ' .. cmd)
end
local function alive(pid) return os.execute('kill -0 ' .. pid .. ' 2>/dev/null') == true end
local function wait_exit(pid, max_s)
  local t = 0
  while alive(pid) and t < max_s do sleep(0.1); t = t + 0.1 end
  if alive(pid) then os.execute('kill ' .. pid .. ' 2>/dev/null') end
end

-- ------------------------------------------------------------ the bare programs
local bins = {}
for _, p in ipairs { 'tcp', 'udp', 'pace' } do
  bins[p] = tmp .. '/' .. p
  local out = sh(string.format('${CC:-cc} -O2 -Wall -pthread -o %s bench/ceiling/%s.c && echo OK',
    bins[p], p))
  assert(out:match('OK%s*$'), 'building bench/ceiling/' .. p .. '.c: ' .. out)
end
local function bare(cmd)
  local out = sh(cmd)
  local t, err = lib.parse_line(out:match('(ceiling [^\n]*)') or out)
  if not t then io.stderr:write('bench: ', cmd, ': ', err, '\n') end
  return t
end

-- ------------------------------------------------------------ engine options
local function offered(key, value)
  return (pcall(core.traffic_client_check, { host = '127.0.0.1', [key] = value }))
end
local variants = {}
-- (vs: the bare column the variant is compared with)
if offered('skip_rx_copy', true) then
  variants[#variants + 1] = { name = 'skip_rx_copy', opts = { skip_rx_copy = true }, vs = 'bare MSG_TRUNC' }
end
-- (i3: the iperf3 3.12 flags of the same idea, run beside it)
if offered('zerocopy', true) then
  variants[#variants + 1] = { name = 'zerocopy', opts = { zerocopy = true }, i3 = '-Z' }
end
-- as iperf3's -A 0,1: the client's stream threads on CPU 0, the server's on 1
if offered('cpu_affinity', 0) then
  local o = { cpu_affinity = 0 }
  if offered('server_cpu_affinity', 1) then o.server_cpu_affinity = 1 end
  variants[#variants + 1] = { name = o.server_cpu_affinity and 'cpu_affinity 0,1' or 'cpu_affinity 0',
    opts = o, i3 = o.server_cpu_affinity and '-A 0,1' or '-A 0' }
end

-- ------------------------------------------------------------ paths
local paths = {}
local want = os.getenv('BENCH_PATHS')
local function wanted(n) return not want or want == '' or want:find(n, 1, true) end
if wanted('loopback') then
  paths[#paths + 1] = { name = 'loopback', addr = '127.0.0.1', ifname = 'lo', cx = '', sx = '' }
end
local na, nb = 'qlceil-a-' .. tag, 'qlceil-b-' .. tag
local veth_made = false
local function veth_up()
  for _, c in ipairs {
    'ip netns add ' .. na, 'ip netns add ' .. nb,
    string.format('ip -n %s link add qlc0 type veth peer name qlc1 netns %s', na, nb),
    string.format('ip -n %s addr add 10.231.9.1/24 dev qlc0', na),
    string.format('ip -n %s addr add 10.231.9.2/24 dev qlc1', nb),
    string.format('ip -n %s link set qlc0 up', na), string.format('ip -n %s link set qlc1 up', nb),
    string.format('ip -n %s link set lo up', na), string.format('ip -n %s link set lo up', nb) } do
    local out = sh(c .. ' && echo OK')
    assert(out:match('OK%s*$'), c .. ': ' .. out)
  end
end
local function veth_down()
  sh('ip netns del ' .. na)
  sh('ip netns del ' .. nb)
end
if wanted('veth') then
  veth_made = true
  paths[#paths + 1] = { name = 'veth', addr = '10.231.9.2', ifname = 'qlc1', cli_ns = na,
    srv_ns = nb, cx = 'ip netns exec ' .. na .. ' ', sx = 'ip netns exec ' .. nb .. ' ' }
end

local QOSLAB = 'env -u QOSLAB_BUILD lua5.4 bin/qoslab'
local servers = {}

local function start_servers(P, k)
  local s = { q_port = base_port + 10 * k, i3_port = base_port + 10 * k + 1,
    i2_port = base_port + 10 * k + 2, i2u_port = base_port + 10 * k + 3 }
  s.q_pid = spawn(string.format('%s%s server -p %d -B %s --max-tests-per-address 64 '
    .. '--max-unidentified-per-address 256 --max-unidentified 1024', P.sx, QOSLAB, s.q_port,
    P.addr), tmp .. '/qserver.' .. k)
  s.i3_pid = spawn(string.format('%siperf3 -s -p %d -B %s', P.sx, s.i3_port, P.addr),
    tmp .. '/i3server.' .. k)
  s.i2_pid = spawn(string.format('%siperf -s -p %d -B %s', P.sx, s.i2_port, P.addr),
    tmp .. '/i2server.' .. k)
  sleep(1.5)
  for _, pid in ipairs { s.q_pid, s.i3_pid, s.i2_pid } do
    assert(alive(pid), 'a server did not start: ' .. slurp(tmp .. '/qserver.' .. k)
      .. slurp(tmp .. '/i3server.' .. k))
  end
  return s
end
local function stop_servers(s)
  for _, pid in ipairs { s.q_pid, s.i3_pid, s.i2_pid } do
    os.execute('kill ' .. pid .. ' 2>/dev/null')
  end
end

-- ------------------------------------------------------------ the tools
-- Each returns a run: value (the row's figure), bytes received, tx_cpu_s,
-- rx_cpu_s, shares (per stream or per test, for Jain's index).

local function qoslab_runs(P, S, list)
  local c0, s0 = proc_cpu_s(self_pid), proc_cpu_s(S.q_pid)
  local handles = {}
  for i, o in ipairs(list) do
    o.host, o.port, o.netns = P.addr, S.q_port, P.cli_ns
    o.duration_s = o.duration_s or SECS
    handles[i] = traffic.start(o)
  end
  local res = {}
  for i = 1, #list do
    local h = handles[i]
    if h then
      local r, err = h:wait()
      if not r then io.stderr:write('bench: qoslab: ', tostring(err), '\n') end
      res[i] = r
    end
  end
  local c1, s1 = proc_cpu_s(self_pid), proc_cpu_s(S.q_pid)
  return res, c1 - c0, s1 - s0
end

local function tcp_q(P, S, streams, extra)
  local o = { parallel = streams }
  for k, v in pairs(extra or {}) do o[k] = v end
  local res, tx, rx = qoslab_runs(P, S, { o })
  local r = res[1]
  if not r then return nil end
  local shares = {}
  for i, st in ipairs(r.streams or {}) do shares[i] = st.receiver and st.receiver.bytes or 0 end
  return { value = r.received.bits_per_second, bytes = r.received.bytes, tx_cpu_s = tx,
    rx_cpu_s = rx, shares = shares, seconds = r.received.seconds or SECS }
end

local function tests_q(P, S, n)
  local list = {}
  for i = 1, n do list[i] = { parallel = 1 } end
  local res, tx, rx = qoslab_runs(P, S, list)
  local sum, bytes, shares = 0, 0, {}
  for i = 1, n do
    local r = res[i]
    if not r then return nil end
    sum, bytes = sum + r.received.bits_per_second, bytes + r.received.bytes
    shares[i] = r.received.bits_per_second
  end
  return { value = sum, bytes = bytes, tx_cpu_s = tx, rx_cpu_s = rx, shares = shares,
    seconds = SECS }
end

local function udp_q(P, S, len, gso)
  local res, tx, rx = qoslab_runs(P, S, { { proto = 'udp', bitrate_bps = 0, length_bytes = len,
    udp_batch = 32, udp_gso = gso or nil } })
  local r = res[1]
  if not r then return nil end
  local rcv = r.received
  return { value = rcv.unique_packets / rcv.seconds, bytes = rcv.bytes, tx_cpu_s = tx,
    rx_cpu_s = rx, seconds = rcv.seconds }
end

local function timed(P, cmd, name)
  local tf = tmp .. '/time.' .. name
  os.remove(tf)
  local out = sh(string.format('%s/usr/bin/time -f "cpu %%U %%S" -o %s %s', P.cx, tf, cmd))
  local u, s = slurp(tf):match('cpu ([%d.]+) ([%d.]+)')
  return out, u and (tonumber(u) + tonumber(s))
end

local function iperf3_run(P, S, flags)
  local s0 = proc_cpu_s(S.i3_pid)
  local out, tx = timed(P, string.format('timeout %d iperf3 -c %s -p %d -J -t %d %s',
    SECS + 30, P.addr, S.i3_port, SECS, flags), 'i3')
  local s1 = proc_cpu_s(S.i3_pid)
  local ok, j = pcall(cjson.decode, out)
  if not ok or type(j) ~= 'table' or j.error or not j['end'] then
    io.stderr:write('bench: iperf3 ', flags, ': ', out:sub(1, 200), '\n')
    return nil
  end
  return j, tx, s0 and s1 and s1 - s0
end

local function tcp_i3(P, S, streams, flags)
  local j, tx, rx = iperf3_run(P, S, string.format('-P %d %s', streams, flags or ''))
  if not j then return nil end
  local shares = {}
  for i, st in ipairs(j['end'].streams or {}) do shares[i] = st.receiver and st.receiver.bytes or 0 end
  return { value = j['end'].sum_received.bits_per_second, bytes = j['end'].sum_received.bytes,
    tx_cpu_s = tx, rx_cpu_s = rx, shares = shares, seconds = j['end'].sum_received.seconds }
end

local function udp_i3(P, S, len)
  local j, tx, rx = iperf3_run(P, S, '-u -b 0 -l ' .. len)
  if not j then return nil end
  local s = j['end'].sum
  local got = s.packets - s.lost_packets
  return { value = got / s.seconds, bytes = got * len, tx_cpu_s = tx, rx_cpu_s = rx,
    seconds = s.seconds }
end

-- iperf 2 CSV: time,src,sport,dst,dport,id,interval,bytes,bps[,jitter,lost,total,...]
local function csv_lines(txt)
  local t = {}
  for line in txt:gmatch('[^\n]+') do
    if line:match('^%d+,') then
      local f = {}
      for v in line:gmatch('[^,]+') do f[#f + 1] = v end
      if tonumber(f[6]) and tonumber(f[6]) >= 0 then t[#t + 1] = f end
    end
  end
  return t
end
local function interval_s(f) return tonumber(f[7]:match('%-([%d.]+)$')) end

local function tcp_i2(P, S, streams)
  local s0 = proc_cpu_s(S.i2_pid)
  local out, tx = timed(P, string.format('timeout %d iperf -c %s -p %d -t %d -P %d -y C',
    SECS + 30, P.addr, S.i2_port, SECS, streams), 'i2')
  local s1 = proc_cpu_s(S.i2_pid)
  local lines = csv_lines(out)
  if #lines == 0 then
    io.stderr:write('bench: iperf -P ', streams, ': ', out:sub(1, 200), '\n')
    return nil
  end
  local bps, bytes, shares = 0, 0, {}
  for i, f in ipairs(lines) do
    bps, bytes = bps + tonumber(f[9]), bytes + tonumber(f[8])
    shares[i] = tonumber(f[8])
  end
  return { value = bps, bytes = bytes, tx_cpu_s = tx, rx_cpu_s = s0 and s1 and s1 - s0,
    shares = shares, seconds = SECS }
end

local function tests_i2(P, S, n)
  local s0 = proc_cpu_s(S.i2_pid)
  local cmd = {}
  for i = 1, n do
    cmd[#cmd + 1] = string.format('%stimeout %d iperf -c %s -p %d -t %d -y C >%s/i2t.%d 2>&1 &',
      P.cx, SECS + 30, P.addr, S.i2_port, SECS, tmp, i)
  end
  sh(table.concat(cmd, ' ') .. ' wait')
  local s1 = proc_cpu_s(S.i2_pid)
  local sum, bytes, shares = 0, 0, {}
  for i = 1, n do
    local l = csv_lines(slurp(tmp .. '/i2t.' .. i))[1]
    if not l then return nil end
    sum, bytes = sum + tonumber(l[9]), bytes + tonumber(l[8])
    shares[i] = tonumber(l[9])
  end
  return { value = sum, bytes = bytes, rx_cpu_s = s0 and s1 and s1 - s0, shares = shares,
    seconds = SECS }
end

local function udp_i2(P, S, len)
  local sf = tmp .. '/i2u.out'
  local pid = spawn(string.format('%siperf -s -u -p %d -B %s -y C', P.sx, S.i2u_port, P.addr), sf)
  sleep(0.3)
  local _, tx = timed(P, string.format('timeout %d iperf -c %s -u -p %d -t %d -b 100G -l %d -y C',
    SECS + 30, P.addr, S.i2u_port, SECS, len), 'i2u')
  sleep(0.5)
  local rx = proc_cpu_s(pid)
  os.execute('kill ' .. pid .. ' 2>/dev/null')
  local l = csv_lines(slurp(sf))[1]
  if not l or not l[12] then return nil end
  local got = tonumber(l[12]) - tonumber(l[11])
  return { value = got / interval_s(l), bytes = got * len, tx_cpu_s = tx, rx_cpu_s = rx,
    seconds = interval_s(l) }
end

local function tcp_bare(P, streams, trunc)
  local t = bare(string.format('%s -a %s -t %g -P %d %s %s %s', bins.tcp, P.addr, SECS, streams,
    trunc and '-T' or '', P.cli_ns and '-s ' .. P.cli_ns or '', P.srv_ns and '-r ' .. P.srv_ns or ''))
  if not t then return nil end
  return { value = t.bytes * 8 / t.seconds, bytes = t.bytes, tx_cpu_s = t.tx_cpu_s,
    rx_cpu_s = t.rx_cpu_s, seconds = t.seconds }
end

local function udp_bare(P, len, gso)
  local t = bare(string.format('%s -a %s -t %g -l %d -b 32 %s %s %s', bins.udp, P.addr, SECS, len,
    gso and '-G' or '', P.cli_ns and '-s ' .. P.cli_ns or '', P.srv_ns and '-r ' .. P.srv_ns or ''))
  if not t then return nil end
  return { value = t.datagrams / t.seconds, bytes = t.bytes, tx_cpu_s = t.tx_cpu_s,
    rx_cpu_s = t.rx_cpu_s, seconds = t.seconds }
end

-- A paced run: the packet-socket observer on the server's interface, the
-- client as its own process, SIGSTOP for STALL_S at STALL_AT_S.
local function paced(P, S, tool, rate_bps)
  local port = tool == 'qoslab' and S.q_port or S.i3_port
  local ready, out = tmp .. '/pace.ready', tmp .. '/pace.out'
  os.remove(ready)
  local spid = spawn(string.format('%s -i %s -p %d -t %d -w 10 -f %s %s', bins.pace, P.ifname,
    port, PACE_SECS + 2, ready, P.srv_ns and '-n ' .. P.srv_ns or ''), out)
  for _ = 1, 50 do
    if slurp(ready):match('ready\n') then break end
    sleep(0.1)
  end
  local srv_pid = tool == 'qoslab' and S.q_pid or S.i3_pid
  local s0 = proc_cpu_s(srv_pid)
  local cmd
  if tool == 'qoslab' then
    cmd = string.format('%s%s client %s -p %d -u -b %d -l 1400 -t %d -i 0', P.cx, QOSLAB, P.addr,
      port, rate_bps, PACE_SECS)
  else
    cmd = string.format('%siperf3 -c %s -p %d -u -b %d -l 1400 -t %d', P.cx, P.addr, port,
      rate_bps, PACE_SECS)
  end
  local cpid = spawn(cmd, tmp .. '/pace.client')
  -- the client's own start-up (a Lua process, the control exchange) comes
  -- first: stall the sender once its data flows
  sleep(STALL_AT_S)
  os.execute('kill -STOP ' .. cpid)
  sleep(STALL_S)
  os.execute('kill -CONT ' .. cpid)
  wait_exit(cpid, PACE_SECS + 20)
  wait_exit(spid, 10)
  local s1 = proc_cpu_s(srv_pid)
  local t = lib.parse_line(slurp(out):match('(ceiling [^\n]*)') or '')
  if not t or not t.windows then
    io.stderr:write('bench: pacing ', tool, ': ', slurp(out):sub(1, 200),
      slurp(tmp .. '/pace.client'):sub(1, 200), '\n')
    return nil
  end
  local v = lib.pace_verdict(t.windows, 10, rate_bps)
  -- best = most windows within the tolerance, then the smallest overshoot after the stall
  local score = (v.steady.n > 0 and v.steady.within / v.steady.n or 0)
    - (v.after and v.after.above or 1000) / 1000
  return { value = score, verdict = v, drops = t.drops, bytes = t.bytes,
    rx_cpu_s = s0 and s1 and s1 - s0, seconds = PACE_SECS }
end

-- ------------------------------------------------------------ the rows
local function rows_for()
  local R = {}
  local function add(r) R[#R + 1] = r end
  for _, p in ipairs { 1, 4, 16 } do
    local tools = {
      { 'bare', function(P) return tcp_bare(P, p) end },
      { 'qoslab', function(P, S) return tcp_q(P, S, p) end },
      { 'iperf3', function(P, S) return tcp_i3(P, S, p) end },
      { 'iperf', function(P, S) return tcp_i2(P, S, p) end },
    }
    if p == 1 then
      table.insert(tools, 2, { 'bare MSG_TRUNC', function(P) return tcp_bare(P, p, true) end })
      for _, v in ipairs(variants) do
        tools[#tools + 1] = { 'qoslab ' .. v.name, function(P, S) return tcp_q(P, S, p, v.opts) end,
          vs = v.vs }
        if v.i3 then
          tools[#tools + 1] = { 'iperf3 ' .. v.i3, function(P, S) return tcp_i3(P, S, p, v.i3) end }
        end
      end
    end
    add { id = 'tcp' .. p, label = string.format('TCP %d stream%s, Gbit/s', p, p > 1 and 's' or ''),
      unit = 'gbit', kind = 'tcp', streams = p, tools = tools }
  end
  add { id = 'tcp128', label = 'TCP parallel 128, Gbit/s (sum)', unit = 'gbit', kind = 'many',
    tools = {
      { 'qoslab', function(P, S) return tcp_q(P, S, 128) end },
      { 'iperf3', function(P, S) return tcp_i3(P, S, 128) end },
      { 'iperf', function(P, S) return tcp_i2(P, S, 128) end } } }
  add { id = 'tests32', label = 'TCP 32 concurrent tests on one server, Gbit/s (sum)',
    unit = 'gbit', kind = 'many',
    tools = {
      { 'qoslab', function(P, S) return tests_q(P, S, 32) end },
      { 'iperf', function(P, S) return tests_i2(P, S, 32) end } } }
  for _, len in ipairs { 1400, 64 } do
    add { id = 'udp' .. len, label = string.format('UDP %d B unpaced, k datagrams/s received', len),
      unit = 'kdg', kind = 'udp', tools = {
        { 'bare', function(P) return udp_bare(P, len) end },
        { 'qoslab', function(P, S) return udp_q(P, S, len) end },
        { 'iperf3', function(P, S) return udp_i3(P, S, len) end },
        { 'iperf', function(P, S) return udp_i2(P, S, len) end } } }
  end
  add { id = 'gso1400', label = 'UDP 1400 B GSO/GRO, k datagrams/s received', unit = 'kdg',
    kind = 'gso', tools = {
      { 'bare', function(P) return udp_bare(P, 1400, true) end },
      { 'qoslab', function(P, S) return udp_q(P, S, 1400, true) end } } }
  for _, rate in ipairs { 100e6, 1e9 } do
    add { id = 'pace' .. math.tointeger(rate / 1e6),
      label = string.format('UDP paced %s, 10 ms windows', rate >= 1e9 and '1 Gbit/s' or '100 Mbit/s'),
      kind = 'pace', rate_bps = rate, tools = {
        { 'qoslab', function(P, S) return paced(P, S, 'qoslab', math.tointeger(rate)) end },
        { 'iperf3', function(P, S) return paced(P, S, 'iperf3', math.tointeger(rate)) end } } }
  end
  return R
end

local ROWS = rows_for()
-- BENCH_ROWS=tcp1,udp64,...: only those rows (while iterating)
local only = os.getenv('BENCH_ROWS')
if only and only ~= '' then
  local keep = {}
  for _, r in ipairs(ROWS) do
    if (',' .. only .. ','):find(',' .. r.id .. ',', 1, true) then keep[#keep + 1] = r end
  end
  ROWS = keep
end
local load0 = (slurp('/proc/loadavg'):match('^(%S+ %S+ %S+)'))
local t_start = os.time()
local results = {} -- results[path][row id][tool] = {runs}

local ok, err = pcall(function()
  if veth_made then veth_up() end
  for k, P in ipairs(paths) do
    local S = start_servers(P, k)
    servers[#servers + 1] = S
    results[P.name] = {}
    for round = 1, N do
      io.write(string.format('[%s] round %d/%d\n', P.name, round, N))
      io.flush()
      for _, row in ipairs(ROWS) do
        results[P.name][row.id] = results[P.name][row.id] or {}
        local order = {}
        for i = 1, #row.tools do order[i] = row.tools[i] end
        -- alternate: every other round runs the tools the other way round
        if round % 2 == 0 then
          for i = 1, #order // 2 do order[i], order[#order + 1 - i] = order[#order + 1 - i], order[i] end
        end
        for _, t in ipairs(order) do
          local runs = results[P.name][row.id][t[1]] or {}
          results[P.name][row.id][t[1]] = runs
          local good, r = pcall(t[2], P, S)
          if not good then io.stderr:write('bench: ', row.id, ' ', t[1], ': ', tostring(r), '\n') end
          runs[#runs + 1] = good and r or {}
        end
      end
    end
    stop_servers(S)
  end
end)
for _, S in ipairs(servers) do stop_servers(S) end
if veth_made then veth_down() end
sh('rm -rf ' .. tmp)
assert(ok, err)
local load1 = (slurp('/proc/loadavg'):match('^(%S+ %S+ %S+)'))
local elapsed = os.time() - t_start
local NCPU = math.tointeger(tonumber(sh('nproc'))) or 1
local L0, L1 = lib.load1(load0), lib.load1(load1)
local LOAD = math.max(L0 or 0, L1 or 0)
local load_warning = lib.load_warning(L0, L1, NCPU)

-- ------------------------------------------------------------ the report
local F = lib.fmt
local function show(row, r)
  if not r then return 'n/a' end
  if row.unit == 'gbit' then return F(r.value / 1e9, 2) end
  if row.unit == 'kdg' then return F(r.value / 1e3, 0) end
  return 'n/a'
end

local out = {}
local function w(s) out[#out + 1] = s end
w('## At the kernel\'s ceiling: qoslab against bare programs, iperf3 and iperf (session 8)')
w('')
w(string.format('Run: `%s` (root) on %s, %s, %s CPUs; %d s; load average %s before, %s after. '
  .. 'Best of N = %d alternating runs of %d s each (pacing: %d s runs with a %.0f s SIGSTOP of '
  .. 'the sender at %.1f s); the tools take turns within each round, in reverse order every '
  .. 'other round.', QUICK and 'QUICK=1 make bench' or 'make bench', os.date('!%Y-%m-%d %H:%M UTC'),
  sh('uname -r'):gsub('%s+$', ''), sh('nproc'):gsub('%s+$', ''), elapsed, load0, load1, N, SECS,
  PACE_SECS, STALL_S, STALL_AT_S))
w('')
w('bare: bench/ceiling/tcp.c (blocking send/recv of 128 KiB, one thread per end and stream; '
  .. 'MSG_TRUNC: recv discards), bench/ceiling/udp.c (sendmmsg/recvmmsg, batch 32; GSO: '
  .. 'UDP_SEGMENT buffers of up to 64 segments, UDP_GRO receive). qoslab: `qoslab.traffic` '
  .. 'in the bench process against a `qoslab server` process (defaults; UDP udp_batch = 32); '
  .. '`iperf3 -c` against `iperf3 -s` (3.12); `iperf -c -y C` against `iperf -s` (2.1.8). '
  .. 'UDP figures are datagrams received per second (iperf3: sent less lost; iperf: its '
  .. 'server\'s report). CPU: the bare programs\' own getrusage(RUSAGE_THREAD); a client '
  .. 'process by /usr/bin/time (start-up included), a server process by /proc/PID/stat '
  .. 'before and after the test (the qoslab client: the bench process\'s own). veth: two '
  .. 'namespaces joined by a veth pair, default qdiscs, offloads on.'
  .. (#variants > 0 and '' or ' The engine offered none of skip_rx_copy, zerocopy, cpu_affinity.'))
w('')
if load_warning then
  w(load_warning)
  w('')
end

local verdicts = {}
for _, P in ipairs(paths) do
  w(string.format('### %s', P.name))
  w('')
  w('| row | bare | bare MSG_TRUNC | qoslab | iperf3 | iperf | qoslab/bare | qoslab/iperf3 | '
    .. 'qoslab/iperf | Jain (qoslab / iperf3 / iperf) |')
  w('|---|---|---|---|---|---|---|---|---|---|')
  local R = results[P.name]
  local four = lib.best(R.tcp4 and R.tcp4.qoslab)
  local notes = {}
  local function note(label, rb, q, b)
    local n = lib.ceiling_note(rb, q, b, LOAD, NCPU)
    if n then notes[#notes + 1] = string.format('- %s: %s', label, n) end
  end
  for _, row in ipairs(ROWS) do
    local b = {}
    for _, t in ipairs(row.tools) do b[t[1]] = lib.best(R[row.id] and R[row.id][t[1]]) end
    R[row.id].best = b
    if row.kind ~= 'pace' then
      local q = b.qoslab
      local jq = q and q.shares and #q.shares > 1 and lib.jain(q.shares)
      local j3 = b.iperf3 and b.iperf3.shares and #b.iperf3.shares > 1 and lib.jain(b.iperf3.shares)
      local j2 = b.iperf and b.iperf.shares and #b.iperf.shares > 1 and lib.jain(b.iperf.shares)
      local rb = lib.ratio(q and q.value, b.bare and b.bare.value)
      local r3 = lib.ratio(q and q.value, b.iperf3 and b.iperf3.value)
      local r2 = lib.ratio(q and q.value, b.iperf and b.iperf.value)
      w(string.format('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |', row.label,
        show(row, b.bare), show(row, b['bare MSG_TRUNC']), show(row, q), show(row, b.iperf3),
        show(row, b.iperf), F(rb), F(r3), F(r2),
        (jq or j3 or j2) and string.format('%s / %s / %s', F(jq or nil, 3), F(j3 or nil, 3),
          F(j2 or nil, 3)) or ''))
      note(row.label, rb, q, b.bare)
      -- the targets, and the measured reasons of a miss
      local v = { path = P.name, row = row.label }
      local refs = {}
      if row.kind == 'tcp' or row.kind == 'udp' then
        v.met = rb and rb >= 0.95 and (r3 == nil or r3 >= 1.0) and (r2 == nil or r2 >= 1.0)
        v.why = string.format('≥ 0.95 × bare and ≥ 1.0 × iperf3, iperf: %s, %s, %s', F(rb), F(r3), F(r2))
        if not rb or rb < 0.95 then refs[#refs + 1] = { name = 'bare', run = b.bare } end
        if r3 and r3 < 1.0 then refs[#refs + 1] = { name = 'iperf3', run = b.iperf3 } end
        if r2 and r2 < 1.0 then refs[#refs + 1] = { name = 'iperf', run = b.iperf } end
      elseif row.kind == 'gso' then
        v.met = rb and rb >= 0.9
        v.why = string.format('≥ 0.9 × bare GSO/GRO: %s', F(rb))
        refs[1] = { name = 'bare', run = b.bare }
      elseif row.kind == 'many' then
        local r4 = lib.ratio(q and q.value, four and four.value)
        v.met = r4 and math.abs(r4 - 1) <= 0.05
        v.why = string.format('sum within 5 %% of qoslab\'s 4 streams: %s × (Jain %s)', F(r4), F(jq or nil, 3))
        refs[1] = { name = 'qoslab 4 streams', run = four }
        if row.id == 'tcp128' then
          v.met = v.met and (r3 == nil or r3 >= 1.0)
          v.why = v.why .. string.format('; ≥ 1.0 × iperf3: %s', F(r3))
          if r3 and r3 < 1.0 then refs[#refs + 1] = { name = 'iperf3', run = b.iperf3 } end
        end
      end
      if not v.met then
        v.reason = table.concat(lib.miss_reasons { q = q, refs = refs, ncpu = NCPU, load = LOAD,
          streams = row.kind == 'tcp' and row.streams or row.kind == 'many' and NCPU or 1,
          jain = jq or nil }, '; ')
      end
      verdicts[#verdicts + 1] = v
    end
  end
  -- extra qoslab / iperf3 variants (engine options)
  for _, t in ipairs(R.tcp1 and ROWS[1].tools or {}) do
    if t[1]:match('^qoslab .') or t[1]:match('^iperf3 .') then
      local r, vs = R.tcp1.best[t[1]], R.tcp1.best[t.vs or 'bare']
      if t[1]:match('^qoslab') then
        note('TCP 1 stream, ' .. t[1], lib.ratio(r and r.value, vs and vs.value), r, vs)
      end
      w(string.format('| TCP 1 stream, %s (against %s) | | | %s | | | %s | %s | | |', t[1],
        t.vs or 'bare', show(ROWS[1], r), F(lib.ratio(r and r.value, vs and vs.value)),
        F(lib.ratio(r and r.value, R.tcp1.best.iperf3 and R.tcp1.best.iperf3.value))))
    end
  end
  w('')
  if #notes > 0 then
    for _, n in ipairs(notes) do w(n) end
    w('')
  end
  -- pacing
  w('| pacing | tool | steady windows within ±5 % | worst steady window | stall windows | '
    .. 'after the stall: highest window | windows above +10 % | observer drops | receiver CPU s/GB |')
  w('|---|---|---|---|---|---|---|---|---|')
  for _, row in ipairs(ROWS) do
    if row.kind == 'pace' then
      for _, t in ipairs(row.tools) do
        local r = R[row.id].best[t[1]]
        local v = r and r.verdict
        if v then
          w(string.format('| %s | %s | %d / %d | %+.1f %% | %d | %s | %s | %s | %s |', row.label, t[1],
            v.steady.within, v.steady.n, v.steady.worst_pct, v.stall_windows,
            v.after and string.format('%+.1f %%', v.after.max_pct) or 'no stall seen',
            v.after and tostring(v.after.above) or 'n/a', tostring(r.drops),
            F(lib.cpu_s_per_gb(r.rx_cpu_s, r.bytes), 2)))
          if t[1] == 'qoslab' then
            local met = v.steady.n > 0 and v.steady.within == v.steady.n and v.after ~= nil
              and v.after.above == 0
            verdicts[#verdicts + 1] = { path = P.name, row = row.label, met = met,
              reason = not met and table.concat(lib.miss_reasons { q = r, pace = v, ncpu = NCPU,
                load = LOAD }, '; ') or nil,
              why = string.format('every 10 ms window within ±5 %%: %d / %d (worst %+.1f %%); '
                .. 'after the stall none above +10 %%: highest %s',
                v.steady.within, v.steady.n, v.steady.worst_pct,
                v.after and string.format('%+.1f %%', v.after.max_pct) or 'no stall seen') }
          end
        else
          w(string.format('| %s | %s | n/a | | | | | | |', row.label, t[1]))
        end
      end
    end
  end
  w('')
  -- CPU per GB
  w('| row | tool | sender CPU s/GB | receiver CPU s/GB | qoslab receiver / iperf3 receiver |')
  w('|---|---|---|---|---|')
  for _, row in ipairs(ROWS) do
    if row.kind ~= 'pace' then
      local b = R[row.id].best
      for _, t in ipairs(row.tools) do
        local r = b[t[1]]
        local rq = t[1] == 'qoslab' and b.iperf3 and lib.ratio(lib.cpu_s_per_gb(r and r.rx_cpu_s, r and r.bytes),
          lib.cpu_s_per_gb(b.iperf3.rx_cpu_s, b.iperf3.bytes))
        w(string.format('| %s | %s | %s | %s | %s |', row.label, t[1],
          F(lib.cpu_s_per_gb(r and r.tx_cpu_s, r and r.bytes), 3),
          F(lib.cpu_s_per_gb(r and r.rx_cpu_s, r and r.bytes), 3), rq and F(rq) or ''))
        if rq and (row.kind == 'tcp' or row.kind == 'udp') then
          verdicts[#verdicts + 1] = { path = P.name, row = row.label .. ', receiver CPU per GB',
            met = rq <= 0.8, why = string.format('≤ 0.8 × iperf3\'s: %s', F(rq)),
            reason = rq > 0.8 and table.concat(lib.miss_reasons { q = r, ncpu = NCPU, load = LOAD,
              refs = { { name = 'iperf3', run = b.iperf3 } },
              streams = row.kind == 'tcp' and row.streams or 1 }, '; ') or nil }
        end
      end
    end
  end
  w('')
end

-- scale: qoslab's cost against streams, tests and rate, and what 10/100 Gbit/s would take
w('### Scale (qoslab, from the runs above)')
w('')
w('| path | load | Gbit/s | sender CPU s/GB | receiver CPU s/GB | receiver cores at 10 Gbit/s | at 100 Gbit/s |')
w('|---|---|---|---|---|---|---|')
for _, P in ipairs(paths) do
  local R = results[P.name]
  for _, row in ipairs(ROWS) do
    local r = R[row.id].best.qoslab
    if r and row.kind ~= 'pace' then
      local gbps = row.unit == 'gbit' and r.value / 1e9 or r.bytes * 8 / SECS / 1e9
      local rx = lib.cpu_s_per_gb(r.rx_cpu_s, r.bytes)
      w(string.format('| %s | %s | %s | %s | %s | %s | %s |', P.name, row.label:gsub(',.*$', ''),
        F(gbps, 2), F(lib.cpu_s_per_gb(r.tx_cpu_s, r.bytes), 3), F(rx, 3),
        F(lib.cores_at(10e9, rx), 2), F(lib.cores_at(100e9, rx), 1)))
    elseif r and row.kind == 'pace' then
      local rx = lib.cpu_s_per_gb(r.rx_cpu_s, r.bytes)
      w(string.format('| %s | %s | %s | | %s | %s | %s |', P.name, row.label:gsub(',.*$', ''),
        F(row.rate_bps / 1e9, 2), F(rx, 3), F(lib.cores_at(10e9, rx), 2), F(lib.cores_at(100e9, rx), 1)))
    end
  end
end
w('')
w('### Targets')
w('')
if load_warning then
  w(load_warning)
  w('')
end
w('| path | row | met | measured | reason of a miss (from this run) |')
w('|---|---|---|---|---|')
for _, v in ipairs(verdicts) do
  w(string.format('| %s | %s | %s | %s | %s |', v.path, v.row, v.met and 'yes' or '**no**', v.why,
    v.reason or ''))
end
w('')
local text = table.concat(out, '\n')
io.write('\n', text, '\n')

-- into bench/RESULTS.md (its own section replaced) or BENCH_OUT
local dest = os.getenv('BENCH_OUT')
if not dest or dest == '' then dest = QUICK and '/tmp/qoslab-bench-ceiling.md' or 'bench/RESULTS.md' end
if dest == 'bench/RESULTS.md' then
  local doc = slurp(dest)
  local title = out[1]
  local s = doc:find(title, 1, true)
  if s then
    -- up to the next section of the same level that is not ours
    local e = doc:find('\n## ', s + #title, true)
    doc = doc:sub(1, s - 1) .. text .. (e and '\n' .. doc:sub(e) or '\n')
  else
    local first = doc:find('\n## ', 1, true)
    doc = first and (doc:sub(1, first) .. text .. '\n' .. doc:sub(first)) or (doc .. '\n' .. text)
  end
  local f = assert(io.open(dest .. '.tmp', 'w'))
  f:write(doc)
  f:close()
  assert(os.rename(dest .. '.tmp', dest))
else
  local f = assert(io.open(dest, 'w'))
  f:write(text, '\n')
  f:close()
end
io.write('written: ', dest, '\n')
