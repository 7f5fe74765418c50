-- bench/traffic.lua - the traffic engine side by side with iperf3 and iperf
-- (Debian packages) in one run, on loopback and across a veth pair between
-- two namespaces (no shaping): TCP 1 and 4 streams (throughput, CPU), UDP
-- unpaced datagrams/s at 64 B and 1400 B (also with qoslab's udp_gso), UDP
-- paced at 100 Mbit/s (every 100 ms interval's achieved rate against the
-- target).
--
--   lua5.4 bench/traffic.lua [seconds] [results.md]     (root: namespaces)
--
-- Writes a Markdown section (default /tmp/qoslab-bench-traffic.md; the kept
-- copy is a section of bench/RESULTS.md) with the commands used. Numbers
-- depend on the host's load: the report prints the load average before and
-- after.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
package.cpath = './' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;' .. package.cpath
local core = require 'qoslab.core'
local ok_json, cjson = pcall(require, 'cjson')

local secs = tonumber(arg[1]) or 3
local out_path = arg[2] or '/tmp/qoslab-bench-traffic.md'
local base_port = 25000 + (tonumber(io.open('/proc/self/stat'):read('*n')) or 0) % 20000

local function sh(cmd)
  local f = io.popen(cmd .. ' 2>&1')
  local s = f:read('*a')
  f:close()
  return s
end

local function has(prog) return sh('command -v ' .. prog) ~= '' end

local load0 = (io.open('/proc/loadavg'):read('*l') or ''):match('^(%S+ %S+ %S+)')
local rows = {}
local function row(t) rows[#rows + 1] = t end

local function mbps(x) return x and string.format('%.0f', x / 1e6) or 'n/a' end
local function num(x) return x and string.format('%.0f', x) or 'n/a' end
local function ratio(a, b) return (a and b and b > 0) and string.format('%.2f', a / b) or 'n/a' end

-- A path: where the servers listen and how a command enters the client's
-- and the server's namespace ('' on loopback).
-- bench/udp_ceiling.c, built once for the run (nil without a C compiler)
local ceiling_bin = os.tmpname()
if not os.execute(string.format('cc -O2 -o %s bench/udp_ceiling.c 2>/dev/null', ceiling_bin)) then
  os.remove(ceiling_bin)
  ceiling_bin = nil
end
local last_i3s = {}

local function bench_path(P)
  local srv = assert(core.traffic_server { port = 0, bind_address = P.addr, netns = P.srv_ns })
  local function qoslab(o)
    o.host, o.port, o.duration_s = P.addr, srv:port(), o.duration_s or secs
    o.netns = P.cli_ns
    return assert(core.traffic_client(o):wait())
  end
  local i3port = base_port + 1
  local pidfile = os.tmpname()
  local have3 = has('iperf3') and ok_json
  if have3 then sh(string.format('%siperf3 -s -p %d -D --pidfile %s', P.sx, i3port, pidfile)) end
  sh('sleep 0.3')
  local function iperf3(flags)
    local txt = sh(string.format('%stimeout %d iperf3 -c %s -p %d -J -t %d %s', P.cx,
      secs + 20, P.addr, i3port, secs, flags))
    local ok, j = pcall(cjson.decode, txt)
    if not ok or j.error then return nil end
    return j
  end
  local have2 = has('iperf')
  local function iperf2(flags, udp)
    local port = base_port + (udp and 3 or 2)
    local spid = sh(string.format('%ssh -c \'iperf -s %s -p %d >/dev/null 2>&1 & echo $!\'', P.sx,
      udp and '-u' or '', port)):match('%d+')
    sh('sleep 0.3')
    local txt = sh(string.format('%stimeout %d iperf -c %s -p %d -t %d -y C %s', P.cx,
      secs + 10, P.addr, port, secs, flags))
    if spid then sh('kill ' .. spid) end
    -- CSV lines: ...,interval,bytes,bits_per_second[,jitter,lost,total,...]
    local last
    for line in txt:gmatch('[^\n]+') do if line:match('^%d+,') then last = line end end
    if not last then return nil end
    local f = {}
    for v in last:gmatch('[^,]+') do f[#f + 1] = v end
    return f
  end

  -- TCP 1 and 4 streams
  for _, p in ipairs { 1, 4 } do
    local r = qoslab { parallel = p }
    local j = have3 and iperf3('-P ' .. p)
    local f = have2 and iperf2('-P ' .. p)
    local q, i3 = r.received.bits_per_second, j and j['end'].sum_received.bits_per_second
    local i2 = f and tonumber(f[9])
    row { path = P.name, what = string.format('TCP %d stream(s), Mbit/s received', p),
      q = mbps(q), i3 = mbps(i3), i2 = mbps(i2), r3 = ratio(q, i3), r2 = ratio(q, i2),
      note = string.format('CPU qoslab client %.0f %% / server %.0f %%; iperf3 host %s %%',
        r.cpu.client.total_pct, r.cpu.server and r.cpu.server.total_pct or 0,
        j and string.format('%.0f', j['end'].cpu_utilization_percent.host_total) or 'n/a') }
  end

  -- UDP unpaced datagrams per second (ratios on datagrams sent)
  for _, len in ipairs { 64, 1400 } do
    local r = qoslab { proto = 'udp', bitrate_bps = 0, length_bytes = len }
    local g = qoslab { proto = 'udp', bitrate_bps = 0, length_bytes = len, udp_gso = true }
    local j = have3 and iperf3('-u -b 0 -l ' .. len)
    local f = have2 and iperf2('-u -b 100G -l ' .. len, true)
    local i3 = j and j['end'].sum
    local qs, i3s = r.sent.packets / r.sent.seconds, i3 and i3.packets / i3.seconds
    last_i3s[len] = i3s
    local i2s = f and tonumber(f[8]) and tonumber(f[8]) / len / secs
    row { path = P.name, what = string.format('UDP %d B unpaced, datagrams/s sent (received)', len),
      q = string.format('%s (%s)', num(qs), num(r.received.unique_packets / r.received.seconds)),
      i3 = i3 and string.format('%s (%s)', num(i3s),
        num((i3.packets - i3.lost_packets) / i3.seconds)) or 'n/a',
      i2 = num(i2s), r3 = ratio(qs, i3s), r2 = ratio(qs, i2s),
      note = 'iperf: sent only (its CSV mode prints no server report)' }
    local gs = g.sent.packets / g.sent.seconds
    row { path = P.name, what = string.format('UDP %d B unpaced, qoslab udp_gso = true', len),
      q = string.format('%s (%s)', num(gs), num(g.received.unique_packets / g.received.seconds)),
      i3 = 'n/a', i2 = 'n/a', r3 = ratio(gs, i3s), r2 = ratio(gs, i2s),
      note = 'GSO send + GRO receive; ratios against the plain iperf3/iperf rows above' }
  end

  -- The kernel's ceiling on this host: a bare sendmmsg loop (batch 64) into
  -- a socket nobody reads (loopback only: it binds its own receiver).
  if P.name == 'loopback' and ceiling_bin then
    for _, len in ipairs { 64, 1400 } do
      local c = tonumber(sh(string.format('%s 64 %d %d', ceiling_bin, len, secs)))
      local c1 = tonumber(sh(string.format('%s 1 %d %d', ceiling_bin, len, secs)))
      row { path = P.name, what = string.format('UDP %d B, bare sendmmsg loop, nobody reading '
        .. '(bench/udp_ceiling.c)', len), q = num(c), i3 = 'n/a', i2 = 'n/a',
        r3 = '', r2 = '', note = string.format('the kernel path alone; batch 1 (send): %s/s; '
          .. 'x%s of the iperf3 row above', num(c1), ratio(c, last_i3s[len])) }
    end
  end

  -- UDP paced at 100 Mbit/s: worst 100 ms interval against the target
  local function worst(list)
    local w = 0
    for _, bps in ipairs(list) do w = math.max(w, math.abs(bps / 100e6 - 1)) end
    return string.format('%.1f %%', 100 * w)
  end
  -- three runs each: one stall of the shared host shows up as one bad run
  do
    local qw, rw, iw, n, m = {}, {}, {}, 0, 0
    for _ = 1, 3 do
      local r = qoslab { proto = 'udp', bitrate_bps = 100000000, length_bytes = 1400,
        interval_s = 0.1 }
      local qs, qr = {}, {}
      for i, iv in ipairs(r.intervals) do
        -- the last interval is the partial tail after the planned end
        if i < #r.intervals and iv.sum.sender then qs[#qs + 1] = iv.sum.sender.bits_per_second end
        if i < #r.intervals and iv.sum.receiver then qr[#qr + 1] = iv.sum.receiver.bits_per_second end
      end
      qw[#qw + 1], rw[#rw + 1], n = worst(qs), worst(qr), n + #qs
      local j = have3 and iperf3('-u -b 100M -l 1400 -i 0.1')
      local is = {}
      if j then
        for i, iv in ipairs(j.intervals) do
          if i < #j.intervals then is[#is + 1] = iv.sum.bits_per_second end
        end
        iw[#iw + 1], m = worst(is), m + #is
      end
    end
    row { path = P.name, what = 'UDP paced 100 Mbit/s, worst 100 ms interval vs target (sent), 3 runs',
      q = table.concat(qw, ' / '), i3 = #iw > 0 and table.concat(iw, ' / ') or 'n/a', i2 = 'n/a',
      r3 = '', r2 = '',
      note = string.format('%d qoslab intervals (receiver worst %s), %d iperf3 intervals', n,
        table.concat(rw, ' / '), m) }
  end

  srv:stop()
  if have3 then sh('kill $(cat ' .. pidfile .. ') 2>/dev/null') end
  os.remove(pidfile)
end

bench_path { name = 'loopback', addr = '127.0.0.1', cx = '', sx = '' }

-- veth pair between two namespaces, no qdisc beyond the default
local tag = tostring(base_port)
local na, nb = 'qlbench-a-' .. tag, 'qlbench-b-' .. tag
local function veth_down()
  sh('ip netns del ' .. na)
  sh('ip netns del ' .. nb)
end
local ok, err = pcall(function()
  for _, c in ipairs {
    'ip netns add ' .. na, 'ip netns add ' .. nb,
    string.format('ip -n %s link add qlb0 type veth peer name qlb1 netns %s', na, nb),
    string.format('ip -n %s addr add 10.231.7.1/24 dev qlb0', na),
    string.format('ip -n %s addr add 10.231.7.2/24 dev qlb1', nb),
    string.format('ip -n %s link set qlb0 up', na), string.format('ip -n %s link set qlb1 up', nb),
    string.format('ip -n %s link set lo up', na), string.format('ip -n %s link set lo up', nb) } do
    local out = sh(c .. ' && echo OK')
    assert(out:match('OK%s*$'), c .. ': ' .. out)
  end
  bench_path { name = 'veth', addr = '10.231.7.2', cli_ns = na, srv_ns = nb,
    cx = 'ip netns exec ' .. na .. ' ', sx = 'ip netns exec ' .. nb .. ' ' }
end)
veth_down()
if ceiling_bin then os.remove(ceiling_bin) end
assert(ok, err)

local load1 = (io.open('/proc/loadavg'):read('*l') or ''):match('^(%S+ %S+ %S+)')
local lines = {
  '## Traffic engine vs iperf3 and iperf (one run: loopback and veth)', '',
  string.format('Run: `lua5.4 bench/traffic.lua %d` (root) on %s, %s, %s; load average %s '
    .. 'before, %s after.', secs, os.date('!%Y-%m-%d %H:%M UTC'), sh('uname -r'):gsub('%s+$', ''),
    sh('nproc'):gsub('%s+$', '') .. ' CPUs', load0, load1), '',
  'Commands: qoslab via `core.traffic_client` against an in-process `core.traffic_server`',
  string.format('(defaults: 128 KiB TCP writes, UDP batches of 64); `iperf3 -c ADDR -J -t %d ...`', secs),
  string.format('against `iperf3 -s -D`; `iperf -c ADDR -y C -t %d ...` against `iperf -s [-u]`.', secs),
  'veth: two namespaces joined by a veth pair, default qdiscs, offloads on. Ratios are',
  'qoslab / iperf3 and qoslab / iperf (UDP: datagrams sent per second).', '',
  '| path | measurement | qoslab | iperf3 | iperf | ×iperf3 | ×iperf | note |',
  '|---|---|---|---|---|---|---|---|' }
for _, r in ipairs(rows) do
  lines[#lines + 1] = string.format('| %s | %s | %s | %s | %s | %s | %s | %s |', r.path, r.what,
    r.q, r.i3, r.i2, r.r3, r.r2, r.note)
end
local text = table.concat(lines, '\n') .. '\n'
io.write(text)
local f = io.open(out_path, 'w')
if f then f:write(text); f:close() end
