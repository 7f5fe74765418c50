--- Pictures of one traffic test: its intervals over time, and the latency
-- probe's distribution (`qoslab.plot.timeseries`, `qoslab.plot.latency_cdf`;
-- both are reached through `qoslab.plot`).
--
-- The input is `qoslab.traffic.run`'s result (manual/results.md): its
-- `intervals` (per-stream entries of both ends, TCP_INFO on the sending
-- side, the probe's per-interval `latency`) and `latency` (the probe's
-- histograms, loaded and idle).
-- @module qoslab.plot.timeseries
local check = require 'qoslab.check'
local gnuplot = require 'qoslab.plot.gnuplot'

local gq, num = gnuplot.gq, gnuplot.num

local M = {}

local STREAM_COLOURS = { '#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2',
  '#17becf', '#bcbd22' }
local PROBE_COLOUR = '#d62728'

local function colour(k) return gq(STREAM_COLOURS[(k - 1) % #STREAM_COLOURS + 1]) end

--- Past this many streams a panel draws them as thin lines of one colour
-- per direction under one legend entry (the palette repeats, and the
-- legend would not fit); the SUM keeps its own entry.
-- @table MAX_STREAM_LINES
M.MAX_STREAM_LINES = 8
local DIR_COLOURS = { forward = '#8fb3d9', reverse = '#f0b27a' }

-- Streams of a result by (direction, id), in first-seen order; each with its
-- entries per interval, sender and receiver apart.
local function streams_of(res)
  local list, by = {}, {}
  for i, iv in ipairs(res.intervals) do
    for _, e in ipairs(iv.streams or {}) do
      local key = tostring(e.direction or 'forward') .. '/' .. tostring(e.id)
      local s = by[key]
      if not s then
        s = { id = e.id, direction = e.direction or 'forward', sender = {}, receiver = {} }
        by[key] = s
        list[#list + 1] = s
      end
      if e.role == 'receiver' then s.receiver[i] = e else s.sender[i] = e end
    end
  end
  return list
end

local function any(t, f)
  for _, v in pairs(t) do if f(v) then return true end end
  return false
end

-- The column builder: every column has one value per interval.
local function columns()
  local cols = {}
  local function add(name, values)
    cols[#cols + 1] = { name = name, values = values }
    return #cols + 3 -- after start_s, end_s, mid_s
  end
  local function dat()
    local lines = { '# one row per interval; NaN: no value in that interval' }
    local head = { '1 start_s', '2 end_s', '3 mid_s' }
    for k, c in ipairs(cols) do head[#head + 1] = string.format('%d %s', k + 3, c.name) end
    lines[#lines + 1] = '# columns: ' .. table.concat(head, ', '):gsub('%c', ' ')
    return lines
  end
  return add, dat, cols
end

-- ", 12 of 25685 in all" from the result's totals of a direction.
local function lost_total(res, dir)
  local e = dir == 'reverse' and res.reverse_received or res.received
  if not e or not e.lost_packets or not e.packets then return '' end
  return string.format(': %d of %d in all', e.lost_packets, e.lost_packets + (e.unique_packets or 0))
end

-- ms values shown in µs when all are below 1 ms (loopback, a LAN).
local function ms_unit(lists)
  local hi = 0
  for _, l in ipairs(lists) do
    for i = 1, #l do if l[i] and l[i] > hi then hi = l[i] end end
  end
  if hi > 0 and hi < 1 then return 1000, 'µs' end
  return 1, 'ms'
end

local function scaled(values, f)
  if f == 1 then return values end
  local out = {}
  for i, v in pairs(values) do out[i] = v * f end
  return out
end

local function stream_title(s, several_dirs)
  local t = 'stream ' .. tostring(s.id)
  if several_dirs then t = t .. ' (' .. s.direction .. ')' end
  return t
end

local PANEL_KEYS = { out = true, title = true, formats = true, size = true }

-- A traffic result with intervals, as timeseries draws it. level as in
-- check.fail.
local function check_res(ctx, res, level)
  local L = level + 1
  check.table(ctx, 'res', res, L)
  check.table(ctx, 'res.intervals', res.intervals, L)
  if #res.intervals == 0 then
    check.fail(ctx, 'res.intervals', 'a non-empty list of intervals', res.intervals, L)
  end
  for i, iv in ipairs(res.intervals) do
    local f = 'res.intervals[' .. i .. ']'
    check.table(ctx, f, iv, L)
    for _, k in ipairs { 'start_s', 'end_s' } do
      if type(iv[k]) ~= 'number' then check.fail(ctx, f .. '.' .. k, 'a number of seconds', iv[k], L) end
    end
  end
end

-- The streams of a title, counted from the intervals as the text summary
-- counts them ("1 stream", "4 streams"); a bidirectional test counts each
-- direction ("1 stream each way", "2 forward + 3 reverse streams").
local function streams_text(res, streams)
  local fwd, rev = 0, 0
  for _, s in ipairs(streams) do
    if s.direction == 'reverse' then rev = rev + 1 else fwd = fwd + 1 end
  end
  local function n_streams(n) return n .. ' stream' .. (n == 1 and '' or 's') end
  if res.bidir then
    if fwd == rev then return n_streams(fwd) .. ' each way' end
    return string.format('%d forward + %d reverse stream%s', fwd, rev, rev == 1 and '' or 's')
  end
  if fwd + rev == 0 and math.type(res.parallel) then return n_streams(res.parallel) end
  return n_streams(fwd + rev)
end

-- What the impairment panels draw: spec key, label, unit, scale.
local IMPAIRMENT_PANELS = {
  { key = 'delay_ms', label = 'delay', unit = 'ms', f = 1 },
  { key = 'loss_pct', label = 'loss', unit = '%', f = 1 },
  { key = 'rate_bps', label = 'rate', unit = 'Mbit/s', f = 1e-6 },
}

--- Past this many changes of the spec in force inside the test, the
-- dotted vertical line per change is left out (a trace's steps, one per
-- 100 ms window, read as a grid of dots through every panel); the step
-- panels show the changes then.
-- @table MAX_CHANGE_LINES
M.MAX_CHANGE_LINES = 12

-- Whether two specs are the same (canonical: flat but for tables of
-- numbers such as a distribution's or a loss model's).
local function same_spec(a, b)
  if type(a) ~= 'table' or type(b) ~= 'table' then return a == b end
  for k, v in pairs(a) do if not same_spec(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- Rows "time delay loss rate" of the spec in force from each successful
-- change on (on the test's clock, from 0 to t_end; a change before the test
-- started counts from 0), which keys any change set, the times (inside the
-- test) where the spec in force changed, and the spans without a rate limit
-- ({from, to}, only when some step had one); nil without changes. A key
-- left out is 0 (off) for delay and loss; for the rate it is NaN (no limit,
-- a gap in its step line), and a row holding the last rate ends its line at
-- the change that lifts it.
local function impairment_rows(res, t_end)
  local list = res.impairment_changes
  if type(list) ~= 'table' or #list == 0 then return nil end
  local rows, marks, last = { '# time_s delay_ms loss_pct rate_mbps (the spec in force from time_s on; '
    .. 'rate NaN: no rate limit)' }, {}, nil
  local changes, free, free_from = {}, {}, nil
  local function row(t, spec)
    local r = { num(t) }
    for _, q in ipairs(IMPAIRMENT_PANELS) do
      local v = spec[q.key]
      if v ~= nil then marks[q.key] = true end
      if v == nil and q.key == 'rate_bps' then r[#r + 1] = 'NaN' else r[#r + 1] = num((v or 0) * q.f) end
    end
    rows[#rows + 1] = table.concat(r, ' ')
  end
  for _, c in ipairs(list) do
    if c.ok and type(c.test_s) == 'number' and type(c.spec) == 'table' and c.test_s <= t_end then
      local t = math.max(0, c.test_s)
      if last and last.rate_bps ~= nil and c.spec.rate_bps == nil then row(t, last) end
      if last and not same_spec(last, c.spec) and t > 0 and t < t_end then changes[#changes + 1] = t end
      if c.spec.rate_bps == nil and not free_from then free_from = t end
      if c.spec.rate_bps ~= nil and free_from then
        if t > free_from then free[#free + 1] = { free_from, t } end
        free_from = nil
      end
      row(t, c.spec)
      last = c.spec
    end
  end
  if not last then return nil end
  if free_from and t_end > free_from then free[#free + 1] = { free_from, t_end } end
  row(t_end, last)
  return rows, marks, changes, marks.rate_bps and free or {}
end

--- Time series of one test: stacked panels sharing the time axis.
--
-- Panels, each drawn only when the result has its data:
--
-- * `throughput`: Mbit/s per stream as its receiver counted it (the
--   sender's count where no receiver entry came), and the SUM of each
--   direction with more than one stream;
-- * `rtt`: ms, each TCP sender's smoothed RTT (TCP_INFO `rtt_us`, sampled at
--   the interval's end) and, when a probe ran, its per-interval RTT: the
--   median as a line, the band from it to p99, and the idle median
--   (`res.latency.idle`) as a dashed reference;
-- * `cwnd`: KiB, each TCP sender's congestion window (`snd_cwnd_bytes`);
-- * `retransmits`: TCP segments retransmitted in each interval (all streams);
-- * `loss`: UDP, % of datagrams lost in each interval (each direction's SUM);
-- * `jitter`: UDP, RFC 3550 jitter in ms at each interval's end;
-- * `impairment delay`, `impairment loss`, `impairment rate`: with
--   `res.impairment_changes` (a schedule's `attach`), the spec in force over
--   time as a step line, one panel per quantity any change set, from
--   `FILE.impairment.dat`. A delay or loss left out of a step draws as 0
--   (off); a rate left out is no rate limit, drawn as a gap in the rate's
--   line (labelled "no rate limit" where it is wide enough), never as 0.
--   Each change of the spec in force inside the test is also a dotted
--   vertical line through every panel, unless there are more than
--   `MAX_CHANGE_LINES` of them (a trace): then the step panels alone show
--   them.
--
-- Values sit at the interval's midpoint (retransmits as a bar over the
-- interval); warm-up intervals (`omit_s`) are shaded grey. Past
-- `MAX_STREAM_LINES` streams, each direction's streams are thin lines of
-- one colour under one legend entry ("32 streams (received), a line each").
-- @tparam table res a `qoslab.traffic.run` result (`intervals` non-empty)
-- @tparam table opts
--   * `out` (string): "FILE.png" or "FILE.svg" writes that file; a path
--     without extension writes both; `FILE.dat` (the columns) and `FILE.gp`
--     (the script) beside it. Another extension ("FILE.jpg") raises. FILE's
--     folder must exist: none is made (as `qoslab client --plot`)
--   * `title` (string, default from the result: protocol, streams, host)
--   * `formats` ({"png"|"svg", ...}: with an `out` without extension)
--   * `size` ({w, h} pixels, default {1100, 160 + 190 per panel})
-- @treturn table files `{png =, svg =, dat =, gp =, panels = {name, ...}}`
--   (and `impairment_dat =`, `change_lines =` (how many dotted lines were
--   drawn) when impairment panels were drawn)
--   (the panels drawn, top to bottom)
-- @return or nil, message, "ENOENT" (no gnuplot: dat and gp written; or
--   out's folder does not exist: nothing written) | "EIO" (gnuplot failed)
-- @raise on bad options or a result without intervals, naming the field,
--   at the caller's line
-- @usage local res = assert(qoslab.traffic.run{host = '127.0.0.1', probe = true})
-- assert(qoslab.plot.timeseries(res, {out = 'out/test.png'}))
function M.timeseries(res, opts)
  local ctx = 'qoslab.plot.timeseries'
  check_res(ctx, res, 1)
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, PANEL_KEYS, 2)
  check.string(ctx, 'opts.title', opts.title)
  local base, formats = gnuplot.out_of(ctx, opts)
  gnuplot.check_size(ctx, opts.size, nil, 1, { 300, 200 })
  local ivs = res.intervals
  local n = #ivs
  local add, dat_head, cols = columns()
  local streams = streams_of(res)
  local dirs = {}
  for _, s in ipairs(streams) do dirs[s.direction] = (dirs[s.direction] or 0) + 1 end
  local ndirs = 0
  for _ in pairs(dirs) do ndirs = ndirs + 1 end
  local function per(f)
    local v = {}
    for i = 1, n do v[i] = f(ivs[i], i) end
    return v
  end
  -- How one stream's line is drawn: its own colour and legend entry, or,
  -- past MAX_STREAM_LINES streams, a thin line of its direction's colour,
  -- the first of each direction in a panel carrying the entry for all.
  local many = #streams > M.MAX_STREAM_LINES
  local function line_of(seen, k, s, title, group)
    if not many then
      return string.format('with linespoints lw 2 pt 7 ps 0.6 lc rgb %s title %s', colour(k), gq(title))
    end
    local t = 'notitle'
    if not seen[s.direction] then
      seen[s.direction] = true
      t = 'title ' .. gq(string.format('%d streams%s%s%s', dirs[s.direction],
        ndirs > 1 and (' ' .. s.direction) or '', group, ndirs > 1 and '' or ', a line each'))
    end
    return string.format('with lines lw 1 lc rgb %s %s', gq(DIR_COLOURS[s.direction] or '#999999'), t)
  end
  local panels = {}
  local function panel(name, ylabel, plots, extra)
    if #plots > 0 then panels[#panels + 1] = { name = name, ylabel = ylabel, plots = plots, extra = extra } end
  end

  -- throughput
  local tp, tp_first, tp_seen = {}, #cols + 1, {}
  for k, s in ipairs(streams) do
    local use_rx = next(s.receiver) ~= nil
    local src = use_rx and s.receiver or s.sender
    if next(src) then
      local c = add(stream_title(s, ndirs > 1) .. ' Mbit/s', per(function(_, i)
        return src[i] and src[i].bits_per_second and src[i].bits_per_second / 1e6 end))
      tp[#tp + 1] = string.format('DAT using 3:%d %s', c, line_of(tp_seen, k, s,
        stream_title(s, ndirs > 1) .. (use_rx and ' (received)' or ' (sent)'), use_rx and ' (received)' or ' (sent)'))
    end
  end
  for _, d in ipairs { { 'forward', 'sum' }, { 'reverse', 'reverse_sum' } } do
    if (dirs[d[1]] or 0) > 1 or (ndirs > 1 and dirs[d[1]]) then
      local c = add('SUM ' .. d[1] .. ' Mbit/s', per(function(iv)
        local sm = iv[d[2]]
        local e = sm and (sm.receiver or sm.sender)
        return e and e.bits_per_second and e.bits_per_second / 1e6 end))
      tp[#tp + 1] = string.format("DAT using 3:%d with lines lw 3 lc rgb '#000000'%s title %s", c,
        d[1] == 'reverse' and ' dt 2' or '', gq('SUM' .. (ndirs > 1 and (' ' .. d[1]) or '')))
    end
  end
  -- Gbit/s when the largest value passes 10 Gbit/s (loopback)
  local tunit = 'Mbit/s'
  for k = tp_first, #cols do
    for i = 1, n do
      if (cols[k].values[i] or 0) > 10000 then tunit = 'Gbit/s' end
    end
  end
  if tunit == 'Gbit/s' then
    for k = tp_first, #cols do
      cols[k].values = scaled(cols[k].values, 1e-3)
      cols[k].name = cols[k].name:gsub('Mbit/s$', 'Gbit/s')
    end
  end
  panel('throughput', 'throughput\n(' .. tunit .. ')', tp)

  -- RTT: TCP_INFO and the probe (ms, or µs when every value is below 1 ms)
  local rtt, cwnd, rtt_seen, cwnd_seen = {}, {}, {}, {}
  local tcp_rtt, lists = {}, {}
  for k, s in ipairs(streams) do
    if any(s.sender, function(e) return e.rtt_us ~= nil end) then
      local v = per(function(_, i)
        local e = s.sender[i]
        return e and e.rtt_us and e.rtt_us / 1000 end)
      tcp_rtt[#tcp_rtt + 1] = { k = k, s = s, v = v }
      lists[#lists + 1] = v
    end
    if any(s.sender, function(e) return e.snd_cwnd_bytes ~= nil end) then
      local c = add(stream_title(s, ndirs > 1) .. ' cwnd KiB', per(function(_, i)
        local e = s.sender[i]
        return e and e.snd_cwnd_bytes and e.snd_cwnd_bytes / 1024 end))
      cwnd[#cwnd + 1] = string.format('DAT using 3:%d %s', c, line_of(cwnd_seen, k, s, stream_title(s, ndirs > 1), ''))
    end
  end
  local probe = any(ivs, function(iv) return iv.latency and iv.latency.rtt_ms ~= nil end)
  local p50, p99
  if probe then
    local function q(name)
      return per(function(iv) return iv.latency and iv.latency.rtt_ms and iv.latency.rtt_ms[name] end)
    end
    p50, p99 = q('p50'), q('p99')
    lists[#lists + 1] = p50
    lists[#lists + 1] = p99
  end
  local f, unit = ms_unit(lists)
  -- a log axis when the values span more than 50x (loopback: a probe's
  -- 30 µs beside a TCP RTT of 6 ms), else the small ones sit on the floor
  local rlo, rhi
  for _, l in ipairs(lists) do
    for i = 1, n do
      local v = l[i]
      if v and v > 0 then
        rlo = (rlo == nil or v < rlo) and v or rlo
        rhi = (rhi == nil or v > rhi) and v or rhi
      end
    end
  end
  local rtt_log = rlo ~= nil and rhi / rlo > 50
  for _, t in ipairs(tcp_rtt) do
    local c = add(stream_title(t.s, ndirs > 1) .. ' tcp rtt ' .. unit, scaled(t.v, f))
    rtt[#rtt + 1] = string.format('DAT using 3:%d %s', c, line_of(rtt_seen, t.k, t.s,
      stream_title(t.s, ndirs > 1) .. ': TCP RTT (TCP_INFO)', ': TCP_INFO RTT'))
  end
  if probe then
    local c50 = add('probe rtt p50 ' .. unit, scaled(p50, f))
    local c99 = add('probe rtt p99 ' .. unit, scaled(p99, f))
    table.insert(rtt, 1, string.format("DAT using 3:%d:%d with filledcurves fc rgb '#f4b6b6' "
      .. 'fs transparent solid 0.6 title %s',
      c50, c99, gq('probe RTT p50 to p99')))
    rtt[#rtt + 1] = string.format('DAT using 3:%d with linespoints lw 2 pt 5 ps 0.6 lc rgb %s title %s', c50,
      gq(PROBE_COLOUR), gq(string.format('probe RTT p50 (%s every %g ms)',
        tostring(res.latency and res.latency.proto or 'probe'), res.latency and res.latency.interval_ms or 0)))
    local idle = res.latency and res.latency.idle and res.latency.idle.rtt_ms
    if idle and idle.p50 then
      rtt[#rtt + 1] = string.format("%s with lines dt 2 lw 2 lc rgb '#555555' title %s", num(idle.p50 * f),
        gq(string.format('probe RTT p50 idle: %.3g %s', idle.p50 * f, unit)))
    end
    local lost = 0
    for _, iv in ipairs(ivs) do lost = lost + ((iv.latency and iv.latency.lost) or 0) end
    if lost > 0 then
      -- lost probe requests as marks along the panel's floor
      local cl = add('probe lost', per(function(iv) return iv.latency and iv.latency.lost end))
      rtt[#rtt + 1] = string.format("DAT using 3:($%d > 0 ? %s : NaN) with points pt 9 ps 1.4 lc rgb %s title %s",
        cl, rtt_log and num(rlo * f) or '0', gq(PROBE_COLOUR),
        gq(string.format('probe requests lost (%d in all)', lost)))
    end
  end
  panel('rtt', 'RTT\n(' .. unit .. (rtt_log and ', log' or '') .. ')', rtt, rtt_log and 'log' or nil)
  panel('cwnd', 'cwnd\n(KiB)', cwnd)

  -- retransmits: the senders' sum per interval
  local has_rtx = any(ivs, function(iv)
    return (iv.sum and iv.sum.sender and iv.sum.sender.retransmits ~= nil)
      or (iv.reverse_sum and iv.reverse_sum.sender and iv.reverse_sum.sender.retransmits ~= nil)
  end)
  if has_rtx and res.proto ~= 'udp' then
    local c = add('retransmits', per(function(iv)
      local t = 0
      for _, key in ipairs { 'sum', 'reverse_sum' } do
        local e = iv[key] and iv[key].sender
        t = t + ((e and e.retransmits) or 0)
      end
      return t
    end))
    local total = 0
    -- as the totals count: the warm-up (drawn, shaded) left out
    local warm = 0
    for i = 1, n do
      if ivs[i].omitted then warm = warm + cols[#cols].values[i] else total = total + cols[#cols].values[i] end
    end
    panel('retransmits', 'retransmits\n(segments)', {
      string.format("DAT using 3:%d:($2-$1) with boxes fs solid 0.7 noborder lc rgb '#8c564b' title %s", c,
        gq(string.format('retransmitted: %d in all', total)
          .. (warm > 0 and string.format(' after the warm-up (%d in it)', warm) or ''))),
    })
  end

  -- UDP loss and jitter per direction's SUM
  local loss, jit = {}, {}
  for k, d in ipairs { { 'forward', 'sum' }, { 'reverse', 'reverse_sum' } } do
    local function rx(iv) return iv[d[2]] and iv[d[2]].receiver end
    local suffix = ndirs > 1 and (' (' .. d[1] .. ')') or ''
    if any(ivs, function(iv) return rx(iv) and rx(iv).lost_packets ~= nil end) then
      local c = add('lost pct ' .. d[1], per(function(iv)
        local e = rx(iv)
        if not e or e.lost_packets == nil then return nil end
        local total = e.lost_packets + (e.unique_packets or 0)
        if e.lost_pct then return e.lost_pct end
        return total > 0 and 100 * e.lost_packets / total or 0
      end))
      loss[#loss + 1] = string.format('DAT using 3:%d with linespoints lw 2 pt 7 ps 0.6 lc rgb %s title %s', c,
        colour(k), gq('datagrams lost' .. suffix .. lost_total(res, d[1])))
    end
    if any(ivs, function(iv) return rx(iv) and rx(iv).jitter_ms ~= nil end) then
      jit[#jit + 1] = { k = k, suffix = suffix, v = per(function(iv) return rx(iv) and rx(iv).jitter_ms end),
        dir = d[1] }
    end
  end
  panel('loss', 'loss\n(%)', loss)
  local jlists = {}
  for i, j in ipairs(jit) do jlists[i] = j.v end
  local jf, junit = ms_unit(jlists)
  for i, j in ipairs(jit) do
    local c = add('jitter ' .. junit .. ' ' .. j.dir, scaled(j.v, jf))
    jit[i] = string.format('DAT using 3:%d with linespoints lw 2 pt 7 ps 0.6 lc rgb %s title %s', c,
      colour(j.k), gq('jitter, RFC 3550' .. j.suffix))
  end
  panel('jitter', 'jitter\n(' .. junit .. ')', jit)

  -- the impairment over time (a schedule's changes, sched:attach): one
  -- step panel per quantity that changed, from a file of its own (the
  -- changes do not fall on the interval grid)
  local t_last = 0
  for _, iv in ipairs(ivs) do if iv.end_s > t_last then t_last = iv.end_s end end
  local imp_rows, imp_marks, imp_changes, imp_free = impairment_rows(res, t_last)
  local impfile = base .. '.impairment.dat'
  local change_lines = {}
  if imp_rows and #imp_changes <= M.MAX_CHANGE_LINES then change_lines = imp_changes end
  if imp_rows then
    local okw, werr, wc = gnuplot.write_file(impfile, table.concat(imp_rows, '\n') .. '\n')
    if not okw then return nil, werr, wc end
    for k, q in ipairs(IMPAIRMENT_PANELS) do
      if imp_marks[q.key] then
        local title = q.label .. ' in force'
        -- headroom above the highest step, so that a line at the top is
        -- not drawn on the panel's border
        local notes, extra = {}, { 'set offsets 0, 0, graph 0.12, 0' }
        if #change_lines > 0 then notes[#notes + 1] = 'changes: dotted' end
        if q.key == 'rate_bps' and #imp_free > 0 then
          -- no rate limit is no line, never 0: a gap, labelled where it is
          -- wide enough for the words
          notes[#notes + 1] = 'gap: no limit'
          for _, span in ipairs(imp_free) do
            if span[2] - span[1] >= 0.12 * t_last and #extra < 7 then
              extra[#extra + 1] = string.format("set label %s at %.10g, graph 0.5 center front boxed "
                .. "tc rgb '#555555'",
                gq('no rate limit'), (span[1] + span[2]) / 2)
            end
          end
        end
        if #notes > 0 then title = title .. '\n(' .. table.concat(notes, '; ') .. ')' end
        panel('impairment ' .. q.label, 'impairment\n' .. q.label .. ' (' .. q.unit .. ')', {
          string.format("%s using 1:%d with steps lw 2 lc rgb '#000000' title %s", gq(impfile), k + 1,
            gq(title)),
        }, extra)
      end
    end
  end

  if #panels == 0 then return nil, ctx .. ': nothing to plot', 'EINVAL' end

  -- data file
  local lines = dat_head()
  local t_end = 0
  for i, iv in ipairs(ivs) do
    local row = { num(iv.start_s), num(iv.end_s), num((iv.start_s + iv.end_s) / 2) }
    for _, c in ipairs(cols) do row[#row + 1] = num(c.values[i]) end
    lines[#lines + 1] = table.concat(row, ' ')
    if iv.end_s > t_end then t_end = iv.end_s end
  end
  local datfile = base .. '.dat'
  local ok, err, wcode = gnuplot.write_file(datfile, table.concat(lines, '\n') .. '\n')
  if not ok then return nil, err, wcode end
  local datq = gq(datfile)

  local title = opts.title
  if not title then
    title = string.format('%s test to %s%s: %s%s%s, %.3g s', string.upper(tostring(res.proto or '?')),
      tostring(res.host or '?'), res.port and (':' .. res.port) or '', streams_text(res, streams),
      res.reverse and not res.bidir and ', reverse' or '', res.bidir and ', bidirectional' or '',
      res.duration_s or t_end)
    if (res.omit_s or 0) > 0 then title = title .. string.format(' after a %.3g s warm-up (grey)', res.omit_s) end
    if res.options and res.options.netns then title = title .. ' (netns ' .. tostring(res.options.netns) .. ')' end
  end

  -- layout: panels share the x axis; fixed margins so they line up
  local np = #panels
  local size = opts.size or { 1100, 160 + 190 * np }
  local top = 1 - 70 / size[2]
  local bottom = 60 / size[2]
  local h = (top - bottom) / np
  local pre = {
    'set datafile missing NaN',
    string.format('set xrange [0:%.10g]', t_end),
    "set grid xtics ytics lt 1 lw 1 lc rgb '#dddddd'",
    'set key at screen 0.655, graph 1 left top vertical Left reverse samplen 2 spacing 1.1',
    "set format y '%g'",
    'set lmargin at screen 0.1',
    'set rmargin at screen 0.64',
    'set ytics nomirror',
    'set mxtics 2',
    'set style textbox opaque noborder',
  }
  for _, iv in ipairs(ivs) do
    if iv.omitted then
      pre[#pre + 1] = string.format('set object rect from %.10g, graph 0 to %.10g, graph 1 behind '
        .. "fc rgb '#e6e6e6' fs solid 1.0 noborder",
        iv.start_s, iv.end_s)
    end
  end
  for _, t in ipairs(change_lines) do
    pre[#pre + 1] = string.format(
      "set arrow from %.10g, graph 0 to %.10g, graph 1 nohead dt 3 lw 1.5 lc rgb '#555555'", t, t)
  end
  local body = { string.format('set multiplot title %s font \',14\'', gq(title)) }
  local names = {}
  for k, p in ipairs(panels) do
    names[k] = p.name
    body[#body + 1] = string.format('# panel %d: %s', k, p.name)
    body[#body + 1] = string.format('set tmargin at screen %.4f', top - (k - 1) * h)
    body[#body + 1] = string.format('set bmargin at screen %.4f', top - k * h + 0.012)
    body[#body + 1] = 'set ylabel ' .. gq(p.ylabel) .. ' offset -0.8,0'
    if type(p.extra) == 'table' then
      for _, cmd in ipairs(p.extra) do body[#body + 1] = cmd end
    end
    if p.extra == 'log' then
      body[#body + 1] = 'set logscale y'
      body[#body + 1] = 'set yrange [*:*]'
    else
      body[#body + 1] = 'unset logscale y'
      body[#body + 1] = 'set yrange [0:*]'
    end
    if k == np then
      body[#body + 1] = "set format x '%g'"
      body[#body + 1] = "set xlabel 'time since the test started (s)'"
    else
      body[#body + 1] = "set format x ''"
      body[#body + 1] = "unset xlabel"
    end
    local ps = {}
    for j, s in ipairs(p.plots) do ps[j] = s:gsub('^DAT', function() return datq end) end
    body[#body + 1] = 'plot ' .. table.concat(ps, ', \\\n  ')
    if type(p.extra) == 'table' then
      body[#body + 1] = 'unset label'
      body[#body + 1] = 'set offsets 0, 0, 0, 0'
    end
  end
  body[#body + 1] = 'unset multiplot'
  local files, e2, code = gnuplot.render(base, table.concat(pre, '\n'), table.concat(body, '\n'), formats, size)
  if not files then return nil, e2, code end
  files.dat = datfile
  if imp_rows then
    files.impairment_dat = impfile
    files.change_lines = #change_lines
  end
  files.panels = names
  return files
end

-- The empirical CDF at the histogram's edges: F(edge) = samples below it /
-- samples, exact there (nothing is interpolated but the line between two
-- edges); the curve starts at (min, 0) and ends at (max, 1), which are exact
-- too. Returns {{x_ms, F}, ...} or nil without samples.
local QUANTILES = { { 'p50', 0.5 }, { 'p90', 0.9 }, { 'p99', 0.99 }, { 'p999', 0.999 } }

local function cdf_points(h, rtt)
  if not h or not h.counts or #h.counts == 0 or not rtt then return nil end
  local total = (h.below or 0) + (h.above or 0)
  for _, c in ipairs(h.counts) do total = total + c end
  if total == 0 then return nil end
  local pts = { { rtt.min, 0 } }
  local cum = h.below or 0
  for i, c in ipairs(h.counts) do
    cum = cum + c
    local x = h.edges_ms[i + 1]
    if x > rtt.min and x < rtt.max then pts[#pts + 1] = { x, cum / total } end
  end
  pts[#pts + 1] = { rtt.max, 1 }
  -- The exact quantiles the probe computed from its samples: the curve
  -- passes through them (between two bucket edges a straight line would
  -- miss them by up to a bucket's width, 26 % of the RTT). One the counts
  -- contradict (rounding, or a histogram and quantiles from different
  -- samples) is left out: the edges are exact.
  for _, q in ipairs(QUANTILES) do
    local x, f = rtt[q[1]], q[2]
    local fits = type(x) == 'number' and x > rtt.min and x < rtt.max
    for _, p in ipairs(pts) do
      if not fits then break end
      if p[1] == x or (p[1] > x and p[2] < f) or (p[1] < x and p[2] > f) then fits = false end
    end
    if fits then pts[#pts + 1] = { x, f } end
  end
  table.sort(pts, function(a, b) return a[1] < b[1] end)
  return pts, total
end

-- Tics for a log axis from lo to hi (ms): none (gnuplot's powers of ten)
-- when the range holds at least three powers of ten, else the coarsest of 1-2-5, 1-2-3-5-7 and
-- 1-1.5-2-2.5-3-4-5-6-7-8 that puts 4 to 12 tics inside, so that a
-- narrow range (15 to 40 ms) still has numbers on its axis.
local function log_tics(lo, hi)
  local sets = { { 1 }, { 1, 2, 5 }, { 1, 2, 3, 5, 7 }, { 1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8 } }
  local best
  for _, m in ipairs(sets) do
    local t = {}
    for k = math.floor(math.log(lo, 10)) - 1, math.ceil(math.log(hi, 10)) do
      for _, v in ipairs(m) do
        local x = v * 10 ^ k
        if x >= lo and x <= hi then t[#t + 1] = tonumber(string.format('%.6g', x)) end
      end
    end
    if #t > 12 then break end
    -- powers of ten: gnuplot's own tics, with its minor ones between
    if m == sets[1] and #t >= 3 then return {} end
    best = t
    if #t >= 4 then break end
  end
  return best or {}
end

local CDF_KEYS = { out = true, title = true, labels = true, formats = true, size = true }

--- CDF of the probe's RTT, idle beside loaded, on a log time axis.
--
-- Drawn from the latency histograms (`res.latency.histogram` and
-- `res.latency.idle.histogram`: 10 buckets per decade): the curve is the
-- share of samples below each bucket edge, exact at the edges, through the
-- exact quantiles (`rtt_ms.p50`, `p90`, `p99`, `p999`), from the smallest
-- sample (0) to the largest (1); the loaded phase's p50 and p99 are
-- marked. The x axis has tics inside any range (15, 20, 25, 30 ms for a
-- range narrower than a decade).
-- @tparam table res_or_list a `qoslab.traffic.run` result with a probe (or
--   `qoslab.latency.probe`'s table), or a list of them (one colour each,
--   idle dashed, loaded solid)
-- @tparam table opts `out` ("FILE.png"/"FILE.svg", or without extension:
--   both; another extension raises; the folder must exist), `title`,
--   `labels` (strings, exactly one per result; default "test 1", ...; a
--   single result gets none), `formats`, `size` (default {900, 600})
-- @treturn table files `{png =, svg =, dat =, gp =, curves = {title, ...}}`
-- @return or nil, message, "EINVAL" (no result has probe samples) |
--   "ENOENT" (no gnuplot, or out's folder does not exist) | "EIO"
-- @raise on bad options, naming the field, at the caller's line
-- @usage qoslab.plot.latency_cdf(res, {out = 'out/test-cdf.png'})
function M.latency_cdf(res_or_list, opts)
  local ctx = 'qoslab.plot.latency_cdf'
  check.table(ctx, 'res_or_list', res_or_list)
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, CDF_KEYS, 2)
  check.string(ctx, 'opts.title', opts.title)
  local list = res_or_list
  if res_or_list.latency or res_or_list.histogram then list = { res_or_list } end
  if opts.labels ~= nil then
    check.table(ctx, 'opts.labels', opts.labels)
    if #opts.labels ~= #list then
      check.fail(ctx, 'opts.labels', string.format('one label per result (%d results)', #list), #opts.labels)
    end
    for i = 1, #list do check.string(ctx, 'opts.labels[' .. i .. ']', opts.labels[i]) end
  end
  local base, formats = gnuplot.out_of(ctx, opts)
  gnuplot.check_size(ctx, opts.size, nil)
  for i, r in ipairs(list) do check.table(ctx, 'res_or_list[' .. i .. ']', r) end
  local dat, plots, curves, marks = {}, {}, {}, {}
  local idx, lo, hi = 0, nil, nil
  for i, r in ipairs(list) do
    local lat = r.latency or r
    local label = (opts.labels and opts.labels[i]) or (#list > 1 and ('test ' .. i)) or nil
    for _, phase in ipairs { 'loaded', 'idle' } do
      local src = phase == 'idle' and lat.idle or lat
      local pts, n = cdf_points(src and src.histogram, src and src.rtt_ms)
      if pts then
        local t = string.format('%s%s: %d samples, p50 %.3g ms, p99 %.3g ms', label and (label .. ', ') or '',
          phase == 'idle' and 'idle (before and after the load)' or (lat.idle and lat.idle.samples
            and lat.idle.samples > 0 and 'loaded (during the load)' or 'probe'), n, src.rtt_ms.p50, src.rtt_ms.p99)
        dat[#dat + 1] = '# ' .. t:gsub('%c', ' ')
        dat[#dat + 1] = '# rtt_ms fraction_below'
        for _, p in ipairs(pts) do
          dat[#dat + 1] = num(p[1]) .. ' ' .. num(p[2])
          lo = (lo == nil or p[1] < lo) and p[1] or lo
          hi = (hi == nil or p[1] > hi) and p[1] or hi
        end
        dat[#dat + 1] = ''
        dat[#dat + 1] = ''
        plots[#plots + 1] = string.format('DAT index %d using 1:2 with lines lw %d%s lc rgb %s title %s', idx,
          phase == 'idle' and 2 or 3, phase == 'idle' and ' dt 2' or '',
          (#list == 1 and phase == 'idle') and "'#555555'" or colour(i), gq(t))
        curves[#curves + 1] = t
        if phase == 'loaded' then
          for _, q in ipairs { { 'p50', 0.5 }, { 'p99', 0.99 } } do
            marks[#marks + 1] = string.format('%s %s', num(src.rtt_ms[q[1]]), num(q[2]))
          end
        end
        idx = idx + 1
      end
    end
  end
  if #plots == 0 then return nil, ctx .. ': no probe samples to draw (run the test with probe = true)', 'EINVAL' end
  if #marks > 0 then
    dat[#dat + 1] = '# loaded p50 and p99 (exact quantiles)'
    for _, m in ipairs(marks) do dat[#dat + 1] = m end
    plots[#plots + 1] = string.format("DAT index %d using 1:2 with points pt 7 ps 1.2 lc rgb '#000000' "
      .. "title 'loaded p50 and p99 (exact)'", idx)
  end
  local datfile = base .. '.dat'
  local ok, err, wcode = gnuplot.write_file(datfile, table.concat(dat, '\n') .. '\n')
  if not ok then return nil, err, wcode end
  local datq = gq(datfile)
  for i, p in ipairs(plots) do plots[i] = p:gsub('^DAT', function() return datq end) end
  local title = opts.title
  if not title then
    local r = list[1]
    title = 'probe RTT distribution' .. ((r.host and #list == 1)
      and string.format(' (%s test to %s)', string.upper(tostring(r.proto or '')), tostring(r.host)) or '')
  end
  local pre = {
    'set datafile missing NaN',
    'set title ' .. gq(title) .. " font ',14'",
    "set xlabel 'round-trip time (ms, log scale)'",
    "set ylabel 'share of samples below'",
    'set logscale x',
    "set format x '%g'",
    'set yrange [0:1]',
    "set ytics ('0%%' 0, '10%%' 0.1, '25%%' 0.25, '50%%' 0.5, '75%%' 0.75, '90%%' 0.9, '99%%' 0.99)",
    string.format('set xrange [%.10g:%.10g]', lo / 1.3, hi * 1.3),
    (function()
      local t = {}
      for i, x in ipairs(log_tics(lo / 1.3, hi * 1.3)) do t[i] = string.format("'%g' %s", x, num(x)) end
      return #t > 0 and ('set xtics (' .. table.concat(t, ', ') .. ')') or ''
    end)(),
    "set grid xtics mxtics ytics lt 1 lw 1 lc rgb '#dddddd', lt 1 lw 1 lc rgb '#f0f0f0'",
    'set mxtics 10',
    'set key below Left reverse',
  }
  local files, e2, code = gnuplot.render(base, table.concat(pre, '\n'), 'plot ' .. table.concat(plots, ', \\\n  '),
    formats, opts.size or { 900, 600 })
  if not files then return nil, e2, code end
  files.dat = datfile
  files.curves = curves
  return files
end

--- The pictures of one test: its time series, and its latency CDF when a
-- probe ran (`qoslab client --plot FILE`).
-- @tparam table res a `qoslab.traffic.run` result
-- @tparam table opts `out` ("FILE.png" or "FILE.svg", in a folder that
--   exists; the CDF goes to "FILE-cdf.png"), `title` (of the time series)
-- @treturn table `{timeseries = files, cdf = files|nil}` (files as
--   `timeseries` and `latency_cdf` return them)
-- @return or nil, message, CODE of the first picture that failed ("ENOENT"
--   when out's folder does not exist)
-- @raise on bad options or a result without intervals, naming the field,
--   at the caller's line
-- @usage assert(qoslab.plot.test_plots(res, {out = 'out/test.png'}))
function M.test_plots(res, opts)
  local ctx = 'qoslab.plot.test_plots'
  check_res(ctx, res, 1)
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { out = true, title = true }, 2)
  local out = opts.out
  -- the rule of `qoslab client --plot FILE`, which calls this
  local stem, ext = gnuplot.picture_path(out)
  if not ext then check.fail(ctx, 'opts.out', 'a path ending in .png or .svg', out) end
  check.string(ctx, 'opts.title', opts.title)
  local ts, msg, code = M.timeseries(res, { out = out, title = opts.title })
  if not ts then return nil, msg, code end
  local r = { timeseries = ts }
  local lat = res.latency
  if lat and ((lat.samples or 0) > 0 or (lat.idle and (lat.idle.samples or 0) > 0)) then
    local c, cmsg, ccode = M.latency_cdf(res, { out = stem .. '-cdf.' .. ext })
    if not c then return nil, cmsg, ccode end
    r.cdf = c
  end
  return r
end

return M
