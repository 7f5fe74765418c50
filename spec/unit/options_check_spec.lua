-- The check-only binding calls: every rule of the netem and shape options
-- lives once in C (core.netem_check, core.shape_check), and the Lua façades
-- raise its message at their caller's line. Each rule kind (unknown key,
-- wrong type, out of range, cross-field) must name the field, say what was
-- expected and point at this file's line, not at a line inside qoslab.
local core = require 'qoslab.core'
local netem = require 'qoslab.netem'
local shape = require 'qoslab.shape'

local THIS = 'options_check_spec%.lua'

-- f(...) is called from the line below `line` (not as a tail call, so that
-- line is the caller the message must name).
local function expect(fragment, f, ...)
  local args = table.pack(...)
  local line = debug.getinfo(1, 'l').currentline + 1
  local ok, err = pcall(function() local r = f(table.unpack(args, 1, args.n)); return r end)
  assert.is_false(ok, 'expected an error containing ' .. fragment)
  err = tostring(err)
  assert.matches('^[^\n]*' .. THIS .. ':' .. line .. ': ', err)
  assert.is_truthy(err:find(fragment, 1, true), err .. '\n  does not contain\n' .. fragment)
  assert.is_nil(err:find('lua/qoslab/', 1, true), err)
  return err
end

describe('netem options: one check in C, raised at the caller', function()
  it('an unknown key, in spec, nested tables and opts', function()
    expect('qoslab.netem.apply: spec.delay: unknown key', netem.apply, 'lo', { delay = 5 })
    expect('qoslab.netem.check: spec.slot.max: unknown key', netem.check, { slot = { max = 1 } })
    expect('qoslab.netem.get: opts.ns: unknown key', netem.get, 'lo', { ns = 'x' })
    expect('qoslab.netem.scope: opts.ns: unknown key', netem.scope, 'lo', {}, { ns = 'x' })
  end)

  it('a wrong type names the field and the type expected', function()
    expect('qoslab.netem.apply: spec.delay_ms: expected a finite number in [0, 1000000000], got string "x"',
      netem.apply, 'lo', { delay_ms = 'x' })
    expect('qoslab.netem.apply: ifname: expected a device name of 1..15 characters (no NUL), got 5',
      netem.apply, 5, {})
    expect('qoslab.netem.clear: opts.quiet: expected a boolean, got 1', netem.clear, 'lo', { quiet = 1 })
    expect('qoslab.netem.update: changes: expected a table, got 5', netem.update, 'lo', 5)
    expect('qoslab.netem.needed_limit: spec: expected a table, got nil', netem.needed_limit, 'lo')
  end)

  it('out of range, NaN included, and limit_packets = "auto"', function()
    expect('qoslab.netem.apply: spec.loss_pct: expected a finite number in [0, 100], got 101',
      netem.apply, 'lo', { loss_pct = 101 })
    expect('qoslab.netem.check: spec.jitter_ms: expected a finite number in [0, 2147.483647], got nan',
      netem.check, { jitter_ms = 0 / 0 })
    expect('qoslab.netem.apply: spec.limit_packets: expected an integer in [1, 4294967295] or "auto", '
      .. 'got string "lots"',
      netem.apply, 'lo', { limit_packets = 'lots' })
    expect('qoslab.netem.format: spec.limit_packets: "auto" must be resolved', netem.format,
      { limit_packets = 'auto' })
    assert.equal('auto', netem.check({ limit_packets = 'auto' }).limit_packets)
    expect('qoslab.netem.stats: opts.parent: expected "root" or "MAJ:MIN" (hex, as tc), got string " 1:1"',
      netem.stats, 'lo', { parent = ' 1:1' })
    expect('qoslab.netem.apply: opts.handle: expected "MAJ:" (hex, as tc), got string "1:1"',
      netem.apply, 'lo', {}, { handle = '1:1' })
  end)

  it('cross-field rules, of the spec and of opts', function()
    expect('qoslab.netem.apply: spec.reorder_pct: reordering needs spec.delay_ms > 0',
      netem.apply, 'lo', { reorder_pct = 5 })
    expect('qoslab.netem.check: spec.ecn: ECN marking needs a loss', netem.check, { ecn = true })
    expect('qoslab.netem.apply: opts.parent: expected "root" with direction = "ingress" '
      .. '(netem sits on the ifb root), got string "1:1"',
      netem.apply, 'lo', {}, { direction = 'ingress', parent = '1:1' })
    expect('qoslab.netem.get: opts.ingress_src: expected nil unless direction = "ingress", got string "10.0.0.1"',
      netem.get, 'lo', { ingress_src = '10.0.0.1' })
    expect('qoslab.netem.get: opts.handle: expected nil (only apply takes a handle), got string "1:"',
      netem.get, 'lo', { handle = '1:' })
  end)

  it('core.netem_check returns the canonical spec and opts with their defaults', function()
    local canon, o = core.netem_check('t', 'apply', 'lo', { delay_ms = 10, reorder_pct = 5 }, nil)
    assert.same({ delay_ms = 10, reorder_pct = 5, reorder_gap_packets = 1, limit_packets = 1000 }, canon)
    assert.same({ parent = 'root', direction = 'egress', quiet = false }, o)
    local c2, o2 = core.netem_check('t', 'target', 'lo', nil,
      { netns = 'n', direction = 'ingress', ingress_src = '10.0.0.0/8' })
    assert.is_false(c2)
    assert.same({ netns = 'n', parent = 'root', direction = 'ingress', ingress_src = '10.0.0.0/8',
                  quiet = false }, o2)
    -- "table" mode checks that the spec is a table, not what is in it
    local c3 = core.netem_check('t', 'table', 'lo', { delay_ms = -1 }, { handle = '1:' })
    assert.is_false(c3)
    local ok, err = pcall(core.netem_check, 't', 'spec', nil, { delay_ms = -1 })
    assert.is_false(ok)
    assert.equal('t: spec.delay_ms: expected a finite number in [0, 1000000000], got -1', err)
  end)
end)

