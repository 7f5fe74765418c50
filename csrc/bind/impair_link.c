/*
 * impair_link.c - Lua binding of csrc/core/impair/tunlink.h (the public API
 * and its documentation: qoslab.link.impair_link in lua/qoslab/link.lua).
 * Specs are read by qoslab.netem's own reader (qlb_netem_read_spec), so a
 * bad field is named as qoslab.netem names it.
 *
 * core.impair_link(opts) -> qoslab.ImpairLink | nil, msg, code
 *   link:set(direction, spec) -> true        (raises on a bad spec)
 *   link:stats()  -> { forward = {...}, reverse = {...}, failed = false|msg }
 *   link:failed() -> false | true, msg, code
 *   link:close()  (also __close, __gc; idempotent)
 */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/impair/tunlink.h"
#include "bind.h"

#define LINK_T "qoslab.ImpairLink"
#define CTX "qoslab.link.impair_link"

/* A direction's schedule (qlb_impair_link_hook). */
typedef struct lhook {
	void (*release)(void *);
	int (*busy)(void *);
	void *ctx;
} lhook;

typedef struct llink {
	ql_tunlink *l;
	char a_ifname[16], b_ifname[16];
	lhook sched[2];              /* by direction: forward, reverse */
} llink;

static const char *const opt_keys[] = {
	"a_netns", "b_netns", "a_addr", "b_addr", "a_ifname", "b_ifname", "mtu_bytes",
	"forward", "reverse", "memory_bytes", "seed", "gso", "realtime", NULL,
};
static const char *const directions[] = { "forward", "reverse", NULL };

/* A usage error of the core, its field after ctx: "<CTX>: opts." names an
 * option ("...: opts.b_netns: expected ..."), a method's ctx ends with ": ". */
static int usage_fail(lua_State *L, const char *ctx, const ql_err *e)
{
	lua_pushfstring(L, "%s%s", ctx, e->msg);
	return lua_error(L);
}

/* The spec at field key of the table at idx (nil = no impairment) into s;
 * distribution buffers stay on the stack. */
static void read_dir_spec(lua_State *L, int idx, const char *key, ql_netem_spec *s)
{
	char ctx[64];
	snprintf(ctx, sizeof ctx, "%s: opts.%s", CTX, key);
	lua_getfield(L, idx, key);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_newtable(L);
	}
	qlb_netem_read_spec(L, lua_gettop(L), ctx, s);
}

static const char *req_string(lua_State *L, int idx, const char *key)
{
	const char *s = NULL;
	if (!qlb_opt_string(L, idx, CTX, "opts", key, &s, NULL))
		qlb_error(L, CTX, "opts.%s: expected a string, got nil", key);
	return s;
}

static uint64_t default_seed(void)
{
	static unsigned counter;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^
	       (uint64_t)++counter;
}

static int l_impair_link(lua_State *L)
{
	qlb_check_table(L, 1, CTX, "opts");
	lua_settop(L, 1);
	qlb_check_keys(L, 1, CTX, "opts", opt_keys);
	ql_tunlink_opts o;
	memset(&o, 0, sizeof o);
	o.a_netns = req_string(L, 1, "a_netns");
	o.b_netns = req_string(L, 1, "b_netns");
	o.a_addr = req_string(L, 1, "a_addr");
	o.b_addr = req_string(L, 1, "b_addr");
	o.a_ifname = QL_TUNLINK_A_IFNAME;
	o.b_ifname = QL_TUNLINK_B_IFNAME;
	qlb_opt_string(L, 1, CTX, "opts", "a_ifname", &o.a_ifname, NULL);
	qlb_opt_string(L, 1, CTX, "opts", "b_ifname", &o.b_ifname, NULL);
	lua_Integer iv;
	o.mtu_bytes = QL_TUNLINK_MTU_DEFAULT;
	if (qlb_opt_integer(L, 1, CTX, "opts", "mtu_bytes", 68, 65535, &iv))
		o.mtu_bytes = (uint32_t)iv;
	o.memory_bytes = QL_TUNLINK_MEMORY_DEFAULT;
	if (qlb_opt_integer(L, 1, CTX, "opts", "memory_bytes", 1, INT64_MAX, &iv))
		o.memory_bytes = (uint64_t)iv;
	o.seed = default_seed();
	if (qlb_opt_integer(L, 1, CTX, "opts", "seed", 0, INT64_MAX, &iv))
		o.seed = (uint64_t)iv;
	qlb_opt_boolean(L, 1, CTX, "opts", "gso", &o.gso);
	o.realtime = 0;
	qlb_opt_boolean(L, 1, CTX, "opts", "realtime", &o.realtime);
	ql_netem_spec fwd, rev;
	read_dir_spec(L, 1, "forward", &fwd);
	read_dir_spec(L, 1, "reverse", &rev);
	o.forward = &fwd;
	o.reverse = &rev;

	llink *u = lua_newuserdatauv(L, sizeof *u, 0);
	memset(u, 0, sizeof *u);
	luaL_setmetatable(L, LINK_T);
	ql_err e;
	ql_err_clear(&e);
	if (ql_tunlink_open(&o, &u->l, &e) < 0)
		return e.usage ? usage_fail(L, CTX ": opts.", &e) : qlb_fail(L, &e);
	snprintf(u->a_ifname, sizeof u->a_ifname, "%s", o.a_ifname);
	snprintf(u->b_ifname, sizeof u->b_ifname, "%s", o.b_ifname);
	return 1;
}

