/* bind.c - shared helpers of the binding layer; see bind.h. */
#include "bind.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/sig.h"

int qlb_fail(lua_State *L, const ql_err *e)
{
	if (e->usage)
		return luaL_error(L, "%s", e->msg);
	lua_pushnil(L);
	lua_pushstring(L, e->msg[0] ? e->msg : "unknown error");
	lua_pushstring(L, e->code[0] ? e->code : "EUNKNOWN");
	return 3;
}

int qlb_check(lua_State *L, int rc, const ql_err *e)
{
	if (rc >= 0)
		return 0;
	return qlb_fail(L, e);
}

/* Push s[0..len) with each embedded NUL shown as \0. */
static const char *push_shown(lua_State *L, const char *s, size_t len)
{
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	for (size_t i = 0; i < len; i++) {
		if (s[i])
			luaL_addchar(&b, s[i]);
		else
			luaL_addstring(&b, "\\0");
	}
	luaL_pushresult(&b);
	return lua_tostring(L, -1);
}

const char *qlb_describe(lua_State *L, int idx)
{
	idx = lua_absindex(L, idx);
	switch (lua_type(L, idx)) {
	case LUA_TNUMBER:
		if (lua_isinteger(L, idx))
			return lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, idx));
		else {
			lua_Number v = lua_tonumber(L, idx);
			lua_Integer i;
			if (v != v)
				return lua_pushliteral(L, "nan");
			/* 1e9 reads as 1000000000, not 1000000000.0 (as written) */
			if (v == floor(v) && lua_numbertointeger(v, &i))
				return lua_pushfstring(L, "%I", (LUAI_UACINT)i);
			return lua_pushfstring(L, "%s", luaL_tolstring(L, idx, NULL));
		}
	case LUA_TBOOLEAN:
		return lua_pushfstring(L, "%s", luaL_tolstring(L, idx, NULL));
	case LUA_TSTRING: {
		/* The whole value, also past an embedded NUL. */
		size_t len;
		const char *s = lua_tolstring(L, idx, &len);
		return lua_pushfstring(L, "string \"%s\"", push_shown(L, s, len));
	}
	default:
		return luaL_typename(L, idx);
	}
}

int qlb_field_error(lua_State *L, const char *ctx, const char *field,
		    const char *expected, int idx)
{
	const char *got = qlb_describe(L, idx);
	return luaL_error(L, "%s: %s: expected %s, got %s", ctx, field, expected,
			  got);
}

int qlb_error(lua_State *L, const char *ctx, const char *fmt, ...)
{
	va_list ap;
	char buf[512];
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return luaL_error(L, "%s: %s", ctx, buf);
}

void qlb_check_table(lua_State *L, int idx, const char *ctx, const char *name)
{
	if (lua_type(L, idx) != LUA_TTABLE)
		qlb_field_error(L, ctx, name, "a table", idx);
}

void qlb_check_keys(lua_State *L, int idx, const char *ctx, const char *prefix,
		    const char *const *allowed)
{
	idx = lua_absindex(L, idx);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING) {
			luaL_error(L, "%s: %s: keys must be strings, got %s", ctx,
				   prefix, luaL_typename(L, -1));
		}
		size_t klen;
		const char *k = lua_tolstring(L, -1, &klen);
		int ok = 0;
		for (const char *const *a = allowed; *a && strlen(k) == klen; a++)
			if (strcmp(*a, k) == 0) {
				ok = 1;
				break;
			}
		if (!ok) {
			luaL_Buffer b;
			luaL_buffinit(L, &b);
			for (const char *const *a = allowed; *a; a++) {
				if (a != allowed)
					luaL_addstring(&b, ", ");
				luaL_addstring(&b, *a);
			}
			luaL_pushresult(&b);
			const char *known = lua_tostring(L, -1);
			luaL_error(L, "%s: %s.%s: unknown key (known keys: %s)",
				   ctx, prefix, push_shown(L, k, klen), known);
		}
	}
}

/* Pushes t[key]; returns 0 (and pops) when nil. */
static int getfield(lua_State *L, int idx, const char *key)
{
	if (lua_getfield(L, idx, key) == LUA_TNIL) {
		lua_pop(L, 1);
		return 0;
	}
	return 1;
}

static const char *fieldname(lua_State *L, const char *prefix, const char *key)
{
	return prefix && *prefix ? lua_pushfstring(L, "%s.%s", prefix, key)
				 : lua_pushstring(L, key);
}

int qlb_opt_integer(lua_State *L, int idx, const char *ctx, const char *prefix,
		    const char *key, lua_Integer min, lua_Integer max,
		    lua_Integer *out)
{
	idx = lua_absindex(L, idx);
	if (!getfield(L, idx, key))
		return 0;
	int isint = 0;
	lua_Integer v = lua_tointegerx(L, -1, &isint);
	if (!isint || lua_type(L, -1) != LUA_TNUMBER || v < min || v > max) {
		const char *f = fieldname(L, prefix, key);
		const char *exp = lua_pushfstring(L, "an integer in [%I, %I]",
						  (LUAI_UACINT)min,
						  (LUAI_UACINT)max);
		qlb_field_error(L, ctx, f, exp, -3);
	}
	*out = v;
	lua_pop(L, 1);
	return 1;
}