describe('shape options: one check in C, raised at the caller', function()
  local function apply(spec, opts) return shape.apply('lo', spec, opts) end

  it('an unknown key, a wrong type, out of range', function()
    expect('qoslab.shape.apply: spec.delay_ms: unknown key', apply, { kind = 'tbf', rate_bps = 1e6, delay_ms = 1 })
    expect('qoslab.shape.apply: opts.parent: unknown key', apply, { kind = 'tbf', rate_bps = 1e6 }, { parent = '1:' })
    expect('qoslab.shape.apply: spec.kind: expected one of "tbf", "htb", got string "netem"', apply,
      { kind = 'netem', rate_bps = 1e6 })
    expect('qoslab.shape.apply: spec.rate_bps: expected an integer in [8, 8000000000000000], got 1', apply,
      { kind = 'tbf', rate_bps = 1 })
    expect('qoslab.shape.apply: spec.burst_bytes: expected an integer in [1, 4294967295], got 0', apply,
      { kind = 'tbf', rate_bps = 1e6, burst_bytes = 0 })
  end)

  it('cross-field rules', function()
    expect('qoslab.shape.apply: spec.latency_ms: give either latency_ms or limit_bytes, not both', apply,
      { kind = 'tbf', rate_bps = 1e6, latency_ms = 5, limit_bytes = 1e5 })
    expect('qoslab.shape.apply: spec.ceil_bps: only for kind "htb"', apply,
      { kind = 'tbf', rate_bps = 1e6, ceil_bps = 2e6 })
    expect('qoslab.shape.apply: spec.latency_ms: only for kind "tbf"', apply,
      { kind = 'htb', rate_bps = 1e6, latency_ms = 5 })
    expect('qoslab.shape.apply: spec.ceil_bps: expected at least spec.rate_bps', apply,
      { kind = 'htb', rate_bps = 2e6, ceil_bps = 1e6 })
  end)

  it('core.shape_check touches no device', function()
    assert.is_true(core.shape_check('no-such-dev0', { kind = 'htb', rate_bps = 1e6, ceil_bps = 2e6 }))
  end)
end)

