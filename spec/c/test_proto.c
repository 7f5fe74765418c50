/* C tests of csrc/core/engine/proto.c (cookies, UDP header, parameters JSON,
 * framed I/O) and of the engine's pure arithmetic (interval grid, buffer
 * read-back rule, results JSON parsing of hostile input). */
#include "ctest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/proto.h"
#include "engine/results_json.h"
#include "timer.h"

TEST(cookie_shape)
{
	char c[QL_COOKIE_SIZE], d[QL_COOKIE_SIZE];
	ql_cookie_make(c);
	ql_cookie_make(d);
	CHECK_EQ_INT(strlen(c), 36);
	CHECK(ql_cookie_valid(c));
	CHECK(memcmp(c, d, QL_COOKIE_SIZE) != 0);
	c[5] = '1';   /* '1' is not in a-z2-7 */
	CHECK(!ql_cookie_valid(c));
	ql_cookie_make(c);
	c[36] = 'a';
	CHECK(!ql_cookie_valid(c));
}

TEST(udp_header_roundtrip_and_wire_bytes)
{
	unsigned char b[16];
	ql_udp_hdr h = { .sec = 0x01020304, .usec = 999999, .seq = 0x0000000500000006ULL }, g;
	CHECK_EQ_INT(ql_udp_hdr_encode(b, &h, 1), 16);
	/* big-endian on the wire */
	CHECK_EQ_INT(b[0], 1);
	CHECK_EQ_INT(b[3], 4);
	CHECK_EQ_INT(b[11], 5);
	CHECK_EQ_INT(b[15], 6);
	CHECK_EQ_INT(ql_udp_hdr_decode(b, 16, 1, &g), 0);
	CHECK_EQ_U64(g.seq, h.seq);
	CHECK_EQ_INT(g.sec, h.sec);
	CHECK_EQ_INT(g.usec, h.usec);
	CHECK_EQ_INT(ql_udp_hdr_encode(b, &h, 0), 12);
	CHECK_EQ_INT(ql_udp_hdr_decode(b, 12, 0, &g), 0);
	CHECK_EQ_U64(g.seq, 6);
	CHECK_EQ_INT(ql_udp_hdr_decode(b, 11, 0, &g), -EINVAL);
	CHECK_EQ_INT(ql_udp_hdr_decode(b, 15, 1, &g), -EINVAL);
}

TEST(udp_connect_magic_both_orders)
{
	/* iperf3 on x86 writes the host-order integer: bytes "9876". */
	CHECK(ql_udp_connect_msg_ok("9876", 4));
	CHECK(ql_udp_connect_msg_ok("6789", 4));
	CHECK(ql_udp_connect_reply_ok("6789", 4));
	uint32_t legacy = 987654321u;
	CHECK(ql_udp_connect_reply_ok(&legacy, 4));
	CHECK(!ql_udp_connect_msg_ok("9876", 3));
	CHECK(!ql_udp_connect_msg_ok("abcd", 4));
}

TEST(params_roundtrip)
{
	ql_params p, q;
	ql_err e;
	ql_params_init(&p);
	p.udp = 1;
	p.parallel = 4;
	p.bidir = 1;
	p.window_bytes = 1048576;
	p.len_bytes = 1400;
	p.bandwidth_bps = 100000000;
	p.tos = 0x28;
	p.udp_counters_64bit = 1;
	strcpy(p.congestion, "cubic");
	strcpy(p.qoslab, "qoslab-1");
	p.rcvbuf_bytes = 4194304;
	p.udp_drain_s = 0.5;
	p.interval_s = 0.25;
	char *js = NULL;
	CHECK_EQ_INT(ql_params_to_json(&p, &js, &e), 0);
	CHECK(strstr(js, "\"udp\":true") != NULL);
	CHECK_EQ_INT(ql_params_from_json(js, strlen(js), &q, &e), 0);
	free(js);
	CHECK_EQ_INT(q.udp, 1);
	CHECK_EQ_INT(q.parallel, 4);
	CHECK_EQ_INT(q.bidir, 1);
	CHECK_EQ_INT(q.window_bytes, 1048576);
	CHECK_EQ_INT(q.len_bytes, 1400);
	CHECK_EQ_U64(q.bandwidth_bps, 100000000);
	CHECK_EQ_INT(q.tos, 0x28);
	CHECK_STR(q.congestion, "cubic");
	CHECK_STR(q.qoslab, "qoslab-1");
	CHECK_EQ_INT(q.rcvbuf_bytes, 4194304);
	CHECK_NEAR(q.udp_drain_s, 0.5, 1e-12);
	CHECK_NEAR(q.interval_s, 0.25, 1e-12);
}

