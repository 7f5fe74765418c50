/*
 * server.c - the server role (engine.h): listener, cookies of new connections,
 * UDP stream accept, the ql_server calls. Stands on server_session.h,
 * server_admit.h, sockopt.h and test.h.
 */
#include "engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe_server.h"
#include "probe_wire.h"
#include "server_admit.h"
#include "server_int.h"
#include "server_session.h"
#include "options.h"
#include "sockopt.h"
#include "test.h"
#include "../nl.h"
#include "../timer.h"

void ql_server_opts_init(ql_server_opts *o)
{
	memset(o, 0, sizeof *o);
	o->port = QL_DEFAULT_PORT;
	o->keep_results = QL_KEEP_RESULTS_DEFAULT;
}

static void srv_thread_exit(ql_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->threads--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Wait until the whole cookie is queued (SO_RCVLOWAT: poll wakes at
 * QL_COOKIE_SIZE bytes or at the end), then, under the lock, mark the
 * connection as past its cookie before reading it: a connection is never
 * seen as silent by the evicting listener once its cookie has come.
 * Returns 0, -ECANCELED when it was evicted meanwhile, or the wait's
 * error. */
static int read_cookie(conn_arg *ca, char *cookie, int64_t deadline)
{
	ql_server *s = ca->s;
	int lowat = QL_COOKIE_SIZE, one = 1;
	setsockopt(ca->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
	int rc = 0;
	for (;;) {
		if (atomic_load(&s->stop)) {
			rc = -EINTR;
			break;
		}
		int64_t left = deadline - ql_now_ns();
		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		struct pollfd p = { .fd = ca->fd, .events = POLLIN };
		int pr = poll(&p, 1, left > 50 * MS ? 50 : (int)((left + MS - 1) / MS));
		if (pr < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		if (pr <= 0)
			continue;
		int n = 0;
		if (ioctl(ca->fd, FIONREAD, &n) == 0 && n >= QL_COOKIE_SIZE)
			break;
		rc = -ECONNRESET;   /* woken below the mark: the peer closed */
		break;
	}
	setsockopt(ca->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
	if (rc < 0) {
		/* take what came, so that the close is a FIN, not a reset */
		char junk[QL_COOKIE_SIZE];
		while (recv(ca->fd, junk, sizeof junk, MSG_DONTWAIT) > 0)
			;
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	int ev = ca->evicted;
	if (!ev)
		ca->past_cookie = 1;
	pthread_mutex_unlock(&s->mu);
	if (ev)
		return -ECANCELED;
	return ql_io_read_full(ca->fd, cookie, QL_COOKIE_SIZE, ql_now_ns() + 200 * MS, NULL);
}

/* Caller holds s->mu: a line for srv:problems() and the log. */
static void probe_logged(ql_server *s, const struct sockaddr_storage *peer, const char *what,
			 const char *text)
{
	char host[INET6_ADDRSTRLEN] = "?";
	peer_host(peer, host, sizeof host);
	s->rejected++;
	if (what)
		snprintf(s->problem, sizeof s->problem, "%s from %s port %d: %s", what, host,
			 peer_port(peer), text);
	else
		snprintf(s->problem, sizeof s->problem, "%s", text);
	srv_problem_logged(s, peer, 0);
}

/* A TCP probe connection past its greeting: admitted and served, or told
 * why not (as a refused test is: state ACCESS_DENIED and the reason) and
 * logged. Closes fd. */
static void probe_session(ql_server *s, int fd, const struct sockaddr_storage *peer,
			  int64_t idle)
{
	char why[QL_REFUSAL_MAX_BYTES - sizeof QL_REFUSAL_PREFIX], note[320];
	struct sockaddr_storage victim;
	int slot = ql_probe_srv_tcp_admit(s->probe, fd, peer, why, sizeof why, note, sizeof note,
					  &victim);
	if (note[0]) {
		pthread_mutex_lock(&s->mu);
		probe_logged(s, &victim, NULL, note);
		pthread_mutex_unlock(&s->mu);
	}
	if (slot >= 0) {
		ql_probe_srv_tcp(s->probe, slot, fd, idle, &s->stop);
		close(fd);
		return;
	}
	srv_tell(fd, QL_ST_ACCESS_DENIED, 0, why);
	srv_close_told(fd, &s->stop);
	pthread_mutex_lock(&s->mu);
	probe_logged(s, peer, "TCP probe session refused", why);
	pthread_mutex_unlock(&s->mu);
}

static void *conn_main(void *arg)
{
	conn_arg *ca = arg;
	ql_server *s = ca->s;
	int fd = ca->fd;
	char cookie[QL_COOKIE_SIZE];
	char why[320];
	double cookie_s = ql_server_cookie_timeout_s(&s->o);
	int rc = read_cookie(ca, cookie, ca->since_ns + (int64_t)(cookie_s * 1e9));
	if (rc == 0 && ql_probe_greeting_is(cookie)) {
		/* a latency probe's TCP connection (probe_server.h has its limits) */
		pthread_mutex_lock(&s->mu);
		int ev = ca->evicted;
		if (!ev)
			unid_unlink(s, ca);
		pthread_mutex_unlock(&s->mu);
		if (!ev)
			probe_session(s, fd, &ca->peer, (int64_t)(s->o.idle_timeout_s * 1e9));
		else
			close(fd);
		goto out;
	}
	if (rc < 0 || !ql_cookie_valid(cookie)) {
		if (unid_leave(s, ca))
			close(fd);
		else {
			if (rc == -ETIMEDOUT)
				snprintf(why, sizeof why, "no cookie within the cookie timeout "
					 "(%g s)", cookie_s);
			srv_reject(s, fd, &ca->peer, rc < 0 ? 0 : QL_ST_ACCESS_DENIED,
				   rc == -ETIMEDOUT ? why :
				   rc < 0 ? "closed before sending its cookie" : "malformed cookie");
		}
		goto out;
	}
	pthread_mutex_lock(&s->mu);
	if (ca->evicted) {
		pthread_mutex_unlock(&s->mu);
		close(fd);
		goto out;
	}
	ql_test *t;
	for (t = s->tests; t; t = t->next)
		if (memcmp(t->cookie, cookie, QL_COOKIE_SIZE) == 0)
			break;
	if (t) {
		/* A data connection of a running test: identified. */
		unid_unlink(s, ca);
		if (t->state == T_ACCEPTING && t->proto == QL_PROTO_TCP && t->npending < t->nstreams) {
			t->pending_seq[t->npending] = ca->seq;
			t->pending_fds[t->npending++] = fd;
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->mu);
		} else {
			pthread_mutex_unlock(&s->mu);
			srv_reject(s, fd, &ca->peer, QL_ST_ACCESS_DENIED,
				   "data connection for a test not accepting one");
		}
		goto out;
	}
	/* A new control connection: refused at once when the server or this
	 * address is full; otherwise it stays unidentified until its
	 * parameters are admitted (srv_admit). */
	if (srv_full(s, &ca->peer, why, sizeof why)) {
		unid_unlink(s, ca);
		pthread_mutex_unlock(&s->mu);
		srv_reject(s, fd, &ca->peer, QL_ST_ACCESS_DENIED, why);
		goto out;
	}
	t = test_new(QL_SIDE_SERVER);
	if (!t) {
		unid_unlink(s, ca);
		pthread_mutex_unlock(&s->mu);
		srv_reject(s, fd, &ca->peer, QL_ST_ACCESS_DENIED, "out of memory");
		goto out;
	}
	t->srv = s;
	t->ctl_fd = fd;
	t->unid = ca;
	memcpy(t->cookie, cookie, QL_COOKIE_SIZE);
	t->peer_addr = ca->peer;
	t->peer_len = ca->plen;
	t->port = s->port;
	peer_host(&ca->peer, t->host, sizeof t->host);
	t->next = s->tests;
	s->tests = t;
	pthread_mutex_unlock(&s->mu);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	server_test_main(t);
out:
	free(ca);
	srv_thread_exit(s);
	return NULL;
}

static void udp_connect_reply(int fd)
{
	uint32_t reply = QL_UDP_CONNECT_REPLY;
	send(fd, &reply, 4, MSG_DONTWAIT);
}

/* The stream of an accepting UDP test already connected to `peer`, or -1.
 * Caller holds s->mu. */
static int udp_stream_of(ql_server *s, const struct sockaddr_storage *peer)
{
	for (ql_test *t = s->tests; t; t = t->next) {
		if (t->state != T_ACCEPTING || t->proto != QL_PROTO_UDP)
			continue;
		for (int i = 0; i < t->npending; i++) {
			struct sockaddr_storage pa;
			socklen_t l = sizeof pa;
			if (getpeername(t->pending_fds[i], (struct sockaddr *)&pa, &l) == 0 &&
			    same_endpoint(&pa, peer))
				return t->pending_fds[i];
		}
	}
	return -1;
}

/* Repeated connect messages (the client lost our reply) arrive on the
 * stream's connected socket, which nobody reads until the test runs:
 * answer each again. Idempotent: the stream stays the one it is. */
static void server_udp_repeats(ql_server *s)
{
	pthread_mutex_lock(&s->mu);
	for (ql_test *t = s->tests; t; t = t->next) {
		if (t->state != T_ACCEPTING || t->proto != QL_PROTO_UDP)
			continue;
		for (int i = 0; i < t->npending; i++) {
			char buf[64];
			ssize_t r;
			while ((r = recv(t->pending_fds[i], buf, sizeof buf, MSG_DONTWAIT)) >= 0)
				if ((r == 4 || r == 4 + QL_COOKIE_SIZE) &&
				    ql_udp_connect_msg_ok(buf, 4))
					udp_connect_reply(t->pending_fds[i]);
		}
	}
	pthread_mutex_unlock(&s->mu);
}

/* A 4-byte UDP connect message arrived on the shared UDP socket: give the
 * stream its own socket connected to the client (it wins the kernel's
 * lookup over the unconnected one) and reply from it. A copy queued on the
 * shared socket before that (a repeat racing the first) is answered from
 * the existing stream instead of opening a second one. */
static void server_udp_accept(ql_server *s, const char *buf, size_t r,
			      const struct sockaddr_storage *pp, socklen_t pl)
{
	struct sockaddr_storage peer = *pp;
	if ((r != 4 && r != 4 + QL_COOKIE_SIZE) || !ql_udp_connect_msg_ok(buf, 4))
		return;
	int by_cookie = r == 4 + QL_COOKIE_SIZE;
	pthread_mutex_lock(&s->mu);
	int known = udp_stream_of(s, &peer);
	if (known >= 0) {
		udp_connect_reply(known);
		pthread_mutex_unlock(&s->mu);
		return;
	}
	/* A qoslab client (it asked for tagged datagrams) names its test with
	 * the cookie after the magic: its streams come only from a message
	 * carrying that cookie. A bare 4-byte message is a stock iperf3
	 * client's and goes only to a test whose parameters came from an
	 * iperf3 client on that address, never to a qoslab client's test
	 * (a junk sender sharing the address would take its stream). */
	ql_test *t, *pick = NULL;
	for (t = s->tests; t; t = t->next)
		if (t->state == T_ACCEPTING && t->proto == QL_PROTO_UDP &&
		    t->npending < t->nstreams && same_ip(&t->peer_addr, &peer) &&
		    (by_cookie ? memcmp(buf + 4, t->cookie, QL_COOKIE_SIZE) == 0
			       : !t->prm.udp_tag))
			pick = t;   /* a stock client: the oldest such test */
	if (!pick) {
		pthread_mutex_unlock(&s->mu);
		return;
	}
	int fd = socket(s->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage me;
	socklen_t ml = sizeof me;
	int one = 1;
	ql_err e;
	ql_stream *st = &pick->st[pick->npending];
	if (fd < 0 || getsockname(s->ufd, (struct sockaddr *)&me, &ml) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    apply_opts(pick, fd, s->family, st, &e) < 0 ||
	    (s->family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int){ 0 }, sizeof(int)) < 0) ||
	    bind(fd, (struct sockaddr *)&me, ml) < 0 ||
	    connect(fd, (struct sockaddr *)&peer, pl) < 0) {
		if (fd >= 0)
			close(fd);
		pthread_mutex_unlock(&s->mu);
		return;
	}
	uint32_t reply = QL_UDP_CONNECT_REPLY;
	if (send(fd, &reply, 4, 0) != 4) {
		close(fd);
		pthread_mutex_unlock(&s->mu);
		return;
	}
	struct timeval tv = { 0, 100000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	pick->pending_seq[pick->npending] = ++s->accept_seq;
	pick->pending_fds[pick->npending++] = fd;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void *listener_main(void *arg)
{
	ql_server *s = arg;
	int restore = -1;
	ql_err e;
	ql_netns_enter(s->netns, &restore, &e);
	while (!atomic_load(&s->stop)) {
		struct pollfd pf[2] = { { .fd = s->lfd, .events = POLLIN },
					{ .fd = s->ufd, .events = POLLIN } };
		int n = poll(pf, 2, 50);
		server_udp_repeats(s);
		if (n <= 0)
			continue;
		/* Latency probe requests are answered first, in the order they
		 * came; a connect message goes on to its stream (at most 64 a
		 * wake, so the TCP listener is never starved). */
		for (int i = 0; i < 64 && (pf[1].revents & POLLIN); i++) {
			char buf[64];
			size_t len;
			struct sockaddr_storage peer;
			socklen_t pl = sizeof peer;
			int u = ql_probe_srv_udp(s->probe, s->ufd, buf, sizeof buf, &len, &peer, &pl);
			if (u < 0)
				break;
			if (u == 0)
				server_udp_accept(s, buf, len, &peer, pl);
		}
		if (!(pf[0].revents & POLLIN))
			continue;
		conn_arg *ca = calloc(1, sizeof *ca);
		if (!ca)
			continue;
		ca->plen = sizeof ca->peer;
		int fd = accept4(s->lfd, (struct sockaddr *)&ca->peer, &ca->plen, SOCK_CLOEXEC);
		if (fd < 0) {
			free(ca);
			continue;
		}
		ca->s = s;
		ca->fd = fd;
		ca->since_ns = ql_now_ns();
		/* Over a limit of unidentified connections the newcomer stays
		 * and the oldest goes: a flood pushes out only its own (or
		 * older, equally silent) connections, never the next client. */
		pthread_mutex_lock(&s->mu);
		int same = 0;
		for (conn_arg *c = s->unid_head; c; c = c->next)
			same += same_group(&c->peer, &ca->peer);
		conn_arg *v;
		/* A test of this address waiting for k data connections lets
		 * it hold k more (a -P 128 burst on a loaded host). */
		if (same >= s->o.max_unidentified_per_address + unid_allowance(s, &ca->peer) &&
		    (v = unid_victim(s, &ca->peer)))
			unid_evict(s, v, "max_unidentified_per_address",
				   s->o.max_unidentified_per_address, ca->since_ns);
		const struct sockaddr_storage *grp;
		if (s->nunid >= s->o.max_unidentified &&
		    ((grp = unid_global_victim_group(s)) ? (v = unid_victim(s, grp)) != NULL
							   : (v = unid_victim(s, NULL)) != NULL))
			unid_evict(s, v, "max_unidentified", s->o.max_unidentified, ca->since_ns);
		/* Cookie readers run in parallel; the accept order is what
		 * tells a test's streams apart (client creation order). */
		ca->seq = ++s->accept_seq;
		ca->prev = s->unid_tail;
		if (s->unid_tail)
			s->unid_tail->next = ca;
		else
			s->unid_head = ca;
		s->unid_tail = ca;
		ca->listed = 1;
		s->nunid++;
		s->threads++;
		pthread_mutex_unlock(&s->mu);
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_t th;
		if (pthread_create(&th, &at, conn_main, ca) != 0) {
			unid_leave(s, ca);
			close(fd);
			free(ca);
			srv_thread_exit(s);
		}
		pthread_attr_destroy(&at);
	}
	ql_netns_restore(restore, &e);
	pthread_mutex_lock(&s->mu);
	s->done = 1;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static int server_sockets(ql_server *s, ql_err *e)
{
	int port = s->o.port < 0 ? 0 : s->o.port;
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	if (s->bind_address[0]) {
		int rc = resolve(s->bind_address, port, SOCK_STREAM, &ss, &len, e);
		if (rc < 0)
			return rc;
	} else {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
		a6->sin6_family = AF_INET6;
		a6->sin6_addr = in6addr_any;
		a6->sin6_port = htons((uint16_t)port);
		len = sizeof *a6;
	}
	s->family = ss.ss_family;
	int one = 1, zero = 0;
	s->lfd = socket(s->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		return ql_err_set(e, errno, NULL, "socket: %s", strerror(errno));
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (s->family == AF_INET6)
		setsockopt(s->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	/* No buffer option on the listener, not even the server-wide
	 * defaults: see apply_opts for why and where they go instead. */
	if (bind(s->lfd, (struct sockaddr *)&ss, len) < 0) {
		int err = errno;
		return ql_err_set(e, err, NULL, "bind TCP port %d: %s%s", port, strerror(err),
				  err == EADDRINUSE ? " (another server runs there; pick another port)"
						    : "");
	}
	if (listen(s->lfd, 128) < 0)
		return ql_err_set(e, errno, NULL, "listen: %s", strerror(errno));
	struct sockaddr_storage got;
	socklen_t gl = sizeof got;
	getsockname(s->lfd, (struct sockaddr *)&got, &gl);
	s->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
						  : ((struct sockaddr_in *)&got)->sin_port);
	if (got.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)s->port);
	else
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)s->port);
	s->ufd = socket(s->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s->ufd < 0)
		return ql_err_set(e, errno, NULL, "socket: %s", strerror(errno));
	setsockopt(s->ufd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	ql_probe_srv_stamp_socket(s->ufd);
	if (s->family == AF_INET6)
		setsockopt(s->ufd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	if (bind(s->ufd, (struct sockaddr *)&ss, len) < 0)
		return ql_err_set(e, errno, NULL, "bind UDP port %d: %s", s->port, strerror(errno));
	return 0;
}

int ql_server_start(const ql_server_opts *o, ql_server **out, ql_err *e)
{
	*out = NULL;
	int vrc = ql_server_opts_validate(o, e);
	if (vrc < 0)
		return vrc;
	ql_server *s = calloc(1, sizeof *s);
	if (!s)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	s->keep = o->keep_results;
	s->plog = calloc(QL_SRV_PROBLEMS_KEPT, sizeof *s->plog);
	if (s->keep > 0 && !(s->kept = calloc((size_t)s->keep, sizeof *s->kept))) {
		free(s);
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	}
	s->o = *o;
	copy_str(s->netns, sizeof s->netns, o->netns);
	copy_str(s->bind_address, sizeof s->bind_address, o->bind_address);
	s->o.netns = s->netns;
	s->o.bind_address = s->bind_address;
	if (s->o.port == 0)
		s->o.port = QL_DEFAULT_PORT;
	if (!s->o.max_tests)
		s->o.max_tests = QL_SRV_MAX_TESTS_DEFAULT;
	if (!s->o.max_tests_per_address)
		s->o.max_tests_per_address = QL_SRV_TESTS_PER_ADDR_DEFAULT;
	if (!s->o.max_streams_per_address)
		s->o.max_streams_per_address = QL_SRV_STREAMS_PER_ADDR_DEFAULT;
	if (!s->o.max_unidentified)
		s->o.max_unidentified = QL_SRV_UNIDENTIFIED_DEFAULT;
	if (!s->o.max_unidentified_per_address)
		s->o.max_unidentified_per_address = QL_SRV_UNIDENTIFIED_PER_ADDR_DEFAULT;
	if (!(s->o.max_duration_s > 0))
		s->o.max_duration_s = QL_SRV_MAX_DURATION_DEFAULT_S;
	if (!s->o.test_buffer_bytes)
		s->o.test_buffer_bytes = QL_SRV_TEST_BUFFER_DEFAULT_BYTES;
	if (!(s->o.idle_timeout_s > 0))
		s->o.idle_timeout_s = QL_SRV_IDLE_TIMEOUT_DEFAULT_S;
	s->lfd = s->ufd = -1;
	s->probe = ql_probe_srv_new(s->o.max_tests, s->o.max_tests_per_address);
	if (!s->probe) {
		free(s->kept);
		free(s->plog);
		free(s);
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	int restore = -1;
	int rc = ql_netns_enter(s->netns, &restore, e);
	if (rc == 0) {
		rc = server_sockets(s, e);
		ql_err e2;
		ql_netns_restore(restore, &e2);
	}
	if (rc == 0) {
		int prc = pthread_create(&s->th, NULL, listener_main, s);
		if (prc != 0)
			rc = ql_err_set(e, prc, NULL, "cannot start the listener: %s", strerror(prc));
		else
			s->th_started = 1;
	}
	if (rc < 0) {
		ql_server_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int ql_server_port(const ql_server *s)
{
	return s->port;
}

int ql_server_tests_running(ql_server *s)
{
	pthread_mutex_lock(&s->mu);
	int n = s->running;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int ql_server_done(ql_server *s)
{
	pthread_mutex_lock(&s->mu);
	int d = (atomic_load(&s->stop) && s->threads == 0) || s->done;
	pthread_mutex_unlock(&s->mu);
	return d;
}

int ql_server_results(ql_server *s, const ql_result ***out, int *n, uint64_t *total)
{
	pthread_mutex_lock(&s->mu);
	*n = s->nkept;
	*out = NULL;
	if (total)
		*total = s->nfinished;
	if (s->nkept) {
		*out = malloc((size_t)s->nkept * sizeof **out);
		for (int i = 0; *out && i < s->nkept; i++) {
			kept_result *k = s->kept[(s->head + i) % s->keep];
			atomic_fetch_add(&k->refs, 1);
			(*out)[i] = &k->res;
		}
		if (!*out)
			*n = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return *out || !*n ? 0 : -ENOMEM;
}

void ql_server_results_release(const ql_result **rs, int n)
{
	for (int i = 0; rs && i < n; i++)
		kept_unref((kept_result *)(uintptr_t)rs[i]);
	free(rs);
}

uint64_t ql_server_finished(ql_server *s)
{
	pthread_mutex_lock(&s->mu);
	uint64_t n = s->nfinished;
	pthread_mutex_unlock(&s->mu);
	return n;
}

uint64_t ql_server_rejected(ql_server *s)
{
	pthread_mutex_lock(&s->mu);
	uint64_t r = s->rejected;
	pthread_mutex_unlock(&s->mu);
	return r;
}

uint64_t ql_server_problems(ql_server *s, uint64_t *failed, char *last, size_t len)
{
	pthread_mutex_lock(&s->mu);
	uint64_t r = s->rejected;
	if (failed)
		*failed = s->failed;
	if (last && len)
		snprintf(last, len, "%s", s->problem);
	pthread_mutex_unlock(&s->mu);
	return r;
}

int ql_server_problem_log(ql_server *s, uint64_t since, ql_srv_problem *out, int max,
			  uint64_t *total)
{
	int n = 0;
	pthread_mutex_lock(&s->mu);
	uint64_t first = s->nproblems > QL_SRV_PROBLEMS_KEPT ? s->nproblems - QL_SRV_PROBLEMS_KEPT + 1
							     : 1;
	if (since + 1 > first)
		first = since + 1;
	for (uint64_t q = first; s->plog && q <= s->nproblems && n < max; q++)
		out[n++] = s->plog[(q - 1) % QL_SRV_PROBLEMS_KEPT];
	if (total)
		*total = s->nproblems;
	pthread_mutex_unlock(&s->mu);
	return n;
}

uint64_t ql_server_started(ql_server *s, char *last, size_t len)
{
	pthread_mutex_lock(&s->mu);
	uint64_t n = s->nstarted;
	if (last && len)
		snprintf(last, len, "%s", s->started);
	pthread_mutex_unlock(&s->mu);
	return n;
}

void ql_server_probe_counters(ql_server *s, ql_probe_srv_counters *out)
{
	ql_probe_srv_get_counters(s->probe, out);
}

void ql_server_limits(const ql_server *s, ql_server_opts *out)
{
	*out = s->o;
}

double ql_server_cookie_timeout_s(const ql_server_opts *o)
{
	double idle = o->idle_timeout_s > 0 ? o->idle_timeout_s : QL_SRV_IDLE_TIMEOUT_DEFAULT_S;
	return idle < QL_SRV_COOKIE_TIMEOUT_S ? idle : QL_SRV_COOKIE_TIMEOUT_S;
}

void ql_server_stop(ql_server *s)
{
	if (s)
		atomic_store(&s->stop, 1);
}

void ql_server_free(ql_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, 1);
	pthread_mutex_lock(&s->mu);
	for (ql_test *t = s->tests; t; t = t->next)
		atomic_store(&t->stop_req, 1);
	pthread_mutex_unlock(&s->mu);
	if (s->th_started)
		pthread_join(s->th, NULL);
	pthread_mutex_lock(&s->mu);
	while (s->threads > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->ufd >= 0)
		close(s->ufd);
	for (int i = 0; i < s->nkept; i++)
		kept_unref(s->kept[(s->head + i) % s->keep]);
	free(s->kept);
	free(s->plog);
	ql_probe_srv_free(s->probe);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
