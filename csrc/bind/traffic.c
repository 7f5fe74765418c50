/*
 * traffic.c - Lua binding of the traffic engine (csrc/core/engine/engine.h).
 *
 * core.traffic_client_check(opts[, ctx]) -> the options as the test runs them
 * core.traffic_client_host_check(opts[, ctx]) -> true | nil, msg, CODE, FIELD
 *     what this host refuses before a test starts (CPUs, device, congestion)
 * core.traffic_server_check([opts[, ctx]]) -> true
 *     every rule of the options (options.h), raised as "<ctx>: opts.<key>: ..."
 * core.traffic_defaults() -> the engine's defaults (port, lengths, bitrates, ...)
 * core.traffic_client(opts) -> qoslab.Test | nil, msg, CODE
 *     :next_interval([timeout_s]) -> interval | false (over) | nil (timeout)
 *     :wait() -> result | nil, msg, CODE
 *     :start_time_unix_s() -> the test clock's zero (once an interval came)
 *     :setup() -> cookie, tcp_mss_bytes, tcp_congestion, streams[i].socket
 *         as the result will hold them (once an interval came), or nil
 *     :stop()                       end early; a result is still produced
 *     :abort()                      end at once, no results exchange (a dead
 *                                   path): :wait() then fails
 * core.traffic_server([opts]) -> qoslab.Server | nil, msg, CODE
 *     :port()  :stop()  :tests_running()
 *     :results() -> { result, ... }, total   the last keep_results finished
 *         tests, oldest first; the last one is test number total
 *     :finished() -> tests finished since the start (kept or not)
 *     :rejected() -> control connections refused (bad cookie, bad JSON, ...)
 *     :problems([since]) -> rejected, failed tests, the last one's text or nil, the log
 *     :started() -> tests started, the last one's description or nil
 *     :done() -> true once a one_off server has served its test or stopped
 *     :limits() -> the shared-server limits in effect (defaults filled in)
 *     :probe_counters() -> the latency probe responder's counters (probe_server.h)
 *
 * The option keys, kinds and ranges are the core's table (options.h): this
 * file converts by it and holds no list of its own.
 * The result table is built by traffic_result.c: plain tables, counters as
 * integers, rates as floats (described in manual/results.md).
 * Worker threads never see the lua_State: these functions copy snapshots.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/engine/engine.h"
#include "../core/engine/options.h"
#include "../core/engine/probe_server.h"
#include "../core/sig.h"
#include "../core/tcpca.h"
#include "../core/timer.h"
#include "bind.h"
#include "traffic_result.h"

#define TEST_T "qoslab.Test"
#define SERVER_T "qoslab.Server"

typedef struct ltest {
	ql_test *t;
	int reverse, bidir, udp;
} ltest;

typedef struct lserver {
	ql_server *s;
} lserver;

/* --------------------------------------------------------- options ------ */

/* The client options at idx, checked by every rule (raises); strings in
 * *o point into the table. */
static void client_opts(lua_State *L, int idx, const char *ctx, ql_client_opts *o)
{
	ql_client_opts_init(o);
	int proto = QL_PROTO_TCP;
	qlb_read_opts(L, idx, ctx, "opts", ql_client_opt_desc, 0, o, &proto);
	ql_err e;
	if (ql_client_opts_validate(o, &e) < 0)
		luaL_error(L, "%s: %s", ctx, e.msg);
}

static void server_opts(lua_State *L, int idx, const char *ctx, ql_server_opts *o)
{
	ql_server_opts_init(o);
	if (lua_isnoneornil(L, idx))
		return;
	qlb_read_opts(L, idx, ctx, "opts", ql_server_opt_desc, 0, o, NULL);
	ql_err e;
	if (ql_server_opts_validate(o, &e) < 0)
		luaL_error(L, "%s: %s", ctx, e.msg);
}

static void set_opt_string(lua_State *L, const char *k, const char *v)
{
	if (v)
		qlb_set_string(L, k, v);
}

