-- Strings that reach C: C reads a string up to its first NUL byte, so
-- "lo\0x" named lo and qoslab.netns.add("a\0b") made a namespace "a". Every
-- entry point now refuses an embedded NUL, naming the field, and `netns = ''`
-- is an error everywhere (netem took it for "no namespace"). A congestion
-- control is checked before the test starts: its syntax raises, a name this
-- kernel lacks is nil, message, "ENOTSUP" (the client used to connect, send
-- its parameters and only then fail at setsockopt). These specs need no
-- privileges: every case fails before anything is made or sent.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local netem = require 'qoslab.netem'
local netns = require 'qoslab.netns'
local link = require 'qoslab.link'
local shape = require 'qoslab.shape'
local testbed = require 'qoslab.testbed'
local cli_traffic = require 'qoslab.cli.traffic'

local NUL = 'expected a string without NUL bytes, got string "'
local NS = "expected a namespace name (1..200 bytes, no '/', not . or ..), got"

local function raises(expected, fn, ...)
  local args = table.pack(...)
  local ok, err = pcall(fn, table.unpack(args, 1, args.n))
  assert(not ok, 'expected an error containing: ' .. expected)
  assert.matches(expected, tostring(err), 1, true)
  return tostring(err)
end

describe('embedded NUL and empty netns', function()
  local client_strings = { 'host', 'bind_address', 'bind_device', 'netns', 'congestion', 'title' }

  it('qoslab.client and qoslab.run name the field, for every string option', function()
    for _, k in ipairs(client_strings) do
      local o = { host = '127.0.0.1', port = 1, [k] = 'lo\0x' }
      raises('qoslab.client: opts.' .. k .. ': ' .. NUL .. 'lo\\0x"', traffic.client, o)
      raises('qoslab.traffic.run: opts.' .. k .. ': ' .. NUL, traffic.run, o)
      raises('qoslab.traffic.start: opts.' .. k .. ': ' .. NUL, traffic.start, o)
    end
    raises('qoslab.client: opts.netns: ' .. NS .. ' string ""', traffic.client,
      { host = '127.0.0.1', netns = '' })
    raises('qoslab.client: opts.netns: ' .. NS, traffic.client, { host = '127.0.0.1', netns = 'a/b' })
  end)

  it('the errors point at the caller', function()
    local line = debug.getinfo(1, 'l').currentline + 1
    local ok, err = pcall(function() traffic.client { host = 'h\0' } end)
    assert.is_false(ok)
    assert.matches('03%-c_strings_input_spec.lua:' .. line .. ': qoslab.client: opts.host', err)
  end)

  it('qoslab.server names the field', function()
    raises('qoslab.server: opts.netns: ' .. NUL .. 'x\\0y"', traffic.server, { netns = 'x\0y' })
    raises('qoslab.server: opts.bind_address: ' .. NUL, traffic.server,
      { bind_address = '127.0.0.1\0' })
    raises('qoslab.server: opts.netns: ' .. NS .. ' string ""', traffic.server, { netns = '' })
  end)

  it('the C binding refuses them too (every C-bound string goes through one getter)', function()
    for _, k in ipairs(client_strings) do
      raises('qoslab.client: opts.' .. k .. ': ' .. NUL .. 'ab\\0"', core.traffic_client,
        { host = '127.0.0.1', port = 1, [k] = 'ab\0' })
    end
    raises('qoslab.client: opts.netns: ' .. NS .. ' string ""', core.traffic_client,
      { host = '127.0.0.1', port = 1, netns = '' })
    raises('qoslab.server: opts.netns: ' .. NUL, core.traffic_server, { netns = 'a\0', port = 0 })
    raises('qoslab.server: opts.netns: ' .. NS .. ' string ""', core.traffic_server, { netns = '', port = 0 })
    raises('qoslab.server: opts.bind_address: ' .. NUL, core.traffic_server,
      { bind_address = '::1\0', port = 0 })
    -- an enum or a key is not matched by its part before a NUL
    raises('qoslab.client: opts.proto: expected one of "tcp", "udp", got string "tcp\\0x"',
      core.traffic_client, { host = '127.0.0.1', proto = 'tcp\0x' })
    raises('qoslab.client: opts.port\\0x: unknown key', core.traffic_client,
      { host = '127.0.0.1', ['port\0x'] = 1 })
    raises('opts.port\\0x: unknown key', traffic.client, { host = '127.0.0.1', ['port\0x'] = 1 })
  end)

  it('qoslab.netem: ifname, netns, parent, handle, ingress_src and distribution names', function()
    local spec = { delay_ms = 1 }
    for name, fn in pairs { apply = function(i, o) return netem.apply(i, spec, o) end,
                            update = function(i, o) return netem.update(i, spec, o) end,
                            scope = function(i, o) return netem.scope(i, spec, o) end,
                            needed_limit = function(i, o) return netem.needed_limit(i, spec, o) end,
                            get = netem.get, stats = netem.stats, clear = netem.clear } do
      local ctx = 'qoslab.netem.' .. name
      raises(ctx .. ': ifname: expected a device name of 1..15 characters (no NUL), got string "lo\\0x"',
        fn, 'lo\0x')
      raises(ctx .. ': opts.netns: ' .. NUL .. 'a\\0b"', fn, 'lo', { netns = 'a\0b' })
      raises(ctx .. ': opts.netns: ' .. NS .. ' string ""', fn, 'lo', { netns = '' })
      raises(ctx .. ': opts.parent: ' .. NUL, fn, 'lo', { parent = '1:1\0' })
      raises(ctx .. ': opts.ingress_src: ' .. NUL, fn, 'lo',
        { direction = 'ingress', ingress_src = '10.0.0.1\0' })
    end
    raises('qoslab.netem.apply: opts.handle: ' .. NUL, netem.apply, 'lo', spec, { handle = '1:\0' })
    raises('qoslab.netem.check: spec.distribution: expected "uniform", "normal", "pareto", '
      .. '"paretonormal", "experimental" or a table of integers, got string "normal\\0x"',
      netem.check, { delay_ms = 10, jitter_ms = 1, distribution = 'normal\0x' })
  end)

  it('the netem binding checks its positional strings itself', function()
    raises('qoslab.netem.get: ifname: ' .. NUL, core.netem_get, 'lo\0')
    raises('qoslab.netem.get: opts.netns: ' .. NS .. ' string ""', core.netem_get, 'lo', '')
    raises('qoslab.netem.clear: opts.parent: ' .. NUL, core.netem_clear, 'lo', nil, 'root\0')
    raises('qoslab.netem.apply: opts.netns: ' .. NUL, core.netem_apply, 'lo', { delay_ms = 1 }, 'n\0')
    raises('opts.netns: ' .. NS .. ' string ""', core.link_speed_mbps, 'lo', '')
    raises('ifname: ' .. NUL, core.ifb_name, 'lo\0')
    raises('opts.ingress_src: ' .. NUL, core.ifb_attach, 'lo', 'qlifb1', '10.0.0.1\0')
    raises('ifb: ' .. NUL, core.ifb_detach, 'lo', 'qlifb1\0')
    raises('opts.netns: ' .. NS .. ' string ""', core.link_exists, 'lo', '')
  end)

  it('qoslab.netns: add, delete, exists and run', function()
    for name, fn in pairs { add = netns.add, delete = netns.delete, exists = netns.exists,
                            run = function(n) return netns.run(n, print) end } do
      raises('qoslab.netns.' .. name .. ': name: ' .. NUL .. 'a\\0b"', fn, 'a\0b')
      raises('qoslab.netns.' .. name .. ': name: expected a namespace name', fn, '')
    end
  end)

  it('qoslab.link: every function, ifname, address and netns', function()
    raises('qoslab.link.add_veth: opts.name: ' .. NUL, link.add_veth, { name = 'a\0b', peer = 'c' })
    raises('qoslab.link.add_veth: opts.peer: ' .. NUL, link.add_veth, { name = 'a', peer = 'c\0' })
    raises('qoslab.link.add_veth: opts.netns: ' .. NUL, link.add_veth,
      { name = 'a', peer = 'c', netns = 'n\0' })
    raises('qoslab.link.add_veth: opts.peer_netns: ' .. NS, link.add_veth,
      { name = 'a', peer = 'c', peer_netns = '' })
    local calls = {
      delete = function(i, o) return link.delete(i, o) end,
      set = function(i, o) return link.set(i, o or { up = true }) end,
      addr_add = function(i, o) return link.addr_add(i, '10.0.0.1/24', o) end,
      addr_del = function(i, o) return link.addr_del(i, '10.0.0.1/24', o) end,
      offloads = function(i, o) return link.offloads(i, nil, o) end,
      info = function(i, o) return link.info(i, o) end,
    }
    for name, fn in pairs(calls) do
      local ctx = 'qoslab.link.' .. name
      raises(ctx .. ': ifname: ' .. NUL .. 'lo\\0x"', fn, 'lo\0x')
      local o = name == 'set' and { up = true, netns = 'a\0' } or { netns = 'a\0' }
      raises(ctx .. ': opts.netns: ' .. NUL, fn, 'lo', o)
      o = name == 'set' and { up = true, netns = '' } or { netns = '' }
      raises(ctx .. ': opts.netns: ' .. NS .. ' string ""', fn, 'lo', o)
    end
    raises('qoslab.link.addr_add: addr: ' .. NUL, link.addr_add, 'lo', '10.0.0.1/24\0')
  end)

  it('qoslab.shape: every function, ifname and netns', function()
    local spec = { kind = 'tbf', rate_bps = 1000000 }
    local calls = {
      apply = function(i, o) return shape.apply(i, spec, o) end,
      get = shape.get, clear = shape.clear, reset_child = shape.reset_child, stats = shape.stats,
    }
    for name, fn in pairs(calls) do
      local ctx = 'qoslab.shape.' .. name
      raises(ctx .. ': ifname: ' .. NUL, fn, 'lo\0x')
      raises(ctx .. ': opts.netns: ' .. NUL, fn, 'lo', { netns = 'a\0' })
      raises(ctx .. ': opts.netns: ' .. NS .. ' string ""', fn, 'lo', { netns = '' })
    end
  end)

  it('qoslab.testbed: the namespace prefix', function()
    raises('qoslab.testbed: opts.prefix: expected a string of 1..64 letters, digits, '
      .. '"-", "_" or ".", got string "a\\0b"', testbed.testbed, { prefix = 'a\0b' })
    raises('qoslab.testbed: opts.prefix: expected a string of 1..64', testbed.testbed,
      { prefix = '' })
  end)

  it('qoslab.report: file paths (io.open would cut them at the NUL)', function()
    local report = require 'qoslab.report'
    raises('qoslab.report.write_csv: path: ' .. NUL .. '/tmp/x\\0.csv"', report.write_csv, '/tmp/x\0.csv', {})
    raises('qoslab.report.write_json: path: ' .. NUL, report.write_json, '/tmp/x\0.json', {})
    raises('qoslab.report.read_csv: path: ' .. NUL, report.read_csv, '/etc/passwd\0.csv')
    raises('qoslab.report.read_json: path: ' .. NUL, report.read_json, '/etc/passwd\0.json')
    raises('qoslab.report.read_json: path: expected a string, got nil', report.read_json)
  end)

  it('the CLI: --netns "" and NUL-free strings, with the flag named', function()
    for _, cmd in ipairs { 'client', 'server' } do
      local opts = cmd == 'client' and { host = '127.0.0.1', netns = '' } or { netns = '' }
      local ok, err = pcall(traffic[cmd], opts)
      assert.is_false(ok)
      assert.equal('--netns (netns): ' .. NS .. ' string ""', cli_traffic.flag_message(err))
    end
    local ok, err = pcall(traffic.client, { host = '127.0.0.1', congestion = 'cu\0bic' })
    assert.is_false(ok)
    assert.equal('-C (congestion): ' .. NUL .. 'cu\\0bic"', cli_traffic.flag_message(err))
  end)

  it('bin/qoslab client, server and netem: --netns "" is one line, exit 2', function()
    local function run(args)
      local errf = os.tmpname()
      local p = assert(io.popen('timeout 20 lua5.4 bin/qoslab ' .. args .. ' 2>' .. errf))
      p:read('a')
      local _, _, status = p:close()
      local f = assert(io.open(errf))
      local err = f:read('a')
      f:close()
      os.remove(errf)
      return status, err
    end
    local rc, err = run("client 127.0.0.1 -p 1 --netns ''")
    assert.equal(2, rc)
    assert.equal('qoslab client: --netns (netns): ' .. NS .. ' string ""\n', err)
    rc, err = run("server -p 1 --netns ''")
    assert.equal(2, rc)
    assert.equal('qoslab server: --netns (netns): ' .. NS .. ' string ""\n', err)
    rc, err = run("netem show lo --netns ''")
    assert.equal(2, rc)
    assert.equal('qoslab.netem.get: opts.netns: ' .. NS .. ' string ""\n', err)
    -- a congestion control this kernel lacks: the flag named, the code, exit 1
    rc, err = run('client 127.0.0.1 -p 1 -C nosuchcc')
    assert.equal(1, rc)
    assert.matches('^qoslab client: %-C %(congestion%): this kernel has no congestion control '
      .. '"nosuchcc" %(available: .*modprobe tcp_nosuchcc%) or pick an available one %(ENOTSUP%)\n$', err)
  end)
end)

