/* C unit tests of the latency probe's statistics (engine/probe_stats.c):
 * nearest-rank quantiles, the histogram's edges and buckets, span
 * summaries (samples, lost, late, pending), one-way delays, the server's
 * hold and induced latency; and of its wire codec (engine/probe_wire.c)
 * and option rules (engine/probe_options.c). Every expected value is
 * worked out by hand from the fixtures. */
#include "ctest.h"

#include <stdint.h>
#include <stdlib.h>

#include "err.h"
#include "engine/probe.h"
#include "engine/probe_stats.h"
#include "engine/probe_wire.h"
#include "engine/proto.h"

#define MSNS 1000000LL

TEST(quantile_nearest_rank)
{
	int64_t v[1001];
	for (int i = 0; i < 1001; i++)
		v[i] = i + 1;
	/* 1..10: rank ceil(p * 10) */
	CHECK_EQ_INT(ql_lat_quantile(v, 10, 500), 5);
	CHECK_EQ_INT(ql_lat_quantile(v, 10, 900), 9);
	CHECK_EQ_INT(ql_lat_quantile(v, 10, 990), 10);
	CHECK_EQ_INT(ql_lat_quantile(v, 10, 999), 10);
	/* p50 of 4 values is the 2nd */
	CHECK_EQ_INT(ql_lat_quantile(v, 4, 500), 2);
	CHECK_EQ_INT(ql_lat_quantile(v, 1, 500), 1);
	CHECK_EQ_INT(ql_lat_quantile(v, 1, 999), 1);
	/* 1..1000: exact ranks, no float rounding at the products */
	CHECK_EQ_INT(ql_lat_quantile(v, 1000, 500), 500);
	CHECK_EQ_INT(ql_lat_quantile(v, 1000, 900), 900);
	CHECK_EQ_INT(ql_lat_quantile(v, 1000, 990), 990);
	CHECK_EQ_INT(ql_lat_quantile(v, 1000, 999), 999);
	/* 1..1001: ceil(500.5) = 501, ceil(999.999) = 1000 */
	CHECK_EQ_INT(ql_lat_quantile(v, 1001, 500), 501);
	CHECK_EQ_INT(ql_lat_quantile(v, 1001, 999), 1000);
}

TEST(dist_of_unsorted)
{
	int64_t v[] = { 5 * MSNS, 1 * MSNS, 4 * MSNS, 2 * MSNS, 3 * MSNS };
	ql_lat_dist d;
	ql_lat_dist_of(v, 5, &d);
	CHECK_EQ_INT(d.n, 5);
	CHECK_NEAR(d.min_ms, 1.0, 1e-12);
	CHECK_NEAR(d.max_ms, 5.0, 1e-12);
	CHECK_NEAR(d.mean_ms, 3.0, 1e-12);
	CHECK_NEAR(d.p50_ms, 3.0, 1e-12);    /* rank ceil(2.5) = 3 */
	CHECK_NEAR(d.p90_ms, 5.0, 1e-12);    /* rank ceil(4.5) = 5 */
	ql_lat_dist_of(v, 0, &d);
	CHECK_EQ_INT(d.n, 0);
	CHECK_NEAR(d.p50_ms, 0.0, 0);
}

TEST(histogram_edges)
{
	/* 10 per decade from 1 us to 100 s, exact decades */
	CHECK_EQ_INT(QL_LAT_HIST_EDGES, 81);
	for (int k = 0; k < QL_LAT_HIST_EDGES; k += 10) {
		int64_t dec = 1000;
		for (int j = 0; j < k / 10; j++)
			dec *= 10;
		CHECK_EQ_INT(ql_lat_hist_edge_ns[k], dec);
	}
	for (int k = 1; k < QL_LAT_HIST_EDGES; k++)
		CHECK(ql_lat_hist_edge_ns[k] > ql_lat_hist_edge_ns[k - 1]);
	/* round(1000 * 10^0.1) = 1259, round(10^6 * 10^0.5) = 3162278 */
	CHECK_EQ_INT(ql_lat_hist_edge_ns[1], 1259);
	CHECK_EQ_INT(ql_lat_hist_edge_ns[35], 3162278);
	CHECK_EQ_INT(ql_lat_hist_bucket(999), -1);
	CHECK_EQ_INT(ql_lat_hist_bucket(1000), 0);
	CHECK_EQ_INT(ql_lat_hist_bucket(1258), 0);
	CHECK_EQ_INT(ql_lat_hist_bucket(1259), 1);
	CHECK_EQ_INT(ql_lat_hist_bucket(MSNS - 1), 29);
	CHECK_EQ_INT(ql_lat_hist_bucket(MSNS), 30);
	CHECK_EQ_INT(ql_lat_hist_bucket(99999999999LL), 79);
	CHECK_EQ_INT(ql_lat_hist_bucket(100000000000LL), 80);
	/* every edge starts its own bucket, one below ends the one before */
	for (int k = 1; k < QL_LAT_HIST_EDGES - 1; k++) {
		CHECK_EQ_INT(ql_lat_hist_bucket(ql_lat_hist_edge_ns[k]), k);
		CHECK_EQ_INT(ql_lat_hist_bucket(ql_lat_hist_edge_ns[k] - 1), k - 1);
	}
}

