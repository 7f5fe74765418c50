-- schedule.lua: impairments that change during a test: a list of steps, and
-- a mahimahi packet-delivery trace, each under one TCP test, drawn over time.
--
-- Shows: a schedule (tb:schedule) applies each step at its planned time from
-- a native thread while the test runs, and every change is logged with its
-- lag; the time-series plot puts the spec in force under throughput and RTT.
-- Steps: 10 ms, then 50 ms with 0.5 % loss (the RTT jumps, cwnd falls),
-- then 20 ms at 20 Mbit/s (throughput drops to the rate). Trace: a
-- generated mahimahi trace (one period of 1 s, 1 to 7 packets per ms: 12 to
-- 84 Mbit/s) read into one rate step per 100 ms window: the throughput
-- follows it, behind the queue that fills when the rate falls (the RTT
-- grows by hundreds of ms in the 1000-packet queue). A finished schedule
-- leaves its last step in force: tb:impair {} restores the path after each
-- test.
--
-- Run:   bin/qoslab run examples/schedule.lua [--out DIR] [--resume] [--quick]
-- Needs: root (namespaces); kernel netem, or qoslab's native link where the kernel lacks it.
-- Files: DIR/results.jsonl (each record's result with impairment_changes),
--        schedule.csv, cell.trace (the generated trace),
--        schedule-steps.png/.svg, schedule-trace.png/.svg (and their .dat/.gp)
local qoslab = require 'qoslab'
local plan, report, plot, schedule = qoslab.plan, qoslab.report, qoslab.plot, qoslab.schedule
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'
local out = run.out or 'results/schedule'
local T = quick and 3 or 12   -- seconds of each test

-- The trace, written as mahimahi's link shell reads it: one line per
-- delivery opportunity of a 1500-byte packet, its time in ms (repeated for
-- several packets in one ms); it loops with the period of its last time.
assert(require('qoslab.fs').mkdir_p(out) ~= nil)
local trace = out .. '/cell.trace'
do
  local f = assert(io.open(trace, 'w'))
  for ms = 1, 1000 do
    for _ = 1, 1 + math.floor(3 * (1 + math.sin(2 * math.pi * ms / 1000)) + 0.5) do
      f:write(ms, '\n')
    end
  end
  f:close()
end

local impairments = {
  steps = {
    { at_s = 0, delay_ms = 10 },
    { at_s = T / 3, delay_ms = 50, loss_pct = 0.5 },
    { at_s = 2 * T / 3, delay_ms = 20, rate_bps = 20e6 },
  },
  trace = assert(schedule.read_mahimahi(trace, { duration_s = T, window_ms = 100, spec = { delay_ms = 20 } })),
}

local tb <close> = assert(qoslab.testbed { rate_bps = 100e6 })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })

local plots = {}
local summary = plan.sweep {
  name = 'schedule', params = { impairment = { 'steps', 'trace' } },
  run = function(p)
    local sched <close> = assert(tb:schedule(impairments[p.impairment]))
    local res, msg, code = qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns,
      proto = 'tcp', duration_s = T, interval_s = 0.25 }
    -- the steps are all due within the test; the last one stays in force
    sched:wait(5)
    assert(tb:impair {})
    if not res then return nil, msg, code end
    sched:attach(res)   -- res.impairment_changes, each interval's impairment
    local files, err = plot.timeseries(res, { out = out .. '/schedule-' .. p.impairment,
      title = string.format('TCP over a 100 Mbit/s testbed, impairment by %s (%s)', p.impairment, tb.backend) })
    plots[#plots + 1] = files and ('plot: ' .. files.png) or ('no plot: ' .. tostring(err))
    return res
  end,
}

local rows = {}
for _, e in ipairs(summary.points) do
  local res = e.results and e.results[#e.results]
  local lag = res and res.impairment_lag_ms or {}
  rows[#rows + 1] = { e.params.impairment, e.mean and string.format('%.1f', e.mean / 1e6),
    res and res.impairment_changes and #res.impairment_changes, lag.mean_ms and string.format('%.2f', lag.mean_ms),
    lag.max_ms and string.format('%.2f', lag.max_ms) }
end
report.print_table {
  title = string.format('TCP under a schedule (%g s, 100 Mbit/s testbed, backend %s)', T, tb.backend),
  columns = { 'impairment', 'Mbit/s', 'changes', 'lag mean ms', 'lag max ms' }, rows = rows }
report.write_csv(out .. '/schedule.csv', summary)
for _, line in ipairs(plots) do print(line) end
