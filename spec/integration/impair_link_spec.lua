-- qoslab.link.impair_link: two namespaces this spec makes (and removes, also
-- when it fails) joined by the native impairment link. Ping, UDP and TCP
-- cross it; a delay shows in the round trip, a limit drops exactly a burst's
-- excess, the engine's UDP loss equals the link's loss drops, a change of
-- spec lands while traffic flows, closing removes the devices, and a device
-- deleted under the link is a fault the link reports instead of going on.
-- IPv6 is off in both namespaces so no router solicitation or MLD report
-- crosses the link and every count is the test's own.
local link = require 'qoslab.link'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

-- Two namespaces with lo up and IPv6 off; .close() removes them.
local function ns_pair() return H.bare_netns_pair('qli') end

local function open(p, o)
  o = o or {}
  o.a_netns, o.b_netns, o.a_addr, o.b_addr = p.a, p.b, p.a_addr, p.b_addr
  local l, msg, code = link.impair_link(o)
  assert(l, tostring(msg) .. ' ' .. tostring(code))
  return l
end

-- ping from a to b: the round trips in ms.
local function ping(p, count)
  local out = H.tmp('ping.txt')
  assert(H.sh(string.format('ip netns exec %s ping -n -q -c %d -i 0.2 -W 2 %s > %s 2>&1',
    p.a, count, p.b_addr, out)), 'ping failed: ' .. (H.read(out) or ''))
  local txt = H.read(out)
  local mn, avg, mx = txt:match('= ([%d.]+)/([%d.]+)/([%d.]+)')
  assert(mn, 'no rtt line in: ' .. txt)
  return tonumber(mn), tonumber(avg), tonumber(mx)
end

-- count datagrams of 100 bytes sent back to back from a to b's port 9.
local function burst(p, count)
  assert(H.sh(string.format(
    "ip netns exec %s python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n" ..
    "for i in range(%d): s.sendto(bytes(100), (\"%s\", 9))'", p.a, count, p.b_addr)),
    'python3 burst failed')
end

-- busted keeps one finally per test: this runs what was registered, last first.
local function cleanups() return H.cleanups(finally) end

local function sh_out(cmd)
  local f = assert(io.popen(cmd .. ' 2>&1'))
  local out = f:read('a')
  f:close()
  return (out:gsub('%s+$', ''))
end

