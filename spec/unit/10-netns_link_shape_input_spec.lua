-- Bad input to qoslab.netns, qoslab.link, qoslab.shape and qoslab.testbed
-- raises an error naming the function and the field, before anything is
-- created (these specs need no privileges and touch no namespace).
local netns = require 'qoslab.netns'
local link = require 'qoslab.link'
local shape = require 'qoslab.shape'
local testbed = require 'qoslab.testbed'

local function raises(pattern, fn, ...)
  local args = table.pack(...)
  local ok, err = pcall(fn, table.unpack(args, 1, args.n))
  assert.is_false(ok, 'expected an error matching ' .. pattern)
  assert.matches(pattern, tostring(err), 1, true)
end

describe('qoslab.netns bad input', function()
  it('add/delete/exists reject non-strings and bad names', function()
    raises('qoslab.netns.add: name: expected a string, got 42', netns.add, 42)
    raises('qoslab.netns.add: name: expected a namespace name', netns.add, 'a/b')
    raises('qoslab.netns.add: name: expected a namespace name', netns.add, '')
    raises('qoslab.netns.add: name: expected a namespace name', netns.add, '..')
    raises('qoslab.netns.add: name: expected a namespace name', netns.add, string.rep('x', 201))
    raises('qoslab.netns.delete: name: expected a string, got', netns.delete)
    raises('qoslab.netns.delete: name: expected a namespace name', netns.delete, 'x/y')
    raises('qoslab.netns.exists: name: expected a string, got table', netns.exists, {})
    raises('qoslab.netns.exists: name: expected a namespace name', netns.exists, '.')
  end)

  it('run rejects a bad name or a non-function', function()
    raises('qoslab.netns.run: name: expected a string, got 1', netns.run, 1, print)
    raises('qoslab.netns.run: fn: expected a function, got string', netns.run, 'x', 'f')
    raises('qoslab.netns.run: name: expected a namespace name', netns.run, 'a/b', print)
  end)

  it('unique_name checks the prefix and includes pid and a counter', function()
    raises('qoslab.netns.unique_name: prefix: expected a string', netns.unique_name, 5)
    raises('qoslab.netns.unique_name: prefix: expected a string of 1..64', netns.unique_name, 'a b')
    local a, b = netns.unique_name('t'), netns.unique_name('t')
    local pid = netns._pid()
    assert.matches('^t%-' .. pid .. '%-%d+$', a)
    assert.are_not.equal(a, b)
    assert.equal(tonumber(a:match('(%d+)$')) + 1, tonumber(b:match('(%d+)$')))
  end)

  it('unique_name skips names an earlier process with the same pid left in /run/netns', function()
    local fs = require 'qoslab.fs'
    local dir = assert(fs.mkdtemp('/tmp/qoslab-netns-'))
    local saved = netns._run_dir
    netns._run_dir = dir
    local ok, err = pcall(function()
      local pid = netns._pid()
      local n = tonumber(netns.unique_name('t'):match('(%d+)$'))
      -- n + 1 left as a testbed's client namespace, n + 2 as a bare name;
      -- "t-PID-(n+3)0" only shares a prefix and does not count
      for _, stale in ipairs { ('t-%d-%d-c'):format(pid, n + 1), ('t-%d-%d'):format(pid, n + 2),
        ('t-%d-%d0'):format(pid, n + 3) } do
        assert(fs.write_file(dir .. '/' .. stale, ''))
      end
      assert.equal(('t-%d-%d'):format(pid, n + 3), netns.unique_name('t'))
      assert.equal(('t-%d-%d'):format(pid, n + 4), netns.unique_name('t'))
    end)
    netns._run_dir = saved
    for _, name in ipairs(fs.list(dir) or {}) do os.remove(dir .. '/' .. name) end
    os.remove(dir)
    assert(ok, err)
  end)
end)

