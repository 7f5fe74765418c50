-- qoslab.schedule without touching the kernel: steps are checked as netem's
-- specs (the step named in place of `spec`), times in order; CSV and
-- mahimahi traces become exact steps; a result's impairment changes draw as
-- step panels from their own data file.
local schedule = require 'qoslab.schedule'
local plot = require 'qoslab.plot'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-schedule-spec.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function write(path, text)
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
end

local function slurp(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('a')
  f:close()
  return s
end

-- The error of f(...) called from a line of this file, and the position
-- that line gives a message raised at it ("spec/unit/schedule_spec.lua:N: ").
local function raised_here(f, ...)
  local args = table.pack(...)
  local line
  local ok, e = pcall(function()
    line = debug.getinfo(1, 'l').currentline + 1
    local r = f(table.unpack(args, 1, args.n))
    return r
  end)
  assert.is_false(ok, 'expected an error')
  return tostring(e), string.format('%s:%d: ', debug.getinfo(1, 'S').short_src, line)
end

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'expected an error')
  return (tostring(e):gsub('^[^:]*%.lua:%d+: ', ''))
end

describe('qoslab.schedule.check', function()
  it('returns the canonical steps', function()
    local c = schedule.check { { at_s = 0, delay_ms = 20 }, { at_s = 5, delay_ms = 200, loss_pct = 1 },
      { at_s = 5, delay_ms = 0 } }
    assert.same({
      { at_s = 0, spec = { delay_ms = 20, limit_packets = 1000 } },
      { at_s = 5, spec = { delay_ms = 200, loss_pct = 1, limit_packets = 1000 } },
      { at_s = 5, spec = { limit_packets = 1000 } },
    }, c)
  end)

  it("names the step in netem's own wording", function()
    assert.equal('qoslab.schedule.check: steps[3].delay_ms: expected a finite number in [0, 1000000000], got -3',
      err_of(schedule.check, { { at_s = 0 }, { at_s = 1 }, { at_s = 2, delay_ms = -3 } }))
    local netem_msg = err_of(require('qoslab.netem').check, { reorder_pct = 5 }, 'X')
    local step_msg = err_of(schedule.check, { { at_s = 0, reorder_pct = 5 } }, 'X')
    assert.equal('X: steps[1].reorder_pct: reordering needs steps[1].delay_ms > 0 '
      .. '(packets are reordered by sending them without the delay)', step_msg)
    assert.equal(netem_msg:gsub('spec', 'steps[1]'), step_msg)
    assert.matches('^X: steps%[1%]%.bogus: unknown key', err_of(schedule.check, { { at_s = 0, bogus = 1 } }, 'X'))
  end)

  it('checks the times', function()
    assert.equal('S: steps[1].at_s: expected a finite number of seconds in [0, 1e9], got nil',
      err_of(schedule.check, { { delay_ms = 1 } }, 'S'))
    assert.equal('S: steps[2].at_s: expected a finite number of seconds in [0, 1e9], got -1',
      err_of(schedule.check, { { at_s = 0 }, { at_s = -1 } }, 'S'))
    assert.equal('S: steps[2].at_s: expected a finite number of seconds in [0, 1e9], got nan',
      err_of(schedule.check, { { at_s = 0 }, { at_s = 0 / 0 } }, 'S'))
    assert.equal('S: steps[3].at_s: expected >= steps[2].at_s = 2 (steps in time order), got 1.5',
      err_of(schedule.check, { { at_s = 0 }, { at_s = 2 }, { at_s = 1.5 } }, 'S'))
    assert.equal('S: steps: expected a non-empty list of steps, got a table that is not a list',
      err_of(schedule.check, { { at_s = 0 }, x = 1 }, 'S'))
    assert.equal('S: steps: expected a non-empty list of steps, got string "x"',
      err_of(schedule.check, 'x', 'S'))
    assert.equal('S: steps[1]: expected a table {at_s =, <spec keys>}, got number',
      err_of(schedule.check, { 5 }, 'S'))
  end)

  -- The values in these messages are written as tb:impair writes them
  -- (qoslab.check's wording): an empty list was called "a table that is not
  -- a list", a string time printed bare (`got 1`, as if the number 1 were
  -- refused) and NaN printed as the C library's "-nan".
  it('says what it got as tb:impair does: an empty list, a string, nan', function()
    assert.equal('S: steps: expected a non-empty list of steps, got an empty list',
      err_of(schedule.check, {}, 'S'))
    assert.equal('S: steps[1].at_s: expected a finite number of seconds in [0, 1e9], got string "1"',
      err_of(schedule.check, { { at_s = '1', delay_ms = 1 } }, 'S'))
    assert.equal('S: steps[1].at_s: expected a finite number of seconds in [0, 1e9], got nan',
      err_of(schedule.check, { { at_s = -(0 / 0) } }, 'S'))
    assert.equal('S: steps[1].at_s: expected a finite number of seconds in [0, 1e9], got nan',
      err_of(schedule.check, { { at_s = 0 / 0 } }, 'S'))
  end)

  -- A schedule was unbounded: a trace read for 1e6 s gave ten million steps
  -- without a word. MAX_STEPS is the C core's bound, checked first here.
  it('takes at most MAX_STEPS steps', function()
    assert.equal(100000, schedule.MAX_STEPS)
    local steps = {}
    for i = 1, schedule.MAX_STEPS + 1 do steps[i] = { at_s = 0 } end
    assert.equal('S: steps: expected at most 100000 steps (qoslab.schedule.MAX_STEPS), got 100001',
      err_of(schedule.check, steps, 'S'))
  end)

  it('refuses limit_packets = "auto" on the link', function()
    assert.matches('S: steps%[2%]%.limit_packets: "auto" is kernel netem',
      err_of(schedule.check, { { at_s = 0 }, { at_s = 1, limit_packets = 'auto' } }, 'S', 'link'))
    assert.equal('auto', schedule.check({ { at_s = 1, limit_packets = 'auto' } })[1].spec.limit_packets)
  end)
end)

