-- Impairment schedules on the native link (a testbed with backend "link",
-- namespaces it makes and removes, also when a test fails). A delay step
-- from 10 to 100 ms at 2 s of a 4 s TCP test shows in the test's TCP RTT
-- and in the change log (planned on the grid, actual within a lag bound a
-- loaded 2-core host meets: the step is one mutex-held spec swap); a step
-- on a link whose device was deleted fails with the link's fault instead of
-- passing unnoticed; limit_packets = "auto" is sized as tb:impair sizes it;
-- closing the testbed stops a schedule mid-way.
local qoslab = require 'qoslab'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

-- The lag of one change may include a scheduling delay of the thread on a
-- busy host; 250 ms is far above it and far below the 2 s between steps.
local LAG_MAX_MS = 250

local function cleanups() return H.cleanups(finally) end

local sender_rtt_ms = H.sender_rtt_ms

-- The error of f(...) called from a line of this file, and the position
-- that line gives a message raised at it ("spec/integration/...:N: ").
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

-- Wait (up to 5 s) until schedule s has run n steps.
local function until_done(s, n)
  local t0 = H.now()
  while #s:changes() < n and H.now() - t0 < 5 do H.sleep(0.01) end
  assert.equal(n, #s:changes())
end

describe('qoslab.Testbed:schedule on the link', function()
  it('a delay step at 2 s shows in the RTT of a 4 s TCP test and in the change log', function()
    local defer = cleanups()
    local tb = assert(qoslab.testbed { backend = 'link', impair = { delay_ms = 10 } })
    defer(function() tb:close() end)
    local srv = assert(traffic.server { netns = tb.server_netns, port = 0 })
    defer(function() srv:close() end)
    local sched = assert(tb:schedule { { at_s = 0, delay_ms = 10 }, { at_s = 2, delay_ms = 100 } })
    defer(function() sched:close() end)
    local res = assert(traffic.run { host = tb.server_addr, port = srv:port(), netns = tb.client_netns,
      duration_s = 4, interval_s = 0.5 })
    assert.is_true(sched:wait(5))
    sched:attach(res)

    local ch = res.impairment_changes
    assert.equal(2, #ch)
    for i, c in ipairs(ch) do
      assert.is_true(c.ok, tostring(c.message))
      assert.equal(i, c.step)
      assert.equal((i - 1) * 2, c.planned_s)   -- on the grid, exactly
      assert(c.lag_ms >= 0 and c.lag_ms < LAG_MAX_MS, 'lag ' .. c.lag_ms .. ' ms')
      assert(math.abs(c.actual_s - c.planned_s - c.lag_ms / 1000) < 1e-6)
    end
    assert.same({ delay_ms = 100, limit_packets = 1000 }, ch[2].spec)
    -- the schedule started before the test (its connections), so on the
    -- test's clock the step comes a little before 2 s
    assert(ch[2].test_s > 1 and ch[2].test_s < 2 + LAG_MAX_MS / 1000, 'test_s ' .. ch[2].test_s)
    assert(math.abs(ch[2].test_s - ch[2].planned_test_s - ch[2].lag_ms / 1000) < 0.002)
    local lag = res.impairment_lag_ms
    assert.equal(2, lag.n)
    assert.equal(math.max(ch[1].lag_ms, ch[2].lag_ms), lag.max_ms)

    -- each interval carries the spec in force; the RTT follows it
    local before_min, after = math.huge, 0
    for _, iv in ipairs(res.intervals) do
      local mid = (iv.start_s + iv.end_s) / 2
      assert.equal(mid < ch[2].test_s and 10 or 100, iv.impairment.delay_ms)
      local rtt = sender_rtt_ms(iv)
      assert(rtt, 'no TCP RTT in an interval')
      if iv.end_s < ch[2].test_s then before_min = math.min(before_min, rtt) end
      if iv.start_s > ch[2].test_s + 0.3 then
        after = after + 1
        assert(rtt >= 95, string.format('RTT %.1f ms at %.2f s after the step to 100 ms', rtt, iv.start_s))
      end
    end
    assert(before_min < 50, string.format('RTT %.1f ms before the step (10 ms delay)', before_min))
    assert(after >= 2, 'too few intervals after the step')
  end)

  it('limit_packets = "auto" in a step is sized from the testbed\'s rate, as tb:impair sizes it', function()
    -- 300 ms behind a 50 Mbit/s shaper holds about 1270 datagrams of 1476
    -- bytes: a limit of 1000 drops some, "auto" (netem's rule at the
    -- shaper's rate: 1857) none
    local defer = cleanups()
    local tb = assert(qoslab.testbed { backend = 'link', rate_bps = 50e6 })
    defer(function() tb:close() end)
    local srv = assert(traffic.server { netns = tb.server_netns, port = 0 })
    defer(function() srv:close() end)
    local function limit_drops()
      for _, q in ipairs(assert(tb:stats()).client) do
        if q.kind == 'link' then return q.drops_by_reason.limit end
      end
    end
    local drops = {}
    for _, limit in ipairs { 1000, 'auto' } do
      local sched = assert(tb:schedule { { at_s = 0, delay_ms = 300, limit_packets = limit } })
      assert.is_true(sched:wait(2))
      assert.is_true(sched:changes()[1].ok)
      local before = limit_drops()
      assert(traffic.run { host = tb.server_addr, port = srv:port(), netns = tb.client_netns,
        proto = 'udp', bitrate_bps = 60e6, duration_s = 1.5 })
      drops[tostring(limit)] = limit_drops() - before
      sched:close()
    end
    assert(drops['1000'] > 0, 'a limit of 1000 dropped nothing: the case does not tell "auto" apart')
    assert.equal(0, drops.auto)
  end)

  it('tb:get() shows the spec in force: a schedule\'s last step, then a later tb:impair', function()
    local defer = cleanups()
    local tb = assert(qoslab.testbed { backend = 'link', impair = { delay_ms = 5 } })
    defer(function() tb:close() end)
    assert.equal(5, tb:get().client.impair.delay_ms)
    local sched = assert(tb:schedule { { at_s = 0, delay_ms = 10 }, { at_s = 0.2, delay_ms = 50, loss_pct = 1 },
      { at_s = 0.4 } })
    assert.is_true(sched:wait(2))
    -- the last step impairs nothing: what is left is the queue, netem's
    -- default limit (as a kernel netem the step replaced would show)
    assert.same({ limit_packets = 1000 }, tb:get().client.impair)
    sched:close()
    sched = assert(tb:schedule { { at_s = 0, delay_ms = 10 }, { at_s = 0.2, delay_ms = 50, loss_pct = 1 } })
    assert.is_true(sched:wait(2))
    local got = tb:get()
    assert.equal(50, got.client.impair.delay_ms)
    assert.equal(1, got.client.impair.loss_pct)
    assert.is_nil(got.server.impair)
    assert.is_true(tb:impair { delay_ms = 7 })
    assert.equal(7, tb:get().client.impair.delay_ms)
    assert.is_nil(tb:get().client.impair.loss_pct)
  end)

  it('a step on a link whose device was deleted fails with the link\'s fault, in the log and the result', function()
    local defer = cleanups()
    local tb = assert(qoslab.testbed { backend = 'link' })
    defer(function() tb:close() end)
    local sched = assert(tb:schedule({ { at_s = 0, delay_ms = 5 }, { at_s = 0.5, delay_ms = 50 } }, { quiet = true }))
    defer(function() sched:close() end)
    H.sleep(0.1)
    H.must('ip -n ' .. tb.client_netns .. ' link del qltun-c')
    local t0 = H.now()
    while not tb._link:failed() and H.now() - t0 < 2 do H.sleep(0.02) end
    assert.is_true(sched:wait(3))
    local ch = sched:changes()
    assert.equal(2, #ch)
    assert.is_true(ch[1].ok)
    assert.is_false(ch[2].ok)
    assert.equal('ELINKFAILED', ch[2].code)
    assert.matches('TUN device qltun%-c', ch[2].message)
    local failed, msg, code = sched:failed()
    assert.is_true(failed)
    assert.equal(ch[2].message, msg)
    assert.equal('ELINKFAILED', code)
    local res = sched:attach { start_time_unix_s = sched._core:start_unix_s(), intervals = {} }
    assert.is_false(res.impairment_changes[2].ok)
    assert.equal(1, res.impairment_lag_ms.n)
  end)

  it('closing the testbed stops a schedule mid-way; a bad step raises before anything runs', function()
    local defer = cleanups()
    local tb = assert(qoslab.testbed { backend = 'link' })
    defer(function() tb:close() end)
    local ok, err = pcall(tb.schedule, tb, { { at_s = 0, delay_ms = 5 }, { at_s = 1, loss_pct = 150 } })
    assert.is_false(ok)
    assert.matches('qoslab.Testbed:schedule: steps[2].loss_pct: expected a finite number in [0, 100], got 150',
      err, 1, true)
    local sched = assert(tb:schedule { { at_s = 0, delay_ms = 5 }, { at_s = 30, delay_ms = 50 } })
    defer(function() sched:close() end)
    H.sleep(0.1)
    local t0 = H.now()
    tb:close()
    assert(H.now() - t0 < 5, 'close waited for the schedule')
    assert.is_true(sched:wait(0))
    assert.equal(1, #sched:changes())
  end)
end)

-- A finished schedule blocked every later one on the testbed: the link
-- kept its schedule hook until the handle was collected, and the testbed
-- kept the handle, so `s:wait(2); s = nil; collectgarbage()` and a new
-- tb:schedule raised "lua/qoslab/schedule.lua:445: qoslab.schedule:
-- target.link: another schedule runs on this link (stop it first)": false
-- (it had finished), in the library, and before the new steps' own checks.
-- It also held the whole link: a schedule on the other direction was
-- refused too. Step errors pointed at testbed.lua, a bad quiet passed.
describe('one schedule per direction on the link', function()
  it('a finished or stopped schedule no longer blocks the next; a running one refuses at the caller\'s line',
    function()
      local defer = cleanups()
      local tb = assert(qoslab.testbed { backend = 'link' })
      defer(function() tb:close() end)
      local ctx = 'qoslab.Testbed:schedule'
      -- the user's case: finished, dropped, collected (the testbed held it)
      local s = assert(tb:schedule { { at_s = 0, delay_ms = 20 } })
      assert.is_true(s:wait(2))
      assert.is_false(s:running())
      s = nil -- luacheck: no unused
      collectgarbage()
      local done = assert(tb:schedule { { at_s = 0, delay_ms = 5 } })
      assert.is_true(done:wait(2))
      -- finished and still referenced (a REPL's): no block either
      local running = assert(tb:schedule { { at_s = 0, delay_ms = 6 }, { at_s = 30, delay_ms = 7 } })
      defer(function() running:close() end)
      until_done(running, 1)
      assert.is_true(running:running())
      assert.equal(6, tb:get().client.impair.delay_ms)
      -- while it runs: the new steps' own errors first, then the refusal,
      -- each at the caller's line
      local e, here = raised_here(tb.schedule, tb, { { at_s = 5, delay_ms = 1 }, { at_s = 1 } })
      assert.equal(here .. ctx .. ': steps[2].at_s: expected >= steps[1].at_s = 5 (steps in time order), got 1', e)
      e, here = raised_here(tb.schedule, tb, { { at_s = 0 } }, { quiet = 'yes' })
      assert.equal(here .. ctx .. ': opts.quiet: expected a boolean, got string "yes"', e)
      e, here = raised_here(tb.schedule, tb, { { at_s = 0, delay_ms = 1 } })
      assert.equal(here .. ctx .. ': the forward direction still runs a schedule (1 of 2 steps done, the last '
        .. 'at at_s = 30): stop that one first (s:stop()), or wait until it ends (s:wait())', e)
      -- the link itself says the same of its direction
      e, here = raised_here(qoslab.schedule.link, tb._link, { { at_s = 0, delay_ms = 1 } })
      assert.equal(here .. 'qoslab.schedule.link: the forward direction of the link still runs a schedule '
        .. '(1 of 2 steps done, the last at at_s = 30): stop that one first (s:stop()), or wait until it '
        .. 'ends (s:wait())', e)
      -- the other direction is another target
      local rev = assert(tb:schedule({ { at_s = 0, delay_ms = 3 } }, { direction = 'reverse' }))
      assert.is_true(rev:wait(2))
      assert.is_true(rev:changes()[1].ok)
      assert.equal(3, tb:get().server.impair.delay_ms)
      -- stopped: the next takes its place; the stopped one's last change
      -- stays in force until the new one's first step is due
      running:stop()
      assert.is_false(running:running())
      local later = assert(tb:schedule { { at_s = 0.5, delay_ms = 8 } })
      assert.equal(6, tb:get().client.impair.delay_ms)
      assert.is_true(later:wait(3))
      assert.is_true(later:changes()[1].ok)
      assert.equal(8, tb:get().client.impair.delay_ms)
      assert.equal(3, tb:get().server.impair.delay_ms)
      -- and a link's schedule finished is replaced there too
      local direct = assert(qoslab.schedule.link(tb._link, { { at_s = 0, delay_ms = 9 } }))
      assert.is_true(direct:wait(2))
      assert.is_true(direct:changes()[1].ok)
      direct = assert(qoslab.schedule.link(tb._link, { { at_s = 0, delay_ms = 4 } }))
      assert.is_true(direct:wait(2))
      assert.is_true(direct:changes()[1].ok)
      -- a closed link is named as the argument
      tb:close()
      e, here = raised_here(qoslab.schedule.link, tb._link, { { at_s = 0 } })
      assert.equal(here .. 'qoslab.schedule.link: link: the link is closed', e)
    end)
end)

-- tb:impair while a schedule ran on the testbed was accepted: the next
-- step replaced the change, and s:attach(res) wrote the schedule's step
-- spec into res.intervals[i].impairment though tb:impair had changed it
-- (the user's case: a CSV trace 10/100/10 ms, then tb:impair{delay_ms = 1}).
describe('tb:impair while a schedule runs on the testbed', function()
  it('is refused at the caller\'s line on that direction; after s:stop() or the end it works again', function()
    local defer = cleanups()
    local tb = assert(qoslab.testbed { backend = 'link' })
    defer(function() tb:close() end)
    local path = os.tmpname()
    defer(function() os.remove(path) end)
    local f = assert(io.open(path, 'w'))
    f:write('time_s,delay_ms,loss_pct\n0,10,0\n1,100,0\n2,10,0\n')
    f:close()
    local s = assert(tb:schedule(path))
    defer(function() s:close() end)
    until_done(s, 1)
    local e, here = raised_here(tb.impair, tb, { delay_ms = 1 })
    assert.equal(here .. 'qoslab.Testbed:impair: the forward direction still runs a schedule (1 of 3 steps '
      .. 'done, the last at at_s = 2): stop it first (s:stop()), or wait until it ends (s:wait())', e)
    e, here = raised_here(tb.impair, tb, {})
    assert.matches(here .. 'qoslab.Testbed:impair: the forward direction still runs a schedule', e, 1, true)
    assert.equal(10, tb:get().client.impair.delay_ms)   -- nothing changed
    -- bad arguments are still named first
    e, here = raised_here(tb.impair, tb, { delay_ms = -1 })
    assert.matches(here .. 'qoslab.Testbed:impair: spec.delay_ms: expected', e, 1, true)
    -- the other direction runs no schedule
    assert.is_true(tb:impair({ delay_ms = 3 }, 'reverse'))
    s:stop()
    assert.is_true(tb:impair { delay_ms = 1 })
    assert.equal(1, tb:get().client.impair.delay_ms)
    -- a schedule that ended blocks nothing either
    local s2 = assert(tb:schedule { { at_s = 0, delay_ms = 20 } })
    assert.is_true(s2:wait(2))
    assert.is_true(tb:impair { delay_ms = 2 })
    assert.equal(2, tb:get().client.impair.delay_ms)
  end)
end)

-- examples/schedule.lua, natively (backend auto takes the native link on a
-- kernel without sch_netem): both points run under their schedule, every
-- record names the link and carries its changes, the plots and the trace are
-- left behind, and no namespace is.
describe('bin/qoslab run examples/schedule.lua --quick', function()
  local q = H.q
  local netns_count = H.netns_count

  it('runs steps and a trace on the link, records the changes, draws both', function()
    local defer = cleanups()
    local p = assert(io.popen('mktemp -d /tmp/qoslab-schedule-example.XXXXXX'))
    local dir = p:read('l')
    p:close()
    defer(function() os.execute('rm -rf ' .. q(dir)) end)
    local before = netns_count()
    p = assert(io.popen('env -u QOSLAB_BUILD lua5.4 bin/qoslab run examples/schedule.lua --quick --out '
      .. q(dir .. '/o') .. ' 2>&1; echo "rc=$?"'))
    local out = p:read('a')
    p:close()
    assert.equal('0', out:match('rc=(%d+)%s*$'), out)
    assert.matches('on this host, backend link', out, 1, true)
    assert.matches('plot: ' .. dir .. '/o/schedule-steps.png', out, 1, true)
    assert.matches('plot: ' .. dir .. '/o/schedule-trace.png', out, 1, true)
    local recs = assert(require('qoslab.plan').load(dir .. '/o/results.jsonl'))
    assert.equal(2, #recs)
    for i, want in ipairs { 3, 30 } do
      assert.equal('link', recs[i].backend)
      local res = recs[i].results[1]
      assert.equal(want, #res.impairment_changes)
      for _, c in ipairs(res.impairment_changes) do assert.is_true(c.ok, tostring(c.message)) end
      assert.equal(want, res.impairment_lag_ms.n)
    end
    for _, f in ipairs { 'schedule-steps.png', 'schedule-trace.png', 'schedule.csv', 'cell.trace' } do
      local h = io.open(dir .. '/o/' .. f, 'rb')
      assert.is_not_nil(h, f)
      local head = h:read(4)
      h:close()
      if f:match('%.png$') then assert.equal('\137PNG', head, f) end
    end
    -- the steps set a rate only in their last third: a gap before it
    local imp = assert(io.open(dir .. '/o/schedule-steps.impairment.dat')):read('a')
    assert.matches('\n0 10 0 NaN\n', imp, 1, true)
    assert.equal(before, netns_count())
  end)
end)
