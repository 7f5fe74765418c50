/*
 * test.c - one test's lifetime: allocation, streams, budgets, planned end,
 * warnings, payload, release. Stands on test.h (ql_test, ql_stream).
 */
#include "test.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../timer.h"

int64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
}

void thread_cpu(int64_t *user_ns, int64_t *sys_ns)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) == 0) {
		*user_ns = (int64_t)ru.ru_utime.tv_sec * QL_NS_PER_S + ru.ru_utime.tv_usec * 1000;
		*sys_ns = (int64_t)ru.ru_stime.tv_sec * QL_NS_PER_S + ru.ru_stime.tv_usec * 1000;
	} else {
		*user_ns = *sys_ns = 0;
	}
}

void add_warning(ql_test *t, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	for (int i = 0; i < t->nwarn; i++)
		if (strcmp(t->warn[i], buf) == 0)
			return;
	char **w = realloc(t->warn, (size_t)(t->nwarn + 1) * sizeof *w);
	if (!w)
		return;
	t->warn = w;
	if ((w[t->nwarn] = strdup(buf)))
		t->nwarn++;
}

int64_t read_sysctl(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long long v = -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

void copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/* Take up to `want` from the budget; *after (may be NULL) receives what
 * the budget holds after this reservation. */
uint64_t reserve(_Atomic int64_t *budget, uint64_t want, int64_t *after)
{
	int64_t cur = atomic_load(budget);
	while (cur > 0) {
		int64_t take = cur < (int64_t)want ? cur : (int64_t)want;
		if (atomic_compare_exchange_weak(budget, &cur, cur - take)) {
			if (after)
				*after = cur - take;
			return (uint64_t)take;
		}
	}
	return 0;
}

/*
 * UDP facts both ends derive from the parameters, once they are final
 * (the client after choosing the length, the server after reading them):
 * whether datagrams carry the test tag, and the lengths of a byte-limited
 * test's last datagrams. Policy of a byte limit: the sender emits exactly
 * `bytes` in ceil(bytes / length) datagrams, the last one shortened to
 * what is left. A datagram is never shorter than its header: a remainder
 * below it is made up from the one before (last two: length + remainder -
 * header, and header). Only a limit below one header (or below two with
 * datagrams that short) is rounded up, to one header-long datagram.
 */
void udp_setup(ql_test *t)
{
	ql_params *p = &t->prm;
	int seq64 = p->udp_counters_64bit;
	t->udp_tag = p->udp && p->udp_tag && t->peer == QL_PEER_QOSLAB &&
		     (size_t)p->len_bytes >= ql_udp_hdr_bytes(seq64, 1);
	t->udp_tag_val = ql_udp_test_tag(t->cookie);
	memset(t->udp_unit_bytes, 0, sizeof t->udp_unit_bytes);
	uint64_t len = (uint64_t)p->len_bytes;
	if (p->udp && t->limit_bytes && t->limit_packets && len &&
	    t->limit_packets == (t->limit_bytes + len - 1) / len) {
		uint64_t rem = t->limit_bytes - (t->limit_packets - 1) * len;
		uint64_t hdr = ql_udp_hdr_bytes(seq64, t->udp_tag);
		if (hdr > len)
			hdr = len;
		if (rem >= hdr) {
			if (rem < len)
				t->udp_unit_bytes[1] = (uint32_t)rem;
		} else if (t->limit_packets >= 2 && len + rem >= 2 * hdr) {
			t->udp_unit_bytes[1] = (uint32_t)hdr;
			t->udp_unit_bytes[2] = (uint32_t)(len + rem - hdr);
		} else {
			t->udp_unit_bytes[1] = (uint32_t)hdr;
		}
	}
}

void fill_payload(char *buf, size_t n)
{
	/* Pseudo-random payload so compressing links do not flatter us. */
	uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)ql_now_ns();
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (char)x;
	}
}

int wait_io(int fd, short ev, int ms)
{
	struct pollfd pf = { .fd = fd, .events = ev };
	return poll(&pf, 1, ms);
}

/* The planned end of a timed test on this end's clock (INT64_MAX for a
 * limited one), and the slack the grid's tick there waits. */
int64_t planned_end_ns(const ql_test *t)
{
	if (t->limited)
		return INT64_MAX;
	return t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
}

int64_t end_slack_ns(const ql_test *t)
{
	return t->period_ns / 20 > 20 * MS ? t->period_ns / 20 : 20 * MS;
}

/* A timed TCP test's tail after the planned end (the senders' wait for
 * their acknowledgements, the receivers' drain) ends within the drain time
 * (max(250 ms, 2 x RTT)), at least the end slack and at most one interval:
 * the data a fast path has in its buffers at the end arrives (also on a
 * slow host), a slow path's queue does not stretch the test, and the last
 * record comes within one interval of its slot. */
