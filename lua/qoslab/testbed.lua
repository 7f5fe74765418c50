--- A two-namespace testbed: a client and a server network namespace joined
-- by a veth pair (or, with `bottleneck = "router"`, by a router namespace
-- between them), optionally rate-limited and impaired, removed completely
-- by `close` (also as a to-be-closed variable and on garbage collection).
--
--     client netns                         server netns
--     lo up                                lo up
--     CLIENT_IF 10.X.Y.1/24  <── veth ──>  SERVER_IF 10.X.Y.2/24
--     [fd00:X:Y::1/64]                     [fd00:X:Y::2/64]
--     egress: shaper (rate_bps) ─ netem (impair)
--                                          egress: shaper ─ netem (reverse_impair)
--
-- `bottleneck = "router"` puts the shaper and netem where a real path has
-- them, on a router's egress, not on the sending host's own (there TCP
-- Small Queues and pacing keep the sender's queue short, so a 20 ms queue
-- adds only a few ms of delay under load):
--
--     client netns              router netns (forwarding on)            server netns
--     CLIENT_IF 10.X.Y.1/25 ─ RC_IF 10.X.Y.126/25   RS_IF 10.X.Y.254/25 ─ SERVER_IF 10.X.Y.129/25
--     [fd00:X:Y:1::1/64]      [fd00:X:Y:1::fe/64]   [fd00:X:Y:2::fe/64]   [fd00:X:Y:2::1/64]
--     default via RC          egress to client:     egress to server:     default via RS
--                             shaper ─ netem        shaper ─ netem
--                             (reverse_impair)      (impair)
--
-- With backend "link" (qoslab's native impairment link, what "auto" takes on
-- a kernel without sch_netem) TUN devices take the veth's place, with the
-- same addresses (IPv4 point-to-point, IPv6 /64 on the device):
--
--     client netns                          server netns
--     qltun-c 10.X.Y.1  <── link ──>        qltun-s 10.X.Y.2
--     [fd00:X:Y::1/64]  forward: impair     [fd00:X:Y::2/64]
--     egress: shaper    reverse: reverse_impair   egress: shaper
--
-- and with `bottleneck = "router"` the link joins the client to the
-- router, a veth pair the router to the server (the router's two egresses
-- shape, the link impairs: forward after the client, before the router's
-- shaper towards the server; reverse after the router's shaper towards the
-- client):
--
--     client netns          router netns (forwarding on)                server netns
--     qltun-c 10.X.Y.1 ─ link ─ qltun-r 10.X.Y.126   RS_IF 10.X.Y.254/25 ─ SERVER_IF 10.X.Y.129/25
--     [fd00:X:Y:1::1/64]        [fd00:X:Y:1::fe/64]  [fd00:X:Y:2::fe/64]   [fd00:X:Y:2::1/64]
--     default via qltun-r       egress: shaper       egress: shaper        default via RS
--
-- Names include the process id and a per-process counter, so parallel runs
-- never collide; everything made is recorded with `qoslab.state` so
-- `qoslab cleanup` removes what a killed run left. With `rate_bps` the
-- impairment sits under the shaper (netem as the shaper's child), so netem's
-- queue fills at the link rate as it would behind a real 1 Gbit/s port.
-- netem comes from `qoslab.netem`, loaded only when an impairment is used.
-- @module qoslab.testbed
local check = require 'qoslab.check'
local core = require 'qoslab.core'
local netns = require 'qoslab.netns'
local link = require 'qoslab.link'
local shape = require 'qoslab.shape'

local M = {}

local CTX = 'qoslab.testbed'
local counter = 0
-- Testbeds not closed yet, by creation number (weak: one dropped unclosed
-- is forgotten with its garbage collection).
local open = setmetatable({}, { __mode = 'k' })

local TB = {}
TB.__index = TB

-- A Testbed method called with '.' instead of ':' (self not a testbed)
-- raises at the method's caller.
local function self_check(self, method)
  if getmetatable(self) ~= TB then
    error(string.format('qoslab.Testbed:%s: expected a qoslab.Testbed as self (call it as tb:%s(...)), got %s',
      method, method, type(self)), 3)
  end
end
TB.__name = 'qoslab.Testbed'

local function netem()
  return require 'qoslab.netem'
end

local function is_empty(spec)
  return spec == nil or (type(spec) == 'table' and next(spec) == nil)
end

-- Run a step that returns true|value or nil, msg, code; on failure raise a
-- table so construction can undo what it made and return nil, msg, code.
local function must(v, msg, code)
  if v == nil then error({ qoslab_fail = true, msg = msg, code = code }, 0) end
  return v
end

-- The interface, namespace and netem parent of a direction's bottleneck:
-- forward (client → server) is the client's egress, or the router's towards
-- the server; reverse the server's, or the router's towards the client.
local function side(tb, direction)
  if tb.router_netns then
    if direction == 'forward' then
      return tb.router_server_ifname, tb.router_netns, tb._client_parent
    end
    return tb.router_client_ifname, tb.router_netns, tb._server_parent
  end
  if direction == 'forward' then
    return tb.client_ifname, tb.client_netns, tb._client_parent
  end
  return tb.server_ifname, tb.server_netns, tb._server_parent
end

-- The rate the link carries without a shaper, for limit_packets = "auto":
-- about what its threads forward at 1500 bytes (bench/RESULTS.md).
local LINK_AUTO_BPS = 1e9

-- A spec for the link with limit_packets = "auto" resolved by netem's own
-- limit rule (qoslab.netem.needed_limit), at the rate packets reach the
-- link: the spec's rate, else the testbed's shaper, else LINK_AUTO_BPS.
local function link_spec(tb, spec)
  if is_empty(spec) or spec.limit_packets ~= 'auto' then return spec end
  local s = {}
  for k, v in pairs(spec) do s[k] = v end
  local need = netem().needed_limit(tb.client_ifname, { delay_ms = spec.delay_ms,
    jitter_ms = spec.jitter_ms, rate_bps = spec.rate_bps or tb.rate_bps or LINK_AUTO_BPS },
    { netns = tb.client_netns, parent = 'root' })
  s.limit_packets = math.max(1000, need)
  return s
end

-- Why the testbed's link failed (message, "ELINKFAILED"), or nil: a link
-- whose thread failed forwards nothing, so what goes through it must say so.
local function link_failure(tb)
  if not tb._link or tb._closed then return nil end
  local failed, msg, code = tb._link:failed()
  if not failed then return nil end
  return string.format("the testbed's %s (close the testbed and make a new one)", msg), code
end

-- Why a testbed's impairment cannot be kernel netem here (what the
-- ENOTSUP of an impairment on it says instead of netem's own advice, which
-- points at the testbed): by who asked for netem.
local NO_NETEM = {
  default = 'backend "netem" (the process default: qoslab run --backend netem) and this kernel '
    .. 'has no sch_netem: drop --host (the plan then runs in the qemu guest, which has it) or '
    .. 'use --backend auto or link (qoslab\'s native link, on this host)',
  opts = 'opts.backend = "netem" and this kernel has no sch_netem: give backend = "auto" or '
    .. '"link" (qoslab\'s native link), load sch_netem (modprobe sch_netem), or run the script '
    .. 'in the qemu guest (qoslab run --guest)',
}

