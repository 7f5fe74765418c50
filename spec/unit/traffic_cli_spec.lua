-- `qoslab server` / `qoslab client` flag parsing: iperf3's flags and unit
-- suffixes, mapping onto qoslab.traffic options, and clear errors with exit
-- status 2 for bad command lines.
local ct = require 'qoslab.cli.traffic'

-- Run bin/qoslab with arguments; returns exit status, stdout, stderr.
local function qoslab(args)
  local errf = os.tmpname()
  local p = io.popen('lua5.4 bin/qoslab ' .. args .. ' 2>' .. errf)
  local out = p:read('a')
  local _, _, status = p:close()
  local f = io.open(errf)
  local err = f:read('a')
  f:close()
  os.remove(errf)
  return status, out, err
end

describe('qoslab.cli.traffic unit suffixes', function()
  it('rates are 1000-based in either case, like iperf3 (-b 2K = 2000)', function()
    assert.equal(2000, ct.parse_rate('2K'))
    assert.equal(2000, ct.parse_rate('2k'))
    assert.equal(1500000, ct.parse_rate('1.5M'))
    assert.equal(10000000, ct.parse_rate('10m'))
    assert.equal(1000000000, ct.parse_rate('1G'))
    assert.equal(1000000000000, ct.parse_rate('1T'))
    assert.equal(0, ct.parse_rate('0'))
    assert.equal(1234, ct.parse_rate('1234'))
  end)

  it('sizes are 1024-based in either case, like iperf3 (-l 1k = 1024)', function()
    assert.equal(1024, ct.parse_size('1k'))
    assert.equal(1024, ct.parse_size('1K'))
    assert.equal(1048576, ct.parse_size('1M'))
    assert.equal(4194304, ct.parse_size('4m'))
    assert.equal(1 << 30, ct.parse_size('1G'))
    assert.equal(1536, ct.parse_size('1.5K'))
    assert.equal(512, ct.parse_size('0.5k'))
    assert.equal(1460, ct.parse_size('1460'))
    assert.equal('integer', math.type(ct.parse_size('1.5K')))
  end)

  it('rejects what iperf3 would silently truncate', function()
    for _, s in ipairs { '', 'M', '10X', '1.2.3', '-5', '10 M x', 'nan', 'inf', '0x10' } do
      local v, err = ct.parse_rate(s)
      assert.is_nil(v, s)
      assert.matches("rate: '", err, 1, true)
      v, err = ct.parse_size(s)
      assert.is_nil(v, s)
      assert.matches("size: '", err, 1, true)
    end
    assert.matches('burst mode', select(2, ct.parse_rate('10M/100')))
    assert.matches('too large', select(2, ct.parse_size('9999999T')))
  end)

  it('-S takes decimal, 0x hex and 0 octal like iperf3 (52, 0x34, 064 are the same)', function()
    assert.equal(52, ct.parse_tos('52'))
    assert.equal(52, ct.parse_tos('0x34'))
    assert.equal(52, ct.parse_tos('064'))
    assert.is_nil(ct.parse_tos('256'))
    assert.is_nil(ct.parse_tos('089'))
    assert.is_nil(ct.parse_tos('x'))
  end)
end)

