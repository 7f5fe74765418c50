/*
 * server_admit.c - whom a server lets in: unidentified connections and their
 * eviction, address and global limits, buffer budgets, refusals, the problem
 * log. Stands on server_int.h, sockopt.h and test.h.
 */
#include "server_admit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server_int.h"
#include "sockopt.h"
#include "test.h"
#include "../timer.h"

/* Caller holds s->mu: s->problem holds the new problem's line; it goes to
 * the ring too, with its peer and test number (0 = none). */
void srv_problem_logged(ql_server *s, const struct sockaddr_storage *peer, uint64_t test)
{
	s->nproblems++;
	if (!s->plog)
		return;
	ql_srv_problem *p = &s->plog[(s->nproblems - 1) % QL_SRV_PROBLEMS_KEPT];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	p->seq = s->nproblems;
	p->test = test;
	p->time_unix_s = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	p->host[0] = 0;
	p->port = 0;
	if (peer) {
		peer_host(peer, p->host, sizeof p->host);
		p->port = peer_port(peer);
	}
	copy_str(p->text, sizeof p->text, s->problem);
}

/* A request of test t's peer that the server will not honour (the test
 * runs without it): one line in the problem log, with the test's number. */
void srv_ignored(ql_test *t, const char *what)
{
	ql_server *s = t->srv;
	pthread_mutex_lock(&s->mu);
	snprintf(s->problem, sizeof s->problem, "request ignored from %s port %d: %s",
		 t->host[0] ? t->host : "?", peer_port(&t->peer_addr), what);
	srv_problem_logged(s, &t->peer_addr, t->srv_no);
	pthread_mutex_unlock(&s->mu);
}

/* Tell a peer why the server refuses or ends its test: the state byte
 * (SERVER_ERROR with iperf3's error number ierr and errno 0), then a
 * length-prefixed "qoslab-refused: why" that a qoslab client reads and a
 * stock iperf3 client, which stops at the state, never sees. */
void srv_tell(int fd, int state, int ierr, const char *why)
{
	int64_t dl = ql_now_ns() + 200 * MS;
	if (ql_io_write_state(fd, state, dl, NULL) < 0)
		return;
	if (state == QL_ST_SERVER_ERROR) {
		uint32_t v[2] = { htonl((uint32_t)ierr), 0 };
		if (ql_io_write_full(fd, v, sizeof v, dl, NULL) < 0)
			return;
	}
	if (why && why[0]) {
		char msg[QL_REFUSAL_MAX_BYTES];
		snprintf(msg, sizeof msg, "%s%s", QL_REFUSAL_PREFIX, why);
		ql_io_write_json(fd, msg, dl, NULL);
	}
}

void srv_close_told(int fd, _Atomic int *stop)
{
	shutdown(fd, SHUT_WR);
	int64_t dl = ql_now_ns() + 500 * MS;
	char junk[512];
	while (ql_now_ns() < dl && !atomic_load(stop)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) > 0 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) <= 0)
			break;
	}
	close(fd);
}

void srv_reject(ql_server *s, int fd, const struct sockaddr_storage *peer, int state,
		const char *why)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (peer)
		peer_host(peer, host, sizeof host);
	if (state) {
		srv_tell(fd, state, 0, why);
		/* what the peer sent and nobody will read goes first: close()
		 * answers unread bytes with a reset, which can destroy the
		 * reason before the peer read it (no waiting here: a flood of
		 * refused connections must not hold threads) */
		char junk[4096];
		for (int i = 0; i < 16 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++)
			;
	}
	close(fd);
	pthread_mutex_lock(&s->mu);
	s->rejected++;
	snprintf(s->problem, sizeof s->problem, "control connection rejected from %s port %d: %s",
		 host[0] ? host : "?", peer ? peer_port(peer) : 0, why);
	srv_problem_logged(s, peer, 0);
	pthread_mutex_unlock(&s->mu);
}

/* Caller holds s->mu. */
void unid_unlink(ql_server *s, conn_arg *c)
{
	if (!c || !c->listed)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->unid_head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->unid_tail = c->prev;
	c->prev = c->next = NULL;
	c->listed = 0;
	s->nunid--;
}

