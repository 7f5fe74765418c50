-- bin/qoslab server and bin/qoslab client end to end on loopback: interval
-- lines while the test runs, summary lines at the end, -J output in iperf3's
-- schema, the server's per-test lines and its exit after -1.
local core = require 'qoslab.core'
local cjson = require 'cjson'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('qoslab server / client commands', function()
    pending('core.traffic_client is not in this build (engine binding not merged yet)')
  end)
  return
end

local function lines(s)
  local t = {}
  for l in s:gmatch('[^\n]+') do t[#t + 1] = l end
  return t
end

local function count(ls, pat)
  local n = 0
  for _, l in ipairs(ls) do if l:find(pat) then n = n + 1 end end
  return n
end

-- The live part of a client's output (before the summary's rule), as
-- { [span] = { sender = n, receiver = n } } for the lines of one stream id.
local function live_spans(ls, id)
  local spans, order = {}, {}
  for _, l in ipairs(ls) do
    if l:find('^%- %- %-') then break end
    local span, role = l:match('^' .. id .. ' %a+ +([%d%.]+%-[%d%.]+) +s .*  (%a+)$')
    if span then
      if not spans[span] then spans[span] = {}; order[#order + 1] = span end
      spans[span][role] = (spans[span][role] or 0) + 1
    end
  end
  return spans, order
end

describe('qoslab server / client commands', function()
  local pids = {}
  after_each(function()
    for _, p in ipairs(pids) do H.kill(p) end
    pids = {}
  end)
  teardown(function() H.cleanup_tmp() end)

  local function server(args)
    local port = H.port()
    local out = H.tmp('server-' .. port)
    local pid = H.spawn(string.format('exec lua5.4 bin/qoslab server -p %d %s', port, args or ''),
      out, out .. '.err')
    pids[#pids + 1] = pid
    assert(H.wait_listen(port, nil, 5), 'qoslab server did not listen: '
      .. (H.read(out .. '.err') or ''))
    return port, pid, out
  end

  it('client -t 2 prints interval and summary lines; server -1 prints the test and exits 0',
    function()
      local port, spid, sout = server('-1')
      local ok, out = H.sh(string.format('timeout 20 lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 2 -b 200M', port))
      assert(ok, out)
      local L = lines(out)
      assert.equal(1, count(L, '^Connecting to host 127.0.0.1, port ' .. port))
      -- 2 s at 1 s intervals: at least 2 interval lines of the sender
      assert.is_true(count(L, '^%[  1%] fwd +%d+%.%d+%-%d+%.%d+ +s .*sender') >= 2)
      assert.equal(1, count(L, '^%[  1%] fwd sender +client'))
      assert.equal(1, count(L, '^%[  1%] fwd receiver server'))
      -- both ends live, per interval: the server's receiver line has the
      -- span of the client's sender line (same grid slot), none missing,
      -- so no server lines are left for after the test
      local spans, order = live_spans(L, '%[  1%]')
      assert.is_true(#order >= 2)
      for _, span in ipairs(order) do
        assert.same({ sender = 1, receiver = 1 }, spans[span], 'interval ' .. span)
      end
      assert.equal(0, count(L, 'server entries missing'))
      assert.equal(0, count(L, '^server side %(sent with the results%)'))
      assert.equal(1, count(L, '^cpu client: '))
      assert.equal(1, count(L, '^qoslab Done%.'))
      assert(H.wait_exit(spid, 5), 'server -1 did not exit after the test')
      local s = H.read(sout)
      assert.matches('Server listening on ' .. port, s, 1, true)
      assert.matches('test 1 from 127.0.0.1', s, 1, true)
      -- the start line names the peer and what it asked for
      assert.matches('test %d+ from 127%.0%.0%.1 port %d+: TCP, 1 stream, forward, 2 s, 200 Mbit/s '
        .. 'each, 131072%-byte writes, qoslab client %(1 running%)', s)
      assert.matches('%[  1%] fwd receiver server', s)
    end)

  it('client --probe --plot FILE.png writes the time series and FILE-cdf.png', function()
    local port, spid = server('-1')
    local dir = H.tmp('plot-' .. port)
    local ok, out = H.sh(string.format('mkdir -p %s && timeout 30 lua5.4 bin/qoslab client 127.0.0.1 -p %d '
      .. '-t 2 -i 0.5 -b 200M --probe 10 --plot %s/run.png', dir, port, dir))
    assert(ok, out)
    assert.equal(1, count(lines(out), '^plot: ' .. dir:gsub('%p', '%%%0') .. '/run%.png, '
      .. dir:gsub('%p', '%%%0') .. '/run%-cdf%.png$'))
    for _, f in ipairs { '/run.png', '/run-cdf.png' } do
      local png = assert(H.read(dir .. f), 'missing ' .. f)
      assert.equal('\137PNG\r\n\26\n', png:sub(1, 8))
      assert.is_true(#png > 10000, f .. ': ' .. #png .. ' bytes')
    end
    -- a TCP test with a probe: throughput, RTT with the probe, and cwnd
    local gp = assert(H.read(dir .. '/run.gp'))
    for _, panel in ipairs { 'throughput', 'rtt', 'cwnd', 'retransmits' } do
      assert.matches('# panel %d: ' .. panel .. '\n', gp)
    end
    assert.matches('probe RTT p50 (udp every 10 ms)', gp, 1, true)
    assert.matches('idle (before and after the load)', assert(H.read(dir .. '/run-cdf.gp')), 1, true)
    assert(H.wait_exit(spid, 5), 'server -1 did not exit after the test')
    -- a FILE that is neither .png nor .svg is refused before any test
    local bad, bout = H.sh(string.format('lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1 --plot %s/run.gif 2>&1',
      port, dir))
    assert.is_false(bad)
    assert.matches("--plot: '" .. dir .. "/run.gif' does not end in .png or .svg", bout, 1, true)
  end)

  -- The server's log used to print only the last problem between two polls
  -- ("5 more problems, the last: ..."), losing the others' peers and reasons.
  it('server logs every problem on a line of its own, with the peer and its port', function()
    local port, _, sout = server()
    H.must(string.format([[python3 -c '
import socket
for _ in range(5):
    c = socket.socket(); c.bind(("127.0.0.2", 0)); c.connect(("127.0.0.1", %d)); c.close()']],
      port))
    local deadline, n, L = H.now() + 5
    repeat
      H.sleep(0.1)
      L = lines(H.read(sout) or '')
      n = count(L, '^control connection rejected from 127%.0%.0%.2 port %d+: ')
    until n >= 5 or H.now() > deadline
    assert.equal(5, n, table.concat(L, '\n'))
    assert.equal(0, count(L, 'more problems'))
    local ports = {}
    for _, l in ipairs(L) do
      local pp = l:match('^control connection rejected from 127%.0%.0%.2 port (%d+)')
      if pp then ports[pp] = true end
    end
    local distinct = 0
    for _ in pairs(ports) do distinct = distinct + 1 end
    assert.equal(5, distinct)
  end)

  it('server -1 -J prints JSON only on stdout (its log goes to stderr)', function()
    local port, spid, sout = server('-1 -J')
    local ok, out = H.sh(string.format(
      'timeout 20 lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1 --rcvbuf 1M', port))
    assert(ok, out)
    -- a receive buffer alone once crashed the summary, and with it the server
    assert.matches('buffers: SO_RCVBUF requested 1048576 B', out, 1, true)
    assert(H.wait_exit(spid, 5), 'server -1 -J did not exit after the test')
    local j = cjson.decode(H.read(sout))
    assert.equal('TCP', j.start.test_start.protocol)
    assert.is_number(j['end'].sum_received.bytes)
    assert.matches('Server listening on ' .. port, H.read(sout .. '.err'), 1, true)
    assert.matches('test %d+ from 127%.0%.0%.1 port %d+: TCP, 1 stream, forward, 1 s, '
      .. '131072%-byte writes, SO_RCVBUF 1048576 B, qoslab client',
      H.read(sout .. '.err'))
  end)

  it('client -u -J prints iperf3-schema JSON only', function()
    local port = server()
    local ok, out = H.sh(string.format(
      'timeout 20 lua5.4 bin/qoslab client 127.0.0.1 -p %d -u -b 5M -l 1000 -t 1 -J', port))
    assert(ok, out)
    local j = cjson.decode(out)
    assert.equal('UDP', j.start.test_start.protocol)
    assert.equal(1000, j.start.test_start.blksize)
    assert.equal(5000000, j.start.test_start.target_bitrate)
    assert.is_table(j.intervals[1].sum)
    local e = j['end']
    assert.equal(e.sum_sent.packets, e.sum_received.packets)
    assert.is_number(e.streams[1].udp.jitter_ms)
    assert.is_number(e.cpu_utilization_percent.host_total)
  end)

  it('client -P 2 -R --sndbuf/--rcvbuf prints SUM lines and buffer lines', function()
    local port = server()
    local ok, out = H.sh(string.format('timeout 20 lua5.4 bin/qoslab client 127.0.0.1 -p %d '
      .. '-P 2 -R -t 1 -i 0.5 -b 100M --sndbuf 128K --rcvbuf 256K', port))
    assert(ok, out)
    local L = lines(out)
    assert.is_true(count(L, '^%[SUM%] rev .*receiver') >= 2)
    -- live SUM lines of both ends, one each per interval
    local spans, order = live_spans(L, '%[SUM%]')
    assert.is_true(#order >= 2)
    for _, span in ipairs(order) do
      assert.same({ sender = 1, receiver = 1 }, spans[span], 'interval ' .. span)
    end
    assert.equal(1, count(L, '^%[SUM%] rev sender +server'))
    assert.equal(1, count(L, '^%[SUM%] rev receiver client'))
    assert.is_true(count(L, 'SO_SNDBUF requested 131072 B') >= 1)
    assert.is_true(count(L, 'SO_RCVBUF requested 262144 B') >= 1)
  end)

  it('against iperf3 -s the live lines are the client\'s only, as before', function()
    if not H.sh('iperf3 --version') then
      pending('iperf3 is not installed')
      return
    end
    local port = H.port()
    local pid = H.spawn(string.format('exec iperf3 -s -1 -p %d', port), '/dev/null', '/dev/null')
    pids[#pids + 1] = pid
    assert(H.wait_listen(port, nil, 5), 'iperf3 -s did not listen')
    local ok, out = H.sh(string.format(
      'timeout 20 lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1 -i 0.5 -b 100M', port))
    assert(ok, out)
    local L = lines(out)
    local spans, order = live_spans(L, '%[  1%]')
    assert.is_true(#order >= 2)
    for _, span in ipairs(order) do
      assert.same({ sender = 1 }, spans[span], 'interval ' .. span)
    end
    assert.equal(1, count(L, '^%[  1%] fwd receiver server'))
  end)

  it('a refused connection exits 1 with the code', function()
    local port = H.port()
    local ok, out, status = H.sh(string.format('lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1',
      port))
    assert.is_false(ok)
    assert.equal(1, status)
    assert.matches('ECONNREFUSED', out)
  end)
  -- The probe's advice named the Lua option ("use probe proto = ...") on
  -- the command line: there it is the flag.
  -- (A TCP listener with the UDP port closed, as a stock iperf3 server has
  -- it; where nothing listens at all the probe says so, ECONNREFUSED.)
  it('--probe with no qoslab responder advises --probe-proto icmp', function()
    if not H.sh('python3 -c "import socket"') then return pending('needs python3') end
    local port = H.port()
    local pid = H.spawn(string.format('exec python3 -c "import socket, time; s = socket.socket(); '
      .. "s.bind(('127.0.0.1', %d)); s.listen(8); time.sleep(8)\"", port))
    local ok, err = pcall(function()
      assert(H.wait_listen(port, nil, 5), 'the TCP listener did not listen')
      local _, out, status = H.sh(string.format('lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1 '
        .. '--probe', port))
      assert.equal(1, status)
      assert.matches(': use --probe-proto icmp (EPROTONOSUPPORT)\n', out, 1, true)
    end)
    H.kill(pid)
    assert(ok, err)
    local _, out, status = H.sh(string.format('lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1 '
      .. '--probe', H.port()))
    assert.equal(1, status)
    assert.matches('nothing listens there .* %(ECONNREFUSED%)\n$', out)
  end)

  -- -J on a failure printed only {"error": ...}; iperf3 keeps start,
  -- intervals and end beside the error (scripts read .start / .end
  -- unchecked), with what was measured before the failure.
  it('-J of a refused connection has start, intervals, end and error, exit 1', function()
    local _, out, status = H.sh(string.format('lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 1 -J',
      H.port()))
    assert.equal(1, status)
    local j = cjson.decode(out)
    assert.matches('ECONNREFUSED', j.error)
    assert.same({}, j.start.connected)
    assert.matches('^qoslab ', j.start.version)
    assert.same({}, j.intervals)
    assert.same({}, j['end'])
    assert.matches('^{%s*"start"', out)
  end)

  it('-J of a test whose server dies keeps the start and the intervals measured', function()
    local port, spid = server()
    local cmd = string.format('(sleep 1.6; kill -9 %d) & lua5.4 bin/qoslab client 127.0.0.1 '
      .. '-p %d -t 4 -J', spid, port)
    local _, out, status = H.sh(cmd)
    assert.equal(1, status)
    local j = cjson.decode(out)
    assert.is_string(j.error)
    assert.equal(port, j.start.connected[1].remote_port)
    assert.equal(36, #j.start.cookie)
    assert.is_true(#j.intervals >= 1, #j.intervals .. ' intervals')
    assert.is_true(j.intervals[1].sum.bytes > 0)
    assert.is_table(j['end'])
  end)

  -- A plain lua5.4 (REPL or script, no bin/qoslab): lua.c answers SIGINT
  -- with a hook that raises "interrupted!" at the next Lua instruction; a
  -- 30 s test once ran to its end first (and timer.sleep too).
  it('plain lua5.4: SIGINT stops a running test and a sleep at once', function()
    local port = H.port()
    local script = H.tmp('plain-int-' .. port .. '.lua')
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path
package.cpath = './%s/?.so;' .. package.cpath
local traffic, timer = require 'qoslab.traffic', require 'qoslab.timer'
local srv = assert(traffic.server { port = %d })
local t0 = timer.now()
local ok, err = pcall(traffic.run, { host = '127.0.0.1', port = %d, duration_s = 30,
  bitrate_bps = 1e8 })
io.write(string.format('run %%.2f %%s %%s\n', timer.now() - t0, tostring(ok), tostring(err)))
io.write('running after: ', srv:tests_running(), '\n')
io.flush()
]], os.getenv('QOSLAB_BUILD') or 'build', port, port))
    f:close()
    local ok, log = H.sh(string.format('lua5.4 %s & p=$!; sleep 1.5; kill -INT $p; wait $p; echo rc=$?',
      H.q(script)))
    assert.is_true(ok, log)
    local secs, pok, err = log:match('run ([%d.]+) (%a+) ([^\n]*)')
    assert(secs, log)
    assert.equal('false', pok)
    assert.matches('interrupted', err)
    assert(tonumber(secs) < 4, 'the test ran ' .. secs .. ' s after SIGINT at 1.5 s')
    assert.matches('running after: 0', log, 1, true)
    assert.matches('rc=0', log, 1, true)
    -- timer.sleep
    f = assert(io.open(script, 'w'))
    f:write(string.format([[
package.cpath = './%s/?.so;' .. package.cpath
package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path
local timer = require 'qoslab.timer'
local t0 = timer.now()
local ok = pcall(timer.sleep, 30)
io.write(string.format('slept %%.2f %%s\n', timer.now() - t0, tostring(ok)))
]], os.getenv('QOSLAB_BUILD') or 'build'))
    f:close()
    log = select(2, H.sh(string.format('lua5.4 %s & p=$!; sleep 1; kill -INT $p; wait $p', H.q(script))))
    local slept = tonumber(log:match('slept ([%d.]+) false'))
    assert(slept and slept < 2, log)
  end)

  -- 128 + the signal number, as the README says: 130 for SIGINT, 143 for SIGTERM.
  for _, sig in ipairs { { 'INT', 130 }, { 'TERM', 143 } } do
    it('server and client exit ' .. sig[2] .. ' on SIG' .. sig[1], function()
      local port = H.port()
      local out = H.tmp('sig-' .. port)
      local ok, log = H.sh(string.format(
        'lua5.4 bin/qoslab server -p %d >%s 2>&1 & s=$!; sleep 1; '
          .. 'lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 30 >%s.c 2>&1 & c=$!; sleep 2; '
          .. 'kill -%s $c; wait $c; echo client=$?; kill -%s $s; wait $s; echo server=$?',
        port, H.q(out), port, H.q(out), sig[1], sig[1]))
      assert.is_true(ok, log)
      assert.matches('client=' .. sig[2] .. '\n', log, 1, true)
      assert.matches('server=' .. sig[2] .. '\n', log, 1, true)
      assert.matches('qoslab: interrupted, test stopped early', H.read(out .. '.c') or '', 1, true)
    end)
  end
end)
