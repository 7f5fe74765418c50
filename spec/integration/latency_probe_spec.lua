-- The latency probe end to end: UDP, TCP and ICMP probes against a qoslab
-- server on loopback (alone and beside a test: the latency table's shape,
-- idle and loaded phases, per-interval samples on the test's clock); ICMP
-- against a stock `iperf3 -s`, and the UDP probe's clear failure there
-- (EPROTONOSUPPORT, before any test starts, the iperf3 server still serving
-- the next test); a closed port.
local qoslab = require 'qoslab'
local traffic = require 'qoslab.traffic'
local latency = require 'qoslab.latency'
local H = require 'integration.traffic_helper'

local function dist_ok(d, what)
  assert.is_table(d, what)
  for _, k in ipairs { 'min', 'mean', 'p50', 'p90', 'p99', 'p999', 'max' } do
    assert.is_number(d[k], what .. '.' .. k)
    assert.is_true(d[k] >= 0 and d[k] < 1e6, what .. '.' .. k)
  end
  assert.is_true(d.min <= d.p50 and d.p50 <= d.p90 and d.p90 <= d.p99 and d.p99 <= d.p999
    and d.p999 <= d.max, what .. ': quantiles in order')
  assert.is_true(d.min <= d.mean and d.mean <= d.max, what .. ': mean inside')
end

local function hist_total(h)
  local n = h.below + h.above
  for _, c in ipairs(h.counts) do n = n + c end
  assert.equal(#h.counts + 1, #h.edges_ms)
  return n
end

describe('latency probe on loopback', function()
  local srv, PORT
  setup(function()
    srv = assert(traffic.server { port = 0 })
    PORT = srv:port()
  end)
  teardown(function()
    if srv then srv:stop() end
    H.cleanup_tmp()
  end)

  for _, proto in ipairs { 'udp', 'tcp', 'icmp' } do
    it(proto .. ' probe alone: every request answered, RTT on loopback well under 1 ms', function()
      local lat = assert(latency.probe { host = '127.0.0.1', port = PORT, proto = proto,
        interval_ms = 5, duration_s = 1 })
      assert.equal(proto, lat.proto)
      -- 200 slots; a descheduled probe skips the slots it missed (a loaded
      -- 2-core host), it never sends more
      assert.is_true(lat.sent >= 60 and lat.sent <= 201, 'sent ' .. lat.sent)
      assert.equal(lat.sent, lat.samples + lat.lost + lat.late)
      assert.equal(0, lat.lost)
      assert.equal(0, lat.late)
      assert.equal(0, lat.duplicates)
      dist_ok(lat.rtt_ms, 'rtt_ms')
      assert.is_true(lat.rtt_ms.p50 < 1, 'p50 ' .. lat.rtt_ms.p50)
      assert.equal(lat.samples, hist_total(lat.histogram))
      assert.equal(0, lat.idle.samples)
      assert.same({}, lat.idle.histogram.counts)
      assert.is_nil(lat.induced_ms)
      -- kernel stamps at this end for every request and reply
      assert.equal(lat.sent, lat.timestamps.tx_kernel)
      assert.equal(lat.samples, lat.timestamps.rx_kernel)
      if proto == 'icmp' then
        assert.equal('unsynced', lat.clock)
        assert.is_nil(lat.owd_up_ms)
        assert.is_nil(lat.server_hold_ms)
      else
        assert.equal('shared', lat.clock)   -- one host: one boot id
        dist_ok(lat.owd_up_ms, 'owd_up_ms')
        dist_ok(lat.owd_down_ms, 'owd_down_ms')
        dist_ok(lat.server_hold_ms, 'server_hold_ms')
        -- up + hold + down is the round trip, sample by sample; the means add up
        assert.near(lat.rtt_ms.mean, lat.owd_up_ms.mean + lat.server_hold_ms.mean
          + lat.owd_down_ms.mean, 1e-6)
      end
    end)
  end

  it('beside a TCP test: idle and loaded phases, per-interval latency on the test clock', function()
    local before = srv:probe_counters().udp_replies
    local res = assert(traffic.run { host = '127.0.0.1', port = PORT, duration_s = 1,
      interval_s = 0.5, bitrate_bps = 200e6, probe = { interval_ms = 10, idle_s = 0.5 } })
    H.identities(res, 'probe beside tcp')
    local lat = res.latency
    assert.equal('udp', lat.proto)
    assert.equal(10, lat.interval_ms)
    -- ~1 s loaded, ~2 x 0.5 s idle (plus the handshake, which is idle too)
    -- (fewer when the loaded host deschedules the probe: it skips slots)
    assert.is_true(lat.samples >= 30 and lat.samples <= 101, 'loaded ' .. lat.samples)
    assert.is_true(lat.idle.samples >= 40, 'idle ' .. lat.idle.samples)
    assert.equal(lat.sent, lat.samples + lat.lost + lat.late + lat.idle.samples
      + lat.idle.lost + lat.idle.late)
    dist_ok(lat.rtt_ms, 'rtt_ms')
    dist_ok(lat.idle.rtt_ms, 'idle.rtt_ms')
    -- both phases carry their histogram (a CDF of each), on the same edges
    assert.equal(lat.samples, hist_total(lat.histogram))
    assert.equal(lat.idle.samples, hist_total(lat.idle.histogram))
    assert.equal(10, lat.idle.histogram.per_decade)
    assert.is_true(lat.idle.histogram.edges_ms[1] <= lat.idle.rtt_ms.min)
    assert.is_true(lat.idle.histogram.edges_ms[#lat.idle.histogram.edges_ms] > lat.idle.rtt_ms.max)
    assert.near(lat.rtt_ms.p50 - lat.idle.rtt_ms.p50, lat.induced_ms, 1e-9)
    -- each request sent during the load is in exactly one interval
    local n = 0
    for _, iv in ipairs(res.intervals) do
      assert.is_table(iv.latency)
      n = n + iv.latency.samples + iv.latency.lost + iv.latency.late
      if iv.latency.samples > 0 then dist_ok(iv.latency.rtt_ms, 'interval rtt_ms') end
    end
    assert.equal(lat.samples + lat.lost + lat.late, n)
    assert.same({ interval_ms = 10, idle_s = 0.5 }, res.options.probe)
    assert.equal(lat.sent, srv:probe_counters().udp_replies - before)
  end)

  it('a handle from client{...}:start() carries the probe into wait()', function()
    local h = assert(qoslab.client { host = '127.0.0.1', port = PORT, duration_s = 0.5,
      interval_s = 0.25, bitrate_bps = 100e6, probe = { proto = 'tcp', idle_s = 0.2 } }:start())
    local res = assert(h:wait())
    assert.equal('tcp', res.latency.proto)
    assert.is_true(res.latency.samples > 0 and res.latency.idle.samples > 0)
  end)

  -- (It was EPROTONOSUPPORT advising proto icmp; with nothing listening
  -- on TCP either there is no server there at all: iperf3 -s below keeps
  -- EPROTONOSUPPORT.)
  it('a UDP probe to a port where nothing listens fails at once with ECONNREFUSED, and no test runs', function()
    local port = H.port()
    local t0 = H.now()
    local res, msg, code = traffic.run { host = '127.0.0.1', port = port, duration_s = 1,
      probe = {} }
    assert.is_nil(res)
    assert.equal('ECONNREFUSED', code)
    assert.matches('nothing listens there', msg, 1, true)
    assert.is_nil(msg:find('icmp', 1, true), msg)
    assert.is_true(H.now() - t0 < 1.5)
  end)
end)

describe('latency probe against iperf3 -s', function()
  local have = H.sh('iperf3 --version')
  if not have then
    pending('iperf3 is not installed')
    return
  end
  after_each(function() H.cleanup_tmp() end)

  it('ICMP beside a test against iperf3 -s; a UDP probe fails clearly and leaves the server serving', function()
    local port = H.port()
    local out = H.tmp('iperf3-' .. port)
    local pid = H.spawn(string.format('exec iperf3 -s -p %d', port), out, out .. '.err')
    finally(function() H.kill(pid) end)
    assert(H.wait_listen(port, nil, 5), 'iperf3 -s did not listen')
    local res, msg, code = traffic.run { host = '127.0.0.1', port = port, duration_s = 0.5,
      probe = { proto = 'udp' } }
    assert.is_nil(res, 'a udp probe against iperf3')
    assert.equal('EPROTONOSUPPORT', code)
    assert.matches('iperf3', msg, 1, true)
    res = assert(traffic.run { host = '127.0.0.1', port = port, duration_s = 1,
      interval_s = 0.5, bitrate_bps = 100e6, probe = { proto = 'icmp', idle_s = 0.3 } })
    assert.equal('iperf3', res.peer)
    assert.equal('icmp', res.latency.proto)
    assert.is_true(res.latency.samples >= 30, 'samples ' .. res.latency.samples)
    assert.equal(0, res.latency.lost)
    assert.is_true(res.latency.idle.rtt_ms.p50 < 1)
  end)
end)
