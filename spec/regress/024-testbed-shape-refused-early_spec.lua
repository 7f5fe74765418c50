-- 024: a testbed whose shaper the kernel path would refuse passed the
-- testbed's check and raised only after the namespaces and veth existed,
-- from inside the library and naming fields the caller never wrote:
-- testbed{rate_bps = 8e15} -> "testbed.lua:158: qoslab.shape.apply:
-- spec.latency_ms: rate * latency + burst exceeds 4 GiB"; likewise
-- {rate_bps = 8} and {shape = 'htb', rate_bps = 8} (a default burst that
-- takes too long to send) and {rate_bps = 1e6, burst_bytes = 1} (a burst
-- below the MTU). And testbed{mtu_bytes = 68, ipv6 = true} failed late with
-- a bare EINVAL from adding the address (IPv6 needs an MTU of 1280). Now
-- the testbed's check runs shape's own rules on the spec it will build,
-- against the MTU its links will have, under the testbed's names, and
-- raises at the caller's line before anything is made.
local testbed = require('qoslab.testbed').testbed

local function refuses(opts, expected)
  local line = debug.getinfo(1, 'l').currentline + 1
  local ok, err = pcall(function() local tb = testbed(opts) return tb end)
  assert.is_false(ok, 'accepted')
  err = tostring(err)
  -- raised at the caller's line (the closure on the line above)
  assert.matches('^[^:]*024%-testbed%-shape%-refused%-early_spec%.lua:' .. line .. ': ', err)
  assert.matches(expected, err, 1, true)
  assert.is_nil(err:find(': spec%.'), 'names spec fields: ' .. err)
end

describe('regress 024 a testbed refuses a shaper it cannot build, up front', function()
  it('rate * latency + burst above 4 GiB names opts.rate_bps', function()
    refuses({ rate_bps = 8e15 }, 'qoslab.testbed: opts.rate_bps: rate * latency (20 ms) + burst exceeds 4 GiB')
  end)
  it('a rate too low for the default burst names opts.rate_bps, with the least rate', function()
    refuses({ rate_bps = 8 }, 'qoslab.testbed: opts.rate_bps: expected at least 440 bit/s')
    refuses({ shape = 'htb', rate_bps = 8 }, 'qoslab.testbed: opts.rate_bps: expected at least 440 bit/s')
  end)
  it('a given burst too long to send names opts.burst_bytes', function()
    refuses({ rate_bps = 1000, burst_bytes = 40000 },
      'qoslab.testbed: opts.burst_bytes: 40000 bytes take too long to send at this rate')
  end)
  it('a burst below the MTU names opts.burst_bytes and the MTU the links will have', function()
    refuses({ rate_bps = 1e6, burst_bytes = 1 },
      "qoslab.testbed: opts.burst_bytes: expected at least the MTU of the testbed's veth links (1500 bytes), got 1")
    refuses({ rate_bps = 1e6, burst_bytes = 5000, mtu_bytes = 9000 },
      'opts.burst_bytes: expected at least the MTU of the testbed\'s links as opts.mtu_bytes sets it (9000 bytes)')
  end)
  it('IPv6 with an MTU below 1280 names opts.mtu_bytes and opts.ipv6', function()
    refuses({ mtu_bytes = 68, ipv6 = true },
      'qoslab.testbed: opts.mtu_bytes: expected at least 1280 with opts.ipv6')
    refuses({ mtu_bytes = 1279, ipv6 = true }, 'opts.mtu_bytes: expected at least 1280')
  end)
  it('still passes what it can build to the check (nothing made here)', function()
    local core = require 'qoslab.core'
    assert.equal(8e11 // 1, core.testbed_check { rate_bps = 8e11 }.rate_bps)
    assert.equal(1280, core.testbed_check { mtu_bytes = 1280, ipv6 = true }.mtu_bytes)
    assert.equal(1500, core.testbed_check { rate_bps = 1e6, burst_bytes = 1500 }.burst_bytes)
  end)
end)
