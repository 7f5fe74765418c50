/*
 * probe_server.c - the latency probe responder of a qoslab server
 * (probe_server.h): UDP requests read off the server's UDP port, TCP probe
 * sessions, their rate limits and counters. Stands on probe_server.h,
 * probe_wire.h, proto.h (iperf3's connect messages) and sockopt.h (peer
 * address groups).
 */
#include "probe_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "probe_wire.h"
#include "proto.h"
#include "sockopt.h"
#include "../timer.h"

typedef struct peer_slot {
	uint8_t key[9];
	int64_t tat_ns;              /* GCRA theoretical arrival time, replies */
	int64_t tat_bytes_ns;        /* the same, reply bytes */
	int sessions;                /* TCP probe sessions of this group */
} peer_slot;

/* A TCP probe session, from its admission to its end (under mu). */
typedef struct session {
	int used;                    /* its thread has it (till the thread leaves) */
	int live;                    /* counted: not evicted */
	int fd;
	uint8_t key[9];
	struct sockaddr_storage peer;
	peer_slot *sl;               /* its rate slot (NULL: the global budget only) */
	int64_t start_ns, last_ns;   /* admitted; its last request */
	uint64_t requests;
} session;

struct ql_probe_srv {
	pthread_mutex_t mu;
	int max_sessions, max_per_address;
	session *sess;               /* nsess of them: twice the sessions, as an
	                                evicted one's place is free only when its
	                                thread has gone */
	int nsess;
	uint8_t boot[8];
	int64_t tat_ns, tat_bytes_ns;   /* the global buckets */
	peer_slot peers[QL_PROBE_SRV_PEERS];
	ql_probe_srv_counters c;
	uint8_t udp_buf[QL_PROBE_MAX_BYTES + 1];
};

static int64_t rt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
}

ql_probe_srv *ql_probe_srv_new(int max_sessions, int max_sessions_per_address)
{
	ql_probe_srv *ps = calloc(1, sizeof *ps);
	if (!ps)
		return NULL;
	ps->nsess = 2 * (max_sessions > 0 ? max_sessions : 1);
	ps->sess = calloc((size_t)ps->nsess, sizeof *ps->sess);
	if (!ps->sess) {
		free(ps);
		return NULL;
	}
	pthread_mutex_init(&ps->mu, NULL);
	ps->max_sessions = max_sessions;
	ps->max_per_address = max_sessions_per_address;
	ql_probe_boot_id(ps->boot);
	return ps;
}

void ql_probe_srv_free(ql_probe_srv *ps)
{
	if (!ps)
		return;
	pthread_mutex_destroy(&ps->mu);
	free(ps->sess);
	free(ps);
}

void ql_probe_srv_stamp_socket(int fd)
{
	unsigned f = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &f, sizeof f) < 0) {
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
	}
}

static uint32_t key_hash(const uint8_t k[9])
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < 9; i++)
		h = (h ^ k[i]) * 16777619u;
	return h;
}

/* The slot of a peer's group (a newcomer takes over the slot its hash
 * names: memory stays fixed; a displaced peer starts afresh). Under mu. */
static peer_slot *slot_of(ql_probe_srv *ps, const struct sockaddr_storage *peer, int claim)
{
	uint8_t k[9];
	group_key(peer, k);
	peer_slot *sl = &ps->peers[key_hash(k) % QL_PROBE_SRV_PEERS];
	if (memcmp(sl->key, k, 9) != 0) {
		if (!claim || sl->sessions > 0)
			return NULL;
		memcpy(sl->key, k, 9);
		sl->tat_ns = sl->tat_bytes_ns = 0;
	}
	return sl;
}

/* GCRA: one more reply at rate per second with a burst; 1 = allowed. */
static int gcra(int64_t *tat, int64_t now, int rate, int burst)
{
	int64_t t = QL_NS_PER_S / rate;
	int64_t base = *tat > now ? *tat : now;
	if (base - now > t * (burst - 1))
		return 0;
	*tat = base + t;
	return 1;
}

