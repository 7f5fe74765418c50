/*
 * netem.c - Lua binding of csrc/core/netem.h and csrc/core/ifb.h. The public
 * API and its documentation are in lua/qoslab/netem.lua; these functions
 * convert (spec table <-> ql_netem_spec) and hold the one check of every
 * qoslab.netem argument: keys and types here, ranges and cross-field rules
 * in the core (ql_netem_validate, ql_netem_where_check). netem_check runs
 * them all without the kernel, for the Lua layer to raise at its caller.
 *
 * core.netem_check(ctx, mode, ifname, spec, opts)
 *     -> canonical spec|false, opts with defaults, advice list
 *                                           (raises; see l_check)
 * core.netem_normalize(spec[, ctx])            -> canonical spec table
 * core.netem_apply(ifname, spec, netns, parent, handle[, ctx])
 *     -> true, was_netem, other_kind|nil, spec read back|false
 *      | nil, msg, code   (what was there before and is there after, from
 *                          the same socket: see ql_netem_apply_checked)
 * core.netem_get(ifname, netns, parent)        -> spec, stats, handle
 *                                              | false, other_kind|nil
 *                                              | nil, msg, code
 * core.netem_clear(ifname, netns, parent)      -> removed | nil, msg, code
 * core.netem_raw(spec)                         -> wire values (for tests)
 * core.link_speed_mbps(ifname, netns)          -> integer | false
 * core.ifb_name(ifname, netns)                 -> name | nil, msg, code
 * core.ifb_attach(ifname, ifb, src, netns)     -> created | nil, msg, code
 * core.ifb_detach(ifname, ifb, netns)          -> removed | nil, msg, code
 * core.link_exists(name, netns)                -> bool | nil, msg, code
 * core.NETEM_SPEC_KEYS                         -> the spec's keys, a list
 */
#include <errno.h>
#include <linux/pkt_sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ifb.h"
#include "../core/netem.h"
#include "../core/netem_advice.h"
#include "../core/netns.h"
#include "bind.h"

#define CTX_APPLY "qoslab.netem.apply"
#define CTX_CLEAR "qoslab.netem.clear"

static const char *const spec_keys[] = {
	"delay_ms", "jitter_ms", "delay_corr_pct", "distribution",
	"loss_pct", "loss_corr_pct", "loss_state", "loss_gemodel",
	"duplicate_pct", "duplicate_corr_pct",
	"reorder_pct", "reorder_corr_pct", "reorder_gap_packets",
	"corrupt_pct", "corrupt_corr_pct",
	"rate_bps", "rate_packet_overhead_bytes", "rate_cell_bytes",
	"rate_cell_overhead_bytes", "slot", "ecn", "limit_packets", "seed",
	"keep_order", NULL,
};
static const char *const state_keys[] = {
	"p13_pct", "p31_pct", "p32_pct", "p23_pct", "p14_pct", NULL,
};
static const char *const ge_keys[] = {
	"p_pct", "r_pct", "one_minus_h_pct", "one_minus_k_pct", NULL,
};
static const char *const slot_keys[] = {
	"min_delay_ms", "max_delay_ms", "packets", "bytes", "distribution",
	"delay_ms", "jitter_ms", NULL,
};
static const char *const dist_names[] = {
	"uniform", "normal", "pareto", "paretonormal", "experimental", NULL,
};

/* Raise a core usage error with the function name in front. */
static int usage_fail(lua_State *L, const char *ctx, const ql_err *e)
{
	return luaL_error(L, "%s: %s", ctx, e->msg);
}

/* A netns argument at idx: none/nil gives NULL; "" and bad names raise. */
static const char *opt_netns(lua_State *L, int idx, const char *ctx)
{
	const char *ns = qlb_opt_arg_string(L, idx, ctx, "opts.netns", NULL);
	ql_err e;
	if (ns && ql_netns_check_name("opts.netns", ns, &e) < 0)
		usage_fail(L, ctx, &e);
	return ns;
}

/* (ifname, netns) at 1, 2. */
static void read_dev(lua_State *L, const char *ctx, const char **ifname, const char **netns)
{
	*ifname = qlb_check_string(L, 1, ctx, "ifname", NULL);
	*netns = opt_netns(L, 2, ctx);
}

static int opt_pct(lua_State *L, int idx, const char *ctx, const char *prefix,
		   const char *key, uint32_t *out)
{
	double v;
	if (!qlb_opt_number(L, idx, ctx, prefix, key, 0, 100, &v))
		return 0;
	*out = ql_netem_pct_to_frac32(v);
	return 1;
}

static int opt_ms(lua_State *L, int idx, const char *ctx, const char *prefix,
		  const char *key, double max_ms, int64_t *out)
{
	double v;
	if (!qlb_opt_number(L, idx, ctx, prefix, key, 0, max_ms, &v))
		return 0;
	*out = (int64_t)llround(v * 1e6);
	return 1;
}

/*
 * Read a distribution (name or table of integers) at t[key] into a new
 * userdata buffer left on the stack. Returns the number of entries, 0 for
 * none/"uniform".
 */
