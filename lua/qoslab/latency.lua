--- The latency probe: round-trip time (and one-way delay where the two ends
-- share a clock) measured by an isochronous request/response probe, alone
-- (`probe`, like irtt) or beside a traffic test (`qoslab.traffic.run{...,
-- probe = {...}}`), so a test says what its load did to delay.
--
-- The probe runs in C on its own socket and thread (csrc/core/engine/probe.c):
-- request k leaves at start + k × `interval_ms` (a late wake-up skips the
-- slots it missed, never bursts), stamped by the kernel (SO_TIMESTAMPING
-- software TX and RX stamps, CLOCK_REALTIME) at both ends. Protocols:
--
-- * `"udp"` (default): requests to a qoslab server's UDP port, answered by
--   its responder. A stock iperf3 server does not answer: the probe fails
--   at start with EPROTONOSUPPORT (use `"icmp"`); where nothing listens at
--   all (the UDP port closed and a TCP connection to it refused) it fails
--   with ECONNREFUSED.
-- * `"icmp"`: echo requests on an unprivileged ping socket, answered by any
--   host (`iperf3 -s` too). Where net.ipv4.ping_group_range refuses ping
--   sockets, a raw socket is used if the process may open one (root);
--   otherwise the probe fails with EACCES, naming the sysctl.
-- * `"tcp"`: requests on one TCP connection to a qoslab server's port, like
--   netperf's TCP_RR, but isochronous: requests keep going at the interval
--   while earlier ones wait, so a stalled connection shows as late and lost
--   requests, head-of-line blocking included.
--
-- The result, a plain table (manual/results.md, "latency"): `proto`,
-- `interval_ms`, `timeout_ms`, `payload_bytes`, `clock` (`"shared"`: the
-- server's boot id equals ours, one host or its namespaces; `"synced"`: the
-- caller said `clock_synced = true`; `"unsynced"`), `sent`, `samples`,
-- `lost`, `late`, `duplicates`, `bad_replies`, `bad_server_times` (replies
-- whose server times do not fit the RTT: their RTT counts, their hold and
-- one-way delays do not), `send_errors`, `capped`,
-- `timestamps = { tx_kernel, rx_kernel }`, `rtt_ms = { min, mean, p50, p90,
-- p99, p999, max }`, `server_hold_ms` (UDP/TCP: the server's turnaround,
-- included in rtt_ms), `owd_up_ms`, `owd_down_ms` (UDP/TCP with a shared
-- or synced clock), `idle = { samples, lost, late, rtt_ms, histogram }`, `induced_ms`
-- (beside a test: loaded p50 − idle p50), `histogram = { per_decade,
-- edges_ms, counts, below, above }`.
-- @module qoslab.latency
local check = require 'qoslab.check'

local M = {}

local core = check.core
local copy = check.raw_copy

--- Probe the latency to a host for a while (latency alone, irtt-like).
-- @tparam table opts `host` (required: name or address), `port` (UDP/TCP:
--   the qoslab server's, 1–65535, default 5201), `proto` (`"udp"` default,
--   `"icmp"`, `"tcp"`), `interval_ms` (1–60000, default 10), `duration_s`
--   (0.001–86400, default 10), `tos` (IP_TOS / IPV6_TCLASS of the probe,
--   0–255: its own DSCP), `payload_bytes` (UDP/TCP: the whole request,
--   56–65507, default 64; ICMP: the echo data, 24–65499, default 64),
--   `timeout_ms` (1–60000, default 2000: a reply later than this is `late`,
--   not a sample; none at all is `lost`), `clock_synced` (boolean: the two
--   hosts' clocks are synchronised, so one-way delays are reported across
--   hosts), `idle_s` (accepted for symmetry with the test probe; unused
--   here), `netns` (the namespace the probe's socket lives in),
--   `bind_address`.
-- @treturn table the latency table (see the module text): every sample is
--   in `rtt_ms`; `idle.samples` is 0 and `induced_ms` absent (no load). Or
--   nil, message, CODE: EPROTONOSUPPORT (udp/tcp: no qoslab responder at
--   host:port, e.g. a stock iperf3 server), ETIMEDOUT (icmp: no echo reply
--   within max(1 s, timeout_ms)), EACCES (ping sockets refused, see the
--   module text), ECONNREFUSED (tcp: the connection refused; udp: the port
--   closed and a TCP connection to it refused too, so nothing listens
--   there), ENOENT (no such namespace or host),
--   EINTR (interrupted).
-- @raise on a wrong type, unknown key or out-of-range value, naming the
--   field: "qoslab.latency.probe: opts.interval_ms: expected a finite number
--   in [1, 60000], got 0", at the caller's line (the C core's one check,
--   `core.probe_check`)
-- @usage local lat = assert(qoslab.latency.probe{host = '127.0.0.1', duration_s = 2})
-- print(lat.rtt_ms.p50, lat.rtt_ms.p99)
function M.probe(opts)
  local filled = check.call(2, core().probe_check, opts, 'qoslab.latency.probe', 'opts', true)
  local p, msg, code = core().probe_start(copy(opts))
  if not p then return nil, M.advise(msg, code, 'opts.proto'), code end
  -- plain lua5.4's SIGINT hook raises "interrupted!" at whatever line of
  -- this file runs next: the probe is stopped and it is raised again at the
  -- caller's line
  local done, ok, smsg, scode = pcall(function()
    local a, b, c = core().sleep(filled.duration_s)
    return a, b, c
  end)
  p:stop()
  if not done then
    if check.interpreter_interrupt(ok) then error('interrupted!', 2) end
    error(ok, 0)
  end
  if not ok then return nil, smsg, scode end
  local lat = p:latency()
  return lat