describe('qoslab client flags', function()
  it('maps every iperf3 flag onto the traffic options', function()
    local o = assert(ct.parse_client { '10.0.0.2', '-p', '5999', '-u', '-b', '10M', '-l', '1K',
      '-t', '2.5', '-P', '4', '-R', '-w', '256K', '-i', '0.5', '-O', '1', '-S', '0x10',
      '-B', '10.0.0.1', '--bind-dev', 'veth0', '-T', 'run1', '--fq-rate', '1G',
      '--connect-timeout', '1500', '--netns', 'ns1', '--udp-batch', '16', '--udp-gso',
      '--udp-drain', '0.5' })
    assert.same({ host = '10.0.0.2', port = 5999, proto = 'udp', bitrate_bps = 10000000,
      length_bytes = 1024, duration_s = 2.5, parallel = 4, reverse = true,
      window_bytes = 262144, interval_s = 0.5, omit_s = 1, tos = 16,
      bind_address = '10.0.0.1', bind_device = 'veth0', title = 'run1',
      fq_rate_bps = 1000000000, connect_timeout_s = 1.5, netns = 'ns1', udp_batch = 16,
      udp_gso = true, udp_drain_s = 0.5 }, o)
  end)

  it('TCP flags, --bidir, -n, --sndbuf/--rcvbuf', function()
    local o = assert(ct.parse_client { 'h', '--bidir', '-n', '1M', '--sndbuf', '1M',
      '--rcvbuf', '2M', '-C', 'cubic', '-M', '1400', '-N', '--skip-rx-copy', '-Z', '-A', '1,0' })
    assert.same({ host = 'h', port = 5201, proto = 'tcp', bidir = true, bytes = 1048576,
      sndbuf_bytes = 1048576, rcvbuf_bytes = 2097152, congestion = 'cubic',
      mss_bytes = 1400, nodelay = true, skip_rx_copy = true, zerocopy = true, cpu_affinity = 1,
      server_cpu_affinity = 0, interval_s = 1 }, o)
    assert.same({ cpu_affinity = 2 }, { cpu_affinity = assert(ct.parse_client { 'h', '-A', '2' })
      .cpu_affinity, server_cpu_affinity = assert(ct.parse_client { 'h', '-A', '2' })
      .server_cpu_affinity })
    local bad, err = ct.parse_client { 'h', '-A', '1,x' }
    assert.is_nil(bad)
    assert.matches("-A: expected n or n,m (CPU numbers), got '1,x'", err, 1, true)
  end)

  it('-k is a UDP datagram count; -i 0 turns reports off', function()
    local o, a = ct.parse_client { 'h', '-u', '-k', '2000', '-i', '0' }
    assert.equal(2000, o.packets)
    assert.is_nil(o.interval_s)
    assert.equal(0, a.interval)
    local _, err = ct.parse_client { 'h', '-k', '10' }
    assert.matches('-k: block counts are for UDP', err, 1, true)
  end)

  it('bad command lines give a message naming the flag', function()
    local bad = {
      { { 'h', '--frobnicate' }, "unknown option '--frobnicate'" },
      { { '-u' }, "missing argument 'host'" },
      { { 'h', '-b', '10X' }, "-b: rate: '10X'" },
      { { 'h', '-l', 'big' }, "-l: size: 'big'" },
      { { 'h', '-P', '0' }, '-P: 0 is out of range [1, 128]' },
      { { 'h', '-P', '1.5' }, "-P: '1.5' is not an integer" },
      { { 'h', '-t', 'x' }, "-t: 'x' is not a number" },
      { { 'h', '-p', '70000' }, '-p: 70000 is out of range' },
      { { 'h', '-i', '0.01' }, '-i: must be 0 (no reports) or at least 0.1 s' },
      { { 'h', '-M', '10' }, '-M: 10 is out of range [88, 32767]' },
      { { 'h', '-S', '300' }, '-S: 300 is out of range [0, 255]' },
      { { 'h', '-R', '--bidir' }, '--bidir (bidir): cannot be combined with -R (reverse)' },
      { { 'h', '-t', '1', '-n', '1M' }, '-t (duration_s): cannot be combined with -n (bytes)' },
      { { 'h', '-w', '1M', '--rcvbuf', '1M' }, '-w (window_bytes): sets both buffers' },
      { { 'h', '-u', '-l', '8' }, '-l (length_bytes): expected an integer in [16, 65507] for UDP' },
      { { 'h', '-u', '-C', 'cubic' }, '-C (congestion): a TCP option' },
      { { 'h', '--udp-gso' }, '--udp-gso (udp_gso): a UDP option' },
      -- sizes name the suffixes --help gives them (no T), rates theirs
      { { 'h', '-w', '1Q' }, "-w: size: '1Q' is not a number with an optional K, M or G suffix "
        .. '(K = 1024)' },
      { { 'h', '-b', '1Q' }, "-b: rate: '1Q' is not a number with an optional K, M, G or T "
        .. 'suffix (K = 1000)' },
    }
    for _, b in ipairs(bad) do
      local o, err = ct.parse_client(b[1])
      assert(not o, table.concat(b[1], ' ') .. ' was accepted')
      assert.matches(b[2], err, 1, true)
    end
  end)
end)

