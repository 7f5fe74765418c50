-- Impairment schedules on kernel netem (runs inside the VM guest): a delay
-- step from 5 to 50 ms at 1.5 s of a 3 s TCP test through a testbed shows
-- in the TCP RTT and in the change log (planned on the grid, actual within a
-- bound an emulated CPU meets), and the kernel holds the last step's spec
-- afterwards; qoslab.netem.schedule on a device without a netem creates it
-- first (so cleanup knows it), sizes a step's limit_packets = "auto", and
-- raises on a bad step naming it before anything changes.
local netem = require 'qoslab.netem'
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

-- an emulated CPU (TCG) schedules threads late; the steps are 1.5 s apart
local LAG_MAX_MS = 500

local function cleanups() return H.cleanups(finally) end

local sender_rtt_ms = H.sender_rtt_ms

describe('schedules on kernel netem', function()
  it('a delay step shows in the RTT of a TCP test, in the log, and in the kernel afterwards', function()
    local defer = cleanups()
    local tb = assert(testbed { backend = 'netem', impair = { delay_ms = 5 } })
    defer(function() tb:close() end)
    local srv = assert(traffic.server { netns = tb.server_netns, port = 0 })
    defer(function() srv:close() end)
    local sched = assert(tb:schedule { { at_s = 0, delay_ms = 5 }, { at_s = 1.5, delay_ms = 50 } })
    defer(function() sched:close() end)
    local res = assert(traffic.run { host = tb.server_addr, port = srv:port(), netns = tb.client_netns,
      duration_s = 3, interval_s = 0.5 })
    assert.is_true(sched:wait(5))
    sched:attach(res)
    local ch = res.impairment_changes
    assert.equal(2, #ch)
    for i, c in ipairs(ch) do
      assert.is_true(c.ok, tostring(c.message))
      assert.equal((i - 1) * 1.5, c.planned_s)
      assert(c.lag_ms >= 0 and c.lag_ms < LAG_MAX_MS, 'lag ' .. c.lag_ms .. ' ms')
    end
    local step = ch[2].test_s
    local before_min, after = math.huge, 0
    for _, iv in ipairs(res.intervals) do
      local rtt = assert(sender_rtt_ms(iv), 'no TCP RTT in an interval')
      if iv.end_s < step then before_min = math.min(before_min, rtt) end
      if iv.start_s > step + 0.3 then
        after = after + 1
        assert(rtt >= 48, string.format('RTT %.1f ms at %.2f s after the step to 50 ms', rtt, iv.start_s))
      end
    end
    assert(before_min < 30, string.format('RTT %.1f ms before the step (5 ms delay)', before_min))
    assert(after >= 1, 'no interval after the step')
    assert.equal(50, netem.get(tb.client_ifname, { netns = tb.client_netns }).delay_ms)
  end)

  it('netem.schedule creates the netem first, resolves "auto", and names a bad step', function()
    local defer = cleanups()
    local tb = assert(testbed { backend = 'netem' })
    defer(function() tb:close() end)
    local o = { netns = tb.client_netns }
    assert.is_nil(netem.get(tb.client_ifname, o))
    local ok, err = pcall(netem.schedule, tb.client_ifname, { { at_s = 0 }, { at_s = 0.2, jitter_ms = -1 } }, o)
    assert.is_false(ok)
    assert.matches('qoslab.netem.schedule: steps[2].jitter_ms: expected', err, 1, true)
    assert.is_nil(netem.get(tb.client_ifname, o))   -- nothing changed
    local sched = assert(netem.schedule(tb.client_ifname,
      { { at_s = 0, delay_ms = 2 }, { at_s = 0.3, delay_ms = 20, limit_packets = 'auto' } },
      { netns = o.netns, quiet = true }))
    defer(function() sched:close() end)
    assert.is_true(sched:wait(5))
    assert.is_false((sched:failed()))
    local got = netem.get(tb.client_ifname, o)
    assert.equal(20, got.delay_ms)
    local need = netem.needed_limit(tb.client_ifname, { delay_ms = 20 }, o)
    assert(need > 1000, 'a veth at 20 ms needs more than the default limit')
    assert.equal(need, got.limit_packets)
  end)

  -- Two schedules on one netem replaced each other's steps (nothing
  -- refused the second), and a netem a testbed's schedule made was not the
  -- testbed's: tb:impair {} left it in place and tb:get() did not show it.
  it('one schedule per netem while it runs, not after; the testbed removes a netem its schedule made', function()
    local defer = cleanups()
    local tb = assert(testbed { backend = 'netem' })
    defer(function() tb:close() end)
    local o = { netns = tb.client_netns }
    local s = assert(netem.schedule(tb.client_ifname, { { at_s = 0, delay_ms = 2 }, { at_s = 30, delay_ms = 3 } },
      { netns = o.netns, quiet = true }))
    defer(function() s:close() end)
    local t0 = H.now()
    while #s:changes() < 1 and H.now() - t0 < 5 do H.sleep(0.02) end
    local busy = ' still runs a schedule (1 of 2 steps done, the last at at_s = 30): stop that one first '
      .. '(s:stop()), or wait until it ends (s:wait())'
    local ok, err = pcall(netem.schedule, tb.client_ifname, { { at_s = 0, delay_ms = 4 } }, o)
    assert.is_false(ok)
    assert.matches('qoslab.netem.schedule: the netem of ' .. tb.client_ifname .. ' (namespace ' .. o.netns
      .. ', parent root)' .. busy, err, 1, true)
    ok, err = pcall(tb.schedule, tb, { { at_s = 0, delay_ms = 4 } })
    assert.is_false(ok)
    assert.matches('qoslab.Testbed:schedule: the forward direction' .. busy, err, 1, true)
    -- a change of that netem is refused as well: the next step would replace it
    local busy_it = busy:gsub('stop that one first', 'stop it first')
    ok, err = pcall(netem.apply, tb.client_ifname, { delay_ms = 9 }, o)
    assert.is_false(ok)
    assert.matches('qoslab.netem.apply: the netem of ' .. tb.client_ifname .. ' (namespace ' .. o.netns
      .. ', parent root)' .. busy_it, err, 1, true)
    ok, err = pcall(netem.update, tb.client_ifname, { delay_ms = 9 }, o)
    assert.is_false(ok)
    assert.matches('qoslab.netem.update: the netem of ' .. tb.client_ifname, err, 1, true)
    -- (through netem.apply: the schedule is netem's, not the testbed's)
    ok, err = pcall(tb.impair, tb, { delay_ms = 9 })
    assert.is_false(ok)
    assert.matches(busy_it, err, 1, true)
    assert.equal(2, netem.get(tb.client_ifname, o).delay_ms)   -- nothing changed
    s:stop()
    local s2 = assert(tb:schedule { { at_s = 0, delay_ms = 4 } })
    assert.is_true(s2:wait(5))
    local s3 = assert(tb:schedule { { at_s = 0, delay_ms = 6 } })   -- s2 finished, still referenced
    assert.is_true(s3:wait(5))
    assert.is_false((s3:failed()))
    assert.equal(6, netem.get(tb.client_ifname, o).delay_ms)
    assert.equal(6, tb:get().client.impair.delay_ms)
    assert.is_true(tb:impair {})
    assert.is_nil(netem.get(tb.client_ifname, o))
    assert.is_nil(tb:get().client.impair)
  end)
end)