/* The connection is identified or about to close: it leaves the list.
 * Returns 1 when it had been evicted (shut down, and already logged). */
int unid_leave(ql_server *s, conn_arg *c)
{
	if (!c)
		return 0;
	pthread_mutex_lock(&s->mu);
	unid_unlink(s, c);
	int ev = c->evicted;
	pthread_mutex_unlock(&s->mu);
	return ev;
}

/* Its cookie is queued: its thread is about to read it, so a legitimate
 * data connection that waited for a busy thread is not taken for silent. */
static int unid_ready(const conn_arg *c)
{
	int n = 0;
	return !c->past_cookie && ioctl(c->fd, FIONREAD, &n) == 0 && n >= QL_COOKIE_SIZE;
}

/* Caller holds s->mu: the unidentified connection from `peer` (all when
 * NULL) to close first: the oldest that sent nothing, else the oldest
 * that sent a cookie but no parameters yet, else the oldest. A flood of
 * silent connections thus never pushes out a client in the middle of its
 * handshake, however fast the flood comes. */
conn_arg *unid_victim(ql_server *s, const struct sockaddr_storage *peer)
{
	conn_arg *first = NULL, *stalled = NULL;
	for (conn_arg *c = s->unid_head; c; c = c->next) {
		if (peer && !same_group(&c->peer, peer))
			continue;
		if (!first)
			first = c;
		if (c->past_cookie) {
			if (!stalled)
				stalled = c;
		} else if (!unid_ready(c)) {
			return c;
		}
	}
	return stalled ? stalled : first;
}

/* Caller holds s->mu. Its thread wakes on the shutdown and closes it. */
void unid_evict(ql_server *s, conn_arg *c, const char *limit, int value, int64_t now)
{
	char host[INET6_ADDRSTRLEN] = "?";
	peer_host(&c->peer, host, sizeof host);
	int mine = 0;
	for (conn_arg *o = s->unid_head; o; o = o->next)
		mine += same_group(&o->peer, &c->peer);
	int allow = unid_allowance(s, &c->peer);
	c->evicted = 1;
	shutdown(c->fd, SHUT_RDWR);
	unid_unlink(s, c);
	s->rejected++;
	snprintf(s->problem, sizeof s->problem,
		 "closed an unidentified connection, from %s port %d (%s for %.1f s; its address "
		 "held %d unidentified, %d of them data connections its tests expect): "
		 "%s (%d) reached", host, peer_port(&c->peer),
		 c->past_cookie ? "no parameters" : "no cookie", (double)(now - c->since_ns) / 1e9,
		 mine, allow, limit, value);
	srv_problem_logged(s, &c->peer, 0);
}

/* Caller holds s->mu: admitted tests and their streams from `peer`. */
static int srv_tests_from(ql_server *s, const struct sockaddr_storage *peer, int *streams)
{
	int n = 0, st = 0;
	for (ql_test *t = s->tests; t; t = t->next)
		if (t->admitted && !t->published && same_group(&t->peer_addr, peer)) {
			n++;
			st += t->admitted_streams;
		}
	if (streams)
		*streams = st;
	return n;
}

/* Caller holds s->mu: why a new control connection from `peer` cannot
 * get a test now ("" when it may try), in why[len]. */
int srv_full(ql_server *s, const struct sockaddr_storage *peer, char *why, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	peer_host(peer, host, sizeof host);
	int mine = srv_tests_from(s, peer, NULL);
	if (atomic_load(&s->stop))
		snprintf(why, len, "server stopping");
	else if (s->o.one_off && s->nfinished > 0)
		snprintf(why, len, "one-off server already served");
	else if (s->running >= s->o.max_tests)
		snprintf(why, len, "busy: %d tests running, the server's max_tests is %d; retry later",
			 s->running, s->o.max_tests);
	else if (mine >= s->o.max_tests_per_address)
		snprintf(why, len, "busy: %d tests from %s running, the server's "
			 "max_tests_per_address is %d; retry when one ends", mine, host,
			 s->o.max_tests_per_address);
	else
		return 0;
	return 1;
}