-- netem's ENOTSUP on a testbed of a kernel without sch_netem: the reason
-- this testbed has no other backend (NO_NETEM) instead of netem's advice,
-- which points back at the testbed.
local function no_netem(tb, v, msg, code)
  if v == nil and code == 'ENOTSUP' and tb._why_netem and not M.kernel_has_netem() then
    msg = NO_NETEM[tb._why_netem]
  end
  return v, msg, code
end

local function set_impair(tb, spec, direction)
  local key = direction == 'forward' and '_impair_fwd' or '_impair_rev'
  if tb._link then
    local fmsg, fcode = link_failure(tb)
    if fmsg then must(nil, fmsg, fcode) end
    -- the link's own model: a spec change is atomic, {} is no impairment
    spec = link_spec(tb, spec)
    tb._link:set(direction, spec or {})
    tb[key] = not is_empty(spec) and core.netem_normalize(spec) or nil
    tb._impair_at = tb._impair_at or {}
    tb._impair_at[direction] = core.now()
    return true
  end
  local ifname, ns, parent = side(tb, direction)
  if is_empty(spec) then
    if tb[key] then
      if parent then
        -- Under a shaper: swap netem for the shaper's default child.
        must(shape.reset_child(ifname, { netns = ns }))
      else
        must(netem().clear(ifname, { netns = ns }))
      end
      tb[key] = nil
    end
    return true
  end
  must(no_netem(tb, netem().apply(ifname, spec, { netns = ns, parent = parent })))
  tb[key] = true
  return true
end

-- Check an impairment spec before anything is built, naming the testbed's
-- field (opts.impair.delay_ms), positioned at the caller of the caller.
local function check_impair(ctx, field, spec)
  local ok, err = pcall(netem().check, spec, ctx)
  if not ok then
    error((tostring(err):gsub('^' .. ctx:gsub('%p', '%%%0') .. ': spec', ctx .. ': ' .. field, 1)), 3)
  end
end

-- The backend "auto" takes when no opts.backend is given: set by
-- `qoslab run/demo --backend` (set_default_backend).
local default_backend = 'auto'
-- Whether this kernel has sch_netem: asked once (qoslab.vm.host_has_netem
-- tries a netem on lo of a scratch namespace).
local kernel_netem