static size_t read_dist(lua_State *L, int idx, const char *ctx, const char *field,
			const char *key, const int16_t **out)
{
	*out = NULL;
	int t = lua_getfield(L, idx, key);
	if (t == LUA_TNIL) {
		lua_pop(L, 1);
		return 0;
	}
	size_t n = 0;
	if (t == LUA_TSTRING) {
		size_t len;
		const char *name = lua_tolstring(L, -1, &len);
		int known = 0;
		for (const char *const *d = dist_names; *d && strlen(name) == len; d++)
			known |= strcmp(*d, name) == 0;
		if (!known)
			qlb_field_error(L, ctx, field,
					"\"uniform\", \"normal\", \"pareto\", \"paretonormal\", \"experimental\" or a table of integers",
					-1);
		lua_pop(L, 1);
		if (strcmp(name, "uniform") == 0)
			return 0;
		int16_t *buf = lua_newuserdatauv(L, QL_NETEM_DIST_MAX * sizeof *buf, 0);
		ql_err e;
		if (ql_netem_load_dist(name, buf, QL_NETEM_DIST_MAX, &n, &e) < 0)
			luaL_error(L, "%s: %s: %s", ctx, field, e.msg);
		*out = buf;
		return n;
	}
	if (t != LUA_TTABLE)
		qlb_field_error(L, ctx, field, "a distribution name or a table of integers", -1);
	lua_Integer len = luaL_len(L, -1);
	if (len < 1 || len > QL_NETEM_DIST_MAX)
		luaL_error(L, "%s: %s: expected a table of 1..%d integers, got %I entries", ctx,
			   field, QL_NETEM_DIST_MAX, (LUAI_UACINT)len);
	int16_t *buf = lua_newuserdatauv(L, (size_t)len * sizeof *buf, 0);
	for (lua_Integer i = 1; i <= len; i++) {
		lua_geti(L, -2, i);
		int isint = 0;
		lua_Integer v = lua_tointegerx(L, -1, &isint);
		if (!isint || lua_type(L, -1) != LUA_TNUMBER || v < -32768 || v > 32767) {
			const char *f = lua_pushfstring(L, "%s[%I]", field, (LUAI_UACINT)i);
			qlb_field_error(L, ctx, f, "an integer in [-32768, 32767]", -2);
		}
		buf[i - 1] = (int16_t)v;
		lua_pop(L, 1);
	}
	lua_remove(L, -2);  /* the Lua table; the buffer stays */
	*out = buf;
	return (size_t)len;
}

/* Read the fields of spec at idx into s, each checked on its own (the
 * rules between fields are ql_netem_validate's). Buffers for tables are
 * left on the stack (the caller keeps them until the spec has been used). */
