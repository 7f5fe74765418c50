-- opts.start_at_mono_ns of qoslab.traffic.run/start/client and the client's
-- --start-at / --result-json flags, without a network: the value checked
-- where the caller wrote it (an integer ns, at most 1 s in the past), the
-- flag's parse, and the flag's field in the machine error line.
local traffic = require 'qoslab.traffic'
local cli_traffic = require 'qoslab.cli.traffic'
local timer = require 'qoslab.timer'

describe('opts.start_at_mono_ns', function()
  it('takes an integer ns time, refusing other values naming the field', function()
    for _, fn in ipairs { 'run', 'start', 'client' } do
      local ctx = fn == 'client' and 'qoslab.client' or ('qoslab.traffic.' .. fn)
      for _, bad in ipairs { 1.5, -1, 'x', true } do
        local ok, err = pcall(traffic[fn], { host = '127.0.0.1', start_at_mono_ns = bad })
        assert.is_false(ok)
        assert.matches('^' .. ctx:gsub('%.', '%%.') .. ': opts%.start_at_mono_ns: expected a '
          .. 'CLOCK_MONOTONIC time in integer nanoseconds >= 0', err)
      end
    end
  end)

  it('refuses a time more than 1 s past, saying how long ago', function()
    local at = timer.now_ns() - 1500000000
    local ok, err = pcall(traffic.run, { host = '127.0.0.1', start_at_mono_ns = at })
    assert.is_false(ok)
    assert.matches('^qoslab%.traffic%.run: opts%.start_at_mono_ns: expected a time at most 1 s '
      .. 'in the past %(CLOCK_MONOTONIC now %d+ ns%), got ' .. at .. ' %(1%.5%d%d s ago%)$', err)
    -- a pending test with a time 0.5 s past is fine (it would start at once)
    local t = traffic.client { host = '127.0.0.1', start_at_mono_ns = timer.now_ns() - 500000000 }
    assert.equal('qoslab.Test', getmetatable(t).__name)
  end)

  it('raises at the caller\'s line', function()
    local ok, err = pcall(function()
      traffic.run { host = '127.0.0.1', start_at_mono_ns = 0 }   -- this line
    end)
    assert.is_false(ok)
    assert.matches('traffic_start_at_spec%.lua:%d+: qoslab%.traffic%.run: opts%.start_at_mono_ns', err)
  end)
end)

describe('qoslab client --start-at, --result-json', function()
  it('parses integer ns only', function()
    assert.equal(123456789012345, cli_traffic.parse_mono_ns('123456789012345'))
    assert.equal('integer', math.type(cli_traffic.parse_mono_ns('5')))
    for _, bad in ipairs { '1.5', '-3', '1e9', '', 'x' } do
      local v, err = cli_traffic.parse_mono_ns(bad)
      assert.is_nil(v)
      assert.equal(string.format("'%s' is not a CLOCK_MONOTONIC time in integer nanoseconds "
        .. '(as qoslab clock prints it)', bad), err)
    end
  end)

  it('puts the time into the options and maps the flag to its key', function()
    local o, a = cli_traffic.parse_client { '127.0.0.1', '--start-at', string.format('%d', timer.now_ns() + 1000000000),
      '--result-json' }
    assert.truthy(o, a)
    assert.equal('integer', math.type(o.start_at_mono_ns))
    assert.is_true(a.result_json)
    assert.equal('opts.start_at_mono_ns', cli_traffic.FIELDS['--start-at'])
    assert.equal('opts.port', cli_traffic.FIELDS['-p'])
    local msg = cli_traffic.flag_message('qoslab.client: opts.start_at_mono_ns: expected x')
    assert.equal('--start-at (start_at_mono_ns): expected x', msg)
  end)

  it('plain: a result as JSON data, no metatable, non-finite numbers as strings', function()
    local r = setmetatable({ a = 1 / 0, b = { -1 / 0, 0 / 0, 5 }, n = 3 }, { __index = function() return 1 end })
    local p = cli_traffic.plain(r)
    assert.is_nil(getmetatable(p))
    assert.same({ a = 'inf', b = { '-inf', 'nan', 5 }, n = 3 }, p)
  end)
end)
