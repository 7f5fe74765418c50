-- The native impairment link (qoslab.link.impair_link) against a plain veth
-- pair: TCP goodput at zero delay (MTU 1500; the link without and with GSO
-- super-packets, the veth with offloads off and on), then the link's sender
-- lateness under a 50 ms delay at a moderate UDP load.
--
--   bin/qoslab run --host bench/impair_link.lua [-- duration_s]     (default 5)
--
-- Needs root. Namespaces are made and removed here.
local link = require 'qoslab.link'
local netns = require 'qoslab.netns'
local traffic = require 'qoslab.traffic'

local dur = math.tointeger(tonumber((...) or '5'))
assert(dur and dur >= 1, 'usage: impair_link.lua [duration_s >= 1]')

local A_ADDR, B_ADDR = '10.251.0.1', '10.251.0.2'

-- Two namespaces with lo up, removed when the returned value is closed.
local function pair()
  local a, b = netns.unique_name('qlbench'), netns.unique_name('qlbench')
  assert(netns.add(a))
  assert(netns.add(b))
  for _, ns in ipairs { a, b } do assert(link.set('lo', { up = true, netns = ns })) end
  return a, b, setmetatable({}, { __close = function()
    netns.delete(a)
    netns.delete(b)
  end })
end

local function run(a, b, o)
  local srv <close> = assert(traffic.server { port = 0, netns = b })
  o.host, o.port, o.netns, o.duration_s, o.interval_s = B_ADDR, srv:port(), a, dur, 1
  return assert(traffic.run(o))
end

print(string.format('%-24s %16s %16s', 'path (TCP, MTU 1500)', 'received_Mbit/s', 'tcp_retransmits'))
for _, c in ipairs {
  { 'link', false }, { 'link', true }, { 'veth', false }, { 'veth', true },
} do
  local a, b, _ <close> = pair()
  local l, label
  if c[1] == 'link' then
    l = assert(link.impair_link { a_netns = a, b_netns = b, a_addr = A_ADDR, b_addr = B_ADDR,
      gso = c[2] })
    label = 'link gso=' .. tostring(c[2])
  else
    assert(link.add_veth { name = 'qlbva', peer = 'qlbvb', netns = a, peer_netns = b })
    for _, e in ipairs { { 'qlbva', a, A_ADDR }, { 'qlbvb', b, B_ADDR } } do
      local o = { netns = e[2] }
      assert(link.offloads(e[1], { tso = c[2], gso = c[2], gro = c[2] }, o))
      assert(link.set(e[1], { up = true, netns = e[2] }))
      assert(link.addr_add(e[1], e[3] .. '/24', o))
    end
    label = 'veth offloads=' .. tostring(c[2])
  end
  local res = run(a, b, {})
  print(string.format('%-24s %16.1f %16d', label, res.received.bits_per_second / 1e6,
    res.sent.retransmits or 0))
  if l then
    local st = l:stats()
    assert(not st.failed, st.failed)
    l:close()
  end
end

print()
print(string.format('%-30s %10s %12s %12s %12s %10s', 'link, 50 ms forward delay', 'samples',
  'late_p99_ms', 'late_max_ms', 'qdelay_ms', 'drops'))
for _, rate in ipairs { 10e6, 50e6 } do
  local a, b, _ <close> = pair()
  local l <close> = assert(link.impair_link { a_netns = a, b_netns = b, a_addr = A_ADDR,
    b_addr = B_ADDR, forward = { delay_ms = 50 } })
  run(a, b, { proto = 'udp', bitrate_bps = rate, length_bytes = 1200 })
  local f = l:stats().forward
  print(string.format('%-30s %10d %12.3f %12.3f %12.3f %10d',
    string.format('UDP %.0f Mbit/s, 1200 B', rate / 1e6), f.lateness_samples, f.lateness_p99_ms,
    f.lateness_max_ms, f.queue_delay_mean_ms, f.drops))
end
