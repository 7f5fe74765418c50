-- qoslab.traffic end to end on loopback, qoslab client against qoslab
-- server in one process: every run goes through the bookkeeping identities
-- (Σ intervals == totals, SUM == Σ streams, lost + unique == sent, no NaN or
-- inf); TCP/UDP forward, reverse, bidir, parallel; byte and datagram limits
-- (the sender emits exactly N, also in reverse); window options requested,
-- granted and clamped, both runs (Linux grants twice the request, capped
-- at rmem_max/wmem_max first); CPU fields of both ends (total, user, system,
-- busiest thread); the handle API (:start, :intervals, :wait, :stop) and
-- the pending-test form.
-- Rates are capped where the test does not need full speed: two shared
-- cores.
local core = require 'qoslab.core'
local qoslab = require 'qoslab'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('qoslab.traffic on loopback', function()
    pending('core.traffic_client is not in this build (engine binding not merged yet)')
  end)
  return
end

local PORT
local srv

local function opts(o)
  o.host = o.host or '127.0.0.1'
  o.port = o.port or PORT
  if not o.bytes and not o.packets then o.duration_s = o.duration_s or 1 end
  o.interval_s = o.interval_s or 0.5
  if o.proto ~= 'udp' and o.bitrate_bps == nil then o.bitrate_bps = 400e6 end
  return o
end

local function run(o, label)
  local res, msg, code = traffic.run(opts(o))
  assert(res, string.format('%s: %s (%s)', label or 'run', tostring(msg), tostring(code)))
  H.identities(res, label)
  return res
end

