-- The bare programs of the ceiling benchmark (bench/ceiling/*.c), each run
-- once briefly on loopback: they build warning-free, print their one result
-- line in the format bench/ceiling/lib.lua parses, with figures that hang
-- together (bytes moved, datagrams counted, the run's length, CPU seconds of
-- each end no more than the time they ran), and the packet-socket observer
-- sees exactly the paced flow a qoslab receiver counts.
local lib = dofile('bench/ceiling/lib.lua')
local traffic = require 'qoslab.traffic'

local function sh(cmd)
  local f = io.popen(cmd .. ' 2>&1')
  local s = f:read('a')
  local ok = f:close()
  return s, ok
end

local dir = sh('mktemp -d /tmp/qoslab-spec-ceiling.XXXXXX'):gsub('%s+$', '')

local function line_of(out)
  return assert(lib.parse_line(out:match('(ceiling [^\n]*)') or out))
end

describe('bench ceiling programs', function()
  lazy_setup(function()
    for _, p in ipairs { 'tcp', 'udp', 'pace' } do
      local out, ok = sh(string.format('${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes '
        .. '-Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wundef -Werror -pthread '
        .. '-o %s/%s bench/ceiling/%s.c', dir, p, p))
      assert(ok, p .. '.c: ' .. out)
    end
  end)
  lazy_teardown(function() sh('rm -rf ' .. dir) end)

  local function sane(t, secs)
    assert.is_true(t.bytes > 0)
    assert.is_true(t.seconds >= secs * 0.9 and t.seconds < secs + 5, 'seconds ' .. t.seconds)
    -- a thread's CPU time never exceeds the wall time it ran
    assert.is_true(t.tx_cpu_s >= 0 and t.tx_cpu_s <= t.seconds + 0.1)
    assert.is_true(t.rx_cpu_s >= 0 and t.rx_cpu_s <= t.seconds + 1)
  end

  it('tcp: one and two streams, with and without MSG_TRUNC', function()
    for _, args in ipairs { '', '-T', '-P 2', '-P 2 -T -l 65536' } do
      local t = line_of(sh(string.format('%s/tcp -a 127.0.0.1 -t 0.3 %s', dir, args)))
      assert.equal('tcp', t.path)
      assert.equal(0, t.datagrams)
      assert.equal(args:match('%-P 2') and 2 or 1, t.streams)
      assert.equal(args:match('%-T') and 1 or 0, t.trunc)
      sane(t, 0.3)
    end
  end)

  it('udp: 1400 B and 64 B, and with GSO/GRO', function()
    for _, args in ipairs { '-l 1400', '-l 64', '-l 1400 -G' } do
      local t = line_of(sh(string.format('%s/udp -a 127.0.0.1 -t 0.3 -b 32 %s', dir, args)))
      assert.equal('udp', t.path)
      local len = tonumber(args:match('%-l (%d+)'))
      assert.equal(len, t.length_bytes)
      assert.is_true(t.datagrams > 0 and t.datagrams <= t.sent_datagrams)
      if t.gso == 0 then
        -- one datagram per received message: the bytes are exact
        assert.equal(t.datagrams * len, t.bytes)
      else
        -- coalesced segments are counted from gso_size: all but a buffer's
        -- last are full
        assert.is_true(t.bytes <= t.datagrams * len and t.bytes > (t.datagrams - 1) * len * 0.5)
      end
      sane(t, 0.3)
    end
  end)

  it('refuses bad arguments with a message naming the option', function()
    local out = sh(dir .. '/udp -a 127.0.0.1 -l 0')
    assert.matches('%-l datagram bytes', out)
    out = sh(dir .. '/tcp -a nowhere')
    assert.matches('%-a: expected an IPv4 address', out)
  end)

  it('pace: the observer counts the bytes a qoslab receiver got, in 10 ms windows', function()
    local srv <close> = assert(traffic.server { port = 0, bind_address = '127.0.0.1' })
    local port = srv:port()
    local ready, out = dir .. '/ready', dir .. '/pace.out'
    local pid = sh(string.format('%s/pace -i lo -p %d -t 5 -w 10 -f %s >%s 2>&1 & echo $!',
      dir, port, ready, out)):match('%d+')
    finally(function() os.execute('kill ' .. pid .. ' 2>/dev/null') end)
    for _ = 1, 50 do
      local f = io.open(ready)
      local s = f and f:read('a')
      if f then f:close() end
      if s and s:match('ready\n') then break end
      os.execute('sleep 0.1')
    end
    local r = assert(traffic.run { host = '127.0.0.1', port = port, proto = 'udp',
      bitrate_bps = 20000000, length_bytes = 1000, duration_s = 0.5 })
    -- the observer ends 1 s after the last datagram
    for _ = 1, 50 do
      if not os.execute('kill -0 ' .. pid .. ' 2>/dev/null') then break end
      os.execute('sleep 0.1')
    end
    local f = assert(io.open(out))
    local t = line_of(f:read('a'))
    f:close()
    assert.equal('pace', t.path)
    assert.equal(10, t.window_ms)
    local sum = 0
    for _, b in ipairs(t.windows) do sum = sum + b end
    assert.equal(t.bytes, sum)
    assert.equal(0, t.drops)
    -- every datagram the receiver counted passed the observer first, and
    -- so did the stream's UDP connect datagram (iperf3's protocol: 4 bytes,
    -- or 4 and the 37-byte cookie)
    local got = r.received.unique_packets + r.received.duplicate_packets
    assert.equal(got + 1, t.datagrams)
    local extra = t.bytes - got * 1000
    assert.is_true(extra == 4 or extra == 41, 'connect datagram of ' .. extra .. ' bytes')
    -- 0.5 s of windows, give or take the first and last partial ones
    assert.is_true(#t.windows >= 45 and #t.windows <= 60, #t.windows .. ' windows')
  end)
end)