int64_t tcp_tail_ns(const ql_test *t)
{
	int64_t d = t->drain_ns, lo = end_slack_ns(t);
	if (d < lo)
		d = lo;
	if (t->period_ns > lo && d > t->period_ns)
		d = t->period_ns;
	return d;
}

ql_test *test_new(int side)
{
	ql_test *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->side = side;
	t->ctl_fd = -1;
	ql_ctl_reader_init(&t->ctl_rd, QL_INTERVAL_MAX_BYTES);
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	ql_params_init(&t->prm);
	t->udp_batch = QL_UDP_BATCH_DEFAULT;
	t->connect_timeout_ns = CTL_TIMEOUT_NS;
	return t;
}

int streams_alloc(ql_test *t, ql_err *e)
{
	int p = t->prm.parallel;
	int n = t->prm.bidir ? 2 * p : p;
	t->st = calloc((size_t)n, sizeof *t->st);
	if (!t->st)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	t->nstreams = n;
	for (int i = 0; i < n; i++) {
		ql_stream *s = &t->st[i];
		s->t = t;
		s->idx = i;
		s->id = i == 0 ? 1 : i + 2;
		s->fd = -1;
		pthread_mutex_init(&s->mu, NULL);
		/* Client order: with bidir its sending streams come first. */
		int client_sends = t->prm.bidir ? i < p : !t->prm.reverse;
		s->dir = client_sends ? QL_DIR_FORWARD : QL_DIR_REVERSE;
		s->sender = t->side == QL_SIDE_CLIENT ? client_sends : !client_sends;
		if (t->proto == QL_PROTO_UDP && !s->sender) {
			ql_udp_rx_opts ro = { 0 };
			int rc = ql_udp_rx_init(&s->rx, &ro, e);
			if (rc < 0)
				return rc;
			s->rx_init = 1;
		}
	}
	return 0;
}

void streams_join(ql_test *t, int senders, int receivers)
{
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (!s->th_started || (s->sender ? !senders : !receivers))
			continue;
		pthread_join(s->th, NULL);
		s->th_started = 0;
	}
}

/* A failed test: senders give up what is left, and shutdown() wakes any
 * thread blocked on a data socket (the descriptors stay open until the
 * threads are joined). */
void streams_abort(ql_test *t)
{
	atomic_store(&t->abort_io, 1);
	for (int i = 0; t->st && i < t->nstreams; i++)
		if (t->st[i].fd >= 0)
			shutdown(t->st[i].fd, SHUT_RDWR);
}

/* Close a finished test's control and data sockets. The result outlives
 * them (Test:wait(), Server:results()); the sockets must not, or a
 * long-running server or a sweep of many tests piles up CLOSE-WAIT
 * connections. Only called once every thread of the test has been joined. */
void test_close_sockets(ql_test *t)
{
	if (t->ctl_fd >= 0)
		close(t->ctl_fd);
	t->ctl_fd = -1;
	for (int i = 0; i < t->nstreams; i++)
		if (t->st[i].fd >= 0) {
			close(t->st[i].fd);
			t->st[i].fd = -1;
		}
}

void test_release(ql_test *t)
{
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (s->fd >= 0)
			close(s->fd);
		if (s->rx_init)
			ql_udp_rx_free(&s->rx);
		pthread_mutex_destroy(&s->mu);
	}
	free(t->st);
	t->st = NULL;
	t->nstreams = 0;
	if (t->ctl_fd >= 0)
		close(t->ctl_fd);
	t->ctl_fd = -1;
	ql_ctl_reader_free(&t->ctl_rd);
	for (int i = 0; i < t->niv; i++)
		ql_interval_clear(&t->iv[i]);
	free(t->iv);
	t->iv = NULL;
	t->niv = 0;
	for (int i = 0; i < t->nlive; i++)
		ql_interval_clear(&t->live[i]);
	free(t->live);
	t->live = NULL;
	t->nlive = 0;
	for (int i = 0; i < t->nrlive; i++)
		ql_interval_clear(&t->rlive[i]);
	free(t->rlive);
	t->rlive = NULL;
	t->nrlive = 0;
	for (int i = 0; i < t->nwarn; i++)
		free(t->warn[i]);
	free(t->warn);
	t->warn = NULL;
	t->nwarn = 0;
	for (int i = 0; i < t->npending; i++)
		close(t->pending_fds[i]);
	free(t->pending_fds);
	free(t->pending_seq);
	t->pending_fds = NULL;
	t->pending_seq = NULL;
	ql_peer_results_free(&t->peer_res);
}

int local_has(ql_test *t, int sender)
{
	for (int i = 0; i < t->nstreams; i++)
		if (t->st[i].sender == sender)
			return 1;
	return 0;
}

int all_done(ql_test *t, int sender)
{
	for (int i = 0; i < t->nstreams; i++)
		if (t->st[i].sender == sender && !atomic_load(&t->st[i].done))
			return 0;
	return 1;
}

