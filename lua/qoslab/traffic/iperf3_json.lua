--- A traffic result in iperf3's `-J` JSON schema (iperf3 3.12's layout):
-- a pure function over a result table (see qoslab.traffic).
-- @module qoslab.traffic.iperf3_json
local check = require 'qoslab.check'

local M = {}

local core = check.core

-- the bodies of M.start_json and M.end_json (below them)
local start_json, end_json

-- ---------------------------------------------------------- iperf3 JSON --

-- iperf3 -J prints what its own end measured: the entries whose `side`
-- (the end that measured them, carried by each entry) is the local one.
local function local_entry(res, s)
  return s.side == res.local_role
end

-- iperf3's "sender" flag: is the local end the sender of that direction
-- (the client sends forward, the server reverse).
local function local_sends(res, dir)
  return (res.local_role == 'server') == (dir == 'reverse')
end

local function data_dir(res) return res.reverse and 'reverse' or 'forward' end

-- iperf3 (cJSON) writes a number with an integral value as an integer
-- ("omit": 0, "start": 0, "end": 2), a typed reader rejects 0.0 for an
-- integer field: every float with an integral value becomes a Lua integer,
-- in place, so that -J and --json-stream encode it alike.
local function integral(t)
  for k, v in pairs(t) do
    if math.type(v) == 'float' then
      t[k] = math.tointeger(v) or v
    elseif type(v) == 'table' then
      integral(v)
    end
  end
  return t
end

