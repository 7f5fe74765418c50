-- What one loss takes from a TCP sender: kernel netem against the native
-- link. TCP hands its qdiscs GSO packets whatever the device's offloads (the
-- kernel cuts them into segments after the qdisc), so a netem loss takes a
-- whole one, at low rates tcp_min_tso_segs (2) segments; a link that reads
-- the device's segments (gso = false) loses one at a time. Under random
-- loss that changes TCP's goodput: more segments per loss episode.
--
-- Each row: one 8 s CUBIC test through a testbed with delay 10 ms and loss
-- 5 % (forward only, offloads off), the sender's namespace at
-- tcp_min_tso_segs 2 (the default) or 1. Counted: the impairment's drops, the
-- sender's retransmitted segments (ratio: segments per drop) and goodput.
-- netem's rows run in a qemu guest (this host has no sch_netem), the link's
-- here, with gso = false and with gso = true (the testbed's choice).
--
--   bin/qoslab run --host bench/loss_unit.lua
--
-- Needs root and, for the guest, what `make check-netem` needs. About three
-- minutes. Internally `... guest` runs the guest's half.
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'
local link = require 'qoslab.link'
local netns = require 'qoslab.netns'
local vm = require 'qoslab.vm'

local args = { ... }
local guest = args[1] == 'guest'
assert(guest or args[1] == nil, 'usage: loss_unit.lua')

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read('a')
  p:close()
  return out
end

local function measure(label, min_tso_segs, client_netns, server_netns, server_addr, drops)
  sh(string.format('ip netns exec %s sysctl -qw net.ipv4.tcp_min_tso_segs=%d', client_netns, min_tso_segs))
  local srv <close> = assert(traffic.server { port = 0, netns = server_netns })
  local d0 = drops()
  local res = assert(traffic.run { host = server_addr, port = srv:port(), netns = client_netns,
    duration_s = 8, omit_s = 0, congestion = 'cubic' })
  local d = drops() - d0
  local r = res.sent.retransmits
  print(string.format('| %s | %d | %d | %d | %.2f | %.3f |', label, min_tso_segs, d, r, r / math.max(1, d),
    res.received.bits_per_second / 1e6))
  io.stdout:flush()
end

-- netem: a testbed on the guest's kernel.
local function netem_row(min_tso_segs)
  local tb <close> = assert(testbed { backend = 'netem', impair = { delay_ms = 10, loss_pct = 5 } })
  measure('netem (guest)', min_tso_segs, tb.client_netns, tb.server_netns, tb.server_addr, function()
    for _, q in ipairs(assert(tb:stats()).client) do
      if q.kind == 'netem' then return q.drops end
    end
    error('no netem on the client\'s egress')
  end)
end

-- The link with the gso asked for, between two namespaces of its own.
local function link_row(min_tso_segs, gso)
  local a, b = netns.unique_name('qllu'), netns.unique_name('qllu')
  local made = {}
  local _ <close> = setmetatable({}, { __close = function()
    for _, n in ipairs(made) do netns.delete(n) end
  end })
  for _, n in ipairs { a, b } do
    assert(netns.add(n))
    made[#made + 1] = n
    assert(link.set('lo', { up = true, netns = n }))
  end
  local l <close> = assert(link.impair_link { a_netns = a, b_netns = b, a_addr = '10.251.0.1',
    b_addr = '10.251.0.2', gso = gso, forward = { delay_ms = 10, loss_pct = 5 } })
  measure('link, gso = ' .. tostring(gso), min_tso_segs, a, b, '10.251.0.2', function()
    return l:stats().forward.drops
  end)
end

local HEAD = '| path | tcp_min_tso_segs | drops | retransmitted segments | segments per drop | Mbit/s |\n'
  .. '|---|---|---|---|---|---|'

if guest then
  for _ = 1, 2 do
    for _, segs in ipairs { 2, 1 } do netem_row(segs) end
  end
  return
end

print(HEAD)
for _ = 1, 2 do
  for _, segs in ipairs { 2, 1 } do
    link_row(segs, false)
    link_row(segs, true)
  end
end
local st, msg, code = vm.run_script { script = 'bench/loss_unit.lua', args = { 'guest' }, timeout_s = 900 }
assert(st == 0, 'the guest run failed: ' .. tostring(st) .. ' ' .. tostring(msg) .. ' ' .. tostring(code))