int qlb_opt_number(lua_State *L, int idx, const char *ctx, const char *prefix,
		   const char *key, double min, double max, double *out)
{
	idx = lua_absindex(L, idx);
	if (!getfield(L, idx, key))
		return 0;
	double v = lua_tonumber(L, -1);
	if (lua_type(L, -1) != LUA_TNUMBER || !isfinite(v) || v < min ||
	    v > max) {
		const char *f = fieldname(L, prefix, key);
		char exp[96];
		snprintf(exp, sizeof exp, "a finite number in [%.15g, %.15g]", min, max);
		qlb_field_error(L, ctx, f, exp, -2);
	}
	*out = v;
	lua_pop(L, 1);
	return 1;
}

int qlb_opt_boolean(lua_State *L, int idx, const char *ctx, const char *prefix,
		    const char *key, int *out)
{
	idx = lua_absindex(L, idx);
	if (!getfield(L, idx, key))
		return 0;
	if (lua_type(L, -1) != LUA_TBOOLEAN)
		qlb_field_error(L, ctx, fieldname(L, prefix, key), "a boolean",
				-2);
	*out = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return 1;
}

const char *qlb_check_string(lua_State *L, int idx, const char *ctx,
			     const char *field, size_t *len)
{
	size_t n;
	if (lua_type(L, idx) != LUA_TSTRING)
		qlb_field_error(L, ctx, field, "a string", idx);
	const char *s = lua_tolstring(L, idx, &n);
	/* C sees the string up to its first NUL: "lo\0x" would name lo. */
	if (strlen(s) != n)
		qlb_field_error(L, ctx, field, "a string without NUL bytes", idx);
	if (len)
		*len = n;
	return s;
}

const char *qlb_opt_arg_string(lua_State *L, int idx, const char *ctx,
			       const char *field, size_t *len)
{
	if (lua_isnoneornil(L, idx)) {
		if (len)
			*len = 0;
		return NULL;
	}
	return qlb_check_string(L, idx, ctx, field, len);
}

int qlb_opt_string(lua_State *L, int idx, const char *ctx, const char *prefix,
		   const char *key, const char **out, size_t *len)
{
	idx = lua_absindex(L, idx);
	if (!getfield(L, idx, key))
		return 0;
	int v = lua_gettop(L);
	const char *f = fieldname(L, prefix, key);
	/* The string is referenced by the table, so it outlives the pop. */
	*out = qlb_check_string(L, v, ctx, f, len);
	lua_pop(L, 2);
	return 1;
}

int qlb_opt_enum(lua_State *L, int idx, const char *ctx, const char *prefix,
		 const char *key, const char *const *names, int *out)
{
	idx = lua_absindex(L, idx);
	if (!getfield(L, idx, key))
		return 0;
	if (lua_type(L, -1) == LUA_TSTRING) {
		size_t len;
		const char *s = lua_tolstring(L, -1, &len);
		for (int i = 0; names[i] && strlen(s) == len; i++)
			if (strcmp(names[i], s) == 0) {
				*out = i;
				lua_pop(L, 1);
				return 1;
			}
	}
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	luaL_addstring(&b, "one of ");
	for (int i = 0; names[i]; i++) {
		if (i)
			luaL_addstring(&b, ", ");
		luaL_addchar(&b, '"');
		luaL_addstring(&b, names[i]);
		luaL_addchar(&b, '"');
	}
	luaL_pushresult(&b);
	return qlb_field_error(L, ctx, fieldname(L, prefix, key),
			       lua_tostring(L, -1), -3);
}

void qlb_set_integer(lua_State *L, const char *key, lua_Integer v)
{
	lua_pushinteger(L, v);
	lua_setfield(L, -2, key);
}

void qlb_set_number(lua_State *L, const char *key, double v)
{
	lua_pushnumber(L, v);
	lua_setfield(L, -2, key);
}

void qlb_set_string(lua_State *L, const char *key, const char *v)
{
	lua_pushstring(L, v);
	lua_setfield(L, -2, key);
}

void qlb_set_boolean(lua_State *L, const char *key, int v)
{
	lua_pushboolean(L, v);
	lua_setfield(L, -2, key);
}

void qlb_newclass(lua_State *L, const char *tname, const luaL_Reg *methods,
		  lua_CFunction gc, lua_CFunction tostring)
{
	luaL_newmetatable(L, tname); /* also sets __name */
	lua_newtable(L);
	luaL_setfuncs(L, methods, 0);
	lua_setfield(L, -2, "__index");
	if (gc) {
		lua_pushcfunction(L, gc);
		lua_setfield(L, -2, "__gc");
		lua_pushcfunction(L, gc);
		lua_setfield(L, -2, "__close");
	}
	if (tostring) {
		lua_pushcfunction(L, tostring);
		lua_setfield(L, -2, "__tostring");
	}
	lua_pop(L, 1);
}

lua_Hook qlb_hook_mark(lua_State *L)
{
	lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
	lua_State *main_thread = lua_tothread(L, -1);
	lua_pop(L, 1);
	return main_thread ? lua_gethook(main_thread) : NULL;
}

int qlb_interrupted(lua_State *L, lua_Hook mark)
{
	if (ql_sig_stop)
		return 1;
	lua_Hook h = qlb_hook_mark(L);
	return h != NULL && h != mark;
}
