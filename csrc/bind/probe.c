/*
 * probe.c - Lua binding of the latency probe (csrc/core/engine/probe.h):
 *
 *   core.probe_check(opts[, ctx[, prefix[, standalone]]]) -> the options
 *       with the core's defaults filled in; raises "<ctx>: <prefix>.<key>:
 *       ..." (ctx "qoslab.latency.probe", prefix "opts", standalone true)
 *   core.probe_start(opts) -> qoslab.Probe | nil, message, CODE
 *   Probe:stop()
 *   Probe:latency([load_from_ns, load_to_ns[, spans]]) -> latency table,
 *       per-span tables (spans: array of { from_ns, to_ns }, CLOCK_REALTIME
 *       ns integers; no load span: every sample is a loaded one)
 *   Probe:info() -> { sent, replies, ..., first_tx_ns, now_ns }
 *
 * The shape of the latency table is manual/results.md's; the Lua façade is
 * lua/qoslab/latency.lua.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "../core/engine/probe.h"
#include "../core/engine/probe_options.h"

#define PROBE_T "qoslab.Probe"

typedef struct lprobe {
	ql_probe *p;
} lprobe;

/* The options table at idx -> o, by ql_probe_opt_desc; standalone-only
 * keys are unknown beside a test. Strings point into the table. */
static void read_probe_opts(lua_State *L, int idx, const char *ctx, const char *prefix,
			    int standalone, ql_probe_opts *o)
{
	ql_probe_opts_init(o);
	qlb_read_opts(L, idx, ctx, prefix, ql_probe_opt_desc,
		      standalone ? 0 : QL_OPT_PROBE_ALONE, o, NULL);
	ql_err e;
	if (ql_probe_opts_validate(o, standalone, prefix, &e) < 0)
		luaL_error(L, "%s: %s", ctx, e.msg);
}

static void push_filled(lua_State *L, const ql_probe_opts *o, int standalone)
{
	int proto = ql_probe_proto_of(o->proto);
	int pmin, pmax;
	ql_probe_payload_range(proto, &pmin, &pmax);
	lua_createtable(L, 0, 12);
	qlb_set_string(L, "proto", ql_probe_proto_names[proto]);
	if (o->port)
		qlb_set_integer(L, "port", o->port);
	qlb_set_number(L, "interval_ms", o->interval_ms > 0 ? o->interval_ms
							 : QL_PROBE_INTERVAL_DEFAULT_MS);
	if (o->tos >= 0)
		qlb_set_integer(L, "tos", o->tos);
	qlb_set_integer(L, "payload_bytes", o->payload_bytes ? o->payload_bytes
				: QL_PROBE_PAYLOAD_DEFAULT_BYTES < pmin ? pmin
				: QL_PROBE_PAYLOAD_DEFAULT_BYTES);
	qlb_set_number(L, "idle_s", o->idle_s >= 0 ? o->idle_s : QL_PROBE_IDLE_DEFAULT_S);
	qlb_set_number(L, "timeout_ms", o->timeout_ms > 0 ? o->timeout_ms
						       : QL_PROBE_TIMEOUT_DEFAULT_MS);
	qlb_set_boolean(L, "clock_synced", o->clock_synced > 0);
	if (standalone) {
		if (o->host)
			qlb_set_string(L, "host", o->host);
		qlb_set_number(L, "duration_s", o->duration_s > 0 ? o->duration_s
							      : QL_PROBE_DURATION_DEFAULT_S);
		if (o->netns)
			qlb_set_string(L, "netns", o->netns);
		if (o->bind_address)
			qlb_set_string(L, "bind_address", o->bind_address);
	}
}

static int l_probe_check(lua_State *L)
{
	const char *ctx = luaL_optstring(L, 2, "qoslab.latency.probe");
	const char *prefix = luaL_optstring(L, 3, "opts");
	int standalone = lua_isnoneornil(L, 4) ? 1 : lua_toboolean(L, 4);
	ql_probe_opts o;
	read_probe_opts(L, 1, ctx, prefix, standalone, &o);
	push_filled(L, &o, standalone);
	return 1;
}

static int l_probe_start(lua_State *L)
{
	static const char ctx[] = "qoslab.latency.probe";
	ql_probe_opts o;
	read_probe_opts(L, 1, ctx, "opts", 1, &o);
	lprobe *u = lua_newuserdatauv(L, sizeof *u, 0);
	u->p = NULL;
	luaL_setmetatable(L, PROBE_T);
	ql_err e;
	ql_err_clear(&e);
	if (ql_probe_start(&o, &u->p, &e) < 0)
		return qlb_fail(L, &e);
	return 1;
}