TEST(params_hostile_input_rejected)
{
	ql_params q;
	ql_err e;
	static const char *const bad[] = {
		"", "{", "[]", "42", "{\"parallel\":0}", "{\"parallel\":129}",
		"{\"parallel\":\"2\"}", "{\"time\":-1}", "{\"len\":1e300}",
		"{\"udp\":true,\"len\":8}", "{\"congestion\":\"../x\"}",
		"{\"title\":\"" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
		"{\"sctp\":true}", "{\"window\":1e12}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int rc = ql_params_from_json(bad[i], strlen(bad[i]), &q, &e);
		if (rc >= 0)
			fprintf(stderr, "  accepted: %s\n", bad[i]);
		CHECK(rc < 0);
	}
	/* A number out of its range is refused with the range and the value
	 * (these used to say only "value out of range"). */
	static const struct { const char *js, *msg; } range[] = {
		{ "{\"parallel\":100000}", "peer parameters: \"parallel\": expected 1..128, got 100000" },
		{ "{\"parallel\":-5}", "peer parameters: \"parallel\": expected 1..128, got -5" },
		{ "{\"len\":2147483648}",
		  "peer parameters: \"len\": expected 0..16777216, got 2147483648" },
		{ "{\"omit\":1e9}", "peer parameters: \"omit\": expected 0..86400, got 1000000000" },
		{ "{\"qoslab_interval\":0.05}",
		  "peer parameters: \"qoslab_interval\": expected 0.1..3600, got 0.05" },
		{ "{\"server_affinity\":1024}",
		  "peer parameters: \"server_affinity\": expected 0..1023, got 1024" },
	};
	for (size_t i = 0; i < sizeof range / sizeof *range; i++) {
		CHECK(ql_params_from_json(range[i].js, strlen(range[i].js), &q, &e) < 0);
		CHECK_STR(e.code, "EPROTO");
		CHECK_STR(e.msg, range[i].msg);
	}
	/* iperf3 3.12's own parameter object is accepted. */
	const char *ok = "{\"tcp\":true,\"omit\":0,\"time\":10,\"num\":0,\"blockcount\":0,"
			 "\"parallel\":1,\"len\":131072,\"pacing_timer\":1000,"
			 "\"client_version\":\"3.12\"}";
	CHECK_EQ_INT(ql_params_from_json(ok, strlen(ok), &q, &e), 0);
	CHECK_NEAR(q.time_s, 10, 0);
	CHECK_EQ_INT(q.udp, 0);
}

/* The engine's options beyond iperf3 3.12 travel with the params:
 * qoslab_skip_rx_copy, qoslab_zerocopy, and the server's CPUs as iperf3's
 * server_affinity (one CPU, which a stock iperf3 server reads too) or a
 * qoslab_server_affinity list; hostile lists are refused naming the key. */
TEST(params_engine_options)
{
	ql_params p, q;
	ql_err e;
	char *js = NULL;
	ql_params_init(&p);
	snprintf(p.qoslab, sizeof p.qoslab, "test");
	p.skip_rx_copy = 1;
	p.zerocopy = 1;
	p.nserver_cpu = 1;
	p.server_cpu[0] = 3;
	CHECK_EQ_INT(ql_params_to_json(&p, &js, &e), 0);
	CHECK(strstr(js, "\"server_affinity\":3") != NULL);
	CHECK(strstr(js, "qoslab_server_affinity") == NULL);
	CHECK(strstr(js, "\"qoslab_skip_rx_copy\":1") != NULL);
	CHECK(strstr(js, "\"qoslab_zerocopy\":1") != NULL);
	CHECK_EQ_INT(ql_params_from_json(js, strlen(js), &q, &e), 0);
	CHECK_EQ_INT(q.skip_rx_copy, 1);
	CHECK_EQ_INT(q.zerocopy, 1);
	CHECK_EQ_INT(q.nserver_cpu, 1);
	CHECK_EQ_INT(q.server_cpu[0], 3);
	free(js);
	p.nserver_cpu = 3;
	p.server_cpu[1] = 0;
	p.server_cpu[2] = 1023;
	CHECK_EQ_INT(ql_params_to_json(&p, &js, &e), 0);
	CHECK(strstr(js, "\"qoslab_server_affinity\":[3,0,1023]") != NULL);
	CHECK(strstr(js, "\"server_affinity\"") == NULL);
	CHECK_EQ_INT(ql_params_from_json(js, strlen(js), &q, &e), 0);
	CHECK_EQ_INT(q.nserver_cpu, 3);
	CHECK_EQ_INT(q.server_cpu[2], 1023);
	free(js);
	static const char *const bad[] = {
		"{\"qoslab_server_affinity\":[]}",
		"{\"qoslab_server_affinity\":1}",
		"{\"qoslab_server_affinity\":[1024]}",
		"{\"qoslab_server_affinity\":[-1]}",
		"{\"qoslab_server_affinity\":[0.5]}",
		"{\"qoslab_server_affinity\":[\"0\"]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK_EQ_INT(ql_params_from_json(bad[i], strlen(bad[i]), &q, &e), -EPROTO);
		CHECK(strstr(e.msg, "\"qoslab_server_affinity\": expected an array of 1..128 "
			  "integers in 0..1023") != NULL);
	}
	CHECK_EQ_INT(ql_params_from_json("{\"server_affinity\":1024}", 24, &q, &e), -EPROTO);
	CHECK(strstr(e.msg, "server_affinity") != NULL);
}

/* qoslab_tos_per_stream travels with the params to a qoslab server, which
 * sets entry i on stream i of each direction it sends; hostile forms are
 * refused naming the key, and a stock iperf3's params carry none. */
