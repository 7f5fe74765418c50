-- loss_delay_matrix.lua: TCP throughput over loss x delay, with the stop rule
-- (reference experiment, part 2).
--
-- Shows: where 500 kbit/s and 1000 kbit/s still hold as loss (1-10 %) and
-- one-way delay (50-1000 ms) grow. Each loss row stops once throughput falls
-- below 500 kbit/s (later, longer delays of that row are recorded as skipped),
-- as the reference did. Output: the table (rows loss, columns delay), a heat
-- map and a 3-D surface with the 500 and 1000 kbit/s contour lines.
--
-- Run:   bin/qoslab run examples/loss_delay_matrix.lua [--out DIR] [--resume] [--quick]
-- Files: DIR/results.jsonl, matrix.csv/.json, matrix-heatmap.png/.svg, matrix-surface.png/.svg
local qoslab = require 'qoslab'
local plan, report, plot = qoslab.plan, qoslab.report, qoslab.plot
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'
local out = run.out or 'results/loss_delay_matrix'

local loss_pct = quick and { 1, 5 } or { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }
local delay_ms = quick and { 50, 200 } or { 50, 100, 200, 300, 500, 750, 1000 }

local tb <close> = assert(qoslab.testbed { rate_bps = 1e9, impair = { delay_ms = 1, limit_packets = 'auto' } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })

local summary = plan.sweep {
  name = 'loss x delay', params = { loss_pct = loss_pct, delay_ms = delay_ms },
  order = { 'loss_pct', 'delay_ms' },           -- rows = loss, delay grows within a row
  run = function(p)
    assert(tb:impair { delay_ms = p.delay_ms, loss_pct = p.loss_pct, limit_packets = 'auto' })
    return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, proto = 'tcp',
      duration_s = quick and 2 or math.max(10, math.ceil(6 * p.delay_ms / 1000)) }
  end,
  stop_row = function(_, s) return s.mean < 500e3 end,
}

io.write(report.matrix(summary, { row = 'loss_pct', col = 'delay_ms', row_label = 'loss %',
  col_label = 'delay ms', title = 'TCP throughput', unit = 'Mbit/s', scale = 1e6 }))
report.write_csv(out .. '/matrix.csv', summary)
report.write_json(out .. '/matrix.json', summary)
local r, err = plot.sweep_matrix(summary, { out = out .. '/matrix', x = 'delay_ms', y = 'loss_pct',
  title = 'TCP throughput vs loss and one-way delay (1 Gbit/s link)',
  xlabel = 'one-way delay (ms)', ylabel = 'loss (%)', contours_bps = { 500e3, 1000e3 } })
-- the surface only for a grid of 3 x 3 or more (plot.surface_min)
print(r and ('plots: ' .. r.heatmap.png .. (r.surface and (', ' .. r.surface.png) or ''))
  or ('no plots: ' .. tostring(err)))