describe('qoslab server flags', function()
  it('maps -p, -1, -B, --netns, -w, --idle-timeout', function()
    local o = assert(ct.parse_server { '-p', '0', '-1', '-B', '127.0.0.1', '--netns', 'B',
      '-w', '4M', '--idle-timeout', '5' })
    assert.same({ port = 0, one_off = true, bind_address = '127.0.0.1', netns = 'B',
      window_bytes = 4194304, idle_timeout_s = 5 }, o)
    assert.same({ port = 5201 }, (ct.parse_server {}))
    -- the limits of a shared server, one flag each
    o = assert(ct.parse_server { '--max-tests', '8', '--max-tests-per-address', '3',
      '--max-streams-per-address', '64', '--max-unidentified', '100',
      '--max-unidentified-per-address', '4', '--data-idle', '20', '--max-duration', '86400',
      '--test-buffer', '256M' })
    assert.same({ port = 5201, max_tests = 8, max_tests_per_address = 3,
      max_streams_per_address = 64, max_unidentified = 100, max_unidentified_per_address = 4,
      data_idle_s = 20, max_duration_s = 86400, test_buffer_bytes = 256 << 20 }, o)
    o.port = 0   -- a free port: the options are accepted by the server as they are
    assert(require('qoslab.traffic').server(o)):stop()
    assert.matches('--max-tests-per-address: 0 is out of range',
      select(2, ct.parse_server { '--max-tests-per-address', '0' }), 1, true)
    assert.matches("unknown option '-u'", select(2, ct.parse_server { '-u' }), 1, true)
    assert.matches('-p: 65536 is out of range', select(2, ct.parse_server { '-p', '65536' }), 1,
      true)
  end)
end)