/* GCRA over bytes: a reply of len bytes at rate_Bps with a burst of
 * burst_bytes (at least one reply of any size fits an idle bucket). */
static int gcra_bytes(int64_t *tat, int64_t now, int64_t rate_Bps, int64_t burst_bytes,
		      size_t len)
{
	int64_t base = *tat > now ? *tat : now;
	if (base - now > burst_bytes * QL_NS_PER_S / rate_Bps)
		return 0;
	*tat = base + (int64_t)len * QL_NS_PER_S / rate_Bps;
	return 1;
}

/* A reply of len bytes allowed for peer now? Under mu. Each of the four
 * buckets (replies and bytes; the peer's, all peers') must have room; a
 * refusal leaves them all as they were. A peer whose slot is held by
 * another group's TCP session shares the global budget only. */
static int allowed(ql_probe_srv *ps, const struct sockaddr_storage *peer, int64_t now,
		   size_t len)
{
	peer_slot *sl = slot_of(ps, peer, 1);
	int64_t g = ps->tat_ns, gb = ps->tat_bytes_ns;
	int64_t p = sl ? sl->tat_ns : 0, pb = sl ? sl->tat_bytes_ns : 0;
	int ok = gcra(&ps->tat_ns, now, QL_PROBE_SRV_RATE, QL_PROBE_SRV_BURST) &&
		 gcra_bytes(&ps->tat_bytes_ns, now, QL_PROBE_SRV_BYTE_RATE,
			    QL_PROBE_SRV_BYTE_BURST, len) &&
		 (!sl || (gcra(&sl->tat_ns, now, QL_PROBE_SRV_PEER_RATE, QL_PROBE_SRV_PEER_BURST) &&
			  gcra_bytes(&sl->tat_bytes_ns, now, QL_PROBE_SRV_PEER_BYTE_RATE,
				     QL_PROBE_SRV_PEER_BYTE_BURST, len)));
	if (!ok) {
		ps->tat_ns = g;
		ps->tat_bytes_ns = gb;
		if (sl) {
			sl->tat_ns = p;
			sl->tat_bytes_ns = pb;
		}
	}
	return ok;
}

/* Rewrite the request in buf[len] into its reply; -1 when malformed. */
static int make_reply(ql_probe_srv *ps, uint8_t *buf, size_t len, int64_t rx, int rxk)
{
	ql_probe_msg m;
	if (ql_probe_msg_get(&m, buf, len) < 0 || m.type != QL_PROBE_REQUEST || m.len != len)
		return -1;
	m.type = QL_PROBE_REPLY;
	m.flags = rxk ? QL_PROBE_F_SRV_KERNEL_RX : 0;
	m.server_rx_ns = rx;
	memcpy(m.boot, ps->boot, 8);
	m.server_tx_ns = rt_now();
	ql_probe_msg_put(&m, buf);
	return 0;
}

static ssize_t recv_stamped(int fd, void *buf, size_t cap, int flags,
			    struct sockaddr_storage *peer, socklen_t *plen, int64_t *rx, int *rxk)
{
	char ctrl[256];
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_name = peer, .msg_namelen = peer ? sizeof *peer : 0,
			     .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			     .msg_controllen = sizeof ctrl };
	ssize_t r = recvmsg(fd, &mh, flags);
	if (r < 0)
		return r;
	if (plen)
		*plen = mh.msg_namelen;
	*rx = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		struct timespec ts[3];
		if (c->cmsg_type == SCM_TIMESTAMPING) {
			memcpy(ts, CMSG_DATA(c), sizeof ts);
			if (ts[0].tv_sec || ts[0].tv_nsec)
				*rx = (int64_t)ts[0].tv_sec * QL_NS_PER_S + ts[0].tv_nsec;
		} else if (c->cmsg_type == SCM_TIMESTAMPNS) {
			memcpy(ts, CMSG_DATA(c), sizeof ts[0]);
			*rx = (int64_t)ts[0].tv_sec * QL_NS_PER_S + ts[0].tv_nsec;
		}
	}
	*rxk = *rx != 0;
	if (!*rx)
		*rx = rt_now();
	return r;
}