/* A sample sent at t (ms after 1000 s) answered after rtt ms (0: none). */
static ql_probe_sample smp(double t_ms, double rtt_ms)
{
	ql_probe_sample s = { 0 };
	s.tx_ns = 1000 * 1000 * MSNS + (int64_t)(t_ms * MSNS);
	if (rtt_ms > 0)
		s.rx_ns = s.tx_ns + (int64_t)(rtt_ms * MSNS);
	return s;
}

#define T0 (1000 * 1000 * MSNS)

TEST(summarize_counts)
{
	/* sent at 0..9 ms: rtt 1..6 ms, one late (50 ms > 20 ms timeout), two
	 * unanswered: the one at 8 ms is lost, the one at 9 ms still pending */
	ql_probe_sample s[10];
	for (int i = 0; i < 6; i++)
		s[i] = smp(i, i + 1);
	s[6] = smp(6, 50);
	s[7] = smp(7, 20);       /* exactly the timeout: a sample */
	s[8] = smp(8, 0);
	s[9] = smp(9, 0);
	ql_lat_summary a;
	CHECK_EQ_INT(ql_lat_summarize(s, 10, T0, T0 + 10 * MSNS, 20 * MSNS, T0 + 9 * MSNS, 0, &a), 0);
	CHECK_EQ_INT(a.samples, 7);
	CHECK_EQ_INT(a.late, 1);
	CHECK_EQ_INT(a.lost, 1);
	CHECK_NEAR(a.rtt.min_ms, 1, 1e-9);
	CHECK_NEAR(a.rtt.max_ms, 20, 1e-9);
	CHECK_NEAR(a.rtt.p50_ms, 4, 1e-9);   /* 1..6, 20: rank ceil(3.5) = 4 */
	CHECK_NEAR(a.rtt.mean_ms, 41.0 / 7, 1e-9);
	/* finished: the pending one is lost too */
	CHECK_EQ_INT(ql_lat_summarize(s, 10, T0, T0 + 10 * MSNS, 20 * MSNS, INT64_MAX, 0, &a), 0);
	CHECK_EQ_INT(a.lost, 2);
	/* the span is [from, to): 2 ms .. 5 ms holds the requests at 2, 3, 4 */
	CHECK_EQ_INT(ql_lat_summarize(s, 10, T0 + 2 * MSNS, T0 + 5 * MSNS, 20 * MSNS, INT64_MAX, 0,
				      &a), 0);
	CHECK_EQ_INT(a.samples, 3);
	CHECK_NEAR(a.rtt.p50_ms, 4, 1e-9);
	/* histogram: 1, 2, 3, 4, 5, 6, 20 ms */
	CHECK_EQ_INT(ql_lat_summarize(s, 10, T0, T0 + 10 * MSNS, 20 * MSNS, INT64_MAX, 0, &a), 0);
	CHECK_EQ_INT(a.hist.count[30], 1);   /* [1, 1.259) */
	CHECK_EQ_INT(a.hist.count[33], 1);   /* 2 ms in [1.995, 2.512) */
	CHECK_EQ_INT(a.hist.count[43], 1);   /* 20 ms in [19.95, 25.12) */
	int64_t tot = a.hist.below + a.hist.above;
	for (int k = 0; k < QL_LAT_HIST_EDGES - 1; k++)
		tot += a.hist.count[k];
	CHECK_EQ_INT(tot, a.samples);
	/* an empty span */
	CHECK_EQ_INT(ql_lat_summarize(s, 10, T0 + 100 * MSNS, T0 + 200 * MSNS, 20 * MSNS,
				      INT64_MAX, 0, &a), 0);
	CHECK_EQ_INT(a.samples + a.lost + a.late, 0);
	CHECK_EQ_INT(a.rtt.n, 0);
}

