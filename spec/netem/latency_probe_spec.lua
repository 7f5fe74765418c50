-- The latency probe's accuracy through netem (guest): `delay 50ms` on the
-- client's egress of a veth pair delays the requests only, so the round
-- trip is 50 ms plus the path's own; the UDP probe (kernel timestamps) and
-- the ICMP probe must both put their RTT p50 within 1 ms of 50 ms over the
-- same probe's p50 on a veth pair without netem (the guest's own path: it
-- is emulated, TCG, 10-35x slower than the host, and on a loaded host the
-- UDP server's user-space turnaround alone once took 0.8 ms), and ping
-- through the same netem is printed beside them.
local traffic = require 'qoslab.traffic'
local latency = require 'qoslab.latency'
local H = require 'integration.traffic_helper'

describe('latency probe through netem delay 50ms (guest)', function()
  if not H.netem_available() then
    pending('this kernel has no sch_netem (runs in the guest)')
    return
  end

  it('UDP and ICMP RTT p50 within 1 ms of 50 ms, ping beside', function()
    local pair <close> = H.netns_pair()
    local srv <close> = assert(traffic.server { port = 0, netns = pair.b })
    H.must(string.format('tc -n %s qdisc add dev %s root netem delay 50ms', pair.a, pair.va))
    local idle <close> = H.netns_pair()
    local srv0 <close> = assert(traffic.server { port = 0, netns = idle.b })
    local got, base = {}, {}
    for _, proto in ipairs { 'udp', 'icmp' } do
      local b = assert(latency.probe { host = idle.b_addr, port = srv0:port(), proto = proto,
        netns = idle.a, interval_ms = 10, duration_s = 2 })
      base[proto] = b
      print(string.format('\n  no netem, %s probe: %d samples, rtt min %.3f p50 %.3f p99 %.3f ms',
        proto, b.samples, b.rtt_ms.min, b.rtt_ms.p50, b.rtt_ms.p99))
      local lat = assert(latency.probe { host = pair.b_addr, port = srv:port(), proto = proto,
        netns = pair.a, interval_ms = 10, duration_s = 3 })
      got[proto] = lat
      print(string.format('\n  netem delay 50ms, %s probe: %d samples, lost %d, rtt min %.3f p50 %.3f '
        .. 'p90 %.3f p99 %.3f max %.3f ms%s', proto, lat.samples, lat.lost, lat.rtt_ms.min,
        lat.rtt_ms.p50, lat.rtt_ms.p90, lat.rtt_ms.p99, lat.rtt_ms.max, lat.server_hold_ms
        and string.format(' (server hold p50 %.3f ms; up p50 %.3f, down p50 %.3f ms)',
          lat.server_hold_ms.p50, lat.owd_up_ms.p50, lat.owd_down_ms.p50) or ''))
    end
    local _, out = H.sh(string.format('ip netns exec %s ping -n -q -c 200 -i 0.01 %s', pair.a,
      pair.b_addr))
    print('  ping -c 200 -i 0.01 through the same netem: '
      .. (out:match('rtt min/avg/max/mdev = [^\n]+') or out))
    local _, out2 = H.sh(string.format('ip netns exec %s ping -n -q -c 200 -i 0.01 %s', idle.a,
      idle.b_addr))
    print('  ping -c 200 -i 0.01 on a veth pair without netem (the guest\'s own noise): '
      .. (out2:match('rtt min/avg/max/mdev = [^\n]+') or out2))
    for proto, lat in pairs(got) do
      assert.equal(0, lat.lost, proto)
      local own = base[proto].rtt_ms.p50
      assert.is_true(math.abs(lat.rtt_ms.p50 - own - 50) < 1, string.format(
        '%s p50 %.3f ms, %.3f without netem', proto, lat.rtt_ms.p50, own))
      assert.is_true(lat.rtt_ms.min >= 50, proto .. ' min ' .. lat.rtt_ms.min)
      if lat.owd_up_ms then
        -- one host: the delay is all on the way up
        assert.is_true(math.abs(lat.owd_up_ms.p50 - 50) < 1, 'up p50 ' .. lat.owd_up_ms.p50)
        assert.is_true(lat.owd_down_ms.p50 < 1, 'down p50 ' .. lat.owd_down_ms.p50)
      end
    end
  end)
end)
