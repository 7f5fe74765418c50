-- 028: the client's interval grid stalled behind a control-channel read. The
-- client's control loop is also its reporter; when a qoslab server's live
-- interval record arrived over the control connection only in part (its
-- segments trickling over a slow or lossy path), the loop read the rest of
-- the record with a blocking read of up to 10 s, and the grid points that
-- passed meanwhile were skipped: one local interval spanned several periods
-- and the server's intervals of those slots were folded into it (a 5 s UDP
-- test through netem `delay 1s` once gave 4 intervals, the last of 5.00 s).
-- Here a veth pair with a 128-byte MTU (a record spans about five segments)
-- and a tbf of 3600 bit/s on the server's egress (a record takes ~1.5 s to
-- cross) make the records trickle in, one segment every ~0.3 s; a 5 s test
-- gave 3 or 4 intervals (seconds 2.38 1.64 1.47, 1.00 1.39 1.64 1.47). The
-- grid must give one interval per period, each about a period long, and the
-- receiver's intervals must still add up to its totals. Now the control
-- loop reads what is there and keeps the rest of a message for its next
-- turn (ctl_reader.c).
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local root = H.sh('test "$(id -u)" = 0')
local has_tc = H.sh('command -v tc')

local DUR, PERIOD = 5, 1
local MTU = 128

describe('regress 028 a control record arriving in pieces does not stall the grid', function()
  if not root or not has_tc then
    pending('needs root and tc for network namespaces and tbf')
    return
  end
  it('UDP forward, the server\'s records trickle', function()
    local pair = H.netns_pair {}
    local srv
    local ok, err = pcall(function()
      for _, x in ipairs { { pair.a, pair.va }, { pair.b, pair.vb } } do
        H.must(string.format('ip -n %s link set %s mtu %d', x[1], x[2], MTU))
      end
      -- the queue delays the server's segments by seconds: no spurious
      -- retransmission (a 1 s RTO) may crowd the slow link meanwhile
      local net = pair.b_addr:gsub('%.2$', '.0/24')
      H.must(string.format('ip -n %s route replace %s dev %s proto kernel scope link src %s '
        .. 'rto_min 8s', pair.b, net, pair.vb, pair.b_addr))
      local port = H.port()
      srv = assert(traffic.server { port = port, netns = pair.b })
      local h <close> = assert(traffic.client { host = pair.b_addr, port = port,
        netns = pair.a, proto = 'udp', duration_s = DUR, interval_s = PERIOD,
        bitrate_bps = 2000000, length_bytes = 500 }:start())
      -- the handshake at full speed; then the server's egress (only the
      -- control connection: the data flows the other way) carries one
      -- full segment per ~0.3 s (142 B at 3600 bit/s), queued, never dropped
      local t0 = H.now()
      H.sleep(0.5)
      H.must(string.format('tc -n %s qdisc replace dev %s root tbf rate 3600bit burst 200 '
        .. 'limit 100000', pair.b, pair.vb))
      -- after the test time the link is fast again for the results exchange
      H.sleep(DUR + 0.8 - (H.now() - t0))
      H.must(string.format('tc -n %s qdisc replace dev %s root tbf rate 100mbit burst 64k '
        .. 'limit 100000', pair.b, pair.vb))
      local res = assert(h:wait())
      local secs = {}
      for i, iv in ipairs(res.intervals) do secs[i] = string.format('%.2f', iv.seconds) end
      local shown = table.concat(secs, ' ')
      assert.equal(DUR // PERIOD, #res.intervals, 'intervals (seconds: ' .. shown .. ')')
      for i, iv in ipairs(res.intervals) do
        assert(math.abs(iv.seconds - PERIOD) < 0.25 * PERIOD,
          string.format('interval %d is %.3f s (seconds: %s)', i, iv.seconds, shown))
      end
      -- the server's intervals, one per slot, add up to its totals
      local bytes, uniq = 0, 0
      for _, iv in ipairs(res.intervals) do
        for _, e in ipairs(iv.streams) do
          if e.role == 'receiver' then
            bytes = bytes + e.bytes
            uniq = uniq + e.unique_packets
          end
        end
      end
      assert.equal(res.received.bytes, bytes, 'receiver interval bytes')
      assert.equal(res.received.unique_packets, uniq, 'receiver interval datagrams')
      assert(res.received.bytes > 0, 'nothing received')
      H.identities(res, '028')
    end)
    if srv then srv:stop() end
    pair.close()
    assert(ok, err)
  end)
end)
