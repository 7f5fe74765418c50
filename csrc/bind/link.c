/*
 * link.c - Lua binding of csrc/core/netns.h, link.h and shape.h.
 *
 * Registered into qoslab.core (the façades qoslab.netns, qoslab.link and
 * qoslab.shape document the public API; error messages use the façade names):
 *   netns_add(name) / netns_delete(name) -> true | nil, msg, code
 *   netns_exists(name) -> bool;  netns_list() -> { names }
 *   netns_enter(name) -> token | nil, msg, code;  netns_restore(token)
 *   link_add_veth{name=, peer=, netns=, peer_netns=}
 *   link_delete(ifname[, {netns=}]);  link_set(ifname, {up=, mtu_bytes=, netns=})
 *   link_addr_add / link_addr_del(ifname, cidr[, {netns=}])
 *   link_offloads(ifname[, {tso=, gso=, gro=}[, {netns=}]]) -> {tso=, gso=, gro=}
 *   link_info(ifname[, {netns=}]) -> table
 *   route_add(dst, via[, {netns=}]) -> true | nil, msg, code (csrc/core/route.h)
 *   route_forwarding(on[, {netns=, ipv6=}]) -> true | nil, msg, code
 *   netns_check_prefix(ctx, field, prefix) -> true (raises on a bad prefix)
 *   testbed_check(opts) -> opts with defaults (raises; qoslab.testbed's rules)
 *   shape_check(ifname, spec[, {netns=}]) (raises or true) /
 *   shape_apply(ifname, spec[, {netns=}]) / shape_get / shape_clear /
 *   shape_reset_child / qdisc_stats
 */
#include <math.h>
#include <string.h>

#include "../core/link.h"
#include "../core/netns.h"
#include "../core/nl.h"
#include "../core/route.h"
#include "../core/shape.h"
#include "bind.h"

/* Core usage errors name the field; prefix them with the function. */
static int fail(lua_State *L, const char *ctx, const ql_err *e)
{
	if (e->usage) {
		lua_pushfstring(L, "%s: %s", ctx, e->msg);
		return lua_error(L);
	}
	return qlb_fail(L, e);
}

/* A required field is absent: "expected X, got nil". */
static void missing(lua_State *L, const char *ctx, const char *field, const char *expected)
{
	lua_pushnil(L);
	qlb_field_error(L, ctx, field, expected, -1);
}

static int ok(lua_State *L)
{
	lua_pushboolean(L, 1);
	return 1;
}

static const char *arg_string(lua_State *L, int idx, const char *ctx, const char *field)
{
	return qlb_check_string(L, idx, ctx, field, NULL);
}

/* opts table at idx with only "netns" (or none); returns netns or NULL. */
static const char *opt_netns(lua_State *L, int idx, const char *ctx,
			     const char *const *allowed)
{
	static const char *const only_netns[] = { "netns", NULL };
	if (lua_isnoneornil(L, idx))
		return NULL;
	qlb_check_table(L, idx, ctx, "opts");
	qlb_check_keys(L, idx, ctx, "opts", allowed ? allowed : only_netns);
	const char *ns = NULL;
	ql_err e;
	if (qlb_opt_string(L, idx, ctx, "opts", "netns", &ns, NULL) &&
	    ql_netns_check_name("opts.netns", ns, &e) < 0)
		fail(L, ctx, &e);
	return ns;
}

/* ------------------------------------------------------------ netns ---- */

static int l_netns_add(lua_State *L)
{
	ql_err e;
	const char *name = arg_string(L, 1, "qoslab.netns.add", "name");
	if (ql_netns_add(name, &e) < 0)
		return fail(L, "qoslab.netns.add", &e);
	return ok(L);
}

static int l_netns_delete(lua_State *L)
{
	ql_err e;
	const char *name = arg_string(L, 1, "qoslab.netns.delete", "name");
	if (ql_netns_del(name, &e) < 0)
		return fail(L, "qoslab.netns.delete", &e);
	return ok(L);
}

static int l_netns_exists(lua_State *L)
{
	ql_err e;
	const char *name = arg_string(L, 1, "qoslab.netns.exists", "name");
	if (ql_netns_check_name("name", name, &e) < 0)
		return fail(L, "qoslab.netns.exists", &e);
	lua_pushboolean(L, ql_netns_exists(name));
	return 1;
}

