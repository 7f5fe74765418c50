/*
 * traffic_result.c - the traffic engine's records as Lua tables: results,
 * intervals, a test's setup and sockets (csrc/core/engine/record.h).
 * Plain tables, counters as integers, rates as floats (described in
 * manual/results.md). Stands on bind.h; traffic.c uses it.
 */
#include <string.h>

#include "../core/engine/engine.h"
#include "bind.h"
#include "traffic_result.h"

static const char *side_name(int side)
{
	return side == QL_SIDE_SERVER ? "server" : "client";
}

const char *qlb_traffic_dir_name(int dir)
{
	return dir == QL_DIR_REVERSE ? "reverse" : "forward";
}

static void push_buf(lua_State *L, const ql_bufinfo *b)
{
	lua_createtable(L, 0, 4);
	qlb_set_integer(L, "requested_bytes", b->requested_bytes);
	qlb_set_integer(L, "granted_bytes", b->granted_bytes);
	qlb_set_boolean(L, "clamped", b->clamped);
	qlb_set_string(L, "sysctl", b->sysctl);
}

/* A counter as a Lua integer. The books keep local counters far below
 * QL_COUNT_MAX (the receiver refuses sequence numbers beyond what the
 * sender can have sent) and the results parser refuses a peer's above it,
 * so the clamp never bites; it makes a negative count impossible, also in
 * a Lua sum of counters. */
static void set_count(lua_State *L, const char *key, uint64_t v)
{
	qlb_set_integer(L, key, (lua_Integer)(v < QL_COUNT_MAX ? v : QL_COUNT_MAX));
}

static void set_hist(lua_State *L, const char *key, const uint64_t *h, int n)
{
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		lua_pushinteger(L, (lua_Integer)(h[i] < QL_COUNT_MAX ? h[i] : QL_COUNT_MAX));
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, key);
}

/* A mean of count items summing to sum, nil (not set) without items. */
static void set_mean(lua_State *L, const char *key, double sum, uint64_t count)
{
	if (count > 0)
		qlb_set_number(L, key, sum / (double)count);
}

/* The closed books' loss runs and reordering extents (manual/results.md,
 * "UDP path statistics"). */
static void set_path_fields(lua_State *L, const ql_udp_path *p)
{
	lua_createtable(L, 0, 8);
	set_count(L, "bursts", p->bursts);
	set_count(L, "burst_packets", p->burst_packets);
	set_mean(L, "mean_burst_packets", (double)p->burst_packets, p->bursts);
	set_hist(L, "burst_histogram", p->burst_hist, QL_BURST_BUCKETS);
	set_count(L, "gaps", p->gaps);
	set_count(L, "gap_packets", p->gap_packets);
	set_mean(L, "mean_gap_packets", (double)p->gap_packets, p->gaps);
	set_hist(L, "gap_histogram", p->gap_hist, QL_GAP_BUCKETS);
	lua_setfield(L, -2, "loss_runs");
	lua_createtable(L, 0, 5);
	set_count(L, "packets", p->extent_packets);
	set_count(L, "max_packets", p->extent_max);
	set_mean(L, "mean_packets", (double)p->extent_sum, p->extent_packets);
	set_count(L, "sum_packets", p->extent_sum);
	set_hist(L, "histogram", p->extent_hist, QL_EXTENT_BUCKETS);
	lua_setfield(L, -2, "reorder_extent");
}

/* Fields shared by totals, stream sides and interval entries. Absent
 * measurements (no TCP_INFO sample, no jitter yet) stay nil. */
