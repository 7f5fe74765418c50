-- qoslab's native impairment link (backend "link") in an IPv6 testbed and
-- in a router testbed (root, namespaces). IPv6: the TUN devices carry the
-- veth testbed's /64 addresses and no link-local one; ping -6's RTT is at
-- least the delay set, ICMPv6 counts as icmp, the link's CE mark is written
-- into the Traffic Class (the echo reply carries it back), the engine's UDP
-- losses are the link's, TCP's goodput stays under window / RTT and under
-- the link's rate. Router: the link joins the client to the router, a veth
-- pair the router to the server; the forward spec delays and drops client →
-- server only and the reverse spec server → client only (RTT 20 + 30 ms, a
-- forward loss hits an upload and never a download), the router's shaper
-- holds TCP both ways to its rate, IPv6 crosses, a schedule and tb:get work
-- there, and close leaves no namespace, device or thread.
local testbed = require 'qoslab.testbed'
local meta = require 'qoslab.meta'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

-- ping's minimum RTT in ms and the replies it got.
local function ping(ns, addr, o)
  o = o or {}
  local _, out = H.sh(string.format('ip netns exec %s ping %s -n -c %d -i 0.2 -W 2 %s %s', ns,
    addr:find(':', 1, true) and '-6' or '-4', o.count or 5, o.tos and ('-Q ' .. o.tos) or '', addr))
  return tonumber(out:match('rtt [^=]+= ([%d.]+)/')), tonumber(out:match('(%d+) received')), out
end

-- The link's entry of one side of tb:stats() ("client": forward, "server": reverse).
local function link_of(tb, side)
  for _, q in ipairs(assert(tb:stats())[side]) do
    if q.kind == 'link' then return q end
  end
  error('no link entry in tb:stats().' .. side)
end

-- A counter of /proc/net/snmp6 in a namespace (Udp6RcvbufErrors, ...).
local function snmp6(ns, name)
  local out = H.must('ip netns exec ' .. ns .. ' cat /proc/net/snmp6')
  return assert(tonumber(out:match(name .. '%s+(%d+)')), name)
end

local function threads()
  return tonumber(H.must('ls /proc/' .. H.pid .. '/task | wc -l'))
end

-- UDP at 10 Mbit/s for 2 s, upload or download (reverse); `spec` on the
-- forward direction only while the test's datagrams flow (from the 100th
-- across the link's data direction until 0.5 s before the end: the UDP
-- handshake and the results exchange stay unimpaired). Returns the result
-- and what the test added to the data direction's and the other
-- direction's UDP shares: `{arrived_packets =, drops =, loss =}`.
local function udp_under(tb, srv, host, spec, reverse)
  local data_side, other_side = reverse and 'server' or 'client', reverse and 'client' or 'server'
  local function shares()
    local d, o = link_of(tb, data_side).by_protocol.udp, link_of(tb, other_side).by_protocol.udp
    return { d.arrived_packets, d.drops, d.drops_by_reason.loss, o.arrived_packets, o.drops,
      o.drops_by_reason.loss }
  end
  local s0 = shares()
  local before = s0[1]
  local t = assert(traffic.start { host = host, port = srv:port(), netns = tb.client_netns, proto = 'udp',
    bitrate_bps = 10e6, length_bytes = 1000, duration_s = 2, omit_s = 0, reverse = reverse })
  local t0 = H.now()
  local ok, err = pcall(function()
    while link_of(tb, data_side).by_protocol.udp.arrived_packets - before < 100 and H.now() - t0 < 1.5 do
      H.sleep(0.01)
    end
    assert(link_of(tb, data_side).by_protocol.udp.arrived_packets - before >= 100, 'the datagrams did not start')
    assert(tb:impair(spec, 'forward'))
    H.sleep(math.max(0, 1.5 - (H.now() - t0)))
    assert(tb:impair({}, 'forward'))
  end)
  local res, msg = t:wait()
  assert(ok, err)
  assert(res, msg)
  local s1 = shares()
  local function d(i) return s1[i] - s0[i] end
  return res, { arrived_packets = d(1), drops = d(2), loss = d(3) },
    { arrived_packets = d(4), drops = d(5), loss = d(6) }
end

