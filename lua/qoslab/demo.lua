--- The demo: a reduced reference experiment on a 1 Gbit/s two-namespace
-- testbed impaired on the client's egress (kernel netem, or qoslab's native
-- link where the kernel has no sch_netem: the testbed's backend "auto").
--
-- The reference experiment is a published one: two hosts on 1 Gbit/s
-- Ethernet, netem on the sender's egress, iperf as traffic. One TCP stream
-- with the default window gave 854 Mbit/s at 1 ms one-way delay, 226 at
-- 100 ms, 0.2 at 5000 ms (`reference_mbps`); at 300 ms a larger SO_SNDBUF
-- took 70 to 83 Mbit/s and SO_RCVBUF too took it to 450 Mbit/s. The demo
-- runs a reduced form of it:
--
-- 1. loss 0, one-way delay swept; one TCP stream with the default window;
--    measured throughput beside the published reference values.
-- 2. a small loss × delay matrix with the stop rule (< 500 kbit/s ends a row);
--    heat map and surface with the 500 and 1000 kbit/s contours.
-- 3. at 300 ms: SO_SNDBUF only, then SO_SNDBUF and SO_RCVBUF, over window sizes.
--
-- Writes results.jsonl, one CSV and one JSON per sweep, and PNG/SVG plots into
-- the results folder. `qoslab demo` runs this file (here or in the guest); it
-- is also a plan: `qoslab run lua/qoslab/demo.lua --out DIR [--quick]`.
-- @module qoslab.demo
local M = {}

--- Published results of the reference experiment: Mbit/s by one-way delay
-- in ms (one TCP stream, default window, no loss).
-- @table reference_mbps
M.reference_mbps = { [1] = 854, [50] = 446, [100] = 226, [200] = 110, [300] = 70,
                     [500] = 40, [1000] = 18.4, [3000] = 6, [5000] = 0.2 }

--- The demo's points and durations.
-- @tparam boolean quick the CI form (two points per sweep, 2 s runs)
-- @treturn table `{delays_ms = {ms, ...}, matrix_loss_pct = {pct, ...},
--   matrix_delay_ms = {ms, ...}, windows_bytes = {bytes, ...}, duration_s =,
--   long_factor = (s of run per s of one-way delay), window_duration_s =}`
-- @usage local cfg = demo.config(true)
function M.config(quick)
  if quick then
    return { delays_ms = { 1, 100 }, matrix_loss_pct = { 1, 5 }, matrix_delay_ms = { 50, 200 },
             windows_bytes = { 262144, 4194304 }, duration_s = 2, long_factor = 0,
             window_duration_s = 2 }
  end
  -- The whole takes about 2 minutes. Each test lasts 12 round trips (slow
  -- start needs about 10), at least 3 s, and also costs the control
  -- exchange's round trips (about 7: 7 s a test at 1000 ms), so 1000 ms
  -- runs once, in the delay sweep, and the matrix stops at 500 ms.
  return { delays_ms = { 1, 50, 100, 300, 1000 }, matrix_loss_pct = { 1, 5 },
           matrix_delay_ms = { 50, 200, 500 },
           windows_bytes = { 262144, 4194304, 16777216 },
           -- 300 ms RTT: slow start alone needs about 10 RTTs (3 s) to reach 16 MiB.
           duration_s = 3, long_factor = 12, window_duration_s = 5 }
end

--- Run length for a one-way delay: long enough for slow start to finish at
-- large RTTs (about 12 RTTs: cwnd doubles per RTT from 10 segments).
-- @tparam table cfg from `config`
-- @tparam number delay_ms one-way delay, ms
-- @treturn number seconds: at least `cfg.duration_s`, else
--   `cfg.long_factor` × delay in s, rounded
-- @usage demo.duration_s(demo.config(false), 1000) --> 12
function M.duration_s(cfg, delay_ms)
  return math.max(cfg.duration_s, math.floor(cfg.long_factor * delay_ms / 1000 + 0.5))
end

-- Buffer limits (net.core.rmem_max / wmem_max) cap SO_SNDBUF/SO_RCVBUF; the
-- window sweep needs them above its largest window. They are global (read-only
-- inside a child namespace), so they are raised in this process's namespace
-- through /proc and restored afterwards.
local function sysctl_file(key) return '/proc/sys/' .. key:gsub('%.', '/') end

local function read_sysctl(key)
  local f = io.open(sysctl_file(key), 'r')
  if not f then return nil end
  local v = tonumber(f:read('l'))
  f:close()
  return v
