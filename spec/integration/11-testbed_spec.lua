-- qoslab.testbed on this kernel: builds client and server namespaces joined
-- by a veth pair, rate-limits and impairs them, and leaves nothing behind
-- (compared with `ip netns list` / `ip -o link` before and after), also when
-- construction fails halfway. This kernel has no sch_netem, so the netem
-- helper is replaced by a stand-in that records its calls and grafts a
-- marker qdisc where netem would go: an htb with "default 77" (not a fifo,
-- so, like netem, tbf leaves it alone on a change; the real netem is
-- exercised in spec/netem/).
local cjson = require 'cjson'
local netns = require 'qoslab.netns'
local shape = require 'qoslab.shape'
-- The veth backend, which the stand-in netem is for (this kernel's
-- default, "auto", would take the native link: impair_link_spec and
-- testbed_backend_spec test that one).
local function testbed(o)
  o.backend = 'netem'
  return require('qoslab.testbed')(o)
end

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  p:close()
  return out
end

local function succeeds(cmd)
  local ok, _, code = os.execute(cmd .. ' >/dev/null 2>&1')
  return ok == true and code == 0
end

local function snapshot()
  return { netns = sh('ip netns list'), links = sh("ip -o link show | awk '{print $2}'") }
end

-- Stand-in for qoslab.netem with the contract the testbed relies on.
local function fake_netem(fail_apply)
  local calls = {}
  local m = {}
  -- The testbed checks its impairment specs with netem.check before it builds.
  function m.check(spec) return spec end
  function m.apply(ifname, spec, opts)
    calls[#calls + 1] = { 'apply', ifname, spec, opts }
    if fail_apply then return nil, 'kernel has no sch_netem: modprobe sch_netem', 'ENOTSUP' end
    local where = opts.parent and ('parent ' .. opts.parent) or 'root'
    -- A fresh handle each time: htb cannot be changed in place.
    assert(succeeds(string.format('tc -n %s qdisc replace dev %s %s handle %x: htb default 77',
      opts.netns, ifname, where, 0x20 + #calls)))
    return { kind = 'netem' }
  end
  function m.clear(ifname, opts)
    calls[#calls + 1] = { 'clear', ifname, opts }
    assert(succeeds(string.format('tc -n %s qdisc del dev %s root', opts.netns, ifname)))
    return true
  end
  return m, calls
end

local saved
before_each(function() saved = package.loaded['qoslab.netem'] end)
after_each(function() package.loaded['qoslab.netem'] = saved end)

local function qdiscs(ns, ifname)
  return cjson.decode(sh('tc -n ' .. ns .. ' -j qdisc show dev ' .. ifname))
end

describe('qoslab.testbed', function()
  it('builds a rate-limited IPv4/IPv6 testbed and close leaves nothing', function()
    local before = snapshot()
    do
      local tb <close> = assert(testbed { rate_bps = 200000000, ipv6 = true, mtu_bytes = 1400 })
      assert.is_true(netns.exists(tb.client_netns))
      assert.is_true(netns.exists(tb.server_netns))
      assert.matches(tb.client_netns, sh('ip netns list'), 1, true)
      assert.matches('^10%.%d+%.%d+%.1$', tb.client_addr)
      assert.equal(tb.client_addr:gsub('1$', '2'), tb.server_addr)
      assert.is_true(succeeds('ip netns exec ' .. tb.client_netns .. ' ping -c1 -W1 ' .. tb.server_addr))
      assert.is_true(succeeds('ip netns exec ' .. tb.server_netns .. ' ping -6 -c1 -W1 ' .. tb.client_addr6))
      assert.is_true(succeeds('ip netns exec ' .. tb.client_netns .. ' ping -c1 -W1 127.0.0.1'))
      for _, s in ipairs { { tb.client_netns, tb.client_ifname }, { tb.server_netns, tb.server_ifname } } do
        local g = shape.get(s[2], { netns = s[1] })
        assert.equal('tbf', g.kind)
        assert.equal(200000000, g.rate_bps)
        assert.matches('mtu 1400', sh('ip -n ' .. s[1] .. ' -o link show ' .. s[2]))
        local k = sh('ip netns exec ' .. s[1] .. ' ethtool -k ' .. s[2])
        assert.matches('tcp%-segmentation%-offload: off', k)
        assert.matches('generic%-segmentation%-offload: off', k)
        assert.matches('generic%-receive%-offload: off', k)
      end
      local got = assert(tb:get())
      assert.same({ client = { shape = shape.get(tb.client_ifname, { netns = tb.client_netns }) },
                    server = { shape = shape.get(tb.server_ifname, { netns = tb.server_netns }) } }, got)
      assert.equal(200000000, got.client.shape.rate_bps)
      local st = tb:stats()
      assert.equal('tbf', st.client[1].kind)
      assert.is_true(st.client[1].packets >= 1)
      assert.equal('tbf', st.server[1].kind)
      assert.matches('qoslab.Testbed', tostring(tb))
    end
    assert.same(before, snapshot())
  end)

  it('keeps offloads on when asked and works without a rate limit', function()
    local before = snapshot()
    local tb = assert(testbed { offloads = true })
    -- Methods called with '.' returned true and did nothing (tb.impair{...})
    -- or failed inside qoslab: they name the method at the caller's line.
    for _, m in ipairs { 'impair', 'get', 'stats', 'close' } do
      local ok, err = pcall(function() local r = tb[m]({ delay_ms = 1 }) return r end)
      assert.is_false(ok, m)
      assert.matches('11%-testbed_spec%.lua:%d+: qoslab%.Testbed:' .. m ..
        ': expected a qoslab%.Testbed as self %(call it as tb:' .. m .. '%(%.%.%.%)%), got table', err)
    end
    assert.is_nil(shape.get(tb.client_ifname, { netns = tb.client_netns }))
    assert.matches('tcp%-segmentation%-offload: on', sh('ip netns exec ' .. tb.client_netns .. ' ethtool -k ' .. tb.client_ifname))
    assert.is_true(tb:close())
    assert.is_true(tb:close())
    assert.same(before, snapshot())
    assert.error_matches(function() tb:impair({ delay_ms = 1 }) end, 'closed')
    assert.error_matches(function() tb:get() end, 'closed')
  end)

  it('puts the impairment under the htb shaper and takes it away again', function()
    local fake, calls = fake_netem()
    package.loaded['qoslab.netem'] = fake
    local before = snapshot()
    do
      local tb <close> = assert(testbed { rate_bps = 100000000, shape = 'htb',
        impair = { delay_ms = 10 }, reverse_impair = { delay_ms = 20 } })
      assert.same({ 'apply', tb.client_ifname, { delay_ms = 10 }, { netns = tb.client_netns, parent = '1:10' } }, calls[1])
      assert.same({ 'apply', tb.server_ifname, { delay_ms = 20 }, { netns = tb.server_netns, parent = '1:10' } }, calls[2])
      local q = qdiscs(tb.client_netns, tb.client_ifname)
      assert.equal('htb', q[1].kind)
      assert.equal('htb', q[2].kind)
      assert.equal('1:10', q[2].parent)
      assert.equal('0x77', q[2].options.default)
      -- Changing the rate keeps the impairment under the shaper.
      assert(shape.apply(tb.client_ifname, { kind = 'htb', rate_bps = 50000000 }, { netns = tb.client_netns }))
      q = qdiscs(tb.client_netns, tb.client_ifname)
      assert.equal(50000000, shape.get(tb.client_ifname, { netns = tb.client_netns }).rate_bps)
      assert.equal('htb', q[2].kind)
      assert.equal('0x77', q[2].options.default)
      assert.is_true(tb:impair(nil))
      q = qdiscs(tb.client_netns, tb.client_ifname)
      assert.equal('htb', q[1].kind)
      assert.equal('pfifo', q[2].kind)        -- the leaf's default again
      assert.equal(1000, q[2].options.limit)
      assert.is_true(tb:impair({ loss_pct = 1 }, 'reverse'))
      assert.same({ 'apply', tb.server_ifname, { loss_pct = 1 }, { netns = tb.server_netns, parent = '1:10' } }, calls[3])
      assert.equal(3, #calls)
    end
    assert.same(before, snapshot())
  end)

  it('under tbf, removing the impairment restores a bfifo (traffic keeps flowing)', function()
    local fake, calls = fake_netem()
    package.loaded['qoslab.netem'] = fake
    local tb <close> = assert(testbed { rate_bps = 100000000, impair = { delay_ms = 5 } })
    assert.equal('1:1', calls[1][4].parent)
    assert(shape.apply(tb.client_ifname, { kind = 'tbf', rate_bps = 50000000 }, { netns = tb.client_netns }))
    local q = qdiscs(tb.client_netns, tb.client_ifname)
    assert.equal('htb', q[2].kind)   -- the stand-in netem stays under the changed tbf
    assert.equal('0x77', q[2].options.default)
    assert.is_true(tb:impair({}))
    q = qdiscs(tb.client_netns, tb.client_ifname)
    assert.equal('bfifo', q[2].kind)
    assert.equal(shape.get(tb.client_ifname, { netns = tb.client_netns }).limit_bytes, q[2].options.limit)
    assert.is_true(succeeds('ip netns exec ' .. tb.client_netns .. ' ping -c1 -W1 ' .. tb.server_addr))
  end)

  it('without a shaper the impairment is the root qdisc and clear goes to netem', function()
    local fake, calls = fake_netem()
    package.loaded['qoslab.netem'] = fake
    local tb <close> = assert(testbed { impair = { delay_ms = 5 } })
    assert.is_nil(calls[1][4].parent)
    assert.is_true(tb:impair(nil))
    assert.same({ 'clear', tb.client_ifname, { netns = tb.client_netns } }, calls[2])
    assert.is_true(tb:impair(nil))  -- nothing there: no call
    assert.equal(2, #calls)
  end)

  it('removes what it made when netem fails halfway and returns nil, msg, code', function()
    package.loaded['qoslab.netem'] = fake_netem(true)
    local before = snapshot()
    local tb, msg, code = testbed { rate_bps = 1000000000, impair = { delay_ms = 100 } }
    assert.is_nil(tb)
    assert.equal('ENOTSUP', code)
    assert.matches('sch_netem', msg)
    assert.same(before, snapshot())
  end)

  it('removes what it made when a namespace name is taken halfway (EEXIST)', function()
    local before = snapshot()
    -- Someone takes the server's name between the testbed's choice of a
    -- free name and its making of that namespace: here, as it makes the
    -- client's.
    local real_add, next_base = netns.add, nil
    netns.add = function(name)
      if not next_base and name:match('^qlitb%-.*%-c$') then
        next_base = name:sub(1, -3)
        assert(real_add(next_base .. '-s'))
      end
      return real_add(name)
    end
    finally(function()
      netns.add = real_add
      if next_base and netns.exists(next_base .. '-s') then netns.delete(next_base .. '-s') end
    end)
    local tb, msg, code = testbed { prefix = 'qlitb' }
    netns.add = real_add
    assert.is_nil(tb)
    assert.equal('EEXIST', code)
    assert.matches(next_base .. '-s', msg, 1, true)
    assert.is_false(netns.exists(next_base .. '-c'))
    netns.delete(next_base .. '-s')
    assert.same(before, snapshot())
  end)

  it('a to-be-closed testbed is removed when the code using it raises', function()
    local before = snapshot()
    local ok, err = pcall(function()
      local tb <close> = assert(testbed { rate_bps = 10000000 })
      assert.is_true(netns.exists(tb.server_netns))
      error('experiment failed', 0)
    end)
    assert.is_false(ok)
    assert.equal('experiment failed', err)
    assert.same(before, snapshot())
  end)

  it('an unreachable testbed is removed by the garbage collector', function()
    local before = snapshot()
    local name
    do
      local tb = assert(testbed {})
      name = tb.client_netns
    end
    collectgarbage()
    collectgarbage()
    assert.is_false(netns.exists(name))
    assert.same(before, snapshot())
  end)

  it('removes what it made when a Lua error is raised halfway', function()
    package.loaded['qoslab.netem'] = { check = function(s) return s end,
                                       apply = function() error('netem helper exploded') end }
    local before = snapshot()
    assert.error_matches(function() testbed { impair = { delay_ms = 1 } } end, 'netem helper exploded')
    assert.same(before, snapshot())
  end)
end)

describe('qoslab.testbed after kill -9', function()
  it('leaves records that qoslab.state.cleanup removes completely', function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute('mkdir -p ' .. dir))
    finally(function() os.execute('rm -rf ' .. dir) end)
    local before = snapshot()
    local script = dir .. '/killed.lua'
    local f = assert(io.open(script, 'w'))
    f:write([[
      local tb = assert(require('qoslab.testbed'){ rate_bps = 10000000, shape = 'htb' })
      io.open(']] .. dir .. [[/made', 'w'):write(tb.client_netns, '\n', tb.server_netns, '\n'):close()
      os.execute('kill -9 $PPID')
      os.execute('sleep 5')
    ]])
    f:close()
    -- --out inside dir: a killed run cannot remove its results folder.
    os.execute('QOSLAB_STATE_DIR=' .. dir .. ' lua5.4 bin/qoslab run ' .. script .. ' --out ' .. dir
      .. '/out >/dev/null 2>&1')
    local made = assert(io.open(dir .. '/made')):read('a')
    local cns = made:match('^(%S+)')
    assert.is_true(netns.exists(cns))   -- the kill really left it behind
    -- qoslab.state reads QOSLAB_STATE_DIR: clean up from a child process.
    -- (qoslab.state removes through qoslab.core's netlink calls: the build's cpath.)
    local out = sh('QOSLAB_STATE_DIR=' .. dir .. [[ lua5.4 -e "package.path='./lua/?.lua;'..package.path
      package.cpath='./]] .. (os.getenv('QOSLAB_BUILD') or 'build') .. [[/?.so;'..package.cpath
      for _, r in ipairs(require('qoslab.state').cleanup()) do print(r.kind, r.removed) end"]])
    assert.matches('netns\ttrue', out)
    assert.is_false(netns.exists(cns))
    assert.same(before, snapshot())
  end)
end)
