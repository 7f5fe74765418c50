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
--   bin/qoslab run --host bench/link_vs_netem.lua [-- QUICK | LOSS]
--
-- QUICK: two runs per point and shorter tests (~12 minutes). LOSS: only the
-- lossy points at 100 and 300 ms, five runs of 60 s each on the native link
-- and on netem in the guest (~25 minutes): at 0.3-0.8 Mbit/s a 15-20 s test
-- sees a few dozen loss episodes and three of them cannot tell 10 % apart.
-- Needs root (and, for the guest, what `make check-netem` needs). Internally
-- `... guest OUT [QUICK | LOSS]` runs the guest's half (OUT.netem, OUT.link).
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'
local vm = require 'qoslab.vm'

local args = { ... }
local guest = args[1] == 'guest'
local mode = guest and args[3] or args[1]
local quick, loss_only = mode == 'QUICK', mode == 'LOSS'
assert(mode == nil or quick or loss_only, 'usage: link_vs_netem.lua [QUICK | LOSS]')

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

-- One point on one backend: the UDP test's { rtt_p50_ms, lost, total } and
-- the TCP runs' { mbps, retransmits }, plus the sysctls read back.
local function point(backend, p)
  local impair = { delay_ms = p.delay_ms, loss_pct = p.loss_pct, rate_bps = RATE_BPS,
    limit_packets = LIMIT_PACKETS }
  if backend == 'link' then impair.rate_packet_overhead_bytes = WIRE_BYTES - 1500 end
  local tb <close> = assert(testbed { backend = backend, impair = impair })
  local sys = pin(tb.client_netns)
  pin(tb.server_netns)
  local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
  local base = { host = tb.server_addr, port = srv:port(), netns = tb.client_netns }
  local u = { proto = 'udp', bitrate_bps = 10e6, length_bytes = 1200, window_bytes = 4194304,
    duration_s = p.udp_s, interval_s = 1, probe = { proto = 'udp', interval_ms = 10 } }
  for k, v in pairs(base) do u[k] = v end
  local ures = assert(traffic.run(u))
  local r = ures.received
  local out = { udp = { ures.latency.rtt_ms.p50, r.lost_packets, r.lost_packets + r.unique_packets },
    tcp = {}, sys = sys }
  for _ = 1, quick and p.q_runs or p.runs do
    local o = { duration_s = quick and p.q_tcp_s or p.tcp_s, interval_s = 1, congestion = 'cubic' }
    if p.omit_s > 0 then o.omit_s = quick and math.ceil(p.omit_s / 2) or p.omit_s end
    for k, v in pairs(base) do o[k] = v end
    local t = assert(traffic.run(o))
    out.tcp[#out.tcp + 1] = { t.received.bits_per_second / 1e6, t.sent.retransmits or 0 }
  end
  -- the link's tail drops over the whole point (netem's own drop count
  -- mixes them with its loss drops)
  for _, e in ipairs(backend == 'link' and tb:stats().client or {}) do
    if e.kind == 'link' then out.limit_drops = e.drops_by_reason.limit end
  end
  return out
end

local function sweep(backend)
  local res = {}
  for i, p in ipairs(POINTS) do
    res[i] = point(backend, p)
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
      res[b][i] = point(b, p)
      io.stderr:write(string.format('guest %s: %d ms, %g %% done\n', b, p.delay_ms, p.loss_pct))
    end
  end
  return res
end

-- Serialise a sweep as lines (the guest writes them to the shared dir).
local function dump(res, f)
  for i, r in ipairs(res) do
    f:write(string.format('udp %d %.6f %d %d\n', i, r.udp[1], r.udp[2], r.udp[3]))
    for _, t in ipairs(r.tcp) do f:write(string.format('tcp %d %.6f %d\n', i, t[1], t[2])) end
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
      local a, b = rest:match('^(%S+) (%S+)$')
      res[i].tcp[#res[i].tcp + 1] = { tonumber(a), tonumber(b) }
    elseif kind == 'sys' then
      local k, v = rest:match('^(%S+) (.*)$')
      res[i].sys[k] = v
    end
  end
  return res
end

if guest and loss_only then
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

local native = sweep('link')
local dir = os.tmpname()
os.remove(dir)
assert(os.execute('mkdir -m 700 ' .. dir))
local path = dir .. '/netem.txt'
local st, msg, code = vm.run_script { script = 'bench/link_vs_netem.lua',
  args = { 'guest', path, mode }, rw_dir = dir, timeout_s = 2400 }
assert(st == 0, 'the guest run failed: ' .. tostring(st) .. ' ' .. tostring(msg) .. ' ' .. tostring(code))
local netem = load(path .. '.netem')
local guest_link = not loss_only and load(path .. '.link')
os.remove(path .. '.netem')
os.remove(path .. '.link')
os.remove(dir)

-- Student's t at 97.5 % for n - 1 degrees of freedom.
local T975 = { 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262 }
local function stats(runs)
  local n, s = #runs, 0
  for _, t in ipairs(runs) do s = s + t[1] end
  local mean, v = s / n, 0
  for _, t in ipairs(runs) do v = v + (t[1] - mean) ^ 2 end
  local sd = n > 1 and math.sqrt(v / (n - 1)) or 0
  local half = n > 1 and T975[n - 1] * sd / math.sqrt(n) or math.huge
  return { mean = mean, cv = mean > 0 and sd / mean or 0, lo = mean - half, hi = mean + half, n = n }
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

-- The sysctls as both sides read them back: any difference is printed.
for i, n in ipairs(native) do
  for _, kv in ipairs(SYSCTLS) do
    local a, b = n.sys[kv[1]], netem[i].sys[kv[1]]
    if a ~= b then print(string.format('sysctl %s differs at point %d: link %s, netem %s', kv[1], i, a, b)) end
  end
end

print(quick and 'QUICK pass' or loss_only and 'LOSS pass' or 'full pass')
print('| delay, loss | RTT p50 ms link / netem | UDP loss % link / netem (95 % CI) |'
  .. ' TCP Mbit/s link / netem (mean) | ratio | CV link / netem | 95 % CI link; netem | runs'
  .. ' | retrans/run link / netem | model Mbit/s | verdict |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
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
  print(string.format('| %d ms, %g %% | %.3f / %.3f | %s / %s | %.3f / %.3f | %.3f | %.3f / %.3f'
    .. ' | %.2f-%.2f; %.2f-%.2f | %d / %d | %.1f / %.1f | %.2f %s | %s |',
    p.delay_ms, p.loss_pct, n.udp[1], g.udp[1], loss(n.udp), loss(g.udp), a.mean, b.mean, ratio,
    a.cv, b.cv, a.lo, a.hi, b.lo, b.hi, a.n, b.n, retrans(n.tcp), retrans(g.tcp), model,
    p.loss_pct > 0 and '(Mathis)' or '(rate)', v))
end
for i, p in ipairs(POINTS) do
  local function runs(r)
    local t = {}
    for _, x in ipairs(r) do t[#t + 1] = string.format('%.3f', x[1]) end
    return table.concat(t, ' ')
  end
  print(string.format('runs %d ms, %g %%: link %s; netem %s; link limit drops %s', p.delay_ms,
    p.loss_pct, runs(native[i].tcp), runs(netem[i].tcp), tostring(native[i].limit_drops)))
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
