-- 004: a qoslab server receiving a 2 s UDP test at 50 Mbit/s reported its
-- last 0.5 s interval as "1.50-2.00 s, 2.98 MBytes, 32.7 Mbits/sec": the
-- interval's seconds were 0.768, because the server's grid tick at the
-- planned end fired 25 ms late (the end slack), after the last datagram,
-- and the final snapshot then added a zero-byte interval reaching to the
-- end of the receive drain (~0.25 s of waiting), which the client folded
-- into the same grid slot. Idle drain time is not measurement time: the
-- receiver's last interval ends at its last arrival (tail time counts
-- only when tail bytes do).
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local RATE = 50e6
local PERIOD = 0.5

local function check(res, label, tol)
  H.identities(res, label)
  local n, secs = 0, 0
  for i, iv in ipairs(res.intervals) do
    local r = iv.sum.receiver
    assert(r, label .. ': interval ' .. i .. ' has no receiver sum')
    secs = secs + r.seconds
    assert(r.seconds <= PERIOD * 1.1, string.format(
      '%s: receiver interval %d is %.3f s long (grid %.1f s)', label, i, r.seconds, PERIOD))
    -- a paced 50 Mbit/s flow on loopback arrives at 50 Mbit/s in every
    -- interval; the idle drain made the last one 35 % low
    assert(math.abs(r.bits_per_second / RATE - 1) < tol, string.format(
      '%s: receiver interval %d at %.2f Mbit/s over %.3f s', label, i,
      r.bits_per_second / 1e6, r.seconds))
    n = n + 1
  end
  assert.equal(4, n)
  -- the intervals' seconds add up to the receiver's measured duration
  H.close_to(secs, res.received.seconds, 0.01, label .. ': sum of receiver interval seconds')
end

describe('regress 004 receiver last interval', function()
  it('excludes the idle drain (UDP forward: the server receives)', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port })
    local ok, err = pcall(function()
      check(assert(traffic.run { host = '127.0.0.1', port = port, proto = 'udp',
        bitrate_bps = RATE, length_bytes = 1200, duration_s = 2, interval_s = PERIOD }),
        'forward', 0.05)
    end)
    srv:stop()
    assert(ok, err)
  end)
  it('excludes the idle drain (UDP reverse: the client receives)', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port })
    local ok, err = pcall(function()
      check(assert(traffic.run { host = '127.0.0.1', port = port, proto = 'udp', reverse = true,
        bitrate_bps = RATE, length_bytes = 1200, duration_s = 2, interval_s = PERIOD }),
        'reverse', 0.05)
    end)
    srv:stop()
    assert(ok, err)
  end)
  -- TCP paced by the application in 128 KiB writes: one write is 4 % of a
  -- 0.5 s interval at 50 Mbit/s, so the per-interval bound is 10 %.
  for _, reverse in ipairs { false, true } do
    local label = reverse and 'TCP reverse' or 'TCP forward'
    it('excludes the idle drain (' .. label .. ')', function()
      local port = H.port()
      local srv = assert(traffic.server { port = port })
      local ok, err = pcall(function()
        check(assert(traffic.run { host = '127.0.0.1', port = port, reverse = reverse,
          bitrate_bps = RATE, duration_s = 2, interval_s = PERIOD }), label, 0.10)
      end)
      srv:stop()
      assert(ok, err)
    end)
  end
  -- bidir: the client both sends and receives; its final interval reached
  -- the control thread's stop time, after everything counted, and held a
  -- 0-byte sliver (2.00-2.00 s) in every entry
  it('has no 0-byte final sliver (UDP bidir)', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port })
    local ok, err = pcall(function()
      local res = assert(traffic.run { host = '127.0.0.1', port = port, proto = 'udp',
        bidir = true, bitrate_bps = RATE, length_bytes = 1200, duration_s = 2,
        interval_s = PERIOD })
      H.identities(res, 'bidir')
      assert.equal(4, #res.intervals)
      for i, iv in ipairs(res.intervals) do
        for _, e in ipairs(iv.streams) do
          assert(e.bytes > 0 and e.seconds <= PERIOD * 1.1, string.format(
            'interval %d: %s %s %s: %d bytes over %.4f s', i, e.direction or '?', e.role,
            e.side, e.bytes, e.seconds))
        end
      end
    end)
    srv:stop()
    assert(ok, err)
  end)
end)
