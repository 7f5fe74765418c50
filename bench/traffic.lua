-- bench/traffic.lua - the traffic engine side by side with iperf3 and iperf
-- (Debian packages) in one run on loopback: TCP 1 and 4 streams (throughput,
-- CPU), UDP unpaced datagrams/s at 64 B and 1400 B, UDP paced at 100 Mbit/s
-- (every 100 ms interval's achieved rate against the target).
--
--   lua5.4 bench/traffic.lua [seconds] [results.md]
--
-- Writes a Markdown table (default bench/RESULTS-traffic.md) with the
-- commands used. Numbers depend on the host's load: the report prints the
-- load average next to them.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
package.cpath = './' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;' .. package.cpath
local core = require 'qoslab.core'
local ok_json, cjson = pcall(require, 'cjson')

local secs = tonumber(arg[1]) or 3
local out_path = arg[2] or 'bench/RESULTS-traffic.md'
local base_port = 25000 + (tonumber(io.open('/proc/self/stat'):read('*n')) or 0) % 20000

local function sh(cmd)
  local f = io.popen(cmd .. ' 2>&1')
  local s = f:read('*a')
  f:close()
  return s
end

local function has(prog) return sh('command -v ' .. prog) ~= '' end

local rows = {}
local function row(t) rows[#rows + 1] = t end

-- ------------------------------------------------------------- qoslab ---
local srv = assert(core.traffic_server { port = 0, bind_address = '127.0.0.1' })
local function qoslab(o)
  o.host, o.port, o.duration_s = '127.0.0.1', srv:port(), o.duration_s or secs
  local r = assert(core.traffic_client(o):wait())
  return r
end

-- --------------------------------------------------------------- iperf3 --
local i3port = base_port + 1
local pidfile = os.tmpname()
local have3 = has('iperf3') and ok_json
if have3 then sh(string.format('iperf3 -s -p %d -D --pidfile %s', i3port, pidfile)) end
local function iperf3(flags)
  local txt = sh(string.format('timeout %d iperf3 -c 127.0.0.1 -p %d -J -t %d %s',
    secs + 20, i3port, secs, flags))
  local ok, j = pcall(cjson.decode, txt)
  if not ok or j.error then return nil end
  return j
end

-- ---------------------------------------------------------------- iperf2 --
local have2 = has('iperf')
local function iperf2(flags, udp)
  local port = base_port + (udp and 3 or 2)
  local spid = sh(string.format('sh -c \'iperf -s %s -p %d >/dev/null 2>&1 & echo $!\'',
    udp and '-u' or '', port)):match('%d+')
  sh('sleep 0.3')
  local txt = sh(string.format('timeout %d iperf -c 127.0.0.1 -p %d -t %d -y C %s',
    secs + 10, port, secs, flags))
  if spid then sh('kill ' .. spid) end
  -- CSV lines: ...,interval,bytes,bits_per_second[,jitter,lost,total,...]
  local last
  for line in txt:gmatch('[^\n]+') do if line:match('^%d+,') then last = line end end
  if not last then return nil end
  local f = {}
  for v in last:gmatch('[^,]+') do f[#f + 1] = v end
  return f
end

local function mbps(x) return x and string.format('%.0f', x / 1e6) or 'n/a' end
local function num(x) return x and string.format('%.0f', x) or 'n/a' end

-- TCP 1 and 4 streams
for _, p in ipairs { 1, 4 } do
  local r = qoslab { parallel = p }
  local j = have3 and iperf3('-P ' .. p)
  local f = have2 and iperf2('-P ' .. p)
  row { what = string.format('TCP %d stream(s), Mbit/s received', p),
    q = mbps(r.received.bits_per_second),
    i3 = j and mbps(j['end'].sum_received.bits_per_second) or 'n/a',
    i2 = f and mbps(tonumber(f[9])) or 'n/a',
    note = string.format('CPU qoslab client %.0f %% / server %.0f %%; iperf3 host %s %%',
      r.cpu.client.total_pct, r.cpu.server and r.cpu.server.total_pct or 0,
      j and string.format('%.0f', j['end'].cpu_utilization_percent.host_total) or 'n/a') }
end

-- UDP unpaced datagrams per second
for _, len in ipairs { 64, 1400 } do
  local r = qoslab { proto = 'udp', bitrate_bps = 0, length_bytes = len }
  local j = have3 and iperf3('-u -b 0 -l ' .. len)
  local f = have2 and iperf2('-u -b 100G -l ' .. len, true)
  local i3 = j and j['end'].sum
  row { what = string.format('UDP %d B unpaced, datagrams/s sent (received)', len),
    q = string.format('%s (%s)', num(r.sent.packets / r.sent.seconds),
      num(r.received.unique_packets / r.received.seconds)),
    i3 = i3 and string.format('%s (%s)', num(i3.packets / i3.seconds),
      num((i3.packets - i3.lost_packets) / i3.seconds)) or 'n/a',
    i2 = f and tonumber(f[8]) and num(tonumber(f[8]) / len / secs) or 'n/a',
    note = 'iperf: sent only (its CSV mode prints no server report)' }
end

-- UDP paced at 100 Mbit/s: worst 100 ms interval against the target
local function worst(list)
  local w = 0
  for _, bps in ipairs(list) do w = math.max(w, math.abs(bps / 100e6 - 1)) end
  return string.format('%.1f %%', 100 * w)
end
do
  local r = qoslab { proto = 'udp', bitrate_bps = 100000000, length_bytes = 1400, interval_s = 0.1 }
  local qs = {}
  for i, iv in ipairs(r.intervals) do
    -- the last interval is the partial tail after the planned end
    if i < #r.intervals and iv.sum.sender then qs[#qs + 1] = iv.sum.sender.bits_per_second end
  end
  local j = have3 and iperf3('-u -b 100M -l 1400 -i 0.1')
  local is = {}
  if j then
    for i, iv in ipairs(j.intervals) do
      if i < #j.intervals then is[#is + 1] = iv.sum.bits_per_second end
    end
  end
  row { what = 'UDP paced 100 Mbit/s, worst 100 ms interval vs target',
    q = worst(qs), i3 = j and worst(is) or 'n/a', i2 = 'n/a',
    note = string.format('%d qoslab intervals, %d iperf3 intervals', #qs, #is) }
end

srv:stop()
if have3 then sh('kill $(cat ' .. pidfile .. ') 2>/dev/null') end
os.remove(pidfile)

local load = (io.open('/proc/loadavg'):read('*l') or ''):match('^(%S+ %S+ %S+)')
local lines = {
  '# Traffic engine vs iperf3 and iperf (one run, loopback)', '',
  string.format('Run: `lua5.4 bench/traffic.lua %d` on %s, %s, load average %s.', secs,
    sh('uname -r'):gsub('%s+$', ''), sh('nproc'):gsub('%s+$', '') .. ' CPUs', load), '',
  'Commands: qoslab via `core.traffic_client` against an in-process `core.traffic_server`;',
  string.format('`iperf3 -c 127.0.0.1 -J -t %d ...` against `iperf3 -s -D`;', secs),
  string.format('`iperf -c 127.0.0.1 -y C -t %d ...` against `iperf -s [-u]`.', secs), '',
  '| measurement | qoslab | iperf3 | iperf | note |', '|---|---|---|---|---|' }
for _, r in ipairs(rows) do
  lines[#lines + 1] = string.format('| %s | %s | %s | %s | %s |', r.what, r.q, r.i3, r.i2, r.note)
end
local text = table.concat(lines, '\n') .. '\n'
io.write(text)
local f = io.open(out_path, 'w')
if f then f:write(text); f:close() end