static void read_spec_fields(lua_State *L, int idx, const char *ctx, ql_netem_spec *s,
			     int *auto_limit)
{
	idx = lua_absindex(L, idx);
	qlb_check_table(L, idx, ctx, "spec");
	qlb_check_keys(L, idx, ctx, "spec", spec_keys);
	ql_netem_spec_init(s);
	opt_ms(L, idx, ctx, "spec", "delay_ms", 1e9, &s->delay_ns);
	opt_ms(L, idx, ctx, "spec", "jitter_ms", 2147.483647, &s->jitter_ns);
	opt_pct(L, idx, ctx, "spec", "delay_corr_pct", &s->delay_corr_frac32);
	opt_pct(L, idx, ctx, "spec", "loss_pct", &s->loss_frac32);
	opt_pct(L, idx, ctx, "spec", "loss_corr_pct", &s->loss_corr_frac32);
	opt_pct(L, idx, ctx, "spec", "duplicate_pct", &s->duplicate_frac32);
	opt_pct(L, idx, ctx, "spec", "duplicate_corr_pct", &s->duplicate_corr_frac32);
	opt_pct(L, idx, ctx, "spec", "reorder_pct", &s->reorder_frac32);
	opt_pct(L, idx, ctx, "spec", "reorder_corr_pct", &s->reorder_corr_frac32);
	opt_pct(L, idx, ctx, "spec", "corrupt_pct", &s->corrupt_frac32);
	opt_pct(L, idx, ctx, "spec", "corrupt_corr_pct", &s->corrupt_corr_frac32);
	lua_Integer iv;
	if (qlb_opt_integer(L, idx, ctx, "spec", "reorder_gap_packets", 0, UINT32_MAX, &iv))
		s->reorder_gap_packets = (uint32_t)iv;
	else if (s->reorder_frac32)
		s->reorder_gap_packets = 1;  /* tc's default: every packet may be reordered */
	double dv;
	if (qlb_opt_number(L, idx, ctx, "spec", "rate_bps", 0, 8.0 * 9.2e18 / 8, &dv)) {
		/* The kernel takes whole bytes/s (64-bit), 0 = no limit: below
		 * 8 bit/s would become 0, no limit at all; above, the rate is
		 * rounded down to whole bytes/s (15 -> 8), as tc does. */
		if (dv > 0 && dv < 8)
			luaL_error(L, "%s: spec.rate_bps: expected 0 (no limit) or at least 8 "
				   "(bits/s; the kernel takes whole bytes/s), got %s", ctx,
				   (lua_pushnumber(L, dv), qlb_describe(L, -1)));
		s->rate_bytes_per_s = (uint64_t)(dv / 8);  /* as tc: bits/s -> bytes/s */
	}
	if (qlb_opt_integer(L, idx, ctx, "spec", "rate_packet_overhead_bytes", INT32_MIN, INT32_MAX, &iv))
		s->packet_overhead_bytes = (int32_t)iv;
	if (qlb_opt_integer(L, idx, ctx, "spec", "rate_cell_bytes", 0, UINT32_MAX, &iv))
		s->cell_size_bytes = (uint32_t)iv;
	if (qlb_opt_integer(L, idx, ctx, "spec", "rate_cell_overhead_bytes", INT32_MIN, INT32_MAX, &iv))
		s->cell_overhead_bytes = (int32_t)iv;
	qlb_opt_boolean(L, idx, ctx, "spec", "ecn", &s->ecn);
	qlb_opt_boolean(L, idx, ctx, "spec", "keep_order", &s->keep_order);
	int is_auto = 0;
	if (lua_getfield(L, idx, "limit_packets") == LUA_TSTRING) {
		size_t len;
		const char *lim = lua_tolstring(L, -1, &len);
		is_auto = len == 4 && strcmp(lim, "auto") == 0;
		if (auto_limit && !is_auto)
			qlb_field_error(L, ctx, "spec.limit_packets",
					"an integer in [1, 4294967295] or \"auto\"", -1);
		if (!auto_limit && is_auto)
			luaL_error(L, "%s: spec.limit_packets: \"auto\" must be resolved by qoslab.netem, got string", ctx);
	}
	lua_pop(L, 1);
	if (auto_limit)
		*auto_limit = is_auto;
	if (!is_auto && qlb_opt_integer(L, idx, ctx, "spec", "limit_packets", 1, UINT32_MAX, &iv))
		s->limit_packets = (uint32_t)iv;
	if (qlb_opt_integer(L, idx, ctx, "spec", "seed", LUA_MININTEGER, LUA_MAXINTEGER, &iv)) {
		s->has_seed = 1;
		s->seed = (uint64_t)iv;  /* the u64 bit pattern */
	}

	if (lua_getfield(L, idx, "loss_state") != LUA_TNIL) {
		int t = lua_absindex(L, -1);
		qlb_check_table(L, t, ctx, "spec.loss_state");
		qlb_check_keys(L, t, ctx, "spec.loss_state", state_keys);
		s->loss_model = QL_NETEM_LOSS_STATE;
		if (!opt_pct(L, t, ctx, "spec.loss_state", "p13_pct", &s->state_p13_frac32))
			luaL_error(L, "%s: spec.loss_state.p13_pct: required", ctx);
		/* tc's defaults for the omitted transition probabilities */
		s->state_p31_frac32 = QL_FRAC32_ONE - s->state_p13_frac32;
		s->state_p23_frac32 = QL_FRAC32_ONE;
		opt_pct(L, t, ctx, "spec.loss_state", "p31_pct", &s->state_p31_frac32);
		opt_pct(L, t, ctx, "spec.loss_state", "p32_pct", &s->state_p32_frac32);
		opt_pct(L, t, ctx, "spec.loss_state", "p23_pct", &s->state_p23_frac32);
		opt_pct(L, t, ctx, "spec.loss_state", "p14_pct", &s->state_p14_frac32);
	}
	lua_pop(L, 1);
	if (lua_getfield(L, idx, "loss_gemodel") != LUA_TNIL) {
		int t = lua_absindex(L, -1);
		qlb_check_table(L, t, ctx, "spec.loss_gemodel");
		qlb_check_keys(L, t, ctx, "spec.loss_gemodel", ge_keys);
		if (s->loss_model != QL_NETEM_LOSS_RANDOM)
			luaL_error(L, "%s: spec.loss_gemodel: cannot be combined with spec.loss_state", ctx);
		s->loss_model = QL_NETEM_LOSS_GEMODEL;
		if (!opt_pct(L, t, ctx, "spec.loss_gemodel", "p_pct", &s->ge_p_frac32))
			luaL_error(L, "%s: spec.loss_gemodel.p_pct: required", ctx);
		s->ge_r_frac32 = QL_FRAC32_ONE;   /* tc: r = 100 % */
		uint32_t one_minus_h = QL_FRAC32_ONE;  /* tc: h = 0 */
		opt_pct(L, t, ctx, "spec.loss_gemodel", "r_pct", &s->ge_r_frac32);
		opt_pct(L, t, ctx, "spec.loss_gemodel", "one_minus_h_pct", &one_minus_h);
		s->ge_h_frac32 = QL_FRAC32_ONE - one_minus_h;
		opt_pct(L, t, ctx, "spec.loss_gemodel", "one_minus_k_pct", &s->ge_k1_frac32);
	}
	lua_pop(L, 1);

	s->dist_len = read_dist(L, idx, ctx, "spec.distribution", "distribution", &s->dist);

	if (lua_getfield(L, idx, "slot") != LUA_TNIL) {
		int t = lua_absindex(L, -1);
		qlb_check_table(L, t, ctx, "spec.slot");
		qlb_check_keys(L, t, ctx, "spec.slot", slot_keys);
		int has_min = opt_ms(L, t, ctx, "spec.slot", "min_delay_ms", 1e9, &s->slot_min_delay_ns);
		if (!opt_ms(L, t, ctx, "spec.slot", "max_delay_ms", 1e9, &s->slot_max_delay_ns) && has_min)
			s->slot_max_delay_ns = s->slot_min_delay_ns;  /* tc: MAX defaults to MIN */
		opt_ms(L, t, ctx, "spec.slot", "delay_ms", 1e9, &s->slot_dist_delay_ns);
		opt_ms(L, t, ctx, "spec.slot", "jitter_ms", 2147.483647, &s->slot_dist_jitter_ns);
		if (qlb_opt_integer(L, t, ctx, "spec.slot", "packets", 1, INT32_MAX, &iv))
			s->slot_max_packets = (int32_t)iv;
		if (qlb_opt_integer(L, t, ctx, "spec.slot", "bytes", 1, INT32_MAX, &iv))
			s->slot_max_bytes = (int32_t)iv;
		s->slot_dist_len = read_dist(L, t, ctx, "spec.slot.distribution", "distribution", &s->slot_dist);
		if (s->slot_dist)
			lua_insert(L, -2);  /* keep the buffer below the slot table */
		if (!has_min && !s->slot_max_delay_ns && !s->slot_dist_delay_ns &&
		    !s->slot_dist_jitter_ns)
			luaL_error(L, "%s: spec.slot: needs min_delay_ms (and max_delay_ms) or distribution with delay_ms/jitter_ms", ctx);
	}
	lua_pop(L, 1);
}

