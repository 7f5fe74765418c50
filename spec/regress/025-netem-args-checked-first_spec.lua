-- 025: qoslab.netem checked some arguments late or not at all.
-- netem.update('nodev', {loss_pct = 500}) and {bogus = false}, and
-- netem.scope('nodev', {loss_pct = 500}), returned nil, ENODEV: the kernel
-- was asked before the arguments were judged. netem.apply(dev, spec,
-- {direction = 'ingress', ingress_src = 'hello'}) raised from inside
-- netem.lua (the address was parsed only when the ifb filter was built).
-- netem.check{rate_bps = 1..7} gave no rate at all (0 bytes/s = no limit).
-- netem.parse('limit auto') raised though `qoslab netem set ... limit auto`
-- takes it. Now the one check (core.netem_check) judges all of it first and
-- raises at the caller's line.
local netem = require 'qoslab.netem'

local NODEV = 'qt25nodev'
local HERE = '^[^:]*025%-netem%-args%-checked%-first_spec%.lua:'

-- f raises at its call of netem, on its last line.
local function raises(expected, f)
  local line = debug.getinfo(f, 'S').lastlinedefined
  local ok, err = pcall(f)
  assert.is_false(ok, 'did not raise')
  err = tostring(err)
  assert.matches(HERE .. line .. ': ', err)
  assert.matches(expected, err, 1, true)
end

describe('regress 025 netem arguments are checked before the kernel', function()
  it('update checks its changes', function()
    raises('qoslab.netem.update: changes.loss_pct: expected a finite number in [0, 100], got 500', function()
      local r = netem.update(NODEV, { loss_pct = 500 }) return r end)
    raises('qoslab.netem.update: changes.bogus: unknown key', function()
      local r = netem.update(NODEV, { bogus = false }) return r end)
    raises('qoslab.netem.update: opts.direction', function()
      local r = netem.update(NODEV, { delay_ms = 1 }, { direction = 'up' }) return r end)
    -- a valid change set still goes to the kernel (no such device here)
    local r, msg, code = netem.update(NODEV, { delay_ms = 5, jitter_ms = false })
    assert.is_nil(r)
    assert.equal('ENODEV', code, msg)
  end)
  it('scope checks its spec', function()
    raises('qoslab.netem.scope: spec.loss_pct: expected a finite number in [0, 100], got 500', function()
      local g = netem.scope(NODEV, { loss_pct = 500 }) return g end)
    raises('qoslab.netem.scope: spec.bogus: unknown key', function()
      local g = netem.scope(NODEV, { bogus = 1 }) return g end)
    local g, msg, code = netem.scope(NODEV, { delay_ms = 5 })
    assert.is_nil(g)
    assert.equal('ENODEV', code, msg)
  end)
  it('opts.ingress_src is checked with the other options', function()
    raises('qoslab.netem.apply: opts.ingress_src: expected an IPv4/IPv6 address, got "hello"', function()
      local r = netem.apply(NODEV, { delay_ms = 1 }, { direction = 'ingress', ingress_src = 'hello' }) return r end)
    raises('qoslab.netem.apply: opts.ingress_src: prefix must be 1..32', function()
      local r = netem.apply(NODEV, { delay_ms = 1 }, { direction = 'ingress', ingress_src = '10.0.0.1/33' }) return r end)
    local r, msg, code = netem.apply(NODEV, { delay_ms = 1 }, { direction = 'ingress', ingress_src = 'fd00::/64' })
    assert.is_nil(r)
    assert.equal('ENODEV', code, msg)
  end)
  it('a netem rate below one byte per second is refused, not turned into no limit', function()
    for _, v in ipairs { 1, 7, 0.5, 7.99 } do
      raises('qoslab.netem.check: spec.rate_bps: expected 0 (no limit) or at least 8', function()
      local s = netem.check { rate_bps = v } return s end)
    end
    assert.equal(8, netem.check { rate_bps = 8 }.rate_bps)
    assert.equal(8, netem.check { rate_bps = 15 }.rate_bps)  -- whole bytes/s
    assert.is_nil(netem.check { rate_bps = 0 }.rate_bps)
  end)
  it('parse takes limit auto, as the CLI does', function()
    local s = netem.parse('delay 50ms limit auto')
    assert.equal('auto', s.limit_packets)
    assert.equal(50, s.delay_ms)
    assert.equal('auto', netem.check(s).limit_packets)
    assert.has_error(function() netem.parse('limit auto limit 5') end,
      'qoslab.netem.parse: limit: expected it once, got "a second limit"')
  end)
end)
