-- parallel_clients.lua: N parallel TCP clients over one 1 Gbit/s link
-- (reference experiment, part 4).
--
-- Shows: each client is window-limited (1 MiB window at 100 ms one-way delay,
-- about 84 Mbit/s); as long as the sum stays under the link rate, every client
-- gets what a single client gets, and once N x single exceeds the link the
-- clients share the link. The table gives the sum, the per-client mean, min
-- and max, N x the single-client rate and the link rate.
--
-- Run:   bin/qoslab run examples/parallel_clients.lua [--out DIR] [--resume] [--quick]
-- Files: DIR/results.jsonl, parallel.csv/.json, parallel.png/.svg
local qoslab = require 'qoslab'
local plan, report, plot = qoslab.plan, qoslab.report, qoslab.plot
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'
local out = run.out or 'results/parallel_clients'

local link_bps, delay_ms, window_bytes = 1e9, 100, 1024 * 1024
local counts = quick and { 1, 4 } or { 1, 2, 4, 8, 12, 16, 24, 32 }

local tb <close> = assert(qoslab.testbed { rate_bps = link_bps,
  impair = { delay_ms = delay_ms, limit_packets = 'auto' } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })

-- One test with N streams: each stream is its own connection and thread, with
-- its own sender and receiver accounting (res.streams[i]).
local summary = plan.sweep {
  name = 'parallel clients', params = { clients = counts },
  run = function(p)
    return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, proto = 'tcp',
      parallel = p.clients, window_bytes = window_bytes, duration_s = quick and 2 or 15 }
  end,
}

local function per_client(e)
  local res = e.results and e.results[#e.results]
  local v = {}
  for _, s in ipairs(res and res.streams or {}) do
    if s.receiver and s.receiver.bits_per_second then v[#v + 1] = s.receiver.bits_per_second end
  end
  return plan.stats(v)
end

local single = summary.points[1].mean
local rows = {}
for _, e in ipairs(summary.points) do
  local pc = per_client(e)
  rows[#rows + 1] = {
    e.params.clients, string.format('%.1f', e.mean / 1e6),
    pc.mean and string.format('%.1f', pc.mean / 1e6), pc.min and string.format('%.1f', pc.min / 1e6),
    pc.max and string.format('%.1f', pc.max / 1e6),
    string.format('%.1f', math.min(e.params.clients * single, link_bps) / 1e6),
  }
end
report.print_table { title = string.format('TCP clients sharing a %g Mbit/s link, %d ms one-way delay, %d KiB window',
    link_bps / 1e6, delay_ms, window_bytes // 1024),
  columns = { 'clients', 'sum Mbit/s', 'per client Mbit/s', 'min Mbit/s', 'max Mbit/s',
              'min(N x single, link) Mbit/s' },
  rows = rows }
report.write_csv(out .. '/parallel.csv', summary)
report.write_json(out .. '/parallel.json', summary)

local per, expect = {}, {}
for _, e in ipairs(summary.points) do
  local pc = per_client(e)
  if pc.mean then per[#per + 1] = { e.params.clients, pc.mean / 1e6 } end
  expect[#expect + 1] = { e.params.clients, math.min(e.params.clients * single, link_bps) / 1e6 }
end
local files, err = plot.sweep_lines(summary, { out = out .. '/parallel', x = 'clients', logx = false,
  title = 'N parallel TCP clients on a 1 Gbit/s link (100 ms, 1 MiB window)',
  xlabel = 'clients', ylabel = 'throughput (Mbit/s)',
  series_title = function() return 'sum of all clients' end,
  hlines = { { y = link_bps / 1e6, title = 'link rate' } },
  extra_series = { { title = 'per client (mean)', points = per },
                   { title = 'min(N x single client, link)', points = expect } } })
print(files and ('plot: ' .. files.png) or ('no plot: ' .. tostring(err)))
