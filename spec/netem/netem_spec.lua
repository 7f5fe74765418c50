-- qoslab.netem against a real sch_netem (runs inside the VM guest):
-- every option applied and read back exactly, `tc -j qdisc show` agreeing,
-- percent, time and 64-bit rate encodings, ingress through ifb, libnl's
-- traps, the queue limit against rate x delay, measured delay, drops in stats, scope.
-- Two namespaces joined by a veth pair are created per run and removed in
-- teardown (and the namespaces take every qdisc and ifb with them).
local netem = require 'qoslab.netem'
local cjson = require 'cjson'

local PID
do
  local f = assert(io.open('/proc/self/stat'))
  PID = f:read('l'):match('^(%d+)')
  f:close()
end
local A, B = 'qlnA' .. PID, 'qlnB' .. PID
local IP_A, IP_B, IP_B2 = '10.77.0.1', '10.77.0.2', '10.77.0.3'

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

-- The netem qdisc as tc sees it (JSON), on dev in ns, at parent (nil = root).
local function tc_netem(ns, dev, parent)
  local out = must('tc -n ' .. ns .. ' -j qdisc show dev ' .. dev)
  for _, q in ipairs(cjson.decode(out)) do
    if q.kind == 'netem' and ((parent == nil and q.root) or q.parent == parent) then return q end
  end
  return nil
end

local function near(a, b, tol, what)
  assert(math.abs(a - b) <= tol, string.format('%s: tc says %.12g, spec %.12g', what, a, b))
end