/* A CPU list, as a list (one number given comes back as one entry). */
static void set_cpu_list(lua_State *L, const char *k, const ql_cpu_list *l)
{
	if (l->n == 0)
		return;
	lua_createtable(L, l->n, 0);
	for (int i = 0; i < l->n; i++) {
		lua_pushinteger(L, l->cpu[i]);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, k);
}

/* The client options as the test runs them: what was given, the rest at
 * the core's defaults (length_bytes and bitrate_bps by proto; a UDP test
 * without length_bytes sizes its datagrams from the path MSS at start, so
 * it stays nil; duration_s is nil for a byte or packet limit). */
static void push_client_opts(lua_State *L, const ql_client_opts *o)
{
	int udp = o->proto == QL_PROTO_UDP;
	lua_createtable(L, 0, 32);
	qlb_set_string(L, "host", o->host);
	qlb_set_integer(L, "port", o->port);
	qlb_set_string(L, "proto", ql_proto_names[udp]);
	qlb_set_integer(L, "parallel", o->parallel);
	if (o->bytes)
		qlb_set_integer(L, "bytes", (lua_Integer)o->bytes);
	else if (o->packets)
		qlb_set_integer(L, "packets", (lua_Integer)o->packets);
	else
		qlb_set_number(L, "duration_s", o->duration_s > 0 ? o->duration_s
							    : QL_DURATION_DEFAULT_S);
	qlb_set_boolean(L, "reverse", o->reverse);
	qlb_set_boolean(L, "bidir", o->bidir);
	qlb_set_number(L, "omit_s", o->omit_s);
	qlb_set_number(L, "interval_s", o->interval_s);
	if (o->window_bytes)
		qlb_set_integer(L, "window_bytes", o->window_bytes);
	if (o->sndbuf_bytes)
		qlb_set_integer(L, "sndbuf_bytes", o->sndbuf_bytes);
	if (o->rcvbuf_bytes)
		qlb_set_integer(L, "rcvbuf_bytes", o->rcvbuf_bytes);
	qlb_set_integer(L, "bitrate_bps", (lua_Integer)(o->bitrate_set ? o->bitrate_bps
				: udp ? QL_UDP_DEFAULT_BPS : 0));
	if (o->length_bytes || !udp)
		qlb_set_integer(L, "length_bytes", o->length_bytes ? o->length_bytes
								 : QL_TCP_DEFAULT_LEN);
	set_opt_string(L, "congestion", o->congestion);
	if (o->mss_bytes)
		qlb_set_integer(L, "mss_bytes", o->mss_bytes);
	if (o->tos >= 0)
		qlb_set_integer(L, "tos", o->tos);
	if (o->skip_rx_copy > 0)
		qlb_set_boolean(L, "skip_rx_copy", 1);
	if (o->zerocopy > 0)
		qlb_set_boolean(L, "zerocopy", 1);
	set_cpu_list(L, "cpu_affinity", &o->cpu_affinity);
	set_cpu_list(L, "server_cpu_affinity", &o->server_cpu_affinity);
	if (o->tos_per_stream.n) {
		lua_createtable(L, o->tos_per_stream.n, 0);
		for (int i = 0; i < o->tos_per_stream.n; i++) {
			lua_pushinteger(L, o->tos_per_stream.tos[i]);
			lua_rawseti(L, -2, i + 1);
		}
		lua_setfield(L, -2, "tos_per_stream");
	}
	if (!udp)
		qlb_set_boolean(L, "nodelay", o->nodelay > 0);
	if (o->fq_rate_bps)
		qlb_set_integer(L, "fq_rate_bps", (lua_Integer)o->fq_rate_bps);
	set_opt_string(L, "bind_address", o->bind_address);
	set_opt_string(L, "bind_device", o->bind_device);
	set_opt_string(L, "netns", o->netns);
	qlb_set_number(L, "connect_timeout_s", o->connect_timeout_s > 0 ? o->connect_timeout_s
						: QL_CONNECT_TIMEOUT_DEFAULT_S);
	if (udp) {
		qlb_set_integer(L, "udp_batch", o->udp_batch ? o->udp_batch : QL_UDP_BATCH_DEFAULT);
		qlb_set_boolean(L, "udp_gso", o->udp_gso > 0);
		/* nil: the default rule, max(0.25 s, 2 x the control RTT) */
		if (o->udp_drain_s >= 0)
			qlb_set_number(L, "udp_drain_s", o->udp_drain_s);
	}
	set_opt_string(L, "title", o->title);
}

