-- 017: a timed TCP test through a slow, lossy bottleneck (1 Mbit/s, 10 %
-- loss) did not end at its duration: a 20 s test ended at 23 s, its 20th
-- interval was stretched, three receiver-only intervals followed and the
-- final record came up to 4 s late. The sender waited up to 3 s for its
-- queue to be acknowledged after the planned end, the receiver drained for
-- up to 3 s more, and the grid kept ticking through both. Here a tbf of
-- 1 Mbit/s with a 6 KB queue (it drops on overflow: TCP sees loss) makes
-- the same tail on a veth pair in a 5 s test: it ended at 5.9 s with a
-- sixth interval 5.05-5.94 s. Now a timed sender stops at the planned end
-- (also inside a blocked write), its acknowledgement wait and the
-- receiver's drain end within the grid end's slack (max(period / 20,
-- 20 ms)), and no interval follows the planned end.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local root = H.sh('test "$(id -u)" = 0')
local has_tc = H.sh('command -v tc')

local DUR, PERIOD = 5, 1
local SLACK = math.max(PERIOD / 20, 0.02)

describe('regress 017 a timed TCP test through a slow link ends on time', function()
  if not root or not has_tc then
    pending('needs root and tc for network namespaces and tbf')
    return
  end
  for _, reverse in ipairs { false, true } do
    it(reverse and 'reverse (the server sends)' or 'forward', function()
      local pair = H.netns_pair {}
      local srv
      local ok, err = pcall(function()
        -- the bottleneck on the data's way out
        local ns, dev = pair.a, pair.va
        if reverse then ns, dev = pair.b, pair.vb end
        H.must(string.format('tc -n %s qdisc replace dev %s root tbf rate 1mbit burst 2k limit 6k',
          ns, dev))
        local port = H.port()
        srv = assert(traffic.server { port = port, netns = pair.b })
        local t0 = H.now()
        local h <close> = assert(traffic.client { host = pair.b_addr, port = port,
          netns = pair.a, duration_s = DUR, interval_s = PERIOD, reverse = reverse }:start())
        local live = {}
        for iv in h:intervals() do
          live[#live + 1] = { iv = iv, at = H.now() - t0 }
          assert(#live <= 3 * DUR, 'too many live records')
        end
        local res = assert(h:wait())
        local wall = H.now() - t0
        -- set-up and results exchange on a veth pair take well under 0.5 s
        assert(wall <= DUR + 0.5, string.format('the test took %.3f s', wall))
        H.identities(res, '017')
        local last = res.intervals[#res.intervals]
        assert(last.end_s >= DUR - 1e-6 and last.end_s <= DUR + SLACK + 0.01,
          string.format('the last interval ends at %.3f s', last.end_s))
        assert.equal(DUR // PERIOD, #res.intervals, 'intervals')
        for i, iv in ipairs(res.intervals) do
          assert(iv.start_s < DUR - 1e-6, string.format('interval %d starts at %.3f s', i,
            iv.start_s))
          assert(iv.seconds <= PERIOD + SLACK + 0.01, string.format('interval %d is %.3f s',
            i, iv.seconds))
        end
        -- live records within one interval of their slot (t0 is before the
        -- test's own start, so this is the stricter reading)
        assert.equal(#res.intervals, #live, 'live records')
        for i, l in ipairs(live) do
          assert(l.at <= l.iv.end_s + PERIOD, string.format(
            'live record %d (%.3f-%.3f s) came at %.3f s', i, l.iv.start_s, l.iv.end_s, l.at))
        end
        assert(res.received.seconds <= DUR + SLACK + 0.05,
          'received over ' .. res.received.seconds .. ' s')
        assert(res.sent.seconds <= DUR + 1e-6, 'sent over ' .. res.sent.seconds .. ' s')
        -- a 1 Mbit/s link: the receiver cannot have got more than the link carried
        assert(res.received.bits_per_second <= 1.1e6, 'received at ' ..
          res.received.bits_per_second)
      end)
      if srv then srv:stop() end
      pair.close()
      assert(ok, err)
    end)
  end
end)
