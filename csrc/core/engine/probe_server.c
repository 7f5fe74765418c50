/*
 * probe_server.c - the latency probe responder of a qoslab server
 * (probe_server.h): UDP requests read off the server's UDP port, TCP probe
 * sessions, their rate limits and counters. Stands on probe_server.h,
 * probe_wire.h, proto.h (iperf3's connect messages) and sockopt.h (peer
 * address groups).
 */
#include "probe_server.h"

#include <errno.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
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

struct ql_probe_srv {
	pthread_mutex_t mu;
	int max_sessions, max_per_address;
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

void ql_probe_srv_tcp(ql_probe_srv *ps, int fd, const struct sockaddr_storage *peer,
		      int64_t idle_ns, const _Atomic int *stop)
{
	pthread_mutex_lock(&ps->mu);
	peer_slot *sl = slot_of(ps, peer, 1);
	if (!sl || sl->sessions >= ps->max_per_address || ps->c.tcp_open >= ps->max_sessions) {
		ps->c.tcp_refused++;
		pthread_mutex_unlock(&ps->mu);
		return;
	}
	sl->sessions++;
	ps->c.tcp_open++;
	ps->c.tcp_sessions++;
	pthread_mutex_unlock(&ps->mu);
	uint8_t *buf = malloc(QL_PROBE_MAX_BYTES);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct timeval tv = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	ql_probe_srv_stamp_socket(fd);
	int idle = 0;
	while (buf) {
		int64_t rx;
		int rxk;
		if (read_exact(fd, buf, QL_PROBE_HDR_BYTES, idle_ns, stop, &rx, &rxk, &idle) < 0)
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
		int ok = allowed(ps, peer, ql_now_ns(), m.len);
		if (ok)
			ps->c.tcp_replies++;
		else
			ps->c.tcp_rate_limited++;
		pthread_mutex_unlock(&ps->mu);
		if (ok && send(fd, buf, m.len, MSG_NOSIGNAL) != (ssize_t)m.len)
			break;
	}
	free(buf);
	pthread_mutex_lock(&ps->mu);
	if (idle)
		ps->c.tcp_idle_closed++;
	ps->c.tcp_open--;
	sl->sessions--;   /* a slot with sessions is never taken over */
	pthread_mutex_unlock(&ps->mu);
}

void ql_probe_srv_get_counters(ql_probe_srv *ps, ql_probe_srv_counters *out)
{
	pthread_mutex_lock(&ps->mu);
	*out = ps->c;
	pthread_mutex_unlock(&ps->mu);
}