local function interval_json(res, iv)
  local out = { streams = {} }
  local udp = res.proto == 'udp'
  local sums = {}
  local secs = iv.seconds or ((iv.end_s or 0) - (iv.start_s or 0))
  for _, s in ipairs(iv.streams or {}) do
    local dir = s.direction or data_dir(res)
    if local_entry(res, s) then
      local e = { socket = s.id, start = iv.start_s, ['end'] = iv.end_s, seconds = secs,
        bytes = s.bytes, bits_per_second = s.bits_per_second, omitted = iv.omitted == true,
        sender = local_sends(res, dir) }
      if s.role == 'sender' and not udp then
        e.retransmits = s.retransmits
        e.snd_cwnd = s.snd_cwnd_bytes
        e.snd_wnd = s.snd_wnd_bytes
        e.rtt = s.rtt_us
        e.rttvar = s.rttvar_us
        e.pmtu = s.pmtu_bytes
      elseif udp then
        e.packets = s.packets
        if s.role == 'receiver' then
          e.packets = (s.packets or 0) + (s.lost_packets or 0)
          if s.unique_packets then e.packets = s.unique_packets + (s.lost_packets or 0) end
          e.jitter_ms = s.jitter_ms or 0.0
          e.lost_packets = s.lost_packets or 0
          e.lost_percent = s.lost_pct or 0.0
        end
      end
      out.streams[#out.streams + 1] = e
      local key = res.bidir and dir or 'all'
      local sum = sums[key]
      if not sum then
        sum = { start = iv.start_s, ['end'] = iv.end_s, seconds = secs, bytes = 0,
          omitted = iv.omitted == true, sender = e.sender, _jit = 0, _nj = 0 }
        sums[key] = sum
      end
      sum.bytes = sum.bytes + (s.bytes or 0)
      if e.retransmits then sum.retransmits = (sum.retransmits or 0) + e.retransmits end
      if e.packets then sum.packets = (sum.packets or 0) + e.packets end
      if e.lost_packets then sum.lost_packets = (sum.lost_packets or 0) + e.lost_packets end
      if e.jitter_ms then sum._jit = sum._jit + e.jitter_ms; sum._nj = sum._nj + 1 end
    end
  end
  for key, sum in pairs(sums) do
    sum.bits_per_second = secs > 0 and sum.bytes * 8 / secs or 0.0
    if sum._nj > 0 then sum.jitter_ms = sum._jit / sum._nj end
    if sum.lost_packets then
      -- the engine's sum of the direction's receivers (this end's entries)
      local csum = key == 'reverse' and iv.reverse_sum or iv.sum
      sum.lost_percent = csum and csum.receiver and csum.receiver.lost_pct or 0.0
    end
    sum._jit, sum._nj = nil, nil
    if key == 'reverse' then out.sum_bidir_reverse = sum else out.sum = sum end
  end
  if not out.sum then
    out.sum = { start = iv.start_s, ['end'] = iv.end_s, seconds = secs, bytes = 0,
      bits_per_second = 0.0, omitted = iv.omitted == true, sender = local_sends(res, data_dir(res)) }
  end
  return out
end

local function total_json(x, sender_flag, tcp_sender)
  local e = { start = 0, ['end'] = x.seconds, seconds = x.seconds, bytes = x.bytes,
    bits_per_second = x.bits_per_second, sender = sender_flag }
  if tcp_sender then e.retransmits = x.retransmits end
  return e
end

local function udp_total(sent, recv, view)
  local packets = sent.packets or ((recv.unique_packets or 0) + (recv.lost_packets or 0))
  local src = view == 'sender' and sent or recv
  return { start = 0, ['end'] = src.seconds, seconds = src.seconds, bytes = src.bytes,
    bits_per_second = src.bits_per_second,
    jitter_ms = view == 'sender' and 0.0 or (recv.jitter_ms or 0.0),
    lost_packets = view == 'sender' and 0 or (recv.lost_packets or 0),
    packets = packets,
    lost_percent = view == 'sender' and 0.0 or (recv.lost_pct or 0.0),
    -- iperf3 3.12 marks UDP's sum_sent as the sender's and sum_received
    -- as the receiver's, whichever end prints them
    sender = view == 'sender' }
end

--- The `start` object of iperf3's `-J` JSON (iperf3 3.12's keys) for a
-- result, or for what a running test knows of itself: `connected` (each
-- stream's socket on this end: `socket` holds qoslab's stream id, then
-- `local_host`, `local_port`, `remote_host`, `remote_port` as the kernel
-- reports them), `version`, `system_info`, `timestamp`, `connecting_to`,
-- `cookie`, TCP: `tcp_mss_default` (the control connection's MSS; `tcp_mss`
-- instead when `mss_bytes` was set, as iperf3), `target_bitrate`,
-- `sock_bufsize` (`window_bytes` or 0), `sndbuf_actual` and `rcvbuf_actual`
-- (the first stream's SO_SNDBUF and SO_RCVBUF as granted when it was set
-- up), `test_start`.
-- @tparam table res a result table, or a table with its `proto`,
--   `parallel`, `reverse`, `host`, `port`, `options`, `start_time_unix_s`,
--   `local_role` and the fields of a running test's `:setup()` (`cookie`,
--   `tcp_mss_bytes`, `streams[i].id` and `.socket`)
-- @treturn table
function M.start_json(res)
  return integral(start_json(res))
end