end

--- Check the `probe` table of a test's options (beside a test: no `host`,
-- `netns`, `bind_address` or `duration_s`; they come from the test).
-- @tparam string ctx the public function's name for messages
-- @tparam table probe the caller's table
-- @tparam integer level where to raise (as `check.call`)
-- @treturn table the probe's options with the defaults filled in
-- @raise `"<ctx>: opts.probe.<key>: expected ..., got ..."`
function M.check_beside(ctx, probe, level)
  local filled = check.call(level + 1, core().probe_check, probe, ctx, 'opts.probe', false)
  return filled
end

--- The advice of a probe that found no qoslab responder (EPROTONOSUPPORT):
-- the option to set, named as the caller wrote it (`opts.proto` for
-- `probe`, `opts.probe.proto` beside a test; the CLI shows its flag).
-- @tparam string msg the core's message
-- @tparam string code
-- @tparam string field the option's name for the caller
-- @treturn string msg, with `: use FIELD = "icmp"` for EPROTONOSUPPORT
function M.advise(msg, code, field)
  if code ~= 'EPROTONOSUPPORT' then return msg end
  return string.format('%s: use %s = "icmp"', msg, field)
end

-- ns integer of a CLOCK_REALTIME time in seconds plus an offset in seconds
local function ns_of(unix_s, off_s)
  return math.tointeger(math.floor(unix_s * 1e9)) + math.tointeger(math.floor(off_s * 1e9 + 0.5))
end

--- Start the probe of a test (before its load): opens it, waits for its
-- first reply, then the idle phase.
-- @tparam table probe the caller's probe table (checked by `check_beside`)
-- @tparam table topts the test's options (host, port, netns, bind_address)
-- @tparam table filled the probe's options checked (`check_beside`: `idle_s`)
-- @treturn userdata|nil the running probe, or nil, message, CODE (as `probe`)
function M.start_beside(probe, topts, filled)
  local o = copy(probe)
  o.host = topts.host
  o.port = probe.port or topts.port
  o.netns = topts.netns
  o.bind_address = topts.bind_address
  o.idle_s = nil
  local p, msg, code = core().probe_start(o)
  if not p then return nil, M.advise(msg, code, 'opts.probe.proto'), code end
  if filled.idle_s > 0 then
    local ok, smsg, scode = core().sleep(filled.idle_s)
    if not ok then p:stop(); return nil, smsg, scode end
  end
  return p
end

--- The latency of one live interval of a running test (its requests sent
-- in the interval's span on the test's clock): the replies in so far;
-- requests sent less than `timeout_ms` ago and not yet answered count as
-- neither sample nor lost (the final result's intervals are complete).
-- @tparam userdata p the probe of `start_beside`
-- @tparam number start_unix_s the test clock's zero (CLOCK_REALTIME s)
-- @tparam table iv a live interval (`start_s`, `end_s`)
-- @treturn table `{ samples, lost, late, rtt_ms }`
function M.interval_live(p, start_unix_s, iv)
  local _, per = p:latency(nil, nil, { { ns_of(start_unix_s, iv.start_s),
    ns_of(start_unix_s, iv.end_s) } })
  return per[1]
end

--- End the probe of a test (after its load): the idle phase after it, stop,
-- and the latency table with the test's intervals.
-- @tparam userdata p the probe of `start_beside`
-- @tparam table filled its options (`idle_s`)
-- @tparam table res the test's result: `res.latency` and each
--   `res.intervals[i].latency` are set
-- @treturn table|nil res, or nil, message, CODE when the idle sleep was
--   interrupted
function M.finish_beside(p, filled, res)
  local ok, smsg, scode = true, nil, nil
  if filled.idle_s > 0 then ok, smsg, scode = core().sleep(filled.idle_s) end
  p:stop()
  if not ok then return nil, smsg, scode end
  local t0 = res.start_time_unix_s
  local spans, last = {}, 0
  for i, iv in ipairs(res.intervals or {}) do
    spans[i] = { ns_of(t0, iv.start_s), ns_of(t0, iv.end_s) }
    if iv.end_s > last then last = iv.end_s end
  end
  if last == 0 then last = res.duration_s or 0 end
  local lat, per = p:latency(ns_of(t0, 0), ns_of(t0, last), spans)
  for i, iv in ipairs(res.intervals or {}) do iv.latency = per[i] end
  res.latency = lat
  return res
end

return M
