-- qoslab.testbed{bottleneck = "router"} with real netem (guest): impair
-- and reverse_impair sit on the router's egress towards the server and
-- towards the client (under its tbf), read back there, and delay each way
-- as configured: the UDP probe's one-way delays (one clock) grow by 20 ms up
-- and 30 ms down over the same path's without netem, its RTT by 50 ms (each
-- within 2 ms: the emulated guest forwards through three namespaces, and
-- its own delay, a few ms on a loaded host, is measured first and taken
-- off), and the hosts' own egress holds no qdisc of the testbed.
local latency = require 'qoslab.latency'
local shape = require 'qoslab.shape'
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

describe('router testbed with netem (guest)', function()
  if not H.netem_available() then
    pending('this kernel has no sch_netem (runs in the guest)')
    return
  end

  it('delays 20 ms up and 30 ms down on the router', function()
    local tb <close> = assert(testbed { rate_bps = 100e6, bottleneck = 'router' })
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local function probe(s)
      return assert(latency.probe { host = tb.server_addr, port = srv:port(), netns = tb.client_netns,
        interval_ms = 10, duration_s = s })
    end
    local idle = probe(1)
    assert(tb:impair({ delay_ms = 20 }, 'forward'))
    assert(tb:impair({ delay_ms = 30 }, 'reverse'))
    local got = assert(tb:get())
    assert.equal(20, got.client.impair.delay_ms)
    assert.equal(30, got.server.impair.delay_ms)
    assert.is_nil(shape.get(tb.client_ifname, { netns = tb.client_netns }))
    assert.is_nil(shape.get(tb.server_ifname, { netns = tb.server_netns }))
    local lat = probe(2)
    print(string.format('\n  router netem 20 ms up, 30 ms down: %d samples, rtt p50 %.3f ms, up p50 %.3f, '
      .. 'down p50 %.3f ms (without netem: rtt p50 %.3f, up %.3f, down %.3f ms)', lat.samples,
      lat.rtt_ms.p50, lat.owd_up_ms.p50, lat.owd_down_ms.p50, idle.rtt_ms.p50, idle.owd_up_ms.p50,
      idle.owd_down_ms.p50))
    assert.equal(0, lat.lost)
    assert.is_true(lat.rtt_ms.min >= 50, 'rtt min ' .. lat.rtt_ms.min)
    assert.is_true(math.abs(lat.rtt_ms.p50 - idle.rtt_ms.p50 - 50) < 2, 'rtt p50 ' .. lat.rtt_ms.p50)
    assert.is_true(math.abs(lat.owd_up_ms.p50 - idle.owd_up_ms.p50 - 20) < 2, 'up p50 ' .. lat.owd_up_ms.p50)
    assert.is_true(math.abs(lat.owd_down_ms.p50 - idle.owd_down_ms.p50 - 30) < 2,
      'down p50 ' .. lat.owd_down_ms.p50)
    local st = assert(tb:stats())
    local kinds = {}
    for _, q in ipairs(st.client) do kinds[#kinds + 1] = q.kind end
    assert.same({ 'tbf', 'netem' }, kinds)
  end)
end)