/* Read spec at idx into s: every field, then the rules between them. */
static void read_spec(lua_State *L, int idx, const char *ctx, ql_netem_spec *s,
		      int *auto_limit)
{
	read_spec_fields(L, idx, ctx, s, auto_limit);
	ql_err e;
	if (ql_netem_validate(s, &e) < 0)
		usage_fail(L, ctx, &e);
}

void qlb_netem_read_spec(lua_State *L, int idx, const char *ctx, ql_netem_spec *s)
{
	read_spec(L, idx, ctx, s, NULL);
}

/* changes_fields(table, ctx): read_spec_fields of a copy of changes. */
static int changes_fields(lua_State *L)
{
	ql_netem_spec s;
	memset(&s, 0, sizeof s);
	int auto_limit = 0;
	read_spec_fields(L, 1, lua_tostring(L, 2), &s, &auto_limit);
	return 0;
}

/* The changes of update at idx: known keys, and each value not false (a
 * key turned off; ecn is a boolean anyway) by the rule of its field. The
 * rules between fields wait for the merged spec. */
static void check_changes(lua_State *L, int idx, const char *ctx)
{
	idx = lua_absindex(L, idx);
	qlb_check_keys(L, idx, ctx, "changes", spec_keys);
	lua_newtable(L);
	int copy = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1) &&
		    strcmp(lua_tostring(L, -2), "ecn") != 0) {
			lua_pop(L, 1);
			continue;
		}
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_settable(L, copy);
	}
	lua_pushcfunction(L, changes_fields);
	lua_pushvalue(L, copy);
	lua_pushstring(L, ctx);
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		/* the fields are the caller's changes, not a spec */
		char pat[160];
		snprintf(pat, sizeof pat, "%s: spec.", ctx);
		char rep[160];
		snprintf(rep, sizeof rep, "%s: changes.", ctx);
		luaL_gsub(L, lua_tostring(L, -1), pat, rep);
		lua_error(L);
	}
	lua_settop(L, copy - 1);
}

static void set_pct(lua_State *L, const char *key, uint32_t f, int always)
{
	if (f || always)
		qlb_set_number(L, key, ql_netem_frac32_to_short_pct(f));
}

static void set_ms(lua_State *L, const char *key, int64_t ns)
{
	if (ns)
		qlb_set_number(L, key, (double)ns / 1e6);
}

/*
 * Push the canonical spec table: keys with their default value are left out
 * (limit_packets is always present). dist_idx/slot_dist_idx: stack indices of
 * the distribution values to copy in (0 = none).
 */
