-- delay_sweep.lua: TCP throughput against one-way delay (reference experiment, part 1).
--
-- Shows: on a 1 Gbit/s link with no loss, one TCP stream with the kernel's
-- default window reaches the link rate only at small delays; past the knee
-- throughput follows window / RTT. The table puts the measured throughput
-- beside window / RTT (largest cwnd over mean RTT, from the sender's TCP_INFO)
-- and beside the published reference values (DESIGN.md §1).
--
-- Run:   bin/qoslab run examples/delay_sweep.lua [--out DIR] [--resume] [--quick]
-- Needs: root (namespaces) and kernel netem (else qoslab runs it in the qemu guest).
-- Files: DIR/results.jsonl, delay_sweep.csv/.json, delay_sweep.png/.svg
local qoslab = require 'qoslab'
local plan, report, plot = qoslab.plan, qoslab.report, qoslab.plot
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'
local out = run.out or 'results/delay_sweep'

local delays_ms = quick and { 1, 100 } or { 1, 10, 50, 100, 200, 300, 500, 1000, 2000, 3000, 5000 }
local reference_mbps = { [1] = 854, [50] = 446, [100] = 226, [200] = 110, [300] = 70,
                         [500] = 40, [1000] = 18.4, [3000] = 6, [5000] = 0.2 }

-- limit_packets = "auto": netem's queue must hold rate x delay (1 Gbit/s x 5 s
-- is about 430 000 full-size packets), or netem itself drops.
local tb <close> = assert(qoslab.testbed { rate_bps = 1e9, impair = { delay_ms = 1, limit_packets = 'auto' } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })

local summary = plan.sweep {
  name = 'delay sweep', params = { delay_ms = delays_ms },
  repeat_count = quick and 1 or 2,
  run = function(p)
    assert(tb:impair { delay_ms = p.delay_ms, limit_packets = 'auto' })
    -- Slow start needs several RTTs: long delays get longer runs.
    local rtt_s = p.delay_ms / 1000
    return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, proto = 'tcp',
      duration_s = quick and 2 or math.max(10, math.ceil(6 * rtt_s)),
      connect_timeout_s = math.max(10, math.ceil(4 * rtt_s)) }
  end,
}

local function window_over_rtt(e)
  local res = e.results and e.results[#e.results]
  local s = res and res.streams and res.streams[1] and res.streams[1].sender
  if not (s and s.max_snd_cwnd_bytes and s.mean_rtt_us and s.mean_rtt_us > 0) then return '-' end
  return string.format('%.3g', s.max_snd_cwnd_bytes * 8 / (s.mean_rtt_us / 1e6) / 1e6)
end

io.write(report.series(summary, {
  title = 'TCP throughput vs one-way delay (1 Gbit/s, loss 0, one stream, default window)',
  extra = { { header = 'window/RTT Mbit/s', value = window_over_rtt },
            { header = 'reference Mbit/s', value = function(e) return reference_mbps[e.params.delay_ms] end } },
}))
report.write_csv(out .. '/delay_sweep.csv', summary)
report.write_json(out .. '/delay_sweep.json', summary)
local ref = {}
for _, d in ipairs { 1, 50, 100, 200, 300, 500, 1000, 3000, 5000 } do ref[#ref + 1] = { d, reference_mbps[d] } end
local files, err = plot.sweep_lines(summary, { out = out .. '/delay_sweep', x = 'delay_ms',
  title = 'TCP throughput vs one-way delay (1 Gbit/s link, loss 0)',
  xlabel = 'one-way delay (ms)', ylabel = 'throughput (Mbit/s, log)', logy = true,
  series_title = function() return 'measured (qoslab)' end,
  hlines = { { y = 1000, title = 'link rate' } },
  extra_series = { { title = 'reference (iperf, two hosts)', points = ref } } })
print(files and ('plot: ' .. files.png) or ('no plot: ' .. tostring(err)))
