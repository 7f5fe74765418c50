/*
 * sockopt.c - a test's sockets: buffers and options, resolve, bind, connect
 * with a timeout, peer addresses compared. Stands on test.h.
 */
#include "sockopt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "test.h"
#include "../timer.h"

static int set_buffers(ql_test *t, int fd, ql_stream *s, ql_err *e)
{
	int64_t snd = t->prm.sndbuf_bytes ? t->prm.sndbuf_bytes : t->prm.window_bytes;
	int64_t rcv = t->prm.rcvbuf_bytes ? t->prm.rcvbuf_bytes : t->prm.window_bytes;
	if (snd > 0) {
		int v = (int)snd;
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) < 0)
			return ql_err_set(e, errno, NULL, "setsockopt(SO_SNDBUF, %d): %s", v,
					  strerror(errno));
	}
	if (rcv > 0) {
		int v = (int)rcv;
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) < 0)
			return ql_err_set(e, errno, NULL, "setsockopt(SO_RCVBUF, %d): %s", v,
					  strerror(errno));
	}
	int g = 0;
	socklen_t gl = sizeof g;
	getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &g, &gl);
	int64_t wmax = read_sysctl("/proc/sys/net/core/wmem_max");
	int64_t rmax = read_sysctl("/proc/sys/net/core/rmem_max");
	ql_bufinfo_fill(&s->sndbuf, snd, g, wmax, "net.core.wmem_max");
	gl = sizeof g;
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &g, &gl);
	ql_bufinfo_fill(&s->rcvbuf, rcv, g, rmax, "net.core.rmem_max");
	const char *who = t->side == QL_SIDE_SERVER ? "server" : "client";
	if (s->sndbuf.clamped)
		add_warning(t, "%s: SO_SNDBUF clamped to %lld B by net.core.wmem_max (requested %lld; "
			    "Linux grants 2 x min(request, wmem_max))", who,
			    (long long)s->sndbuf.granted_bytes, (long long)snd);
	if (s->rcvbuf.clamped)
		add_warning(t, "%s: SO_RCVBUF clamped to %lld B by net.core.rmem_max (requested %lld; "
			    "Linux grants 2 x min(request, rmem_max))", who,
			    (long long)s->rcvbuf.granted_bytes, (long long)rcv);
	return 0;
}

/*
 * Where each option goes:
 *
 * - Client: every option is set on the stream socket before connect(), so
 *   the SYN already carries the MSS and a window scale derived from the
 *   requested buffer.
 * - Server: the listening socket is shared by all concurrent tests and
 *   never carries a buffer option. The kernel copies the listener's
 *   buffers into every accepted socket, and SO_RCVBUF/SO_SNDBUF also set
 *   locks that cannot be cleared again. A listener that carried one test's
 *   buffers would turn off autotuning for every later test. Without that
 *   lock the SYN-ACK's window scale is chosen from max(net.core.rmem_max,
 *   net.ipv4.tcp_rmem[2]) (tcp_select_initial_window), so it can express
 *   any buffer the kernel grants later. Each accepted data socket gets its
 *   test's options before the client may send data (before TEST_START).
 *   The handshake has already fixed tp->window_clamp from the default
 *   buffer (tcp_init_buffer_space), and the late SO_RCVBUF turns off the
 *   autotuning that would have raised it. So the receive window would stay
 *   near tcp_rmem[1]/2 (about 64 KiB) whatever was asked. TCP_WINDOW_CLAMP
 *   lifts that cap to the granted buffer. The window then follows the
 *   kernel's own buffer-derived limit, as if the buffer had been set before
 *   the SYN. SO_SNDBUF has no handshake-time effect: it only has to be in
 *   place before the first write.
 *   TCP_MAXSEG on an accepted socket only records user_mss. The MSS in both
 *   directions is still bounded by the client's SYN, which carries the
 *   option.
 */
int stream_tos(const ql_params *p, const ql_stream *s)
{
	if (p->nstream_tos > 0)
		return p->stream_tos[s->idx % p->nstream_tos];
	return p->tos;
}