describe('testbed options: one check in C, raised at the caller', function()
  local testbed = require 'qoslab.testbed'

  it('an unknown key, a wrong type, out of range, cross-field', function()
    expect('qoslab.testbed: opts.speed: unknown key', testbed.testbed, { speed = 1 })
    expect('qoslab.testbed: opts.ipv6: expected a boolean, got 1', testbed.testbed, { ipv6 = 1 })
    expect('qoslab.testbed: opts.mtu_bytes: expected an integer in [68, 65535], got 65536', testbed.testbed,
      { mtu_bytes = 65536 })
    expect('qoslab.testbed: opts.prefix: expected a string of 1..64 letters, digits, "-", "_" or ".", got string "a b"',
      testbed.testbed, { prefix = 'a b' })
    expect('qoslab.testbed: opts.burst_bytes: only with opts.rate_bps', testbed.testbed, { burst_bytes = 1 })
    expect('qoslab.testbed: opts.bottleneck: expected one of "host", "router", got string "ROUTER"',
      testbed.testbed, { bottleneck = 'ROUTER' })
    expect('qoslab.testbed: opts.impair.reorder_pct: reordering needs spec.delay_ms > 0', testbed.testbed,
      { impair = { reorder_pct = 1 } })
  end)

  -- {shape = 'tbf'} without rate_bps was taken silently (no shaper is made
  -- without a rate), while burst_bytes without it raised: the shaper's
  -- options are now refused alike.
  it('the shaper\'s options only with opts.rate_bps', function()
    expect('qoslab.testbed: opts.shape: only with opts.rate_bps', testbed.testbed, { shape = 'tbf' })
    expect('qoslab.testbed: opts.shape: only with opts.rate_bps', testbed.testbed, { shape = 'htb', burst_bytes = 9000 })
    expect('qoslab.testbed: opts.shape: only with opts.rate_bps', testbed.testbed,
      { shape = 'tbf', impair = { delay_ms = 10 } })
    assert.equal('htb', core.testbed_check { rate_bps = 1e6, shape = 'htb' }.shape)
  end)

  it('core.testbed_check fills the defaults', function()
    assert.same({ shape = 'tbf', offloads = false, ipv6 = false, prefix = 'qoslab', bottleneck = 'host',
                  backend = 'auto' },
      core.testbed_check(nil))
    -- (a burst of at least the MTU: shape.apply would refuse a smaller one)
    assert.same({ rate_bps = 1000000, shape = 'htb', burst_bytes = 9000, offloads = true, mtu_bytes = 9000,
                  ipv6 = true, prefix = 'x', bottleneck = 'router', backend = 'auto' },
      core.testbed_check { rate_bps = 1e6, shape = 'htb', burst_bytes = 9000, offloads = true,
                           mtu_bytes = 9000, ipv6 = true, prefix = 'x', impair = {}, bottleneck = 'router' })
  end)

  it('core.testbed_check: backend "link", also with a router and IPv6', function()
    assert.equal('link', core.testbed_check { backend = 'link', offloads = true }.backend)
    assert.equal('netem', core.testbed_check { backend = 'netem', bottleneck = 'router', ipv6 = true }.backend)
    local o = core.testbed_check { backend = 'link', bottleneck = 'router', ipv6 = true }
    assert.same({ 'link', 'router', true }, { o.backend, o.bottleneck, o.ipv6 })
    expect('qoslab.testbed: opts.backend: expected one of "auto", "netem", "link"', testbed.testbed,
      { backend = 'tun' })
    expect('qoslab.testbed: opts.mtu_bytes: expected at least 1280 with opts.ipv6', testbed.testbed,
      { backend = 'link', ipv6 = true, mtu_bytes = 1279 })
    expect('qoslab.testbed: opts.impair.limit_packets: expected', testbed.testbed,
      { backend = 'link', impair = { delay_ms = 10, limit_packets = 'many' } })
  end)

  it('netns.unique_name takes the same prefix rule', function()
    local netns = require 'qoslab.netns'
    expect('qoslab.netns.unique_name: prefix: expected a string of 1..64 letters', netns.unique_name, 'a/b')
    assert.matches('^p%-%d+%-%d+$', netns.unique_name('p'))
  end)
end)

describe('shape: every function raises at the caller', function()
  it('get, clear, reset_child, stats and the MTU rule of apply', function()
    expect('qoslab.shape.get: opts.kind: unknown key', shape.get, 'lo', { kind = 'tbf' })
    expect('qoslab.shape.clear: ifname: expected an interface name', shape.clear, '')
    expect('qoslab.shape.reset_child: opts: expected a table, got 1', shape.reset_child, 'lo', 1)
    expect('qoslab.shape.stats: ifname: expected a string, got nil', shape.stats)
  end)

  it('keeps the values the binding returns', function()
    -- nothing shaped on lo: get answers nil alone, as the binding does
    local n = select('#', shape.get('lo'))
    assert.equal(select('#', core.shape_get('lo')), n)
  end)
end)
