-- qoslab.check (argument checks of the Lua layers) and qoslab.state (what a
-- run created, for `qoslab cleanup`).
local check = require 'qoslab.check'

describe('qoslab.check', function()
  it('names the function and the field', function()
    assert.error_matches(function() check.number('f', 'opts.x_ms', 'a', 0, 10) end,
      '^.-f: opts%.x_ms: expected a finite number in %[0, 10%], got string "a"$')
    assert.error_matches(function() check.number('f', 'x', 0 / 0, 0, 10) end, 'got nan')
    assert.error_matches(function() check.integer('f', 'n', 1.5, 1, 3) end, 'expected an integer')
    assert.error_matches(function() check.integer('f', 'n', 4, 1, 3) end, 'got 4')
    assert.error_matches(function() check.enum('f', 'p', 'sctp', { 'tcp', 'udp' }) end,
      'expected one of "tcp", "udp", got string "sctp"')
    assert.error_matches(function() check.keys('f', 'opts', { bogus = 1 }, { a = true }) end,
      'f: opts%.bogus: unknown key %(known keys: a%)')
  end)
  -- Whole numbers given as floats read "got 1.0", "got 1000000000.0" (Lua's
  -- tostring); the Lua describer and the binding's now write them as integers.
  it('a float with an integral value reads as an integer, here and in the binding', function()
    assert.equal('1000000000', check.describe(1e9))
    assert.equal('-5', check.describe(-5.0))
    assert.equal('1.5', check.describe(1.5))
    assert.equal('1e+30', check.describe(1e30))
    assert.equal('inf', check.describe(math.huge))
    assert.equal('nan', check.describe(0 / 0))
    assert.error_matches(function() check.integer('f', 'n', 4.0, 1, 3) end, 'got 4$')
    local traffic = require 'qoslab.traffic'
    assert.error_matches(function() traffic.run { host = 'x', parallel = 200.0 } end,
      'opts%.parallel: expected an integer in %[1, 128%], got 200$')
    assert.error_matches(function() traffic.run { host = 'x', omit_s = 1e9 } end, 'got 1000000000$')
    assert.error_matches(function() require('qoslab.netem').check { rate_bps = 1.0 } end,
      'spec%.rate_bps: expected 0 %(no limit%) or at least 8 %(bits/s; the kernel takes whole '
      .. 'bytes/s%), got 1$')
  end)
  it('returns values and defaults', function()
    assert.equal(5, check.integer('f', 'n', nil, 1, 9, 5))
    assert.equal(3, math.tointeger(check.integer('f', 'n', 3.0, 1, 9)))
    assert.equal('tcp', check.enum('f', 'p', nil, { 'tcp' }, 'tcp'))
  end)
end)

describe('qoslab.state', function()
  local dir
  local state
  before_each(function()
    dir = os.tmpname(); os.remove(dir)
    assert(os.execute('mkdir -p ' .. dir))
    package.loaded['qoslab.state'] = nil
    state = require 'qoslab.state'
    state.dir = function() return dir end
  end)
  after_each(function() os.execute('rm -rf ' .. dir) end)

  local function files()
    local p = io.popen('ls -1 ' .. dir); local out = {}
    for l in p:lines() do out[#out + 1] = l end
    p:close(); return out
  end

  it('writes a file per process and removes it when nothing remains', function()
    local a = state.record { kind = 'netns', name = 'ql-test-a' }
    local b = state.record { kind = 'link', ifname = 'vx', netns = 'ql-test-a' }
    assert.equal(1, #files())
    state.forget(b); state.forget(a)
    assert.same({}, files())
  end)

  it('cleanup replays files of dead processes only, newest first', function()
    -- A file left by a process that no longer exists (pid 2^22 + 7 cannot be live
    -- on a default pid_max; check it anyway).
    local dead = 4194311
    assert.is_nil(io.open('/proc/' .. dead .. '/stat'))
    local f = assert(io.open(dir .. '/' .. dead .. '.jsonl', 'w'))
    f:write('{"op":"add","id":1,"kind":"netns","name":"qlx-no-such-ns-1"}\n')
    f:write('{"op":"add","id":2,"kind":"link","ifname":"qlx-nolink","netns":"qlx-no-such-ns-1"}\n')
    f:write('{"op":"add","id":3,"kind":"netns","name":"qlx-no-such-ns-2"}\n')
    f:write('{"op":"del","id":3}\n')
    f:close()
    local r = state.cleanup()
    assert.equal(2, #r)
    assert.equal('link', r[1].kind)
    assert.equal('netns', r[2].kind)
    assert.equal('qlx-no-such-ns-1', r[2].name)
    assert.same({}, files())
  end)

  it('rejects bad input', function()
    assert.error_matches(function() state.record { kind = 'route' } end, 'what%.kind: expected one of')
    assert.error_matches(function() state.cleanup { everything = true } end, 'opts%.everything: unknown key')
  end)
end)
