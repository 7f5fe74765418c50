/*
 * client.c - the client role (engine.h): options, the control protocol,
 * creating the streams, the run, next_interval. Stands on affinity.h, control.h,
 * ctl_reader.h, results.h, udp_books.h, report.h, workers.h, sockopt.h and
 * test.h.
 */
#include "engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "affinity.h"
#include "control.h"
#include "ctl_reader.h"
#include "options.h"
#include "report.h"
#include "results.h"
#include "sockopt.h"
#include "test.h"
#include "udp_books.h"
#include "workers.h"
#include "../nl.h"
#include "../timer.h"

void ql_client_opts_init(ql_client_opts *o)
{
	memset(o, 0, sizeof *o);
	o->port = QL_DEFAULT_PORT;
	o->parallel = 1;
	o->interval_s = 1;
	o->tos = -1;
	o->nodelay = -1;
	o->udp_gso = -1;
	o->skip_rx_copy = -1;
	o->zerocopy = -1;
	o->udp_drain_s = -1;
}

/* Retransmission timer of the UDP connect message: the first wait is the
 * control connection's RTO-like max(200 ms, 2 x srtt), doubling up to 2 s,
 * so a lost message or reply is repeated well inside the connect timeout
 * (iperf3 sends once and fails, esnet/iperf #351) while a slow path does
 * not draw early duplicates. */
static int64_t udp_connect_rto(ql_test *t)
{
	int64_t rto = 200 * MS;
	ql_tcp_sample ts;
	if (t->ctl_fd >= 0 && ql_tcp_sample_read(t->ctl_fd, &ts, 0, NULL) == 0 &&
	    (ts.valid & QL_TCPS_RTT) && 2LL * ts.rtt_us * 1000 > rto)
		rto = 2LL * ts.rtt_us * 1000;
	return rto;
}

static int client_udp_handshake(ql_test *t, ql_stream *s)
{
	/* The 4-byte magic, then our cookie: a qoslab server uses it to give
	 * the stream to the right test when several clients share an address
	 * (a stock iperf3 server reads only the first 4 bytes). */
	char msg[4 + QL_COOKIE_SIZE];
	uint32_t magic = QL_UDP_CONNECT_MSG;
	memcpy(msg, &magic, 4);
	memcpy(msg + 4, t->cookie, QL_COOKIE_SIZE);
	int64_t deadline = ql_now_ns() + t->connect_timeout_ns;
	int64_t rto = udp_connect_rto(t), resend = 0;
	for (;;) {
		int64_t now = ql_now_ns();
		if (now >= deadline)
			return ql_err_set(&t->err, ETIMEDOUT, NULL,
					  "UDP stream %d: no reply to the connect message from %s port %d",
					  s->id, t->host, t->port);
		if (atomic_load(&t->stop_req))
			return ql_err_set(&t->err, EINTR, "EINTR", "test stopped");
		if (now >= resend) {
			if (send(s->fd, msg, sizeof msg, 0) < 0 && errno != ECONNREFUSED)
				return ql_err_set(&t->err, errno, NULL, "UDP connect message: %s",
						  strerror(errno));
			resend = now + rto;
			rto = rto * 2 > 2 * QL_NS_PER_S ? 2 * QL_NS_PER_S : rto * 2;
		}
		int ms = (int)((resend - now + MS - 1) / MS);
		struct pollfd pf[2] = { { .fd = s->fd, .events = POLLIN },
					{ .fd = t->ctl_fd, .events = POLLIN } };
		if (poll(pf, 2, ms > 50 ? 50 : ms) <= 0)
			continue;
		/* The server has every stream once it speaks on the control
		 * connection again (TEST_START, or an error the protocol loop
		 * reports): the reply to our last stream was lost, and the
		 * server, already running, no longer answers repeats. */
		if (pf[1].revents)
			return 0;
		char buf[64];
		ssize_t r = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK);
		if (r == 4 && ql_udp_connect_reply_ok(buf, 4)) {
			recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
			return 0;
		}
		if (r > 4)
			return 0;   /* reverse data: the server is running; keep it */
		if (r >= 0)
			recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
	}
}

