-- opts.tos_per_stream end to end (root): stream i of each direction must
-- carry entry i of the list on the wire, also the streams the server sends
-- (reverse, bidir), which only a qoslab server can mark (it reads the list
-- from the test's parameters). Client and server run in two namespaces
-- joined by a veth pair; each end redirects its ingress to an ifb whose htb
-- classes count bytes per TOS (u32 on the TOS byte), so a stream that lost
-- its mark lands in the wrong class and fails the bounds. Against a stock
-- iperf3 server the reverse streams go unmarked and the result says so. A
-- server refuses hostile forms of the parameters key, naming it.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('opts.tos_per_stream on the wire', function()
    pending('core.traffic_client is not in this build')
  end)
  return
end

local TOS = { 0x00, 0x20, 0xa0, 0xb8 }

-- Bytes arriving on `dev` in namespace `ns`, per TOS of `list` (class i) and
-- "other": ingress mirred to an ifb with an htb class per TOS.
local function counters(ns, dev, list)
  local x = 'ip netns exec ' .. H.q(ns) .. ' '
  local cmds = {
    'ip link add qltos0 type ifb', 'ip link set qltos0 up',
    'tc qdisc add dev ' .. dev .. ' handle ffff: ingress',
    'tc filter add dev ' .. dev .. ' parent ffff: protocol all u32 match u32 0 0 '
      .. 'action mirred egress redirect dev qltos0',
    'tc qdisc add dev qltos0 root handle 1: htb default 99',
    'tc class add dev qltos0 parent 1: classid 1:99 htb rate 10gbit quantum 60000',
  }
  for i, tos in ipairs(list) do
    cmds[#cmds + 1] = string.format('tc class add dev qltos0 parent 1: classid 1:%d htb rate '
      .. '10gbit quantum 60000', i)
    cmds[#cmds + 1] = string.format('tc filter add dev qltos0 parent 1: protocol ip prio %d u32 '
      .. 'match ip tos 0x%02x 0xff flowid 1:%d', i, tos, i)
  end
  for _, c in ipairs(cmds) do H.must(x .. c) end
  local function read()
    local by = {}
    for minor, bytes in H.must(x .. 'tc -s class show dev qltos0')
        :gmatch('class htb 1:(%d+) .-Sent (%d+) bytes') do
      by[tonumber(minor) == 99 and 'other' or tonumber(minor)] = tonumber(bytes)
    end
    return by
  end
  local function close()
    H.sh(x .. 'tc qdisc del dev ' .. dev .. ' handle ffff: ingress')
    H.sh(x .. 'ip link del qltos0')
  end
  return read, close
end

-- The streams of res in `dir`, in their order, with what their receiver got.
local function streams_of(res, dir)
  local out = {}
  for _, s in ipairs(res.streams) do
    if s.direction == dir then out[#out + 1] = s end
  end
  return out
end

-- Every byte a stream's receiver counted came in a frame of its class, and
-- its class holds at most its own frames, the other direction's ACKs and a
-- little control traffic (for TCP: 1514 bytes per 1448 of payload, a fifth
-- more for retransmissions).
local function assert_marked(by, streams, list, other_bytes, what)
  for i, s in ipairs(streams) do
    local got = s.receiver.bytes
    assert.is_true(got > 0, what .. ' stream ' .. i .. ' moved nothing')
    assert.is_true((by[i] or 0) >= got, string.format('%s stream %d (TOS 0x%02x): %d bytes '
      .. 'received, %s counted in its class', what, i, list[i], got, tostring(by[i])))
    assert.is_true(by[i] <= 1.2 * got * 1514 / 1448 + 0.1 * (other_bytes[i] or 0) + 1e6,
      string.format('%s class 0x%02x: %d bytes for a stream of %d', what, list[i], by[i], got))
  end
end

describe('opts.tos_per_stream on the wire #root', function()
  local pair, srv, port
  local closers = {}

  setup(function()
    pair = H.netns_pair { offloads_off = false }
    port = H.port()
    srv = assert(traffic.server { port = port, netns = pair.b })
  end)

  teardown(function()
    for _, c in ipairs(closers) do c() end
    if srv then srv:stop() end
    if pair then pair.close() end
    H.cleanup_tmp()
  end)

  local function count(ns, dev, list)
    local read, close = counters(ns, dev, list)
    closers[#closers + 1] = close
    return read, close
  end

  it('TCP bidir: both ends mark stream i of their direction with entry i', function()
    local at_server, close_s = count(pair.b, pair.vb, TOS)
    local at_client, close_c = count(pair.a, pair.va, TOS)
    finally(function() close_s() close_c() end)
    local res = assert(traffic.run { host = pair.b_addr, port = port, netns = pair.a,
      duration_s = 1.5, bidir = true, parallel = 4, tos_per_stream = TOS,
      bitrate_bps = 50e6 })
    H.identities(res, 'tcp bidir')
    assert.equal('qoslab', res.peer)
    assert.same(TOS, res.options.tos_per_stream)
    local up, down = streams_of(res, 'forward'), streams_of(res, 'reverse')
    assert.equal(4, #up)
    assert.equal(4, #down)
    local upb, downb = {}, {}
    for i = 1, 4 do
      assert.equal(TOS[i], up[i].tos)
      assert.equal(TOS[i], down[i].tos)
      upb[i], downb[i] = up[i].receiver.bytes, down[i].receiver.bytes
    end
    assert_marked(at_server(), up, TOS, downb, 'upload')
    assert_marked(at_client(), down, TOS, upb, 'download')
    -- the server's own result records the marks it set on its streams
    local sres = assert(srv:wait_results(1, 5))
    local mine = sres[#sres]
    for _, s in ipairs(mine.streams) do
      local n = 0
      for _, t in ipairs(streams_of(mine, s.direction)) do
        n = n + 1
        if t.id == s.id then break end
      end
      assert.equal(TOS[n], s.tos, 'server stream ' .. s.id)
    end
  end)

  it('UDP reverse: the server marks its streams from the list', function()
    local list = { 0x28, 0x88 }
    local at_client, close_c = count(pair.a, pair.va, list)
    finally(close_c)
    local res = assert(traffic.run { host = pair.b_addr, port = port, netns = pair.a,
      proto = 'udp', duration_s = 1, reverse = true, parallel = 2, tos_per_stream = list,
      bitrate_bps = 20e6 })
    H.identities(res, 'udp reverse')
    local down = streams_of(res, 'reverse')
    assert.equal(2, #down)
    for i = 1, 2 do assert.equal(list[i], down[i].tos) end
    assert_marked(at_client(), down, list, {}, 'udp download')
    for _, w in ipairs(res.warnings) do assert.is_nil(w:find('tos_per_stream', 1, true), w) end
  end)

  it('a stock iperf3 server: its streams go unmarked, tos absent, and the result warns', function()
    local defer = H.cleanups(finally)
    local iport = H.port()
    local ip = H.spawn(string.format('exec ip netns exec %s iperf3 -s -1 -p %d', H.q(pair.b),
      iport), H.tmp('iperf3.log'))
    defer(function() H.kill(ip) end)
    assert(H.wait_listen(iport, pair.b, 5), 'iperf3 -s did not listen')
    local list = { 0x20, 0xb8 }
    local at_client, close_c = count(pair.a, pair.va, list)
    defer(close_c)
    local res = assert(traffic.run { host = pair.b_addr, port = iport, netns = pair.a,
      duration_s = 1, reverse = true, parallel = 2, tos_per_stream = list, bitrate_bps = 20e6 })
    assert.equal('iperf3', res.peer)
    local got = 0
    for _, s in ipairs(streams_of(res, 'reverse')) do
      assert.is_nil(s.tos)
      got = got + s.receiver.bytes
    end
    assert.is_true(got > 0)
    local by = at_client()
    -- the data came unmarked: neither class holds it, "other" does
    assert.is_true((by.other or 0) >= got, 'unmarked ' .. tostring(by.other) .. ' < ' .. got)
    for i = 1, 2 do assert.is_true((by[i] or 0) < 0.1 * got, 'class ' .. i .. ': ' .. by[i]) end
    local warned = false
    for _, w in ipairs(res.warnings) do
      warned = warned or w:find('tos_per_stream: the peer is not a qoslab server, so the 2 '
        .. 'streams it sent', 1, true) ~= nil
    end
    assert.is_true(warned, table.concat(res.warnings, '\n'))
  end)

  it('a qoslab server refuses hostile qoslab_tos_per_stream parameters, naming the key', function()
    local cases = {
      { '"x"', 'expected an array of integers in 0..255' },
      { '[1, 2, 3]', 'expected one entry per stream ("parallel")' },
      { '[1, 256]', 'expected an array of integers in 0..255' },
      { '[1, 2.5]', 'expected an array of integers in 0..255' },
    }
    local lport = H.port()
    local lsrv <close> = assert(traffic.server { port = lport, bind_address = '127.0.0.1' })
    for _, c in ipairs(cases) do
      local js = '{"tcp": true, "time": 1, "parallel": 2, "len": 1000, '
        .. '"qoslab": "spec", "qoslab_tos_per_stream": ' .. c[1] .. '}'
      local script = H.tmp('tosparams.py')
      local f = assert(io.open(script, 'w'))
      f:write(string.format([[
import socket, struct, sys
s = socket.create_connection(('127.0.0.1', %d), timeout=5)
s.sendall(b'abcdefghijklmnopqrstuvwxyz2345672345\0')
assert s.recv(1) == bytes([9]), 'no PARAM_EXCHANGE'
b = sys.argv[1].encode()
s.sendall(struct.pack('>I', len(b)) + b)
st = s.recv(1)
print(st[0] if st else 'closed')
]], lport))
      f:close()
      local ok, out = H.sh('python3 ' .. H.q(script) .. ' ' .. H.q(js))
      assert(ok, out)
      -- SERVER_ERROR (-2 as a byte), then the server closes
      assert.equal('254', out:gsub('%s+$', ''), c[1])
      local t_end, last = H.now() + 3
      repeat
        last = select(3, lsrv:problems()) or ''
        if last:find(c[2], 1, true) then break end
        H.sleep(0.02)
      until H.now() > t_end
      assert.matches('"qoslab_tos_per_stream": ' .. c[2], last, 1, true)
    end
    -- and it still serves
    local res = assert(traffic.run { host = '127.0.0.1', port = lport, duration_s = 0.5,
      parallel = 2, tos_per_stream = { 0x20, 0x28 } })
    assert.is_true(res.received.bytes > 0)
  end)
end)