--- Set the backend that testbeds made with `backend = "auto"` (the default)
-- take in this process; `qoslab run/demo --backend` calls it.
-- @tparam string b "auto" (kernel netem when the kernel has it, else the
--   link), "netem" or "link"
-- @raise when b is not one of those
-- @usage testbed.set_default_backend('link')
function M.set_default_backend(b)
  default_backend = check.enum('qoslab.testbed.set_default_backend', 'b', b,
    { 'auto', 'netem', 'link' })
end

--- Whether this kernel has sch_netem (what `backend = "auto"` decides by),
-- asked once per process.
-- @treturn boolean
-- @usage if testbed.kernel_has_netem() then ... end
function M.kernel_has_netem()
  if kernel_netem == nil then
    kernel_netem = require('qoslab.vm').host_has_netem() and true or false
  end
  return kernel_netem
end

-- The backend a testbed uses: opts.backend, else the process default, else
-- kernel netem when the kernel has it and otherwise the link (which joins
-- every testbed: IPv6 and a router too). Also returns the NO_NETEM key for a
-- netem testbed.
local function resolve_backend(tbo)
  local b = tbo.backend
  if b == 'auto' then b = default_backend end
  if b == 'netem' then return b, tbo.backend == 'auto' and 'default' or 'opts' end
  if b ~= 'auto' then return b end
  if M.kernel_has_netem() then return 'netem' end
  return 'link'
end