describe('qoslab.schedule traces', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('reads a CSV trace into exact steps', function()
    write(dir .. '/t.csv', 'time_s,delay_ms,loss_pct,rate_bps,distribution\n# comment\n'
      .. '0,20,,10000000,\n\n2.5, 200 ,1,,normal\r\n4,0,0,,\n')
    write(dir .. '/t.csv', 'time_s,delay_ms,jitter_ms,loss_pct,rate_bps,distribution\n# comment\n'
      .. '0,20,,,10000000,\n\n2.5, 200 ,5,1,,normal\r\n4,0,,0,,\n')
    local steps = assert(schedule.read_csv(dir .. '/t.csv'))
    assert.same({
      { at_s = 0, delay_ms = 20, rate_bps = 10000000 },
      { at_s = 2.5, delay_ms = 200, jitter_ms = 5, loss_pct = 1, distribution = 'normal' },
      { at_s = 4, delay_ms = 0, loss_pct = 0 },
    }, steps)
    local c = schedule.check(steps)
    assert.same({ delay_ms = 200, jitter_ms = 5, loss_pct = 1, distribution = 'normal', limit_packets = 1000 },
      c[2].spec)
  end)

  it('says what is wrong with a CSV trace', function()
    local function fails(text)
      write(dir .. '/b.csv', text)
      local v, msg, code = schedule.read_csv(dir .. '/b.csv')
      assert.is_nil(v)
      assert.equal('EINVAL', code)
      return (msg:gsub(dir:gsub('%p', '%%%0'), 'DIR'))
    end
    assert.equal('qoslab.schedule.read_csv: DIR/b.csv:1: expected a header starting with time_s, got "t,delay_ms"',
      fails('t,delay_ms\n0,1\n'))
    assert.equal('qoslab.schedule.read_csv: DIR/b.csv:2: expected 2 columns as the header, got 3',
      fails('time_s,delay_ms\n0,1,2\n'))
    assert.equal('qoslab.schedule.read_csv: DIR/b.csv:3: time_s: expected a number of seconds in decimal '
      .. 'notation, got "x"', fails('time_s,delay_ms\n0,1\nx,2\n'))
    assert.matches('^qoslab%.schedule%.read_csv: DIR/b%.csv:1: column 2: expected a spec key %(known keys: '
      .. 'delay_ms, jitter_ms, .*%), got "delay ms"$', fails('time_s,delay ms\n0,1\n'))
    assert.equal('qoslab.schedule.read_csv: DIR/b.csv: no steps', fails('time_s,delay_ms\n'))
    local v, _, code = schedule.read_csv(dir .. '/none.csv')
    assert.is_nil(v)
    assert.equal('ENOENT', code)
  end)

  it('turns a mahimahi trace into rate steps over windows, looping it', function()
    -- period 20 ms: 3 opportunities in ms 1..10 (one at 10 counts in the
    -- first window [0, 10)), 1 in ms 11..20
    write(dir .. '/m.trace', '1\n1\n10\n20\n')
    local steps = assert(schedule.read_mahimahi(dir .. '/m.trace',
      { duration_s = 0.045, window_ms = 10, spec = { delay_ms = 5 } }))
    local b = 1500 * 8 * 100   -- one opportunity per 10 ms, in bits/s
    assert.same({
      { at_s = 0, rate_bps = 3 * b, delay_ms = 5 },
      { at_s = 0.01, rate_bps = 1 * b, delay_ms = 5 },
      { at_s = 0.02, rate_bps = 3 * b, delay_ms = 5 },
      { at_s = 0.03, rate_bps = 1 * b, delay_ms = 5 },
      -- the last window is 5 ms, ms 0..4 of the period: the two at 1 ms
      { at_s = 0.04, rate_bps = 2 * 1500 * 8 * 200, delay_ms = 5 },
    }, steps)
    -- mm-link's fixed-rate example: "1" is one packet per ms, 12 Mbit/s
    write(dir .. '/fixed.trace', '1\n')
    assert.same({ { at_s = 0, rate_bps = 12000000 }, { at_s = 0.1, rate_bps = 12000000 } },
      schedule.read_mahimahi(dir .. '/fixed.trace', { duration_s = 0.2 }))
    -- a window without an opportunity: the smallest rate netem takes
    write(dir .. '/gap.trace', '30\n')
    local g = assert(schedule.read_mahimahi(dir .. '/gap.trace', { duration_s = 0.03, window_ms = 10 }))
    assert.same({ { at_s = 0, rate_bps = 8 }, { at_s = 0.01, rate_bps = 8 },
      { at_s = 0.02, rate_bps = 1500 * 8 * 100 } }, g)
    assert.equal(3, #schedule.check(g))
  end)

  it('says what is wrong with a mahimahi trace or its opts', function()
    write(dir .. '/d.trace', '5\n3\n')
    local v, msg, code = schedule.read_mahimahi(dir .. '/d.trace', { duration_s = 1 })
    assert.is_nil(v)
    assert.equal('EINVAL', code)
    assert.equal('qoslab.schedule.read_mahimahi: DIR/d.trace:2: times must not decrease (3 after 5)',
      (msg:gsub(dir:gsub('%p', '%%%0'), 'DIR')))
    write(dir .. '/z.trace', '0\n0\n')
    assert.matches('a last one > 0 ms', select(2, schedule.read_mahimahi(dir .. '/z.trace', { duration_s = 1 })))
    write(dir .. '/x.trace', '1.5\n')
    assert.matches('x.trace:1: expected an integer of ms, got "1.5"',
      select(2, schedule.read_mahimahi(dir .. '/x.trace', { duration_s = 1 })), 1, true)
    assert.matches('opts.duration_s: expected a number of seconds in %(0, 1e6%], got nil',
      err_of(schedule.read_mahimahi, dir .. '/x.trace', {}))
    assert.matches('opts.window_ms: expected an integer in %[1, 60000%], got 2.5',
      err_of(schedule.read_mahimahi, dir .. '/x.trace', { duration_s = 1, window_ms = 2.5 }))
    assert.matches('opts.bogus: unknown key', err_of(schedule.read_mahimahi, dir .. '/x.trace', { bogus = 1 }))
  end)

  -- read_mahimahi{duration_s = 1e6} returned ten million steps (one per
  -- 100 ms window) without a word, and a CSV trace had no bound on its
  -- rows: both stop at MAX_STEPS, naming the field or the line and the bound.
  it('bounds the steps of a trace', function()
    write(dir .. '/f.trace', '1\n')
    assert.equal('qoslab.schedule.read_mahimahi: opts.duration_s: expected at most 100000 windows of '
      .. 'opts.window_ms = 100 ms, i.e. 10000 s (qoslab.schedule.MAX_STEPS steps), got 1000000',
      err_of(schedule.read_mahimahi, dir .. '/f.trace', { duration_s = 1e6 }))
    assert.matches('opts.duration_s: expected at most 100000 windows of opts.window_ms = 10 ms, i.e. 1000 s',
      err_of(schedule.read_mahimahi, dir .. '/f.trace', { duration_s = 1000.001, window_ms = 10 }), 1, true)
    -- the bound itself is taken
    local steps = assert(schedule.read_mahimahi(dir .. '/f.trace', { duration_s = 1000, window_ms = 10 }))
    assert.equal(100000, #steps)
    assert.same({ at_s = 999.99, rate_bps = 12000000 }, steps[100000])
    -- the longest replay is counted per window from the period's sorted
    -- times (not ms by ms: 1e9 of them)
    local t0 = os.clock()
    steps = assert(schedule.read_mahimahi(dir .. '/f.trace', { duration_s = 1e6, window_ms = 60000 }))
    assert.equal(16667, #steps)
    assert.same({ at_s = 999960, rate_bps = 12000000 }, steps[16667])
    assert(os.clock() - t0 < 10, 'read_mahimahi took ' .. (os.clock() - t0) .. ' s of CPU')
    local rows = { 'time_s,delay_ms' }
    for i = 0, schedule.MAX_STEPS do rows[#rows + 1] = i .. ',1' end
    write(dir .. '/big.csv', table.concat(rows, '\n') .. '\n')
    local v, msg, code = schedule.read_csv(dir .. '/big.csv')
    assert.is_nil(v)
    assert.equal('EINVAL', code)
    assert.equal('qoslab.schedule.read_csv: DIR/big.csv:100002: expected at most 100000 steps (data lines; '
      .. 'qoslab.schedule.MAX_STEPS), got more', (msg:gsub(dir:gsub('%p', '%%%0'), 'DIR')))
    table.remove(rows)
    write(dir .. '/max.csv', table.concat(rows, '\n') .. '\n')
    assert.equal(100000, #assert(schedule.read_csv(dir .. '/max.csv')))
  end)
end)

-- A CSV trace was taken as it came and checked only when a schedule
-- started, without file or line: `abc`, `nan`, `-5`, `inf`, `1e400` became
-- steps (strings, infinities), an unknown column was any spec key, a
-- repeated one let the last win, times could go back, and `0x10` was read
-- as 16 s. Each line is now checked as it is read, by the checks a step
-- gets, and named by file, line and column.
describe('qoslab.schedule.read_csv checks each line as it reads it', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function fails(text)
    write(dir .. '/b.csv', text)
    local v, msg, code = schedule.read_csv(dir .. '/b.csv')
    assert.is_nil(v)
    assert.equal('EINVAL', code)
    return (msg:gsub(dir:gsub('%p', '%%%0'), 'DIR'))
  end

  it('refuses a value a step refuses, naming file, line and column', function()
    local P = 'qoslab.schedule.read_csv: DIR/b.csv:'
    local range = 'expected a finite number in [0, 1000000000], got '
    assert.equal(P .. '3: delay_ms: ' .. range .. 'string "abc"', fails('time_s,delay_ms\n0,1\n2,abc\n'))
    assert.equal(P .. '2: delay_ms: ' .. range .. 'string "nan"', fails('time_s,delay_ms\n0,nan\n'))
    assert.equal(P .. '2: delay_ms: ' .. range .. '-5', fails('time_s,delay_ms\n0,-5\n'))
    assert.equal(P .. '2: delay_ms: ' .. range .. 'string "inf"', fails('time_s,delay_ms\n0,inf\n'))
    assert.equal(P .. '2: delay_ms: ' .. range .. 'inf', fails('time_s,delay_ms\n0,1e400\n'))
    assert.equal(P .. '2: loss_pct: expected a finite number in [0, 100], got 150',
      fails('time_s,delay_ms,loss_pct\n0,1,150\n'))
    -- a rule between two columns names both as columns
    assert.equal(P .. '2: reorder_pct: reordering needs delay_ms > 0 (packets are reordered by '
      .. 'sending them without the delay)', fails('time_s,delay_ms,reorder_pct\n0,0,5\n'))
    -- time_s: decimal notation, the range of at_s, in order
    assert.equal(P .. '2: time_s: expected a number of seconds in decimal notation, got "0x10"',
      fails('time_s,delay_ms\n0x10,1\n'))
    assert.equal(P .. '2: delay_ms: ' .. range .. 'string "0x10"', fails('time_s,delay_ms\n0,0x10\n'))
    assert.equal(P .. '2: time_s: expected a finite number of seconds in [0, 1e9], got -5',
      fails('time_s,delay_ms\n-5,1\n'))
    assert.equal(P .. '2: time_s: expected a finite number of seconds in [0, 1e9], got inf',
      fails('time_s,delay_ms\n1e400,1\n'))
    assert.equal(P .. '2: time_s: expected a number of seconds in decimal notation, got "nan"',
      fails('time_s,delay_ms\nnan,1\n'))
    assert.equal(P .. '5: time_s: expected >= 5 (the time on line 3: times in order), got 1',
      fails('time_s,delay_ms\n0,1\n5,2\n# back in time\n1,3\n'))
  end)

  it('refuses an unknown or a repeated column at the header', function()
    assert.matches('^qoslab%.schedule%.read_csv: DIR/b%.csv:1: column 2: expected a spec key %(known keys: '
      .. 'delay_ms, .*, keep_order%), got "bogus"$', fails('time_s,bogus\n0,1\n'))
    assert.equal('qoslab.schedule.read_csv: DIR/b.csv:2: column 3: expected each column once, got '
      .. '"delay_ms" again (column 2)', fails('# a comment first\ntime_s,delay_ms,delay_ms\n0,1,2\n'))
    assert.equal('qoslab.schedule.read_csv: DIR/b.csv:1: column 2: expected each column once, got '
      .. '"time_s" again (column 1)', fails('time_s,time_s\n0,1\n'))
  end)

  it('reads decimal numbers in every notation, and the values a step takes', function()
    write(dir .. '/ok.csv', 'time_s,delay_ms,loss_pct,limit_packets,ecn\n'
      .. '0,20,,auto,\n.5,1e2,+0.5,,\n1.,2.5E1,1,2000,\n1,0,1,,true\n')
    assert.same({
      { at_s = 0, delay_ms = 20, limit_packets = 'auto' },
      { at_s = 0.5, delay_ms = 100.0, loss_pct = 0.5 },
      { at_s = 1.0, delay_ms = 25.0, loss_pct = 1, limit_packets = 2000 },
      { at_s = 1, delay_ms = 0, loss_pct = 1, ecn = true },
    }, assert(schedule.read_csv(dir .. '/ok.csv')))
  end)

  -- read_csv took and ignored any second argument (read_csv(path, {bogus =
  -- 1}) read as if it were an option).
  it('raises at the caller\'s line for a bad path or a second argument', function()
    write(dir .. '/ok.csv', 'time_s,delay_ms\n0,1\n')
    local e, here = raised_here(schedule.read_csv, dir .. '/ok.csv', { bogus = 1 })
    assert.equal(here .. 'qoslab.schedule.read_csv: argument 2: expected nothing (it takes 1), got table', e)
    e, here = raised_here(schedule.read_csv, 5)
    assert.equal(here .. 'qoslab.schedule.read_csv: path: expected a string, got 5', e)
    e, here = raised_here(schedule.read_csv, nil)
    assert.equal(here .. 'qoslab.schedule.read_csv: path: expected a string, got nil', e)
    e, here = raised_here(schedule.read_csv, 'a\0b')
    assert.equal(here .. 'qoslab.schedule.read_csv: path: expected a string without NUL bytes, got string "a\\0b"', e)
  end)
end)

-- read_csv quoted the whole offending text: a 50 MB one-line file gave a
-- 50,000,095-byte message ("expected a header starting with time_s, got
-- "xxxx..."), a binary file put its raw bytes into the message.
describe('the trace readers quote a short, printable prefix of the input', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function fails(name, text, f)
    write(dir .. '/' .. name, text)
    local v, msg, code = (f or schedule.read_csv)(dir .. '/' .. name)
    assert.is_nil(v)
    assert.equal('EINVAL', code)
    return (msg:gsub(dir:gsub('%p', '%%%0'), 'DIR'))
  end
  local x40 = string.rep('x', 40)

  it('cuts a 50 MB line to 40 bytes, "…" and its length, naming path:line', function()
    local msg = fails('big.csv', string.rep('x', 50000000))
    assert(#msg < 300, 'a message of ' .. #msg .. ' bytes')
    assert.equal('qoslab.schedule.read_csv: DIR/big.csv:1: expected a header starting with time_s, got "'
      .. x40 .. '…" (50000000 bytes)', msg)
  end)

  it('escapes bytes that are not printable ASCII, and quotes and backslashes', function()
    local P = 'qoslab.schedule.read_csv: DIR/b.csv:'
    assert.equal(P .. '1: expected a header starting with time_s, got "\\x00\\x01\\xFF\\"a\\\\b\\x09"',
      fails('b.csv', '\0\1\255"a\\b\t\n'))
    local garbage = {}
    for i = 1, 1000 do garbage[i] = string.char((i * 37) % 256 == 10 and 11 or (i * 37) % 256) end
    local msg = fails('b.csv', table.concat(garbage))
    assert(#msg < 300, 'a message of ' .. #msg .. ' bytes')
    assert.matches('%(1000 bytes%)$', msg)
    assert.is_nil(msg:find('[^\32-\126\226\128\166]'), 'a raw byte in the message')
  end)

  it('cuts every quoted piece: a column name, a time, a cell a step refuses', function()
    local big = string.rep('y', 100000)
    local P = 'qoslab.schedule.read_csv: DIR/b.csv:'
    assert.matches('^' .. (P .. '1: column 2: expected a spec key'):gsub('%p', '%%%0') .. '.*, got "'
      .. string.rep('y', 40) .. '…" %(100000 bytes%)$', fails('b.csv', 'time_s,' .. big .. '\n'))
    assert.equal(P .. '2: time_s: expected a number of seconds in decimal notation, got "' .. string.rep('y', 40)
      .. '…" (100000 bytes)', fails('b.csv', 'time_s,delay_ms\n' .. big .. ',1\n'))
    assert.equal(P .. '2: delay_ms: expected a finite number in [0, 1000000000], got string "'
      .. string.rep('y', 40) .. '…" (100000 bytes)', fails('b.csv', 'time_s,delay_ms\n0,' .. big .. '\n'))
    assert.equal(P .. '2: distribution: expected "uniform", "normal", "pareto", "paretonormal", "experimental" '
      .. 'or a table of integers, got string "a\\x00b"',
      fails('b.csv', 'time_s,delay_ms,jitter_ms,distribution\n0,10,5,a\0b\n'))
    local late = '1.' .. string.rep('0', 100)
    assert.equal(P .. '3: time_s: expected >= 5 (the time on line 2: times in order), got "'
      .. late:sub(1, 40) .. '…" (102 bytes)', fails('b.csv', 'time_s,delay_ms\n5,1\n' .. late .. ',1\n'))
  end)

  it('read_mahimahi too', function()
    local msg = fails('m.up', '1\n' .. string.rep('\0\1\200', 300) .. '\n',
      function(p) return schedule.read_mahimahi(p, { duration_s = 1 }) end)
    assert.equal('qoslab.schedule.read_mahimahi: DIR/m.up:2: expected an integer of ms, got "'
      .. string.rep('\\x00\\x01\\xC8', 13) .. '\\x00…" (900 bytes)', msg)
  end)
end)

-- read_csv('/tmp/somedir') raised "lua/qoslab/schedule.lua:128: Is a
-- directory" (the line iterator's error, no function, no code): a file
-- that cannot be read is the world's failure, returned with a code.
describe('the trace readers on a file that cannot be read', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("chmod -R u+rwx '" .. dir .. "'; rm -rf '" .. dir .. "'") end)

  local readers = {
    csv = function(p) return schedule.read_csv(p) end,
    mahimahi = function(p) return schedule.read_mahimahi(p, { duration_s = 1 }) end,
  }

  for name, read in pairs(readers) do
    local ctx = 'qoslab.schedule.read_' .. name

    it(name .. ': a directory is EISDIR, a missing file ENOENT', function()
      local v, msg, code = read(dir)
      assert.is_nil(v)
      assert.equal('EISDIR', code)
      assert.equal(ctx .. ': ' .. dir .. ': is a directory, not a file', msg)
      v, msg, code = read(dir .. '/none')
      assert.is_nil(v)
      assert.equal('ENOENT', code)
      assert.equal(ctx .. ': ' .. dir .. '/none: cannot read it: No such file or directory (check the path)', msg)
    end)

    it(name .. ': a FIFO is refused unopened (EFTYPE), an unreadable file is EACCES', function()
      assert(os.execute("mkfifo '" .. dir .. "/fifo'"))
      local v, msg, code = read(dir .. '/fifo')
      assert.is_nil(v)
      assert.equal('EFTYPE', code)
      assert.matches(ctx .. ': ' .. dir .. '/fifo: ', msg, 1, true)
      write(dir .. '/locked', name == 'csv' and 'time_s,delay_ms\n0,1\n' or '1\n')
      assert(os.execute("chmod 000 '" .. dir .. "/locked' && chmod 755 '" .. dir .. "'"))
      local p = assert(io.popen('id -u'))
      local uid = p:read('l')
      p:close()
      local out
      if uid == '0' then
        -- root reads any file: the reader runs as nobody
        write(dir .. '/read.lua', string.format([[
package.path = './lua/?.lua;' .. package.path
package.cpath = './%s/?.so;' .. package.cpath
local s = require 'qoslab.schedule'
local v, msg, code
if %q == 'csv' then v, msg, code = s.read_csv(%q) else v, msg, code = s.read_mahimahi(%q, { duration_s = 1 }) end
io.write(tostring(v), '|', tostring(msg), '|', tostring(code))
]], os.getenv('QOSLAB_BUILD') or 'build', name, dir .. '/locked', dir .. '/locked'))
        p = assert(io.popen("setpriv --reuid=65534 --regid=65534 --clear-groups lua5.4 '" .. dir
          .. "/read.lua' 2>&1"))
        out = p:read('a')
        p:close()
      else
        local r1, r2, r3 = read(dir .. '/locked')
        out = table.concat({ tostring(r1), tostring(r2), tostring(r3) }, '|')
      end
      assert.equal('nil|' .. ctx .. ': ' .. dir .. '/locked: cannot open it: Permission denied '
        .. '(no permission to read it)|EACCES', out)
    end)
  end
end)

-- read_mahimahi took opts.spec unchecked: {delay_ms = -1} failed only
-- when a schedule started, and {rate_bps = 5} was overwritten by the
-- trace's rates without a word.
describe('qoslab.schedule.read_mahimahi opts', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('checks opts.spec as a step\'s spec and refuses rate_bps in it, at the caller\'s line', function()
    write(dir .. '/m.trace', '1\n')
    local p = dir .. '/m.trace'
    local ctx = 'qoslab.schedule.read_mahimahi'
    local e, here = raised_here(schedule.read_mahimahi, p, { duration_s = 2, spec = { delay_ms = -1 } })
    assert.equal(here .. ctx .. ': opts.spec.delay_ms: expected a finite number in [0, 1000000000], got -1', e)
    e, here = raised_here(schedule.read_mahimahi, p, { duration_s = 2, spec = { rate_bps = 5 } })
    assert.equal(here .. ctx .. ": opts.spec.rate_bps: the trace sets each window's rate_bps (from its "
      .. 'delivery opportunities): leave it out of opts.spec', e)
    e, here = raised_here(schedule.read_mahimahi, p, { duration_s = 2, spec = { at_s = 1 } })
    assert.matches(here .. ctx .. ': opts.spec.at_s: unknown key', e, 1, true)
    e, here = raised_here(schedule.read_mahimahi, p, { duration_s = 2, spec = { reorder_pct = 1 } })
    assert.matches(here .. ctx .. ': opts.spec.reorder_pct: reordering needs opts.spec.delay_ms > 0', e, 1, true)
    e, here = raised_here(schedule.read_mahimahi, p, { duration_s = 2 }, 'x')
    assert.equal(here .. ctx .. ': argument 3: expected nothing (it takes 2), got string "x"', e)
    e, here = raised_here(schedule.read_mahimahi, 7, { duration_s = 2 })
    assert.equal(here .. ctx .. ': path: expected a string, got 7', e)
    -- a rate rule's other keys are taken: every step has a rate
    local steps = assert(schedule.read_mahimahi(p, { duration_s = 0.1,
      spec = { delay_ms = 5, rate_packet_overhead_bytes = 14 } }))
    assert.same({ { at_s = 0, delay_ms = 5, rate_packet_overhead_bytes = 14, rate_bps = 12000000 } }, steps)
  end)
end)

-- Errors of the schedule functions pointed into the library
-- ("lua/qoslab/testbed.lua:526: qoslab.Testbed:schedule: steps[2].at_s:
-- ..."), a link that was not one was C's "bad argument #7 to
-- 'schedule_start'", and opts were not type-checked (quiet = 'yes'). Each
-- is raised at the caller's line, naming the argument. (On a real testbed
-- and link: spec/integration/schedule_link_spec.lua.)
describe('the schedule functions raise at the caller\'s line', function()
  local netem = require 'qoslab.netem'
  -- a testbed as schedule.testbed sees one: the checks come before it is used
  local tb = setmetatable({ backend = 'link', _closed = false }, { __name = 'qoslab.Testbed' })
  local function where() return 'x', nil, nil end

  it('schedule.link: the link, the opts, the steps', function()
    local e, here = raised_here(schedule.link, {}, { { at_s = 0 } })
    assert.equal(here .. 'qoslab.schedule.link: link: expected a qoslab.ImpairLink, got table', e)
    e, here = raised_here(schedule.link, io.stdout, { { at_s = 0 } })
    assert.equal(here .. 'qoslab.schedule.link: link: expected a qoslab.ImpairLink, got userdata', e)
    e, here = raised_here(schedule.link, nil, { { at_s = 0 } })
    assert.equal(here .. 'qoslab.schedule.link: link: expected a qoslab.ImpairLink, got nil', e)
  end)

  it('qoslab.netem.schedule and schedule.netem: the device, the opts, the steps', function()
    for _, f in ipairs { netem.schedule, schedule.netem } do
      local e, here = raised_here(f, {}, { { at_s = 0 } })
      assert.equal(here .. 'qoslab.netem.schedule: ifname: expected a device name of 1..15 characters '
        .. '(no NUL), got table', e)
      e, here = raised_here(f, 'lo', { { at_s = 5 }, { at_s = 1 } })
      assert.equal(here .. 'qoslab.netem.schedule: steps[2].at_s: expected >= steps[1].at_s = 5 '
        .. '(steps in time order), got 1', e)
      e, here = raised_here(f, 'lo', { { at_s = 0, delay_ms = -1 } })
      assert.equal(here .. 'qoslab.netem.schedule: steps[1].delay_ms: expected a finite number in '
        .. '[0, 1000000000], got -1', e)
      e, here = raised_here(f, 'lo', { { at_s = 0 } }, { quiet = 'yes' })
      assert.equal(here .. 'qoslab.netem.schedule: opts.quiet: expected a boolean, got string "yes"', e)
      e, here = raised_here(f, 'lo', { { at_s = 0 } }, { bogus = 1 })
      assert.matches(here .. 'qoslab.netem.schedule: opts.bogus: unknown key', e, 1, true)
      e, here = raised_here(f, 'lo', { { at_s = 0 } }, { direction = 'ingress' })
      assert.matches(here .. 'qoslab.netem.schedule: opts.direction: expected "egress"', e, 1, true)
      e, here = raised_here(f, 'lo', { { at_s = 0 } }, 5)
      assert.equal(here .. 'qoslab.netem.schedule: opts: expected a table, got 5', e)
    end
  end)

  it('schedule.testbed: the testbed, the opts, the steps', function()
    local ctx = 'qoslab.Testbed:schedule'
    local e, here = raised_here(schedule.testbed, {}, { { at_s = 0 } }, nil, where)
    assert.equal(here .. ctx .. ': tb: expected a qoslab.Testbed, got table', e)
    e, here = raised_here(schedule.testbed, tb, { { at_s = 5, delay_ms = 1 }, { at_s = 1 } }, nil, where)
    assert.equal(here .. ctx .. ': steps[2].at_s: expected >= steps[1].at_s = 5 (steps in time order), got 1', e)
    e, here = raised_here(schedule.testbed, tb, { { at_s = 0 } }, { quiet = 'yes' }, where)
    assert.equal(here .. ctx .. ': opts.quiet: expected a boolean, got string "yes"', e)
    e, here = raised_here(schedule.testbed, tb, { { at_s = 0 } }, { direction = 'up' }, where)
    assert.equal(here .. ctx .. ': opts.direction: expected one of "forward", "reverse", got string "up"', e)
    e, here = raised_here(schedule.testbed, tb, { { at_s = 0 } }, { bogus = true }, where)
    assert.equal(here .. ctx .. ': opts.bogus: unknown key (known keys: direction, quiet)', e)
    e, here = raised_here(schedule.testbed, setmetatable({ _closed = true }, getmetatable(tb)), { { at_s = 0 } },
      nil, where)
    assert.equal(here .. ctx .. ': the testbed is closed', e)
  end)
end)

describe('qoslab.plot.timeseries with impairment changes', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('draws the spec in force as step panels on the test clock', function()
    local ivs = {}
    for i = 1, 4 do
      ivs[i] = { start_s = i - 1, end_s = i, seconds = 1, streams = {
        { id = 1, direction = 'forward', role = 'sender', side = 'client', bits_per_second = 1e8, rtt_us = 20000 } } }
    end
    local res = { proto = 'tcp', host = '10.0.0.2', duration_s = 4, intervals = ivs, impairment_changes = {
      { ok = true, test_s = -0.05, spec = { delay_ms = 10, limit_packets = 1000 } },
      { ok = false, test_s = 1, spec = { delay_ms = 50 }, message = 'no', code = 'EPERM' },
      { ok = true, test_s = 2.001, spec = { delay_ms = 100, loss_pct = 1, limit_packets = 1000 } },
    } }
    local f = assert(plot.timeseries(res, { out = dir .. '/i.png' }))
    assert.same({ 'throughput', 'rtt', 'impairment delay', 'impairment loss' }, f.panels)
    assert.equal(dir .. '/i.impairment.dat', f.impairment_dat)
    assert.equal('# time_s delay_ms loss_pct rate_mbps (the spec in force from time_s on; '
      .. 'rate NaN: no rate limit)\n'
      .. '0 10 0 NaN\n2.001 100 1 NaN\n4 100 1 NaN\n', slurp(f.impairment_dat))
    assert.equal(1, f.change_lines)
    local gp = slurp(f.gp)
    -- the applied change inside the test is a dotted line; the failed one is not drawn
    assert.matches('set arrow from 2.001, graph 0 to 2.001, graph 1 nohead dt 3', gp, 1, true)
    assert.is_nil(gp:find('set arrow from 1,', 1, true))
    assert.matches("using 1:2 with steps", gp, 1, true)
    assert.matches("using 1:3 with steps", gp, 1, true)
  end)

  local function result(n_iv, changes)
    local ivs = {}
    for i = 1, n_iv do
      ivs[i] = { start_s = i - 1, end_s = i, seconds = 1, streams = {
        { id = 1, direction = 'forward', role = 'sender', side = 'client', bits_per_second = 7e8, rtt_us = 20000 } } }
    end
    return { proto = 'tcp', host = '10.0.0.2', duration_s = n_iv, intervals = ivs, impairment_changes = changes }
  end

  -- Steps without rate_bps (no rate limit) were drawn at 0 Mbit/s in the
  -- rate panel, under a throughput of 700 Mbit/s: "no limit" read as "rate 0".
  it('draws no rate limit as a gap in the rate line, labelled, never as 0', function()
    local res = result(6, {
      { ok = true, test_s = -0.01, spec = { delay_ms = 10 } },
      { ok = true, test_s = 2, spec = { delay_ms = 100 } },
      { ok = true, test_s = 4, spec = { delay_ms = 20, loss_pct = 2, rate_bps = 100e6 } },
      { ok = true, test_s = 5.5, spec = { delay_ms = 20 } },
    })
    local f = assert(plot.timeseries(res, { out = dir .. '/r.png' }))
    assert.same({ 'throughput', 'rtt', 'impairment delay', 'impairment loss', 'impairment rate' }, f.panels)
    -- the rate column is NaN (a gap) where no rate is set; a row holding
    -- 100 Mbit/s ends its line at 5.5 s, where the limit is lifted
    assert.equal('# time_s delay_ms loss_pct rate_mbps (the spec in force from time_s on; '
      .. 'rate NaN: no rate limit)\n'
      .. '0 10 0 NaN\n2 100 0 NaN\n4 20 2 100\n5.5 20 2 100\n5.5 20 0 NaN\n6 20 0 NaN\n', slurp(f.impairment_dat))
    local gp = slurp(f.gp)
    assert.matches('set datafile missing NaN', gp, 1, true)
    -- the span 0..4 s is wide enough for its label, 5.5..6 s is not
    assert.matches("set label 'no rate limit' at 2, graph 0.5", gp, 1, true)
    assert.is_nil(gp:find("set label 'no rate limit' at 5.75", 1, true))
    -- the script's strings with gnuplot's octal escapes read back
    local function plain(text) return (text:gsub('\\(%d%d%d)', function(o) return string.char(tonumber(o, 8)) end)) end
    assert.matches('rate in force\n(changes: dotted; gap: no limit)', plain(gp), 1, true)
    -- the label is the rate panel's alone
    local rate_panel = gp:match('# panel 5: impairment rate(.*)$')
    assert.matches("set label 'no rate limit'", rate_panel, 1, true)
    assert.equal(1, select(2, gp:gsub("set label 'no rate limit'", '')))
    assert.matches('unset label', rate_panel, 1, true)
    -- with a rate in every step there is no gap and no label
    local all = result(4, { { ok = true, test_s = 0, spec = { rate_bps = 10e6 } },
      { ok = true, test_s = 2, spec = { rate_bps = 20e6 } } })
    local g = assert(plot.timeseries(all, { out = dir .. '/a.png' }))
    assert.is_nil(slurp(g.impairment_dat):find('NaN\n', 1, true))
    assert.is_nil(slurp(g.gp):find('no rate limit', 1, true))
    assert.is_nil(plain(slurp(g.gp)):find('gap: no limit', 1, true))
  end)

  -- A mahimahi trace's 40 steps drew 40 dotted lines through every panel,
  -- which read as a grid of dots: past MAX_CHANGE_LINES changes none is
  -- drawn (the step panels show them), and a step that changes nothing
  -- draws none.
  it('draws a dotted line per change only for a few changes of the spec in force', function()
    assert.equal(12, require('qoslab.plot.timeseries').MAX_CHANGE_LINES)
    local function changes(n, same)
      local list = {}
      for i = 1, n do
        list[i] = { ok = true, test_s = (i - 1) * 0.1,
          spec = { rate_bps = same and 12e6 or (12e6 + (i % 2) * 1e5), limit_packets = 1000 } }
      end
      return list
    end
    local function lines(list)
      local f = assert(plot.timeseries(result(5, list), { out = dir .. '/c.png' }))
      local gp = slurp(f.gp)
      local n = select(2, gp:gsub('set arrow from', ''))
      assert.equal(f.change_lines, n)
      return n, gp
    end
    -- 40 steps of a trace: no line, and the key does not promise any
    local n, gp = lines(changes(40))
    assert.equal(0, n)
    assert.is_nil(gp:gsub('\\(%d%d%d)', function(o) return string.char(tonumber(o, 8)) end)
      :find('changes: dotted', 1, true))
    assert.matches('with steps', gp, 1, true)
    -- 13 steps: 12 changes inside the test (the first is at 0), the most drawn
    assert.equal(12, (lines(changes(13))))
    assert.equal(0, (lines(changes(14))))
    -- steps that repeat the spec in force change nothing and draw nothing
    assert.equal(0, (lines(changes(40, true))))
    local rep = { { ok = true, test_s = 0, spec = { delay_ms = 10 } }, { ok = true, test_s = 1, spec = { delay_ms = 10 } },
      { ok = true, test_s = 2, spec = { delay_ms = 50 } } }
    local k, gp2 = lines(rep)
    assert.equal(1, k)
    assert.matches('set arrow from 2, graph 0', gp2, 1, true)
  end)
end)
