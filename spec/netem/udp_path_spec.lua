-- The UDP books' path statistics against what netem configures, on two
-- namespaces joined by a veth pair (runs in the guest: make check-netem).
--
-- Mean |D|: netem `delay 50ms 10ms` without a distribution table draws
-- each datagram's delay uniformly from [40, 60) ms, independently
-- (sch_netem's tabledist: (rnd mod 2 sigma) + mu - sigma). For X, Y
-- independent uniform of width w = 20 ms, E|X - Y| = w / 3 = 6.667 ms and
-- Var|X - Y| = w^2 / 6 - w^2 / 9 = w^2 / 18. Consecutive pairs share a
-- datagram: Cov(|X1 - X2|, |X2 - X3|) = E[(E|X - x|)^2] - (w / 3)^2 =
-- 7 w^2 / 60 - w^2 / 9 = w^2 / 180, so the mean of m pairs has variance
-- (w^2 / 18 + 2 w^2 / 180) / m = w^2 / (15 m). The bound is 4 of those
-- standard deviations; above it also the guest's own |D| (measured beside
-- it without jitter: |Z + e| <= |Z| + |e|; below, independent zero-mean
-- noise can only raise E|Z + e|, so none is allowed there).
--
-- Loss: netem `loss 5%` drops each datagram independently with p = 0.05,
-- so loss bursts are geometric with mean 1 / (1 - p) = 1.0526 (s.d. of
-- one: sqrt(p) / (1 - p)) and gaps with mean 1 / p = 20 (s.d. of one:
-- sqrt(1 - p) / p); each mean within 4 s.d. of its count's mean. The
-- receiving socket holds the whole test and the neighbours are permanent,
-- so netem is the only loss (checked: no RcvbufErrors).
-- Everything the spec makes goes away after each case, also on failure.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('UDP path statistics under netem', function()
    pending('core.traffic_client is not in this build')
  end)
  return
end

local PORT = 5241

local function netem(ns, ifname, args)
  H.must(string.format('tc -n %s qdisc replace dev %s root netem %s', ns, ifname, args))
end

