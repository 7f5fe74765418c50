/* C tests of the traffic engine over loopback: a qoslab client against a
 * qoslab server in the same process (TCP and UDP, forward, reverse, bidir,
 * limits), checking the identities every run must satisfy. */
#include "ctest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/proto.h"
#include "timer.h"

static ql_server *srv;
static int port;

static int run(ql_client_opts *o, ql_test **tp, const ql_result **rp)
{
	ql_err e;
	o->host = "127.0.0.1";
	o->port = port;
	int rc = ql_client_start(o, tp, &e);
	if (rc < 0) {
		fprintf(stderr, "  start: %s\n", e.msg);
		return rc;
	}
	rc = ql_test_wait(*tp, rp, &e);
	if (rc < 0)
		fprintf(stderr, "  wait: %s (%s)\n", e.msg, e.code);
	return rc;
}

/* Σ non-omitted interval entries of (dir, role) == totals. */
static void check_sums(const ql_result *r, int dir, int role)
{
	CHECK(r->tot_present[dir][role]);
	uint64_t b = 0, lost = 0, uniq = 0;
	for (int k = 0; k < r->nintervals; k++) {
		const ql_interval *iv = &r->intervals[k];
		CHECK(iv->end_s >= iv->start_s);
		if (iv->omitted)
			continue;
		for (int i = 0; i < iv->nentries; i++) {
			const ql_entry *x = &iv->entries[i];
			CHECK(!isnan(x->bits_per_second));
			if (x->dir == dir && x->role == role) {
				b += x->bytes;
				lost += x->lost_packets;
				uniq += x->unique_packets;
			}
		}
	}
	CHECK_EQ_U64(b, r->tot[dir][role].bytes);
	if (r->tot[dir][role].valid & QL_E_UDPRX) {
		CHECK_EQ_U64(lost, r->tot[dir][role].lost_packets);
		CHECK_EQ_U64(uniq, r->tot[dir][role].unique_packets);
	}
	/* SUM == Σ streams */
	uint64_t sb = 0;
	for (int i = 0; i < r->nstreams; i++) {
		const ql_stream_result *s = &r->streams[i];
		if (s->dir != dir)
			continue;
		sb += role == QL_ROLE_SENDER ? s->sender.bytes : s->receiver.bytes;
	}
	CHECK_EQ_U64(sb, r->tot[dir][role].bytes);
}

TEST(tcp_forward_two_streams)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.parallel = 2;
	o.duration_s = 1;
	o.interval_s = 0.25;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	CHECK_EQ_INT(run(&o, &t, &r), 0);
	if (r) {
		CHECK_EQ_INT(r->nstreams, 2);
		CHECK_EQ_INT(r->streams[0].id, 1);
		CHECK_EQ_INT(r->streams[1].id, 3);
		CHECK_EQ_INT(r->peer, QL_PEER_QOSLAB);
		CHECK(r->tot[0][QL_ROLE_SENDER].bytes > 0);
		/* The sender waits for its data to be acknowledged and the
		 * receiver reads to EOF: nothing is in flight at the end. */
		CHECK_EQ_U64(r->tot[0][QL_ROLE_SENDER].bytes, r->tot[0][QL_ROLE_RECEIVER].bytes);
		check_sums(r, 0, QL_ROLE_SENDER);
		check_sums(r, 0, QL_ROLE_RECEIVER);
		CHECK(r->nintervals >= 4);
		CHECK(r->duration_s > 0.9 && r->duration_s < 1.5);
		CHECK(r->streams[0].sender.valid & QL_E_RTTSUM);
		CHECK(r->cpu_client.present && r->cpu_server.present);
	}
	ql_test_free(t);
}

TEST(tcp_reverse_byte_limit_exact)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.reverse = 1;
	o.bytes = 1048576 + 12345;
	o.parallel = 3;
	o.interval_s = 0.2;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	CHECK_EQ_INT(run(&o, &t, &r), 0);
	if (r) {
		CHECK_EQ_U64(r->tot[1][QL_ROLE_SENDER].bytes, 1048576 + 12345);
		CHECK_EQ_U64(r->tot[1][QL_ROLE_RECEIVER].bytes, 1048576 + 12345);
		check_sums(r, 1, QL_ROLE_RECEIVER);
		CHECK(r->tot[1][QL_ROLE_SENDER].side == QL_SIDE_SERVER);
		/* TCP_INFO came from the server's sending sockets. */
		int rtt = 0;
		for (int k = 0; k < r->nintervals; k++)
			for (int i = 0; i < r->intervals[k].nentries; i++)
				if (r->intervals[k].entries[i].role == QL_ROLE_SENDER &&
				    (r->intervals[k].entries[i].valid & QL_E_RTT))
					rtt = 1;
		CHECK(rtt);
	}
	ql_test_free(t);
}

