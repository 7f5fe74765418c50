/*
 * probe.c - the latency probe's client (probe.h): its socket per protocol
 * (UDP, ICMP ping socket or raw, TCP), the isochronous send schedule, the
 * kernel TX/RX timestamps, and the samples. One thread per probe; the
 * samples are guarded by the probe's mutex, so they can be copied while it
 * runs. Stands on probe.h, probe_wire.h, sockopt.h (resolve, connect), and
 * nl.h (entering a namespace).
 */
#include "probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "probe_wire.h"
#include "proto.h"
#include "sockopt.h"
#include "../nl.h"
#include "../timer.h"

#define KEY_RING 4096           /* TX stamps still expected, by send order */
#define ICMP_HDR 8

struct ql_probe {
	ql_probe_opts o;
	char host[256], netns[128], bind_address[128];
	int proto, family, fd, raw;
	uint16_t echo_id;            /* raw ICMP sockets: our echo id */
	int64_t interval_ns, timeout_ns;
	int payload;                 /* UDP/TCP message or ICMP data bytes */
	uint32_t session;
	uint8_t boot[8];
	int tx_stamps;               /* SO_TIMESTAMPING TX took */
	pthread_t th;
	int th_started;
	_Atomic int stop;
	_Atomic int abort;           /* stop without waiting for replies due */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ql_probe_sample *s;          /* under mu */
	size_t n, cap;
	int first, fatal, refused, stopped, capped, clock;
	ql_probe_info info;          /* its counters, under mu */
	/* send order -> sequence, for the TX stamps (thread only) */
	uint64_t ring_idx[KEY_RING], ring_seq[KEY_RING];
	uint64_t nsent_ok;
	uint8_t *txbuf, *rxbuf;      /* payload + ICMP/IP headers */
	size_t rxlen;                /* TCP: bytes of the reply being read */
	int tcp_broken;              /* written under mu (read by first_reply) */
	char why[QL_REFUSAL_MAX_BYTES];   /* TCP: the server's refusal, under mu */
};

static int64_t rt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * QL_NS_PER_S + ts->tv_nsec;
}

/* ------------------------------------------------------------ sockets -- */

static void set_tos(int fd, int family, int tos)
{
	if (tos < 0)
		return;
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
	else
		setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
}

/* Software TX and RX stamps; where the kernel refuses TX stamps, RX only.
 * The TX stamp is the scheduler's (SOF_TIMESTAMPING_TX_SCHED: as the
 * request enters the qdisc), not the driver's: a queue on this host's own
 * egress delays the probe as it delays the application, and it counts. */
