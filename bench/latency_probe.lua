-- The latency probe's accuracy and cost on this host (loopback), beside
-- ping through the same path:
--
--   bin/qoslab run bench/latency_probe.lua [SECONDS]   (default 30)
--
-- 1. idle RTT on loopback: a 10 s probe at 10 ms intervals per protocol
--    (udp and tcp against an in-process qoslab server, icmp), beside
--    `ping -c 1000 -i 0.01 127.0.0.1` (root may ping that fast);
-- 2. the probe's own CPU at 10 ms intervals: a SECONDS-long UDP probe, its
--    thread's time on CPU from /proc/self/task/TID/schedstat (ns; the
--    thread is named "ql-probe"), as a share of one core.
local qoslab = require 'qoslab'
local core = require 'qoslab.core'

local secs = tonumber((...) or '30')
assert(secs and secs >= 1, 'usage: latency_probe.lua [SECONDS >= 1]')

local srv <close> = assert(qoslab.server { port = 0, bind_address = '127.0.0.1' })
local port = srv:port()

local function row(name, l)
  print(string.format('%-22s %6d %8.4f %8.4f %8.4f %8.4f %8.4f', name, l.samples, l.rtt_ms.min,
    l.rtt_ms.p50, l.rtt_ms.p90, l.rtt_ms.p99, l.rtt_ms.max))
end

print(string.format('%-22s %6s %8s %8s %8s %8s %8s', 'loopback idle RTT', 'n', 'min ms', 'p50 ms',
  'p90 ms', 'p99 ms', 'max ms'))
for _, proto in ipairs { 'udp', 'tcp', 'icmp' } do
  local l = assert(qoslab.latency.probe { host = '127.0.0.1', port = port, proto = proto,
    interval_ms = 10, duration_s = 10 })
  row('probe ' .. proto, l)
  if proto ~= 'icmp' then
    print(string.format('%-22s %6s %8s %8.4f %8s %8.4f', '  of it server hold', '', '',
      l.server_hold_ms.p50, '', l.server_hold_ms.p99))
  end
end

-- ping's own numbers through the same loopback (its rtt lines, in ms)
local p = io.popen('ping -n -q -c 1000 -i 0.01 127.0.0.1 2>&1')
local out = p:read('a')
p:close()
local mn, avg, mx, mdev = out:match('= ([%d.]+)/([%d.]+)/([%d.]+)/([%d.]+) ms')
print(string.format('%-22s %6s %8s %8s (avg %s, max %s, mdev %s)', 'ping -i 0.01', '1000',
  tostring(mn), '', tostring(avg), tostring(mx), tostring(mdev)))

-- the probe thread's CPU
local function probe_tid()
  -- /proc/self would be the ls process: name our own pid
  local f = assert(io.open('/proc/self/stat'))
  local me = f:read('l'):match('^(%d+)')
  f:close()
  local d = io.popen('ls /proc/' .. me .. '/task')
  local tids = d:read('a')
  d:close()
  for tid in tids:gmatch('%d+') do
    local c = io.open('/proc/' .. me .. '/task/' .. tid .. '/comm')
    local name = c and c:read('l')
    if c then c:close() end
    if name == 'ql-probe' then return me, tid end
  end
  return nil
end

local pr = assert(core.probe_start { host = '127.0.0.1', port = port, interval_ms = 10 })
local pid, tid = probe_tid()
assert(pid, 'no ql-probe thread found')
local function on_cpu_ns()
  local f = assert(io.open(string.format('/proc/%s/task/%s/schedstat', pid, tid)))
  local ns = tonumber(f:read('l'):match('^(%d+)'))
  f:close()
  return ns
end
local c0, t0 = on_cpu_ns(), core.now()
core.sleep(secs)
local c1, t1 = on_cpu_ns(), core.now()
pr:stop()
local l = pr:latency()
print(string.format('probe thread CPU at 10 ms intervals: %.3f ms on CPU in %.1f s = %.3f %% of a '
  .. 'core (%d requests, %.2f us each); rtt p50 %.4f ms over the run', (c1 - c0) / 1e6, t1 - t0,
  (c1 - c0) / 1e9 / (t1 - t0) * 100, l.sent, (c1 - c0) / 1e3 / l.sent, l.rtt_ms.p50))