describe('qoslab.link bad input', function()
  it('add_veth checks its table', function()
    raises('qoslab.link.add_veth: opts: expected a table, got string', link.add_veth, 'v0')
    raises('qoslab.link.add_veth: opts.name: expected a string, got nil', link.add_veth, { peer = 'b' })
    raises('qoslab.link.add_veth: opts.peer: expected a string, got nil', link.add_veth, { name = 'a' })
    raises('qoslab.link.add_veth: opts.name: expected a string, got 3', link.add_veth, { name = 3, peer = 'b' })
    raises('qoslab.link.add_veth: opts.colour: unknown key', link.add_veth, { name = 'a', peer = 'b', colour = 1 })
    raises('qoslab.link.add_veth: opts.name: expected an interface name', link.add_veth,
      { name = 'this-name-is-too-long', peer = 'b' })
    raises('qoslab.link.add_veth: opts.peer: expected an interface name', link.add_veth, { name = 'a', peer = 'b:1' })
    raises('qoslab.link.add_veth: opts.peer_netns: expected a namespace name', link.add_veth,
      { name = 'a', peer = 'b', peer_netns = 'x/y' })
    raises('qoslab.link.add_veth: opts.netns: expected a string, got true', link.add_veth,
      { name = 'a', peer = 'b', netns = true })
  end)

  it('delete/info check ifname and opts', function()
    raises('qoslab.link.delete: ifname: expected a string, got', link.delete)
    raises('qoslab.link.delete: opts: expected a table, got string', link.delete, 'v0', 'ns')
    raises('qoslab.link.delete: opts.mtu_bytes: unknown key', link.delete, 'v0', { mtu_bytes = 1 })
    raises('qoslab.link.info: ifname: expected an interface name', link.info, 'a b')
    raises('qoslab.link.info: opts.netns: expected a string, got 1', link.info, 'lo', { netns = 1 })
  end)

  it('set checks up, mtu_bytes and unknown keys', function()
    raises('qoslab.link.set: opts: expected a table, got', link.set, 'lo')
    raises('qoslab.link.set: opts.up: expected a boolean, got 1', link.set, 'lo', { up = 1 })
    raises('qoslab.link.set: opts.mtu_bytes: expected an integer in [68, 65535], got 67', link.set, 'lo', { mtu_bytes = 67 })
    raises('qoslab.link.set: opts.mtu_bytes: expected an integer in [68, 65535], got 65536', link.set, 'lo', { mtu_bytes = 65536 })
    raises('qoslab.link.set: opts.mtu_bytes: expected an integer', link.set, 'lo', { mtu_bytes = 1500.5 })
    raises('qoslab.link.set: opts.speed: unknown key', link.set, 'lo', { speed = 1 })
  end)

  it('addr_add/addr_del check the address', function()
    raises('qoslab.link.addr_add: addr: expected a string, got', link.addr_add, 'lo')
    for _, bad in ipairs { '10.0.0.1', '10.0.0.1/33', 'fd00::1/129', 'host/24', '10.0.0.1/', '/24', '10.0.0.1/2x', '10.0.0.1/-1' } do
      raises('qoslab.link.addr_add: addr: expected "A.B.C.D/0..32"', link.addr_add, 'lo', bad)
    end
    raises('qoslab.link.addr_del: addr: expected', link.addr_del, 'lo', '1.2.3.4')
    raises('qoslab.link.addr_add: opts.x: unknown key', link.addr_add, 'lo', '10.0.0.1/8', { x = 1 })
  end)

  it('route_add checks destination and gateway, forwarding its switch', function()
    raises('qoslab.link.route_add: dst: expected a string, got no value', link.route_add)
    raises('qoslab.link.route_add: via: expected a string, got no value', link.route_add, 'default')
    for _, bad in ipairs { '10.0.0.0', '10.0.0.0/33', 'fd00::/129', 'host/24', 'defaults', '/8', '10.0.0.0/x' } do
      raises('qoslab.link.route_add: dst: expected "default", "A.B.C.D/0..32" or "X:...:Y/0..128", got "'
        .. bad .. '"', link.route_add, bad, '10.0.0.1')
    end
    for _, bad in ipairs { '10.0.0.1/24', 'gw', '' } do
      raises('qoslab.link.route_add: via: expected an address "A.B.C.D" or "X:...:Y", got "' .. bad .. '"',
        link.route_add, 'default', bad)
    end
    raises('qoslab.link.route_add: via: expected an address of dst\'s family (IPv4), got "fd00::1"',
      link.route_add, '10.1.0.0/16', 'fd00::1')
    raises('qoslab.link.route_add: via: expected an address of dst\'s family (IPv6), got "10.0.0.1"',
      link.route_add, 'fd00:1::/64', '10.0.0.1')
    raises('qoslab.link.route_add: opts.via: unknown key', link.route_add, 'default', '10.0.0.1', { via = 1 })
    raises('qoslab.link.route_add: opts.netns: expected a namespace name', link.route_add, 'default',
      '10.0.0.1', { netns = 'a/b' })
    raises('qoslab.link.forwarding: on: expected a boolean, got no value', link.forwarding)
    raises('qoslab.link.forwarding: on: expected a boolean, got 1', link.forwarding, 1)
    raises('qoslab.link.forwarding: opts.ipv6: expected a boolean, got string "yes"', link.forwarding, true,
      { ipv6 = 'yes' })
    raises('qoslab.link.forwarding: opts.all: unknown key', link.forwarding, true, { all = true })
  end)

  it('offloads checks its switches', function()
    raises('qoslab.link.offloads: set.tso: expected a boolean, got string', link.offloads, 'lo', { tso = 'off' })
    raises('qoslab.link.offloads: set.lro: unknown key', link.offloads, 'lo', { lro = false })
    raises('qoslab.link.offloads: set: expected a table, got false', link.offloads, 'lo', false)
    raises('qoslab.link.offloads: opts.netns: expected a string', link.offloads, 'lo', {}, { netns = {} })
  end)
end)

