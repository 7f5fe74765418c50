/*
 * test_probe_server.c - a qoslab server's latency probe responder under
 * hostile input (engine/probe_server.c), on loopback: junk, short,
 * spoofed-size, reply-typed and huge datagrams; a flood (replies bounded by
 * the per-peer rate); replies never larger than their request; TCP probe
 * connections that send garbage, stay silent, or exceed the per-address
 * slots (told why: the client's EBUSY); a flood of 64 KiB requests (reply
 * bytes bounded by the byte budget); a full table of TCP probe sessions
 * (a newcomer admitted at once when an address holds more than its share,
 * within 2 s when each holds one: the idle eviction); a fake responder's
 * impossible server times (the client keeps the RTT, drops the rest); and
 * the ICMP probe's EACCES, with its advice, for a user that
 * net.ipv4.ping_group_range refuses.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctest.h"
#include "engine/engine.h"
#include "engine/probe.h"
#include "engine/probe_server.h"
#include "engine/probe_wire.h"
#include "timer.h"

static int connect_to(int type, int port)
{
	int fd = socket(AF_INET, type, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int readable(int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	return poll(&pf, 1, ms) > 0;
}

static ql_server *server(double idle_s, int per_address)
{
	ql_server_opts o;
	ql_server_opts_init(&o);
	o.port = -1;
	o.bind_address = "127.0.0.1";
	o.idle_timeout_s = idle_s;
	o.max_tests_per_address = per_address;
	ql_server *s = NULL;
	ql_err e;
	if (ql_server_start(&o, &s, &e) < 0)
		return NULL;
	return s;
}

static size_t request(uint8_t *buf, uint32_t len, uint64_t seq)
{
	memset(buf, 0xa5, len);
	ql_probe_msg m = { .version = 1, .type = QL_PROBE_REQUEST, .len = len, .session = 7,
			   .seq = seq };
	ql_probe_msg_put(&m, buf);
	return len;
}

/* The server's counters once they reach want udp datagrams handled (the
 * listener works in the background). */
static ql_probe_srv_counters counters_after(ql_server *s, uint64_t want)
{
	ql_probe_srv_counters c;
	for (int i = 0; i < 200; i++) {
		ql_server_probe_counters(s, &c);
		if (c.udp_replies + c.udp_malformed + c.udp_rate_limited + c.udp_unknown >= want)
			break;
		usleep(5000);
	}
	return c;
}

TEST(udp_hostile_datagrams_get_no_reply)
{
	ql_server *s = server(0, 0);
	CHECK(s != NULL);
	if (!s)
		return;
	int u = connect_to(SOCK_DGRAM, ql_server_port(s));
	uint8_t buf[QL_PROBE_MAX_BYTES];
	/* junk without the magic */
	memset(buf, 'x', 100);
	send(u, buf, 100, 0);
	/* short: the magic and 10 bytes */
	request(buf, QL_PROBE_HDR_BYTES, 1);
	send(u, buf, 14, 0);
	/* spoofed sizes: the header says 1000 in 100 bytes, 56 in 1000 bytes */
	request(buf, 1000, 2);
	send(u, buf, 100, 0);
	request(buf, QL_PROBE_HDR_BYTES, 3);
	send(u, buf, 1000, 0);
	/* a reply sent to the server (two responders must never ping-pong) */
	ql_probe_msg m = { .version = 1, .type = QL_PROBE_REPLY, .len = 64, .session = 7 };
	memset(buf, 0, 64);
	ql_probe_msg_put(&m, buf);
	send(u, buf, 64, 0);
	/* a future version */
	request(buf, 64, 4);
	buf[4] = 2;
	send(u, buf, 64, 0);
	ql_probe_srv_counters c = counters_after(s, 6);
	CHECK(!readable(u, 200));
	CHECK_EQ_U64(c.udp_unknown, 1);
	CHECK_EQ_U64(c.udp_malformed, 5);
	CHECK_EQ_U64(c.udp_replies, 0);
	/* and a good one still gets its reply: the same size, header rewritten */
	request(buf, 64, 9);
	send(u, buf, 64, 0);
	CHECK(readable(u, 1000));
	ssize_t r = recv(u, buf, sizeof buf, 0);
	CHECK_EQ_INT(r, 64);
	CHECK_EQ_INT(ql_probe_msg_get(&m, buf, (size_t)r), 0);
	CHECK_EQ_INT(m.type, QL_PROBE_REPLY);
	CHECK_EQ_U64(m.seq, 9);
	CHECK(m.server_rx_ns > 0 && m.server_tx_ns >= m.server_rx_ns);
	close(u);
	ql_server_free(s);
}