static void push_spec(lua_State *L, const ql_netem_spec *s, int dist_idx, int slot_dist_idx)
{
	lua_createtable(L, 0, 8);
	set_ms(L, "delay_ms", s->delay_ns);
	set_ms(L, "jitter_ms", s->jitter_ns);
	set_pct(L, "delay_corr_pct", s->delay_corr_frac32, 0);
	if (dist_idx) {
		lua_pushvalue(L, dist_idx);
		lua_setfield(L, -2, "distribution");
	}
	set_pct(L, "loss_pct", s->loss_frac32, 0);
	set_pct(L, "loss_corr_pct", s->loss_corr_frac32, 0);
	if (s->loss_model == QL_NETEM_LOSS_STATE) {
		lua_createtable(L, 0, 5);
		set_pct(L, "p13_pct", s->state_p13_frac32, 1);
		set_pct(L, "p31_pct", s->state_p31_frac32, 1);
		set_pct(L, "p32_pct", s->state_p32_frac32, 1);
		set_pct(L, "p23_pct", s->state_p23_frac32, 1);
		set_pct(L, "p14_pct", s->state_p14_frac32, 1);
		lua_setfield(L, -2, "loss_state");
	} else if (s->loss_model == QL_NETEM_LOSS_GEMODEL) {
		lua_createtable(L, 0, 4);
		set_pct(L, "p_pct", s->ge_p_frac32, 1);
		set_pct(L, "r_pct", s->ge_r_frac32, 1);
		set_pct(L, "one_minus_h_pct", QL_FRAC32_ONE - s->ge_h_frac32, 1);
		set_pct(L, "one_minus_k_pct", s->ge_k1_frac32, 1);
		lua_setfield(L, -2, "loss_gemodel");
	}
	set_pct(L, "duplicate_pct", s->duplicate_frac32, 0);
	set_pct(L, "duplicate_corr_pct", s->duplicate_corr_frac32, 0);
	set_pct(L, "reorder_pct", s->reorder_frac32, 0);
	set_pct(L, "reorder_corr_pct", s->reorder_corr_frac32, 0);
	if (s->reorder_gap_packets)
		qlb_set_integer(L, "reorder_gap_packets", s->reorder_gap_packets);
	set_pct(L, "corrupt_pct", s->corrupt_frac32, 0);
	set_pct(L, "corrupt_corr_pct", s->corrupt_corr_frac32, 0);
	if (s->rate_bytes_per_s)
		qlb_set_integer(L, "rate_bps", (lua_Integer)(s->rate_bytes_per_s * 8));
	if (s->packet_overhead_bytes)
		qlb_set_integer(L, "rate_packet_overhead_bytes", s->packet_overhead_bytes);
	if (s->cell_size_bytes)
		qlb_set_integer(L, "rate_cell_bytes", s->cell_size_bytes);
	if (s->cell_overhead_bytes)
		qlb_set_integer(L, "rate_cell_overhead_bytes", s->cell_overhead_bytes);
	if (s->slot_min_delay_ns || s->slot_max_delay_ns || s->slot_dist_delay_ns ||
	    s->slot_dist_jitter_ns) {
		lua_createtable(L, 0, 4);
		if (s->slot_min_delay_ns || s->slot_max_delay_ns) {
			qlb_set_number(L, "min_delay_ms", (double)s->slot_min_delay_ns / 1e6);
			qlb_set_number(L, "max_delay_ms", (double)s->slot_max_delay_ns / 1e6);
		}
		set_ms(L, "delay_ms", s->slot_dist_delay_ns);
		set_ms(L, "jitter_ms", s->slot_dist_jitter_ns);
		if (slot_dist_idx) {
			lua_pushvalue(L, slot_dist_idx);
			lua_setfield(L, -2, "distribution");
		}
		if (s->slot_max_packets)
			qlb_set_integer(L, "packets", s->slot_max_packets);
		if (s->slot_max_bytes)
			qlb_set_integer(L, "bytes", s->slot_max_bytes);
		lua_setfield(L, -2, "slot");
	}
	if (s->ecn)
		qlb_set_boolean(L, "ecn", 1);
	if (s->keep_order)
		qlb_set_boolean(L, "keep_order", 1);
	qlb_set_integer(L, "limit_packets", s->limit_packets);
	if (s->has_seed)
		qlb_set_integer(L, "seed", (lua_Integer)s->seed);
}

/* Deep copy of the table at idx (a custom distribution), pushed. */
static void copy_dist(lua_State *L, int idx)
{
	idx = lua_absindex(L, idx);
	if (lua_type(L, idx) != LUA_TTABLE) {
		lua_pushvalue(L, idx);
		return;
	}
	lua_Integer n = luaL_len(L, idx);
	lua_createtable(L, (int)n, 0);
	for (lua_Integer i = 1; i <= n; i++) {
		lua_geti(L, idx, i);
		lua_seti(L, -2, i);
	}
}

/* Push the advice list of a valid spec (ql_netem_advise): a sequence of
 * {code =, field =, message =, kernel_loss_pct =, mean_burst_packets =,
 * changes = {...}} (changes, for netem.update, only with a suggestion). */