TEST(params_tos_per_stream)
{
	ql_params p, q;
	ql_err e;
	char *js = NULL;
	ql_params_init(&p);
	p.parallel = 4;
	p.bidir = 1;
	snprintf(p.qoslab, sizeof p.qoslab, "test");
	static const unsigned char tos[4] = { 0x00, 0x20, 0xa0, 0xb8 };
	memcpy(p.stream_tos, tos, sizeof tos);
	p.nstream_tos = 4;
	CHECK_EQ_INT(ql_params_to_json(&p, &js, &e), 0);
	CHECK(strstr(js, "\"qoslab_tos_per_stream\":[0,32,160,184]") != NULL);
	CHECK(strstr(js, "\"TOS\"") == NULL);
	CHECK_EQ_INT(ql_params_from_json(js, strlen(js), &q, &e), 0);
	CHECK_EQ_INT(q.nstream_tos, 4);
	CHECK_EQ_INT(q.tos, -1);
	CHECK(memcmp(q.stream_tos, tos, sizeof tos) == 0);
	free(js);
	/* without the list nothing is sent and nothing is read */
	p.nstream_tos = 0;
	CHECK_EQ_INT(ql_params_to_json(&p, &js, &e), 0);
	CHECK(strstr(js, "qoslab_tos_per_stream") == NULL);
	CHECK_EQ_INT(ql_params_from_json(js, strlen(js), &q, &e), 0);
	CHECK_EQ_INT(q.nstream_tos, 0);
	free(js);
	static const struct { const char *js, *msg; } bad[] = {
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":184}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":{\"a\":1}}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[1]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected one entry per stream "
		  "(\"parallel\")" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[1,2,3]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected one entry per stream "
		  "(\"parallel\")" },
		{ "{\"qoslab_tos_per_stream\":[]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected one entry per stream "
		  "(\"parallel\")" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[1,256]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[-1,2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[1.5,2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[\"1\",2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[true,2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[null,2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[[1],2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"qoslab_tos_per_stream\":[1e300,2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": expected an array of integers in "
		  "0..255" },
		{ "{\"parallel\":2,\"TOS\":8,\"qoslab_tos_per_stream\":[1,2]}",
		  "peer parameters: \"qoslab_tos_per_stream\": cannot be combined with \"TOS\"" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int rc = ql_params_from_json(bad[i].js, strlen(bad[i].js), &q, &e);
		if (rc >= 0)
			fprintf(stderr, "  accepted: %s\n", bad[i].js);
		CHECK(rc < 0);
		CHECK_STR(e.code, "EPROTO");
		CHECK_STR(e.msg, bad[i].msg);
	}
	/* 128 entries (the most streams) pass */
	char big[1024];
	int n = snprintf(big, sizeof big, "{\"parallel\":128,\"qoslab_tos_per_stream\":[");
	for (int i = 0; i < 128; i++)
		n += snprintf(big + n, sizeof big - (size_t)n, "%s%d", i ? "," : "", i);
	snprintf(big + n, sizeof big - (size_t)n, "]}");
	CHECK_EQ_INT(ql_params_from_json(big, strlen(big), &q, &e), 0);
	CHECK_EQ_INT(q.nstream_tos, 128);
	CHECK_EQ_INT(q.stream_tos[127], 127);
}

TEST(framed_json_caps_length)
{
	int sv[2];
	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	CHECK_EQ_INT(ql_io_write_json(sv[0], "{\"a\":1}", 0, NULL), 0);
	char *txt = NULL;
	size_t n = 0;
	CHECK_EQ_INT(ql_io_read_json(sv[1], 100, &txt, &n, ql_now_ns() + QL_NS_PER_S, NULL), 0);
	CHECK_EQ_INT(n, 7);
	CHECK_STR(txt, "{\"a\":1}");
	free(txt);
	uint32_t huge = htonl(1u << 30);
	CHECK_EQ_INT(write(sv[0], &huge, 4), 4);
	CHECK_EQ_INT(ql_io_read_json(sv[1], QL_PARAMS_MAX_BYTES, &txt, &n,
				     ql_now_ns() + QL_NS_PER_S, NULL), -EMSGSIZE);
	/* A length of 0 is an empty message, told apart from an oversized one. */
	uint32_t zero = 0;
	CHECK_EQ_INT(write(sv[0], &zero, 4), 4);
	CHECK_EQ_INT(ql_io_read_json(sv[1], QL_PARAMS_MAX_BYTES, &txt, &n,
				     ql_now_ns() + QL_NS_PER_S, NULL), -ENODATA);
	/* A silent peer times out instead of hanging. */
	int64_t t0 = ql_now_ns();
	CHECK_EQ_INT(ql_io_read_json(sv[1], 100, &txt, &n, t0 + 100000000, NULL), -ETIMEDOUT);
	CHECK(ql_now_ns() - t0 < 1000000000);
	close(sv[0]);
	CHECK_EQ_INT(ql_io_read_json(sv[1], 100, &txt, &n, 0, NULL), -ECONNRESET);
	close(sv[1]);
}

TEST(interval_grid_is_absolute)
{
	int64_t s = 1000, p = 100;
	CHECK_EQ_INT(ql_grid_tick_ns(s, 0, p, 0), 1100);
	CHECK_EQ_INT(ql_grid_tick_ns(s, 0, p, 9), 2000);
	/* omit 250: ticks at 100, 200, then the omit boundary 250, then
	 * 350, 450 ... (the grid restarts at the end of the warm-up) */
	CHECK_EQ_INT(ql_grid_tick_ns(s, 250, p, 0), 1100);
	CHECK_EQ_INT(ql_grid_tick_ns(s, 250, p, 1), 1200);
	CHECK_EQ_INT(ql_grid_tick_ns(s, 250, p, 2), 1250);
	CHECK_EQ_INT(ql_grid_tick_ns(s, 250, p, 3), 1350);
	/* omit on the grid: no duplicate tick */
	CHECK_EQ_INT(ql_grid_tick_ns(s, 200, p, 1), 1200);
	CHECK_EQ_INT(ql_grid_tick_ns(s, 200, p, 2), 1300);
	/* no drift after many ticks */
	CHECK_EQ_INT(ql_grid_tick_ns(s, 0, 100000000, 99999), 1000 + 100000LL * 100000000);
}

TEST(buffer_clamp_rule)
{
	ql_bufinfo b;
	ql_bufinfo_fill(&b, 1048576, 2097152, 67108864, "net.core.rmem_max");
	CHECK(!b.clamped);
	ql_bufinfo_fill(&b, 1048576, 425984, 212992, "net.core.rmem_max");
	CHECK(b.clamped);
	CHECK_STR(b.sysctl, "net.core.rmem_max");
	ql_bufinfo_fill(&b, 0, 212992, 212992, "net.core.wmem_max");
	CHECK(!b.clamped);
}

TEST(results_parse_iperf3_and_hostile)
{
	ql_peer_results pr;
	ql_err e;
	/* iperf3 3.12 writes -1 as 2^64 - 1. */
	const char *ok = "{\"cpu_util_total\":1.5,\"cpu_util_user\":0.5,\"cpu_util_system\":1,"
			 "\"sender_has_retransmits\":18446744073709551615,\"streams\":[{\"id\":1,"
			 "\"bytes\":1000,\"retransmits\":18446744073709551615,\"jitter\":0,"
			 "\"errors\":0,\"packets\":0,\"start_time\":0,\"end_time\":1.0}]}";
	CHECK_EQ_INT(ql_results_parse(ok, strlen(ok), &pr, &e), 0);
	CHECK_EQ_INT(pr.nstreams, 1);
	CHECK_EQ_INT(pr.sender_has_retransmits, -1);
	CHECK_EQ_INT(pr.streams[0].retransmits, -1);
	CHECK_EQ_U64(pr.streams[0].bytes, 1000);
	CHECK_EQ_INT(pr.streams[0].has_omitted, 0);   /* 3.12 sends none */
	ql_peer_results_free(&pr);
	/* Later iperf3 (and qoslab) send the warm-up's share. */
	const char *om = "{\"cpu_util_total\":1,\"cpu_util_user\":0,\"cpu_util_system\":1,"
			 "\"sender_has_retransmits\":0,\"streams\":[{\"id\":1,\"bytes\":1000,"
			 "\"retransmits\":0,\"jitter\":0,\"errors\":7,\"omitted_errors\":2,"
			 "\"packets\":3000,\"omitted_packets\":1000}]}";
	CHECK_EQ_INT(ql_results_parse(om, strlen(om), &pr, &e), 0);
	CHECK_EQ_INT(pr.streams[0].has_omitted, 1);
	CHECK_EQ_U64(pr.streams[0].omitted_packets, 1000);
	CHECK_EQ_INT(pr.streams[0].omitted_errors, 2);
	CHECK_EQ_U64(pr.streams[0].packets, 3000);
	ql_peer_results_free(&pr);
	static const char *const bad[] = {
		"{}", "{\"cpu_util_total\":1}", "null",
		"{\"cpu_util_total\":1,\"cpu_util_user\":1,\"cpu_util_system\":1,"
		"\"sender_has_retransmits\":0,\"streams\":{}}",
		"{\"cpu_util_total\":1,\"cpu_util_user\":1,\"cpu_util_system\":1,"
		"\"sender_has_retransmits\":0,\"streams\":[{\"id\":1}]}",
		"{\"cpu_util_total\":1,\"cpu_util_user\":1,\"cpu_util_system\":1,"
		"\"sender_has_retransmits\":0,\"streams\":[],\"qoslab\":{\"intervals\":"
		"[{\"start_s\":2,\"end_s\":1}]}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		CHECK(ql_results_parse(bad[i], strlen(bad[i]), &pr, &e) < 0);
}

/* A full entry the way a qoslab end encodes it: every field present, and
 * numbers as long as they get (counters at QL_COUNT_MAX); the path
 * statistics beside it come only in totals (full_path). */
static void full_entry(ql_entry *x, int id)
{
	memset(x, 0, sizeof *x);
	x->id = id;
	x->valid = 0x7fff;
	x->snd_wnd_bytes = x->max_snd_wnd_bytes = UINT32_MAX;
	x->pmtu_bytes = UINT32_MAX;
	x->bytes = x->packets = x->writes = x->retransmits = QL_COUNT_MAX;
	x->seconds = 0.123456789012345;
	x->bits_per_second = 9.87654321e9;
	x->rtt_us = x->rttvar_us = x->min_rtt_us = x->max_rtt_us = x->mean_rtt_us = 4000000000u;
	x->snd_cwnd_bytes = x->pacing_rate_bps = x->delivery_rate_bps = QL_COUNT_MAX;
	x->unique_packets = x->lost_packets = x->duplicate_packets = QL_COUNT_MAX;
	x->out_of_order_packets = x->late_packets = x->max_snd_cwnd_bytes = QL_COUNT_MAX;
	x->jitter_ms = 0.123456789012345;
	x->jitter_pairs = QL_COUNT_MAX;
	x->jitter_abs_sum_ms = 1.23456789012345e29;
	x->buf.present = 1;
	x->buf.requested_bytes = x->buf.granted_bytes = 2147483647;
	snprintf(x->buf.sysctl, sizeof x->buf.sysctl, "net.core.wmem_max");
}

static void full_path(ql_udp_path *p)
{
	uint64_t *pv = (uint64_t *)p;   /* ql_udp_path is all counters */
	for (size_t k = 0; k < sizeof *p / sizeof *pv; k++)
		pv[k] = QL_COUNT_MAX;
}

/* A peer's numbers pass a sanity check before they become ours: counters
 * are integers no larger than 2^53 (what a JSON double holds exactly; far
 * inside a signed Lua integer), so 1.85e19 (above 2^64: casting it was
 * undefined, printed "0 Bytes") and 1.84e19 (printed "-42513 TBytes")
 * are refused, as are a fraction of a packet and a stream time beyond the
 * test's span (end_time 1e9 for a 1 s test printed "1000000000.00 s").
 * iperf3's -1 written as 2^64 - 1 stays accepted where it means -1. */
#define RES_HEAD "{\"cpu_util_total\":1,\"cpu_util_user\":0,\"cpu_util_system\":1," \
	"\"sender_has_retransmits\":0,\"streams\":[{\"id\":1,"
#define RES_STREAM(bytes, packets, start, end) \
	RES_HEAD "\"bytes\":" bytes ",\"retransmits\":18446744073709551615,\"jitter\":0," \
	"\"errors\":18446744073709551615,\"packets\":" packets ",\"start_time\":" start \
	",\"end_time\":" end "}]"
TEST(results_values_sane)
{
	ql_peer_results pr;
	ql_err e;
	ql_results_caps c;
	ql_results_caps_for(1, 1.0, 0, 1.02, &c);   /* a 1 s test, read at 1.02 s */
	const char *ok = RES_STREAM("9007199254740992", "3", "0", "1.0") "}";
	CHECK_EQ_INT(ql_results_parse_capped(ok, strlen(ok), &c, &pr, &e), 0);
	CHECK_EQ_U64(pr.streams[0].bytes, (uint64_t)1 << 53);
	CHECK_EQ_INT(pr.streams[0].retransmits, -1);
	CHECK_EQ_INT(pr.streams[0].errors, -1);
	ql_peer_results_free(&pr);
	static const char *const bad[] = {
		RES_STREAM("1.85e19", "3", "0", "1") "}",
		RES_STREAM("1.84e19", "3", "0", "1") "}",
		RES_STREAM("9223372036854775807", "3", "0", "1") "}",
		RES_STREAM("9007199254740994", "3", "0", "1") "}",
		RES_STREAM("1000", "2.5", "0", "1") "}",
		RES_STREAM("1000", "3", "0", "1e9") "}",
		RES_STREAM("1000", "3", "5", "1") "}",
		RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"totals\":[{\"id\":1,\"dir\":0,"
		"\"role\":0,\"side\":0,\"bytes\":1.84e19,\"seconds\":1}]}}",
		RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"totals\":[{\"id\":1,\"dir\":0,"
		"\"role\":0,\"side\":0,\"bytes\":1000,\"seconds\":1,\"lost_packets\":1.85e19}]}}",
		RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"totals\":[{\"id\":1,\"dir\":0,"
		"\"role\":0,\"side\":0,\"bytes\":1000.5,\"seconds\":1}]}}",
		RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"totals\":[{\"id\":1,\"dir\":0,"
		"\"role\":0,\"side\":0,\"bytes\":1000,\"seconds\":1e9}]}}",
		RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"duration_s\":1e9}}",
		RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"intervals\":[{\"start_s\":0,"
		"\"end_s\":1e9}]}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int rc = ql_results_parse_capped(bad[i], strlen(bad[i]), &c, &pr, &e);
		if (rc >= 0)
			printf("  accepted: %s\n", bad[i]);
		CHECK(rc < 0);
		if (rc >= 0)
			ql_peer_results_free(&pr);
	}
	/* an out-of-range number names its range and the value */
	const char *late = RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"duration_s\":1e9}}";
	CHECK(ql_results_parse_capped(late, strlen(late), &c, &pr, &e) < 0);
	CHECK(strstr(e.msg, "peer results: \"duration_s\": expected 0..") != NULL);
	CHECK(strstr(e.msg, ", got 1000000000") != NULL);
	/* a negative count is refused as negative, not as over the upper limit */
	const char *neg = RES_STREAM("-5", "3", "0", "1") "}";
	CHECK(ql_results_parse_capped(neg, strlen(neg), &c, &pr, &e) < 0);
	CHECK_STR(e.msg, "peer results: \"bytes\": expected an integer count, got a negative number");
}

/* The mean |D| parts and the path statistics travel in a totals entry and
 * come back as they were; a peer's malformed ones are refused by name,
 * and a stock iperf3's results (none of them) leave them absent. */
#define TOT_HEAD RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"totals\":[{\"id\":1," \
	"\"dir\":0,\"role\":1,\"side\":1,\"bytes\":1000,\"seconds\":1"
#define HIST17 "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]"
#define HIST16 "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]"
#define HIST13 "[1,2,3,4,5,6,7,8,9,10,11,12,13]"
#define PATH(bh, gh, eh) ",\"udp_path\":{\"bursts\":4,\"burst_packets\":7,\"burst_hist\":" bh \
	",\"gaps\":3,\"gap_packets\":21,\"gap_hist\":" gh ",\"extent_packets\":2," \
	"\"extent_sum\":3,\"extent_max\":2,\"extent_hist\":" eh "}"
TEST(results_path_roundtrip_and_hostile)
{
	ql_peer_results pr;
	ql_err e;
	const char *ok = TOT_HEAD ",\"jitter_pairs\":5,\"jitter_abs_sum_ms\":18.5"
		PATH(HIST17, HIST16, HIST13) "}]}}";
	CHECK_EQ_INT(ql_results_parse(ok, strlen(ok), &pr, &e), 0);
	CHECK_EQ_INT(pr.nentries, 1);
	const ql_entry *x = &pr.entries[0];
	CHECK(x->valid & QL_E_JITMEAN);
	CHECK(x->valid & QL_E_UDPPATH);
	CHECK_EQ_U64(x->jitter_pairs, 5);
	CHECK(ql_jitter_mean_abs_ms(x) == 3.7);
	CHECK(pr.paths != NULL);
	const ql_udp_path *p = &pr.paths[0];
	CHECK_EQ_U64(p->bursts, 4);
	CHECK_EQ_U64(p->burst_hist[16], 17);
	CHECK_EQ_U64(p->gap_hist[15], 16);
	CHECK_EQ_U64(p->extent_hist[12], 13);
	CHECK_EQ_U64(p->extent_max, 2);
	/* encode again: the same numbers */
	char *txt = ql_results_encode(&pr, 1);
	CHECK(strstr(txt, "\"jitter_pairs\":5,\"jitter_abs_sum_ms\":18.5") != NULL);
	CHECK(strstr(txt, "\"burst_hist\":" HIST17) != NULL);
	CHECK(strstr(txt, "\"extent_hist\":" HIST13) != NULL);
	free(txt);
	ql_peer_results_free(&pr);
	/* interval entries carry none: a peer's "udp_path" there is not read */
	const char *iv = RES_STREAM("1000", "3", "0", "1") ",\"qoslab\":{\"intervals\":[{\"start_s\":0,"
		"\"end_s\":1,\"entries\":[{\"id\":1,\"bytes\":1,\"seconds\":1"
		PATH(HIST17, HIST16, HIST13) "}]}]}}";
	CHECK_EQ_INT(ql_results_parse(iv, strlen(iv), &pr, &e), 0);
	CHECK_EQ_INT(pr.nintervals, 1);
	CHECK(!(pr.intervals[0].entries[0].valid & QL_E_UDPPATH));
	CHECK(pr.paths == NULL);
	ql_peer_results_free(&pr);
	/* none of it from a peer that sends none */
	const char *none = TOT_HEAD "}]}}";
	CHECK_EQ_INT(ql_results_parse(none, strlen(none), &pr, &e), 0);
	CHECK(!(pr.entries[0].valid & (QL_E_JITMEAN | QL_E_UDPPATH)));
	ql_peer_results_free(&pr);
	static const struct { const char *text, *key; } bad[] = {
		{ TOT_HEAD ",\"jitter_pairs\":5}]}}", "jitter_abs_sum_ms" },
		{ TOT_HEAD ",\"jitter_abs_sum_ms\":5}]}}", "jitter_pairs" },
		{ TOT_HEAD ",\"jitter_pairs\":5,\"jitter_abs_sum_ms\":-1}]}}", "jitter_abs_sum_ms" },
		{ TOT_HEAD ",\"jitter_pairs\":5,\"jitter_abs_sum_ms\":1e31}]}}", "jitter_abs_sum_ms" },
		{ TOT_HEAD ",\"jitter_pairs\":0.5,\"jitter_abs_sum_ms\":1}]}}", "jitter_pairs" },
		{ TOT_HEAD PATH(HIST16, HIST16, HIST13) "}]}}", "burst_hist" },
		{ TOT_HEAD PATH(HIST17, HIST17, HIST13) "}]}}", "gap_hist" },
		{ TOT_HEAD PATH(HIST17, HIST16, "[1,2,3,4,5,6,7,8,9,10,11,12,1.5]") "}]}}",
		  "extent_hist" },
		{ TOT_HEAD PATH(HIST17, HIST16, "[1,2,3,4,5,6,7,8,9,10,11,12,-1]") "}]}}",
		  "extent_hist" },
		{ TOT_HEAD PATH(HIST17, HIST16, "{}") "}]}}", "extent_hist" },
		{ TOT_HEAD ",\"udp_path\":{\"bursts\":1}}]}}", "burst_packets" },
		{ TOT_HEAD ",\"udp_path\":[]}]}}", "udp_path" },
		{ TOT_HEAD ",\"udp_path\":{\"bursts\":1.84e19}}]}}", "bursts" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int rc = ql_results_parse(bad[i].text, strlen(bad[i].text), &pr, &e);
		if (rc >= 0) {
			printf("  accepted: %s\n", bad[i].text);
			ql_peer_results_free(&pr);
		}
		CHECK_EQ_INT(rc, -EPROTO);
		CHECK(rc >= 0 || strstr(e.msg, bad[i].key) != NULL);
	}
}

/* The caps derived from a test: an honest message of the largest shape
 * the test can produce passes, one interval or entry more is refused, and
 * a message of empty entries (3 bytes of text, 240 B parsed each) is
 * refused before cJSON builds its tree. */
TEST(results_caps_follow_the_test)
{
	ql_results_caps c;
	ql_results_caps_for(1, 1.0, 0, 1.02, &c);
	CHECK_EQ_INT(c.streams, 1);
	CHECK_EQ_INT(c.entries, 2);
	CHECK_EQ_INT(c.intervals, 6);         /* ceil(1.02) + 4 */
	CHECK_EQ_U64(c.bytes, 49152 + 512 + 7 * (128 + 2048));
	CHECK_EQ_U64(c.nodes, 64 + 16 + 64 + 7 * (8 + 80));
	CHECK_EQ_U64(c.entries_total, 16);
	printf("  1 s, 1 stream: %zu bytes, %zu values, %zu entries: parse <= %zu B\n", c.bytes,
	       c.nodes, c.entries_total, c.bytes + c.nodes * 112 + c.entries_total * sizeof(ql_entry));
	ql_results_caps big;
	ql_results_caps_for(256, 0.1, 3600, 86400, &big);
	CHECK_EQ_U64(big.bytes, QL_RESULTS_MAX_BYTES);
	CHECK_EQ_U64(big.nodes, QL_RESULTS_MAX_BYTES / 16 + 1024);
	CHECK_EQ_U64(big.entries_total, QL_RESULTS_MAX_BYTES / 64);
	printf("  any test: parse <= %zu B (sizeof(ql_entry) = %zu)\n",
	       big.bytes + big.nodes * 112 + big.entries_total * sizeof(ql_entry), sizeof(ql_entry));
	/* honest: n streams, each interval with one full entry per stream */
	for (int n = 1; n <= 8; n *= 8) {
		int ni = 10;
		ql_results_caps k;
		ql_results_caps_for(n, 1.0, 0, ni, &k);
		ql_peer_results r;
		memset(&r, 0, sizeof r);
		r.nstreams = n;
		r.streams = calloc((size_t)n, sizeof *r.streams);
		r.nentries = n;
		r.entries = calloc((size_t)n, sizeof *r.entries);
		r.paths = calloc((size_t)n, sizeof *r.paths);
		r.nintervals = k.intervals;
		r.intervals = calloc((size_t)k.intervals, sizeof *r.intervals);
		for (int i = 0; i < n; i++) {
			r.streams[i].id = i + 1;
			full_entry(&r.entries[i], i + 1);
			full_path(&r.paths[i]);
		}
		for (int j = 0; j < k.intervals; j++) {
			/* inside the span (short intervals: the count is what counts);
			 * interval entries carry no path statistics */
			r.intervals[j].start_s = j * 0.5;
			r.intervals[j].end_s = j * 0.5 + 0.5;
			r.intervals[j].nentries = n;
			r.intervals[j].entries = calloc((size_t)n, sizeof(ql_entry));
			for (int i = 0; i < n; i++) {
				full_entry(&r.intervals[j].entries[i], i + 1);
				r.intervals[j].entries[i].valid &= ~QL_E_UDPPATH;   /* never sent */
			}
		}
		char *txt = ql_results_encode(&r, 1);
		CHECK(txt != NULL);
		size_t len = strlen(txt);
		CHECK(len <= k.bytes);
		ql_peer_results pr;
		ql_err e;
		CHECK_EQ_INT(ql_results_parse_capped(txt, len, &k, &pr, &e), 0);
		CHECK_EQ_INT(pr.nintervals, k.intervals);
		CHECK(pr.paths != NULL && (pr.entries[n - 1].valid & QL_E_UDPPATH));
		/* TCP_INFO's window and path MTU come back as they were */
		CHECK((pr.intervals[0].entries[0].valid & (QL_E_SNDWND | QL_E_PMTU)) ==
		      (QL_E_SNDWND | QL_E_PMTU));
		CHECK_EQ_U64(pr.intervals[0].entries[0].snd_wnd_bytes, UINT32_MAX);
		CHECK_EQ_U64(pr.intervals[0].entries[0].pmtu_bytes, UINT32_MAX);
		CHECK(pr.entries[0].valid & QL_E_MAXWND);
		CHECK_EQ_U64(pr.entries[0].max_snd_wnd_bytes, UINT32_MAX);
		ql_peer_results_free(&pr);
		free(txt);
		/* one interval more than the test allows */
		ql_interval *more = realloc(r.intervals, (size_t)(k.intervals + 1) * sizeof *more);
		CHECK(more != NULL);
		r.intervals = more;
		r.intervals[k.intervals] = r.intervals[0];
		r.nintervals = k.intervals + 1;
		txt = ql_results_encode(&r, 1);
		CHECK(ql_results_parse_capped(txt, strlen(txt), &k, &pr, &e) < 0);
		CHECK(strstr(e.msg, "intervals") != NULL);
		free(txt);
		r.nintervals = k.intervals;
		/* one stream more */
		r.nstreams = n + 1;
		ql_peer_stream *ms = realloc(r.streams, (size_t)(n + 1) * sizeof *ms);
		r.streams = ms;
		r.streams[n] = r.streams[0];
		txt = ql_results_encode(&r, 1);
		CHECK(ql_results_parse_capped(txt, strlen(txt), &k, &pr, &e) < 0);
		CHECK(strstr(e.msg, "streams") != NULL);
		free(txt);
		for (int j = 0; j < k.intervals; j++)
			free(r.intervals[j].entries);
		free(r.intervals);
		free(r.entries);
		free(r.paths);
		free(r.streams);
	}
	/* hostile: empty entries filling the byte cap */
	size_t cap = c.bytes, n0 = 0;
	char *h = malloc(cap + 1);
	const char *head = "{\"cpu_util_total\":0,\"cpu_util_user\":0,\"cpu_util_system\":0,"
			   "\"sender_has_retransmits\":0,\"streams\":[],\"qoslab\":{\"intervals\":"
			   "[{\"entries\":[{}";
	n0 = strlen(head);
	memcpy(h, head, n0);
	while (n0 + 3 + 6 < cap) {
		memcpy(h + n0, ",{}", 3);
		n0 += 3;
	}
	memcpy(h + n0, "]}]}}", 6);
	n0 += 5;
	ql_peer_results pr;
	ql_err e;
	CHECK_EQ_INT(ql_results_parse_capped(h, n0, &c, &pr, &e), -EPROTO);
	CHECK(strstr(e.msg, "JSON values") != NULL);
	/* and one byte over the cap is refused by length */
	CHECK(ql_results_parse_capped(h, c.bytes + 1, &c, &pr, &e) < 0);
	CHECK(strstr(e.msg, "bytes") != NULL);
	free(h);
}

/* The test tag: one per cookie, after iperf3's header fields. */
TEST(udp_test_tag_layout)
{
	char c1[QL_COOKIE_SIZE], c2[QL_COOKIE_SIZE];
	unsigned char b[32];
	memset(c1, 'a', sizeof c1);
	c1[QL_COOKIE_SIZE - 1] = 0;
	memcpy(c2, c1, sizeof c2);
	c2[35] = 'b';
	CHECK(ql_udp_test_tag(c1) == ql_udp_test_tag(c1));
	CHECK(ql_udp_test_tag(c1) != ql_udp_test_tag(c2));
	CHECK_EQ_INT(ql_udp_hdr_bytes(1, 1), 24);
	CHECK_EQ_INT(ql_udp_hdr_bytes(0, 1), 20);
	CHECK_EQ_INT(ql_udp_hdr_bytes(1, 0), 16);
	memset(b, 0, sizeof b);
	ql_udp_tag_put(b, 1, 0x0102030405060708ULL);
	CHECK(b[15] == 0 && b[16] == 1 && b[23] == 8 && b[24] == 0);
	CHECK(ql_udp_tag_get(b, 1) == 0x0102030405060708ULL);
	memset(b, 0, sizeof b);
	ql_udp_tag_put(b, 0, 0xfffefdfcfbfaf9f8ULL);
	CHECK(b[11] == 0 && b[12] == 0xff && b[19] == 0xf8 && b[20] == 0);
	CHECK(ql_udp_tag_get(b, 0) == 0xfffefdfcfbfaf9f8ULL);
}

int main(void)
{
	RUN(udp_test_tag_layout);
	RUN(cookie_shape);
	RUN(udp_header_roundtrip_and_wire_bytes);
	RUN(udp_connect_magic_both_orders);
	RUN(params_roundtrip);
	RUN(params_hostile_input_rejected);
	RUN(params_tos_per_stream);
	RUN(params_engine_options);
	RUN(framed_json_caps_length);
	RUN(interval_grid_is_absolute);
	RUN(buffer_clamp_rule);
	RUN(results_parse_iperf3_and_hostile);
	RUN(results_values_sane);
	RUN(results_path_roundtrip_and_hostile);
	RUN(results_caps_follow_the_test);
	return ctest_done();
}
