-- The UDP books' path statistics over a real path: a veth pair between two
-- namespaces with a tbf narrower than the sender's rate on the client's
-- side (tail drops give bursts of loss), forward, reverse and with two
-- streams, and against a stock iperf3 on loopback. Checks that the fields
-- are present where a qoslab receiver measured and absent where iperf3 did,
-- and their identities: Σ burst lengths == lost (no warm-up), gaps ==
-- bursts - 1, Σ gap lengths <= unique, histograms sum to their counts, the
-- extents count the out-of-order datagrams, the intervals' |D| pairs sum
-- to the totals', and a [SUM] adds its streams. Namespaces and the iperf3
-- process are removed also when a case fails.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('UDP path statistics', function()
    pending('core.traffic_client is not in this build')
  end)
  return
end

local function sum(t)
  local n = 0
  for _, v in ipairs(t) do n = n + v end
  return n
end

-- The identities of one receiver entry (a stream's or a [SUM]).
local function check_receiver(x, what)
  assert.equal('integer', math.type(x.jitter_pairs), what .. ' jitter_pairs')
  assert(x.jitter_pairs <= x.unique_packets, what .. ': more pairs than datagrams')
  if x.jitter_pairs > 0 then
    assert(x.jitter_mean_abs_ms >= 0 and x.jitter_mean_abs_ms < 1000,
      what .. ' jitter_mean_abs_ms ' .. tostring(x.jitter_mean_abs_ms))
  else
    assert.is_nil(x.jitter_mean_abs_ms)
  end
  local r = assert(x.loss_runs, what .. ': no loss_runs')
  assert.equal(#r.burst_histogram, 17)
  assert.equal(#r.gap_histogram, 16)
  assert.equal(r.bursts, sum(r.burst_histogram), what .. ' burst histogram')
  assert.equal(r.gaps, sum(r.gap_histogram), what .. ' gap histogram')
  assert.equal(x.lost_packets, r.burst_packets, what .. ': Σ bursts ~= lost')
  if r.bursts > 0 then
    assert(math.abs(r.mean_burst_packets * r.bursts - x.lost_packets) < 1e-6,
      what .. ': bursts x mean burst ~= lost')
    assert(r.burst_packets >= r.bursts)
  else
    assert.is_nil(r.mean_burst_packets)
  end
  assert(r.gap_packets <= x.unique_packets, what .. ': Σ gaps > unique')
  if r.gaps > 0 then
    assert(math.abs(r.mean_gap_packets * r.gaps - r.gap_packets) < 1e-6)
  end
  local e = assert(x.reorder_extent, what .. ': no reorder_extent')
  assert.equal(#e.histogram, 13)
  assert.equal(e.packets, sum(e.histogram))
  assert.equal(x.out_of_order_packets, e.packets, what .. ': extents ~= out-of-order')
  assert(e.max_packets <= 4096)
  assert(e.sum_packets <= e.packets * e.max_packets)
end

-- Per stream (a single stream's own books: gaps == bursts - 1 holds there,
-- not in a [SUM]) and the intervals' pairs.
local function check_streams(res, what)
  local pairs_by_id = {}
  for _, iv in ipairs(res.intervals) do
    for _, x in ipairs(iv.streams) do
      if x.role == 'receiver' then
        assert.equal('integer', math.type(x.jitter_pairs), what .. ' interval pairs')
        assert.is_nil(x.loss_runs)
        if not iv.omitted then
          pairs_by_id[x.id] = (pairs_by_id[x.id] or 0) + x.jitter_pairs
        end
      end
    end
  end
  for _, s in ipairs(res.streams) do
    local x = s.receiver
    check_receiver(x, what .. ' stream ' .. s.id)
    local r = x.loss_runs
    if r.bursts > 0 then assert.equal(r.bursts - 1, r.gaps, what .. ': gaps ~= bursts - 1') end
    assert.equal(pairs_by_id[s.id], x.jitter_pairs, what .. ': Σ interval pairs ~= total')
  end
end

describe('UDP path statistics', function()
  local pair, srv
  local port = 5231

  setup(function()
    pair = H.netns_pair {}
    -- 4 Mbit/s with a short queue on the client's egress: a 6 Mbit/s
    -- stream loses a third in tail drops, in runs
    H.must(string.format('ip -n %s link set %s txqueuelen 20', pair.a, pair.va))
    H.must(string.format('tc -n %s qdisc add dev %s root tbf rate 4mbit burst 4kb limit 6kb',
      pair.a, pair.va))
    local err, code
    srv, err, code = traffic.server { port = port, netns = pair.b }
    assert(srv, tostring(err) .. ' ' .. tostring(code))
  end)

  teardown(function()
    if srv then srv:stop() end
    if pair then pair.close() end
    H.cleanup_tmp()
  end)

  local function run(o, label)
    o.host, o.port, o.netns = pair.b_addr, port, pair.a
    o.proto = 'udp'
    o.duration_s = o.duration_s or 1.5
    o.interval_s = 0.5
    o.length_bytes = 1000
    local res, msg, code = traffic.run(o)
    assert(res, string.format('%s: %s (%s)', label, tostring(msg), tostring(code)))
    H.identities(res, label)
    return res
  end

  it('forward through tail drops: bursts == lost, gaps between them', function()
    local res = run({ bitrate_bps = 6e6 }, 'udp path forward')
    check_receiver(res.received, 'forward')
    check_streams(res, 'forward')
    assert(res.received.lost_packets > 50, 'the tbf dropped too little to test: '
      .. res.received.lost_packets)
    assert(res.received.loss_runs.gaps > 0)
    print(tostring(res))
  end)

  it('reverse (the client books) and two streams (a [SUM] adds them)', function()
    -- reverse: the server sends; its egress has no tbf, so shape its side
    local res = run({ bitrate_bps = 3e6, reverse = true }, 'udp path reverse')
    check_receiver(res.received, 'reverse')
    check_streams(res, 'reverse')
    assert.equal('client', res.received.side)
    res = run({ bitrate_bps = 3e6, parallel = 2 }, 'udp path -P 2')
    check_receiver(res.received, '-P 2 sum')
    check_streams(res, '-P 2')
    local a, b = res.streams[1].receiver, res.streams[2].receiver
    assert.equal(a.loss_runs.bursts + b.loss_runs.bursts, res.received.loss_runs.bursts)
    assert.equal(a.jitter_pairs + b.jitter_pairs, res.received.jitter_pairs)
    assert.equal(math.max(a.reorder_extent.max_packets, b.reorder_extent.max_packets),
      res.received.reorder_extent.max_packets)
  end)
end)

describe('UDP path statistics against a stock iperf3', function()
  if not H.sh('iperf3 --version') then
    pending('iperf3 is not installed')
    return
  end
  it('absent where iperf3 received, present where qoslab did', function()
    for _, rev in ipairs { false, true } do
      local port = H.port()
      local pid = H.spawn(string.format('exec iperf3 -s -1 -p %d', port))
      local ok, res = pcall(function()
        assert(H.wait_listen(port, nil, 5), 'iperf3 -s did not listen')
        local r, msg, code = traffic.run { host = '127.0.0.1', port = port, proto = 'udp',
          bitrate_bps = 5e6, duration_s = 1, reverse = rev }
        assert(r, tostring(msg) .. ' ' .. tostring(code))
        return r
      end)
      H.kill(pid)
      assert(ok, res)
      local x = res.received
      if rev then
        check_receiver(x, 'from iperf3')
      else
        for _, k in ipairs { 'jitter_pairs', 'jitter_mean_abs_ms', 'loss_runs',
            'reorder_extent' } do
          assert.is_nil(x[k], k .. ' made up for a stock iperf3 receiver')
          assert.is_nil(res.streams[1].receiver[k], k)
        end
        assert.is_number(x.jitter_ms)
      end
    end
  end)
end)
