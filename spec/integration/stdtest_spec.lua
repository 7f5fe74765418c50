-- The standard tests end to end (root): each runs for a few seconds between
-- two namespaces joined by a veth pair shaped by tbf to 100 Mbit/s, against
-- one qoslab server with its default limits (2 tests per client address).
-- rrul is one bidir test of 4 streams each way, and each of its eight
-- streams must carry its class's DSCP mark on the wire, the downloads' set by
-- the server: the receiving end redirects its ingress to an ifb whose htb
-- classes count bytes per TOS (u32 on the DSCP bits), so a stream whose mark
-- was lost lands in the wrong class and fails the bounds. Throughput sums
-- stay under what the shaper lets through, the latency probe measures its
-- idle phase and the load's, results.jsonl holds the run, and `qoslab test`
-- works from the command line.
local qoslab = require 'qoslab'
local stdtest = require 'qoslab.stdtest'
local plan = require 'qoslab.plan'
local cjson = require 'cjson'

local RATE_BPS, BURST_BYTES = 100e6, 50000
-- TCP payload per Ethernet frame the shaper counts, at most: MSS 1460 (no
-- timestamps: the largest payload share) in 1514 bytes.
local PAYLOAD_SHARE = 1460 / 1514

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local s = p:read('a')
  local ok, _, rc = p:close()
  return s, ok and 0 or rc
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function tmpdir()
  local d = sh('mktemp -d /tmp/qoslab-stdtest.XXXXXX'):gsub('%s+$', '')
  return d
end

-- Count the bytes arriving on `dev` in namespace `ns` per TOS class: ingress
-- redirected (mirred) to an ifb, whose htb has one class per rrul class
-- (u32 on the DSCP bits) and a default class for everything else.
local function counters(ns, dev)
  local x = 'ip netns exec ' .. q(ns) .. ' '
  local cmds = {
    'ip link add qlcount0 type ifb', 'ip link set qlcount0 up',
    'tc qdisc add dev ' .. dev .. ' handle ffff: ingress',
    'tc filter add dev ' .. dev .. ' parent ffff: protocol all u32 match u32 0 0 '
      .. 'action mirred egress redirect dev qlcount0',
    'tc qdisc add dev qlcount0 root handle 1: htb default 9',
    'tc class add dev qlcount0 parent 1: classid 1:9 htb rate 10gbit quantum 60000',
  }
  for i, c in ipairs(stdtest.CLASSES) do
    cmds[#cmds + 1] = string.format('tc class add dev qlcount0 parent 1: classid 1:%d htb rate '
      .. '10gbit quantum 60000', i)
    cmds[#cmds + 1] = string.format('tc filter add dev qlcount0 parent 1: protocol ip prio %d u32 '
      .. 'match ip tos 0x%02x 0xfc flowid 1:%d', i, c.tos, i)
  end
  for _, c in ipairs(cmds) do
    local out, rc = sh(x .. c)
    assert(rc == 0, c .. ': ' .. out)
  end
  return function()
    local text = sh(x .. 'tc -s class show dev qlcount0')
    local by = {}
    for minor, bytes in text:gmatch('class htb 1:(%d+) .-Sent (%d+) bytes') do
      local c = stdtest.CLASSES[tonumber(minor)]
      by[c and c.name or 'other'] = tonumber(bytes)
    end
    return by
  end
end

