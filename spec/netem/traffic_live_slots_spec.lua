-- Live interval records between two qoslab ends over a delayed, jittery,
-- lossy path (netem 40 ms ± 10 ms, 1 % loss each way): record k holds both
-- ends' entries of grid slot k, exactly as the final result's interval k,
-- also in the tail (a TCP sender waiting for its acknowledgements, a
-- receiver draining), and comes at its tick. Measured in the guest: 15/15,
-- 13/13 and 8/8 records equal, none missing, each record at a constant
-- offset after its end (the handshake before the test's clock started).
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

local netem_available = H.netem_available

local function entries(iv)
  local t = {}
  for _, e in ipairs(iv.streams) do
    t[#t + 1] = string.format('%s %d %s %d', e.side, e.id, e.role, e.bytes)
  end
  table.sort(t)
  return table.concat(t, '; ')
end

describe('live records by grid slot under netem', function()
  if not core.traffic_client or not netem_available() then
    pending('needs sch_netem (run in the guest)')
    return
  end
  for _, o in ipairs { { label = 'tcp' }, { label = 'tcp reverse', reverse = true },
                       { label = 'udp', proto = 'udp', bitrate_bps = 5e6 } } do
    it(o.label, function()
      local label = o.label
      o.label = nil
      local pair <close> = H.netns_pair {}
      for _, x in ipairs { { pair.a, pair.va }, { pair.b, pair.vb } } do
        H.must(string.format('tc -n %s qdisc replace dev %s root netem delay 40ms 10ms loss 1%%',
          x[1], x[2]))
      end
      local port = H.port()
      local srv <close> = assert(traffic.server { port = port, netns = pair.b })
      o.host, o.port, o.netns, o.interval_s, o.duration_s = pair.b_addr, port, pair.a, 0.5, 3
      o.bitrate_bps = o.bitrate_bps or 20e6
      local t0 = H.now()
      local h <close> = assert(traffic.client(o):start())
      local live, at = {}, {}
      for iv in h:intervals() do
        live[#live + 1] = iv
        at[#live] = H.now() - t0 - iv.end_s
      end
      local res = assert(h:wait())
      assert.equal(#res.intervals, #live)
      for k, iv in ipairs(live) do
        assert.equal(res.intervals[k].end_s, iv.end_s)
        assert.equal(false, iv.peer_missing, label .. ': record ' .. k)
        assert.equal(entries(res.intervals[k]), entries(iv), label .. ': record ' .. k)
      end
      -- The live records' bytes add up to the totals. Their UDP loss does
      -- not: the loss ruled when the sender's final count arrives (after
      -- the last record went out) is in the result's last interval only.
      local copy = {}
      for key, v in pairs(res) do copy[key] = v end
      copy.intervals = {}
      for k, iv in ipairs(live) do
        local c = { start_s = iv.start_s, end_s = iv.end_s, seconds = iv.seconds,
          omitted = iv.omitted, sum = iv.sum, streams = {} }
        for j, e in ipairs(iv.streams) do
          c.streams[j] = { id = e.id, direction = e.direction, role = e.role, bytes = e.bytes,
            bits_per_second = e.bits_per_second }
        end
        copy.intervals[k] = c
      end
      H.identities(copy, label .. ' (live records)')
      -- every record but the last at the same offset after its end (the
      -- handshake): held for the server's entries at most a scheduling
      -- slip. Measured in the emulated guest: spread 0.02 s usually, but
      -- 0.386 and 0.403 s once each (2026-11-30, one record, its server
      -- entries present: one late tick of the TCG guest). So one record may
      -- slip, by less than a full hold (300 ms + 2 x RTT ~ 0.48 s, what a
      -- record waiting in vain for missing entries shows); the others
      -- within 0.25 s of the earliest.
      local offs = {}
      for k = 1, #live - 1 do offs[#offs + 1] = at[k] end
      table.sort(offs)
      local lo, hi = offs[1] or 0, offs[#offs] or 0
      local second = offs[#offs - 1] or lo
      print(string.format('  [live netem] %s: %d records, offsets %.3f..%.3f s', label, #live, lo, hi))
      assert(second - lo < 0.25, string.format('%s: two records late, offsets %.3f..%.3f s',
        label, lo, second))
      assert(hi - lo < 0.45, string.format('%s: record offsets spread %.3f s', label, hi - lo))
    end)
  end
end)