--- Build a testbed.
-- @tparam[opt] table opts
--   `{rate_bps = 8..8e15 (bits/s; rate limit on both ends' egress; default none),
--   shape = "tbf"|"htb" (default "tbf"), burst_bytes = shaper bucket (default: see
--   qoslab.shape; shape and burst_bytes only with rate_bps), impair = netem spec on the client's egress (the router's
--   towards the server with bottleneck = "router"; default none;
--   one-way: delay_ms = 100 gives RTT ≈ 100 ms, the ACKs come back
--   undelayed), reverse_impair = netem spec on the server's egress (the
--   router's towards the client; for
--   symmetric delay split it: impair and reverse_impair delay_ms = RTT/2), offloads = bool (default
--   false: TSO/GSO/GRO off on the veth ends, so the wire carries MTU-sized
--   frames; TCP hands its qdiscs, netem and the shaper, its GSO packets all
--   the same (the kernel cuts them after the qdisc), so a netem loss takes
--   a whole one, often 2 segments), mtu_bytes = 68..65535 (default the veth default 1500), ipv6 = bool
--   (default false: also fd00:X:Y::1/64 and ::2/64), prefix = string (namespace
--   name prefix, default "qoslab"), bottleneck = "host"|"router" (default "host":
--   the shaper and netem on each end's own egress; "router": a third namespace
--   routes between client and server, IPv4 (and IPv6 with ipv6), and the shaper and
--   netem sit on its egress towards the server (rate_bps, impair) and towards the
--   client (rate_bps, reverse_impair), so a TCP sender's queue limits (TCP Small
--   Queues) do not shorten the bottleneck's queue; addresses as in the module's picture),
--   backend = "auto"|"netem"|"link" (default "auto": the process default that
--   qoslab run/demo --backend sets (set_default_backend), else "netem" when
--   the kernel has sch_netem and "link" when it has not, for every testbed:
--   IPv6 and a router too). "netem": impairments are kernel netem
--   qdiscs on the veth ends; on a kernel without sch_netem such a testbed is
--   still built (the veths and the shaper need no netem: a shaped veth path,
--   as the router testbed's specs use), and an impairment returns ENOTSUP
--   saying why (for opts.impair the creation returns it, after removing
--   what it made; later, tb:impair does): a testbed to impair there takes "auto" or
--   "link"; "link": no veth, the client and server namespaces are joined
--   by qoslab.link.impair_link (TUN devices qltun-c and qltun-s, point-to-point
--   addresses client_addr and server_addr, with ipv6 also client_addr6 and
--   server_addr6 /64 on the devices), which impairs both directions natively
--   where the kernel has no sch_netem; the shaper sits on the TUN devices, before
--   the link's delay; with bottleneck = "router" the link joins the client
--   (qltun-c) and the router (qltun-r, router_client_ifname), the server
--   hangs off the router by a veth pair, and the shaper sits on the router's
--   two egresses (see the module's picture); the link takes TCP's GSO
--   packets whole (its gso), as netem takes them at its qdisc, so that a loss,
--   a limit slot and a rate's transmission time count the same units; limit_packets = "auto" follows
--   netem's limit rule at the shaper's rate (else 1 Gbit/s))}`
-- @treturn qoslab.Testbed with fields `client_netns`, `server_netns`,
--   `client_ifname`, `server_ifname`, `client_addr`, `server_addr` (IPv4 without
--   prefix length), `client_addr6`, `server_addr6` (with ipv6), `rate_bps`, `shape`,
--   `bottleneck`, `backend` (the one used: "netem" or "link"); with a router also
--   `router_netns`, `router_client_ifname`,
--   `router_server_ifname` (its ends towards client and server),
--   `router_client_addr`, `router_server_addr` (and `..._addr6` with ipv6);
--   and methods `:impair(spec[, "forward"|"reverse"])`, `:get()`, `:stats()`, `:close()`;
--   to-be-closed
-- @return or nil, message, code ("EPERM" when not root, "ENOTSUP" from netem
--   when the kernel lacks sch_netem, ...) after removing whatever was made
-- @raise on unknown keys, wrong types, values out of range, shape or
--   burst_bytes without rate_bps, a shaper the links cannot take (qoslab.shape's rules on
--   the spec the testbed builds, against the links' MTU: e.g. a rate whose
--   default 20 ms queue exceeds 4 GiB, above about 1.7e12, or below 440 for
--   the default burst; a burst below the MTU), mtu_bytes below 1280 with ipv6
--   (`"qoslab.testbed: opts.<field>: ..."`; an impairment's
--   field as `opts.impair.<field>`), at the caller's line, before anything is
--   made; the rules are the binding's (`core.testbed_check`, and
--   `core.netem_check` for the impairments)
-- @usage local tb <close> = assert(testbed{rate_bps = 1e9, impair = {delay_ms = 50}})
function M.testbed(opts)
  opts = opts or {}
  -- Every rule of these options is the binding's (core.testbed_check);
  -- raised at the caller's line.
  local tbo = check.call(2, core.testbed_check, opts)
  local rate, kind, burst = tbo.rate_bps, tbo.shape, tbo.burst_bytes
  local offloads, mtu, ipv6, prefix = tbo.offloads, tbo.mtu_bytes, tbo.ipv6, tbo.prefix
  local routed = tbo.bottleneck == 'router'
  if not is_empty(opts.impair) then check_impair(CTX, 'opts.impair', opts.impair) end
  if not is_empty(opts.reverse_impair) then
    check_impair(CTX, 'opts.reverse_impair', opts.reverse_impair)
  end
  local backend, why_netem = resolve_backend(tbo)
  local use_link = backend == 'link'
  local base = netns.unique_name(prefix)
  counter = counter + 1
  local pid = netns._pid()
  local x, y = pid % 250 + 1, counter % 256
  local tb = setmetatable({
    client_netns = base .. '-c', server_netns = base .. '-s',
    -- veth names are per namespace, but are created from the caller's
    -- namespace: keep them unique too (15 bytes at most).
    -- (the link's TUN devices are made inside their own namespaces)
    client_ifname = use_link and 'qltun-c' or string.format('qc%dn%d', pid, counter):sub(1, 15),
    server_ifname = use_link and not routed and 'qltun-s'
      or string.format('qs%dn%d', pid, counter):sub(1, 15),
    client_addr = string.format('10.%d.%d.1', x, y),
    server_addr = string.format(routed and '10.%d.%d.129' or '10.%d.%d.2', x, y),
    client_addr6 = ipv6 and string.format(routed and 'fd00:%x:%x:1::1' or 'fd00:%x:%x::1', x, y) or nil,
    server_addr6 = ipv6 and string.format(routed and 'fd00:%x:%x:2::1' or 'fd00:%x:%x::2', x, y) or nil,
    rate_bps = rate, shape = rate and kind or nil, bottleneck = tbo.bottleneck,
    backend = backend, _why_netem = why_netem,
    _made = {}, _closed = false,
  }, TB)
  local plen = 24
  if routed then
    plen = 25
    tb.router_netns = base .. '-r'
    tb.router_client_ifname = use_link and 'qltun-r' or string.format('qrc%dn%d', pid, counter):sub(1, 15)
    tb.router_server_ifname = string.format('qrs%dn%d', pid, counter):sub(1, 15)
    tb.router_client_addr = string.format('10.%d.%d.126', x, y)
    tb.router_server_addr = string.format('10.%d.%d.254', x, y)
    tb.router_client_addr6 = ipv6 and string.format('fd00:%x:%x:1::fe', x, y) or nil
    tb.router_server_addr6 = ipv6 and string.format('fd00:%x:%x:2::fe', x, y) or nil
  end
  local ok, err = pcall(function()
    must(netns.add(tb.client_netns))
    tb._made.client_netns = true
    must(netns.add(tb.server_netns))
    tb._made.server_netns = true
    -- each end: interface, namespace, IPv4, IPv6
    local ends
    if use_link then
      for _, ns in ipairs { tb.client_netns, tb.server_netns } do
        must(link.set('lo', { up = true, netns = ns }))
      end
      -- the link's far end: the server, or the router (the server then
      -- hangs off the router by a veth pair, as in a veth router testbed)
      local b_ns, b_if, b_addr, b_addr6 = tb.server_netns, tb.server_ifname, tb.server_addr,
        tb.server_addr6
      if routed then
        must(netns.add(tb.router_netns))
        tb._made.router_netns = true
        b_ns, b_if, b_addr, b_addr6 = tb.router_netns, tb.router_client_ifname,
          tb.router_client_addr, tb.router_client_addr6
      end
      tb._link = must(link.impair_link { a_netns = tb.client_netns, b_netns = b_ns,
        a_ifname = tb.client_ifname, b_ifname = b_if,
        a_addr = tb.client_addr, b_addr = b_addr, mtu_bytes = mtu,
        -- netem's unit: TCP builds GSO packets whatever the offloads (they
        -- are cut after the qdisc), so netem drops and delays them whole
        gso = true,
        forward = not is_empty(opts.impair) and link_spec(tb, opts.impair) or nil,
        reverse = not is_empty(opts.reverse_impair) and link_spec(tb, opts.reverse_impair) or nil })
      if ipv6 then
        -- IPv6 on the TUN devices: the prefix's route is on the device, no
        -- neighbour discovery (a TUN has no link layer), no DAD (addr_add)
        must(link.addr_add(tb.client_ifname, tb.client_addr6 .. '/64', { netns = tb.client_netns }))
        must(link.addr_add(b_if, b_addr6 .. '/64', { netns = b_ns }))
      end
      ends = {}
      if routed then
        must(link.add_veth { name = tb.server_ifname, peer = tb.router_server_ifname,
          netns = tb.server_netns, peer_netns = tb.router_netns })
        tb._made.veth2 = true
        ends = { { tb.router_server_ifname, tb.router_netns, tb.router_server_addr, tb.router_server_addr6 },
                 { tb.server_ifname, tb.server_netns, tb.server_addr, tb.server_addr6 } }
      end
    elseif routed then
      must(netns.add(tb.router_netns))
      tb._made.router_netns = true
      must(link.add_veth { name = tb.client_ifname, peer = tb.router_client_ifname,
        netns = tb.client_netns, peer_netns = tb.router_netns })
      tb._made.veth = true
      must(link.add_veth { name = tb.server_ifname, peer = tb.router_server_ifname,
        netns = tb.server_netns, peer_netns = tb.router_netns })
      tb._made.veth2 = true
      ends = { { tb.client_ifname, tb.client_netns, tb.client_addr, tb.client_addr6 },
               { tb.router_client_ifname, tb.router_netns, tb.router_client_addr, tb.router_client_addr6 },
               { tb.router_server_ifname, tb.router_netns, tb.router_server_addr, tb.router_server_addr6 },
               { tb.server_ifname, tb.server_netns, tb.server_addr, tb.server_addr6 } }
    else
      must(link.add_veth { name = tb.client_ifname, peer = tb.server_ifname,
        netns = tb.client_netns, peer_netns = tb.server_netns })
      tb._made.veth = true
      ends = { { tb.client_ifname, tb.client_netns, tb.client_addr, tb.client_addr6 },
               { tb.server_ifname, tb.server_netns, tb.server_addr, tb.server_addr6 } }
    end
    local lo_up = {}
    for _, s in ipairs(ends) do
      local ifname, ns, a4, a6 = s[1], s[2], s[3], s[4]
      local o = { netns = ns }
      if not lo_up[ns] then
        must(link.set('lo', { up = true, netns = ns }))
        lo_up[ns] = true
      end
      if not offloads then
        must(link.offloads(ifname, { tso = false, gso = false, gro = false }, o))
      end
      must(link.set(ifname, { up = true, mtu_bytes = mtu, netns = ns }))
      must(link.addr_add(ifname, a4 .. '/' .. plen, o))
      if a6 then must(link.addr_add(ifname, a6 .. '/64', o)) end
      -- A router solicits neighbours for forwarded packets from a link-local
      -- address; the kernel's own is tentative for a second or two (DAD),
      -- which would hold the first forwarded packets that long.
      if a6 and ns == tb.router_netns then must(link.addr_add(ifname, 'fe80::fe/64', o)) end
    end
    if routed then
      must(link.forwarding(true, { netns = tb.router_netns, ipv6 = ipv6 }))
      must(link.route_add('default', tb.router_client_addr, { netns = tb.client_netns }))
      must(link.route_add('default', tb.router_server_addr, { netns = tb.server_netns }))
      if ipv6 then
        must(link.route_add('default', tb.router_client_addr6, { netns = tb.client_netns }))
        must(link.route_add('default', tb.router_server_addr6, { netns = tb.server_netns }))
      end
    end
    if rate then
      tb._shape_spec = { kind = kind, rate_bps = rate, burst_bytes = burst }
      local fi, fns = side(tb, 'forward')
      local ri, rns = side(tb, 'reverse')
      local c = must(shape.apply(fi, tb._shape_spec, { netns = fns }))
      local s = must(shape.apply(ri, tb._shape_spec, { netns = rns }))
      tb._client_parent, tb._server_parent = c.netem_parent, s.netem_parent
    end
    if use_link then
      -- the link was made with them: record them for :get()
      tb._impair_fwd = not is_empty(opts.impair) and core.netem_normalize(link_spec(tb, opts.impair)) or nil
      tb._impair_rev = not is_empty(opts.reverse_impair)
        and core.netem_normalize(link_spec(tb, opts.reverse_impair)) or nil
    else
      if not is_empty(opts.impair) then set_impair(tb, opts.impair, 'forward') end
      if not is_empty(opts.reverse_impair) then set_impair(tb, opts.reverse_impair, 'reverse') end
    end
  end)
  if not ok then
    tb:close()
    if type(err) == 'table' and err.qoslab_fail then return nil, err.msg, err.code end
    error(err, 0)
  end
  open[tb] = counter
  return tb