static lprobe *check_probe(lua_State *L)
{
	lprobe *u = luaL_checkudata(L, 1, PROBE_T);
	if (!u->p)
		luaL_error(L, "qoslab.Probe: the probe was closed");
	return u;
}

static void push_dist(lua_State *L, const char *key, const ql_lat_dist *d)
{
	if (!d->n)
		return;
	lua_createtable(L, 0, 7);
	qlb_set_number(L, "min", d->min_ms);
	qlb_set_number(L, "mean", d->mean_ms);
	qlb_set_number(L, "p50", d->p50_ms);
	qlb_set_number(L, "p90", d->p90_ms);
	qlb_set_number(L, "p99", d->p99_ms);
	qlb_set_number(L, "p999", d->p999_ms);
	qlb_set_number(L, "max", d->max_ms);
	lua_setfield(L, -2, key);
}

/* { edges_ms, counts, below, above }: the buckets from the first to the
 * last non-empty one (edges_ms has one more entry than counts). */
static void push_hist(lua_State *L, const ql_lat_hist *h)
{
	int lo = -1, hi = -1;
	for (int k = 0; k < QL_LAT_HIST_EDGES - 1; k++)
		if (h->count[k]) {
			if (lo < 0)
				lo = k;
			hi = k;
		}
	lua_createtable(L, 0, 5);
	qlb_set_integer(L, "per_decade", QL_LAT_HIST_PER_DECADE);
	qlb_set_integer(L, "below", h->below);
	qlb_set_integer(L, "above", h->above);
	lua_createtable(L, lo < 0 ? 0 : hi - lo + 2, 0);
	for (int k = lo; lo >= 0 && k <= hi + 1; k++) {
		lua_pushnumber(L, (double)ql_lat_hist_edge_ns[k] / 1e6);
		lua_rawseti(L, -2, k - lo + 1);
	}
	lua_setfield(L, -2, "edges_ms");
	lua_createtable(L, lo < 0 ? 0 : hi - lo + 1, 0);
	for (int k = lo; lo >= 0 && k <= hi; k++) {
		lua_pushinteger(L, h->count[k]);
		lua_rawseti(L, -2, k - lo + 1);
	}
	lua_setfield(L, -2, "counts");
	lua_setfield(L, -2, "histogram");
}

static void push_counts(lua_State *L, const ql_lat_summary *s)
{
	qlb_set_integer(L, "samples", s->samples);
	qlb_set_integer(L, "lost", s->lost);
	qlb_set_integer(L, "late", s->late);
	push_dist(L, "rtt_ms", &s->rtt);
}

static const char *clock_name(int c)
{
	return c == QL_CLOCK_SHARED ? "shared" : c == QL_CLOCK_SYNCED ? "synced" : "unsynced";
}

static lua_Integer opt_ns(lua_State *L, int idx, lua_Integer dflt)
{
	if (lua_isnoneornil(L, idx))
		return dflt;
	return luaL_checkinteger(L, idx);
}