static void push_advice(lua_State *L, const ql_netem_spec *s)
{
	ql_netem_advice adv[QL_NETEM_ADVICE_MAX];
	int n = ql_netem_advise(s, adv, QL_NETEM_ADVICE_MAX);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		const ql_netem_advice *a = &adv[i];
		lua_createtable(L, 0, 6);
		qlb_set_string(L, "code", a->code);
		qlb_set_string(L, "field", a->field);
		qlb_set_string(L, "message", a->msg);
		if (strcmp(a->code, "CORRELATED_LOSS") == 0)
			qlb_set_number(L, "kernel_loss_pct", a->kernel_loss_pct);
		if (a->has_gilbert) {
			qlb_set_number(L, "mean_burst_packets", a->mean_burst_packets);
			lua_createtable(L, 0, 3);
			qlb_set_boolean(L, "loss_pct", 0);
			qlb_set_boolean(L, "loss_corr_pct", 0);
			lua_createtable(L, 0, 4);
			set_pct(L, "p_pct", a->ge_p_frac32, 1);
			set_pct(L, "r_pct", a->ge_r_frac32, 1);
			qlb_set_number(L, "one_minus_h_pct", 100);
			qlb_set_number(L, "one_minus_k_pct", 0);
			lua_setfield(L, -2, "loss_gemodel");
			lua_setfield(L, -2, "changes");
		}
		lua_seti(L, -2, i + 1);
	}
}

/* Check the spec at idx and push its canonical table (with auto_limit,
 * limit_packets = "auto" is kept as given), and with advice its advice list
 * above it. Leaves buffers below them. */
static void push_canonical(lua_State *L, int idx, const char *ctx, int allow_auto,
			   int advice)
{
	idx = lua_absindex(L, idx);
	ql_netem_spec s;
	int auto_limit = 0;
	read_spec(L, idx, ctx, &s, allow_auto ? &auto_limit : NULL);
	int dist_idx = 0, slot_dist_idx = 0;
	if (s.dist) {
		lua_getfield(L, idx, "distribution");
		copy_dist(L, -1);
		dist_idx = lua_gettop(L);
	}
	if (s.slot_dist) {
		lua_getfield(L, idx, "slot");
		lua_getfield(L, -1, "distribution");
		copy_dist(L, -1);
		slot_dist_idx = lua_gettop(L);
	}
	push_spec(L, &s, dist_idx, slot_dist_idx);
	if (auto_limit)
		qlb_set_string(L, "limit_packets", "auto");
	if (advice)
		push_advice(L, &s);
}

static int l_normalize(lua_State *L)
{
	const char *ctx = luaL_optstring(L, 2, CTX_APPLY);
	lua_settop(L, 2);
	push_canonical(L, 1, ctx, 0, 0);
	return 1;
}

/* The device argument of the qoslab.netem functions. */
static void check_ifname(lua_State *L, int idx, const char *ctx)
{
	size_t len = 0;
	/* the type first: lua_tolstring would turn a number into a string */
	const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tolstring(L, idx, &len) : NULL;
	if (!s || len == 0 || len > 15 || strlen(s) != len)
		qlb_field_error(L, ctx, "ifname", "a device name of 1..15 characters (no NUL)", idx);
}

static const char *const opt_keys[] = {
	"netns", "parent", "handle", "direction", "ingress_src", "quiet", NULL,
};
static const char *const directions[] = { "egress", "ingress", NULL };

/* Check the opts table at idx (nil = {}) and push it with its defaults:
 * {netns =, parent = "root", handle =, direction = "egress", ingress_src =,
 * quiet = false}. with_handle = 0 where a handle means nothing. */
static void push_opts(lua_State *L, int idx, const char *ctx, int with_handle)
{
	idx = lua_absindex(L, idx);
	if (lua_isnoneornil(L, idx)) {
		lua_newtable(L);
		idx = lua_gettop(L);
	}
	qlb_check_table(L, idx, ctx, "opts");
	qlb_check_keys(L, idx, ctx, "opts", opt_keys);
	ql_netem_where w = { 0 };
	const char *netns = NULL;
	int dir = 0, quiet = 0;
	ql_err e;
	if (qlb_opt_string(L, idx, ctx, "opts", "netns", &netns, NULL) &&
	    ql_netns_check_name("opts.netns", netns, &e) < 0)
		usage_fail(L, ctx, &e);
	qlb_opt_string(L, idx, ctx, "opts", "parent", &w.parent, NULL);
	qlb_opt_string(L, idx, ctx, "opts", "handle", &w.handle, NULL);
	qlb_opt_enum(L, idx, ctx, "opts", "direction", directions, &dir);
	w.ingress = dir == 1;
	if (qlb_opt_string(L, idx, ctx, "opts", "ingress_src", &w.ingress_src, NULL) &&
	    ql_ifb_src_check(w.ingress_src, &e) < 0)
		usage_fail(L, ctx, &e);
	qlb_opt_boolean(L, idx, ctx, "opts", "quiet", &quiet);
	uint32_t parent, handle;
	if (ql_netem_where_check(&w, with_handle, &parent, &handle, &e) < 0)
		usage_fail(L, ctx, &e);
	lua_createtable(L, 0, 6);
	if (netns)
		qlb_set_string(L, "netns", netns);
	qlb_set_string(L, "parent", w.parent ? w.parent : "root");
	if (w.handle)
		qlb_set_string(L, "handle", w.handle);
	qlb_set_string(L, "direction", directions[dir]);
	if (w.ingress_src)
		qlb_set_string(L, "ingress_src", w.ingress_src);
	qlb_set_boolean(L, "quiet", quiet);
}

