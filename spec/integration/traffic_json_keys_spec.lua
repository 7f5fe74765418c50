-- `qoslab client -J` carries every key `iperf3 -c -J` (3.12) writes for the
-- same test, run for real on loopback against the same server (a stock
-- `iperf3 -s`, then a qoslab server) for TCP, TCP -R and UDP: both
-- documents are flattened into sets of key paths (array indices collapsed
-- to []) and every iperf3 path must be among qoslab's. The values that
-- both tools read from the same kernel (granted socket buffers, the path
-- MTU, the congestion control) must agree, and the sockets' addresses be
-- the real ones. Then `--json-stream`: every line parses, one start event,
-- interval events as they happen (the first long before the end), one end
-- event whose sums equal those of `-J` for the same byte-limited test, and
-- an error event then an end event where no server listens.
local cjson = require 'cjson'
local timer = require 'qoslab.timer'
local H = require 'integration.traffic_helper'

local have_iperf3 = H.sh('iperf3 --version')
local describe_if = have_iperf3 and describe or function(name)
  describe(name, function() pending('iperf3 is not installed') end)
end

-- Every leaf's path: "start.connected[].local_host", ...
local function paths(v, prefix, out)
  out = out or {}
  if type(v) ~= 'table' then
    out[prefix] = true
  elseif v[1] ~= nil then
    for _, x in ipairs(v) do paths(x, prefix .. '[]', out) end
  else
    for k, x in pairs(v) do paths(x, prefix == '' and k or (prefix .. '.' .. k), out) end
  end
  return out
end

-- Every number leaf's JSON kind by path: kinds[path][kind] = count, kind
-- 'integer' (written 0), 'float' or 'integral_float' (written 0.0); from a
-- document decoded by dkjson, which keeps 0 an integer and 0.0 a float.
local function kinds(v, prefix, out)
  out = out or {}
  if type(v) == 'number' then
    local kind = math.type(v)
    if kind == 'float' and math.tointeger(v) then kind = 'integral_float' end
    out[prefix] = out[prefix] or {}
    out[prefix][kind] = (out[prefix][kind] or 0) + 1
  elseif type(v) == 'table' then
    local arr = v[1] ~= nil
    for k, x in pairs(v) do
      kinds(x, arr and (prefix .. '[]') or (prefix == '' and k or (prefix .. '.' .. k)), out)
    end
  end
  return out
end

local function decode(text, who)
  local ok, j = pcall(cjson.decode, text)
  assert(ok and type(j) == 'table', who .. ' printed no JSON: ' .. tostring(text):sub(1, 400))
  assert(not j.error, who .. ' failed: ' .. tostring(j.error))
  return j, kinds(require('dkjson').decode(text), '')
end

local function iperf3_c(port, flags)
  local _, out = H.sh(string.format('timeout 20 iperf3 -c 127.0.0.1 -p %d -J %s', port, flags))
  return decode(out, 'iperf3 -c')
end

local function qoslab_c(port, flags)
  local _, out = H.sh(string.format('timeout 20 lua5.4 bin/qoslab client 127.0.0.1 -p %d -J %s',
    port, flags))
  return decode(out, 'qoslab client')
end

local function default_ca()
  local f = io.open('/proc/sys/net/ipv4/tcp_congestion_control')
  local ca = f and f:read('l')
  if f then f:close() end
  return ca
end

