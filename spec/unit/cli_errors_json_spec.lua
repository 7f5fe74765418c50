-- The machine line of QOSLAB_ERRORS=json without running a command: the
-- field a check message names, the field of an argparse error (an option
-- mapped to its key), the exact line, and qoslab.cli.main's line for a
-- failure a command recorded and for one it did not.
local cli = require 'qoslab.cli'
require 'qoslab.cli.traffic'
local cjson = require 'cjson'

describe('qoslab.cli machine errors', function()
  it('finds the field of check messages', function()
    assert.equal('opts.port', cli.field_of('qoslab.client: opts.port: expected an integer in '
      .. '[0, 65535], got 70000'))
    assert.equal('opts.probe.proto', cli.field_of('./lua/qoslab/x.lua:3: qoslab.client: '
      .. 'opts.probe.proto: expected one of "udp", got string "x"'))
    assert.equal('spec.foo', cli.field_of('qoslab.shape.apply: spec.foo: unknown key (known keys: a)'))
    assert.equal('seconds', cli.field_of('seconds: expected a number'))
    assert.is_nil(cli.field_of('connect to 127.0.0.1 port 1: Connection refused (ECONNREFUSED)'))
    assert.is_nil(cli.field_of('12: expected x'))
  end)

  it('names an option of an argparse error by its key', function()
    assert.equal('opts.port', cli.usage_field('client', "-p: 'x' is not an integer"))
    assert.equal('opts.duration_s', cli.usage_field('client', "-t: 'x' is not a number"))
    assert.equal('host', cli.usage_field('client', "missing argument 'host'"))
    assert.equal('--no-such', cli.usage_field('client', "unknown option '--no-such'"))
    assert.is_nil(cli.usage_field(nil, "unknown command 'x'"))
  end)

  it('writes the line in the contract\'s layout, null for no field', function()
    assert.equal('qoslab-error: {"message": "a \\"b\\"", "code": "ENOENT", "field": null}',
      cli.error_line { message = 'a "b"', code = 'ENOENT' })
    assert.equal('qoslab-error: {"message": "m", "code": "EINVAL", "field": "opts.x"}',
      cli.error_line { message = 'm', code = 'EINVAL', field = 'opts.x' })
  end)
end)