function start_json(res)
  local o = res.options or {}
  local D = core().traffic_defaults()
  local udp = res.proto == 'udp'
  local st1 = res.streams and res.streams[1] or {}
  local sock1 = st1.socket or {}
  local blksize = o.length_bytes
  if not blksize then
    if udp and res.sent and (res.sent.packets or 0) > 0 then
      blksize = res.sent.bytes // res.sent.packets
    else
      blksize = udp and D.udp_length_bytes or D.tcp_length_bytes
    end
  end
  local target = o.bitrate_bps or (udp and D.udp_bitrate_bps or D.tcp_bitrate_bps)
  local start_time = res.start_time_unix_s or 0
  local start = {
    connected = {},
    version = 'qoslab ' .. tostring(core()._VERSION),
    system_info = M._uname(),
    timestamp = { time = os.date('!%a, %d %b %Y %H:%M:%S GMT', math.floor(start_time)),
      timesecs = math.floor(start_time) },
    connecting_to = { host = res.host, port = res.port },
    cookie = res.cookie,
    target_bitrate = math.tointeger(target) or target,
    sock_bufsize = o.window_bytes or 0,
    sndbuf_actual = sock1.sndbuf_bytes or 0,
    rcvbuf_actual = sock1.rcvbuf_bytes or 0,
    test_start = {
      protocol = udp and 'UDP' or 'TCP', num_streams = res.parallel,
      blksize = blksize, omit = o.omit_s or res.omit_s or 0,
      duration = o.duration_s or ((o.bytes or o.packets) and 0
        or math.tointeger(D.duration_s) or D.duration_s),
      bytes = o.bytes or 0, blocks = o.packets or 0,
      reverse = res.reverse and 1 or 0, tos = o.tos or 0,
      target_bitrate = math.tointeger(target) or target,
    },
  }
  if not udp then
    if o.mss_bytes then start.tcp_mss = o.mss_bytes
    else start.tcp_mss_default = res.tcp_mss_bytes end
  end
  if o.title then start.title = o.title end
  for _, s in ipairs(res.streams or {}) do
    local k = s.socket or {}
    start.connected[#start.connected + 1] = { socket = s.id, local_host = k.local_host,
      local_port = k.local_port, remote_host = k.remote_host or res.host,
      remote_port = k.remote_port or res.port }
  end
  return start
end

--- One element of iperf3's `-J` `intervals` (what `--json-stream`'s
-- interval event carries): the local end's entries of an interval record
-- (`res.intervals[k]` or a live record of `:intervals()`), with TCP_INFO's
-- `snd_cwnd`, `snd_wnd`, `rtt`, `rttvar` and `pmtu` for a TCP sender.
-- @tparam table res a result table, or the running test's shape (`proto`,
--   `bidir`, `reverse`, `local_role`)
-- @tparam table iv an interval record
-- @treturn table `{ streams = {...}, sum = {...}[, sum_bidir_reverse] }`
function M.interval_json(res, iv)
  return integral(interval_json(res, iv))
end

--- The `end` object of iperf3's `-J` JSON for a result: `streams` with
-- `sender`/`receiver` for TCP (the sender's `max_snd_cwnd`, `max_snd_wnd`,
-- `max_rtt`, `min_rtt`, `mean_rtt` from its TCP_INFO; 0 where the far end
-- sends none, a stock iperf3 sender, as iperf3 writes them) or `udp` for
-- UDP, `sum_sent`, `sum_received`, for bidir `sum_sent_bidir_reverse` and
-- `sum_received_bidir_reverse`, for UDP `sum`, `cpu_utilization_percent`
-- (host_* this end, remote_* the peer), and TCP's
-- `sender_tcp_congestion` / `receiver_tcp_congestion` (the congestion
-- control each end's kernel ran, the peer's as its results said).
-- @tparam table res a result table
-- @treturn table
function M.end_json(res)
  return integral(end_json(res))
end