/* The user-space buffers a server test allocates (the stream workers'
 * rules) plus the socket buffers it asks the kernel for, as granted:
 * 2 x min(request, sysctl maximum), the send buffer of each sending
 * stream and the receive buffer of each receiving one. In `how` a short
 * account. */
static int64_t test_buffer_need(const ql_test *t, int nstreams, char *how, size_t len)
{
	const ql_params *p = &t->prm;
	int64_t l = p->len_bytes, user = 0, kern = 0;
	int snd = 0, rcv = 0;
	int p_ = p->parallel;
	for (int i = 0; i < nstreams; i++) {
		int client_sends = p->bidir ? i < p_ : !p->reverse;
		if (client_sends)
			rcv++;
		else
			snd++;
	}
	int64_t per_snd, per_rcv;
	if (!p->udp) {
		per_snd = l;
		per_rcv = TCP_RX_BYTES;
	} else {
		int64_t batch = t->udp_batch;
		if (p->udp_gso && batch * l > 65000)
			batch = 65000 / l > 0 ? 65000 / l : 1;
		per_snd = batch * l;
		int64_t cap = p->udp_gso ? 65536 : ((l + 64 + 63) & ~(int64_t)63);
		per_rcv = (int64_t)RX_BATCH * (cap < 2048 ? 2048 : cap) +
			  (int64_t)(QL_UDP_WINDOW_DEFAULT / 8);
	}
	user = snd * per_snd + rcv * per_rcv;
	int64_t sreq = p->window_bytes ? (int64_t)p->window_bytes : (int64_t)p->sndbuf_bytes;
	int64_t rreq = p->window_bytes ? (int64_t)p->window_bytes : (int64_t)p->rcvbuf_bytes;
	int64_t wmax = read_sysctl("/proc/sys/net/core/wmem_max");
	int64_t rmax = read_sysctl("/proc/sys/net/core/rmem_max");
	if (wmax > 0 && sreq > wmax)
		sreq = wmax;
	if (rmax > 0 && rreq > rmax)
		rreq = rmax;
	/* a stream fills the buffer of its own role: the send buffer of a
	 * sender, the receive buffer of a receiver (the other holds ACKs) */
	kern = 2 * (snd * sreq + rcv * rreq);
	/* The interval records it keeps for its result, one per interval
	 * (the streams' entries and the sums): a timed test's all counted
	 * now; a limited one's, whose end is not known, as they come (it is
	 * ended when they reach the budget; see server_collect_streams). */
	int64_t rec = (int64_t)sizeof(ql_interval) + (int64_t)nstreams * (int64_t)sizeof(ql_entry);
	int64_t nrec = 0;
	if (!t->limited && p->interval_s > 0)
		nrec = (int64_t)ceil((p->time_s + p->omit_s) / p->interval_s) + 2;
	snprintf(how, len, "%d stream%s: %lld B of %s buffers + %lld B of socket buffers"
		 " + %lld B of interval records (%lld x %lld B)",
		 nstreams, nstreams == 1 ? "" : "s", (long long)user, p->udp ? "datagram" : "write/read",
		 (long long)kern, (long long)(nrec * rec), (long long)nrec, (long long)rec);
	return user + kern + nrec * rec;
}

/* The parameters are in: refuse the test over a limit (telling the peer
 * which, and logging it), else count it as running from now on. */