-- TCP segments ns has sent (nstat's TcpOutSegs, absolute).
local function tcp_out_segs(ns)
  local out = sh_out('ip netns exec ' .. ns .. ' nstat -az TcpOutSegs')
  return tonumber(out:match('TcpOutSegs%s+(%d+)')) or error('nstat: ' .. out)
end

local function wait_for(cond, timeout_s)
  local t0 = H.now()
  while not cond() do
    if H.now() - t0 > timeout_s then return false end
    H.sleep(0.02)
  end
  return true
end

local function has_dev(ns, ifname)
  return H.sh(string.format('ip -n %s link show %s >/dev/null 2>&1', ns, ifname))
end

describe('qoslab.link.impair_link (root, namespaces)', function()
  it('makes both devices up with point-to-point addresses and removes them on close', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p, { mtu_bytes = 1400 })
    defer(function() l:close() end)
    local info = assert(link.info('qltun-a', { netns = p.a }))
    assert.is_true(info.up)
    assert.equal(1400, info.mtu_bytes)
    assert.is_true(has_dev(p.b, 'qltun-b'))
    assert.is_true(H.sh(string.format('ip -n %s -4 addr show qltun-a | grep -q "inet %s peer %s/32"',
      p.a, p.a_addr, p.b_addr)))
    assert.matches('qoslab.ImpairLink %(qltun%-a <%-> qltun%-b%)', tostring(l))
    l:close()
    assert.is_false(has_dev(p.a, 'qltun-a'))
    assert.is_false(has_dev(p.b, 'qltun-b'))
    l:close() -- twice is harmless
    assert.equal('qoslab.ImpairLink (closed)', tostring(l))
    assert.has_error(function() l:stats() end, 'qoslab.ImpairLink:stats: the link is closed')
  end)

  it('a 50 ms forward delay shows as a 50 ms round trip; a reverse one set while it runs adds its own', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p, { forward = { delay_ms = 50 } })
    defer(function() l:close() end)
    local mn, avg = ping(p, 5)
    assert(mn >= 50 and avg < 60, string.format('rtt min %.3f avg %.3f ms, expected ~50', mn, avg))
    l:set('reverse', { delay_ms = 30 })
    mn, avg = ping(p, 5)
    assert(mn >= 80 and avg < 90, string.format('rtt min %.3f avg %.3f ms, expected ~80', mn, avg))
    local st = l:stats()
    assert.is_false(st.failed)
    assert.equal(10, st.forward.packets)
    assert.equal(10, st.reverse.packets)
    assert(st.forward.queue_delay_mean_ms >= 50, 'forward queue delay ' .. st.forward.queue_delay_mean_ms)
    assert(st.reverse.queue_delay_max_ms >= 30, 'reverse queue delay ' .. st.reverse.queue_delay_max_ms)
    assert.equal(0, st.forward.backlog_packets)
    assert.equal(0, st.forward.drops)
  end)

  -- (a long delay: the burst is still queued when the counters are read,
  -- even on a machine busy enough to stall this process for a while)
  it('a limit drops exactly the excess of a burst', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p, { forward = { delay_ms = 1500, limit_packets = 10 } })
    defer(function() l:close() end)
    burst(p, 30)
    assert(wait_for(function() return l:stats().forward.arrived_packets == 30 end, 2),
      'the burst did not arrive')
    local st = l:stats().forward
    assert.equal(20, st.drops_by_reason.limit)
    assert.equal(10, st.backlog_packets)
    assert.equal(10 * 128, st.backlog_bytes)  -- 100 bytes + UDP and IPv4 headers
    assert(wait_for(function() return l:stats().forward.packets == 10 end, 4), 'not forwarded')
    st = l:stats().forward
    assert.equal(0, st.backlog_packets)
    assert.same({ loss = 0, limit = 20, memory = 0 }, st.drops_by_reason)
  end)

  it('over its memory budget a direction drops with reason memory', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    -- room for 5 packets of 128 bytes and their records, not 6
    local l = open(p, { forward = { delay_ms = 1500 }, memory_bytes = 5 * (128 + 40) + 10 })
    defer(function() l:close() end)
    burst(p, 12)
    assert(wait_for(function() return l:stats().forward.arrived_packets == 12 end, 2))
    local st = l:stats().forward
    assert.equal(5, st.backlog_packets)
    assert.same({ loss = 0, limit = 0, memory = 7 }, st.drops_by_reason)
    assert.equal(7, st.drops)
  end)

  it('UDP through qoslab.traffic: its lost count equals the link loss drops (but control segments)', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p, { seed = 7 })
    defer(function() l:close() end)
    local srv = assert(traffic.server { port = 0, netns = p.b })
    defer(function() srv:stop() end)
    local t = assert(traffic.start { host = p.b_addr, port = srv:port(), netns = p.a,
      proto = 'udp', bitrate_bps = 20e6, length_bytes = 1200, window_bytes = 4194304, duration_s = 4, interval_s = 1 })
    -- loss only while the datagrams flow (300 of them have crossed: the
    -- control connection's start is long done) and not at the end
    local t0 = H.now()
    assert(wait_for(function() return l:stats().forward.arrived_packets > 300 end, 2.5),
      'the datagrams did not start')
    -- the control connection carries a few segments a second mid-test (the
    -- server's interval records and a's ACKs): the link may lose those too
    local tcp0 = tcp_out_segs(p.a)
    l:set('forward', { loss_pct = 5 })
    H.sleep(math.min(1.5, math.max(0, 3 - (H.now() - t0))))
    l:set('forward', {})
    local tcp_in_window = tcp_out_segs(p.a) - tcp0
    local res, msg, code = t:wait()
    assert(res, tostring(msg) .. ' ' .. tostring(code))
    H.identities(res, 'udp through the link')
    local st = l:stats().forward
    assert(st.drops_by_reason.loss > 50, 'too few losses: ' .. st.drops_by_reason.loss)
    -- where else datagrams could vanish, named when they did
    local elsewhere = string.format('tx_dropped of qltun-a: %s; UDP receive buffer errors in b: %s',
      sh_out('ip -n ' .. p.a .. ' -s link show qltun-a | awk \'/TX:/{getline; print $4}\''),
      sh_out('ip netns exec ' .. p.b .. ' nstat -az UdpRcvbufErrors | awk \'/UdpRcvbufErrors/{print $2}\''))
    -- every lost datagram is a link loss drop; the link's other loss drops
    -- can only be control segments sent while loss was on (exact when none
    -- crossed, which is most runs)
    local lost, drops = res.received.lost_packets, st.drops_by_reason.loss
    assert(lost <= drops and drops <= lost + tcp_in_window, string.format(
      'link loss drops %d, lost datagrams %d, control segments in the window %d (%s)', drops,
      lost, tcp_in_window, elsewhere))
    assert.equal(st.drops, st.drops_by_reason.loss)
  end)

  -- The link's handling of the model's other verdicts: copies, a flipped
  -- bit, a CE mark (with the IPv4 header checksum fixed). Pending where the
  -- model in the build does not make such verdicts (a stand-in model).
  local function udp_window(p, l, spec)
    local srv = assert(traffic.server { port = 0, netns = p.b })
    local t = assert(traffic.start { host = p.b_addr, port = srv:port(), netns = p.a,
      proto = 'udp', bitrate_bps = 20e6, length_bytes = 1200, window_bytes = 4194304,
      duration_s = 3, interval_s = 1 })
    local ok, err = pcall(function()
      assert(wait_for(function() return l:stats().forward.arrived_packets > 300 end, 2.5))
      local tcp0 = tcp_out_segs(p.a)
      l:set('forward', spec)
      H.sleep(1)
      l:set('forward', {})
      return tcp_out_segs(p.a) - tcp0
    end)
    local res, msg, code = t:wait()
    srv:stop()
    assert(ok, err)
    assert(res, tostring(msg) .. ' ' .. tostring(code))
    return res, l:stats().forward, err
  end

  it('duplicates: each copy the link made is a duplicate the receiver counts', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p)
    defer(function() l:close() end)
    local res, st, tcp = udp_window(p, l, { duplicate_pct = 10 })
    if st.duplicated_packets == 0 then return pending('the model in this build makes no copies') end
    local dup = res.received.duplicate_packets
    assert(dup <= st.duplicated_packets and st.duplicated_packets <= dup + tcp, string.format(
      'link copies %d, duplicates received %d, control segments %d', st.duplicated_packets, dup, tcp))
    assert(st.packets + st.backlog_packets <= st.arrived_packets + st.duplicated_packets)
    assert(st.packets > st.arrived_packets - 10, 'forwarded ' .. st.packets .. ' of ' .. st.arrived_packets)
  end)

  it('corruption: every datagram with a flipped bit is lost to a checksum', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p)
    defer(function() l:close() end)
    local res, st, tcp = udp_window(p, l, { corrupt_pct = 5 })
    if st.corrupted_packets == 0 then return pending('the model in this build corrupts nothing') end
    local lost = res.received.lost_packets
    assert(lost <= st.corrupted_packets and st.corrupted_packets <= lost + tcp, string.format(
      'link corrupted %d, lost datagrams %d, control segments %d', st.corrupted_packets, lost, tcp))
  end)

  it('ECN: a loss of an ECN-capable packet is a CE mark the receiver sees, its checksum right', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    for _, ns in ipairs { p.a, p.b } do
      H.must('ip netns exec ' .. ns .. ' sysctl -q -w net.ipv4.tcp_ecn=1')
    end
    local l = open(p, { forward = { delay_ms = 5, loss_pct = 1, ecn = true } })
    defer(function() l:close() end)
    local srv = assert(traffic.server { port = 0, netns = p.b })
    defer(function() srv:stop() end)
    local res = assert(traffic.run { host = p.b_addr, port = srv:port(), netns = p.a,
      duration_s = 1, interval_s = 0.5 })
    H.identities(res, 'tcp with ECN through the link')
    local st = l:stats().forward
    if st.ce_marked_packets == 0 then return pending('the model in this build marks nothing') end
    local function nstat(name)
      return tonumber(sh_out('ip netns exec ' .. p.b .. ' nstat -az ' .. name):match(name .. '%s+(%d+)'))
    end
    assert.equal(st.ce_marked_packets, nstat('IpExtInCEPkts'))
    assert.equal(0, nstat('IpInHdrErrors'))
  end)

  it('TCP crosses the link both ways with a delay', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p, { forward = { delay_ms = 5 }, reverse = { delay_ms = 5 } })
    defer(function() l:close() end)
    local srv = assert(traffic.server { port = 0, netns = p.b })
    defer(function() srv:stop() end)
    local res = assert(traffic.run { host = p.b_addr, port = srv:port(), netns = p.a,
      duration_s = 1, interval_s = 0.5 })
    H.identities(res, 'tcp through the link')
    assert.equal(res.sent.bytes, res.received.bytes)
    assert(res.received.bytes > 1e6, 'only ' .. res.received.bytes .. ' bytes')
    local st = l:stats()
    assert(st.forward.bytes > res.received.bytes, 'forward bytes ' .. st.forward.bytes)
    assert.is_false(st.failed)
  end)

  it('gso = true: TCP super-packets cross whole, larger than the MTU', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p, { gso = true })
    defer(function() l:close() end)
    local srv = assert(traffic.server { port = 0, netns = p.b })
    defer(function() srv:stop() end)
    local res = assert(traffic.run { host = p.b_addr, port = srv:port(), netns = p.a,
      duration_s = 1, interval_s = 0.5 })
    H.identities(res, 'tcp through the link with gso')
    local st = l:stats().forward
    assert(st.bytes / st.packets > 1500, string.format('%d bytes in %d packets', st.bytes, st.packets))
    assert.is_false(l:stats().failed)
  end)

  it('a device deleted under the link is reported, and nothing is forwarded any more', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l = open(p)
    defer(function() l:close() end)
    assert.is_false(l:failed())
    H.must('ip -n ' .. p.a .. ' link del qltun-a')
    assert(wait_for(function() return l:failed() end, 2), 'the fault was not reported')
    local failed, msg, code = l:failed()
    assert.is_true(failed)
    assert.equal('ELINKFAILED', code)
    assert.matches('TUN device qltun%-a', msg)
    local st = l:stats()
    assert.equal(msg, st.failed)
    assert.equal('ELINKFAILED', st.failed_code)
    assert.matches(', failed%)$', tostring(l))
    -- b's side forwards nothing now: a packet from b stays there
    H.sh(string.format('ip netns exec %s ping -c 1 -W 0.3 %s >/dev/null 2>&1', p.b, p.a_addr))
    assert.equal(0, l:stats().reverse.packets)
    l:close()
    assert.is_false(has_dev(p.b, 'qltun-b'))
  end)

  -- a process that opens a link (to-be-closed) and sleeps; the devices
  -- must be gone when it ends by SIGINT (its <close> runs) or SIGKILL (the
  -- kernel closes the fds; the devices are not persistent)
  local sanitized = (os.getenv('QOSLAB_BUILD') or ''):match('^build%-%a*san$')
  local function child(p, handlers)
    local script = H.tmp('child.lua')
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
local core = require 'qoslab.core'
local link = require 'qoslab.link'
if %s then core.signals_install() end
local l <close> = assert(link.impair_link{ a_netns = %q, b_netns = %q, a_addr = %q, b_addr = %q,
  forward = { delay_ms = 100 } })