describe('congestion control', function()
  it('a name of the wrong syntax raises naming the field (Lua and C)', function()
    local expected = 'opts.congestion: expected a congestion control name (1..15 of a-z, 0-9, _; '
      .. 'e.g. "cubic", "bbr"), got'
    for _, v in ipairs { 'BBR', 'a-b', 'cu bic', '../x' } do
      raises('qoslab.client: ' .. expected, traffic.client, { host = '127.0.0.1', congestion = v })
      raises('qoslab.client: ' .. expected, core.traffic_client,
        { host = '127.0.0.1', port = 1, congestion = v })
    end
    -- 15 characters is the kernel's limit (TCP_CA_NAME_MAX 16 with the NUL);
    -- the façade and the binding say it in the core's one wording
    raises('qoslab.client: ' .. expected .. ' string "' .. string.rep('c', 16) .. '"',
      traffic.client, { host = '127.0.0.1', congestion = string.rep('c', 16) })
    raises('qoslab.client: ' .. expected, core.traffic_client,
      { host = '127.0.0.1', port = 1, congestion = string.rep('c', 16) })
    assert.is_table(traffic.client { host = '127.0.0.1', congestion = string.rep('c', 15) })
  end)

  it('a name this kernel lacks fails before the test starts, listing the available ones', function()
    local f = io.open('/proc/sys/net/ipv4/tcp_available_congestion_control')
    local avail = f and f:read('l')
    if f then f:close() end
    -- port 1 on loopback: nobody listens, so an attempt to connect would
    -- give ECONNREFUSED instead
    local ud, msg, code = core.traffic_client { host = '127.0.0.1', port = 1, congestion = 'nosuchcc' }
    assert.is_nil(ud)
    assert.equal('ENOTSUP', code)
    assert.matches('^opts%.congestion: this kernel has no congestion control "nosuchcc" %(available: ', msg)
    if avail then assert.matches('(available: ' .. avail .. ')', msg, 1, true) end
    assert.matches('modprobe tcp_nosuchcc', msg, 1, true)
    local h, m2, c2 = traffic.client { host = '127.0.0.1', port = 1, congestion = 'nosuchcc' }:start()
    assert.is_nil(h)
    assert.equal('ENOTSUP', c2)
    assert.equal(msg, m2)
    local res, m3, c3 = traffic.run { host = '127.0.0.1', port = 1, congestion = 'nosuchcc' }
    assert.is_nil(res)
    assert.equal('ENOTSUP', c3)
    assert.equal(msg, m3)
    -- an available one passes the check: the test then fails to connect
    local _, _, c4 = traffic.run { host = '127.0.0.1', port = 1, congestion = 'reno',
      connect_timeout_s = 2 }
    assert.equal('ECONNREFUSED', c4)
  end)
end)
