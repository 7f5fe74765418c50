-- Shared by the traffic specs (integration and netem): shell helpers,
-- background processes, free ports, namespace pairs that always go away,
-- and the identity assertion every run goes through.
local traffic = require 'qoslab.traffic'

local H = {}

local function pid()
  local f = assert(io.open('/proc/self/stat'))
  local p = tonumber(f:read('l'):match('^(%d+)'))
  f:close()
  return p
end
H.pid = pid()

function H.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- The number of named network namespaces (/run/netns) now.
function H.netns_count()
  local p = assert(io.popen('ip netns list 2>/dev/null | wc -l'))
  local n = tonumber(p:read('l'))
  p:close()
  return n
end

--- Run a shell command; returns ok (exit 0), combined output, exit status.
function H.sh(cmd)
  local p = io.popen(cmd .. ' 2>&1')
  local out = p:read('a')
  local ok, _, status = p:close()
  return ok == true, out, status
end

--- Run a shell command that must succeed.
function H.must(cmd)
  local ok, out = H.sh(cmd)
  assert(ok, 'command failed: ' .. cmd .. '\n' .. out)
  return out
end

function H.read(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

function H.sleep(s) require('qoslab.timer').sleep(s) end
function H.now() return require('qoslab.timer').now() end

local tmpdir
--- A per-process scratch directory (removed by H.cleanup_tmp).
function H.tmp(name)
  if not tmpdir then
    tmpdir = string.format('/tmp/qoslab-traffic-spec-%d', H.pid)
    H.must('mkdir -p ' .. tmpdir)
  end
  return tmpdir .. '/' .. name
end
function H.cleanup_tmp()
  if tmpdir then os.execute('rm -rf ' .. tmpdir) tmpdir = nil end
end

--- Start a background shell command; returns its pid. stdout/stderr go to
-- the given files.
function H.spawn(cmd, out, err)
  local pidfile = H.tmp('pid-' .. tostring(math.random(1 << 30)))
  H.must(string.format('(%s) >%s 2>%s & echo $! >%s', cmd, H.q(out or '/dev/null'),
    H.q(err or out or '/dev/null'), pidfile))
  local p = tonumber(H.read(pidfile))
  os.remove(pidfile)
  return p
end

function H.alive(p)
  return p and os.execute('kill -0 ' .. p .. ' 2>/dev/null') == true
end

--- Wait up to timeout_s for a process to exit.
function H.wait_exit(p, timeout_s)
  local t_end = H.now() + (timeout_s or 5)
  while H.alive(p) and H.now() < t_end do H.sleep(0.05) end
  return not H.alive(p)
end

--- Stop a process we started (TERM, then KILL).
function H.kill(p)
  if not H.alive(p) then return end
  os.execute('kill ' .. p .. ' 2>/dev/null')
  if not H.wait_exit(p, 2) then os.execute('kill -9 ' .. p .. ' 2>/dev/null') end
end

--- Wait until a TCP port listens (in netns when given).
function H.wait_listen(port, netns, timeout_s)
  local pre = netns and ('ip netns exec ' .. H.q(netns) .. ' ') or ''
  local t_end = H.now() + (timeout_s or 5)
  while H.now() < t_end do
    local _, out = H.sh(pre .. "ss -Htln 'sport = :" .. port .. "'")
    if out:find('LISTEN', 1, true) then return true end
    H.sleep(0.05)
  end
  return false
end

local next_port = 20000 + (H.pid * 7) % 30000
--- A TCP/UDP port that nothing on this host listens on now.
function H.port()
  for _ = 1, 200 do
    next_port = next_port + 1
    if next_port > 60000 then next_port = 20000 end
    -- any state: a connection's local (ephemeral) port blocks a bind too
    local _, out = H.sh("ss -Htuan 'sport = :" .. next_port .. "'")
    if out == '' then return next_port end
  end
  error('no free port')
end

local ns_seq = 0
--- Two namespaces joined by a veth pair, addresses 10.R.S.1 (a) and .2 (b),
-- TSO/GSO/GRO off when opts.offloads_off. To-be-closed; also :close().
function H.netns_pair(opts)
  opts = opts or {}
  ns_seq = ns_seq + 1
  local tag = string.format('%d-%d', H.pid, ns_seq)
  local self = { a = 'qlta-' .. tag, b = 'qltb-' .. tag, va = 'vA' .. ns_seq, vb = 'vB' .. ns_seq }
  local r, s = (H.pid // 250) % 250 + 1, (H.pid + ns_seq) % 250 + 1
  self.a_addr = string.format('10.%d.%d.1', r, s)
  self.b_addr = string.format('10.%d.%d.2', r, s)
  local closed = false
  function self.close()
    if closed then return end
    closed = true
    os.execute('ip netns del ' .. self.a .. ' 2>/dev/null')
    os.execute('ip netns del ' .. self.b .. ' 2>/dev/null')
  end
  setmetatable(self, { __close = self.close, __gc = self.close })
  local ok, err = pcall(function()
    H.must('ip netns add ' .. self.a)
    H.must('ip netns add ' .. self.b)
    H.must(string.format('ip -n %s link add %s type veth peer name %s netns %s', self.a,
      self.va, self.vb, self.b))
    H.must(string.format('ip -n %s addr add %s/24 dev %s', self.a, self.a_addr, self.va))
    H.must(string.format('ip -n %s addr add %s/24 dev %s', self.b, self.b_addr, self.vb))
    for _, x in ipairs { { self.a, self.va }, { self.b, self.vb } } do
      H.must(string.format('ip -n %s link set %s up', x[1], x[2]))
      H.must(string.format('ip -n %s link set lo up', x[1]))
      if opts.offloads_off then
        H.sh(string.format('ip netns exec %s ethtool -K %s tso off gso off gro off', x[1], x[2]))
      end
    end
  end)
  if not ok then self.close(); error(err, 2) end
  return self
end

--- Two namespaces with lo up and IPv6 off (so no router solicitation or MLD
-- report crosses what joins them), nothing between them yet: names
-- PREFIX..'a-'..tag and PREFIX..'b-'..tag, addresses 10.R.S.1 (a) and .2 (b)
-- from the same sequence as netns_pair. .close() removes them.
function H.bare_netns_pair(prefix)
  ns_seq = ns_seq + 1
  local tag = string.format('%d-%d', H.pid, ns_seq)
  local self = { a = prefix .. 'a-' .. tag, b = prefix .. 'b-' .. tag }
  local r, s = (H.pid // 250) % 250 + 1, (H.pid + ns_seq) % 250 + 1
  self.a_addr = string.format('10.%d.%d.1', r, s)
  self.b_addr = string.format('10.%d.%d.2', r, s)
  function self.close()
    os.execute('ip netns del ' .. self.a .. ' 2>/dev/null')
    os.execute('ip netns del ' .. self.b .. ' 2>/dev/null')
  end
  local ok, err = pcall(function()
    for _, ns in ipairs { self.a, self.b } do
      H.must('ip netns add ' .. ns)
      H.must('ip -n ' .. ns .. ' link set lo up')
      H.must('ip netns exec ' .. ns .. ' sysctl -q -w net.ipv6.conf.all.disable_ipv6=1')
      H.must('ip netns exec ' .. ns .. ' sysctl -q -w net.ipv6.conf.default.disable_ipv6=1')
    end
  end)
  if not ok then self.close(); error(err, 2) end
  return self
end

--- Clean-ups for one test, run last first by the test's `finally` (busted
-- keeps one finally per test): `local defer = H.cleanups(finally)`, then
-- `defer(function() x:close() end)` for each thing made.
function H.cleanups(finally_fn)
  local list = {}
  finally_fn(function()
    for i = #list, 1, -1 do pcall(list[i]) end
  end)
  return function(f) list[#list + 1] = f end
end

--- The sender's TCP RTT (TCP_INFO) in an interval's stream entries, in ms.
function H.sender_rtt_ms(iv)
  for _, e in ipairs(iv.streams or {}) do
    if e.role ~= 'receiver' and e.rtt_us then return e.rtt_us / 1000 end
  end
end

--- Assert every identity of qoslab.traffic.invariants.
function H.identities(res, label)
  local ok, why = traffic.invariants(res)
  assert(ok, (label or 'result') .. ': identities broken:\n  ' .. table.concat(why, '\n  '))
end

--- A paced rate: never above the target (the pacer keeps an absolute
-- schedule and does not catch up in bursts: +3 % for clock and rounding),
-- and not far below it. The lower bound is loose on purpose: on a shared
-- 2-core host a descheduled sender thread loses its slots for good, by
-- design (an absolute schedule without catch-up bursts), so how much it loses depends on the load.
function H.paced(rate, target, what)
  assert(rate <= target * 1.03, string.format('%s: %.0f bit/s is above the target %.0f',
    what, rate, target))
  assert(rate >= target * 0.5, string.format('%s: %.0f bit/s is below half the target %.0f',
    what, rate, target))
end

-- Whether this kernel has sch_netem (the qemu guest has; this host has
-- not): a netem qdisc on the loopback of a throwaway namespace. Cached.
local netem_ok
function H.netem_available()
  if netem_ok == nil then
    local ns = 'ql-netem-probe-' .. H.pid
    netem_ok = H.sh('ip netns add ' .. ns .. ' && ip -n ' .. ns .. ' link set lo up'
      .. ' && tc -n ' .. ns .. ' qdisc add dev lo root netem delay 1ms')
    os.execute('ip netns del ' .. ns .. ' 2>/dev/null')
  end
  return netem_ok
end

--- Number from a sysctl file.
function H.sysctl(path)
  return tonumber(H.read('/proc/sys/' .. path:gsub('%.', '/')))
end

--- UDP receive buffer errors (RcvbufErrors of /proc/net/snmp) in a
-- namespace: datagrams the kernel dropped because the socket was full.
function H.udp_rcvbuf_errors(ns)
  local out = H.must('ip netns exec ' .. ns .. ' cat /proc/net/snmp')
  local names, values
  for line in out:gmatch('[^\n]+') do
    if line:match('^Udp: %a') then names = line
    elseif line:match('^Udp: %d') then values = line end
  end
  local cols, vals = {}, {}
  for w in names:gmatch('%S+') do cols[#cols + 1] = w end
  for w in values:gmatch('%S+') do vals[#vals + 1] = w end
  for i, w in ipairs(cols) do
    if w == 'RcvbufErrors' then return assert(tonumber(vals[i]), 'RcvbufErrors: ' .. tostring(vals[i])) end
  end
  error('no RcvbufErrors in /proc/net/snmp of ' .. ns)
end

--- One counter of a device's statistics (tx_dropped, rx_dropped, ...) in a
-- namespace.
function H.if_counter(ns, ifname, name)
  local out = H.must(string.format('ip netns exec %s cat /sys/class/net/%s/statistics/%s', ns, ifname, name))
  return assert(tonumber(out:match('%d+')), ifname .. ' ' .. name .. ': ' .. out)
end

--- |a - b| <= tol * max(|a|, |b|) with a message.
function H.close_to(a, b, tol, what)
  local m = math.max(math.abs(a), math.abs(b))
  assert(math.abs(a - b) <= tol * m + 1e-12,
    string.format('%s: %s and %s differ by more than %.1f%%', what, tostring(a), tostring(b),
      tol * 100))
end

--- The end of a test that measures `role` in direction `dir`: the specs'
-- own oracle for the `side` each engine entry carries.
-- @usage H.measuring_side('reverse', 'receiver') --> "client"
function H.measuring_side(dir, role)
  if (dir == 'reverse') == (role == 'sender') then return 'server' end
  return 'client'
end

-- A result shaped like traffic.run's (manual/results.md) with consistent numbers:
-- 3 one-second intervals, per stream k and interval i the sender writes
-- 1000 * k + 10 * i bytes and the receiver gets all but 3 bytes of them.
function H.fixture(o)
  o = o or {}
  local udp = o.proto == 'udp'
  local P = o.parallel or 1
  local dirs = o.bidir and { 'forward', 'reverse' } or { o.reverse and 'reverse' or 'forward' }
  local nint = 3
  local intervals = {}
  for i = 1, nint do
    intervals[i] = { start_s = i - 1.0, end_s = i * 1.0, seconds = 1.0, omitted = false,
      sum = {}, streams = {} }
  end
  local streams, totals = {}, {}
  local id = 0
  for _, dir in ipairs(dirs) do
    local ts = { side = H.measuring_side(dir, 'sender'), bytes = 0, seconds = 3.0,
      writes = 0, retransmits = not udp and 0 or nil, packets = udp and 0 or nil }
    local tr = { side = H.measuring_side(dir, 'receiver'), bytes = 0, seconds = 3.0 }
    if udp then
      tr.packets, tr.unique_packets, tr.lost_packets = 0, 0, 0
      tr.duplicate_packets, tr.out_of_order_packets, tr.late_packets = 0, 0, 0
      tr.jitter_ms, tr.lost_pct = 0.0, 0.0
    end
    for k = 1, P do
      id = (id == 1) and 3 or id + 1
      local s = { id = id, direction = dir,
        socket = { local_host = '127.0.0.1', local_port = 40000 + id, remote_host = '127.0.0.1',
          remote_port = 5201, sndbuf_bytes = o.granted or 16384,
          rcvbuf_bytes = o.granted or 131072 },
        sender = { side = ts.side, bytes = 0, seconds = 3.0, writes = 0,
          retransmits = not udp and 0 or nil, packets = udp and 0 or nil,
          max_rtt_us = not udp and 300 or nil, min_rtt_us = not udp and 100 or nil,
          mean_rtt_us = not udp and 200 or nil, max_snd_cwnd_bytes = not udp and 65536 or nil,
          max_snd_wnd_bytes = not udp and 131072 or nil,
          sndbuf = { requested_bytes = o.window or 0, granted_bytes = o.granted or 16384,
            clamped = o.clamped or false, sysctl = 'net.core.wmem_max' } },
        receiver = { side = tr.side, bytes = 0, seconds = 3.0,
          rcvbuf = { requested_bytes = o.window or 0, granted_bytes = o.granted or 131072,
            clamped = o.clamped or false, sysctl = 'net.core.rmem_max' } } }
      if udp then
        local r = s.receiver
        r.packets, r.unique_packets, r.lost_packets = 0, 0, 0
        r.duplicate_packets, r.out_of_order_packets, r.late_packets = 0, 0, 0
        r.jitter_ms, r.lost_pct = 0.05 * k, 0.0
      end
      for i = 1, nint do
        local sb = 1000 * k + 10 * i
        local rb = sb - 3
        local se = { id = id, direction = dir, role = 'sender', side = ts.side, bytes = sb,
          bits_per_second = sb * 8.0 }
        local re = { id = id, direction = dir, role = 'receiver', side = tr.side, bytes = rb,
          bits_per_second = rb * 8.0 }
        s.sender.bytes = s.sender.bytes + sb
        s.receiver.bytes = s.receiver.bytes + rb
        s.sender.writes = s.sender.writes + 1
        if udp then
          se.packets = 10
          re.packets, re.unique_packets, re.lost_packets, re.jitter_ms = 9, 9, 1, 0.05 * k
          re.lost_pct = 10.0
          re.duplicate_packets, re.out_of_order_packets, re.late_packets = 0, 0, 0
          s.sender.packets = s.sender.packets + 10
          s.receiver.packets = s.receiver.packets + 9
          s.receiver.unique_packets = s.receiver.unique_packets + 9
          s.receiver.lost_packets = s.receiver.lost_packets + 1
        else
          se.retransmits, se.rtt_us, se.rttvar_us, se.snd_cwnd_bytes = i - 1, 200, 50, 65536
          se.snd_wnd_bytes, se.pmtu_bytes = 131072, 65535
          s.sender.retransmits = s.sender.retransmits + i - 1
        end
        local list = intervals[i].streams
        list[#list + 1] = se
        list[#list + 1] = re
      end
      s.sender.bits_per_second = s.sender.bytes * 8 / 3.0
      s.receiver.bits_per_second = s.receiver.bytes * 8 / 3.0
      if udp then
        s.receiver.lost_pct = 100.0 * s.receiver.lost_packets / s.sender.packets
      end
      for _, key in ipairs { 'bytes', 'writes', 'retransmits', 'packets' } do
        if ts[key] then ts[key] = ts[key] + (s.sender[key] or 0) end
      end
      for _, key in ipairs { 'bytes', 'packets', 'unique_packets', 'lost_packets',
          'duplicate_packets', 'out_of_order_packets', 'late_packets' } do
        if tr[key] then tr[key] = tr[key] + s.receiver[key] end
      end
      if udp then tr.jitter_ms = tr.jitter_ms + s.receiver.jitter_ms / P end
      streams[#streams + 1] = s
    end
    ts.bits_per_second = ts.bytes * 8 / 3.0
    tr.bits_per_second = tr.bytes * 8 / 3.0
    if udp then tr.lost_pct = 100.0 * tr.lost_packets / ts.packets end
    totals[dir] = { ts, tr }
  end
  for i = 1, nint do
    local ss, rs = { bytes = 0 }, { bytes = 0 }
    for _, e in ipairs(intervals[i].streams) do
      if e.direction == dirs[1] then
        local t = e.role == 'sender' and ss or rs
        t.side = e.side
        t.bytes = t.bytes + e.bytes
        if e.lost_packets then
          t.lost_packets = (t.lost_packets or 0) + e.lost_packets
          t.unique_packets = (t.unique_packets or 0) + e.unique_packets
          t.lost_pct = 100.0 * t.lost_packets / (t.lost_packets + t.unique_packets)
        end
      end
    end
    ss.bits_per_second, rs.bits_per_second = ss.bytes * 8.0, rs.bytes * 8.0
    intervals[i].sum = { sender = ss, receiver = rs }
  end
  local d1 = dirs[1]
  local res = {
    proto = udp and 'udp' or 'tcp', reverse = o.reverse or false, bidir = o.bidir or false,
    parallel = P, host = '127.0.0.1', port = 5201, local_role = o.local_role or 'client',
    start_time_unix_s = 1795995185.25, duration_s = 3.0, omit_s = 0.0,
    cookie = 'abcdefghijklmnopqrstuvwxyz2345672345',
    tcp_mss_bytes = not udp and 32768 or nil,
    tcp_congestion = not udp and { client = 'cubic', server = 'cubic' } or nil,
    sent = totals[d1][1], received = totals[d1][2],
    streams = streams, intervals = intervals,
    cpu = { client = { total_pct = 12.5, user_pct = 2.5, system_pct = 10.0,
      busiest_thread_pct = o.busiest or 9.0 },
      server = { total_pct = 20.0, user_pct = 5.0, system_pct = 15.0, busiest_thread_pct = 11.0 } },
    cpu_limited = (o.busiest or 0) >= 90,
    warnings = o.warnings or {},
    peer = 'qoslab',
  }
  if o.bidir then
    res.reverse_sent, res.reverse_received = totals.reverse[1], totals.reverse[2]
  end
  return setmetatable(res, traffic.Result)
end

-- Keys present in iperf3's JSON but absent from ours, walking objects and
-- the first element of arrays. allowed: set of dotted paths we do not make.
function H.missing_keys(ref, ours, path, allowed, out)
  out = out or {}
  if type(ref) ~= 'table' then return out end
  if ref[1] ~= nil then
    if type(ours) == 'table' and ours[1] ~= nil then
      H.missing_keys(ref[1], ours[1], path .. '[]', allowed, out)
    end
    return out
  end
  for k, v in pairs(ref) do
    local p = path == '' and k or (path .. '.' .. k)
    if not allowed[p] then
      if type(ours) ~= 'table' or ours[k] == nil then
        out[#out + 1] = p
      else
        H.missing_keys(v, ours[k], p, allowed, out)
      end
    end
  end
  return out
end

-- What a client's to_iperf3_json does not make: iperf3's server-side key.
H.NOT_MADE = {}
for _, k in ipairs {
  'start.accepted_connection',
} do H.NOT_MADE[k] = true end

--- Assert ours has every key iperf3's JSON ref has (except H.NOT_MADE),
-- and no key iperf3 lacks.
function H.schema_matches(ref, ours, label)
  local miss = H.missing_keys(ref, ours, '', H.NOT_MADE)
  table.sort(miss)
  assert(#miss == 0, label .. ': keys iperf3 -J has and to_iperf3_json lacks: '
    .. table.concat(miss, ', '))
  local extra = H.missing_keys(ours, ref, '', {})
  table.sort(extra)
  assert(#extra == 0, label .. ': keys to_iperf3_json makes and iperf3 -J lacks: '
    .. table.concat(extra, ', '))
end

return H