TEST(udp_forward_books_balance)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.proto = QL_PROTO_UDP;
	o.bitrate_bps = 20000000;
	o.bitrate_set = 1;
	o.length_bytes = 1000;
	o.duration_s = 1;
	o.interval_s = 0.5;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	CHECK_EQ_INT(run(&o, &t, &r), 0);
	if (r) {
		const ql_entry *s = &r->tot[0][QL_ROLE_SENDER], *v = &r->tot[0][QL_ROLE_RECEIVER];
		/* 2500 due; a stalled sender re-bases instead of bursting, so
		 * a busy host may send fewer, never more. */
		CHECK(s->packets > 1500);
		CHECK(s->packets < 2600);
		CHECK_EQ_U64(v->lost_packets + v->unique_packets, s->packets);
		check_sums(r, 0, QL_ROLE_RECEIVER);
		check_sums(r, 0, QL_ROLE_SENDER);
		CHECK(v->valid & QL_E_JITTER);
		CHECK(v->jitter_ms < 5);
	}
	ql_test_free(t);
}

TEST(udp_gso_gro_books_balance)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.proto = QL_PROTO_UDP;
	o.udp_gso = 1;
	o.bitrate_bps = 200000000;
	o.bitrate_set = 1;
	o.length_bytes = 1400;
	o.duration_s = 0.5;
	o.interval_s = 0.25;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	CHECK_EQ_INT(run(&o, &t, &r), 0);
	if (r) {
		const ql_entry *s = &r->tot[0][QL_ROLE_SENDER], *v = &r->tot[0][QL_ROLE_RECEIVER];
		CHECK(s->packets > 0);
		CHECK(v->unique_packets > 0);
		CHECK_EQ_U64(v->lost_packets + v->unique_packets, s->packets);
		CHECK_EQ_U64(v->duplicate_packets, 0);
		check_sums(r, 0, QL_ROLE_RECEIVER);
	}
	ql_test_free(t);
}

TEST(udp_reverse_packet_limit)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.proto = QL_PROTO_UDP;
	o.reverse = 1;
	o.packets = 500;
	o.bitrate_bps = 8000000;
	o.bitrate_set = 1;
	o.length_bytes = 1000;
	o.interval_s = 0.2;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	int64_t t0 = ql_now_ns();
	CHECK_EQ_INT(run(&o, &t, &r), 0);
	CHECK(ql_now_ns() - t0 < 3 * QL_NS_PER_S);
	if (r) {
		CHECK_EQ_U64(r->tot[1][QL_ROLE_SENDER].packets, 500);
		const ql_entry *v = &r->tot[1][QL_ROLE_RECEIVER];
		CHECK_EQ_U64(v->lost_packets + v->unique_packets, 500);
		check_sums(r, 1, QL_ROLE_RECEIVER);
	}
	ql_test_free(t);
}

/* Two UDP tests from one address at once: each stream reaches its own
 * test (the connect message carries the cookie), books stay separate. */
TEST(udp_concurrent_tests_same_address)
{
	ql_client_opts o[2];
	ql_test *t[2] = { NULL, NULL };
	ql_err e;
	for (int i = 0; i < 2; i++) {
		ql_client_opts_init(&o[i]);
		o[i].host = "127.0.0.1";
		o[i].port = port;
		o[i].proto = QL_PROTO_UDP;
		o[i].parallel = 2;
		o[i].packets = i ? 700 : 300;
		o[i].bitrate_bps = 8000000;
		o[i].bitrate_set = 1;
		o[i].length_bytes = 1000;
		o[i].interval_s = 0.25;
		CHECK_EQ_INT(ql_client_start(&o[i], &t[i], &e), 0);
	}
	for (int i = 0; i < 2; i++) {
		const ql_result *r = NULL;
		CHECK_EQ_INT(ql_test_wait(t[i], &r, &e), 0);
		if (!r)
			continue;
		const ql_entry *v = &r->tot[0][QL_ROLE_RECEIVER];
		CHECK_EQ_U64(r->tot[0][QL_ROLE_SENDER].packets, o[i].packets);
		CHECK_EQ_U64(v->lost_packets + v->unique_packets, o[i].packets);
		CHECK_EQ_U64(v->duplicate_packets + v->late_packets, 0);
		check_sums(r, 0, QL_ROLE_RECEIVER);
	}
	ql_test_free(t[0]);
	ql_test_free(t[1]);
}