print('ready')
io.stdout:flush()
local ok, err = pcall(core.sleep, 30)
print('woke', ok, err and err.code)
]], tostring(handlers), p.a, p.b, p.a_addr, p.b_addr))
    f:close()
    local out = H.tmp('child.out')
    local build = os.getenv('QOSLAB_BUILD') or 'build'
    local pid = H.spawn(string.format(
      "exec env LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' LUA_CPATH='./%s/?.so;;' lua5.4 %s",
      build, script), out)
    assert(wait_for(function() return (H.read(out) or ''):find('ready', 1, true) end, 5),
      'child did not start: ' .. (H.read(out) or ''))
    assert.is_true(has_dev(p.a, 'qltun-a'))
    return pid, out
  end

  it('SIGINT: the script unwinds, its <close> closes the link, the devices go', function()
    if sanitized then return pending('a plain lua5.4 child cannot load a sanitized build') end
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local pid, out = child(p, true)
    defer(function() H.kill(pid) end)
    os.execute('kill -INT ' .. pid)
    assert(H.wait_exit(pid, 5), 'the child did not end')
    assert.matches('woke\tfalse\tEINTR', H.read(out))
    assert.is_false(has_dev(p.a, 'qltun-a'))
    assert.is_false(has_dev(p.b, 'qltun-b'))
  end)

  it('SIGKILL: the devices go with the process', function()
    if sanitized then return pending('a plain lua5.4 child cannot load a sanitized build') end
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local pid = child(p, false)
    defer(function() H.kill(pid) end)
    os.execute('kill -KILL ' .. pid)
    assert(H.wait_exit(pid, 5), 'the child did not end')
    assert(wait_for(function() return not has_dev(p.a, 'qltun-a') and not has_dev(p.b, 'qltun-b') end, 3),
      'a device outlived the process')
  end)

  it('world failures: a missing namespace, a taken device name', function()
    local defer = cleanups()
    local p = ns_pair()
    defer(p.close)
    local l, msg, code = link.impair_link { a_netns = p.a, b_netns = 'qoslab-missing-' .. H.pid,
      a_addr = p.a_addr, b_addr = p.b_addr }
    assert.is_nil(l)
    assert.equal('ENOENT', code)
    assert.matches('qoslab%-missing', msg)
    assert.is_false(has_dev(p.a, 'qltun-a'))  -- nothing left behind
    local l1 = open(p)
    defer(function() l1:close() end)
    l, msg, code = link.impair_link { a_netns = p.a, b_netns = p.b, a_addr = '10.254.0.1',
      b_addr = '10.254.0.2' }
    assert.is_nil(l)
    assert.equal('EBUSY', code)
    assert.matches('qltun%-a', msg)
  end)
