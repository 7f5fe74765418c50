-- The check-only binding calls of the traffic options: every rule of the
-- client and server options lives once in the C core (options.c), reached
-- through core.traffic_client_check / core.traffic_server_check, and the
-- qoslab.traffic façade raises its message at its caller's line. Each rule
-- kind (unknown key, wrong type, out of range, cross-field) must name the
-- field, say what was expected and point at this file's line, not at a line
-- inside qoslab.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'

local THIS = 'traffic_options_check_spec%.lua'

-- f(...) is called from the line below `line` (not as a tail call, so that
-- line is the caller the message must name). Returns the message.
local function expect(message, f, ...)
  local args = table.pack(...)
  local line = debug.getinfo(1, 'l').currentline + 1
  local ok, err = pcall(function() local r = f(table.unpack(args, 1, args.n)); return r end)
  assert.is_false(ok, 'expected the error ' .. message)
  err = tostring(err)
  assert.equal(THIS:gsub('%%', '') .. ':' .. line .. ': ' .. message,
    err:match('([^/]*' .. THIS .. ':.*)$'))
  assert.is_nil(err:find('lua/qoslab/', 1, true), err)
  return err
end

-- The binding alone: the same message, without a position (a C function).
local function binding(message, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, 'expected the error ' .. message)
  assert.equal(message, tostring(err))
end

