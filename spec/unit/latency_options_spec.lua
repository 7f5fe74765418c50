-- The latency probe's options: every rule lives once in the C core
-- (engine/probe_options.c), reached through core.probe_check, and raised at
-- the caller's line by qoslab.latency.probe and by the `probe` table of
-- qoslab.traffic.run / start / client. Each rule kind (unknown key, wrong
-- type, out of range, a rule by proto, a key only a probe alone takes)
-- names the field, says what was expected and points at this file.
local core = require 'qoslab.core'
local latency = require 'qoslab.latency'
local traffic = require 'qoslab.traffic'

local THIS = 'latency_options_spec%.lua'

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

describe('latency probe options: one check in C, raised at the caller', function()
  it('the standalone probe', function()
    expect('qoslab.latency.probe: opts.host: expected a host name or address, got nil',
      latency.probe, {})
    expect('qoslab.latency.probe: opts.interval_ms: expected a finite number in [1, 60000], got 0',
      latency.probe, { host = '127.0.0.1', interval_ms = 0 })
    expect('qoslab.latency.probe: opts.interval_ms: expected a finite number in [1, 60000], got nan',
      latency.probe, { host = '127.0.0.1', interval_ms = 0 / 0 })
    expect('qoslab.latency.probe: opts.proto: expected one of "udp", "icmp", "tcp", got string "sctp"',
      latency.probe, { host = '127.0.0.1', proto = 'sctp' })
    expect('qoslab.latency.probe: opts.tos: expected an integer in [0, 255], got 256',
      latency.probe, { host = '127.0.0.1', tos = 256 })
    expect('qoslab.latency.probe: opts.tos: expected an integer in [0, 255], got 1.5',
      latency.probe, { host = '127.0.0.1', tos = 1.5 })
    expect('qoslab.latency.probe: opts.payload_bytes: expected an integer in [56, 65507] for udp, got 55',
      latency.probe, { host = '127.0.0.1', payload_bytes = 55 })
    expect('qoslab.latency.probe: opts.payload_bytes: expected an integer in [24, 65499] for icmp, got 65500',
      latency.probe, { host = '127.0.0.1', proto = 'icmp', payload_bytes = 65500 })
    expect('qoslab.latency.probe: opts.clock_synced: expected a boolean, got string "yes"',
      latency.probe, { host = '127.0.0.1', clock_synced = 'yes' })
    expect('qoslab.latency.probe: opts.timeout_ms: expected a finite number in [1, 60000], got 0.5',
      latency.probe, { host = '127.0.0.1', timeout_ms = 0.5 })
    expect('qoslab.latency.probe: opts.duration_s: expected a finite number in [0.001, 86400], got 0',
      latency.probe, { host = '127.0.0.1', duration_s = 0 })
    expect('qoslab.latency.probe: opts.netns: expected a string without NUL bytes, got string "a\\0b"',
      latency.probe, { host = '127.0.0.1', netns = 'a\0b' })
    local err = expect('qoslab.latency.probe: opts.intervl_ms: unknown key (known keys: host, '
      .. 'port, proto, interval_ms, tos, payload_bytes, idle_s, timeout_ms, clock_synced, '
      .. 'duration_s, netns, bind_address)', latency.probe, { host = '127.0.0.1', intervl_ms = 1 })
    assert.truthy(err)
    -- a key that is no string is an unknown key, in the traffic options' words
    expect('qoslab.latency.probe: opts.1: unknown key (known keys: host, '
      .. 'port, proto, interval_ms, tos, payload_bytes, idle_s, timeout_ms, clock_synced, '
      .. 'duration_s, netns, bind_address)', latency.probe, { host = '127.0.0.1', [1] = 2 })
    expect('qoslab.latency.probe: opts: expected a table, got nil', latency.probe)
  end)

  it('beside a test: opts.probe.<key>, and the keys the test gives are unknown there', function()
    expect('qoslab.traffic.run: opts.probe.interval_ms: expected a finite number in [1, 60000], got 70000',
      traffic.run, { host = '127.0.0.1', probe = { interval_ms = 70000 } })
    expect('qoslab.traffic.start: opts.probe.idle_s: expected a finite number in [0, 3600], got -1',
      traffic.start, { host = '127.0.0.1', probe = { idle_s = -1 } })
    -- probe = true (the defaults) is taken, so a wrong value is told that
    expect('qoslab.client: opts.probe: expected a table or true, got 10',
      traffic.client, { host = '127.0.0.1', probe = 10 })
    expect('qoslab.traffic.run: opts.probe: expected a table or true, got string "yes"',
      traffic.run, { host = '127.0.0.1', probe = 'yes' })
    expect('qoslab.traffic.run: opts.probe.host: unknown key (known keys: port, proto, interval_ms, '
      .. 'tos, payload_bytes, idle_s, timeout_ms, clock_synced)',
      traffic.run, { host = '127.0.0.1', probe = { host = 'x' } })
    expect('qoslab.traffic.run: opts.probe.duration_s: unknown key (known keys: port, proto, '
      .. 'interval_ms, tos, payload_bytes, idle_s, timeout_ms, clock_synced)',
      traffic.run, { host = '127.0.0.1', probe = { duration_s = 1 } })
    expect('qoslab.traffic.run: opts.probe.1: unknown key (known keys: port, proto, '
      .. 'interval_ms, tos, payload_bytes, idle_s, timeout_ms, clock_synced)',
      traffic.run, { host = '127.0.0.1', probe = { 2 } })
    -- the test's own options are still checked after the probe's
    expect('qoslab.traffic.run: opts.parallel: expected an integer in [1, 128], got 0',
      traffic.run, { host = '127.0.0.1', parallel = 0, probe = {} })
  end)

  it('core.probe_check fills the defaults', function()
    assert.same({ proto = 'udp', interval_ms = 10, payload_bytes = 64, idle_s = 2,
      timeout_ms = 2000, clock_synced = false }, core.probe_check({}, 'x', 'opts.probe', false))
    assert.same({ proto = 'icmp', interval_ms = 10, payload_bytes = 64, idle_s = 0,
      timeout_ms = 2000, clock_synced = true, host = 'h', duration_s = 10, tos = 184 },
      core.probe_check({ host = 'h', proto = 'icmp', idle_s = 0, clock_synced = true, tos = 184 }))
  end)
end)