static llink *check_open(lua_State *L, const char *ctx)
{
	llink *u = luaL_checkudata(L, 1, LINK_T);
	if (!u->l)
		qlb_error(L, ctx, "the link is closed");
	return u;
}

static int l_set(lua_State *L)
{
	llink *u = check_open(L, "qoslab.ImpairLink:set");
	int dir = luaL_checkoption(L, 2, NULL, directions);
	char ctx[64];
	snprintf(ctx, sizeof ctx, "qoslab.ImpairLink:set: %s", directions[dir]);
	qlb_check_table(L, 3, ctx, "spec");
	lua_settop(L, 3);
	ql_netem_spec s;
	qlb_netem_read_spec(L, 3, ctx, &s);
	ql_err e;
	ql_err_clear(&e);
	if (ql_tunlink_set_spec(u->l, dir, &s, &e) < 0)
		return e.usage ? (lua_pushfstring(L, "%s: ", ctx), usage_fail(L, lua_tostring(L, -1), &e))
			       : qlb_fail(L, &e);
	lua_pushboolean(L, 1);
	return 1;
}

static void set_ms(lua_State *L, const char *key, int64_t ns)
{
	qlb_set_number(L, key, (double)ns / 1e6);
}

static const char *const proto_names[QL_IPPKT_NPROTOS] = { "tcp", "udp", "icmp", "other" };

static void push_drops_by_reason(lua_State *L, const uint64_t *drops)
{
	lua_createtable(L, 0, 3);
	qlb_set_integer(L, "loss", (lua_Integer)drops[QL_IMPAIR_DROP_LOSS]);
	qlb_set_integer(L, "limit", (lua_Integer)drops[QL_IMPAIR_DROP_LIMIT]);
	qlb_set_integer(L, "memory", (lua_Integer)drops[QL_IMPAIR_DROP_MEMORY]);
	lua_setfield(L, -2, "drops_by_reason");
}

static void push_by_protocol(lua_State *L, const ql_tunlink_stats *st)
{
	lua_createtable(L, 0, QL_IPPKT_NPROTOS);
	for (int i = 0; i < QL_IPPKT_NPROTOS; i++) {
		const ql_tunlink_proto_stats *ps = &st->proto[i];
		lua_createtable(L, 0, 4);
		qlb_set_integer(L, "arrived_packets", (lua_Integer)ps->arrived_packets);
		uint64_t drops = 0;
		for (int r = 1; r < QL_IMPAIR_DROP_NREASONS; r++)
			drops += ps->drops[r];
		qlb_set_integer(L, "drops", (lua_Integer)drops);
		push_drops_by_reason(L, ps->drops);
		qlb_set_integer(L, "loss_bursts", (lua_Integer)ps->loss_bursts);
		lua_setfield(L, -2, proto_names[i]);
	}
	lua_setfield(L, -2, "by_protocol");
}

