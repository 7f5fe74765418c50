-- 014: a UDP test stopped early (Ctrl-C, :stop()), from the second new-user
-- trial. The server counted its senders' slots up to the planned end, not
-- to the stop: "dropped 15830 of 17124 datagram slots (92.44 %)". And the
-- server's own result broke lost + unique == sent for the direction it sent
-- (sent 1881, unique 1875, lost 0 where the client said lost 6): a client
-- sends its results before it learns the sender's count, with its books
-- still open.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

describe('regress 014 UDP test stopped early', function()
  it('no dropped-slot warning, and both ends book the same counts', function()
    local port = H.port()
    local srv <close> = assert(traffic.server { port = port })
    local h <close> = assert(traffic.client { host = '127.0.0.1', port = port, proto = 'udp',
      bitrate_bps = 10e6, length_bytes = 1000, duration_s = 20, bidir = true }:start())
    H.sleep(1.5)
    h:stop()
    local res = assert(h:wait())
    assert(res.duration_s < 5, 'the test ran ' .. res.duration_s .. ' s')
    H.identities(res, 'client')
    for _, w in ipairs(res.warnings or {}) do
      assert(not w:find('fell behind'), 'client: ' .. w)
    end
    local t_end = H.now() + 5
    while srv:finished() < 1 and H.now() < t_end do H.sleep(0.05) end
    local list = srv:results()
    local r = assert(list[#list], 'the server kept no result')
    H.identities(r, 'server')
    for _, w in ipairs(r.warnings or {}) do
      assert(not w:find('fell behind'), 'server: ' .. w)
    end
    -- the direction the server sent: the same books at both ends
    for _, k in ipairs { 'unique_packets', 'lost_packets' } do
      assert.equal(res.reverse_received[k], r.reverse_received[k], 'reverse ' .. k)
    end
    assert.equal(res.reverse_sent.packets, r.reverse_sent.packets)
  end)
end)