static void set_entry_fields(lua_State *L, const ql_entry *x, int udp)
{
	qlb_set_string(L, "side", side_name(x->side));
	set_count(L, "bytes", x->bytes);
	qlb_set_number(L, "seconds", x->seconds);
	qlb_set_number(L, "bits_per_second", x->bits_per_second);
	if (x->valid & QL_E_WRITES)
		set_count(L, "writes", x->writes);
	if (udp && (x->valid & QL_E_PACKETS))
		set_count(L, "packets", x->packets);
	if (x->valid & QL_E_RETRANS)
		set_count(L, "retransmits", x->retransmits);
	if (x->valid & QL_E_UDPRX) {
		set_count(L, "unique_packets", x->unique_packets);
		set_count(L, "lost_packets", x->lost_packets);
		set_count(L, "duplicate_packets", x->duplicate_packets);
		set_count(L, "out_of_order_packets", x->out_of_order_packets);
		set_count(L, "late_packets", x->late_packets);
		set_count(L, "invalid_packets", x->invalid_packets);
		qlb_set_number(L, "lost_pct", x->lost_pct);
	}
	if (x->valid & QL_E_JITTER)
		qlb_set_number(L, "jitter_ms", x->jitter_ms);
	if (x->valid & QL_E_JITMEAN) {
		set_count(L, "jitter_pairs", x->jitter_pairs);
		if (x->jitter_pairs > 0)
			qlb_set_number(L, "jitter_mean_abs_ms", ql_jitter_mean_abs_ms(x));
	}
}

static void push_total(lua_State *L, const ql_result *r, int dir, int role)
{
	const ql_entry *x = &r->tot[dir][role];
	lua_createtable(L, 0, 16);
	if (!r->tot_present[dir][role]) {
		/* The peer did not report this side (e.g. a stock iperf3 that
		 * failed to send results): name the side, zero counts. */
		int side = (dir == QL_DIR_REVERSE) == (role == QL_ROLE_SENDER)
			   ? QL_SIDE_SERVER : QL_SIDE_CLIENT;
		qlb_set_string(L, "side", side_name(side));
		qlb_set_integer(L, "bytes", 0);
		qlb_set_number(L, "seconds", 0.0);
		qlb_set_number(L, "bits_per_second", 0.0);
		return;
	}
	set_entry_fields(L, x, r->proto == QL_PROTO_UDP);
	if (role == QL_ROLE_RECEIVER && (x->valid & QL_E_UDPPATH))
		set_path_fields(L, &r->tot_path[dir]);
}

/* A stream's socket on this end (manual/results.md, "Streams"). */
void qlb_push_traffic_sock(lua_State *L, const ql_sock_info *k)
{
	lua_createtable(L, 0, 6);
	qlb_set_string(L, "local_host", k->local_host);
	qlb_set_integer(L, "local_port", k->local_port);
	qlb_set_string(L, "remote_host", k->remote_host);
	qlb_set_integer(L, "remote_port", k->remote_port);
	qlb_set_integer(L, "sndbuf_bytes", k->sndbuf_bytes);
	qlb_set_integer(L, "rcvbuf_bytes", k->rcvbuf_bytes);
}

/* cookie, tcp_mss_bytes and tcp_congestion = { client =, server = } of a
 * result or a test's setup into the table on top. */
void qlb_set_traffic_setup_fields(lua_State *L, const char *cookie, int mss,
			     const char *ca_client, const char *ca_server)
{
	if (cookie[0])
		qlb_set_string(L, "cookie", cookie);
	if (mss > 0)
		qlb_set_integer(L, "tcp_mss_bytes", mss);
	if (ca_client[0] || ca_server[0]) {
		lua_createtable(L, 0, 2);
		if (ca_client[0])
			qlb_set_string(L, "client", ca_client);
		if (ca_server[0])
			qlb_set_string(L, "server", ca_server);
		lua_setfield(L, -2, "tcp_congestion");
	}
}

/* path: the stream's path statistics (its receiver's; NULL for a sender) */
static void push_stream_side(lua_State *L, const ql_entry *x, int role, int udp,
			     const ql_udp_path *path)
{
	lua_createtable(L, 0, 16);
	set_entry_fields(L, x, udp);
	if (path && (x->valid & QL_E_UDPPATH))
		set_path_fields(L, path);
	if (x->valid & QL_E_RTTSUM) {
		qlb_set_integer(L, "max_rtt_us", x->max_rtt_us);
		qlb_set_integer(L, "min_rtt_us", x->min_rtt_us);
		qlb_set_integer(L, "mean_rtt_us", x->mean_rtt_us);
		set_count(L, "max_snd_cwnd_bytes", x->max_snd_cwnd_bytes);
	}
	if (x->valid & QL_E_MAXWND)
		set_count(L, "max_snd_wnd_bytes", x->max_snd_wnd_bytes);
	if (x->buf.present) {
		push_buf(L, &x->buf);
		lua_setfield(L, -2, role == QL_ROLE_SENDER ? "sndbuf" : "rcvbuf");
	}
}

