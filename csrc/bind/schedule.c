/*
 * schedule.c - Lua binding of csrc/core/schedule.h: impairment steps applied
 * by a native thread at their planned times (the public API and its
 * documentation: lua/qoslab/schedule.lua, which checks every step first).
 *
 * core.schedule_start(kind, target, at_s, specs) -> qoslab.Schedule
 *   kind "netem": target = { ifname =, netns =, parent =, handle = }; each
 *     step is a replace of that netem (ql_netem_apply: its own rtnetlink
 *     socket, in the target's namespace, from the schedule's thread).
 *   kind "link": target = { link = qoslab.ImpairLink, direction = "forward"
 *     | "reverse" }; each step is the link's atomic spec swap (a step on a
 *     link that failed fails with the link's fault). One schedule per
 *     direction: while it runs, another is refused and closing the link
 *     stops it first; once it finished, the next one takes its place.
 *   at_s: offsets from now (seconds, >= 0, in order); specs: wire specs as
 *   qoslab.netem's reader takes them (read and copied here, before the start).
 * sched:entries() -> { {ok =, planned_s =, begun_s =, actual_s =,
 *   actual_unix_s =, lag_ms =, message =, code =}, ... } (steps done so far)
 * sched:wait(timeout_s) -> true (all done or stopped) | false (timed out)
 * sched:start_unix_s() -> CLOCK_REALTIME of the start instant
 * sched:stop(), sched:close() (also __close, __gc; idempotent)
 * core.SCHEDULE_MAX_STEPS: the most steps a schedule takes
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/impair/tunlink.h"
#include "../core/netem.h"
#include "../core/schedule.h"
#include "../core/timer.h"
#include "bind.h"

#define SCHED_T "qoslab.Schedule"
#define CTX "qoslab.schedule"

enum { KIND_NETEM, KIND_LINK };

typedef struct sstep {
	ql_netem_spec spec;        /* dist/slot_dist point at the copies below */
	int16_t *dist, *slot_dist;
} sstep;

typedef struct lsched {
	ql_sched *s;
	int kind;
	ql_qdisc_target t;         /* netem: ifname/netns point at the copies */
	char *ifname, *netns;
	ql_tunlink *link;
	int dir;
	void *link_hook;           /* the link's hook while it is set */
	size_t n;
	sstep *steps;
	int64_t start_unix_ns;
} lsched;

static int apply_step(void *ctx, size_t i, ql_err *e)
{
	lsched *u = ctx;
	if (u->kind == KIND_LINK) {
		/* a link that stopped forwarding takes a spec but never applies
		 * it: the step fails with the link's own fault */
		if (ql_tunlink_failed(u->link, e))
			return -(e->errnum > 0 ? e->errnum : EIO);
		return ql_tunlink_set_spec(u->link, u->dir, &u->steps[i].spec, e);
	}
	return ql_netem_apply(&u->t, &u->steps[i].spec, e);
}

static void sched_stop(lsched *u)
{
	if (u->s)
		ql_sched_stop(u->s);
	if (u->link_hook) {
		qlb_impair_link_unhook(u->link_hook);
		u->link_hook = NULL;
	}
}

/* Called by the link's close while the schedule holds the link, or by the
 * next schedule of its direction once this one finished. */
static void on_link_release(void *ctx)
{
	lsched *u = ctx;
	if (u->s)
		ql_sched_stop(u->s);
	u->link_hook = NULL;
	u->link = NULL;
}

/* Whether the schedule holding the link still has steps to run. */
static int link_busy(void *ctx)
{
	lsched *u = ctx;
	return u->s && !ql_sched_finished(u->s);
}

static void sched_free(lsched *u)
{
	sched_stop(u);
	ql_sched_free(u->s);
	u->s = NULL;
	for (size_t i = 0; i < u->n && u->steps; i++) {
		free(u->steps[i].dist);
		free(u->steps[i].slot_dist);
	}
	free(u->steps);
	u->steps = NULL;
	u->n = 0;
	free(u->ifname);
	free(u->netns);
	u->ifname = u->netns = NULL;
}

static int16_t *copy_dist(lua_State *L, const int16_t *d, size_t n)
{
	if (!d || n == 0)
		return NULL;
	int16_t *c = malloc(n * sizeof *c);
	if (!c)
		luaL_error(L, "%s: out of memory for a distribution table", CTX);
	memcpy(c, d, n * sizeof *c);
	return c;
}

