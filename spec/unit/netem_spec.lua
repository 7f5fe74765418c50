-- qoslab.netem without a kernel: spec checking, canonical form, tc-netem(8)
-- parse/format round trips and wire values (percent scaling, time units,
-- 64-bit rates, libnl's traps).
-- Every bad spec raises before netlink is touched, so these need no root.
local netem = require 'qoslab.netem'
local core = require 'qoslab.core'

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, 'expected an error matching ' .. pattern)
  assert.is_truthy(tostring(err):find(pattern, 1, true),
    'error "' .. tostring(err) .. '" does not contain "' .. pattern .. '"')
end

-- apply() raises on a bad spec before it looks at any device.
local function bad(spec, pattern)
  raises(pattern, netem.apply, 'lo', spec)
end

describe('qoslab.netem spec checks', function()
  local pct_keys = { 'loss_pct', 'duplicate_pct', 'corrupt_pct', 'reorder_pct' }

  it('rejects unknown keys in spec, opts and nested tables', function()
    bad({ delay = 50 }, 'spec.delay: unknown key')
    bad({ loss_state = { p13_pct = 1, p99_pct = 2 } }, 'spec.loss_state.p99_pct: unknown key')
    bad({ loss_gemodel = { p_pct = 1, h_pct = 2 } }, 'spec.loss_gemodel.h_pct: unknown key')
    bad({ slot = { min_delay_ms = 1, max = 2 } }, 'spec.slot.max: unknown key')
    raises('opts.ns: unknown key', netem.apply, 'lo', { delay_ms = 1 }, { ns = 'x' })
    raises('opts.foo: unknown key', netem.get, 'lo', { foo = 1 })
    raises('opts.foo: unknown key', netem.clear, 'lo', { foo = 1 })
    raises('opts.foo: unknown key', netem.stats, 'lo', { foo = 1 })
  end)

  it('rejects a wrong type for every key, naming it', function()
    local cases = {
      delay_ms = 'x', jitter_ms = {}, delay_corr_pct = true, distribution = 5,
      loss_pct = 'x', loss_corr_pct = 'x', loss_state = 5, loss_gemodel = 'x',
      duplicate_pct = 'x', duplicate_corr_pct = 'x', reorder_pct = 'x',
      reorder_corr_pct = 'x', reorder_gap_packets = 1.5, corrupt_pct = 'x',
      corrupt_corr_pct = 'x', rate_bps = 'fast', rate_packet_overhead_bytes = 'x',
      rate_cell_bytes = 0.5, rate_cell_overhead_bytes = 'x', slot = 1, ecn = 1,
      limit_packets = 2.5, seed = 'x',
    }
    for k, v in pairs(cases) do bad({ [k] = v }, 'spec.' .. k .. ': expected') end
    bad({ loss_state = { p13_pct = 'x' } }, 'spec.loss_state.p13_pct: expected')
    bad({ loss_gemodel = { p_pct = 1, r_pct = {} } }, 'spec.loss_gemodel.r_pct: expected')
    bad({ slot = { min_delay_ms = 'x' } }, 'spec.slot.min_delay_ms: expected')
    bad({ slot = { min_delay_ms = 1, packets = 'x' } }, 'spec.slot.packets: expected')
    bad({ jitter_ms = 1, distribution = { 1, 'x' } }, 'spec.distribution[2]: expected')
    raises('spec: expected a table', netem.apply, 'lo', 'delay 5ms')
    raises('ifname: expected', netem.apply, 5, {})
    raises('ifname: expected', netem.get, 'a-name-that-is-too-long')
    raises('opts.netns: expected a string', netem.get, 'lo', { netns = 5 })
    raises('opts.quiet: expected a boolean', netem.apply, 'lo', {}, { quiet = 1 })
  end)

  it('rejects values out of range, naming the field', function()
    for _, k in ipairs(pct_keys) do
      bad({ delay_ms = 1, [k] = 100.5 }, 'spec.' .. k .. ': expected a finite number in [0, 100], got 100.5')
      bad({ delay_ms = 1, [k] = -1 }, 'spec.' .. k .. ': expected')
    end
    bad({ delay_ms = -1 }, 'spec.delay_ms: expected')
    bad({ delay_ms = 0 / 0 }, 'spec.delay_ms: expected')
    bad({ delay_ms = math.huge }, 'spec.delay_ms: expected')
    bad({ delay_ms = 10, jitter_ms = 2148 }, 'spec.jitter_ms: expected')
    bad({ limit_packets = 0 }, 'spec.limit_packets: expected an integer in [1, 4294967295]')
    bad({ limit_packets = 2 ^ 32 }, 'spec.limit_packets: expected')
    bad({ limit_packets = 'lots' }, 'spec.limit_packets: expected an integer in [1, 4294967295] or "auto"')
    bad({ rate_bps = -1 }, 'spec.rate_bps: expected')
    bad({ rate_bps = 1e9, rate_cell_bytes = -1 }, 'spec.rate_cell_bytes: expected')
    bad({ rate_bps = 1e9, rate_packet_overhead_bytes = 2 ^ 31 }, 'spec.rate_packet_overhead_bytes: expected')
    bad({ delay_ms = 1, reorder_pct = 1, reorder_gap_packets = -1 }, 'spec.reorder_gap_packets: expected')
    bad({ slot = { min_delay_ms = 1, packets = 0 } }, 'spec.slot.packets: expected')
    bad({ jitter_ms = 1, distribution = 'gaussian' }, 'spec.distribution: expected "uniform"')
    bad({ jitter_ms = 1, distribution = { 40000 } }, 'spec.distribution[1]: expected an integer in [-32768, 32767]')
    bad({ jitter_ms = 1, distribution = {} }, 'spec.distribution: expected a table of 1..16384 integers')
    raises('opts.parent: expected', netem.apply, 'lo', {}, { parent = '1' })
    raises('opts.handle: expected', netem.apply, 'lo', {}, { handle = '1:1' })
    raises('opts.direction: expected one of "egress", "ingress"', netem.apply, 'lo', {}, { direction = 'in' })
    raises('opts.ingress_src: expected nil unless', netem.apply, 'lo', {}, { ingress_src = '10.0.0.1' })
  end)

  it('enforces the cross-field rules of tc-netem(8)', function()
    bad({ reorder_pct = 10 }, 'spec.reorder_pct: reordering needs spec.delay_ms > 0')
    bad({ delay_ms = 10, reorder_gap_packets = 5 }, 'spec.reorder_gap_packets: needs spec.reorder_pct > 0')
    bad({ delay_ms = 10, reorder_pct = 5, reorder_gap_packets = 0 }, 'spec.reorder_gap_packets: expected >= 1')
    bad({ ecn = true }, 'spec.ecn: ECN marking needs a loss')
    bad({ delay_ms = 10, distribution = 'normal' }, 'spec.distribution: a delay distribution needs spec.jitter_ms > 0')
    bad({ delay_ms = 10, delay_corr_pct = 5 }, 'spec.delay_corr_pct: a delay correlation needs spec.jitter_ms > 0')
    bad({ loss_corr_pct = 5 }, 'spec.loss_corr_pct: a loss correlation needs spec.loss_pct > 0')
    bad({ duplicate_corr_pct = 5 }, 'spec.duplicate_corr_pct: needs spec.duplicate_pct > 0')
    bad({ corrupt_corr_pct = 5 }, 'spec.corrupt_corr_pct: needs spec.corrupt_pct > 0')
    bad({ loss_pct = 1, loss_state = { p13_pct = 1 } }, 'spec.loss_pct: cannot be combined with spec.loss_state')
    bad({ loss_state = { p13_pct = 1 }, loss_gemodel = { p_pct = 1 } }, 'spec.loss_gemodel: cannot be combined')
    bad({ loss_state = { p31_pct = 1 } }, 'spec.loss_state.p13_pct: required')
    bad({ loss_gemodel = { r_pct = 1 } }, 'spec.loss_gemodel.p_pct: required')
    bad({ rate_cell_bytes = 48 }, 'need spec.rate_bps > 0')
    bad({ rate_bps = 1e6, rate_cell_overhead_bytes = 4 }, 'spec.rate_cell_overhead_bytes: needs spec.rate_cell_bytes > 0')
    bad({ slot = { min_delay_ms = 2, max_delay_ms = 1 } }, 'spec.slot.min_delay_ms: greater than spec.slot.max_delay_ms')
    bad({ slot = { delay_ms = 2 } }, 'spec.slot.delay_ms: needs spec.slot.distribution')
    bad({ slot = { min_delay_ms = 1, distribution = 'normal', delay_ms = 2 } }, 'spec.slot: use either')
    bad({ slot = { packets = 5 } }, 'spec.slot: needs min_delay_ms')
  end)
end)

