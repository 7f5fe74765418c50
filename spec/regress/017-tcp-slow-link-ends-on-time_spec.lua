-- 017: a timed TCP test through a slow, lossy bottleneck (1 Mbit/s, 10 %
-- loss) did not end at its duration: a 20 s test ended at 23 s, its 20th
-- interval was stretched, three receiver-only intervals followed and the
-- final record came up to 4 s late. The sender waited up to 3 s for its
-- queue to be acknowledged after the planned end, the receiver drained for
-- up to 3 s more, and the grid kept ticking through both. Here a tbf of
-- 1 Mbit/s with a 30 KB queue (it drops on overflow: TCP sees loss) makes
-- the same tail on a veth pair in a 5 s test: it ended at 7.6-8.3 s, the
-- 5th interval was 4.00-5.05 s and three receiver-only ones followed up to
-- 7.57 s. Now a timed sender stops at the planned end
-- (also inside a blocked write), its acknowledgement wait and the
-- receiver's drain end within the drain time (max(250 ms, 2 x RTT), at
-- most one interval), the last interval holds that tail and ends on the
-- grid, and none follows.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local root = H.sh('test "$(id -u)" = 0')
local has_tc = H.sh('command -v tc')

local DUR, PERIOD = 5, 1
local TAIL = 0.25   -- the default drain on a veth pair
-- The tail and the results exchange over the lossy link took 5.39-5.63 s in
-- all; under ThreadSanitizer, whose checks slow the engine's threads several
-- times, 5.96 s once. The fault took 7.6-8.3 s, so both bounds still tell.
local sanitized = (os.getenv('QOSLAB_BUILD') or ''):find('san', 1, true) ~= nil
local WALL_SLACK = sanitized and 1.5 or 0.75

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
        H.must(string.format('tc -n %s qdisc replace dev %s root tbf rate 1mbit burst 2k limit 30k',
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
        assert(#live >= 1, 'no live record')
        -- from the test's start (the first record came at or after its
        -- slot's end, so this start is no earlier than the true one) to the
        -- result: the bounded tail (0.25 s) and the results exchange over
        -- the lossy link (measured 5.39-5.63 s in all)
        local start = live[1].at - live[1].iv.end_s
        local wall = H.now() - t0 - start
        assert(wall <= DUR + WALL_SLACK, string.format('the test took %.3f s after its start (%.3f s '
          .. 'after the call)', wall, H.now() - t0))
        H.identities(res, '017')
        local last = res.intervals[#res.intervals]
        assert(math.abs(last.end_s - DUR) < 1e-6,
          string.format('the last interval ends at %.6f s', last.end_s))
        assert.equal(DUR // PERIOD, #res.intervals, 'intervals')
        for i, iv in ipairs(res.intervals) do
          assert(iv.start_s < DUR - 1e-6, string.format('interval %d starts at %.3f s', i,
            iv.start_s))
          local max_s = i < #res.intervals and PERIOD * 1.05 or PERIOD + TAIL + 0.02
          assert(iv.seconds <= max_s, string.format('interval %d is %.3f s', i, iv.seconds))
        end
        -- live records within one interval of their slot (t0 is before the
        -- test's own start, so this is the stricter reading)
        assert.equal(#res.intervals, #live, 'live records')
        for i, l in ipairs(live) do
          assert(l.at <= l.iv.end_s + PERIOD, string.format(
            'live record %d (%.3f-%.3f s) came at %.3f s', i, l.iv.start_s, l.iv.end_s, l.at))
        end
        assert(res.received.seconds <= DUR + TAIL + 0.05,
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
