-- qoslab.host over real OpenSSH: hosts are namespaces made for the run, each
-- with its own sshd (spec/integration/host_ssh_helper.lua), the far end is
-- this checkout's bin/qoslab. The whole flow (server on B, a client test
-- from A through the data veth shaped over ssh, metadata, clock, awkward
-- arguments, cleanup), a kill -9 of the plan followed by `qoslab cleanup
-- --hosts`, and the failures: no answer, a refused key, no qoslab there, a
-- command that hangs, bad fields.
local H = require 'spec.integration.traffic_helper'
local S = require 'spec.integration.host_ssh_helper'
local qoslab = require 'qoslab'
local timer = require 'qoslab.timer'

local usable, why = S.available()

describe('qoslab.host over ssh #integration', function()
  if not usable then
    pending('skipped: ' .. why)
    return
  end

  local env
  setup(function() env = S.setup(2) end)
  teardown(function() if env then env.close() end end)

  local function tc(i, dev)
    return H.must(string.format('ip netns exec %s tc qdisc show dev %s', env.hosts[i].ns, dev))
  end

  it('runs a plan across two hosts: server on B, a shaped client test from A, info, clock, run, cleanup', function()
    local defer = H.cleanups(finally)
    local a = qoslab.host(env.spec(1))
    defer(function() a:close() end)
    local b = qoslab.host(env.spec(2))
    defer(function() b:close() end)
    local B = env.hosts[2]

    -- Metadata: the same kernel as here (a namespace shares it), this
    -- qoslab, and a monotonic clock read between the call's start and end.
    local before = timer.now_ns()
    local info = assert(a:info { ifnames = { 'data0' } })
    local after = timer.now_ns()
    assert.equal(H.must('uname -r'):gsub('\n$', ''), info.kernel.release)
    assert.equal(qoslab._VERSION, info.qoslab_version)
    assert.equal('integer', math.type(info.mono_ns))
    assert(info.mono_ns > before and info.mono_ns < after, 'mono_ns outside the call')
    assert.equal('data0', info.interfaces[1].ifname)
    assert.equal(1500, info.interfaces[1].mtu_bytes)

    -- The clock: namespaces share CLOCK_MONOTONIC, so the true offset is 0
    -- and the estimate is within its own bound (half the best round trip).
    local clock = assert(b:clock_offset { samples = 8 })
    assert.equal(8, clock.samples)
    assert(clock.rtt_ns > 0 and clock.error_ns == clock.rtt_ns // 2)
    assert(math.abs(clock.offset_ns) <= clock.error_ns + 1,
      string.format('offset %d ns beyond its bound %d ns', clock.offset_ns, clock.error_ns))

    -- Arguments reach the program as they are.
    local words = { 'a b', "it's", '$HOME', 'x;y', '"q"', '', '*', '\\n' }
    local r = assert(a:run { 'printf', '%s|', table.unpack(words) })
    assert.same({ status = 0, stdout = table.concat(words, '|') .. '|', stderr = '' }, r)
    r = assert(a:run({ 'sh', '-c', 'cat; echo "to stderr" >&2; exit 7' }, { stdin = 'in; $put\n' }))
    assert.same({ status = 7, stdout = 'in; $put\n', stderr = 'to stderr\n' }, r)

    -- A server on B's data address, A's data egress shaped to 20 Mbit/s.
    local srv = assert(b:server { port = 0, bind = B.data_addr })
    assert.equal('integer', math.type(srv:port()))
    assert.equal(b, srv.host)
    assert.equal(1, #env.procs(2, 'qoslab server'))
    local shaped = assert(a:shape_apply('data0', { kind = 'tbf', rate_bps = 20e6 }))
    assert.equal('tbf', shaped.kind)
    assert.matches('qdisc tbf 1: root .*rate 20Mbit', tc(1, 'data0'))
    assert.same(shaped.spec, a:shape_get('data0'))

    local start_there = timer.now_ns() + clock.offset_ns + 300 * 1000000
    local res = assert(a:client { host = B.data_addr, port = srv:port(), duration_s = 1,
                                  start_at_mono_ns = start_there })
    assert.equal('qoslab.Result', getmetatable(res).__name)
    assert.equal('integer', math.type(res.received.bytes))
    assert(res.start_late_ns == nil or res.start_late_ns < 1e9)
    local bps = res.received.bits_per_second
    assert(bps <= 20e6 * 1.05 and bps >= 20e6 * 0.5, 'received ' .. bps .. ' bit/s through a 20 Mbit/s tbf')

    -- Cleanup: no shaper, no server, nothing left to undo.
    local report = a:cleanup()
    assert.same({ { kind = 'shape', ifname = 'data0', removed = true } }, report)
    assert.not_matches('tbf', tc(1, 'data0'))
    b:close()
    assert.same({}, env.procs(2, '/bin/qoslab '))
    assert.same({}, env.procs(1, '/bin/qoslab '))
    a:close()
    assert.same({}, a:close())
  end)

  it('after a kill -9 of the plan, qoslab cleanup --hosts removes its shaper and no server survives', function()
    local defer = H.cleanups(finally)
    local state_dir = env.dir .. '/state'
    local plan = env.dir .. '/plan.lua'
    local function lit(v) return string.format('%q', v) end
    local f = assert(io.open(plan, 'w'))
    f:write(table.concat({
      'local qoslab = require "qoslab"',
      'local function spec(ssh) return { ssh = ssh, identity = ' .. lit(env.client_key) .. ', options = {'
        .. lit(env.options[1]) .. ', ' .. lit(env.options[2]) .. ', ' .. lit(env.options[3]) .. '}, qoslab = '
        .. lit(S.qoslab) .. ', connect_timeout_s = 5 } end',
      'local a = qoslab.host(spec(' .. lit(env.hosts[1].ssh) .. '))',
      'local b = qoslab.host(spec(' .. lit(env.hosts[2].ssh) .. '))',
      'assert(a:shape_apply("data0", { kind = "tbf", rate_bps = 10e6 }))',
      'local srv = assert(b:server { port = 0 })',
      'io.stdout:write("ready ", srv:port(), "\\n"); io.stdout:flush()',
      'qoslab.timer.sleep(60)', '' }, '\n'))
    f:close()
    local out = env.dir .. '/plan.out'
    -- (run from the run's directory: `qoslab run` makes its results/ there)
    local pid = H.spawn(string.format('cd %s && exec env -u QOSLAB_BUILD QOSLAB_STATE_DIR=%s lua5.4 %s run %s',
      H.q(env.dir), H.q(state_dir), H.q(S.qoslab), H.q(plan)), out)
    defer(function() H.kill(pid) end)
    local t_end = H.now() + 10
    while not (H.read(out) or ''):find('ready', 1, true) and H.now() < t_end and H.alive(pid) do H.sleep(0.05) end
    assert.matches('^ready %d+', H.read(out) or '')
    assert.matches('tbf', tc(1, 'data0'))
    H.must('kill -9 ' .. pid)
    assert(H.wait_exit(pid, 5))
    -- Its ssh channel closed with the plan: the server there ends by itself.
    t_end = H.now() + 5
    while #env.procs(2, 'qoslab server') > 0 and H.now() < t_end do H.sleep(0.05) end
    assert.same({}, env.procs(2, 'qoslab server'))
    assert.matches('tbf', tc(1, 'data0'))  -- left behind
    local ok, text = H.sh(string.format('cd %s && env -u QOSLAB_BUILD QOSLAB_STATE_DIR=%s lua5.4 %s cleanup '
      .. '--hosts %s,%s', H.q(env.dir), H.q(state_dir), H.q(S.qoslab), env.hosts[1].ssh, env.hosts[2].ssh))
    assert(ok, text)
    assert.matches('removed shape on data0 at ' .. env.hosts[1].ssh:gsub('%.', '%%.'), text)
    assert.not_matches('tbf', tc(1, 'data0'))
    assert.same({}, env.procs(2, '/bin/qoslab '))
    -- Nothing left recorded, and no ssh master of the dead plan lingers.
    assert.same({}, require('qoslab.fs').list(state_dir .. '/hosts') or {})
    local _, masters = H.sh("pgrep -f -- '-M -N -o ControlPath=/tmp/qoslab-ssh-' || true")
    for p in masters:gmatch('%d+') do
      local cmd = (H.read('/proc/' .. p .. '/cmdline') or ''):gsub('%z', ' ')
      assert.not_matches(env.hosts[1].addr, cmd, 1, true)
    end
  end)

  it('returns the far end ENOTSUP with its advice for netem on a kernel without sch_netem', function()
    local defer = H.cleanups(finally)
    local a = qoslab.host(env.spec(1))
    defer(function() a:close() end)
    if H.netem_available() then
      pending('this kernel has sch_netem: spec/netem covers netem over ssh')
      return
    end
    for _, spec in ipairs { 'delay 10ms loss 1%', { delay_ms = 10, loss_pct = 1 } } do
      local ok, msg, code = a:netem_apply('data0', spec)
      assert.is_nil(ok)
      assert.equal('ENOTSUP', code)
      assert.matches('^host1: ', msg)
      assert.matches('sch_netem', msg, 1, true)
      assert.matches('modprobe sch_netem', msg, 1, true)
    end
    -- A bad spec is raised here, as qoslab.netem.apply raises it.
    assert.has_error(function() a:netem_apply('data0', { delay_ms = -1 }) end,
      'qoslab.netem.apply: spec.delay_ms: expected a finite number in [0, 1000000000], got -1')
    -- tc words are read there: the far end's field error is raised here too.
    assert.has_error(function() a:netem_apply('data0', 'delay banana') end,
      'host1: qoslab.netem.parse: delay: expected a time with a unit (e.g. 50ms, 1.5ms, 250us, 1s), got "banana"')
    assert.same({}, a:cleanup())
  end)

  it('fails with codes and advice: no answer, a refused key, no qoslab there, a command that hangs, bad fields', function()
    local defer = H.cleanups(finally)
    -- No answer: ETIMEDOUT (or EHOSTUNREACH) within connect_timeout_s.
    local silent = qoslab.host(env.spec(1, { ssh = 'root@' .. env.silent_addr, connect_timeout_s = 1 }))
    defer(function() silent:close() end)
    local t0 = H.now()
    local ok, msg, code = silent:run { 'true' }
    local took = H.now() - t0
    assert.is_nil(ok)
    assert(code == 'ETIMEDOUT' or code == 'EHOSTUNREACH', code)
    assert.matches('^host1: ', msg)
    assert(took < 2.5, 'took ' .. took .. ' s with connect_timeout_s = 1')

    local wrong = qoslab.host(env.spec(1, { identity = env.wrong_key }))
    defer(function() wrong:close() end)
    ok, msg, code = wrong:info()
    assert.is_nil(ok)
    assert.equal('EACCES', code)
    assert.matches('Permission denied', msg, 1, true)
    assert.matches('identity', msg, 1, true)

    local missing = qoslab.host(env.spec(1, { qoslab = env.dir .. '/no/qoslab' }))
    defer(function() missing:close() end)
    assert.same({ nil, string.format('host1: qoslab is not installed on %s (looked for %s/no/qoslab; '
      .. 'set qoslab = path, or qoslab run --remote-qoslab PATH)', env.hosts[1].ssh, env.dir), 'ENOENT' },
      { missing:info() })
    ok, msg, code = missing:server { port = 0 }
    assert.is_nil(ok)
    assert.equal('ENOENT', code)
    assert.matches('looked for ' .. env.dir .. '/no/qoslab', msg, 1, true)

    -- A hang: ETIMEDOUT after the timeout, and the command gone there too.
    local a = qoslab.host(env.spec(1))
    defer(function() a:close() end)
    assert(a:run { 'true' })  -- connected: the time below is the command's
    t0 = H.now()
    ok, msg, code = a:run({ 'sleep', '100' }, { timeout_s = 1 })
    took = H.now() - t0
    assert.is_nil(ok)
    assert.equal('ETIMEDOUT', code)
    assert.matches('host1: run sleep timed out after 1 s', msg, 1, true)
    assert(took >= 1 and took < 2, 'took ' .. took .. ' s')
    assert.same({}, env.procs(1, '^sleep 100'))

    -- Bad fields: raised, naming the field.
    assert.has_error(function() qoslab.host { ssh = 42 } end,
      'qoslab.host: ssh: expected "user@host" or "host" (no spaces, neither starting with "-"), got 42')
    assert.has_error(function() qoslab.host { ssh = 'root@x', port = 'x' } end,
      'qoslab.host: port: expected an integer in [1, 65535], got string "x"')
    assert.has_error(function() qoslab.host { ssh = '-oProxyCommand=x' } end,
      'qoslab.host: ssh: expected "user@host" or "host" (no spaces, neither starting with "-"), '
        .. 'got string "-oProxyCommand=x"')
    assert.has_error(function() qoslab.host { ssh = 'root@x', options = { 'no value' } } end,
      'qoslab.host: options[1]: expected a "Key=Value" string (an ssh_config(5) option), got string "no value"')
    assert.has_error(function() qoslab.host { ssh = 'root@x', colour = 1 } end)
    assert.has_error(function() a:run { 'a\0b' } end,
      'qoslab.Host:run: argv[1]: expected a string without NUL bytes, got string "a\\0b"')
  end)

  it('client_start runs tests at once; closing one stops it there, the other ends with its result', function()
    local defer = H.cleanups(finally)
    local a = qoslab.host(env.spec(1))
    defer(function() a:close() end)
    local b = qoslab.host(env.spec(2))
    defer(function() b:close() end)
    local B = env.hosts[2]
    local srv = assert(b:server { port = 0, bind = B.data_addr })
    local function opts(duration_s)
      return { host = B.data_addr, port = srv:port(), proto = 'udp', bitrate_bps = 1e6, duration_s = duration_s }
    end
    local t0 = H.now()
    local long = assert(a:client_start(opts(30)))
    local short = assert(a:client_start(opts(1)))
    assert.equal('qoslab.HostTest', getmetatable(long).__name)
    assert.equal(a, long.host)
    -- both run on A at once
    local n = 0
    while #env.procs(1, 'qoslab client') < 2 and n < 100 do H.sleep(0.05); n = n + 1 end
    assert.equal(2, #env.procs(1, 'qoslab client'))
    assert.equal(1, select('#', short:wait()))
    local res = assert(short:wait())
    assert.equal('qoslab.Result', getmetatable(res).__name)
    assert(res.received.bytes > 0, 'the short test received nothing')
    assert.equal(res, short:wait())
    -- the long one is stopped there, long before its 30 s
    long:close()
    assert(H.now() - t0 < 10, 'the long test was not stopped')
    assert.same({}, env.procs(1, 'qoslab client'))
    local r, msg, code = long:wait()
    assert.is_nil(r)
    assert.equal('ECANCELED', code)
    assert.matches('stopped before its end', msg)
    -- a test not waited for is stopped by cleanup, and bad input is named
    assert(a:client_start(opts(30)))
    while #env.procs(1, 'qoslab client') < 1 and n < 200 do H.sleep(0.05); n = n + 1 end
    a:cleanup()
    assert.same({}, env.procs(1, 'qoslab client'))
    assert.error_matches(function() a:client_start { host = B.data_addr, duration_s = 'x' } end,
      'opts.duration_s: expected a finite number')
    assert.error_matches(function() a:client { host = B.data_addr, duration_s = 'x' } end,
      'opts.duration_s: expected a finite number')
  end)

  it('a timed-out run stops what it started there too; a shaper another handle set is not replaced', function()
    local defer = H.cleanups(finally)
    local a = qoslab.host(env.spec(1))
    defer(function() a:close() end)
    -- a program that leaves a child of its own in the background
    local r, msg, code = a:run({ 'sh', '-c', 'sleep 102 & sleep 103; wait' }, { timeout_s = 1.5 })
    assert.is_nil(r)
    assert.equal('ETIMEDOUT', code, msg)
    local n = 0
    while #env.procs(1, '^sleep 10[23]') > 0 and n < 40 do H.sleep(0.05); n = n + 1 end
    assert.same({}, env.procs(1, '^sleep 10[23]'))

    -- a second handle (another run) finds A's shaper and leaves it be
    assert(a:shape_apply('data0', { kind = 'tbf', rate_bps = 30e6 }))
    local b = qoslab.host(env.spec(1))
    defer(function() b:close() end)
    local ok, bmsg, bcode = b:shape_apply('data0', { kind = 'tbf', rate_bps = 70e6 })
    assert.is_nil(ok)
    assert.equal('EBUSY', bcode)
    assert.matches('already has a shaper that this handle did not set', bmsg)
    assert.matches('rate 30Mbit', tc(1, 'data0'))
    -- A applies again over its own: no question
    assert(a:shape_apply('data0', { kind = 'tbf', rate_bps = 40e6 }))
    assert.matches('rate 40Mbit', tc(1, 'data0'))
    -- one value back on success, as the local calls give
    assert.equal(1, select('#', a:shape_get('data0')))
    assert.same({}, b:cleanup())
    a:cleanup()
    assert.not_matches('tbf', tc(1, 'data0'))
  end)

  it('localhost() is the same interface on this machine', function()
    local defer = H.cleanups(finally)
    local here = qoslab.host.localhost()
    defer(function() here:close() end)
    assert.equal(qoslab.host['local'], qoslab.host.localhost)
    local a = qoslab.host(env.spec(1))
    defer(function() a:close() end)
    local argv = { 'printf', '%s|', 'a b', "it's", '$x;' }
    assert.same(assert(a:run(argv)), assert(here:run(argv)))
    local mine, theirs = assert(here:info()), assert(a:info())
    assert.equal(theirs.kernel.release, mine.kernel.release)
    assert.equal(theirs.qoslab_version, mine.qoslab_version)
    local t0 = H.now()
    local ok, _, code = here:run({ 'sleep', '100' }, { timeout_s = 0.5 })
    assert.is_nil(ok)
    assert.equal('ETIMEDOUT', code)
    assert(H.now() - t0 < 1.5)
  end)
end)
