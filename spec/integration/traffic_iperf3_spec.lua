-- Wire compatibility with Debian's iperf3 (3.12), both ways, on loopback:
-- a qoslab client against `iperf3 -s`, and `iperf3 -c ... -J` against a
-- qoslab server, for TCP and UDP with -P, -R, --bidir, -w, -b, -l, -t, -n,
-- -O. Each side's numbers are compared with the other side's.
--
-- Tolerances (why):
--  * numbers one end reports about the other come from the results
--    exchange, so they must be equal exactly (bytes, datagrams, loss);
--  * TCP bytes received by a stock iperf3 server may fall short of bytes
--    sent, because iperf3 stops reading when TEST_END arrives: allowed
--    shortfall max(2 % of sent, 8 MiB);
--  * rates computed by the two ends use their own clocks and durations:
--    agree within 10 %;
--  * a byte (-n) or datagram limit is exact for the side that sends;
--  * a stock iperf3 receiving UDP stops counting at its own TEST_END, so
--    its datagram count may fall short of ours by what was in flight.
-- The converter's output is also checked key by key against the JSON that
-- iperf3 -J prints for the same kind of test.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local cjson = require 'cjson'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('iperf3 interop', function()
    pending('core.traffic_client is not in this build (engine binding not merged yet)')
  end)
  return
end

local have_iperf3 = H.sh('iperf3 --version')

local SHORT_MAX = 8 * 1048576

-- Run `iperf3 -s -1 -J` on a fresh port, call f(port), return iperf3's JSON.
local function with_iperf3_server(f)
  local port = H.port()
  local out = H.tmp('iperf3-s-' .. port .. '.json')
  local pid = H.spawn(string.format('exec iperf3 -s -1 -J -p %d', port), out, out .. '.err')
  local ok, res = pcall(function()
    assert(H.wait_listen(port, nil, 5), 'iperf3 -s did not listen')
    local r = f(port)
    assert(H.wait_exit(pid, 10), 'iperf3 -s -1 did not exit after the test')
    return r
  end)
  H.kill(pid)
  if not ok then error(res, 0) end
  local text = H.read(out) or ''
  local jok, j = pcall(cjson.decode, text)
  assert(jok and type(j) == 'table', 'iperf3 -s printed no JSON: ' .. text:sub(1, 400))
  assert(not j.error, 'iperf3 -s error: ' .. tostring(j.error))
  return res, j
end

-- Run `iperf3 -c 127.0.0.1 -p port -J <flags>`, return the decoded JSON.
local function iperf3_client(port, flags)
  local ok, text = H.sh(string.format('timeout 20 iperf3 -c 127.0.0.1 -p %d -J %s', port, flags))
  local jok, j = pcall(cjson.decode, text)
  assert(jok and type(j) == 'table', 'iperf3 -c printed no JSON: ' .. text:sub(1, 400))
  assert(ok and not j.error, 'iperf3 -c failed: ' .. tostring(j.error))
  return j
end

local function tcp_shortfall_ok(sent, received, what)
  assert(received <= sent, string.format('%s: received %d > sent %d', what, received, sent))
  local allowed = math.max(0.02 * sent, SHORT_MAX)
  assert(sent - received <= allowed, string.format('%s: %d of %d bytes missing', what,
    sent - received, sent))
end

local schema_matches = H.schema_matches

local describe_if = have_iperf3 and describe or function(name)
  describe(name, function() pending('iperf3 is not installed') end)
end