/* core.traffic_client_check(opts[, ctx]) -> the options as the test would
 * run them (push_client_opts). Every rule of the client options, without
 * starting anything; raises "<ctx>: opts.<key>: ..." (ctx default
 * "qoslab.client"). */
static int l_client_check(lua_State *L)
{
	const char *ctx = luaL_optstring(L, 2, "qoslab.client");
	ql_client_opts o;
	client_opts(L, 1, ctx, &o);
	push_client_opts(L, &o);
	return 1;
}

/* core.traffic_client_host_check(opts[, ctx]) -> true | nil, msg, CODE,
 * FIELD: what this host refuses of the options before the test starts
 * (ql_client_check_host: cpu_affinity's CPUs, bind_device in its
 * namespace; the congestion control among the kernel's), so a caller can
 * fail before a probe's idle phase or a delayed start. FIELD names the
 * option ("opts.cpu_affinity", "opts.bind_device", "opts.netns",
 * "opts.congestion"). Raises on bad options, as traffic_client_check. */
static int l_client_host_check(lua_State *L)
{
	const char *ctx = luaL_optstring(L, 2, "qoslab.client");
	ql_client_opts o;
	client_opts(L, 1, ctx, &o);
	ql_err e;
	ql_err_clear(&e);
	const char *field = "opts.congestion";
	int rc = 0;
	if (o.congestion && o.proto == QL_PROTO_TCP)
		rc = ql_tcp_ca_check_available("opts.congestion", o.congestion, &e);
	if (rc >= 0)
		rc = ql_client_check_host(&o, &field, &e);
	if (rc >= 0) {
		lua_pushboolean(L, 1);
		return 1;
	}
	int n = qlb_fail(L, &e);
	lua_pushstring(L, field ? field : "opts");
	return n + 1;
}

/* core.traffic_server_check([opts[, ctx]]) -> true. Every rule of the
 * server options; raises "<ctx>: opts.<key>: ..." (ctx default
 * "qoslab.server"). The limits in effect are the server's :limits(). */
static int l_server_check(lua_State *L)
{
	const char *ctx = luaL_optstring(L, 2, "qoslab.server");
	ql_server_opts o;
	server_opts(L, 1, ctx, &o);
	lua_pushboolean(L, 1);
	return 1;
}

/* core.traffic_defaults() -> the engine's defaults of the values a
 * result's writer needs when the options left them out. */
static int l_defaults(lua_State *L)
{
	lua_createtable(L, 0, 10);
	qlb_set_integer(L, "port", QL_DEFAULT_PORT);
	qlb_set_integer(L, "parallel", 1);
	qlb_set_number(L, "duration_s", QL_DURATION_DEFAULT_S);
	qlb_set_number(L, "connect_timeout_s", QL_CONNECT_TIMEOUT_DEFAULT_S);
	qlb_set_integer(L, "tcp_length_bytes", QL_TCP_DEFAULT_LEN);
	qlb_set_integer(L, "udp_length_bytes", QL_UDP_DEFAULT_LEN);
	qlb_set_integer(L, "tcp_bitrate_bps", 0);
	qlb_set_integer(L, "udp_bitrate_bps", (lua_Integer)QL_UDP_DEFAULT_BPS);
	qlb_set_integer(L, "udp_batch", QL_UDP_BATCH_DEFAULT);
	return 1;
}

/* ---------------------------------------------------------- client ------ */

