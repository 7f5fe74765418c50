-- qoslab.stdtest without a network: the definitions (flows, directions, DSCP
-- marks as TOS bytes), the option checks that name their field, the text of a
-- run, and the `qoslab test` command's parsing and refusals.
local stdtest = require 'qoslab.stdtest'
local defs = require 'qoslab.stdtest.defs'

local function names_of(list)
  local t = {}
  for _, e in ipairs(list) do t[#t + 1] = e.name end
  return t
end

describe('qoslab.stdtest definitions', function()
  it('lists the five tests, sorted, each with a description and its probe', function()
    local list = stdtest.list()
    assert.same({ 'latency', 'rrul', 'tcp_ndown', 'tcp_nup', 'udp_flood' }, names_of(list))
    for _, t in ipairs(list) do
      assert.is_string(t.description)
      assert.is_true(#t.description > 20)
      assert.is_true(t.probe == 'beside' or t.probe == 'alone', t.name)
    end
    assert.same({ 'streams' }, list[4].options)
    assert.same({ 'bitrate_bps' }, list[5].options)
    assert.same({}, list[2].options)
  end)

  it('rrul: one bidir test of 4 streams each way, stream i in class i, TOS = DSCP << 2', function()
    local flows = defs.tests.rrul.flows({})
    assert.equal(1, #flows)
    local f = flows[1]
    assert.same({ 'tcp', 'both', true, 4 }, { f.proto, f.direction, f.bidir, f.parallel })
    assert.is_nil(f.tos)
    assert.same({ 'BE', 'BK', 'CS5', 'EF' }, f.classes)
    assert.same({ 0x00, 0x20, 0xa0, 0xb8 }, f.tos_per_stream)
    -- the options the engine takes: its own check accepts them
    local filled = require('qoslab.core').traffic_client_check({ host = '127.0.0.1',
      proto = f.proto, bidir = f.bidir, parallel = f.parallel, tos_per_stream = f.tos_per_stream },
      'spec')
    assert.same(f.tos_per_stream, filled.tos_per_stream)
    -- the CLASSES table itself: DSCP values of RFC 4594
    for _, c in ipairs(stdtest.CLASSES) do assert.equal(c.dscp << 2, c.tos) end
  end)

  it('tcp_nup / tcp_ndown: N streams of one test one way; udp_flood at its rate', function()
    local up = defs.tests.tcp_nup.flows({ streams = 6 })
    assert.same({ 'up', 6, 'tcp' }, { up[1].direction, up[1].parallel, up[1].proto })
    local down = defs.tests.tcp_ndown.flows({ streams = 3 })
    assert.same({ 'down', 3 }, { down[1].direction, down[1].parallel })
    local u = defs.tests.udp_flood.flows({ bitrate_bps = 5000000 })
    assert.same({ 'up', 'udp', 5000000 }, { u[1].direction, u[1].proto, u[1].bitrate_bps })
    assert.same({}, defs.tests.latency.flows({}))
  end)
end)

describe('qoslab.stdtest option checks', function()
  local function err_of(name, opts)
    local ok, e = pcall(stdtest.check, name, opts)
    assert.is_false(ok)
    return tostring(e)
  end

  it('fills in the defaults', function()
    local o = stdtest.check('tcp_nup', { host = '10.0.0.2' })
    assert.same({ 60, 5, 4 }, { o.duration_s, o.idle_s, o.streams })
    assert.same({}, o.probe)
    o = stdtest.check('udp_flood', { host = 'h', probe = false })
    assert.equal(100000000, o.bitrate_bps)
    assert.is_false(o.probe)
    assert.is_nil(stdtest.check('rrul', { host = 'h' }).streams)
  end)

  it('an unknown test lists the known ones', function()
    local e = err_of('rrull', { host = 'h' })
    assert.matches('qoslab.stdtest.check: name: expected a standard test (latency, rrul, '
      .. 'tcp_ndown, tcp_nup, udp_flood), got string "rrull"', e, 1, true)
    local ok, e2 = pcall(stdtest.run, 42, {})
    assert.is_false(ok)
    assert.matches('qoslab.stdtest.run: name: expected a standard test', e2, 1, true)
  end)

  it('names the field of a bad value', function()
    assert.matches('opts.duration_s: expected a finite number in [0.001, 86400], got 0',
      err_of('rrul', { host = 'h', duration_s = 0 }), 1, true)
    assert.matches('opts.duration_s: expected a finite number in [0.001, 86400], got nan',
      err_of('latency', { host = 'h', duration_s = 0 / 0 }), 1, true)
    assert.matches('opts.idle_s: expected', err_of('rrul', { host = 'h', idle_s = -1 }), 1, true)
    assert.matches('opts.streams: expected an integer in [1, 128], got 0',
      err_of('tcp_nup', { host = 'h', streams = 0 }), 1, true)
    assert.matches('opts.bitrate_bps: expected an integer',
      err_of('udp_flood', { host = 'h', bitrate_bps = 1.5 }), 1, true)
    assert.matches('opts.port: expected an integer in [1, 65535], got 0',
      err_of('rrul', { host = 'h', port = 0 }), 1, true)
    assert.matches("opts.host: expected the server's host name or address, got nil",
      err_of('rrul', {}), 1, true)
    assert.matches("opts.host: expected the server's host name or address, got string \"\"",
      err_of('rrul', { host = '' }), 1, true)
    assert.matches('opts.netns: expected a namespace name',
      err_of('rrul', { host = 'h', netns = '' }), 1, true)
    assert.matches('opts.probe: expected a table of probe options, true or false, got 1',
      err_of('rrul', { host = 'h', probe = 1 }), 1, true)
    assert.same({}, stdtest.check('rrul', { host = 'h', probe = true }).probe)
  end)

  it("refuses another test's option and unknown keys", function()
    assert.matches('opts.streams: rrul takes no streams (it is an option of tcp_nup and tcp_ndown)',
      err_of('rrul', { host = 'h', streams = 4 }), 1, true)
    assert.matches('opts.bitrate_bps: tcp_nup takes no bitrate_bps (it is an option of udp_flood)',
      err_of('tcp_nup', { host = 'h', bitrate_bps = 1000 }), 1, true)
    assert.matches('opts.durations: unknown key (known keys: ',
      err_of('rrul', { host = 'h', durations = 1 }), 1, true)
  end)

  it('the probe: not off for the latency test; its idle phase and length are the run\'s', function()
    assert.matches('opts.probe: latency is the probe alone',
      err_of('latency', { host = 'h', probe = false }), 1, true)
    -- no load, so no idle phase: refused rather than ignored
    assert.matches('opts.idle_s: latency is the probe alone, with no load to measure an idle phase '
      .. 'against; leave it out', err_of('latency', { host = 'h', idle_s = 3 }), 1, true)
    assert.matches('opts.probe.idle_s: give the idle phase as opts.idle_s',
      err_of('rrul', { host = 'h', probe = { idle_s = 1 } }), 1, true)
    assert.matches('opts.probe.duration_s: the probe runs for opts.duration_s',
      err_of('latency', { host = 'h', probe = { duration_s = 1 } }), 1, true)
    -- the probe's own checks, before anything runs
    assert.matches('qoslab.stdtest.check: opts.probe.interval_ms: expected',
      err_of('rrul', { host = 'h', probe = { interval_ms = 0 } }), 1, true)
    assert.matches('qoslab.stdtest.check: opts.probe.proto: expected',
      err_of('latency', { host = 'h', probe = { proto = 'sctp' } }), 1, true)
    assert.matches('opts.probe.host', err_of('tcp_nup', { host = 'h', probe = { host = 'x' } }), 1, true)
    local ok, e = pcall(function() stdtest.run('rrul', { host = 'h', probe = { tos = 256 } }) end)
    assert.is_false(ok)
    assert.matches('stdtest_spec.lua:%d+: qoslab.stdtest.run: opts.probe.tos: expected', e)
  end)

  it('raises at the caller\'s line', function()
    local ok, e = pcall(function() stdtest.run('rrul', { host = 'h', duration_s = -1 }) end)
    assert.is_false(ok)
    assert.matches('stdtest_spec.lua:%d+: qoslab.stdtest.run: opts.duration_s', e)
    ok, e = pcall(function() stdtest.check('nope', {}) end)
    assert.is_false(ok)
    assert.matches('stdtest_spec.lua:%d+: qoslab.stdtest.check: name:', e)
  end)

  -- An unknown test name and an unknown key were raised one level short, at
  -- a line inside stdtest.lua; each must name the caller's own line.
  it('an unknown test or key: at the caller\'s line, not inside qoslab', function()
    local line
    local ok, e = pcall(function()
      line = debug.getinfo(1, 'l').currentline + 1
      local r = stdtest.run('foo', { host = 'h' }); return r
    end)
    assert.is_false(ok)
    assert.matches('stdtest_spec.lua:' .. line .. ': qoslab.stdtest.run: name: expected a standard test', e)
    ok, e = pcall(function()
      line = debug.getinfo(1, 'l').currentline + 1
      local r = stdtest.run('rrul', { host = 'h', foo = 1 }); return r
    end)
    assert.is_false(ok)
    assert.matches('stdtest_spec.lua:' .. line .. ': qoslab.stdtest.run: opts.foo: unknown key', e)
    ok, e = pcall(function()
      line = debug.getinfo(1, 'l').currentline + 1
      local r = stdtest.check('rrul', { host = 'h', foo = 1 }); return r
    end)
    assert.is_false(ok)
    assert.matches('stdtest_spec.lua:' .. line .. ': qoslab.stdtest.check: opts.foo: unknown key', e)
  end)
end)

describe('qoslab.stdtest.format', function()
  local function flow(dir, class, tos, bps)
    return { label = 'TCP ' .. dir .. ' ' .. class, direction = dir, class = class, tos = tos,
             proto = 'tcp', parallel = 1, bits_per_second = bps, streams = { { id = 1 } } }
  end

  it('rrul: per-class throughput per direction, sums, latency, warnings', function()
    local r = { test = 'rrul', host = '10.0.0.2', duration_s = 3, idle_s = 1,
      flows = { { label = 'TCP upload and download', direction = 'both', proto = 'tcp',
                  streams = {}, warnings = { 'tos_per_stream: the peer is not a qoslab server' } } },
      classes = { flow('up', 'BE', 0, 10e6), flow('up', 'BK', 32, 20e6), flow('up', 'CS5', 160, 30e6),
                flow('up', 'EF', 184, 40e6), flow('down', 'BE', 0, 1e6), flow('down', 'BK', 32, 2e6),
                flow('down', 'CS5', 160, 3e6), flow('down', 'EF', 184, 4e6) },
      up_bps = 100e6, down_bps = 10e6,
      latency = { samples = 300, lost = 2, rtt_ms = { p50 = 21.5, p90 = 24, p99 = 30.25, max = 31 },
                  idle = { samples = 100, rtt_ms = { p50 = 0.05 } }, induced_ms = 21.45 } }
    local text = stdtest.format(r)
    assert.matches('rrul to 10.0.0.2: 3 s of load, probe idle 1 s before and after', text, 1, true)
    assert.matches('  EF | 0xb8 |  40.00 |     4.00', text, 1, true)
    assert.matches(' BK | 0x20 |  20.00 |     2.00', text, 1, true)
    assert.matches('sum |      | 100.00 |    10.00', text, 1, true)
    assert.matches('idle p50 | loaded p50', text, 1, true)
    assert.matches('300 |    2 |    0.050 |     21.500 | 24.000 | 30.250 | 31.000 |  21.450', text, 1, true)
    assert.matches('\nwarning: TCP upload and download: tos_per_stream: the peer is not a qoslab '
      .. 'server\n', text, 1, true)
  end)

  it('n streams: a row per stream and the sum; udp: target and loss; no probe: no latency', function()
    local f = { label = 'TCP upload', direction = 'up', proto = 'tcp', parallel = 2,
                bits_per_second = 3e6, streams = { { bits_per_second = 1e6 }, { bits_per_second = 2e6 } } }
    local text = stdtest.format { test = 'tcp_nup', host = 'h', duration_s = 2, flows = { f } }
    assert.matches('tcp_nup to h: 2 s of load\n', text, 1, true)
    assert.matches('TCP upload 2 |  up |   2.00', text, 1, true)
    assert.matches('TCP upload sum |  up |   3.00', text, 1, true)
    assert.not_matches('latency', text, 1, true)
    local u = { label = 'UDP upload', direction = 'up', proto = 'udp', parallel = 1,
                bits_per_second = 9e6, bitrate_bps = 10e6, lost_pct = 10, streams = { {} } }
    text = stdtest.format { test = 'udp_flood', host = 'h', duration_s = 2, flows = { u } }
    assert.matches('UDP upload |  up |   9.00 |         10.00 |     10', text, 1, true)
  end)

  it('the probe alone: its distribution, no idle phase or induced column', function()
    local text = stdtest.format { test = 'latency', host = 'h', duration_s = 2, flows = {},
      latency = { samples = 200, lost = 1, late = 0, idle = { samples = 0 },
                  rtt_ms = { min = 0.01, p50 = 0.02, p90 = 0.03, p99 = 0.5, max = 1 } } }
    assert.matches('latency to h: 2 s of probing\n', text, 1, true)
    assert.matches('samples | lost | late |   min |   p50 |   p90 |   p99 |   max', text, 1, true)
    assert.matches('    200 |    1 |    0 | 0.010 | 0.020 | 0.030 | 0.500 | 1.000', text, 1, true)
    assert.not_matches('induced', text, 1, true)
    -- its health line has no "loaded" phase
    assert.matches('\nprobe: sent 201; 200 samples, 1 lost, 0 late\n', text, 1, true)
  end)

  -- A starved probe that sent 61 of its ~200 loaded requests printed
  -- "61 | 0 | ..." and nothing hinted that 70 % of the schedule was missing:
  -- the table is followed by the probe's health, slots not sent included.
  it("the probe's health under its table: sent, samples, lost, late, slots not sent", function()
    local lat = { sent = 270, samples = 61, lost = 0, late = 0, interval_ms = 10,
                  idle = { samples = 209, lost = 0, late = 0, rtt_ms = { p50 = 0.03 } },
                  rtt_ms = { p50 = 0.029, p90 = 5.2, p99 = 66.8, max = 66.8 }, induced_ms = 0 }
    local text = stdtest.format { test = 'rrul', host = 'h', duration_s = 2, idle_s = 1,
      flows = {}, classes = {}, latency = lat }
    assert.matches('\nprobe: sent 270; loaded: 61 samples, 0 lost, 0 late; about 139 of 200 slots '
      .. 'not sent (duration / interval - requests: a descheduled probe skips the slots it missed)\n',
      text, 1, true)
    -- a full schedule (a slot short at the edges) says nothing of slots
    lat.samples, lat.lost, lat.late = 197, 2, 1
    text = stdtest.format { test = 'rrul', host = 'h', duration_s = 2, idle_s = 1,
      flows = {}, classes = {}, latency = lat }
    assert.matches('\nprobe: sent 270; loaded: 197 samples, 2 lost, 1 late\n', text, 1, true)
    local summary = require 'qoslab.traffic.summary'
    local lines = summary.latency_lines({ proto = 'udp', interval_ms = 10, clock = 'shared',
      sent = 100, samples = 40, lost = 5, late = 5, idle = { samples = 0 }, rtt_ms = {} }, 1)
    assert.equal('probe: sent 100; loaded: 40 samples, 5 lost, 5 late; about 50 of 100 slots not '
      .. 'sent (duration / interval - requests: a descheduled probe skips the slots it missed)',
      lines[3])
  end)

  it('raises on what is not a run', function()
    assert.has_error(function() stdtest.format(nil) end,
      'qoslab.stdtest.format: r: expected a table, got nil')
    assert.has_error(function() stdtest.format({}) end,
      'qoslab.stdtest.format: r.test: expected a test name, got nil')
  end)
end)

describe('qoslab test (command line)', function()
  local function qoslab(args)
    local p = assert(io.popen('QOSLAB_BUILD=${QOSLAB_BUILD:-build} lua5.4 bin/qoslab ' .. args .. ' 2>&1; echo "rc=$?"'))
    local s = p:read('a')
    p:close()
    return s
  end

  -- An interrupted run left its folder holding only qoslab-run.json and
  -- said nothing of it: like `qoslab run`, the empty folder goes, told.
  it('interrupted before anything is written: the empty folder is removed, and said', function()
    local dir = os.tmpname()
    os.remove(dir)
    local out = qoslab(string.format('test latency 127.0.0.1 --probe-proto icmp -t 20 --out %s 2>&1 '
      .. '& pid=$!; sleep 1.5; kill -INT $pid; wait $pid', dir))
    assert.matches('qoslab test: nothing was written; removed the empty ' .. dir, out, 1, true)
    assert.matches('interrupted by SIGINT', out, 1, true)
    assert.matches('rc=130', out, 1, true)
    assert.is_nil(io.open(dir .. '/qoslab-run.json'))
    assert.is_true(os.execute('test ! -e ' .. dir))
  end)

  it('--list names every test', function()
    local out = qoslab('test --list')
    for _, n in ipairs { 'rrul', 'tcp_nup', 'tcp_ndown', 'udp_flood', 'latency' } do
      assert.matches('\n' .. n .. ' +%u', '\n' .. out)
    end
    assert.matches('rc=0', out, 1, true)
  end)

  it('refuses a missing or unknown name, a missing host and bad values, exit 2', function()
    local out = qoslab('test')
    assert.matches('NAME: expected a standard test (latency, rrul, tcp_ndown, tcp_nup, udp_flood)', out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test rul 127.0.0.1')
    assert.matches('NAME: unknown test "rul": expected one of latency, rrul', out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test rrul')
    assert.matches('HOST: expected the host of a qoslab server (qoslab server)', out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test rrul 127.0.0.1 -t 0')
    assert.matches("-t: expected a positive number of seconds (at most 86400), got '0'", out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test rrul 127.0.0.1 -P 2')
    assert.matches('-P (streams): rrul takes no streams', out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test udp_flood 127.0.0.1 -b 10X')
    assert.matches('-b: rate:', out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test rrul 127.0.0.1 --probe-interval 0.5')
    assert.matches('--probe-interval (probe.interval_ms): expected a finite number in [1, 60000], got 0.5',
      out, 1, true)
    assert.matches('rc=2', out, 1, true)
    -- 1e9 was "expected a positive number of milliseconds": the range it is out of
    out = qoslab('test rrul 127.0.0.1 --probe-interval 1e9')
    assert.matches('--probe-interval (probe.interval_ms): expected a finite number in [1, 60000], got 1',
      out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test rrul 127.0.0.1 --probe-interval x')
    assert.matches("--probe-interval: expected a number of milliseconds, got 'x'", out, 1, true)
    assert.matches('rc=2', out, 1, true)
    out = qoslab('test latency 127.0.0.1 --no-probe')
    assert.matches('--probe-* (probe): latency is the probe alone', out, 1, true)
    assert.matches('rc=2', out, 1, true)
  end)
end)