function end_json(res)
  local udp = res.proto == 'udp'
  local lsnd = local_sends(res, data_dir(res))
  local e = { streams = {} }
  for _, s in ipairs(res.streams or {}) do
    local dir = s.direction or data_dir(res)
    local flag = local_sends(res, dir)
    local snd, rcv = s.sender or {}, s.receiver or {}
    if udp then
      local lview = flag and snd or rcv
      e.streams[#e.streams + 1] = { udp = { socket = s.id, start = 0, ['end'] = lview.seconds,
        seconds = lview.seconds, bytes = lview.bytes, bits_per_second = lview.bits_per_second,
        jitter_ms = rcv.jitter_ms or 0.0, lost_packets = rcv.lost_packets or 0,
        packets = snd.packets or ((rcv.unique_packets or 0) + (rcv.lost_packets or 0)),
        lost_percent = rcv.lost_pct or 0.0, out_of_order = rcv.out_of_order_packets or 0,
        sender = flag } }
    else
      local se = total_json(snd, flag, true)
      se.socket = s.id
      se.max_snd_cwnd = snd.max_snd_cwnd_bytes or 0
      se.max_snd_wnd = snd.max_snd_wnd_bytes or 0
      se.max_rtt = snd.max_rtt_us or 0
      se.min_rtt = snd.min_rtt_us or 0
      se.mean_rtt = snd.mean_rtt_us or 0
      local re = total_json(rcv, flag, false)
      re.socket = s.id
      e.streams[#e.streams + 1] = { sender = se, receiver = re }
    end
  end
  local function sums(sent, recv, dir, suffix)
    if not sent or not recv then return end
    local flag = local_sends(res, dir)
    if udp then
      e['sum_sent' .. suffix] = udp_total(sent, recv, 'sender')
      e['sum_received' .. suffix] = udp_total(sent, recv, 'receiver')
    else
      e['sum_sent' .. suffix] = total_json(sent, flag, true)
      e['sum_received' .. suffix] = total_json(recv, flag, false)
    end
  end
  sums(res.sent, res.received, data_dir(res), '')
  if res.bidir then sums(res.reverse_sent, res.reverse_received, 'reverse', '_bidir_reverse') end
  if udp and res.sent and res.received then
    -- iperf3's UDP "sum": the local end's bytes with the receiver's loss and jitter.
    local s = udp_total(res.sent, res.received, 'receiver')
    local lview = lsnd and res.sent or res.received
    s.bytes, s.bits_per_second = lview.bytes, lview.bits_per_second
    s.seconds, s['end'] = lview.seconds, lview.seconds
    s.sender = lsnd
    e.sum = s
  end
  local mine = res.cpu and res.cpu[res.local_role]
  local peer = res.cpu and res.cpu[res.local_role == 'client' and 'server' or 'client']
  if mine or peer then
    local c = {}
    if mine then c.host_total, c.host_user, c.host_system = mine.total_pct, mine.user_pct, mine.system_pct end
    if peer then c.remote_total, c.remote_user, c.remote_system = peer.total_pct, peer.user_pct, peer.system_pct end
    e.cpu_utilization_percent = c
  end
  if not udp then
    -- the data direction's sending end: the client forward, the server reverse
    local ca = res.tcp_congestion or {}
    local sender_side = res.reverse and 'server' or 'client'
    local receiver_side = sender_side == 'client' and 'server' or 'client'
    local o = res.options or {}
    e.sender_tcp_congestion = ca[sender_side] or (sender_side == 'client' and o.congestion) or nil
    e.receiver_tcp_congestion = ca[receiver_side]
      or (receiver_side == 'client' and o.congestion) or nil
  end
  return e
end

--- Convert a result to iperf3's `-J` JSON schema (as printed by iperf3 3.12):
-- `start` is `start_json(res)`, `intervals` holds `interval_json(res, iv)`
-- of each interval, `end` is `end_json(res)`. Every key iperf3 3.12 writes for the same test
-- is there, from what the engine measured (see those three); omitted
-- intervals are included with `omitted = true` as iperf3 does; `sender` is
-- true where the local end sent that direction's data; loss percentages
-- are the engine's (`lost_pct`), defaults the engine's
-- (`core.traffic_defaults`).
-- @tparam table res a result table
-- @treturn table a plain table; encode with cjson / dkjson
-- @usage print(require('cjson').encode(traffic.to_iperf3_json(res)))
function M.to_iperf3_json(res)
  local intervals = {}
  for _, iv in ipairs(res.intervals or {}) do intervals[#intervals + 1] = M.interval_json(res, iv) end
  return { start = M.start_json(res), intervals = intervals, ['end'] = M.end_json(res) }
end

local uname_cache
-- `uname -a` for iperf3's start.system_info (internal; cached).
function M._uname()
  if not uname_cache then
    uname_cache = require('qoslab.fs').uname_a()
  end
  return uname_cache
end

return M