static int client_create_streams(ql_test *t)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc = resolve(t->host, t->port, t->proto == QL_PROTO_TCP ? SOCK_STREAM : SOCK_DGRAM,
			 &ss, &len, &t->err);
	if (rc < 0)
		return rc;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		int type = t->proto == QL_PROTO_TCP ? SOCK_STREAM : SOCK_DGRAM;
		s->fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
		if (s->fd < 0)
			return ql_err_set(&t->err, errno, NULL, "socket: %s", strerror(errno));
		if ((rc = apply_opts(t, s->fd, ss.ss_family, s, &t->err)) < 0)
			return rc;
		if ((rc = bind_local(s->fd, ss.ss_family, t->bind_address, 0, &t->err)) < 0)
			return rc;
		rc = connect_timeout(s->fd, (struct sockaddr *)&ss, len, t->connect_timeout_ns,
				     (const volatile int *)&t->stop_req, &t->err, t->host, t->port);
		if (rc < 0)
			return rc;
		if (t->proto == QL_PROTO_TCP) {
			rc = ql_io_write_full(s->fd, t->cookie, QL_COOKIE_SIZE,
					      ql_now_ns() + CTL_TIMEOUT_NS, NULL);
			if (rc < 0)
				return fail_io(t, rc, "stream cookie");
		} else {
			if ((rc = client_udp_handshake(t, s)) < 0)
				return rc;
			struct timeval tv = { 0, 100000 };
			setsockopt(s->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		}
	}
	return 0;
}

/* The server will send its interval records live: hold each local record
 * for the peer's entries of the same slots. */
static void peer_announced_live(ql_test *t)
{
	/* only a qoslab server announces its live series: it tags datagrams */
	atomic_store(&t->peer_tags, 1);
	pthread_mutex_lock(&t->mu);
	t->peer_live = 1;
	pthread_mutex_unlock(&t->mu);
}

/* A qoslab server's reason after a refusal or an end (QL_REFUSAL_PREFIX
 * text, printable ASCII kept) in out[len]; "" when none came (a stock
 * iperf3 server closes at once). */
static void peer_reason(ql_test *t, char *out, size_t len)
{
	out[0] = 0;
	char *js = NULL;
	size_t jl = 0;
	if (ql_io_read_json(t->ctl_fd, QL_REFUSAL_MAX_BYTES, &js, &jl, ql_now_ns() + 500 * MS,
			    NULL) < 0)
		return;
	size_t pl = strlen(QL_REFUSAL_PREFIX), k = 0;
	if (jl > pl && memcmp(js, QL_REFUSAL_PREFIX, pl) == 0)
		for (size_t i = pl; i < jl && k + 1 < len; i++)
			out[k++] = js[i] >= 32 && js[i] < 127 ? js[i] : '?';
	out[k] = 0;
	free(js);
}

/* Whether the test ends when our receivers have the limit: the peer sends
 * until our TEST_END reaches it (client_done_cond). */
static int ends_at_received_limit(ql_test *t)
{
	if (!t->limited || !local_has(t, 0))
		return 0;
	if (t->proto == QL_PROTO_TCP)
		return t->limit_bytes > 0;
	return t->limit_packets && !atomic_load(&t->peer_tags);
}

static int client_done_cond(ql_test *t, int sender_done_signal)
{
	if (atomic_load(&t->stop_req))
		return 1;
	if (!t->limited)
		return ql_now_ns() >= t->start_ns + t->omit_ns +
				      (int64_t)(t->prm.time_s * 1e9);
	int snd_ok = !local_has(t, 1) || all_done(t, 1);
	int rcv_ok = 1;
	if (local_has(t, 0)) {
		rcv_ok = receivers_eof(t) || sender_done_signal;
		/* a stock iperf3 server sends until told TEST_END, which its
		 * own client sends once it received the limit */
		if (ends_at_received_limit(t) &&
		    (t->proto == QL_PROTO_TCP
		     ? received_bytes(t, QL_DIR_REVERSE) >= t->limit_bytes
		     : received_packets(t, QL_DIR_REVERSE) >= t->limit_packets))
			rcv_ok = 1;
	}
	return snd_ok && rcv_ok;
}

