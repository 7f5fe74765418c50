-- The native impairment link against kernel netem, point by point: the same
-- small sweep (one-way delay 10, 100, 300 ms x loss 0, 5 %) through
-- qoslab.testbed{backend = "link"} on this host and through
-- qoslab.testbed{backend = "netem"} in a qemu guest whose stock kernel has
-- sch_netem (qoslab.vm), then the table of both, their ratio and spread;
-- and in the same guest the link too, each point on both backends in turn,
-- so a second table compares the backends on one kernel.
--
-- Both sides are made equal in everything but the impairment backend:
--  - the impairment: forward only (the data; ACKs undelayed and unlost), a
--    20 Mbit/s rate inside it (the guest's emulated CPU keeps up with that,
--    so the path decides), limit 5000 packets: above the largest window the
--    pinned tcp_rmem lets the receiver offer (6 MiB, about 4,300 segments), so
--    neither queue ever tail-drops. That matters: netem on the sender's own
--    egress answers a tail drop with NET_XMIT_DROP, which TCP takes as local
--    congestion (CWR, the segment sent again, no loss recovery), while a drop
--    in the link is a loss on the path (recovery, at times a timeout). netem
--    charges the rate on the Ethernet frame (14 bytes more than the IP
--    packet the link's TUN device carries): the link gets
--    rate_packet_overhead_bytes = 14, so both send 1514 wire bytes per
--    full segment;
--  - offloads off (the testbed's default: MTU-sized frames on the wire),
--    MTU 1500; both backends take TCP's GSO packets whole (netem at its
--    qdisc, where TCP hands them over whatever the offloads; the link with
--    gso = true, the testbed's choice), and a rate charges each segment's
--    headers on both;
--  - the TCP sysctls of both namespaces pinned to the same values (SYSCTLS
--    below: no metrics cache, ECN off, SACK, timestamps, buffers),
--    read back and compared; the initial cwnd and rwnd are both kernels'
--    default of 10 segments (no route sets them).
-- Per point a UDP test at 10 Mbit/s (1200-byte datagrams) with a UDP probe
-- beside it (RTT p50, datagram loss with its binomial 95 % interval), then
-- TCP tests repeated (goodput: mean, coefficient of variation, 95 %
-- t-interval), each long enough for the RTT (and, without loss, after an
-- omit_s warm-up that leaves slow start and its overshoot out), and the
-- model: Mathis et al. (MSS/RTT x sqrt(3/2)/sqrt(p)) under loss, the rate's
-- goodput (20 Mbit/s x 1448/1514) without. A bench, not a spec: it needs the
-- guest and this host at once and 20-25 minutes on the shared 2-core host.
--
--   bin/qoslab run --host bench/link_vs_netem.lua [-- QUICK | LOSS | (LOSSPAR | SAMEKERNEL) [K [R [TEST_S [CC]]]]]
--
-- QUICK: two runs per point and shorter tests (~12 minutes). LOSS: only the
-- lossy points at 100 and 300 ms, five runs of 60 s each on the native link
-- and on netem in the guest (~25 minutes): at 0.3-0.8 Mbit/s a 15-20 s test
-- sees a few dozen loss episodes and three of them cannot tell 10 % apart.
--
-- LOSSPAR: the same two lossy points, but K testbeds at once per point and
-- backend (default 8; each built as a point's one: the same impairment,
-- limit and overhead, the sysctls pinned and read back in both its
-- namespaces, its own server), the UDP test on the first of them alone,
-- then R rounds (default 4) in which all K run one CUBIC test of TEST_S
-- seconds (default 60) at the same time: K x R runs a point and side in the
-- wall time of R. Five runs one after another left 300 ms, 5 % undecided
-- (link / netem 1.133, the intervals overlapping at a CV of 0.10-0.18), and
-- at 0.25-0.3 Mbit/s a test, enough runs one after another would take
-- hours; K paths at once carry K x 0.3 Mbit/s, far below what either side
-- forwards, so they should not disturb each other. A drift or a disturbed
-- round shows in the means by round (printed with the CPUs' busy share), a
-- testbed apart in the means by testbed; an effect common to every round
-- does not (LOSS's runs one after another are the reference for that). The
-- table adds the ratio's 95 % interval (delta method) and where it lies
-- against +-10 %. The guest keeps the harness's default 1024 MiB and a vCPU
-- per host core (QOSLAB_VM_MEM, QOSLAB_VM_CPUS in the caller's environment
-- change them): eight netem testbeds running 5 s tests left 820 MiB
-- available there and its vCPUs 12-17 % busy; the progress lines show both
-- per round. `LOSSPAR 8 4` takes about 19 minutes here (per side
-- two points of four rounds of 60 s tests plus some 20 s for the testbeds
-- and the UDP test; the guest's boot); `LOSSPAR 2 1 10` is a smoke run of
-- 2 minutes. CC (cubic, the default, or reno) is the TCP tests' congestion
-- control: the two kernels are years apart (6.18 here, 6.1 in the guest),
-- and Reno's rule is the simplest both have, so a gap that CUBIC shows and
-- Reno does not points at the kernels' congestion control, not at the
-- backends.
--
-- SAMEKERNEL [K [R [TEST_S [CC]]]]: LOSSPAR's points and rounds with both
-- backends in the guest (the link's and netem's testbeds in turn, point by
-- point) and no native half: one kernel and one emulated CPU for both, so
-- what differs between the two tables is the backend alone. At these rates
-- (a few dozen packets a second per path, 300 ms of delay) the emulated
-- CPU's stalls are small beside the delay, unlike at 10 ms (see RESULTS).
--
-- Needs root (and, for the guest, what `make check-netem` needs). Internally
-- `... guest OUT [QUICK | LOSS | (LOSSPAR | SAMEKERNEL) K R TEST_S CC]` runs the guest's half
-- (OUT.netem, OUT.link).
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'
local vm = require 'qoslab.vm'

local USAGE = 'usage: link_vs_netem.lua [QUICK | LOSS | (LOSSPAR | SAMEKERNEL) [K [R [TEST_S [CC]]]]]'
local args = { ... }
local guest = args[1] == 'guest'
local mode = guest and args[3] or args[1]
local quick, loss_only, same = mode == 'QUICK', mode == 'LOSS', mode == 'SAMEKERNEL'
local par = mode == 'LOSSPAR' or same
assert(mode == nil or quick or loss_only or par, USAGE)

-- LOSSPAR's numbers (after the mode, on the host and in the guest alike):
-- testbeds at once per point and backend, rounds, a TCP test's seconds.
local first_number = guest and 4 or 2
assert(par or args[first_number] == nil, USAGE)
local function count(i, default, max, what)
  local v = args[first_number + i]
  if v == nil then return default end
  local n = math.tointeger(tonumber(v))
  assert(n and n >= 1 and n <= max,
    string.format('LOSSPAR: %s: expected an integer in [1, %d], got %s (%s)', what, max, v, USAGE))
  return n
end
-- 64 testbeds: 128 namespaces, and far below the 255 testbeds whose
-- addresses qoslab.testbed keeps apart within one process
local PAR_TESTBEDS = count(0, 8, 64, 'K (testbeds at once)')
local PAR_ROUNDS, PAR_TEST_S = count(1, 4, 100, 'R (rounds)'), count(2, 60, 3600, 'TEST_S')
-- the TCP tests' congestion control (LOSSPAR's fifth word; CUBIC elsewhere)
local CONGESTION = args[first_number + 3] or 'cubic'
assert(CONGESTION == 'cubic' or CONGESTION == 'reno',
  'LOSSPAR: CC: expected cubic or reno, got ' .. tostring(CONGESTION) .. ' (' .. USAGE .. ')')
assert(args[first_number + 4] == nil, USAGE)

local RATE_BPS, LIMIT_PACKETS = 20e6, 5000
local MSS_BYTES, WIRE_BYTES = 1448, 1514

-- The sweep: per point the TCP test's duration, warm-up and repetitions
-- (full, then QUICK), and the UDP test's duration.
local POINTS = {
  { delay_ms = 10, loss_pct = 0, tcp_s = 5, omit_s = 1, runs = 3, q_tcp_s = 3, q_runs = 2, udp_s = 3 },
  { delay_ms = 10, loss_pct = 5, tcp_s = 10, omit_s = 0, runs = 4, q_tcp_s = 5, q_runs = 2, udp_s = 6 },
  { delay_ms = 100, loss_pct = 0, tcp_s = 8, omit_s = 3, runs = 3, q_tcp_s = 4, q_runs = 2, udp_s = 3 },
  { delay_ms = 100, loss_pct = 5, tcp_s = 15, omit_s = 0, runs = 3, q_tcp_s = 8, q_runs = 2, udp_s = 6 },
  { delay_ms = 300, loss_pct = 0, tcp_s = 10, omit_s = 6, runs = 3, q_tcp_s = 5, q_runs = 2, udp_s = 3 },
  { delay_ms = 300, loss_pct = 5, tcp_s = 20, omit_s = 0, runs = 3, q_tcp_s = 10, q_runs = 2, udp_s = 6 },
}
if loss_only then
  POINTS = {
    { delay_ms = 100, loss_pct = 5, tcp_s = 60, omit_s = 0, runs = 5, udp_s = 6 },
    { delay_ms = 300, loss_pct = 5, tcp_s = 60, omit_s = 0, runs = 5, udp_s = 6 },
  }
elseif par then
  POINTS = {
    { delay_ms = 100, loss_pct = 5, tcp_s = PAR_TEST_S, udp_s = 6 },
    { delay_ms = 300, loss_pct = 5, tcp_s = PAR_TEST_S, udp_s = 6 },
  }
end

-- Pinned in both namespaces of every testbed, on both kernels (each exists
-- per namespace in Linux 6.1 and 6.18; the host's own tcp_rmem max is 32 MiB,
-- the guest's 6 MiB: the pinned values are the guest's defaults). The
-- congestion control is the sender socket's (congestion = "cubic"): a
-- namespace may not set a default outside the allowed list (EPERM).
local SYSCTLS = {
  { 'net.ipv4.tcp_no_metrics_save', '1' },
  { 'net.ipv4.tcp_ecn', '0' },
  { 'net.ipv4.tcp_sack', '1' },
  { 'net.ipv4.tcp_dsack', '1' },
  { 'net.ipv4.tcp_timestamps', '1' },
  { 'net.ipv4.tcp_window_scaling', '1' },
  { 'net.ipv4.tcp_rmem', '4096 131072 6291456' },
  { 'net.ipv4.tcp_wmem', '4096 16384 4194304' },
  { 'net.ipv4.tcp_adv_win_scale', '1' },
  { 'net.ipv4.tcp_moderate_rcvbuf', '1' },
  { 'net.ipv4.tcp_frto', '2' },
  { 'net.ipv4.tcp_recovery', '1' },
  { 'net.ipv4.tcp_early_retrans', '3' },
  { 'net.ipv4.tcp_reordering', '3' },
  { 'net.ipv4.tcp_max_reordering', '300' },
  { 'net.ipv4.tcp_mtu_probing', '0' },
  { 'net.ipv4.tcp_autocorking', '1' },
  { 'net.ipv4.tcp_tso_win_divisor', '3' },
  { 'net.ipv4.tcp_limit_output_bytes', '1048576' },
  { 'net.ipv4.tcp_pacing_ss_ratio', '200' },
  { 'net.ipv4.tcp_pacing_ca_ratio', '120' },
  { 'net.ipv4.tcp_notsent_lowat', '4294967295' },
  { 'net.ipv4.tcp_slow_start_after_idle', '1' },
  { 'net.ipv4.tcp_thin_linear_timeouts', '0' },
}

local function sh(cmd)
  local p = assert(io.popen(cmd, 'r'))
  local out = p:read('a')
  local ok = p:close()
  return ok, out
end

local function shq(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Write the pinned sysctls in a namespace; return them as read back.
local function pin(ns)
  local w, r = {}, {}
  for _, kv in ipairs(SYSCTLS) do
    w[#w + 1] = shq(kv[1] .. '=' .. kv[2])
    r[#r + 1] = kv[1]
  end
  local ok, out = sh(string.format('ip netns exec %s sysctl -q -w %s 2>&1', shq(ns), table.concat(w, ' ')))
  assert(ok and out == '', 'pinning sysctls in ' .. ns .. ' failed: ' .. out)
  local _, got = sh(string.format('ip netns exec %s sysctl -n %s', shq(ns), table.concat(r, ' ')))
  local vals, i = {}, 0
  for line in got:gmatch('[^\n]+') do
    i = i + 1
    vals[SYSCTLS[i][1]] = (line:gsub('%s+', ' '))
  end
  assert(i == #SYSCTLS, 'reading sysctls back in ' .. ns .. ' gave ' .. i .. ' values')
  return vals
end

-- A point's impairment on a backend (equal on both, see the header).
local function impairment(backend, p)
  local impair = { delay_ms = p.delay_ms, loss_pct = p.loss_pct, rate_bps = RATE_BPS,
    limit_packets = LIMIT_PACKETS }
  if backend == 'link' then impair.rate_packet_overhead_bytes = WIRE_BYTES - 1500 end
  return impair
end

-- The point's UDP test with its probe beside it, through the testbed whose
-- server and client namespace `base` names: { rtt_p50_ms, lost, total }.
local function udp_test(base, p)
  local u = { proto = 'udp', bitrate_bps = 10e6, length_bytes = 1200, window_bytes = 4194304,
    duration_s = p.udp_s, interval_s = 1, probe = { proto = 'udp', interval_ms = 10 } }
  for k, v in pairs(base) do u[k] = v end
  local ures = assert(traffic.run(u))
  local r = ures.received
  return { ures.latency.rtt_ms.p50, r.lost_packets, r.lost_packets + r.unique_packets }
end

-- The link's tail drops since the testbed was made (netem's own drop count
-- mixes them with its loss drops, so a netem testbed gives nil).
local function limit_drops(tb)
  for _, e in ipairs(tb.backend == 'link' and tb:stats().client or {}) do
    if e.kind == 'link' then return e.drops_by_reason.limit end
  end
  return nil
end

-- One point on one backend: the UDP test's { rtt_p50_ms, lost, total } and
-- the TCP runs' { mbps, retransmits }, plus the sysctls read back.
local function point(backend, p)
  local tb <close> = assert(testbed { backend = backend, impair = impairment(backend, p) })
  local sys = pin(tb.client_netns)
  pin(tb.server_netns)
  local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
  local base = { host = tb.server_addr, port = srv:port(), netns = tb.client_netns }
  local out = { udp = udp_test(base, p), tcp = {}, sys = sys }
  for _ = 1, quick and p.q_runs or p.runs do
    local o = { duration_s = quick and p.q_tcp_s or p.tcp_s, interval_s = 1, congestion = 'cubic' }
    if p.omit_s > 0 then o.omit_s = quick and math.ceil(p.omit_s / 2) or p.omit_s end
    for k, v in pairs(base) do o[k] = v end
    local t = assert(traffic.run(o))
    out.tcp[#out.tcp + 1] = { t.received.bits_per_second / 1e6, t.sent.retransmits or 0 }
  end
  -- over the whole point
  out.limit_drops = limit_drops(tb)
  return out
end

-- A list whose entries (testbeds, servers, test handles) are closed, last
-- first, when it goes out of scope, also on an error or an interruption;
-- a close that raises does not keep the others open.
local function closing()
  return setmetatable({}, { __close = function(list)
    local failed
    for i = #list, 1, -1 do
      local ok, e = pcall(getmetatable(list[i]).__close, list[i])
      if not ok and failed == nil then failed = e end
    end
    if failed ~= nil then error(failed, 0) end
  end })
end

-- The CPUs' busy and total jiffies since boot (/proc/stat's first line:
-- guest time is inside user time, idle and iowait are not busy).
local function cpu_jiffies()
  local f = assert(io.open('/proc/stat', 'r'))
  local line = f:read('l')
  f:close()
  local busy, total, i = 0, 0, 0
  for n in line:gmatch('%d+') do
    i = i + 1
    if i <= 8 then
      total = total + tonumber(n)
      if i ~= 4 and i ~= 5 then busy = busy + tonumber(n) end
    end
  end
  return busy, total
end

local function mem_available_mib()
  for line in io.lines('/proc/meminfo') do
    local kib = line:match('^MemAvailable:%s+(%d+)')
    if kib then return tonumber(kib) / 1024 end
  end
  return 0 / 0
end

-- One lossy point on one backend, LOSSPAR's way: PAR_TESTBEDS testbeds,
-- each built as point() builds its one, the UDP test on the first of them
-- alone, then PAR_ROUNDS rounds in which every testbed runs one TCP test at
-- the same time. Returns what point() returns, each TCP run with its
-- testbed and round ({ mbps, retransmits, testbed, round }), plus the CPUs'
-- busy fraction per round (`cpu`) and each testbed's link limit drops
-- (`limit_drops_by_testbed`, link only).
local function par_point(backend, p)
  local held <close> = closing()
  local beds, sys, sys_ns = {}, nil, nil
  for i = 1, PAR_TESTBEDS do
    local tb = assert(testbed { backend = backend, impair = impairment(backend, p) })
    held[#held + 1] = tb
    -- every namespace reads back what the first one does (one kernel)
    for _, ns in ipairs { tb.client_netns, tb.server_netns } do
      local got = pin(ns)
      sys, sys_ns = sys or got, sys_ns or ns
      for _, kv in ipairs(SYSCTLS) do
        assert(got[kv[1]] == sys[kv[1]], string.format('%s reads back %s in %s but %s in %s',
          kv[1], got[kv[1]], ns, sys[kv[1]], sys_ns))
      end
    end
    local srv = assert(traffic.server { port = 0, netns = tb.server_netns })
    held[#held + 1] = srv
    beds[i] = { tb = tb, base = { host = tb.server_addr, port = srv:port(), netns = tb.client_netns } }
  end
  io.stderr:write(string.format('%s: %d ms, %g %%: %d testbeds up, MemAvailable %.0f MiB\n', backend,
    p.delay_ms, p.loss_pct, #beds, mem_available_mib()))
  local out = { udp = udp_test(beds[1].base, p), tcp = {}, sys = sys, cpu = {} }
  for r = 1, PAR_ROUNDS do
    local running <close> = closing()
    local busy0, total0 = cpu_jiffies()
    for _, b in ipairs(beds) do
      local o = { duration_s = p.tcp_s, interval_s = 1, congestion = CONGESTION }
      for k, v in pairs(b.base) do o[k] = v end
      running[#running + 1] = assert(traffic.start(o))
    end
    for i, h in ipairs(running) do
      local t = assert(h:wait())
      out.tcp[#out.tcp + 1] = { t.received.bits_per_second / 1e6, t.sent.retransmits or 0, i, r }
    end
    local busy1, total1 = cpu_jiffies()
    out.cpu[r] = (busy1 - busy0) / math.max(1, total1 - total0)
    io.stderr:write(string.format('%s: %d ms, %g %%: round %d of %d done, CPUs %.0f %% busy,'
      .. ' MemAvailable %.0f MiB\n', backend, p.delay_ms, p.loss_pct, r, PAR_ROUNDS, 100 * out.cpu[r],
      mem_available_mib()))
  end
  if backend == 'link' then
    out.limit_drops_by_testbed = {}
    for i, b in ipairs(beds) do out.limit_drops_by_testbed[i] = limit_drops(b.tb) end
  end
  return out
end

local function sweep(backend)
  local res = {}
  for i, p in ipairs(POINTS) do
    res[i] = (par and par_point or point)(backend, p)
    io.stderr:write(string.format('%s: %d ms, %g %% done\n', backend, p.delay_ms, p.loss_pct))
  end
  return res
end

-- Both backends on one kernel, point by point, the first of them
-- alternating (a drift of the host's load then falls on both alike).
local function sweep_both()
  local res = { netem = {}, link = {} }
  for i, p in ipairs(POINTS) do
    local order = i % 2 == 1 and { 'netem', 'link' } or { 'link', 'netem' }
    for _, b in ipairs(order) do
      res[b][i] = (par and par_point or point)(b, p)
      io.stderr:write(string.format('guest %s: %d ms, %g %% done\n', b, p.delay_ms, p.loss_pct))
    end
  end
  return res
end

-- Serialise a sweep as lines (the guest writes them to the shared dir).
local function dump(res, f)
  for i, r in ipairs(res) do
    f:write(string.format('udp %d %.6f %d %d\n', i, r.udp[1], r.udp[2], r.udp[3]))
    for _, t in ipairs(r.tcp) do
      -- LOSSPAR's runs also name their testbed and round
      f:write(string.format('tcp %d %.6f %d%s\n', i, t[1], t[2], t[3] and string.format(' %d %d', t[3], t[4]) or ''))
    end
    for k, c in ipairs(r.cpu or {}) do f:write(string.format('cpu %d %d %.6f\n', i, k, c)) end
    for k, d in ipairs(r.limit_drops_by_testbed or {}) do f:write(string.format('drops %d %d %d\n', i, k, d)) end
    for _, kv in ipairs(SYSCTLS) do
      f:write(string.format('sys %d %s %s\n', i, kv[1], r.sys[kv[1]] or '?'))
    end
  end
end

local function load(path)
  local res = {}
  for line in io.lines(path) do
    local kind, i, rest = line:match('^(%S+) (%d+) (.*)$')
    i = tonumber(i)
    res[i] = res[i] or { tcp = {}, sys = {} }
    if kind == 'udp' then
      local a, b, c = rest:match('^(%S+) (%S+) (%S+)$')
      res[i].udp = { tonumber(a), tonumber(b), tonumber(c) }
    elseif kind == 'tcp' then
      local t = {}
      for x in rest:gmatch('%S+') do t[#t + 1] = tonumber(x) end
      res[i].tcp[#res[i].tcp + 1] = t
    elseif kind == 'cpu' then
      local k, c = rest:match('^(%d+) (%S+)$')
      res[i].cpu = res[i].cpu or {}
      res[i].cpu[tonumber(k)] = tonumber(c)
    elseif kind == 'drops' then
      local k, d = rest:match('^(%d+) (%d+)$')
      res[i].limit_drops_by_testbed = res[i].limit_drops_by_testbed or {}
      res[i].limit_drops_by_testbed[tonumber(k)] = tonumber(d)
    elseif kind == 'sys' then
      local k, v = rest:match('^(%S+) (.*)$')
      res[i].sys[k] = v
    end
  end
  return res
end

if guest and (loss_only or par and not same) then
  -- netem only: the link in the guest runs on an emulated CPU (see RESULTS)
  local f = assert(io.open(args[2] .. '.netem', 'w'))
  dump(sweep('netem'), f)
  f:close()
  return
elseif guest then
  local both = sweep_both()
  for _, b in ipairs { 'netem', 'link' } do
    local f = assert(io.open(args[2] .. '.' .. b, 'w'))
    dump(both[b], f)
    f:close()
  end
  return
end

-- SAMEKERNEL has no native half: both backends run in the guest
local native = not same and sweep('link') or nil
local dir = os.tmpname()
os.remove(dir)
assert(os.execute('mkdir -m 700 ' .. dir))
local path = dir .. '/netem.txt'
-- the guest's files and their directory, removed also when the guest's run
-- fails or is interrupted
local shared <close> = setmetatable({ netem = path .. '.netem', link = path .. '.link' },
  { __close = function(f)
    os.remove(f.netem)
    os.remove(f.link)
    os.remove(dir)
  end })
local guest_args, timeout_s = { 'guest', path, mode }, 2400
if par then
  for _, n in ipairs { PAR_TESTBEDS, PAR_ROUNDS, PAR_TEST_S, CONGESTION } do guest_args[#guest_args + 1] = n end
  -- per point: the testbeds (a few s each on the emulated CPU), the UDP
  -- test, each round's tests and their results exchange; generously
  timeout_s = math.max(timeout_s, 600 + (same and 2 or 1) * #POINTS
    * (60 + 30 * PAR_TESTBEDS + PAR_ROUNDS * (PAR_TEST_S + 60)))
end
local st, msg, code = vm.run_script { script = 'bench/link_vs_netem.lua',
  args = guest_args, rw_dir = dir, timeout_s = timeout_s }
assert(st == 0, 'the guest run failed: ' .. tostring(st) .. ' ' .. tostring(msg) .. ' ' .. tostring(code))
local netem = load(shared.netem)
local guest_link = (same or not loss_only and not par) and load(shared.link)
-- SAMEKERNEL: the guest's link takes the native link's place in the tables
if same then native, guest_link = guest_link, nil end

-- Student's t at 97.5 % for df degrees of freedom: the table up to 30,
-- beyond it the Cornish-Fisher expansion around the normal quantile (within
-- 1e-4 of the exact value from 30 on; 2.040 at 31, where 1.96 would make a
-- 32-run interval 4 % too narrow).
local T975 = { 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
  2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
  2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042 }
local function t975(df)
  if df <= #T975 then return T975[df] end
  local z = 1.959964
  return z + (z ^ 3 + z) / (4 * df) + (5 * z ^ 5 + 16 * z ^ 3 + 3 * z) / (96 * df ^ 2)
    + (3 * z ^ 7 + 19 * z ^ 5 + 17 * z ^ 3 - 15 * z) / (384 * df ^ 3)
end
local function stats(runs)
  local n, s = #runs, 0
  for _, t in ipairs(runs) do s = s + t[1] end
  local mean, v = s / n, 0
  for _, t in ipairs(runs) do v = v + (t[1] - mean) ^ 2 end
  local sd = n > 1 and math.sqrt(v / (n - 1)) or 0
  local se = sd / math.sqrt(n)
  local half = n > 1 and t975(n - 1) * se or math.huge
  return { mean = mean, cv = mean > 0 and sd / mean or 0, lo = mean - half, hi = mean + half, n = n,
    se = se }
end
local function retrans(runs)
  local s = 0
  for _, t in ipairs(runs) do s = s + t[2] end
  return s / #runs
end
local function verdict(a, b)
  local ratio = a.mean / b.mean
  if math.abs(ratio - 1) <= 0.10 then return ratio, 'agree' end
  if a.lo <= b.hi and b.lo <= a.hi then return ratio, 'CIs overlap: more runs' end
  return ratio, 'differ'
end
-- The 95 % interval of the ratio of two means a / b by the delta method:
-- the ratio times its relative standard error, the two means' relative
-- standard errors added in quadrature; t at the Welch-Satterthwaite degrees
-- of freedom of those two terms (1.96 and a bit for LOSSPAR's 32 a side,
-- wider for a smoke run's few).
local function ratio_ci(a, b)
  local ratio = a.mean / b.mean
  if a.n < 2 or b.n < 2 then return -math.huge, math.huge end
  local va, vb = (a.se / a.mean) ^ 2, (b.se / b.mean) ^ 2
  if va + vb == 0 then return ratio, ratio end
  local df = (va + vb) ^ 2 / (va ^ 2 / (a.n - 1) + vb ^ 2 / (b.n - 1))
  local half = t975(math.max(1, math.floor(df))) * ratio * math.sqrt(va + vb)
  return ratio - half, ratio + half
end
-- Where the ratio's interval lies against the +-10 % of "agree": within it
-- (agreement shown), outside it (a difference of more than 10 % shown), or
-- across an edge (undecided); and whether it excludes 1 (a difference shown,
-- of whatever size).
local function ratio_place(lo, hi)
  local place = (lo >= 0.9 and hi <= 1.1) and 'within'
    or (hi < 0.9 or lo > 1.1) and 'outside' or 'overlaps'
  return string.format('ratio CI %s [0.9, 1.1]%s', place, (lo > 1 or hi < 1) and ', excludes 1' or '')
end

-- The sysctls as both sides read them back: any difference is printed.
for i, n in ipairs(native) do
  for _, kv in ipairs(SYSCTLS) do
    local a, b = n.sys[kv[1]], netem[i].sys[kv[1]]
    if a ~= b then print(string.format('sysctl %s differs at point %d: link %s, netem %s', kv[1], i, a, b)) end
  end
end

print(quick and 'QUICK pass' or loss_only and 'LOSS pass' or par and string.format(
  '%s pass: %d testbeds at once x %d rounds of %d s %s tests a side%s', mode, PAR_TESTBEDS, PAR_ROUNDS,
  PAR_TEST_S, CONGESTION, same and ' (both backends in the guest: one kernel, one emulated CPU)' or '')
  or 'full pass')
print('| delay, loss | RTT p50 ms link / netem | UDP loss % link / netem (95 % CI) |'
  .. ' TCP Mbit/s link / netem (mean) | ratio |' .. (par and ' ratio 95 % CI |' or '')
  .. ' CV link / netem | 95 % CI link; netem | runs | retrans/run link / netem | model Mbit/s | verdict |')
print('|---|---|---|---|---|' .. (par and '---|' or '') .. '---|---|---|---|---|---|')
for i, p in ipairs(POINTS) do
  local n, g = native[i], netem[i]
  assert(g and g.udp, 'the guest has no point ' .. i)
  local function loss(u)
    local q = u[2] / u[3]
    local h = 1.96 * math.sqrt(q * (1 - q) / u[3])
    return string.format('%.2f (%.2f-%.2f)', 100 * q, 100 * math.max(0, q - h), 100 * (q + h))
  end
  local a, b = stats(n.tcp), stats(g.tcp)
  local ratio, v = verdict(a, b)
  local rtt_s = p.delay_ms / 1e3
  local model = p.loss_pct > 0
    and MSS_BYTES * 8 / rtt_s * math.sqrt(1.5 / (p.loss_pct / 100)) / 1e6
    or RATE_BPS * MSS_BYTES / WIRE_BYTES / 1e6
  local ratio_col = ''
  if par then
    local lo, hi = ratio_ci(a, b)
    ratio_col = string.format(' %.3f-%.3f |', lo, hi)
    v = v .. '; ' .. ratio_place(lo, hi)
  end
  print(string.format('| %d ms, %g %% | %.3f / %.3f | %s / %s | %.3f / %.3f | %.3f |%s %.3f / %.3f'
    .. ' | %.2f-%.2f; %.2f-%.2f | %d / %d | %.1f / %.1f | %.2f %s | %s |',
    p.delay_ms, p.loss_pct, n.udp[1], g.udp[1], loss(n.udp), loss(g.udp), a.mean, b.mean, ratio,
    ratio_col, a.cv, b.cv, a.lo, a.hi, b.lo, b.hi, a.n, b.n, retrans(n.tcp), retrans(g.tcp), model,
    p.loss_pct > 0 and '(Mathis)' or '(rate)', v))
end
local function runs(r)
  local t = {}
  for _, x in ipairs(r) do t[#t + 1] = string.format('%.3f', x[1]) end
  return table.concat(t, ' ')
end
if not par then
  for i, p in ipairs(POINTS) do
    print(string.format('runs %d ms, %g %%: link %s; netem %s; link limit drops %s', p.delay_ms,
      p.loss_pct, runs(native[i].tcp), runs(netem[i].tcp), tostring(native[i].limit_drops)))
  end
else
  -- The runs' means by round (with the CPUs' busy share over the round:
  -- the host's for the link, the guest's vCPUs' for netem) and by testbed:
  -- a drift over the rounds, a round slowed by concurrent tests, or a
  -- testbed apart from the others shows here.
  local function means(r, key, count_of)
    local sum, n, t = {}, {}, {}
    for _, x in ipairs(r) do
      sum[x[key]] = (sum[x[key]] or 0) + x[1]
      n[x[key]] = (n[x[key]] or 0) + 1
    end
    for k = 1, count_of do t[k] = n[k] and string.format('%.3f', sum[k] / n[k]) or '-' end
    return t
  end
  local function with_cpu(t, cpu)
    for k = 1, #t do t[k] = string.format('%s (%.0f %%)', t[k], 100 * (cpu[k] or 0 / 0)) end
    return table.concat(t, ' ')
  end
  for i, p in ipairs(POINTS) do
    local n, g = native[i], netem[i]
    print(string.format('rounds %d ms, %g %% (mean Mbit/s, CPUs busy): link %s; netem %s', p.delay_ms,
      p.loss_pct, with_cpu(means(n.tcp, 4, PAR_ROUNDS), n.cpu), with_cpu(means(g.tcp, 4, PAR_ROUNDS), g.cpu or {})))
    print(string.format('testbeds %d ms, %g %% (mean Mbit/s): link %s; netem %s', p.delay_ms, p.loss_pct,
      table.concat(means(n.tcp, 3, PAR_TESTBEDS), ' '), table.concat(means(g.tcp, 3, PAR_TESTBEDS), ' ')))
    local drops = {}
    for k = 1, PAR_TESTBEDS do drops[k] = tostring(n.limit_drops_by_testbed[k]) end
    local function runs_retrans(r)
      local t = {}
      for _, x in ipairs(r) do t[#t + 1] = string.format('%.3f/%d', x[1], x[2]) end
      return table.concat(t, ' ')
    end
    print(string.format('runs %d ms, %g %% (Mbit/s/retransmits, round by round, testbeds in order):'
      .. ' link %s; netem %s; link limit drops by testbed %s', p.delay_ms, p.loss_pct,
      runs_retrans(n.tcp), runs_retrans(g.tcp), table.concat(drops, ' ')))
  end
end

if not guest_link then return end
-- The same kernel (the guest's), both backends: where these agree and the
-- table above does not, the difference is the kernel and the CPU the TCP
-- ends run on, not the impairment backend.
print()
print('| delay, loss (guest kernel) | TCP Mbit/s link / netem (mean) | ratio | 95 % CI link; netem | runs'
  .. ' | retrans/run link / netem | verdict |')
print('|---|---|---|---|---|---|---|')
for i, p in ipairs(POINTS) do
  local a, b = stats(guest_link[i].tcp), stats(netem[i].tcp)
  local ratio, v = verdict(a, b)
  print(string.format('| %d ms, %g %% | %.3f / %.3f | %.3f | %.2f-%.2f; %.2f-%.2f | %d / %d | %.1f / %.1f | %s |',
    p.delay_ms, p.loss_pct, a.mean, b.mean, ratio, a.lo, a.hi, b.lo, b.hi, a.n, b.n,
    retrans(guest_link[i].tcp), retrans(netem[i].tcp), v))
end
for i, p in ipairs(POINTS) do
  local t = {}
  for _, x in ipairs(guest_link[i].tcp) do t[#t + 1] = string.format('%.3f', x[1]) end
  print(string.format('runs %d ms, %g %%: link in the guest %s', p.delay_ms, p.loss_pct, table.concat(t, ' ')))
end