static void push_ientry(lua_State *L, const ql_entry *x, int udp, int with_id)
{
	lua_createtable(L, 0, 20);
	if (with_id) {
		qlb_set_integer(L, "id", x->id);
		qlb_set_string(L, "direction", qlb_traffic_dir_name(x->dir));
		qlb_set_string(L, "role", x->role == QL_ROLE_SENDER ? "sender" : "receiver");
	}
	set_entry_fields(L, x, udp);
	if (x->valid & QL_E_RTT) {
		qlb_set_integer(L, "rtt_us", x->rtt_us);
		qlb_set_integer(L, "rttvar_us", x->rttvar_us);
	}
	if (x->valid & QL_E_CWND)
		set_count(L, "snd_cwnd_bytes", x->snd_cwnd_bytes);
	if (x->valid & QL_E_SNDWND)
		set_count(L, "snd_wnd_bytes", x->snd_wnd_bytes);
	if (x->valid & QL_E_PMTU)
		qlb_set_integer(L, "pmtu_bytes", x->pmtu_bytes);
	if (x->valid & QL_E_PACING)
		qlb_set_number(L, "pacing_rate_bps", (double)x->pacing_rate_bps);
	if (x->valid & QL_E_DELIVERY)
		qlb_set_number(L, "delivery_rate_bps", (double)x->delivery_rate_bps);
}

static void push_sum(lua_State *L, const ql_interval *iv, int dir, int udp)
{
	lua_createtable(L, 0, 2);
	if (iv->sum_present[dir][QL_ROLE_SENDER]) {
		push_ientry(L, &iv->sum[dir][QL_ROLE_SENDER], udp, 0);
		lua_setfield(L, -2, "sender");
	}
	if (iv->sum_present[dir][QL_ROLE_RECEIVER]) {
		push_ientry(L, &iv->sum[dir][QL_ROLE_RECEIVER], udp, 0);
		lua_setfield(L, -2, "receiver");
	}
}

void qlb_push_traffic_interval(lua_State *L, const ql_interval *iv, int data_dir, int bidir,
			  int udp)
{
	lua_createtable(L, 0, 7);
	qlb_set_number(L, "start_s", iv->start_s);
	qlb_set_number(L, "end_s", iv->end_s);
	qlb_set_number(L, "seconds", iv->seconds);
	qlb_set_boolean(L, "omitted", iv->omitted);
	/* live records against a qoslab server: its entries for this slot
	 * did not come in time (they are in the final result) */
	if (iv->peer_live)
		qlb_set_boolean(L, "peer_missing", iv->peer_missing);
	push_sum(L, iv, data_dir, udp);
	lua_setfield(L, -2, "sum");
	if (bidir) {
		push_sum(L, iv, QL_DIR_REVERSE, udp);
		lua_setfield(L, -2, "reverse_sum");
	}
	lua_createtable(L, iv->nentries, 0);
	for (int i = 0; i < iv->nentries; i++) {
		push_ientry(L, &iv->entries[i], udp, 1);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "streams");
}

static void push_cpu(lua_State *L, const ql_cpu_result *c)
{
	lua_createtable(L, 0, 4);
	qlb_set_number(L, "total_pct", c->total_pct);
	qlb_set_number(L, "user_pct", c->user_pct);
	qlb_set_number(L, "system_pct", c->system_pct);
	if (c->has_busiest)
		qlb_set_number(L, "busiest_thread_pct", c->busiest_thread_pct);
}

