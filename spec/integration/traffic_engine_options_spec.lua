-- The engine's options beyond iperf3 3.12, end to end on loopback: each one
-- is checked to take effect where the kernel can be watched doing it, not
-- only to be accepted. skip_rx_copy: the receiving end's recvfrom calls
-- carry MSG_TRUNC (seen with strace), at the server (forward) and at the
-- client (reverse), and the byte counts stay exact. cpu_affinity and
-- server_cpu_affinity (-A n,m): the stream threads of each end (named
-- "qoslab-stream") run with exactly the CPU asked, stream k on entry k % n.
-- zerocopy: the client's stream reports every MSG_ZEROCOPY send completed
-- (and, on loopback, copied by the kernel after all); a server that sends
-- (-R) writes with MSG_ZEROCOPY too (seen with strace).
local core = require 'qoslab.core'
local cjson = require 'cjson'
local H = require 'integration.traffic_helper'

local have_strace = os.execute('command -v strace >/dev/null 2>&1') == true

if not core.traffic_client then
  describe('traffic engine options', function()
    pending('core.traffic_client is not in this build')
  end)
  return
end

local QOSLAB = 'env -u QOSLAB_BUILD lua5.4 bin/qoslab'
local traffic = require 'qoslab.traffic'

-- The CPUs this process may run on, from /proc (Cpus_allowed_list).
local function allowed_cpus()
  local s = H.read('/proc/self/status') or ''
  local list, cpus = s:match('Cpus_allowed_list:%s*([%d,%-]+)'), {}
  for part in (list or ''):gmatch('[^,]+') do
    local a, b = part:match('^(%d+)%-(%d+)$')
    if a then for c = tonumber(a), tonumber(b) do cpus[#cpus + 1] = c end
    else cpus[#cpus + 1] = tonumber(part) end
  end
  return cpus
end

-- The Cpus_allowed_list of every stream thread of process pid, in thread
-- id order.
local function stream_cpus(pid)
  local out = {}
  local ok, ls = H.sh('ls /proc/' .. pid .. '/task')
  if not ok then return out end
  local tids = {}
  for tid in ls:gmatch('%d+') do tids[#tids + 1] = tonumber(tid) end
  table.sort(tids)
  for _, tid in ipairs(tids) do
    local dir = '/proc/' .. pid .. '/task/' .. tid
    if (H.read(dir .. '/comm') or ''):match('^qoslab%-stream') then
      out[#out + 1] = (H.read(dir .. '/status') or ''):match('Cpus_allowed_list:%s*(%S+)')
    end
  end
  return out
end

-- Poll until pid has n stream threads (up to 10 s).
local function wait_streams(pid, n)
  local t_end = H.now() + 10
  local got = stream_cpus(pid)
  while #got < n and H.now() < t_end do
    H.sleep(0.05)
    got = stream_cpus(pid)
  end
  return got
end

describe('traffic engine options', function()
  local pids = {}
  after_each(function()
    for _, p in ipairs(pids) do H.kill(p) end
    pids = {}
  end)
  teardown(function() H.cleanup_tmp() end)

  -- A one-off qoslab server, under strace (recvfrom calls to trace_file)
  -- when trace_file is given.
  local function server(trace_file, calls)
    local port = H.port()
    local out = H.tmp('server-' .. port)
    local pre = trace_file and ('strace -f -qq -e trace=' .. (calls or 'recvfrom') .. ' -o '
      .. H.q(trace_file) .. ' ')
      or 'exec '
    local pid = H.spawn(string.format('%s%s server -1 -p %d', pre, QOSLAB, port), out,
      out .. '.err')
    pids[#pids + 1] = pid
    assert(H.wait_listen(port, nil, 10), 'qoslab server did not listen: '
      .. (H.read(out .. '.err') or ''))
    return port, pid
  end

  local function totals(out)
    local j = cjson.decode(out)
    return j['end'].sum_sent.bytes, j['end'].sum_received.bytes
  end

  local function truncated_reads(trace)
    local n = 0
    for l in (H.read(trace) or ''):gmatch('[^\n]+') do
      if l:find('recvfrom(', 1, true) and l:find('MSG_TRUNC', 1, true) then n = n + 1 end
    end
    return n
  end

  it('skip_rx_copy: the server receives with MSG_TRUNC, every byte counted', function()
    if not have_strace then pending('strace is not installed') return end
    local trace = H.tmp('server-trace')
    local port, spid = server(trace)
    local ok, out = H.sh(string.format('timeout 30 %s client 127.0.0.1 -p %d -n 32M '
      .. '--skip-rx-copy -J', QOSLAB, port))
    assert(ok, out)
    local sent, received = totals(out)
    assert.equal(32 * 1048576, sent)
    assert.equal(32 * 1048576, received)
    assert(H.wait_exit(spid, 10), 'server -1 did not exit after the test')
    assert.is_true(truncated_reads(trace) > 0, 'no recvfrom with MSG_TRUNC at the server')
  end)

  it('skip_rx_copy -R: the client receives with MSG_TRUNC; without it, no MSG_TRUNC', function()
    if not have_strace then pending('strace is not installed') return end
    for _, skip in ipairs { true, false } do
      local trace = H.tmp('client-trace-' .. tostring(skip))
      local port = server()
      local ok, out = H.sh(string.format('timeout 30 strace -f -qq -e trace=recvfrom -o %s '
        .. '%s client 127.0.0.1 -p %d -n 32M -R -J%s 2>/dev/null', H.q(trace), QOSLAB, port,
        skip and ' --skip-rx-copy' or ''))
      assert(ok, out)
      local sent, received = totals(out)
      assert.equal(32 * 1048576, sent)
      assert.equal(32 * 1048576, received)
      if skip then
        assert.is_true(truncated_reads(trace) > 0, 'no recvfrom with MSG_TRUNC at the client')
      else
        assert.equal(0, truncated_reads(trace))
      end
    end
  end)

  it('-A n,m: the client\'s stream threads run on n, the server\'s on m', function()
    local cpus = allowed_cpus()
    local c, sv = cpus[#cpus], cpus[1]
    local port, spid = server()
    local out = H.tmp('client-affinity')
    local cpid = H.spawn(string.format('exec %s client 127.0.0.1 -p %d -t 3 -P 2 -b 100M -A %d,%d',
      QOSLAB, port, c, sv), out)
    pids[#pids + 1] = cpid
    assert.same({ tostring(c), tostring(c) }, wait_streams(cpid, 2))
    assert.same({ tostring(sv), tostring(sv) }, wait_streams(spid, 2))
    assert(H.wait_exit(cpid, 15), 'client did not end')
    assert.matches('qoslab Done.', H.read(out), 1, true)
  end)

  it('cpu_affinity as a list: stream k on entry k % n; a CPU not allowed fails with EINVAL',
    function()
      local cpus = allowed_cpus()
      local a, b = cpus[1], cpus[#cpus]
      local port = server()
      local h <close> = assert(traffic.client { host = '127.0.0.1', port = port, parallel = 3,
        duration_s = 2, bitrate_bps = 50e6, cpu_affinity = { a, b } }:start())
      local me = io.open('/proc/self/stat'):read('l'):match('^(%d+)')
      assert.same({ tostring(a), tostring(b), tostring(a) }, wait_streams(me, 3))
      assert(h:wait())
      local res, err, code = traffic.run { host = '127.0.0.1', port = port, duration_s = 1,
        cpu_affinity = 1023 }
      assert.is_nil(res)
      assert.equal('EINVAL', code)
      assert.matches('opts.cpu_affinity: CPU 1023 is not one this process may run on', err, 1,
        true)
    end)

  it('zerocopy: every MSG_ZEROCOPY send completes, copied on loopback; the server -R too',
    function()
      local port = server()
      local res = assert(traffic.run { host = '127.0.0.1', port = port, bytes = 64 * 1048576,
        zerocopy = true })
      assert.equal(64 * 1048576, res.received.bytes)
      local zc = res.streams[1].zerocopy
      assert.is_table(zc)
      -- 64 MiB of 128 KiB writes: at least 512 sends (more when the socket
      -- was full mid-write), each completed, and loopback copies them all
      assert.is_true(zc.sends >= 512, 'sends ' .. zc.sends)
      assert.equal(zc.sends, zc.completed)
      assert.equal(zc.completed, zc.copied)
      -- without the option: no record
      port = server()
      res = assert(traffic.run { host = '127.0.0.1', port = port, bytes = 1048576 })
      assert.is_nil(res.streams[1].zerocopy)
      if not have_strace then return end
      local trace = H.tmp('server-zc-trace')
      local spid
      port, spid = server(trace, 'sendto')
      res = assert(traffic.run { host = '127.0.0.1', port = port, bytes = 16 * 1048576,
        zerocopy = true, reverse = true })
      assert.equal(16 * 1048576, res.received.bytes)
      assert(H.wait_exit(spid, 10), 'server -1 did not exit after the test')
      assert.matches('MSG_ZEROCOPY', H.read(trace) or '', 1, true)
    end)
end)