static int l_netns_list(lua_State *L)
{
	ql_err e;
	char **v;
	size_t n;
	if (ql_netns_list(&v, &n, &e) < 0)
		return fail(L, "qoslab.netns.list", &e);
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, v[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	ql_netns_list_free(v, n);
	return 1;
}

static int l_netns_enter(lua_State *L)
{
	ql_err e;
	const char *name = arg_string(L, 1, "qoslab.netns.run", "name");
	if (ql_netns_check_name("name", name, &e) < 0)
		return fail(L, "qoslab.netns.run", &e);
	int token;
	if (ql_netns_enter(name, &token, &e) < 0)
		return fail(L, "qoslab.netns.run", &e);
	lua_pushinteger(L, token);
	return 1;
}

static int l_netns_restore(lua_State *L)
{
	ql_err e;
	lua_Integer token = luaL_checkinteger(L, 1);
	if (token < -1 || token > 1 << 30)
		return luaL_error(L, "qoslab.netns.run: bad restore token");
	if (ql_netns_restore((int)token, &e) < 0)
		return fail(L, "qoslab.netns.run", &e);
	return ok(L);
}

/* ------------------------------------------------------------ links ---- */

static int l_add_veth(lua_State *L)
{
	static const char *const keys[] = { "name", "peer", "netns", "peer_netns", NULL };
	const char *ctx = "qoslab.link.add_veth";
	qlb_check_table(L, 1, ctx, "opts");
	qlb_check_keys(L, 1, ctx, "opts", keys);
	ql_veth v = { 0 };
	if (!qlb_opt_string(L, 1, ctx, "opts", "name", &v.name, NULL))
		missing(L, ctx, "opts.name", "a string");
	if (!qlb_opt_string(L, 1, ctx, "opts", "peer", &v.peer, NULL))
		missing(L, ctx, "opts.peer", "a string");
	qlb_opt_string(L, 1, ctx, "opts", "netns", &v.netns, NULL);
	qlb_opt_string(L, 1, ctx, "opts", "peer_netns", &v.peer_netns, NULL);
	ql_err e;
	if (ql_link_check_ifname("opts.name", v.name, &e) < 0 ||
	    ql_link_check_ifname("opts.peer", v.peer, &e) < 0 ||
	    (v.netns && ql_netns_check_name("opts.netns", v.netns, &e) < 0) ||
	    (v.peer_netns && ql_netns_check_name("opts.peer_netns", v.peer_netns, &e) < 0))
		return fail(L, ctx, &e);
	if (ql_link_add_veth(&v, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

static int l_link_delete(lua_State *L)
{
	const char *ctx = "qoslab.link.delete";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	const char *ns = opt_netns(L, 2, ctx, NULL);
	ql_err e;
	if (ql_link_del(ifname, ns, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

#define MTU_MIN 68     /* IPv4's minimum (RFC 791) */
#define MTU_MAX 65535
#define IPV6_MTU_MIN 1280 /* RFC 8200 */
#define VETH_MTU_DEFAULT 1500

static int l_link_set(lua_State *L)
{
	static const char *const keys[] = { "up", "mtu_bytes", "netns", NULL };
	const char *ctx = "qoslab.link.set";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	qlb_check_table(L, 2, ctx, "opts");
	const char *ns = opt_netns(L, 2, ctx, keys);
	int up = -1;
	lua_Integer mtu = 0;
	qlb_opt_boolean(L, 2, ctx, "opts", "up", &up);
	qlb_opt_integer(L, 2, ctx, "opts", "mtu_bytes", MTU_MIN, MTU_MAX, &mtu);
	ql_err e;
	if (ql_link_set(ifname, ns, up, (uint32_t)mtu, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

static int link_addr(lua_State *L, int add)
{
	const char *ctx = add ? "qoslab.link.addr_add" : "qoslab.link.addr_del";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	const char *cidr = arg_string(L, 2, ctx, "addr");
	const char *ns = opt_netns(L, 3, ctx, NULL);
	ql_err e;
	if (ql_link_addr(ifname, ns, cidr, add, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

static int l_addr_add(lua_State *L) { return link_addr(L, 1); }
static int l_addr_del(lua_State *L) { return link_addr(L, 0); }

static int l_route_add(lua_State *L)
{
	const char *ctx = "qoslab.link.route_add";
	const char *dst = arg_string(L, 1, ctx, "dst");
	const char *via = arg_string(L, 2, ctx, "via");
	const char *ns = opt_netns(L, 3, ctx, NULL);
	ql_err e;
	if (ql_route_add(ns, dst, via, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

static int l_route_forwarding(lua_State *L)
{
	static const char *const keys[] = { "netns", "ipv6", NULL };
	const char *ctx = "qoslab.link.forwarding";
	if (!lua_isboolean(L, 1))
		qlb_field_error(L, ctx, "on", "a boolean", 1);
	int on = lua_toboolean(L, 1), ipv6 = 1;
	const char *ns = opt_netns(L, 2, ctx, keys);
	if (!lua_isnoneornil(L, 2))
		qlb_opt_boolean(L, 2, ctx, "opts", "ipv6", &ipv6);
	ql_err e;
	if (ql_route_forwarding(ns, on, ipv6, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

static int l_offloads(lua_State *L)
{
	static const char *const keys[] = { "tso", "gso", "gro", NULL };
	const char *ctx = "qoslab.link.offloads";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	ql_offloads set = { -1, -1, -1 }, now;
	if (!lua_isnoneornil(L, 2)) {
		qlb_check_table(L, 2, ctx, "set");
		qlb_check_keys(L, 2, ctx, "set", keys);
		qlb_opt_boolean(L, 2, ctx, "set", "tso", &set.tso);
		qlb_opt_boolean(L, 2, ctx, "set", "gso", &set.gso);
		qlb_opt_boolean(L, 2, ctx, "set", "gro", &set.gro);
	}
	const char *ns = opt_netns(L, 3, ctx, NULL);
	ql_err e;
	if (ql_link_offloads(ifname, ns, &set, &now, &e) < 0)
		return fail(L, ctx, &e);
	lua_createtable(L, 0, 3);
	qlb_set_boolean(L, "tso", now.tso);
	qlb_set_boolean(L, "gso", now.gso);
	qlb_set_boolean(L, "gro", now.gro);
	return 1;
}

static int l_link_info(lua_State *L)
{
	const char *ctx = "qoslab.link.info";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	const char *ns = opt_netns(L, 2, ctx, NULL);
	ql_err e;
	ql_link_info i;
	if (ql_link_get(ifname, ns, &i, &e) < 0)
		return fail(L, ctx, &e);
	lua_createtable(L, 0, 9);
	qlb_set_string(L, "ifname", ifname);
	qlb_set_integer(L, "ifindex", i.ifindex);
	qlb_set_integer(L, "mtu_bytes", i.mtu_bytes);
	qlb_set_boolean(L, "up", i.up);
	qlb_set_boolean(L, "carrier", i.carrier);
	qlb_set_string(L, "operstate", i.operstate);
	qlb_set_string(L, "kind", i.kind);
	qlb_set_string(L, "address", i.address);
	if (i.speed_mbps >= 0)
		qlb_set_integer(L, "speed_mbps", i.speed_mbps);
	return 1;
}

/* ------------------------------------------------------------ shape ---- */

#define MAX_RATE_BPS 8000000000000000LL /* 8 Pbit/s: bytes/s fits u64 easily */

static void read_spec(lua_State *L, int idx, const char *ctx, ql_shape *s)
{
	static const char *const keys[] = { "kind", "rate_bps", "burst_bytes", "latency_ms",
					    "limit_bytes", "ceil_bps", "cburst_bytes", NULL };
	static const char *const kinds[] = { "tbf", "htb", NULL };
	memset(s, 0, sizeof *s);
	qlb_check_table(L, idx, ctx, "spec");
	qlb_check_keys(L, idx, ctx, "spec", keys);
	int kind;
	if (!qlb_opt_enum(L, idx, ctx, "spec", "kind", kinds, &kind))
		missing(L, ctx, "spec.kind", "\"tbf\" or \"htb\"");
	s->kind = kind == 0 ? QL_SHAPE_TBF : QL_SHAPE_HTB;
	lua_Integer v;
	if (!qlb_opt_integer(L, idx, ctx, "spec", "rate_bps", 8, MAX_RATE_BPS, &v))
		missing(L, ctx, "spec.rate_bps", "an integer in [8, 8000000000000000] (bits/s)");
	s->rate_bytes_per_s = (uint64_t)v / 8;
	if (qlb_opt_integer(L, idx, ctx, "spec", "burst_bytes", 1, UINT32_MAX, &v))
		s->burst_bytes = (uint32_t)v;
	if (qlb_opt_integer(L, idx, ctx, "spec", "limit_bytes", 1, UINT32_MAX, &v))
		s->limit_bytes = (uint32_t)v;
	double ms;
	if (qlb_opt_number(L, idx, ctx, "spec", "latency_ms", 0.001, 4000000.0, &ms))
		s->latency_us = (uint32_t)llround(ms * 1000.0);
	if (qlb_opt_integer(L, idx, ctx, "spec", "ceil_bps", 8, MAX_RATE_BPS, &v))
		s->ceil_bytes_per_s = (uint64_t)v / 8;
	if (qlb_opt_integer(L, idx, ctx, "spec", "cburst_bytes", 1, UINT32_MAX, &v))
		s->cburst_bytes = (uint32_t)v;
	ql_err e;
	if (ql_shape_validate(s, &e) < 0)
		fail(L, ctx, &e);
}

static void push_spec(lua_State *L, const ql_shape *s)
{
	lua_createtable(L, 0, 6);
	qlb_set_string(L, "kind", s->kind == QL_SHAPE_TBF ? "tbf" : "htb");
	qlb_set_integer(L, "rate_bps", (lua_Integer)(s->rate_bytes_per_s * 8));
	qlb_set_integer(L, "burst_bytes", s->burst_bytes);
	if (s->kind == QL_SHAPE_TBF) {
		qlb_set_integer(L, "limit_bytes", s->limit_bytes);
	} else {
		qlb_set_integer(L, "ceil_bps", (lua_Integer)(s->ceil_bytes_per_s * 8));
		qlb_set_integer(L, "cburst_bytes", s->cburst_bytes);
	}
}

static int l_shape_apply(lua_State *L)
{
	const char *ctx = "qoslab.shape.apply";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	ql_shape s, applied;
	read_spec(L, 2, ctx, &s);
	const char *ns = opt_netns(L, 3, ctx, NULL);
	ql_shape_result r;
	ql_err e;
	if (ql_shape_apply(ifname, ns, &s, &r, &applied, &e) < 0)
		return fail(L, ctx, &e);
	char buf[24];
	lua_createtable(L, 0, 4);
	qlb_set_string(L, "kind", s.kind == QL_SHAPE_TBF ? "tbf" : "htb");
	ql_tc_handle_str(r.handle, buf, sizeof buf);
	qlb_set_string(L, "handle", buf);
	ql_tc_handle_str(r.netem_parent, buf, sizeof buf);
	qlb_set_string(L, "netem_parent", buf);
	push_spec(L, &applied);
	lua_setfield(L, -2, "spec");
	return 1;
}

/* shape_check(ifname, spec[, opts]) -> true: every rule shape_apply checks
 * before it needs the device, raised as shape_apply raises them. */
static int l_shape_check(lua_State *L)
{
	const char *ctx = "qoslab.shape.apply";
	arg_string(L, 1, ctx, "ifname");
	ql_shape s;
	read_spec(L, 2, ctx, &s);
	opt_netns(L, 3, ctx, NULL);
	return ok(L);
}

/* The prefix at idx: a string (else "expected a string") that the core's
 * rule takes; a NUL inside fails that rule too, shown as \0. */
static const char *check_prefix(lua_State *L, int idx, const char *ctx, const char *field)
{
	if (lua_type(L, idx) != LUA_TSTRING)
		qlb_field_error(L, ctx, field, "a string", idx);
	size_t len;
	const char *prefix = lua_tolstring(L, idx, &len);
	if (strlen(prefix) != len || ql_netns_check_prefix(field, prefix, NULL) < 0)
		qlb_field_error(L, ctx, field, QL_NETNS_PREFIX_EXPECTED, idx);
	return prefix;
}

/* netns_check_prefix(ctx, field, prefix) -> true: a prefix for generated
 * namespace names (nil is not one). */
static int l_netns_check_prefix(lua_State *L)
{
	const char *ctx = luaL_checkstring(L, 1);
	const char *field = luaL_checkstring(L, 2);
	check_prefix(L, 3, ctx, field);
	return ok(L);
}

/*
 * testbed_check(opts) -> opts with defaults: the rules of qoslab.testbed's
 * own options, with the ranges of the calls they are handed to (shape,
 * link.set); impair and reverse_impair are only required to be tables here
 * (qoslab.netem checks what is in them). Returns {rate_bps =, shape =
 * "tbf", burst_bytes =, offloads = false, mtu_bytes =, ipv6 = false, prefix
 * = "qoslab", bottleneck = "host", backend = "auto"}.
 */
static int l_testbed_check(lua_State *L)
{
	static const char *const keys[] = { "rate_bps", "impair", "reverse_impair", "shape",
					    "offloads", "mtu_bytes", "ipv6", "prefix",
					    "burst_bytes", "bottleneck", "backend", NULL };
	static const char *const kinds[] = { "tbf", "htb", NULL };
	static const char *const bottlenecks[] = { "host", "router", NULL };
	/* "auto" is resolved by qoslab.testbed (kernel netem if the kernel has it) */
	static const char *const backends[] = { "auto", "netem", "link", NULL };
	const char *ctx = "qoslab.testbed";
	lua_settop(L, 1);
	if (lua_isnil(L, 1)) {
		lua_newtable(L);
		lua_replace(L, 1);
	}
	qlb_check_table(L, 1, ctx, "opts");
	qlb_check_keys(L, 1, ctx, "opts", keys);
	lua_Integer rate = 0, burst = 0, mtu = 0;
	int has_rate = qlb_opt_integer(L, 1, ctx, "opts", "rate_bps", 8, MAX_RATE_BPS, &rate);
	int kind = 0, offloads = 0, ipv6 = 0, bottleneck = 0;
	int has_kind = qlb_opt_enum(L, 1, ctx, "opts", "shape", kinds, &kind);
	qlb_opt_enum(L, 1, ctx, "opts", "bottleneck", bottlenecks, &bottleneck);
	int backend = 0;
	qlb_opt_enum(L, 1, ctx, "opts", "backend", backends, &backend);
	int has_burst = qlb_opt_integer(L, 1, ctx, "opts", "burst_bytes", 1, UINT32_MAX, &burst);
	qlb_opt_boolean(L, 1, ctx, "opts", "offloads", &offloads);
	int has_mtu = qlb_opt_integer(L, 1, ctx, "opts", "mtu_bytes", MTU_MIN, MTU_MAX, &mtu);
	qlb_opt_boolean(L, 1, ctx, "opts", "ipv6", &ipv6);
	const char *prefix = "qoslab";
	if (lua_getfield(L, 1, "prefix") != LUA_TNIL) {
		prefix = check_prefix(L, -1, ctx, "opts.prefix");
		lua_pop(L, 1);  /* the table still holds the string */
	} else {
		lua_pop(L, 1);
	}
	static const char *const impairs[] = { "impair", "reverse_impair", NULL };
	for (const char *const *k = impairs; *k; k++) {
		int t = lua_getfield(L, 1, *k);
		if (t != LUA_TNIL && t != LUA_TTABLE)
			qlb_field_error(L, ctx, lua_pushfstring(L, "opts.%s", *k), "a table", -2);
		lua_pop(L, 1);
	}
	/* the shaper's options without a shaper (it comes with rate_bps) */
	if (has_kind && !has_rate)
		return luaL_error(L, "%s: opts.shape: only with opts.rate_bps", ctx);
	if (has_burst && !has_rate)
		return luaL_error(L, "%s: opts.burst_bytes: only with opts.rate_bps", ctx);
	if (ipv6 && has_mtu && mtu < IPV6_MTU_MIN)
		return luaL_error(L, "%s: opts.mtu_bytes: expected at least %d with opts.ipv6 "
				  "(IPv6 needs a link MTU of 1280, RFC 8200), got %d", ctx,
				  IPV6_MTU_MIN, (int)mtu);
	if (has_rate) {
		/* The shaper the testbed will apply on each end, checked by
		 * shape's own rules against the MTU its links will have, under
		 * the testbed's names. */
		static const ql_shape_names names = {
			.kind = "opts.shape", .rate = "opts.rate_bps", .burst = "opts.burst_bytes",
			.ceil = "opts.rate_bps", .cburst = "opts.burst_bytes",
			.limit = "opts.rate_bps", .latency = "opts.rate_bps",
		};
		ql_shape sh = { .kind = kind == 0 ? QL_SHAPE_TBF : QL_SHAPE_HTB,
				.rate_bytes_per_s = (uint64_t)rate / 8,
				.burst_bytes = (uint32_t)burst };
		uint32_t bt, cbt;
		ql_err e;
		if (ql_shape_validate_named(&sh, &names, &e) < 0 ||
		    ql_shape_resolve(&sh, has_mtu ? (uint32_t)mtu : VETH_MTU_DEFAULT,
				     has_mtu ? "the testbed's links as opts.mtu_bytes sets it"
					     : "the testbed's veth links",
				     &names, &bt, &cbt, &e) < 0)
			return fail(L, ctx, &e);
	}
	lua_createtable(L, 0, 9);
	if (has_rate)
		qlb_set_integer(L, "rate_bps", rate);
	qlb_set_string(L, "shape", kinds[kind]);
	if (has_burst)
		qlb_set_integer(L, "burst_bytes", burst);
	qlb_set_boolean(L, "offloads", offloads);
	if (has_mtu)
		qlb_set_integer(L, "mtu_bytes", mtu);
	qlb_set_boolean(L, "ipv6", ipv6);
	qlb_set_string(L, "prefix", prefix);
	qlb_set_string(L, "bottleneck", bottlenecks[bottleneck]);
	qlb_set_string(L, "backend", backends[backend]);
	return 1;
}

static int l_shape_get(lua_State *L)
{
	const char *ctx = "qoslab.shape.get";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	const char *ns = opt_netns(L, 2, ctx, NULL);
	ql_shape s;
	int found;
	ql_err e;
	if (ql_shape_get(ifname, ns, &s, &found, &e) < 0)
		return fail(L, ctx, &e);
	if (!found) {
		lua_pushnil(L);
		return 1;
	}
	push_spec(L, &s);
	return 1;
}

static int l_shape_clear(lua_State *L)
{
	const char *ctx = "qoslab.shape.clear";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	const char *ns = opt_netns(L, 2, ctx, NULL);
	ql_err e;
	if (ql_shape_clear(ifname, ns, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

static int l_shape_reset_child(lua_State *L)
{
	const char *ctx = "qoslab.shape.reset_child";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	const char *ns = opt_netns(L, 2, ctx, NULL);
	ql_err e;
	if (ql_shape_reset_child(ifname, ns, &e) < 0)
		return fail(L, ctx, &e);
	return ok(L);
}

static int l_qdisc_stats(lua_State *L)
{
	const char *ctx = "qoslab.shape.stats";
	const char *ifname = arg_string(L, 1, ctx, "ifname");
	const char *ns = opt_netns(L, 2, ctx, NULL);
	ql_qdisc_stats st[32];
	size_t n;
	ql_err e;
	if (ql_qdisc_stats_get(ifname, ns, st, 32, &n, &e) < 0)
		return fail(L, ctx, &e);
	lua_createtable(L, (int)n, 0);
	char buf[24];
	for (size_t i = 0; i < n; i++) {
		lua_createtable(L, 0, 10);
		qlb_set_string(L, "kind", st[i].kind);
		ql_tc_handle_str(st[i].handle, buf, sizeof buf);
		qlb_set_string(L, "handle", buf);
		ql_tc_handle_str(st[i].parent, buf, sizeof buf);
		qlb_set_string(L, "parent", buf);
		qlb_set_integer(L, "bytes", (lua_Integer)st[i].bytes);
		qlb_set_integer(L, "packets", (lua_Integer)st[i].packets);
		qlb_set_integer(L, "drops", (lua_Integer)st[i].drops);
		qlb_set_integer(L, "overlimits", (lua_Integer)st[i].overlimits);
		qlb_set_integer(L, "requeues", (lua_Integer)st[i].requeues);
		qlb_set_integer(L, "backlog_bytes", (lua_Integer)st[i].backlog_bytes);
		qlb_set_integer(L, "qlen_packets", (lua_Integer)st[i].qlen_packets);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

void qlb_open_link(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "netns_add", l_netns_add },
		{ "netns_delete", l_netns_delete },
		{ "netns_exists", l_netns_exists },
		{ "netns_list", l_netns_list },
		{ "netns_enter", l_netns_enter },
		{ "netns_restore", l_netns_restore },
		{ "link_add_veth", l_add_veth },
		{ "link_delete", l_link_delete },
		{ "link_set", l_link_set },
		{ "link_addr_add", l_addr_add },
		{ "link_addr_del", l_addr_del },
		{ "link_offloads", l_offloads },
		{ "link_info", l_link_info },
		{ "route_add", l_route_add },
		{ "route_forwarding", l_route_forwarding },
		{ "shape_check", l_shape_check },
		{ "netns_check_prefix", l_netns_check_prefix },
		{ "testbed_check", l_testbed_check },
		{ "shape_apply", l_shape_apply },
		{ "shape_get", l_shape_get },
		{ "shape_clear", l_shape_clear },
		{ "shape_reset_child", l_shape_reset_child },
		{ "qdisc_stats", l_qdisc_stats },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}
