-- 021: a stray UDP connect message took over a qoslab client's stream. The
-- server gave a stream to any 4-byte connect message (iperf3's magic, no
-- cookie) from the test's client address, so a junk sender on the same IP
-- (a shared host, a NAT) took one of the streams of `-u -P 4` and its
-- datagrams were booked: "lost -9223372036854775808/-9223372036854774948
-- (100%) dup 1164". A qoslab client (it asks for tagged datagrams) names
-- its test with the cookie after the magic, and the server now gives its
-- streams only to a message carrying that cookie; a bare message goes only
-- to a test whose parameters came from a stock iperf3 client. Here 20
-- sockets on the client's address send bare connect messages all through a
-- 4-stream test: none gets a reply, every stream is the client's own and
-- the books are exact (lost + unique == sent, per stream and in total).
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local root = H.sh('test "$(id -u)" = 0')
local has_python = H.sh('python3 -c "import socket"')

local RATE, LEN, DUR, P = 4e6, 1000, 1, 4
local SENT = RATE * DUR / (8 * LEN)   -- per stream: a timed, paced test sends its slots

local function books(label, snd, rcv, sent)
  assert.equal(sent, snd.packets, label .. ': sent')
  assert.equal(snd.packets, rcv.lost_packets + rcv.unique_packets,
    label .. ': lost + unique == sent')
  assert(rcv.lost_packets >= 0 and rcv.lost_packets < sent // 2,
    label .. ': lost ' .. rcv.lost_packets)
  assert.equal(0, rcv.duplicate_packets, label .. ': duplicates')
end

describe('regress 021 bare UDP connect messages from the client address', function()
  if not root or not has_python then
    pending('needs root and python3')
    return
  end
  for _, reverse in ipairs { false, true } do
    it('leave a qoslab -u -P 4 test its own streams, ' ..
       (reverse and 'reverse' or 'forward'), function()
      local port = H.port()
      local srv <close> = assert(traffic.server { port = port })
      local out = H.tmp('021-junk.out')
      local junk = H.spawn(string.format('python3 spec/support/udp_connect_junk.py %d 127.0.0.9 3 20',
        port), out)
      local ok, err = pcall(function()
        H.sleep(0.3)   -- the junk runs before and during the streams' connect
        local res, msg = traffic.run { host = '127.0.0.1', port = port, proto = 'udp',
          bind_address = '127.0.0.9', parallel = P, bitrate_bps = RATE, length_bytes = LEN,
          duration_s = DUR, reverse = reverse }
        assert(res, msg)
        assert.equal(P, #res.streams)
        for i, s in ipairs(res.streams) do
          books('stream ' .. i, s.sender, s.receiver, SENT)
        end
        books('total', res.sent, res.received, SENT * P)
        local text = traffic.summary(res)
        assert(not text:find('[%s/(]%-%d'), 'a negative number in the summary: ' .. text)
        assert(H.wait_exit(junk, 6), 'the junk sender did not end')
        local line = H.read(out)
        local sent, replies = line:match('sent (%d+) replies (%d+)')
        assert(tonumber(sent) > 100, 'junk sent: ' .. line)
        assert.equal(0, tonumber(replies), 'junk connect messages that got a stream')
      end)
      H.kill(junk)
      H.cleanup_tmp()
      assert(ok, err)
    end)
  end
end)