static void set_stamps(ql_probe *p)
{
	unsigned f = SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_RX_SOFTWARE |
		     SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID |
		     SOF_TIMESTAMPING_OPT_TSONLY;
	if (setsockopt(p->fd, SOL_SOCKET, SO_TIMESTAMPING, &f, sizeof f) == 0) {
		p->tx_stamps = 1;
		return;
	}
	int one = 1;
	setsockopt(p->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
}

static int ping_refused(ql_probe *p, ql_err *e)
{
	char range[64] = "?";
	FILE *f = fopen("/proc/sys/net/ipv4/ping_group_range", "re");
	if (f) {
		if (fgets(range, sizeof range, f))
			range[strcspn(range, "\n")] = 0;
		for (char *c = range; *c; c++)
			if (*c == '\t')
				*c = ' ';
		fclose(f);
	}
	return ql_err_set(e, EACCES, "EACCES", "ICMP probe to %s: ping sockets are refused to "
			  "this user (net.ipv4.ping_group_range is \"%s\", which holds none of "
			  "its groups) and raw sockets need CAP_NET_RAW; allow them with "
			  "sysctl -w net.ipv4.ping_group_range=\"0 2147483647\", or run as "
			  "root", p->host, range);
}

static int open_icmp(ql_probe *p, ql_err *e)
{
	int v6 = p->family == AF_INET6;
	int ipproto = v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP;
	p->fd = socket(p->family, SOCK_DGRAM | SOCK_CLOEXEC, ipproto);
	if (p->fd < 0 && (errno == EACCES || errno == EPERM)) {
		p->fd = socket(p->family, SOCK_RAW | SOCK_CLOEXEC, ipproto);
		if (p->fd < 0)
			return ping_refused(p, e);
		p->raw = 1;
		uint16_t id;
		if (getrandom(&id, sizeof id, 0) != sizeof id)
			id = (uint16_t)getpid();
		p->echo_id = id;
		if (v6) {
			struct icmp6_filter flt;
			ICMP6_FILTER_SETBLOCKALL(&flt);
			ICMP6_FILTER_SETPASS(ICMP6_ECHO_REPLY, &flt);
			setsockopt(p->fd, IPPROTO_ICMPV6, ICMP6_FILTER, &flt, sizeof flt);
		}
	}
	if (p->fd < 0)
		return ql_err_set(e, errno, NULL, "ICMP probe socket: %s", strerror(errno));
	return 0;
}

/* In the probe's namespace: resolve, open, connect. */
static int probe_open(ql_probe *p, ql_err *e)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int st = p->proto == QL_PROBE_TCP ? SOCK_STREAM : SOCK_DGRAM;
	int rc = resolve(p->host, p->proto == QL_PROBE_ICMP ? 0 : p->o.port, st, &ss, &len, e);
	if (rc < 0)
		return rc;
	p->family = ss.ss_family;
	if (p->proto == QL_PROBE_ICMP)
		rc = open_icmp(p, e);
	else if ((p->fd = socket(p->family, st | SOCK_CLOEXEC, 0)) < 0)
		rc = ql_err_set(e, errno, NULL, "probe socket: %s", strerror(errno));
	if (rc < 0)
		return rc;
	set_tos(p->fd, p->family, p->o.tos);
	if ((rc = bind_local(p->fd, p->family, p->o.bind_address, 0, e)) < 0)
		return rc;
	if (p->proto == QL_PROBE_TCP) {
		int one = 1;
		setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		rc = connect_timeout(p->fd, (struct sockaddr *)&ss, len, 3 * QL_NS_PER_S, NULL, e,
				     p->host, p->o.port);
		if (rc < 0)
			return rc;
		uint8_t g[QL_PROBE_GREETING_BYTES];
		ql_probe_greeting_put(g);
		struct timeval tv = { 1, 0 };
		setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (send(p->fd, g, sizeof g, MSG_NOSIGNAL) != (ssize_t)sizeof g)
			return ql_err_set(e, errno ? errno : EPIPE, NULL,
					  "TCP probe to %s port %d: cannot send its greeting: %s",
					  p->host, p->o.port, strerror(errno ? errno : EPIPE));
	} else if (connect(p->fd, (struct sockaddr *)&ss, len) < 0) {
		return ql_err_set(e, errno, NULL, "probe to %s: connect: %s", p->host,
				  strerror(errno));
	}
	set_stamps(p);
	int fl = fcntl(p->fd, F_GETFL);
	fcntl(p->fd, F_SETFL, fl | O_NONBLOCK);
	return 0;
}

/* ------------------------------------------------------------- sending -- */