end)

describe('qoslab.testbed{backend = "link"} (root)', function()
  local testbed = require 'qoslab.testbed'
  local netns = require 'qoslab.netns'

  local function tb_ping(tb, count)
    return ping({ a = tb.client_netns, b_addr = tb.server_addr }, count)
  end

  it('joins client and server by the link: impair, get, stats, close', function()
    local tb = assert(testbed { backend = 'link', impair = { delay_ms = 40 } })
    finally(function() tb:close() end)
    assert.equal('link', tb.backend)
    assert.equal('qltun-c', tb.client_ifname)
    local mn, avg = tb_ping(tb, 4)
    assert(mn >= 40 and avg < 50, string.format('rtt min %.3f avg %.3f ms, expected ~40', mn, avg))
    assert(tb:impair({ delay_ms = 20 }, 'reverse'))
    mn, avg = tb_ping(tb, 4)
    assert(mn >= 60 and avg < 70, string.format('rtt min %.3f avg %.3f ms, expected ~60', mn, avg))
    local got = assert(tb:get())
    assert.equal(40, got.client.impair.delay_ms)
    assert.equal(20, got.server.impair.delay_ms)
    local st = assert(tb:stats())
    local c, s = st.client[#st.client], st.server[#st.server]
    assert.equal('link', c.kind)
    assert.equal('link', s.kind)
    -- the pings and what else crossed (IPv6 link-local chatter is on here)
    assert(c.packets >= 8 and s.packets >= 8, c.packets .. ' and ' .. s.packets .. ' packets')
    assert.same({ loss = 0, limit = 0, memory = 0 }, c.drops_by_reason)
    assert.is_false(c.failed)
    assert(tb:impair(nil, 'reverse'))
    assert.is_nil(assert(tb:get()).server.impair)
    local cn, sn = tb.client_netns, tb.server_netns
    tb:close()
    assert.is_false(netns.exists(cn))
    assert.is_false(netns.exists(sn))
  end)

  it('a rate limit shapes the TUN devices before the link', function()
    local tb = assert(testbed { backend = 'link', rate_bps = 50e6, impair = { delay_ms = 5 } })
    finally(function() tb:close() end)
    local srv = assert(traffic.server { port = 0, netns = tb.server_netns })
    local ok, err = pcall(function()
      local res = assert(traffic.run { host = tb.server_addr, port = srv:port(), netns = tb.client_netns,
        duration_s = 2, interval_s = 1 })
      local mbps = res.received.bits_per_second / 1e6
      assert(mbps > 40 and mbps < 52, string.format('%.1f Mbit/s through a 50 Mbit/s shaper', mbps))
      local kinds = {}
      for _, q in ipairs(assert(tb:stats()).client) do kinds[#kinds + 1] = q.kind end
      assert.equal('link', kinds[#kinds])
      assert.equal('tbf', kinds[1])
    end)
    srv:stop()
    assert(ok, err)
  end)
end)