/* :latency([load_from_ns, load_to_ns[, spans]]) */
static int l_probe_latency(lua_State *L)
{
	lprobe *u = check_probe(L);
	int64_t from = opt_ns(L, 2, INT64_MIN), to = opt_ns(L, 3, INT64_MAX);
	int alone = lua_isnoneornil(L, 2);
	ql_probe_info in;
	ql_probe_get_info(u->p, &in);
	ql_probe_sample *s;
	size_t n;
	if (ql_probe_samples(u->p, &s, &n) < 0)
		return luaL_error(L, "qoslab.Probe:latency: out of memory");
	int64_t tmo = (int64_t)(in.timeout_ms * 1e6);
	int64_t pending = in.stopped ? INT64_MAX : in.now_rt_ns - tmo;
	int owd = in.clock != QL_CLOCK_UNSYNCED && in.proto != QL_PROBE_ICMP;
	ql_lat_summary ld, id;
	if (ql_lat_summarize(s, n, from, to, tmo, pending, owd, &ld) < 0 ||
	    ql_lat_summarize_outside(s, n, from, to, tmo, pending, 0, &id) < 0) {
		free(s);
		return luaL_error(L, "qoslab.Probe:latency: out of memory");
	}
	lua_createtable(L, 0, 24);
	qlb_set_string(L, "proto", ql_probe_proto_names[in.proto]);
	qlb_set_number(L, "interval_ms", in.interval_ms);
	qlb_set_number(L, "timeout_ms", in.timeout_ms);
	qlb_set_integer(L, "payload_bytes", in.payload_bytes);
	qlb_set_string(L, "clock", clock_name(in.clock));
	qlb_set_integer(L, "sent", (lua_Integer)in.sent);
	qlb_set_integer(L, "duplicates", (lua_Integer)in.duplicates);
	qlb_set_integer(L, "bad_replies", (lua_Integer)in.bad_replies);
	qlb_set_integer(L, "bad_server_times", (lua_Integer)in.bad_server_times);
	qlb_set_integer(L, "send_errors", (lua_Integer)in.send_errors);
	qlb_set_boolean(L, "capped", in.capped);
	lua_createtable(L, 0, 2);
	qlb_set_integer(L, "tx_kernel", (lua_Integer)in.tx_kernel);
	qlb_set_integer(L, "rx_kernel", (lua_Integer)in.rx_kernel);
	lua_setfield(L, -2, "timestamps");
	push_counts(L, &ld);
	if (owd) {
		push_dist(L, "owd_up_ms", &ld.up);
		push_dist(L, "owd_down_ms", &ld.down);
	}
	push_dist(L, "server_hold_ms", &ld.hold);
	lua_createtable(L, 0, 5);
	push_counts(L, &id);
	push_hist(L, &id.hist);
	lua_setfield(L, -2, "idle");
	double induced;
	if (!alone && ql_lat_induced_ms(&ld, &id, &induced) == 0)
		qlb_set_number(L, "induced_ms", induced);
	push_hist(L, &ld.hist);
	/* per span */
	if (lua_istable(L, 4)) {
		lua_Integer k = (lua_Integer)luaL_len(L, 4);
		lua_createtable(L, (int)k, 0);
		for (lua_Integer i = 1; i <= k; i++) {
			lua_geti(L, 4, i);
			lua_geti(L, -1, 1);
			lua_geti(L, -2, 2);
			int64_t a = (int64_t)luaL_checkinteger(L, -2);
			int64_t b = (int64_t)luaL_checkinteger(L, -1);
			lua_pop(L, 3);
			ql_lat_summary sp;
			if (ql_lat_summarize(s, n, a, b, tmo, pending, 0, &sp) < 0) {
				free(s);
				return luaL_error(L, "qoslab.Probe:latency: out of memory");
			}
			lua_createtable(L, 0, 4);
			push_counts(L, &sp);
			lua_rawseti(L, -2, i);
		}
	} else {
		lua_newtable(L);
	}
	free(s);
	return 2;
}

static int l_probe_info(lua_State *L)
{
	lprobe *u = check_probe(L);
	ql_probe_info in;
	ql_probe_get_info(u->p, &in);
	lua_createtable(L, 0, 12);
	qlb_set_string(L, "proto", ql_probe_proto_names[in.proto]);
	qlb_set_string(L, "clock", clock_name(in.clock));
	qlb_set_integer(L, "sent", (lua_Integer)in.sent);
	qlb_set_integer(L, "replies", (lua_Integer)in.replies);
	qlb_set_integer(L, "duplicates", (lua_Integer)in.duplicates);
	qlb_set_integer(L, "bad_replies", (lua_Integer)in.bad_replies);
	qlb_set_integer(L, "bad_server_times", (lua_Integer)in.bad_server_times);
	qlb_set_integer(L, "send_errors", (lua_Integer)in.send_errors);
	qlb_set_boolean(L, "stopped", in.stopped);
	qlb_set_boolean(L, "capped", in.capped);
	qlb_set_integer(L, "first_tx_ns", in.first_tx_ns);
	qlb_set_integer(L, "now_ns", in.now_rt_ns);
	return 1;
}

static int l_probe_stop(lua_State *L)
{
	lprobe *u = luaL_checkudata(L, 1, PROBE_T);
	if (u->p)
		ql_probe_stop(u->p);
	return 0;
}

static int l_probe_gc(lua_State *L)
{
	lprobe *u = luaL_checkudata(L, 1, PROBE_T);
	ql_probe_free(u->p);
	u->p = NULL;
	return 0;
}

static int l_probe_tostring(lua_State *L)
{
	lprobe *u = luaL_checkudata(L, 1, PROBE_T);
	if (!u->p) {
		lua_pushliteral(L, "qoslab.Probe (closed)");
		return 1;
	}
	ql_probe_info in;
	ql_probe_get_info(u->p, &in);
	lua_pushfstring(L, "qoslab.Probe (%s, %s, %d sent)", ql_probe_proto_names[in.proto],
			in.stopped ? "stopped" : "running", (int)in.sent);
	return 1;
}

void qlb_open_probe(lua_State *L)
{
	static const luaL_Reg m[] = {
		{ "latency", l_probe_latency },
		{ "info", l_probe_info },
		{ "stop", l_probe_stop },
		{ NULL, NULL }
	};
	qlb_newclass(L, PROBE_T, m, l_probe_gc, l_probe_tostring);
	lua_pushcfunction(L, l_probe_check);
	lua_setfield(L, -2, "probe_check");
	lua_pushcfunction(L, l_probe_start);
	lua_setfield(L, -2, "probe_start");
}
