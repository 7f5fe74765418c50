--- Text of traffic results: iperf3-style byte and rate units, the
-- multi-line summary of a result (its `tostring`) and the lines of a live
-- interval report. Pure functions over result tables (see qoslab.traffic).
-- @module qoslab.traffic.summary

local M = {}

-- --------------------------------------------------------- formatting ----

--- Format a byte count the way iperf3 does (1024-based units).
-- @tparam number n bytes
-- @treturn string e.g. "1.10 GBytes", "741 MBytes", "512 Bytes"
function M.format_bytes(n)
  local units = { 'Bytes', 'KBytes', 'MBytes', 'GBytes', 'TBytes' }
  local i = 1
  n = n or 0
  while math.abs(n) >= 1024 and i < #units do n = n / 1024; i = i + 1 end
  if i == 1 then return string.format('%d %s', math.floor(n), units[i]) end
  local f = math.abs(n) < 10 and '%.2f %s' or math.abs(n) < 100 and '%.1f %s' or '%.0f %s'
  return string.format(f, n, units[i])
end

--- Format a rate the way iperf3 does (1000-based units).
-- @tparam number bps bits per second
-- @treturn string e.g. "9.45 Gbits/sec"
function M.format_rate(bps)
  local units = { 'bits/sec', 'Kbits/sec', 'Mbits/sec', 'Gbits/sec', 'Tbits/sec' }
  local i = 1
  bps = bps or 0
  while math.abs(bps) >= 1000 and i < #units do bps = bps / 1000; i = i + 1 end
  local f = math.abs(bps) < 10 and '%.2f %s' or math.abs(bps) < 100 and '%.1f %s' or '%.0f %s'
  return string.format(f, bps, units[i])
end

local function sid(id)
  if id == nil then return '[SUM]' end
  return string.format('[%3s]', tostring(id))
end

local function short_dir(d) return d == 'reverse' and 'rev' or 'fwd' end

local function udp_receiver_text(r)
  if not r or r.lost_packets == nil then return '' end
  local total = (r.unique_packets or 0) + (r.lost_packets or 0)
  local s = string.format('  lost %d/%d (%.3g%%)', r.lost_packets, total, r.lost_pct or 0)
  if (r.duplicate_packets or 0) > 0 then s = s .. string.format(' dup %d', r.duplicate_packets) end
  if (r.out_of_order_packets or 0) > 0 then
    s = s .. string.format(' ooo %d', r.out_of_order_packets)
  end
  if (r.late_packets or 0) > 0 then s = s .. string.format(' late %d', r.late_packets) end
  if (r.invalid_packets or 0) > 0 then
    s = s .. string.format(' invalid %d', r.invalid_packets)
  end
  if r.jitter_ms then s = s .. string.format(' jitter %.3f ms', r.jitter_ms) end
  if r.jitter_mean_abs_ms then s = s .. string.format(' |D| %.3f ms', r.jitter_mean_abs_ms) end
  local runs = r.loss_runs
  if runs and runs.bursts > 0 then
    s = s .. string.format(' bursts %d (mean %.3g)', runs.bursts, runs.mean_burst_packets)
  end
  local ext = r.reorder_extent
  if ext and ext.packets > 0 then s = s .. string.format(' extent max %d', ext.max_packets) end
  return s
end

local function row(id, dir, role, x, udp)
  if not x then return nil end
  local extra = ''
  if role == 'sender' then
    if x.retransmits then extra = string.format('  retr %d', x.retransmits) end
    if udp and x.packets then extra = extra .. string.format('  %d datagrams', x.packets) end
  elseif udp then
    extra = udp_receiver_text(x)
  end
  return string.format('%s %s %-8s %-6s %8.2f s  %12s  %15s%s', sid(id), short_dir(dir), role,
    x.side or '?', x.seconds or 0, M.format_bytes(x.bytes), M.format_rate(x.bits_per_second),
    extra)
end

local function cpu_text(c)
  if not c then return 'unknown' end
  local s = string.format('%.1f%% (user %.1f%%, system %.1f%%)', c.total_pct or 0,
    c.user_pct or 0, c.system_pct or 0)
  if c.busiest_thread_pct then
    s = s .. string.format(', busiest thread %.1f%%', c.busiest_thread_pct)
  end
  return s
end