describe('qoslab.netem canonical spec and wire values', function()
  it('encodes percentages as iproute2 does (rint(p * UINT32_MAX))', function()
    local want = {
      [0.001] = 42950, [0.1] = 4294967, [0.5] = 21474836, [1] = 42949673,
      [12.5] = 536870912, [50] = 2147483648, [75] = 3221225471, [100] = 4294967295,
    }
    for p, raw in pairs(want) do
      local w = core.netem_raw { delay_ms = 10, loss_pct = p, duplicate_pct = p, corrupt_pct = p, reorder_pct = p }
      assert.equal(raw, w.loss)
      assert.equal(raw, w.duplicate)
      assert.equal(raw, w.corrupt)
      assert.equal(raw, w.reorder)
      -- and back: the percentage given, not a neighbour
      local s = core.netem_normalize { delay_ms = 10, loss_pct = p, duplicate_pct = p, corrupt_pct = p, reorder_pct = p }
      assert.equal(p, s.loss_pct)
      assert.equal(p, s.duplicate_pct)
      assert.equal(p, s.corrupt_pct)
      assert.equal(p, s.reorder_pct)
    end
    -- 0 % clears: the key disappears from the canonical spec
    local s = core.netem_normalize { loss_pct = 0, duplicate_pct = 0 }
    assert.is_nil(s.loss_pct)
    assert.is_nil(s.duplicate_pct)
    assert.equal(0, core.netem_raw({ loss_pct = 0 }).loss)
  end)

  it('keeps delay units exact (ns, and psched ticks = ns >> 6)', function()
    for _, ms in ipairs { 50, 1.5, 0.25, 0.001, 5000 } do
      local w = core.netem_raw { delay_ms = ms, jitter_ms = ms < 2000 and ms or nil }
      assert.equal(math.floor(ms * 1e6 + 0.5), w.delay_ns)
      assert.equal(w.delay_ns >> 6, w.latency_ticks)
      assert.equal(ms, core.netem_normalize({ delay_ms = ms }).delay_ms)
    end
  end)

  it('converts bits/s to bytes/s and back (RATE64 above 2^32 bytes/s)', function()
    for _, bps in ipairs { 2e9, 34359738000, 40e9, 1e12 } do
      local w = core.netem_raw { rate_bps = bps }
      assert.equal(math.tointeger(bps // 8), w.rate_bytes_per_s)
      assert.equal(math.tointeger(bps), core.netem_normalize({ rate_bps = bps }).rate_bps)
    end
    -- like tc, a rate that is not a whole number of bytes is truncated
    assert.equal(8, core.netem_normalize({ rate_bps = 15 }).rate_bps)
  end)

  it('complements gemodel 1-h on the wire and fills tc defaults', function()
    local w = core.netem_raw { loss_gemodel = { p_pct = 1, one_minus_h_pct = 70, one_minus_k_pct = 0.1 } }
    assert.equal(4294967295 - 3006477106, w.ge_h)
    assert.equal(4294967, w.ge_k1)
    local s = core.netem_normalize { loss_gemodel = { p_pct = 1 } }
    assert.same({ p_pct = 1, r_pct = 100, one_minus_h_pct = 100, one_minus_k_pct = 0 }, s.loss_gemodel)
    s = core.netem_normalize { loss_state = { p13_pct = 1 } }
    assert.same({ p13_pct = 1, p31_pct = 99, p32_pct = 0, p23_pct = 100, p14_pct = 0 }, s.loss_state)
  end)

  it('canonical spec: defaults dropped, limit always present, reorder gap 1', function()
    assert.same({ limit_packets = 1000 }, core.netem_normalize {})
    assert.same({ delay_ms = 10, reorder_pct = 5, reorder_gap_packets = 1, limit_packets = 1000 },
      core.netem_normalize { delay_ms = 10, reorder_pct = 5 })
    assert.same({ slot = { min_delay_ms = 1, max_delay_ms = 1 }, limit_packets = 1000 },
      core.netem_normalize { slot = { min_delay_ms = 1 } })
    local tbl = { -8192, 0, 8192 }
    local s = core.netem_normalize { delay_ms = 5, jitter_ms = 1, distribution = tbl }
    assert.same(tbl, s.distribution)
    assert.are_not.equal(tbl, s.distribution)  -- a copy
    assert.equal(3, core.netem_raw({ delay_ms = 5, jitter_ms = 1, distribution = tbl }).dist_len)
  end)

  it('loads iproute2 distribution tables by name', function()
    local f = io.open('/usr/lib/x86_64-linux-gnu/tc/normal.dist')
    if not f then pending('iproute2 normal.dist not installed') return end
    f:close()
    assert.is_true(core.netem_raw({ delay_ms = 5, jitter_ms = 1, distribution = 'normal' }).dist_len >= 4096)
    assert.equal(0, core.netem_raw({ delay_ms = 5, jitter_ms = 1, distribution = 'uniform' }).dist_len)
  end)
end)

describe('qoslab.netem tc-netem(8) syntax', function()
  local texts = {
    'limit 1000 delay 50ms 5ms 25% loss 3%',
    'limit 50000 delay 100ms 10ms distribution normal loss state 1% 10% 5% 20% 0.5% ' ..
      'duplicate 1% 2% reorder 25% 50% gap 5 corrupt 0.1% rate 1gbit -4 48 5 ecn slot 1ms 2ms ' ..
      'packets 10 bytes 3000 seed 42',
    'limit 1000 loss gemodel 1% 10% 70% 0.1% ecn',
    'limit 1000 delay 1500us',
    'limit 1000 delay 250us rate 40gbit',
    'limit 1000 delay 1s rate 1000gbit',
    'limit 1000 slot distribution pareto 10ms 2ms packets 3',
    'limit 1000 delay 10ms reorder 25% gap 1',
    'limit 7 loss 0.001% 12.5% duplicate 100%',
    'limit 1000 rate 10mbit 20',
  }

  it('format(parse(text)) == text for canonical texts, and parse(format(spec)) == spec', function()
    for _, t in ipairs(texts) do
      local spec = netem.parse(t)
      assert.equal(t, netem.format(spec))
      assert.same(spec, netem.parse(netem.format(spec)))
    end
  end)

  it('parses the tc-netem(8) examples into unit-named keys', function()
    assert.same({ delay_ms = 50, jitter_ms = 5, delay_corr_pct = 25, loss_pct = 3, limit_packets = 1000 },
      netem.parse('delay 50ms 5ms 25% loss 3%'))
    assert.same({ delay_ms = 100, jitter_ms = 20, distribution = 'normal', limit_packets = 1000 },
      netem.parse('netem delay 100ms 20ms distribution normal'))
    assert.same({ loss_pct = 0.3, loss_corr_pct = 25, limit_packets = 1000 },
      netem.parse('loss random 0.3 25'))
    assert.same({ rate_bps = 1000000, limit_packets = 1000 }, netem.parse('rate 125kbps'))
    assert.same({ rate_bps = 1048576, limit_packets = 1000 }, netem.parse('rate 1mibit'))
    assert.same({ delay_ms = 0.25, limit_packets = 1000 }, netem.parse('latency 250usec'))
    assert.same({ corrupt_pct = 3, limit_packets = 1000 }, netem.parse('corrupt 3% reorder 0%'))
  end)

  it('formats corrupt 3 % with reorder 0 as corrupt alone', function()
    local s = netem.format { corrupt_pct = 3, reorder_pct = 0 }
    assert.equal('limit 1000 corrupt 3%', s)
  end)

  it('rejects bad syntax naming the option', function()
    raises('qoslab.netem.parse: delay: expected a time with a unit', netem.parse, 'delay 50000')
    raises('loss: expected a percentage', netem.parse, 'loss 150%')
    raises('option: expected a tc-netem(8) keyword', netem.parse, 'jitter 5ms')
    raises('rate: expected a rate', netem.parse, 'rate fast')
    raises('spec.reorder_pct: reordering needs', netem.parse, 'reorder 5%')
    raises('limit: expected an integer >= 1', netem.parse, 'limit')
    raises('loss: expected one loss', netem.parse, 'loss 1% loss 2%')
    raises('text: expected a string', netem.parse, 5)
    raises('spec.distribution: a custom table has no tc-netem(8) syntax', netem.format,
      { delay_ms = 5, jitter_ms = 1, distribution = { 1, 2 } })
  end)
end)

describe('qoslab netem (command line)', function()
  it('rejects bad tc syntax with exit status 2 (bad input) and the reason', function()
    local p = assert(io.popen('bin/qoslab netem set lo delay 5 2>&1; echo "rc=$?"'))
    local out = p:read('a')
    p:close()
    assert.matches('qoslab.netem.parse: delay: expected a time with a unit', out, 1, true)
    assert.matches('rc=2', out, 1, true)
  end)
end)