static char *dup_or_raise(lua_State *L, const char *s)
{
	if (!s)
		return NULL;
	char *c = strdup(s);
	if (!c)
		luaL_error(L, "%s: out of memory", CTX);
	return c;
}

static const char *opt_field_string(lua_State *L, int idx, const char *key)
{
	lua_getfield(L, idx, key);
	const char *s = NULL;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			qlb_field_error(L, CTX, key, "a string", -1);
		s = lua_tostring(L, -1);
	}
	lua_pop(L, 1);  /* the target table keeps it alive */
	return s;
}

static int l_start(lua_State *L)
{
	static const char *const kinds[] = { "netem", "link", NULL };
	static const char *const dirs[] = { "forward", "reverse", NULL };
	int kind = luaL_checkoption(L, 1, NULL, kinds);
	qlb_check_table(L, 2, CTX, "target");
	qlb_check_table(L, 3, CTX, "at_s");
	qlb_check_table(L, 4, CTX, "specs");
	lua_settop(L, 4);
	lua_Integer n = luaL_len(L, 3);
	if (n < 1 || n != luaL_len(L, 4) || (uint64_t)n > SIZE_MAX / sizeof(sstep))
		return qlb_error(L, CTX, "at_s and specs: expected two lists of the same length >= 1");
	if (n > QL_SCHED_MAX_STEPS)
		return qlb_error(L, CTX, "steps: expected at most %d steps, got %d", QL_SCHED_MAX_STEPS,
				 (int)n);

	lsched *u = lua_newuserdatauv(L, sizeof *u, 1);  /* 5 */
	memset(u, 0, sizeof *u);
	luaL_setmetatable(L, SCHED_T);
	u->kind = kind;
	u->steps = calloc((size_t)n, sizeof *u->steps);
	if (!u->steps)
		return luaL_error(L, "%s: out of memory", CTX);
	u->n = (size_t)n;

	int64_t *off = lua_newuserdatauv(L, (size_t)n * sizeof *off, 0);  /* 6 */
	for (lua_Integer i = 1; i <= n; i++) {
		lua_geti(L, 3, i);
		int isnum;
		double at = lua_tonumberx(L, -1, &isnum);
		lua_pop(L, 1);
		if (!isnum || !isfinite(at) || at < 0 || at > 1e9)
			return qlb_error(L, CTX, "at_s[%d]: expected a finite number of seconds >= 0",
					 (int)i);
		off[i - 1] = llround(at * 1e9);
		char ctx[64];
		snprintf(ctx, sizeof ctx, "%s: steps[%d]", CTX, (int)i);
		int top = lua_gettop(L);
		lua_geti(L, 4, i);
		qlb_check_table(L, -1, ctx, "spec");
		sstep *st = &u->steps[i - 1];
		qlb_netem_read_spec(L, lua_gettop(L), ctx, &st->spec);
		st->dist = copy_dist(L, st->spec.dist, st->spec.dist_len);
		st->slot_dist = copy_dist(L, st->spec.slot_dist, st->spec.slot_dist_len);
		st->spec.dist = st->dist;
		st->spec.slot_dist = st->slot_dist;
		lua_settop(L, top);  /* the reader's buffers, copied */
	}

	if (kind == KIND_LINK) {
		lua_getfield(L, 2, "direction");
		u->dir = luaL_checkoption(L, -1, "forward", dirs);
		lua_pop(L, 1);
		lua_getfield(L, 2, "link");  /* 7 */
		u->link = qlb_impair_link_hook(L, 7, u->dir, on_link_release, link_busy, u,
					       &u->link_hook);
		lua_setiuservalue(L, 5, 1);  /* keeps the link alive */
	} else {
		const char *ifname = opt_field_string(L, 2, "ifname");
		if (!ifname)
			return qlb_field_error(L, CTX, "target.ifname", "a string", 0);
		u->ifname = dup_or_raise(L, ifname);
		u->netns = dup_or_raise(L, opt_field_string(L, 2, "netns"));
		ql_netem_where w = { 0 };
		w.parent = opt_field_string(L, 2, "parent");
		w.handle = opt_field_string(L, 2, "handle");
		ql_err e;
		ql_err_clear(&e);
		if (ql_netem_where_check(&w, 1, &u->t.parent, &u->t.handle, &e) < 0)
			return qlb_error(L, CTX, "%s", e.msg);
		u->t.ifname = u->ifname;
		u->t.netns = u->netns;
	}

	ql_err e;
	ql_err_clear(&e);
	struct timespec rt;
	int64_t start = ql_now_ns();
	clock_gettime(CLOCK_REALTIME, &rt);
	u->start_unix_ns = (int64_t)rt.tv_sec * QL_NS_PER_S + rt.tv_nsec;
	if (ql_sched_start(off, u->n, start, apply_step, u, &u->s, &e) < 0) {
		sched_free(u);
		return e.usage ? qlb_error(L, CTX, "%s", e.msg) : qlb_fail(L, &e);
	}
	lua_settop(L, 5);
	return 1;
}

