/*
 * server_session.c - one test on the server: admission, its streams, the run,
 * the results exchange and publication. Stands on affinity.h, server_admit.h,
 * control.h, results.h, udp_books.h, report.h, workers.h, sockopt.h and
 * test.h.
 */
#include "server_session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "affinity.h"
#include "control.h"
#include "report.h"
#include "results.h"
#include "server_admit.h"
#include "server_int.h"
#include "sockopt.h"
#include "test.h"
#include "udp_books.h"
#include "workers.h"
#include "../nl.h"
#include "../timer.h"

void kept_unref(kept_result *k)
{
	if (k && atomic_fetch_sub(&k->refs, 1) == 1) {
		ql_result_free(&k->res);
		free(k);
	}
}

static void server_error(ql_test *t, int code, int eno)
{
	uint32_t v[2] = { htonl((uint32_t)code), htonl((uint32_t)eno) };
	if (ql_io_write_state(t->ctl_fd, QL_ST_SERVER_ERROR, ql_now_ns() + 200 * MS, NULL) == 0)
		ql_io_write_full(t->ctl_fd, v, sizeof v, ql_now_ns() + 200 * MS, NULL);
	t->srv_told = 1;
}

/* The data-idle limit of a running test (see ql_server_opts). */
static int64_t srv_idle_ns(ql_test *t)
{
	const ql_params *p = &t->prm;
	int64_t idle;
	if (t->srv->o.data_idle_s > 0) {
		idle = (int64_t)(t->srv->o.data_idle_s * 1e9);
	} else {
		idle = (int64_t)(QL_SRV_DATA_IDLE_FLOOR_S * 1e9);
		int64_t rto = 200 * MS;
		ql_tcp_sample ts;
		if (t->ctl_fd >= 0 && ql_tcp_sample_read(t->ctl_fd, &ts, 0, NULL) == 0 &&
		    (ts.valid & QL_TCPS_RTT)) {
			int64_t r = ((int64_t)ts.rtt_us + 4LL * ts.rttvar_us) * 1000;
			if (r > rto)
				rto = r;
		}
		if (64 * rto > idle)
			idle = 64 * rto;
	}
	if (p->bandwidth_bps > 0) {
		double gap = 3.0 * (double)p->len_bytes * 8.0 / (double)p->bandwidth_bps;
		if (gap > 120)
			gap = 120;
		if ((int64_t)(gap * 1e9) > idle)
			idle = (int64_t)(gap * 1e9);
	}
	return idle;
}

/* What the test's streams moved: bytes read by TCP receivers, datagrams
 * taken by UDP receivers (their bytes are in the books), bytes
 * acknowledged for TCP senders (written minus what the send queue still
 * holds), so a sender blocked by a peer that reads nothing does not count
 * as moving, while one draining a slow path does. */
static uint64_t test_progress(ql_test *t)
{
	uint64_t m = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *st = &t->st[i];
		uint64_t b = atomic_load(&st->bytes) + atomic_load(&st->packets);
		int q = 0;
		if (st->sender && t->proto == QL_PROTO_TCP && st->fd >= 0 &&
		    ioctl(st->fd, SIOCOUTQ, &q) == 0 && q > 0)
			b = b > (uint64_t)q ? b - (uint64_t)q : 0;
		m += b;
	}
	return m;
}

/* End a running test for a server limit: tell the peer, then fail it. */
static int srv_end_test(ql_test *t, int eno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int srv_end_test(ql_test *t, int eno, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	srv_tell(t->ctl_fd, QL_ST_SERVER_TERMINATE, 0, why);
	t->srv_told = 1;
	return ql_err_set(&t->err, eno, NULL, "ended by the server: %s", why);
}

/* Wait for the test's data sockets (TCP via cookie, UDP via handshake). */
/* A client that gave up while the server waits for its data connections
 * (it failed to set a socket option, or was interrupted) closes or
 * terminates its control connection: notice that now instead of holding
 * the test for the whole connect timeout. */
static int ctl_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLHUP | POLLERR))
		return 1;
	unsigned char b;
	ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return r == 0 || (r == 1 && (signed char)b == QL_ST_CLIENT_TERMINATE);
}

