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
    local _, out = H.sh("ss -Htuln 'sport = :" .. next_port .. "'")
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

--- Assert every identity of qoslab.traffic.invariants.
function H.identities(res, label)
  local ok, why = traffic.invariants(res)
  assert(ok, (label or 'result') .. ': identities broken:\n  ' .. table.concat(why, '\n  '))
end

--- Number from a sysctl file.
function H.sysctl(path)
  return tonumber(H.read('/proc/sys/' .. path:gsub('%.', '/')))
end

--- |a - b| <= tol * max(|a|, |b|) with a message.
function H.close_to(a, b, tol, what)
  local m = math.max(math.abs(a), math.abs(b))
  assert(math.abs(a - b) <= tol * m + 1e-12,
    string.format('%s: %s and %s differ by more than %.1f%%', what, tostring(a), tostring(b),
      tol * 100))
end

return H