static int l_client(lua_State *L)
{
	static const char ctx[] = "qoslab.client";
	ql_client_opts o;
	client_opts(L, 1, ctx, &o);
	ql_err ce;
	/* Before the test starts, so a name this kernel lacks is not first
	 * met by a stream's setsockopt after the control connection is up. */
	if (o.congestion && o.proto == QL_PROTO_TCP &&
	    ql_tcp_ca_check_available("opts.congestion", o.congestion, &ce) < 0)
		return qlb_fail(L, &ce);
	ltest *u = lua_newuserdatauv(L, sizeof *u, 0);
	u->t = NULL;
	u->reverse = o.reverse;
	u->bidir = o.bidir;
	u->udp = o.proto == QL_PROTO_UDP;
	luaL_setmetatable(L, TEST_T);
	ql_err e;
	ql_err_clear(&e);
	if (ql_client_start(&o, &u->t, &e) < 0)
		return qlb_fail(L, &e);
	return 1;
}

static ltest *check_test(lua_State *L)
{
	ltest *u = luaL_checkudata(L, 1, TEST_T);
	if (!u->t)
		luaL_error(L, "qoslab.Test: the test was closed");
	return u;
}

static int l_test_next(lua_State *L)
{
	ltest *u = check_test(L);
	double timeout = -1;
	if (!lua_isnoneornil(L, 2)) {
		timeout = luaL_checknumber(L, 2);
		if (!isfinite(timeout) || timeout < 0 || timeout > 1e9)
			return qlb_field_error(L, "qoslab.Test:next_interval", "timeout_s",
					       "a number of seconds >= 0", 2);
	}
	int64_t deadline = timeout >= 0 ? ql_now_ns() + (int64_t)(timeout * 1e9) : 0;
	lua_Hook mark = qlb_hook_mark(L);
	for (;;) {
		/* Wait in slices so SIGINT can stop the test. */
		int64_t slice = 100000000;
		if (timeout >= 0) {
			int64_t left = deadline - ql_now_ns();
			if (left < 0)
				left = 0;
			if (left < slice)
				slice = left;
		}
		ql_interval *iv = NULL;
		int rc = ql_test_next_interval(u->t, slice, &iv);
		if (rc == 1) {
			qlb_push_traffic_interval(L, iv, u->reverse ? QL_DIR_REVERSE : QL_DIR_FORWARD,
				      u->bidir, u->udp);
			ql_interval_clear(iv);
			free(iv);
			return 1;
		}
		if (rc == -ENODATA) {
			lua_pushboolean(L, 0);
			return 1;
		}
		if (rc < 0)
			return luaL_error(L, "qoslab.Test:next_interval: out of memory");
		if (qlb_interrupted(L, mark))
			ql_test_stop(u->t);
		if (timeout >= 0 && ql_now_ns() >= deadline) {
			lua_pushnil(L);
			return 1;
		}
	}
}

static int l_test_wait(lua_State *L)
{
	ltest *u = check_test(L);
	/* Drain the live queue while waiting so SIGINT is honoured: the test
	 * stops at once (both ends), then the interrupt propagates. */
	lua_Hook mark = qlb_hook_mark(L);
	for (;;) {
		ql_interval *iv = NULL;
		int rc = ql_test_next_interval(u->t, 100000000, &iv);
		if (rc == 1) {
			ql_interval_clear(iv);
			free(iv);
			continue;
		}
		if (rc == -ENODATA)
			break;
		if (qlb_interrupted(L, mark))
			ql_test_stop(u->t);
	}
	const ql_result *r = NULL;
	ql_err e;
	ql_err_clear(&e);
	if (ql_test_wait(u->t, &r, &e) < 0)
		return qlb_fail(L, &e);
	qlb_push_traffic_result(L, r);
	return 1;
}

/* :start_time_unix_s() -> the test clock's zero (CLOCK_REALTIME s), valid
 * once :next_interval returned a record; 0 before the test started */
static int l_test_start_unix(lua_State *L)
{
	ltest *u = check_test(L);
	lua_pushnumber(L, ql_test_start_unix(u->t));
	return 1;
}

