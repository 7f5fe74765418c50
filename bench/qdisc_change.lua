-- qdisc change latency: tbf replace on a veth in a namespace made for the
-- run, in-process (qoslab.shape.apply over rtnetlink) against spawning
-- `tc qdisc replace ... tbf ...` for the same change, in the same run.
--
--   bin/qoslab run bench/qdisc_change.lua [N]     (N changes each, default 300)
--
-- Every change alternates between two rates so the kernel really changes the
-- qdisc each time. Latency per change is wall time around the call
-- (CLOCK_MONOTONIC); tc is started the way a Lua script would start it,
-- os.execute (sh -c 'exec tc ...'). Needs root.
local qoslab = require 'qoslab'
local netns, link, shape, timer = qoslab.netns, qoslab.link, qoslab.shape, qoslab.timer

local n = math.tointeger(tonumber((...) or '300'))
assert(n and n >= 10, 'usage: qdisc_change.lua [N >= 10]')

local ns = netns.unique_name('qlbench')
assert(netns.add(ns))
local ok, err = pcall(function()
  assert(link.add_veth { name = 'qlb0', peer = 'qlb1', netns = ns, peer_netns = ns })
  assert(link.set('qlb0', { up = true, netns = ns }))
  local rates = { 100000000, 200000000 }
  local burst, limit = 50000, 300000

  local function stats(t)
    table.sort(t)
    local function q(p) return t[math.max(1, math.ceil(p * #t))] end
    local sum = 0
    for _, v in ipairs(t) do sum = sum + v end
    return { median = q(0.5), p90 = q(0.9), mean = sum / #t, min = t[1], max = t[#t] }
  end

  -- Warm-up (first-time allocations, page faults, the state file).
  for i = 1, 5 do
    assert(shape.apply('qlb0', { kind = 'tbf', rate_bps = rates[i % 2 + 1], burst_bytes = burst,
      limit_bytes = limit }, { netns = ns }))
  end
  local inproc = {}
  for i = 1, n do
    local spec = { kind = 'tbf', rate_bps = rates[i % 2 + 1], burst_bytes = burst, limit_bytes = limit }
    local t0 = timer.now_ns()
    assert(shape.apply('qlb0', spec, { netns = ns }))
    inproc[i] = (timer.now_ns() - t0) / 1e3
  end
  assert(shape.get('qlb0', { netns = ns }).rate_bps == rates[n % 2 + 1])

  local tc = {}
  for i = 1, n do
    local cmd = string.format('exec tc -n %s qdisc replace dev qlb0 root handle 1: tbf rate %dbit burst %d limit %d',
      ns, rates[i % 2 + 1], burst, limit)
    local t0 = timer.now_ns()
    local okc = os.execute(cmd)
    tc[i] = (timer.now_ns() - t0) / 1e3
    assert(okc, 'tc failed: ' .. cmd)
  end
  -- tc's last change is what the kernel has now.
  assert(shape.get('qlb0', { netns = ns }).rate_bps == rates[n % 2 + 1])

  local a, b = stats(inproc), stats(tc)
  local kernel = io.open('/proc/sys/kernel/osrelease'):read('l')
  print(string.format('qdisc change latency (tbf replace on a veth), %d changes each, kernel %s', n, kernel))
  print(string.format('%-22s %10s %10s %10s %10s', 'method', 'median_us', 'p90_us', 'mean_us', 'max_us'))
  print(string.format('%-22s %10.1f %10.1f %10.1f %10.1f', 'qoslab.shape.apply', a.median, a.p90, a.mean, a.max))
  print(string.format('%-22s %10.1f %10.1f %10.1f %10.1f', 'os.execute tc replace', b.median, b.p90, b.mean, b.max))
  print(string.format('speed-up: %.1fx (median), %.1fx (p90); target >= 30x', b.median / a.median, b.p90 / a.p90))
end)
netns.delete(ns)
if not ok then error(err, 0) end