TEST(summarize_owd_hold_idle_induced)
{
	/* idle 0..3 ms: rtt 1 ms; loaded 10..13 ms: rtt 11 ms, of it 8 ms up,
	 * 0.5 ms in the server, 2.5 ms down */
	ql_probe_sample s[8];
	for (int i = 0; i < 4; i++) {
		s[i] = smp(i, 1);
		s[i].srv_rx_ns = s[i].tx_ns + MSNS / 2;
		s[i].srv_tx_ns = s[i].srv_rx_ns + MSNS / 10;
		s[i].flags = QL_PS_SERVER;
		s[4 + i] = smp(10 + i, 11);
		s[4 + i].srv_rx_ns = s[4 + i].tx_ns + 8 * MSNS;
		s[4 + i].srv_tx_ns = s[4 + i].srv_rx_ns + MSNS / 2;
		s[4 + i].flags = QL_PS_SERVER;
	}
	ql_lat_summary ld, id;
	CHECK_EQ_INT(ql_lat_summarize(s, 8, T0 + 10 * MSNS, T0 + 14 * MSNS, 100 * MSNS, INT64_MAX,
				      1, &ld), 0);
	CHECK_EQ_INT(ql_lat_summarize_outside(s, 8, T0 + 10 * MSNS, T0 + 14 * MSNS, 100 * MSNS,
					      INT64_MAX, 0, &id), 0);
	CHECK_EQ_INT(ld.samples, 4);
	CHECK_EQ_INT(id.samples, 4);
	CHECK_NEAR(ld.up.p50_ms, 8, 1e-9);
	CHECK_NEAR(ld.down.p50_ms, 2.5, 1e-9);
	CHECK_NEAR(ld.hold.p50_ms, 0.5, 1e-9);
	CHECK_NEAR(ld.up.p50_ms + ld.hold.p50_ms + ld.down.p50_ms, ld.rtt.p50_ms, 1e-9);
	CHECK_EQ_INT(id.up.n, 0);            /* owd not asked */
	CHECK_NEAR(id.hold.p50_ms, 0.1, 1e-9);
	double induced = -1;
	CHECK_EQ_INT(ql_lat_induced_ms(&ld, &id, &induced), 0);
	CHECK_NEAR(induced, 10, 1e-9);
	ql_lat_summary none;
	CHECK_EQ_INT(ql_lat_summarize(s, 8, 0, 1, 100 * MSNS, INT64_MAX, 0, &none), 0);
	CHECK_EQ_INT(ql_lat_induced_ms(&ld, &none, &induced), -1);
}

/* Fixture replies whose server times cannot be: a peer's lie (or a
 * stepped clock) must not become a hold or a one-way delay. */
TEST(server_times_that_do_not_fit_the_rtt)
{
	int64_t tx = T0, rx = T0 + 10 * MSNS, sl = QL_PROBE_SHARED_SLACK_NS;
	/* sane: 4 ms up, 1 ms hold, 5 ms down */
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx + 4 * MSNS, tx + 5 * MSNS, 1, sl), 1);
	/* negative hold (the trial's "swap": receive 1 s late, send 1 s early) */
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx + 1000 * MSNS, tx - 1000 * MSNS, 1, sl), 0);
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx + 5 * MSNS, tx + 4 * MSNS, 0, sl), 0);
	/* a hold longer than the whole round trip: unsynced too */
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx - 100 * MSNS, tx + 100 * MSNS, 0, sl), 0);
	/* one-way delays past the RTT with a plausible hold: shared only */
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx + 50 * MSNS, tx + 51 * MSNS, 1, sl), 0);
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx - 50 * MSNS, tx - 49 * MSNS, 1, sl), 0);
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx + 50 * MSNS, tx + 51 * MSNS, 0, sl), 1);
	/* within the slack of a shared clock: kept */
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, tx - sl / 2, tx + sl / 2, 1, sl), 1);
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, rx - sl / 2, rx + sl / 2, 1, sl), 1);
	/* the extremes a peer can write: INT64_MAX, 0, negative */
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, INT64_MAX, INT64_MAX, 1, sl), 0);
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, 1, 0, 1, sl), 0);
	CHECK_EQ_INT(ql_probe_server_times_ok(tx, rx, INT64_MIN, INT64_MIN, 0, sl), 0);
	/* the summary only takes what the client kept (QL_PS_SERVER) */
	ql_probe_sample s[2] = { smp(0, 10), smp(1, 10) };
	s[0].srv_rx_ns = s[0].tx_ns + 4 * MSNS;
	s[0].srv_tx_ns = s[0].tx_ns + 5 * MSNS;
	s[0].flags = QL_PS_SERVER;
	s[1].flags = QL_PS_BAD_SERVER;
	ql_lat_summary a;
	CHECK_EQ_INT(ql_lat_summarize(s, 2, INT64_MIN, INT64_MAX, 100 * MSNS, INT64_MAX, 1, &a), 0);
	CHECK_EQ_INT(a.samples, 2);
	CHECK_EQ_INT(a.hold.n, 1);
	CHECK_EQ_INT(a.up.n, 1);
	CHECK_NEAR(a.hold.max_ms, 1, 1e-9);
}