describe('bin/qoslab exit status for bad command lines', function()
  it('unknown flags and bad values exit 2 with a clear message', function()
    for _, c in ipairs {
      { 'client 127.0.0.1 --frobnicate', "unknown option '--frobnicate'" },
      { 'client 127.0.0.1 -b 10X', "-b: rate: '10X'" },
      { 'client 127.0.0.1 -R --bidir', '--bidir (bidir): cannot be combined' },
      { 'client', "missing argument 'host'" },
      { 'server -p nope', "-p: 'nope' is not an integer" },
      { 'server --frobnicate', "unknown option '--frobnicate'" },
    } do
      local status, out, err = qoslab(c[1])
      assert.equal(2, status, c[1])
      assert.equal('', out, c[1])
      assert.matches(c[2], err, 1, true)
    end
  end)

  it('negative numbers are values of their flag, with the unit in the message', function()
    for _, c in ipairs {
      { 'client 127.0.0.1 -t -5', '-t: expected a positive number of seconds (at most 86400), got -5' },
      { 'client 127.0.0.1 --time -5', '-t: expected a positive number of seconds (at most 86400), got -5' },
      { 'client 127.0.0.1 -n -1', "-n: size: '-1' is negative: expected bytes >= 0" },
      { 'client 127.0.0.1 -O -1', '-O: expected a number of seconds in [0, 3600], got -1' },
      { 'client 127.0.0.1 -i -1', '-i: expected a number of seconds in [0, 3600], got -1' },
      { 'client 127.0.0.1 -b -5', "-b: rate: '-5' is negative: expected bits/s >= 0" },
      { 'client 127.0.0.1 --connect-timeout 0',
        '--connect-timeout: expected a number of milliseconds in [1, 3600000], got 0' },
      { 'server -p -1', '-p: -1 is out of range [0, 65535]' },
      -- the message states the range the flag takes (it said bytes >= 0, and 0 was refused)
      { 'server --test-buffer -1M', "--test-buffer: expected a size >= 1 byte (K/M/G = 1024), got '-1M'" },
      { 'server --test-buffer 0', "--test-buffer: expected a size >= 1 byte (K/M/G = 1024), got '0'" },
      { 'server -w 0', "-w: expected a size >= 1 byte (K/M/G = 1024), got '0'" },
    } do
      local status, out, err = qoslab(c[1])
      assert.equal(2, status, c[1])
      assert.equal('', out, c[1])
      assert.matches(c[2], err, 1, true)
      assert.is_nil(err:find('unknown option', 1, true), err)
    end
    local o = assert(ct.parse_client { 'h', '-t', '2' })
    assert.equal(2, o.duration_s)
    assert.matches('-t: expected a positive number of seconds', select(2, ct.parse_client { 'h', '-t', '-5' }), 1, true)
  end)

  it('server --help states the defaults of -w, --idle-timeout and --data-idle', function()
    local status, out = qoslab('server --help')
    assert.equal(0, status)
    assert.matches('default: none, the kernel autotunes', out, 1, true)
    assert.matches('silent this long (s; default 30)', out, 1, true)
    assert.matches('so at least 12.8 s', out, 1, true)
    -- the cookie timeout is its own limit, shorter than the idle timeout
    assert.matches('A new connection that sends no cookie within 10 s (or this, when shorter) '
      .. 'is closed.', out:gsub('%s+', ' '), 1, true)
  end)

  -- A silent new connection was closed after 10 s ("no cookie within the
  -- idle timeout") while the idle timeout was documented as 30 s: the two
  -- limits are now named apart, and :limits() has both (defaults filled in).
  it('a server reports its idle timeout (30 s) and its cookie timeout (10 s)', function()
    local traffic = require 'qoslab.traffic'
    local srv = assert(traffic.server { port = 0, bind_address = '127.0.0.1' })
    local l = srv:limits()
    srv:stop()
    assert.equal(30, l.idle_timeout_s)
    assert.equal(10, l.cookie_timeout_s)
    srv = assert(traffic.server { port = 0, bind_address = '127.0.0.1', idle_timeout_s = 4 })
    l = srv:limits()
    srv:stop()
    assert.same({ 4, 4 }, { l.idle_timeout_s, l.cookie_timeout_s })
  end)

  it("errors show the subcommand's usage, not the top-level one", function()
    local _, _, err = qoslab('client 127.0.0.1 -t -5')
    assert.matches('^Usage: qoslab client ', err)
    assert.matches('\nqoslab client: error: %-t: ', err)
    _, _, err = qoslab('server --frobnicate')
    assert.matches('^Usage: qoslab server ', err)
    _, _, err = qoslab('frobnicate')
    assert.matches('^Usage: qoslab %[%-h%]', err)
  end)

  -- A bad flag used to print the command's whole usage block (11 lines)
  -- before the one-line error; now one usage line, the error, the pointer.
  it('a bad flag: one usage line, the error, and where the help is (every command)', function()
    for _, c in ipairs {
      { 'client 127.0.0.1 -P 0', 'Usage: qoslab client HOST [options]', 'client' },
      { 'server --frobnicate', 'Usage: qoslab server [options]', 'server' },
      { 'run', 'Usage: qoslab run FILE [ARGS...] [options]', 'run' },
      { 'netem show', 'Usage: qoslab netem ACTION [DEV] [SPEC...] [options]', 'netem' },
    } do
      local status, out, err = qoslab(c[1])
      assert.equal(2, status, c[1])
      assert.equal('', out)
      local lines = {}
      for l in err:gmatch('[^\n]+') do lines[#lines + 1] = l end
      assert.equal(3, #lines, err)
      assert.equal(c[2], lines[1])
      assert.matches('^qoslab ' .. c[3] .. ': error: ', lines[2])
      assert.equal('see qoslab ' .. c[3] .. ' --help', lines[3])
    end
  end)

  -- argparse right-aligned an option's aliases on lines of their own
  -- ("       -p <port>,        Server port." over "   --port <port>").
  it('--help writes short and long flags on one line, as iperf3 does', function()
    local status, out = qoslab('client --help')
    assert.equal(0, status)
    assert.matches('\n   %-p, %-%-port <port>%s+Server port%.', out)
    assert.matches('\n   %-k, %-%-blockcount <blockcount>\n%s+UDP datagrams', out)
    assert.matches('\n   %-u, %-%-udp%s+Use UDP', out)
    assert.is_nil(out:find('\n%s+%-%-port <port>\n'), out)
    assert.is_nil(out:find('<port>,', 1, true), out)
  end)

  it('--help lists the iperf3 flags', function()
    local status, out = qoslab('client --help')
    assert.equal(0, status)
    for _, f in ipairs { '-u', '-b', '-l', '-t', '-n', '-P', '-R', '--bidir', '-w', '-i', '-J',
        '-O', '-C', '-M', '-S', '-p', '--sndbuf', '--rcvbuf', '--netns' } do
      assert.matches('\n%s*' .. f:gsub('%-', '%%-') .. '[ ,]', out)
    end
    status, out = qoslab('server --help')
    assert.equal(0, status)
    for _, f in ipairs { '-p', '-1', '-B', '--netns', '-J' } do
      assert.matches('\n%s*' .. f:gsub('%-', '%%-') .. '[ ,]', out)
    end
  end)
end)

-- --plot's path was checked only after the test had run (a minute lost to
-- a read-only folder), and a missing folder was created quietly while
-- --logfile's gave ENOENT: both are now checked before connecting, alike.
describe('qoslab client --plot path', function()
  -- port 9 (discard) on loopback: nothing listens, so a test that started
  -- would end in ECONNREFUSED; the path's error must come first
  it('a missing folder: ENOENT before the test, exit 1, nothing created', function()
    local dir = os.tmpname()
    os.remove(dir)
    local status, out, err = qoslab('client 127.0.0.1 -p 9 -t 1 --plot ' .. dir .. '/x.png')
    assert.equal(1, status)
    assert.equal('', out)
    assert.equal('qoslab client: --plot: cannot open ' .. dir
      .. '/x.png: No such file or directory (ENOENT)\n', err)
    assert.is_nil(io.open(dir))
    -- the same shape as --logfile's
    local _, _, lerr = qoslab('client 127.0.0.1 -p 9 -t 1 --logfile ' .. dir .. '/x.log')
    assert.equal('qoslab client: --logfile: cannot open ' .. dir
      .. '/x.log: No such file or directory (ENOENT)\n', lerr)
  end)

  it('a file where a folder should be: ENOTDIR before the test; a good path is left as it was',
    function()
      local file = os.tmpname()
      local status, _, err = qoslab('client 127.0.0.1 -p 9 -t 1 --plot ' .. file .. '/x.png')
      assert.equal(1, status)
      assert.matches('--plot: cannot open ' .. file .. '/x.png: .*%(ENOTDIR%)', err)
      -- a writable path: the test runs (and is refused), no probe file left
      local png = file .. '.png'
      status, _, err = qoslab('client 127.0.0.1 -p 9 -t 1 --plot ' .. png)
      os.remove(file)
      assert.equal(1, status)
      assert.matches('ECONNREFUSED', err)
      assert.is_nil(io.open(png))
    end)

  -- the rule qoslab.plot's opts.out follows (qoslab.plot.gnuplot.picture_path):
  -- "dir/.png" names no picture there either
  it('FILE must end in .png or .svg, as qoslab.plot.test_plots takes it', function()
    for _, bad in ipairs { '/tmp/x.jpg', '/tmp/x.PNG', '/tmp/.png', '/tmp/x' } do
      local status, _, err = qoslab('client 127.0.0.1 -p 9 -t 1 --plot ' .. bad)
      assert.equal(2, status, bad)
      assert.matches("--plot: '" .. bad:gsub('%p', '%%%0') .. "' does not end in .png or .svg", err)
    end
  end)
end)

-- `--timestamps` and `--probe` take an optional value: placed just before
-- HOST they took it, and the error said only "missing argument 'host'".
describe('qoslab client: a host taken by --timestamps or --probe', function()
  it('says which flag took it and how to write it', function()
    local status, out, err = qoslab('client --timestamps 127.0.0.1 -p 9 -t 1')
    assert.equal(2, status)
    assert.equal('', out)
    assert.matches('qoslab client: error: HOST: missing; --timestamps took "127.0.0.1" as its '
      .. 'FORMAT: write --timestamps=FORMAT or put it after HOST\n', err, 1, true)
    local perr
    status, out, perr = qoslab('client -t 1 --probe localhost')
    assert.equal('', out)
    assert.equal(2, status)
    assert.matches('HOST: missing; --probe took "localhost" as its MS (milliseconds): '
      .. 'write --probe=MS or put it after HOST', perr, 1, true)
  end)

  it('keeps the plain message where the word is a format or a number', function()
    for _, args in ipairs { "client --timestamps '%T ' -t 1", 'client --probe 5 -t 1', 'client' } do
      local status, _, err = qoslab(args)
      assert.equal(2, status, args)
      assert.matches("error: missing argument 'host'\n", err, 1, true)
    end
  end)
end)

-- The probe's advice named the Lua option (probe proto = "icmp") on the
-- command line too: the CLI writes it as the flag.
describe('qoslab client: advice to set an option is written as its flag', function()
  it('opts.probe.proto = "icmp" reads --probe-proto icmp', function()
    local latency = require 'qoslab.latency'
    local msg = latency.advise('no qoslab server answers latency probes there',
      'EPROTONOSUPPORT', 'opts.probe.proto')
    assert.equal('no qoslab server answers latency probes there: use opts.probe.proto = "icmp"',
      msg)
    assert.equal('no qoslab server answers latency probes there: use --probe-proto icmp',
      ct.flag_message(msg))
    -- other codes get no advice; a field's name keeps its flag form
    assert.equal('x', latency.advise('x', 'ETIMEDOUT', 'opts.proto'))
    assert.equal('-w (window_bytes): too big', ct.flag_message('opts.window_bytes: too big'))
  end)
end)
