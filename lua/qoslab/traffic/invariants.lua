--- The bookkeeping identities of a traffic result (see qoslab.traffic).
-- @module qoslab.traffic.invariants

local M = {}

local function data_dir(res) return res.reverse and 'reverse' or 'forward' end

-- --------------------------------------------------------- invariants ----

local function finite_everywhere(t, path, bad, seen)
  seen = seen or {}
  if seen[t] then return end
  seen[t] = true
  for k, v in pairs(t) do
    local p = path .. '.' .. tostring(k)
    if type(v) == 'number' and (v ~= v or v == math.huge or v == -math.huge) then
      bad[#bad + 1] = p .. ' is ' .. tostring(v)
    elseif type(v) == 'table' then
      finite_everywhere(v, p, bad, seen)
    end
  end
end

local COUNTERS = { bytes = true, packets = true, retransmits = true, unique_packets = true,
  lost_packets = true, duplicate_packets = true, out_of_order_packets = true,
  late_packets = true, invalid_packets = true, writes = true }

local function integer_counters(t, path, bad, seen)
  seen = seen or {}
  if seen[t] then return end
  seen[t] = true
  for k, v in pairs(t) do
    local p = path .. '.' .. tostring(k)
    if COUNTERS[k] and type(v) == 'number' and math.type(v) ~= 'integer' then
      bad[#bad + 1] = p .. ' is not an integer (' .. tostring(v) .. ')'
    elseif COUNTERS[k] and type(v) == 'number' and v < 0 then
      bad[#bad + 1] = p .. ' is negative (' .. tostring(v) .. ')'
    elseif type(v) == 'table' then
      integer_counters(v, p, bad, seen)
    end
  end
end

--- Check a result's bookkeeping identities.
--
-- No NaN or infinity anywhere; counters are non-negative integers; per side
-- and direction the [SUM] equals the sum of its streams (bytes, retransmits,
-- UDP packets and loss counters); for UDP `lost + unique == sent` on every
-- stream and in the sums; Σ of the non-omitted interval bytes of every
-- stream, role and direction equals that stream's total wherever that side's
-- intervals are present (for UDP also a sender's packets and a receiver's
-- unique and lost datagrams); out-of-order <= unique in every interval;
-- every interval has a positive duration.
-- @tparam table res a result table
-- @treturn boolean true when every identity holds
-- @treturn table list of violated identities (strings), empty when none
-- @usage local ok, why = traffic.invariants(res); assert(ok, table.concat(why, '\n'))
function M.invariants(res)
  local bad = {}
  finite_everywhere(res, 'res', bad)
  integer_counters(res, 'res', bad)
  local udp = res.proto == 'udp'
  local function eq(a, b, what)
    if a ~= b then bad[#bad + 1] = string.format('%s: %s ~= %s', what, tostring(a), tostring(b)) end
  end
  local dirs = { { data_dir(res), res.sent, res.received } }
  if res.bidir then dirs[2] = { 'reverse', res.reverse_sent, res.reverse_received } end
  for _, d in ipairs(dirs) do
    local dir, sent, recv = d[1], d[2], d[3]
    if not sent or not recv then
      bad[#bad + 1] = dir .. ': sent/received totals missing'
    else
      local ss = { bytes = 0, retransmits = 0, packets = 0 }
      local rs = { bytes = 0, unique_packets = 0, lost_packets = 0, duplicate_packets = 0,
        out_of_order_packets = 0, invalid_packets = 0 }
      local n = 0
      for _, s in ipairs(res.streams or {}) do
        if (s.direction or dir) == dir then
          n = n + 1
          for k in pairs(ss) do ss[k] = ss[k] + ((s.sender or {})[k] or 0) end
          for k in pairs(rs) do rs[k] = rs[k] + ((s.receiver or {})[k] or 0) end
          if udp and s.sender and s.receiver then
            eq((s.receiver.lost_packets or 0) + (s.receiver.unique_packets or 0),
              s.sender.packets, string.format('%s stream %s lost + unique == sent', dir, s.id))
          end
        end
      end
      if n == 0 then bad[#bad + 1] = dir .. ': no streams' end
      eq(ss.bytes, sent.bytes, dir .. ' sender SUM bytes == sum of streams')
      eq(rs.bytes, recv.bytes, dir .. ' receiver SUM bytes == sum of streams')
      if udp then
        eq(ss.packets, sent.packets, dir .. ' sender SUM packets == sum of streams')
        for _, k in ipairs { 'unique_packets', 'lost_packets', 'duplicate_packets',
            'out_of_order_packets', 'invalid_packets' } do
          eq(rs[k], recv[k] or 0, dir .. ' receiver SUM ' .. k .. ' == sum of streams')
        end
        eq((recv.lost_packets or 0) + (recv.unique_packets or 0), sent.packets,
          dir .. ' lost + unique == sent')
      else
        eq(ss.retransmits, sent.retransmits or 0, dir .. ' sender SUM retransmits == sum of streams')
      end
    end
  end
  -- Intervals: per (stream id, direction, role) sums of non-omitted bytes.
  local acc = {}
  for i, iv in ipairs(res.intervals or {}) do
    local secs = iv.seconds or ((iv.end_s or 0) - (iv.start_s or 0))
    if secs ~= secs or secs <= 0 then bad[#bad + 1] = string.format('interval %d has duration %s', i, secs) end
    if i > 1 and res.intervals[i - 1].end_s and iv.start_s
        and math.abs(iv.start_s - res.intervals[i - 1].end_s) > 1e-6 then
      bad[#bad + 1] = string.format('interval %d starts at %.6f, previous ended at %.6f', i,
        iv.start_s, res.intervals[i - 1].end_s)
    end
    for _, s in ipairs(iv.streams or {}) do
      if (s.out_of_order_packets or 0) > (s.unique_packets or math.huge) then
        bad[#bad + 1] = string.format('interval %d stream %s: out-of-order %d > unique %d', i,
          tostring(s.id), s.out_of_order_packets, s.unique_packets)
      end
      if not iv.omitted then
        local key = string.format('%s/%s/%s', tostring(s.id), s.direction or data_dir(res),
          tostring(s.role))
        local a = acc[key] or {}
        acc[key] = a
        for _, k in ipairs(udp and { 'bytes', 'packets', 'unique_packets', 'lost_packets' }
            or { 'bytes' }) do
          if s[k] then a[k] = (a[k] or 0) + s[k] end
        end
      end
    end
  end
  for _, s in ipairs(res.streams or {}) do
    local dir = s.direction or data_dir(res)
    for _, role in ipairs { 'sender', 'receiver' } do
      local key = string.format('%s/%s/%s', tostring(s.id), dir, role)
      for k, sum in pairs(acc[key] or {}) do
        -- UDP: a sender's packets, a receiver's unique and lost datagrams
        local counted = k == 'bytes' or (role == 'sender') == (k == 'packets')
        if s[role] and s[role][k] and counted then
          eq(sum, s[role][k], string.format('stream %s %s %s: sum of interval %s == total',
            tostring(s.id), dir, role, k))
        end
      end
    end
  end
  return #bad == 0, bad
end

return M