TEST(tcp_bidir_omit)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.bidir = 1;
	o.duration_s = 1;
	o.omit_s = 0.3;
	o.interval_s = 0.25;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	CHECK_EQ_INT(run(&o, &t, &r), 0);
	if (r) {
		CHECK_EQ_INT(r->nstreams, 2);
		CHECK(r->streams[0].dir == QL_DIR_FORWARD);
		CHECK(r->streams[1].dir == QL_DIR_REVERSE);
		for (int d = 0; d < 2; d++) {
			check_sums(r, d, QL_ROLE_SENDER);
			check_sums(r, d, QL_ROLE_RECEIVER);
		}
		/* grid: 0.25 (omitted), 0.3 = omit end (omitted), 0.55, ... */
		CHECK(r->intervals[0].omitted);
		CHECK(r->intervals[1].omitted);
		CHECK(!r->intervals[2].omitted);
		CHECK(r->intervals[1].end_s >= 0.3);
		CHECK(r->intervals[1].end_s < 0.45);
	}
	ql_test_free(t);
}

TEST(window_read_back)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.window_bytes = 65536;
	o.duration_s = 0.3;
	o.interval_s = 0.1;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	CHECK_EQ_INT(run(&o, &t, &r), 0);
	if (r) {
		const ql_bufinfo *b = &r->streams[0].sender.buf;
		CHECK(b->present);
		CHECK_EQ_INT(b->requested_bytes, 65536);
		CHECK_EQ_INT(b->granted_bytes, 131072);
		CHECK(!b->clamped);
		CHECK_STR(b->sysctl, "net.core.wmem_max");
		/* The server applied it to its accepted socket as well. */
		const ql_bufinfo *rb = &r->streams[0].receiver.buf;
		CHECK(rb->present);
		CHECK_EQ_INT(rb->granted_bytes, 131072);
	}
	ql_test_free(t);
}

TEST(live_intervals_then_over)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.duration_s = 0.5;
	o.interval_s = 0.1;
	ql_err e;
	o.host = "127.0.0.1";
	o.port = port;
	ql_test *t = NULL;
	CHECK_EQ_INT(ql_client_start(&o, &t, &e), 0);
	int n = 0, rc;
	ql_interval *iv;
	double last_end = 0;
	while ((rc = ql_test_next_interval(t, 3 * QL_NS_PER_S, &iv)) == 1) {
		CHECK(iv->start_s >= last_end - 1e-9);
		last_end = iv->end_s;
		n++;
		ql_interval_clear(iv);
		free(iv);
	}
	CHECK_EQ_INT(rc, -ENODATA);
	CHECK(n >= 5);
	const ql_result *r;
	CHECK_EQ_INT(ql_test_wait(t, &r, &e), 0);
	ql_test_free(t);
}

/* Reverse mode: the server's TCP_INFO reaches the live intervals, and the
 * live records (one per grid slot, both ends) add up to the same totals as
 * the final result. */