int srv_admit(ql_test *t)
{
	ql_server *s = t->srv;
	const ql_params *p = &t->prm;
	char why[448] = "", how[240];
	int state = QL_ST_ACCESS_DENIED, ierr = 0;
	int n = p->bidir ? 2 * p->parallel : p->parallel;
	if (!t->limited && p->time_s + p->omit_s > s->o.max_duration_s) {
		/* iperf3's IEMAXSERVERTESTDURATIONEXCEEDED: its client names
		 * the reason too */
		snprintf(why, sizeof why, "time %g s + omit %g s exceeds the server's "
			 "max_duration_s %g s", p->time_s, p->omit_s, s->o.max_duration_s);
		state = QL_ST_SERVER_ERROR;
		ierr = 37;
	}
	int64_t need = test_buffer_need(t, n, how, sizeof how);
	t->rec_bytes = (int64_t)sizeof(ql_interval) + (int64_t)n * (int64_t)sizeof(ql_entry);
	t->buf_base = t->limited ? need : 0;
	if (!why[0] && need > s->o.test_buffer_bytes)
		snprintf(why, sizeof why, "the test needs %lld bytes of buffers (%s), more than the "
			 "server's test_buffer_bytes %lld", (long long)need, how,
			 (long long)s->o.test_buffer_bytes);
	pthread_mutex_lock(&s->mu);
	if (t->unid && t->unid->evicted) {
		pthread_mutex_unlock(&s->mu);
		return ql_err_set(&t->err, ECONNRESET, NULL, "evicted");
	}
	int streams = 0;
	int mine = srv_tests_from(s, &t->peer_addr, &streams);
	if (why[0])
		;
	else if (srv_full(s, &t->peer_addr, why, sizeof why))
		;
	else if (streams + n > s->o.max_streams_per_address)
		snprintf(why, sizeof why, "busy: %d streams asked, %d running in %d test%s from %.64s, "
			 "the server's max_streams_per_address is %d", n, streams, mine,
			 mine == 1 ? "" : "s", t->host, s->o.max_streams_per_address);
	if (!why[0]) {
		unid_unlink(s, t->unid);
		t->admitted = 1;
		t->admitted_streams = n;
		s->running++;
	}
	pthread_mutex_unlock(&s->mu);
	if (!why[0])
		return 0;
	srv_tell(t->ctl_fd, state, ierr, why);
	t->srv_told = 1;
	return ql_err_set(&t->err, state == QL_ST_SERVER_ERROR ? EINVAL : EBUSY, NULL,
			  "test refused: %s", why);
}

/* Caller holds s->mu: the data connections the tests from `peer`'s group
 * still expect (tests in CREATE_STREAMS); that many unidentified
 * connections of the group are allowed over max_unidentified_per_address. */
int unid_allowance(ql_server *s, const struct sockaddr_storage *peer)
{
	int n = 0;
	for (ql_test *t = s->tests; t; t = t->next)
		if (t->state == T_ACCEPTING && !t->published && t->npending < t->nstreams &&
		    same_group(&t->peer_addr, peer))
			n += t->nstreams - t->npending;
	return n;
}

/* Caller holds s->mu, the global cap is reached: the address group to
 * evict from. The one most over its allowance (unidentified connections
 * minus the data connections its tests expect), ties to the one holding
 * more; a flood from many addresses thus pushes out the largest flooder,
 * not the globally oldest connection (a slow client mid-handshake). */
const struct sockaddr_storage *unid_global_victim_group(ql_server *s)
{
	int n = s->nunid, cap = 1;
	while (cap < 2 * n)
		cap <<= 1;
	struct grp { uint8_t key[9]; int used, count, allow; const struct sockaddr_storage *any; };
	struct grp *g = calloc((size_t)cap, sizeof *g);
	if (!g)
		return NULL;
	for (conn_arg *c = s->unid_head; c; c = c->next) {
		uint8_t k[9];
		group_key(&c->peer, k);
		uint32_t h = 2166136261u;
		for (int i = 0; i < 9; i++)
			h = (h ^ k[i]) * 16777619u;
		size_t i = h & (unsigned)(cap - 1);
		while (g[i].used && memcmp(g[i].key, k, 9) != 0)
			i = (i + 1) & (unsigned)(cap - 1);
		if (!g[i].used) {
			g[i].used = 1;
			memcpy(g[i].key, k, 9);
			g[i].any = &c->peer;
			g[i].allow = unid_allowance(s, &c->peer);
		}
		g[i].count++;
	}
	const struct sockaddr_storage *pick = NULL;
	int best_over = 0, best_count = 0;
	for (int i = 0; i < cap; i++) {
		if (!g[i].used)
			continue;
		int over = g[i].count - g[i].allow;
		if (!pick || over > best_over || (over == best_over && g[i].count > best_count)) {
			pick = g[i].any;
			best_over = over;
			best_count = g[i].count;
		}
	}
	free(g);
	return pick;
}
