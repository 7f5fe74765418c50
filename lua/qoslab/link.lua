--- Network links in named namespaces: veth pairs, up/down, MTU, IPv4/IPv6
-- addresses, link information and offloads (TSO/GSO/GRO), routes through a
-- gateway and a namespace's IP forwarding.
--
-- All requests go over rtnetlink (libnl-route) from this process, or the
-- ethtool ioctl (SIOCETHTOOL) for offloads, made inside the namespace given by
-- `opts.netns` (default: the caller's namespace). These live apart from
-- `qoslab.netns` because both need a `delete`.
--
-- Failures of the world return `nil, message, CODE`: `ENODEV` (no such device;
-- the message names device and namespace), `ENOENT` (no such namespace or
-- address), `EEXIST` (name or address taken), `EPERM` (needs CAP_NET_ADMIN),
-- `ENOTSUP` (the driver refuses). Bad arguments raise
-- `"qoslab.link.<fn>: <field>: expected ..."`.
-- @module qoslab.link
local check = require 'qoslab.check'
local core = require 'qoslab.core'
local netns = require 'qoslab.netns'

local M = {}

--- Create a veth pair with each end directly in its namespace.
-- Both ends start down. Recorded for `qoslab cleanup`.
-- @tparam table opts `{name = IF, peer = IF, netns = NS|nil, peer_netns = NS|nil}`;
--   interface names 1..15 bytes without "/", ":" or spaces; namespaces by name
--   (nil = the caller's)
-- @return true, or nil, message, code ("EEXIST", "ENOENT", "EPERM")
-- @raise on a missing or wrongly typed field, or an unknown key
-- @usage link.add_veth{name = 'v0', peer = 'v1', netns = 'a', peer_netns = 'b'}
function M.add_veth(opts)
  -- made and recorded with no interruption in between (as netns.add)
  return core.signals_defer(function()
    local ok, msg, code = core.link_add_veth(opts)
    if not ok then return nil, msg, code end
    netns._track { kind = 'link', ifname = opts.name, netns = opts.netns }
    return true
  end)
end

--- Delete a link (for a veth, both ends).
-- @tparam string ifname
-- @tparam[opt] table opts `{netns = NS}`
-- @return true, or nil, message, code ("ENODEV", "ENOENT", "EPERM")
-- @usage link.delete('v0', {netns = 'a'})
function M.delete(ifname, opts)
  local ok, msg, code = core.link_delete(ifname, opts)
  if not ok then return nil, msg, code end
  local ns = opts and opts.netns
  netns._untrack(function(e) return e.ifname == ifname and e.netns == ns end)
  return true
end

--- Set a link up or down and/or its MTU.
-- @tparam string ifname
-- @tparam table opts `{up = bool, mtu_bytes = 68..65535, netns = NS}` (absent keys: unchanged)
-- @return true, or nil, message, code ("ENODEV", "EINVAL" when the driver
--   rejects the MTU, "EPERM")
-- @usage link.set('v0', {up = true, mtu_bytes = 9000, netns = 'a'})
M.set = core.link_set

--- Add an IPv4 or IPv6 address. IPv6 addresses skip duplicate address
-- detection (IFA_F_NODAD) so they can be used at once.
-- @tparam string ifname
-- @tparam string addr "A.B.C.D/N" (N 0..32) or "X:...:Y/N" (N 0..128)
-- @tparam[opt] table opts `{netns = NS}`
-- @return true, or nil, message, code ("EEXIST", "ENODEV", "EPERM")
-- @raise when addr is not such a string
-- @usage link.addr_add('v0', '10.0.0.1/24', {netns = 'a'})
M.addr_add = core.link_addr_add

--- Remove an address added with `addr_add`.
-- @tparam string ifname
-- @tparam string addr as for addr_add
-- @tparam[opt] table opts `{netns = NS}`
-- @return true, or nil, message, code ("ENOENT" when the address is not there)
M.addr_del = core.link_addr_del

--- Add a route through a gateway (like `ip route add DST via VIA`).
-- Routes go with their links and namespaces (nothing to record for cleanup).
-- @tparam string dst "default", "A.B.C.D/N" or "X:...:Y/N" ("default" takes via's family)
-- @tparam string via the gateway's address, on a link of the namespace
-- @tparam[opt] table opts `{netns = NS}`
-- @return true, or nil, message, code ("EEXIST" when a route to dst is there,
--   "ENETUNREACH" when no link reaches via, "ENOENT" no such namespace, "EPERM")
-- @raise when dst or via is not such a string, or their families differ
-- @usage link.route_add('default', '10.0.0.254', {netns = 'a'})
M.route_add = core.route_add

--- Turn IP forwarding on or off in a namespace (`net.ipv4.ip_forward` and
-- `net.ipv6.conf.all.forwarding` of that namespace only), which makes it a router.
-- @tparam boolean on
-- @tparam[opt] table opts `{netns = NS, ipv6 = bool (default true: IPv6 too)}`
-- @return true, or nil, message, code ("ENOENT" no such namespace, "EACCES"/"EPERM" not root)
-- @raise when on is not a boolean, or on an unknown key
-- @usage link.forwarding(true, {netns = 'router'})
M.forwarding = core.route_forwarding

--- Turn TCP segmentation offload, generic segmentation offload and generic
-- receive offload on or off, and read them back (ethtool -K / -k).
-- With offloads off, every packet is one skb (what netem counts and drops).
-- @tparam string ifname
-- @tparam[opt] table set `{tso = bool, gso = bool, gro = bool}`; absent keys unchanged
-- @tparam[opt] table opts `{netns = NS}`
-- @treturn table `{tso = bool, gso = bool, gro = bool}` as the kernel has them now
-- @return or nil, message, code ("ENODEV", "ENOTSUP" when the driver keeps a
--   setting, "EPERM")
-- @usage link.offloads('v0', {tso = false, gso = false, gro = false}, {netns = 'a'})
M.offloads = core.link_offloads

--- Read a link's state.
-- @tparam string ifname
-- @tparam[opt] table opts `{netns = NS}`
-- @treturn table `{ifname=, ifindex=, mtu_bytes=, up = bool (IFF_UP), carrier = bool
--   (IFF_LOWER_UP), operstate = "up"|"down"|"lowerlayerdown"|"unknown"|..., kind =
--   "veth"|""..., address = "aa:bb:..", speed_mbps = integer|nil (nil when the
--   driver reports none)}`
-- @return or nil, message, code ("ENODEV", "ENOENT")
-- @usage print(link.info('v0', {netns = 'a'}).operstate)
M.info = core.link_info

--- A native impairment link: netem's impairments without the kernel's netem.
-- Joins two namespaces through a TUN device in each (layer 3, no packet
-- information header, not persistent: the devices vanish when the link is
-- closed or the process ends, also by SIGKILL) and forwards both directions in
-- threads of this process. Each direction has its own spec, in qoslab.netem's
-- form, checked by the same code as `qoslab.netem.apply` (a bad field raises
-- `"qoslab.link.impair_link: opts.forward: spec.delay_ms: expected ..."`,
-- every argument error at the caller's line). Per
-- packet, the impairment model decides as sch_netem's enqueue path would
-- (copies, loss, CE mark, corruption, limit, time to send); the link keeps
-- a time-ordered queue per direction and a sender that writes each packet into
-- the other device at its time (CLOCK_MONOTONIC, absolute deadlines).
--
-- Memory is bounded: a direction queues at most `memory_bytes` (packet data
-- plus a record of 40 bytes each); beyond that packets drop with reason
-- `memory` (never forwarded early) and `stats()` says so in `over_budget`
-- (code `ENOBUFS`). A thread that fails (a read or write error other than EAGAIN/EINTR,
-- e.g. a device deleted under the link) stops the whole link: it forwards
-- nothing any more, and `stats().failed` and `:failed()` say why (code
-- `ELINKFAILED`). A packet the kernel refuses back (a corrupted header that no
-- longer says IPv4 or IPv6) is counted in `rejected_packets`, not a fault.
--
-- The address pair is point-to-point (`ip addr add A peer B/32`): each side
-- reaches the other through its device; other routes are the caller's.
-- @tparam table opts
--   `{a_netns = NS, b_netns = NS, a_addr = ADDR, b_addr = ADDR, a_ifname =,
--   b_ifname =, mtu_bytes =, memory_bytes =, forward = spec, reverse = spec,
--   seed =, gso =, realtime =}`:
--
-- * `a_netns`, `b_netns` (strings, required, different): the namespaces, which
--   must exist;
-- * `a_addr`, `b_addr` (strings, required): IPv4 addresses without a prefix,
--   different: the point-to-point pair. IPv6 crosses the link too, with every
--   impairment (the CE mark in the Traffic Class, ICMPv6 counted as `icmp`):
--   give the devices IPv6 addresses with `addr_add` (e.g. a /64 on each, its
--   route on the device; a TUN has no neighbours to discover and `addr_add`
--   skips DAD). The devices get no IPv6 link-local address (addr_gen_mode
--   none), so nothing of the kernel's own crosses the link uninvited;
-- * `a_ifname`, `b_ifname` (default `"qltun-a"`, `"qltun-b"`): the devices' names;
-- * `mtu_bytes` (integer 68..65535, default 1500): both devices' MTU;
-- * `memory_bytes` (integer >= 1, default 641667180: 1 Gbit/s for 5 s in
--   1500-byte packets with their 40-byte records): each direction's queue
--   budget, a cap (memory is taken as packets queue, given back as they go);
-- * `forward` (a -> b) and `reverse` (b -> a): qoslab.netem specs (default `{}`:
--   no impairment but netem's default `limit_packets` of 1000);
-- * `seed` (integer >= 0): the models' random seed unless a spec has `seed`
--   (default: a new one per link);
-- * `gso` (boolean, default false): let GSO super-packets (TCP segments of up
--   to 64 KiB, IFF_VNET_HDR) cross whole. Each is one packet to the model
--   (one loss, one `limit_packets` slot), as kernel netem sees TCP's packets
--   at its qdisc: TCP builds GSO packets whatever the device's offloads (the
--   kernel cuts them after the qdisc), so a netem loss takes a whole one
--   (at low rates 2 segments, tcp_min_tso_segs); several times the
--   throughput too. Off, every packet is at most `mtu_bytes`, one segment:
--   a finer unit than netem's, and under random loss TCP's goodput is then
--   lower than through netem (fewer segments per loss);
-- * `realtime` (boolean, default false): run the link's four threads (both
--   readers and both senders) SCHED_FIFO at the
--   lowest real-time priority where the process may (root, CAP_SYS_NICE or
--   RLIMIT_RTPRIO; silently ordinary otherwise, `stats().forward.sender_realtime`
--   says whether all four got it), so neither a due packet nor an arriving one
--   (whose time counts from its read) is kept waiting behind the host's other
--   threads: on a loaded host it keeps the senders' lateness p99 near 0.13 ms
--   where ordinary threads reach milliseconds, but it costs about half the
--   zero-delay TCP throughput on two cores (bench/RESULTS.md). Either way each
--   sender sleeps until 60 µs before a packet's time and waits out the rest
--   on the CPU.
-- @treturn qoslab.ImpairLink a to-be-closed handle (`local l <close> = ...`)
-- @return or nil, message, code: "ENOENT" (no such namespace), "EBUSY" (a
--   device name taken in its namespace), "EPERM" (needs root), "ENOMEM"
-- @raise on a missing, wrongly typed or unknown field, or a bad spec
-- @usage local l <close> = link.impair_link{a_netns = 'c', b_netns = 's',
--   a_addr = '10.9.0.1', b_addr = '10.9.0.2', forward = {delay_ms = 50}}
function M.impair_link(opts)
  -- the binding's message, at the caller's line (not a tail call: the
  -- level counts this frame)
  local l, msg, code = check.call(2, core.impair_link, opts)
  return l, msg, code
end

--- An open impairment link (`qoslab.link.impair_link`).
-- Closing it (`:close()`, leaving its `<close>` scope, or garbage collection)
-- joins its threads and closes its devices; closing twice is harmless.
-- @type ImpairLink

--- Replace one direction's spec while traffic flows, atomically: packets
-- already queued keep their times (as a netem change does).
-- @function ImpairLink:set
-- @tparam string direction "forward" (a -> b) or "reverse" (b -> a)
-- @tparam table spec a qoslab.netem spec
-- @return true
-- @raise on a bad direction or spec (`"qoslab.ImpairLink:set: forward: spec.loss_pct: ..."`),
--   or when the link is closed
-- @usage l:set('forward', {delay_ms = 100, loss_pct = 1})

--- Counters per direction, read under each direction's lock.
-- @function ImpairLink:stats
-- @treturn table `{forward = D, reverse = D, failed = false|message,
--   failed_code = "ELINKFAILED"|nil, a_ifname =, b_ifname =}` where D is
--   `{packets =, bytes = (forwarded), arrived_packets =, arrived_bytes =,
--   drops = (all reasons), drops_by_reason = {loss =, limit =, memory =},
--   duplicated_packets =, reordered_packets =, corrupted_packets =,
--   ce_marked_packets =, rejected_packets =, backlog_packets =, backlog_bytes =,
--   queue_delay_mean_ms =, queue_delay_max_ms = (time from arrival to the
--   write, forwarded packets), lateness_p99_ms =, lateness_max_ms = (how late
--   the sender woke for a packet it slept for, the timer's error; 1 µs
--   resolution to 2 ms), lateness_samples = (those wake-ups), loss_bursts =
--   (runs of consecutive arrivals the loss model took), by_protocol = {tcp =
--   P, udp = P, icmp = P, other = P}, sender_realtime = bool, over_budget =
--   false|message, over_budget_code = "ENOBUFS"|nil}`, and P a transport's
--   share: `{arrived_packets =, drops =, drops_by_reason = {loss =, limit =,
--   memory =}, loss_bursts =}` (so a test counts its own protocol's drops
--   apart from a control connection's; manual/results.md, "Link counters")
-- @raise when the link is closed
-- @usage print(l:stats().forward.drops_by_reason.loss)

--- Whether a thread of the link failed (the link then forwards nothing).
-- @function ImpairLink:failed
-- @return false, or true, message, "ELINKFAILED"
-- @raise when the link is closed
-- @usage local failed, why = l:failed()

--- Stop the threads and remove both devices. Idempotent.
-- @function ImpairLink:close
-- @usage l:close()

return M