static uint16_t csum16(const uint8_t *b, size_t n)
{
	uint32_t sum = 0;
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		sum += (uint32_t)b[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Build request seq into txbuf; returns its length. */
static size_t build(ql_probe *p, uint64_t seq, int64_t tx_ns)
{
	if (p->proto != QL_PROBE_ICMP) {
		ql_probe_msg m = { .version = QL_PROBE_VERSION, .type = QL_PROBE_REQUEST,
				   .len = (uint32_t)p->payload, .session = p->session,
				   .seq = seq, .client_tx_ns = tx_ns };
		ql_probe_msg_put(&m, p->txbuf);
		return (size_t)p->payload;
	}
	uint8_t *h = p->txbuf;
	int v6 = p->family == AF_INET6;
	h[0] = v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO;
	h[1] = 0;
	h[2] = h[3] = 0;
	/* a ping socket writes its own id and checksum */
	h[4] = (uint8_t)(p->echo_id >> 8);
	h[5] = (uint8_t)p->echo_id;
	h[6] = (uint8_t)(seq >> 8);
	h[7] = (uint8_t)seq;
	ql_probe_icmp_put(p->session, seq, tx_ns, h + ICMP_HDR);
	size_t n = ICMP_HDR + (size_t)p->payload;
	if (p->raw && !v6) {
		uint16_t c = csum16(h, n);
		h[2] = (uint8_t)(c >> 8);
		h[3] = (uint8_t)c;
	}
	return n;
}

static void send_one(ql_probe *p)
{
	pthread_mutex_lock(&p->mu);
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 1024;
		ql_probe_sample *ns = p->n < QL_PROBE_MAX_SAMPLES ? realloc(p->s, nc * sizeof *ns)
								  : NULL;
		if (!ns) {
			p->capped = 1;
			pthread_mutex_unlock(&p->mu);
			return;
		}
		p->s = ns;
		p->cap = nc;
	}
	uint64_t seq = p->n;
	pthread_mutex_unlock(&p->mu);
	int64_t tx = rt_now();
	size_t len = build(p, seq, tx);
	ssize_t r = p->tcp_broken ? -1 : send(p->fd, p->txbuf, len, MSG_NOSIGNAL);
	int err = r < 0 ? errno : 0;
	pthread_mutex_lock(&p->mu);
	p->s[seq] = (ql_probe_sample){ .tx_ns = tx };
	p->n++;
	p->info.sent++;
	if (r == (ssize_t)len) {
		uint64_t i = p->nsent_ok++;
		p->ring_idx[i % KEY_RING] = i;
		p->ring_seq[i % KEY_RING] = seq;
	} else {
		p->info.send_errors++;
		if (p->proto == QL_PROBE_TCP && !p->tcp_broken) {
			/* a short or failed write leaves the stream out of step */
			p->tcp_broken = 1;
			if (!p->first)
				p->fatal = 1;
		}
		if (err == ECONNREFUSED && !p->first) {
			p->refused = p->fatal = 1;
		}
		if (p->fatal)
			pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

/* ----------------------------------------------------------- receiving -- */

static void read_errqueue(ql_probe *p)
{
	for (;;) {
		char ctrl[512];
		uint8_t junk[64];
		struct iovec iov = { junk, sizeof junk };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
				     .msg_controllen = sizeof ctrl };
		if (recvmsg(p->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		int64_t ts = 0;
		int have_key = 0;
		uint32_t key = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
				struct scm_timestamping st;
				memcpy(&st, CMSG_DATA(c), sizeof st);
				ts = ts_ns(&st.ts[0]);
			} else if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
				   (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
				struct sock_extended_err ee;
				memcpy(&ee, CMSG_DATA(c), sizeof ee);
				if (ee.ee_errno == ENOMSG &&
				    ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING &&
				    ee.ee_info == SCM_TSTAMP_SCHED) {
					have_key = 1;
					key = ee.ee_data;
				}
			}
		}
		if (!have_key || !ts)
			continue;
		/* UDP/ICMP count datagrams; TCP counts bytes (the offset of the
		 * send's last byte). The key has 32 bits: UDP/ICMP widen it by
		 * our own count of sends. */
		uint64_t i;
		if (p->proto == QL_PROBE_TCP) {
			i = ((uint64_t)key + 1) / (uint64_t)p->payload - 1;
		} else {
			i = (p->nsent_ok & ~(uint64_t)0xffffffff) | key;
			if (i >= p->nsent_ok && i >= ((uint64_t)1 << 32))
				i -= (uint64_t)1 << 32;
		}
		if (p->ring_idx[i % KEY_RING] != i)
			continue;
		uint64_t seq = p->ring_seq[i % KEY_RING];
		pthread_mutex_lock(&p->mu);
		if (seq < p->n && !(p->s[seq].flags & QL_PS_TX_KERNEL)) {
			p->s[seq].tx_ns = ts;
			p->s[seq].flags |= QL_PS_TX_KERNEL;
			p->info.tx_kernel++;
		}
		pthread_mutex_unlock(&p->mu);
	}
}

/* One reply's facts: its sequence and (UDP/TCP) the server's times. */
static void take_reply(ql_probe *p, uint64_t seq, int64_t rx, int rx_kernel,
		       const ql_probe_msg *m)
{
	pthread_mutex_lock(&p->mu);
	if (seq >= p->n) {
		p->info.bad_replies++;
	} else if (p->s[seq].rx_ns) {
		p->info.duplicates++;
	} else {
		ql_probe_sample *x = &p->s[seq];
		x->rx_ns = rx;
		if (rx_kernel) {
			x->flags |= QL_PS_RX_KERNEL;
			p->info.rx_kernel++;
		}
		p->info.replies++;
		int first = !p->first;
		if (first) {
			p->first = 1;
			static const uint8_t none[8];
			if (m && memcmp(m->boot, p->boot, 8) == 0 && memcmp(p->boot, none, 8) != 0)
				p->clock = QL_CLOCK_SHARED;
			else if (p->o.clock_synced > 0)
				p->clock = QL_CLOCK_SYNCED;
		}
		/* the RTT is ours; the server's times are believed only where
		 * they fit it (a peer can write anything, a boot id included) */
		if (m && ql_probe_server_times_ok(x->tx_ns, rx, m->server_rx_ns, m->server_tx_ns,
						  p->clock == QL_CLOCK_SHARED,
						  QL_PROBE_SHARED_SLACK_NS)) {
			x->srv_rx_ns = m->server_rx_ns;
			x->srv_tx_ns = m->server_tx_ns;
			x->flags |= QL_PS_SERVER;
		} else if (m) {
			x->flags |= QL_PS_BAD_SERVER;
			p->info.bad_server_times++;
		}
		if (first)
			pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

static void bad_reply(ql_probe *p)
{
	pthread_mutex_lock(&p->mu);
	p->info.bad_replies++;
	pthread_mutex_unlock(&p->mu);
}

/* Parse the datagram/message in buf[len] received at rx. */
static void parse(ql_probe *p, const uint8_t *buf, size_t len, int64_t rx, int rxk)
{
	if (p->proto != QL_PROBE_ICMP) {
		ql_probe_msg m;
		if (ql_probe_msg_get(&m, buf, len) < 0 || m.type != QL_PROBE_REPLY ||
		    m.len != len || m.session != p->session)
			bad_reply(p);
		else
			take_reply(p, m.seq, rx, rxk, &m);
		return;
	}
	if (p->raw && p->family == AF_INET) {
		if (len < 20 || (buf[0] >> 4) != 4 || (size_t)(buf[0] & 15) * 4 > len)
			return;
		size_t ihl = (size_t)(buf[0] & 15) * 4;
		buf += ihl;
		len -= ihl;
	}
	int v6 = p->family == AF_INET6;
	if (len < ICMP_HDR || buf[0] != (v6 ? ICMP6_ECHO_REPLY : ICMP_ECHOREPLY))
		return;   /* our own requests on a raw socket, errors: not replies */
	if (p->raw && (uint16_t)(buf[4] << 8 | buf[5]) != p->echo_id)
		return;   /* another pinger's */
	uint32_t sess;
	uint64_t seq;
	int64_t tx;
	if (ql_probe_icmp_get(buf + ICMP_HDR, len - ICMP_HDR, &sess, &seq, &tx) < 0 ||
	    sess != p->session) {
		if (!p->raw)
			bad_reply(p);
		return;
	}
	take_reply(p, seq, rx, rxk, NULL);
}

/* recvmsg with the RX stamp; returns the length or -1 (errno). */
static ssize_t recv_stamped(ql_probe *p, uint8_t *buf, size_t cap, int64_t *rx, int *rxk)
{
	char ctrl[256];
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			     .msg_controllen = sizeof ctrl };
	ssize_t r = recvmsg(p->fd, &mh, MSG_DONTWAIT);
	if (r < 0)
		return r;
	*rx = 0;
	*rxk = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_TIMESTAMPING) {
			struct scm_timestamping st;
			memcpy(&st, CMSG_DATA(c), sizeof st);
			if (st.ts[0].tv_sec || st.ts[0].tv_nsec)
				*rx = ts_ns(&st.ts[0]);
		} else if (c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(c), sizeof ts);
			*rx = ts_ns(&ts);
		}
	}
	if (*rx)
		*rxk = 1;
	else
		*rx = rt_now();
	return r;
}

