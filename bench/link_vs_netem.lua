-- The native impairment link against kernel netem, point by point: the same
-- small sweep (one-way delay 10, 100, 300 ms x loss 0, 5 %, under a 20 Mbit/s
-- rate in both) through qoslab.testbed{backend = "link"} on this host and
-- through qoslab.testbed{backend = "netem"} in a qemu guest whose stock
-- kernel has sch_netem (qoslab.vm), then the table of both and their ratio.
-- Per point: a UDP test at 10 Mbit/s (1200-byte datagrams) with a UDP
-- probe beside it (its RTT p50, and the datagram loss), and a TCP test with
-- CUBIC (its goodput). A bench, not a spec: it needs the guest and this host at once,
-- and the guest's emulated CPU makes a run minutes long.
--
--   bin/qoslab run --host bench/link_vs_netem.lua [-- duration_s]   (default 4)
--
-- Needs root (and, for the guest, what `make check-netem` needs).
-- Internally: `... guest OUT duration_s` runs the netem half in the guest.
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'
local vm = require 'qoslab.vm'

local args = { ... }
local guest = args[1] == 'guest'
local dur = math.tointeger(tonumber(guest and args[3] or args[1] or '4'))
assert(dur and dur >= 2, 'usage: link_vs_netem.lua [duration_s >= 2]')

local DELAYS_MS, LOSSES_PCT = { 10, 100, 300 }, { 0, 5 }
local RATE_BPS = 20e6

-- One point on one backend: { rtt_p50_ms, udp_loss_pct, tcp_mbps }.
local function point(backend, delay_ms, loss_pct)
  local tb <close> = assert(testbed { backend = backend,
    impair = { delay_ms = delay_ms, loss_pct = loss_pct, rate_bps = RATE_BPS, limit_packets = 2000 } })
  local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
  -- CUBIC on both: this host's default may be BBR (which ignores random
  -- loss), the guest's stock kernel's is CUBIC
  local o = { host = tb.server_addr, port = srv:port(), netns = tb.client_netns, duration_s = dur,
    interval_s = 1, congestion = 'cubic' }
  local u = {}
  for k, v in pairs(o) do u[k] = v end
  u.proto, u.bitrate_bps, u.length_bytes, u.window_bytes, u.congestion = 'udp', 10e6, 1200, 4194304, nil
  u.probe = { proto = 'udp', interval_ms = 10 }
  local ures = assert(traffic.run(u))
  local tres = assert(traffic.run(o))
  local r = ures.received
  return { ures.latency.rtt_ms.p50, 100 * r.lost_packets / (r.lost_packets + r.unique_packets),
    tres.received.bits_per_second / 1e6 }
end

local function sweep(backend)
  local out = {}
  for _, d in ipairs(DELAYS_MS) do
    for _, l in ipairs(LOSSES_PCT) do
      out[#out + 1] = { d, l, point(backend, d, l) }
    end
  end
  return out
end

if guest then
  local f = assert(io.open(args[2], 'w'))
  for _, row in ipairs(sweep('netem')) do
    f:write(string.format('%d %g %.6f %.6f %.6f\n', row[1], row[2], row[3][1], row[3][2], row[3][3]))
  end
  f:close()
  return
end

local native = sweep('link')
local dir = os.tmpname()
os.remove(dir)
assert(os.execute('mkdir -m 700 ' .. dir))
local out = dir .. '/netem.txt'
local st, msg, code = vm.run_script { script = 'bench/link_vs_netem.lua',
  args = { 'guest', out, dur }, rw_dir = dir, timeout_s = 1200 }
assert(st == 0, 'the guest run failed: ' .. tostring(st) .. ' ' .. tostring(msg) .. ' ' .. tostring(code))
local netem = {}
for line in io.lines(out) do
  local d, l, a, b, c = line:match('^(%S+) (%S+) (%S+) (%S+) (%S+)$')
  netem[#netem + 1] = { tonumber(d), tonumber(l), { tonumber(a), tonumber(b), tonumber(c) } }
end
os.remove(out)
os.remove(dir)

print(string.format('%-16s | %-26s | %-26s | %-26s', 'point', 'RTT p50 ms (link/netem)',
  'UDP loss % (link/netem)', 'TCP Mbit/s (link/netem)'))
for i, n in ipairs(native) do
  local g = netem[i]
  assert(g and g[1] == n[1] and g[2] == n[2], 'the guest\'s points differ')
  local cells = {}
  for k = 1, 3 do
    local a, b = n[3][k], g[3][k]
    cells[k] = string.format('%8.3f %8.3f  %s', a, b, b ~= 0 and string.format('%6.3f', a / b) or '   n/a')
  end
  print(string.format('%4d ms, %g %%    | %s | %s | %s', n[1], n[2], cells[1], cells[2], cells[3]))
end