static int l_test_setup(lua_State *L)
{
	ltest *u = check_test(L);
	ql_test_setup su;
	int rc = ql_test_setup_get(u->t, &su);
	if (rc == -ENOMEM)
		return luaL_error(L, "qoslab.Test:setup: out of memory");
	if (rc < 0) {
		lua_pushnil(L);
		return 1;
	}
	lua_createtable(L, 0, 4);
	qlb_set_traffic_setup_fields(L, su.cookie, su.ctrl_mss_bytes, su.tcp_ca, "");
	lua_createtable(L, su.nstreams, 0);
	for (int i = 0; i < su.nstreams; i++) {
		lua_createtable(L, 0, 3);
		qlb_set_integer(L, "id", su.streams[i].id);
		qlb_set_string(L, "direction", qlb_traffic_dir_name(su.streams[i].dir));
		if (su.streams[i].sock.present) {
			qlb_push_traffic_sock(L, &su.streams[i].sock);
			lua_setfield(L, -2, "socket");
		}
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "streams");
	free(su.streams);
	return 1;
}

static int l_test_stop(lua_State *L)
{
	ltest *u = luaL_checkudata(L, 1, TEST_T);
	if (u->t)
		ql_test_stop(u->t);
	return 0;
}

/* :abort(): end at once, without the results exchange (a dead path) */
static int l_test_abort(lua_State *L)
{
	ltest *u = luaL_checkudata(L, 1, TEST_T);
	if (u->t)
		ql_test_abort(u->t);
	return 0;
}

static int l_test_gc(lua_State *L)
{
	ltest *u = luaL_checkudata(L, 1, TEST_T);
	if (u->t) {
		ql_test_free(u->t);
		u->t = NULL;
	}
	return 0;
}

static int l_test_tostring(lua_State *L)
{
	ltest *u = luaL_checkudata(L, 1, TEST_T);
	lua_pushfstring(L, "qoslab.Test (%s)", u->t ? "open" : "closed");
	return 1;
}

/* ---------------------------------------------------------- server ------ */

static int l_server(lua_State *L)
{
	ql_server_opts o;
	server_opts(L, 1, "qoslab.server", &o);
	lserver *u = lua_newuserdatauv(L, sizeof *u, 0);
	u->s = NULL;
	luaL_setmetatable(L, SERVER_T);
	ql_err e;
	ql_err_clear(&e);
	if (ql_server_start(&o, &u->s, &e) < 0)
		return qlb_fail(L, &e);
	return 1;
}

static lserver *check_server(lua_State *L)
{
	lserver *u = luaL_checkudata(L, 1, SERVER_T);
	if (!u->s)
		/* No position: the Lua method raises it again at its caller's line. */
		lua_pushliteral(L, "qoslab.Server: the server was closed"), lua_error(L);
	return u;
}

static int l_server_port(lua_State *L)
{
	lua_pushinteger(L, ql_server_port(check_server(L)->s));
	return 1;
}

static int l_server_results(lua_State *L)
{
	lserver *u = check_server(L);
	const ql_result **rs = NULL;
	int n = 0;
	uint64_t total = 0;
	if (ql_server_results(u->s, &rs, &n, &total) < 0)
		return luaL_error(L, "qoslab.Server:results: out of memory");
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		qlb_push_traffic_result(L, rs[i]);
		lua_rawseti(L, -2, i + 1);
	}
	ql_server_results_release(rs, n);
	lua_pushinteger(L, (lua_Integer)total);
	return 2;
}

static int l_server_finished(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)ql_server_finished(check_server(L)->s));
	return 1;
}

static int l_server_running(lua_State *L)
{
	lua_pushinteger(L, ql_server_tests_running(check_server(L)->s));
	return 1;
}

static int l_server_rejected(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)ql_server_rejected(check_server(L)->s));
	return 1;
}