describe('qoslab.shape bad input', function()
  local function apply(spec, opts) return shape.apply('lo', spec, opts) end

  it('requires kind and rate_bps', function()
    raises('qoslab.shape.apply: ifname: expected a string, got', shape.apply)
    raises('qoslab.shape.apply: spec: expected a table, got', shape.apply, 'lo')
    raises('qoslab.shape.apply: spec.kind: expected "tbf" or "htb", got nil', apply, { rate_bps = 1e6 })
    raises('qoslab.shape.apply: spec.kind: expected one of', apply, { kind = 'netem', rate_bps = 1e6 })
    raises('qoslab.shape.apply: spec.rate_bps: expected an integer in [8, 8000000000000000] (bits/s), got nil',
      apply, { kind = 'tbf' })
  end)

  it('range-checks every number', function()
    raises('spec.rate_bps: expected an integer in [8, 8000000000000000], got 7', apply, { kind = 'tbf', rate_bps = 7 })
    raises('spec.rate_bps: expected an integer', apply, { kind = 'tbf', rate_bps = 1e6 + 0.5 })
    raises('spec.rate_bps: expected an integer', apply, { kind = 'tbf', rate_bps = 0 / 0 })
    raises('spec.rate_bps: expected an integer', apply, { kind = 'tbf', rate_bps = math.huge })
    raises('spec.rate_bps: expected an integer', apply, { kind = 'tbf', rate_bps = '1000' })
    raises('spec.burst_bytes: expected an integer in [1, 4294967295], got 0', apply, { kind = 'tbf', rate_bps = 1e6, burst_bytes = 0 })
    raises('spec.burst_bytes: expected an integer in [1, 4294967295], got 4294967296', apply,
      { kind = 'tbf', rate_bps = 1e6, burst_bytes = 4294967296 })
    raises('spec.limit_bytes: expected an integer in [1, 4294967295], got -1', apply, { kind = 'tbf', rate_bps = 1e6, limit_bytes = -1 })
    raises('spec.latency_ms: expected a finite number', apply, { kind = 'tbf', rate_bps = 1e6, latency_ms = 0 })
    raises('spec.latency_ms: expected a finite number', apply, { kind = 'tbf', rate_bps = 1e6, latency_ms = 1 / 0 })
    raises('spec.ceil_bps: expected an integer', apply, { kind = 'htb', rate_bps = 1e6, ceil_bps = 1 })
    raises('spec.cburst_bytes: expected an integer', apply, { kind = 'htb', rate_bps = 1e6, cburst_bytes = 'x' })
  end)

  it('rejects unknown keys and contradictory combinations', function()
    raises('qoslab.shape.apply: spec.delay_ms: unknown key', apply, { kind = 'tbf', rate_bps = 1e6, delay_ms = 1 })
    raises('qoslab.shape.apply: spec.latency_ms: give either latency_ms or limit_bytes', apply,
      { kind = 'tbf', rate_bps = 1e6, latency_ms = 10, limit_bytes = 10000 })
    raises('qoslab.shape.apply: spec.ceil_bps: only for kind "htb"', apply, { kind = 'tbf', rate_bps = 1e6, ceil_bps = 2e6 })
    raises('qoslab.shape.apply: spec.cburst_bytes: only for kind "htb"', apply, { kind = 'tbf', rate_bps = 1e6, cburst_bytes = 2e4 })
    raises('qoslab.shape.apply: spec.limit_bytes: only for kind "tbf"', apply, { kind = 'htb', rate_bps = 1e6, limit_bytes = 1e5 })
    raises('qoslab.shape.apply: spec.latency_ms: only for kind "tbf"', apply, { kind = 'htb', rate_bps = 1e6, latency_ms = 5 })
    raises('qoslab.shape.apply: spec.ceil_bps: expected at least spec.rate_bps', apply,
      { kind = 'htb', rate_bps = 2e6, ceil_bps = 1e6 })
    raises('qoslab.shape.apply: opts.parent: unknown key', apply, { kind = 'tbf', rate_bps = 1e6 }, { parent = '1:' })
    raises('qoslab.shape.apply: opts.netns: expected a namespace name', apply, { kind = 'tbf', rate_bps = 1e6 }, { netns = 'a/b' })
  end)

  it('get/clear/stats check ifname and opts', function()
    raises('qoslab.shape.get: ifname: expected a string, got', shape.get)
    raises('qoslab.shape.get: opts.kind: unknown key', shape.get, 'lo', { kind = 'tbf' })
    raises('qoslab.shape.clear: ifname: expected an interface name', shape.clear, '')
    raises('qoslab.shape.clear: opts: expected a table, got 1', shape.clear, 'lo', 1)
    raises('qoslab.shape.stats: ifname: expected a string, got true', shape.stats, true)
    raises('qoslab.shape.stats: opts.netns: expected a string', shape.stats, 'lo', { netns = 2 })
  end)
end)