end

--- The testbeds of this process that are open now (made and not closed), in
-- the order they were made: what `qoslab.meta.run_meta` records as the path.
-- @treturn {qoslab.Testbed,...}
-- @usage for _, tb in ipairs(testbed.open_testbeds()) do print(tb) end
function M.open_testbeds()
  local list = {}
  for tb in pairs(open) do
    if not tb._closed then list[#list + 1] = tb end
  end
  table.sort(list, function(a, b) return open[a] < open[b] end)
  return list
end

-- For qoslab.traffic: a function that returns nil, or the failure
-- (message, "ELINKFAILED") of the link of the open testbed with a namespace
-- ns; nil when no such testbed has a link. A test run in a testbed's
-- namespace asks it before it starts and while it runs.
function M._link_watch(ns)
  if ns == nil then return nil end
  for tb in pairs(open) do
    if tb._link and not tb._closed and (tb.client_netns == ns or tb.server_netns == ns) then
      return function() return link_failure(tb) end
    end
  end
  return nil
end

--- Change (or remove) the impairment between runs.
-- With a rate limit, netem is applied at the shaper's `netem_parent` and
-- removed by `qoslab.shape.reset_child` (the shaper's default child comes
-- back, atomically); without one, netem is the root qdisc and
-- `qoslab.netem.clear` removes it.
-- @tparam table|nil spec a `qoslab.netem` spec; nil or `{}` removes the impairment
-- @tparam[opt] string direction "forward" (client → server, default) or "reverse"
-- @return true, or nil, message, code from qoslab.netem ("ELINKFAILED" when
--   the testbed's link failed: it forwards nothing, impaired or not)
-- @raise at the caller's line: when direction is not one of those, the
--   testbed is closed, spec is bad, or a schedule (`tb:schedule`) still runs
--   on the direction (`"qoslab.Testbed:impair: the forward direction still
--   runs a schedule (...): stop it first (s:stop()), or wait until it ends
--   (s:wait())"`: its next step would replace the change, and its `attach`
--   would record its own spec); once it finished or was stopped, `impair`
--   works again
-- @usage tb:impair({delay_ms = 100, loss_pct = 1})
function TB:impair(spec, direction)
  self_check(self, 'impair')
  direction = check.enum('qoslab.Testbed:impair', 'direction', direction,
    { 'forward', 'reverse' }, 'forward')
  if spec ~= nil then check.table('qoslab.Testbed:impair', 'spec', spec) end
  if self._closed then error('qoslab.Testbed:impair: the testbed is closed', 2) end
  if not is_empty(spec) then check_impair('qoslab.Testbed:impair', 'spec', spec) end
  require('qoslab.schedule')._refuse_testbed('qoslab.Testbed:impair', self, direction, 2)
  local ok, err = pcall(set_impair, self, spec, direction)
  if ok then return true end
  if type(err) == 'table' and err.qoslab_fail then return nil, err.msg, err.code end
  error(err, 0)
end

-- The spec in force on a direction of the link after schedule s's changes,
-- given the spec n that took hold at the monotonic time at: the latest of
-- them (by the time each took hold), and its time.
local function after_schedule(s, n, at)
  for i, c in ipairs(s:changes()) do
    local t = c.ok and c.actual_s and s._t0 + c.actual_s
    if t and t >= at then
      n, at = not is_empty(s._wires[i]) and core.netem_normalize(s._wires[i]) or nil, t
    end
  end
  return n, at
end

-- A schedule done, forgotten by the testbed: on the link, its last change
-- becomes the record of the spec in force (when it came after :impair's);
-- a netem holds its own.
local function retire(tb, s)
  if not tb._link or not s._t0 then return end
  local d = s._direction
  local key = d == 'forward' and '_impair_fwd' or '_impair_rev'
  tb._impair_at = tb._impair_at or {}
  tb[key], tb._impair_at[d] = after_schedule(s, tb[key], tb._impair_at[d] or -math.huge)
end

--- Change the impairment over time while tests run: steps applied at their
-- times by a native thread (`qoslab.schedule.testbed` documents it all).
-- Each direction runs one schedule at a time: while one runs, another on
-- its direction is refused (stop it with `s:stop()`), and so is `tb:impair`
-- on that direction; one that finished or
-- was stopped is forgotten, its last step staying in force (`tb:impair {}`
-- removes it).
-- @tparam table|string steps `{{at_s = 0, delay_ms = 20}, {at_s = 5,
--   delay_ms = 200, loss_pct = 1}, ...}` or a CSV trace's path
-- @tparam[opt] table opts `direction` = "forward" | "reverse", `quiet`
--   (boolean)
-- @treturn table the running schedule (`:attach(res)` puts its changes in a result)
-- @return or nil, message, CODE ("ELINKFAILED" when the testbed's link
--   failed; with backend "link" a step's `limit_packets = "auto"` is sized as
--   `:impair` sizes it)
-- @raise at the caller's line: a closed testbed, bad opts, a bad step
--   (`"qoslab.Testbed:schedule: steps[2].at_s: expected ..."`), a schedule
--   still running on the direction
-- @usage local s = tb:schedule{{at_s = 0, delay_ms = 10}, {at_s = 2, delay_ms = 100}}
function TB:schedule(steps, opts)
  self_check(self, 'schedule')
  if self._closed then error('qoslab.Testbed:schedule: the testbed is closed', 2) end
  -- level 2 from the schedule's body: this method's caller
  local s, msg, code = require('qoslab.schedule')._testbed(2, self, steps, opts,
    function(direction) return side(self, direction) end,
    { spec = function(spec) return link_spec(self, spec) end,
      failure = function() return link_failure(self) end,
      retire = function(old) retire(self, old) end })
  -- a netem the schedule made or replaced is the testbed's to remove
  -- (tb:impair {}) and to read back (tb:get)
  if s and not self._link then
    self[s._direction == 'forward' and '_impair_fwd' or '_impair_rev'] = true
  end
  return no_netem(self, s, msg, code)
end

-- The spec a direction of the link runs now: the latest of what :impair set
-- and what a schedule's steps applied (by the monotonic time each took hold).
local function current_link_spec(tb, direction)
  local n = tb[direction == 'forward' and '_impair_fwd' or '_impair_rev']
  local at = tb._impair_at and tb._impair_at[direction] or -math.huge
  for _, s in ipairs(tb._schedules or {}) do
    if s._direction == direction and s._t0 then n, at = after_schedule(s, n, at) end
  end
  return n
end

--- Read the rate limits and impairments back from the kernel.
-- @treturn table `{client = {shape = S, impair = N}, server = {shape = S,
--   impair = N}}`: S as `qoslab.shape.get` (nil without a rate limit), N as
--   `qoslab.netem.get` at the place `:impair` uses (nil without an impairment;
--   the client's is `impair`, the server's `reverse_impair`; on the native
--   link the spec in force: the latest of `:impair`'s and a schedule's step)
-- @return or nil, message, code (those of `qoslab.shape.get` and
--   `qoslab.netem.get`: "ENOENT" when a namespace of the testbed was deleted
--   behind its back, "ENODEV" when a device was, "EPROTO")
-- @raise when the testbed is closed
-- @usage print(tb:get().client.shape.rate_bps, tb:get().client.impair.delay_ms)
function TB:get()
  self_check(self, 'get')
  if self._closed then error('qoslab.Testbed:get: the testbed is closed', 2) end
  local out = {}
  for _, d in ipairs { 'forward', 'reverse' } do
    local ifname, ns, parent = side(self, d)
    local s, msg, code = shape.get(ifname, { netns = ns })
    if s == nil and msg then return nil, msg, code end
    local n
    if self._link then
      n = current_link_spec(self, d)
    elseif self[d == 'forward' and '_impair_fwd' or '_impair_rev'] then
      n, msg, code = netem().get(ifname, { netns = ns, parent = parent })
      if n == nil and msg then return nil, msg, code end
    end
    out[d == 'forward' and 'client' or 'server'] = { shape = s or nil, impair = n or nil }
  end
  return out
end

--- Qdisc counters of both directions' bottleneck: each end's egress, or
-- with a router its egress towards the server (`client`: the forward
-- direction's) and towards the client (`server`: the reverse direction's).
-- With backend = "link" each list ends with the link's direction (forward in
-- `client`, reverse in `server`): `{kind = "link", handle = "link", parent =
-- "link"}`, the qdisc fields (`qlen_packets` = the link's backlog,
-- `overlimits`, `requeues` 0) and `drops_by_reason = {loss =, limit =, memory =}`,
-- `duplicated_packets`, `reordered_packets`, `corrupted_packets`,
-- `ce_marked_packets`, `queue_delay_mean_ms`, `queue_delay_max_ms`,
-- `loss_bursts`, `by_protocol` (each transport's arrivals and drops),
-- `over_budget` (false, or the memory budget's message, with
-- `over_budget_code`), `failed` (false, or why the link stopped, with
-- `failed_code`: see `qoslab.link.impair_link` and the results manual).
-- @treturn table `{client = {qdisc,...}, server = {qdisc,...}}` as `qoslab.shape.stats`
-- @return or nil, message, code (those of `qoslab.shape.stats`: "ENOENT" when a
--   namespace of the testbed was deleted behind its back, "ENODEV" when a
--   device was; but a failed link's device is no error: its side lists only
--   the link's entry, with `failed`)
-- @raise when the testbed is closed
-- @usage for _, q in ipairs(tb:stats().client) do print(q.kind, q.drops) end
function TB:stats()
  self_check(self, 'stats')
  if self._closed then error('qoslab.Testbed:stats: the testbed is closed', 2) end
  local fi, fns = side(self, 'forward')
  local ri, rns = side(self, 'reverse')
  local failed = link_failure(self) ~= nil
  local c, msg, code = shape.stats(fi, { netns = fns })
  -- a failed link's device may be gone (deleted under it): its qdiscs
  -- with it, but the link's own entry says what happened
  if not c and not failed then return nil, msg, code end
  local s
  s, msg, code = shape.stats(ri, { netns = rns })
  if not s and not failed then return nil, msg, code end
  c, s = c or {}, s or {}
  if self._link then
    local st = self._link:stats()
    for _, x in ipairs { { c, st.forward }, { s, st.reverse } } do
      local d = x[2]
      x[1][#x[1] + 1] = { kind = 'link', handle = 'link', parent = 'link', bytes = d.bytes,
        packets = d.packets, drops = d.drops, overlimits = 0, requeues = 0,
        backlog_bytes = d.backlog_bytes, qlen_packets = d.backlog_packets,
        drops_by_reason = d.drops_by_reason, duplicated_packets = d.duplicated_packets,
        reordered_packets = d.reordered_packets, corrupted_packets = d.corrupted_packets,
        ce_marked_packets = d.ce_marked_packets, queue_delay_mean_ms = d.queue_delay_mean_ms,
        queue_delay_max_ms = d.queue_delay_max_ms, loss_bursts = d.loss_bursts,
        by_protocol = d.by_protocol, over_budget = d.over_budget,
        over_budget_code = d.over_budget_code, failed = st.failed,
        failed_code = st.failed_code }
    end
  end
  return { client = c, server = s }
end

--- Remove everything the testbed made (qdiscs, veth pairs, namespaces).
-- Idempotent; also `__close` and `__gc`. Removal is best effort: a piece
-- that is already gone is not an error.
-- @treturn boolean true
-- @usage tb:close()
function TB:close()
  self_check(self, 'close')
  if self._closed then return true end
  self._closed = true
  open[self] = nil
  local m = self._made
  for _, s in ipairs(self._schedules or {}) do s:stop() end
  if self._link then self._link:close() end
  -- Deleting the veth first removes both ends (and their qdiscs) at once
  -- and synchronously; deleting a namespace frees its devices only when the
  -- kernel's namespace cleanup runs.
  if m.veth then link.delete(self.client_ifname, { netns = self.client_netns }) end
  if m.veth2 then link.delete(self.server_ifname, { netns = self.server_netns }) end
  -- (a namespace made just before an interruption error has no _made mark:
  -- netns knows it was made here)
  for _, k in ipairs { 'router_netns', 'server_netns', 'client_netns' } do
    local name = self[k]
    if name and (m[k] or netns._made_here(name)) then netns.delete(name) end
  end
  return true
end

TB.__close = TB.close
TB.__gc = TB.close

function TB:__tostring()
  return string.format('qoslab.Testbed (%s %s %s <-> %s%s %s %s%s)%s',
    self.client_netns, self.client_ifname, self.client_addr,
    self.router_netns and ('router ' .. self.router_netns .. ' <-> ') or '',
    self.server_netns, self.server_ifname, self.server_addr,
    self.rate_bps and string.format(', %s %.0f bit/s', self.shape, self.rate_bps) or '',
    self._closed and ' closed' or '')
end

setmetatable(M, { __call = function(_, opts) return M.testbed(opts) end })

return M