TEST(reverse_live_intervals_carry_server_tcp_info)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.reverse = 1;
	o.duration_s = 1;
	o.interval_s = 0.2;
	o.bitrate_bps = 100000000;
	o.host = "127.0.0.1";
	o.port = port;
	ql_err e;
	ql_test *t = NULL;
	CHECK_EQ_INT(ql_client_start(&o, &t, &e), 0);
	int rc, live_rtt = 0, n = 0;
	uint64_t sent = 0, recv = 0;
	ql_interval *iv;
	while ((rc = ql_test_next_interval(t, 3 * QL_NS_PER_S, &iv)) == 1) {
		/* the server announced its live series; every record got the
		 * server's entries of its slot in time on loopback */
		CHECK(iv->peer_live);
		CHECK(!iv->peer_missing);
		for (int i = 0; i < iv->nentries; i++) {
			const ql_entry *x = &iv->entries[i];
			if (iv->omitted)
				continue;
			if (x->role == QL_ROLE_SENDER) {
				sent += x->bytes;
				CHECK_EQ_INT(x->side, QL_SIDE_SERVER);
				if ((x->valid & QL_E_RTT) && n < 3)
					live_rtt = 1;
			} else {
				recv += x->bytes;
			}
		}
		n++;
		ql_interval_clear(iv);
		free(iv);
	}
	CHECK_EQ_INT(rc, -ENODATA);
	CHECK(live_rtt);
	const ql_result *r;
	CHECK_EQ_INT(ql_test_wait(t, &r, &e), 0);
	if (r) {
		CHECK_EQ_U64(sent, r->tot[1][QL_ROLE_SENDER].bytes);
		CHECK_EQ_U64(recv, r->tot[1][QL_ROLE_RECEIVER].bytes);
		check_sums(r, 1, QL_ROLE_SENDER);
	}
	ql_test_free(t);
}

TEST(refused_port_fails_cleanly)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.host = "127.0.0.1";
	o.port = 1;
	o.duration_s = 1;
	ql_err e;
	ql_test *t = NULL;
	const ql_result *r;
	CHECK_EQ_INT(ql_client_start(&o, &t, &e), 0);
	CHECK_EQ_INT(ql_test_wait(t, &r, &e), -ECONNREFUSED);
	CHECK_STR(e.code, "ECONNREFUSED");
	ql_test_free(t);
}

