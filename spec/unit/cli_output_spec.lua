-- qoslab.cli.output and qoslab.cli.json_stream without a network: the
-- timestamp prefix (iperf3's "%c " by default, before the title), "%s",
-- a bad format refused at the flag, --logfile appended with the errors
-- in it, JSON written bare, and the events of a failed test.
local output = require 'qoslab.cli.output'
local json_stream = require 'qoslab.cli.json_stream'
local cjson = require 'cjson'

local function tmpname()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local function read(p)
  local f = assert(io.open(p))
  local s = f:read('a')
  f:close()
  return s
end

describe('qoslab.cli.output', function()
  it('prefixes text lines with the time and the title, not JSON', function()
    local p = tmpname()
    finally(function() os.remove(p) end)
    local before = os.time()
    local sink = assert(output.open { logfile = p, timestamps = { '%s|' } })
    sink:line('T', 'hello')
    sink:json('{"a":1}')
    sink:err('qoslab client: bad')
    sink:close()
    local after = os.time()
    local lines = {}
    for l in read(p):gmatch('[^\n]+') do lines[#lines + 1] = l end
    assert.equal(3, #lines)
    local t, rest = lines[1]:match('^(%d+)|(.*)$')
    assert.is_true(tonumber(t) >= before and tonumber(t) <= after)
    assert.equal('T:  hello', rest)
    assert.equal('{"a":1}', lines[2])
    assert.truthy(lines[3]:match('^%d+|qoslab client: bad$'))
  end)

  it('uses "%c " by default and appends to the log file', function()
    local p = tmpname()
    finally(function() os.remove(p) end)
    local f = assert(io.open(p, 'w'))
    f:write('old\n')
    f:close()
    local sink = assert(output.open { logfile = p, timestamps = {} })
    sink:line(nil, 'x')
    sink:close()
    local text = read(p)
    assert.equal('old\n', text:sub(1, 4))
    local stamp = text:sub(5):match('^(.*)x\n$')
    assert.equal(output.DEFAULT_TIME_FORMAT, '%c ')
    assert.truthy(stamp:match('%d%d:%d%d:%d%d %d%d%d%d $'), stamp)
  end)

  it('refuses a format os.date cannot render, naming the flag', function()
    local sink, msg, code = output.open { timestamps = { '%Q' } }
    assert.is_nil(sink)
    assert.equal('EINVAL', code)
    assert.truthy(msg:find('--timestamps', 1, true))
    assert.truthy(msg:find("'%Q'", 1, true))
  end)

  -- os.date's message quoted the rest of the format from the bad
  -- conversion on ('%Q%E%O', '%N '): the conversion itself is named
  it('names the bad conversion, not the rest of the format', function()
    for _, c in ipairs {
      { '%Q%E%O', "(invalid conversion specifier '%Q';" },
      { '%s.%N ', "(invalid conversion specifier '%N';" },
      { '%T %Ez', "(invalid conversion specifier '%Ez';" },
      { '%%%Q', "(invalid conversion specifier '%Q';" },
      { 'x %', "(a '%' at the end;" },
    } do
      local _, msg = output.open { timestamps = { c[1] } }
      assert.truthy(msg and msg:find(c[2], 1, true), c[1] .. ': ' .. tostring(msg))
    end
  end)

  it('says why a log file cannot be opened, with a code', function()
    local sink, msg, code = output.open { logfile = '/nonexistent-dir/x.log' }
    assert.is_nil(sink)
    assert.equal('ENOENT', code)
    assert.truthy(msg:find('--logfile', 1, true))
  end)
end)

describe('qoslab.cli.json_stream', function()
  it('a failed test: an error event, then an empty end event', function()
    local lines = {}
    local sink = { json = function(_, text) lines[#lines + 1] = text end }
    json_stream.new(sink):error('connect refused (ECONNREFUSED)')
    assert.equal(2, #lines)
    assert.same({ event = 'error', data = 'connect refused (ECONNREFUSED)' },
      cjson.decode(lines[1]))
    assert.equal('end', cjson.decode(lines[2]).event)
    assert.truthy(lines[2]:find('"data":{}', 1, true), lines[2])   -- an object, not []
    for _, l in ipairs(lines) do assert.is_nil(l:find('\n', 1, true)) end
  end)
end)

-- qoslab server's log had one line per rejected connection, without a
-- limit; these lines now go through a limiter that counts what it holds back.
describe('qoslab.cli.traffic line_limiter', function()
  local traffic_cli = require 'qoslab.cli.traffic'
  it('logs at most max lines a window, then one line with the exact count of the rest', function()
    local out = {}
    local function emit(l) out[#out + 1] = l end
    local lim = traffic_cli.line_limiter(10, 1)
    for i = 1, 200 do lim:line('r' .. i, 5 + i / 1000, emit) end
    lim:tick(5.9, emit)
    assert.equal(10, #out)
    assert.equal('r10', out[10])
    lim:count(7, 5.95, emit)   -- a ring's dropped entries count as held back
    lim:tick(6.05, emit)
    assert.equal('suppressed 197 similar lines in the last 1.0 s (at most 10 are logged per 1 s)', out[11])
    -- a new window logs again; flush ends it at once
    lim:line('s1', 7, emit)
    lim:line('s2', 7.1, emit)
    lim:flush(7.2, emit)
    assert.same({ 's1', 's2' }, { out[12], out[13] })
    assert.equal(13, #out)
    assert.equal(12, lim.logged_total)
    assert.equal(197, lim.suppressed_total)
    assert.equal(209, lim.logged_total + lim.suppressed_total)
  end)
end)