TEST(udp_huge_request_reply_is_never_larger)
{
	ql_server *s = server(0, 0);
	CHECK(s != NULL);
	if (!s)
		return;
	int u = connect_to(SOCK_DGRAM, ql_server_port(s));
	int big = 1 << 20;
	setsockopt(u, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	static uint8_t buf[QL_PROBE_MAX_BYTES + 16], in[QL_PROBE_MAX_BYTES + 16];
	uint32_t sizes[] = { QL_PROBE_HDR_BYTES, 1400, 9000, QL_PROBE_MAX_BYTES };
	for (int i = 0; i < 4; i++) {
		request(buf, sizes[i], (uint64_t)i);
		CHECK_EQ_INT(send(u, buf, sizes[i], 0), sizes[i]);
		CHECK(readable(u, 1000));
		ssize_t r = recv(u, in, sizeof in, 0);
		CHECK_EQ_INT(r, sizes[i]);
		/* the payload after the header comes back as it went */
		CHECK(memcmp(in + QL_PROBE_HDR_BYTES, buf + QL_PROBE_HDR_BYTES,
			     sizes[i] - QL_PROBE_HDR_BYTES) == 0);
	}
	close(u);
	ql_server_free(s);
}

TEST(udp_flood_replies_are_rate_bounded)
{
	ql_server *s = server(0, 0);
	CHECK(s != NULL);
	if (!s)
		return;
	int u = connect_to(SOCK_DGRAM, ql_server_port(s));
	int big = 4 << 20;
	setsockopt(u, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	uint8_t buf[64];
	int64_t t0 = ql_now_ns();
	int sent = 0;
	/* 100 every ms: 100000/s, within what the listener reads, so the
	 * rate limit (not the socket buffer) is what drops */
	for (int i = 0; i < 5000; i++) {
		request(buf, 64, (uint64_t)i);
		if (send(u, buf, 64, 0) == 64)
			sent++;
		if (i % 100 == 99)
			usleep(1000);
	}
	/* tokens accrue while the listener still reads what was queued: the
	 * flood's time plus 50 ms for that */
	double elapsed = (double)(ql_now_ns() - t0) / 1e9 + 0.05;
	usleep(300000);
	int got = 0;
	while (recv(u, buf, sizeof buf, MSG_DONTWAIT) == 64)
		got++;
	ql_probe_srv_counters c;
	ql_server_probe_counters(s, &c);
	/* the burst plus the rate over the whole time, and the books agree */
	double bound = QL_PROBE_SRV_PEER_BURST + QL_PROBE_SRV_PEER_RATE * elapsed + 1;
	printf("  flood: %d sent, %d replies in %.3f s (bound %.0f), %llu rate-limited\n", sent, got,
	       elapsed, bound, (unsigned long long)c.udp_rate_limited);
	CHECK(got > 0);
	CHECK(got <= bound);
	CHECK_EQ_U64(c.udp_replies, (uint64_t)got);
	CHECK(c.udp_rate_limited > 0);
	CHECK(c.udp_replies + c.udp_rate_limited <= (uint64_t)sent);
	close(u);
	ql_server_free(s);
}

/* 64 KiB requests as fast as one socket sends them: within the reply
 * rate they would reflect ~1 Gbit/s; the byte budget holds them to
 * QL_PROBE_SRV_PEER_BYTE_RATE (plus its burst). */
TEST(udp_big_request_flood_replies_are_byte_bounded)
{
	ql_server *s = server(0, 0);
	CHECK(s != NULL);
	if (!s)
		return;
	int u = connect_to(SOCK_DGRAM, ql_server_port(s));
	int big = 64 << 20;
	setsockopt(u, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
	setsockopt(u, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	static uint8_t buf[QL_PROBE_MAX_BYTES];
	int64_t t0 = ql_now_ns();
	int sent = 0;
	uint64_t got_bytes = 0;
	int64_t end = t0 + QL_NS_PER_S;
	for (uint64_t i = 0; ql_now_ns() < end; i++) {
		request(buf, QL_PROBE_MAX_BYTES, i);
		if (send(u, buf, QL_PROBE_MAX_BYTES, MSG_DONTWAIT) == QL_PROBE_MAX_BYTES)
			sent++;
		else
			usleep(100);
		ssize_t r;
		while ((r = recv(u, buf, sizeof buf, MSG_DONTWAIT)) > 0)
			got_bytes += (uint64_t)r;
	}
	double elapsed = (double)(ql_now_ns() - t0) / 1e9 + 0.05;
	usleep(300000);
	ssize_t r;
	while ((r = recv(u, buf, sizeof buf, MSG_DONTWAIT)) > 0)
		got_bytes += (uint64_t)r;
	ql_probe_srv_counters c;
	ql_server_probe_counters(s, &c);
	double bound = (double)QL_PROBE_SRV_PEER_BYTE_BURST + QL_PROBE_MAX_BYTES +
		       (double)QL_PROBE_SRV_PEER_BYTE_RATE * elapsed;
	printf("  big flood: %d sent (%.0f Mbit/s), %llu reply bytes (%.1f Mbit/s) in %.3f s "
	       "(bound %.0f B), %llu rate-limited\n", sent,
	       sent * (double)QL_PROBE_MAX_BYTES * 8 / elapsed / 1e6,
	       (unsigned long long)got_bytes, (double)got_bytes * 8 / elapsed / 1e6, elapsed, bound,
	       (unsigned long long)c.udp_rate_limited);
	CHECK(got_bytes > 0);
	CHECK((double)got_bytes <= bound);
	CHECK_EQ_U64(c.udp_replies * QL_PROBE_MAX_BYTES, got_bytes);
	CHECK(c.udp_rate_limited > 0);
	/* and a small probe from the same address still fits its reply
	 * budget once the byte bucket drained */
	usleep(200000);
	request(buf, 64, 1 << 30);
	send(u, buf, 64, 0);
	CHECK(readable(u, 1000));
	CHECK_EQ_INT(recv(u, buf, sizeof buf, 0), 64);
	close(u);
	ql_server_free(s);
}

static int tcp_probe_conn(int port)
{
	int t = connect_to(SOCK_STREAM, port);
	uint8_t g[QL_PROBE_GREETING_BYTES];
	ql_probe_greeting_put(g);
	if (t >= 0 && send(t, g, sizeof g, 0) != (ssize_t)sizeof g) {
		close(t);
		return -1;
	}
	return t;
}

/* 1 when the server closed t within ms (EOF or reset). */
static int closed_within(int t, int ms)
{
	uint8_t b[256];
	if (!readable(t, ms))
		return 0;
	return recv(t, b, sizeof b, MSG_DONTWAIT) <= 0;
}

TEST(tcp_garbage_silence_and_slots)
{
	ql_server *s = server(0.3, 1);
	CHECK(s != NULL);
	if (!s)
		return;
	int port = ql_server_port(s);
	/* a good exchange first */
	int t = tcp_probe_conn(port);
	uint8_t buf[128];
	request(buf, 100, 1);
	CHECK_EQ_INT(send(t, buf, 100, 0), 100);
	CHECK(readable(t, 1000));
	CHECK_EQ_INT(recv(t, buf, 100, MSG_WAITALL), 100);
	/* a second probe connection from this address is over its one slot:
	 * told so (ACCESS_DENIED, then the reason naming the limit), closed */
	int t2 = tcp_probe_conn(port);
	CHECK(readable(t2, 1000));
	char why[600] = "";
	ssize_t wn = recv(t2, why, sizeof why - 1, MSG_WAITALL);
	CHECK(wn > 5);
	CHECK_EQ_INT((uint8_t)why[0], 0xff);
	why[wn > 0 ? wn : 0] = 0;
	CHECK(wn > 5 && strstr(why + 5, "qoslab-refused: busy: 1 TCP probe sessions from 127.0.0.1") &&
	      strstr(why + 5, "max_tests_per_address is 1"));
	close(t2);
	/* and a probe client gets EBUSY with that reason */
	ql_probe_opts po;
	ql_probe_opts_init(&po);
	po.host = "127.0.0.1";
	po.port = port;
	po.proto = "tcp";
	ql_probe *pp = NULL;
	ql_err pe;
	CHECK_EQ_INT(ql_probe_start(&po, &pp, &pe), -EBUSY);
	CHECK_STR(pe.code, "EBUSY");
	CHECK(strstr(pe.msg, "max_tests_per_address is 1") && strstr(pe.msg, "--max-tests-per-address"));
	printf("  refused: %s\n", pe.msg);
	ql_probe_free(pp);

	/* garbage closes the connection */
	memset(buf, 'g', 64);
	send(t, buf, 64, 0);
	CHECK(closed_within(t, 1000));
	close(t);
	/* silence closes it after the idle timeout */
	usleep(50000);
	t = tcp_probe_conn(port);
	int64_t t0 = ql_now_ns();
	CHECK(closed_within(t, 2000));
	double took = (double)(ql_now_ns() - t0) / 1e9;
	CHECK(took > 0.2 && took < 1.5);
	close(t);
	ql_probe_srv_counters c;
	usleep(50000);
	ql_server_probe_counters(s, &c);
	CHECK_EQ_U64(c.tcp_replies, 1);
	CHECK_EQ_U64(c.tcp_refused, 2);
	CHECK_EQ_U64(c.tcp_malformed, 1);
	CHECK_EQ_U64(c.tcp_idle_closed, 1);
	CHECK_EQ_INT(c.tcp_open, 0);
	ql_server_free(s);
}

/* A TCP probe connection from 127.0.a.b that sent its greeting and one
 * request (answered): a session that looks alive, then says nothing. */
static int held_session(int port, int a, int b)
{
	int t = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in me = { .sin_family = AF_INET };
	me.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)a << 8 | (uint32_t)b);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	uint8_t g[QL_PROBE_GREETING_BYTES], buf[64];
	ql_probe_greeting_put(g);
	request(buf, 64, 0);
	if (t < 0 || bind(t, (struct sockaddr *)&me, sizeof me) < 0 ||
	    connect(t, (struct sockaddr *)&to, sizeof to) < 0 || send(t, g, sizeof g, 0) != sizeof g ||
	    send(t, buf, 64, 0) != 64 || !readable(t, 1000) || recv(t, buf, 64, MSG_WAITALL) != 64) {
		if (t >= 0)
			close(t);
		return -1;
	}
	return t;
}

/* How long a TCP probe from 127.0.0.1 takes to be admitted (-1: not
 * within limit_s); *first_err: the first attempt's error ("" if none). */
static double probe_admitted_after(int port, double limit_s, ql_err *first_err)
{
	int64_t t0 = ql_now_ns();
	first_err->code[0] = 0;
	first_err->msg[0] = 0;
	for (int k = 0; (double)(ql_now_ns() - t0) / 1e9 < limit_s; k++) {
		ql_probe_opts o;
		ql_probe_opts_init(&o);
		o.host = "127.0.0.1";
		o.port = port;
		o.proto = "tcp";
		ql_probe *p = NULL;
		ql_err e;
		int rc = ql_probe_start(&o, &p, &e);
		ql_probe_free(p);
		if (rc == 0)
			return (double)(ql_now_ns() - t0) / 1e9;
		if (k == 0)
			*first_err = e;
		usleep(200000);
	}
	return -1;
}

/* 32 addresses holding two sessions each fill the 64 sessions: a newcomer
 * is admitted at once, one session of an address over its fair share
 * closed for it (and logged). */
TEST(tcp_full_table_evicts_an_unfair_holder)
{
	ql_server *s = server(10, 2);
	CHECK(s != NULL);
	if (!s)
		return;
	int port = ql_server_port(s), fds[64], n = 0;
	for (int i = 0; i < 64; i++)
		if ((fds[n] = held_session(port, 2, 1 + i / 2)) >= 0)
			n++;
	CHECK_EQ_INT(n, 64);
	ql_probe_srv_counters c;
	ql_server_probe_counters(s, &c);
	CHECK_EQ_INT(c.tcp_open, 64);
	ql_err e;
	double took = probe_admitted_after(port, 3, &e);
	printf("  64 sessions from 32 addresses: a newcomer admitted after %.3f s (%s)\n", took,
	       e.msg[0] ? e.msg : "first try");
	CHECK(took >= 0 && took < 0.5);
	CHECK_STR(e.code, "");
	ql_server_probe_counters(s, &c);
	CHECK_EQ_U64(c.tcp_evicted, 1);
	ql_srv_problem pl[8];
	uint64_t total = 0;
	int np = ql_server_problem_log(s, 0, pl, 8, &total);
	int logged = 0;
	for (int i = 0; i < np; i++)
		logged += strstr(pl[i].text, "closed a TCP probe session from 127.0.2.") != NULL &&
			  strstr(pl[i].text, "max_tests (64) reached") != NULL;
	CHECK_EQ_INT(logged, 1);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	ql_server_free(s);
}

/* 64 addresses holding one session each: nobody holds more than a fair
 * share, so a newcomer is refused (EBUSY naming max_tests) until a session
 * has said nothing for 2 s, then admitted in its place. */
TEST(tcp_full_table_of_idle_sessions_admits_within_seconds)
{
	ql_server *s = server(10, 2);
	CHECK(s != NULL);
	if (!s)
		return;
	int port = ql_server_port(s), fds[64], n = 0;
	for (int i = 0; i < 64; i++)
		if ((fds[n] = held_session(port, 3, 1 + i)) >= 0)
			n++;
	CHECK_EQ_INT(n, 64);
	ql_err e;
	double took = probe_admitted_after(port, 5, &e);
	printf("  64 sessions from 64 addresses: a newcomer admitted after %.3f s (first: %s)\n",
	       took, e.msg);
	CHECK(took >= 0 && took < 3.5);
	CHECK_STR(e.code, "EBUSY");
	CHECK(strstr(e.msg, "max_tests is 64") && strstr(e.msg, "--max-tests"));
	ql_probe_srv_counters c;
	ql_server_probe_counters(s, &c);
	CHECK(c.tcp_evicted >= 1);
	CHECK(c.tcp_refused >= 1);
	ql_srv_problem pl[QL_SRV_PROBLEMS_KEPT];
	uint64_t total = 0;
	int np = ql_server_problem_log(s, 0, pl, QL_SRV_PROBLEMS_KEPT, &total);
	int refused = 0;
	for (int i = 0; i < np; i++)
		refused += strstr(pl[i].text, "TCP probe session refused from 127.0.0.1") != NULL;
	CHECK(refused >= 1);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	ql_server_free(s);
}

/* A fake responder (a child process) on a UDP port of 127.0.0.1 for
 * dur_ms: it answers each request as a reply with this host's boot id (so
 * the client takes the clock as shared) but with server times of `mode`:
 * 0 sane, 1 swapped (receive 1 s after now, send 1 s before), 2 both
 * INT64_MAX, 3 receive 1 ns and send 0, 4 both 50 ms ahead (a hold of 0
 * but an up delay past the RTT and a negative down). Returns its pid; *port its port. */
static pid_t fake_responder(int mode, int dur_ms, int *port)
{
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof a;
	if (u < 0 || bind(u, (struct sockaddr *)&a, sizeof a) < 0 ||
	    getsockname(u, (struct sockaddr *)&a, &al) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	fflush(stdout);
	pid_t pid = fork();
	if (pid != 0) {
		close(u);
		return pid;
	}
	uint8_t boot[8], buf[2048];
	ql_probe_boot_id(boot);
	int64_t end = ql_now_ns() + (int64_t)dur_ms * 1000000;
	while (ql_now_ns() < end) {
		if (!readable(u, 50))
			continue;
		struct sockaddr_storage from;
		socklen_t fl = sizeof from;
		ssize_t r = recvfrom(u, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
		ql_probe_msg m;
		if (r <= 0 || ql_probe_msg_get(&m, buf, (size_t)r) < 0)
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		m.type = QL_PROBE_REPLY;
		memcpy(m.boot, boot, 8);
		m.server_rx_ns = mode == 0 ? now : mode == 1 ? now + 1000000000LL
			       : mode == 2 ? INT64_MAX : mode == 3 ? 1 : now + 50000000LL;
		m.server_tx_ns = mode == 0 ? now : mode == 1 ? now - 1000000000LL
			       : mode == 2 ? INT64_MAX : mode == 3 ? 0 : now + 50000000LL;
		ql_probe_msg_put(&m, buf);
		sendto(u, buf, (size_t)r, 0, (struct sockaddr *)&from, fl);
	}
	_exit(0);
}

/* The client keeps the RTT of a reply whose server times are impossible
 * but neither its hold nor its one-way delays: they are counted in
 * bad_server_times (a peer can copy the boot id; it cannot fake our RTT). */
TEST(probe_client_drops_impossible_server_times)
{
	for (int mode = 0; mode < 5; mode++) {
		int port = 0;
		pid_t pid = fake_responder(mode, 900, &port);
		CHECK(pid > 0);
		if (pid <= 0)
			return;
		ql_probe_opts o;
		ql_probe_opts_init(&o);
		o.host = "127.0.0.1";
		o.port = port;
		o.interval_ms = 10;
		ql_probe *p = NULL;
		ql_err e;
		CHECK_EQ_INT(ql_probe_start(&o, &p, &e), 0);
		if (p) {
			usleep(300000);
			ql_probe_stop(p);
			ql_probe_info in;
			ql_probe_get_info(p, &in);
			ql_probe_sample *x;
			size_t n;
			CHECK_EQ_INT(ql_probe_samples(p, &x, &n), 0);
			ql_lat_summary sum;
			CHECK_EQ_INT(ql_lat_summarize(x, n, INT64_MIN, INT64_MAX, 2000000000LL,
						      INT64_MAX, 1, &sum), 0);
			printf("  mode %d: %llu replies, %llu bad server times, rtt n %lld hold n %lld "
			       "up n %lld, hold min %.3f ms\n", mode, (unsigned long long)in.replies,
			       (unsigned long long)in.bad_server_times, (long long)sum.rtt.n,
			       (long long)sum.hold.n, (long long)sum.up.n, sum.hold.min_ms);
			CHECK_EQ_INT(in.clock, QL_CLOCK_SHARED);
			CHECK(in.replies >= 10);
			CHECK_EQ_INT(sum.rtt.n, (int64_t)in.replies);
			if (mode == 0) {
				CHECK_EQ_U64(in.bad_server_times, 0);
				CHECK_EQ_INT(sum.hold.n, (int64_t)in.replies);
				CHECK(sum.hold.min_ms >= 0 && sum.up.min_ms >= -1 && sum.down.min_ms >= -1);
			} else {
				CHECK_EQ_U64(in.bad_server_times, in.replies);
				CHECK_EQ_INT(sum.hold.n, 0);
				CHECK_EQ_INT(sum.up.n + sum.down.n, 0);
			}
			free(x);
			ql_probe_free(p);
		}
		int st;
		waitpid(pid, &st, 0);
	}
}

/* A gid the ping_group_range does not hold, or -1. */
static int refused_gid(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ping_group_range", "re");
	long lo = 0, hi = 0;
	if (!f)
		return -1;
	int n = fscanf(f, "%ld %ld", &lo, &hi);
	fclose(f);
	if (n != 2)
		return -1;
	return 65534 >= lo && 65534 <= hi ? -1 : 65534;
}

TEST(icmp_refused_by_ping_group_range_is_eacces)
{
	int gid = refused_gid();
	if (getuid() != 0 || gid < 0)
		SKIP("needs root to drop to nobody, and a ping_group_range that refuses gid 65534");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid((gid_t)gid) < 0 || setuid(65534) < 0)
			_exit(3);
		ql_probe_opts o;
		ql_probe_opts_init(&o);
		o.host = "127.0.0.1";
		o.proto = "icmp";
		ql_probe *p = NULL;
		ql_err e;
		int rc = ql_probe_start(&o, &p, &e);
		ql_probe_free(p);
		_exit(rc == -EACCES && strcmp(e.code, "EACCES") == 0 &&
		      strstr(e.msg, "net.ipv4.ping_group_range") &&
		      strstr(e.msg, "sysctl -w") ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st));
	CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

/* A probe client against the responder, read while it runs (the threads'
 * sharing, for the sanitizer builds), then stopped: every request a sample. */
TEST(probe_client_against_the_server)
{
	ql_server *s = server(0, 0);
	CHECK(s != NULL);
	if (!s)
		return;
	const char *protos[] = { "udp", "tcp" };
	for (int i = 0; i < 2; i++) {
		ql_probe_opts o;
		ql_probe_opts_init(&o);
		o.host = "127.0.0.1";
		o.port = ql_server_port(s);
		o.proto = protos[i];
		o.interval_ms = 5;
		ql_probe *p = NULL;
		ql_err e;
		CHECK_EQ_INT(ql_probe_start(&o, &p, &e), 0);
		if (!p)
			continue;
		for (int k = 0; k < 6; k++) {
			usleep(50000);
			ql_probe_sample *x;
			size_t n;
			CHECK_EQ_INT(ql_probe_samples(p, &x, &n), 0);
			free(x);
		}
		ql_probe_stop(p);
		ql_probe_info in;
		ql_probe_get_info(p, &in);
		CHECK(in.sent >= 20);
		CHECK_EQ_U64(in.replies, in.sent);
		CHECK(in.stopped);
		CHECK_EQ_INT(in.clock, QL_CLOCK_SHARED);
		ql_probe_sample *x;
		size_t n;
		CHECK_EQ_INT(ql_probe_samples(p, &x, &n), 0);
		ql_lat_summary sum;
		CHECK_EQ_INT(ql_lat_summarize(x, n, INT64_MIN, INT64_MAX, 2000000000LL, INT64_MAX, 1,
					      &sum), 0);
		CHECK_EQ_INT(sum.samples, (int64_t)in.sent);
		CHECK_EQ_INT(sum.lost + sum.late, 0);
		free(x);
		ql_probe_free(p);
	}
	ql_probe_srv_counters c;
	ql_server_probe_counters(s, &c);
	CHECK(c.udp_replies >= 20 && c.tcp_replies >= 20);
	ql_server_free(s);
}

int main(void)
{
	RUN(udp_hostile_datagrams_get_no_reply);
	RUN(udp_huge_request_reply_is_never_larger);
	RUN(udp_flood_replies_are_rate_bounded);
	RUN(udp_big_request_flood_replies_are_byte_bounded);
	RUN(tcp_garbage_silence_and_slots);
	RUN(probe_client_against_the_server);
	RUN(tcp_full_table_evicts_an_unfair_holder);
	RUN(probe_client_drops_impossible_server_times);
	RUN(tcp_full_table_of_idle_sessions_admits_within_seconds);
	RUN(icmp_refused_by_ping_group_range_is_eacces);
	return ctest_done();
}
