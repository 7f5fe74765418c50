--- Standard tests: named tests that ship with qoslab (rrul, tcp_nup,
-- tcp_ndown, udp_flood, latency), run against a qoslab server with the
-- latency probe beside the load, like flent's tests of the same names.
--
-- A test's flows (qoslab.stdtest.defs) run at once, each a traffic test of
-- its own, all started before the first is waited for (rrul is one
-- bidirectional test of 4 streams each way, stream i of each direction
-- marked with class i's DSCP by `tos_per_stream`); the probe rides on the
-- first flow's test (`probe` of `qoslab.traffic.start`, with its idle phase before
-- and after the load), or runs alone (`qoslab.latency.probe`) for the
-- latency test. The run is one point of a `qoslab.plan.sweep`, so it is
-- written to `out/results.jsonl` like any plan's point (one line per run
-- holding every flow's result) and obeys `qoslab run --out`.
--
--     local r = assert(qoslab.stdtest.run('rrul', {host = '10.0.0.2', duration_s = 30}))
--     io.write(qoslab.stdtest.format(r))
--
-- Every test is one traffic test (and the probe's session), so a qoslab
-- server with its default limits (2 tests per client address) runs any of
-- them. The per-class marks of rrul's download streams are the server's to
-- set: a stock iperf3 server sends them unmarked, and the result warns.
-- @module qoslab.stdtest
local check = require 'qoslab.check'
local defs = require 'qoslab.stdtest.defs'

local M = {}

--- The DSCP classes of rrul (see qoslab.stdtest.defs): `{name, dscp, tos}`.
M.CLASSES = defs.CLASSES

--- Defaults of the run options.
-- `duration_s` 60 (flent's test length), `idle_s` 5 (flent's `--delay`: the
-- probe measures this long before the load starts and after it ends),
-- `streams` 4 (tcp_nup, tcp_ndown), `bitrate_bps` 100e6 (udp_flood: the rate
-- flent's udp_flood documents).
M.DEFAULTS = { duration_s = 60, idle_s = 5, streams = 4, bitrate_bps = 100000000 }

local CTX = 'qoslab.stdtest.run'

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

--- The standard tests.
-- @treturn {table,...} `{name, description, probe = "beside"|"alone", options =
--   {name,...}}` per test, sorted by name
-- @usage for _, t in ipairs(qoslab.stdtest.list()) do print(t.name, t.description) end
function M.list()
  local out = {}
  for _, name in ipairs(defs.names()) do
    local d = defs.tests[name]
    local opts = {}
    for k in pairs(d.options) do opts[#opts + 1] = k end
    table.sort(opts)
    out[#out + 1] = { name = name, description = d.description, probe = d.probe, options = opts }
  end
  return out
end

local function known_names() return table.concat(defs.names(), ', ') end

-- level as for check.fail: 1 = the caller of the function calling check_name
local function check_name(ctx, name, level)
  if type(name) ~= 'string' or not defs.tests[name] then
    error(string.format('%s: name: expected a standard test (%s), got %s', ctx, known_names(),
      check.describe(name)), level + 2)
  end
  return defs.tests[name]
end

local COMMON = { host = true, port = true, netns = true, duration_s = true, idle_s = true,
                 probe = true, out = true, print = true, connect_timeout_s = true }

-- The options resolved: defaults filled in, every field checked.
local function resolve(name, d, opts, level)
  local L = level + 1
  opts = opts or {}
  check.table(CTX, 'opts', opts, L)
  local allowed = copy(COMMON)
  for k in pairs(d.options) do allowed[k] = true end
  for k in pairs(opts) do
    if type(k) == 'string' and not allowed[k] and (k == 'streams' or k == 'bitrate_bps') then
      error(string.format('%s: opts.%s: %s takes no %s (it is an option of %s)', CTX, k, name, k,
        k == 'streams' and 'tcp_nup and tcp_ndown' or 'udp_flood'), L + 1)
    end
  end
  -- check.keys's level 1 is its caller (resolve), one short of check.fail's
  check.keys(CTX, 'opts', opts, allowed, L + 1)
  if opts.host == nil then check.fail(CTX, 'opts.host', "the server's host name or address", nil, L) end
  local o = {
    host = check.cstring(CTX, 'opts.host', opts.host, nil, L),
    port = check.integer(CTX, 'opts.port', opts.port, 1, 65535, nil, L),
    netns = check.netns(CTX, 'opts.netns', opts.netns, nil, L),
    duration_s = check.number(CTX, 'opts.duration_s', opts.duration_s, 0.001, 86400,
      M.DEFAULTS.duration_s, L),
    idle_s = check.number(CTX, 'opts.idle_s', opts.idle_s, 0, 3600, M.DEFAULTS.idle_s, L),
    connect_timeout_s = check.number(CTX, 'opts.connect_timeout_s', opts.connect_timeout_s,
      0.001, 3600, nil, L),
    out = check.cstring(CTX, 'opts.out', opts.out, nil, L),
    print = check.boolean(CTX, 'opts.print', opts.print, false, L),
  }
  if opts.host == '' then check.fail(CTX, 'opts.host', "the server's host name or address", '', L) end
  if d.options.streams then
    o.streams = check.integer(CTX, 'opts.streams', opts.streams, 1, 128, M.DEFAULTS.streams, L)
  end
  if d.options.bitrate_bps then
    o.bitrate_bps = check.integer(CTX, 'opts.bitrate_bps', opts.bitrate_bps, 1, 1 << 50,
      M.DEFAULTS.bitrate_bps, L)
  end
  local p = opts.probe
  if p == true then p = {} end
  if p ~= nil and p ~= false and type(p) ~= 'table' then
    check.fail(CTX, 'opts.probe', 'a table of probe options, true or false', p, L)
  end
  if opts.idle_s ~= nil and d.probe == 'alone' then
    error(string.format('%s: opts.idle_s: %s is the probe alone, with no load to measure an idle '
      .. 'phase against; leave it out', CTX, name), L + 1)
  end
  if p == false and d.probe == 'alone' then
    error(string.format('%s: opts.probe: %s is the probe alone; it cannot run without it', CTX,
      name), L + 1)
  end
  if p ~= false then
    p = copy(p or {})
    if p.idle_s ~= nil then
      error(CTX .. ': opts.probe.idle_s: give the idle phase as opts.idle_s', L + 1)
    end
    if p.duration_s ~= nil then
      error(CTX .. ': opts.probe.duration_s: the probe runs for opts.duration_s', L + 1)
    end
    -- the probe's own rules, before any flow starts (host, netns and the
    -- length are the run's, refused here as beside a test)
    local beside = copy(p)
    if d.probe == 'beside' then beside.idle_s = o.idle_s end
    require('qoslab.latency').check_beside(CTX, beside, L + 1)
  end
  o.probe = p
  return o
end

--- Each flow's part of a run: the traffic test's options.
local function flow_options(o, f)
  return {
    host = o.host, port = o.port, netns = o.netns, duration_s = o.duration_s,
    connect_timeout_s = o.connect_timeout_s, proto = f.proto,
    reverse = f.direction == 'down' or nil, bidir = f.bidir, tos = f.tos,
    tos_per_stream = f.tos_per_stream, parallel = f.parallel, bitrate_bps = f.bitrate_bps,
  }
end

-- What one direction's receiver measured (rx) and its sender sent (tx).
local function direction_entry(proto, rx, tx)
  local e = { bits_per_second = rx.bits_per_second, bytes = rx.bytes, seconds = rx.seconds,
              side = rx.side, sent_bits_per_second = tx.bits_per_second }
  if proto == 'udp' then
    e.lost_pct, e.lost_packets, e.jitter_ms = rx.lost_pct, rx.lost_packets, rx.jitter_ms
  else
    e.retransmits = tx.retransmits
  end
  return e
end

-- One flow's row of the result: what its receiver measured.
-- A bidir flow's entry has `up` and `down` (each direction's numbers as a
-- one-way flow's), their sums, and per stream its direction, class and the
-- TOS the engine recorded for it (nil when its sender set none).
local function flow_entry(f, res)
  local e = {
    label = f.label, direction = f.direction, proto = f.proto, class = f.class, tos = f.tos,
    parallel = f.parallel, bidir = f.bidir, tos_per_stream = f.tos_per_stream,
    bitrate_bps = f.bitrate_bps, streams = {}, warnings = res.warnings, result = res,
  }
  local fwd = direction_entry(f.proto, res.received or {}, res.sent or {})
  if f.bidir then
    e.up = fwd
    e.down = direction_entry(f.proto, res.reverse_received or {}, res.reverse_sent or {})
    e.bits_per_second = (e.up.bits_per_second or 0) + (e.down.bits_per_second or 0)
    e.bytes = (e.up.bytes or 0) + (e.down.bytes or 0)
  else
    for k, v in pairs(fwd) do e[k] = v end
  end
  local nth = { forward = 0, reverse = 0 }
  for i, s in ipairs(res.streams or {}) do
    local r = s.receiver or {}
    nth[s.direction] = (nth[s.direction] or 0) + 1
    e.streams[i] = { id = s.id, bits_per_second = r.bits_per_second, bytes = r.bytes,
                     seconds = r.seconds, side = r.side, tos = s.tos,
                     direction = s.direction == 'reverse' and 'down' or 'up',
                     class = f.classes and f.classes[nth[s.direction]] or f.class }
  end
  return e
end

-- rrul's table: per class and direction, the stream of that class as its
-- receiver counted it, with the TOS its sender set (nil: none).
local function class_rows(flows)
  local rows = {}
  for _, dir in ipairs { 'up', 'down' } do
    for _, f in ipairs(flows) do
      for _, s in ipairs(f.streams) do
        if f.tos_per_stream and s.direction == dir then
          rows[#rows + 1] = { class = s.class, direction = dir, tos = s.tos, id = s.id,
                              bits_per_second = s.bits_per_second, bytes = s.bytes,
                              seconds = s.seconds, side = s.side }
        end
      end
    end
  end
  return #rows > 0 and rows or nil
end

local function fail_of(label, msg, code)
  return { msg = string.format('%s: %s', label, tostring(msg)), code = code or 'EFAIL' }
end

-- A stop signal (SIGINT/SIGTERM/SIGHUP) seen as a failure's code (the
-- probe's sleeps return it) ends the run as an interruption: raised, the
-- started flows are stopped, and the pending signal makes plan.sweep and the
-- command treat the error as one.
local function interrupted(code, msg)
  if code == 'EINTR' then error(tostring(msg), 0) end
end

-- Start every flow, then wait for all; any failure stops the others. Returns
-- the entries and the probe's latency, or nil, {msg, code}. An interruption
-- (SIGINT/SIGTERM) raises after every started test was stopped.
local function run_flows(d, o, run)
  local traffic = require 'qoslab.traffic'
  local flows = d.flows(o)
  local handles = {}
  local function stop_all()
    for _, h in pairs(handles) do pcall(h.stop, h) end
  end
  local results, failure = {}, nil
  local ok, err = pcall(function()
    if d.probe == 'alone' then
      local latency = require 'qoslab.latency'
      local po = copy(o.probe)
      po.host, po.port, po.netns, po.duration_s = o.host, o.port, o.netns, o.duration_s
      local res, msg, code = latency.probe(po)
      interrupted(code, msg)
      if not res then failure = fail_of('probe', msg, code) return end
      run.latency = res
      return
    end
    for i, f in ipairs(flows) do
      local fo = flow_options(o, f)
      if i == 1 and o.probe then
        fo.probe = copy(o.probe)
        fo.probe.idle_s = o.idle_s
      end
      -- The probe's test returns once the probe's idle phase is over and its
      -- load has begun: the other flows start then, so all load the path
      -- together (and its wait holds the idle phase after the load).
      local h, msg, code = traffic.start(fo)
      interrupted(code, msg)
      if not h then failure = fail_of(f.label, msg, code) return end
      handles[i] = h
    end
    for i, f in ipairs(flows) do
      local res, msg, code = handles[i]:wait()
      interrupted(code, msg)
      if not res then failure = fail_of(f.label, msg, code) return end
      results[i] = flow_entry(f, res)
      if i == 1 and o.probe then run.latency = res.latency end
    end
  end)
  stop_all()
  if not ok then error(err, 0) end
  if failure then
    -- what the other tests made of it is not a result of this run
    for i = 1, #flows do if handles[i] then pcall(handles[i].wait, handles[i]) end end
    return nil, failure
  end
  run.flows = results
  run.classes = class_rows(results)
  return run
end

local function sum_rates(flows, dir)
  local s, n = 0, 0
  for _, f in ipairs(flows) do
    local x = f.direction == 'both' and f[dir] or f.direction == dir and f or {}
    if x.bits_per_second then s, n = s + x.bits_per_second, n + 1 end
  end
  return n > 0 and s or nil
end

--- Check a test's name and options without running it.
-- @tparam string name as for `run`
-- @tparam table opts as for `run`
-- @treturn table the options as the run takes them (defaults filled in)
-- @raise as `run` does for bad input, naming qoslab.stdtest.check
-- @usage qoslab.stdtest.check('rrul', {host = '10.0.0.2', duration_s = 10})
function M.check(name, opts)
  local ctx = 'qoslab.stdtest.check'
  local ok, err = pcall(function()
    local d = check_name(CTX, name, 1)
    return resolve(name, d, opts, 1)
  end)
  if not ok then error((tostring(err):gsub('^.-' .. CTX:gsub('%p', '%%%0'), ctx, 1)), 2) end
  return err
end

--- Run a standard test.
-- @tparam string name one of `list()`'s names: "rrul", "tcp_nup", "tcp_ndown",
--   "udp_flood", "latency"
-- @tparam table opts
--   * `host` (string, required): where a qoslab server runs (its default
--     limits admit every test; against a stock iperf3 server rrul's
--     downloads go unmarked, with a warning in the flow's `warnings`).
--   * `port` (1-65535, default the server default 5201), `netns` (named
--     namespace the client and probe run in), `connect_timeout_s`.
--   * `duration_s` (s, 0.001-86400, default 60): how long the load runs
--     (the latency test: how long the probe runs).
--   * `idle_s` (s, 0-3600, default 5): the probe's idle phase before the load
--     starts and after it ends (not for the latency test).
--   * `streams` (1-128, default 4): tcp_nup and tcp_ndown only.
--   * `bitrate_bps` (integer bits/s, default 100e6): udp_flood only.
--   * `probe` (table, default `{}`; `true`: the probe's defaults): options of
--     the latency probe (`interval_ms`, `proto`, `tos`, `payload_bytes`,
--     `timeout_ms`, ...; see qoslab.latency; checked by the probe when the
--     run starts), or false for no probe (not for the latency test).
--   * `out` (folder): the run is written to `out/results.jsonl` (default:
--     `qoslab run --out`, else no file). `print` (boolean, default false):
--     print `format(result)` to stdout.
-- @treturn table the run: `{test, description, params, host, port, netns,
--   duration_s, idle_s, probe, wall_s, flows = {{label, direction =
--   "up"|"down"|"both", proto, class, tos, parallel, bitrate_bps,
--   bits_per_second, bytes, seconds, side, sent_bits_per_second, retransmits |
--   lost_pct, lost_packets, jitter_ms, streams = {{id, direction, class, tos,
--   bits_per_second, bytes, seconds, side}}, warnings, result}, ...}, classes,
--   up_bps, down_bps, total_bps, latency, results_file, out}`; a flow of
--   direction "both" (rrul's one bidir test, with `bidir`, `tos_per_stream`)
--   has `up` and `down` (`{bits_per_second, bytes, seconds, side,
--   sent_bits_per_second, retransmits}` each) and their sums; `classes`
--   (rrul) is a row per direction and class, `{class, direction, tos, id,
--   bits_per_second, bytes, seconds, side}`, from that class's stream (`tos`:
--   what its sender set, nil when none); `latency` is the probe's
--   `res.latency` (nil with `probe = false`)
-- @return or nil, message, CODE: the failing flow's (ECONNREFUSED, EBUSY
--   when the server refuses a test over its per-address limit, ...), the
--   message naming the flow; every other flow is stopped
-- @raise on an unknown test name (the message lists the known ones), an
--   unknown option or an option of another test, a value out of range,
--   naming the field: "qoslab.stdtest.run: opts.duration_s: expected a
--   finite number in [0.001, 86400], got 0"; on SIGINT/SIGTERM (qoslab's
--   interruption error, after every flow was stopped)
-- @usage local r = assert(qoslab.stdtest.run('tcp_nup', {host = '10.0.0.2', streams = 8}))
function M.run(name, opts)
  local d = check_name(CTX, name, 1)
  local o = resolve(name, d, opts, 1)
  local plan = require 'qoslab.plan'
  local timer = require 'qoslab.timer'
  local params = { test = name, host = o.host, duration_s = o.duration_s }
  if d.probe ~= 'alone' then params.idle_s = o.idle_s end
  if o.streams then params.streams = o.streams end
  if o.bitrate_bps then params.bitrate_bps = o.bitrate_bps end
  local failure, run
  local summary = plan.sweep {
    -- a standard test always runs: `qoslab run --resume` skips no run of it
    name = name, points = { params }, progress = false, on_error = 'record', out = o.out,
    resume = false,
    meta = { stdtest = name, description = d.description },
    metric_name = 'total_bps',
    metric = function(r) return r.total_bps or 0 end,
    run = function()
      run = {
        test = name, description = d.description, params = copy(params), host = o.host,
        port = o.port, netns = o.netns, duration_s = o.duration_s,
        idle_s = d.probe ~= 'alone' and o.idle_s or nil, probe = o.probe,
      }
      local t0 = timer.now()
      local r, f = run_flows(d, o, run)
      if not r then failure = f return nil, f.msg, f.code end
      r.wall_s = timer.now() - t0
      r.up_bps, r.down_bps = sum_rates(r.flows, 'up'), sum_rates(r.flows, 'down')
      if r.up_bps or r.down_bps then r.total_bps = (r.up_bps or 0) + (r.down_bps or 0) end
      return r
    end,
  }
  if failure then return nil, failure.msg, failure.code end
  -- anything else that failed inside the run (recorded in the file) is raised
  local perr = summary.points[1] and summary.points[1].error
  if perr then error(perr, 2) end
  run.results_file, run.out = summary.results_file, summary.out
  if o.print then io.write(M.format(run)) io.flush() end
  return run
end

--- Text.
-- @section text

local function mbit(v) return v and string.format('%.2f', v / 1e6) or nil end
local function ms(v) return v and string.format('%.3f', v) or nil end

-- The latency line of a run, or nil without a probe.
local function latency_table(lat)
  if type(lat) ~= 'table' then return nil end
  local rtt = lat.rtt_ms or {}
  if type(lat.idle) ~= 'table' or (lat.idle.samples or 0) == 0 then
    -- the probe alone: no idle phase, nothing induced
    return {
      title = 'latency (round trip, ms)',
      columns = { 'samples', 'lost', 'late', 'min', 'p50', 'p90', 'p99', 'max' },
      rows = { { lat.samples, lat.lost, lat.late, ms(rtt.min), ms(rtt.p50), ms(rtt.p90),
                 ms(rtt.p99), ms(rtt.max) } },
    }
  end
  local idle = lat.idle.rtt_ms or {}
  return {
    title = 'latency (round trip, ms)',
    columns = { 'samples', 'lost', 'idle p50', 'loaded p50', 'p90', 'p99', 'max', 'induced' },
    rows = { { lat.samples, lat.lost, ms(idle.p50), ms(rtt.p50), ms(rtt.p90), ms(rtt.p99),
               ms(rtt.max), ms(lat.induced_ms) } },
  }
end

--- The tables of a run as text: per-class throughput per direction (rrul),
-- per-stream throughput (tcp_nup, tcp_ndown), rate and loss (udp_flood),
-- the probe's latency (idle p50, loaded p50/p90/p99, induced) and its
-- health (requests sent, samples, lost, late, slots not sent), and each
-- flow's warnings ("warning: LABEL: ...").
-- @tparam table r a run as `run` returns it
-- @treturn string lines ending in "\n"
-- @raise when r is not a run table
-- @usage io.write(qoslab.stdtest.format(r))
function M.format(r)
  local ctx = 'qoslab.stdtest.format'
  check.table(ctx, 'r', r)
  if type(r.test) ~= 'string' then check.fail(ctx, 'r.test', 'a test name', r.test) end
  check.table(ctx, 'r.flows', r.flows or {})
  local report = require 'qoslab.report'
  local parts = {}
  local head = string.format('%s to %s%s: %g s of %s', r.test, tostring(r.host),
    r.netns and (' from namespace ' .. r.netns) or '', r.duration_s or 0,
    #(r.flows or {}) > 0 and 'load' or 'probing')
  if r.idle_s and r.latency then head = head .. string.format(', probe idle %g s before and after', r.idle_s) end
  parts[#parts + 1] = head .. '\n'
  local flows = r.flows or {}
  if r.test == 'rrul' then
    local by = {}
    for _, c in ipairs(r.classes or {}) do by[c.direction .. ' ' .. tostring(c.class)] = c end
    local rows = {}
    for _, c in ipairs(defs.CLASSES) do
      local up, down = by['up ' .. c.name], by['down ' .. c.name]
      rows[#rows + 1] = { c.name, string.format('0x%02x', c.tos), mbit(up and up.bits_per_second),
        mbit(down and down.bits_per_second) }
    end
    rows[#rows + 1] = { 'sum', '', mbit(r.up_bps), mbit(r.down_bps) }
    parts[#parts + 1] = report.format_table { title = 'throughput per class (Mbit/s, as received)',
      columns = { 'class', 'TOS', 'upload', 'download' }, rows = rows }
  elseif #flows > 0 then
    local rows = {}
    for _, f in ipairs(flows) do
      if #f.streams > 1 then
        for i, s in ipairs(f.streams) do
          rows[#rows + 1] = { f.label .. ' ' .. i, f.direction, mbit(s.bits_per_second) }
        end
      end
      local row = { #f.streams > 1 and (f.label .. ' sum') or f.label, f.direction,
                    mbit(f.bits_per_second) }
      if f.proto == 'udp' then
        row[4], row[5] = mbit(f.bitrate_bps), f.lost_pct and string.format('%.3g', f.lost_pct)
      end
      rows[#rows + 1] = row
    end
    local cols = { 'flow', 'dir', 'Mbit/s' }
    if flows[1].proto == 'udp' then cols[4], cols[5] = 'target Mbit/s', 'lost %' end
    parts[#parts + 1] = report.format_table { title = 'throughput (as received)', columns = cols,
      rows = rows }
  end
  local lt = latency_table(r.latency)
  if lt then
    parts[#parts + 1] = report.format_table(lt)
    local def = defs.tests[r.test]
    parts[#parts + 1] = require('qoslab.traffic.summary').probe_health(r.latency, r.duration_s,
      def and def.probe == 'alone') .. '\n'
  end
  for _, f in ipairs(flows) do
    for _, w in ipairs(f.warnings or {}) do
      parts[#parts + 1] = string.format('warning: %s: %s\n', tostring(f.label), tostring(w))
    end
  end
  if r.results_file then parts[#parts + 1] = 'results: ' .. r.results_file .. '\n' end
  return table.concat(parts)
end

return M
