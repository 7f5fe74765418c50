-- san-loopback.lua - loopback traffic through the Lua binding, for the
-- sanitizer suites where busted cannot run (under a preloaded TSan runtime
-- busted exits silently). Each case asserts the identities of its result;
-- prints "san-loopback: N passed, N failed" and exits non-zero on failure.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
package.cpath = './' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;' .. package.cpath
local core = require 'qoslab.core'

local passed, failed = 0, 0
local function case(name, f)
  local ok, err = pcall(f)
  if ok then passed = passed + 1; print('ok - ' .. name)
  else failed = failed + 1; print('not ok - ' .. name .. ': ' .. tostring(err)) end
end

local function sums(res, key, role)
  local total = 0
  for _, iv in ipairs(res.intervals) do
    if not iv.omitted then
      for _, s in ipairs(iv.streams) do
        if s.role == role and s.direction == (res.reverse and 'reverse' or 'forward') then
          total = total + s.bytes
        end
      end
    end
  end
  assert(total == res[key].bytes, key .. ': sum of intervals ' .. total .. ' ~= ' .. res[key].bytes)
end

local srv <close> = assert(core.traffic_server { port = 0 })
local port = srv:port()

case('tcp forward, 2 streams, live intervals', function()
  local t = assert(core.traffic_client { host = '127.0.0.1', port = port, parallel = 2,
    duration_s = 1, interval_s = 0.2 })
  local n = 0
  while true do
    local iv = t:next_interval(5)
    if not iv then break end
    n = n + 1
  end
  local res = assert(t:wait())
  assert(n >= 4, 'live intervals: ' .. n)
  sums(res, 'sent', 'sender')
  sums(res, 'received', 'receiver')
end)

case('tcp reverse byte limit', function()
  local res = assert(core.traffic_client { host = '127.0.0.1', port = port, reverse = true,
    bytes = 1000001, parallel = 3, interval_s = 0.2 }:wait())
  assert(res.sent.bytes == 1000001 and res.received.bytes == 1000001)
end)

case('udp bidir, books balance', function()
  local res = assert(core.traffic_client { host = '127.0.0.1', port = port, proto = 'udp',
    bidir = true, bitrate_bps = 5000000, length_bytes = 1000, duration_s = 1,
    interval_s = 0.25 }:wait())
  for _, k in ipairs { 'received', 'reverse_received' } do
    local r = res[k]
    local sent = k == 'received' and res.sent.packets or res.reverse_sent.packets
    assert(r.lost_packets + r.unique_packets == sent, k .. ': lost + unique ~= sent')
  end
end)

case('stop ends a long test with a result', function()
  local t = assert(core.traffic_client { host = '127.0.0.1', port = port, duration_s = 30,
    bitrate_bps = 20000000, interval_s = 0.2 })
  t:next_interval(2)
  t:stop()
  local res = assert(t:wait())
  assert(res.duration_s < 5, 'ran ' .. res.duration_s)
end)

case('server results list both views', function()
  assert(#srv:results() >= 4)
end)

print(string.format('san-loopback: %d passed, %d failed', passed, failed))
os.exit(failed == 0 and 0 or 1)
