-- bin/qoslab as the far end of a multi-host experiment (started over ssh by
-- a near end): with QOSLAB_ERRORS=json every failure ends in one
-- `qoslab-error:` line with the exit status 1 (the world) or 2 (bad input);
-- `server --announce --exit-on-eof`, `netem`/`shape` with JSON in and out,
-- `info --json`, `clock --echo`, `client --start-at/--result-json`. Each run
-- is a process, as ssh would start it.
local cjson = require 'cjson'
local H = require 'integration.traffic_helper'

-- Run bin/qoslab with QOSLAB_ERRORS=json; stdin from `stdin_text` (or
-- /dev/null). Returns stdout, stderr, exit status.
local function qoslab(args, stdin_text)
  local out, err, inp = H.tmp('out'), H.tmp('err'), H.tmp('in')
  local f = assert(io.open(inp, 'w'))
  f:write(stdin_text or '')
  f:close()
  -- what netem/shape set record for `qoslab cleanup` stays in the scratch dir
  local _, _, status = os.execute(string.format(
    'env -u QOSLAB_BUILD QOSLAB_ERRORS=json QOSLAB_STATE_DIR=%s lua5.4 bin/qoslab %s <%s >%s 2>%s',
    H.q(H.tmp('state')), args, H.q(inp), H.q(out), H.q(err)))
  return H.read(out) or '', H.read(err) or '', status
end

