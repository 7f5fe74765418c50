-- Rate limit accuracy: TCP goodput through qoslab.testbed's tbf shaper,
-- measured with iperf3 between the testbed's namespaces.
--
--   bin/qoslab run bench/rate_limit.lua [duration_s]     (default 3)
--
-- Needs root and iperf3.
local testbed = require 'qoslab.testbed'
local cjson = require 'cjson'

local dur = math.tointeger(tonumber((...) or '3'))
assert(dur and dur >= 1, 'usage: rate_limit.lua [duration_s >= 1]')
print(string.format('%-10s %-9s %16s %16s', 'rate_bps', 'offloads', 'received_Mbit/s', 'tcp_retransmits'))
for _, c in ipairs { { 100000000, false }, { 1000000000, false }, { 1000000000, true } } do
  local tb <close> = assert(testbed { rate_bps = c[1], offloads = c[2] })
  local pidfile = os.tmpname()
  assert(os.execute('ip netns exec ' .. tb.server_netns .. ' iperf3 -s -1 -D -B ' .. tb.server_addr
    .. ' -I ' .. pidfile))
  local res
  for _ = 1, 20 do  -- until the daemon listens
    local p = io.popen('ip netns exec ' .. tb.client_netns .. ' iperf3 -c ' .. tb.server_addr
      .. ' -t ' .. dur .. ' -J 2>/dev/null')
    local out = p:read('a')
    p:close()
    if out:match('"sum_received"') then res = cjson.decode(out) break end
    os.execute('sleep 0.1')
  end
  os.remove(pidfile)
  assert(res, 'iperf3 did not run')
  print(string.format('%-10.0f %-9s %16.1f %16d', c[1], tostring(c[2]),
    res['end'].sum_received.bits_per_second / 1e6, res['end'].sum_sent.retransmits))
end
