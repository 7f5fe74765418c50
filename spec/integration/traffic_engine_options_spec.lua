-- The engine's options beyond iperf3 3.12, end to end on loopback: each one
-- is checked to take effect where the kernel can be watched doing it, not
-- only to be accepted. skip_rx_copy: the receiving end's recvfrom calls
-- carry MSG_TRUNC (seen with strace), at the server (forward) and at the
-- client (reverse), and the byte counts stay exact.
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

describe('traffic engine options', function()
  local pids = {}
  after_each(function()
    for _, p in ipairs(pids) do H.kill(p) end
    pids = {}
  end)
  teardown(function() H.cleanup_tmp() end)

  -- A one-off qoslab server, under strace (recvfrom calls to trace_file)
  -- when trace_file is given.
  local function server(trace_file)
    local port = H.port()
    local out = H.tmp('server-' .. port)
    local pre = trace_file and ('strace -f -qq -e trace=recvfrom -o ' .. H.q(trace_file) .. ' ')
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
end)