describe('the native link in an IPv6 testbed (root)', function()
  it('ping -6: RTT >= the delays, ICMPv6 counted, CE written into the Traffic Class', function()
    local tb <close> = assert(testbed { backend = 'link', ipv6 = true, impair = { delay_ms = 15 },
      reverse_impair = { delay_ms = 10 } })
    assert.equal('link', tb.backend)
    -- the veth testbed's addresses, on the TUN devices; no link-local one
    local a6 = H.must('ip -n ' .. tb.client_netns .. ' -6 -o addr show dev ' .. tb.client_ifname)
    assert.matches(tb.client_addr6 .. '/64', a6, 1, true)
    assert.is_nil(a6:find('fe80', 1, true))
    assert.matches(tb.server_addr6 .. '/64',
      H.must('ip -n ' .. tb.server_netns .. ' -6 -o addr show dev ' .. tb.server_ifname), 1, true)
    local rtt, got, out = ping(tb.client_netns, tb.server_addr6)
    assert.equal(5, got, out)
    assert.is_true(rtt >= 25 and rtt < 35, 'rtt ' .. tostring(rtt))
    -- the echo requests and replies, and nothing else of IPv6's own
    local f, r = link_of(tb, 'client'), link_of(tb, 'server')
    assert.same({ 5, 5, 0, 0 }, { f.by_protocol.icmp.arrived_packets, r.by_protocol.icmp.arrived_packets,
      f.by_protocol.other.arrived_packets, r.by_protocol.other.arrived_packets })

    -- CE: loss 100 % with ecn marks ECT packets instead of dropping them.
    -- The reverse direction marks too: a reply it sees as ECT(0) passes
    -- marked; one the forward mark made CE (the kernel's echo reply
    -- copies the request's Traffic Class) is not ECN-capable any more
    -- and drops: so the replies say whether the mark went into the header.
    assert(tb:impair({ loss_pct = 100, ecn = true }, 'reverse'))
    assert(tb:impair({}, 'forward'))
    local _, got1, out1 = ping(tb.client_netns, tb.server_addr6, { tos = 2 })
    assert.equal(5, got1, out1)
    assert.equal(5, link_of(tb, 'server').ce_marked_packets)
    assert(tb:impair({ loss_pct = 100, ecn = true }, 'forward'))
    local _, got2 = ping(tb.client_netns, tb.server_addr6, { tos = 2, count = 4 })
    assert.equal(0, got2)
    f, r = link_of(tb, 'client'), link_of(tb, 'server')
    assert.same({ 4, 0 }, { f.ce_marked_packets, f.by_protocol.icmp.drops })
    assert.same({ 5, 4 }, { r.ce_marked_packets, r.by_protocol.icmp.drops_by_reason.loss })
    -- not ECN-capable: dropped
    local _, got3 = ping(tb.client_netns, tb.server_addr6, { count = 2 })
    assert.equal(0, got3)
    assert.equal(2, link_of(tb, 'client').by_protocol.icmp.drops_by_reason.loss)
  end)

  it('UDP over IPv6: the engine loses the datagrams the link\'s loss took', function()
    local tb <close> = assert(testbed { backend = 'link', ipv6 = true })
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local function elsewhere()
      return { tx_dropped = H.if_counter(tb.client_netns, tb.client_ifname, 'tx_dropped'),
        rx_dropped = H.if_counter(tb.server_netns, tb.server_ifname, 'rx_dropped'),
        rcvbuf_errors = snmp6(tb.server_netns, 'Udp6RcvbufErrors') }
    end
    local before = elsewhere()
    local res, udp = udp_under(tb, srv, tb.server_addr6, { loss_pct = 10 })
    assert.is_true(udp.loss > 20, 'too few losses: ' .. udp.loss)
    local after, other = elsewhere(), udp.drops - udp.loss
    for k, v in pairs(after) do other = other + (v - before[k]) end
    local lost, drops = res.received.lost_packets, udp.loss
    assert(drops <= lost and lost <= drops + other,
      string.format('engine lost %d, link UDP loss drops %d, other drops %d', lost, drops, other))
  end)

  it('TCP over IPv6: goodput <= window / RTT, and <= the link\'s rate', function()
    local tb <close> = assert(testbed { backend = 'link', ipv6 = true, impair = { delay_ms = 20 } })
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local rtt = assert(ping(tb.client_netns, tb.server_addr6, { count = 3 }))
    -- SO_RCVBUF 64 KiB: the kernel doubles it, so the advertised window
    -- stays below 128 KiB, and the goodput below 128 KiB per RTT
    local w = 65536
    local res = assert(traffic.run { host = tb.server_addr6, port = srv:port(), netns = tb.client_netns,
      window_bytes = w, duration_s = 2 })
    local bps, bound = res.received.bits_per_second, 2 * w * 8 / (rtt / 1e3)
    print(string.format('\n  IPv6 link, RTT %.1f ms, window %d: %.2f Mbit/s (bound %.2f)', rtt, w, bps / 1e6,
      bound / 1e6))
    assert.is_true(bps <= bound, 'goodput ' .. bps .. ' over window/RTT ' .. bound)
    assert.is_true(bps >= bound / 8, 'goodput ' .. bps .. ': the window was not used')
    -- the link's own rate
    assert(tb:impair { rate_bps = 8e6 })
    local f0 = link_of(tb, 'client')
    local tcp0, bytes0 = f0.by_protocol.tcp.arrived_packets, f0.bytes
    res = assert(traffic.run { host = tb.server_addr6, port = srv:port(), netns = tb.client_netns,
      duration_s = 2 })
    bps = res.received.bits_per_second
    assert.is_true(bps <= 8e6 and bps > 6e6, 'goodput ' .. bps .. ' at an 8 Mbit/s link rate')
    -- every byte crossed the link, as TCP (TCP's GSO packets cross whole, as
    -- netem takes them: at most 64 KiB each)
    local f1 = link_of(tb, 'client')
    local tcp, bytes = f1.by_protocol.tcp.arrived_packets - tcp0, f1.bytes - bytes0
    assert.is_true(bytes >= res.received.bytes, 'the link forwarded ' .. bytes .. ' bytes')
    assert.is_true(tcp * 65536 >= res.received.bytes, 'the data did not cross the link as TCP: ' .. tcp)
  end)
end)

describe('the native link in a router testbed (root)', function()
  it('forward impairs client → server, reverse server → client: 20 + 30 ms, loss only forward', function()
    local tb <close> = assert(testbed { backend = 'link', bottleneck = 'router',
      impair = { delay_ms = 20 }, reverse_impair = { delay_ms = 30 } })
    assert.same({ 'link', 'router', 'qltun-c', 'qltun-r' },
      { tb.backend, tb.bottleneck, tb.client_ifname, tb.router_client_ifname })
    assert.equal('1', H.must('ip netns exec ' .. tb.router_netns .. ' sysctl -n net.ipv4.ip_forward'):match('%d'))
    local rtt, got = ping(tb.client_netns, tb.server_addr)
    assert.equal(5, got)
    assert.is_true(rtt >= 50 and rtt < 56, 'rtt ' .. tostring(rtt))
    -- each direction's own delay, as the link measured it
    local f, r = link_of(tb, 'client'), link_of(tb, 'server')
    assert.is_true(f.queue_delay_mean_ms >= 20 and f.queue_delay_mean_ms < 22, 'forward ' .. f.queue_delay_mean_ms)
    assert.is_true(r.queue_delay_mean_ms >= 30 and r.queue_delay_mean_ms < 32, 'reverse ' .. r.queue_delay_mean_ms)
    local g = assert(tb:get())
    assert.same({ 20, 30 }, { g.client.impair.delay_ms, g.server.impair.delay_ms })

    -- forward loss: an upload loses datagrams, a download none
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local up, up_udp, up_back = udp_under(tb, srv, tb.server_addr, { delay_ms = 20, loss_pct = 10 })
    assert.is_true(up_udp.loss > 20, 'upload: too few losses')
    assert.is_true(up.received.lost_packets >= up_udp.loss)
    assert.equal(0, up_back.drops)
    local down, down_udp, down_fwd = udp_under(tb, srv, tb.server_addr, { delay_ms = 20, loss_pct = 10 }, true)
    assert.is_true(down_udp.arrived_packets >= down.received.packets)
    assert.same({ 0, 0 }, { down_udp.drops, down.received.lost_packets })
    -- what the forward direction carried of the download (the UDP
    -- handshake's few) may have been dropped; the data was not
    assert.is_true(down_fwd.arrived_packets < 20, 'forward UDP during a download ' .. down_fwd.arrived_packets)
  end)

  it('the router shapes both ways; the link\'s entry ends each side of tb:stats()', function()
    local tb <close> = assert(testbed { backend = 'link', bottleneck = 'router', rate_bps = 20e6,
      impair = { delay_ms = 5 }, reverse_impair = { delay_ms = 5 } })
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local g = assert(tb:get())
    assert.same({ 'tbf', 20e6, 'tbf', 20e6 },
      { g.client.shape.kind, g.client.shape.rate_bps, g.server.shape.kind, g.server.shape.rate_bps })
    local function root_bytes(list)
      for _, q in ipairs(list) do if q.parent == 'root' then return q.bytes end end
      error('no root qdisc')
    end
    for _, reverse in ipairs { false, true } do
      local st0 = assert(tb:stats())
      local res = assert(traffic.run { host = tb.server_addr, port = srv:port(), netns = tb.client_netns,
        duration_s = 1.5, reverse = reverse })
      local st = assert(tb:stats())
      local bps = res.received.bits_per_second
      print(string.format('\n  router link, tbf 20 Mbit/s, TCP %s: %.2f Mbit/s', reverse and 'download' or 'upload',
        bps / 1e6))
      assert.is_true(bps <= 20e6 and bps > 14e6, 'goodput ' .. bps)
      local side = reverse and 'server' or 'client'
      assert.equal('tbf', st[side][1].kind)
      assert.equal('link', st[side][#st[side]].kind)
      -- the router's shaper of the data's direction carried it
      assert.is_true(root_bytes(st[side]) - root_bytes(st0[side]) >= res.received.bytes)
    end
  end)

  it('IPv6 through the router and the link: ping -6, TCP and UDP', function()
    local tb <close> = assert(testbed { backend = 'link', bottleneck = 'router', ipv6 = true,
      impair = { delay_ms = 10 }, reverse_impair = { delay_ms = 5 } })
    local rtt, got, out = ping(tb.client_netns, tb.server_addr6)
    assert.equal(5, got)
    assert.is_true(rtt >= 15 and rtt < 21, 'rtt ' .. tostring(rtt) .. '\n' .. out .. H.must('cat /proc/loadavg'))
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local res = assert(traffic.run { host = tb.server_addr6, port = srv:port(), netns = tb.client_netns,
      duration_s = 1 })
    assert.is_true(res.received.bits_per_second > 1e6, 'TCP ' .. res.received.bits_per_second)
    local u = assert(traffic.run { host = tb.server_addr6, port = srv:port(), netns = tb.client_netns,
      proto = 'udp', bitrate_bps = 5e6, duration_s = 1 })
    assert.equal(0, u.received.lost_packets)
    assert.is_true(link_of(tb, 'client').by_protocol.udp.arrived_packets >= u.received.packets)
  end)

  it('a schedule, meta.testbed_places; close leaves no namespace, device or thread', function()
    local before_threads = threads()
    local tb = assert(testbed { backend = 'link', bottleneck = 'router', ipv6 = true, rate_bps = 50e6 })
    local closed = false
    finally(function() if not closed then tb:close() end end)
    assert.is_true(threads() >= before_threads + 4, 'the link\'s four threads')
    local s = assert(tb:schedule({ { at_s = 0, delay_ms = 5 }, { at_s = 0.2, delay_ms = 40 } }))
    H.sleep(0.4)
    local rtt = ping(tb.client_netns, tb.server_addr, { count = 2 })
    assert.is_true(rtt >= 40 and rtt < 46, 'rtt ' .. tostring(rtt))
    assert.equal(40, assert(tb:get()).client.impair.delay_ms)
    s:stop()
    local places = meta.testbed_places(tb)
    assert.same({
      { role = 'client', netns = tb.client_netns, ifnames = { 'qltun-c' } },
      { role = 'router', netns = tb.router_netns, ifnames = { 'qltun-r', tb.router_server_ifname } },
      { role = 'server', netns = tb.server_netns, ifnames = { tb.server_ifname } },
    }, places)
    -- each place's devices are there to describe
    for _, p in ipairs(places) do
      local rec = meta.collect { netns = p.netns, ifnames = p.ifnames }
      for i, it in ipairs(rec.interfaces) do
        assert.is_nil(it.error, p.ifnames[i] .. ': ' .. tostring(it.error))
      end
    end
    local names = { tb.client_netns, tb.router_netns, tb.server_netns }
    tb:close()
    closed = true
    local list = H.must('ip netns list')
    for _, n in ipairs(names) do assert.is_nil(list:find(n, 1, true), n) end
    local links = H.must('ip -o link show')
    assert.is_nil(links:find(tb.server_ifname, 1, true))
    assert.is_nil(links:find('qltun', 1, true))
    assert.equal(before_threads, threads())
  end)
end)