describe('standard tests on a 100 Mbit/s testbed #root', function()
  local tb, srv, dirs

  setup(function()
    -- the veth backend: the rate bounds below count Ethernet frames
    tb = assert(qoslab.testbed { backend = 'netem', rate_bps = RATE_BPS, burst_bytes = BURST_BYTES })
    -- default limits: rrul is one test (and the probe's session)
    srv = assert(qoslab.server { netns = tb.server_netns })
    assert.equal(2, srv:limits().max_tests_per_address)
    dirs = {}
  end)

  teardown(function()
    if srv then srv:stop() end
    if tb then tb:close() end
    for _, d in ipairs(dirs) do os.execute('rm -rf ' .. q(d)) end
  end)

  local function out_dir()
    local d = tmpdir()
    dirs[#dirs + 1] = d
    return d
  end

  local function run(name, opts)
    opts.host, opts.netns = tb.server_addr, tb.client_netns
    local r, msg, code = stdtest.run(name, opts)
    assert(r, tostring(msg) .. ' (' .. tostring(code) .. ')')
    return r
  end

  local function record_of(dir, name)
    local recs, bad = assert(plan.load(dir .. '/results.jsonl'))
    assert.equal(0, bad)
    assert.equal(1, #recs)
    assert.equal(name, recs[1].sweep)
    assert.equal(name, recs[1].params.test)
    return recs[1]
  end

  it('rrul: one test, 4 up + 4 down streams, each with its TOS on the wire, sums under the link', function()
    local at_server = counters(tb.server_netns, tb.server_ifname)
    local at_client = counters(tb.client_netns, tb.client_ifname)
    local dir = out_dir()
    local r = run('rrul', { duration_s = 3, idle_s = 1, out = dir })
    local up, down = at_server(), at_client()
    assert.equal(1, #r.flows)
    local flow = r.flows[1]
    assert.same({ 'both', true, 4, 8 }, { flow.direction, flow.bidir, flow.parallel, #flow.streams })
    assert.equal('qoslab', flow.result.peer)
    assert.equal(8, #r.classes)
    local by = {}
    for _, f in ipairs(r.classes) do
      assert.is_true(f.bits_per_second > 1e6, f.class .. ' ' .. f.direction .. ': '
        .. tostring(f.bits_per_second))
      by[f.direction .. ' ' .. f.class] = f
    end
    for _, c in ipairs(stdtest.CLASSES) do
      local u, d = by['up ' .. c.name], by['down ' .. c.name]
      assert.equal(c.tos, u.tos)
      assert.equal(c.tos, d.tos)
      assert.equal('server', u.side)
      assert.equal('client', d.side)
      -- Every payload byte the receiver counted came in a packet of its class...
      assert.is_true(up[c.name] >= u.bytes, string.format('%s upload: %d bytes received, %s '
        .. 'counted in its class at the server', c.name, u.bytes, tostring(up[c.name])))
      assert.is_true(down[c.name] >= d.bytes, string.format('%s download: %d bytes received, %s '
        .. 'counted in its class at the client', c.name, d.bytes, tostring(down[c.name])))
      -- ...and the class holds no other flow's data: its own frames (at most
      -- 1514 per 1448 payload, a fifth more for retransmissions), the other
      -- direction's ACKs (a tenth) and 1 MB of control and probe packets.
      local function most(mine, other) return 1.2 * mine * 1514 / 1448 + 0.1 * other + 1e6 end
      assert.is_true(up[c.name] <= most(u.bytes, d.bytes), c.name .. ' at the server: '
        .. up[c.name] .. ' bytes')
      assert.is_true(down[c.name] <= most(d.bytes, u.bytes), c.name .. ' at the client: '
        .. down[c.name] .. ' bytes')
    end
    -- What tbf lets through: at most R/8 per second of the run plus a full
    -- bucket, in frames of which payload is a share; as rates, with the flows'
    -- windows nearly together, at most R (the payload ceiling PAYLOAD_SHARE x R
    -- + 8 x burst / 3 s = 96.6 Mbit/s leaves 3 % for their start skew).
    for _, dir_ in ipairs { 'up', 'down' } do
      local bytes = 0
      for _, f in ipairs(r.classes) do if f.direction == dir_ then bytes = bytes + f.bytes end end
      assert.equal(flow[dir_].bytes, bytes)
      assert.is_true(bytes <= PAYLOAD_SHARE * (RATE_BPS / 8 * r.wall_s + BURST_BYTES),
        dir_ .. ': ' .. bytes .. ' bytes in ' .. r.wall_s .. ' s')
    end
    assert.is_true(r.up_bps <= RATE_BPS, 'upload sum ' .. r.up_bps)
    assert.is_true(r.down_bps <= RATE_BPS, 'download sum ' .. r.down_bps)
    assert.is_true(r.up_bps > 0.5 * RATE_BPS, 'upload sum ' .. r.up_bps)
    assert.is_true(r.down_bps > 0.5 * RATE_BPS, 'download sum ' .. r.down_bps)
    -- The probe beside: an idle phase on the unloaded veth (well under a
    -- millisecond), then the load, which queues in the 20 ms of tbf (seen
    -- 2-14 ms induced; half a millisecond is far above the idle path).
    local lat = r.latency
    assert.is_table(lat)
    assert.is_true(lat.samples >= 100, 'loaded samples ' .. lat.samples)
    assert.is_true(lat.idle.samples >= 30, 'idle samples ' .. lat.idle.samples)
    assert.is_true(lat.idle.rtt_ms.p50 < 1, 'idle p50 ' .. lat.idle.rtt_ms.p50)
    assert.is_true(lat.induced_ms > 0.5, 'induced ' .. lat.induced_ms)
    assert.near(lat.rtt_ms.p50 - lat.idle.rtt_ms.p50, lat.induced_ms, 1e-9)
    assert.is_true(lat.rtt_ms.p99 <= 1000, 'p99 ' .. lat.rtt_ms.p99)
    -- The table and the file.
    local text = stdtest.format(r)
    assert.matches('probe idle 1 s before and after', text, 1, true)
    assert.matches('| idle p50 | loaded p50 |', text, 1, true)
    assert.matches(string.format('| +%.3f | +%.3f |', lat.idle.rtt_ms.p50, lat.rtt_ms.p50):gsub('%.', '%%.'), text)
    for _, c in ipairs(stdtest.CLASSES) do
      assert.matches('\n *' .. c.name .. ' | ' .. string.format('0x%02x', c.tos) .. ' | +[%d.]+ | +[%d.]+\n', text)
    end
    local rec = record_of(dir, 'rrul')
    local flows = rec.results[1].flows
    assert.equal(1, #flows)
    assert.equal(flow.up.bytes, flows[1].result.received.bytes)
    assert.equal(flow.down.bytes, flows[1].result.reverse_received.bytes)
    assert.equal(8, #rec.results[1].classes)
    for i, c in ipairs(rec.results[1].classes) do
      assert.equal(r.classes[i].tos, c.tos)
      assert.equal(r.classes[i].bytes, c.bytes)
    end
    assert.equal(r.total_bps, rec.summary.mean)
    assert.equal(lat.induced_ms, rec.results[1].latency.induced_ms)
    assert.equal(lat.samples, rec.results[1].latency.samples)
  end)

  it('latency: the probe alone, its samples over the idle path', function()
    local dir = out_dir()
    local r = run('latency', { duration_s = 2, out = dir, probe = { interval_ms = 20 } })
    assert.same({}, r.flows)
    local lat = r.latency
    -- 100 slots of 20 ms; a slot missed by a late wake-up is skipped, not sent
    assert.is_true(lat.samples >= 50 and lat.samples <= 101, 'samples ' .. lat.samples)
    assert.equal(20, lat.interval_ms)
    assert.is_true(lat.rtt_ms.p50 < 1, 'p50 ' .. lat.rtt_ms.p50)
    assert.is_nil(lat.induced_ms)
    assert.matches('latency to .*: 2 s of probing\n', stdtest.format(r))
    local rec = record_of(dir, 'latency')
    assert.equal(lat.samples, rec.results[1].latency.samples)
    assert.is_nil(rec.params.idle_s)
  end)

  it('tcp_nup and tcp_ndown: N streams one way, each counted, the sum under the link', function()
    for _, case in ipairs { { 'tcp_nup', 'up', 'server' }, { 'tcp_ndown', 'down', 'client' } } do
      local dir = out_dir()
      local r = run(case[1], { duration_s = 2, idle_s = 0.5, streams = 3, out = dir })
      assert.equal(1, #r.flows)
      local f = r.flows[1]
      assert.same({ case[2], case[3], 3 }, { f.direction, f.side, #f.streams })
      local sum = 0
      for _, s in ipairs(f.streams) do
        assert.is_true(s.bits_per_second > 1e6)
        sum = sum + s.bytes
      end
      assert.equal(f.bytes, sum)
      -- one test: the streams share one window, so the payload ceiling holds
      local ceiling = PAYLOAD_SHARE * RATE_BPS + 8 * BURST_BYTES / f.seconds
      assert.is_true(f.bits_per_second <= ceiling, case[1] .. ': ' .. f.bits_per_second
        .. ' > ' .. ceiling)
      -- the probe beside: both phases measured
      assert.is_true(r.latency.samples >= 50 and r.latency.idle.samples >= 10,
        case[1] .. ': ' .. r.latency.samples .. ' samples, ' .. r.latency.idle.samples .. ' idle')
      local rec = record_of(dir, case[1])
      assert.equal(3, rec.params.streams)
      assert.equal(3, #rec.results[1].flows[1].streams)
    end
  end)

  it('udp_flood: 100 Mbit/s by default into the 100 Mbit/s link; loss and rate reported', function()
    local dir = out_dir()
    local r = run('udp_flood', { duration_s = 2, idle_s = 0.5, out = dir, probe = { tos = 0xb8 } })
    local f = r.flows[1]
    assert.equal(100e6, f.bitrate_bps)
    assert.equal('udp', f.proto)
    assert.is_number(f.lost_pct)
    assert.is_true(f.sent_bits_per_second > 0.9 * 100e6, 'sent ' .. f.sent_bits_per_second)
    -- UDP payload 1460 (or less) in a 1502-byte frame (8 + 20 + 14 bytes more)
    assert.is_true(f.bits_per_second <= 1460 / 1502 * RATE_BPS + 8 * BURST_BYTES / f.seconds,
      'received ' .. f.bits_per_second)
    local text = stdtest.format(r)
    assert.matches('UDP upload |  up | +[%d.]+ | +100.00 |', text)
    assert.is_true(r.latency.samples >= 50, 'samples ' .. r.latency.samples)
    local rec = record_of(dir, 'udp_flood')
    assert.equal(0xb8, rec.results[1].probe.tos)
    assert.equal(0xb8, rec.results[1].flows[1].result.options.probe.tos)
  end)

  it('under qoslab run --out DIR --resume every run runs and is recorded', function()
    local dir = out_dir()
    local before = plan.get_defaults()
    finally(function() plan.set_defaults(before) end)
    plan.set_defaults { out = dir, resume = true, progress = false }
    for _ = 1, 2 do run('tcp_nup', { duration_s = 1, idle_s = 0, streams = 1, probe = false }) end
    local recs = assert(plan.load(dir .. '/results.jsonl', 'tcp_nup'))
    assert.equal(2, #recs)
    for _, rec in ipairs(recs) do assert.is_true(rec.results[1].flows[1].bytes > 0) end
  end)

  it('a refusal by the server names the flow; nothing keeps running', function()
    -- rrul's 8 streams are over this server's per-address stream limit
    local strict <close> = assert(qoslab.server { netns = tb.server_netns, port = 5301,
      max_streams_per_address = 4 })
    local r, msg, code = stdtest.run('rrul', { host = tb.server_addr, port = 5301,
      netns = tb.client_netns, duration_s = 2, idle_s = 0, probe = false })
    assert.is_nil(r)
    assert.equal('EBUSY', code)
    assert.matches('^TCP upload and download: ', msg)
    assert.matches('max_streams_per_address', msg, 1, true)
    -- the flows that had started were stopped: the server is idle again soon
    local t0 = qoslab.timer.now()
    while strict:tests_running() > 0 and qoslab.timer.now() - t0 < 5 do qoslab.timer.sleep(0.05) end
    assert.equal(0, strict:tests_running())
  end)

  it('SIGINT during qoslab test rrul: exit 130, every flow stopped at both ends', function()
    local dir = out_dir()
    os.execute(string.format('sh -c %s &', q(string.format(
      'lua5.4 bin/qoslab test rrul %s --netns %s -t 20 --idle 0 --no-probe --out %s >%s 2>&1 & '
        .. 'echo $! >%s; wait $!; echo $? >%s', tb.server_addr, q(tb.client_netns), q(dir .. '/o'),
      q(dir .. '/log'), q(dir .. '/pid'), q(dir .. '/rc')))))
    local function slurp(f)
      local h = io.open(f)
      if not h then return nil end
      local t = h:read('a')
      h:close()
      return t
    end
    local t0 = qoslab.timer.now()
    while srv:tests_running() < 1 and qoslab.timer.now() - t0 < 10 do qoslab.timer.sleep(0.05) end
    assert.equal(1, srv:tests_running(), slurp(dir .. '/log'))
    qoslab.timer.sleep(0.5)   -- its streams connected and moving
    os.execute('kill -INT ' .. assert(slurp(dir .. '/pid')):gsub('%s+', ''))
    while not (slurp(dir .. '/rc') or ''):find('\n') and qoslab.timer.now() - t0 < 20 do qoslab.timer.sleep(0.05) end
    assert.equal('130', (slurp(dir .. '/rc') or 'none'):gsub('%s+', ''), slurp(dir .. '/log'))
    assert.matches('interrupted by SIGINT', slurp(dir .. '/log'), 1, true)
    while srv:tests_running() > 0 and qoslab.timer.now() - t0 < 25 do qoslab.timer.sleep(0.05) end
    assert.equal(0, srv:tests_running())
    assert.is_true(qoslab.timer.now() - t0 < 15, 'the flows ran on after the signal')
  end)

  it('qoslab test rrul against a server with default limits: per-class throughput and latency', function()
    assert.same({ 2, 128 }, { srv:limits().max_tests_per_address,
                              srv:limits().max_streams_per_address })
    local dir = out_dir()
    local out, rc = sh(string.format('lua5.4 bin/qoslab test rrul %s --netns %s -t 2 --idle 0.5 '
      .. '--probe-interval 20 --out %s', tb.server_addr, q(tb.client_netns), q(dir .. '/o')))
    assert.equal(0, rc, out)
    assert.matches('qoslab test: rrul to ' .. tb.server_addr:gsub('%.', '%%.')
      .. ': 1 flow %(8 streams%) for 2 s, probe idle 0.5 s before and after; results in ', out)
    for _, c in ipairs(stdtest.CLASSES) do
      assert.matches('\n *' .. c.name .. ' | ' .. string.format('0x%02x', c.tos) .. ' | +[%d.]+ | +[%d.]+\n', out)
    end
    assert.matches('\n *sum | +| +[%d.]+ | +[%d.]+\n', out)
    assert.matches('samples | lost | idle p50 | loaded p50 | +p90 | +p99 | +max | induced\n', out)
    assert.matches('\n +%d+ | +%d+ | +[%d.]+ | +[%d.]+ | +[%d.]+ | +[%d.]+ | +[%d.]+ | +%-?[%d.]+\n', out)
    assert.not_matches('tos_per_stream', out, 1, true)
    local rec = record_of(dir .. '/o', 'rrul')
    assert.equal(20, rec.results[1].latency.interval_ms)
    assert.equal(1, #rec.results[1].flows)
    assert.equal(8, #rec.results[1].classes)
  end)

  it('examples/rrul_testbed.lua runs (--quick) and records both its tests', function()
    local dir = out_dir()
    local out, rc = sh('lua5.4 bin/qoslab run examples/rrul_testbed.lua --quick --out ' .. q(dir .. '/o'))
    assert.equal(0, rc, out)
    assert.matches('throughput per class', out, 1, true)
    local recs = assert(plan.load(dir .. '/o/results.jsonl'))
    assert.same({ 'latency', 'rrul' }, { recs[1].sweep, recs[2].sweep })
    assert.is_true(recs[2].results[1].latency.idle.samples > 0)
  end)

  it('qoslab test from the command line: table on stdout, results.jsonl in --out', function()
    local dir = out_dir()
    local out, rc = sh(string.format('lua5.4 bin/qoslab test tcp_nup %s --netns %s -t 2 -P 2 '
      .. '--idle 0.5 --no-probe --out %s', tb.server_addr, q(tb.client_netns), q(dir .. '/o')))
    assert.equal(0, rc, out)
    assert.matches('tcp_nup to ' .. tb.server_addr:gsub('%.', '%%.') .. ' from namespace', out)
    assert.matches('TCP upload 2 |  up | +[%d.]+\n', out)
    assert.matches('TCP upload sum |  up | +[%d.]+\n', out)
    local rec = record_of(dir .. '/o', 'tcp_nup')
    assert.equal(2, rec.params.streams)
    assert.equal(2, #rec.results[1].flows[1].streams)
    assert.equal('tcp_nup', cjson.decode(assert(io.open(dir .. '/o/qoslab-run.json')):read('a')).plan)
  end)
end)