static int server_collect_streams(ql_test *t)
{
	ql_server *s = t->srv;
	/* A client that connects none (or stops connecting) holds its slot
	 * for the data-idle time at most; each stream that comes restarts
	 * the wait, so many streams over a long path still make it. */
	int64_t deadline = ql_now_ns() + t->idle_ns;
	int gone = 0, seen = 0;
	pthread_mutex_lock(&s->mu);
	while (t->npending < t->nstreams && !atomic_load(&s->stop) &&
	       !atomic_load(&t->stop_req)) {
		if (t->npending > seen) {
			seen = t->npending;
			deadline = ql_now_ns() + t->idle_ns;
		}
		if (ql_now_ns() >= deadline)
			break;
		if (ctl_gone(t->ctl_fd)) {
			gone = 1;
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * MS;
		if (ts.tv_nsec >= QL_NS_PER_S) {
			ts.tv_sec++;
			ts.tv_nsec -= QL_NS_PER_S;
		}
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	int got = t->npending;
	t->state = T_RUNNING;
	pthread_mutex_unlock(&s->mu);
	if (got < t->nstreams && gone)
		return ql_err_set(&t->err, ECONNRESET, NULL,
				  "client left after opening %d of %d data connections", got,
				  t->nstreams);
	if (got < t->nstreams) {
		srv_tell(t->ctl_fd, QL_ST_SERVER_TERMINATE, 0, "data connections did not arrive");
		t->srv_told = 1;
		return ql_err_set(&t->err, ETIMEDOUT, NULL,
				  "client opened %d of %d data connections within the data-idle "
				  "time (%.1f s)", got, t->nstreams, (double)t->idle_ns / 1e9);
	}
	for (int i = 1; i < t->nstreams; i++)   /* insertion sort by accept order */
		for (int j = i; j > 0 && t->pending_seq[j] < t->pending_seq[j - 1]; j--) {
			uint64_t q = t->pending_seq[j];
			int f = t->pending_fds[j];
			t->pending_seq[j] = t->pending_seq[j - 1];
			t->pending_fds[j] = t->pending_fds[j - 1];
			t->pending_seq[j - 1] = q;
			t->pending_fds[j - 1] = f;
		}
	for (int i = 0; i < t->nstreams; i++) {
		t->st[i].fd = t->pending_fds[i];
		t->pending_fds[i] = -1;
	}
	t->npending = 0;
	if (t->proto == QL_PROTO_TCP)
		for (int i = 0; i < t->nstreams; i++) {
			struct sockaddr_storage ss;
			socklen_t l = sizeof ss;
			getsockname(t->st[i].fd, (struct sockaddr *)&ss, &l);
			int rc = apply_opts(t, t->st[i].fd, ss.ss_family, &t->st[i], &t->err);
			if (rc < 0)
				return rc;
		}
	return 0;
}

static int server_run(ql_test *t)
{
	int64_t silence = (int64_t)(t->srv->o.idle_timeout_s * 1e9);
	int64_t hard_end = t->limited ? 0 : t->start_ns + t->omit_ns +
					   (int64_t)(t->prm.time_s * 1e9) + silence;
	int signalled = 0;
	uint64_t moved = 0;
	int64_t moved_at = ql_now_ns(), checked_at = 0;
	/* No test outlives max_duration_s: a timed one was admitted within
	 * it (and gets the silence allowance for its end), a limited one is
	 * ended there. */
	double maxd = t->srv->o.max_duration_s;
	int64_t max_end = t->start_ns + (int64_t)(maxd * 1e9) + (t->limited ? 0 : silence);
	for (;;) {
		maybe_tick(t);
		int src = ship_live(t);
		if (src < 0)
			return src;
		if (atomic_load(&t->stop_req) || atomic_load(&t->srv->stop))
			return ql_err_set(&t->err, EINTR, "EINTR", "server stopped");
		if (hard_end && ql_now_ns() > hard_end)
			return ql_err_set(&t->err, ETIMEDOUT, NULL, "client silent after the test time");
		if (ql_now_ns() > max_end)
			return srv_end_test(t, ETIMEDOUT, "the test ran past the server's "
					    "max_duration_s %g s", maxd);
		if (t->limited) {
			pthread_mutex_lock(&t->mu);
			int64_t nrec = t->niv;
			pthread_mutex_unlock(&t->mu);
			if (t->buf_base + (nrec + 1) * t->rec_bytes > t->srv->o.test_buffer_bytes)
				return srv_end_test(t, ENOBUFS, "its %lld interval records of %lld B "
						    "reached the server's test_buffer_bytes %lld "
						    "(with %lld B of buffers)", (long long)nrec,
						    (long long)t->rec_bytes,
						    (long long)t->srv->o.test_buffer_bytes,
						    (long long)t->buf_base);
		}
		/* The data-idle watchdog (while data should flow), and a limited
		 * test, which has no planned end, gives up when no byte moved and
		 * no TEST_END came for the idle time. */
		int64_t now0 = ql_now_ns();
		if (now0 - checked_at >= 100 * MS) {
			checked_at = now0;
			uint64_t m = test_progress(t);
			if (m != moved) {
				moved = m;
				moved_at = now0;
			} else if (!atomic_load(&t->send_stop) && now0 - moved_at > t->idle_ns) {
				return srv_end_test(t, ETIMEDOUT, "no data moved for %.1f s (the "
						    "server's data-idle limit)",
						    (double)(now0 - moved_at) / 1e9);
			} else if (t->limited && now0 - moved_at > silence) {
				return ql_err_set(&t->err, ETIMEDOUT, NULL,
						  "client silent: no data and no TEST_END for %.0f s",
						  (double)silence / 1e9);
			}
		}
		/* Timed test: our senders stop at the planned end by themselves,
		 * so a client whose clock started a little later still receives
		 * everything we count as sent. */
		if (!t->limited && !atomic_load(&t->send_stop) &&
		    ql_now_ns() >= t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9)) {
			t->send_end_ns = ql_now_ns();
			atomic_store(&t->send_stop, 1);
		}
		if (t->limited && !signalled && local_has(t, 1) && all_done(t, 1) &&
		    t->peer == QL_PEER_QOSLAB) {
			ql_io_write_state(t->ctl_fd, QL_ST_QL_SENDER_DONE, ql_now_ns() + CTL_TIMEOUT_NS,
					  NULL);
			signalled = 1;
		}
		int64_t now = ql_now_ns(), w = wake_at(t);
		if (w > now + 20 * MS)
			w = now + 20 * MS;
		int ms = w > now ? (int)((w - now + MS - 1) / MS) : 0;
		if (wait_io(t->ctl_fd, POLLIN, ms) > 0) {
			int st;
			int rc = ql_io_read_state(t->ctl_fd, &st, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
			if (rc < 0)
				return fail_io(t, rc, "the test");
			if (st == QL_ST_TEST_END) {
				if (t->peer != QL_PEER_QOSLAB)
					atomic_store(&t->peer_done, 1);
				break;
			}
			if (st == QL_ST_CLIENT_TERMINATE)
				return ql_err_set(&t->err, ECONNABORTED, NULL, "client terminated the test");
		}
	}
	int64_t send_end = t->send_end_ns ? t->send_end_ns : ql_now_ns();
	atomic_store(&t->send_stop, 1);
	wait_senders(t);
	drain_receivers(t);
	final_snapshot(t, send_end);
	return 0;
}

static void server_publish(ql_test *t)
{
	ql_server *s = t->srv;
	/* Move the result out of the test: the test is freed when its thread
	 * ends, the result lives on in the ring (or not at all: keep = 0). */
	kept_result *k = calloc(1, sizeof *k);
	if (k) {
		k->res = t->res;
		memset(&t->res, 0, sizeof t->res);
		atomic_init(&k->refs, 1);
	}
	kept_result *evicted = NULL;
	pthread_mutex_lock(&s->mu);
	s->nfinished++;
	t->published = 1;
	/* The measurement is over: it no longer counts as running while the
	 * last two state bytes are exchanged. */
	s->running--;
	if (k && s->keep > 0) {
		if (s->nkept == s->keep) {
			evicted = s->kept[s->head];
			s->kept[s->head] = k;
			s->head = (s->head + 1) % s->keep;
		} else {
			s->kept[(s->head + s->nkept++) % s->keep] = k;
		}
	} else {
		evicted = k;
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	kept_unref(evicted);
}

/* A rate in bit/s as "100 Mbit/s", "1.5 Gbit/s", "64 kbit/s". */
static void fmt_rate(char *out, size_t len, double bps)
{
	static const char *const unit[] = { "bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s" };
	int u = 0;
	while (bps >= 1000 && u < 4) {
		bps /= 1000;
		u++;
	}
	snprintf(out, len, "%.4g %s", bps, unit[u]);
}

/* For the server's log: who started what ("test from 10.0.0.2 port 41234:
 * UDP, 4 streams, reverse (server sends), 10 s after a 2 s warm-up,
 * 100 Mbit/s each, 1460-byte datagrams, window 262144 B, qoslab client"). */
static void server_note_start(ql_test *t)
{
	const ql_params *p = &t->prm;
	char what[160], rate[64] = "", win[96] = "", r[32];
	int n = 0;
	if (t->limited)
		n = snprintf(what, sizeof what, "%llu %s",
			     (unsigned long long)(t->limit_bytes ? t->limit_bytes : t->limit_packets),
			     t->limit_bytes ? "bytes"
			     : t->limit_packets == 1 ? "block" : "blocks");
	else
		n = snprintf(what, sizeof what, "%g s", p->time_s);
	if (p->omit_s > 0 && n > 0 && (size_t)n < sizeof what)
		snprintf(what + n, sizeof what - (size_t)n, " after a %g s warm-up", p->omit_s);
	if (p->bandwidth_bps) {
		fmt_rate(r, sizeof r, (double)p->bandwidth_bps);
		snprintf(rate, sizeof rate, ", %s each", r);
	} else if (t->proto == QL_PROTO_UDP) {
		snprintf(rate, sizeof rate, ", unpaced");
	}
	if (p->window_bytes)
		snprintf(win, sizeof win, ", window %llu B", (unsigned long long)p->window_bytes);
	else if (p->sndbuf_bytes && p->rcvbuf_bytes)
		snprintf(win, sizeof win, ", SO_SNDBUF %llu B, SO_RCVBUF %llu B",
			 (unsigned long long)p->sndbuf_bytes, (unsigned long long)p->rcvbuf_bytes);
	else if (p->sndbuf_bytes || p->rcvbuf_bytes)
		snprintf(win, sizeof win, ", %s %llu B", p->sndbuf_bytes ? "SO_SNDBUF" : "SO_RCVBUF",
			 (unsigned long long)(p->sndbuf_bytes ? p->sndbuf_bytes : p->rcvbuf_bytes));
	int port = peer_port(&t->peer_addr);
	ql_server *s = t->srv;
	pthread_mutex_lock(&s->mu);
	t->srv_no = ++s->nstarted;
	snprintf(s->started, sizeof s->started,
		 "test %llu from %.100s port %d: %s, %d stream%s, %s, %s%s, %d-byte %s%s, %s client",
		 (unsigned long long)t->srv_no, t->host[0] ? t->host : "?", port, t->proto == QL_PROTO_UDP ? "UDP" : "TCP",
		 p->parallel, p->parallel == 1 ? "" : "s",
		 p->bidir ? "bidirectional (each way)" : p->reverse ? "reverse (server sends)" : "forward",
		 what, rate, p->len_bytes, t->proto == QL_PROTO_UDP ? "datagrams" : "writes", win,
		 t->peer == QL_PEER_QOSLAB ? "qoslab" : "iperf3");
	pthread_mutex_unlock(&s->mu);
}

static int server_protocol(ql_test *t)
{
	int rc;
	int64_t idle = (int64_t)(t->srv->o.idle_timeout_s * 1e9);
	const volatile int *stop = (const volatile int *)&t->srv->stop;
	rc = ql_io_write_state(t->ctl_fd, QL_ST_PARAM_EXCHANGE, ql_now_ns() + idle, stop);
	if (rc < 0)
		return fail_io(t, rc, "PARAM_EXCHANGE");
	char *js = NULL;
	size_t jl = 0;
	rc = ql_io_read_json(t->ctl_fd, QL_PARAMS_MAX_BYTES, &js, &jl, ql_now_ns() + idle, stop);
	if (rc == -EMSGSIZE || rc == -ENODATA)
		server_error(t, 8, EMSGSIZE);
	if (rc < 0)
		return fail_io(t, rc, "reading parameters");
	rc = ql_params_from_json(js, jl, &t->prm, &t->err);
	free(js);
	if (rc < 0) {
		server_error(t, 8, EPROTO);
		return rc;
	}
	ql_params *p = &t->prm;
	t->proto = p->udp ? QL_PROTO_UDP : QL_PROTO_TCP;
	t->peer = p->qoslab[0] ? QL_PEER_QOSLAB : QL_PEER_IPERF3;
	t->udp_gso = p->udp_gso;
	t->affinity.n = p->nserver_cpu;
	for (int i = 0; i < p->nserver_cpu; i++)
		t->affinity.cpu[i] = p->server_cpu[i];
	ql_err aerr;
	char ignored[QL_ERR_MSG_MAX + 64] = "";
	if (affinity_check(&t->affinity, "server_affinity", &aerr) < 0) {
		add_warning(t, "%s; the server's streams were not pinned", aerr.msg);
		snprintf(ignored, sizeof ignored, "%s; the server's streams were not pinned",
			 aerr.msg);
		t->affinity.n = 0;
	}
	/* zerocopy and skip_rx_copy are TCP's: a UDP test runs without them */
	if (p->udp && (p->zerocopy || p->skip_rx_copy) && !ignored[0])
		snprintf(ignored, sizeof ignored, "%s on a UDP test (TCP only); the test runs "
			 "without it", p->zerocopy ? "qoslab_zerocopy" : "qoslab_skip_rx_copy");
	if (!p->len_bytes)
		p->len_bytes = p->udp ? QL_UDP_DEFAULT_LEN : QL_TCP_DEFAULT_LEN;
	if (p->reverse && p->bidir)
		p->reverse = 0;
	/* Server-wide defaults apply when the client asked for nothing. */
	if (!p->window_bytes && !p->sndbuf_bytes && !p->rcvbuf_bytes) {
		p->window_bytes = t->srv->o.window_bytes;
		p->sndbuf_bytes = t->srv->o.sndbuf_bytes;
		p->rcvbuf_bytes = t->srv->o.rcvbuf_bytes;
	}
	t->limit_bytes = p->num_bytes;
	t->limit_packets = p->blockcount;
	if (t->proto == QL_PROTO_TCP && !t->limit_bytes && t->limit_packets)
		t->limit_bytes = t->limit_packets * (uint64_t)p->len_bytes;
	if (t->proto == QL_PROTO_UDP && !t->limit_packets && t->limit_bytes)
		t->limit_packets = (t->limit_bytes + (uint64_t)p->len_bytes - 1) / (uint64_t)p->len_bytes;
	if (t->proto == QL_PROTO_UDP && t->peer == QL_PEER_QOSLAB && p->udp_limit_bytes &&
	    t->limit_packets && !p->num_bytes)
		t->limit_bytes = p->udp_limit_bytes;
	/* A stock iperf3 client counts whole datagrams only (a shorter last
	 * one is never counted, and it waits for it): its limit is rounded
	 * up to whole datagrams, as iperf3 itself sends. */
	if (t->proto == QL_PROTO_UDP && t->peer != QL_PEER_QOSLAB)
		t->limit_bytes = 0;
	t->limited = t->limit_bytes || t->limit_packets;
	udp_setup(t);
	if (!t->limited && !(p->time_s > 0)) {
		server_error(t, 8, EINVAL);
		return ql_err_set(&t->err, EPROTO, "EPROTO", "client sent neither a time nor a limit");
	}
	for (int d = 0; d < 2; d++)
		atomic_store(&t->budget[d], (int64_t)(t->proto == QL_PROTO_UDP ? t->limit_packets
								      : t->limit_bytes));
	t->period_ns = (int64_t)(p->interval_s * 1e9);
	t->omit_ns = (int64_t)(p->omit_s * 1e9);
	if ((rc = srv_admit(t)) < 0)
		return rc;
	t->idle_ns = srv_idle_ns(t);
	server_note_start(t);
	if (ignored[0])
		srv_ignored(t, ignored);
	if ((rc = streams_alloc(t, &t->err)) < 0)
		return rc;
	t->pending_fds = calloc((size_t)t->nstreams, sizeof(int));
	t->pending_seq = calloc((size_t)t->nstreams, sizeof(uint64_t));
	if (!t->pending_fds || !t->pending_seq)
		return ql_err_set(&t->err, ENOMEM, NULL, "out of memory");
	/* Accept data connections before the client can know it may open
	 * them: a stock client does not retry its UDP connect message. */
	pthread_mutex_lock(&t->srv->mu);
	t->state = T_ACCEPTING;
	pthread_mutex_unlock(&t->srv->mu);
	/* A qoslab client learns before it opens its streams that this
	 * server is qoslab too (it sends live records and takes an exact UDP
	 * byte limit); a stock iperf3 server never says so. */
	rc = 0;
	if (t->peer == QL_PEER_QOSLAB)
		rc = ql_io_write_state(t->ctl_fd, QL_ST_QL_LIVE, ql_now_ns() + idle, stop);
	if (rc == 0)
		rc = ql_io_write_state(t->ctl_fd, QL_ST_CREATE_STREAMS, ql_now_ns() + idle, stop);
	if (rc < 0)
		return fail_io(t, rc, "CREATE_STREAMS");
	if ((rc = server_collect_streams(t)) < 0)
		return rc;
	sockets_read(t);
	rc = ql_io_write_state(t->ctl_fd, QL_ST_TEST_START, ql_now_ns() + idle, stop);
	if (rc == 0)
		rc = ql_io_write_state(t->ctl_fd, QL_ST_TEST_RUNNING, ql_now_ns() + idle, stop);
	if (rc < 0)
		return fail_io(t, rc, "TEST_START");
	default_drain(t);
	thread_cpu(&t->ctl_cpu_user0, &t->ctl_cpu_sys0);
	t->start_ns = t->last_snap_ns = ql_now_ns();
	t->start_unix = (double)realtime_ns() / 1e9;
	if ((rc = start_workers(t, 0, &t->err)) < 0)
		return rc;
	rc = server_run(t);
	atomic_store(&t->send_stop, 1);
	atomic_store(&t->recv_stop, 1);
	streams_join(t, 1, 1);
	if (rc < 0)
		return rc;
	ql_cpu_result cpu;
	memset(&cpu, 0, sizeof cpu);
	cpu_local(t, &cpu);
	warn_skipped_slots(t);
	rc = ql_io_write_state(t->ctl_fd, QL_ST_EXCHANGE_RESULTS, ql_now_ns() + idle, stop);
	if (rc < 0)
		return fail_io(t, rc, "EXCHANGE_RESULTS");
	if ((rc = exchange_results(t, 0, &cpu)) < 0)
		return rc;
	/* Publish before DISPLAY_RESULTS: when the client's wait returns,
	 * the server's results() already lists this test. */
	build_result(t, &cpu);
	server_publish(t);
	rc = ql_io_write_state(t->ctl_fd, QL_ST_DISPLAY_RESULTS, ql_now_ns() + idle, stop);
	if (rc < 0)
		return fail_io(t, rc, "DISPLAY_RESULTS");
	int st = 0;
	ql_io_read_state(t->ctl_fd, &st, ql_now_ns() + 2 * QL_NS_PER_S, stop);
	return 0;
}

void *server_test_main(ql_test *t)
{
	ql_server *s = t->srv;
	int restore = -1;
	ql_err e2;
	ql_netns_enter(s->netns, &restore, &e2);
	int rc = server_protocol(t);
	ql_netns_restore(restore, &e2);
	int evicted = unid_leave(s, t->unid);
	t->unid = NULL;
	atomic_store(&t->send_stop, 1);
	atomic_store(&t->recv_stop, 1);
	streams_join(t, 1, 1);
	/* A control connection that failed before its test ran (bad JSON,
	 * oversized or missing parameters, silence, a limit) counts as
	 * rejected; an evicted one was counted and logged when evicted. */
	if (rc < 0 && !evicted) {
		pthread_mutex_lock(&s->mu);
		if (t->start_ns == 0)
			s->rejected++;
		else
			s->failed++;
		snprintf(s->problem, sizeof s->problem, "%s from %s port %d: %s",
			 t->start_ns ? "test failed" : "control connection rejected",
			 t->host[0] ? t->host : "?", peer_port(&t->peer_addr),
			 t->err.msg[0] ? t->err.msg : strerror(-rc));
		srv_problem_logged(s, &t->peer_addr, t->srv_no);
		pthread_mutex_unlock(&s->mu);
	}
	/* A test that failed after it started ends with the reason sent to
	 * the client (unless a limit already told it), and the connection
	 * closes after that message (below, once the test is gone from the
	 * server's lists), not with a reset that can destroy it: the client
	 * says why its test ended instead of "peer closed". */
	int told_fd = -1;
	if (rc < 0 && t->ctl_fd >= 0) {
		if (t->start_ns != 0 && !t->srv_told)
			srv_tell(t->ctl_fd, QL_ST_SERVER_TERMINATE, 0,
				 t->err.msg[0] ? t->err.msg : strerror(-rc));
		told_fd = t->ctl_fd;
		t->ctl_fd = -1;
	}
	test_finish(t, rc);
	/* Unlink; the result (if any) was moved to the ring by server_publish,
	 * so the test itself goes now: a server running for days holds only
	 * its last keep_results results. */
	pthread_mutex_lock(&s->mu);
	for (ql_test **pp = &s->tests; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	if (t->admitted && !t->published)
		s->running--;
	/* A one-off server ends after the test it served: one whose
	 * parameters were accepted and that got to TEST_START (start_ns is
	 * set there), whatever its end. A connection refused before that (bad
	 * cookie, bad parameters, silence, a limit) leaves it serving, so a
	 * stray peer cannot end a server shared with a real client. */
	if (s->o.one_off && t->start_ns != 0)
		atomic_store(&s->stop, 1);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	ql_test_free(t);
	if (told_fd >= 0)
		srv_close_told(told_fd, &s->stop);
	return NULL;
}