int apply_opts(ql_test *t, int fd, int family, ql_stream *s, ql_err *e)
{
	int rc = set_buffers(t, fd, s, e);
	if (rc < 0)
		return rc;
	if (t->proto == QL_PROTO_TCP && t->side == QL_SIDE_SERVER && s->rcvbuf.requested_bytes > 0 &&
	    s->rcvbuf.granted_bytes > 0) {
		int v = (int)s->rcvbuf.granted_bytes;
		if (setsockopt(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &v, sizeof v) < 0)
			return ql_err_set(e, errno, NULL, "setsockopt(TCP_WINDOW_CLAMP, %d): %s", v,
					  strerror(errno));
	}
	if (t->proto == QL_PROTO_TCP) {
		int one = 1;
		if (t->prm.nodelay &&
		    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
			return ql_err_set(e, errno, NULL, "setsockopt(TCP_NODELAY): %s", strerror(errno));
		if (t->prm.mss_bytes > 0) {
			int v = t->prm.mss_bytes;
			if (setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &v, sizeof v) < 0)
				return ql_err_set(e, errno, NULL, "setsockopt(TCP_MAXSEG, %d): %s", v,
						  strerror(errno));
		}
		if (t->prm.congestion[0] &&
		    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, t->prm.congestion,
			       (socklen_t)strlen(t->prm.congestion)) < 0) {
			int err = errno;
			return ql_err_set(e, err, err == ENOENT ? "ENOENT" : NULL,
					  "setsockopt(TCP_CONGESTION, \"%s\"): %s (see "
					  "/proc/sys/net/ipv4/tcp_available_congestion_control; "
					  "modprobe tcp_%s)", t->prm.congestion, strerror(err),
					  t->prm.congestion);
		}
	}
	int tos = stream_tos(&t->prm, s);
	if (tos >= 0) {
		int v = tos;
		int r = family == AF_INET6
			? setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &v, sizeof v)
			: setsockopt(fd, IPPROTO_IP, IP_TOS, &v, sizeof v);
		if (family == AF_INET6)   /* v4-mapped peers use IP_TOS too */
			setsockopt(fd, IPPROTO_IP, IP_TOS, &v, sizeof v);
		if (r < 0)
			return ql_err_set(e, errno, NULL, "setsockopt(IP_TOS/IPV6_TCLASS, %d): %s", v,
					  strerror(errno));
	}
	if (t->prm.fqrate_bps > 0) {
		uint64_t bytes = t->prm.fqrate_bps / 8;
		int r;
		if (bytes >= UINT32_MAX) {
			r = setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &bytes, sizeof bytes);
		} else {
			uint32_t b32 = (uint32_t)bytes;
			r = setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &b32, sizeof b32);
		}
		if (r < 0)
			return ql_err_set(e, errno, NULL, "setsockopt(SO_MAX_PACING_RATE): %s",
					  strerror(errno));
	}
	if (t->bind_device[0] &&
	    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, t->bind_device,
		       (socklen_t)strlen(t->bind_device)) < 0)
		return bind_device_error(t->bind_device, t->netns, errno, e);
	return 0;
}

int bind_device_error(const char *dev, const char *netns, int err, ql_err *e)
{
	if (err != ENODEV)
		return ql_err_set(e, err, NULL, "setsockopt(SO_BINDTODEVICE, \"%s\"): %s", dev,
				  strerror(err));
	if (netns && *netns)
		return ql_err_set(e, ENODEV, "ENODEV", "bind_device \"%s\": no such device in "
				  "namespace %s (see ip -n %s link)", dev, netns, netns);
	return ql_err_set(e, ENODEV, "ENODEV", "bind_device \"%s\": no such device in this "
			  "namespace (see ip link)", dev);
}

