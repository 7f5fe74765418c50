-- Client and server in two namespaces joined by a veth pair, in one process
-- (the engine's threads enter their namespace), and a qoslab client in one
-- namespace against iperf3 -s in the other. Namespaces are created by the
-- spec and removed also when it fails.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('qoslab.traffic across namespaces', function()
    pending('core.traffic_client is not in this build (engine binding not merged yet)')
  end)
  return
end

describe('qoslab.traffic across namespaces', function()
  local pair, srv
  local port = 5201

  setup(function()
    pair = H.netns_pair { offloads_off = false }
    local err, code
    srv, err, code = traffic.server { port = port, netns = pair.b }
    assert(srv, tostring(err) .. ' ' .. tostring(code))
  end)

  teardown(function()
    if srv then srv:stop() end
    if pair then pair.close() end
    H.cleanup_tmp()
  end)

  local function run(o, label)
    o.host, o.port, o.netns = pair.b_addr, port, pair.a
    o.duration_s = o.duration_s or 1
    o.interval_s = o.interval_s or 0.5
    local res, msg, code = traffic.run(o)
    assert(res, string.format('%s: %s (%s)', label, tostring(msg), tostring(code)))
    H.identities(res, label)
    return res
  end

  it('TCP forward and reverse over the veth pair', function()
    local res = run({ bitrate_bps = 200e6 }, 'tcp netns')
    assert.equal(res.sent.bytes, res.received.bytes)
    assert.equal(pair.b_addr, res.host)
    res = run({ bitrate_bps = 200e6, reverse = true, parallel = 2 }, 'tcp netns -R -P 2')
    assert.equal(res.sent.bytes, res.received.bytes)
  end)

  it('UDP bidir over the veth pair', function()
    local res = run({ proto = 'udp', bitrate_bps = 10e6, length_bytes = 1400, bidir = true },
      'udp netns bidir')
    H.paced(res.sent.bits_per_second, 10e6, 'forward paced rate')
    H.paced(res.reverse_sent.bits_per_second, 10e6, 'reverse paced rate')
  end)

  it('the server is not reachable from the root namespace', function()
    local res, _, code = traffic.run { host = pair.b_addr, port = port, duration_s = 1,
      connect_timeout_s = 1 }
    assert.is_nil(res)
    assert.is_string(code)
  end)

  it('a missing namespace is a failure with a code, not a crash', function()
    local s, msg, code = traffic.server { port = port, netns = 'qoslab-missing-' .. H.pid }
    assert.is_nil(s)
    assert.equal('ENOENT', code)
    assert.matches('qoslab%-missing', msg)
  end)

  it('qoslab client in A against iperf3 -s in B', function()
    if not H.sh('iperf3 --version') then return pending('iperf3 is not installed') end
    local p2 = 5301
    local out = H.tmp('iperf3-netns.json')
    local pid = H.spawn(string.format('exec ip netns exec %s iperf3 -s -1 -J -p %d', pair.b, p2),
      out, out .. '.err')
    local ok, err = pcall(function()
      assert(H.wait_listen(p2, pair.b, 5), 'iperf3 -s did not listen in ' .. pair.b)
      local res = assert(traffic.run { host = pair.b_addr, port = p2, netns = pair.a,
        duration_s = 1, proto = 'udp', bitrate_bps = 20e6, length_bytes = 1400 })
      assert.equal('iperf3', res.peer)
      H.identities(res, 'udp to iperf3 in netns')
      assert(H.wait_exit(pid, 10), 'iperf3 -s -1 did not exit')
      local j = require('cjson').decode(H.read(out))
      assert.equal(j['end'].sum_received.packets,
        res.received.unique_packets + res.received.lost_packets)
    end)
    H.kill(pid)
    assert(ok, err)
  end)
end)