/* :problems([since]) -> rejected, failed, last text (nil when none), and
 * the log: { total =, dropped =, [i] = { seq, test, time_unix_s, host,
 * port, reason } } of the kept problems numbered above since */
static int l_server_problems(lua_State *L)
{
	char last[1024];
	uint64_t failed = 0;
	ql_server *srv = check_server(L)->s;
	lua_Integer since = luaL_optinteger(L, 2, 0);
	luaL_argcheck(L, since >= 0, 2, "since: expected a problem number >= 0");
	uint64_t rej = ql_server_problems(srv, &failed, last, sizeof last);
	lua_pushinteger(L, (lua_Integer)rej);
	lua_pushinteger(L, (lua_Integer)failed);
	if (last[0])
		lua_pushstring(L, last);
	else
		lua_pushnil(L);
	ql_srv_problem *pl = malloc(QL_SRV_PROBLEMS_KEPT * sizeof *pl);
	if (!pl)
		return luaL_error(L, "out of memory");
	uint64_t total = 0;
	int n = ql_server_problem_log(srv, (uint64_t)since, pl, QL_SRV_PROBLEMS_KEPT, &total);
	lua_createtable(L, n, 2);
	qlb_set_integer(L, "total", (lua_Integer)total);
	uint64_t first = n > 0 ? pl[0].seq : total + 1;
	qlb_set_integer(L, "dropped", (lua_Integer)(first - 1 > (uint64_t)since
							 ? first - 1 - (uint64_t)since : 0));
	for (int i = 0; i < n; i++) {
		lua_createtable(L, 0, 6);
		qlb_set_integer(L, "seq", (lua_Integer)pl[i].seq);
		qlb_set_integer(L, "test", (lua_Integer)pl[i].test);
		qlb_set_number(L, "time_unix_s", pl[i].time_unix_s);
		qlb_set_string(L, "host", pl[i].host);
		qlb_set_integer(L, "port", pl[i].port);
		qlb_set_string(L, "reason", pl[i].text);
		lua_rawseti(L, -2, i + 1);
	}
	free(pl);
	return 4;
}

/* :started() -> tests started, last one's description (nil when none) */
static int l_server_started(lua_State *L)
{
	char last[512];
	uint64_t n = ql_server_started(check_server(L)->s, last, sizeof last);
	lua_pushinteger(L, (lua_Integer)n);
	if (last[0])
		lua_pushstring(L, last);
	else
		lua_pushnil(L);
	return 2;
}

/* :limits() -> { max_tests =, max_tests_per_address =, ..., data_idle_s = (0 = auto),
 * idle_timeout_s =, cookie_timeout_s = } */
static int l_server_limits(lua_State *L)
{
	ql_server_opts o;
	ql_server_limits(check_server(L)->s, &o);
	lua_createtable(L, 0, 10);
	lua_pushinteger(L, o.max_tests);
	lua_setfield(L, -2, "max_tests");
	lua_pushinteger(L, o.max_tests_per_address);
	lua_setfield(L, -2, "max_tests_per_address");
	lua_pushinteger(L, o.max_streams_per_address);
	lua_setfield(L, -2, "max_streams_per_address");
	lua_pushinteger(L, o.max_unidentified);
	lua_setfield(L, -2, "max_unidentified");
	lua_pushinteger(L, o.max_unidentified_per_address);
	lua_setfield(L, -2, "max_unidentified_per_address");
	lua_pushnumber(L, o.data_idle_s);
	lua_setfield(L, -2, "data_idle_s");
	lua_pushnumber(L, o.max_duration_s);
	lua_setfield(L, -2, "max_duration_s");
	lua_pushinteger(L, (lua_Integer)o.test_buffer_bytes);
	lua_setfield(L, -2, "test_buffer_bytes");
	lua_pushnumber(L, o.idle_timeout_s);
	lua_setfield(L, -2, "idle_timeout_s");
	lua_pushnumber(L, ql_server_cookie_timeout_s(&o));
	lua_setfield(L, -2, "cookie_timeout_s");
	return 1;
}

