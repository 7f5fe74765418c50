-- qoslab.testbed with bottleneck = "router": client ─ router ─ server
-- namespaces, IPv4 and IPv6 routed through the router (forwarding on there
-- only), the shaper and the impairments on the router's egress (towards the
-- server: forward; towards the client: reverse), not on the sending host's,
-- where TCP Small Queues keep the queue short. TCP and UDP cross it both
-- ways at the shaper's rate, its stats are the router's qdisc counters, it
-- leaves nothing behind (closed, or killed and removed by `qoslab cleanup`),
-- and a 5 s TCP upload through 100 Mbit/s with a 20 ms queue raises the
-- latency probe's p50 by at least 10 ms over an idle p50 below 1 ms (the
-- issue's done-when); `qoslab test rrul` runs across it. These are the veth
-- router's (backend = "netem", built also where the kernel has no sch_netem
-- while nothing impairs it); the native link's router testbed has its own
-- spec (testbed_link6_router_spec.lua).
local cjson = require 'cjson'
local qoslab = require 'qoslab'
local netns = require 'qoslab.netns'
local shape = require 'qoslab.shape'
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'

local BUILD = os.getenv('QOSLAB_BUILD') or 'build'
local LUA = os.getenv('LUA') or 'lua5.4'

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  local ok, _, code = p:close()
  return out, ok == true and code == 0
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function sysctl(ns, key)
  return (sh('ip netns exec ' .. q(ns) .. ' sysctl -n ' .. key):gsub('%s+$', ''))
end

-- The kind of the shaper on a device ("none" without one).
local function shaper(ns, ifname)
  local s = shape.get(ifname, { netns = ns })
  return s and s.kind or 'none'
end

-- The testbed's namespaces as `ip netns list` has them.
local function listed(tb)
  local out = sh('ip netns list')
  local n = 0
  for _, name in ipairs { tb.client_netns, tb.router_netns, tb.server_netns } do
    if out:find(name, 1, true) then n = n + 1 end
  end
  return n
end

-- Sum of a qdisc list's root counters (`tb:stats()` shape).
local function root_bytes(list)
  for _, qd in ipairs(list) do
    if qd.parent == 'root' then return qd.bytes end
  end
  error('no root qdisc in ' .. cjson.encode(list))
end