enum { CHECK_SPEC, CHECK_APPLY, CHECK_TABLE, CHECK_UPDATE, CHECK_TARGET };

/*
 * check(ctx, mode, ifname, spec, opts) -> canonical spec | false, opts | nil,
 *                                         advice (a list, see push_advice)
 * Every rule of the qoslab.netem arguments, without touching the kernel.
 * mode: "spec" (spec alone; limit_packets "auto" kept), "apply" (ifname,
 * spec, opts with handle), "table" (ifname, a spec table not checked
 * further, opts with handle), "update" (ifname, a table named "changes"
 * whose keys and values not false each pass their field's rule, opts with
 * handle), "target" (ifname, opts without handle).
 */
static int l_check(lua_State *L)
{
	static const char *const modes[] = { "spec", "apply", "table", "update", "target", NULL };
	const char *ctx = qlb_check_string(L, 1, "qoslab.netem", "ctx", NULL);
	int mode = luaL_checkoption(L, 2, NULL, modes);
	lua_settop(L, 5);
	if (mode != CHECK_SPEC)
		check_ifname(L, 3, ctx);
	if (mode != CHECK_TARGET)
		qlb_check_table(L, 4, ctx, mode == CHECK_UPDATE ? "changes" : "spec");
	if (mode == CHECK_SPEC)
		lua_pushnil(L);
	else
		push_opts(L, 5, ctx, mode != CHECK_TARGET);
	int opts_idx = lua_gettop(L);
	if (mode == CHECK_UPDATE)
		check_changes(L, 4, ctx);
	if (mode == CHECK_SPEC || mode == CHECK_APPLY) {
		push_canonical(L, 4, ctx, 1, 1);
	} else {
		lua_pushboolean(L, 0);
		lua_newtable(L);
	}
	lua_pushvalue(L, -2);
	lua_pushvalue(L, opts_idx);
	lua_pushvalue(L, -3);
	return 3;
}

/* ifname, netns, parent, handle at first .. first+3. */
static void read_target(lua_State *L, int first, const char *ctx, ql_qdisc_target *t)
{
	t->ifname = qlb_check_string(L, first, ctx, "ifname", NULL);
	t->netns = opt_netns(L, first + 1, ctx);
	ql_netem_where w = { 0 };
	w.parent = qlb_opt_arg_string(L, first + 2, ctx, "opts.parent", NULL);
	w.handle = qlb_opt_arg_string(L, first + 3, ctx, "opts.handle", NULL);
	ql_err e;
	if (ql_netem_where_check(&w, 1, &t->parent, &t->handle, &e) < 0)
		usage_fail(L, ctx, &e);
}

/* apply(ifname, spec, netns, parent, handle[, ctx]) */
static int l_apply(lua_State *L)
{
	const char *ctx = luaL_optstring(L, 6, CTX_APPLY);
	lua_settop(L, 6);
	/* target args moved after the spec so read_target sees them in order */
	lua_pushvalue(L, 1);
	lua_pushvalue(L, 3);
	lua_pushvalue(L, 4);
	lua_pushvalue(L, 5);
	ql_qdisc_target t;
	read_target(L, 7, ctx, &t);
	ql_netem_spec s;
	read_spec(L, 2, ctx, &s, NULL);
	ql_err e;
	int before, after_found;
	char kind[32];
	ql_netem_info after;
	int rc = ql_netem_apply_checked(&t, &s, &before, kind, sizeof kind,
					&after, &after_found, &e);
	if (rc < 0)
		return e.usage ? usage_fail(L, ctx, &e) : qlb_fail(L, &e);
	lua_pushboolean(L, 1);
	lua_pushboolean(L, before);
	if (kind[0])
		lua_pushstring(L, kind);
	else
		lua_pushnil(L);
	if (after_found)
		push_spec(L, &after.spec, 0, 0);
	else
		lua_pushboolean(L, 0);
	return 4;
}

static void push_stats(lua_State *L, const ql_qdisc_stats *st)
{
	lua_createtable(L, 0, 7);
	qlb_set_integer(L, "packets", (lua_Integer)st->packets);
	qlb_set_integer(L, "bytes", (lua_Integer)st->bytes);
	qlb_set_integer(L, "drops", (lua_Integer)st->drops);
	qlb_set_integer(L, "overlimits", (lua_Integer)st->overlimits);
	qlb_set_integer(L, "requeues", (lua_Integer)st->requeues);
	qlb_set_integer(L, "backlog_bytes", (lua_Integer)st->backlog_bytes);
	qlb_set_integer(L, "backlog_packets", (lua_Integer)st->backlog_packets);
}

