-- The latency probe between namespaces: UDP, ICMP and TCP probes against a
-- qoslab server in the other namespace of a veth pair; idle versus loaded
-- through a 100 Mbit/s tbf bottleneck with a 20 ms queue on a router
-- namespace between client and server (a 5 s cubic TCP upload must raise
-- the probe's p50 by at least 10 ms over an idle p50 below 1 ms: the load's
-- queue, seen by the probe); lost and late
-- requests counted apart (a 1 Mbit/s tbf that queues past the timeout and
-- drops; a server that goes away mid-probe); the CLI flags.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local latency = require 'qoslab.latency'
local H = require 'integration.traffic_helper'

local function books(lat, what)
  assert.equal(lat.sent, lat.samples + lat.lost + lat.late + lat.idle.samples + lat.idle.lost
    + lat.idle.late, what .. ': every request is a sample, lost or late')
end

-- a (client) - r (router) - b (server): a queue on r's egress towards b
-- is a bottleneck in the path, not on the sender's host, where TCP Small
-- Queues would keep the sender's own qdisc short (a few ms at 100 Mbit/s).
-- To-be-closed; also :close().
local function routed()
  local k = H.pid % 250 + 1
  local self = { a = 'qlpa-' .. H.pid, r = 'qlpr-' .. H.pid, b = 'qlpb-' .. H.pid,
    a_addr = string.format('10.201.%d.1', k), b_addr = string.format('10.202.%d.2', k) }
  local closed = false
  function self.close()
    if closed then return end
    closed = true
    for _, n in ipairs { self.a, self.r, self.b } do os.execute('ip netns del ' .. n .. ' 2>/dev/null') end
  end
  setmetatable(self, { __close = self.close, __gc = self.close })
  local ok, err = pcall(function()
    for _, n in ipairs { self.a, self.r, self.b } do
      H.must('ip netns add ' .. n)
      H.must(string.format('ip -n %s link set lo up', n))
    end
    H.must(string.format('ip -n %s link add qr0 type veth peer name qa0 netns %s', self.r, self.a))
    H.must(string.format('ip -n %s link add qr1 type veth peer name qb0 netns %s', self.r, self.b))
    H.must(string.format('ip -n %s addr add %s/24 dev qa0', self.a, self.a_addr))
    H.must(string.format('ip -n %s addr add 10.201.%d.2/24 dev qr0', self.r, k))
    H.must(string.format('ip -n %s addr add 10.202.%d.1/24 dev qr1', self.r, k))
    H.must(string.format('ip -n %s addr add %s/24 dev qb0', self.b, self.b_addr))
    for _, x in ipairs { { self.a, 'qa0' }, { self.r, 'qr0' }, { self.r, 'qr1' }, { self.b, 'qb0' } } do
      H.must(string.format('ip -n %s link set %s up', x[1], x[2]))
      H.sh(string.format('ip netns exec %s ethtool -K %s tso off gso off gro off', x[1], x[2]))
    end
    H.must(string.format('ip -n %s route add default via 10.201.%d.2', self.a, k))
    H.must(string.format('ip -n %s route add default via 10.202.%d.1', self.b, k))
    H.must(string.format('ip netns exec %s sysctl -qw net.ipv4.ip_forward=1', self.r))
  end)
  if not ok then self.close(); error(err, 2) end
  return self
end

