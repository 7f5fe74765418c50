-- delay_sweep.lua: TCP throughput against one-way delay (reference experiment, part 1).
--
-- Shows: on a 1 Gbit/s link with no loss, one TCP stream with the kernel's
-- default window reaches the link rate only at small delays; past the knee
-- throughput follows window / RTT. The table puts the measured throughput
-- beside "max cwnd/RTT" (the bound set by the largest congestion window the
-- sender reached, over its mean RTT, from TCP_INFO: not a configured window),
-- TCP retransmits, the impairment's own drop counter (netem's or the link's) and the CPU receive-backlog drops
-- (/proc/net/softnet_stat) during the run, whether a CPU was
-- the bottleneck (always check this in the qemu guest, whose CPU is
-- emulated), and the published reference values (one TCP stream over
-- 1 Gbit/s Ethernet with netem on the sender, iperf as traffic).
--
-- Run:   bin/qoslab run examples/delay_sweep.lua [--out DIR] [--resume] [--quick]
-- Needs: root (namespaces); kernel netem, or qoslab's native link where the kernel lacks it.
-- Files: DIR/results.jsonl, delay_sweep.csv/.json, delay_sweep.png/.svg
local qoslab = require 'qoslab'
local demo = require 'qoslab.demo'
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
    -- demo.counted adds netem's and the CPU backlog's drops during the run.
    return demo.counted(tb, function()
      return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, proto = 'tcp',
        duration_s = quick and 2 or math.max(10, math.ceil(6 * rtt_s)),
        connect_timeout_s = math.max(10, math.ceil(4 * rtt_s)) }
    end)
  end,
}

local extra = demo.explain_columns(tb.backend)
extra[#extra + 1] = { header = 'reference Mbit/s', value = function(e) return reference_mbps[e.params.delay_ms] end }
io.write(report.series(summary, {
  title = 'TCP throughput vs one-way delay (1 Gbit/s, loss 0, one stream, default window)',
  extra = extra,
}))
if run.where == 'guest' then print(demo.GUEST_NOTE) end
report.write_csv(out .. '/delay_sweep.csv', summary)
report.write_json(out .. '/delay_sweep.json', summary)
local ref = {}
for _, d in ipairs { 1, 50, 100, 200, 300, 500, 1000, 3000, 5000 } do ref[#ref + 1] = { d, reference_mbps[d] } end
local files, err = plot.sweep_lines(summary, { out = out .. '/delay_sweep', x = 'delay_ms',
  title = 'TCP throughput vs one-way delay (1 Gbit/s link, loss 0)',
  xlabel = 'one-way delay (ms)', ylabel = 'throughput (Mbit/s, log)', logy = true,
  series_title = function() return 'measured (qoslab)' end,
  hlines = { { y = 1000, title = 'link rate' } },
  extra_series = demo.cwnd_series(summary, { { title = 'reference (iperf, two hosts)', points = ref } }) })
print(files and ('plot: ' .. files.png) or ('no plot: ' .. tostring(err)))