int ql_probe_srv_udp(ql_probe_srv *ps, int fd, char *buf, size_t cap, size_t *len,
		     struct sockaddr_storage *peer, socklen_t *plen)
{
	int64_t rx;
	int rxk;
	ssize_t r = recv_stamped(fd, ps->udp_buf, sizeof ps->udp_buf, MSG_DONTWAIT, peer, plen,
				 &rx, &rxk);
	if (r < 0)
		return -1;
	if (!ql_probe_is_ours(ps->udp_buf, (size_t)r)) {
		if (!((r == 4 || r == 4 + QL_COOKIE_SIZE) && ql_udp_connect_msg_ok(ps->udp_buf, 4))) {
			pthread_mutex_lock(&ps->mu);
			ps->c.udp_unknown++;
			pthread_mutex_unlock(&ps->mu);
		}
		*len = (size_t)r;
		memcpy(buf, ps->udp_buf, (size_t)r < cap ? (size_t)r : cap);
		return 0;
	}
	pthread_mutex_lock(&ps->mu);
	if (make_reply(ps, ps->udp_buf, (size_t)r, rx, rxk) < 0) {
		ps->c.udp_malformed++;
	} else if (!allowed(ps, peer, ql_now_ns(), (size_t)r)) {
		ps->c.udp_rate_limited++;
	} else {
		ps->c.udp_replies++;
		pthread_mutex_unlock(&ps->mu);
		sendto(fd, ps->udp_buf, (size_t)r, MSG_DONTWAIT, (struct sockaddr *)peer, *plen);
		return 1;
	}
	pthread_mutex_unlock(&ps->mu);
	return 1;
}

/* Read exactly n bytes (blocking in 50 ms steps); 0, or -1 on end, error,
 * idle or stop. rx: the stamp of the read that completed it. */
static int read_exact(int fd, uint8_t *buf, size_t n, int64_t idle_ns, const _Atomic int *stop,
		      int64_t *rx, int *rxk, int *idle)
{
	size_t got = 0;
	int64_t deadline = ql_now_ns() + idle_ns;
	while (got < n) {
		if (atomic_load(stop))
			return -1;
		if (ql_now_ns() >= deadline) {
			*idle = 1;
			return -1;
		}
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int pr = poll(&pf, 1, 50);
		if (pr < 0 && errno != EINTR)
			return -1;
		if (pr <= 0)
			continue;
		ssize_t r = recv_stamped(fd, buf + got, n - got, MSG_DONTWAIT, NULL, NULL, rx, rxk);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return -1;
		if (r > 0)
			got += (size_t)r;
	}
	return 0;
}

/* How long a session has been idle at now: since its last request, or
 * since its admission when it sent none. */
static int64_t idle_for(const session *x, int64_t now)
{
	return now - (x->requests ? x->last_ns : x->start_ns);
}

/* Caller holds mu: sessions open from key's group. */
static int tcp_held(ql_probe_srv *ps, const uint8_t key[9])
{
	int n = 0;
	for (int i = 0; i < ps->nsess; i++)
		n += ps->sess[i].live && memcmp(ps->sess[i].key, key, 9) == 0;
	return n;
}

/* Caller holds mu: the session to close so a newcomer fits, or NULL.
 * Among sessions of key's group (key != NULL), else of any group holding
 * more than its fair share (fair: max_sessions over the groups holding
 * sessions, the newcomer's counted), else of any group: one that never
 * sent a request first, then the one idle longest; outside an unfair
 * group only sessions idle for QL_PROBE_SRV_EVICT_IDLE_NS or more, so a
 * working probe (which sends every interval) of an address within its
 * share is never the victim of a newcomer. */