static void push_dir_stats(lua_State *L, const ql_tunlink_stats *st)
{
	lua_createtable(L, 0, 24);
	qlb_set_integer(L, "packets", (lua_Integer)st->forwarded_packets);
	qlb_set_integer(L, "bytes", (lua_Integer)st->forwarded_bytes);
	qlb_set_integer(L, "arrived_packets", (lua_Integer)st->arrived_packets);
	qlb_set_integer(L, "arrived_bytes", (lua_Integer)st->arrived_bytes);
	uint64_t drops = 0;
	for (int i = 1; i < QL_IMPAIR_DROP_NREASONS; i++)
		drops += st->drops[i];
	qlb_set_integer(L, "drops", (lua_Integer)drops);
	push_drops_by_reason(L, st->drops);
	push_by_protocol(L, st);
	qlb_set_integer(L, "loss_bursts", (lua_Integer)st->loss_bursts);
	qlb_set_integer(L, "duplicated_packets", (lua_Integer)st->duplicated);
	qlb_set_integer(L, "reordered_packets", (lua_Integer)st->reordered);
	qlb_set_integer(L, "corrupted_packets", (lua_Integer)st->corrupted);
	qlb_set_integer(L, "ce_marked_packets", (lua_Integer)st->ce_marked);
	qlb_set_integer(L, "rejected_packets", (lua_Integer)st->rejected_packets);
	qlb_set_integer(L, "backlog_packets", (lua_Integer)st->backlog_packets);
	qlb_set_integer(L, "backlog_bytes", (lua_Integer)st->backlog_bytes);
	set_ms(L, "queue_delay_mean_ms", st->queue_delay_mean_ns);
	set_ms(L, "queue_delay_max_ms", st->queue_delay_max_ns);
	set_ms(L, "lateness_p99_ms", st->lateness_p99_ns);
	set_ms(L, "lateness_max_ms", st->lateness_max_ns);
	qlb_set_integer(L, "lateness_samples", (lua_Integer)st->lateness_samples);
	qlb_set_boolean(L, "sender_realtime", st->sender_realtime);
	if (st->over_budget) {
		qlb_set_string(L, "over_budget", st->over_budget_err.msg);
		qlb_set_string(L, "over_budget_code", st->over_budget_err.code);
	} else {
		qlb_set_boolean(L, "over_budget", 0);
	}
}

static int l_stats(lua_State *L)
{
	llink *u = check_open(L, "qoslab.ImpairLink:stats");
	lua_createtable(L, 0, 5);
	for (int dir = 0; dir < 2; dir++) {
		ql_tunlink_stats st;
		ql_tunlink_stats_get(u->l, dir, &st);
		push_dir_stats(L, &st);
		lua_setfield(L, -2, directions[dir]);
	}
	ql_err e;
	if (ql_tunlink_failed(u->l, &e)) {
		qlb_set_string(L, "failed", e.msg);
		qlb_set_string(L, "failed_code", e.code);
	} else {
		qlb_set_boolean(L, "failed", 0);
	}
	qlb_set_string(L, "a_ifname", u->a_ifname);
	qlb_set_string(L, "b_ifname", u->b_ifname);
	return 1;
}

static int l_failed(lua_State *L)
{
	llink *u = check_open(L, "qoslab.ImpairLink:failed");
	ql_err e;
	if (!ql_tunlink_failed(u->l, &e)) {
		lua_pushboolean(L, 0);
		return 1;
	}
	lua_pushboolean(L, 1);
	lua_pushstring(L, e.msg);
	lua_pushstring(L, e.code);
	return 3;
}

/* Let go of the schedule hooked at h (it stops, if it still runs). */
static void release_hook(lhook *h)
{
	if (!h->release)
		return;
	lhook was = *h;
	memset(h, 0, sizeof *h);
	was.release(was.ctx);
}

struct ql_tunlink *qlb_impair_link_hook(lua_State *L, int idx, int dir, void (*release)(void *),
					int (*busy)(void *), void *ctx, void **hook)
{
	llink *u = luaL_checkudata(L, idx, LINK_T);
	if (!u->l)
		qlb_error(L, "qoslab.schedule", "target.link: the link is closed");
	lhook *h = &u->sched[dir ? 1 : 0];
	if (h->release && h->busy(h->ctx))
		qlb_error(L, "qoslab.schedule", "target.link: a schedule still runs on its %s direction "
			  "(stop it first)", directions[dir ? 1 : 0]);
	release_hook(h);  /* a finished one */
	h->release = release;
	h->busy = busy;
	h->ctx = ctx;
	*hook = h;
	return u->l;
}

void qlb_impair_link_unhook(void *hook)
{
	lhook *h = hook;
	memset(h, 0, sizeof *h);
}

static int l_close(lua_State *L)
{
	llink *u = luaL_checkudata(L, 1, LINK_T);
	release_hook(&u->sched[0]);
	release_hook(&u->sched[1]);
	if (u->l) {
		ql_tunlink_close(u->l);
		u->l = NULL;
	}
	return 0;
}

static int l_tostring(lua_State *L)
{
	llink *u = luaL_checkudata(L, 1, LINK_T);
	if (!u->l)
		lua_pushstring(L, "qoslab.ImpairLink (closed)");
	else
		lua_pushfstring(L, "qoslab.ImpairLink (%s <-> %s%s)", u->a_ifname, u->b_ifname,
				ql_tunlink_failed(u->l, NULL) ? ", failed" : "");
	return 1;
}

void qlb_open_impair_link(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "set", l_set },
		{ "stats", l_stats },
		{ "failed", l_failed },
		{ "close", l_close },
		{ NULL, NULL },
	};
	qlb_newclass(L, LINK_T, methods, l_close, l_tostring);
	lua_pushcfunction(L, l_impair_link);
	lua_setfield(L, -2, "impair_link");
}