describe('latency probe through a router with a tbf bottleneck', function()
  after_each(function() H.cleanup_tmp() end)

  it('idle vs loaded, 100 Mbit/s tbf with a 20 ms queue: a 5 s TCP upload adds >= 10 ms', function()
    local net <close> = routed()
    local srv <close> = assert(traffic.server { port = 0, netns = net.b })
    H.must(string.format('ip netns exec %s tc qdisc add dev qr1 root tbf rate 100mbit burst 32k '
      .. 'latency 20ms', net.r))
    -- a loss-based sender fills the queue (cubic, Linux's usual default);
    -- BBR, this host's default, keeps it short on purpose (p50 ~4 ms here)
    local res = assert(traffic.run { host = net.b_addr, port = srv:port(), netns = net.a,
      duration_s = 5, interval_s = 1, congestion = 'cubic', probe = { interval_ms = 10 } })
    H.identities(res, 'tbf upload')
    local lat = res.latency
    books(lat, 'tbf')
    print(string.format('\n  tbf 100 Mbit/s 20 ms: %.1f Mbit/s; idle p50 %.3f ms, loaded p50 %.3f '
      .. 'p90 %.3f p99 %.3f ms, induced %.3f ms (%d loaded, %d idle samples)',
      res.received.bits_per_second / 1e6, lat.idle.rtt_ms.p50, lat.rtt_ms.p50, lat.rtt_ms.p90,
      lat.rtt_ms.p99, lat.induced_ms, lat.samples, lat.idle.samples))
    assert.is_true(lat.idle.rtt_ms.p50 < 1, 'idle p50 ' .. lat.idle.rtt_ms.p50)
    assert.is_true(lat.rtt_ms.p50 >= lat.idle.rtt_ms.p50 + 10, 'loaded p50 ' .. lat.rtt_ms.p50)
    assert.is_true(lat.induced_ms >= 10)
    -- the queue bounds the delay: 20 ms of queue plus slack
    assert.is_true(lat.rtt_ms.p99 < 60, 'p99 ' .. lat.rtt_ms.p99)
    -- the intervals of the load saw it too (the first one holds the ramp-up)
    for i = 2, #res.intervals do
      local l = res.intervals[i].latency
      assert.is_true(l.samples > 30, 'interval ' .. i .. ' samples ' .. l.samples)
      assert.is_true(l.rtt_ms.p50 >= 5, 'interval ' .. i .. ' p50 ' .. l.rtt_ms.p50)
    end
  end)
end)

describe('latency probe between namespaces', function()
  local pair, srv
  before_each(function()
    pair = H.netns_pair { offloads_off = true }
    srv = assert(traffic.server { port = 0, netns = pair.b })
  end)
  after_each(function()
    if srv then srv:stop(); srv = nil end
    if pair then pair.close(); pair = nil end
    H.cleanup_tmp()
  end)

  for _, proto in ipairs { 'udp', 'icmp', 'tcp' } do
    it(proto .. ' probe across the veth pair', function()
      local lat = assert(latency.probe { host = pair.b_addr, port = srv:port(), proto = proto,
        netns = pair.a, interval_ms = 5, duration_s = 0.5 })
      books(lat, proto)
      assert.equal(0, lat.lost)
      assert.is_true(lat.samples >= 40, 'samples ' .. lat.samples)   -- of 100 slots
      assert.is_true(lat.rtt_ms.p50 < 1, 'p50 ' .. lat.rtt_ms.p50)
      -- namespaces of one host share its clock (one boot id)
      assert.equal(proto == 'icmp' and 'unsynced' or 'shared', lat.clock)
    end)
  end

  it('lost and late apart: a 1 Mbit/s tbf queues past the timeout and drops', function()
    -- 1400-byte requests every 2 ms offer 5.6 Mbit/s: the queue (up to
    -- 300 ms) fills, its tail is dropped; a 50 ms timeout makes the queued
    -- replies late
    H.must(string.format('ip netns exec %s tc qdisc add dev %s root tbf rate 1mbit burst 4k '
      .. 'latency 300ms', pair.a, pair.va))
    local lat = assert(latency.probe { host = pair.b_addr, port = srv:port(), netns = pair.a,
      interval_ms = 2, payload_bytes = 1400, timeout_ms = 50, duration_s = 1.5 })
    books(lat, 'tbf 1 Mbit/s')
    assert.is_true(lat.late > 0, 'late ' .. lat.late)
    assert.is_true(lat.lost > 0, 'lost ' .. lat.lost)
    assert.is_true(lat.samples > 0, 'samples ' .. lat.samples)
    assert.is_true(lat.rtt_ms.max <= 50, 'a sample is never later than the timeout')
  end)

  it('a server that goes away mid-probe: the requests after it are lost', function()
    local p = assert(core.probe_start { host = pair.b_addr, port = srv:port(), netns = pair.a,
      interval_ms = 5, timeout_ms = 200 })
    H.sleep(0.5)
    srv:stop()
    srv = nil
    H.sleep(0.5)
    p:stop()
    local lat = p:latency()
    books(lat, 'server gone')
    -- 100 slots each side of the stop (fewer if the probe is descheduled)
    assert.is_true(lat.samples >= 40 and lat.samples <= 110, 'samples ' .. lat.samples)
    assert.is_true(lat.lost >= 40, 'lost ' .. lat.lost)
    assert.equal(0, lat.late)
  end)

  it('qoslab client --probe=MS --probe-proto tcp prints the latency per interval and in the summary', function()
    local ok, out = H.sh(string.format('QOSLAB_BUILD=%s %s bin/qoslab client %s -p %d --netns %s '
      .. '-t 1 -i 0.5 -b 50M --probe=20 --probe-proto tcp', os.getenv('QOSLAB_BUILD') or 'build',
      os.getenv('LUA') or 'lua5.4', pair.b_addr, srv:port(), pair.a))
    assert(ok, out)
    local lat_lines = 0
    for _ in out:gmatch('\n%[LAT%]%s+[%d.]+%-[%d.]+%s+s  rtt p50 [%d.]+') do lat_lines = lat_lines + 1 end
    assert.equal(2, lat_lines, out)
    assert.matches('latency %(tcp probe every 20 ms, clock shared%): idle p50 [%d.]+ ms; loaded p50', out)
    assert.matches('induced latency [+-][%d.]+ ms', out)
    ok, out = H.sh(string.format('%s bin/qoslab client %s -p %d --netns %s -t 1 --probe=0',
      os.getenv('LUA') or 'lua5.4', pair.b_addr, srv:port(), pair.a))
    assert.is_false(ok)
    assert.matches('--probe (probe.interval_ms): expected a finite number in [1, 60000], got 0',
      out, 1, true)
  end)
end)
