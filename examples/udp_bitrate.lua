-- udp_bitrate.lua: UDP at target bitrates, datagram lengths and receive
-- buffer sizes (reference experiment, part 5).
--
-- Shows: achieved rate against target, and the receiver's loss, duplicates,
-- reordering and jitter (RFC 3550), over a 1 Gbit/s link with 10 ms one-way
-- delay. Small datagrams at high rates cost per-packet CPU; a small receive
-- buffer overflows in bursts (loss that netem did not cause: the netem drop
-- counter is printed beside it).
--
-- Run:   bin/qoslab run examples/udp_bitrate.lua [--out DIR] [--resume] [--quick]
-- Files: DIR/results.jsonl, udp.csv/.json, udp.png/.svg
local qoslab = require 'qoslab'
local plan, report, plot = qoslab.plan, qoslab.report, qoslab.plot
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'
local out = run.out or 'results/udp_bitrate'

local params = quick
  and { bitrate_bps = { 10e6, 100e6 }, length_bytes = { 1400 }, rcvbuf_bytes = { 0 } }
  or { bitrate_bps = { 10e6, 100e6, 300e6, 600e6, 900e6 }, length_bytes = { 256, 1400 },
       rcvbuf_bytes = { 0, 212992, 4194304 } }    -- 0 = the kernel's default buffer

local tb <close> = assert(qoslab.testbed { rate_bps = 1e9, impair = { delay_ms = 10, limit_packets = 'auto' } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })

-- Drops counted by the netem qdisc on the client's egress (it sits under the
-- rate limiter, so read it from the testbed's qdisc list), or by the native
-- link where the testbed has no netem (its entry has kind "link").
local function netem_drops()
  local st = assert(tb:stats())
  local drops = 0
  for _, q in ipairs(st.client) do
    if q.kind == 'netem' or q.kind == 'link' then drops = drops + q.drops end
  end
  return drops
end

local summary = plan.sweep {
  name = 'udp bitrate', params = params, order = { 'rcvbuf_bytes', 'length_bytes', 'bitrate_bps' },
  run = function(p)
    local c = { host = tb.server_addr, netns = tb.client_netns, proto = 'udp',
                bitrate_bps = p.bitrate_bps, length_bytes = p.length_bytes,
                duration_s = quick and 2 or 10 }
    if p.rcvbuf_bytes > 0 then c.rcvbuf_bytes = p.rcvbuf_bytes end
    local before = netem_drops()
    local res, msg, code = qoslab.traffic.run(c)
    if not res then return nil, msg, code end
    res.netem_drops = netem_drops() - before   -- stored with the point's record
    return res
  end,
}

local rows = {}
for _, e in ipairs(summary.points) do
  local res = e.results and e.results[#e.results]
  local r = res and res.received or {}
  rows[#rows + 1] = {
    e.params.rcvbuf_bytes == 0 and 'default' or plot.bytes_label(e.params.rcvbuf_bytes),
    e.params.length_bytes, string.format('%g', e.params.bitrate_bps / 1e6),
    e.mean and string.format('%.1f', e.mean / 1e6),
    r.lost_pct and string.format('%.3f', r.lost_pct), r.lost_packets, r.duplicate_packets,
    r.out_of_order_packets, r.jitter_ms and string.format('%.3f', r.jitter_ms),
    res and res.netem_drops,
  }
end
report.print_table { title = 'UDP over a 1 Gbit/s link, 10 ms one-way delay',
  columns = { 'rcvbuf', 'length B', 'target Mbit/s', 'achieved Mbit/s', 'lost %', 'lost',
              'duplicates', 'out of order', 'jitter ms', tb.backend == 'link' and 'link drops' or 'netem drops' },
  rows = rows }
report.write_csv(out .. '/udp.csv', summary)
report.write_json(out .. '/udp.json', summary)
local files, err = plot.sweep_lines(summary, { out = out .. '/udp', x = 'bitrate_bps', series = 'length_bytes',
  where = { rcvbuf_bytes = 0 }, logx = false, scale = 1e6,
  series_title = function(l) return string.format('%d-byte datagrams', l) end,
  title = 'UDP achieved vs target rate (1 Gbit/s link, default receive buffer)',
  xlabel = 'target bitrate (Mbit/s)', ylabel = 'achieved (Mbit/s)',
  xtic_label = function(b) return string.format('%g', b / 1e6) end,
  hlines = { { y = 1000, title = 'link rate' } } })
print(files and ('plot: ' .. files.png) or ('no plot: ' .. tostring(err)))