TEST(wire_round_trip_and_malformed)
{
	uint8_t buf[QL_PROBE_HDR_BYTES + 8];
	ql_probe_msg m = { .version = 1, .type = QL_PROBE_REQUEST, .flags = 0x0102,
			   .len = sizeof buf, .session = 0xdeadbeef, .seq = (1ULL << 40) + 7,
			   .client_tx_ns = 1234567890123456789LL, .server_rx_ns = 5,
			   .server_tx_ns = 6, .boot = "abcdefgh" };
	ql_probe_msg_put(&m, buf);
	ql_probe_msg g;
	CHECK_EQ_INT(ql_probe_msg_get(&g, buf, sizeof buf), 0);
	CHECK_EQ_U64(g.seq, m.seq);
	CHECK_EQ_INT(g.session, 0xdeadbeef);
	CHECK_EQ_INT(g.flags, 0x0102);
	CHECK_EQ_INT(g.len, sizeof buf);
	CHECK_EQ_INT(g.client_tx_ns, m.client_tx_ns);
	CHECK(memcmp(g.boot, "abcdefgh", 8) == 0);
	CHECK(ql_probe_is_ours(buf, 4));
	CHECK_EQ_INT(ql_probe_msg_get(&g, buf, QL_PROBE_HDR_BYTES - 1), -1);   /* short */
	buf[4] = 2;                                                        /* version */
	CHECK_EQ_INT(ql_probe_msg_get(&g, buf, sizeof buf), -1);
	buf[4] = 1;
	buf[5] = 9;                                                        /* type */
	CHECK_EQ_INT(ql_probe_msg_get(&g, buf, sizeof buf), -1);
	/* iperf3's connect messages are not ours */
	uint8_t c[4] = { 0x36, 0x37, 0x38, 0x39 };
	CHECK(!ql_probe_is_ours(c, 4));
	/* the TCP greeting is never a valid cookie */
	char gr[QL_PROBE_GREETING_BYTES];
	ql_probe_greeting_put(gr);
	CHECK(ql_probe_greeting_is(gr));
	CHECK(!ql_cookie_valid(gr));
	gr[20] = 'x';
	CHECK(!ql_probe_greeting_is(gr));
}

TEST(options_rules)
{
	ql_probe_opts o;
	ql_err e;
	ql_probe_opts_init(&o);
	CHECK_EQ_INT(ql_probe_opts_validate(&o, 0, "opts.probe", &e), 0);
	CHECK(ql_probe_opts_validate(&o, 1, "opts", &e) < 0);
	CHECK_STR(e.msg, "opts.host: expected a host name or address, got nil");
	o.host = "127.0.0.1";
	o.proto = "sctp";
	CHECK(ql_probe_opts_validate(&o, 1, "opts", &e) < 0);
	CHECK_STR(e.msg, "opts.proto: expected one of \"udp\", \"icmp\", \"tcp\", got string \"sctp\"");
	o.proto = "icmp";
	o.payload_bytes = 23;
	CHECK(ql_probe_opts_validate(&o, 1, "opts", &e) < 0);
	CHECK_STR(e.msg, "opts.payload_bytes: expected an integer in [24, 65499] for icmp, got 23");
	o.payload_bytes = 24;
	CHECK_EQ_INT(ql_probe_opts_validate(&o, 1, "opts", &e), 0);
	o.proto = NULL;
	CHECK(ql_probe_opts_validate(&o, 1, "opts", &e) < 0);   /* 24 < 56 for udp */
	o.payload_bytes = 0;
	o.interval_ms = 0.5;
	CHECK(ql_probe_opts_validate(&o, 0, "opts.probe", &e) < 0);
	CHECK_STR(e.msg, "opts.probe.interval_ms: expected a finite number in [1, 60000], got 0.5");
	o.interval_ms = 10;
	o.idle_s = 3601;
	CHECK(ql_probe_opts_validate(&o, 0, "opts.probe", &e) < 0);
	CHECK_STR(e.msg, "opts.probe.idle_s: expected a finite number in [0, 3600], got 3601");
	o.idle_s = 0;
	CHECK_EQ_INT(ql_probe_opts_validate(&o, 0, "opts.probe", &e), 0);
	CHECK_EQ_INT(ql_probe_proto_of("tcp"), QL_PROBE_TCP);
	CHECK_EQ_INT(ql_probe_proto_of(NULL), QL_PROBE_UDP);
	CHECK_EQ_INT(ql_probe_proto_of("UDP"), -1);
}

int main(void)
{
	RUN(quantile_nearest_rank);
	RUN(dist_of_unsorted);
	RUN(histogram_edges);
	RUN(summarize_counts);
	RUN(summarize_owd_hold_idle_induced);
	RUN(server_times_that_do_not_fit_the_rtt);
	RUN(wire_round_trip_and_malformed);
	RUN(options_rules);
	return ctest_done();
}
