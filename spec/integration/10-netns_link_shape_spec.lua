-- Namespaces, veth pairs, addresses, MTU, offloads, tbf and htb on this
-- kernel, checked against iproute2/ethtool/iperf3; failures return
-- nil, message, CODE; nothing stays behind (namespaces, links, qdiscs).
-- Needs root. Every namespace made here is removed in after_each.
local cjson = require 'cjson'
local netns = require 'qoslab.netns'
local link = require 'qoslab.link'
local shape = require 'qoslab.shape'

-- Output of a command (stdout and stderr).
local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  p:close()
  return out
end

-- Whether a command exits 0 (output discarded).
local function succeeds(cmd)
  local ok, _, code = os.execute(cmd .. ' >/dev/null 2>&1')
  return ok == true and code == 0
end

local function snapshot()
  return { netns = sh('ip netns list'), links = sh("ip -o link show | awk '{print $2}'") }
end

local made = {}
local function new_ns()
  local name = netns.unique_name('qlit')
  assert(netns.add(name))
  made[#made + 1] = name
  return name
end

after_each(function()
  for i = #made, 1, -1 do
    if netns.exists(made[i]) then netns.delete(made[i]) end
    made[i] = nil
  end
end)

describe('qoslab.netns', function()
  it('creates namespaces visible to ip netns and removes them', function()
    local before = snapshot()
    local name = new_ns()
    assert.is_true(netns.exists(name))
    assert.matches('\n?' .. name:gsub('%-', '%%-') .. '[ \n]', sh('ip netns list'))
    local found = false
    for _, n in ipairs(netns.list()) do found = found or n == name end
    assert.is_true(found)
    -- ip netns exec works in it: only lo, down.
    local out = sh('ip netns exec ' .. name .. ' ip -o link')
    assert.matches('^1: lo:', out)
    assert.is_nil(out:match('\n2:'))
    local r, msg, code = netns.add(name)
    assert.is_nil(r)
    assert.equal('EEXIST', code)
    assert.matches(name, msg, 1, true)
    assert.is_true(netns.delete(name))
    assert.is_false(netns.exists(name))
    r, msg, code = netns.delete(name)
    assert.is_string(msg)
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    assert.same(before, snapshot())
  end)

  it('sees namespaces made by ip netns add', function()
    local name = netns.unique_name('qlit')
    made[#made + 1] = name
    assert.is_true(succeeds('ip netns add ' .. name))
    assert.is_true(netns.exists(name))
    assert.is_true(netns.delete(name))
    assert.is_nil(sh('ip netns list'):find(name, 1, true))
  end)

  it('run calls fn inside the namespace and always comes back', function()
    local name = new_ns()
    local function my_ns() return sh('readlink /proc/self/ns/net') end
    local home = my_ns()
    local inside, extra = netns.run(name, function(a) return my_ns(), a end, 42)
    assert.equal(42, extra)
    assert.are_not.equal(home, inside)
    assert.equal(inside, sh('ip netns exec ' .. name .. ' readlink /proc/self/ns/net'))
    assert.equal(home, my_ns())
    local ok, err = pcall(netns.run, name, function() error('boom', 0) end)
    assert.is_false(ok)
    assert.equal('boom', err)
    assert.equal(home, my_ns())
    local r, msg, code = netns.run('qlit-no-such-ns', function() end)
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    assert.matches('qlit%-no%-such%-ns', msg)
  end)
end)

describe('qoslab.link', function()
  it('makes a veth across namespaces with addresses, MTU and offloads', function()
    local a, b = new_ns(), new_ns()
    assert.is_true(link.add_veth { name = 'qlv0', peer = 'qlv1', netns = a, peer_netns = b })
    local r, msg, code = link.add_veth { name = 'qlv0', peer = 'qlv1', netns = a, peer_netns = b }
    assert.is_nil(r)
    assert.equal('EEXIST', code)
    assert.matches('qlv0', msg)
    assert.matches('qlv1@', sh('ip -n ' .. b .. ' -o link show qlv1'))
    for _, s in ipairs { { 'qlv0', a, '10.91.0.1/24', 'fd00:91::1/64' }, { 'qlv1', b, '10.91.0.2/24', 'fd00:91::2/64' } } do
      assert.is_true(link.set('lo', { up = true, netns = s[2] }))
      assert.is_true(link.set(s[1], { up = true, mtu_bytes = 4000, netns = s[2] }))
      assert.is_true(link.addr_add(s[1], s[3], { netns = s[2] }))
      assert.is_true(link.addr_add(s[1], s[4], { netns = s[2] }))
      local off = link.offloads(s[1], { tso = false, gso = false, gro = false }, { netns = s[2] })
      assert.same({ tso = false, gso = false, gro = false }, off)
    end
    r, msg, code = link.addr_add('qlv0', '10.91.0.1/24', { netns = a })
    assert.is_string(msg)
    assert.is_nil(r)
    assert.equal('EEXIST', code)
    -- Addresses are usable at once (IPv6 without DAD).
    assert.is_true(succeeds('ip netns exec ' .. a .. ' ping -c1 -W1 10.91.0.2'))
    assert.is_true(succeeds('ip netns exec ' .. a .. ' ping -6 -c1 -W1 fd00:91::2'))
    local info = link.info('qlv0', { netns = a })
    assert.equal(4000, info.mtu_bytes)
    assert.is_true(info.up)
    assert.equal('up', info.operstate)
    assert.equal('veth', info.kind)
    assert.equal(10000, info.speed_mbps)
    assert.matches('mtu 4000', sh('ip -n ' .. a .. ' -o link show qlv0'))
    assert.equal(tonumber(sh('ip netns exec ' .. a .. ' cat /sys/class/net/qlv0/ifindex')), info.ifindex)
    assert.matches(info.address, sh('ip -n ' .. a .. ' -o link show qlv0'), 1, true)
    local k = sh('ip netns exec ' .. a .. ' ethtool -k qlv0')
    assert.matches('tcp%-segmentation%-offload: off', k)
    assert.matches('generic%-segmentation%-offload: off', k)
    assert.matches('generic%-receive%-offload: off', k)
    local on = link.offloads('qlv0', { gro = true }, { netns = a })
    assert.same({ tso = false, gso = false, gro = true }, on)
    assert.matches('generic%-receive%-offload: on', sh('ip netns exec ' .. a .. ' ethtool -k qlv0'))
    assert.is_true(link.set('qlv0', { up = false, netns = a }))
    assert.is_false(link.info('qlv0', { netns = a }).up)
    assert.is_true(link.addr_del('qlv0', '10.91.0.1/24', { netns = a }))
    r, msg, code = link.addr_del('qlv0', '10.91.0.1/24', { netns = a })
    assert.is_string(msg)
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    assert.is_true(link.delete('qlv0', { netns = a }))
    r, msg, code = link.info('qlv1', { netns = b })
    assert.is_nil(r)
    assert.equal('ENODEV', code)
    assert.matches('"qlv1" in namespace ' .. b:gsub('%-', '%%-'), msg)
  end)

  it('returns ENODEV, ENOENT and EPERM-free codes for missing things', function()
    local a = new_ns()
    local r, msg, code = link.set('nosuch0', { up = true, netns = a })
    assert.is_nil(r)
    assert.equal('ENODEV', code)
    assert.matches('nosuch0', msg)
    r, msg, code = link.info('lo', { netns = 'qlit-missing-ns' })
    assert.is_string(msg)
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    r, msg, code = link.add_veth { name = 'qlv8', peer = 'qlv9', netns = a, peer_netns = 'qlit-missing-ns' }
    assert.is_string(msg)
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    assert.is_nil(sh('ip -n ' .. a .. ' -o link'):find('qlv8', 1, true))
    r, msg, code = link.delete('nosuch0', { netns = a })
    assert.is_nil(r)
    assert.is_string(msg)
    assert.equal('ENODEV', code)
    r, msg, code = link.offloads('nosuch0', {}, { netns = a })
    assert.is_nil(r)
    assert.is_string(msg)
    assert.equal('ENODEV', code)
  end)
end)

describe('qoslab.shape', function()
  local a, b
  before_each(function()
    a, b = new_ns(), new_ns()
    assert(link.add_veth { name = 'qls0', peer = 'qls1', netns = a, peer_netns = b })
  end)

  local function tc_qdisc(ns)
    return cjson.decode(sh('tc -n ' .. ns .. ' -j qdisc show dev qls0'))[1]
  end

  it('applies tbf and reads it back exactly; tc agrees', function()
    local spec = { kind = 'tbf', rate_bps = 100000000, burst_bytes = 50000, limit_bytes = 300000 }
    local r = shape.apply('qls0', spec, { netns = a })
    assert.same({ kind = 'tbf', handle = '1:', netem_parent = '1:1', spec = spec }, r)
    assert.same(spec, shape.get('qls0', { netns = a }))
    local q = tc_qdisc(a)
    assert.equal('tbf', q.kind)
    assert.equal('1:', q.handle)
    assert.equal(12500000, q.options.rate)
    assert.equal(50000, q.options.burst)
    assert.equal(20000, q.options.lat)   -- (limit - burst) / rate in us
    -- Replacing changes in place; latency_ms gives limit = rate * latency + burst.
    assert(shape.apply('qls0', { kind = 'tbf', rate_bps = 1000000000, burst_bytes = 125000, latency_ms = 4 }, { netns = a }))
    assert.same({ kind = 'tbf', rate_bps = 1000000000, burst_bytes = 125000, limit_bytes = 625000 },
      shape.get('qls0', { netns = a }))
    q = tc_qdisc(a)
    assert.equal(125000000, q.options.rate)
    assert.equal(125000, q.options.burst)
    -- 40 Gbit/s needs the 64-bit rate attribute.
    shape.apply('qls0', { kind = 'tbf', rate_bps = 40000000000, burst_bytes = 5000000, limit_bytes = 10000000 }, { netns = a })
    local got = shape.get('qls0', { netns = a })
    assert.equal(40000000000, got.rate_bps)
    assert.equal(5000000, got.burst_bytes)
    assert.equal(5000000000, tc_qdisc(a).options.rate)
    -- apply(get()) is a fixed point.
    shape.apply('qls0', got, { netns = a })
    assert.same(got, shape.get('qls0', { netns = a }))
    assert.is_true(shape.clear('qls0', { netns = a }))
    assert.is_nil(shape.get('qls0', { netns = a }))
    local root = tc_qdisc(a)   -- a veth's default: noqueue, which tc may not list
    assert.is_true(root == nil or root.kind == 'noqueue')
    assert.is_true(shape.clear('qls0', { netns = a }))
  end)

  it('default burst is max(rate x 4 ms, 10 x MTU)', function()
    shape.apply('qls0', { kind = 'tbf', rate_bps = 1000000000 }, { netns = a })
    local g = shape.get('qls0', { netns = a })
    assert.equal(500000, g.burst_bytes)
    assert.equal(500000 + 125000000 * 20 // 1000, g.limit_bytes)
    shape.apply('qls0', { kind = 'tbf', rate_bps = 1000000 }, { netns = a })
    assert.equal(15000, shape.get('qls0', { netns = a }).burst_bytes)
  end)

  it('applies htb with a leaf class for netem; tc agrees', function()
    local spec = { kind = 'htb', rate_bps = 100000000, ceil_bps = 200000000, burst_bytes = 50000, cburst_bytes = 100000 }
    local r = shape.apply('qls0', spec, { netns = a })
    assert.same({ kind = 'htb', handle = '1:', netem_parent = '1:10', spec = spec }, r)
    assert.same(spec, shape.get('qls0', { netns = a }))
    local q = tc_qdisc(a)
    assert.equal('htb', q.kind)
    assert.equal('0x10', q.options.default)
    local cls = sh('tc -n ' .. a .. ' class show dev qls0')
    assert.matches('class htb 1:10 root .*rate 100Mbit ceil 200Mbit burst 50000b cburst 100000b', cls)
    -- Change in place, then 64-bit rates.
    shape.apply('qls0', { kind = 'htb', rate_bps = 48000000000 }, { netns = a })
    local g = shape.get('qls0', { netns = a })
    assert.equal(48000000000, g.rate_bps)
    assert.equal(48000000000, g.ceil_bps)
    assert.matches('rate 48Gbit ceil 48Gbit', sh('tc -n ' .. a .. ' class show dev qls0'))
    -- Switching kind works both ways.
    shape.apply('qls0', { kind = 'tbf', rate_bps = 8000000 }, { netns = a })
    assert.equal('tbf', shape.get('qls0', { netns = a }).kind)
    shape.apply('qls0', spec, { netns = a })
    assert.same(spec, shape.get('qls0', { netns = a }))
  end)

  it('fails with ENODEV / ENOENT and raises for a burst below the MTU', function()
    local r, msg, code = shape.apply('nosuch0', { kind = 'tbf', rate_bps = 1e6 }, { netns = a })
    assert.is_nil(r)
    assert.equal('ENODEV', code)
    assert.matches('nosuch0', msg)
    r, msg, code = shape.get('qls0', { netns = 'qlit-missing-ns' })
    assert.is_string(msg)
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    assert.error_matches(function()
      shape.apply('qls0', { kind = 'tbf', rate_bps = 1e6, burst_bytes = 100 }, { netns = a })
    end, 'qoslab.shape.apply: spec.burst_bytes: expected at least the MTU')
    assert.is_nil(shape.get('qls0', { netns = a }))
    -- a tbf queue below one full frame (MTU + Ethernet header) would drop
    -- every full-sized packet: refused before anything is set
    assert.error_matches(function()
      shape.apply('qls0', { kind = 'tbf', rate_bps = 1e6, limit_bytes = 1 }, { netns = a })
    end, 'qoslab.shape.apply: spec.limit_bytes: expected at least one MTU%-sized frame of qls0 %(1500 %+ 14')
    assert.is_nil(shape.get('qls0', { netns = a }))
    assert(shape.apply('qls0', { kind = 'tbf', rate_bps = 1e6, limit_bytes = 1514 }, { netns = a }))
    assert(shape.clear('qls0', { netns = a }))
  end)

  it('really limits TCP to the tbf rate (iperf3, 2 s)', function()
    local rate = 100000000
    assert(link.set('qls0', { up = true, netns = a }))
    assert(link.set('qls1', { up = true, netns = b }))
    assert(link.addr_add('qls0', '10.92.0.1/24', { netns = a }))
    assert(link.addr_add('qls1', '10.92.0.2/24', { netns = b }))
    assert(link.offloads('qls0', { tso = false, gso = false, gro = false }, { netns = a }))
    assert(shape.apply('qls0', { kind = 'tbf', rate_bps = rate }, { netns = a }))
    local pidfile = os.tmpname()
    assert.is_true(succeeds('ip netns exec ' .. b .. ' iperf3 -s -1 -D -B 10.92.0.2 -I ' .. pidfile))
    local out
    finally(function()
      local f = io.open(pidfile)
      local pid = f and f:read('n')
      if f then f:close() end
      if pid then os.execute('kill ' .. math.tointeger(pid) .. ' 2>/dev/null') end
      os.remove(pidfile)
    end)
    for _ = 1, 20 do  -- until the daemon listens
      out = sh('ip netns exec ' .. a .. ' iperf3 -c 10.92.0.2 -t 2 -J')
      if out:match('"sum_received"') then break end
      os.execute('sleep 0.1')
    end
    local res = cjson.decode(out)
    local bps = res['end'].sum_received.bits_per_second
    assert.is_true(bps <= rate * 1.05, 'measured ' .. bps)
    assert.is_true(bps >= rate * 0.7, 'measured ' .. bps)
    local st = shape.stats('qls0', { netns = a })
    assert.equal('tbf', st[1].kind)
    assert.equal('root', st[1].parent)
    assert.is_true(st[1].bytes >= res['end'].sum_received.bytes)
    assert.is_true(st[1].overlimits > 0)
  end)
end)

describe('without privileges', function()
  it('returns EPERM naming the missing capability', function()
    -- A child process as nobody (setpriv drops every capability).
    local out = sh([[setpriv --reuid 65534 --regid 65534 --clear-groups lua5.4 -e "
      package.path = './lua/?.lua;' .. package.path
      package.cpath = './]] .. (os.getenv('QOSLAB_BUILD') or 'build') .. [[/?.so;' .. package.cpath
      local netns, link, shape = require 'qoslab.netns', require 'qoslab.link', require 'qoslab.shape'
      print(select(3, netns.add('qlit-perm')), select(2, netns.add('qlit-perm')))
      print(select(3, link.set('lo', {up = true})), select(2, link.set('lo', {up = true})))
      print(select(3, shape.apply('lo', {kind = 'tbf', rate_bps = 1e6})))
      print(select(3, link.offloads('lo', {gro = false})))
      print(select(3, link.add_veth{name = 'qlp0', peer = 'qlp1'}))"]])
    local lines = {}
    for l in out:gmatch('[^\n]+') do lines[#lines + 1] = l end
    assert.equal(5, #lines, out)
    assert.matches('^EPERM\t.*CAP_SYS_ADMIN', lines[1])
    assert.matches('^EPERM\t.*CAP_NET_ADMIN', lines[2])
    assert.equal('EPERM', lines[3])
    assert.equal('EPERM', lines[4])
    assert.equal('EPERM', lines[5])
    assert.is_false(netns.exists('qlit-perm'))
  end)
end)