TEST(bad_options_are_usage_errors)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	ql_err e;
	ql_test *t;
	o.host = "127.0.0.1";
	o.parallel = 129;
	CHECK_EQ_INT(ql_client_start(&o, &t, &e), -EINVAL);
	CHECK(e.usage);
	CHECK(strstr(e.msg, "opts.parallel") != NULL);
	o.parallel = 1;
	o.interval_s = 0.05;
	CHECK_EQ_INT(ql_client_start(&o, &t, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.interval_s") != NULL);
}

static int raw_connect(int p)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Hostile control connections are rejected one by one while a normal
 * client is served by the same server at the same time. */
TEST(hostile_clients_do_not_disturb_others)
{
	ql_server_opts so;
	ql_server_opts_init(&so);
	so.port = -1;
	so.idle_timeout_s = 0.5;
	ql_server *hs;
	ql_err e;
	CHECK_EQ_INT(ql_server_start(&so, &hs, &e), 0);
	int hp = ql_server_port(hs);
	int silent = raw_connect(hp);               /* never sends a cookie */
	int badck = raw_connect(hp);                /* cookie with bad chars */
	char junk[QL_COOKIE_SIZE];
	memset(junk, '!', sizeof junk);
	junk[36] = 0;
	CHECK_EQ_INT(write(badck, junk, sizeof junk), (int)sizeof junk);
	int badjs = raw_connect(hp);                /* good cookie, bad JSON */
	char ck[QL_COOKIE_SIZE];
	ql_cookie_make(ck);
	CHECK_EQ_INT(write(badjs, ck, sizeof ck), (int)sizeof ck);
	int huge = raw_connect(hp);                 /* oversized parameters */
	ql_cookie_make(ck);
	CHECK_EQ_INT(write(huge, ck, sizeof ck), (int)sizeof ck);
	signed char st = 0;
	CHECK_EQ_INT(read(badjs, &st, 1), 1);
	CHECK_EQ_INT(st, QL_ST_PARAM_EXCHANGE);
	CHECK_EQ_INT(ql_io_write_json(badjs, "{\"parallel\":", 0, NULL), 0);
	uint32_t big = htonl(1u << 24);
	CHECK_EQ_INT(read(huge, &st, 1), 1);
	CHECK_EQ_INT(write(huge, &big, 4), 4);
	/* A normal test meanwhile. */
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.host = "127.0.0.1";
	o.port = hp;
	o.duration_s = 0.5;
	o.interval_s = 0.25;
	ql_test *t = NULL;
	const ql_result *r = NULL;
	CHECK_EQ_INT(ql_client_start(&o, &t, &e), 0);
	CHECK_EQ_INT(ql_test_wait(t, &r, &e), 0);
	CHECK(r && r->tot[0][QL_ROLE_RECEIVER].bytes > 0);
	ql_test_free(t);
	/* The bad-JSON client got SERVER_ERROR, then the connection closed. */
	CHECK_EQ_INT(read(badjs, &st, 1), 1);
	CHECK_EQ_INT(st, QL_ST_SERVER_ERROR);
	int64_t t0 = ql_now_ns();
	while ((ql_server_rejected(hs) < 4 || ql_server_tests_running(hs) > 0) &&
	       ql_now_ns() - t0 < 3 * QL_NS_PER_S)
		ql_sleep_until_ns(ql_now_ns() + 20000000, NULL, NULL);
	CHECK_EQ_U64(ql_server_rejected(hs), 4);
	CHECK_EQ_INT(ql_server_tests_running(hs), 0);
	const ql_result **rs;
	int n;
	uint64_t total = 0;
	CHECK_EQ_INT(ql_server_results(hs, &rs, &n, &total), 0);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_U64(total, 1);
	ql_server_results_release(rs, n);
	close(silent);
	close(badck);
	close(badjs);
	close(huge);
	ql_server_free(hs);
}

/* The cookie timeout is a limit of its own, named in the log: 10 s, or the
 * idle timeout when that is shorter (it used to be "the idle timeout",
 * whose default is 30 s, while a silent connection went after 10 s). */
TEST(cookie_timeout_is_its_own_limit)
{
	ql_server_opts so;
	ql_server_opts_init(&so);
	CHECK_NEAR(ql_server_cookie_timeout_s(&so), 10.0, 1e-9);
	so.idle_timeout_s = 60;
	CHECK_NEAR(ql_server_cookie_timeout_s(&so), 10.0, 1e-9);
	so.idle_timeout_s = 0.4;
	CHECK_NEAR(ql_server_cookie_timeout_s(&so), 0.4, 1e-9);
	ql_server_opts lim;
	ql_server_limits(srv, &lim);   /* the shared server: defaults */
	CHECK_NEAR(lim.idle_timeout_s, 30.0, 1e-9);
	CHECK_NEAR(ql_server_cookie_timeout_s(&lim), 10.0, 1e-9);
	so.port = -1;
	ql_server *cs;
	ql_err e;
	CHECK_EQ_INT(ql_server_start(&so, &cs, &e), 0);
	int cp = ql_server_port(cs);
	int64_t t0 = ql_now_ns();
	int silent = raw_connect(cp);
	int partial = raw_connect(cp);
	CHECK_EQ_INT(write(partial, "abcdefghij", 10), 10);
	while (ql_server_rejected(cs) < 2 && ql_now_ns() - t0 < 3 * QL_NS_PER_S)
		ql_sleep_until_ns(ql_now_ns() + 20000000, NULL, NULL);
	double took = (double)(ql_now_ns() - t0) / 1e9;
	CHECK_EQ_U64(ql_server_rejected(cs), 2);
	CHECK(took > 0.35 && took < 2.5);
	ql_srv_problem pl[4];
	uint64_t total = 0;
	int np = ql_server_problem_log(cs, 0, pl, 4, &total);
	CHECK_EQ_INT(np, 2);
	for (int i = 0; i < np; i++) {
		if (!strstr(pl[i].text, "no cookie within the cookie timeout (0.4 s)"))
			fprintf(stderr, "  problem: %s\n", pl[i].text);
		CHECK(strstr(pl[i].text, "no cookie within the cookie timeout (0.4 s)") != NULL);
	}
	close(silent);
	close(partial);
	ql_server_free(cs);
}

/* A server keeps its last keep_results results; a result handed out by
 * ql_server_results stays valid after the ring evicted it, and even after
 * the server is freed, until it is released. */
TEST(server_keeps_last_results)
{
	ql_server_opts so;
	ql_server_opts_init(&so);
	so.port = -1;
	so.keep_results = 2;
	ql_err e;
	ql_server *ks = NULL;
	so.keep_results = QL_KEEP_RESULTS_MAX + 1;
	CHECK_EQ_INT(ql_server_start(&so, &ks, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.keep_results") != NULL);
	so.keep_results = 2;
	/* the shared-server limits are range-checked, naming the field */
	so.max_tests_per_address = -1;
	CHECK_EQ_INT(ql_server_start(&so, &ks, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.max_tests_per_address") != NULL);
	so.max_tests_per_address = 0;
	so.max_unidentified = 65537;
	CHECK_EQ_INT(ql_server_start(&so, &ks, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.max_unidentified:") != NULL);
	so.max_unidentified = 0;
	so.data_idle_s = NAN;
	CHECK_EQ_INT(ql_server_start(&so, &ks, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.data_idle_s") != NULL);
	so.data_idle_s = 0;
	so.max_duration_s = -1;
	CHECK_EQ_INT(ql_server_start(&so, &ks, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.max_duration_s") != NULL);
	so.max_duration_s = 0;
	so.test_buffer_bytes = -1;
	CHECK_EQ_INT(ql_server_start(&so, &ks, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.test_buffer_bytes") != NULL);
	so.test_buffer_bytes = 0;
	CHECK_EQ_INT(ql_server_start(&so, &ks, &e), 0);
	if (!ks)
		return;
	/* zeros are the documented defaults */
	ql_server_opts lim;
	ql_server_limits(ks, &lim);
	CHECK_EQ_INT(lim.max_tests, QL_SRV_MAX_TESTS_DEFAULT);
	CHECK_EQ_INT(lim.max_tests_per_address, 2);
	CHECK_EQ_INT(lim.max_streams_per_address, 128);
	CHECK_EQ_INT(lim.max_unidentified, 256);
	CHECK_EQ_INT(lim.max_unidentified_per_address, 8);
	CHECK(lim.max_duration_s == 3600.0);
	CHECK(lim.test_buffer_bytes == (int64_t)128 << 20);
	const ql_result **held = NULL;
	int nheld = 0;
	for (int i = 1; i <= 5; i++) {
		ql_client_opts o;
		ql_client_opts_init(&o);
		o.host = "127.0.0.1";
		o.port = ql_server_port(ks);
		o.bytes = 1000 + (uint64_t)i;
		ql_test *t = NULL;
		const ql_result *r = NULL;
		CHECK_EQ_INT(ql_client_start(&o, &t, &e), 0);
		CHECK_EQ_INT(ql_test_wait(t, &r, &e), 0);
		ql_test_free(t);
		if (i == 1) {
			uint64_t total = 0;
			CHECK_EQ_INT(ql_server_results(ks, &held, &nheld, &total), 0);
			CHECK_EQ_INT(nheld, 1);
			CHECK_EQ_U64(total, 1);
		}
	}
	CHECK_EQ_U64(ql_server_finished(ks), 5);
	const ql_result **rs = NULL;
	int n = 0;
	uint64_t total = 0;
	CHECK_EQ_INT(ql_server_results(ks, &rs, &n, &total), 0);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_U64(total, 5);
	for (int i = 0; rs && i < n; i++)
		CHECK_EQ_U64(rs[i]->tot[0][QL_ROLE_RECEIVER].bytes, 1004 + (uint64_t)i);
	ql_server_free(ks);
	/* evicted and the server gone: still readable until released */
	if (held && nheld == 1)
		CHECK_EQ_U64(held[0]->tot[0][QL_ROLE_RECEIVER].bytes, 1001);
	ql_server_results_release(held, nheld);
	ql_server_results_release(rs, n);
}

int main(void)
{
	ql_server_opts so;
	ql_server_opts_init(&so);
	so.port = -1;
	ql_err e;
	if (ql_server_start(&so, &srv, &e) < 0) {
		fprintf(stderr, "server: %s\n", e.msg);
		return 1;
	}
	port = ql_server_port(srv);
	RUN(tcp_forward_two_streams);
	RUN(tcp_reverse_byte_limit_exact);
	RUN(udp_forward_books_balance);
	RUN(udp_gso_gro_books_balance);
	RUN(udp_reverse_packet_limit);
	RUN(udp_concurrent_tests_same_address);
	RUN(tcp_bidir_omit);
	RUN(window_read_back);
	RUN(live_intervals_then_over);
	RUN(reverse_live_intervals_carry_server_tcp_info);
	RUN(refused_port_fails_cleanly);
	RUN(bad_options_are_usage_errors);
	RUN(hostile_clients_do_not_disturb_others);
	RUN(server_keeps_last_results);
	RUN(cookie_timeout_is_its_own_limit);
	ql_server_free(srv);
	return ctest_done();
}