void qlb_push_traffic_result(lua_State *L, const ql_result *r)
{
	int udp = r->proto == QL_PROTO_UDP;
	int ddir = r->reverse ? QL_DIR_REVERSE : QL_DIR_FORWARD;
	lua_createtable(L, 0, 24);
	qlb_set_string(L, "proto", udp ? "udp" : "tcp");
	qlb_set_boolean(L, "reverse", r->reverse);
	qlb_set_boolean(L, "bidir", r->bidir);
	qlb_set_integer(L, "parallel", r->parallel);
	qlb_set_string(L, "host", r->host);
	qlb_set_integer(L, "port", r->port);
	if (r->server_test) {
		qlb_set_integer(L, "server_test", (lua_Integer)r->server_test);
		qlb_set_integer(L, "peer_port", r->peer_port);
	}
	qlb_set_string(L, "local_role", side_name(r->local_role));
	qlb_set_number(L, "start_time_unix_s", r->start_time_unix_s);
	qlb_set_number(L, "duration_s", r->duration_s);
	qlb_set_number(L, "omit_s", r->omit_s);
	if (r->title[0])
		qlb_set_string(L, "title", r->title);
	qlb_set_traffic_setup_fields(L, r->cookie, r->ctrl_mss_bytes, r->tcp_ca[QL_SIDE_CLIENT],
			 r->tcp_ca[QL_SIDE_SERVER]);
	push_total(L, r, ddir, QL_ROLE_SENDER);
	lua_setfield(L, -2, "sent");
	push_total(L, r, ddir, QL_ROLE_RECEIVER);
	lua_setfield(L, -2, "received");
	if (r->bidir) {
		push_total(L, r, QL_DIR_REVERSE, QL_ROLE_SENDER);
		lua_setfield(L, -2, "reverse_sent");
		push_total(L, r, QL_DIR_REVERSE, QL_ROLE_RECEIVER);
		lua_setfield(L, -2, "reverse_received");
	}
	lua_createtable(L, r->nstreams, 0);
	for (int i = 0; i < r->nstreams; i++) {
		const ql_stream_result *s = &r->streams[i];
		lua_createtable(L, 0, 4);
		qlb_set_integer(L, "id", s->id);
		qlb_set_string(L, "direction", qlb_traffic_dir_name(s->dir));
		if (s->tos >= 0)
			qlb_set_integer(L, "tos", s->tos);
		if (s->zc.present) {
			lua_createtable(L, 0, 3);
			qlb_set_integer(L, "sends", (lua_Integer)s->zc.sends);
			qlb_set_integer(L, "completed", (lua_Integer)s->zc.completed);
			qlb_set_integer(L, "copied", (lua_Integer)s->zc.copied);
			lua_setfield(L, -2, "zerocopy");
		}
		if (s->sock.present) {
			qlb_push_traffic_sock(L, &s->sock);
			lua_setfield(L, -2, "socket");
		}
		if (s->has_sender) {
			push_stream_side(L, &s->sender, QL_ROLE_SENDER, udp, NULL);
			lua_setfield(L, -2, "sender");
		}
		if (s->has_receiver) {
			push_stream_side(L, &s->receiver, QL_ROLE_RECEIVER, udp, &s->path);
			lua_setfield(L, -2, "receiver");
		}
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "streams");
	lua_createtable(L, r->nintervals, 0);
	for (int i = 0; i < r->nintervals; i++) {
		qlb_push_traffic_interval(L, &r->intervals[i], ddir, r->bidir, udp);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "intervals");
	lua_createtable(L, 0, 2);
	if (r->cpu_client.present) {
		push_cpu(L, &r->cpu_client);
		lua_setfield(L, -2, "client");
	}
	if (r->cpu_server.present) {
		push_cpu(L, &r->cpu_server);
		lua_setfield(L, -2, "server");
	}
	lua_setfield(L, -2, "cpu");
	qlb_set_boolean(L, "cpu_limited", r->cpu_limited);
	lua_createtable(L, r->nwarnings, 0);
	for (int i = 0; i < r->nwarnings; i++) {
		lua_pushstring(L, r->warnings[i]);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "warnings");
	qlb_set_string(L, "peer", r->peer == QL_PEER_QOSLAB ? "qoslab" : "iperf3");
}