describe('qoslab.cli.main with QOSLAB_ERRORS=json', function()
  local saved_getenv = os.getenv
  local saved_stderr
  local captured
  before_each(function()
    os.getenv = function(k)   -- luacheck: ignore 122
      if k == 'QOSLAB_ERRORS' then return 'json' end
      return saved_getenv(k)
    end
    saved_stderr = io.stderr
    captured = {}
    io.stderr = { write = function(self, ...)   -- luacheck: ignore 122
      for i = 1, select('#', ...) do captured[#captured + 1] = tostring((select(i, ...))) end
      return self
    end, flush = function() end }
  end)
  after_each(function()
    os.getenv = saved_getenv   -- luacheck: ignore 122
    io.stderr = saved_stderr   -- luacheck: ignore 122
  end)

  local function last_line()
    local text = table.concat(captured)
    local lines = {}
    for l in text:gmatch('[^\n]+') do lines[#lines + 1] = l end
    return lines[#lines], lines
  end

  it('takes the stderr line with a code when the command recorded none', function()
    assert.equal(1, cli.main { 'report', '/nonexistent-qoslab-dir' })
    local line, lines = last_line()
    assert.equal('qoslab report: not a folder: /nonexistent-qoslab-dir (ENOENT)', lines[1])
    assert.equal('qoslab-error: {"message": "qoslab report: not a folder: '
      .. '\\/nonexistent-qoslab-dir (ENOENT)", "code": "ENOENT", "field": null}', line)
    assert.equal(2, #lines)
  end)

  it('a plan that raises: the machine line carries its error, not the run\'s first note', function()
    local dir = os.tmpname()
    os.remove(dir)
    local plan = dir .. '.lua'
    local f = assert(io.open(plan, 'w'))
    f:write("error('the far end said no (ECONNREFUSED)')\n")
    f:close()
    local status = cli.main { 'run', plan, '--out', dir, '--host' }
    os.remove(plan)
    os.execute('rm -rf ' .. dir)
    assert.equal(1, status)
    local e = cjson.decode(last_line():match('^qoslab%-error: (.*)$'))
    assert.matches('the far end said no %(ECONNREFUSED%)$', e.message)
    assert.matches('^qoslab run: ', e.message)
    assert.equal('ECONNREFUSED', e.code)
  end)

  -- A plan's caller mistake gave "code": "EUNKNOWN", "field": null although
  -- its message names the field: a check's message is bad input.
  it('a plan\'s caller mistake: EINVAL and the field its message names (status 1)', function()
    local dir = os.tmpname()
    os.remove(dir)
    local plan = dir .. '.lua'
    local f = assert(io.open(plan, 'w'))
    f:write("qoslab.traffic.run{host = 5}\n")
    f:close()
    local status = cli.main { 'run', plan, '--out', dir, '--host' }
    os.remove(plan)
    os.execute('rm -rf ' .. dir)
    assert.equal(1, status)
    local e = cjson.decode(last_line():match('^qoslab%-error: (.*)$'))
    assert.matches(':1: qoslab.traffic.run: opts.host: expected a string, got 5$', e.message)
    assert.equal('EINVAL', e.code)
    assert.equal('opts.host', e.field)
  end)

  it('code_of: the trailing code, else EINVAL for a message naming a field, else the default', function()
    assert.equal('ENOENT', cli.code_of('x: opts.netns: expected y (ENOENT)', 'EUNKNOWN'))
    assert.equal('EINVAL', cli.code_of('f.lua:2: qoslab.client: opts.port: expected an integer', 'EUNKNOWN'))
    assert.equal('EINVAL', cli.code_of('qoslab.shape.apply: spec.foo: unknown key (known keys: a)', 'X'))
    assert.equal('EUNKNOWN', cli.code_of('f.lua:3: boom', 'EUNKNOWN'))
  end)

  -- `info --netns nonexist --json` exited 0 with the ENOENT buried in
  -- "sysctls": {"error": ...}: the namespace asked for must be there.
  it('info --netns of a missing namespace: status 1, ENOENT naming it, nothing printed', function()
    local saved_print = print
    local printed = {}
    print = function(...) printed[#printed + 1] = table.concat({ ... }, '\t') end   -- luacheck: ignore 121
    local status = cli.main { 'info', '--netns', 'qoslab-no-such-ns-033', '--json' }
    print = saved_print   -- luacheck: ignore 121
    assert.equal(1, status)
    assert.same({}, printed)
    local e = cjson.decode(last_line():match('^qoslab%-error: (.*)$'))
    assert.equal('ENOENT', e.code)
    assert.equal('--netns', e.field)
    assert.matches('^qoslab info: %-%-netns qoslab%-no%-such%-ns%-033: network namespace '
      .. '"qoslab%-no%-such%-ns%-033" does not exist', e.message)
  end)

  -- `info --ifname nosuchdev` printed "nosuchdev no such network device
  -- ... (ENODEV)" and exited 0, where a missing --netns exits 1.
  it('info --ifname of a missing device: status 1, ENODEV naming it, nothing printed', function()
    -- _G's print: the one the command calls (a spec's globals are its own)
    local saved_print = _G.print
    local printed = {}
    local function main(args)
      printed = {}
      _G.print = function(...) printed[#printed + 1] = table.concat({ ... }, '\t') end
      local ok, status = pcall(cli.main, args)
      _G.print = saved_print
      assert(ok, status)
      return status
    end
    for _, json in ipairs { false, true } do
      local args = { 'info', '--ifname', 'lo', '--ifname', 'qlnosuchdev' }
      if json then args[#args + 1] = '--json' end
      assert.equal(1, main(args))
      assert.same({}, printed)
      local e = cjson.decode(last_line():match('^qoslab%-error: (.*)$'))
      assert.equal('ENODEV', e.code)
      assert.equal('--ifname', e.field)
      assert.matches('^qoslab info: %-%-ifname qlnosuchdev: no such network device "qlnosuchdev"', e.message)
    end
    -- a device that is there: status 0, the record printed
    assert.equal(0, main { 'info', '--ifname', 'lo', '--json' })
    assert.equal('lo', cjson.decode(printed[1]).interfaces[1].ifname)
  end)

  it('a usage error: status 2, EINVAL, the argument as the field', function()
    assert.equal(2, cli.main { 'report' })
    local e = cjson.decode(last_line():match('^qoslab%-error: (.*)$'))
    assert.equal('EINVAL', e.code)
    assert.equal(1, select(2, table.concat(captured):gsub('qoslab%-error: ', '')))
  end)

  it('restores io.stderr afterwards', function()
    local before = io.stderr
    cli.main { 'report' }
    assert.equal(before, io.stderr)
  end)
end)
