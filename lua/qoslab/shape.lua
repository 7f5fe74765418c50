--- Rate limits on a link's egress with tbf or htb (tc-tbf(8), tc-htb(8)),
-- made over rtnetlink from this process (no `tc`), so a veth pair can stand
-- in for a 1 Gbit/s link. A netem qdisc can sit under the shaper:
--
-- * tbf: root `tbf` handle `1:`; netem goes at parent `"1:1"`;
-- * htb: root `htb` handle `1:` default class `1:10`, one class `1:10`
--   (rate, ceil); netem goes at parent `"1:10"` (the class's leaf).
--
-- Rates above 2^32 bytes/s use the 64-bit attributes (TCA_TBF_RATE64,
-- TCA_HTB_RATE64/CEIL64). Rates are kept by the kernel in bytes/s: `rate_bps`
-- is rounded down to a multiple of 8. Bucket sizes are kept as kernel time
-- ticks of 64 ns: `get` returns the largest byte count that time holds, which
-- exceeds what was applied by less than `rate × 64 ns` (exact when that is
-- below one byte, i.e. up to 125 Mbit/s, or when the burst is a whole number
-- of ticks); `apply(dev, get(dev))` changes nothing.
--
-- Default burst (`burst_bytes` absent): `max(rate_bytes_per_s × 4 ms, 10 × MTU)`
-- — one jiffy at HZ=250 (tc-tbf(8): the bucket must hold at least rate/HZ)
-- so timer slack never idles the link, and ten full frames for low rates.
-- 1 Gbit/s gets 500 000 bytes, enough for ~940 Mbit/s of TCP on a veth.
-- Default tbf queue: `limit_bytes = rate × latency + burst` with
-- `latency_ms = 20`.
-- @module qoslab.shape
local core = require 'qoslab.core'
local check = require 'qoslab.check'
local netns = require 'qoslab.netns'

local M = {}

-- fn(...) with its raise (a bad argument: the binding's check) moved to the
-- caller's line; failures of the world come back as fn returns them
-- (nil, message, code), every value kept. Called as a tail call
-- (`return relay(...)`), so it stands in the public function's frame.
local function relay(fn, ...)
  local r = table.pack(check.call(2, fn, ...))
  return table.unpack(r, 1, r.n)
end

--- Create or atomically replace the rate limit on a link's egress.
-- A replace keeps a netem child under the same shaper kind (tbf: the change
-- is made in place; htb: only class 1:10 is changed). Switching between tbf
-- and htb removes the old root first (not atomic).
-- @tparam string ifname device
-- @tparam table spec `{kind = "tbf"|"htb", rate_bps = 8..8e15 (bits/s),
--   burst_bytes = 1..2^32-1 (>= MTU; default above), latency_ms = >0 (tbf: queue
--   as time at rate; default 20; rate × latency + burst within 4 GiB) |
--   limit_bytes = 1..2^32-1 (tbf: queue in bytes; >= MTU + 14, one full frame:
--   a smaller queue drops every full-sized packet),
--   ceil_bps = rate_bps.. (htb: borrowing ceiling; default rate_bps),
--   cburst_bytes = (htb: bucket at ceil; default rule with the ceil)}`
-- @tparam[opt] table opts `{netns = NS}`
-- @treturn table `{kind=, handle = "1:", netem_parent = "1:1"|"1:10", spec = what
--   get() now returns}`
-- @return or nil, message, code ("ENODEV", "ENOENT", "EPERM", "EINVAL" with the
--   kernel's reason)
-- @raise on unknown keys, wrong types, out-of-range values, latency_ms with
--   limit_bytes, ceil_bps/cburst_bytes with tbf, limit_bytes/latency_ms with
--   htb, burst_bytes below the MTU or too long to send at the rate,
--   limit_bytes below one full frame, a queue above 4 GiB:
--   `"qoslab.shape.apply: spec.<field>: ..."`, positioned at the caller's line
--   (except the rules that need the device's MTU, raised once it is read,
--   before anything is changed)
-- @usage shape.apply('veth0', {kind = 'tbf', rate_bps = 1e9}, {netns = 'a'})
function M.apply(ifname, spec, opts)
  -- The binding's one check, raised at the caller's line.
  check.call(2, core.shape_check, ifname, spec, opts)
  -- Made and recorded with no interruption in between: a SIGINT/SIGTERM
  -- raised between the two would leave a qdisc that no record names.
  local ok, r, msg, code = core.signals_defer(function()
    local done, res, m, c = pcall(core.shape_apply, ifname, spec, opts)
    if not (done and res) then return done, res, m, c end
    local ns = opts and opts.netns
    -- Applied anew, the root may be another qdisc: record what it is now.
    local known = netns._update_matching(function(e)
      return e.kind == 'qdisc' and e.ifname == ifname and e.netns == ns and (e.parent or 'root') == 'root'
    end)
    if known == 0 then
      netns._track { kind = 'qdisc', ifname = ifname, netns = ns, parent = 'root' }
    end
    return true, res
  end)
  -- (the MTU rule is the only one left for apply to raise)
  if not ok then error(r, 2) end
  if not r then return nil, msg, code end
  return r
end

--- Read the rate limit back, in the shape `apply` takes.
-- @tparam string ifname device name (in `opts.netns`, else in this process's
--   namespace)
-- @tparam[opt] table opts `{netns = NS}`
-- @treturn table|nil `{kind = "tbf", rate_bps=, burst_bytes=, limit_bytes=}` or
--   `{kind = "htb", rate_bps=, ceil_bps=, burst_bytes=, cburst_bytes=}`; nil alone
--   when the root qdisc is not a shaper made by `apply`
-- @return or nil, message, code ("ENODEV": no such device; "ENOENT": no such
--   namespace; "EPERM": entering `opts.netns` needs root)
-- @raise on an ifname that is no device name (empty, over 15 bytes, a "/"...),
--   opts not a table, a key other than netns or a bad namespace name
--   (`"qoslab.shape.get: opts.netns: ..."`)
-- @usage local s = shape.get('veth0', {netns = 'a'})
function M.get(ifname, opts) return relay(core.shape_get, ifname, opts) end

--- Remove the root qdisc of a link (the shaper and any netem under it).
-- Nothing attached is fine.
-- @tparam string ifname device name (in `opts.netns`, else in this process's
--   namespace)
-- @tparam[opt] table opts `{netns = NS}`
-- @return true, or nil, message, code ("ENODEV": no such device; "ENOENT": no
--   such namespace; "EPERM": needs root)
-- @raise on an ifname that is no device name (empty, over 15 bytes, a "/"...),
--   opts not a table, a key other than netns or a bad namespace name
--   (`"qoslab.shape.clear: opts.netns: ..."`)
-- @usage shape.clear('veth0', {netns = 'a'})
function M.clear(ifname, opts)
  local ok, msg, code = check.call(2, core.shape_clear, ifname, opts)
  if not ok then return nil, msg, code end
  local ns = opts and opts.netns
  netns._untrack(function(e) return e.kind == 'qdisc' and e.ifname == ifname and e.netns == ns end)
  return true
end

--- Put the shaper's default child back under it, atomically replacing what
-- sits there (how an impairment under a shaper is removed): tbf gets a bfifo
-- of the tbf's `limit_bytes` at 1:1, htb a pfifo of the device's txqueuelen
-- at 1:10. (Deleting the child instead would leave tbf with a qdisc that
-- drops every packet.)
-- @tparam string ifname device name (in `opts.netns`, else in this process's
--   namespace)
-- @tparam[opt] table opts `{netns = NS}`
-- @return true, or nil, message, code ("ENOENT" when there is no shaper made
--   by `apply` or no such namespace, "ENODEV": no such device, "EPERM": needs
--   root)
-- @raise on an ifname that is no device name (empty, over 15 bytes, a "/"...),
--   opts not a table, a key other than netns or a bad namespace name
--   (`"qoslab.shape.reset_child: opts.netns: ..."`)
-- @usage shape.reset_child('veth0', {netns = 'a'})
function M.reset_child(ifname, opts) return relay(core.shape_reset_child, ifname, opts) end

--- Counters of every qdisc on a link, root first.
-- @tparam string ifname device name (in `opts.netns`, else in this process's
--   namespace)
-- @tparam[opt] table opts `{netns = NS}`
-- @treturn {table,...} each `{kind=, handle = "1:", parent = "root"|"1:1"|...,
--   bytes=, packets=, drops=, overlimits=, requeues=, backlog_bytes=, qlen_packets=}`
--   (integers)
-- @return or nil, message, code ("ENODEV": no such device; "ENOENT": no such
--   namespace; "EPERM": entering `opts.netns` needs root)
-- @raise on an ifname that is no device name (empty, over 15 bytes, a "/"...),
--   opts not a table, a key other than netns or a bad namespace name
--   (`"qoslab.shape.stats: opts.netns: ..."`)
-- @usage for _, q in ipairs(shape.stats('veth0', {netns = 'a'})) do print(q.kind, q.drops) end
function M.stats(ifname, opts) return relay(core.qdisc_stats, ifname, opts) end

return M