describe('traffic client options: one check in C, raised at the caller', function()
  it('an unknown key, also one that is no string', function()
    local known = '(known keys: host, port, proto, parallel, duration_s, bytes, packets, reverse, '
      .. 'bidir, omit_s, interval_s, window_bytes, sndbuf_bytes, rcvbuf_bytes, bitrate_bps, '
      .. 'length_bytes, congestion, mss_bytes, tos, tos_per_stream, nodelay, skip_rx_copy, zerocopy, cpu_affinity, '
      .. 'server_cpu_affinity, fq_rate_bps, bind_address, '
      .. 'bind_device, netns, connect_timeout_s, udp_batch, udp_gso, udp_drain_s, title)'
    expect('qoslab.client: opts.windw_bytes: unknown key ' .. known, traffic.client,
      { host = 'h', windw_bytes = 1 })
    expect('qoslab.traffic.run: opts.1: unknown key ' .. known, traffic.run, { host = 'h', [1] = 2 })
  end)

  -- Options behind __index passed the check, then the test ran on a raw
  -- copy without them and failed inside qoslab ("test.lua:40: qoslab.client:
  -- opts.host: ... got nil"): the check reads the table raw, as the copy does.
  it('a value behind __index is no option: the check says so at the caller', function()
    local proxy = setmetatable({}, { __index = { host = '127.0.0.1' } })
    expect('qoslab.traffic.run: opts.host: expected a host name or address, got nil', traffic.run, proxy)
    expect('qoslab.client: opts.host: expected a host name or address, got nil', traffic.client, proxy)
    -- A __pairs that shows other keys: the test runs on what was checked
    -- (it failed inside qoslab on "opts.bogus: unknown key").
    local shown = { host = '127.0.0.1', port = 9, bogus = 1 }
    local odd = setmetatable({ host = '127.0.0.1', port = 9, connect_timeout_s = 1 },
      { __pairs = function() return next, shown, nil end })
    local res, _, code = traffic.run(odd)
    assert.is_nil(res)
    assert.equal('ECONNREFUSED', code)
  end)

  it('a wrong type names the field and what was expected', function()
    expect('qoslab.client: opts.parallel: expected an integer in [1, 128], got string "2"',
      traffic.client, { host = 'h', parallel = '2' })
    expect('qoslab.traffic.start: opts.reverse: expected a boolean, got 1', traffic.start,
      { host = 'h', reverse = 1 })
    expect('qoslab.client: opts.proto: expected one of "tcp", "udp", got string "sctp"',
      traffic.client, { host = 'h', proto = 'sctp' })
    expect('qoslab.client: opts.host: expected a host name or address, got nil', traffic.client,
      { port = 5201 })
    expect('qoslab.client: opts: expected a table, got string "h"', traffic.client, 'h')
    binding('qoslab.client: opts.title: expected a string, got 5', core.traffic_client_check,
      { host = 'h', title = 5 })
  end)

  it('tos_per_stream: a list of one TOS byte per stream, not with tos', function()
    local exp = 'expected a list of 1..128 integers in [0, 255]'
    expect('qoslab.client: opts.tos_per_stream: ' .. exp .. ', got 184', traffic.client,
      { host = 'h', tos_per_stream = 184 })
    expect('qoslab.client: opts.tos_per_stream: ' .. exp .. ', got 0 entries', traffic.client,
      { host = 'h', tos_per_stream = {} })
    expect('qoslab.client: opts.tos_per_stream: ' .. exp .. ', got a table with keys other than '
      .. '1..n', traffic.client, { host = 'h', tos_per_stream = { 1, x = 2 } })
    expect('qoslab.client: opts.tos_per_stream[2]: expected an integer in [0, 255], got 256',
      traffic.client, { host = 'h', parallel = 2, tos_per_stream = { 1, 256 } })
    expect('qoslab.client: opts.tos_per_stream[1]: expected an integer in [0, 255], got string "1"',
      traffic.client, { host = 'h', tos_per_stream = { '1' } })
    expect('qoslab.client: opts.tos_per_stream: expected one entry per stream (opts.parallel = 4), '
      .. 'got 2', traffic.client, { host = 'h', parallel = 4, tos_per_stream = { 0, 0xb8 } })
    expect('qoslab.client: opts.tos_per_stream: cannot be combined with opts.tos (one TOS for '
      .. 'every stream, or one per stream)', traffic.client,
      { host = 'h', tos = 0, tos_per_stream = { 0xb8 } })
    local filled = core.traffic_client_check({ host = 'h', parallel = 2, bidir = true,
      tos_per_stream = { 0x20, 0xb8 } }, 'spec')
    assert.same({ 0x20, 0xb8 }, filled.tos_per_stream)
    assert.is_nil(filled.tos)
  end)

  it('out of range, NaN and the UDP payload range', function()
    expect('qoslab.client: opts.interval_s: expected a finite number in [0.1, 3600], got 0.05',
      traffic.client, { host = 'h', interval_s = 0.05 })
    expect('qoslab.traffic.run: opts.duration_s: expected a finite number in [0.001, 86400], got nan',
      traffic.run, { host = 'h', duration_s = 0 / 0 })
    expect('qoslab.client: opts.window_bytes: expected an integer in [1, 2147483647], got 2147483648',
      traffic.client, { host = 'h', window_bytes = 1 << 31 })
    -- the range of length_bytes is UDP's with proto = "udp", whatever the value
    for _, v in ipairs { 0, 8, 65508 } do
      expect('qoslab.client: opts.length_bytes: expected an integer in [16, 65507] for UDP, got '
        .. v, traffic.client, { host = 'h', proto = 'udp', length_bytes = v })
    end
    expect('qoslab.client: opts.length_bytes: expected an integer in [1, 16777216], got 0',
      traffic.client, { host = 'h', length_bytes = 0 })
    expect('qoslab.client: opts.bind_device: expected an interface name (1..15 characters), '
      .. 'got string "an-interface-name"', traffic.client,
      { host = 'h', bind_device = 'an-interface-name' })
    expect('qoslab.client: opts.title: expected a non-empty string, got string ""',
      traffic.client, { host = 'h', title = '' })
  end)

  it('cross-field rules name the field and the rule', function()
    expect('qoslab.client: opts.duration_s: cannot be combined with opts.bytes or opts.packets '
      .. '(one end condition)', traffic.client, { host = 'h', duration_s = 1, bytes = 10 })
    expect('qoslab.client: opts.packets: only for proto = "udp" (use opts.bytes for TCP)',
      traffic.client, { host = 'h', packets = 10 })
    expect('qoslab.traffic.start: opts.bidir: cannot be combined with opts.reverse (bidir '
      .. 'already runs both directions)', traffic.start, { host = 'h', reverse = true, bidir = true })
    expect('qoslab.client: opts.window_bytes: sets both buffers; use it or '
      .. 'opts.sndbuf_bytes/opts.rcvbuf_bytes, not both', traffic.client,
      { host = 'h', window_bytes = 1000, rcvbuf_bytes = 1000 })
    expect('qoslab.client: opts.nodelay: a TCP option, not valid with proto = "udp"',
      traffic.client, { host = 'h', proto = 'udp', nodelay = false })
    expect('qoslab.client: opts.udp_gso: a UDP option, only valid with proto = "udp"',
      traffic.client, { host = 'h', udp_gso = false })
    expect('qoslab.client: opts.skip_rx_copy: a TCP option, not valid with proto = "udp"',
      traffic.client, { host = 'h', proto = 'udp', skip_rx_copy = true })
    expect('qoslab.client: opts.skip_rx_copy: expected a boolean, got 1',
      traffic.client, { host = 'h', skip_rx_copy = 1 })
    expect('qoslab.client: opts.zerocopy: a TCP option, not valid with proto = "udp"',
      traffic.client, { host = 'h', proto = 'udp', zerocopy = true })
    local cpus = 'a CPU number in [0, 1023] or a list of 1..128 of them'
    expect('qoslab.client: opts.cpu_affinity: expected ' .. cpus .. ', got -1',
      traffic.client, { host = 'h', cpu_affinity = -1 })
    expect('qoslab.client: opts.server_cpu_affinity: expected ' .. cpus .. ', got string "0"',
      traffic.client, { host = 'h', server_cpu_affinity = '0' })
    expect('qoslab.client: opts.cpu_affinity[2]: expected an integer in [0, 1023], got 1024',
      traffic.client, { host = 'h', cpu_affinity = { 0, 1024 } })
    expect('qoslab.client: opts.cpu_affinity: expected ' .. cpus .. ', got 0 entries',
      traffic.client, { host = 'h', cpu_affinity = {} })
    assert.same({ 3 }, core.traffic_client_check { host = 'h', cpu_affinity = 3 }.cpu_affinity)
    assert.same({ 0, 1 },
      core.traffic_client_check { host = 'h', server_cpu_affinity = { 0, 1 } }.server_cpu_affinity)
    -- the binding raises the same message (ctx given or its default)
    binding('qoslab.client: opts.udp_gso: a UDP option, only valid with proto = "udp"',
      core.traffic_client_check, { host = 'h', udp_gso = false })
    binding('my.ctx: opts.udp_gso: a UDP option, only valid with proto = "udp"',
      core.traffic_client_check, { host = 'h', udp_gso = false }, 'my.ctx')
  end)

  it('returns the options as the test runs them, the defaults from C', function()
    local d = core.traffic_defaults()
    assert.same({ port = 5201, parallel = 1, duration_s = 10.0, connect_timeout_s = 10.0,
      tcp_length_bytes = 131072, udp_length_bytes = 1460, tcp_bitrate_bps = 0,
      udp_bitrate_bps = 1000000, udp_batch = 32 }, d)
    assert.same({ host = 'h', port = 5201, proto = 'tcp', parallel = 1, duration_s = 10.0,
      reverse = false, bidir = false, omit_s = 0.0, interval_s = 1.0, bitrate_bps = 0,
      length_bytes = 131072, nodelay = false, connect_timeout_s = 10.0 },
      core.traffic_client_check { host = 'h' })
    assert.is_true(core.traffic_client_check { host = 'h', skip_rx_copy = true }.skip_rx_copy)
    -- UDP: its bitrate and batch; the datagram size is chosen at start
    assert.same({ host = 'h', port = 9, proto = 'udp', parallel = 2, packets = 5, reverse = true,
      bidir = false, omit_s = 0.0, interval_s = 0.5, bitrate_bps = 1000000,
      connect_timeout_s = 10.0, udp_batch = 32, udp_gso = false },
      core.traffic_client_check { host = 'h', port = 9, proto = 'udp', parallel = 2,
        packets = 5, reverse = true, interval_s = 0.5 })
  end)
end)

describe('traffic server options: one check in C, raised at the caller', function()
  it('unknown key, wrong type, range', function()
    expect('qoslab.server: opts.prot: unknown key (known keys: port, bind_address, netns, '
      .. 'one_off, window_bytes, sndbuf_bytes, rcvbuf_bytes, idle_timeout_s, max_tests, '
      .. 'keep_results, max_tests_per_address, max_streams_per_address, max_unidentified, '
      .. 'max_unidentified_per_address, data_idle_s, max_duration_s, test_buffer_bytes)',
      traffic.server, { prot = 1 })
    expect('qoslab.server: opts.one_off: expected a boolean, got string "yes"', traffic.server,
      { one_off = 'yes' })
    expect('qoslab.server: opts.max_tests: expected an integer in [1, 4096], got 4097',
      traffic.server, { max_tests = 4097 })
    expect('qoslab.server: opts.max_duration_s: expected a finite number in [0.001, 2678400], '
      .. 'got inf', traffic.server, { max_duration_s = 1 / 0 })
    expect('qoslab.server: opts.bind_address: expected a non-empty string, got string ""',
      traffic.server, { bind_address = '' })
    assert.is_true(core.traffic_server_check())
    assert.is_true(core.traffic_server_check { port = 0, max_tests = 8 })
    binding('qoslab.server: opts.port: expected an integer in [0, 65535], got -1',
      core.traffic_server_check, { port = -1 })
  end)
end)