-- The shape every client result has.
local function shape(res, o)
  local udp = o.proto == 'udp'
  assert.equal(udp and 'udp' or 'tcp', res.proto)
  assert.equal(o.reverse == true, res.reverse)
  assert.equal(o.bidir == true, res.bidir)
  assert.equal(o.parallel or 1, res.parallel)
  assert.equal('qoslab', res.peer)
  assert.equal('client', res.local_role)
  assert.equal(o.port, res.port)
  local dir = o.reverse and 'reverse' or 'forward'
  assert.equal(H.measuring_side(dir, 'sender'), res.sent.side)
  assert.equal(H.measuring_side(dir, 'receiver'), res.received.side)
  assert.equal((o.parallel or 1) * (o.bidir and 2 or 1), #res.streams)
  if o.bidir then
    assert.equal('server', res.reverse_sent.side)
    assert.equal('client', res.reverse_received.side)
  else
    assert.is_nil(res.reverse_sent)
  end
  for _, s in ipairs(res.streams) do
    assert.is_table(s.sender.sndbuf)
    assert.is_table(s.receiver.rcvbuf)
    assert.equal(H.measuring_side(s.direction, 'sender'), s.sender.side)
    assert.equal(H.measuring_side(s.direction, 'receiver'), s.receiver.side)
  end
  assert.is_table(res.warnings)
  assert.is_table(res.cpu.client)
  assert.is_table(res.cpu.server)
  assert.is_boolean(res.cpu_limited)
  assert.is_true(#res.intervals >= 1)
  if o.duration_s then
    assert(math.abs(res.duration_s - o.duration_s) < 0.35,
      'measured duration ' .. res.duration_s .. ' for ' .. o.duration_s)
  end
  if udp then
    for _, x in ipairs { res.received, res.reverse_received } do
      for _, k in ipairs { 'packets', 'unique_packets', 'lost_packets', 'duplicate_packets',
          'out_of_order_packets', 'late_packets' } do
        assert.equal('integer', math.type(x[k]), k)
      end
      assert.is_true(x.jitter_ms >= 0 and x.jitter_ms < 10, 'jitter ' .. x.jitter_ms)
    end
  else
    assert.equal('integer', math.type(res.sent.retransmits))
    assert.is_nil(res.sent.packets)
  end
end

-- TCP_INFO from the sending socket in every interval entry of a sender
-- (present in reverse too: the server's sending socket, shipped by it).
local function tcp_info_everywhere(res)
  local n = 0
  for _, iv in ipairs(res.intervals) do
    for _, e in ipairs(iv.streams) do
      if e.role == 'sender' then
        n = n + 1
        assert(e.rtt_us and e.rtt_us > 0, 'rtt_us missing in a sender interval entry')
        assert(e.snd_cwnd_bytes and e.snd_cwnd_bytes >= 1000,
          'snd_cwnd_bytes missing or in segments: ' .. tostring(e.snd_cwnd_bytes))
        assert.equal('integer', math.type(e.retransmits))
      end
    end
  end
  assert(n > 0, 'no sender interval entries')
end

describe('qoslab.traffic on loopback', function()
  setup(function()
    PORT = H.port()
    local err, code
    srv, err, code = traffic.server { port = PORT, bind_address = '127.0.0.1' }
    assert(srv, tostring(err) .. ' ' .. tostring(code))
    assert.equal(PORT, srv:port())
  end)

  teardown(function()
    if srv then srv:stop() end
    H.cleanup_tmp()
  end)

  describe('TCP', function()
    it('forward: every byte written is received, TCP_INFO per interval', function()
      local o = opts {}
      local res = run(o, 'tcp forward')
      shape(res, o)
      assert.is_true(res.sent.bytes > 0)
      assert.equal(res.sent.bytes, res.received.bytes)
      tcp_info_everywhere(res)
    end)

    it('reverse: the server sends, its TCP_INFO reaches the client', function()
      local o = opts { reverse = true }
      local res = run(o, 'tcp reverse')
      shape(res, o)
      assert.equal(res.sent.bytes, res.received.bytes)
      tcp_info_everywhere(res)
    end)

    it('bidir with 2 streams each way', function()
      local o = opts { bidir = true, parallel = 2, bitrate_bps = 200e6 }
      local res = run(o, 'tcp bidir')
      shape(res, o)
      assert.equal(res.sent.bytes, res.received.bytes)
      assert.equal(res.reverse_sent.bytes, res.reverse_received.bytes)
      assert.is_true(res.reverse_sent.bytes > 0)
    end)

    it('parallel 3: SUM is the sum of the streams, each stream carried data', function()
      local o = opts { parallel = 3, bitrate_bps = 100e6 }
      local res = run(o, 'tcp -P 3')
      shape(res, o)
      for _, s in ipairs(res.streams) do assert.is_true(s.receiver.bytes > 0) end
    end)

    it('bitrate_bps paces TCP (per stream)', function()
      local o = opts { bitrate_bps = 50e6, duration_s = 1.5 }
      local res = run(o, 'tcp paced')
      H.paced(res.sent.bits_per_second, 50e6, 'paced TCP rate')
    end)

    it('bytes limit: the sender emits exactly N and the receiver gets all of it, reverse too', function()
      for _, o in ipairs { { bytes = 1048576 }, { bytes = 1048576, reverse = true },
          { bytes = 1048577, parallel = 2 } } do
        local res = run(opts(o), 'tcp -n')
        assert.equal(o.bytes, res.sent.bytes)
        assert.equal(o.bytes, res.received.bytes)
      end
    end)

    it('omit_s: warm-up intervals are flagged and left out of the totals', function()
      local o = opts { omit_s = 0.5, duration_s = 1 }
      local res = run(o, 'tcp -O')
      local omitted, kept = 0, 0
      for _, iv in ipairs(res.intervals) do
        if iv.omitted then omitted = omitted + 1 else kept = kept + 1 end
      end
      assert.is_true(omitted >= 1 and kept >= 1)
      assert.near(0.5, res.omit_s, 1e-9)
      assert(math.abs(res.duration_s - 1) < 0.35, 'duration after omit ' .. res.duration_s)
    end)
  end)

  describe('UDP', function()
    it('forward at 20 Mbit/s: paced rate, lost + unique == sent, jitter measured', function()
      local o = opts { proto = 'udp', bitrate_bps = 20e6, length_bytes = 1000 }
      local res = run(o, 'udp forward')
      shape(res, o)
      H.paced(res.sent.bits_per_second, 20e6, 'UDP sender rate')
      assert.is_true(res.sent.packets <= 2500 * 1.03 + 1)
      assert.is_true(res.received.lost_pct < 1, 'loss on loopback ' .. res.received.lost_pct)
      assert.equal(res.received.unique_packets * 1000, res.received.bytes)
      for _, iv in ipairs(res.intervals) do
        for _, e in ipairs(iv.streams) do
          if e.role == 'receiver' then assert.is_number(e.jitter_ms) end
        end
      end
    end)

    it('reverse, bidir and parallel', function()
      for _, o in ipairs { { reverse = true }, { bidir = true }, { parallel = 2 } } do
        o.proto, o.bitrate_bps, o.length_bytes = 'udp', 10e6, 1200
        local res = run(opts(o), 'udp ' .. (o.reverse and 'reverse' or o.bidir and 'bidir' or '-P 2'))
        shape(res, o)
        assert.is_true(res.received.unique_packets > 0)
        if o.bidir then assert.is_true(res.reverse_received.unique_packets > 0) end
      end
    end)

    it('packets limit: exactly N datagrams sent in both directions', function()
      for _, rev in ipairs { false, true } do
        local res = run(opts { proto = 'udp', packets = 500, bitrate_bps = 10e6,
          length_bytes = 1000, reverse = rev }, 'udp -k')
        assert.equal(500, res.sent.packets)
        assert.equal(500, res.received.unique_packets + res.received.lost_packets)
      end
    end)

    it('bitrate_bps = 0 sends unpaced', function()
      local res = run(opts { proto = 'udp', bitrate_bps = 0, duration_s = 0.5,
        length_bytes = 1400 }, 'udp unpaced')
      assert.is_true(res.sent.bits_per_second > 100e6, 'unpaced rate ' .. res.sent.bits_per_second)
    end)
  end)

  describe('socket buffers', function()
    local rmax, wmax
    setup(function()
      rmax, wmax = H.sysctl('net.core.rmem_max'), H.sysctl('net.core.wmem_max')
    end)

    local function check_bufs(res, req, clamp_expected)
      for _, s in ipairs(res.streams) do
        local sb, rb = s.sender.sndbuf, s.receiver.rcvbuf
        assert.equal(req, sb.requested_bytes)
        assert.equal(req, rb.requested_bytes)
        assert.equal(2 * math.min(req, wmax), sb.granted_bytes)
        assert.equal(2 * math.min(req, rmax), rb.granted_bytes)
        assert.equal(req > wmax, sb.clamped)
        assert.equal(req > rmax, rb.clamped)
        if sb.clamped then assert.equal('net.core.wmem_max', sb.sysctl) end
        if rb.clamped then assert.equal('net.core.rmem_max', rb.sysctl) end
      end
      local text = table.concat(res.warnings, '\n')
      if clamp_expected then
        assert.matches('clamp', text)
        assert.matches('net.core.rmem_max', text, 1, true)
      else
        assert.is_nil(text:find('clamp'), text)
      end
    end

    it('run 1: a request below the maximum is granted doubled on both ends', function()
      local req = 262144
      assert(req <= rmax and req <= wmax, 'host maxima below 256 KiB')
      for _, rev in ipairs { false, true } do
        local res = run(opts { window_bytes = req, reverse = rev }, 'tcp -w')
        check_bufs(res, req, false)
      end
    end)

    it('run 2: with the host default maximum the request is clamped and a warning says so',
      function()
        local req = math.max(rmax, wmax) * 2
        local res = run(opts { window_bytes = req }, 'tcp -w big')
        check_bufs(res, req, true)
        res = run(opts { window_bytes = req, proto = 'udp', bitrate_bps = 1e6 }, 'udp -w big')
        check_bufs(res, req, true)
      end)

    it('sndbuf_bytes alone leaves SO_RCVBUF at the kernel default', function()
      local res = run(opts { sndbuf_bytes = 131072 }, 'tcp --sndbuf')
      local s = res.streams[1]
      assert.equal(131072, s.sender.sndbuf.requested_bytes)
      assert.equal(262144, s.sender.sndbuf.granted_bytes)
      assert.equal(0, s.receiver.rcvbuf.requested_bytes)
    end)
  end)

  describe('CPU', function()
    local function cpu_ok(c, name)
      for _, k in ipairs { 'total_pct', 'user_pct', 'system_pct' } do
        assert(type(c[k]) == 'number' and c[k] >= 0 and c[k] <= 100 * 64,
          name .. '.' .. k .. ' = ' .. tostring(c[k]))
      end
      assert(c.busiest_thread_pct >= 0 and c.busiest_thread_pct <= 105,
        name .. '.busiest_thread_pct = ' .. tostring(c.busiest_thread_pct))
    end

    it('both ends report total, user, system and busiest thread; the flag follows the rule',
      function()
        for _, o in ipairs { { bitrate_bps = 0, duration_s = 1 },
            { bitrate_bps = 0, duration_s = 1, length_bytes = 1500 },
            { proto = 'udp', bitrate_bps = 0, duration_s = 1, length_bytes = 1400 } } do
          local res = run(opts(o), 'cpu')
          cpu_ok(res.cpu.client, 'cpu.client')
          cpu_ok(res.cpu.server, 'cpu.server')
          local busiest = math.max(res.cpu.client.busiest_thread_pct,
            res.cpu.server.busiest_thread_pct)
          assert.equal(busiest >= 90, res.cpu_limited)
          if o.length_bytes == 1500 then
            -- writes are counted so the per-call cost is visible
            assert.is_true(res.sent.writes >= res.sent.bytes // 1500)
            assert.is_true(res.sent.writes > 0)
          end
          if res.cpu_limited then
            assert.matches('CPU%-limited', tostring(res))
          end
        end
      end)
  end)

  describe('API forms', function()
    it('client{...}:start() gives live intervals on the absolute grid, then wait()', function()
      local t0 = H.now()
      local h <close> = qoslab.client(opts { duration_s = 1.5, interval_s = 0.5,
        bitrate_bps = 100e6 }):start()
      assert.matches('^qoslab.Test %(running', tostring(h))
      local seen, first_at = {}, nil
      for iv in h:intervals() do
        first_at = first_at or H.now()
        seen[#seen + 1] = iv
      end
      assert(first_at - t0 < 1.2, 'first interval only after ' .. (first_at - t0) .. ' s')
      assert.is_true(#seen >= 3)
      for k = 1, #seen - 1 do
        assert(math.abs(seen[k].end_s - 0.5 * k) < 0.02,
          string.format('interval %d ends at %.4f', k, seen[k].end_s))
      end
      local res = assert(h:wait())
      assert.equal(res, h:wait())
      assert.equal(#seen, #res.intervals)
      H.identities(res, 'handle')
      assert.equal(false, h:next_interval(0))
    end)

    -- Live records of a qoslab pair: record k holds both ends' entries of
    -- grid slot k, exactly as the final result's interval k (the server's
    -- record is held for, at most 300 ms + 2 RTT), and the live series
    -- alone satisfies the identities (Σ intervals == totals, both sides).
    local function entries(iv)
      local t = {}
      for _, e in ipairs(iv.streams) do
        t[#t + 1] = string.format('%s %d %s %s %d', e.side, e.id, e.direction, e.role, e.bytes)
      end
      table.sort(t)
      return table.concat(t, '; ')
    end
    for _, o in ipairs {
      { label = 'tcp forward' }, { label = 'tcp reverse', reverse = true },
      { label = 'tcp bidir -P 2', bidir = true, parallel = 2, bitrate_bps = 100e6 },
      { label = 'udp', proto = 'udp', bitrate_bps = 20e6, length_bytes = 1000 },
      { label = 'tcp byte limit', bytes = 12000000, bitrate_bps = 80e6 },
    } do
      it('live records hold the server entries of their own grid slot: ' .. o.label, function()
        local label = o.label
        o.label = nil
        if not o.bytes then o.duration_s = 1 end
        o.interval_s, o.bitrate_bps = 0.25, o.bitrate_bps or 200e6
        local t0 = H.now()
        local h <close> = assert(traffic.client(opts(o)):start())
        local live, lag = {}, 0
        local at = {}
        for iv in h:intervals() do
          live[#live + 1] = iv
          at[#live] = H.now() - t0 - iv.end_s
        end
        -- the last record comes with the results (after the drain)
        for k = 1, #live - 1 do lag = math.max(lag, at[k]) end
        local res = assert(h:wait())
        assert.equal(#res.intervals, #live)
        for k, iv in ipairs(live) do
          local f = res.intervals[k]
          assert.equal(f.start_s, iv.start_s)
          assert.equal(f.end_s, iv.end_s)
          assert.equal(false, iv.peer_missing, label .. ': record ' .. k .. ' without the server')
          assert.equal(entries(f), entries(iv), label .. ': record ' .. k)
          local server = 0
          for _, e in ipairs(iv.streams) do if e.side == 'server' then server = server + 1 end end
          assert(server > 0 or k == #live, label .. ': record ' .. k .. ' has no server entry')
        end
        local copy = {}
        for key, v in pairs(res) do copy[key] = v end
        copy.intervals = live
        H.identities(copy, label .. ' (live records)')
        -- the wait is bounded: a record before the last comes well inside
        -- one interval after its end (t0 is before the test's start, so
        -- lag is an upper estimate including the handshake)
        print(string.format('  [live] %s: latest record before the last came %.3f s after its end', label, lag))
        assert(lag < 0.25, string.format('%s: a live record came %.3f s after its end', label, lag))
      end)
    end

    it(':stop() ends a long test early and still gives a consistent result', function()
      local h = assert(traffic.start(opts { duration_s = 30, bitrate_bps = 50e6 }))
      H.sleep(0.6)
      h:stop()
      local res = assert(h:wait())
      assert(res.duration_s < 3, 'stopped test ran ' .. res.duration_s .. ' s')
      H.identities(res, 'stopped')
    end)

    it('a pending test runs on first read and becomes the plain result table', function()
      local res = qoslab.client(opts { duration_s = 0.5, bitrate_bps = 50e6 })
      assert.is_nil(rawget(res, 'sent'))
      assert.is_true(res.sent.bytes > 0)
      assert.equal(traffic.Result, getmetatable(res))
      assert.is_table(rawget(res, 'intervals'))
      assert.is_nil(res.start)
      H.identities(res, 'pending')
      local decoded = require('cjson').decode(require('cjson').encode(res))
      assert.equal(res.sent.bytes, decoded.sent.bytes)
      assert.matches('^qoslab TCP test 127.0.0.1:' .. PORT, tostring(res))
    end)

    it('the server keeps each test and reports its own view', function()
      local before = srv:finished()
      run(opts { duration_s = 0.5, bitrate_bps = 50e6 }, 'for server view')
      local list, total = assert(srv:wait_results(before + 1, 5))
      -- the server keeps its last results: list[#list] is test number total
      local r = list[#list - (total - (before + 1))]
      assert(r, 'test ' .. (before + 1) .. ' of ' .. total .. ' no longer kept')
      assert.equal('server', r.local_role)
      assert.equal(traffic.Result, getmetatable(r))
      H.identities(r, 'server view')
      assert.equal(0, srv:tests_running())
    end)

    it('two tests at once on one server keep separate books', function()
      local a = assert(traffic.start(opts { duration_s = 1, bitrate_bps = 40e6 }))
      local b = assert(traffic.start(opts { duration_s = 1, bitrate_bps = 80e6,
        proto = 'udp', length_bytes = 1000 }))
      local ra, rb = assert(a:wait()), assert(b:wait())
      H.identities(ra, 'concurrent tcp')
      H.identities(rb, 'concurrent udp')
      H.paced(ra.sent.bits_per_second, 40e6, 'tcp rate beside udp')
      H.paced(rb.sent.bits_per_second, 80e6, 'udp rate beside tcp')
    end)

    it('failures of the world: nil, message, code from run(); an error with the code when a pending test is read',
      function()
        local closed = H.port()
        local res, msg, code = traffic.run { host = '127.0.0.1', port = closed, duration_s = 1 }
        assert.is_nil(res)
        assert.equal('ECONNREFUSED', code)
        assert.is_string(msg)
        local t = qoslab.client { host = '127.0.0.1', port = closed, duration_s = 1 }
        assert.error_matches(function() return t.sent end, '%(ECONNREFUSED%)')
        res, msg, code = traffic.run { host = '127.0.0.1', port = PORT, netns = 'qoslab-no-such-ns-' .. H.pid }
        assert.is_nil(res)
        assert.is_string(msg)
        assert.is_string(code)
      end)
  end)
end)