/* :probe_counters() -> the latency probe responder's counters */
static int l_server_probe_counters(lua_State *L)
{
	lserver *u = check_server(L);
	ql_probe_srv_counters c;
	ql_server_probe_counters(u->s, &c);
	lua_createtable(L, 0, 12);
	qlb_set_integer(L, "udp_replies", (lua_Integer)c.udp_replies);
	qlb_set_integer(L, "udp_malformed", (lua_Integer)c.udp_malformed);
	qlb_set_integer(L, "udp_rate_limited", (lua_Integer)c.udp_rate_limited);
	qlb_set_integer(L, "udp_unknown", (lua_Integer)c.udp_unknown);
	qlb_set_integer(L, "tcp_sessions", (lua_Integer)c.tcp_sessions);
	qlb_set_integer(L, "tcp_refused", (lua_Integer)c.tcp_refused);
	qlb_set_integer(L, "tcp_replies", (lua_Integer)c.tcp_replies);
	qlb_set_integer(L, "tcp_malformed", (lua_Integer)c.tcp_malformed);
	qlb_set_integer(L, "tcp_rate_limited", (lua_Integer)c.tcp_rate_limited);
	qlb_set_integer(L, "tcp_idle_closed", (lua_Integer)c.tcp_idle_closed);
	qlb_set_integer(L, "tcp_evicted", (lua_Integer)c.tcp_evicted);
	qlb_set_integer(L, "tcp_open", c.tcp_open);
	return 1;
}

static int l_server_done(lua_State *L)
{
	lserver *u = luaL_checkudata(L, 1, SERVER_T);
	lua_pushboolean(L, !u->s || ql_server_done(u->s));
	return 1;
}

static int l_server_stop(lua_State *L)
{
	lserver *u = luaL_checkudata(L, 1, SERVER_T);
	if (u->s) {
		ql_server_free(u->s);
		u->s = NULL;
	}
	return 0;
}

static int l_server_tostring(lua_State *L)
{
	lserver *u = luaL_checkudata(L, 1, SERVER_T);
	if (u->s)
		lua_pushfstring(L, "qoslab.Server (port %d)", ql_server_port(u->s));
	else
		lua_pushliteral(L, "qoslab.Server (stopped)");
	return 1;
}

void qlb_open_traffic(lua_State *L)
{
	static const luaL_Reg test_m[] = {
		{ "next_interval", l_test_next },
		{ "wait", l_test_wait },
		{ "stop", l_test_stop },
		{ "abort", l_test_abort },
		{ "start_time_unix_s", l_test_start_unix },
		{ "setup", l_test_setup },
		{ NULL, NULL }
	};
	static const luaL_Reg server_m[] = {
		{ "port", l_server_port },
		{ "results", l_server_results },
		{ "finished", l_server_finished },
		{ "tests_running", l_server_running },
		{ "started", l_server_started },
		{ "rejected", l_server_rejected },
		{ "problems", l_server_problems },
		{ "limits", l_server_limits },
		{ "probe_counters", l_server_probe_counters },
		{ "done", l_server_done },
		{ "stop", l_server_stop },
		{ NULL, NULL }
	};
	qlb_newclass(L, TEST_T, test_m, l_test_gc, l_test_tostring);
	qlb_newclass(L, SERVER_T, server_m, l_server_stop, l_server_tostring);
	lua_pushcfunction(L, l_client);
	lua_setfield(L, -2, "traffic_client");
	lua_pushcfunction(L, l_server);
	lua_setfield(L, -2, "traffic_server");
	lua_pushcfunction(L, l_client_check);
	lua_setfield(L, -2, "traffic_client_check");
	lua_pushcfunction(L, l_client_host_check);
	lua_setfield(L, -2, "traffic_client_host_check");
	lua_pushcfunction(L, l_server_check);
	lua_setfield(L, -2, "traffic_server_check");
	lua_pushcfunction(L, l_defaults);
	lua_setfield(L, -2, "traffic_defaults");
}
