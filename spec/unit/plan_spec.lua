-- qoslab.plan: sweep order, repetitions and their statistics, the stop rule,
-- hooks (teardown on error), the results file, and resume after kill -9.
local plan = require 'qoslab.plan'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-plan-spec.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function rmrf(d) os.execute("rm -rf '" .. d .. "'") end

local function lines_of(path)
  local f = io.open(path, 'r')
  if not f then return {} end
  local t = {}
  for l in f:lines() do t[#t + 1] = l end
  f:close()
  return t
end

local quiet = false -- progress = false in every sweep below

describe('qoslab.plan', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmrf(dir) end)

  describe('statistics', function()
    it('mean, sample stdev and Student-t 95 % CI match hand-computed values', function()
      local s = plan.stats { 10, 12, 14 }
      assert.equal(3, s.n)
      assert.equal(12, s.mean)
      assert.equal(2, s.stdev)                                 -- sqrt(((−2)² + 0 + 2²) / 2)
      assert.near(4.9682754237899571, s.ci95, 1e-12)           -- 4.302652730 · 2 / √3
      assert.near(12 - 4.9682754237899571, s.ci_low, 1e-12)
      assert.near(12 + 4.9682754237899571, s.ci_high, 1e-12)
      assert.equal(10, s.min)
      assert.equal(14, s.max)
      local two = plan.stats { 1, 3 }
      assert.equal(2, two.mean)
      assert.near(math.sqrt(2), two.stdev, 1e-15)
      assert.near(12.706204736, two.ci95, 1e-9)               -- t(0.975, 1) · √2 / √2
    end)

    it('n = 1 has a mean but no spread, n = 0 nothing', function()
      local one = plan.stats { 5 }
      assert.equal(5, one.mean)
      assert.is_nil(one.stdev)
      assert.is_nil(one.ci95)
      assert.same({ n = 0, values = {} }, plan.stats {})
    end)

    it('t975 uses the table up to 30 and the expansion beyond', function()
      assert.equal(2.776445105, plan.t975(4))
      assert.equal(2.042272456, plan.t975(30))
      assert.near(2.0210754, plan.t975(40), 1e-4)   -- tables: 2.021
      assert.near(1.9839715, plan.t975(100), 1e-4)  -- tables: 1.984
      assert.has_error(function() plan.t975(0) end,
        'qoslab.plan.t975: df: expected an integer in [1, inf], got 0')
    end)

    it('rejects non-finite values naming the index', function()
      assert.has_error(function() plan.stats { 1, 0 / 0 } end,
        'qoslab.plan.stats: values[2]: expected a finite number, got nan')
    end)
  end)

  describe('sweep', function()
    it('visits the cartesian product in the stated order (outer first)', function()
      local seen = {}
      local s = plan.sweep { name = 'order', progress = quiet,
        params = { delay_ms = { 1, 50 }, loss_pct = { 0, 1, 2 } }, order = { 'loss_pct', 'delay_ms' },
        run = function(p) seen[#seen + 1] = p.loss_pct .. '/' .. p.delay_ms return 1 end }
      assert.same({ '0/1', '0/50', '1/1', '1/50', '2/1', '2/50' }, seen)
      assert.equal(6, #s.points)
      assert.same({ 'loss_pct', 'delay_ms' }, s.order)
      assert.equal('loss_pct=2 delay_ms=50', s.points[6].label)
    end)

    it('default order is the sorted parameter names; explicit points keep their order', function()
      local seen = {}
      plan.sweep { name = 'default order', progress = quiet, params = { b = { 1, 2 }, a = { 'x', 'y' } },
        run = function(p) seen[#seen + 1] = p.a .. p.b return 0 end }
      assert.same({ 'x1', 'x2', 'y1', 'y2' }, seen)
      seen = {}
      plan.sweep { name = 'points', progress = quiet, points = { { w = 3 }, { w = 1 }, { w = 2 } },
        run = function(p) seen[#seen + 1] = p.w return 0 end }
      assert.same({ 3, 1, 2 }, seen)
    end)

    it('repeats each point and summarises the repetitions', function()
      local calls = 0
      local s = plan.sweep { name = 'reps', progress = quiet, params = { x = { 1, 2 } }, repeat_count = 3,
        run = function(p, ctx)
          calls = calls + 1
          return { received = { bits_per_second = p.x * 10 + 2 * (ctx.repetition - 2) } }
        end }
      assert.equal(6, calls)
      local p1 = s.points[1]
      assert.same({ 8, 10, 12 }, p1.values)
      assert.equal(10, p1.mean)
      assert.equal(2, p1.stdev)
      assert.near(4.9682754237899571, p1.ci95, 1e-12)
      assert.equal(3, #p1.results)
      assert.equal(20, s.points[2].mean)
    end)

    it('uses a custom metric', function()
      local s = plan.sweep { name = 'metric', progress = quiet, params = { x = { 1 } },
        run = function() return { sent = { bytes = 1000 } } end,
        metric = function(r) return r.sent.bytes * 8 end }
      assert.equal(8000, s.points[1].mean)
    end)

    it('stop rule skips the rest of a row only, and records the skipped points', function()
      local ran = {}
      local s = plan.sweep { name = 'stop', progress = quiet, out = dir,
        params = { loss_pct = { 1, 5 }, delay_ms = { 50, 100, 200, 500 } }, order = { 'loss_pct', 'delay_ms' },
        run = function(p)
          ran[#ran + 1] = p.loss_pct .. '/' .. p.delay_ms
          return 1e8 / (p.delay_ms * p.loss_pct)
        end,
        stop_row = function(_, sum) return sum.mean < 500e3 end }
      -- loss 1: 2e6, 1e6, 5e5 (not < 5e5), 2e5 -> stop after 500; loss 5: 4e5 -> stop after 50
      assert.same({ '1/50', '1/100', '1/200', '1/500', '5/50' }, ran)
      for i = 1, 4 do assert.is_falsy(s.points[i].skipped) end
      for i = 6, 8 do
        assert.is_true(s.points[i].skipped)
        assert.equal('stop rule after loss_pct=5 delay_ms=50', s.points[i].skip_reason)
      end
      local recs = assert(plan.load(dir .. '/results.jsonl', 'stop'))
      assert.equal(8, #recs)
      assert.is_true(recs[8].skipped)
      assert.equal(0, recs[8].summary.n)
    end)

    it('runs the hooks in order and passes ctx.data between them', function()
      local log = {}
      plan.sweep { name = 'hooks', progress = quiet, params = { x = { 1, 2 } }, repeat_count = 2,
        setup = function(ctx) log[#log + 1] = 'setup' ctx.data.tb = 'tb' end,
        setup_point = function(p, ctx) log[#log + 1] = 'setup_point ' .. p.x .. ' ' .. ctx.data.tb end,
        run = function(p, ctx) log[#log + 1] = 'run ' .. p.x .. '.' .. ctx.repetition return 1 end,
        teardown_point = function(p, _, err) log[#log + 1] = 'teardown_point ' .. p.x .. ' ' .. tostring(err) end,
        teardown = function(_, err) log[#log + 1] = 'teardown ' .. tostring(err) end }
      assert.same({ 'setup', 'setup_point 1 tb', 'run 1.1', 'run 1.2', 'teardown_point 1 nil',
                    'setup_point 2 tb', 'run 2.1', 'run 2.2', 'teardown_point 2 nil', 'teardown nil' }, log)
    end)

    it('runs teardown_point and teardown when a run raises, then re-raises', function()
      local log = {}
      local ok, err = pcall(plan.sweep, { name = 'boom', progress = quiet, out = dir, params = { x = { 1, 2, 3 } },
        run = function(p) if p.x == 2 then error('boom at 2', 0) end return 1 end,
        teardown_point = function(p, _, e) log[#log + 1] = 'tp ' .. p.x .. ' ' .. tostring(e and e:match('boom at 2')) end,
        teardown = function(_, e) log[#log + 1] = 'td ' .. tostring(e and e:match('boom at 2')) end })
      assert.is_false(ok)
      assert.matches('boom at 2', err)
      assert.same({ 'tp 1 nil', 'tp 2 boom at 2', 'td boom at 2' }, log)
      assert.equal(1, #lines_of(dir .. '/results.jsonl'))  -- point 1 recorded, point 2 not
    end)

    it('a run returning nil, msg, CODE fails the point with msg and CODE', function()
      local ok, err = pcall(plan.sweep, { name = 'fail', progress = quiet, params = { x = { 7 } },
        run = function() return nil, 'no such device', 'ENODEV' end })
      assert.is_false(ok)
      assert.matches('x=7: run failed: no such device %(ENODEV%)', err)
    end)

    it('on_error = "record" records the failure and continues', function()
      local s = plan.sweep { name = 'record', progress = quiet, out = dir, on_error = 'record',
        params = { x = { 1, 2, 3 } },
        run = function(p) if p.x == 2 then return nil, 'refused', 'ECONNREFUSED' end return p.x end }
      assert.equal(1, s.points[1].mean)
      assert.matches('refused %(ECONNREFUSED%)', s.points[2].error)
      assert.equal(3, s.points[3].mean)
      assert.equal(3, #lines_of(dir .. '/results.jsonl'))
    end)

    it('a teardown error is raised after a clean sweep', function()
      assert.has_error(function()
        plan.sweep { name = 'td', progress = quiet, params = { x = { 1 } }, run = function() return 1 end,
          teardown = function() error('teardown broke', 0) end }
      end, 'teardown broke')
    end)

    it('appends one record per point with the run metadata, durable before the next point', function()
      local seen_lines = {}
      plan.sweep { name = 'meta', progress = quiet, out = dir, params = { delay_ms = { 1, 2, 3 } },
        repeat_count = 2, meta = { link = '1 Gbit/s' },
        run = function(p)
          if #seen_lines < p.delay_ms then seen_lines[#seen_lines + 1] = #lines_of(dir .. '/results.jsonl') end
          return p.delay_ms * 1.5
        end }
      assert.same({ 0, 1, 2 }, seen_lines)
      local recs = assert(plan.load(dir .. '/results.jsonl'))
      assert.equal(3, #recs)
      local r = recs[2]
      assert.equal('meta', r.sweep)
      assert.same({ delay_ms = 2 }, r.params)
      assert.equal(require('qoslab.core')._VERSION, r.qoslab_version)
      local f = assert(io.open('/proc/sys/kernel/osrelease'))
      assert.equal(f:read('l'), r.kernel)
      f:close()
      assert.equal('host', r.where)
      assert.equal(2, r.repetitions)
      assert.equal(3, r.summary.mean)
      assert.same({ 3, 3 }, r.summary.values)
      assert.same({ link = '1 Gbit/s' }, r.meta)
      assert.matches('^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$', r.time)
    end)

    it('records read back bit for bit (floats, NaN as null)', function()
      local vals = { 1 / 3, 0.1, 2 ^ 53 + 2, 1e-300, 123456789.123456789 }
      local i = 0
      plan.sweep { name = 'exact', progress = quiet, out = dir, params = { k = { 1, 2, 3, 4, 5 } },
        run = function(p) i = i + 1 return { received = { bits_per_second = vals[p.k], odd = 0 / 0 } } end }
      local recs = assert(plan.load(dir .. '/results.jsonl', 'exact'))
      for k = 1, 5 do
        assert.equal(vals[k], recs[k].summary.mean)
        assert.equal(vals[k], recs[k].results[1].received.bits_per_second)
        assert.is_nil(recs[k].results[1].received.odd)
      end
      assert.equal('{"a":0.1,"b":[1,2,3],"c":null}', plan.encode { a = 0.1, b = { 1, 2, 3 }, c = 0 / 0 })
    end)

    it('resume skips recorded points and keeps their statistics', function()
      local n1 = 0
      plan.sweep { name = 'resume', progress = quiet, out = dir, params = { x = { 1, 2 } },
        run = function(p) n1 = n1 + 1 return p.x end }
      local ran = {}
      local s = plan.sweep { name = 'resume', progress = quiet, out = dir, resume = true,
        params = { x = { 1, 2, 3 } }, run = function(p) ran[#ran + 1] = p.x return p.x end }
      assert.equal(2, n1)
      assert.same({ 3 }, ran)
      assert.is_true(s.points[1].resumed)
      assert.equal(2, s.points[2].mean)
      assert.equal(3, #lines_of(dir .. '/results.jsonl'))
      -- Another sweep name in the same file is not matched.
      -- Another sweep name in the same file is not matched, but a sweep that
      -- may have been renamed is said (it ran every point again unsaid).
      local other, warned = {}, {}
      local warn = plan.warn
      plan.warn = function(m) warned[#warned + 1] = m end
      local ok, err = pcall(plan.sweep, { name = 'other', progress = quiet, out = dir, resume = true,
        params = { x = { 1 } }, run = function(p) other[#other + 1] = p.x return 0 end })
      plan.warn = warn
      assert(ok, err)
      assert.same({ 1 }, other)
      assert.equal(1, #warned)
      assert.matches('resuming sweep "other" in ' .. dir .. ': none of its points are recorded under that name, '
        .. 'but they are under "resume"', warned[1], 1, true)
    end)

    it('resume re-applies the stop rule to recorded points', function()
      local function sweep(ran)
        return plan.sweep { name = 'stop resume', progress = quiet, out = dir, resume = true,
          params = { d = { 1, 2, 3 } }, run = function(p) ran[#ran + 1] = p.d return 10 / p.d end,
          stop_row = function(_, s) return s.mean < 6 end }
      end
      local first = {}
      sweep(first)
      assert.same({ 1, 2 }, first)
      local again = {}
      local s = sweep(again)
      assert.same({}, again)
      assert.is_true(s.points[3].skipped)
    end)

    it('a line cut by a kill is ignored and the next record starts on a new line', function()
      local f = assert(io.open(dir .. '/results.jsonl', 'w'))
      f:write('{"sweep":"cut","params":{"x":1},"summary":{"n":1,"mean":1}}\n{"sweep":"cut","par')
      f:close()
      local ran = {}
      plan.sweep { name = 'cut', progress = quiet, out = dir, resume = true, params = { x = { 1, 2 } },
        run = function(p) ran[#ran + 1] = p.x return p.x end }
      assert.same({ 2 }, ran)
      local recs, bad = plan.load(dir .. '/results.jsonl', 'cut')
      assert.equal(2, #recs)
      assert.equal(1, bad)
    end)

    it('reports progress with done/total, ETA and the last summary', function()
      local infos = {}
      plan.sweep { name = 'prog', params = { x = { 1, 2, 3 } }, run = function(p) return p.x end,
        progress = function(i) infos[#infos + 1] = i end }
      assert.equal(3, #infos)
      assert.equal(1, infos[1].done)
      assert.equal(3, infos[1].total)
      assert.equal(2, infos[2].summary.mean)
      assert.equal(0, infos[3].eta_s)
      assert.is_number(infos[1].eta_s)
    end)

    it('rejects bad options naming the field', function()
      local run = function() return 1 end
      assert.has_error(function() plan.sweep { name = 'x', params = { a = { 1 } }, run = run, bogus = 1 } end)
      local ok, err = pcall(plan.sweep, { name = 'x', params = { a = { 1 } }, run = run, bogus = 1 })
      assert.is_false(ok)
      assert.matches('qoslab.plan.sweep: opts.bogus: unknown key', err)
      assert.has_error(function() plan.sweep { params = { a = { 1 } }, run = run } end,
        'qoslab.plan.sweep: opts.name: expected a non-empty string, got nil')
      assert.has_error(function() plan.sweep { name = 'x', params = { a = { 1 } } } end,
        'qoslab.plan.sweep: opts.run: expected a function, got nil')
      assert.has_error(function() plan.sweep { name = 'x', run = run } end,
        'qoslab.plan.sweep: opts.params or opts.points is required')
      assert.has_error(function() plan.sweep { name = 'x', params = { a = {} }, run = run } end,
        'qoslab.plan.sweep: opts.params.a: expected a non-empty list of values, got table')
      assert.has_error(function()
        plan.sweep { name = 'x', params = { a = { 1 }, b = { 1 } }, order = { 'a' }, run = run }
      end, 'qoslab.plan.sweep: opts.order: parameter "b" missing')
      assert.has_error(function() plan.sweep { name = 'x', params = { a = { 1 } }, run = run, repeat_count = 0 } end,
        'qoslab.plan.sweep: opts.repeat_count: expected an integer in [1, 100000], got 0')
    end)
  end)

  describe('kill -9 mid-sweep', function()
    it('loses at most the running point and runs no recorded point again', function()
      local script = dir .. '/child.lua'
      local f = assert(io.open(script, 'w'))
      f:write([[
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
package.cpath = './]] .. (os.getenv('QOSLAB_BUILD') or 'build') .. [[/?.so;' .. package.cpath
local plan = require 'qoslab.plan'
local timer = require 'qoslab.timer'
local dir = ...
local xs = {}
for i = 1, 12 do xs[i] = i end
plan.sweep { name = 'killed', out = dir, resume = true, progress = false, params = { x = xs },
  run = function(p)
    local log = assert(io.open(dir .. '/starts.log', 'a'))
    log:write(p.x, '\n')
    log:close()
    timer.sleep(0.15)
    return p.x * 1.5
  end }
]])
      f:close()
      local p = assert(io.popen('lua5.4 ' .. script .. ' ' .. dir .. ' >/dev/null 2>&1 & echo $!'))
      local pid = p:read('l')
      p:close()
      local timer = require 'qoslab.timer'
      local t0 = timer.now()
      while #lines_of(dir .. '/results.jsonl') < 3 and timer.now() - t0 < 20 do timer.sleep(0.02) end
      timer.sleep(0.07)  -- land inside a running point
      os.execute('kill -9 ' .. pid .. ' 2>/dev/null')
      timer.sleep(0.1)
      local recorded = #lines_of(dir .. '/results.jsonl')
      local starts = lines_of(dir .. '/starts.log')
      assert.is_true(recorded >= 3 and recorded < 12, 'killed too late: ' .. recorded)
      assert.is_true(#starts - recorded <= 1, 'more than one point lost')
      -- Resume in a fresh process, to the end.
      assert.is_true(os.execute('lua5.4 ' .. script .. ' ' .. dir .. ' >/dev/null 2>&1'))
      local recs = assert(plan.load(dir .. '/results.jsonl', 'killed'))
      local count = {}
      for _, r in ipairs(recs) do count[r.params.x] = (count[r.params.x] or 0) + 1 end
      for x = 1, 12 do assert.equal(1, count[x], 'point ' .. x .. ' recorded once') end
      local started = {}
      for _, l in ipairs(lines_of(dir .. '/starts.log')) do
        local x = tonumber(l)
        started[x] = (started[x] or 0) + 1
      end
      local twice = 0
      for x = 1, 12 do
        assert.is_true(started[x] >= 1)
        if started[x] > 1 then twice = twice + 1 end
      end
      -- Only the point that was running at the kill ran again.
      assert.is_true(twice <= 1)
      for x = 1, recorded do assert.equal(1, started[x], 'recorded point ' .. x .. ' ran again') end
    end)
  end)
end)

-- Wrong arguments to qoslab.plan's public functions raised raw Lua errors
-- ("attempt to get length of a nil value (local 'order')" from
-- plan.product{a = {}}, "bad argument #1 to 'for iterator'" from
-- plan.point_key(nil), "bad argument #1 to 'open'" from plan.load(nil), "Is a
-- directory" from plan.load('/etc')), and plan.load of a FIFO nobody writes
-- blocked in open(2). Now a caller's mistake names the argument, and a file
-- that cannot be read is nil, message, CODE, in bounded time.
describe('qoslab.plan argument errors', function()
  local function raises(expected, fn, ...)
    local args = table.pack(...)
    local ok, err = pcall(fn, table.unpack(args, 1, args.n))
    assert(not ok, 'expected an error: ' .. expected)
    assert.equal(expected, (tostring(err):gsub('^[^:]*:%d+: ', '')))
  end

  it('product names params and order', function()
    raises('qoslab.plan.product: params.a: expected a non-empty list of values, got table',
      plan.product, { a = {} })
    raises('qoslab.plan.product: params: expected a table, got nil', plan.product)
    raises('qoslab.plan.product: params.a: expected a non-empty list of values, got 1', plan.product, { a = 1 })
    raises('qoslab.plan.product: params key: expected a string (a parameter name), got 1',
      plan.product, { { 1 } })
    raises('qoslab.plan.product: order: expected a table, got string "a"', plan.product, { a = { 1 } }, 'a')
    raises('qoslab.plan.product: order[1]: expected a name in params, got string "b"',
      plan.product, { a = { 1 } }, { 'b' })
    raises('qoslab.plan.product: order: "a" listed twice', plan.product, { a = { 1 } }, { 'a', 'a' })
    raises('qoslab.plan.product: order: parameter "b" missing', plan.product, { a = { 1 }, b = { 2 } }, { 'a' })
    -- order defaults to the sorted names, as in sweep
    assert.same({ { a = 1, b = 'x' }, { a = 1, b = 'y' }, { a = 2, b = 'x' }, { a = 2, b = 'y' } },
      plan.product { b = { 'x', 'y' }, a = { 1, 2 } })
  end)

  it('point_key and find name their argument', function()
    raises('qoslab.plan.point_key: params: expected a table, got nil', plan.point_key, nil)
    raises('qoslab.plan.point_key: params.a: expected a number, string or boolean, got table',
      plan.point_key, { a = {} })
    raises('qoslab.plan.point_key: params key: expected a string (a parameter name), got 1',
      plan.point_key, { 5 })
    assert.equal('a=1,b=x', plan.point_key { b = 'x', a = 1.0 })
    raises('qoslab.plan.find: summary: expected a table, got nil', plan.find)
    raises('qoslab.plan.find: summary.points: expected a table, got nil', plan.find, {}, {})
    raises('qoslab.plan.find: params: expected a table, got string "a"', plan.find, { points = {} }, 'a')
    local pt = { params = { a = 2 } }
    assert.equal(pt, plan.find({ points = { { params = { a = 1 } }, pt } }, { a = 2 }))
    assert.is_nil(plan.find({ points = { pt } }, { a = 3 }))
  end)

  it('the statistics and formatting helpers name their argument', function()
    raises('qoslab.plan.t975: df: expected an integer in [1, inf], got nil', plan.t975)
    raises('qoslab.plan.t975: df: expected an integer in [1, inf], got string "3"', plan.t975, '3')
    raises('qoslab.plan.stats: values: expected a table, got nil', plan.stats)
    raises('qoslab.plan.format_duration: s: expected a number of seconds or nil, got string "x"',
      plan.format_duration, 'x')
    assert.equal('?', plan.format_duration(nil))
    assert.equal('?', plan.format_duration(math.huge))
    assert.equal('3m07s', plan.format_duration(187))
    raises('qoslab.plan.format_rate: v: expected a number (bits/s) or nil, got string "x"',
      plan.format_rate, 'x')
    assert.equal('-', plan.format_rate(nil))
    raises('qoslab.plan.progress_line: info: expected a table, got nil', plan.progress_line)
    raises('qoslab.plan.progress_line: info.done: expected an integer, got nil', plan.progress_line, {})
    local info = { sweep = 's', done = 1, total = 2, label = 'x=1', format = plan.format_rate,
      summary = { mean = 2e6, n = 1 }, elapsed_s = 5, eta_s = 5 }
    assert.equal('[s 1/2] x=1: 2 Mbit/s  elapsed 5s, ETA 5s', plan.progress_line(info))
    info.format = nil
    raises('qoslab.plan.progress_line: info.format: expected a function (to print the mean), got nil',
      plan.progress_line, info)
    info.format, info.label = plan.format_rate, 7
    raises('qoslab.plan.progress_line: info.label: expected a string, got 7', plan.progress_line, info)
  end)

  it('sweep: opts.order of explicit points names keys of the points', function()
    local run = function() return 1 end
    raises('qoslab.plan.sweep: opts.order[1]: expected a name in opts.points, got string "zz"',
      plan.sweep, { name = 'x', points = { { a = 1 } }, order = { 'zz' }, run = run, progress = false })
    raises('qoslab.plan.sweep: opts.order[2]: expected a name in opts.points, got 1',
      plan.sweep, { name = 'x', points = { { a = 1 } }, order = { 'a', 1 }, run = run, progress = false })
    raises('qoslab.plan.sweep: opts.order: "a" listed twice',
      plan.sweep, { name = 'x', points = { { a = 1 } }, order = { 'a', 'a' }, run = run, progress = false })
    -- a name some points leave out is allowed
    local s = plan.sweep { name = 'x', points = { { a = 1 }, { a = 2, b = 3 } }, order = { 'a', 'b' },
      run = run, progress = false }
    assert.equal(2, #s.points)
  end)

  it('set_defaults checks each default', function()
    local saved = plan.get_defaults()
    raises('qoslab.plan.set_defaults: d: expected a table, got nil', plan.set_defaults)
    raises('qoslab.plan.set_defaults: d.out: expected a string, got 5', plan.set_defaults, { out = 5 })
    raises('qoslab.plan.set_defaults: d.out: expected a string without NUL bytes, got string "a\\0"',
      plan.set_defaults, { out = 'a\0' })
    raises('qoslab.plan.set_defaults: d.resume: expected a boolean, got string "yes"',
      plan.set_defaults, { resume = 'yes' })
    raises('qoslab.plan.set_defaults: d.where: expected one of "host", "guest", got string "vm"',
      plan.set_defaults, { where = 'vm' })
    raises('qoslab.plan.set_defaults: d.backend: expected one of "netem", "link", got string "host"',
      plan.set_defaults, { backend = 'host' })
    raises('qoslab.plan.set_defaults: d.progress: expected a boolean or a function, got 1',
      plan.set_defaults, { progress = 1 })
    assert.same(saved, plan.get_defaults())
    raises('qoslab.plan.sweep: opts.out: expected a string without NUL bytes, got string "o\\0x"',
      plan.sweep, { name = 'x', params = { a = { 1 } }, run = function() return 1 end, out = 'o\0x',
        progress = false })
  end)

  describe('load', function()
    local dir
    before_each(function() dir = tmpdir() end)
    after_each(function() rmrf(dir) end)

    it('a wrong path or name raises naming it', function()
      raises('qoslab.plan.load: path: expected a string, got nil', plan.load, nil)
      raises('qoslab.plan.load: path: expected a string, got 5', plan.load, 5)
      raises('qoslab.plan.load: path: expected a string without NUL bytes, got string "/etc\\0x"',
        plan.load, '/etc\0x')
      raises('qoslab.plan.load: name: expected a string, got 5', plan.load, dir .. '/r.jsonl', 5)
    end)

    it('a file that cannot be read is nil, message, CODE, in bounded time', function()
      local timer = require 'qoslab.timer'
      local fifo = dir .. '/fifo.jsonl'
      assert(os.execute("mkfifo '" .. fifo .. "'"))
      local t0 = timer.now()
      local cases = {
        { '/etc', 'results file /etc: is a directory, not a file', 'EISDIR' },
        { dir .. '/none', 'results file ' .. dir .. '/none: cannot read it: No such file or directory '
          .. '(check the path)', 'ENOENT' },
        { '/dev/zero', 'results file /dev/zero: is a character device, not a regular file '
          .. '(it could block or never end)', 'EFTYPE' },
        { fifo, 'results file ' .. fifo .. ': is a FIFO, not a regular file (it could block or never end)',
          'EFTYPE' },
      }
      for _, c in ipairs(cases) do
        local recs, msg, code = plan.load(c[1])
        assert.is_nil(recs, c[1])
        assert.equal(c[2], msg)
        assert.equal(c[3], code)
      end
      assert(timer.now() - t0 < 2, 'took ' .. (timer.now() - t0) .. ' s')
    end)

    it('a file over LOAD_MAX_BYTES is EFBIG; at the bound it is read', function()
      local path = dir .. '/r.jsonl'
      local line = '{"sweep":"s","params":{"a":1}}\n'
      local f = assert(io.open(path, 'w'))
      f:write(line, line)
      f:close()
      local saved = plan.LOAD_MAX_BYTES
      plan.LOAD_MAX_BYTES = 2 * #line
      local recs, bad = plan.load(path)
      plan.LOAD_MAX_BYTES = 2 * #line - 1
      local none, msg, code = plan.load(path)
      plan.LOAD_MAX_BYTES = saved
      assert.equal(2, #recs)
      assert.equal(0, bad)
      assert.is_nil(none)
      assert.equal('EFBIG', code)
      assert.equal(string.format('results file %s: %d bytes, more than the %d read at most', path,
        2 * #line, 2 * #line - 1), msg)
    end)

    it('an unreadable file is EACCES (as an unprivileged user)', function()
      local path = dir .. '/locked.jsonl'
      local f = assert(io.open(path, 'w'))
      f:write('{}\n')
      f:close()
      assert(os.execute("chmod 000 '" .. path .. "' && chmod 755 '" .. dir .. "'"))
      local script = string.format([[
package.path = './lua/?.lua;' .. package.path
package.cpath = './%s/?.so;' .. package.cpath
local recs, msg, code = require('qoslab.plan').load(%q)
io.write(tostring(recs), '|', tostring(msg), '|', tostring(code))
]], os.getenv('QOSLAB_BUILD') or 'build', path)
      local sf = assert(io.open(dir .. '/load.lua', 'w'))
      sf:write(script)
      sf:close()
      local p = assert(io.popen("id -u"))
      local uid = p:read('l')
      p:close()
      if uid ~= '0' then
        local recs, _, code = plan.load(path)
        assert.is_nil(recs)
        assert.equal('EACCES', code)
        return
      end
      p = assert(io.popen("setpriv --reuid=65534 --regid=65534 --clear-groups lua5.4 '"
        .. dir .. "/load.lua' 2>&1"))
      local out = p:read('a')
      p:close()
      assert.equal('nil|results file ' .. path .. ': cannot open it: Permission denied '
        .. '(no permission to read it)|EACCES', out)
    end)

    it('resume from a results file that cannot be read raises instead of running all again', function()
      assert(os.execute("mkdir '" .. dir .. "/results.jsonl'"))
      local runs = 0
      local ok, err = pcall(plan.sweep, { name = 'r', params = { a = { 1 } }, out = dir, resume = true,
        progress = false, run = function() runs = runs + 1 return 1 end })
      assert.is_false(ok)
      assert.matches('qoslab.plan.sweep: cannot resume: results file ' .. dir
        .. '/results.jsonl: is a directory, not a file (EISDIR)', err, 1, true)
      assert.equal(0, runs)
    end)
  end)
end)

-- plan.sweep's option errors had no position (opts.repeat_count = 0, a bad
-- name or on_error, a missing run: raised two levels above the caller,
-- past busted's pcall or the REPL's chunk) or the line above the caller's
-- (opts.params.a = {}); and params = {p = {0/0}} or {p = {1, 1}} ran,
-- although NaN is written as null (its record never matched on resume)
-- and a duplicate's record is taken for the first's. Each now raises at
-- the caller's line, naming the field.
describe('qoslab.plan.sweep option errors, at the caller', function()
  local HERE = debug.getinfo(1, 'S').short_src
  local runs = 0
  local run = function() runs = runs + 1 return 1 end
  before_each(function() runs = 0 end)

  -- f calls plan.sweep (or product) on the line `raises` is called from;
  -- the message must start with this file's name and that line.
  local function raises(f, expected)
    local line = debug.getinfo(2, 'l').currentline
    local ok, err = pcall(f)
    assert.is_false(ok, 'expected an error: ' .. expected)
    assert.equal(HERE .. ':' .. line .. ': ' .. expected, tostring(err))
  end
  -- sweep options: a working set, with t's keys set ("none" removes one)
  local function opts(t)
    local o = { name = 'x', params = { a = { 1 } }, run = run, progress = false }
    for k, v in pairs(t) do
      if v == 'none' then o[k] = nil else o[k] = v end
    end
    return o
  end
  local sweep = plan.sweep

  it('each option check', function()
    raises(function() local s = sweep(opts { repeat_count = 0 }) return s end,
      'qoslab.plan.sweep: opts.repeat_count: expected an integer in [1, 100000], got 0')
    raises(function() local s = sweep(opts { name = 5 }) return s end,
      'qoslab.plan.sweep: opts.name: expected a non-empty string, got 5')
    raises(function() local s = sweep(opts { on_error = 'x' }) return s end,
      'qoslab.plan.sweep: opts.on_error: expected one of "raise", "record", got string "x"')
    raises(function() local s = sweep(opts { run = 'none' }) return s end,
      'qoslab.plan.sweep: opts.run: expected a function, got nil')
    raises(function() local s = sweep(opts { params = { a = {} } }) return s end,
      'qoslab.plan.sweep: opts.params.a: expected a non-empty list of values, got table')
    raises(function() local s = sweep(5) return s end, 'qoslab.plan.sweep: opts: expected a table, got 5')
    raises(function() local s = sweep(opts { bogus = 1 }) return s end,
      'qoslab.plan.sweep: opts.bogus: unknown key (known keys: backend, format, fsync, keep_results, '
      .. 'meta, metric, metric_name, name, on_error, order, out, params, points, progress, repeat_count, '
      .. 'resume, run, setup, setup_point, stop_row, teardown, teardown_point, where)')
    raises(function() local s = sweep(opts { points = { { a = 1 } } }) return s end,
      'qoslab.plan.sweep: opts.params and opts.points exclude each other')
    raises(function() local s = sweep(opts { params = 'none' }) return s end,
      'qoslab.plan.sweep: opts.params or opts.points is required')
    raises(function() local s = sweep(opts { params = { a = { 1 }, b = { 2 } }, order = { 'a' } }) return s end,
      'qoslab.plan.sweep: opts.order: parameter "b" missing')
    raises(function() local s = sweep(opts { order = { 'a', 'c' } }) return s end,
      'qoslab.plan.sweep: opts.order[2]: expected a name in opts.params, got string "c"')
    raises(function() local s = sweep(opts { params = 'none', points = { 1 } }) return s end,
      'qoslab.plan.sweep: opts.points[1]: expected a table, got 1')
    raises(function() local s = sweep(opts { params = 'none', points = { { a = 1 } }, order = { 'a', 'a' } }) return s end,
      'qoslab.plan.sweep: opts.order: "a" listed twice')
    raises(function() local s = sweep(opts { meta = 'm' }) return s end,
      'qoslab.plan.sweep: opts.meta: expected a table, got string "m"')
    assert.equal(0, runs)
  end)

  it('NaN, inf and duplicate parameter values', function()
    raises(function() local s = sweep(opts { params = { p = { 0 / 0 } } }) return s end,
      'qoslab.plan.sweep: opts.params.p[1]: expected a finite number, got nan')
    raises(function() local s = sweep(opts { params = { p = { 1, math.huge } } }) return s end,
      'qoslab.plan.sweep: opts.params.p[2]: expected a finite number, got inf')
    raises(function() local s = sweep(opts { params = { p = { 1, 1 } } }) return s end,
      'qoslab.plan.sweep: opts.params.p[2]: expected a value not listed before, got 1 '
      .. '(a duplicate of opts.params.p[1])')
    -- 1 and 1.0 are one point (one key, one record; messages write an
    -- integral float as an integer)
    raises(function() local s = sweep(opts { params = { p = { 1, 2, 1.0 } } }) return s end,
      'qoslab.plan.sweep: opts.params.p[3]: expected a value not listed before, got 1 '
      .. '(a duplicate of opts.params.p[1])')
    raises(function() local s = sweep(opts { params = { m = { 'x', 'x' } } }) return s end,
      'qoslab.plan.sweep: opts.params.m[2]: expected a value not listed before, got string "x" '
      .. '(a duplicate of opts.params.m[1])')
    raises(function() local s = sweep(opts { params = 'none', points = { { p = 0 / 0 } } }) return s end,
      'qoslab.plan.sweep: opts.points[1].p: expected a finite number, got nan')
    local pts = { { a = 1, b = 2 }, { a = 2, b = 2 }, { b = 2, a = 1.0 } }
    raises(function() local s = sweep(opts { params = 'none', points = pts }) return s end,
      'qoslab.plan.sweep: opts.points[3]: expected a point not listed before, got the same '
      .. 'parameters as opts.points[1] (a=1,b=2)')
    assert.equal(0, runs)
    -- distinct values of every type still run
    local s = sweep(opts { params = { p = { 1, 1.5, -1 }, m = { 'x', true, false } } })
    assert.equal(9, #s.points)
    assert.equal(9, runs)
  end)

  it('plan.product takes the same rules, at its caller', function()
    raises(function() local p = plan.product { p = { 1, 0 / 0 } } return p end,
      'qoslab.plan.product: params.p[2]: expected a finite number, got nan')
    raises(function() local p = plan.product { p = { 1, 1 } } return p end,
      'qoslab.plan.product: params.p[2]: expected a value not listed before, got 1 (a duplicate of params.p[1])')
    raises(function() local p = plan.product { a = {} } return p end,
      'qoslab.plan.product: params.a: expected a non-empty list of values, got table')
  end)

  it('set_defaults: an unknown key, at the caller', function()
    raises(function() plan.set_defaults { outdir = 'x' } end, 'qoslab.plan.set_defaults: d.outdir: unknown key '
      .. '(known keys: backend, on_record, out, progress, quick, resume, where)')
  end)
end)