/* TCP, before any reply: the stream starts with a qoslab server's
 * refusal (the state byte ACCESS_DENIED, then the length-prefixed
 * "qoslab-refused: why", as a refused test is told), whose first
 * have[nhave] bytes came. Read the rest (the server closes after it; at
 * most 500 ms) and keep why under mu. */
static void read_refusal(ql_probe *p, const uint8_t *have, size_t nhave)
{
	uint8_t b[1 + 4 + QL_REFUSAL_MAX_BYTES];
	size_t n = nhave < sizeof b ? nhave : sizeof b;
	memcpy(b, have, n);
	int64_t dl = ql_now_ns() + 500 * MS;
	while (n < sizeof b && ql_now_ns() < dl) {
		if (n >= 5) {
			uint32_t l = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
			if (l <= QL_REFUSAL_MAX_BYTES && n >= 5 + l)
				break;
		}
		struct pollfd pf = { .fd = p->fd, .events = POLLIN };
		if (poll(&pf, 1, 50) <= 0)
			continue;
		ssize_t r = recv(p->fd, b + n, sizeof b - n, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (r > 0)
			n += (size_t)r;
	}
	char why[QL_REFUSAL_MAX_BYTES] = "";
	size_t pl = strlen(QL_REFUSAL_PREFIX), k = 0;
	if (n >= 5) {
		uint32_t l = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
		size_t end = 5 + (l < n - 5 ? l : n - 5);
		if (end > 5 + pl && memcmp(b + 5, QL_REFUSAL_PREFIX, pl) == 0)
			for (size_t i = 5 + pl; i < end && k + 1 < sizeof why; i++)
				why[k++] = b[i] >= 32 && b[i] < 127 ? (char)b[i] : '?';
	}
	why[k] = 0;
	pthread_mutex_lock(&p->mu);
	snprintf(p->why, sizeof p->why, "%s", why[0] ? why : "refused, no reason given");
	p->tcp_broken = p->fatal = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void read_replies(ql_probe *p)
{
	size_t cap = (size_t)p->payload + 128;
	for (;;) {
		int64_t rx;
		int rxk;
		if (p->proto == QL_PROBE_TCP) {
			if (p->tcp_broken)
				return;
			ssize_t r = recv_stamped(p, p->rxbuf + p->rxlen, (size_t)p->payload - p->rxlen,
						 &rx, &rxk);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
				pthread_mutex_lock(&p->mu);
				p->tcp_broken = 1;
				if (!p->first) {
					p->fatal = 1;
					pthread_cond_broadcast(&p->cv);
				}
				pthread_mutex_unlock(&p->mu);
				return;
			}
			if (r < 0)
				return;
			p->rxlen += (size_t)r;
			if (!p->first && p->rxbuf[0] == (uint8_t)(signed char)QL_ST_ACCESS_DENIED) {
				read_refusal(p, p->rxbuf, p->rxlen);
				return;
			}
			if (p->rxlen == (size_t)p->payload) {
				ql_probe_msg m;
				if (ql_probe_msg_get(&m, p->rxbuf, p->rxlen) < 0 ||
				    m.len != (uint32_t)p->payload) {
					/* out of step with the server: no reply can be
					 * told from the next one any more */
					bad_reply(p);
					pthread_mutex_lock(&p->mu);
					p->tcp_broken = 1;
					pthread_mutex_unlock(&p->mu);
					return;
				}
				parse(p, p->rxbuf, p->rxlen, rx, rxk);
				p->rxlen = 0;
			}
			continue;
		}
		ssize_t r = recv_stamped(p, p->rxbuf, cap, &rx, &rxk);
		if (r < 0) {
			if (errno == ECONNREFUSED) {
				pthread_mutex_lock(&p->mu);
				if (!p->first) {
					p->refused = p->fatal = 1;
					pthread_cond_broadcast(&p->cv);
				}
				pthread_mutex_unlock(&p->mu);
				continue;
			}
			return;
		}
		parse(p, p->rxbuf, (size_t)r, rx, rxk);
	}
}

static void probe_wait(ql_probe *p, int64_t wait_ns)
{
	if (wait_ns < 0)
		wait_ns = 0;
	struct timespec ts = { (time_t)(wait_ns / QL_NS_PER_S), (long)(wait_ns % QL_NS_PER_S) };
	struct pollfd pf = { .fd = p->fd, .events = POLLIN };
	if (ppoll(&pf, 1, &ts, NULL) > 0) {
		if (p->tx_stamps)
			read_errqueue(p);
		read_replies(p);
	}
}

static int all_answered(ql_probe *p)
{
	pthread_mutex_lock(&p->mu);
	int done = p->info.replies + p->info.send_errors >= p->n;
	pthread_mutex_unlock(&p->mu);
	return done;
}

static void *probe_main(void *arg)
{
	ql_probe *p = arg;
	int64_t t0 = ql_now_ns(), k = 0;
	int64_t step = 50 * MS;      /* longest wait, so a stop is seen promptly */
	while (!atomic_load(&p->stop)) {
		int64_t now = ql_now_ns();
		int64_t due = t0 + k * p->interval_ns;
		if (now >= due) {
			send_one(p);
			k++;
			if (now >= t0 + k * p->interval_ns)   /* missed slots: skip them */
				k = (now - t0) / p->interval_ns + 1;
			if (p->tx_stamps)
				read_errqueue(p);
			continue;
		}
		probe_wait(p, due - now < step ? due - now : step);
	}
	/* the replies still due */
	int64_t end = ql_now_ns() + p->timeout_ns;
	for (int64_t now = ql_now_ns(); now < end && !all_answered(p) && !atomic_load(&p->abort);
	     now = ql_now_ns())
		probe_wait(p, end - now < step ? end - now : step);
	if (p->tx_stamps)
		read_errqueue(p);
	pthread_mutex_lock(&p->mu);
	p->stopped = 1;
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---------------------------------------------------------------- API -- */

/* Whether a TCP connection to the probe's port is refused too: then nothing
 * listens there at all. A UDP probe's closed port alone does not tell: a
 * stock iperf3 server listens on TCP with its UDP port closed. */
static int tcp_refused_too(ql_probe *p)
{
	int restore = -1, refused = 0;
	ql_err e2;
	if (ql_netns_enter(p->o.netns, &restore, &e2) < 0)
		return 0;
	struct sockaddr_storage ss;
	socklen_t len;
	if (resolve(p->host, p->o.port, SOCK_STREAM, &ss, &len, &e2) == 0) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			if (bind_local(fd, ss.ss_family, p->o.bind_address, 0, &e2) == 0)
				refused = connect_timeout(fd, (struct sockaddr *)&ss, len,
							  QL_NS_PER_S, NULL, &e2, p->host,
							  p->o.port) == -ECONNREFUSED;
			close(fd);
		}
	}
	ql_netns_restore(restore, &e2);
	return refused;
}

