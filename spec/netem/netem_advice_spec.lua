-- What netem does that its fields do not say, against a real sch_netem (in
-- the guest), on a testbed's veth pair with UDP datagrams numbered and
-- timestamped by spec/support/udp_order.py (one process, both namespaces,
-- kernel receive timestamps, pinned to one vCPU so veth itself cannot
-- reorder):
-- * jitter without a rate reorders: 50 ± 10 ms at 1 ms spacing puts well
--   over 30 % of datagrams out of order; with keep_order none (exactly 0),
--   every delay at least the configured 40 ms and the mean (at least) and
--   median (within 1 ms) where E_n = max(d_n, E_(n-1) - gap_n) puts them
--   for the gaps actually sent;
-- * correlated random loss: apply warns with CORRELATED_LOSS (and `qoslab
--   netem set` on stderr), applies the spec as given, and loses what the advice says the kernel will (about
--   0.19 % for 5 % with 25 %), far below the 5 % asked; the suggested
--   Gilbert-Elliott model loses 5 % within a binomial bound (widened for
--   the chain's correlation) in bursts of the suggested mean length.
local netem = require 'qoslab.netem'
local testbed = require('qoslab.testbed').testbed
local cjson = require 'cjson'

local HELPER = 'spec/support/udp_order.py'
local PORT = 5301

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  local ok = p:close()
  return out, ok
end

local function must(cmd)
  local out, ok = sh(cmd)
  assert(ok, cmd .. ': ' .. out)
  return out
end

-- count datagrams spacing_us apart from the client to the server.
local function send(tb, count, spacing_us)
  local p = assert(io.popen(string.format('taskset -c 0 python3 %s %s %s %s %d %d %d', HELPER,
    tb.client_netns, tb.server_netns, tb.server_addr, PORT, count, spacing_us)))
  local out = p:read('a')
  assert(p:close(), 'udp_order.py failed: ' .. out)
  return cjson.decode(out)
end

-- Datagrams that arrived after one with a higher number (RFC 4737's
-- reordered), and the delays in ms.
local function order_and_delays(r)
  local late, top, delays = 0, -1, {}
  for i, d in ipairs(r.recv) do
    if d[1] < top then late = late + 1 else top = d[1] end
    delays[i] = d[2] / 1e6
  end
  return late, delays
end

-- Mean, minimum and median.
local function stats(xs)
  local sum, min = 0, math.huge
  for _, x in ipairs(xs) do sum, min = sum + x, math.min(min, x) end
  local sorted = table.move(xs, 1, #xs, 1, {})
  table.sort(sorted)
  return sum / #xs, min, sorted[(#sorted + 1) // 2]
end

-- Both ends know each other's MAC for good: no ARP behind the delay or loss.
local function permanent_neighbours(tb)
  local function mac(ns, dev)
    return must(string.format('ip netns exec %s cat /sys/class/net/%s/address', ns, dev)):match('%S+')
  end
  must(string.format('ip -n %s neigh replace %s lladdr %s dev %s nud permanent', tb.client_netns,
    tb.server_addr, mac(tb.server_netns, tb.server_ifname), tb.client_ifname))
  must(string.format('ip -n %s neigh replace %s lladdr %s dev %s nud permanent', tb.server_netns,
    tb.client_addr, mac(tb.client_netns, tb.client_ifname), tb.server_ifname))
end

describe('netem advice and keep_order (guest)', function()
  local tb
  setup(function()
    tb = assert(testbed {})
    permanent_neighbours(tb)
  end)
  teardown(function() if tb then tb:close() end end)

  local function apply(spec)
    return assert(netem.apply(tb.client_ifname, spec, { netns = tb.client_netns, quiet = true }))
  end

  local guest_ms
  it('jitter without a rate reorders datagrams 1 ms apart (50 ± 10 ms)', function()
    apply { delay_ms = 50, jitter_ms = 10 }
    local r = send(tb, 3000, 1000)
    local late, delays = order_and_delays(r)
    local mean, min, median = stats(delays)
    print(string.format('\n  jitter alone: %d of %d received, %d out of order (%.1f %%), delay min %.3f ' ..
      'mean %.3f median %.3f ms', #r.recv, r.sent, late, 100 * late / #r.recv, min, mean, median))
    assert.equal(r.sent, #r.recv)
    assert.is_true(late > 0.3 * #r.recv, late .. ' out of order')
    assert.is_true(min >= 40, 'a delay below 40 ms: ' .. min)
    -- the guest's own latency on top of netem's (timers, softirq), measured
    -- here beside the ordered run: the delays' median is 50 ms without it.
    -- The median, since a stalled guest (the host is shared) holds back a
    -- block of packets and drags the mean up by milliseconds.
    guest_ms = median - 50
  end)

  it('keep_order: none out of order, delays >= 40 ms, the mean as the rate path predicts', function()
    local res = apply { delay_ms = 50, jitter_ms = 10, keep_order = true }
    -- veth reports 10 Gbit/s: that rate, read back from the kernel too
    assert.same({ rate_bps = 10000000000, source = 'link speed' }, res.keep_order)
    assert.equal(10000000000, res.spec.rate_bps)
    assert.is_nil(res.spec.keep_order)
    assert.same(res.spec, netem.get(tb.client_ifname, { netns = tb.client_netns }))
    local r = send(tb, 3000, 1000)
    local late, delays = order_and_delays(r)
    local mean, min, median = stats(delays)
    -- E_n = max(d_n, E_(n-1) - gap_n), d_n uniform on [40, 60] ms (the
    -- transmit time at 10 Gbit/s, 0.07 us, left out), over 50 runs of the
    -- gaps actually sent: its mean, and its median from 0.01 ms bins
    local gaps = {}
    for i = 2, #r.send_ns do gaps[i] = (r.send_ns[i] - r.send_ns[i - 1]) / 1e6 end
    local rng = math.random
    math.randomseed(12)
    local sum, n, bins = 0, 0, {}
    for _ = 1, 50 do
      local e = 40 + 20 * rng()
      for i = 2, #r.send_ns do
        e = math.max(40 + 20 * rng(), e - gaps[i])
        sum, n = sum + e, n + 1
        local b = math.floor(e * 100)
        bins[b] = (bins[b] or 0) + 1
      end
    end
    local theory, theory_median, seen = sum / n, nil, 0
    for b = 4000, 6000 do
      seen = seen + (bins[b] or 0)
      if seen >= n / 2 then theory_median = (b + 0.5) / 100; break end
    end
    print(string.format('  keep_order: %d of %d received, %d out of order, delay min %.3f mean %.3f ' ..
      'median %.3f ms (theory: mean %.3f, median %.3f, + the guest\'s %.3f ms measured without order)',
      #r.recv, r.sent, late, min, mean, median, theory, theory_median, guest_ms or 0))
    assert.equal(r.sent, #r.recv)
    assert.equal(0, late)
    assert.is_true(min >= 40, 'a delay below 40 ms: ' .. min)
    assert.is_truthy(guest_ms, 'the unordered run measures the guest\'s own latency')
    -- ordering moves the delays up (noise only adds to them) ...
    assert.is_true(theory > 54, 'the prediction shifts the mean up: ' .. theory)
    assert.is_true(mean >= theory - 0.5, string.format('mean %.3f ms below theory %.3f', mean, theory))
    -- ... by what the rate path predicts (the median: a guest stall drags a
    -- mean up by milliseconds, see above)
    assert.is_true(math.abs(median - (theory_median + guest_ms)) < 1.0,
      string.format('median %.3f ms, theory %.3f + %.3f', median, theory_median, guest_ms))
  end)

  -- Datagrams that never arrived, and the mean length of their runs.
  local function losses(r)
    local got = {}
    for _, d in ipairs(r.recv) do got[d[1]] = true end
    local lost, bursts, prev = 0, 0, false
    for i = 0, r.sent - 1 do
      local l = not got[i]
      if l then lost = lost + 1 end
      if l and not prev then bursts = bursts + 1 end
      prev = l
    end
    return lost, bursts
  end

  local advice
  it('correlated random loss: apply warns with CORRELATED_LOSS and the kernel loses what it says', function()
    local res = apply { loss_pct = 5, loss_corr_pct = 25 }
    assert.equal(1, #res.advice)
    advice = res.advice[1]
    assert.equal('CORRELATED_LOSS', advice.code)
    assert.equal('spec.loss_corr_pct', advice.field)
    assert.equal(advice.message, res.warnings[1])
    assert.same({ loss_pct = 5, loss_corr_pct = 25, limit_packets = 1000 }, res.spec)  -- applied as given
    local r = send(tb, 10000, 0)
    local lost = losses(r)
    local p = advice.kernel_loss_pct / 100
    local sd = math.sqrt(r.sent * p * (1 - p))
    print(string.format('  loss 5%% 25%%: %d of %d lost (%.3f %%), the advice said %.3f %%', lost, r.sent,
      100 * lost / r.sent, advice.kernel_loss_pct))
    assert.is_true(lost < 0.05 * r.sent / 4, 'lost ' .. lost)
    assert.is_true(math.abs(lost - r.sent * p) <= 5 * sd + 3, 'lost ' .. lost)
  end)

  it('qoslab netem set prints the warning on stderr and sets the netem all the same', function()
    local out = must(string.format('lua5.4 bin/qoslab netem set %s --netns %s loss 5%% 25%% 2>&1; echo "exit $?"',
      tb.client_ifname, tb.client_netns))
    assert.matches('exit 0\n$', out)
    assert.matches('warning: spec.loss_pct = 5 with spec.loss_corr_pct = 25 gives about 0.19 % loss', out, 1, true)
    assert.matches('netem limit 1000 loss 5% 25%', out, 1, true)
  end)

  it('the suggested Gilbert-Elliott model loses the asked 5 % in bursts of the suggested length', function()
    assert.is_truthy(advice, 'the previous case gives the advice')
    local res = assert(netem.update(tb.client_ifname, advice.changes, { netns = tb.client_netns, quiet = true }))
    assert.same({}, res.advice)
    assert.is_nil(res.spec.loss_pct)
    local r = send(tb, 10000, 0)
    local lost, bursts = losses(r)
    local ge = res.spec.loss_gemodel
    local lambda = 1 - (ge.p_pct + ge.r_pct) / 100  -- the chain's lag-1 correlation
    local sd = math.sqrt(r.sent * 0.05 * 0.95 * (1 + lambda) / (1 - lambda))
    print(string.format('  gemodel %g %g 100 0: %d of %d lost (%.3f %%) in %d bursts (mean %.3f, suggested %.3f)',
      ge.p_pct, ge.r_pct, lost, r.sent, 100 * lost / r.sent, bursts, lost / bursts, advice.mean_burst_packets))
    assert.is_true(math.abs(lost - 0.05 * r.sent) <= 5 * sd, 'lost ' .. lost)
    assert.is_true(math.abs(lost / bursts - advice.mean_burst_packets) < 0.25, 'mean burst ' .. lost / bursts)
  end)
end)