static session *tcp_victim(ql_probe_srv *ps, const uint8_t *key, const uint8_t *newcomer,
			   int64_t now)
{
	int ngroups = 0, newcomer_holds = 0;
	for (int i = 0; i < ps->nsess; i++) {
		session *x = &ps->sess[i];
		if (!x->live)
			continue;
		int seen = 0;
		for (int k = 0; k < i && !seen; k++)
			seen = ps->sess[k].live && memcmp(ps->sess[k].key, x->key, 9) == 0;
		ngroups += !seen;
		newcomer_holds |= memcmp(x->key, newcomer, 9) == 0;
	}
	ngroups += !newcomer_holds;
	int fair = ps->max_sessions / (ngroups > 0 ? ngroups : 1);
	if (fair < 1)
		fair = 1;
	session *best = NULL;
	int best_rank = -1;
	int64_t best_idle = 0;
	for (int i = 0; i < ps->nsess; i++) {
		session *x = &ps->sess[i];
		if (!x->live)
			continue;
		if (key && memcmp(x->key, key, 9) != 0)
			continue;
		int held = tcp_held(ps, x->key);
		int64_t idle = idle_for(x, now);
		int unfair = !key && held > fair;
		if (!unfair && idle < QL_PROBE_SRV_EVICT_IDLE_NS)
			continue;
		/* rank: unfair first, then silent since its greeting */
		int rank = unfair * 2 + (x->requests == 0);
		if (rank > best_rank || (rank == best_rank && idle > best_idle)) {
			best = x;
			best_rank = rank;
			best_idle = idle;
		}
	}
	return best;
}

/* Caller holds mu: close x to make room (its thread wakes on the shutdown
 * and leaves; its place is free from now on). */
static void tcp_evict(ql_probe_srv *ps, session *x, int64_t now, const char *limit, int value,
		      char *note, size_t nlen, struct sockaddr_storage *victim)
{
	*victim = x->peer;
	char host[INET6_ADDRSTRLEN] = "?";
	peer_host(&x->peer, host, sizeof host);
	snprintf(note, nlen, "closed a TCP probe session from %s port %d (%s for %.1f s) to admit "
		 "a newcomer: %s (%d) reached", host, peer_port(&x->peer),
		 x->requests ? "no request" : "no request since its greeting",
		 (double)idle_for(x, now) / 1e9, limit, value);
	shutdown(x->fd, SHUT_RDWR);
	x->live = 0;
	if (x->sl)
		x->sl->sessions--;
	ps->c.tcp_open--;
	ps->c.tcp_evicted++;
}

int ql_probe_srv_tcp_admit(ql_probe_srv *ps, int fd, const struct sockaddr_storage *peer,
			   char *why, size_t len, char *note, size_t nlen,
			   struct sockaddr_storage *victim)
{
	char host[INET6_ADDRSTRLEN] = "?";
	peer_host(peer, host, sizeof host);
	why[0] = note[0] = 0;
	uint8_t k[9];
	group_key(peer, k);
	int64_t now = ql_now_ns();
	pthread_mutex_lock(&ps->mu);
	int mine = tcp_held(ps, k);
	if (mine >= ps->max_per_address) {
		session *v = tcp_victim(ps, k, k, now);
		if (v)
			tcp_evict(ps, v, now, "max_tests_per_address", ps->max_per_address, note, nlen,
				  victim);
		else
			snprintf(why, len, "busy: %d TCP probe sessions from %s open, the server's "
				 "max_tests_per_address is %d (probe sessions count apart from "
				 "tests); wait for one to end, or ask the server's operator to raise "
				 "--max-tests-per-address", mine, host, ps->max_per_address);
	} else if (ps->c.tcp_open >= ps->max_sessions) {
		session *v = tcp_victim(ps, NULL, k, now);
		if (v)
			tcp_evict(ps, v, now, "max_tests", ps->max_sessions, note, nlen, victim);
		else
			snprintf(why, len, "busy: %d TCP probe sessions open, the server's max_tests is "
				 "%d (probe sessions count apart from tests); wait for one to end, "
				 "or ask the server's operator to raise --max-tests",
				 ps->c.tcp_open, ps->max_sessions);
	}
	int slot = -1;
	for (int i = 0; !why[0] && i < ps->nsess && slot < 0; i++)
		if (!ps->sess[i].used)
			slot = i;
	if (slot < 0) {
		if (!why[0])   /* as many evicted sessions still leaving as live ones */
			snprintf(why, len, "busy: %d TCP probe sessions closing; retry in a second",
				 ps->nsess - ps->c.tcp_open);
		ps->c.tcp_refused++;
		pthread_mutex_unlock(&ps->mu);
		return -1;
	}
	session *x = &ps->sess[slot];
	memset(x, 0, sizeof *x);
	x->used = x->live = 1;
	x->fd = fd;
	memcpy(x->key, k, 9);
	x->peer = *peer;
	x->start_ns = now;
	x->sl = slot_of(ps, peer, 1);
	if (x->sl)
		x->sl->sessions++;
	ps->c.tcp_open++;
	ps->c.tcp_sessions++;
	pthread_mutex_unlock(&ps->mu);
	return slot;
}

