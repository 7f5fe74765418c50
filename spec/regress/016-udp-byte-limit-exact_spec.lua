-- 016: a UDP test limited to 5 MiB sent 5 244 320 bytes (1 440 over: 3 592
-- whole 1460-byte datagrams) while the README promised the exact limit: a
-- UDP sender reserved whole datagrams from the budget. Now the last
-- datagram carries what is left, and where that is less than a header the
-- one before gives up the difference (5 MiB = 3 591 x 1460 + 20, under the
-- 24-byte header of two qoslab ends). Both ends count exactly the limit,
-- forward and reverse, with one stream and with three sharing the budget;
-- TCP too.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local MIB5 = 5 * 1024 * 1024

local function server_result(srv, n)
  local t_end = H.now() + 5
  while srv:finished() < n and H.now() < t_end do H.sleep(0.05) end
  local list = srv:results()
  return assert(list[#list], 'the server kept no result')
end

local CASES = {
  -- the remainder (20 B) is below the header: the last two are shortened
  { proto = 'udp', bytes = MIB5, length_bytes = 1460 },
  -- a remainder of 1003 B: only the last one is
  { proto = 'udp', bytes = MIB5 + 983, length_bytes = 1460, parallel = 3 },
  -- a whole number of datagrams: nothing shortened
  { proto = 'udp', bytes = 1000 * 1200, length_bytes = 1200 },
  { proto = 'tcp', bytes = MIB5 + 7 },
  { proto = 'tcp', bytes = MIB5 + 7, parallel = 3 },
}

describe('regress 016 a byte limit is exact', function()
  local port = H.port()
  local srv
  setup(function() srv = assert(traffic.server { port = port }) end)
  teardown(function() if srv then srv:stop() end end)
  local done = 0

  for _, c in ipairs(CASES) do
    for _, reverse in ipairs { false, true } do
      local label = string.format('%s %d B x%d %s', c.proto, c.bytes, c.parallel or 1,
        reverse and 'reverse' or 'forward')
      it(label, function()
        local o = { host = '127.0.0.1', port = port, proto = c.proto, bytes = c.bytes,
          parallel = c.parallel, reverse = reverse, length_bytes = c.length_bytes }
        if c.proto == 'udp' then o.bitrate_bps = 400e6 end
        local res = assert(traffic.run(o))
        done = done + 1
        assert.equal(c.bytes, res.sent.bytes, label .. ': sender bytes')
        local n = 0
        for _, s in ipairs(res.streams) do n = n + s.sender.bytes end
        assert.equal(c.bytes, n, label .. ': sum of the streams')
        if c.proto == 'udp' then
          local len = c.length_bytes
          assert.equal((c.bytes + len - 1) // len, res.sent.packets, label .. ': datagrams')
          assert.equal(res.sent.packets, res.received.unique_packets + res.received.lost_packets)
          if res.received.lost_packets == 0 then
            assert.equal(c.bytes, res.received.bytes, label .. ': receiver bytes')
          end
        else
          assert.equal(c.bytes, res.received.bytes, label .. ': receiver bytes')
        end
        H.identities(res, label)
        -- the server's own result books the same bytes
        local r = server_result(srv, done)
        assert.equal(c.bytes, r.sent.bytes, label .. ': server sender bytes')
        if c.proto == 'tcp' or r.received.lost_packets == 0 then
          assert.equal(c.bytes, r.received.bytes, label .. ': server receiver bytes')
        end
      end)
    end
  end
end)