uint64_t received_bytes(ql_test *t, int dir)
{
	uint64_t b = 0;
	for (int i = 0; i < t->nstreams; i++)
		if (!t->st[i].sender && t->st[i].dir == dir)
			b += atomic_load(&t->st[i].bytes);
	return b;
}

uint64_t received_packets(ql_test *t, int dir)
{
	uint64_t n = 0;
	for (int i = 0; i < t->nstreams; i++)
		if (!t->st[i].sender && t->st[i].dir == dir)
			n += atomic_load(&t->st[i].packets);
	return n;
}

void default_drain(ql_test *t)
{
	if (t->prm.udp_drain_s >= 0) {
		t->drain_ns = (int64_t)(t->prm.udp_drain_s * 1e9);
		return;
	}
	int64_t d = 250 * MS;
	ql_tcp_sample ts;
	if (t->ctl_fd >= 0 && ql_tcp_sample_read(t->ctl_fd, &ts, 0, NULL) == 0 &&
	    (ts.valid & QL_TCPS_RTT) && 2LL * ts.rtt_us * 1000 > d)
		d = 2LL * ts.rtt_us * 1000;
	t->drain_ns = d;
}

/* How long a live record waits for the peer's entries of its slots. The
 * server's record for slot k leaves at its tick k, which falls one control
 * message's trip before ours, and travels the same way as that message:
 * it arrives about when we tick. The wait covers scheduling delays and one
 * retransmission of the control segment (RTO >= 200 ms, or 2 x srtt on a
 * long path); a record released without them shows them as missing. */
void live_hold(ql_test *t)
{
	int64_t h = 300 * MS;
	ql_tcp_sample ts;
	if (t->ctl_fd >= 0 && ql_tcp_sample_read(t->ctl_fd, &ts, 0, NULL) == 0 &&
	    (ts.valid & QL_TCPS_RTT))
		h += 2LL * ts.rtt_us * 1000;
	t->hold_ns = h < 3 * QL_NS_PER_S ? h : 3 * QL_NS_PER_S;
}

int fail_io(ql_test *t, int rc, const char *what)
{
	if (rc == -EINTR)
		return ql_err_set(&t->err, EINTR, "EINTR", "test stopped during %s", what);
	if (rc == -ETIMEDOUT)
		return ql_err_set(&t->err, ETIMEDOUT, NULL, "peer silent during %s: timed out", what);
	if (rc == -ECONNRESET)
		return ql_err_set(&t->err, ECONNRESET, NULL, "peer closed the control connection during %s",
				  what);
	if (rc == -EMSGSIZE)
		return ql_err_set(&t->err, EMSGSIZE, NULL, "oversized message during %s", what);
	if (rc == -ENODATA)  /* refused as an oversized one is, under the same code */
		return ql_err_set(&t->err, EMSGSIZE, NULL, "empty message (length 0) during %s", what);
	return ql_err_set(&t->err, -rc, NULL, "%s: %s", what, strerror(-rc));
}

int ql_test_wait(ql_test *t, const ql_result **res, ql_err *e)
{
	if (t->ctl_started) {
		pthread_join(t->ctl_th, NULL);
		t->ctl_started = 0;
	}
	if (t->rc < 0) {
		if (e)
			*e = t->err;
		return t->rc;
	}
	*res = &t->res;
	return 0;
}

double ql_test_start_unix(const ql_test *t)
{
	return t->start_unix;
}

int ql_test_setup_get(ql_test *t, ql_test_setup *out)
{
	memset(out, 0, sizeof *out);
	if (!atomic_load(&t->sockets_known))
		return -EAGAIN;
	memcpy(out->cookie, t->cookie, QL_COOKIE_SIZE);
	out->cookie[QL_COOKIE_SIZE - 1] = 0;
	out->ctrl_mss_bytes = t->ctrl_mss_bytes;
	copy_str(out->tcp_ca, sizeof out->tcp_ca, t->tcp_ca);
	out->streams = calloc((size_t)t->nstreams + 1, sizeof *out->streams);
	if (!out->streams)
		return -ENOMEM;
	for (int i = 0; i < t->nstreams; i++) {
		out->streams[i].id = t->st[i].id;
		out->streams[i].dir = t->st[i].dir;
		out->streams[i].sock = t->st[i].sock;
		out->streams[i].tos = -1;
	}
	out->nstreams = t->nstreams;
	return 0;
}

void ql_test_stop(ql_test *t)
{
	if (t)
		atomic_store(&t->stop_req, 1);
}

void ql_test_abort(ql_test *t)
{
	if (t) {
		atomic_store(&t->abort_req, 1);
		atomic_store(&t->stop_req, 1);
	}
}

void ql_test_free(ql_test *t)
{
	if (!t)
		return;
	ql_test_stop(t);
	if (t->ctl_started)
		pthread_join(t->ctl_th, NULL);
	test_release(t);
	ql_result_free(&t->res);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}