describe('qoslab.testbed bad input', function()
  it('checks every option before creating anything', function()
    raises('qoslab.testbed: opts: expected a table, got 5', testbed.testbed, 5)
    raises('qoslab.testbed: opts.speed: unknown key', testbed.testbed, { speed = 1 })
    raises('qoslab.testbed: opts.rate_bps: expected an integer in [8, 8000000000000000], got 0', testbed.testbed, { rate_bps = 0 })
    raises('qoslab.testbed: opts.rate_bps: expected an integer', testbed.testbed, { rate_bps = 'fast' })
    raises('qoslab.testbed: opts.shape: expected one of "tbf", "htb", got string "cake"', testbed.testbed, { shape = 'cake' })
    raises('qoslab.testbed: opts.offloads: expected a boolean, got string "no"', testbed.testbed, { offloads = 'no' })
    raises('qoslab.testbed: opts.mtu_bytes: expected an integer in [68, 65535], got 10', testbed.testbed, { mtu_bytes = 10 })
    raises('qoslab.testbed: opts.ipv6: expected a boolean, got 1', testbed.testbed, { ipv6 = 1 })
    raises('qoslab.testbed: opts.bottleneck: expected one of "host", "router", got string "switch"',
      testbed.testbed, { bottleneck = 'switch' })
    raises('qoslab.testbed: opts.bottleneck: expected one of "host", "router", got true', testbed.testbed,
      { bottleneck = true })
    raises('qoslab.testbed: opts.prefix: expected a string, got table', testbed.testbed, { prefix = {} })
    raises('qoslab.testbed: opts.prefix: expected a string of 1..64', testbed.testbed, { prefix = 'a/b' })
    raises('qoslab.testbed: opts.impair: expected a table, got string "delay 10ms"', testbed.testbed, { impair = 'delay 10ms' })
    raises('qoslab.testbed: opts.reverse_impair: expected a table, got 3', testbed.testbed, { reverse_impair = 3 })
    raises('qoslab.testbed: opts.burst_bytes: only with opts.rate_bps', testbed.testbed, { burst_bytes = 10000 })
    raises('qoslab.testbed: opts.burst_bytes: expected an integer in [1, 4294967295], got 0', testbed.testbed,
      { rate_bps = 1e6, burst_bytes = 0 })
  end)

  it('checks the impairment specs up front, naming the testbed field at the caller', function()
    raises('qoslab.testbed: opts.impair.delay_ms: expected a finite number', testbed.testbed,
      { impair = { delay_ms = -5 } })
    raises('qoslab.testbed: opts.reverse_impair.loss_pct: expected a finite number in [0, 100], got nan',
      testbed.testbed, { reverse_impair = { loss_pct = 0 / 0 } })
    raises('qoslab.testbed: opts.impair.bogus: unknown key', testbed.testbed,
      { impair = { delay_ms = 5, limit_packets = 'auto', bogus = 1 } })
    -- Positioned at the caller's line, not inside qoslab's files.
    local line = debug.getinfo(1, 'l').currentline + 1
    local ok, err = pcall(function() return (testbed { impair = { delay_ms = -5 } }) end)
    assert.is_false(ok)
    assert.matches('^[^\n]*10%-netns_link_shape_input_spec%.lua:' .. line .. ': qoslab%.testbed: opts%.impair%.delay_ms', err)
    local _, e2 = pcall(function() return (testbed.testbed { burst_bytes = 1 }) end)
    assert.is_nil(e2:find('lua/qoslab/', 1, true), e2)
  end)
end)