static int l_get(lua_State *L)
{
	ql_qdisc_target t;
	read_target(L, 1, "qoslab.netem.get", &t);
	ql_netem_info info;
	int found;
	char other[32];
	ql_err e;
	if (ql_netem_get(&t, &info, &found, other, sizeof other, &e) < 0)
		return qlb_fail(L, &e);
	if (!found) {
		lua_pushboolean(L, 0);
		if (other[0])
			lua_pushstring(L, other);
		else
			lua_pushnil(L);
		return 2;
	}
	push_spec(L, &info.spec, 0, 0);
	push_stats(L, &info.stats);
	char h[16];
	snprintf(h, sizeof h, "%x:", TC_H_MAJ(info.handle) >> 16);
	lua_pushstring(L, h);
	return 3;
}

static int l_clear(lua_State *L)
{
	ql_qdisc_target t;
	read_target(L, 1, "qoslab.netem.clear", &t);
	int removed;
	ql_err e;
	if (ql_netem_clear(&t, &removed, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushboolean(L, removed);
	return 1;
}

/* Wire values of a spec (what goes into the message), for tests. */
static int l_raw(lua_State *L)
{
	ql_netem_spec s;
	lua_settop(L, 1);
	read_spec(L, 1, CTX_APPLY, &s, NULL);
	lua_createtable(L, 0, 12);
	qlb_set_integer(L, "loss", s.loss_frac32);
	qlb_set_integer(L, "duplicate", s.duplicate_frac32);
	qlb_set_integer(L, "corrupt", s.corrupt_frac32);
	qlb_set_integer(L, "reorder", s.reorder_frac32);
	qlb_set_integer(L, "delay_ns", s.delay_ns);
	qlb_set_integer(L, "jitter_ns", s.jitter_ns);
	qlb_set_integer(L, "latency_ticks", ql_netem_ns_to_ticks(s.delay_ns));
	qlb_set_integer(L, "rate_bytes_per_s", (lua_Integer)s.rate_bytes_per_s);
	qlb_set_integer(L, "ge_h", s.ge_h_frac32);
	qlb_set_integer(L, "ge_k1", s.ge_k1_frac32);
	qlb_set_integer(L, "dist_len", (lua_Integer)s.dist_len);
	qlb_set_integer(L, "limit", s.limit_packets);
	return 1;
}

static int l_link_speed(lua_State *L)
{
	const char *ifname, *netns;
	read_dev(L, "qoslab.netem.needed_limit", &ifname, &netns);
	int64_t mbps;
	ql_err e;
	if (ql_link_speed_mbps(netns, ifname, &mbps, &e) < 0)
		return qlb_fail(L, &e);
	if (mbps < 0)
		lua_pushboolean(L, 0);
	else
		lua_pushinteger(L, (lua_Integer)mbps);
	return 1;
}

static int l_ifb_name(lua_State *L)
{
	const char *ifname, *netns;
	read_dev(L, CTX_APPLY, &ifname, &netns);
	char name[32];
	ql_err e;
	if (ql_ifb_name(netns, ifname, name, sizeof name, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushstring(L, name);
	return 1;
}

static int l_ifb_attach(lua_State *L)
{
	const char *ifname = qlb_check_string(L, 1, CTX_APPLY, "ifname", NULL);
	const char *ifb = qlb_check_string(L, 2, CTX_APPLY, "ifb", NULL);
	const char *src = qlb_opt_arg_string(L, 3, CTX_APPLY, "opts.ingress_src", NULL);
	const char *netns = opt_netns(L, 4, CTX_APPLY);
	int created;
	ql_err e;
	if (ql_ifb_attach(netns, ifname, ifb, src, &created, &e) < 0)
		return e.usage ? usage_fail(L, CTX_APPLY, &e) : qlb_fail(L, &e);
	lua_pushboolean(L, created);
	return 1;
}

static int l_ifb_detach(lua_State *L)
{
	const char *ifname = qlb_check_string(L, 1, CTX_CLEAR, "ifname", NULL);
	const char *ifb = qlb_check_string(L, 2, CTX_CLEAR, "ifb", NULL);
	const char *netns = opt_netns(L, 3, CTX_CLEAR);
	int removed;
	ql_err e;
	if (ql_ifb_detach(netns, ifname, ifb, &removed, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushboolean(L, removed);
	return 1;
}

static int l_link_exists(lua_State *L)
{
	const char *name, *netns;
	read_dev(L, "qoslab.netem", &name, &netns);
	int exists;
	ql_err e;
	if (ql_link_exists(netns, name, &exists, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushboolean(L, exists);
	return 1;
}

void qlb_open_netem(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "netem_check", l_check },
		{ "netem_normalize", l_normalize },
		{ "netem_apply", l_apply },
		{ "netem_get", l_get },
		{ "netem_clear", l_clear },
		{ "netem_raw", l_raw },
		{ "link_speed_mbps", l_link_speed },
		{ "ifb_name", l_ifb_name },
		{ "ifb_attach", l_ifb_attach },
		{ "ifb_detach", l_ifb_detach },
		{ "link_exists", l_link_exists },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
	/* the spec's keys as a list, for readers that take keys as data (a
	 * CSV trace's header names its columns) */
	lua_newtable(L);
	for (int i = 0; spec_keys[i]; i++) {
		lua_pushstring(L, spec_keys[i]);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "NETEM_SPEC_KEYS");
}
