/*
 * opts.c - the options-table reader of the binding: a Lua table -> a C
 * options struct, by a core key table (csrc/core/engine/options.h).
 */
#include <math.h>
#include <stdio.h>

#include "bind.h"
#include "../core/engine/engine.h"
#include "../core/engine/options.h"

/*
 * A Lua options table -> the C struct, by the core's key table (options.h):
 * unknown keys, wrong types and given values out of range raise here, in
 * the core's words; the core's validate then checks the struct (strings,
 * cross-field rules) and its message is raised as it is.
 */
static void check_keys(lua_State *L, int idx, const char *ctx, const char *prefix,
		       const ql_opt_desc *t, unsigned skip)
{
	const char *names[64];
	int n = 0;
	for (; t->key && n < 63; t++)
		if (!(t->flags & skip))
			names[n++] = t->key;
	names[n] = NULL;
	/* a key that is no string (opts[1]) is an unknown key like any other */
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING) {
			luaL_Buffer b;
			luaL_buffinit(L, &b);
			for (int i = 0; i < n; i++) {
				if (i)
					luaL_addstring(&b, ", ");
				luaL_addstring(&b, names[i]);
			}
			luaL_pushresult(&b);
			const char *known = lua_tostring(L, -1);
			luaL_error(L, "%s: %s.%s: unknown key (known keys: %s)", ctx, prefix,
				   luaL_tolstring(L, -2, NULL), known);
		}
	}
	qlb_check_keys(L, idx, ctx, prefix, names);
}

/* The length of the sequence at index at: 1..QL_PARALLEL_MAX entries and no
 * key other than 1..n, else an error naming the field. */
static lua_Integer read_list_len(lua_State *L, const char *ctx, const char *field,
				 const char *exp, int at)
{
	lua_Integer n = (lua_Integer)lua_rawlen(L, at), keys = 0;
	lua_pushnil(L);
	while (lua_next(L, at)) {
		lua_pop(L, 1);
		keys++;
	}
	if (keys != n)
		qlb_error(L, ctx, "%s: expected %s, got a table with keys other than 1..n", field,
			  exp);
	if (n < 1 || n > QL_PARALLEL_MAX)
		qlb_error(L, ctx, "%s: expected %s, got %d entries", field, exp, (int)n);
	return n;
}

/* The list at the top of the stack: a sequence of 1..QL_PARALLEL_MAX
 * integers in [0, 255] and no other key (read raw, like the options). */
static void read_tos_list(lua_State *L, const char *ctx, const char *field, const char *exp,
			  ql_tos_list *out)
{
	int at = lua_gettop(L);
	if (lua_type(L, at) != LUA_TTABLE)
		qlb_field_error(L, ctx, field, exp, at);
	lua_Integer n = read_list_len(L, ctx, field, exp, at);
	for (lua_Integer i = 1; i <= n; i++) {
		int isint = 0;
		lua_rawgeti(L, at, i);
		lua_Integer v = lua_tointegerx(L, -1, &isint);
		if (lua_type(L, -1) != LUA_TNUMBER || !isint || v < 0 || v > 255) {
			char f[80];
			snprintf(f, sizeof f, "%s[%d]", field, (int)i);
			qlb_field_error(L, ctx, f, "an integer in [0, 255]", -1);
		}
		out->tos[i - 1] = (unsigned char)v;
		lua_pop(L, 1);
	}
	out->n = (int)n;
}

/* A CPU number in [0, QL_CPU_ID_MAX] at the top of the stack, or a list of
 * 1..QL_PARALLEL_MAX of them and no other key. */
