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
  local ok, msg, code = core.link_add_veth(opts)
  if not ok then return nil, msg, code end
  netns._track { kind = 'link', ifname = opts.name, netns = opts.netns }
  return true
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

return M
