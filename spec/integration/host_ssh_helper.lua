-- Hosts reached over real OpenSSH for the qoslab.host specs: network
-- namespaces made for the run, each with its own sshd listening on a
-- private address that the root namespace reaches over a veth, keys made
-- for the run with ssh-keygen, and (for two of them) a veth data path
-- between the hosts. `close()` removes every namespace, sshd and file,
-- also after a failure half-way.
local H = require 'spec.integration.traffic_helper'

local S = {}

S.checkout = H.must('pwd -P'):gsub('\n$', '')
S.qoslab = S.checkout .. '/bin/qoslab'

-- 172.X.Y.0/24 from the pid: one /30 per host's control link, the next for
-- the data path. Other specs use 10.0.0.0/8.
local function addr_base()
  return string.format('172.%d.%d.', 16 + H.pid % 16, (H.pid // 16) % 256)
end

local function have(path) return H.sh('test -x ' .. H.q(path)) end

--- Whether the harness can run here (root, sshd, ssh, ssh-keygen, ip).
-- @treturn boolean, string why not
function S.available()
  if H.must('id -u'):gsub('%s', '') ~= '0' then return false, 'needs root' end
  for _, p in ipairs { '/usr/sbin/sshd', '/usr/bin/ssh', '/usr/bin/ssh-keygen' } do
    if not have(p) then return false, p .. ' is missing (make deps installs openssh-server)' end
  end
  return true
end

--- Make n hosts (namespaces with sshd; only the first `sshd` of them run
-- one, default all), the first two joined by a data veth.
-- @treturn table `{dir =, hosts = {{ns =, addr =, ssh = "root@ADDR",
--   data_ifname =, data_addr =}, ...}, client_key =, wrong_key =,
--   options = {...} (for qoslab.host), spec(i, extra) -> qoslab.host spec,
--   close()}`
function S.setup(n, sshd)
  sshd = sshd or n
  local self = { hosts = {} }
  local closers = {}
  local closed = false
  function self.close()
    if closed then return end
    closed = true
    for i = #closers, 1, -1 do pcall(closers[i]) end
  end
  local ok, err = pcall(function()
    self.dir = H.must('mktemp -d /tmp/qoslab-ssh-spec-XXXXXX'):gsub('\n$', '')
    closers[#closers + 1] = function() os.execute('rm -rf ' .. H.q(self.dir)) end
    H.must('chmod 700 ' .. H.q(self.dir))
    local d = self.dir
    -- sshd's privilege separation directory, when this machine has none.
    if not H.sh('test -d /run/sshd') then
      H.must('mkdir -m 755 /run/sshd')
      closers[#closers + 1] = function() os.execute('rmdir /run/sshd 2>/dev/null') end
    end
    for _, k in ipairs { 'host_key', 'client_key', 'wrong_key' } do
      H.must(string.format('ssh-keygen -q -t ed25519 -N "" -C qoslab-spec -f %s', H.q(d .. '/' .. k)))
    end
    H.must(string.format('cp %s %s && chmod 600 %s', H.q(d .. '/client_key.pub'),
      H.q(d .. '/authorized_keys'), H.q(d .. '/authorized_keys')))
    self.client_key, self.wrong_key = d .. '/client_key', d .. '/wrong_key'
    local host_pub = H.must('cat ' .. H.q(d .. '/host_key.pub')):match('^(%S+ %S+)')
    local known = {}
    local base = addr_base()
    for i = 1, n do
      local h = { ns = string.format('qlssh%d-%d', i, H.pid),
                  ifname = string.format('qsr%d-%d', i, H.pid % 100000) }
      h.addr = base .. (4 * i - 2)
      h.root_addr = base .. (4 * i - 3)
      h.ssh = 'root@' .. h.addr
      self.hosts[i] = h
      H.must('ip netns add ' .. h.ns)
      closers[#closers + 1] = function() os.execute('ip netns del ' .. h.ns .. ' 2>/dev/null') end
      H.must(string.format('ip link add %s type veth peer name ctl0 netns %s', h.ifname, h.ns))
      closers[#closers + 1] = function() os.execute('ip link del ' .. h.ifname .. ' 2>/dev/null') end
      H.must(string.format('ip addr add %s/30 dev %s && ip link set %s up', h.root_addr, h.ifname, h.ifname))
      H.must(string.format('ip -n %s addr add %s/30 dev ctl0 && ip -n %s link set ctl0 up && '
        .. 'ip -n %s link set lo up', h.ns, h.addr, h.ns, h.ns))
      local cfg = string.format('%s/sshd-%d.conf', d, i)
      local f = i <= sshd and assert(io.open(cfg, 'w'))
      if f then
        f:write(table.concat({
          'Port 22', 'ListenAddress ' .. h.addr, 'HostKey ' .. d .. '/host_key',
          'PidFile ' .. d .. '/sshd-' .. i .. '.pid', 'AuthorizedKeysFile ' .. d .. '/authorized_keys',
          'UsePAM no', 'StrictModes no', 'PermitRootLogin prohibit-password',
          'PasswordAuthentication no', 'KbdInteractiveAuthentication no', 'PubkeyAuthentication yes',
          'MaxSessions 64', 'MaxStartups 64', 'X11Forwarding no', 'AllowTcpForwarding no',
          'PrintMotd no', 'PrintLastLog no', 'LogLevel VERBOSE',
          -- What qoslab records there (its `shape set` keeps a record for
          -- `qoslab cleanup`) stays in the run's directory.
          'SetEnv QOSLAB_STATE_DIR=' .. d .. '/remote-state', '' }, '\n'))
        f:close()
        h.sshd_pid = H.spawn(string.format('exec ip netns exec %s /usr/sbin/sshd -D -e -f %s', h.ns, H.q(cfg)),
          d .. '/sshd-' .. i .. '.log')
        closers[#closers + 1] = function() H.kill(h.sshd_pid) end
        known[#known + 1] = h.addr .. ' ' .. host_pub
      end
    end
    for i = 1, sshd do
      assert(H.wait_listen(22, self.hosts[i].ns, 30), 'sshd did not listen in ' .. self.hosts[i].ns
        .. ':\n' .. (H.read(d .. '/sshd-' .. i .. '.log') or ''))
    end
    local kf = assert(io.open(d .. '/known_hosts', 'w'))
    kf:write(table.concat(known, '\n'), '\n')
    kf:close()
    self.options = { 'UserKnownHostsFile=' .. d .. '/known_hosts', 'GlobalKnownHostsFile=/dev/null',
                     'StrictHostKeyChecking=yes', 'LogLevel=ERROR' }
    -- An address that never answers: its namespace holds no such address,
    -- so the root namespace's ARP for it goes unanswered.
    self.silent_ns = string.format('qlsshq-%d', H.pid)
    self.silent_ifname = string.format('qsq-%d', H.pid % 100000)
    self.silent_addr = base .. (4 * (n + 2) - 2)
    H.must('ip netns add ' .. self.silent_ns)
    closers[#closers + 1] = function() os.execute('ip netns del ' .. self.silent_ns .. ' 2>/dev/null') end
    H.must(string.format('ip link add %s type veth peer name ctl0 netns %s', self.silent_ifname, self.silent_ns))
    closers[#closers + 1] = function() os.execute('ip link del ' .. self.silent_ifname .. ' 2>/dev/null') end
    H.must(string.format('ip addr add %s/30 dev %s && ip link set %s up && ip -n %s link set ctl0 up',
      base .. (4 * (n + 2) - 3), self.silent_ifname, self.silent_ifname, self.silent_ns))
    if n >= 2 then
      local a, b = self.hosts[1], self.hosts[2]
      a.data_ifname, b.data_ifname = 'data0', 'data0'
      a.data_addr, b.data_addr = base .. (4 * n + 1), base .. (4 * n + 2)
      H.must(string.format('ip -n %s link add data0 type veth peer name data0 netns %s', a.ns, b.ns))
      for _, h in ipairs { a, b } do
        H.must(string.format('ip -n %s addr add %s/30 dev data0 && ip -n %s link set data0 up',
          h.ns, h.data_addr, h.ns))
      end
    end
  end)
  if not ok then self.close(); error(err, 2) end
  --- The qoslab.host spec of host i (extra keys added or replacing).
  function self.spec(i, extra)
    local s = { ssh = self.hosts[i].ssh, identity = self.client_key, options = self.options,
                qoslab = S.qoslab, name = 'host' .. i, connect_timeout_s = 5, timeout_s = 30 }
    for k, v in pairs(extra or {}) do s[k] = v end
    return s
  end
  --- Processes in host i's namespace whose command line matches pattern
  -- (a Lua pattern): list of "pid cmdline". qoslab.host's own `setsid -w`
  -- (which waits for the command it made a group leader) is not counted.
  function self.procs(i, pattern)
    local lfs = require 'lfs'
    local want = lfs.attributes('/run/netns/' .. self.hosts[i].ns, 'ino')
    local out = {}
    for p in lfs.dir('/proc') do
      if p:match('^%d+$') and want and lfs.attributes('/proc/' .. p .. '/ns/net', 'ino') == want then
        local cmd = (H.read('/proc/' .. p .. '/cmdline') or ''):gsub('%z', ' ')
        if cmd:match(pattern) and not cmd:match('^setsid %-w ') then out[#out + 1] = p .. ' ' .. cmd end
      end
    end
    return out
  end
  return self
end

return S