local function rcvbuf_errors(ns)
  local out = H.must('ip netns exec ' .. ns .. ' cat /proc/net/snmp')
  local names, values
  for line in out:gmatch('[^\n]+') do
    if line:match('^Udp: %a') then names = line
    elseif line:match('^Udp: %d') then values = line end
  end
  local cols, idx = {}, nil
  for w in names:gmatch('%S+') do cols[#cols + 1] = w; if w == 'RcvbufErrors' then idx = #cols end end
  local i = 0
  for w in values:gmatch('%S+') do
    i = i + 1
    if i == idx then return tonumber(w) end
  end
  error('no RcvbufErrors in /proc/net/snmp')
end

local function permanent_neighbours(pair)
  local function mac(ns, dev)
    return H.must(string.format('ip netns exec %s cat /sys/class/net/%s/address', ns, dev))
      :match('%S+')
  end
  H.must(string.format('ip -n %s neigh replace %s lladdr %s dev %s nud permanent', pair.a,
    pair.b_addr, mac(pair.b, pair.vb), pair.va))
  H.must(string.format('ip -n %s neigh replace %s lladdr %s dev %s nud permanent', pair.b,
    pair.a_addr, mac(pair.a, pair.va), pair.vb))
end

-- f(pair) with a qoslab server in B and every thread on the first vCPU
-- (the guest's cross-vCPU wakeups are its largest timing noise); all of
-- it undone afterwards, also on failure.
local function with_bed(f)
  local pair = H.netns_pair { offloads_off = true }
  local srv
  local mask = H.must('taskset -p ' .. H.pid):match('mask:%s*(%x+)')
  local saved = { H.sysctl('net.core.rmem_max'), H.sysctl('net.core.wmem_max') }
  local ok, err = pcall(function()
    H.must('sysctl -qw net.core.rmem_max=67108864 net.core.wmem_max=67108864')
    H.must('taskset -a -p 1 ' .. H.pid)
    local e, code
    srv, e, code = traffic.server { port = PORT, netns = pair.b }
    assert(srv, tostring(e) .. ' ' .. tostring(code))
    permanent_neighbours(pair)
    f(pair)
  end)
  if srv then srv:stop() end
  pair.close()
  H.sh('taskset -a -p ' .. mask .. ' ' .. H.pid)
  H.sh(string.format('sysctl -qw net.core.rmem_max=%s net.core.wmem_max=%s', saved[1], saved[2]))
  if not ok then error(err, 0) end
end

local function run(pair, o, label)
  o.host, o.port, o.netns = pair.b_addr, PORT, pair.a
  o.proto, o.length_bytes, o.bitrate_bps = 'udp', 1000, 8e6   -- 1000 datagrams/s
  o.window_bytes, o.interval_s = 4194304, 1
  local res, msg, code = traffic.run(o)
  assert(res, string.format('%s: %s (%s)', label, tostring(msg), tostring(code)))
  H.identities(res, label)
  local r = res.received
  print(string.format('  %-10s sent %d, lost %d, ooo %d, pairs %d, J %.3f ms, mean |D| %s ms, '
    .. 'bursts %d (mean %s), gaps %d (mean %s), extent max %d', label, res.sent.packets,
    r.lost_packets, r.out_of_order_packets, r.jitter_pairs, r.jitter_ms,
    tostring(r.jitter_mean_abs_ms), r.loss_runs.bursts, tostring(r.loss_runs.mean_burst_packets),
    r.loss_runs.gaps, tostring(r.loss_runs.mean_gap_packets), r.reorder_extent.max_packets))
  return res
end

local describe_netem = H.netem_available() and describe or function(name)
  describe(name, function() pending('this kernel has no sch_netem (run in the guest)') end)
end

describe_netem('UDP path statistics under netem', function()
  teardown(function() H.cleanup_tmp() end)

  it('delay 50ms 10ms: mean |D| is 20/3 ms whatever the reordering', function()
    with_bed(function(pair)
      netem(pair.a, pair.va, 'delay 50ms')
      local base = run(pair, { duration_s = 1.5 }, 'no jitter')
      local noise = base.received.jitter_mean_abs_ms or 0
      netem(pair.a, pair.va, 'delay 50ms 10ms')
      local res = run(pair, { duration_s = 3 }, 'jitter')
      local r = res.received
      local m = r.jitter_pairs
      assert(m >= 2000, 'too few pairs: ' .. m)
      local sd = 20 / math.sqrt(15 * m)
      local lo, hi = 20 / 3 - 4 * sd, 20 / 3 + 4 * sd + noise
      local what = string.format('mean |D| %.4f ms over %d pairs, expected [%.4f, %.4f] '
        .. '(s.d. %.4f, guest noise %.4f ms)', r.jitter_mean_abs_ms, m, lo, hi, sd, noise)
      print('  ' .. what)
      assert(r.jitter_mean_abs_ms >= lo and r.jitter_mean_abs_ms <= hi, what)
      -- the jitter did reorder, and the extents say how far
      assert(r.out_of_order_packets > 0 and r.reorder_extent.max_packets >= 2, 'no reordering')
      assert.equal(r.out_of_order_packets, r.reorder_extent.packets)
    end)
  end)

  it('loss 5%: geometric bursts of mean 1/(1-p) and gaps of mean 1/p', function()
    with_bed(function(pair)
      netem(pair.a, pair.va, 'loss 5% limit 10000')
      local err0 = rcvbuf_errors(pair.b)
      local res = run(pair, { duration_s = 4 }, 'loss 5%')
      assert.equal(0, rcvbuf_errors(pair.b) - err0, 'the receiving socket overflowed')
      local r, p = res.received, 0.05
      local n = res.sent.packets
      local runs = r.loss_runs
      assert.equal(r.lost_packets, runs.burst_packets)
      -- loss itself: binomial, 4 s.d.
      local loss_sd = math.sqrt(p * (1 - p) / n)
      local loss = r.lost_packets / n
      assert(math.abs(loss - p) <= 4 * loss_sd,
        string.format('loss %.4f of %d, expected %.2f +- %.4f', loss, n, p, 4 * loss_sd))
      assert(runs.bursts >= 100, 'too few bursts: ' .. runs.bursts)
      local b_sd = math.sqrt(p) / (1 - p) / math.sqrt(runs.bursts)
      local what = string.format('mean burst %.4f over %d, expected %.4f +- %.4f',
        runs.mean_burst_packets, runs.bursts, 1 / (1 - p), 4 * b_sd)
      print('  ' .. what)
      assert(math.abs(runs.mean_burst_packets - 1 / (1 - p)) <= 4 * b_sd, what)
      local g_sd = math.sqrt(1 - p) / p / math.sqrt(runs.gaps)
      what = string.format('mean gap %.3f over %d, expected %.1f +- %.3f', runs.mean_gap_packets,
        runs.gaps, 1 / p, 4 * g_sd)
      print('  ' .. what)
      assert(math.abs(runs.mean_gap_packets - 1 / p) <= 4 * g_sd, what)
      assert.equal(runs.bursts - 1, runs.gaps)
    end)
  end)
end)