static int first_reply(ql_probe *p, ql_err *e)
{
	double wait_ms = p->o.timeout_ms > QL_PROBE_FIRST_REPLY_MS ? p->o.timeout_ms
								     : QL_PROBE_FIRST_REPLY_MS;
	int64_t deadline = ql_now_ns() + (int64_t)(wait_ms * 1e6);
	pthread_mutex_lock(&p->mu);
	while (!p->first && !p->fatal) {
		int64_t left = deadline - ql_now_ns();
		if (left <= 0)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t at = ts_ns(&ts) + (left < 20 * MS ? left : 20 * MS);
		ts.tv_sec = (time_t)(at / QL_NS_PER_S);
		ts.tv_nsec = (long)(at % QL_NS_PER_S);
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	int ok = p->first, refused = p->refused, broken = p->tcp_broken;
	char why[sizeof p->why];
	memcpy(why, p->why, sizeof why);
	pthread_mutex_unlock(&p->mu);
	if (ok)
		return 0;
	if (why[0])
		return ql_err_set(e, EBUSY, "EBUSY", "TCP probe to %s port %d: the server refused "
				  "the probe session: %s", p->host, p->o.port, why);
	if (p->proto == QL_PROBE_ICMP)
		return ql_err_set(e, ETIMEDOUT, "ETIMEDOUT", "ICMP probe to %s: no echo reply "
				  "within %.0f ms (the host is down, or it or the path drops "
				  "pings)", p->host, wait_ms);
	if (refused && p->proto == QL_PROBE_UDP && tcp_refused_too(p))
		return ql_err_set(e, ECONNREFUSED, "ECONNREFUSED", "UDP probe to %s port %d: nothing "
				  "listens there (the UDP port is closed and a TCP connection is "
				  "refused): start a qoslab server there or fix host and port",
				  p->host, p->o.port);
	return ql_err_set(e, EPROTONOSUPPORT, "EPROTONOSUPPORT",
			  "%s probe to %s port %d: %s: no qoslab server answers latency probes "
			  "there (a stock iperf3 server does not)",
			  p->proto == QL_PROBE_TCP ? "TCP" : "UDP", p->host, p->o.port,
			  refused ? "the UDP port is closed (ICMP port unreachable)"
				  : p->proto == QL_PROBE_TCP && broken
				  ? "the server closed the connection or answered out of step"
				  : "no reply in time");
}

int ql_probe_start(const ql_probe_opts *o, ql_probe **out, ql_err *e)
{
	*out = NULL;
	int rc = ql_probe_opts_validate(o, 1, "opts", e);
	if (rc < 0)
		return rc;
	ql_probe *p = calloc(1, sizeof *p);
	if (!p)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	p->o = *o;
	p->fd = -1;
	copy_str(p->host, sizeof p->host, o->host);
	copy_str(p->netns, sizeof p->netns, o->netns);
	copy_str(p->bind_address, sizeof p->bind_address, o->bind_address);
	p->o.host = p->host;
	p->o.netns = p->netns[0] ? p->netns : NULL;
	p->o.bind_address = p->bind_address[0] ? p->bind_address : NULL;
	p->o.proto = NULL;
	p->proto = ql_probe_proto_of(o->proto);
	if (!p->o.port)
		p->o.port = 5201;
	if (!(p->o.interval_ms > 0))
		p->o.interval_ms = QL_PROBE_INTERVAL_DEFAULT_MS;
	if (!(p->o.timeout_ms > 0))
		p->o.timeout_ms = QL_PROBE_TIMEOUT_DEFAULT_MS;
	p->interval_ns = (int64_t)(p->o.interval_ms * 1e6);
	p->timeout_ns = (int64_t)(p->o.timeout_ms * 1e6);
	int pmin, pmax;
	ql_probe_payload_range(p->proto, &pmin, &pmax);
	p->payload = o->payload_bytes ? o->payload_bytes
		     : QL_PROBE_PAYLOAD_DEFAULT_BYTES < pmin ? pmin : QL_PROBE_PAYLOAD_DEFAULT_BYTES;
	p->clock = p->o.clock_synced > 0 ? QL_CLOCK_SYNCED : QL_CLOCK_UNSYNCED;
	if (getrandom(&p->session, sizeof p->session, 0) != sizeof p->session)
		p->session = (uint32_t)(getpid() ^ ql_now_ns());
	ql_probe_boot_id(p->boot);
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	p->txbuf = calloc(1, (size_t)p->payload + 64);
	p->rxbuf = calloc(1, (size_t)p->payload + 128);
	memset(p->ring_idx, 0xff, sizeof p->ring_idx);
	if (!p->txbuf || !p->rxbuf) {
		ql_probe_free(p);
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	}
	int restore = -1;
	rc = ql_netns_enter(p->o.netns, &restore, e);
	if (rc == 0) {
		rc = probe_open(p, e);
		ql_err e2;
		ql_netns_restore(restore, &e2);
	}
	if (rc == 0) {
		int prc = pthread_create(&p->th, NULL, probe_main, p);
		if (prc != 0)
			rc = ql_err_set(e, prc, NULL, "cannot start the probe thread: %s",
					strerror(prc));
		else
			p->th_started = 1;
		if (p->th_started)   /* "ql-probe" in /proc/PID/task/TID/comm: its CPU is measurable */
			pthread_setname_np(p->th, "ql-probe");
	}
	if (rc == 0)
		rc = first_reply(p, e);
	if (rc < 0) {
		atomic_store(&p->abort, 1);
		ql_probe_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void ql_probe_stop(ql_probe *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, 1);
	if (p->th_started) {
		pthread_join(p->th, NULL);
		p->th_started = 0;
	}
	/* a TCP probe's server session ends now, not at its idle timeout */
	if (p->fd >= 0) {
		close(p->fd);
		p->fd = -1;
	}
}

void ql_probe_get_info(ql_probe *p, ql_probe_info *out)
{
	pthread_mutex_lock(&p->mu);
	*out = p->info;
	out->proto = p->proto;
	out->interval_ms = p->o.interval_ms;
	out->timeout_ms = p->o.timeout_ms;
	out->payload_bytes = p->payload;
	out->clock = p->clock;
	out->stopped = p->stopped;
	out->capped = p->capped;
	out->first_tx_ns = p->n ? p->s[0].tx_ns : 0;
	pthread_mutex_unlock(&p->mu);
	out->now_rt_ns = rt_now();
}

int ql_probe_samples(ql_probe *p, ql_probe_sample **out, size_t *n)
{
	pthread_mutex_lock(&p->mu);
	*n = p->n;
	*out = NULL;
	if (p->n) {
		*out = malloc(p->n * sizeof **out);
		if (*out)
			memcpy(*out, p->s, p->n * sizeof **out);
		else
			*n = 0;
	}
	pthread_mutex_unlock(&p->mu);
	return *out || !*n ? 0 : -ENOMEM;
}

void ql_probe_free(ql_probe *p)
{
	if (!p)
		return;
	ql_probe_stop(p);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->s);
	free(p->txbuf);
	free(p->rxbuf);
	free(p);
}
