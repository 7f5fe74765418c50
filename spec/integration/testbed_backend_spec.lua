-- The testbed's backend (root): "auto" takes kernel netem where the kernel
-- has sch_netem and the native link where it has not, and works at once in
-- a REPL's way (`tb:impair{delay_ms = 100}` right after `testbed{}`);
-- limit_packets = "auto" is sized on the link as netem's limit rule sizes it;
-- `qoslab run` runs a plan on this host through the link and records the
-- backend in every record and in meta.json; `--backend` refuses what it
-- cannot do, naming the flag; and after a `qoslab run` killed by SIGKILL with
-- traffic through the link, `qoslab cleanup` leaves no namespace, device,
-- state file or thread of it.
local testbed = require 'qoslab.testbed'
local cjson = require 'cjson'
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local here_backend = testbed.kernel_has_netem() and 'netem' or 'link'
local sanitized = (os.getenv('QOSLAB_BUILD') or ''):match('^build%-%a*san$')

local function rtt_min_ms(tb)
  local out = H.must('ip netns exec ' .. tb.client_netns .. ' ping -n -q -c 3 -i 0.2 -W 3 ' .. tb.server_addr)
  return tonumber(out:match('rtt [^=]+= ([%d.]+)/'))
end

local function netns_list()
  local set = {}
  for name in H.must('ip netns list'):gmatch('(%S+)[^\n]*\n?') do set[name] = true end
  return set
end

