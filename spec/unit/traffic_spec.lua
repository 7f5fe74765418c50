-- qoslab.traffic: option checks (façade and C binding), summaries, the iperf3
-- JSON converter and the bookkeeping identities, on synthetic results.
local traffic = require 'qoslab.traffic'
local core = require 'qoslab.core'

local fixture = require('integration.traffic_helper').fixture

local function lines_of(s)
  local t = {}
  for l in (s .. '\n'):gmatch('(.-)\n') do t[#t + 1] = l end
  return t
end

local function find_line(lines, ...)
  local pats = { ... }
  for _, l in ipairs(lines) do
    local all = true
    for _, p in ipairs(pats) do if not l:find(p) then all = false break end end
    if all then return l end
  end
  return nil
end

describe('qoslab.traffic options', function()
  -- Each entry: key, base options it needs, bad values.
  local cases = {
    { 'host', {}, { 42, '', true } },
    { 'port', {}, { 'x', 0, 65536, 1.5, -1 } },
    { 'proto', {}, { 'sctp', 1 } },
    { 'parallel', {}, { 0, 129, 'x', 1.5 } },
    { 'duration_s', {}, { 0, -1, 0 / 0, math.huge, 'x', 86401 } },
    { 'bytes', {}, { 0, -1, 1.5, 'x' } },
    { 'packets', { proto = 'udp' }, { 0, -1, 2.5, 'x' } },
    { 'reverse', {}, { 'yes', 1 } },
    { 'bidir', {}, { 'yes', 1 } },
    { 'omit_s', {}, { -1, 0 / 0, 'x', 3601 } },
    { 'interval_s', {}, { 0, 0.05, -1, math.huge, 'x', 3601 } },
    { 'window_bytes', {}, { 0, -5, 1 << 31, 1.5, 'x' } },
    { 'sndbuf_bytes', {}, { 0, 1 << 31, 'x' } },
    { 'rcvbuf_bytes', {}, { 0, 1 << 31, 'x' } },
    { 'bitrate_bps', {}, { -1, 0 / 0, math.huge, 'x', 2.5, (1 << 50) + 1 } },
    { 'length_bytes', {}, { 0, -1, 1.5, 'x', (1 << 24) + 1 } },
    { 'length_bytes', { proto = 'udp' }, { 0, 15, 65508 } },
    { 'congestion', {}, { 5, '', string.rep('c', 16) } },
    { 'mss_bytes', {}, { 87, 32768, 'x' } },
    { 'tos', {}, { -1, 256, 'x' } },
    { 'nodelay', {}, { 'yes' } },
    { 'fq_rate_bps', {}, { -1, 0, 'x' } },
    { 'bind_address', {}, { 5 } },
    { 'bind_device', {}, { 5, 'an-interface-name-too-long' } },
    { 'netns', {}, { 5, '' } },
    { 'connect_timeout_s', {}, { 0, -1, 'x' } },
    { 'udp_batch', { proto = 'udp' }, { 0, 1025, 'x' } },
    { 'udp_gso', { proto = 'udp' }, { 'yes' } },
    { 'udp_drain_s', { proto = 'udp' }, { -1, 'x', 61 } },
    { 'title', {}, { 5 } },
  }

  local function with(base, k, v)
    local o = { host = '127.0.0.1', port = 1 }
    for kk, vv in pairs(base) do o[kk] = vv end
    o[k] = v
    return o
  end

  it('client: wrong type / out of range raise naming the field', function()
    for _, c in ipairs(cases) do
      for _, v in ipairs(c[3]) do
        local ok, err = pcall(traffic.client, with(c[2], c[1], v))
        assert(not ok, 'accepted ' .. c[1] .. ' = ' .. tostring(v))
        assert.matches('qoslab.client: opts.' .. c[1] .. ': expected', err, 1, true)
      end
    end
  end)

  it('client: unknown keys, missing host and non-table opts raise', function()
    assert.error_matches(function() traffic.client { host = 'h', windw_bytes = 1 } end,
      'opts.windw_bytes: unknown key')
    assert.error_matches(function() traffic.client { host = 'h', [1] = 2 } end,
      'opts.1: unknown key')
    assert.error_matches(function() traffic.client { port = 5201 } end,
      'opts.host: expected a host name or address, got nil', 1, true)
    assert.error_matches(function() traffic.client('h') end, 'opts: expected a table')
    assert.error_matches(function() traffic.run { host = 'h', zz = 1 } end,
      'qoslab.traffic.run: opts.zz: unknown key', 1, true)
  end)

  it('client: contradictory combinations raise naming the field', function()
    local bad = {
      { { duration_s = 1, bytes = 10 }, 'opts.duration_s: cannot be combined' },
      { { proto = 'udp', bytes = 10, packets = 10 }, 'opts.packets: cannot be combined' },
      { { packets = 10 }, 'opts.packets: only for proto = "udp"' },
      { { reverse = true, bidir = true }, 'opts.bidir: cannot be combined with opts.reverse' },
      { { window_bytes = 1000, sndbuf_bytes = 1000 }, 'opts.window_bytes: sets both' },
      { { window_bytes = 1000, rcvbuf_bytes = 1000 }, 'opts.window_bytes: sets both' },
      { { proto = 'udp', mss_bytes = 1000 }, 'opts.mss_bytes: a TCP option' },
      { { proto = 'udp', congestion = 'cubic' }, 'opts.congestion: a TCP option' },
      { { proto = 'udp', nodelay = true }, 'opts.nodelay: a TCP option' },
      { { udp_batch = 4 }, 'opts.udp_batch: a UDP option' },
      { { udp_gso = false }, 'opts.udp_gso: a UDP option' },
      { { udp_drain_s = 1 }, 'opts.udp_drain_s: a UDP option' },
    }
    for _, b in ipairs(bad) do
      local o = { host = 'h' }
      for k, v in pairs(b[1]) do o[k] = v end
      assert.error_matches(function() traffic.client(o) end, b[2], 1, true)
    end
  end)

  it('errors point at the caller', function()
    local ok, err = pcall(function() traffic.client { host = 'h', parallel = 0 } end)
    assert.is_false(ok)
    assert.matches('^spec/unit/traffic_spec.lua:%d+: qoslab.client: opts.parallel', err)
    ok, err = pcall(function() traffic.client { host = 'h', zz = 0 } end)
    assert.is_false(ok)
    assert.matches('^spec/unit/traffic_spec.lua:%d+: qoslab.client: opts.zz', err)
    ok, err = pcall(function() traffic.client { host = 'h', reverse = true, bidir = true } end)
    assert.is_false(ok)
    assert.matches('^spec/unit/traffic_spec.lua:%d+: qoslab.client: opts.bidir', err)
    ok, err = pcall(function() traffic.server { port = 'x' } end)
    assert.is_false(ok)
    assert.matches('^spec/unit/traffic_spec.lua:%d+: qoslab.server: opts.port', err)
  end)

  it('client{...} with good options is a pending test that has not run', function()
    local t = traffic.client { host = '127.0.0.1', port = 1, proto = 'udp', packets = 5,
      bitrate_bps = 0, udp_batch = 8, udp_gso = true, udp_drain_s = 0.5, length_bytes = 16 }
    assert.equal('function', type(t.start))
    assert.is_nil(rawget(t, 'sent'))
  end)

  it('server: wrong type / out of range / unknown key raise naming the field', function()
    local bad = {
      port = { -1, 65536, 'x', 1.5 }, bind_address = { 5 }, netns = { 5, '' },
      one_off = { 'yes' }, window_bytes = { 0, 1 << 31 }, sndbuf_bytes = { 0 },
      rcvbuf_bytes = { 'x' }, idle_timeout_s = { 0, -1, 'x' }, max_tests = { 0, 4097, 'x' },
      max_tests_per_address = { 0, 4097, 1.5 }, max_streams_per_address = { 0, 65537 },
      max_unidentified = { 0, 65537, 'x' }, max_unidentified_per_address = { 0, -1 },
      data_idle_s = { 0, 86401, 0 / 0, 'x' }, max_duration_s = { 0, 2678401, 1 / 0 },
      test_buffer_bytes = { 0, (1 << 40) + 1, 1.5 },
    }
    for k, vs in pairs(bad) do
      for _, v in ipairs(vs) do
        local ok, err = pcall(traffic.server, { [k] = v })
        assert(not ok, 'accepted ' .. k .. ' = ' .. tostring(v))
        assert.matches('qoslab.server: opts.' .. k .. ': expected', err, 1, true)
      end
    end
    assert.error_matches(function() traffic.server { prot = 1 } end, 'opts.prot: unknown key')
    assert.error_matches(function() traffic.server(5) end, 'opts: expected a table')
  end)

  describe('the C binding', function()
    -- Until the engine's binding is in the build there is nothing to test.
    local it_bound = core.traffic_client and it or function(name)
      pending(name .. ' (core.traffic_client is not in this build)')
    end

    it_bound('core.traffic_client rejects what the façade rejects, naming the field', function()
      for _, c in ipairs(cases) do
        for _, v in ipairs(c[3]) do
          -- The façade also refuses empty strings and UDP lengths outside
          -- 16..65507; the binding leaves those to the engine (a failure
          -- when the test starts), so they are not asked of it here.
          if v ~= '' and not (c[1] == 'length_bytes' and c[2].proto) then
            local ok, err = pcall(core.traffic_client, with(c[2], c[1], v))
            assert(not ok, 'binding accepted ' .. c[1] .. ' = ' .. tostring(v))
            assert.matches('opts.' .. c[1], err, 1, true)
          end
        end
      end
      assert.error_matches(function() core.traffic_client { host = 'h', zz = 1 } end, 'zz')
    end)

    it_bound('core.traffic_server rejects bad options naming the field', function()
      local bad = { port = { 65536, 'x' }, netns = { 5 }, one_off = { 'yes' },
        window_bytes = { 'x', -1 }, idle_timeout_s = { 'x', -1 } }
      for k, vs in pairs(bad) do
        for _, v in ipairs(vs) do
          local ok, err = pcall(core.traffic_server, { [k] = v })
          assert(not ok, 'binding accepted ' .. k .. ' = ' .. tostring(v))
          assert.matches(k, err, 1, true)
        end
      end
      assert.error_matches(function() core.traffic_server { zz = 1 } end, 'zz')
    end)
  end)
end)

describe('qoslab.traffic formatting', function()
  it('format_bytes uses 1024-based units and format_rate 1000-based, like iperf3', function()
    assert.equal('512 Bytes', traffic.format_bytes(512))
    assert.equal('1.00 KBytes', traffic.format_bytes(1024))
    assert.equal('1.50 MBytes', traffic.format_bytes(1.5 * 1048576))
    assert.equal('741 MBytes', traffic.format_bytes(777256960))
    assert.equal('12.3 GBytes', traffic.format_bytes(12.3 * 2 ^ 30))
    assert.equal('6.22 Gbits/sec', traffic.format_rate(6216613542.05))
    assert.equal('999 bits/sec', traffic.format_rate(999))
    assert.equal('10.0 Mbits/sec', traffic.format_rate(1e7))
  end)
end)

describe('qoslab.traffic summary', function()
  it('labels per-stream and SUM rows with role and measuring side (TCP, 2 streams)', function()
    local res = fixture { parallel = 2 }
    local s = tostring(res)
    assert.equal(traffic.summary(res), s)
    local L = lines_of(s)
    assert.truthy(find_line(L, '^qoslab TCP test 127.0.0.1:5201', 'peer qoslab', '2 streams',
      'forward'))
    assert.truthy(find_line(L, '^%[  1%] fwd sender   client', 'retr 3'))
    assert.truthy(find_line(L, '^%[  1%] fwd receiver server'))
    assert.truthy(find_line(L, '^%[  3%] fwd sender   client'))
    local sum_s = find_line(L, '^%[SUM%] fwd sender   client')
    local sum_r = find_line(L, '^%[SUM%] fwd receiver server')
    assert.truthy(sum_s and sum_r)
    assert.truthy(sum_s:find(traffic.format_bytes(res.sent.bytes), 1, true))
    assert.truthy(sum_r:find(traffic.format_rate(res.received.bits_per_second), 1, true))
    assert.truthy(find_line(L, '^cpu client: 12.5%% %(user 2.5%%, system 10.0%%%), busiest thread 9.0%%'))
    assert.truthy(find_line(L, '^cpu server: 20.0%%'))
    assert.falsy(find_line(L, 'CPU%-limited'))
  end)

  it('an IPv6 host is bracketed before its port', function()
    local res = fixture {}
    res.host = '::1'
    assert.truthy(find_line(lines_of(tostring(res)), '^qoslab TCP test %[::1%]:5201'))
  end)

  -- A server's result printed "qoslab TCP test 127.0.0.99:5400": the
  -- client's address with the server's port, an endpoint that never existed.
  it('a server\'s view names the client with its port, then the server\'s port', function()
    local res = fixture {}
    res.local_role, res.host, res.port, res.peer_port = 'server', '127.0.0.99', 5400, 43210
    assert.truthy(find_line(lines_of(tostring(res)),
      '^qoslab TCP test from 127%.0%.0%.99:43210 to port 5400, peer qoslab, 1 stream, .*, server view$'))
    res.host = '::1'
    assert.truthy(find_line(lines_of(tostring(res)), '^qoslab TCP test from %[::1%]:43210 to port 5400,'))
  end)

  it('one stream has no SUM rows; reverse rows say the server sends', function()
    local L = lines_of(tostring(fixture { reverse = true }))
    assert.truthy(find_line(L, 'reverse %(server sends%)'))
    assert.truthy(find_line(L, '^%[  1%] rev sender   server'))
    assert.truthy(find_line(L, '^%[  1%] rev receiver client'))
    assert.falsy(find_line(L, '^%[SUM%]'))
  end)

  it('bidir shows both directions with their own sums', function()
    local L = lines_of(tostring(fixture { bidir = true, parallel = 2 }))
    assert.truthy(find_line(L, 'bidirectional'))
    assert.truthy(find_line(L, '^%[SUM%] fwd sender   client'))
    assert.truthy(find_line(L, '^%[SUM%] fwd receiver server'))
    assert.truthy(find_line(L, '^%[SUM%] rev sender   server'))
    assert.truthy(find_line(L, '^%[SUM%] rev receiver client'))
  end)

  it('UDP rows carry datagrams, loss, duplicates, reordering and jitter', function()
    local res = fixture { proto = 'udp' }
    res.streams[1].receiver.duplicate_packets = 4
    res.streams[1].receiver.out_of_order_packets = 2
    res.streams[1].receiver.late_packets = 1
    local L = lines_of(tostring(res))
    assert.truthy(find_line(L, '^%[  1%] fwd sender', '30 datagrams'))
    assert.truthy(find_line(L, '^%[  1%] fwd receiver server', 'lost 3/30 %(10%%%)',
      'dup 4', 'ooo 2', 'late 1', 'jitter 0.050 ms'))
  end)

  it('UDP rows show the mean |D|, the loss bursts and the reordering extent when measured',
    function()
      local res = fixture { proto = 'udp' }
      local r = res.streams[1].receiver
      r.jitter_pairs, r.jitter_mean_abs_ms = 20, 6.6667
      r.loss_runs = { bursts = 2, burst_packets = 3, mean_burst_packets = 1.5, gaps = 1,
        gap_packets = 20, mean_gap_packets = 20.0 }
      r.reorder_extent = { packets = 2, max_packets = 4, mean_packets = 3.0, sum_packets = 6 }
      local L = lines_of(tostring(res))
      assert.truthy(find_line(L, '^%[  1%] fwd receiver server', 'jitter 0.050 ms',
        '|D| 6.667 ms', 'bursts 2 %(mean 1.5%)', 'extent max 4'))
      -- none of it from a stock iperf3 receiver, nor with nothing to tell
      r.jitter_mean_abs_ms, r.loss_runs.bursts, r.reorder_extent.packets = nil, 0, 0
      L = lines_of(tostring(res))
      local line = find_line(L, '^%[  1%] fwd receiver server')
      assert.is_nil(line:find('|D|', 1, true))
      assert.is_nil(line:find('bursts', 1, true))
      assert.is_nil(line:find('extent', 1, true))
    end)

  it('shows requested and granted buffers, clamping, CPU limits and warnings', function()
    local w = 'SO_RCVBUF clamped to 425984 B by net.core.rmem_max (requested 1048576)'
    local L = lines_of(tostring(fixture { window = 1048576, granted = 425984, clamped = true,
      busiest = 97.0, warnings = { w } }))
    assert.truthy(find_line(L, '^%[  1%] buffers: SO_SNDBUF requested 1048576 B, granted 425984 B '
      .. '%(clamped by net.core.wmem_max%); SO_RCVBUF requested 1048576 B'))
    assert.truthy(find_line(L, '^CPU%-limited'))
    assert.truthy(find_line(L, '^warning: ' .. w:gsub('%p', '%%%0')))
  end)

  it('a buffers line with only SO_RCVBUF requested (printing it crashed the CLI server)', function()
    local res = fixture { window = 1048576, granted = 2097152 }
    res.streams[1].sender.sndbuf = nil
    local L = lines_of(tostring(res))
    assert.truthy(find_line(L, '^%[  1%] buffers: SO_RCVBUF requested 1048576 B'))
    res.streams[1].receiver.rcvbuf = nil
    assert.falsy(find_line(lines_of(tostring(res)), 'buffers:'))
  end)

  it('interval_lines: SUM per direction and role, per-stream lines with several streams', function()
    local res = fixture { parallel = 2, proto = 'udp' }
    local L = traffic.interval_lines(res.intervals[1])
    -- 2 streams x 2 roles + 2 SUM lines
    assert.equal(6, #L)
    local sum = find_line(L, '^%[SUM%] fwd', 'sender')
    assert.truthy(sum:find(traffic.format_bytes(1010 + 2010), 1, true))
    assert.truthy(find_line(L, '^%[SUM%] fwd', 'lost 2/20', 'receiver'))
    local one = traffic.interval_lines(fixture().intervals[2])
    assert.equal(2, #one)
    assert.truthy(find_line(one, '^%[  1%] fwd   1.00%-2.00', 'retr 1', 'cwnd 64.0 KBytes',
      'rtt 200 us', 'sender'))
  end)
end)

describe('qoslab.traffic.invariants', function()
  it('holds on consistent results of every shape', function()
    for _, o in ipairs { {}, { parallel = 3 }, { reverse = true }, { bidir = true, parallel = 2 },
        { proto = 'udp' }, { proto = 'udp', parallel = 2, reverse = true },
        { proto = 'udp', bidir = true } } do
      local ok, why = traffic.invariants(fixture(o))
      assert(ok, table.concat(why, '\n'))
    end
  end)

  it('reports each broken identity', function()
    local function broken(o, f, pat)
      local res = fixture(o)
      f(res)
      local ok, why = traffic.invariants(res)
      assert.is_false(ok)
      assert.matches(pat, table.concat(why, '\n'))
    end
    broken({ parallel = 2 }, function(r) r.sent.bytes = r.sent.bytes + 1 end,
      'forward sender SUM bytes == sum of streams')
    broken({ bidir = true }, function(r) r.reverse_received.bytes = 0 end,
      'reverse receiver SUM bytes')
    broken({}, function(r) r.intervals[2].streams[1].bytes = 0 end,
      'stream 1 forward sender: sum of interval bytes == total')
    broken({ proto = 'udp' }, function(r)
      r.streams[1].receiver.lost_packets = r.streams[1].receiver.lost_packets + 1
      r.received.lost_packets = r.received.lost_packets + 1
    end, 'lost %+ unique == sent')
    broken({}, function(r) r.received.bits_per_second = 0 / 0 end, 'received.bits_per_second is')
    broken({}, function(r) r.cpu.client.total_pct = math.huge end, 'total_pct is inf')
    broken({}, function(r) r.sent.bytes = r.sent.bytes + 0.5 end, 'sent.bytes is not an integer')
    broken({}, function(r) r.intervals[2].seconds = 0 end, 'interval 2 has duration')
    broken({}, function(r) r.intervals[3].start_s = 2.5 end, 'interval 3 starts at')
    local function udp_rx(r, k)
      for _, s in ipairs(r.intervals[k].streams) do
        if s.role == 'receiver' then return s end
      end
    end
    broken({ proto = 'udp' }, function(r)
      local s = udp_rx(r, 2)
      s.lost_packets, s.unique_packets = s.lost_packets + 1, s.unique_packets - 1
    end, 'stream 1 forward receiver: sum of interval lost_packets == total')
    broken({ proto = 'udp' }, function(r)
      local s = udp_rx(r, 1)
      s.out_of_order_packets = s.unique_packets + 1
    end, 'interval 1 stream 1: out%-of%-order')
  end)

  it('ignores omitted intervals in the sums', function()
    local res = fixture {}
    table.insert(res.intervals, 1, { start_s = -1.0, end_s = 0.0, seconds = 1.0, omitted = true,
      sum = {}, streams = { { id = 1, direction = 'forward', role = 'sender', bytes = 999,
        bits_per_second = 7992.0 } } })
    local ok, why = traffic.invariants(res)
    assert(ok, table.concat(why, '\n'))
  end)
end)

describe('qoslab.traffic.to_iperf3_json', function()
  local cjson = require 'cjson'

  it('TCP: start, intervals and end in iperf3 3.12 shape with consistent numbers', function()
    local res = fixture { parallel = 2 }
    res.options = { host = '127.0.0.1', duration_s = 3, window_bytes = 1048576 }
    local j = traffic.to_iperf3_json(res)
    cjson.decode(cjson.encode(j))  -- encodable: no functions, NaN or userdata
    assert.same({ host = '127.0.0.1', port = 5201 }, j.start.connecting_to)
    assert.equal(1795995185, j.start.timestamp.timesecs)
    assert.equal('Sun, 29 Nov 2026 23:33:05 GMT', j.start.timestamp.time)
    assert.same({ protocol = 'TCP', num_streams = 2, blksize = 131072, omit = 0, duration = 3,
      bytes = 0, blocks = 0, reverse = 0, tos = 0, target_bitrate = 0 }, j.start.test_start)
    assert.equal(1048576, j.start.sock_bufsize)
    assert.equal(3, #j.intervals)
    local iv = j.intervals[1]
    assert.equal(2, #iv.streams)  -- the client's own (sender) measurements only
    for _, s in ipairs(iv.streams) do
      assert.is_true(s.sender)
      assert.is_false(s.omitted)
      assert.equal(200, s.rtt)
      assert.equal(65536, s.snd_cwnd)
    end
    assert.equal(1010 + 2010, iv.sum.bytes)
    assert.near((1010 + 2010) * 8, iv.sum.bits_per_second, 1e-9)
    assert.equal(0, iv.sum.retransmits)
    local e = j['end']
    assert.equal(2, #e.streams)
    assert.equal(res.streams[1].sender.bytes, e.streams[1].sender.bytes)
    assert.equal(res.streams[2].receiver.bytes, e.streams[2].receiver.bytes)
    assert.equal(3, e.streams[1].sender.retransmits)
    assert.equal(300, e.streams[1].sender.max_rtt)
    assert.equal(res.sent.bytes, e.sum_sent.bytes)
    assert.equal(res.received.bytes, e.sum_received.bytes)
    assert.is_true(e.sum_sent.sender)
    assert.same({ host_total = 12.5, host_user = 2.5, host_system = 10.0, remote_total = 20.0,
      remote_user = 5.0, remote_system = 15.0 }, e.cpu_utilization_percent)
  end)

  it('reverse: the client reports its receiving side, sender = false', function()
    local j = traffic.to_iperf3_json(fixture { reverse = true })
    local s = j.intervals[1].streams[1]
    assert.is_false(s.sender)
    assert.equal(1010 - 3, s.bytes)
    assert.is_nil(s.retransmits)
    assert.equal(1, j.start.test_start.reverse)
    assert.is_false(j['end'].sum_sent.sender)
  end)

  it('UDP: sum_sent is the sender\'s and sum_received the receiver\'s either way (iperf3 3.12)',
    function()
      for _, rev in ipairs { false, true } do
        local e = traffic.to_iperf3_json(fixture { proto = 'udp', reverse = rev })['end']
        assert.is_true(e.sum_sent.sender)
        assert.is_false(e.sum_received.sender)
        assert.equal(not rev, e.sum.sender)
      end
    end)

  it('bidir: sum and sum_bidir_reverse, *_bidir_reverse totals', function()
    local res = fixture { bidir = true }
    local j = traffic.to_iperf3_json(res)
    local iv = j.intervals[1]
    assert.equal(2, #iv.streams)
    assert.is_true(iv.sum.sender)
    assert.equal(1010, iv.sum.bytes)
    assert.is_false(iv.sum_bidir_reverse.sender)
    assert.equal(1010 - 3, iv.sum_bidir_reverse.bytes)
    local e = j['end']
    assert.equal(res.reverse_sent.bytes, e.sum_sent_bidir_reverse.bytes)
    assert.equal(res.reverse_received.bytes, e.sum_received_bidir_reverse.bytes)
    assert.is_false(e.sum_received_bidir_reverse.sender)
  end)

  it('UDP: the path statistics stay out of iperf3\'s JSON', function()
    local res = fixture { proto = 'udp' }
    local r = res.streams[1].receiver
    r.jitter_pairs, r.jitter_mean_abs_ms = 20, 6.6667
    r.loss_runs = { bursts = 2, burst_packets = 3 }
    r.reorder_extent = { packets = 2, max_packets = 4 }
    res.received.jitter_mean_abs_ms = 6.6667
    local text = require('cjson').encode(traffic.to_iperf3_json(res))
    for _, k in ipairs { 'jitter_pairs', 'jitter_mean_abs_ms', 'loss_runs', 'reorder_extent' } do
      assert.is_nil(text:find(k, 1, true), k)
    end
  end)

  it('UDP: udp stream objects, loss and jitter from the receiver, packets from the sender', function()
    local res = fixture { proto = 'udp' }
    local j = traffic.to_iperf3_json(res)
    local e = j['end']
    local u = e.streams[1].udp
    assert.equal(30, u.packets)
    assert.equal(3, u.lost_packets)
    assert.near(10.0, u.lost_percent, 1e-9)
    assert.near(0.05, u.jitter_ms, 1e-12)
    assert.equal(res.sent.bytes, u.bytes)  -- the client sent: its own bytes
    assert.equal(3, e.sum.lost_packets)
    assert.equal(30, e.sum_received.packets)
    assert.equal(0, e.sum_sent.lost_packets)
    assert.equal(res.received.bytes, e.sum_received.bytes)
    assert.equal(res.sent.bytes // res.sent.packets, j.start.test_start.blksize)
    assert.equal(1000000, j.start.test_start.target_bitrate)
    assert.equal(10, j.intervals[1].streams[1].packets)
  end)
end)