static int client_run(ql_test *t)
{
	int sender_done_signal = 0;
	for (;;) {
		maybe_tick(t);
		if (client_done_cond(t, sender_done_signal))
			break;
		int64_t now = ql_now_ns(), w = wake_at(t);
		if (w > now + 20 * MS)
			w = now + 20 * MS;
		/* What the peer sends while we sleep goes past the limit:
		 * look at the count every ms, as iperf3's client does after
		 * each read (a 20 ms nap let 25 datagrams past a UDP limit
		 * at 10 Mbit/s). */
		if (ends_at_received_limit(t) && w > now + MS)
			w = now + MS;
		int ms = w > now ? (int)((w - now + MS - 1) / MS) : 0;
		/* Only what has come is read: the rest of a message whose
		 * segments trickle in waits in the reader, and the grid ticks
		 * on meanwhile (a blocking read held it for seconds). */
		if (wait_io(t->ctl_fd, POLLIN, ms) > 0) {
			int st;
			char *js = NULL;
			size_t jl = 0;
			int rc = ql_ctl_reader_recv(&t->ctl_rd, t->ctl_fd);
			if (rc < 0)
				return fail_io(t, rc, "the test");
			if (rc == 0 || ql_ctl_reader_take(&t->ctl_rd, &st, &js, &jl) < 0)
				continue;
			if (st == QL_ST_QL_SENDER_DONE)
				sender_done_signal = 1;
			else if (st == QL_ST_QL_INTERVAL)
				peer_interval_take(t, js, jl);
			else if (st == QL_ST_QL_LIVE)
				peer_announced_live(t);
			else if (st == QL_ST_SERVER_TERMINATE || st == QL_ST_SERVER_ERROR ||
				 st == QL_ST_ACCESS_DENIED) {
				char why[QL_REFUSAL_MAX_BYTES];
				if (st == QL_ST_SERVER_ERROR) {
					uint32_t v[2];
					ql_io_read_full(t->ctl_fd, v, sizeof v,
							ql_now_ns() + QL_NS_PER_S, NULL);
				}
				peer_reason(t, why, sizeof why);
				return ql_err_set(&t->err, ECONNABORTED, NULL,
						  "server ended the test (state %d)%s%s", st,
						  why[0] ? ": " : "", why);
			}
		}
	}
	int64_t send_end = ql_now_ns();
	atomic_store(&t->send_stop, 1);
	wait_senders(t);
	int rc = ql_io_write_state(t->ctl_fd, QL_ST_TEST_END, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
	if (rc < 0)
		return fail_io(t, rc, "TEST_END");
	drain_receivers(t);
	final_snapshot(t, send_end);
	return 0;
}

static int client_protocol(ql_test *t)
{
	int rc;
	struct sockaddr_storage ss;
	socklen_t len;
	if ((rc = resolve(t->host, t->port, SOCK_STREAM, &ss, &len, &t->err)) < 0)
		return rc;
	t->ctl_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (t->ctl_fd < 0)
		return ql_err_set(&t->err, errno, NULL, "socket: %s", strerror(errno));
	int one = 1;
	setsockopt(t->ctl_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	/* the device is bound before connecting: a missing one is ENODEV
	 * whether a server listens there or not */
	if (t->bind_device[0] &&
	    setsockopt(t->ctl_fd, SOL_SOCKET, SO_BINDTODEVICE, t->bind_device,
		       (socklen_t)strlen(t->bind_device)) < 0)
		return bind_device_error(t->bind_device, t->netns, errno, &t->err);
	if ((rc = bind_local(t->ctl_fd, ss.ss_family, t->bind_address, 0, &t->err)) < 0)
		return rc;
	rc = connect_timeout(t->ctl_fd, (struct sockaddr *)&ss, len, t->connect_timeout_ns,
			     (const volatile int *)&t->stop_req, &t->err, t->host, t->port);
	if (rc < 0)
		return rc;
	ql_cookie_make(t->cookie);   /* the UDP streams' tags derive from it (udp_setup) */
	if (t->proto == QL_PROTO_UDP && t->prm.len_bytes == 0) {
		int mss = 0;
		socklen_t ml = sizeof mss;
		getsockopt(t->ctl_fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &ml);
		t->prm.len_bytes = mss >= QL_UDP_MIN_BYTES && mss < QL_UDP_DEFAULT_LEN
				   ? mss : QL_UDP_DEFAULT_LEN;
	}
	if (t->proto == QL_PROTO_UDP && t->limit_bytes && !t->limit_packets)
		t->limit_packets = (t->limit_bytes + (uint64_t)t->prm.len_bytes - 1) /
				   (uint64_t)t->prm.len_bytes;
	if (t->proto == QL_PROTO_UDP && t->limit_packets) {
		t->prm.blockcount = t->limit_packets;
		t->prm.num_bytes = 0;
		/* a qoslab server sending in reverse cuts the last datagram
		 * to this; a stock iperf3 sends whole blocks */
		t->prm.udp_limit_bytes = t->limit_bytes;
	}
	t->prm.udp_tag = t->proto == QL_PROTO_UDP;
	udp_setup(t);
	for (int d = 0; d < 2; d++)
		atomic_store(&t->budget[d], (int64_t)(t->proto == QL_PROTO_UDP ? t->limit_packets
								      : t->limit_bytes));
	/* The cookie and the parameters go together, in one write, a round
	 * trip before the server asks for the parameters (PARAM_EXCHANGE): a
	 * server reads the cookie, answers, then reads the parameters already
	 * waiting, so the test starts a round trip sooner (a second at 1000
	 * ms of delay). A stock iperf3 server reads them the same way. One
	 * that is busy writes ACCESS_DENIED without reading and closes; our
	 * bytes then draw a reset, which a second write could meet before
	 * the refusal is read (one write cannot). */
	{
		char *js = NULL;
		if ((rc = ql_params_to_json(&t->prm, &js, &t->err)) < 0)
			return rc;
		rc = ql_io_write_prefixed_json(t->ctl_fd, t->cookie, QL_COOKIE_SIZE, js,
					       ql_now_ns() + CTL_TIMEOUT_NS, NULL);
		free(js);
		if (rc < 0)
			return fail_io(t, rc, "sending the cookie and parameters");
	}
	ql_cpu_result cpu;
	memset(&cpu, 0, sizeof cpu);
	for (;;) {
		int st;
		char *live = NULL;
		size_t live_len = 0;
		/* Once the test ran, a stop request only shortens it: the
		 * results exchange still happens (bounded by the deadline),
		 * unless the test was aborted (ql_test_abort: a dead path). */
		int64_t dl = ql_now_ns() + 30 * QL_NS_PER_S;
		rc = ql_ctl_reader_wait(&t->ctl_rd, t->ctl_fd, dl,
					(const volatile int *)(t->state == T_RUNNING ? &t->abort_req
							       : &t->stop_req));
		if (rc == -EINTR && t->state == T_NEW)
			return fail_io(t, rc, "the handshake");
		if (rc < 0)
			return fail_io(t, rc, "the control exchange");
		ql_ctl_reader_take(&t->ctl_rd, &st, &live, &live_len);
		switch (st) {
		case QL_ST_PARAM_EXCHANGE:
			break;   /* the parameters went with the cookie */
		case QL_ST_CREATE_STREAMS:
			/* No announcement before this: a stock iperf3 server,
			 * which counts whole datagrams only, so a UDP byte limit
			 * goes out rounded up to whole datagrams, as iperf3's. */
			if (t->proto == QL_PROTO_UDP && !atomic_load(&t->peer_tags) &&
			    t->limit_bytes) {
				t->limit_bytes = 0;
				udp_setup(t);
			}
			if ((rc = client_create_streams(t)) < 0)
				return rc;
			sockets_read(t);
			/* Receive from now on: the server sends as soon as it has
			 * written TEST_RUNNING, and if that message is delayed (a
			 * lossy path retransmits it) the data must not overflow an
			 * unread socket (a reverse test in a guest VM lost 271 of
			 * 2000 datagrams to the receive buffer that way). */
			if ((rc = start_workers(t, 1, &t->err)) < 0)
				return rc;
			break;
		case QL_ST_TEST_START:
			break;
		case QL_ST_TEST_RUNNING: {
			t->state = T_RUNNING;
			default_drain(t);
			live_hold(t);
			thread_cpu(&t->ctl_cpu_user0, &t->ctl_cpu_sys0);
			t->start_ns = t->last_snap_ns = ql_now_ns();
			t->start_unix = (double)realtime_ns() / 1e9;
			if ((rc = start_workers(t, 0, &t->err)) < 0)
				return rc;
			rc = client_run(t);
			/* Even after an error the threads must be stopped; after
			 * one (the server ended the test, the control connection
			 * broke) at once: a byte-limited sender would otherwise
			 * push its reservation into a peer that reads no more and
			 * wait for acknowledgements that never come (10 s). */
			if (rc < 0)
				streams_abort(t);
			atomic_store(&t->send_stop, 1);
			atomic_store(&t->recv_stop, 1);
			streams_join(t, 1, 1);
			if (rc < 0)
				return rc;
			cpu_local(t, &cpu);
			warn_skipped_slots(t);
			break;
		}
		case QL_ST_EXCHANGE_RESULTS:
			if ((rc = exchange_results(t, 1, &cpu)) < 0)
				return rc;
			break;
		case QL_ST_DISPLAY_RESULTS:
			ql_io_write_state(t->ctl_fd, QL_ST_IPERF_DONE, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
			build_result(t, &cpu);
			return 0;
		case QL_ST_QL_SENDER_DONE:
			break;
		case QL_ST_QL_LIVE:
			peer_announced_live(t);
			break;
		case QL_ST_QL_INTERVAL:
			peer_interval_take(t, live, live_len);
			break;
		case QL_ST_ACCESS_DENIED: {
			/* a qoslab server says which of its limits refused us; a
			 * stock iperf3 server only says busy (it serves one test
			 * at a time) */
			char why[QL_REFUSAL_MAX_BYTES];
			peer_reason(t, why, sizeof why);
			if (why[0])
				return ql_err_set(&t->err, EBUSY, "EBUSY",
						  "server %s port %d refused the test: %s", t->host,
						  t->port, why);
			return ql_err_set(&t->err, EBUSY, "EBUSY",
					  "server %s port %d refused the test (busy: an iperf3 server "
					  "serves one test at a time; retry later)", t->host, t->port);
		}
		case QL_ST_SERVER_ERROR: {
			uint32_t v[2] = { 0, 0 };
			ql_io_read_full(t->ctl_fd, v, sizeof v, ql_now_ns() + QL_NS_PER_S, NULL);
			int ierr = (int)ntohl(v[0]), eno = (int)ntohl(v[1]);
			char why[QL_REFUSAL_MAX_BYTES];
			peer_reason(t, why, sizeof why);
			if (why[0])
				return ql_err_set(&t->err, ECONNABORTED, "ECONNABORTED",
						  "server %s port %d refused the test: %s", t->host,
						  t->port, why);
			if (ierr == 37)   /* iperf3's IEMAXSERVERTESTDURATIONEXCEEDED */
				return ql_err_set(&t->err, ECONNABORTED, "ECONNABORTED",
						  "server %s port %d refused the test: the requested "
						  "duration exceeds the server's maximum", t->host, t->port);
			return ql_err_set(&t->err, ECONNABORTED, "ECONNABORTED",
					  "server reported error %d (errno %d: %s)", ierr, eno,
					  eno > 0 ? strerror(eno) : "none");
		}
		case QL_ST_SERVER_TERMINATE: {
			char why[QL_REFUSAL_MAX_BYTES];
			peer_reason(t, why, sizeof why);
			return ql_err_set(&t->err, ECONNABORTED, "ECONNABORTED",
					  "server terminated the test%s%s", why[0] ? ": " : "", why);
		}
		default:
			return ql_err_set(&t->err, EPROTO, "EPROTO", "unexpected control state %d", st);
		}
	}
}

static void *client_main(void *arg)
{
	ql_test *t = arg;
	int restore = -1;
	int rc = ql_netns_enter(t->netns, &restore, &t->err);
	if (rc == 0) {
		rc = client_protocol(t);
		ql_err e2;
		ql_netns_restore(restore, &e2);
	}
	atomic_store(&t->send_stop, 1);
	atomic_store(&t->recv_stop, 1);
	streams_join(t, 1, 1);
	test_finish(t, rc);
	test_close_sockets(t);
	return NULL;
}

int ql_client_check_host(const ql_client_opts *o, const char **field, ql_err *e)
{
	const char *f = NULL;
	int rc = affinity_check(&o->cpu_affinity, "opts.cpu_affinity", e);
	if (rc < 0) {
		f = "opts.cpu_affinity";
	} else if ((o->netns && *o->netns) || (o->bind_device && *o->bind_device)) {
		int restore = -1;
		rc = ql_netns_enter(o->netns, &restore, e);
		if (rc < 0) {
			f = "opts.netns";
		} else if (o->bind_device && *o->bind_device) {
			unsigned idx = if_nametoindex(o->bind_device);
			int err = errno;
			ql_err e2;
			ql_netns_restore(restore, &e2);
			if (!idx) {
				rc = bind_device_error(o->bind_device, o->netns, err, e);
				f = "opts.bind_device";
			}
		} else {
			ql_err e2;
			ql_netns_restore(restore, &e2);
		}
	}
	if (field)
		*field = f;
	return rc;
}

int ql_client_start(const ql_client_opts *o, ql_test **out, ql_err *e)
{
	*out = NULL;
	int rc = ql_client_opts_validate(o, e);
	if (rc < 0)
		return rc;
	if ((rc = affinity_check(&o->cpu_affinity, "opts.cpu_affinity", e)) < 0)
		return rc;
	ql_test *t = test_new(QL_SIDE_CLIENT);
	if (!t)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	copy_str(t->host, sizeof t->host, o->host);
	t->port = o->port;
	t->proto = o->proto;
	copy_str(t->netns, sizeof t->netns, o->netns);
	copy_str(t->bind_address, sizeof t->bind_address, o->bind_address);
	copy_str(t->bind_device, sizeof t->bind_device, o->bind_device);
	if (o->udp_batch > 0)
		t->udp_batch = o->udp_batch;
	t->udp_gso = o->udp_gso > 0;
	t->prm.udp_gso = o->udp_gso > 0;
	t->prm.skip_rx_copy = o->skip_rx_copy > 0;
	t->prm.zerocopy = o->zerocopy > 0;
	if (o->connect_timeout_s > 0)
		t->connect_timeout_ns = (int64_t)(o->connect_timeout_s * 1e9);
	ql_params *p = &t->prm;
	p->udp = o->proto == QL_PROTO_UDP;
	p->omit_s = o->omit_s;
	t->limit_bytes = o->bytes;
	t->limit_packets = o->packets;
	t->limited = o->bytes || o->packets;
	p->time_s = t->limited ? 0 : o->duration_s > 0 ? o->duration_s : QL_DURATION_DEFAULT_S;
	p->num_bytes = o->bytes;
	p->parallel = o->parallel;
	p->reverse = o->reverse;
	p->bidir = o->bidir;
	p->window_bytes = o->window_bytes;
	p->sndbuf_bytes = o->sndbuf_bytes;
	p->rcvbuf_bytes = o->rcvbuf_bytes;
	p->len_bytes = o->length_bytes ? o->length_bytes
				       : (p->udp ? 0 : QL_TCP_DEFAULT_LEN);
	p->bandwidth_bps = p->udp ? (o->bitrate_set ? o->bitrate_bps : QL_UDP_DEFAULT_BPS)
				  : o->bitrate_bps;
	p->fqrate_bps = o->fq_rate_bps;
	p->tos = o->tos;
	p->nstream_tos = o->tos_per_stream.n;
	memcpy(p->stream_tos, o->tos_per_stream.tos, sizeof p->stream_tos);
	p->nodelay = o->nodelay > 0;
	p->mss_bytes = o->mss_bytes;
	t->affinity = o->cpu_affinity;
	p->nserver_cpu = o->server_cpu_affinity.n;
	memcpy(p->server_cpu, o->server_cpu_affinity.cpu, sizeof p->server_cpu);
	copy_str(p->congestion, sizeof p->congestion, o->congestion);
	copy_str(p->title, sizeof p->title, o->title);
	p->udp_counters_64bit = p->udp;
	copy_str(p->qoslab, sizeof p->qoslab, QL_ENGINE_VERSION);
	p->udp_drain_s = o->udp_drain_s;
	p->interval_s = o->interval_s;
	t->period_ns = (int64_t)(o->interval_s * 1e9);
	t->omit_ns = (int64_t)(o->omit_s * 1e9);
	/* A qoslab server is recognised from its results (build_result);
	 * until then the client takes the peer for one: it sends its extras,
	 * which a stock iperf3 ignores. */
	t->peer = QL_PEER_QOSLAB;
	rc = streams_alloc(t, e);
	if (rc < 0) {
		test_release(t);
		free(t);
		return rc;
	}
	rc = pthread_create(&t->ctl_th, NULL, client_main, t);
	if (rc != 0) {
		test_release(t);
		free(t);
		return ql_err_set(e, rc, NULL, "cannot start the control thread: %s", strerror(rc));
	}
	t->ctl_started = 1;
	*out = t;
	return 0;
}

int ql_test_next_interval(ql_test *t, int64_t timeout_ns, ql_interval **out)
{
	*out = NULL;
	pthread_mutex_lock(&t->mu);
	int64_t deadline = timeout_ns >= 0 ? ql_now_ns() + timeout_ns : INT64_MAX;
	for (;;) {
		/* A record held for the peer's entries goes when its wait ends,
		 * whatever the control thread is doing (e.g. draining). */
		live_release(t, ql_now_ns());
		if (t->nread < t->nlive || t->finished)
			break;
		int64_t left = deadline - ql_now_ns();
		if (left <= 0)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t abs = (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec +
			      (left > 50 * MS ? 50 * MS : left);
		ts.tv_sec = abs / QL_NS_PER_S;
		ts.tv_nsec = abs % QL_NS_PER_S;
		pthread_cond_timedwait(&t->cv, &t->mu, &ts);
	}
	int rc;
	if (t->nread < t->nlive) {
		ql_interval *c = malloc(sizeof *c);
		const ql_interval *src = &t->live[t->nread];
		if (c) {
			*c = *src;
			c->entries = calloc((size_t)src->nentries + 1, sizeof *c->entries);
			if (c->entries)
				memcpy(c->entries, src->entries, (size_t)src->nentries * sizeof *c->entries);
			else
				c->nentries = 0;
		}
		t->nread++;
		*out = c;
		rc = c ? 1 : -ENOMEM;
	} else {
		rc = t->finished ? -ENODATA : 0;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}
