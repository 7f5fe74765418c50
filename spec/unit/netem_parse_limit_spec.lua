-- netem.parse's syntax errors carried no file:line at all (raised at level
-- 0), while its range errors pointed at the caller. netem.needed_limit
-- checked only that spec was a table: {delay_ms = 'x'} or NaN gave 0, a
-- negative delay a negative count, and a huge delay x rate a count beyond
-- the kernel's 32-bit limit (netem.apply with limit "auto" then failed
-- inside qoslab, or read 2^63 as 0 and fell back to 1000). Now both raise
-- at the caller's line and the count stops at 4294967295.
local netem = require 'qoslab.netem'

local THIS = 'netem_parse_limit_spec%.lua'

local function raised(f)
  local ok, err = pcall(f)
  assert.is_false(ok)
  return tostring(err)
end

describe('netem.parse and needed_limit', function()
  it('a syntax error points at the caller, as a range error does', function()
    local line = debug.getinfo(1, 'l').currentline + 1
    local err = raised(function() local s = netem.parse('delay 5xs') return s end)
    assert.matches(THIS .. ':' .. line .. ': qoslab%.netem%.parse: delay: expected a time with a unit', err)
    line = debug.getinfo(1, 'l').currentline + 1
    err = raised(function() local s = netem.parse('delay 5ms bogus') return s end)
    assert.matches(THIS .. ':' .. line .. ': qoslab%.netem%.parse: option: expected a tc%-netem%(8%) keyword', err)
    assert.equal('auto', netem.parse('delay 5ms limit auto').limit_packets)
  end)

  it('needed_limit checks its spec as apply does', function()
    for _, bad in ipairs {
      { { delay_ms = 'x' }, 'spec.delay_ms: expected a finite number' },
      { { delay_ms = 0 / 0 }, 'spec.delay_ms: expected a finite number' },
      { { delay_ms = -100 }, 'spec.delay_ms: expected a finite number' },
      { { delay_ms = 100, bogus = 1 }, 'spec.bogus: unknown key' },
    } do
      local err = raised(function() local n = netem.needed_limit('lo', bad[1]) return n end)
      assert.matches(THIS .. ':%d+: qoslab%.netem%.needed_limit: ' .. bad[2]:gsub('%.', '%%.'), err)
    end
  end)

  it('the count is the rule, and stops at the kernel limit', function()
    -- 1 Gbit/s x 100 ms / 1514-byte frames x 1.5, rounded up
    assert.equal(12385, (netem.needed_limit('lo', { delay_ms = 100, rate_bps = 1e9 })))
    assert.equal(4294967295, (netem.needed_limit('lo', { delay_ms = 1e8, rate_bps = 1e9 })))
    assert.equal(4294967295, (netem.needed_limit('lo', { delay_ms = 1e9, rate_bps = 9e18 })))
  end)
end)