-- The stderr lines and the decoded machine line (the last one).
local function error_of(err)
  local lines = {}
  for l in err:gmatch('[^\n]+') do lines[#lines + 1] = l end
  local last = lines[#lines] or ''
  local json = last:match('^qoslab%-error: (.*)$')
  assert(json, 'no qoslab-error line last on stderr:\n' .. err)
  local n = 0
  for _, l in ipairs(lines) do if l:find('^qoslab%-error: ') then n = n + 1 end end
  assert.equal(1, n)
  return cjson.decode(json), last
end

describe('qoslab far end: QOSLAB_ERRORS=json', function()
  after_each(function() H.cleanup_tmp() end)

  it('a usage error keeps its lines and ends in the machine line, status 2', function()
    local _, err, status = qoslab('client')
    assert.equal(2, status)
    assert.equal('Usage: qoslab client HOST [options]\n'
      .. "qoslab client: error: missing argument 'host'\n"
      .. 'see qoslab client --help\n'
      .. [[qoslab-error: {"message": "missing argument 'host'", "code": "EINVAL", "field": "host"}]]
      .. '\n', err)
  end)

  it('a bad option value names the option key as the field', function()
    local _, err, status = qoslab('client 127.0.0.1 -p 70000')
    assert.equal(2, status)
    local e = error_of(err)
    assert.same({ message = '-p: 70000 is out of range [1, 65535]', code = 'EINVAL',
      field = 'opts.port' }, e)
  end)

  it('an unknown command: status 2, EINVAL, no field', function()
    local _, err, status = qoslab('no-such-command')
    assert.equal(2, status)
    local e, line = error_of(err)
    assert.equal([[qoslab-error: {"message": "unknown command 'no-such-command'", "code": "EINVAL", "field": null}]], line)
    assert.equal(cjson.null, e.field)
  end)

  it('a failure of the world: status 1 with its code', function()
    local port = H.port()
    local _, err, status = qoslab('client 127.0.0.1 -t 1 -p ' .. port)
    assert.equal(1, status)
    local e = error_of(err)
    assert.equal('ECONNREFUSED', e.code)
    assert.equal(cjson.null, e.field)
    assert.truthy(e.message:find('127.0.0.1 port ' .. port, 1, true))
  end)

  it('a command that records no failure itself: its last line and code', function()
    local _, err, status = qoslab('report /nonexistent-qoslab-dir')
    assert.equal(1, status)
    local e = error_of(err)
    assert.equal('ENOENT', e.code)
    assert.equal('qoslab report: not a folder: /nonexistent-qoslab-dir (ENOENT)', e.message)
  end)

  it('without the variable there is no machine line', function()
    local _, _, status = os.execute('env -u QOSLAB_BUILD -u QOSLAB_ERRORS lua5.4 bin/qoslab client '
      .. '>/dev/null 2>' .. H.q(H.tmp('plain')))
    assert.equal(2, status)
    assert.falsy(H.read(H.tmp('plain')):find('qoslab-error', 1, true))
  end)
end)

-- The exit status the spawning shell wrote into `rc` (waited for up to 1 s).
local function status_of(rc)
  local t_end = H.now() + 1
  repeat
    local v = (H.read(rc) or ''):match('%d+')
    if v then return v end
    H.sleep(0.02)
  until H.now() > t_end
  return nil
end

describe('qoslab far end: server --announce --exit-on-eof', function()
  after_each(function() H.cleanup_tmp() end)

  it('announces its port and pid, and exits 0 within 1 s of stdin closing', function()
    local defer = H.cleanups(finally)
    local fifo, out, rc = H.tmp('stdin'), H.tmp('srv.out'), H.tmp('srv.rc')
    H.must('mkfifo ' .. H.q(fifo))
    local sh = H.spawn(string.format('env -u QOSLAB_BUILD lua5.4 bin/qoslab server -p 0 --announce '
      .. '--exit-on-eof <%s; echo $? >%s', H.q(fifo), H.q(rc)), out, H.tmp('srv.err'))
    defer(function() H.kill(sh) end)
    -- the writer end: the near end's ssh channel
    local w = assert(io.open(fifo, 'w'))
    defer(function() pcall(w.close, w) end)
    local line
    local t_end = H.now() + 5
    while H.now() < t_end do
      line = (H.read(out) or ''):match('^([^\n]*)\n')
      if line then break end
      H.sleep(0.02)
    end
    assert.truthy(line, 'no announce line')
    local ev = cjson.decode(line)
    ev.pid, ev.port = math.tointeger(ev.pid), math.tointeger(ev.port)
    assert.equal('listening', ev.event)
    assert.equal('integer', math.type(ev.port))
    assert.is_true(ev.port > 0)
    assert.is_true(H.alive(ev.pid))
    defer(function() H.kill(ev.pid) end)
    assert.is_true(H.wait_listen(ev.port, nil, 2))
    -- its parent is the shell that started it: the pid is the server's own
    local stat = H.read('/proc/' .. ev.pid .. '/cmdline'):gsub('%z', ' ')
    assert.truthy(stat:find('bin/qoslab server', 1, true))
    -- data on stdin is not its end
    w:write('keepalive\n')
    w:flush()
    H.sleep(0.3)
    assert.is_true(H.alive(ev.pid))
    local t0 = H.now()
    w:close()
    assert.is_true(H.wait_exit(ev.pid, 1), 'server still running 1 s after stdin closed')
    assert.is_true(H.now() - t0 < 1)
    assert.equal('0', status_of(rc))
    -- no process left whose parent was the server
    local _, kids = H.sh('ps -o pid= --ppid ' .. ev.pid)
    assert.equal('', kids)
  end)

  it('stdin at its end already: exits 0 without serving; no stdin at all: EBADF', function()
    local out, err, status = qoslab('server -p 0 --announce --exit-on-eof')
    assert.equal(0, status, err)
    assert.equal('', out)
    assert.equal('qoslab server: --exit-on-eof: stdin is at its end already; not serving\n', err)
    local _, _, st = os.execute('env -u QOSLAB_BUILD QOSLAB_ERRORS=json lua5.4 bin/qoslab server '
      .. '-p 0 --exit-on-eof <&- >/dev/null 2>' .. H.q(H.tmp('ebadf')))
    assert.equal(1, st)
    assert.same({ code = 'EBADF', field = '--exit-on-eof', message = '--exit-on-eof: stdin: fd 0 '
      .. 'is not open: nothing to wait for the end of' }, error_of(H.read(H.tmp('ebadf'))))
  end)

  it('SIGTERM still stops it with 143 while it watches stdin', function()
    local defer = H.cleanups(finally)
    local fifo, out, rc = H.tmp('stdin'), H.tmp('srv.out'), H.tmp('srv.rc')
    H.must('mkfifo ' .. H.q(fifo))
    local sh = H.spawn(string.format('env -u QOSLAB_BUILD lua5.4 bin/qoslab server -p 0 --announce '
      .. '--exit-on-eof <%s; echo $? >%s', H.q(fifo), H.q(rc)), out, H.tmp('srv.err'))
    defer(function() H.kill(sh) end)
    local w = assert(io.open(fifo, 'w'))
    defer(function() pcall(w.close, w) end)
    local line
    local t_end = H.now() + 5
    while H.now() < t_end do
      line = (H.read(out) or ''):match('^([^\n]*)\n')
      if line then break end
      H.sleep(0.02)
    end
    assert.truthy(line, 'no announce line')
    local ev = cjson.decode(line)
    ev.pid = math.tointeger(ev.pid)
    defer(function() H.kill(ev.pid) end)
    -- watching stdin is a blocking wait, not a busy loop: well under 10 %
    -- of a CPU over 0.5 s (ticks of 10 ms)
    local function cpu_ticks()
      local st = H.read('/proc/' .. ev.pid .. '/stat'):match('%) (.*)$')
      local f = {}
      for tok in st:gmatch('%S+') do f[#f + 1] = tok end
      return tonumber(f[12]) + tonumber(f[13])
    end
    local c0 = cpu_ticks()
    H.sleep(0.5)
    assert.is_true(cpu_ticks() - c0 <= 5)
    os.execute('kill -TERM ' .. ev.pid)
    assert.is_true(H.wait_exit(ev.pid, 2))
    assert.equal('143', status_of(rc))
  end)
end)

-- A namespace of the spec's own (its lo), removed also when a test fails.
local ns_seq = 0
local function own_netns(defer)
  ns_seq = ns_seq + 1
  local ns = string.format('qlfar-%d-%d', H.pid, ns_seq)
  H.must('ip netns add ' .. ns)
  defer(function() os.execute('ip netns del ' .. ns .. ' 2>/dev/null') end)
  H.must('ip -n ' .. ns .. ' link set lo up')
  return ns
end

describe('qoslab far end: netem with JSON in and out', function()
  after_each(function() H.cleanup_tmp() end)

  it('set --spec-json on a kernel without sch_netem: the ENOTSUP line, status 1, stdout empty',
    function()
      if H.netem_available() then
        pending('this kernel has sch_netem: the ENOTSUP path is not reachable')
        return
      end
      local defer = H.cleanups(finally)
      local ns = own_netns(defer)
      local out, err, status = qoslab('netem set lo --netns ' .. ns
        .. [[ --spec-json '{"delay_ms": 20, "loss_pct": 1}' --json]])
      assert.equal(1, status)
      assert.equal('', out)
      local e = error_of(err)
      assert.equal('ENOTSUP', e.code)
      assert.equal(cjson.null, e.field)
      assert.equal('qoslab netem set lo: kernel has no sch_netem: ', e.message:sub(1, 46))
      -- the human line says the same with the code, and how to check the spec
      assert.truthy(err:find(e.message .. ' (ENOTSUP)\n', 1, true))
      assert.truthy(err:find('(qoslab netem check limit 1000 delay 20ms loss 1% shows', 1, true))
      -- nothing was left there
      assert.equal('', H.must('tc -n ' .. ns .. ' qdisc show dev lo | grep -v noqueue || true'))
    end)

  it('show, stats and clear --json: one document each', function()
    local defer = H.cleanups(finally)
    local ns = own_netns(defer)
    local out, err, status = qoslab('netem show lo --json --netns ' .. ns)
    assert.equal(0, status, err)
    assert.equal('null\n', out)
    out, err, status = qoslab('netem stats lo --json --netns ' .. ns)
    assert.equal(0, status, err)
    assert.equal('null\n', out)
    out, err, status = qoslab('netem clear lo --json --netns ' .. ns)
    assert.equal(0, status, err)
    assert.same({ ok = true, dev = 'lo', removed = false }, cjson.decode(out))
  end)

  it('a bad spec: status 2 and the field', function()
    local defer = H.cleanups(finally)
    local ns = own_netns(defer)
    local out, err, status = qoslab('netem set lo --netns ' .. ns
      .. [[ --spec-json '{"delay_ms": -1}' --json]])
    assert.equal(2, status)
    assert.equal('', out)
    assert.same({ code = 'EINVAL', field = 'spec.delay_ms',
      message = 'qoslab.netem.apply: spec.delay_ms: expected a finite number in [0, 1000000000], '
        .. 'got -1' }, error_of(err))
  end)
end)

describe('qoslab far end: info and clock', function()
  after_each(function() H.cleanup_tmp() end)
  local now_ns = require('qoslab.timer').now_ns

  it('info --json: the meta record with this host\'s clocks', function()
    local defer = H.cleanups(finally)
    local ns = own_netns(defer)
    local t0 = now_ns()
    local rt0 = os.time()
    local out, err, status = qoslab('info --json --netns ' .. ns .. ' --ifname lo')
    local t1 = now_ns()
    assert.equal(0, status, err)
    assert.equal('', err)
    -- integers as written (dkjson; cjson would round realtime_ns)
    local rec = require('dkjson').decode(out)
    assert.equal(H.must('uname -r'):match('%S+'), rec.kernel.release)
    assert.equal(require('qoslab.core')._VERSION, rec.qoslab_version)
    assert.equal('integer', math.type(rec.mono_ns))
    assert.is_true(rec.mono_ns >= t0 and rec.mono_ns <= t1)
    assert.equal('integer', math.type(rec.realtime_ns))
    assert.is_true(rec.realtime_ns >= (rt0 - 1) * 1000000000 and rec.realtime_ns <= (os.time() + 1) * 1000000000)
    assert.equal(ns, rec.netns)
    assert.equal('lo', rec.interfaces[1].ifname)
    assert.equal(65536, rec.interfaces[1].mtu_bytes)
    assert.equal('noqueue', rec.interfaces[1].qdiscs[1].kind)
    assert.equal('string', type(rec.sysctls['net.ipv4.tcp_congestion_control']))
  end)

  it('clock --echo: each line back with CLOCK_MONOTONIC, flushed per line, exit 0 at the end', function()
    local defer = H.cleanups(finally)
    local fifo, out, rc = H.tmp('clk.in'), H.tmp('clk.out'), H.tmp('clk.rc')
    H.must('mkfifo ' .. H.q(fifo))
    local t0 = now_ns()
    local sh = H.spawn(string.format('env -u QOSLAB_BUILD lua5.4 bin/qoslab clock --echo <%s; '
      .. 'echo $? >%s', H.q(fifo), H.q(rc)), out, H.tmp('clk.err'))
    defer(function() H.kill(sh) end)
    local w = assert(io.open(fifo, 'w'))
    defer(function() pcall(w.close, w) end)
    local got
    for i = 1, 3 do
      local sent = now_ns()
      w:write('probe ', i, '\n')
      w:flush()
      -- the answer comes while stdin is still open: flushed per line
      local t_end = H.now() + 5
      repeat
        got = {}
        for l in (H.read(out) or ''):gmatch('[^\n]+') do got[#got + 1] = l end
        if #got >= i then break end
        H.sleep(0.005)
      until H.now() > t_end
      assert.equal(i, #got)
      local n = got[i]:match('^probe ' .. i .. ' (%d+)$')
      assert.truthy(n, got[i])
      n = math.tointeger(tonumber(n))
      assert.is_true(n >= sent and n <= now_ns())
      if i > 1 then
        assert.is_true(n > math.tointeger(tonumber(got[i - 1]:match('(%d+)$'))))
      end
    end
    w:close()
    assert.equal('0', status_of(rc))
    assert.is_true(t0 > 0)
  end)

  it('clock --echo ends on SIGTERM while it waits for a line: 143', function()
    local defer = H.cleanups(finally)
    local fifo, rc = H.tmp('clk.in'), H.tmp('clk.rc')
    H.must('mkfifo ' .. H.q(fifo))
    local sh = H.spawn(string.format('env -u QOSLAB_BUILD lua5.4 bin/qoslab clock --echo '
      .. '<%s & echo $! >%s.pid; wait $!; echo $? >%s', H.q(fifo), H.q(rc), H.q(rc)),
      H.tmp('clk.out'), H.tmp('clk.err'))
    defer(function() H.kill(sh) end)
    local w = assert(io.open(fifo, 'w'))
    defer(function() pcall(w.close, w) end)
    local pid
    local t_end = H.now() + 5
    repeat
      pid = math.tointeger(tonumber((H.read(rc .. '.pid') or ''):match('%d+')))
      if not pid then H.sleep(0.02) end
    until pid or H.now() > t_end
    assert.truthy(pid)
    defer(function() H.kill(pid) end)
    H.sleep(0.3)
    os.execute('kill -TERM ' .. pid)
    assert.equal('143', status_of(rc))
    assert.equal('qoslab clock: interrupted by SIGTERM\n', H.read(H.tmp('clk.err')))
  end)

  it('clock --echo over a whole input: as many lines, non-decreasing', function()
    local out, err, status = qoslab('clock --echo', 'a\n\nb c\n')
    assert.equal(0, status, err)
    local prev = 0
    local lines = {}
    for l in out:gmatch('([^\n]*)\n') do lines[#lines + 1] = l end
    assert.equal(3, #lines)
    for i, want in ipairs { 'a', '', 'b c' } do
      local text, n = lines[i]:match('^(.-) ?(%d+)$')
      assert.equal(want, text)
      n = math.tointeger(tonumber(n))
      assert.is_true(n >= prev)
      prev = n
    end
  end)
end)

describe('qoslab far end: client --start-at --result-json', function()
  after_each(function() H.cleanup_tmp() end)
  local timer = require 'qoslab.timer'

  -- a qoslab server on loopback for `n` tests, its port from --announce
  local function server(defer, n)
    local out = H.tmp('srv.out')
    local sh = H.spawn('env -u QOSLAB_BUILD lua5.4 bin/qoslab server -p 0 --announce'
      .. (n == 1 and ' -1' or ''), out, H.tmp('srv.err'))
    defer(function() H.kill(sh) end)
    local t_end = H.now() + 5
    repeat
      local line = (H.read(out) or ''):match('^([^\n]*)\n')
      if line then
        local ev = cjson.decode(line)
        local pid = math.tointeger(ev.pid)
        defer(function() H.kill(pid) end)
        return math.tointeger(ev.port)
      end
      H.sleep(0.02)
    until H.now() > t_end
    error('no announce line from the server')
  end

  -- stdout must be one JSON document and nothing else
  local function result_of(out)
    assert.truthy(out:match('^{.*}\n$'), out)
    local res, _, err = require('dkjson').decode(out)
    assert.truthy(res, err)
    return res
  end

  it('starts no earlier than the target 300 ms ahead; the result says when', function()
    local defer = H.cleanups(finally)
    local port = server(defer, 2)
    local t0, rt0 = timer.now_ns(), timer.realtime_ns()
    local at = t0 + 300000000
    local out, err, status = qoslab(string.format('client 127.0.0.1 -p %d -t 0.3 --start-at %d '
      .. '--result-json', port, at))
    local t1 = timer.now_ns()
    assert.equal(0, status, err)
    local res = result_of(out)
    assert.equal(at, res.options.start_at_mono_ns)
    assert.equal('integer', math.type(res.started_mono_ns))
    assert.is_true(res.started_mono_ns >= at)
    assert.equal(res.started_mono_ns - at, res.start_late_ns)
    -- woken by the precise sleep: late by well under 50 ms on a busy 2-CPU host
    assert.is_true(res.start_late_ns < 50000000, tostring(res.start_late_ns))
    -- the test's own clock zero (CLOCK_REALTIME, after connecting) is after the target too
    assert.is_true(res.start_time_unix_s >= (rt0 + 300000000) / 1e9 - 0.001)
    -- and the whole run: at least the wait and the 0.3 s test
    assert.is_true(t1 - t0 >= 600000000)
    assert.is_true(res.sent.bytes > 0)
    assert.equal(res.sent.bytes, res.received.bytes)

    -- 0.5 s late: starts at once, the lateness recorded
    local late_at = timer.now_ns() - 500000000
    out, err, status = qoslab(string.format('client 127.0.0.1 -p %d -t 0.3 --start-at %d '
      .. '--result-json', port, late_at))
    assert.equal(0, status, err)
    res = result_of(out)
    assert.is_true(res.start_late_ns >= 500000000 and res.start_late_ns < 1000000000)
  end)

  it('more than 1 s in the past: an error naming --start-at, status 2, nothing on stdout', function()
    local at = timer.now_ns() - 2000000000
    local out, err, status = qoslab(string.format('client 127.0.0.1 -p 9 --start-at %d '
      .. '--result-json', at))
    assert.equal(2, status)
    assert.equal('', out)
    local e = error_of(err)
    assert.equal('EINVAL', e.code)
    assert.equal('opts.start_at_mono_ns', e.field)
    assert.matches('^%-%-start%-at %(start_at_mono_ns%): expected a time at most 1 s in the past '
      .. '%(CLOCK_MONOTONIC now %d+ ns%), got ' .. at .. ' %(2%.%d%d%d s ago%)$', e.message)
  end)

  it('a failure with --result-json: on stderr with its code, stdout empty', function()
    local port = H.port()
    local out, err, status = qoslab('client 127.0.0.1 -t 1 --result-json -p ' .. port)
    assert.equal(1, status)
    assert.equal('', out)
    assert.equal('ECONNREFUSED', error_of(err).code)
  end)
end)

describe('qoslab far end: shape with JSON in and out', function()
  after_each(function() H.cleanup_tmp() end)

  it('set, show, stats and clear in a namespace, as tc sees it', function()
    local defer = H.cleanups(finally)
    local ns = own_netns(defer)
    H.must(string.format('ip -n %s link add s0 type veth peer name s1 && ip -n %s link set s0 up',
      ns, ns))
    local n = ' --netns ' .. ns
    local out, err, status = qoslab('shape set s0 --json' .. n
      .. [[ --spec-json '{"kind": "tbf", "rate_bps": 10000000, "burst_bytes": 15000}']])
    assert.equal(0, status, err)
    local r = cjson.decode(out)
    assert.same({ ok = true, dev = 's0', kind = 'tbf', handle = '1:', netem_parent = '1:1',
      spec = { kind = 'tbf', rate_bps = 10000000, burst_bytes = 15000, limit_bytes = 40000 } }, r)
    -- a set is meant to stay (as tc's): nothing recorded for qoslab cleanup
    assert.same({}, require('qoslab.fs').list(H.tmp('state')) or {})
    -- tc: a tbf at the root with that rate and bucket
    local tc = H.must('tc -n ' .. ns .. ' qdisc show dev s0')
    assert.truthy(tc:find('qdisc tbf 1: root', 1, true), tc)
    assert.truthy(tc:find('rate 10Mbit burst 15000b', 1, true), tc)
    out, err, status = qoslab('shape show s0 --json' .. n)
    assert.equal(0, status, err)
    assert.same(r.spec, cjson.decode(out))
    out, err, status = qoslab('shape stats s0 --json' .. n)
    assert.equal(0, status, err)
    local st = cjson.decode(out)
    assert.equal('tbf', st[1].kind)
    assert.equal('root', st[1].parent)
    -- htb replaces it
    out, err, status = qoslab('shape set s0 --json' .. n
      .. [[ --spec-json '{"kind": "htb", "rate_bps": 2e7}']])
    assert.equal(0, status, err)
    assert.equal('1:10', cjson.decode(out).netem_parent)
    tc = H.must('tc -n ' .. ns .. ' class show dev s0')
    assert.truthy(tc:find('class htb 1:10', 1, true) and tc:find('rate 20Mbit', 1, true), tc)
    out, err, status = qoslab('shape clear s0 --json' .. n)
    assert.equal(0, status, err)
    assert.same({ ok = true, dev = 's0' }, cjson.decode(out))
    tc = H.must('tc -n ' .. ns .. ' qdisc show dev s0')
    assert.is_nil(tc:find('htb', 1, true), tc)
    assert.is_nil(tc:find('tbf', 1, true), tc)
    out, err, status = qoslab('shape show s0 --json' .. n)
    assert.equal(0, status, err)
    assert.equal('null\n', out)
  end)

  it('bad input: status 2 with the field; no device: status 1, ENODEV', function()
    local defer = H.cleanups(finally)
    local ns = own_netns(defer)
    local n = ' --netns ' .. ns
    local _, err, status = qoslab('shape set lo' .. n
      .. [[ --spec-json '{"kind": "tbf", "rate_bps": -1}']])
    assert.equal(2, status)
    assert.same({ code = 'EINVAL', field = 'spec.rate_bps', message = 'qoslab.shape.apply: '
      .. 'spec.rate_bps: expected an integer in [8, 8000000000000000], got -1' }, error_of(err))
    _, err, status = qoslab('shape set lo --parent 1:1' .. n .. [[ --spec-json '{}']])
    assert.equal(2, status)
    assert.equal('--parent', error_of(err).field)
    _, err, status = qoslab('shape set lo' .. n)
    assert.equal(2, status)
    assert.equal('EINVAL', error_of(err).code)
    _, err, status = qoslab('shape show nodev --json' .. n)
    assert.equal(1, status)
    assert.same({ code = 'ENODEV', field = cjson.null, message = 'qoslab shape show nodev: no such '
      .. 'network device "nodev" in namespace ' .. ns }, error_of(err))
    -- nothing was set on lo
    assert.is_nil(H.must('tc -n ' .. ns .. ' qdisc show dev lo'):find('tbf', 1, true))
  end)
end)