describe_if('qoslab client -J has every key of iperf3 -c -J', function()
  local ports, pids = {}, {}

  setup(function()
    ports.iperf3 = H.port()
    pids.iperf3 = H.spawn(string.format('exec iperf3 -s -p %d', ports.iperf3))
    ports.qoslab = H.port()
    pids.qoslab = H.spawn(string.format('exec lua5.4 bin/qoslab server -p %d', ports.qoslab))
    assert(H.wait_listen(ports.iperf3, nil, 5), 'iperf3 -s did not listen')
    assert(H.wait_listen(ports.qoslab, nil, 5), 'qoslab server did not listen')
  end)

  teardown(function()
    for _, p in pairs(pids) do H.kill(p) end
    H.cleanup_tmp()
  end)

  for _, server in ipairs { 'iperf3', 'qoslab' } do
    for _, c in ipairs {
      { '-t 1', 'TCP' },
      { '-t 1 -R', 'TCP -R' },
      { '-u -t 1 -b 10M', 'UDP' },
    } do
      it(c[2] .. ' against ' .. server .. ' -s', function()
        local port = ports[server]
        local ref, ref_kinds = iperf3_c(port, c[1])
        local ours, our_kinds = qoslab_c(port, c[1])
        local have = paths(ours, '')
        local missing = {}
        for p in pairs(paths(ref, '')) do
          if not have[p] then missing[#missing + 1] = p end
        end
        table.sort(missing)
        assert(#missing == 0, c[2] .. ': keys iperf3 -J writes and qoslab -J lacks: '
          .. table.concat(missing, ', '))
        -- number kinds: where iperf3 writes only integers (omit, the first
        -- interval's start, bytes, ...), qoslab writes no integral value
        -- as a float (0.0, 2.0): a typed reader takes those for floats
        local wrong = {}
        for p, k in pairs(ref_kinds) do
          if not k.float and not k.integral_float and our_kinds[p]
            and our_kinds[p].integral_float then
            wrong[#wrong + 1] = p
          end
        end
        table.sort(wrong)
        assert(#wrong == 0, c[2] .. ': iperf3 -J writes integers, qoslab -J floats, at: '
          .. table.concat(wrong, ', '))
        -- true values: what both read from the same kernel agrees
        local s, r = ours.start, ref.start
        assert.equal(r.sndbuf_actual, s.sndbuf_actual)
        assert.equal(r.rcvbuf_actual, s.rcvbuf_actual)
        assert.equal(r.sock_bufsize, s.sock_bufsize)
        assert.truthy(s.cookie:match('^[a-z2-7]+$') and #s.cookie == 36, s.cookie)
        assert.are_not.equal(r.cookie, s.cookie)
        for _, k in ipairs(s.connected) do
          assert.equal('127.0.0.1', k.local_host)
          assert.equal('127.0.0.1', k.remote_host)
          assert.equal(port, k.remote_port)
          assert.is_true(k.local_port > 0 and k.local_port ~= port)
        end
        if c[2] ~= 'UDP' then
          assert.equal(r.tcp_mss_default, s.tcp_mss_default)
          assert.equal(default_ca(), ours['end'].sender_tcp_congestion)
          assert.equal(default_ca(), ours['end'].receiver_tcp_congestion)
        end
        if c[2] == 'TCP' then
          local e = ours.intervals[1].streams[1]
          assert.equal(ref.intervals[1].streams[1].pmtu, e.pmtu)
          assert.is_true(e.snd_wnd > 0)
          assert.is_true(ours['end'].streams[1].sender.max_snd_wnd >= e.snd_wnd)
        end
      end)
    end
  end

  -- The lines of `qoslab client ... --json-stream`, decoded, each with the
  -- time it arrived; and the exit status.
  local function stream(port, flags)
    local p = io.popen(string.format('timeout 30 lua5.4 bin/qoslab client 127.0.0.1 -p %d '
      .. '--json-stream %s 2>&1; echo "exit $?"', port, flags))
    local events, status = {}, nil
    for line in p:lines() do
      local st = line:match('^exit (%d+)$')
      if st then
        status = tonumber(st)
      else
        local ok, ev = pcall(cjson.decode, line)
        assert(ok and type(ev) == 'table', 'not a JSON line: ' .. line)
        ev.at_s = timer.now()
        events[#events + 1] = ev
      end
    end
    p:close()
    return events, status
  end

  local function check_shape(events)
    assert.is_true(#events >= 3, 'expected start, intervals, end: ' .. #events .. ' lines')
    assert.equal('start', events[1].event)
    assert.equal('end', events[#events].event)
    for i = 2, #events - 1 do assert.equal('interval', events[i].event) end
    return #events - 2
  end

  for _, server in ipairs { 'iperf3', 'qoslab' } do
    it('--json-stream against ' .. server .. ' -s: start, intervals, end; sums as -J', function()
      local port = ports[server]
      local events, status = stream(port, '-n 64M -i 0.1')
      assert.equal(0, status)
      local n = check_shape(events)
      local start, e = events[1].data, events[#events].data
      assert.equal(36, #start.cookie)
      assert.equal(port, start.connected[1].remote_port)
      -- the intervals add up to the end's sums
      local sum = 0
      for i = 2, n + 1 do sum = sum + events[i].data.sum.bytes end
      assert.equal(e.sum_sent.bytes, sum)
      -- and the end's sums are those of -J for the same test
      local j = qoslab_c(port, '-n 64M -i 0.1')
      assert.equal(64 * 1048576, e.sum_sent.bytes)
      assert.equal(j['end'].sum_sent.bytes, e.sum_sent.bytes)
      if server == 'qoslab' then
        assert.equal(j['end'].sum_received.bytes, e.sum_received.bytes)
      else
        -- a stock iperf3 server stops reading at TEST_END
        assert.is_true(e.sum_received.bytes <= e.sum_sent.bytes)
      end
      assert.same(paths(j['end'], ''), paths(e, ''))
      assert.same(paths(j.start, ''), paths(start, ''))
    end)
  end

  it('--json-stream is live: each interval event comes when its interval ends', function()
    local events, status = stream(ports.qoslab, '-t 2 -i 0.5 -b 100M')
    assert.equal(0, status)
    local n = check_shape(events)
    assert.is_true(n >= 4, n .. ' interval events')
    -- the first interval (0.5 s) is out at least a second before the end
    assert.is_true(events[#events].at_s - events[2].at_s >= 1.0,
      string.format('first interval at %.2f s, end at %.2f s', events[2].at_s,
        events[#events].at_s))
    assert.is_false(events[2].data.sum.omitted)
    assert.is_true(events[2].data.sum['end'] > 0.4 and events[2].data.sum['end'] < 0.6)
  end)

  it('--json-stream without a server: an error event, then end; exit status 1', function()
    local events, status = stream(H.port(), '-t 1')
    assert.equal(1, status)
    assert.equal(2, #events)
    assert.equal('error', events[1].event)
    assert.truthy(events[1].data:find('ECONNREFUSED', 1, true), events[1].data)
    assert.equal('end', events[2].event)
    assert.same({}, events[2].data)
  end)
end)
