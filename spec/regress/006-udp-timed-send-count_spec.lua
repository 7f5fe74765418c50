-- 006: a timed, paced UDP test sent a few datagrams more than its schedule
-- holds (3004 in 3 s at 1000/s in the emulated guest, case 001): the
-- sender stopped when the control thread, waking a few ms late, set the
-- stop flag. The sender now stops at the planned end itself, so it sends
-- exactly the slots scheduled before it: rate x duration (slot 0 at t = 0).
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

describe('regress 006 timed UDP sends its schedule exactly', function()
  local function check(o, expect, label)
    local port = H.port()
    local srv = assert(traffic.server { port = port })
    local ok, err = pcall(function()
      o.host, o.port, o.proto, o.length_bytes = '127.0.0.1', port, 'udp', 1000
      local res = assert(traffic.run(o))
      if o.omit_s then
        -- Known limit: each end closes its warm-up with a grid tick of its
        -- own control thread (a few ms late under load) on its own clock, so
        -- datagrams near the boundary can fall on either side: after-omit
        -- sent and the receiver's books differ by a few (seen: 998 / 1001,
        -- 1003 / 1003; under TSan, whose ticks come later, 995 / 1001). The
        -- bound is 2 %: 20 ms of tick lateness at this rate. Without omit_s
        -- both are exact.
        local r = res.received
        local tol = math.max(5, 0.02 * expect)
        assert(math.abs(res.sent.packets - expect) <= tol, string.format('%s: sent %d of %d',
          label, res.sent.packets, expect))
        assert(math.abs(r.lost_packets + r.unique_packets - res.sent.packets) <= tol, string.format(
          '%s: lost %d + unique %d vs sent %d', label, r.lost_packets, r.unique_packets,
          res.sent.packets))
        return
      end
      H.identities(res, label)
      -- a stall can only drop slots (no catch-up beyond one interval), never add
      assert(res.sent.packets <= expect, string.format('%s: sent %d > %d', label,
        res.sent.packets, expect))
      assert(res.sent.packets >= expect - 2, string.format('%s: sent %d of %d', label,
        res.sent.packets, expect))
    end)
    srv:stop()
    assert(ok, err)
  end
  it('1 s at 1000 datagrams/s: 1000', function()
    check({ bitrate_bps = 8e6, duration_s = 1 }, 1000, 'forward')
  end)
  it('reverse, 1.5 s at 2000 datagrams/s: 3000', function()
    check({ bitrate_bps = 16e6, duration_s = 1.5, reverse = true }, 3000, 'reverse')
  end)
  it('omit 0.5 s + 1 s at 1000 datagrams/s: 1000 after the omit', function()
    check({ bitrate_bps = 8e6, duration_s = 1, omit_s = 0.5 }, 1000, 'omit')
  end)
end)