end

local function write_sysctl(key, value)
  local f = io.open(sysctl_file(key), 'w')
  if not f then return false end
  local ok = f:write(string.format('%d\n', value))
  return f:close() and ok and true or false
end

--- Raise net.core.rmem_max and wmem_max to at least `bytes` (through
-- /proc/sys, in this process's namespace: they are global), so SO_SNDBUF and
-- SO_RCVBUF requests up to that size are not clamped.
-- @function raise_buffer_limits
-- @tparam integer bytes the largest buffer the run asks for
-- @treturn function restore: puts back the values it raised (a limit that
--   could not be read or written is left as it was)
-- @usage local restore = demo.raise_buffer_limits(32 << 20); ...; restore()
local function raise_buffer_limits(bytes)
  local saved = {}
  for _, key in ipairs { 'net.core.rmem_max', 'net.core.wmem_max' } do
    local old = read_sysctl(key)
    if old and old < bytes and write_sysctl(key, bytes) then saved[#saved + 1] = { key, old } end
  end
  return function()
    for i = #saved, 1, -1 do write_sysctl(saved[i][1], saved[i][2]) end
  end
end
M.raise_buffer_limits = raise_buffer_limits

local function must(v, msg, code)
  if v == nil and msg ~= nil then error(tostring(msg) .. (code and (' (' .. code .. ')') or ''), 2) end
  return v
end

--- The bound the sender's own congestion window sets: largest cwnd over mean
-- RTT (both from TCP_INFO), in Mbit/s. Not a configured window: with the
-- default buffers the cwnd is what slow start and congestion avoidance
-- reached in the run.
-- @function window_over_rtt_mbps
-- @tparam table res a traffic result (`qoslab.traffic.run`)
-- @treturn number|nil Mbit/s from the first stream's sender
--   (`max_snd_cwnd_bytes` × 8 / `mean_rtt_us`), nil when it has no TCP_INFO
local function window_over_rtt_mbps(res)
  local s = res and res.streams and res.streams[1] and res.streams[1].sender
  if not s or not s.max_snd_cwnd_bytes or not s.mean_rtt_us or s.mean_rtt_us <= 0 then return nil end
  return s.max_snd_cwnd_bytes * 8 / (s.mean_rtt_us / 1e6) / 1e6
end
M.window_over_rtt_mbps = window_over_rtt_mbps

--- netem's drop counter on the testbed's client egress (queue-limit drops
-- and configured loss alike: reported next to the result, so a queue
-- overflow is never mistaken for configured loss); on the link backend the
-- link's forward drops, which count the same.
-- @tparam table tb a `qoslab.testbed`
-- @treturn integer|nil drops, nil when the counters cannot be read
function M.netem_drops(tb)
  local st = tb:stats()
  if not st then return nil end
  local n
  for _, q in ipairs(st.client or {}) do
    if q.kind == 'netem' or q.kind == 'link' then n = (n or 0) + (q.drops or 0) end
  end
  return n
end

--- Printed under a delay table measured in the qemu guest.
M.GUEST_NOTE = 'note: measured inside the qemu guest, whose CPU is emulated (TCG): TCP there loses '
  .. 'packets outside netem (retransmits with 0 netem drops: the CPU receive backlog overflows, '
  .. 'see "backlog drops"), and one early loss in slow start keeps cwnd small for a '
  .. 'short run, so points spread from run to run and need not fall monotonically with delay. '
  .. 'A kernel with sch_netem on real hardware gives the reference numbers.'

--- Packets the kernel dropped because a CPU's receive backlog was full
-- (`/proc/net/softnet_stat`, 2nd column, summed over CPUs; the queue is
-- net.core.netdev_max_backlog long). Machine-wide, so only a delta over a
-- run says something. On the guest's emulated CPU this, not netem, is
-- where TCP's losses happen.
-- @treturn integer|nil
function M.backlog_drops()
  local f = io.open('/proc/net/softnet_stat', 'r')
  if not f then return nil end
  local n = 0
  for line in f:lines() do
    local d = line:match('^%x+%s+(%x+)')
    if d then n = n + tonumber(d, 16) end
  end
  f:close()
  return n
end

--- Run `fn` (returning a traffic result or nil, msg, code) and store the
-- netem drops and receive-backlog drops it caused in the result
-- (`netem_drops`, `backlog_drops`).
-- @tparam table tb a `qoslab.testbed`
-- @tparam function fn the measurement
-- @return fn's result with the two counts added, or nil, message, code as
--   fn returned them
-- @usage local res = demo.counted(tb, function() return qoslab.traffic.run(o) end)
function M.counted(tb, fn)
  local n0, b0 = M.netem_drops(tb), M.backlog_drops()
  local res, msg, code = fn()
  if not res then return nil, msg, code end
  local n1, b1 = M.netem_drops(tb), M.backlog_drops()
  if n0 and n1 then res.netem_drops = n1 - n0 end
  if b0 and b1 then res.backlog_drops = b1 - b0 end
  return res
end

--- The name of the impairment's drop counter (`netem_drops`) in tables:
-- "link drops" on the link backend, else "netem drops".
-- @tparam[opt] string backend the testbed's (`tb.backend`)
-- @treturn string
-- @usage print(demo.drops_header(tb.backend))
function M.drops_header(backend)
  return backend == 'link' and 'link drops' or 'netem drops'
end

--- The footnote line that says what the drop column counts.
-- @tparam[opt] string backend the testbed's (`tb.backend`)
-- @treturn string e.g. "link drops: the impairment link's own counter during the run"
function M.drops_note(backend)
  return backend == 'link' and 'link drops: qoslab\'s impairment link\'s own counter during the run'
    or 'netem drops: netem\'s own counter during the run'
end

--- The columns that explain a throughput point: the sender's cwnd bound,
-- TCP retransmits, the impairment's drops during the run ("netem drops", or
-- "link drops" on the link backend), and whether a CPU was the
-- bottleneck (`res.cpu_limited`; in the guest the CPU is emulated).
-- @tparam[opt] string backend the testbed's (`tb.backend`), which names the drop column
-- @treturn table report.series `extra` entries
function M.explain_columns(backend)
  local function last(e) return e.results and e.results[#e.results] end
  return {
    { header = 'max cwnd/RTT Mbit/s', value = function(e)
        local v = last(e) and window_over_rtt_mbps(last(e))
        return v and string.format('%.3g', v) or '-' end },
    { header = 'retransmits', value = function(e)
        local r = last(e)
        return r and r.sent and r.sent.retransmits or '-' end },
    { header = M.drops_header(backend), value = function(e)
        local r = last(e)
        return r and r.netem_drops or '-' end },
    { header = 'backlog drops', value = function(e)
        local r = last(e)
        return r and r.backlog_drops or '-' end },
    { header = 'CPU-limited', value = function(e)
        local r = last(e)
        return r and (r.cpu_limited and 'yes' or 'no') or '-' end },
  }
end

-- What the kernel granted for a buffer (getsockopt), "(clamped)" when capped.
local function granted(e, side, key)
  local res = e.results and e.results[#e.results]
  local s = res and res.streams and res.streams[1] and res.streams[1][side]
  local b = s and s[key]
  if not b or not b.granted_bytes then return '-' end
  return require('qoslab.plot').bytes_label(b.granted_bytes) .. (b.clamped and ' (clamped)' or '')
end

--- The "max cwnd / RTT" series of a delay sweep for plot.sweep_lines'
-- `extra_series`, appended to `list` when any point has it.
-- @tparam table summary of a delay sweep (`plan.sweep`)
-- @tparam table list the `extra_series` list to append to
-- @treturn table list
function M.cwnd_series(summary, list)
  local pts = {}
  for _, e in ipairs(summary.points) do
    local v = e.results and e.results[#e.results] and window_over_rtt_mbps(e.results[#e.results])
    if v then pts[#pts + 1] = { e.params.delay_ms, v } end
  end
  if #pts > 0 then list[#list + 1] = { title = 'max cwnd / RTT (sender TCP_INFO)', points = pts } end
  return list
end

--- The legend of the window sweep's two modes: which buffer was set to
-- the x value, on which end, and what the other one was.
-- @tparam string mode "sndbuf" or "sndbuf+rcvbuf"
-- @treturn string
function M.window_series_title(mode)
  if mode == 'sndbuf' then return 'SO_SNDBUF = x on both ends, SO_RCVBUF left to autotuning' end
  return 'SO_SNDBUF = SO_RCVBUF = x on both ends'
end

--- The window / RTT ceiling of a window sweep for plot.sweep_lines'
-- `extra_series`: x bytes in flight per round trip at most, so
-- x × 8 / RTT bit/s (a bound, drawn dashed; the link rate caps it too).
-- @tparam {number,...} windows_bytes the swept sizes
-- @tparam number rtt_s the path's round trip, s
-- @treturn table a series `{title, points, reference = true}` in Mbit/s
-- @usage demo.window_ceiling({262144, 4194304}, 0.3)
function M.window_ceiling(windows_bytes, rtt_s)
  local pts = {}
  for i, w in ipairs(windows_bytes) do pts[i] = { w, w * 8 / rtt_s / 1e6 } end
  table.sort(pts, function(a, b) return a[1] < b[1] end)
  return { title = string.format('ceiling: x / RTT (%g ms)', rtt_s * 1000), points = pts, reference = true }
end

--- Run the demo.
-- @tparam table o `{out = DIR, quick = bool}` (defaults from QOSLAB_RUN)
-- @treturn table `{delay = summary, matrix = summary, window = summary, files = {...}}`
function M.main(o)
  local qoslab = require 'qoslab'
  local plan, report, plot = qoslab.plan, qoslab.report, qoslab.plot
  local run = rawget(_G, 'QOSLAB_RUN') or {}
  o = o or {}
  local out = o.out or run.out or plan.get_defaults().out or 'results/demo'
  local quick = o.quick
  if quick == nil then quick = run.quick or os.getenv('QOSLAB_QUICK') == '1' end
  local cfg = M.config(quick)
  must(require('qoslab.fs').mkdir_p(out))
  local tb <close> = must(qoslab.testbed { rate_bps = 1e9, impair = { delay_ms = 1, limit_packets = 'auto' } })
  print(string.format('demo: %s, backend %s (%s, 1 Gbit/s), results in %s%s',
    run.where or plan.get_defaults().where or 'host', tb.backend or 'netem',
    tb.backend == 'link' and 'qoslab\'s native impairment link' or 'kernel netem', out,
    quick and ' (quick form)' or ''))
  local srv <close> = must(qoslab.server { netns = tb.server_netns })

  local function tcp(p, extra)
    local spec = { delay_ms = p.delay_ms, limit_packets = 'auto' }
    if p.loss_pct and p.loss_pct > 0 then spec.loss_pct = p.loss_pct end
    must(tb:impair(spec))
    local c = { host = tb.server_addr, netns = tb.client_netns, proto = 'tcp',
                duration_s = M.duration_s(cfg, p.delay_ms) }
    for k, v in pairs(extra or {}) do c[k] = v end
    return M.counted(tb, function() return qoslab.traffic.run(c) end)
  end

  local files = {}
  local function save(name, s)
    report.write_csv(out .. '/' .. name .. '.csv', s)
    report.write_json(out .. '/' .. name .. '.json', s)
    files[#files + 1] = name .. '.csv'
    files[#files + 1] = name .. '.json'
  end
  local function plotted(r, msg)
    if not r then io.stderr:write('demo: plot: ', tostring(msg), '\n') return end
    for _, k in ipairs { 'heatmap', 'surface' } do
      if r[k] then plotted(r[k]) end
    end
    if r.png then files[#files + 1] = r.png:match('[^/]+$') end
    if r.svg then files[#files + 1] = r.svg:match('[^/]+$') end
  end

  local reference_points = {}
  for _, d in ipairs { 1, 50, 100, 200, 300, 500, 1000, 3000, 5000 } do
    reference_points[#reference_points + 1] = { d, M.reference_mbps[d] }
  end

  -- 1. Delay sweep.
  local delay = plan.sweep {
    name = 'demo: delay sweep', params = { delay_ms = cfg.delays_ms },
    run = function(p) return tcp(p) end,
  }
  print()
  io.write(report.series(delay, {
    title = 'TCP throughput vs one-way delay (loss 0, 1 Gbit/s, one stream, default window)',
    extra = (function()
      local cols = M.explain_columns(tb.backend)
      cols[#cols + 1] = { header = 'reference Mbit/s',
                          value = function(e) return M.reference_mbps[e.params.delay_ms] end }
      return cols
    end)(),
  }))
  print('max cwnd/RTT: the bound set by the largest congestion window the sender reached '
    .. '(TCP_INFO), not a configured window; ' .. M.drops_note(tb.backend) .. '; '
    .. 'backlog drops: packets a full CPU receive backlog dropped (/proc/net/softnet_stat).')
  save('delay', delay)
  local limited = 0
  for _, e in ipairs(delay.points) do
    for _, r in ipairs(e.results or {}) do if r.cpu_limited then limited = limited + 1 break end end
  end
  if (run.where or plan.get_defaults().where) == 'guest' then
    print(M.GUEST_NOTE)
  end
  if limited > 0 then
    print(string.format('note: %d of %d points were CPU-limited (a thread at >= 90 %% of a core): '
      .. 'the sender, not the link or the window, set their rate%s', limited, #delay.points,
      (run.where or plan.get_defaults().where) == 'guest' and ' (the guest emulates its CPU)' or ''))
  end
  plotted(plot.sweep_lines(delay, { out = out .. '/delay', x = 'delay_ms',
    title = 'TCP throughput vs one-way delay (1 Gbit/s link, loss 0)',
    xlabel = 'one-way delay (ms)', ylabel = 'throughput (Mbit/s, log)', logy = true,
    series_title = function() return 'measured' end,
    hlines = { { y = 1000, title = 'link rate 1 Gbit/s' } },
    extra_series = M.cwnd_series(delay, { { title = 'reference experiment (iperf, 2 hosts)',
                                           points = reference_points } }) }))

  -- 2. Loss × delay matrix with the stop rule.
  local matrix = plan.sweep {
    name = 'demo: loss x delay', params = { loss_pct = cfg.matrix_loss_pct, delay_ms = cfg.matrix_delay_ms },
    order = { 'loss_pct', 'delay_ms' },
    run = function(p) return tcp(p) end,
    stop_row = function(_, s) return s.mean < 500e3 end,
  }
  print()
  io.write(report.matrix(matrix, { row = 'loss_pct', col = 'delay_ms', row_label = 'loss %',
    col_label = 'delay ms', title = 'TCP throughput, loss × delay' }))
  save('matrix', matrix)
  plotted(plot.sweep_matrix(matrix, { out = out .. '/matrix', x = 'delay_ms', y = 'loss_pct',
    title = 'TCP throughput vs loss and one-way delay', xlabel = 'one-way delay (ms)',
    ylabel = 'loss (%)', contours_bps = { 500e3, 1e6 } }))

  -- 3. Window sweep at 300 ms.
  local biggest = 0
  for _, w in ipairs(cfg.windows_bytes) do if w > biggest then biggest = w end end
  local restore = raise_buffer_limits(2 * biggest)
  local points = {}
  for _, mode in ipairs { 'sndbuf', 'sndbuf+rcvbuf' } do
    for _, w in ipairs(cfg.windows_bytes) do points[#points + 1] = { mode = mode, window_bytes = w } end
  end
  local ok, window = pcall(plan.sweep, {
    name = 'demo: window sweep at 300 ms', points = points, order = { 'mode', 'window_bytes' },
    run = function(p)
      local extra = p.mode == 'sndbuf' and { sndbuf_bytes = p.window_bytes }
        or { window_bytes = p.window_bytes }
      extra.duration_s = cfg.window_duration_s
      return tcp({ delay_ms = 300 }, extra)
    end,
  })
  restore()
  if not ok then error(window, 0) end
  print()
  io.write(report.series(window, {
    title = 'TCP throughput at 300 ms one-way delay: SO_SNDBUF only, then both buffers',
    extra = {
      { header = 'window/RTT Mbit/s', value = function(e)
          return string.format('%.3g', e.params.window_bytes * 8 / 0.3 / 1e6) end },
      { header = 'SO_SNDBUF granted', value = function(e) return granted(e, 'sender', 'sndbuf') end },
      { header = 'SO_RCVBUF granted', value = function(e) return granted(e, 'receiver', 'rcvbuf') end },
    },
  }))
  save('window', window)
  plotted(plot.sweep_lines(window, { out = out .. '/window', x = 'window_bytes', series = 'mode',
    series_title = M.window_series_title,
    title = 'TCP throughput vs socket buffer at 300 ms one-way delay (1 Gbit/s)',
    xlabel = 'requested socket buffer (both ends)', ylabel = 'throughput (Mbit/s)', xtic_label = plot.bytes_label,
    hlines = { { y = 1000, title = 'link rate 1 Gbit/s' } },
    extra_series = { M.window_ceiling(cfg.windows_bytes, 0.3) } }))

  print()
  print('demo: wrote ' .. out .. '/results.jsonl and ' .. table.concat(files, ', '))
  return { delay = delay, matrix = matrix, window = window, files = files }
end

if ... == 'qoslab.demo' then return M end
M.main()
