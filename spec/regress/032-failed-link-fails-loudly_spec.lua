-- 032: a testbed whose native link failed (a TUN device deleted under it, a
-- thread died) went on as if nothing happened: tb:impair and tb:schedule
-- returned success on a link that forwards nothing, tb:stats() returned
-- ENODEV for the deleted device instead of the link's entry with `failed`,
-- and a 4 s test through it ended 34 s later with an unrelated "peer silent
-- during the control exchange: timed out" (ETIMEDOUT). Now tb:impair and
-- tb:schedule return nil, message, "ELINKFAILED"; tb:stats() keeps the
-- link's entries with failed / failed_code; a test started after the
-- failure returns ELINKFAILED at once, and one that runs when the link
-- fails ends within about a second with ELINKFAILED (no results exchange
-- over the dead path).
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'
local testbed = require 'qoslab.testbed'

describe('regress 032 a failed link fails loudly', function()
  it('impair, schedule, stats and tests through it say ELINKFAILED', function()
    local tb = assert(testbed.testbed { backend = 'link', rate_bps = 100e6, impair = { delay_ms = 10 } })
    local srv
    finally(function()
      if srv then srv:stop() end
      tb:close()
    end)
    srv = assert(traffic.server { netns = tb.server_netns, port = H.port() })
    local port = srv:port()
    -- the device dies 1.5 s into a 4 s test
    local h = assert(traffic.start { host = tb.server_addr, port = port, netns = tb.client_netns,
      duration_s = 4 })
    H.sleep(1.5)
    H.must(string.format('ip -n %s link del %s', H.q(tb.client_netns), tb.client_ifname))
    local t0 = H.now()
    local res, msg, code = h:wait()
    local took = H.now() - t0
    assert.is_nil(res)
    assert.equal('ELINKFAILED', code)
    assert.matches('impairment link failed', msg)
    -- the rest of the 4 s test is 2.5 s; the watch looks every 0.2 s
    assert(took < 4, string.format('the test took %.1f s after the link failed', took))

    local ok, m2, c2 = tb:impair { delay_ms = 20 }
    assert.is_nil(ok)
    assert.equal('ELINKFAILED', c2)
    assert.truthy(m2:find(tb.client_ifname, 1, true), m2)
    local s, m3, c3 = tb:schedule { { at_s = 0, delay_ms = 5 } }
    assert.is_nil(s)
    assert.equal('ELINKFAILED', c3)
    assert.is_string(m3)
    -- bad input still raises before the link is asked
    assert.has_error(function() tb:impair { delay_ms = -1 } end)

    local st, m4, c4 = tb:stats()
    assert(st, tostring(m4) .. ' ' .. tostring(c4))
    local entry = st.client[#st.client]
    assert.equal('link', entry.kind)
    assert.is_string(entry.failed)
    assert.equal('ELINKFAILED', entry.failed_code)
    assert.equal('ELINKFAILED', st.server[#st.server].failed_code)

    -- a test started after the failure ends at once
    t0 = H.now()
    res, msg, code = traffic.run { host = tb.server_addr, port = port, netns = tb.client_netns,
      duration_s = 2 }
    assert.is_nil(res)
    assert.equal('ELINKFAILED', code, msg)
    assert(H.now() - t0 < 1, 'a test on a failed link did not end at once')
  end)
end)
