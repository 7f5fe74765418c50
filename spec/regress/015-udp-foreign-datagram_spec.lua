-- 015: one datagram that did not belong to a UDP test wrecked its books. A
-- datagram with the client's 5-tuple and sequence number 400000 turned
-- 10 000 delivered datagrams into "2 035 unique, 397 965 lost": the receiver
-- booked anything that reached the test's socket, so lost + unique == sent
-- broke and the loss was a fiction. Now qoslab's datagrams carry a tag
-- derived from the test's cookie (between two qoslab ends), and a receiver
-- rejects a datagram that is shorter than the header, carries a wrong tag or
-- is numbered beyond what the sender can have sent by then; it counts them
-- as invalid_packets and touches no other counter. The stray datagrams are
-- forged with the client's (or server's) address and port through a raw
-- socket (spec/support/udp_inject.py), so they reach the connected socket.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local root = H.sh('test "$(id -u)" = 0')
local has_python = H.sh('python3 -c "import socket"')
local has_iperf3 = H.sh('command -v iperf3')

local RATE, LEN, DUR = 8e6, 1000, 2
local SENT = RATE * DUR / (8 * LEN)   -- a timed, paced test sends exactly its slots

local function inject(port, to, kinds)
  local out = H.must(string.format('python3 spec/support/udp_inject.py %d %s %s', port, to,
    table.concat(kinds, ' ')))
  assert(out:find('sent ' .. #kinds, 1, true), out)
end

-- The books of one direction: exact, and the strays only in invalid_packets.
local function books(label, snd, rcv, intervals, n_invalid)
  assert.equal(SENT, snd.packets, label .. ': sent')
  assert.equal(snd.packets, rcv.lost_packets + rcv.unique_packets,
    label .. ': lost + unique == sent')
  -- the fiction was loss beyond what was sent; real loss on a busy host
  -- (a receive buffer overflowing) stays within it
  assert(rcv.lost_packets < SENT // 2, label .. ': lost ' .. rcv.lost_packets)
  assert.equal(0, rcv.late_packets, label .. ': late')
  assert.equal(rcv.packets, rcv.unique_packets + rcv.duplicate_packets + rcv.late_packets,
    label .. ': raw packets are the booked ones')
  assert.equal(n_invalid, rcv.invalid_packets, label .. ': invalid_packets')
  if intervals then
    local sum = 0
    for _, iv in ipairs(intervals) do
      if not iv.omitted then
        for _, e in ipairs(iv.streams) do
          if e.role == 'receiver' then sum = sum + (e.invalid_packets or 0) end
        end
      end
    end
    assert.equal(n_invalid, sum, label .. ': invalid_packets over the intervals')
  end
end

local function server_result(srv)
  local t_end = H.now() + 5
  while srv:finished() < 1 and H.now() < t_end do H.sleep(0.05) end
  local list = srv:results()
  return assert(list[#list], 'the server kept no result')
end

describe('regress 015 a foreign datagram on the test socket', function()
  if not root or not has_python then
    pending('needs root and python3 for a raw socket')
    return
  end
  -- seq 400000 (beyond the sender), a plausible seq 10 with a wrong tag
  -- (a duplicate if it were booked), and an 8-byte runt
  local STRAYS = { 'dgram:400000:64:' .. LEN, 'dgram:10:64:' .. LEN, 'runt:8' }

  for _, reverse in ipairs { false, true } do
    it('qoslab to qoslab, ' .. (reverse and 'reverse' or 'forward'), function()
      local port = H.port()
      local srv <close> = assert(traffic.server { port = port })
      local h <close> = assert(traffic.client { host = '127.0.0.1', port = port, proto = 'udp',
        bitrate_bps = RATE, length_bytes = LEN, duration_s = DUR, reverse = reverse,
        interval_s = 0.5 }:start())
      H.sleep(0.8)
      inject(port, reverse and 'client' or 'server', STRAYS)
      local res = assert(h:wait())
      local label = reverse and 'reverse' or 'forward'
      books(label, res.sent, res.received, res.intervals, #STRAYS)
      books(label .. ' stream', res.streams[1].sender, res.streams[1].receiver, nil, #STRAYS)
      H.identities(res, label)
      local r = server_result(srv)
      books(label .. ' server', r.sent, r.received, nil, #STRAYS)
      assert(traffic.summary(res):find('invalid ' .. #STRAYS, 1, true), 'summary')
    end)
  end

  it('an iperf3 client (no tag: the sequence bound and the runt)', function()
    if not has_iperf3 then
      pending('no iperf3')
      return
    end
    local port = H.port()
    local srv <close> = assert(traffic.server { port = port })
    local out = H.tmp('015-iperf3.json')
    local p = H.spawn(string.format('iperf3 -c 127.0.0.1 -p %d -u -b %d -l %d -t %d -J',
      port, math.floor(RATE), LEN, DUR), out)
    local ok, err = pcall(function()
      H.sleep(0.8)
      -- iperf3 3.12 numbers in 32 bits unless asked for 64
      inject(port, 'server', { 'dgram:400000:32:' .. LEN, 'runt:8' })
      assert(H.wait_exit(p, 15), 'iperf3 did not end')
      local r = server_result(srv)
      assert.equal(r.sent.packets, r.received.lost_packets + r.received.unique_packets,
        'lost + unique == sent')
      assert(r.received.lost_packets < r.sent.packets // 2, 'lost ' .. r.received.lost_packets)
      assert.equal(2, r.received.invalid_packets)
    end)
    H.kill(p)
    H.cleanup_tmp()
    assert(ok, err)
  end)
end)