int resolve(const char *host, int port, int socktype,
	    struct sockaddr_storage *ss, socklen_t *len, ql_err *e)
{
	struct addrinfo hints = { .ai_socktype = socktype, .ai_flags = AI_ADDRCONFIG };
	struct addrinfo *ai = NULL;
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	int g = getaddrinfo(host, ps, &hints, &ai);
	if (g != 0 || !ai) {
		hints.ai_flags = 0;
		g = getaddrinfo(host, ps, &hints, &ai);
	}
	if (g != 0 || !ai)
		return ql_err_set(e, EHOSTUNREACH, "ENOENT", "cannot resolve \"%s\": %s", host,
				  gai_strerror(g));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int bind_local(int fd, int family, const char *addr, int port, ql_err *e)
{
	if (!addr || !*addr)
		return 0;
	struct sockaddr_storage ss;
	socklen_t len;
	int rc = resolve(addr, port, 0, &ss, &len, e);
	if (rc < 0)
		return rc;
	if (ss.ss_family != family)
		return ql_err_usage(e, "opts.bind_address: \"%s\" is not of the peer's address family",
				    addr);
	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		return ql_err_set(e, errno, NULL, "bind(%s): %s", addr, strerror(errno));
	return 0;
}

int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len,
		    int64_t timeout_ns, const volatile int *stop, ql_err *e,
		    const char *host, int port)
{
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	int rc = connect(fd, sa, len);
	if (rc < 0 && errno != EINPROGRESS) {
		int err = errno;
		return ql_err_set(e, err, NULL, "connect to %s port %d: %s%s", host, port,
				  strerror(err),
				  err == ECONNREFUSED ? " (is a server running there?)" : "");
	}
	if (rc < 0) {
		int64_t deadline = ql_now_ns() + timeout_ns;
		for (;;) {
			if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
				return ql_err_set(e, EINTR, "EINTR", "stopped while connecting");
			int64_t left = deadline - ql_now_ns();
			if (left <= 0)
				return ql_err_set(e, ETIMEDOUT, NULL,
						  "connect to %s port %d: timed out", host, port);
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			int n = poll(&pf, 1, (int)(left > 50 * MS ? 50 : left / MS + 1));
			if (n > 0)
				break;
		}
		int err = 0;
		socklen_t el = sizeof err;
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err)
			return ql_err_set(e, err, NULL, "connect to %s port %d: %s%s", host, port,
					  strerror(err),
					  err == ECONNREFUSED ? " (is a server running there?)" : "");
	}
	fcntl(fd, F_SETFL, fl);
	return 0;
}

void sockets_read(ql_test *t)
{
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		ql_sock_info *k = &s->sock;
		struct sockaddr_storage ss;
		socklen_t l = sizeof ss;
		memset(k, 0, sizeof *k);
		if (s->fd < 0 || getsockname(s->fd, (struct sockaddr *)&ss, &l) < 0)
			continue;
		peer_host(&ss, k->local_host, sizeof k->local_host);
		k->local_port = peer_port(&ss);
		l = sizeof ss;
		if (getpeername(s->fd, (struct sockaddr *)&ss, &l) == 0) {
			peer_host(&ss, k->remote_host, sizeof k->remote_host);
			k->remote_port = peer_port(&ss);
		}
		/* as granted when the options were set (before connect on a
		 * client, as iperf3 reads them): the kernel's autotuning
		 * grows them later */
		k->sndbuf_bytes = s->sndbuf.granted_bytes;
		k->rcvbuf_bytes = s->rcvbuf.granted_bytes;
		k->present = 1;
		if (t->proto == QL_PROTO_TCP && !t->tcp_ca[0]) {
			char ca[QL_CA_NAME_MAX + 1] = "";
			socklen_t cl = QL_CA_NAME_MAX;
			if (getsockopt(s->fd, IPPROTO_TCP, TCP_CONGESTION, ca, &cl) == 0) {
				ca[cl < QL_CA_NAME_MAX ? cl : QL_CA_NAME_MAX] = 0;
				copy_str(t->tcp_ca, sizeof t->tcp_ca, ca);
			}
		}
	}
	if (t->proto == QL_PROTO_TCP && t->ctl_fd >= 0) {
		int mss = 0;
		socklen_t ml = sizeof mss;
		if (getsockopt(t->ctl_fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &ml) == 0 && mss > 0)
			t->ctrl_mss_bytes = mss;
	}
	atomic_store(&t->sockets_known, 1);
}

int peer_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return 0;
}

/* A peer's address as text (IPv4-mapped IPv6 addresses as IPv4). */
void peer_host(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "";
	if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof host);
	else if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof host);
	copy_str(out, len, strncmp(host, "::ffff:", 7) == 0 ? host + 7 : host);
}

int same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

/* The key of a peer's address group for the per-address limits: an IPv4
 * address (also IPv4-mapped IPv6) or an IPv6 /64, since one host or
 * site is given a whole /64. key[0] tells the family. */
void group_key(const struct sockaddr_storage *ss, uint8_t key[9])
{
	memset(key, 0, 9);
	if (ss->ss_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
		static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		if (memcmp(a, mapped, 12) == 0) {
			key[0] = 4;
			memcpy(key + 1, a + 12, 4);
		} else {
			key[0] = 6;
			memcpy(key + 1, a, 8);
		}
	}
}

int same_group(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	uint8_t ka[9], kb[9];
	group_key(a, ka);
	group_key(b, kb);
	return memcmp(ka, kb, 9) == 0;
}

int same_endpoint(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (!same_ip(a, b))
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_port ==
		       ((const struct sockaddr_in *)b)->sin_port;
	return ((const struct sockaddr_in6 *)a)->sin6_port ==
	       ((const struct sockaddr_in6 *)b)->sin6_port;
}