describe('testbed with bottleneck = "router" #root', function()
  it('routes client ─ router ─ server, shaper on the router, forwarding on the router only', function()
    local tb <close> = assert(testbed { rate_bps = 100e6, backend = 'netem', bottleneck = 'router', ipv6 = true })
    assert.equal('router', tb.bottleneck)
    assert.equal(3, listed(tb))
    assert.is_not_nil(tostring(tb):find(tb.router_netns, 1, true))
    -- forwarding: the router's namespace only
    assert.equal('1', sysctl(tb.router_netns, 'net.ipv4.ip_forward'))
    assert.equal('1', sysctl(tb.router_netns, 'net.ipv6.conf.all.forwarding'))
    assert.equal('0', sysctl(tb.client_netns, 'net.ipv4.ip_forward'))
    assert.equal('0', sysctl(tb.server_netns, 'net.ipv4.ip_forward'))
    -- the hosts' own egress is unshaped; the router's two ends carry the tbf
    assert.equal('none', shaper(tb.client_netns, tb.client_ifname))
    assert.equal('none', shaper(tb.server_netns, tb.server_ifname))
    assert.equal('tbf', shaper(tb.router_netns, tb.router_server_ifname))
    assert.equal('tbf', shaper(tb.router_netns, tb.router_client_ifname))
    assert.same({ client = { shape = shape.get(tb.router_server_ifname, { netns = tb.router_netns }) },
                  server = { shape = shape.get(tb.router_client_ifname, { netns = tb.router_netns }) } },
      assert(tb:get()))
    assert.equal(100e6, tb:get().client.shape.rate_bps)
    -- one hop: TTL 64 arrives as 63, both families
    for _, a in ipairs { tb.server_addr, tb.server_addr6 } do
      local out, ok = sh('ip netns exec ' .. q(tb.client_netns) .. ' ping -c 1 -W 2 ' .. a)
      assert(ok, out)
      assert.matches('ttl=63', out)
    end
    -- tb:stats() reads the router's qdiscs
    local st = assert(tb:stats())
    assert.same(shape.stats(tb.router_server_ifname, { netns = tb.router_netns }), st.client)
    assert.same(shape.stats(tb.router_client_ifname, { netns = tb.router_netns }), st.server)
    assert.equal('tbf', st.client[1].kind)
    assert.is_true(st.client[1].packets >= 2)   -- the pings, forward
    assert.is_true(st.server[1].packets >= 2)   -- their replies, reverse
  end)

  it('carries TCP and UDP both ways at the shaper\'s rate, counted on the router', function()
    local tb <close> = assert(testbed { rate_bps = 100e6, backend = 'netem', bottleneck = 'router' })
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local function go(o)
      o.host, o.port, o.netns, o.duration_s = tb.server_addr, srv:port(), tb.client_netns, 1
      local before = assert(tb:stats())
      local res = assert(traffic.run(o))
      local after = assert(tb:stats())
      local ok, why = traffic.invariants(res)
      assert(ok, table.concat(why or {}, '\n'))
      return res, root_bytes(after.client) - root_bytes(before.client),
        root_bytes(after.server) - root_bytes(before.server)
    end
    for _, reverse in ipairs { false, true } do
      local what = reverse and 'TCP download' or 'TCP upload'
      local res, fwd, rev = go { reverse = reverse }
      local bps = res.received.bits_per_second
      print(string.format('\n  router %s: %.1f Mbit/s; router qdiscs forward %d, reverse %d bytes',
        what, bps / 1e6, fwd, rev))
      assert.is_true(bps > 50e6 and bps < 100e6, what .. ' ' .. bps)
      -- the data crossed the router's shaper of its direction
      assert.is_true((reverse and rev or fwd) >= res.received.bytes, what)
    end
    for _, reverse in ipairs { false, true } do
      local what = reverse and 'UDP download' or 'UDP upload'
      local res, fwd, rev = go { proto = 'udp', bitrate_bps = 20e6, reverse = reverse }
      local r = res.received
      print(string.format('  router %s: %.1f Mbit/s, %d lost of %d', what, r.bits_per_second / 1e6,
        r.lost_packets, r.unique_packets + r.lost_packets))
      assert.is_true(r.bits_per_second > 18e6 and r.bits_per_second < 22e6, what .. ' ' .. r.bits_per_second)
      assert.is_true(r.lost_packets <= (r.unique_packets + r.lost_packets) // 100, what .. ' lost')
      assert.is_true((reverse and rev or fwd) >= r.bytes, what)
    end
  end)

  it('carries TCP over IPv6 through the router', function()
    local tb <close> = assert(testbed { rate_bps = 100e6, backend = 'netem', bottleneck = 'router', ipv6 = true })
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    local res = assert(traffic.run { host = tb.server_addr6, port = srv:port(), netns = tb.client_netns,
      duration_s = 1 })
    local bps = res.received.bits_per_second
    assert.is_true(bps > 50e6 and bps < 100e6, 'IPv6 ' .. bps)
  end)

  it('puts the impairments on the router\'s egress (netem replaced by a recorder)', function()
    -- This kernel has no sch_netem: the testbed's netem calls are recorded
    -- and an htb marker grafted where netem would go.
    local calls = {}
    -- (the testbed asks the kernel whether it has netem, once, through the
    -- real qoslab.netem: before the recorder stands in for it)
    testbed.kernel_has_netem()
    local saved = package.loaded['qoslab.netem']
    package.loaded['qoslab.netem'] = {
      check = function(spec) return spec end,
      apply = function(ifname, spec, opts)
        calls[#calls + 1] = { ifname, spec, opts }
        local _, ok = sh(string.format('tc -n %s qdisc replace dev %s parent %s handle %x: htb default 77',
          q(opts.netns), ifname, opts.parent, 0x20 + #calls))
        assert(ok)
        return { kind = 'netem' }
      end,
    }
    finally(function() package.loaded['qoslab.netem'] = saved end)
    local tb <close> = assert(testbed { rate_bps = 100e6, backend = 'netem', bottleneck = 'router',
      impair = { delay_ms = 10 }, reverse_impair = { delay_ms = 20 } })
    assert.same({ tb.router_server_ifname, { delay_ms = 10 }, { netns = tb.router_netns, parent = '1:1' } },
      calls[1])
    assert.same({ tb.router_client_ifname, { delay_ms = 20 }, { netns = tb.router_netns, parent = '1:1' } },
      calls[2])
    assert(tb:impair({ delay_ms = 5 }, 'reverse'))
    assert.same({ tb.router_client_ifname, { delay_ms = 5 }, { netns = tb.router_netns, parent = '1:1' } },
      calls[3])
    -- the hosts stay untouched
    assert.equal('none', shaper(tb.client_netns, tb.client_ifname))
  end)

  it('leaves nothing behind when closed, and `qoslab cleanup` removes a killed run\'s', function()
    local before = sh('ip netns list; ip -o link show | awk \'{print $2}\'')
    local tb = assert(testbed { rate_bps = 10e6, backend = 'netem', bottleneck = 'router', ipv6 = true })
    assert.equal(3, listed(tb))
    tb:close()
    assert.equal(0, listed(tb))
    assert.equal(before, (sh('ip netns list; ip -o link show | awk \'{print $2}\'')))

    local dir = sh('mktemp -d /tmp/qoslab-router.XXXXXX'):gsub('%s+$', '')
    finally(function()
      for _, ns in ipairs(netns.list()) do if ns:match('^qlrt%-') then netns.delete(ns) end end
      os.execute('rm -rf ' .. q(dir))
    end)
    local script = dir .. '/killed.lua'
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
      local tb = assert(require('qoslab.testbed') { rate_bps = 10e6, backend = 'netem', bottleneck = 'router', prefix = 'qlrt' })
      io.open(%q, 'w'):write(tb.client_netns, '\n', tb.router_netns, '\n', tb.server_netns, '\n'):close()
      require('qoslab.core').kill(require('qoslab.netns')._pid(), 'KILL')
    ]], dir .. '/made'))
    f:close()
    local run = sh('QOSLAB_STATE_DIR=' .. q(dir .. '/state') .. ' ' .. LUA .. ' -e "package.path=\'./lua/?.lua;\'..package.path'
      .. ' package.cpath=\'./' .. BUILD .. '/?.so;\'..package.cpath" ' .. q(script))
    local made = {}
    for name in assert(io.open(dir .. '/made'), run):read('a'):gmatch('%S+') do made[#made + 1] = name end
    assert.equal(3, #made)
    for _, name in ipairs(made) do assert.is_true(netns.exists(name), name) end  -- the kill left them
    local out = sh('QOSLAB_STATE_DIR=' .. q(dir .. '/state') .. ' ' .. LUA .. ' bin/qoslab cleanup')
    for _, name in ipairs(made) do
      assert.is_false(netns.exists(name), name .. '\n' .. out)
      assert.matches('removed netns ' .. name .. '\n', out, 1, true)
    end
    assert.is_nil(sh('ip netns list'):find('qlrt-', 1, true))
  end)

  it('done-when: a 5 s TCP upload through 100 Mbit/s with a 20 ms queue adds >= 10 ms to an idle p50 < 1 ms', function()
    -- tbf's default queue (qoslab.shape) is 20 ms at the rate above the
    -- 50000-byte burst: 100e6 / 8 * 0.020 + 50000 bytes
    local tb <close> = assert(qoslab.testbed { rate_bps = 100e6, backend = 'netem', bottleneck = 'router' })
    assert.same({ 50000, 300000 }, { tb:get().client.shape.burst_bytes, tb:get().client.shape.limit_bytes })
    local srv <close> = assert(traffic.server { port = 0, netns = tb.server_netns })
    -- cubic: this host's default congestion control is BBR, which keeps the
    -- bottleneck's queue short by design also behind a router (loaded p50
    -- ~4.3 ms measured here); a loss-based sender, Linux's usual default,
    -- fills it.
    local res = assert(qoslab.traffic.run { host = tb.server_addr, port = srv:port(),
      netns = tb.client_netns, duration_s = 5, congestion = 'cubic', probe = { interval_ms = 10 } })
    local lat = res.latency
    print(string.format('\n  router tbf 100 Mbit/s 20 ms, cubic: %.1f Mbit/s; idle p50 %.3f ms, loaded '
      .. 'p50 %.3f p90 %.3f p99 %.3f ms, induced %.3f ms (%d loaded, %d idle samples)',
      res.received.bits_per_second / 1e6, lat.idle.rtt_ms.p50, lat.rtt_ms.p50, lat.rtt_ms.p90,
      lat.rtt_ms.p99, lat.induced_ms, lat.samples, lat.idle.samples))
    assert.is_true(lat.idle.rtt_ms.p50 < 1, 'idle p50 ' .. lat.idle.rtt_ms.p50)
    assert.is_true(lat.rtt_ms.p50 >= lat.idle.rtt_ms.p50 + 10, 'loaded p50 ' .. lat.rtt_ms.p50)
    -- the queue that did it is the router's
    local st = assert(tb:stats())
    assert.is_true(st.client[1].bytes >= res.received.bytes)
  end)

  it('runs `qoslab test rrul` from the client namespace', function()
    local tb <close> = assert(qoslab.testbed { rate_bps = 100e6, backend = 'netem', bottleneck = 'router' })
    local srv <close> = assert(traffic.server { netns = tb.server_netns })
    assert.equal(5201, srv:port())   -- where `qoslab test` goes by default
    local dir = sh('mktemp -d /tmp/qoslab-router-rrul.XXXXXX'):gsub('%s+$', '')
    finally(function() os.execute('rm -rf ' .. q(dir)) end)
    local out, ok = sh(string.format('QOSLAB_BUILD=%s %s bin/qoslab test rrul %s --netns %s -t 3 --idle 1 --out %s',
      BUILD, LUA, tb.server_addr, tb.client_netns, q(dir .. '/run')))
    print('\n' .. out)
    assert(ok, out)
    assert.matches('throughput per class', out, 1, true)
    for _, c in ipairs(require('qoslab.stdtest').CLASSES) do
      assert.matches('\n%s*' .. c.name .. ' | 0x%x%x |%s*[%d.]+ |%s*[%d.]+\n', out)
    end
    assert.matches('induced', out, 1, true)
    local recs = assert(qoslab.plan.load(dir .. '/run/results.jsonl'))
    assert.equal(1, #recs)
  end)
end)