-- bin/qoslab as a user runs it (the plain build: see the specs' README).
local function qoslab_cmd(args, env)
  return string.format('cd %s && %s exec env -u QOSLAB_BUILD lua5.4 bin/qoslab %s', H.q(H.must('pwd'):gsub('\n$', '')),
    env or '', args)
end

describe('qoslab.testbed backend "auto" (root)', function()
  it('takes ' .. here_backend .. ' on this kernel; tb:impair works at once', function()
    local tb = assert(testbed { rate_bps = 1e9 })
    finally(function() tb:close() end)
    assert.equal(here_backend, tb.backend)
    assert.is_true(tb:impair { delay_ms = 100, limit_packets = 'auto' })
    -- one-way 100 ms on the client's egress: a ping's round trip >= 100 ms
    local rtt = rtt_min_ms(tb)
    assert.is_true(rtt >= 100 and rtt < 150, 'rtt ' .. tostring(rtt))
    -- netem's limit rule: ceil(1e9/8 B/s x 0.1 s / 1514 B x 1.5) packets
    assert.equal(12385, tb:get().client.impair.limit_packets)
    assert.is_true(tb:impair {})
    assert.is_true(rtt_min_ms(tb) < 50)
  end)

  it('tb:stats() carries the link\'s per-transport counts: UDP loss equals the engine\'s', function()
    local defer = H.cleanups(finally)
    if here_backend ~= 'link' then return pending('the kernel has netem: auto takes it') end
    local tb = assert(testbed { rate_bps = 1e9 })
    defer(function() tb:close() end)
    local srv = assert(traffic.server { netns = tb.server_netns })
    defer(function() srv:close() end)
    -- the other places a datagram can vanish on this path: the client's TUN
    -- queue (the link's reader late), the server's TUN input, the socket
    local function elsewhere()
      return { tx_dropped = H.if_counter(tb.client_netns, tb.client_ifname, 'tx_dropped'),
        rx_dropped = H.if_counter(tb.server_netns, tb.server_ifname, 'rx_dropped'),
        rcvbuf_errors = H.udp_rcvbuf_errors(tb.server_netns) }
    end
    local function udp_share()
      for _, q in ipairs(assert(tb:stats()).client) do
        if q.kind == 'link' then return q.by_protocol.udp, q end
      end
    end
    local before = elsewhere()
    local t = assert(traffic.start { host = tb.server_addr, netns = tb.client_netns, proto = 'udp',
      bitrate_bps = 10e6, length_bytes = 1000, duration_s = 2, omit_s = 0 })
    -- loss only while the test's datagrams flow: the UDP handshake (a
    -- datagram the engine resends when it is lost, not one of the test's)
    -- is done once 100 datagrams have crossed, and the test's last one is
    -- sent after loss is off again
    local t0 = H.now()
    while udp_share().arrived_packets < 100 and H.now() - t0 < 1.5 do H.sleep(0.01) end
    assert.is_true(udp_share().arrived_packets >= 100, 'the datagrams did not start')
    assert.is_true(tb:impair { loss_pct = 10 })
    H.sleep(math.max(0, 1.5 - (H.now() - t0)))
    assert.is_true(tb:impair {})
    local res = assert(t:wait())
    local udp, link = udp_share()
    assert.is_false(link.over_budget)
    assert.is_true(udp.arrived_packets >= res.received.packets)
    assert.is_true(udp.drops_by_reason.loss > 20, 'too few losses: ' .. udp.drops_by_reason.loss)
    -- every link loss drop of a datagram is a datagram the engine counts
    -- lost, and the engine's other losses are drops counted elsewhere: exact
    -- when nothing else dropped (most runs; a loaded host can make the
    -- link's reader late or the receiving socket full)
    local after, other, why = elsewhere(), udp.drops - udp.drops_by_reason.loss, {}
    for k, v in pairs(after) do
      other = other + (v - before[k])
      why[#why + 1] = string.format('%s +%d', k, v - before[k])
    end
    table.sort(why)
    local lost, drops = res.received.lost_packets, udp.drops_by_reason.loss
    assert(drops <= lost and lost <= drops + other, string.format(
      'engine lost %d, link UDP loss drops %d, other link UDP drops %d, elsewhere: %s', lost, drops,
      udp.drops - drops, table.concat(why, ', ')))
  end)

  it('takes ' .. here_backend .. ' for a router testbed and an IPv6 one too', function()
    for _, o in ipairs { { bottleneck = 'router' }, { ipv6 = true }, { bottleneck = 'router', ipv6 = true } } do
      local tb = assert(testbed(o))
      finally(function() tb:close() end)
      assert.equal(here_backend, tb.backend)
      assert.is_true(rtt_min_ms(tb) < 50)
      assert.is_true(tb:impair { delay_ms = 30 })
      local rtt = rtt_min_ms(tb)
      assert.is_true(rtt >= 30 and rtt < 80, 'rtt ' .. tostring(rtt))
      tb:close()
    end
  end)

  it('--backend netem on a kernel without sch_netem names its reason', function()
    local defer = H.cleanups(finally)
    if here_backend == 'netem' then return pending('the kernel has netem') end
    -- the process default of qoslab run --backend netem (--host)
    testbed.set_default_backend('netem')
    defer(function() testbed.set_default_backend('auto') end)
    local tb = assert(testbed {})
    defer(function() tb:close() end)
    assert.equal('netem', tb.backend)
    local ok, msg, code = tb:impair { delay_ms = 10 }
    assert.is_nil(ok)
    assert.equal('ENOTSUP', code)
    assert.matches('drop --host', msg, 1, true)
    assert.matches('--backend auto or link', msg, 1, true)
    assert.is_nil(msg:find('impair a qoslab.testbed', 1, true))
    -- and with the CLI: a plan that impairs a testbed
    local dir = H.tmp('f7')
    os.execute('mkdir -p ' .. H.q(dir))
    local plan = dir .. '/p.lua'
    local f = assert(io.open(plan, 'w'))
    f:write("local tb <close> = assert(qoslab.testbed{})\nassert(tb:impair{delay_ms = 10})\n")
    f:close()
    local _, log = H.sh(qoslab_cmd('run ' .. H.q(plan) .. ' --host --backend netem --out ' .. H.q(dir .. '/out')))
    assert.matches('drop --host', log, 1, true)
    assert.is_nil(log:find('impair a qoslab.testbed', 1, true))
  end)

  -- Decided, not changed: a netem testbed is built on a kernel without
  -- sch_netem (a shaped veth path needs none; the router testbed's specs
  -- use one); its impairment, at creation or later, is ENOTSUP naming why.
  it('backend = "netem" asked for without sch_netem: built, its impairment ENOTSUP naming opts.backend', function()
    local defer = H.cleanups(finally)
    if here_backend == 'netem' then return pending('the kernel has netem') end
    local tb = assert(testbed { backend = 'netem', rate_bps = 1e8 })
    defer(function() tb:close() end)
    assert.same({ 'netem', 1e8 }, { tb.backend, tb.rate_bps })
    local ok, msg, code = tb:impair { delay_ms = 5 }
    assert.is_nil(ok)
    assert.equal('ENOTSUP', code)
    assert.matches('opts.backend = "netem" and this kernel has no sch_netem', msg, 1, true)
    tb:close()
    local before = H.netns_count()
    local none, cmsg, ccode = testbed { backend = 'netem', rate_bps = 1e8, impair = { delay_ms = 5 } }
    assert.is_nil(none)
    assert.equal('ENOTSUP', ccode)
    assert.matches('opts.backend = "netem" and this kernel has no sch_netem', cmsg, 1, true)
    assert.equal(before, H.netns_count())
  end)

  it('the link backend, asked for or the process default, joins IPv6 and router testbeds', function()
    local defer = H.cleanups(finally)
    local tb6 = assert(testbed { backend = 'link', ipv6 = true })
    defer(function() tb6:close() end)
    assert.same({ 'link', 'qltun-c', 'qltun-s' }, { tb6.backend, tb6.client_ifname, tb6.server_ifname })
    tb6:close()
    testbed.set_default_backend('link')
    defer(function() testbed.set_default_backend('auto') end)
    local tb = assert(testbed { bottleneck = 'router' })
    defer(function() tb:close() end)
    assert.same({ 'link', 'qltun-c', 'qltun-r' }, { tb.backend, tb.client_ifname, tb.router_client_ifname })
  end)
end)

describe('qoslab run and the backend (root)', function()
  after_each(H.cleanup_tmp)

  it('runs a plan here through the ' .. here_backend .. ' and records it', function()
    if sanitized then return pending('a plain lua5.4 child cannot load a sanitized build') end
    local dir = H.tmp('run')
    local plan = H.tmp('plan.lua')
    local f = assert(io.open(plan, 'w'))
    f:write([[
local tb <close> = assert(qoslab.testbed { rate_bps = 100e6, impair = { delay_ms = 5 } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })
print('run', QOSLAB_RUN.where, QOSLAB_RUN.backend, tb.backend)
qoslab.plan.sweep { name = 'one', params = { delay_ms = { 5 } }, progress = false,
  run = function(p)
    assert(tb:impair { delay_ms = p.delay_ms })
    return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, proto = 'udp',
      bitrate_bps = 1e6, duration_s = 0.5 }
  end }
]])
    f:close()
    local out = H.tmp('out')
    -- (stdout and stderr both into out)
    local ok, log = H.sh(qoslab_cmd('run ' .. H.q(plan) .. ' --out ' .. H.q(dir) .. ' >' .. H.q(out)))
    log = log .. (H.read(out) or '')
    assert(ok, log)
    assert.matches('run\thost\t' .. here_backend .. '\t' .. here_backend, log, 1, true)
    assert.matches('on this host, backend ' .. here_backend, log, 1, true)
    local rec = cjson.decode((H.read(dir .. '/results.jsonl'):match('^[^\n]+')))
    assert.equal('host', rec.where)
    assert.equal(here_backend, rec.backend)
    local m = cjson.decode(H.read(dir .. '/meta.json'))
    assert.equal('host', m.where)
    assert.equal(here_backend, m.backend)
    assert.equal(here_backend, m.paths[1].backend)
  end)

  it('--backend: a value it does not know, link in the guest', function()
    if sanitized then return pending('a plain lua5.4 child cannot load a sanitized build') end
    local ok, log, status = H.sh(qoslab_cmd('run /dev/null --backend tun'))
    assert.is_false(ok)
    assert.equal(2, status)
    assert.matches('qoslab run: --backend: expected one of auto, netem, link, got "tun"', log, 1, true)
    ok, log, status = H.sh(qoslab_cmd('run /dev/null --backend link --guest'))
    assert.is_false(ok)
    assert.equal(2, status)
    assert.matches('qoslab run: --backend link: the native link runs on this host, a run in the qemu guest takes',
      log, 1, true)
    ok, log, status = H.sh(qoslab_cmd('demo --backend link --guest --out ' .. H.q(H.tmp('d'))))
    assert.is_false(ok)
    assert.equal(2, status)
    assert.matches('qoslab demo: --backend link: the native link runs on this host', log, 1, true)
  end)

  it('after SIGKILL mid-run, qoslab cleanup leaves nothing of the link behind', function()
    if sanitized then return pending('a plain lua5.4 child cannot load a sanitized build') end
    local state = H.tmp('state')
    H.must('mkdir -p ' .. H.q(state))
    local plan = H.tmp('kill.lua')
    local f = assert(io.open(plan, 'w'))
    f:write([[
local tb <close> = assert(qoslab.testbed { backend = 'link', rate_bps = 100e6, impair = { delay_ms = 20 } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })
local h = assert(qoslab.traffic.client { host = tb.server_addr, netns = tb.client_netns, proto = 'tcp',
  duration_s = 30 }:start())
-- and a router testbed on the link, IPv6 traffic through it
local tr <close> = assert(qoslab.testbed { backend = 'link', bottleneck = 'router', ipv6 = true,
  rate_bps = 50e6, impair = { delay_ms = 10 } })
local srv2 <close> = assert(qoslab.server { netns = tr.server_netns })
local h2 = assert(qoslab.traffic.client { host = tr.server_addr6, netns = tr.client_netns, proto = 'udp',
  bitrate_bps = 5e6, duration_s = 30 }:start())
qoslab.timer.sleep(0.5)
io.stdout:write(tb.client_netns, ' ', tb.server_netns, ' ', tr.client_netns, ' ', tr.router_netns, ' ',
  tr.server_netns, '\n')
io.stdout:flush()
h:wait()
h2:wait()
]])
    f:close()
    local out = H.tmp('kill.out')
    local env = 'QOSLAB_STATE_DIR=' .. H.q(state)
    local pid = H.spawn(qoslab_cmd('run ' .. H.q(plan) .. ' --out ' .. H.q(H.tmp('kdir')), env), out)
    local names
    finally(function()
      H.kill(pid)
      for _, ns in ipairs(names or {}) do os.execute('ip netns delete ' .. ns .. ' 2>/dev/null') end
    end)
    local t_end = H.now() + 20
    while H.now() < t_end do
      local line = (H.read(out) or ''):match('(qoslab%-%d+%-%d+%-c qoslab%S+ qoslab%S+ qoslab%S+ qoslab%S+)\n')
      if line then
        names = {}
        for n in line:gmatch('%S+') do names[#names + 1] = n end
        break
      end
      H.sleep(0.05)
    end
    assert(names, 'the plan did not start: ' .. (H.read(out) or ''))
    local c = names[1]
    assert.matches('qltun%-c', H.must('ip -n ' .. c .. ' -o link show'))
    assert.matches('qltun%-c', H.must('ip -n ' .. names[3] .. ' -o link show'))
    assert.matches('qltun%-r', H.must('ip -n ' .. names[4] .. ' -o link show'))
    local threads = tonumber(H.must('ls /proc/' .. pid .. '/task | wc -l'))
    assert.is_true(threads > 1, 'the link and the engine run threads')
    os.execute('kill -KILL ' .. pid)
    assert(H.wait_exit(pid, 5), 'the run did not end')
    -- killed: its namespaces outlive it (the TUN devices went with its fds)
    for _, n in ipairs(names) do assert.is_true(netns_list()[n], n) end
    local ok, log = H.sh(qoslab_cmd('cleanup', env))
    assert(ok, log)
    local after = netns_list()
    for _, n in ipairs(names) do
      assert.matches('removed netns ' .. n, log, 1, true)
      assert.is_nil(after[n])
    end
    assert.equal('', (H.must('ls -A ' .. H.q(state))))
    assert.is_false(H.alive(pid))
    assert.is_nil(H.read('/proc/' .. pid .. '/stat'))
    -- no TUN device of the link anywhere: not in this namespace either,
    -- nor the router testbed's veth pair
    local links = H.must('ip -o link show')
    assert.is_nil(links:find('qltun', 1, true))
    assert.is_nil(links:find('qs' .. pid .. 'n', 1, true))
    assert.is_nil(links:find('qrs' .. pid .. 'n', 1, true))
  end)
end)