static lsched *check_sched(lua_State *L)
{
	return luaL_checkudata(L, 1, SCHED_T);
}

static int l_entries(lua_State *L)
{
	lsched *u = check_sched(L);
	size_t done = u->s ? ql_sched_done(u->s) : 0;
	lua_createtable(L, (int)done, 0);
	if (!u->s)
		return 1;
	int64_t t0 = ql_sched_start_ns(u->s);
	for (size_t i = 0; i < done; i++) {
		ql_sched_entry en;
		if (ql_sched_entry_get(u->s, i, &en) < 0)
			break;
		lua_createtable(L, 0, 8);
		qlb_set_boolean(L, "ok", en.rc >= 0);
		qlb_set_number(L, "planned_s", (double)(en.planned_ns - t0) / 1e9);
		qlb_set_number(L, "begun_s", (double)(en.begun_ns - t0) / 1e9);
		qlb_set_number(L, "actual_s", (double)(en.done_ns - t0) / 1e9);
		qlb_set_number(L, "actual_unix_s", (double)en.done_unix_ns / 1e9);
		qlb_set_number(L, "lag_ms", (double)(en.done_ns - en.planned_ns) / 1e6);
		if (en.rc < 0) {
			qlb_set_string(L, "message", en.err.msg);
			qlb_set_string(L, "code", en.err.code[0] ? en.err.code : "EIO");
		}
		lua_seti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

static int l_wait(lua_State *L)
{
	lsched *u = check_sched(L);
	double timeout = luaL_checknumber(L, 2);
	if (!isfinite(timeout) || timeout < 0)
		return qlb_field_error(L, "qoslab.Schedule:wait", "timeout_s",
				       "a finite number of seconds >= 0", 2);
	if (!u->s) {
		lua_pushboolean(L, 1);
		return 1;
	}
	int64_t deadline = ql_now_ns() + (int64_t)(timeout * 1e9);
	lua_pushboolean(L, ql_sched_wait(u->s, deadline > 0 ? deadline : 1));
	return 1;
}

static int l_start_unix(lua_State *L)
{
	lsched *u = check_sched(L);
	lua_pushnumber(L, (double)u->start_unix_ns / 1e9);
	return 1;
}

static int l_stop(lua_State *L)
{
	sched_stop(check_sched(L));
	return 0;
}

static int l_close(lua_State *L)
{
	sched_free(check_sched(L));
	return 0;
}

static int l_tostring(lua_State *L)
{
	lsched *u = check_sched(L);
	if (!u->s)
		lua_pushstring(L, "qoslab.Schedule (closed)");
	else
		lua_pushfstring(L, "qoslab.Schedule (%d of %d steps done)",
				(int)ql_sched_done(u->s), (int)u->n);
	return 1;
}

void qlb_open_schedule(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "entries", l_entries },
		{ "wait", l_wait },
		{ "start_unix_s", l_start_unix },
		{ "stop", l_stop },
		{ "close", l_close },
		{ NULL, NULL },
	};
	qlb_newclass(L, SCHED_T, methods, l_close, l_tostring);
	lua_pushcfunction(L, l_start);
	lua_setfield(L, -2, "schedule_start");
	lua_pushinteger(L, QL_SCHED_MAX_STEPS);
	lua_setfield(L, -2, "SCHEDULE_MAX_STEPS");
}