void ql_probe_srv_tcp(ql_probe_srv *ps, int slot, int fd, int64_t idle_ns,
		      const _Atomic int *stop)
{
	session *x = &ps->sess[slot];
	pthread_mutex_lock(&ps->mu);
	struct sockaddr_storage peer = x->peer;
	pthread_mutex_unlock(&ps->mu);
	uint8_t *buf = malloc(QL_PROBE_MAX_BYTES);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct timeval tv = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	ql_probe_srv_stamp_socket(fd);
	int idle = 0;
	/* a probe sends its first request at once: a session silent after its
	 * greeting for longer is closed early */
	int64_t first_ns = idle_ns < QL_PROBE_SRV_FIRST_REQUEST_NS ? idle_ns
								   : QL_PROBE_SRV_FIRST_REQUEST_NS;
	for (uint64_t nreq = 0; buf; nreq++) {
		int64_t rx;
		int rxk;
		if (read_exact(fd, buf, QL_PROBE_HDR_BYTES, nreq ? idle_ns : first_ns, stop, &rx, &rxk,
			       &idle) < 0)
			break;
		ql_probe_msg m;
		if (ql_probe_msg_get(&m, buf, QL_PROBE_HDR_BYTES) < 0 || m.type != QL_PROBE_REQUEST) {
			pthread_mutex_lock(&ps->mu);
			ps->c.tcp_malformed++;
			pthread_mutex_unlock(&ps->mu);
			break;
		}
		if (m.len > QL_PROBE_HDR_BYTES &&
		    read_exact(fd, buf + QL_PROBE_HDR_BYTES, m.len - QL_PROBE_HDR_BYTES, idle_ns, stop,
			       &rx, &rxk, &idle) < 0)
			break;
		pthread_mutex_lock(&ps->mu);
		make_reply(ps, buf, m.len, rx, rxk);
		int ok = allowed(ps, &peer, ql_now_ns(), m.len);
		if (ok)
			ps->c.tcp_replies++;
		else
			ps->c.tcp_rate_limited++;
		if (x->live) {
			x->requests++;
			x->last_ns = ql_now_ns();
		}
		pthread_mutex_unlock(&ps->mu);
		if (ok && send(fd, buf, m.len, MSG_NOSIGNAL) != (ssize_t)m.len)
			break;
	}
	free(buf);
	pthread_mutex_lock(&ps->mu);
	if (x->live) {
		if (idle)
			ps->c.tcp_idle_closed++;
		ps->c.tcp_open--;
		if (x->sl)
			x->sl->sessions--;   /* a slot with sessions is never taken over */
		x->live = 0;
	}
	x->used = 0;
	pthread_mutex_unlock(&ps->mu);
}

void ql_probe_srv_get_counters(ql_probe_srv *ps, ql_probe_srv_counters *out)
{
	pthread_mutex_lock(&ps->mu);
	*out = ps->c;
	pthread_mutex_unlock(&ps->mu);
}
