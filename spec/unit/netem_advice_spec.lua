-- qoslab.netem's advice and keep_order without a kernel: the check-only
-- path (netem.check, core.netem_check) reports correlated random loss with a
-- stable code and field and a replacement that check accepts, and checks
-- keep_order with the other fields (errors name spec.keep_order). What the
-- kernel then does is spec/netem/netem_advice_spec.lua's, in the guest.
local netem = require 'qoslab.netem'
local core = require 'qoslab.core'

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, 'expected an error matching ' .. pattern)
  assert.is_truthy(tostring(err):find(pattern, 1, true),
    'error "' .. tostring(err) .. '" does not contain "' .. pattern .. '"')
end

describe('qoslab.netem advice on correlated random loss', function()
  it('check returns the advice: code, field, the kernel loss and a Gilbert-Elliott replacement', function()
    local canon, advice = netem.check { loss_pct = 5, loss_corr_pct = 25 }
    assert.same({ loss_pct = 5, loss_corr_pct = 25, limit_packets = 1000 }, canon)
    assert.equal(1, #advice)
    local a = advice[1]
    assert.equal('CORRELATED_LOSS', a.code)
    assert.equal('spec.loss_corr_pct', a.field)
    -- sch_netem's generator: 5 % with 25 % correlation loses about 0.19 %
    assert.is_true(a.kernel_loss_pct > 0.17 and a.kernel_loss_pct < 0.21, tostring(a.kernel_loss_pct))
    -- p = 5 % x (1 - 0.25), r = 95 % x (1 - 0.25): mean loss p/(p+r) = 5 %
    assert.same({ loss_pct = false, loss_corr_pct = false,
                  loss_gemodel = { p_pct = 3.75, r_pct = 71.25, one_minus_h_pct = 100, one_minus_k_pct = 0 } },
      a.changes)
    assert.near(1 / 0.7125, a.mean_burst_packets, 1e-9)
    assert.is_string(a.message)
  end)

  it('the replacement is a valid spec with the asked mean loss and no advice of its own', function()
    for _, case in ipairs { { 1, 10 }, { 5, 25 }, { 10, 50 }, { 30, 80 } } do
      local p, rho = case[1] / 100, case[2] / 100
      local _, advice = netem.check { delay_ms = 10, loss_pct = case[1], loss_corr_pct = case[2] }
      local spec = { delay_ms = 10 }
      for k, v in pairs(advice[1].changes) do if v ~= false then spec[k] = v end end
      local canon, again = netem.check(spec)
      assert.same({}, again)
      local ge = canon.loss_gemodel
      local mean = ge.p_pct / (ge.p_pct + ge.r_pct)
      assert.near(p, mean, 1e-6)
      -- lag-1 correlation of the losses is rho: P(loss | loss) = p + rho (1 - p)
      assert.near(p + rho * (1 - p), 1 - ge.r_pct / 100, 1e-6)
    end
  end)

  it('nothing to say without a correlation, at 100 % loss, or for the loss models', function()
    for _, spec in ipairs {
      { loss_pct = 5 }, { loss_pct = 100, loss_corr_pct = 25 },
      { delay_ms = 5, jitter_ms = 1, keep_order = true },
      { loss_gemodel = { p_pct = 3.75, r_pct = 71.25 } }, { loss_state = { p13_pct = 3.75, p31_pct = 71.25 } },
    } do
      local _, advice = netem.check(spec)
      assert.same({}, advice)
    end
  end)

  -- errors.md's first netem trap (jitter reorders 70-74 % of datagrams 1 ms
  -- apart) had no advice: netem.check{delay_ms = 50, jitter_ms = 10} gave {}.
  it('jitter without keep_order, a rate or reorder: JITTER_REORDERS', function()
    local _, advice = netem.check { delay_ms = 50, jitter_ms = 10 }
    assert.equal(1, #advice)
    assert.equal('JITTER_REORDERS', advice[1].code)
    assert.equal('spec.jitter_ms', advice[1].field)
    assert.is_nil(advice[1].kernel_loss_pct)
    assert.is_nil(advice[1].changes)
    assert.matches('about 20 ms (2 x jitter) apart', advice[1].message, 1, true)
    assert.matches('set spec.keep_order = true', advice[1].message, 1, true)
    for _, spec in ipairs {
      { delay_ms = 50, jitter_ms = 10, keep_order = true },
      { delay_ms = 50, jitter_ms = 10, rate_bps = 1e8 },
      { delay_ms = 50, jitter_ms = 10, reorder_pct = 5 },
    } do
      _, advice = netem.check(spec)
      assert.same({}, advice)
    end
  end)

  -- jitter above the delay was taken silently (as tc netem takes it): the
  -- draws below 0 are sent at once, so the mean delay is not the asked one
  it('jitter above the delay: JITTER_CLIPS, with the clipped mean', function()
    local _, advice = netem.check { jitter_ms = 20, keep_order = true }
    assert.equal(1, #advice)
    assert.equal('JITTER_CLIPS', advice[1].code)
    assert.equal('spec.jitter_ms', advice[1].field)
    assert.matches('spec.jitter_ms = 20 is above spec.delay_ms = 0: ', advice[1].message, 1, true)
    assert.matches('their mean is about 5 ms (uniform draws), not 0 ms', advice[1].message, 1, true)
    _, advice = netem.check { delay_ms = 20, jitter_ms = 20, keep_order = true }
    assert.same({}, advice)
  end)

  it('a 100 % correlation has no equivalent model: advice without changes', function()
    local _, advice = netem.check { loss_pct = 5, loss_corr_pct = 100 }
    assert.equal('CORRELATED_LOSS', advice[1].code)
    assert.is_nil(advice[1].changes)
  end)

  it('core.netem_check gives the advice as its third value in "apply" mode, none in "target"', function()
    local _, opts, advice = core.netem_check('qoslab.netem.apply', 'apply', 'lo',
      { loss_pct = 2, loss_corr_pct = 50 })
    assert.equal('egress', opts.direction)
    assert.equal('CORRELATED_LOSS', advice[1].code)
    local canon, _, none = core.netem_check('qoslab.netem.get', 'target', 'lo')
    assert.is_false(canon)
    assert.same({}, none)
  end)
end)

describe('qoslab.netem keep_order', function()
  it('is kept in the canonical spec (apply resolves it into rate_bps)', function()
    local canon = netem.check { delay_ms = 50, jitter_ms = 10, keep_order = true }
    assert.same({ delay_ms = 50, jitter_ms = 10, keep_order = true, limit_packets = 1000 }, canon)
    assert.same({ delay_ms = 50, limit_packets = 1000 }, (netem.check { delay_ms = 50, keep_order = false }))
  end)

  it('errors name spec.keep_order', function()
    raises('spec.keep_order: expected a boolean, got 1', netem.check, { keep_order = 1 })
    raises('spec.keep_order: cannot be combined with spec.reorder_pct', netem.apply, 'lo',
      { delay_ms = 50, jitter_ms = 10, reorder_pct = 5, keep_order = true })
    raises('qoslab.netem.format: spec.keep_order: has no tc-netem(8) syntax', netem.format,
      { delay_ms = 50, jitter_ms = 10, keep_order = true })
    -- the binding's apply takes only what the kernel has: keep_order resolved
    local ok, err = pcall(core.netem_apply, 'lo', { delay_ms = 50, keep_order = true })
    assert.is_false(ok)
    assert.matches('spec.keep_order: needs a rate', err, 1, true)
  end)

  it('with rate_bps the caller\'s rate stays (any rate keeps order)', function()
    local canon = netem.check { delay_ms = 50, jitter_ms = 10, keep_order = true, rate_bps = 1e8 }
    assert.equal(100000000, canon.rate_bps)
    assert.is_true(canon.keep_order)
  end)
end)