-- Compare a canonical spec with tc's JSON view of the qdisc.
local function tc_agrees(spec, q)
  assert(q, 'tc shows no netem')
  local o = q.options
  local function frac(v) return (v or 0) / 100 end
  local function ftol(v) return math.max(1e-9, math.abs(v) * 1e-5) end
  assert.equal(spec.limit_packets, o.limit)
  local d = o.delay or {}
  -- tc prints the psched-tick value truncated to whole microseconds
  near(d.delay or 0, (spec.delay_ms or 0) / 1e3, 1.001e-6, 'delay')
  near(d.jitter or 0, (spec.jitter_ms or 0) / 1e3, 1.001e-6, 'jitter')
  near(d.correlation or 0, frac(spec.delay_corr_pct), ftol(frac(spec.delay_corr_pct)), 'delay correlation')
  local lr = o['loss-random'] or {}
  near(lr.loss or 0, frac(spec.loss_pct), ftol(frac(spec.loss_pct)), 'loss')
  near(lr.correlation or 0, frac(spec.loss_corr_pct), ftol(frac(spec.loss_corr_pct)), 'loss correlation')
  if spec.loss_state then
    local ls = assert(o['loss-state'], 'tc shows no loss-state')
    for _, k in ipairs { 'p13', 'p31', 'p32', 'p23', 'p14' } do
      local v = frac(spec.loss_state[k .. '_pct'])
      near(ls[k], v, ftol(v), 'loss state ' .. k)
    end
  else
    assert.is_nil(o['loss-state'])
  end
  if spec.loss_gemodel then
    local g, s = assert(o['loss-gemodel'], 'tc shows no loss-gemodel'), spec.loss_gemodel
    near(g.p, frac(s.p_pct), ftol(frac(s.p_pct)), 'gemodel p')
    near(g.r, frac(s.r_pct), ftol(frac(s.r_pct)), 'gemodel r')
    near(g['1-h'], frac(s.one_minus_h_pct), ftol(frac(s.one_minus_h_pct)), 'gemodel 1-h')
    near(g['1-k'], frac(s.one_minus_k_pct), ftol(frac(s.one_minus_k_pct)), 'gemodel 1-k')
  else
    assert.is_nil(o['loss-gemodel'])
  end
  for _, k in ipairs { 'duplicate', 'reorder', 'corrupt' } do
    local t = o[k] or {}
    near(t[k] or 0, frac(spec[k .. '_pct']), ftol(frac(spec[k .. '_pct'])), k)
    near(t.correlation or 0, frac(spec[k .. '_corr_pct']), ftol(frac(spec[k .. '_corr_pct'])), k .. ' correlation')
  end
  assert.equal(spec.reorder_gap_packets or 0, o.gap or 0)
  local r = o.rate or {}
  assert.equal((spec.rate_bps or 0) // 8, r.rate or 0)
  assert.equal(spec.rate_packet_overhead_bytes or 0, r.packetoverhead or 0)
  assert.equal(spec.rate_cell_bytes or 0, r.cellsize or 0)
  assert.equal(spec.rate_cell_overhead_bytes or 0, r.celloverhead or 0)
  if spec.slot then
    local s = assert(o.slot, 'tc shows no slot')
    if spec.slot.min_delay_ms then
      near(s['min-delay'], spec.slot.min_delay_ms / 1e3, 1e-6, 'slot min')
      near(s['max-delay'], spec.slot.max_delay_ms / 1e3, 1e-6, 'slot max')
    else
      near(s.distribution, (spec.slot.delay_ms or 0) / 1e3, 1e-6, 'slot delay')
      near(s.jitter, (spec.slot.jitter_ms or 0) / 1e3, 1e-6, 'slot jitter')
    end
    assert.equal(spec.slot.packets or 0, s.packets or 0)
    assert.equal(spec.slot.bytes or 0, s.bytes or 0)
  else
    assert.is_nil(o.slot)
  end
  assert.equal(spec.ecn or false, o.ecn or false)
end

-- min RTT in ms of `count` pings from ns to addr.
local function ping_min_ms(ns, addr, count)
  local out = sh(string.format('ip netns exec %s ping -n -q -c %d -i 0.05 -W 3 %s', ns, count or 10, addr))
  local min = out:match('= ([%d%.]+)/')
  return tonumber(min), out
end

local OPTS = { netns = A, quiet = true }

describe('qoslab.netem in a kernel with sch_netem #netem', function()
  setup(function()
    must('ip netns add ' .. A)
    must('ip netns add ' .. B)
    must('ip -n ' .. A .. ' link add va type veth peer name vb netns ' .. B)
    must('ip -n ' .. A .. ' addr add ' .. IP_A .. '/24 dev va')
    must('ip -n ' .. B .. ' addr add ' .. IP_B .. '/24 dev vb')
    must('ip -n ' .. B .. ' addr add ' .. IP_B2 .. '/24 dev vb')
    must('ip -n ' .. A .. ' link set va up')
    must('ip -n ' .. B .. ' link set vb up')
    must('ip -n ' .. A .. ' link set lo up')
    must('ip -n ' .. B .. ' link set lo up')
  end)

  teardown(function()
    os.execute('ip netns del ' .. A .. ' 2>/dev/null')
    os.execute('ip netns del ' .. B .. ' 2>/dev/null')
  end)

  after_each(function()
    netem.clear('va', { netns = A, direction = 'ingress' })
    netem.clear('va', { netns = A })
    os.execute('tc -n ' .. A .. ' qdisc del dev va root 2>/dev/null')
  end)

  local every = {
    { delay_ms = 50 },
    { delay_ms = 10, jitter_ms = 2, delay_corr_pct = 25 },
    { delay_ms = 10, jitter_ms = 2, distribution = 'normal' },
    { delay_ms = 10, jitter_ms = 2, distribution = 'pareto' },
    { delay_ms = 10, jitter_ms = 2, distribution = 'paretonormal' },
    { delay_ms = 10, jitter_ms = 2, distribution = { -8192, -4096, 0, 4096, 8192 } },
    { loss_pct = 3, loss_corr_pct = 10 },
    { loss_state = { p13_pct = 1, p31_pct = 2, p32_pct = 3, p23_pct = 4, p14_pct = 5 } },
    { loss_state = { p13_pct = 1 } },
    { loss_gemodel = { p_pct = 1, r_pct = 10, one_minus_h_pct = 70, one_minus_k_pct = 0.1 } },
    { duplicate_pct = 1, duplicate_corr_pct = 2 },
    { delay_ms = 10, reorder_pct = 25, reorder_corr_pct = 50, reorder_gap_packets = 5 },
    { corrupt_pct = 0.1, corrupt_corr_pct = 3 },
    { rate_bps = 10e6 },
    { rate_bps = 100e6, rate_packet_overhead_bytes = -4, rate_cell_bytes = 48, rate_cell_overhead_bytes = 5 },
    { slot = { min_delay_ms = 1, max_delay_ms = 2, packets = 3, bytes = 4000 } },
    { slot = { distribution = 'normal', delay_ms = 1, jitter_ms = 2, packets = 3 } },
    { loss_pct = 1, ecn = true },
    { limit_packets = 123456 },
    { delay_ms = 100, limit_packets = 'auto' },
  }

  it('applies every option, reads it back exactly, and tc agrees', function()
    for _, spec in ipairs(every) do
      local r = assert(netem.apply('va', spec, OPTS))
      local got = assert(netem.get('va', { netns = A }))
      assert.same(r.spec, got)
      for k, v in pairs(spec) do
        if k ~= 'limit_packets' and type(v) ~= 'table' then assert.same(v, got[k]) end
      end
      for _, w in ipairs(r.warnings) do assert.is_nil(w:match('did not take'), w) end
      tc_agrees(got, tc_netem(A, 'va'))
      -- apply(dev, get(dev)) changes nothing
      assert(netem.apply('va', got, OPTS))
      assert.same(got, netem.get('va', { netns = A }))
    end
  end)

  it('sizes limit_packets = "auto" and warns below it', function()
    -- delay 100 ms, default limit, veth = 10 Gbit/s: 1000 packets hold less than the path
    local r = assert(netem.apply('va', { delay_ms = 100 }, OPTS))
    local need = math.ceil(10e9 / 8 * 0.1 / 1514 * 1.5)
    assert.equal(1, #r.warnings)
    assert.matches('spec.limit_packets = 1000 is below the ' .. need .. ' packets', r.warnings[1], 1, true)
    r = assert(netem.apply('va', { delay_ms = 100, limit_packets = 'auto' }, OPTS))
    assert.same({}, r.warnings)
    assert.equal(need, r.spec.limit_packets)
    assert.equal(need, netem.get('va', { netns = A }).limit_packets)
    -- 250 ms with a rate and a limit that holds it
    r = assert(netem.apply('va', { delay_ms = 250, rate_bps = 1e9, limit_packets = 100000 }, OPTS))
    assert.same({}, r.warnings)
  end)

  it('replace leaves nothing of the previous spec behind (6.1 keeps rate otherwise)', function()
    assert(netem.apply('va', { delay_ms = 10, rate_bps = 1e6, ecn = true, loss_pct = 1, corrupt_pct = 1,
      reorder_pct = 5, slot = { min_delay_ms = 1 }, duplicate_pct = 1, jitter_ms = 1,
      delay_corr_pct = 5 }, OPTS))
    local r = assert(netem.apply('va', { delay_ms = 5 }, OPTS))
    assert.same({ delay_ms = 5, limit_packets = 1000 }, netem.get('va', { netns = A }))
    assert.same(r.spec, netem.get('va', { netns = A }))
    tc_agrees(r.spec, tc_netem(A, 'va'))
  end)

  it('percent scaling exact for all four fields, 0 % clears', function()
    for _, p in ipairs { 0.001, 0.1, 0.5, 1, 12.5, 50, 100 } do
      for _, k in ipairs { 'loss_pct', 'duplicate_pct', 'corrupt_pct', 'reorder_pct' } do
        local spec = { [k] = p }
        if k == 'reorder_pct' then spec.delay_ms = 10 end
        assert(netem.apply('va', spec, OPTS))
        local got = netem.get('va', { netns = A })
        assert.equal(p, got[k])
        tc_agrees(got, tc_netem(A, 'va'))
      end
    end
    assert(netem.apply('va', { loss_pct = 0, duplicate_pct = 0 }, OPTS))
    assert.same({ limit_packets = 1000 }, netem.get('va', { netns = A }))
  end)

  it('delay units: 50 ms, 1.5 ms, 250 us read back exactly', function()
    for _, ms in ipairs { 50, 1.5, 0.25 } do
      assert(netem.apply('va', { delay_ms = ms }, OPTS))
      assert.equal(ms, netem.get('va', { netns = A }).delay_ms)
      near(tc_netem(A, 'va').options.delay.delay, ms / 1e3, 1.001e-6, 'delay')
    end
  end)

  it('rates up to 1 Tbit/s read back exactly (RATE64 above 34.36 Gbit/s)', function()
    for _, bps in ipairs { 2e9, 34359738000, 40e9, 1e12 } do
      assert(netem.apply('va', { rate_bps = bps }, OPTS))
      assert.equal(math.tointeger(bps), netem.get('va', { netns = A }).rate_bps)
      assert.equal(math.tointeger(bps // 8), tc_netem(A, 'va').options.rate.rate)
    end
  end)

  it('libnl traps: 100 % and 75 % loss, limit kept by update, summary, rate', function()
    assert(netem.apply('va', { loss_pct = 100 }, OPTS))
    assert.equal(100, netem.get('va', { netns = A }).loss_pct)
    assert(netem.apply('va', { loss_pct = 75 }, OPTS))
    assert.equal(75, netem.get('va', { netns = A }).loss_pct)
    assert(netem.apply('va', { limit_packets = 50000 }, OPTS))
    assert(netem.update('va', { delay_ms = 20 }, OPTS))
    assert.same({ delay_ms = 20, limit_packets = 50000 }, netem.get('va', { netns = A }))
    assert(netem.apply('va', { corrupt_pct = 3, reorder_pct = 0 }, OPTS))
    assert.equal('limit 1000 corrupt 3%', netem.format(netem.get('va', { netns = A })))
    assert(netem.apply('va', { rate_bps = 10e6 }, OPTS))
    assert.equal(10000000, netem.get('va', { netns = A }).rate_bps)
  end)

  it('places netem under another qdisc class (opts.parent) with a chosen handle', function()
    must('tc -n ' .. A .. ' qdisc add dev va root handle 1: tbf rate 100mbit burst 32k latency 50ms')
    local o = { netns = A, parent = '1:1', handle = '20:', quiet = true }
    assert(netem.apply('va', { delay_ms = 7 }, o))
    assert.same({ delay_ms = 7, limit_packets = 1000 }, netem.get('va', { netns = A, parent = '1:1' }))
    assert.is_nil(netem.get('va', { netns = A }))  -- the root is the tbf
    local q = assert(tc_netem(A, 'va', '1:1'))
    assert.equal('20:', q.handle)
    assert.is_true(netem.clear('va', { netns = A, parent = '1:1' }))
    assert.is_nil(tc_netem(A, 'va', '1:1'))
    assert.matches('tbf', must('tc -n ' .. A .. ' qdisc show dev va'))
    -- at the root, apply replaces the tbf (atomically, as tc replace) and says so
    local r = assert(netem.apply('va', { delay_ms = 1 }, OPTS))
    assert.matches('replaced the tbf qdisc at root of va', table.concat(r.warnings, '\n'), 1, true)
    assert.is_nil(must('tc -n ' .. A .. ' qdisc show dev va'):match('tbf'))
  end)

  it('delays a real round trip by the configured delay (+-5 % or 0.2 ms)', function()
    local base = assert(ping_min_ms(A, IP_B, 10))
    assert(netem.apply('va', { delay_ms = 50 }, OPTS))
    local with, out = ping_min_ms(A, IP_B, 10)
    assert(with, out)
    local added = with - base
    assert(math.abs(added - 50) <= math.max(0.05 * 50, 0.2),
      string.format('added %.3f ms for 50 ms (base %.3f, with %.3f)', added, base, with))
  end)

  it('shows netem drops in stats (100 % loss and a tiny limit)', function()
    assert(netem.apply('va', { loss_pct = 100 }, OPTS))
    ping_min_ms(A, IP_B, 5)
    local st = assert(netem.stats('va', { netns = A }))
    assert.is_true(st.drops >= 5, 'drops ' .. st.drops)
    for _, k in ipairs { 'packets', 'bytes', 'drops', 'overlimits', 'requeues', 'backlog_bytes', 'backlog_packets' } do
      assert.equal('integer', math.type(st[k]))
    end
    assert(netem.apply('va', { delay_ms = 200, limit_packets = 2 }, OPTS))
    sh(string.format('ip netns exec %s ping -n -q -c 20 -i 0.01 -W 1 %s', A, IP_B))
    st = assert(netem.stats('va', { netns = A }))
    assert.is_true(st.drops > 0, 'drops ' .. st.drops)
    assert.is_true(st.packets > 0)
  end)

  it('impairs only ingress through an ifb, only from the given source', function()
    local base = assert(ping_min_ms(A, IP_B, 5))
    local r = assert(netem.apply('va', { delay_ms = 100 },
      { netns = A, direction = 'ingress', ingress_src = IP_B, quiet = true }))
    assert.same({ delay_ms = 100, limit_packets = r.spec.limit_packets }, r.spec)
    assert.same(r.spec, netem.get('va', { netns = A, direction = 'ingress' }))
    assert.is_nil(netem.get('va', { netns = A }))
    local rtt = assert(ping_min_ms(A, IP_B, 5))
    assert(math.abs(rtt - base - 100) <= 5, 'ingress-delayed rtt ' .. rtt)
    -- replies from another source address are not delayed
    local other = assert(ping_min_ms(A, IP_B2, 5))
    assert(other < base + 5, 'rtt from the other source ' .. other)
    local st = assert(netem.stats('va', { netns = A, direction = 'ingress' }))
    assert.is_true(st.packets >= 5)
    -- egress and ingress together: 30 + 100
    assert(netem.apply('va', { delay_ms = 30 }, OPTS))
    rtt = assert(ping_min_ms(A, IP_B, 5))
    assert(math.abs(rtt - base - 130) <= 5, 'both directions rtt ' .. rtt)
    -- removing the ingress impairment leaves no ifb, ingress qdisc or filter
    assert.is_true(netem.clear('va', { netns = A, direction = 'ingress' }))
    assert.is_nil(must('ip -n ' .. A .. ' -o link show'):match('qlifb'))
    assert.is_nil(must('tc -n ' .. A .. ' qdisc show dev va'):match('ingress'))
    assert.equal('', must('tc -n ' .. A .. ' filter show dev va ingress'))
    assert.same({ delay_ms = 30, limit_packets = 1000 }, netem.get('va', { netns = A }))
    rtt = assert(ping_min_ms(A, IP_B, 5))
    assert(math.abs(rtt - base - 30) <= 5, 'egress-only rtt ' .. rtt)
  end)

  it('scope restores the previous spec, also on error, or removes the netem', function()
    assert(netem.apply('va', { delay_ms = 10 }, OPTS))
    do
      local g <close> = assert(netem.scope('va', { loss_pct = 5 }, OPTS))
      assert.same({ loss_pct = 5, limit_packets = 1000 }, netem.get('va', { netns = A }))
    end
    assert.same({ delay_ms = 10, limit_packets = 1000 }, netem.get('va', { netns = A }))
    local ok = pcall(function()
      local g <close> = assert(netem.scope('va', { delay_ms = 99 }, OPTS))
      error('boom')
    end)
    assert.is_false(ok)
    assert.same({ delay_ms = 10, limit_packets = 1000 }, netem.get('va', { netns = A }))
    assert.is_true(netem.clear('va', { netns = A }))
    do
      local g <close> = assert(netem.scope('va', { delay_ms = 3 }, OPTS))
      assert.equal(3, netem.get('va', { netns = A }).delay_ms)
    end
    assert.is_nil(netem.get('va', { netns = A }))
    assert.is_nil(tc_netem(A, 'va'))
  end)

  it('records what it creates for qoslab cleanup and forgets it on clear', function()
    local state = require 'qoslab.state'
    local function mine()
      local f = io.open(state._file())
      if not f then return '' end
      local s = f:read('a')
      f:close()
      return s
    end
    assert(netem.apply('va', { delay_ms = 1 }, OPTS))
    assert.matches('"kind":"qdisc"', mine())
    assert(netem.apply('va', { delay_ms = 1 }, { netns = A, direction = 'ingress', quiet = true }))
    assert.matches('qlifb', mine())
    netem.clear('va', { netns = A, direction = 'ingress' })
    netem.clear('va', { netns = A })
    assert.equal('', mine())
  end)
end)
