-- The native impairment link (qoslab.link.impair_link) against a plain veth
-- pair: TCP goodput at zero delay (MTU 1500 and 9000; the link without and
-- with GSO super-packets, the veth with offloads off and on, each link
-- figure with its ratio to the veth pair of the same offloads), then the
-- link's delay accuracy under a 50 ms forward delay at a moderate UDP load,
-- with its threads at an ordinary and at a real-time priority: the sender's
-- lateness (its own measure) and, beside it, an ICMP round-trip probe
-- beside the load (kernel stamps; the far end's kernel answers), in rounds
-- of a zero-delay and a 50 ms run in turn: the added delay per quantile
-- ("shf_": the RTT quantile at 50 ms minus 50 ms minus the same quantile at
-- zero delay), and the older figure ("add_": minus the zero-delay p50).
--
--   bin/qoslab run --host bench/impair_link.lua [-- duration_s [part]]
--
-- duration_s defaults to 5; part is "tcp", "delay" or "queue" (default all).
--
-- Needs root. Namespaces are made and removed here.
local link = require 'qoslab.link'
local netns = require 'qoslab.netns'
local traffic = require 'qoslab.traffic'

local arg1, part = ...
local dur = math.tointeger(tonumber(arg1 or '5'))
assert(dur and dur >= 1, 'usage: impair_link.lua [duration_s >= 1 [tcp|delay|queue]]')
local function want(name) return part == nil or part == name end

local A_ADDR, B_ADDR = '10.251.0.1', '10.251.0.2'

-- Two namespaces with lo up, removed when the returned value is closed.
local function pair()
  local a, b = netns.unique_name('qlbench'), netns.unique_name('qlbench')
  assert(netns.add(a))
  assert(netns.add(b))
  for _, ns in ipairs { a, b } do assert(link.set('lo', { up = true, netns = ns })) end
  return a, b, setmetatable({}, { __close = function()
    netns.delete(a)
    netns.delete(b)
  end })
end

local function run(a, b, o)
  local srv <close> = assert(traffic.server { port = 0, netns = b })
  o.host, o.port, o.netns, o.duration_s, o.interval_s = B_ADDR, srv:port(), a, dur, 1
  return assert(traffic.run(o))
end

if want('tcp') then
print(string.format('%-30s %16s %16s %10s', 'path (TCP, zero delay)', 'received_Mbit/s',
  'tcp_retransmits', 'of_veth'))
for _, mtu in ipairs { 1500, 9000 } do
  local veth = {}
  local rows = {}
  for _, c in ipairs { { 'veth', false }, { 'veth', true }, { 'link', false }, { 'link', true } } do
    local a, b, _ <close> = pair()
    local l, label
    if c[1] == 'link' then
      l = assert(link.impair_link { a_netns = a, b_netns = b, a_addr = A_ADDR, b_addr = B_ADDR,
        gso = c[2], mtu_bytes = mtu })
      label = string.format('link gso=%s mtu=%d', c[2], mtu)
    else
      assert(link.add_veth { name = 'qlbva', peer = 'qlbvb', netns = a, peer_netns = b })
      for _, e in ipairs { { 'qlbva', a, A_ADDR }, { 'qlbvb', b, B_ADDR } } do
        local o = { netns = e[2] }
        assert(link.offloads(e[1], { tso = c[2], gso = c[2], gro = c[2] }, o))
        assert(link.set(e[1], { up = true, mtu_bytes = mtu, netns = e[2] }))
        assert(link.addr_add(e[1], e[3] .. '/24', o))
      end
      label = string.format('veth offloads=%s mtu=%d', c[2], mtu)
    end
    local res = run(a, b, {})
    local mbps = res.received.bits_per_second / 1e6
    if not l then veth[c[2]] = mbps end
    rows[#rows + 1] = string.format('%-30s %16.1f %16d %10s', label, mbps,
      res.sent.retransmits or 0, l and string.format('%.2f', mbps / veth[c[2]]) or '')
    if l then
      local st = l:stats()
      assert(not st.failed, st.failed)
      l:close()
    end
  end
  for _, r in ipairs(rows) do print(r) end
end
end

if want('delay') then
-- Rounds of a zero-delay run and a 50 ms run in turn (the order swapped
-- every round), so a drift of the shared host's load falls on both alike.
-- Per round, the added delay at each quantile is the shift of the RTT
-- distribution: the quantile at 50 ms minus 50 ms minus the same quantile at
-- zero delay (what the link's delay adds, with the path's own jitter at zero
-- delay on both sides of the difference); and the older figure beside it,
-- which subtracts the zero-delay p50 from every quantile and so counts the
-- path's own zero-delay jitter as added delay.
local ROUNDS = 3
print()
print(string.format('%-26s %5s %7s %8s | %7s %7s | %7s %7s %7s | %7s %7s', 'link, 50 ms forward delay',
  'round', 'samples', 'late_p99', 'zero50', 'zero99', 'shf_p50', 'shf_p90', 'shf_p99', 'add_p99', 'add_max'))
print(string.format('%-26s %5s %7s %8s | %7s %7s | %7s %7s %7s | %7s %7s', '', '', '', 'ms', 'ms', 'ms',
  'ms', 'ms', 'ms', 'ms', 'ms'))
for _, rt in ipairs { false, true } do
  for _, rate in ipairs { 10e6, 50e6 } do
    local a, b, _ <close> = pair()
    local l <close> = assert(link.impair_link { a_netns = a, b_netns = b, a_addr = A_ADDR,
      b_addr = B_ADDR, realtime = rt })
    local srv <close> = assert(traffic.server { port = 0, netns = b })
    -- an ICMP probe (the far end's kernel answers; kernel TX and RX
    -- stamps) beside the load
    local function probed(delay_ms)
      l:set('forward', { delay_ms = delay_ms })
      return assert(traffic.run { host = B_ADDR, port = srv:port(), netns = a, proto = 'udp',
        bitrate_bps = rate, length_bytes = 1200, duration_s = dur, interval_s = 1,
        probe = { proto = 'icmp', interval_ms = 2, idle_s = 0 } }).latency
    end
    local label = string.format('UDP %.0f Mbit/s %s', rate / 1e6, rt and 'realtime' or 'ordinary')
    local best
    for round = 1, ROUNDS do
      local lat, zero
      if round % 2 == 1 then
        zero = probed(0)
        lat = probed(50)
      else
        lat = probed(50)
        zero = probed(0)
      end
      local f = l:stats().forward
      local z, r = zero.rtt_ms, lat.rtt_ms
      local shift99 = r.p99 - 50 - z.p99
      print(string.format('%-26s %5d %7d %8.3f | %7.3f %7.3f | %7.3f %7.3f %7.3f | %7.3f %7.3f',
        round == 1 and label or '', round, lat.samples, f.lateness_p99_ms, z.p50, z.p99,
        r.p50 - 50 - z.p50, r.p90 - 50 - z.p90, shift99, r.p99 - 50 - z.p50, r.max - 50 - z.p50))
      if not best or math.abs(shift99) < math.abs(best) then best = shift99 end
    end
    print(string.format('%-26s best shifted p99 of %d rounds: %.3f ms; realtime threads: %s', '', ROUNDS,
      best, tostring(l:stats().forward.sender_realtime)))
  end
end
end

-- A 5 s queue filled at up to 1 Gbit/s: the backlog the link held at the
-- end of the load and this process's resident memory then (VmRSS, the
-- engine's own buffers included), against the default budget.
local function rss_bytes()
  for line in io.lines('/proc/self/status') do
    local kb = line:match('^VmRSS:%s+(%d+) kB')
    if kb then return tonumber(kb) * 1024 end
  end
end

if want('queue') then
print()
print(string.format('%-34s %14s %14s %12s %12s %10s', 'link, 5000 ms delay, 1 Gbit/s UDP',
  'backlog_pkts', 'backlog_MB', 'rss_MB', 'rss0_MB', 'mem_drops'))
do
  local timer = require 'qoslab.timer'
  local a, b, _ <close> = pair()
  local l <close> = assert(link.impair_link { a_netns = a, b_netns = b, a_addr = A_ADDR,
    b_addr = B_ADDR, forward = { limit_packets = 416667 } })
  local srv <close> = assert(traffic.server { port = 0, netns = b })
  local rss0 = rss_bytes()
  local t = assert(traffic.start { host = B_ADDR, port = srv:port(), netns = a, proto = 'udp',
    bitrate_bps = 1e9, length_bytes = 1472, window_bytes = 8388608, duration_s = 4, interval_s = 1 })
  -- the delay once the datagrams flow (the test's setup would take 5 s a
  -- round trip); then 4 s of them queue
  while not (t:setup() and t:setup().start_time_unix_s) do timer.sleep(0.01) end
  l:set('forward', { delay_ms = 5000, limit_packets = 416667 })
  timer.sleep(4)
  local f = l:stats().forward
  local rss = rss_bytes()
  print(string.format('%-34s %14d %14.1f %12.1f %12.1f %10d', 'UDP 1472 B, 4 s offered',
    f.backlog_packets, f.backlog_bytes / 1e6, rss / 1e6, rss0 / 1e6, f.drops_by_reason.memory))
  t:wait()
end
end