static void read_cpu_list(lua_State *L, const char *ctx, const char *field, const char *exp,
			  ql_cpu_list *out)
{
	int at = lua_gettop(L), isint = 0;
	if (lua_type(L, at) == LUA_TNUMBER) {
		lua_Integer v = lua_tointegerx(L, at, &isint);
		if (!isint || v < 0 || v > QL_CPU_ID_MAX)
			qlb_field_error(L, ctx, field, exp, at);
		out->cpu[0] = (unsigned short)v;
		out->n = 1;
		return;
	}
	if (lua_type(L, at) != LUA_TTABLE)
		qlb_field_error(L, ctx, field, exp, at);
	lua_Integer n = read_list_len(L, ctx, field, exp, at);
	for (lua_Integer i = 1; i <= n; i++) {
		lua_rawgeti(L, at, i);
		lua_Integer v = lua_tointegerx(L, -1, &isint);
		if (lua_type(L, -1) != LUA_TNUMBER || !isint || v < 0 || v > QL_CPU_ID_MAX) {
			char f[80], e[40];
			snprintf(f, sizeof f, "%s[%d]", field, (int)i);
			snprintf(e, sizeof e, "an integer in [0, %d]", QL_CPU_ID_MAX);
			qlb_field_error(L, ctx, f, e, -1);
		}
		out->cpu[i - 1] = (unsigned short)v;
		lua_pop(L, 1);
	}
	out->n = (int)n;
}

void qlb_read_opts(lua_State *L, int idx, const char *ctx, const char *prefix,
		   const ql_opt_desc *t, unsigned skip, void *st, int *proto)
{
	idx = lua_absindex(L, idx);
	qlb_check_table(L, idx, ctx, prefix);
	check_keys(L, idx, ctx, prefix, t, skip);
	char *base = st;
	for (; t->key; t++) {
		char field[64], exp[96];
		int64_t min, max;
		if (t->flags & skip)
			continue;
		snprintf(field, sizeof field, "%s.%s", prefix, t->key);
		ql_opt_expected(t, proto ? *proto : QL_PROTO_TCP, exp, sizeof exp, &min, &max);
		/* raw, as the keys above and the façade's copy read the table: a
		 * value behind __index is not an option */
		lua_pushstring(L, t->key);
		int type = lua_rawget(L, idx);
		if (type == LUA_TNIL) {
			if (t->flags & QL_OPT_REQUIRED)
				qlb_field_error(L, ctx, field, exp, -1);
			lua_pop(L, 1);
			continue;
		}
		void *at = base + t->offset;
		switch (t->kind) {
		case QL_OPT_STR:
			/* the table holds the string while st is used */
			*(const char **)at = qlb_check_string(L, -1, ctx, field, NULL);
			break;
		case QL_OPT_PROTO: {
			int k;
			lua_pop(L, 1);
			qlb_opt_enum(L, idx, ctx, prefix, t->key, ql_proto_names, &k);
			*(int *)at = k;
			if (proto)
				*proto = k;
			continue;
		}
		case QL_OPT_BOOL:
			if (type != LUA_TBOOLEAN)
				qlb_field_error(L, ctx, field, exp, -1);
			*(int *)at = lua_toboolean(L, -1);
			break;
		case QL_OPT_TOS_LIST:
			read_tos_list(L, ctx, field, exp, (ql_tos_list *)at);
			break;
		case QL_OPT_CPU_LIST:
			read_cpu_list(L, ctx, field, exp, (ql_cpu_list *)at);
			break;
		case QL_OPT_DBL: {
			double v = lua_tonumber(L, -1);
			if (type != LUA_TNUMBER || !isfinite(v) || v < t->dmin || v > t->dmax)
				qlb_field_error(L, ctx, field, exp, -1);
			*(double *)at = v;
			break;
		}
		default: {
			int isint = 0;
			lua_Integer v = lua_tointegerx(L, -1, &isint);
			if (type != LUA_TNUMBER || !isint || v < min || v > max)
				qlb_field_error(L, ctx, field, exp, -1);
			if ((t->flags & QL_OPT_ZERO_ANY) && v == 0)
				v = -1;
			if (t->kind == QL_OPT_INT)
				*(int *)at = (int)v;
			else if (t->kind == QL_OPT_I64)
				*(int64_t *)at = (int64_t)v;
			else
				*(uint64_t *)at = (uint64_t)v;
			if (t->flags & QL_OPT_GIVEN_BPS)
				((ql_client_opts *)st)->bitrate_set = 1;
			break;
		}
		}
		lua_pop(L, 1);
	}
}