describe_if('iperf3 interop', function()
  teardown(function() H.cleanup_tmp() end)

  describe('qoslab client -> iperf3 -s', function()
    local function run(o)
      local res, j = with_iperf3_server(function(port)
        o.host, o.port = '127.0.0.1', port
        if not o.bytes and not o.packets then o.duration_s = o.duration_s or 1 end
        local r, msg, code = traffic.run(o)
        assert(r, tostring(msg) .. ' (' .. tostring(code) .. ')')
        return r
      end)
      assert.equal('iperf3', res.peer)
      H.identities(res, 'client vs iperf3')
      return res, j
    end

    it('TCP forward, -P 2, -l 64K, capped rate', function()
      local res, j = run { parallel = 2, length_bytes = 65536, bitrate_bps = 300e6 }
      local e = j['end']
      assert.equal(2, #res.streams)
      tcp_shortfall_ok(res.sent.bytes, e.sum_received.bytes, 'iperf3 server received')
      assert.equal(e.sum_received.bytes, res.received.bytes)
      H.close_to(res.sent.bits_per_second, e.sum_received.bits_per_second, 0.1, 'rates')
      assert.equal(2, j.start.test_start.num_streams)
      assert.equal(65536, j.start.test_start.blksize)
      local w = res.sent.writes
      assert(w >= res.sent.bytes // 65536, 'writes ' .. w)
    end)

    it('TCP -R: iperf3 sends, its results reach us', function()
      local res, j = run { reverse = true, bitrate_bps = 300e6 }
      local e = j['end']
      assert.equal('server', res.sent.side)
      assert.equal(e.sum_sent.bytes, res.sent.bytes)
      tcp_shortfall_ok(res.sent.bytes, res.received.bytes, 'we received')
      assert.equal(e.sum_sent.retransmits, res.sent.retransmits)
    end)

    it('TCP --bidir', function()
      local res, j = run { bidir = true, bitrate_bps = 200e6 }
      local e = j['end']
      assert.equal(1, j.start.test_start.num_streams)
      tcp_shortfall_ok(res.sent.bytes, e.sum_received.bytes, 'forward')
      assert.equal(e.sum_sent_bidir_reverse.bytes, res.reverse_sent.bytes)
      tcp_shortfall_ok(res.reverse_sent.bytes, res.reverse_received.bytes, 'reverse')
    end)

    it('TCP -w 256K: iperf3 applies it to its sockets too', function()
      local res, j = run { window_bytes = 262144, bitrate_bps = 200e6 }
      assert.equal(262144, j.start.sock_bufsize)
      assert.equal(262144, res.streams[1].sender.sndbuf.requested_bytes)
      assert.equal(524288, res.streams[1].sender.sndbuf.granted_bytes)
    end)

    it('TCP -n 1M: exactly 1 MiB leaves the client', function()
      local res, j = run { bytes = 1048576 }
      assert.equal(1048576, res.sent.bytes)
      tcp_shortfall_ok(1048576, j['end'].sum_received.bytes, 'iperf3 server received')
    end)

    it('TCP -O 1 -t 2: both ends leave the first second out', function()
      local res, j = run { omit_s = 1, duration_s = 2, bitrate_bps = 200e6 }
      assert.equal(1, j.start.test_start.omit)
      local omitted = 0
      for _, iv in ipairs(res.intervals) do if iv.omitted then omitted = omitted + 1 end end
      assert.is_true(omitted >= 1)
      H.close_to(res.sent.bits_per_second, j['end'].sum_received.bits_per_second, 0.1, 'rates')
    end)

    it('UDP -b 10M -l 1000: datagram counts and loss agree exactly', function()
      local res, j = run { proto = 'udp', bitrate_bps = 10e6, length_bytes = 1000 }
      local e = j['end']
      assert.equal(e.sum_received.packets, res.received.unique_packets + res.received.lost_packets)
      assert.equal(e.sum_received.lost_packets, res.received.lost_packets)
      assert.equal(res.sent.packets, res.received.unique_packets + res.received.lost_packets)
      H.paced(res.sent.bits_per_second, 10e6, 'paced rate')
      assert.near(e.sum_received.jitter_ms, res.received.jitter_ms, 1e-6)
      assert.equal(1000, j.start.test_start.blksize)
    end)

    -- iperf3's results count a UDP stream's packets over the whole test
    -- (warm-up included) and leave its own warm-up out when it prints; a
    -- 3.12 sender's bytes are the measured ones. Read either way round,
    -- a warm-up once made our receiver line 150 % of the sender's.
    it('UDP -O 1 forward and -R: the warm-up is left out alike at both ends', function()
      local len = 1000
      local res, j = run { proto = 'udp', bitrate_bps = 8e6, length_bytes = len, omit_s = 1,
        duration_s = 1 }
      local e = j['end']
      -- 1000 datagrams/s for 1 s after the warm-up; each end splits on
      -- its own clock, iperf3's receiver books up to its highest number
      assert(math.abs(res.sent.packets - 1000) <= 20, 'sent ' .. res.sent.packets)
      assert(math.abs(e.sum_received.packets - res.sent.packets) <= 20, string.format(
        'iperf3 counted %d of our %d', e.sum_received.packets, res.sent.packets))
      -- what iperf3 received after its warm-up, as unique datagrams (not
      -- more than we counted as sent after ours)
      assert.equal(math.min(e.sum_received.bytes // len, res.sent.packets) * len,
        res.received.bytes)
      res, j = run { proto = 'udp', bitrate_bps = 8e6, length_bytes = len, omit_s = 1,
        duration_s = 1, reverse = true }
      e = j['end']
      -- iperf3's measured sent count, exactly (3.12: bytes / length)
      assert.equal(e.sum_sent.packets, res.sent.packets)
      assert.equal(e.sum_sent.bytes, res.sent.bytes)
      -- and our books split at its sequence number: identities ran in run()
      assert.equal(res.sent.packets, res.received.unique_packets + res.received.lost_packets)
    end)

    it('UDP -R -P 2 and --bidir', function()
      local res, j = run { proto = 'udp', bitrate_bps = 5e6, length_bytes = 1200, reverse = true,
        parallel = 2 }
      assert.equal(j['end'].sum_sent.packets, res.sent.packets)
      assert.equal(res.sent.packets, res.received.unique_packets + res.received.lost_packets)
      res = run { proto = 'udp', bitrate_bps = 5e6, length_bytes = 1200, bidir = true }
      assert.is_true(res.reverse_received.unique_packets > 0)
    end)

    -- Our connect message is 41 bytes (magic + cookie); iperf3 reads the
    -- first 4 of it. Every one of four streams must connect and count.
    it('UDP -P 4 forward: the cookie after the connect magic is harmless', function()
      local res, j = run { proto = 'udp', bitrate_bps = 8e6, length_bytes = 1000, parallel = 4 }
      assert.equal(4, #res.streams)
      assert.equal(4, #j['end'].streams)
      assert.equal(j['end'].sum_received.packets, res.received.unique_packets + res.received.lost_packets)
      assert.equal(res.sent.packets, res.received.unique_packets + res.received.lost_packets)
      for _, s in ipairs(res.streams) do
        assert.is_true(s.receiver.unique_packets > 0, 'stream ' .. s.id .. ' received nothing')
      end
    end)

    it('UDP -n: the byte budget is exact on the sending side', function()
      local res = run { proto = 'udp', bytes = 100000, bitrate_bps = 10e6, length_bytes = 1000 }
      assert.equal(100000, res.sent.bytes)
      assert.equal(100, res.sent.packets)
    end)

    -- A stock iperf3 counts whole datagrams only, so toward it a byte limit
    -- that is no whole number of datagrams is rounded up, as iperf3 sends
    -- (an exact limit's short last datagram made us report 1001000 bytes
    -- received of 1000001 sent); and in reverse the iperf3 server sends
    -- until told TEST_END, which we now send at the limit as iperf3's own
    -- client does (our client ran on, booking its datagrams as invalid).
    it('UDP -n 100500 -l 1000, forward and -R: whole datagrams, the test ends', function()
      local res, j = run { proto = 'udp', bytes = 100500, bitrate_bps = 10e6, length_bytes = 1000 }
      assert.equal(101, res.sent.packets)
      assert.equal(101000, res.sent.bytes)
      assert.equal(j['end'].sum_received.bytes, res.received.bytes)
      assert.equal(101000, res.received.bytes)
      local t0 = H.now()
      res = run { proto = 'udp', bytes = 100500, bitrate_bps = 10e6, length_bytes = 1000,
        reverse = true }
      assert(H.now() - t0 < 5, string.format('the -R test took %.1f s', H.now() - t0))
      -- The iperf3 server stops only when our TEST_END reaches it, so some
      -- datagrams go past the limit: as many as it sends while our receiver
      -- reads the 101st and the control thread sees it (we look every ms;
      -- unloaded none; with a busy loop per core 1 in 20 runs 102, once 154
      -- when our receiver was off the CPU). They are the stream's and iperf3
      -- counts them as sent: received like the rest, none lost, none invalid
      -- (they were booked invalid and lost at once). The test still ends
      -- before iperf3 sent the limit twice.
      assert.equal(res.sent.packets, res.received.unique_packets)
      assert.equal(0, res.received.lost_packets)
      assert.equal(0, res.received.invalid_packets or 0)
      local over = res.sent.packets - 101
      assert(over >= 0 and over < 101, 'iperf3 sent ' .. res.sent.packets .. ' for a limit of 101')
    end)
  end)

  it('a busy iperf3 -s refuses a second qoslab client with EBUSY, its parameters sent unasked', function()
    -- Our client sends its parameters with the cookie, before the server
    -- asks: a busy iperf3 server reads only the cookie, writes
    -- ACCESS_DENIED and closes with the parameters unread (a reset). The
    -- refusal must still arrive as such, not as a broken connection.
    with_iperf3_server(function(port)
      local first = assert(traffic.start { host = '127.0.0.1', port = port, duration_s = 2 })
      local t_end = H.now() + 5
      while not (first:setup() and first:setup().start_time_unix_s) and H.now() < t_end do
        H.sleep(0.02)
      end
      assert(first:setup() and first:setup().start_time_unix_s, 'the first test did not start')
      for _ = 1, 5 do
        local r, msg, code = traffic.run { host = '127.0.0.1', port = port, duration_s = 1 }
        assert.is_nil(r)
        assert.equal('EBUSY', code)
        assert.matches('busy', msg)
      end
      assert(first:wait())
    end)
  end)

  describe('iperf3 -c -> qoslab server', function()
    local srv, port
    setup(function()
      port = H.port()
      local err, code
      srv, err, code = traffic.server { port = port, bind_address = '127.0.0.1' }
      assert(srv, tostring(err) .. ' ' .. tostring(code))
    end)
    teardown(function() if srv then srv:stop() end end)

    -- The result of the iperf3 test among the server's finished tests
    -- (the schema checks run qoslab clients against the same server).
    local function run(flags)
      local t_end = H.now() + 5
      while srv:tests_running() > 0 and H.now() < t_end do H.sleep(0.05) end
      local n = srv:finished()
      local j = iperf3_client(port, flags)
      local r
      t_end = H.now() + 10
      while not r and H.now() < t_end do
        -- the server keeps its last results: list[i] is test total - #list + i
        local list, total = srv:results()
        for i = math.max(1, n - (total - #list) + 1), #list do
          if list[i].peer == 'iperf3' then r = list[i] end
        end
        if not r then H.sleep(0.05) end
      end
      assert(r, 'the qoslab server has no result of the iperf3 test')
      assert.equal('server', r.local_role)
      H.identities(r, 'server vs iperf3 -c ' .. flags)
      return r, j
    end

    it('TCP -P 2 -l 64K -b 300M', function()
      local r, j = run('-t 1 -P 2 -l 64K -b 300M')
      local e = j['end']
      assert.equal(2, #r.streams)
      -- the server's log line for the start (run() waited for the result,
      -- and the iperf3 test was the last to start)
      local n, last = srv:started()
      assert.is_true(n >= 1)
      assert.matches('^test %d+ from 127%.0%.0%.1 port %d+: TCP, 2 streams, forward, 1 s, '
        .. '300 Mbit/s each, 65536%-byte writes, iperf3 client$', last)
      assert.equal(e.sum_received.bytes, r.received.bytes)
      tcp_shortfall_ok(e.sum_sent.bytes, r.received.bytes, 'qoslab server received')
      H.close_to(e.sum_sent.bits_per_second, r.received.bits_per_second, 0.1, 'rates')
      assert.is_number(e.cpu_utilization_percent.remote_total)
      schema_matches(j, traffic.to_iperf3_json(select(1, traffic.run {
        host = '127.0.0.1', port = port, duration_s = 1, parallel = 2, bitrate_bps = 300e6 })),
        'TCP -P 2')
    end)

    it('TCP -R: the qoslab server sends, iperf3 receives', function()
      local r, j = run('-t 1 -R -b 300M')
      local e = j['end']
      assert.equal(e.sum_sent.bytes, r.sent.bytes)
      tcp_shortfall_ok(r.sent.bytes, e.sum_received.bytes, 'iperf3 client received')
    end)

    it('TCP --bidir', function()
      local r, j = run('-t 1 --bidir -b 200M')
      local e = j['end']
      assert.is_true(r.bidir)
      assert.equal(e.sum_received.bytes, r.received.bytes)
      assert.equal(e.sum_sent_bidir_reverse.bytes, r.reverse_sent.bytes)
      schema_matches(j, traffic.to_iperf3_json(select(1, traffic.run {
        host = '127.0.0.1', port = port, duration_s = 1, bidir = true, bitrate_bps = 200e6 })),
        'TCP --bidir')
    end)

    it('TCP -w 256K reaches the server-side sockets', function()
      local r = run('-t 1 -w 256K -b 200M')
      local wmax = H.sysctl('net.core.wmem_max')
      local rmax = H.sysctl('net.core.rmem_max')
      local rb = r.streams[1].receiver.rcvbuf
      assert.equal(262144, rb.requested_bytes)
      assert.equal(2 * math.min(262144, rmax), rb.granted_bytes)
      local r2 = run('-t 1 -R -w 256K -b 200M')
      local sb = r2.streams[1].sender.sndbuf
      assert.equal(262144, sb.requested_bytes)
      assert.equal(2 * math.min(262144, wmax), sb.granted_bytes)
    end)

    it('TCP -n 1M and -O 1', function()
      local r, j = run('-n 1M')
      assert.is_true(j['end'].sum_sent.bytes >= 1048576)
      assert.equal(j['end'].sum_received.bytes, r.received.bytes)
      r, j = run('-t 2 -O 1 -b 200M')
      local omitted = 0
      for _, iv in ipairs(r.intervals) do if iv.omitted then omitted = omitted + 1 end end
      assert.is_true(omitted >= 1)
      -- Rates are not compared: iperf3 3.12 paces -b over the time since the
      -- test start, so after -O it sends above the target (seen: 250 Mbit/s
      -- at -b 200M). The bytes after the omit boundary must agree.
      assert.equal(j['end'].sum_received.bytes, r.received.bytes)
      -- Our server starts its clock one control message (TEST_RUNNING)
      -- before iperf3 starts its own, so its omit boundary comes first: a
      -- 128 KiB write iperf3 made in that gap counts as omitted there and
      -- as received here (seen once: received = sent + 131072).
      local sent = j['end'].sum_sent.bytes
      assert(r.received.bytes <= sent + 131072, string.format(
        'received after omit %d > sent %d + one write', r.received.bytes, sent))
      tcp_shortfall_ok(sent + 131072, r.received.bytes, 'received after omit')
    end)

    it('UDP -b 10M -l 1000 -P 2: loss, datagrams and jitter as the server measured them', function()
      local r, j = run('-u -t 1 -b 10M -l 1000 -P 2')
      local e = j['end']
      assert.equal(e.sum_sent.packets, r.sent.packets)
      assert.equal(r.sent.packets, r.received.unique_packets + r.received.lost_packets)
      assert.equal(e.sum_received.lost_packets, r.received.lost_packets)
      assert.near(r.received.jitter_ms, e.sum_received.jitter_ms, 1e-6)
      schema_matches(j, traffic.to_iperf3_json(select(1, traffic.run {
        host = '127.0.0.1', port = port, proto = 'udp', duration_s = 1, parallel = 2,
        bitrate_bps = 10e6, length_bytes = 1000 })), 'UDP -P 2')
    end)

    it('UDP -R and --bidir', function()
      local r, j = run('-u -t 1 -b 5M -l 1200 -R')
      local e = j['end']
      -- iperf3 3.12 as the receiver counts up to the highest sequence number
      -- seen before its own TEST_END, so datagrams still in flight then are
      -- missing from its count (iperf3's own fault): at most 1 % or 2.
      -- Our server sends nothing after iperf3's TEST_END (a sender stalled
      -- across the end once sent its last 52 due slots after it).
      local short = r.sent.packets - e.sum_received.packets
      assert(short >= 0 and short <= math.max(2, 0.01 * r.sent.packets), string.format(
        'qoslab server sent %d datagrams, iperf3 counted %d', r.sent.packets,
        e.sum_received.packets))
      H.paced(r.sent.bits_per_second, 5e6, 'server paced rate')
      r, j = run('-u -t 1 -b 5M -l 1200 --bidir')
      assert.is_true(r.received.unique_packets > 0)
      assert.is_true(r.reverse_sent.packets > 0)
      assert.equal(j['end'].sum_received.packets, r.received.unique_packets + r.received.lost_packets)
    end)

    it('UDP -O 1 forward and -R: the warm-up is left out alike at both ends', function()
      local r, j = run('-u -t 1 -O 1 -b 8M -l 1000')
      local e = j['end']
      -- iperf3 sent: its measured count is ours, exactly; it prints our
      -- booked total minus its warm-up, so its receiver line agrees too
      assert.equal(e.sum_sent.packets, r.sent.packets)
      assert.equal(r.sent.packets, r.received.unique_packets + r.received.lost_packets)
      assert.equal(r.sent.packets, e.sum_received.packets)
      assert.equal(r.received.lost_packets, e.sum_received.lost_packets)
      -- (iperf3's warm-up timer fires late, so our end's warm-up took one
      -- datagram more than its: with one measured interval, moving it back
      -- was once mistaken for the final share's fold: 999 of 1000)
      r, j = run('-u -t 1 -O 1 -b 8M -l 1000 -R')
      e = j['end']
      -- we sent; iperf3 splits its books on its own clock
      assert(math.abs(r.sent.packets - 1000) <= 20, 'sent ' .. r.sent.packets)
      assert(math.abs(e.sum_received.packets - r.sent.packets) <= 20, string.format(
        'iperf3 counted %d of our %d', e.sum_received.packets, r.sent.packets))
    end)

    it('UDP -k 300: exactly 300 datagrams', function()
      local r = run('-u -k 300 -b 10M -l 1000')
      assert.equal(300, r.sent.packets)
      assert.equal(300, r.received.unique_packets + r.received.lost_packets)
    end)

    -- iperf3 -c -R -n 2500 -l 1000 hung: our server cut the last datagram to
    -- 500 bytes, which iperf3 3.12 never counts, so it waited for it.
    it('UDP -R -n 2500 -l 1000: whole datagrams toward the iperf3 client', function()
      local r, j = run('-u -R -n 2500 -b 10M -l 1000')
      assert.equal(3, r.sent.packets)
      assert.equal(3000, r.sent.bytes)
      assert.equal(3000, j['end'].sum_received.bytes)
    end)
  end)
end)
