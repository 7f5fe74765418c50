--- Kernel netem (sch_netem) over rtnetlink: delay, jitter, loss, duplication,
-- reordering, corruption, rate, slots and ECN on a device's egress, or on its
-- ingress through an ifb device.
--
-- No `tc` process is run: messages are built with libnl-3 (see
-- csrc/core/netem.c). Semantics and conversions follow tc-netem(8) and
-- iproute2's tc/q_netem.c: a percentage p is sent as rint(p/100 × (2^32−1));
-- bits/s become bytes/s (truncated, as tc does) with TCA_NETEM_RATE64 at or
-- above 2^32 B/s; times are sent as 64-bit nanoseconds.
--
-- **The spec** (every key optional; units in the names):
--
-- * `delay_ms` (0..1e9), `jitter_ms` (0..2147.483647, the kernel's cap),
--   `delay_corr_pct` (0..100, needs jitter). **Jitter reorders packets**:
--   netem draws each packet's delay on its own and sends packets in the
--   order of their send times, so packets closer together than the jitter
--   overtake each other (measured: 71 % of datagrams 1 ms apart out of order
--   with 50 ± 10 ms); `keep_order` keeps them in order;
-- * `keep_order` (boolean, default false; qoslab's, not the kernel's): keep
--   packets in their order under jitter. netem orders packets whenever it
--   has a rate, so `apply` sets `rate_bps` to the device's link speed
--   (ethtool; veth reports 10 Gbit/s), or 100 Gbit/s when it reports none;
--   a `rate_bps` the spec gives is kept instead (any rate keeps order). The
--   kernel then schedules each packet at max(its own delay, the send time of
--   the packet queued before it − now) + its transmit time at that rate, so
--   a packet never leaves before the one ahead of it: the delays are shifted
--   up and their low tail compressed (for packets Δ apart the delay's CDF
--   becomes F(x) = Π_k G(x + kΔ), G the configured one; at 1 ms spacing 50 ±
--   10 ms uniform has mean 55.2 ms instead of 50, 2 ms spacing 53.7, and
--   seldom comes near 40 ms); the highest delay is unchanged while the rate is
--   not the bottleneck. Not with `reorder_pct`. The applied (and read back)
--   spec has `rate_bps` instead of `keep_order`; to turn it off, set
--   `rate_bps = false` in `update` as well;
-- * `distribution`: `"uniform"` (default, no table), `"normal"`, `"pareto"`,
--   `"paretonormal"`, `"experimental"` (iproute2's `.dist` files, found in
--   /usr/lib/x86_64-linux-gnu/tc, /usr/lib/tc, /usr/share/tc or $TC_LIB_DIR)
--   or a custom table: a list of 1..16384 integers in [-32768, 32767] in
--   units of jitter/8192 (the kernel's NETEM_DIST_SCALE); needs jitter;
-- * `loss_pct`, `loss_corr_pct` (random loss; a correlation gives much
--   less loss than asked, see **Advice**); or `loss_state` =
--   `{p13_pct =, p31_pct =, p32_pct =, p23_pct =, p14_pct =}` (4-state Markov
--   model; only p13_pct is required, the rest default as tc's: p31 = 100 −
--   p13, p32 = 0, p23 = 100, p14 = 0); or `loss_gemodel` = `{p_pct =, r_pct =,
--   one_minus_h_pct =, one_minus_k_pct =}` (Gilbert-Elliott as tc-netem(8)'s
--   `loss gemodel p r 1-h 1-k`: p = good→bad transition, r = bad→good,
--   one_minus_h_pct = loss probability in the bad state (1−h, default 100),
--   one_minus_k_pct = loss probability in the good state (1−k, default 0);
--   the kernel stores h itself, so 1−h is complemented on the wire);
-- * `duplicate_pct`, `duplicate_corr_pct`; `corrupt_pct`, `corrupt_corr_pct`;
-- * `reorder_pct`, `reorder_corr_pct`, `reorder_gap_packets` (default 1 when
--   reordering: packets go out without the delay with that probability;
--   with gap N every Nth packet is eligible); reordering needs `delay_ms`;
-- * `rate_bps` (bits/s: 0 = no limit, else at least 8; sent as whole bytes/s,
--   rounded down: 15 becomes 8), `rate_packet_overhead_bytes`
--   (may be negative), `rate_cell_bytes`, `rate_cell_overhead_bytes`;
-- * `slot` = `{min_delay_ms =, max_delay_ms = (default min), packets =, bytes =}`
--   or `{distribution =, delay_ms =, jitter_ms =, packets =, bytes =}`:
--   packets leave in slots (packets/bytes = most per slot, default unlimited);
-- * `ecn` (boolean: mark CE instead of dropping; needs a loss);
-- * `limit_packets` (1..2^32−1, default 1000 as tc, or `"auto"`, see below);
-- * `seed` (integer, the u64 bit pattern; Linux ≥ 6.6 only, older kernels
--   ignore it and `apply` warns). Newer kernels report a seed they chose
--   themselves; `get` shows it only for a netem this process did not make
--   or made with a seed.
--
-- Percent values read back as the shortest decimal that encodes to the same
-- 32-bit fraction, so 0.5 reads back as 0.5, not 0.49999999906.
--
-- **The limit rule**: netem holds every packet for the whole
-- delay, and drops at the tail once `limit_packets` are queued. Needed:
-- `ceil(rate_Bps × (delay_ms + jitter_ms)/1000 / 1514 × 1.5)` packets, where
-- rate_Bps is `rate_bps/8`, else the device's link speed (ethtool, as
-- /sys/class/net/DEV/speed; veth reports 10 Gbit/s), else 1 Gbit/s; 1514 is
-- a full Ethernet frame and 1.5 the margin chaosblade uses. A lower limit
-- gives a warning; `"auto"` takes `max(1000, needed)`.
--
-- **Advice**: `check` and `apply` (and so `qoslab netem set`, testbeds and
-- plans) report what a valid spec does that its fields do not say, as a
-- list of `{code =, field =, message =, ...}`; `apply` also prints each
-- message as a warning (unless `opts.quiet`) and applies the spec as given.
-- Match `code`; the message is prose for people. Three codes so far:
--
-- * `JITTER_REORDERS` (`field = "spec.jitter_ms"`): jitter without
--   `keep_order`, `rate_bps` or `reorder_pct`: each packet's delay is drawn
--   on its own, so packets sent closer than about 2 × jitter apart overtake
--   each other (manual/errors.md, netem's traps); `keep_order = true` keeps
--   the order.
--
-- * `JITTER_CLIPS` (`field = "spec.jitter_ms"`): jitter above the delay: a
--   packet whose drawn delay is below 0 is sent at once, so the delays are
--   clipped at 0 and their mean is above `delay_ms` (0 ± 20 ms uniform:
--   about 5 ms).
--
-- * `CORRELATED_LOSS` (`field = "spec.loss_corr_pct"`): sch_netem's
--   correlated generator returns a weighted mean of a fresh random number
--   and its own last answer; that narrows the numbers' spread around 1/2
--   instead of making losses come in bursts, so `loss_pct = 5,
--   loss_corr_pct = 25` loses about 0.19 % (measured in a guest: the same;
--   above 50 % it loses more than asked). `kernel_loss_pct` is the loss the
--   kernel will give (computed from the generator's stationary
--   distribution); `changes` (for `update`, absent at a 100 % correlation)
--   is the simple Gilbert model with the asked mean loss p and the burst a
--   correlation ρ between successive losses means, P(loss after a loss) =
--   p + ρ(1 − p): `loss_gemodel = {p_pct = 100 p(1 − ρ), r_pct = 100 (1 −
--   p)(1 − ρ), one_minus_h_pct = 100, one_minus_k_pct = 0}`, whose mean
--   loss is p_GE/(p_GE + r) = p and mean burst 1/r packets
--   (`mean_burst_packets`). For a mean loss p and mean burst b of your own:
--   r = 1/b, p_GE = p/(b(1 − p)) (b ≥ 1, p_GE ≤ 1). The same chain as a
--   4-state model: `loss_state = {p13_pct = p_GE, p31_pct = r, p32_pct = 0,
--   p23_pct = 100, p14_pct = 0}`. The other `_corr_pct` fields use the same
--   generator (a delay correlation narrows the jitter).
--
-- **The kernel keeps no distribution table readable**: `get` reports the
-- `distribution` this process last applied to that qdisc (none when another
-- process or tool made it). Because a kernel netem cannot drop a table it
-- once had, replacing a netem with jittered uniform delay sends a generated
-- uniform table. The same holds for the slot table, and there a table-less
-- replacement cannot be emulated: after a `slot.distribution`, `clear` the
-- netem before applying a min/max slot.
--
-- **opts** (every function): `netns` (name under /run/netns; `''` is an error), `parent`
-- (`"root"` default, or a class `"MAJ:MIN"` such as `"1:1"` under a tbf/htb),
-- `handle` (`"MAJ:"`, apply only), `direction` (`"egress"` default or
-- `"ingress"`: traffic arriving on the device is redirected to an ifb device
-- named `qlifb<ifindex>` with the netem on it), `ingress_src` (ingress only:
-- `"ADDR"` or `"ADDR/PREFIX"`, impair only packets FROM that source), `quiet`
-- (apply/scope: don't print warnings). Egress and ingress impairment can
-- coexist on one device.
--
-- Failures return `nil, message, CODE`: `ENODEV` (no such device),
-- `ENOENT` (no such namespace, or no such parent class), `EPERM` (needs
-- CAP_NET_ADMIN), `ENOTSUP` (kernel without sch_netem: the message says
-- "modprobe sch_netem" or `qoslab run FILE --guest`), the message written
-- once by the C core. Bad arguments raise
-- `"qoslab.netem.apply: spec.loss_pct: expected ..., got ..."`, positioned
-- at the caller's line: every rule (keys, types, ranges, the cross-field
-- rules of the spec and of opts) is checked once, by the binding's
-- `core.netem_check`, before anything touches the kernel.
--
-- Everything created is recorded with `qoslab.state` so `qoslab cleanup`
-- can remove it after a crash.
-- @module qoslab.netem
local core = require 'qoslab.core'
local check = require 'qoslab.check'
local netns = require 'qoslab.netns'

local M = {}

-- What this process applied, per target: distributions (the kernel never
-- dumps them), ingress source, and qoslab.state ids (through qoslab.netns,
-- so deleting the namespace or the link forgets them too).
local records = {}

-- The record of a target, dropped once its qdisc went with a deleted
-- namespace or link (what it remembers belonged to that qdisc).
local function record_of(key)
  local rec = records[key]
  if rec and ((rec.qdisc_id and not netns._tracked(rec.qdisc_id))
      or (rec.link_id and not netns._tracked(rec.link_id))) then
    if rec.qdisc_id then netns._forget(rec.qdisc_id) end  -- the other one
    if rec.link_id then netns._forget(rec.link_id) end
    records[key] = nil
    return nil
  end
  return rec
end

-- core.netem_check (every rule of the arguments, written once in C), its
-- error raised at the caller of the public function that called this.
-- Returns the canonical spec (or false), opts with their defaults and the
-- spec's advice list.
local function checked(ctx, mode, ifname, spec, opts)
  local canon, o, advice = check.call(3, core.netem_check, ctx, mode, ifname, spec, opts)
  return canon, o, advice  -- not a tail call: the level counts this frame
end

-- core.netem_normalize, raising at `level` (1 = the function calling this).
local function normalize(spec, ctx, level)
  local canon = check.call(level + 1, core.netem_normalize, spec, ctx)
  return canon
end

--- Check a spec as `apply` would, without touching the kernel: returns the
-- canonical spec (`limit_packets = "auto"` and `keep_order` are kept as
-- given) and the advice `apply` will warn with, so a plan can see it before
-- it runs.
-- @tparam table spec see the module doc (units in the key names)
-- @tparam[opt] string ctx prefix of error messages (default "qoslab.netem.check")
-- @treturn table canonical spec: keys at their default left out,
--   `limit_packets` always present, percentages as the shortest decimal of
--   their 32-bit fraction
-- @treturn table advice: a list (empty when there is nothing to say) of
--   `{code =, field =, message =, ...}` as the module doc's **Advice**
--   describes; match `code`, never `message`
-- @raise `"<ctx>: spec.<field>: expected ..., got ..."` (or the cross-field
--   rule broken) at the caller's line, the same message `apply` raises
-- @usage local canon, advice = netem.check{delay_ms = 50, loss_pct = 1}
function M.check(spec, ctx)
  local canon, _, advice = checked(ctx or 'qoslab.netem.check', 'spec', nil, spec)
  return canon, advice
end

local function rec_key(ifname, o)
  return table.concat({ o.netns or '', ifname, o.direction, o.parent }, '|')
end

-- The device and parent the netem qdisc itself sits on.
local function target(ifname, o)
  if o.direction == 'egress' then return ifname, o.parent end
  local ifb, msg, code = core.ifb_name(ifname, o.netns)
  if not ifb then return nil, msg, code end
  return ifb, 'root'
end

local function deep_equal(a, b, skip)
  if type(a) ~= 'table' or type(b) ~= 'table' then return a == b end
  for k, v in pairs(a) do
    if not (skip and skip[k]) and not deep_equal(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if not (skip and skip[k]) and a[k] == nil then return false end
  end
  return true
end

local NO_DIST = { distribution = true }

-- Qdiscs a device has when nobody configured one; replacing them is silent.
local DEFAULT_QDISCS = { noqueue = true, pfifo_fast = true, fq_codel = true, mq = true, bfifo = true,
                         fq = true, pfifo = true, cake = true }

--- Packets netem's queue needs for a spec on a device (the limit rule above).
-- @tparam string ifname device (its link speed is used when spec has no rate)
-- @tparam table spec a spec (`delay_ms`, `jitter_ms`, `rate_bps` are used)
-- Under a shaper (`opts.parent` not "root") the packets arrive at most at
-- the shaper's rate (htb: its ceil), so that rate is used before the link's.
-- @tparam[opt] table opts `{netns =, parent =}`
-- @treturn integer packets needed (0 without delay; at most 4294967295,
--   the largest limit the kernel takes)
-- @treturn number the rate in bits/s the rule used
-- @treturn string where that rate came from: "spec.rate_bps", "shaper rate",
--   "link speed", "default 1 Gbit/s"
-- (never fails: a shaper or link speed it cannot read is skipped)
-- @raise on a bad ifname, spec or opts, as `check` and `apply` do, naming
--   qoslab.netem.needed_limit
-- @usage local need = netem.needed_limit('veth0', {delay_ms = 100})
local LIMIT_MAX = 4294967295   -- netem's limit is a 32-bit packet count

function M.needed_limit(ifname, spec, opts)
  local _, o = checked('qoslab.netem.needed_limit', 'apply', ifname, spec, opts)
  local ns, parent = o.netns, o.parent
  local delay_s = ((tonumber(spec.delay_ms) or 0) + (tonumber(spec.jitter_ms) or 0)) / 1000
  local rate_bps, source = tonumber(spec.rate_bps), 'spec.rate_bps'
  if (not rate_bps or rate_bps <= 0) and parent ~= 'root' then
    local sh = core.shape_get(ifname, { netns = ns })
    if sh then rate_bps, source = sh.ceil_bps or sh.rate_bps, 'shaper rate' end
  end
  if not rate_bps or rate_bps <= 0 then
    local mbps = core.link_speed_mbps(ifname, ns)
    if mbps then rate_bps, source = mbps * 1e6, 'link speed'
    else rate_bps, source = 1e9, 'default 1 Gbit/s' end
  end
  local need = math.min(math.ceil(rate_bps / 8 * delay_s / 1514 * 1.5), LIMIT_MAX)
  return math.tointeger(need) or 0, rate_bps, source
end

local printed = {}
local function emit(warnings, quiet)
  if quiet then return end
  for _, w in ipairs(warnings) do
    if not printed[w] then
      printed[w] = true
      io.stderr:write('qoslab.netem: warning: ', w, '\n')
    end
  end
end

-- The rate keep_order uses when the device reports no link speed: far
-- above any traffic a device without one carries, so it is never the
-- bottleneck; a 1514-byte frame takes 121 ns at it (any rate keeps order).
local ORDER_DEFAULT_BPS = 100000000000

-- The rate_bps that keeps order on ifname, and where it came from.
local function order_rate(ifname, o)
  local mbps = core.link_speed_mbps(ifname, o.netns)
  if mbps then return mbps * 1000000, 'link speed' end
  return ORDER_DEFAULT_BPS, 'default 100 Gbit/s'
end

local function fmt_rate(bps)
  if bps >= 1e9 then return string.format('%g Gbit/s', bps / 1e9) end
  return string.format('%g Mbit/s', bps / 1e6)
end

--- Create or atomically replace a netem (RTM_NEWQDISC with
-- NLM_F_CREATE|NLM_F_REPLACE; never delete-then-add). Like `tc qdisc
-- replace`, any qdisc at that place is replaced (with a warning unless it was
-- a default one such as noqueue, pfifo_fast or fq_codel). The spec is the whole
-- state: keys left out are off (limit 1000). Reads the result back and warns
-- about any field the kernel did not take (e.g. `seed` before Linux 6.6).
-- @tparam string ifname device name
-- @tparam table spec see the module doc
-- @tparam[opt] table opts see the module doc
-- @treturn table `{warnings = {string...}, advice = {...}, spec = canonical
--   spec as applied}`: the advice as `check` returns it (each message is
--   also among the warnings), the spec with the limit and keep_order
--   resolved and defaults dropped (equal to what get returns); with
--   keep_order also `keep_order = {rate_bps =, source =
--   "spec.rate_bps"|"link speed"|"default 100 Gbit/s"}`
-- @return or nil, message, CODE (ENODEV, ENOENT, EPERM, ENOTSUP, ...)
-- @raise on an unknown key, wrong type, value out of range or contradictory
--   combination (e.g. reorder without delay, ECN without loss), naming the
--   field; or, at the caller's line, while a schedule (`schedule`) still
--   runs on that egress netem (`"qoslab.netem.apply: the netem of veth0
--   (parent root) still runs a schedule (...): stop it first (s:stop()), or
--   wait until it ends (s:wait())"`: its next step would replace the change)
-- @usage local r = assert(netem.apply('veth0', {delay_ms = 50, loss_pct = 1}))
function M.apply(ifname, spec, opts)
  local ctx = 'qoslab.netem.apply'
  local canon, o, advice = checked(ctx, 'apply', ifname, spec, opts)
  require('qoslab.schedule')._refuse_netem(ctx, ifname, o, 2)
  local auto = canon.limit_packets == 'auto'
  local warnings = {}
  for _, a in ipairs(advice) do warnings[#warnings + 1] = a.message end
  local need, rate_bps, source = M.needed_limit(ifname, canon, o)
  if need >= LIMIT_MAX then
    warnings[#warnings + 1] = string.format(
      '%s (%s) x %g ms delay needs more than %d packets, the largest limit the kernel takes: ' ..
      'netem will tail-drop', fmt_rate(rate_bps), source,
      (canon.delay_ms or 0) + (canon.jitter_ms or 0), LIMIT_MAX)
  end
  if auto then
    canon.limit_packets = math.max(1000, need)
  elseif canon.limit_packets < need then
    warnings[#warnings + 1] = string.format(
      'spec.limit_packets = %d is below the %d packets that %s (%s) x %g ms delay needs ' ..
      '(1514-byte frames, x1.5 margin): netem will tail-drop; set limit_packets = %d or "auto"',
      canon.limit_packets, need, fmt_rate(rate_bps), source,
      (canon.delay_ms or 0) + (canon.jitter_ms or 0), need)
  end
  local order
  if canon.keep_order then
    -- netem keeps order whenever it has a rate; the kernel has no field
    -- for keep_order itself. After the limit rule, which takes a shaper's
    -- rate before the link's as the rate packets arrive at.
    if canon.rate_bps then order = { rate_bps = canon.rate_bps, source = 'spec.rate_bps' }
    else
      local bps, from = order_rate(ifname, o)
      canon.rate_bps, order = bps, { rate_bps = bps, source = from }
    end
    canon.keep_order = nil
  end
  local wire = {}
  for k, v in pairs(canon) do wire[k] = v end

  local key = rec_key(ifname, o)
  local rec = record_of(key) or {}
  -- Made and recorded with no interruption in between: a SIGINT/SIGTERM
  -- raised between the two would leave a qdisc or ifb that no record names.
  local applied, other_kind, got, dev, parent = core.signals_defer(function()
    local dev, parent, ifb_created = ifname, o.parent, false
    if o.direction == 'ingress' then
      local ifb, msg, code = core.ifb_name(ifname, o.netns)
      if not ifb then return nil, msg, code end
      local exists, m2, c2 = core.link_exists(ifb, o.netns)
      if exists == nil then return nil, m2, c2 end
      if not exists or rec.ifb ~= ifb or rec.src ~= (o.ingress_src or '') then
        local created, m3, c3 = core.ifb_attach(ifname, ifb, o.ingress_src, o.netns)
        if created == nil then return nil, m3, c3 end
        ifb_created = created
        if created then
          rec.link_id = netns._track { kind = 'link', ifname = ifb, netns = o.netns }
          rec.qdisc_id = netns._track { kind = 'qdisc', ifname = ifname, netns = o.netns, parent = 'ingress' }
        end
        rec.ifb, rec.src = ifb, o.ingress_src or ''
      end
      dev, parent = ifb, 'root'
    end
    -- One call reads what was there, replaces it and reads the result back.
    local ok, before, other_kind, got = core.netem_apply(dev, wire, o.netns, parent, o.handle, ctx)
    if not ok then
      local msg, code = before, other_kind
      if ifb_created then
        core.ifb_detach(ifname, dev, o.netns)
        netns._forget(rec.link_id); netns._forget(rec.qdisc_id)
        rec.link_id, rec.qdisc_id, rec.ifb = nil, nil, nil
      end
      return nil, msg, code
    end
    if not before and o.direction == 'egress' and not rec.qdisc_id then
      rec.qdisc_id = netns._track { kind = 'qdisc', ifname = ifname, netns = o.netns, parent = o.parent }
    elseif rec.qdisc_id and o.direction == 'egress' then
      netns._update(rec.qdisc_id)  -- replaced in place: its handle may be new
    end
    rec.distribution = canon.distribution
    rec.slot_distribution = canon.slot and canon.slot.distribution
    rec.seed_given = canon.seed ~= nil
    records[key] = rec
    return true, other_kind, got, dev, parent
  end)
  if not applied then return nil, other_kind, got end
  if other_kind and not DEFAULT_QDISCS[other_kind] then
    warnings[#warnings + 1] = string.format(
      'replaced the %s qdisc at %s of %s (use opts.parent to put netem under one of its classes)',
      other_kind, parent, dev)
  end

  if got then
    -- The kernel dumps a seed whether or not one was given (Linux >= 6.6).
    if canon.seed == nil then got.seed = nil end
    for k, v in pairs(canon) do
      if k ~= 'distribution' and not deep_equal(v, got[k], k == 'slot' and NO_DIST or nil) then
        warnings[#warnings + 1] = string.format(
          'the kernel did not take spec.%s (read back %s)%s', k,
          type(got[k]) == 'table' and 'a different table' or tostring(got[k]),
          k == 'seed' and ': this kernel has no TCA_NETEM_PRNG_SEED (Linux >= 6.6)' or '')
      end
    end
    for k, v in pairs(got) do
      if canon[k] == nil then
        warnings[#warnings + 1] = string.format('the kernel reports spec.%s = %s, which was not asked for',
          k, type(v) == 'table' and 'a table' or tostring(v))
      end
    end
  end
  emit(warnings, o.quiet)
  return { warnings = warnings, advice = advice, spec = canon, keep_order = order }
end

--- Change some settings of the current netem and keep the rest (get, merge,
-- apply). A key set to `false` is removed (turned off). Without a netem
-- there, the changes alone are applied: `apply{limit_packets =
-- 50000}` then `update{delay_ms = 20}` keeps the limit at 50000.
-- @tparam string ifname device name
-- @tparam table changes spec keys to set (nested tables replace as a whole)
-- @tparam[opt] table opts as for `apply`
-- @return as `apply`: the result, or nil, message, CODE (those of `get`,
--   then of `apply`)
-- @raise as `apply` on a bad change or opts (a key set to `false` is
--   allowed) or while a schedule runs on that netem, naming qoslab.netem.update
-- @usage netem.update('veth0', {loss_pct = 2, jitter_ms = false})
function M.update(ifname, changes, opts)
  local _, o = checked('qoslab.netem.update', 'update', ifname, changes, opts)  -- errors name update, not get or apply
  require('qoslab.schedule')._refuse_netem('qoslab.netem.update', ifname, o, 2)
  local gopts = {}
  for k, v in pairs(opts or {}) do gopts[k] = v end
  gopts.handle = nil
  local cur, msg, code = M.get(ifname, gopts)
  if cur == nil and msg ~= nil then return nil, msg, code end
  local spec = cur or {}
  for k, v in pairs(changes) do
    if v == false and k ~= 'ecn' then spec[k] = nil else spec[k] = v end
  end
  -- the rules between fields, on the merged spec, raised at the caller's line
  checked('qoslab.netem.update', 'apply', ifname, spec, opts)
  return M.apply(ifname, spec, opts)
end

--- Read the netem back, in exactly the shape and units `apply` takes, so
-- `apply(dev, get(dev))` changes nothing.
-- @tparam string ifname device name
-- @tparam[opt] table opts `netns`, `parent`, `direction`
-- @treturn table|nil the spec, or nil when there is no netem there
-- @return or nil, message, CODE on failure (so: check the 2nd value to tell
--   "no netem" from a failure): ENODEV (no such device), ENOENT (no such
--   namespace), EPERM (entering `opts.netns` needs root), EPROTO (a netem
--   the kernel describes in a way this library cannot read)
-- @raise on bad arguments
-- @usage local spec = netem.get('veth0', {netns = 'client'})
function M.get(ifname, opts)
  local _, o = checked('qoslab.netem.get', 'target', ifname, nil, opts)
  local dev, parent, code = target(ifname, o)
  if not dev then return nil, parent, code end
  if o.direction == 'ingress' then
    local exists, m2, c2 = core.link_exists(dev, o.netns)
    if exists == nil then return nil, m2, c2 end
    if not exists then return nil end
  end
  local spec, msg, c3 = core.netem_get(dev, o.netns, parent)
  if spec == nil then return nil, msg, c3 end
  if spec == false then return nil end
  local rec = record_of(rec_key(ifname, o))
  if rec then
    -- Linux >= 6.6 dumps the random seed it chose; report it only when it
    -- was asked for, so get() equals what apply() returned.
    if not rec.seed_given then spec.seed = nil end
    if rec.distribution ~= nil and spec.jitter_ms then spec.distribution = rec.distribution end
    if rec.slot_distribution ~= nil and spec.slot and (spec.slot.delay_ms or spec.slot.jitter_ms) then
      spec.slot.distribution = rec.slot_distribution
    end
  end
  return spec
end

--- Counters of the netem qdisc (TCA_STATS2, all 64-bit integers).
-- @tparam string ifname device name
-- @tparam[opt] table opts `netns`, `parent`, `direction`
-- @treturn table|nil `{packets, bytes, drops, overlimits, requeues,
--   backlog_bytes, backlog_packets}` (drops counts queue-limit drops and
--   configured loss alike), or nil when there is no netem
-- @return or nil, message, CODE: as `get` (ENODEV, ENOENT, EPERM, EPROTO)
-- @raise on bad arguments, as `get`
-- @usage print(netem.stats('veth0').drops)
function M.stats(ifname, opts)
  local _, o = checked('qoslab.netem.stats', 'target', ifname, nil, opts)
  local dev, parent, code = target(ifname, o)
  if not dev then return nil, parent, code end
  if o.direction == 'ingress' then
    local exists, m2, c2 = core.link_exists(dev, o.netns)
    if exists == nil then return nil, m2, c2 end
    if not exists then return nil end
  end
  local spec, st, c3 = core.netem_get(dev, o.netns, parent)
  if spec == nil then return nil, st, c3 end
  if spec == false then return nil end
  return st
end

--- Remove the netem (for ingress: the redirect filter, the ingress qdisc and
-- the ifb device). Idempotent.
-- @tparam string ifname device name
-- @tparam[opt] table opts `netns`, `parent`, `direction`
-- @treturn boolean true if something was removed, false if nothing was there
-- @return or nil, message, CODE: ENODEV (no such device), ENOENT (no such
--   namespace), EPERM (needs root), EPROTO (as `get`)
-- @raise on bad arguments, as `get`
-- @usage netem.clear('veth0')
function M.clear(ifname, opts)
  local _, o = checked('qoslab.netem.clear', 'target', ifname, nil, opts)
  local key = rec_key(ifname, o)
  local rec = record_of(key)
  local removed, msg, code
  if o.direction == 'ingress' then
    local ifb, m1, c1 = core.ifb_name(ifname, o.netns)
    if not ifb then return nil, m1, c1 end
    removed, msg, code = core.ifb_detach(ifname, ifb, o.netns)
  else
    removed, msg, code = core.netem_clear(ifname, o.netns, o.parent)
  end
  if removed == nil then return nil, msg, code end
  if rec then
    if rec.qdisc_id then netns._forget(rec.qdisc_id) end
    if rec.link_id then netns._forget(rec.link_id) end
    records[key] = nil
  end
  return removed
end

local Scope = {}
Scope.__index = Scope
Scope.__name = 'qoslab.netem.Scope'

--- Put back what was there before the scope (idempotent).
-- @treturn boolean|nil true, or nil, message, CODE (those of `apply`, or of
--   `clear` when there was no netem before)
function Scope:restore()
  if self.done then return true end
  self.done = true
  local ok, msg, code
  if self.previous then
    local r
    r, msg, code = M.apply(self.ifname, self.previous, self.opts)
    ok = r ~= nil
  else
    ok, msg, code = M.clear(self.ifname, self.opts)
    ok = ok ~= nil
  end
  if not ok then return nil, msg, code end
  return true
end

function Scope.__close(self, err)
  local ok, msg = self:restore()
  if not ok then
    if err == nil then error('qoslab.netem.scope: restoring failed: ' .. tostring(msg), 2) end
    io.stderr:write('qoslab.netem.scope: restoring failed: ', tostring(msg), '\n')
  end
end
-- A guard dropped without closing still restores when collected.
Scope.__gc = function(self) if not self.done then pcall(self.restore, self) end end

function Scope.__tostring(self)
  return string.format('qoslab.netem.Scope (%s%s, %s)', self.ifname,
    self.opts.netns and (' in ' .. self.opts.netns) or '', self.done and 'restored' or 'active')
end

--- Apply a spec until the returned guard is closed, then restore the previous
-- netem spec (or remove the netem if there was none) — also when the block
-- exits with an error.
-- @tparam string ifname device name
-- @tparam table spec as for `apply`
-- @tparam[opt] table opts as for `apply`
-- @treturn table to-be-closed guard with `:restore()`, `.result` (apply's result)
--   and `.previous` (the spec that will be restored, or nil)
-- @return or nil, message, CODE: those of `get` (reading what to restore),
--   then of `apply`
-- @raise as `apply` on a bad spec or opts, naming qoslab.netem.scope; and
--   when closing the guard cannot restore (`"qoslab.netem.scope: restoring
--   failed: ..."`; leaving the block with an error of its own prints this to
--   stderr instead, and the block's error goes on)
-- @usage do local g <close> = assert(netem.scope('veth0', {delay_ms = 100})) run() end
function M.scope(ifname, spec, opts)
  local _, o = checked('qoslab.netem.scope', 'apply', ifname, spec, opts)
  local gopts = {}
  for k, v in pairs(opts or {}) do gopts[k] = v end
  gopts.handle = nil
  gopts.quiet = true
  local prev, msg, code = M.get(ifname, gopts)
  if prev == nil and msg ~= nil then return nil, msg, code end
  local res, m2, c2 = M.apply(ifname, spec, opts)
  if not res then return nil, m2, c2 end
  return setmetatable({ ifname = ifname, opts = gopts, previous = prev, result = res,
                        direction = o.direction }, Scope)
end

-- ------------------------------------------------------ tc-netem(8) syntax

local TIME_UNITS = {
  s = 1e9, sec = 1e9, secs = 1e9, ms = 1e6, msec = 1e6, msecs = 1e6,
  us = 1e3, usec = 1e3, usecs = 1e3, ns = 1, nsec = 1, nsecs = 1,
}
local RATE_UNITS = {
  bit = 1, kbit = 1e3, mbit = 1e6, gbit = 1e9, tbit = 1e12,
  kibit = 1024, mibit = 1024 ^ 2, gibit = 1024 ^ 3, tibit = 1024 ^ 4,
  bps = 8, kbps = 8e3, mbps = 8e6, gbps = 8e9, tbps = 8e12,
  kibps = 8 * 1024, mibps = 8 * 1024 ^ 2, gibps = 8 * 1024 ^ 3, tibps = 8 * 1024 ^ 4,
}

local function is_num(tok) return tok ~= nil and tok:match('^%d') ~= nil or (tok and tok:match('^%.%d')) ~= nil end
local function is_snum(tok) return tok ~= nil and (is_num(tok) or tok:match('^%-%d') ~= nil) end

-- The tokens of a tc-netem(8) text into a spec (not yet normalized) and
-- whether it said `limit auto`; a syntax error is thrown as {parse_error =}.
local function parse_tokens(text, ctx)
  local toks = {}
  for t in text:gmatch('%S+') do toks[#toks + 1] = t end
  local i = 1
  if toks[1] == 'netem' then i = 2 end
  local spec, auto_limit = {}, false
  -- A syntax error is thrown as a marked table and raised again by the pcall
  -- below at parse's caller's line (fail is reached at several depths).
  local function fail(what, expected, got)
    error({ parse_error = string.format('%s: %s: expected %s, got %s', ctx, what, expected,
      got == nil and 'end of text' or string.format('%q', got)) })
  end
  local function int(tok, what, min)
    local v = math.tointeger(tonumber(tok))
    if not v or v < (min or 0) then fail(what, 'an integer >= ' .. (min or 0), tok) end
    return v
  end
  local function pct(tok, what)
    local n = tok and tok:match('^(.-)%%?$')
    local v = tonumber(n)
    if not v or v < 0 or v > 100 then fail(what, 'a percentage 0..100 (e.g. 25% or 25)', tok) end
    return v
  end
  local function time_ms(tok, what)
    if (tok or ''):match('^%-[%d%.]') then fail(what, 'a time >= 0', tok) end
    local n, u = (tok or ''):match('^([%d%.]+[eE]?[%-+]?%d*)(%a+)$')
    local mul = u and TIME_UNITS[u:lower()]
    if not n or not mul or not tonumber(n) then
      fail(what, 'a time with a unit (e.g. 50ms, 1.5ms, 250us, 1s)', tok)
    end
    return math.floor(tonumber(n) * mul + 0.5) / 1e6
  end
  local function rate_bps(tok, what)
    local n, u = (tok or ''):match('^([%d%.]+[eE]?[%-+]?%d*)(%a*)$')
    local mul = u == '' and 1 or (u and RATE_UNITS[u:lower()])
    if not n or not mul or not tonumber(n) then fail(what, 'a rate (e.g. 100mbit, 1gbit, 125000bps)', tok) end
    return math.floor(tonumber(n) * mul + 0.5)
  end
  local function once(key, what)
    if spec[key] ~= nil then fail(what, 'it once', 'a second ' .. what) end
  end
  while i <= #toks do
    local kw = toks[i]
    i = i + 1
    if kw == 'limit' then
      once('limit_packets', 'limit')
      if auto_limit then fail('limit', 'it once', 'a second limit') end
      if toks[i] == 'auto' then auto_limit = true  -- sized by apply, as qoslab.netem documents
      else spec.limit_packets = int(toks[i], 'limit', 1) end
      i = i + 1
    elseif kw == 'delay' or kw == 'latency' then
      once('delay_ms', 'delay')
      spec.delay_ms = time_ms(toks[i], 'delay'); i = i + 1
      if is_snum(toks[i]) then
        spec.jitter_ms = time_ms(toks[i], 'delay jitter'); i = i + 1
        if is_num(toks[i]) then spec.delay_corr_pct = pct(toks[i], 'delay correlation'); i = i + 1 end
      end
    elseif kw == 'distribution' then
      once('distribution', 'distribution')
      if not toks[i] then fail('distribution', 'a name', nil) end
      spec.distribution = toks[i]; i = i + 1
    elseif kw == 'loss' or kw == 'drop' then
      if spec.loss_pct or spec.loss_state or spec.loss_gemodel then fail('loss', 'one loss', 'a second loss') end
      local m = toks[i]
      if m == 'random' then i = i + 1; m = toks[i] end
      if m == 'state' then
        i = i + 1
        local st = { p13_pct = pct(toks[i], 'loss state p13') }; i = i + 1
        for _, k in ipairs { 'p31_pct', 'p32_pct', 'p23_pct', 'p14_pct' } do
          if not is_num(toks[i]) then break end
          st[k] = pct(toks[i], 'loss state ' .. k:sub(1, 3)); i = i + 1
        end
        spec.loss_state = st
      elseif m == 'gemodel' then
        i = i + 1
        local ge = { p_pct = pct(toks[i], 'loss gemodel p') }; i = i + 1
        for _, k in ipairs { 'r_pct', 'one_minus_h_pct', 'one_minus_k_pct' } do
          if not is_num(toks[i]) then break end
          ge[k] = pct(toks[i], 'loss gemodel ' .. k); i = i + 1
        end
        spec.loss_gemodel = ge
      else
        spec.loss_pct = pct(toks[i], 'loss'); i = i + 1
        if is_num(toks[i]) then spec.loss_corr_pct = pct(toks[i], 'loss correlation'); i = i + 1 end
      end
    elseif kw == 'duplicate' or kw == 'corrupt' or kw == 'reorder' then
      once(kw .. '_pct', kw)
      spec[kw .. '_pct'] = pct(toks[i], kw); i = i + 1
      if is_num(toks[i]) then spec[kw .. '_corr_pct'] = pct(toks[i], kw .. ' correlation'); i = i + 1 end
    elseif kw == 'gap' then
      once('reorder_gap_packets', 'gap')
      spec.reorder_gap_packets = int(toks[i], 'gap', 1); i = i + 1
    elseif kw == 'ecn' then
      spec.ecn = true
    elseif kw == 'rate' then
      once('rate_bps', 'rate')
      spec.rate_bps = rate_bps(toks[i], 'rate'); i = i + 1
      if is_snum(toks[i]) then
        spec.rate_packet_overhead_bytes = int(toks[i], 'rate packet overhead', -2147483648); i = i + 1
        if is_num(toks[i]) then
          spec.rate_cell_bytes = int(toks[i], 'rate cell size'); i = i + 1
          if is_snum(toks[i]) then
            spec.rate_cell_overhead_bytes = int(toks[i], 'rate cell overhead', -2147483648); i = i + 1
          end
        end
      end
      if spec.rate_packet_overhead_bytes == 0 then spec.rate_packet_overhead_bytes = nil end
      if spec.rate_cell_bytes == 0 then spec.rate_cell_bytes = nil end
      if spec.rate_cell_overhead_bytes == 0 then spec.rate_cell_overhead_bytes = nil end
    elseif kw == 'slot' then
      once('slot', 'slot')
      local sl = {}
      if toks[i] == 'distribution' then
        i = i + 1
        if not toks[i] then fail('slot distribution', 'a name', nil) end
        sl.distribution = toks[i]; i = i + 1
        sl.delay_ms = time_ms(toks[i], 'slot distribution delay'); i = i + 1
        sl.jitter_ms = time_ms(toks[i], 'slot distribution jitter'); i = i + 1
        if sl.delay_ms == 0 then sl.delay_ms = nil end
        if sl.jitter_ms == 0 then sl.jitter_ms = nil end
      else
        sl.min_delay_ms = time_ms(toks[i], 'slot min delay'); i = i + 1
        if is_num(toks[i]) then sl.max_delay_ms = time_ms(toks[i], 'slot max delay'); i = i + 1 end
      end
      while toks[i] == 'packets' or toks[i] == 'bytes' do
        local k = toks[i]
        sl[k] = int(toks[i + 1], 'slot ' .. k, 1); i = i + 2
      end
      spec.slot = sl
    elseif kw == 'seed' then
      once('seed', 'seed')
      spec.seed = int(toks[i], 'seed', math.mininteger); i = i + 1
    else
      fail('option', 'a tc-netem(8) keyword (limit, delay, distribution, loss, duplicate, corrupt, ' ..
        'reorder, gap, ecn, rate, slot, seed)', kw)
    end
  end
  return spec, auto_limit
end

--- Parse tc-netem(8) option syntax into a spec (canonical, as `apply` returns it).
-- Accepts everything tc-netem(8) documents: `limit PACKETS`, `delay|latency TIME
-- [JITTER [CORR]]`, `distribution NAME`, `loss [random] PCT [CORR]`, `loss state
-- P13 [P31 [P32 [P23 [P14]]]]`, `loss gemodel P [R [1-H [1-K]]]`, `duplicate`,
-- `corrupt`, `reorder PCT [CORR]`, `gap N`, `ecn`, `rate RATE [PACKETOVERHEAD
-- [CELLSIZE [CELLOVERHEAD]]]`, `slot MIN [MAX] [packets N] [bytes N]`, `slot
-- distribution NAME DELAY JITTER [packets N] [bytes N]`, `seed N`; a leading
-- `netem` is skipped. Times need a unit (s, ms, us, ns: a bare number is
-- rejected, so `delay 50` is never read in a unit nobody meant); percentages
-- may omit the `%`; rates take tc's
-- units (bit, kbit, mbit, gbit, tbit, the IEC kibit..., and bps = bytes/s).
-- Beyond tc, `limit auto` gives `limit_packets = "auto"` (the limit rule
-- above, resolved by `apply`), as `qoslab netem set` takes it.
-- @tparam string text e.g. "delay 50ms 5ms 25% loss 3%"
-- @treturn table spec
-- @raise `"qoslab.netem.parse: <what>: expected ..., got ..."` on a syntax error
-- @usage netem.apply('veth0', netem.parse('delay 100ms loss 1%'))
function M.parse(text)
  local ctx = 'qoslab.netem.parse'
  if type(text) ~= 'string' then check.fail(ctx, 'text', 'a string', text) end
  local ok, spec, auto_limit = pcall(parse_tokens, text, ctx)
  if not ok then
    if type(spec) == 'table' and spec.parse_error then error(spec.parse_error, 2) end
    error(spec, 0)
  end
  -- tc sets gap 1 for reorder only when gap is missing; so does normalize.
  local canon = normalize(spec, ctx, 2)
  if auto_limit then canon.limit_packets = 'auto' end
  return canon
end

local function fmt_num(v)
  if math.type(v) == 'integer' then return tostring(v) end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format('%d', v) end
  for p = 1, 17 do
    local s = string.format('%.' .. p .. 'g', v)
    if tonumber(s) == v then return s end
  end
  return string.format('%.17g', v)
end

local function fmt_time(ms)
  local ns = math.floor(ms * 1e6 + 0.5)
  if ns ~= 0 and ns % 1000000000 == 0 then return string.format('%ds', ns // 1000000000) end
  if ns % 1000000 == 0 then return string.format('%dms', ns // 1000000) end
  if ns % 1000 == 0 then return string.format('%dus', ns // 1000) end
  return string.format('%dns', ns)
end

local function fmt_rate_tc(bps)
  bps = math.tointeger(bps) or math.floor(bps)
  if bps % 1000000000 == 0 then return string.format('%dgbit', bps // 1000000000) end
  if bps % 1000000 == 0 then return string.format('%dmbit', bps // 1000000) end
  if bps % 1000 == 0 then return string.format('%dkbit', bps // 1000) end
  return string.format('%dbit', bps)
end

local function pct_s(v) return fmt_num(v) .. '%' end

--- Write a spec in tc-netem(8) syntax (canonical order; `parse` reads it back
-- to the same spec).
-- @tparam table spec as for `apply` (`limit_packets = "auto"` is not allowed)
-- @treturn string e.g. "limit 1000 delay 50ms 5ms 25% loss 3%"
-- @raise on a bad spec, or a custom distribution table (tc has no syntax for it)
-- @usage print(netem.format(netem.get('veth0')))
function M.format(spec)
  local ctx = 'qoslab.netem.format'
  local s = normalize(spec, ctx, 2)
  if s.keep_order then
    error(ctx .. ': spec.keep_order: has no tc-netem(8) syntax (apply turns it into a rate: ' ..
      'write rate_bps, e.g. `rate 10gbit`)', 2)
  end
  local out = { 'limit ' .. s.limit_packets }
  local function add(...) for _, v in ipairs { ... } do out[#out + 1] = v end end
  if s.delay_ms or s.jitter_ms then
    add('delay', fmt_time(s.delay_ms or 0))
    if s.jitter_ms then
      add(fmt_time(s.jitter_ms))
      if s.delay_corr_pct then add(pct_s(s.delay_corr_pct)) end
    end
  end
  local function dist_name(d, field)
    if type(d) == 'table' then
      error(string.format('%s: %s: a custom table has no tc-netem(8) syntax', ctx, field), 3)
    end
    return d
  end
  if s.distribution then add('distribution', dist_name(s.distribution, 'spec.distribution')) end
  if s.loss_pct then
    add('loss', pct_s(s.loss_pct))
    if s.loss_corr_pct then add(pct_s(s.loss_corr_pct)) end
  elseif s.loss_state then
    local t = s.loss_state
    add('loss state', pct_s(t.p13_pct), pct_s(t.p31_pct), pct_s(t.p32_pct), pct_s(t.p23_pct), pct_s(t.p14_pct))
  elseif s.loss_gemodel then
    local t = s.loss_gemodel
    add('loss gemodel', pct_s(t.p_pct), pct_s(t.r_pct), pct_s(t.one_minus_h_pct), pct_s(t.one_minus_k_pct))
  end
  for _, k in ipairs { 'duplicate', 'reorder', 'corrupt' } do
    if s[k .. '_pct'] then
      add(k, pct_s(s[k .. '_pct']))
      if s[k .. '_corr_pct'] then add(pct_s(s[k .. '_corr_pct'])) end
      if k == 'reorder' and s.reorder_gap_packets then add('gap', tostring(s.reorder_gap_packets)) end
    end
  end
  if s.rate_bps then
    add('rate', fmt_rate_tc(s.rate_bps))
    local po, cs, co = s.rate_packet_overhead_bytes, s.rate_cell_bytes, s.rate_cell_overhead_bytes
    if po or cs or co then
      add(tostring(po or 0))
      if cs or co then
        add(tostring(cs or 0))
        if co then add(tostring(co)) end
      end
    end
  end
  if s.ecn then add('ecn') end
  if s.slot then
    local t = s.slot
    if t.distribution then
      add('slot distribution', dist_name(t.distribution, 'spec.slot.distribution'),
        fmt_time(t.delay_ms or 0), fmt_time(t.jitter_ms or 0))
    else
      add('slot', fmt_time(t.min_delay_ms), fmt_time(t.max_delay_ms))
    end
    if t.packets then add('packets', tostring(t.packets)) end
    if t.bytes then add('bytes', tostring(t.bytes)) end
  end
  if s.seed then add('seed', tostring(s.seed)) end
  return table.concat(out, ' ')
end

--- Change the netem over time: each step (`{at_s =, <spec keys>}`, a whole
-- spec from its time on) replaces the netem at its planned instant, applied
-- by a native thread while the caller goes on (e.g. into a traffic test).
-- `qoslab.schedule.netem` documents the steps, the timing and the schedule
-- object (`changes`, `lag`, `failed`, `running`, `wait`, `stop`, `close`,
-- `attach`). One schedule runs on a netem at a time: a second one is
-- refused while the first runs, not once it finished or was stopped; so are
-- `apply` and `update` on that netem.
-- @tparam string ifname device name
-- @tparam table steps `{{at_s = 0, delay_ms = 20}, {at_s = 5, delay_ms = 200, loss_pct = 1}, ...}`
-- @tparam[opt] table opts `netns`, `parent`, `handle` (egress only), `quiet`
--   (boolean)
-- @treturn table the running schedule
-- @return or nil, message, CODE (ENODEV, EPERM, ... of the first apply)
-- @raise at the caller's line: a bad ifname or opts, a bad step (naming
--   `steps[i].<field>` with this module's checks), a schedule still running
--   on that netem
-- @usage local s = netem.schedule('veth0', {{at_s = 0, delay_ms = 20}, {at_s = 5, delay_ms = 200}})
function M.schedule(ifname, steps, opts)
  -- level 2 from the body: this function's caller (not a tail call)
  local s, msg, code = require('qoslab.schedule')._netem('qoslab.netem.schedule', 2, ifname, steps, opts)
  return s, msg, code
end

return M
