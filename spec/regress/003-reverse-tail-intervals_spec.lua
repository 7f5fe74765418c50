-- 003: in reverse mode (a 4 s test through netem in the guest) only 3 of 7 result intervals
-- carried the server's TCP_INFO sender entry and one interval was 2 s long
-- (3.0-5.0 s) in a 4 s test: the sending server stopped ticking while it
-- waited for its data to be acknowledged, the tick at the planned end was
-- skipped although the client went on receiving the tail, and the server's
-- intervals were placed by end time on a clock that started one control
-- message earlier. And the sender's seconds included that wait
-- ("receiver 3.103 s < sender 3.155 s"). Here a tbf queue and the server's
-- send buffer make a tail of about a second on a veth pair; the guest runs
-- the netem form in spec/netem/traffic_cases_spec.lua. Since regress 017
-- the tail after the planned end is bounded (here by the 0.25 s drain) and
-- held by the last interval.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local root = H.sh('test "$(id -u)" = 0')

describe('regress 003 reverse-mode tail intervals', function()
  if not root then
    pending('needs root for network namespaces')
    return
  end
  it('every interval carries the sending socket TCP_INFO; no double-length interval', function()
    local pair = H.netns_pair {}
    local srv
    local ok, err = pcall(function()
      H.must(string.format('tc -n %s qdisc replace dev %s root tbf rate 20mbit burst 32k latency 400ms',
        pair.b, pair.vb))
      local port = H.port()
      srv = assert(traffic.server { port = port, netns = pair.b })
      local res = assert(traffic.run { host = pair.b_addr, port = port, netns = pair.a,
        reverse = true, duration_s = 2, interval_s = 0.5 })
      H.identities(res, '003')
      local sent = 0
      for i, iv in ipairs(res.intervals) do
        -- the last one also holds the bounded tail (0.25 s, regress 017)
        local max_s = i < #res.intervals and 0.5 * 1.2 or 0.5 + 0.25 + 0.02
        assert(iv.seconds <= max_s, string.format('interval %d is %.3f s long (%.3f-%.3f)',
          i, iv.seconds, iv.start_s, iv.end_s))
        local snd
        for _, e in ipairs(iv.streams) do
          if e.role == 'sender' then snd = e end
        end
        assert(snd, string.format('interval %d (%.3f-%.3f s) has no sender entry of %d',
          i, iv.start_s, iv.end_s, #res.intervals))
        assert.equal('server', snd.side)
        assert(snd.rtt_us and snd.snd_cwnd_bytes and snd.retransmits,
          'interval ' .. i .. ': TCP_INFO missing')
        sent = sent + snd.bytes
      end
      assert.equal(res.sent.bytes, sent)
      -- the tail ends with the grid: the client received after the planned
      -- end, but only for the bounded tail (the 0.25 s drain), which the
      -- last interval holds, and no interval follows (regress 017: a slow
      -- link's tail once made several); the last one ends on the grid
      local last = res.intervals[#res.intervals]
      assert(math.abs(last.end_s - 2.0) < 1e-6, 'the last interval ends at ' .. last.end_s)
      assert(last.seconds > 0.5 + 0.1, 'no tail in the last interval: ' .. last.seconds)
      for i, iv in ipairs(res.intervals) do
        assert(iv.start_s < 2.0, 'interval ' .. i .. ' starts at ' .. iv.start_s)
      end
      assert(res.received.seconds >= res.sent.seconds, string.format(
        'receiver %.3f s < sender %.3f s', res.received.seconds, res.sent.seconds))
      H.close_to(res.sent.bits_per_second, res.sent.bytes * 8 / res.sent.seconds, 1e-9, 'sender')
      H.close_to(res.received.bits_per_second, res.received.bytes * 8 / res.received.seconds,
        1e-9, 'receiver')
    end)
    if srv then srv:stop() end
    pair.close()
    assert(ok, err)
  end)
end)