local function buf_text(b, name)
  if not b or not b.requested_bytes or b.requested_bytes == 0 then return nil end
  local s = string.format('%s requested %d B, granted %d B', name, b.requested_bytes,
    b.granted_bytes or 0)
  if b.clamped then s = s .. ' (clamped by ' .. tostring(b.sysctl or 'a sysctl') .. ')' end
  return s
end

--- A readable multi-line summary of a result (also the result's `tostring`).
-- Per-stream rows and a [SUM] row for the sender and the receiver of each
-- direction, each labelled with the end that measured it; UDP loss,
-- duplicates, reordering and jitter; requested vs granted buffers; CPU;
-- warnings.
-- @tparam table res a result table
-- @treturn string
-- @usage print(traffic.summary(res))
function M.summary(res)
  local out = {}
  local udp = res.proto == 'udp'
  local mode = res.bidir and 'bidirectional' or res.reverse and 'reverse (server sends)'
    or 'forward (client sends)'
  local host = tostring(res.host)
  if host:find(':', 1, true) then host = '[' .. host .. ']' end   -- IPv6, RFC 3986 style
  -- The client's view names the server it reached, HOST:PORT; a server's
  -- result holds the client's address with the server's own port, so it
  -- names the client with its control connection's port, then that port.
  local where = host .. ':' .. tostring(res.port)
  if res.local_role == 'server' then
    where = string.format('from %s%s to port %s', host,
      res.peer_port and (':' .. tostring(res.peer_port)) or '', tostring(res.port))
  end
  out[#out + 1] = string.format('qoslab %s test %s, peer %s, %d stream%s, %s, %s view',
    udp and 'UDP' or 'TCP', where, tostring(res.peer),
    res.parallel or 0, (res.parallel or 0) == 1 and '' or 's', mode, tostring(res.local_role))
  out[#out + 1] = string.format('duration %.2f s measured%s', res.duration_s or 0,
    (res.omit_s or 0) > 0 and string.format(' after %.2f s omitted', res.omit_s) or '')
  out[#out + 1] = '[ ID] dir role     side    seconds      transfer          bitrate'
  local dirs = { { res.reverse and 'reverse' or 'forward', res.sent, res.received } }
  if res.bidir then dirs[2] = { 'reverse', res.reverse_sent, res.reverse_received } end
  for _, d in ipairs(dirs) do
    local dir, sent, recv = d[1], d[2], d[3]
    local n = 0
    for _, s in ipairs(res.streams or {}) do
      if (s.direction or dir) == dir then
        n = n + 1
        out[#out + 1] = row(s.id, dir, 'sender', s.sender, udp)
        out[#out + 1] = row(s.id, dir, 'receiver', s.receiver, udp)
      end
    end
    if n ~= 1 then
      out[#out + 1] = row(nil, dir, 'sender', sent, udp)
      out[#out + 1] = row(nil, dir, 'receiver', recv, udp)
    end
  end
  for _, s in ipairs(res.streams or {}) do
    local a = buf_text(s.sender and s.sender.sndbuf, 'SO_SNDBUF')
    local b = buf_text(s.receiver and s.receiver.rcvbuf, 'SO_RCVBUF')
    if a or b then
      -- either may be missing (only SO_RCVBUF requested, say)
      out[#out + 1] = string.format('%s buffers: %s', sid(s.id),
        (a and b) and (a .. '; ' .. b) or a or b)
    end
  end
  for _, line in ipairs(M.latency_lines(res.latency, res.duration_s)) do
    out[#out + 1] = line
  end
  if res.cpu then
    out[#out + 1] = 'cpu client: ' .. cpu_text(res.cpu.client)
    out[#out + 1] = 'cpu server: ' .. cpu_text(res.cpu.server)
  end
  local said = false
  for _, w in ipairs(res.warnings or {}) do
    if w:find('CPU-limited', 1, true) then said = true end
  end
  if res.cpu_limited and not said then
    out[#out + 1] = 'CPU-limited: a thread used >= 90% of a core; the rate may be the '
      .. "host's limit, not the network's"
  end
  for _, w in ipairs(res.warnings or {}) do out[#out + 1] = 'warning: ' .. w end
  return table.concat(out, '\n')
end

local function ms(v) return v and string.format('%.3f', v) or '-' end

--- The probe's health in one line: requests sent, the loaded requests'
-- samples, lost and late, and (with `duration_s`) about how many of the
-- loaded phase's slots were never sent. The latency table has no count of
-- those: it is estimated as duration_s / interval_ms − (samples + lost +
-- late), since a probe that wakes late skips the slots it missed.
-- @tparam table lat a latency table
-- @tparam[opt] number duration_s the loaded phase's length (nil: no estimate)
-- @tparam[opt] boolean alone the probe ran alone (no load): its counts are
--   not called "loaded"
-- @treturn string e.g. "probe: sent 270; loaded: 61 samples, 0 lost, 0 late;
--   about 139 of 200 slots not sent (...)"
-- @usage print(summary.probe_health(res.latency, res.duration_s))
function M.probe_health(lat, duration_s, alone)
  local loaded = (lat.samples or 0) + (lat.lost or 0) + (lat.late or 0)
  local line = string.format('probe: sent %d; %s%d samples, %d lost, %d late',
    lat.sent or loaded, alone and '' or 'loaded: ', lat.samples or 0, lat.lost or 0, lat.late or 0)
  if duration_s and lat.interval_ms and lat.interval_ms > 0 and not lat.capped then
    local slots = math.floor(duration_s * 1000 / lat.interval_ms + 0.5)
    local missing = slots - loaded
    -- a slot or two either way is the phase's edges, not starvation
    if missing >= math.max(2, slots * 0.05) then
      line = line .. string.format('; about %d of %d slots not sent (duration / interval - '
        .. 'requests: a descheduled probe skips the slots it missed)', missing, slots)
    end
  end
  return line
end

--- The summary lines of a latency table (`res.latency`, or
-- qoslab.latency.probe's result): idle p50, loaded p50/p90/p99, induced,
-- the counts; one-way delays where the clock allows them.
-- @tparam[opt] table lat a latency table (nil: no lines)
-- @tparam[opt] number duration_s the loaded phase's length, for the
--   estimate of slots not sent (see probe_health)
-- @treturn table list of strings
-- @usage for _, l in ipairs(summary.latency_lines(res.latency, res.duration_s)) do print(l) end
function M.latency_lines(lat, duration_s)
  if not lat then return {} end
  local out = {}
  local r = lat.rtt_ms or {}
  local idle = lat.idle and lat.idle.samples > 0 and lat.idle.rtt_ms
  local head = string.format('latency (%s probe every %g ms, clock %s):', lat.proto,
    lat.interval_ms, lat.clock)
  if idle then head = head .. string.format(' idle p50 %s ms;', ms(idle.p50)) end
  out[1] = string.format('%s %s p50 %s / p90 %s / p99 %s / max %s ms', head,
    idle and 'loaded' or 'rtt', ms(r.p50), ms(r.p90), ms(r.p99), ms(r.max))
  local counts = string.format('latency samples %d, lost %d, late %d', lat.samples, lat.lost,
    lat.late)
  if idle then
    counts = counts .. string.format(' (idle %d, lost %d, late %d)', lat.idle.samples,
      lat.idle.lost, lat.idle.late)
  end
  if lat.induced_ms then
    counts = string.format('induced latency %+.3f ms (loaded p50 - idle p50); ', lat.induced_ms)
      .. counts
  end
  out[2] = counts
  out[3] = M.probe_health(lat, duration_s)
  if lat.owd_up_ms and lat.owd_down_ms then
    out[#out + 1] = string.format('one-way delay (%s clock): up p50 %s / p99 %s ms, down p50 %s / p99 %s ms',
      lat.clock, ms(lat.owd_up_ms.p50), ms(lat.owd_up_ms.p99), ms(lat.owd_down_ms.p50),
      ms(lat.owd_down_ms.p99))
  end
  return out
end

--- The line of one interval's latency (`iv.latency`), or nil without one.
-- @tparam table iv an interval table
-- @treturn string|nil
function M.latency_interval_line(iv)
  local l = iv.latency
  if not l then return nil end
  local r = l.rtt_ms or {}
  return string.format('[LAT] %6.2f-%-6.2f s  rtt p50 %s  p90 %s  p99 %s  max %s ms  '
    .. '%d samples, %d lost, %d late', iv.start_s or 0, iv.end_s or 0, ms(r.p50), ms(r.p90),
    ms(r.p99), ms(r.max), l.samples, l.lost, l.late)
end

--- Lines for one live interval report, iperf3 style: one per stream entry
-- and, with more than one stream, a [SUM] line per direction and role (the
-- interval's SUM entry: the mean of the streams' jitter, like iperf3). A
-- row whose rate is over other seconds than the interval's span (the far
-- end's grid slot, after a stall on either end) says so: "(over 1.00 s)".
-- @tparam table iv an interval table
-- @treturn table list of strings
function M.interval_lines(iv)
  local lines = {}
  local groups, order = {}, {}
  for _, s in ipairs(iv.streams or {}) do
    local key = (s.direction or 'forward') .. ' ' .. (s.role or '?')
    if not groups[key] then groups[key] = {}; order[#order + 1] = key end
    local g = groups[key]
    g[#g + 1] = s
  end
  local tag = iv.omitted and '  (omitted)' or ''
  local span = string.format('%6.2f-%-6.2f s', iv.start_s or 0, iv.end_s or 0)
  -- A row of the far end covers its own grid slot: after a stall on one
  -- end the slot and this interval differ (1 s in 1.00-2.40), and the row
  -- says the seconds its rate is over.
  local shown = string.format('%.2f', iv.seconds or ((iv.end_s or 0) - (iv.start_s or 0)))
  local function over(x)
    if not x.seconds or string.format('%.2f', x.seconds) == shown then return '' end
    return string.format('  (over %.2f s)', x.seconds)
  end
  for _, key in ipairs(order) do
    local g = groups[key]
    local dir, role = key:match('^(%S+) (%S+)$')
    local function line(id, x)
      local extra = ''
      if x.retransmits then extra = extra .. string.format('  retr %d', x.retransmits) end
      if x.snd_cwnd_bytes then extra = extra .. '  cwnd ' .. M.format_bytes(x.snd_cwnd_bytes) end
      if x.rtt_us then extra = extra .. string.format('  rtt %.0f us', x.rtt_us) end
      if x.lost_packets then
        extra = extra .. string.format('  lost %d/%d', x.lost_packets,
          (x.unique_packets or x.packets or 0) + x.lost_packets)
      elseif x.packets and role == 'sender' then
        extra = extra .. string.format('  %d datagrams', x.packets)
      end
      if x.jitter_ms then extra = extra .. string.format('  jitter %.3f ms', x.jitter_ms) end
      if x.jitter_mean_abs_ms then
        extra = extra .. string.format(' |D| %.3f ms', x.jitter_mean_abs_ms)
      end
      return string.format('%s %s %s  %12s  %15s%s  %s%s', sid(id), short_dir(dir), span,
        M.format_bytes(x.bytes), M.format_rate(x.bits_per_second), over(x) .. extra, role, tag)
    end
    -- the engine's SUM entry of this direction and role (the one the plot
    -- draws); a table without one is summed here over the interval
    local sums = dir == 'reverse' and iv.reverse_sum or iv.sum
    local engine_sum = sums and sums[role]
    if #g == 1 then
      lines[#lines + 1] = line(g[1].id, g[1])
    elseif engine_sum then
      for _, s in ipairs(g) do lines[#lines + 1] = line(s.id, s) end
      lines[#lines + 1] = line(nil, engine_sum)
    else
      for _, s in ipairs(g) do lines[#lines + 1] = line(s.id, s) end
      local sum = { bytes = 0 }
      local jit, nj, dsum, pairs = 0, 0, 0, 0
      for _, s in ipairs(g) do
        sum.bytes = sum.bytes + (s.bytes or 0)
        if s.retransmits then sum.retransmits = (sum.retransmits or 0) + s.retransmits end
        if s.packets then sum.packets = (sum.packets or 0) + s.packets end
        if s.lost_packets then sum.lost_packets = (sum.lost_packets or 0) + s.lost_packets end
        if s.unique_packets then sum.unique_packets = (sum.unique_packets or 0) + s.unique_packets end
        if s.jitter_ms then jit = jit + s.jitter_ms; nj = nj + 1 end
        if s.jitter_mean_abs_ms then
          dsum = dsum + s.jitter_mean_abs_ms * s.jitter_pairs
          pairs = pairs + s.jitter_pairs
        end
      end
      if nj > 0 then sum.jitter_ms = jit / nj end
      -- the pairs' mean over all streams (each stream's mean weighs its pairs)
      if pairs > 0 then sum.jitter_mean_abs_ms = dsum / pairs end
      local secs = iv.seconds or ((iv.end_s or 0) - (iv.start_s or 0))
      sum.bits_per_second = secs > 0 and sum.bytes * 8 / secs or 0.0
      lines[#lines + 1] = line(nil, sum)
    end
  end
  return lines
end

return M
