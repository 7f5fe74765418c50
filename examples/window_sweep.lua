-- window_sweep.lua: TCP throughput against socket buffer size at 300 ms
-- one-way delay (reference experiment, part 3).
--
-- Shows: raising only the sender's buffer (SO_SNDBUF) helps little, because
-- the receiver's window still limits; raising SO_SNDBUF and SO_RCVBUF together
-- lets throughput follow window / RTT until the link (1 Gbit/s) or the netem
-- queue limits. The table lists the requested size, what the kernel granted
-- (getsockopt) and whether net.core.[rw]mem_max clamped it.
--
-- Run:   bin/qoslab run examples/window_sweep.lua [--out DIR] [--resume] [--quick]
-- Files: DIR/results.jsonl, window_sweep.csv/.json, window_sweep.png/.svg
local qoslab = require 'qoslab'
local plan, report, plot = qoslab.plan, qoslab.report, qoslab.plot
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'
local out = run.out or 'results/window_sweep'

local KiB, MiB = 1024, 1024 * 1024
local sizes = quick and { 256 * KiB, 4 * MiB }
  or { 64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB }
local delay_ms = 300

local tb <close> = assert(qoslab.testbed { rate_bps = 1e9, impair = { delay_ms = delay_ms, limit_packets = 'auto' } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })

-- SO_SNDBUF/SO_RCVBUF are capped by net.core.wmem_max/rmem_max. These are
-- global (read-only inside a child namespace): raise them here, in the host's
-- namespace, for the sweep and put the old values back afterwards.
local function sysctl(key, value)
  local path = '/proc/sys/' .. key:gsub('%.', '/')
  local f = io.open(path, value and 'w' or 'r')
  if not f then return nil end
  local v = value and f:write(value, '\n') or f:read('l')
  return f:close() and v
end
local saved = {}

local points = {}
for _, mode in ipairs { 'sndbuf', 'sndbuf+rcvbuf' } do
  for _, w in ipairs(sizes) do points[#points + 1] = { mode = mode, window_bytes = w } end
end

local summary = plan.sweep {
  name = 'window sweep at 300 ms', points = points, order = { 'mode', 'window_bytes' },
  setup = function()
    for _, key in ipairs { 'net.core.rmem_max', 'net.core.wmem_max' } do
      local old = tonumber(sysctl(key))
      if old and old < 2 * sizes[#sizes] then
        if sysctl(key, 2 * sizes[#sizes]) then
          saved[#saved + 1] = { key, old }
        else
          io.stderr:write('warning: cannot raise ', key, ' (not root?): large buffers will be clamped\n')
        end
      end
    end
  end,
  teardown = function()   -- runs on error and interruption too
    for i = #saved, 1, -1 do sysctl(saved[i][1], saved[i][2]) end
  end,
  run = function(p)
    local c = { host = tb.server_addr, netns = tb.client_netns, proto = 'tcp',
                duration_s = quick and 2 or 15 }
    if p.mode == 'sndbuf' then c.sndbuf_bytes = p.window_bytes else c.window_bytes = p.window_bytes end
    return qoslab.traffic.run(c)
  end,
}

local function granted(e, side, key)
  local res = e.results and e.results[#e.results]
  local s = res and res.streams and res.streams[1] and res.streams[1][side]
  local b = s and s[key]
  if not b or not b.granted_bytes then return '-' end
  return plot.bytes_label(b.granted_bytes) .. (b.clamped and ' (clamped)' or '')
end

io.write(report.series(summary, {
  title = 'TCP throughput at 300 ms one-way delay, 1 Gbit/s link',
  extra = {
    { header = 'window/RTT Mbit/s', value = function(e)
        return string.format('%.3g', e.params.window_bytes * 8 / (delay_ms / 1000) / 1e6) end },
    { header = 'SO_SNDBUF granted', value = function(e) return granted(e, 'sender', 'sndbuf') end },
    { header = 'SO_RCVBUF granted', value = function(e) return granted(e, 'receiver', 'rcvbuf') end },
  },
}))
report.write_csv(out .. '/window_sweep.csv', summary)
report.write_json(out .. '/window_sweep.json', summary)
local bound = {}
for _, w in ipairs(sizes) do bound[#bound + 1] = { w, math.min(1000, w * 8 / (delay_ms / 1000) / 1e6) } end
local files, err = plot.sweep_lines(summary, { out = out .. '/window_sweep', x = 'window_bytes',
  series = 'mode', series_title = function(m)
    return m == 'sndbuf' and 'SO_SNDBUF = x on both ends, SO_RCVBUF left to autotuning'
      or 'SO_SNDBUF = SO_RCVBUF = x on both ends' end,
  title = 'TCP throughput vs socket buffer at 300 ms one-way delay (1 Gbit/s)',
  xlabel = 'requested socket buffer (both ends)', ylabel = 'throughput (Mbit/s)', xtic_label = plot.bytes_label,
  extra_series = { { title = 'ceiling: x / RTT, capped at the link rate', points = bound, reference = true } } })
print(files and ('plot: ' .. files.png) or ('no plot: ' .. tostring(err)))
