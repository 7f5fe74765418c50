/*
 * engine.c - traffic engine: stream workers, interval reporter, iperf3
 * control protocol for the client and the server. See engine.h.
 */
#include "engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/sockios.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "results_json.h"
#include "../nl.h"
#include "stats.h"
#include "../timer.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define MS (1000000LL)
#define CTL_TIMEOUT_NS (10 * QL_NS_PER_S)
#define TCP_DRAIN_CAP_NS (3 * QL_NS_PER_S)
#define TCP_RX_BYTES (128 * 1024)
#define UDP_TX_BATCH 64
/* A server's reason for refusing or ending a test, after the state byte. */
#define QL_REFUSAL_PREFIX "qoslab-refused: "
#define QL_REFUSAL_MAX_BYTES 512

enum {
	T_NEW = 0, T_ACCEPTING, T_RUNNING, T_ENDING, T_DONE
};

typedef struct ql_stream {
	struct ql_test *t;
	int idx, id, dir, sender;
	int fd;
	pthread_t th;
	int th_started;
	_Atomic uint64_t bytes, packets, writes;
	_Atomic int done;                /* sender finished / receiver EOF */
	_Atomic int64_t last_rx_ns;
	/* sender: when its last write returned (its span's end) and when it
	 * finished (data acknowledged); set by the worker before `done` */
	int64_t last_tx_ns, done_ns;
	int64_t run_ns;                  /* worker: when it started */
	uint64_t planned_slots, skipped_slots;    /* timed, paced UDP sender */
	uint64_t warm_debt;              /* warm-up slots still to be sent */
	pthread_mutex_t mu;              /* guards rx */
	ql_udp_rx rx;
	int rx_init;
	int64_t cpu_user_ns, cpu_sys_ns;
	ql_bufinfo sndbuf, rcvbuf;
	/* reporter state (control thread only) */
	uint64_t snap_bytes, snap_packets, snap_writes;
	ql_tcp_summary tsum;             /* TCP sender: from connect on */
	int tsum_init;
	uint64_t sent_final;             /* UDP: peer's sent count */
	int err;                         /* worker's errno, 0 = fine */
} ql_stream;

struct ql_test {
	int side;
	ql_params prm;
	int proto, peer;
	char host[256];
	int port;
	char netns[128], bind_address[128], bind_device[32];
	int udp_batch, udp_gso;
	int64_t connect_timeout_ns;
	int64_t drain_ns;
	uint64_t limit_bytes, limit_packets;   /* per direction budgets */
	/* UDP: the datagrams that take a limited budget's last two units are
	 * udp_unit_bytes[1] and [2] long (0 = a whole datagram), so a byte
	 * limit is met exactly; the test tag of qoslab-to-qoslab datagrams (udp_tag set) */
	uint32_t udp_unit_bytes[3];       /* [1], [2]; 0 = whole */
	int udp_tag;
	uint64_t udp_tag_val;
	_Atomic int peer_tags;            /* client: the server tags (announced) */
	_Atomic int64_t budget[2];
	int limited;
	int ctl_fd;
	char cookie[QL_COOKIE_SIZE];
	struct sockaddr_storage peer_addr;
	socklen_t peer_len;
	int nstreams;
	ql_stream *st;
	pthread_t ctl_th;
	int ctl_started;
	_Atomic int stop_req, send_stop, recv_stop;
	/* The test failed (the peer ended it, the control connection broke):
	 * senders drop what is left and wait for no acknowledgement. */
	_Atomic int abort_io;
	int state;                        /* T_* (server: under srv->mu) */
	int64_t start_ns, omit_ns, last_snap_ns, end_ns, send_end_ns;
	double start_unix;
	uint64_t tick_k;
	int64_t period_ns;
	int64_t ctl_cpu_user0, ctl_cpu_sys0;
	/* intervals and the live queue */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ql_interval *iv;
	int niv, civ, npub, nread;
	/* live queue handed to next_interval (client only): local intervals
	 * with the peer's entries of the same grid slots, deep copies.
	 * iv[nrel..npub) are ticked but held for the peer's entries. */
	ql_interval *live;
	int nlive, clive, nrel;
	ql_interval *rlive;               /* peer intervals not yet placed */
	int nrlive, crlive, nrlive_total;
	int peer_live;                    /* the server announced QL_ST_QL_LIVE */
	int64_t peer_upto;                /* peer's live series covers slots < this */
	int64_t hold_ns;                  /* longest wait for the peer's entries */
	int nshipped;                     /* server: intervals sent live */
	int finished;
	int rc;
	ql_err err;
	ql_result res;
	char **warn;
	int nwarn;
	ql_peer_results peer_res;
	/* server side */
	struct ql_server *srv;
	struct ql_test *next;
	int published;
	int *pending_fds;
	uint64_t *pending_seq;            /* accept order of pending_fds */
	int npending;
	struct conn_arg *unid;            /* its control connection while unidentified */
	int admitted;                     /* counted in srv->running (under srv->mu) */
	int admitted_streams;             /* its streams, for the per-address limit */
	int64_t idle_ns;                  /* data-idle limit */
	uint64_t srv_no;                  /* the server's test number, from 1 */
	int64_t buf_base;                 /* its buffers but interval records */
	int64_t rec_bytes;                /* one interval record it keeps */
};

struct ql_server {
	ql_server_opts o;
	char netns[128], bind_address[128];
	int lfd, ufd, port, family;
	pthread_t th;
	int th_started;
	_Atomic int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ql_test *tests;
	int running, threads;
	/* The last keep finished results, a ring: kept[(head + i) % keep] is
	 * the i-th oldest of nkept. A finished test's other state (streams,
	 * UDP books, live queue) is freed as soon as its result is kept. */
	struct kept_result **kept;
	int keep, nkept, head;
	uint64_t nfinished;               /* tests published since the start */
	uint64_t rejected;
	uint64_t failed;                  /* tests that started and did not finish */
	char problem[QL_ERR_MSG_MAX + 320]; /* the last rejection or failure, for logs */
	ql_srv_problem *plog;             /* ring of the last QL_SRV_PROBLEMS_KEPT */
	uint64_t nproblems;
	uint64_t nstarted;                /* tests whose parameters were accepted */
	char started[512];                /* the last of them, for logs */
	uint64_t accept_seq;
	int done;
	/* unidentified connections, oldest first (see ql_server_opts) */
	struct conn_arg *unid_head, *unid_tail;
	int nunid;
};

/* A finished server test's result, shared by the server's ring and the
 * copies handed out by ql_server_results (refs counts both). */
typedef struct kept_result {
	ql_result res;               /* first: a ql_result * is a kept_result * */
	_Atomic int refs;
} kept_result;

static void kept_unref(kept_result *k)
{
	if (k && atomic_fetch_sub(&k->refs, 1) == 1) {
		ql_result_free(&k->res);
		free(k);
	}
}

/* ------------------------------------------------------------ helpers --- */

static int64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
}

static void thread_cpu(int64_t *user_ns, int64_t *sys_ns)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) == 0) {
		*user_ns = (int64_t)ru.ru_utime.tv_sec * QL_NS_PER_S + ru.ru_utime.tv_usec * 1000;
		*sys_ns = (int64_t)ru.ru_stime.tv_sec * QL_NS_PER_S + ru.ru_stime.tv_usec * 1000;
	} else {
		*user_ns = *sys_ns = 0;
	}
}

static void add_warning(ql_test *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void add_warning(ql_test *t, const char *fmt, ...)
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

static int64_t read_sysctl(const char *path)
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

void ql_bufinfo_fill(ql_bufinfo *b, int64_t requested, int64_t granted,
		     int64_t max_bytes, const char *sysctl)
{
	memset(b, 0, sizeof *b);
	b->present = 1;
	b->requested_bytes = requested;
	b->granted_bytes = granted;
	snprintf(b->sysctl, sizeof b->sysctl, "%s", sysctl);
	/* Linux grants 2 x min(request, max); less than twice the request
	 * means the sysctl cut it. */
	b->clamped = requested > 0 && granted < 2 * requested &&
		     (max_bytes <= 0 || requested > max_bytes);
}

int64_t ql_grid_tick_ns(int64_t start_ns, int64_t omit_ns, int64_t period_ns,
			uint64_t k)
{
	if (omit_ns <= 0)
		return start_ns + (int64_t)(k + 1) * period_ns;
	uint64_t m = (uint64_t)((omit_ns + period_ns - 1) / period_ns) - 1;
	if (k < m)
		return start_ns + (int64_t)(k + 1) * period_ns;
	if (k == m)
		return start_ns + omit_ns;
	return start_ns + omit_ns + (int64_t)(k - m) * period_ns;
}

void ql_interval_clear(ql_interval *iv)
{
	if (!iv)
		return;
	free(iv->entries);
	iv->entries = NULL;
	iv->nentries = 0;
}

void ql_result_free(ql_result *r)
{
	if (!r)
		return;
	free(r->streams);
	for (int i = 0; i < r->nintervals; i++)
		ql_interval_clear(&r->intervals[i]);
	free(r->intervals);
	for (int i = 0; i < r->nwarnings; i++)
		free(r->warnings[i]);
	free(r->warnings);
	memset(r, 0, sizeof *r);
}

void ql_client_opts_init(ql_client_opts *o)
{
	memset(o, 0, sizeof *o);
	o->port = QL_DEFAULT_PORT;
	o->parallel = 1;
	o->duration_s = 10;
	o->interval_s = 1;
	o->tos = -1;
	o->udp_drain_s = -1;
}

void ql_server_opts_init(ql_server_opts *o)
{
	memset(o, 0, sizeof *o);
	o->port = QL_DEFAULT_PORT;
	o->keep_results = QL_KEEP_RESULTS_DEFAULT;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/* ----------------------------------------------------- socket options --- */

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
 * Where each option goes (issue 3 point 2, case 013):
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
static int apply_opts(ql_test *t, int fd, int family, ql_stream *s, ql_err *e)
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
	if (t->prm.tos >= 0) {
		int v = t->prm.tos;
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
		       (socklen_t)strlen(t->bind_device)) < 0) {
		int err = errno;
		return ql_err_set(e, err, NULL, "setsockopt(SO_BINDTODEVICE, \"%s\"): %s%s",
				  t->bind_device, strerror(err),
				  err == ENODEV ? " (no such device in this namespace)" : "");
	}
	return 0;
}

static int resolve(const char *host, int port, int socktype,
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

static int bind_local(int fd, int family, const char *addr, int port, ql_err *e)
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

static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len,
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

/* ------------------------------------------------------------ workers --- */

/* Take up to `want` from the budget; *after (may be NULL) receives what
 * the budget holds after this reservation. */
static uint64_t reserve(_Atomic int64_t *budget, uint64_t want, int64_t *after)
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
static void udp_setup(ql_test *t)
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

static void fill_payload(char *buf, size_t n)
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

static int wait_io(int fd, short ev, int ms)
{
	struct pollfd pf = { .fd = fd, .events = ev };
	return poll(&pf, 1, ms);
}

/* The planned end of a timed test on this end's clock (INT64_MAX for a
 * limited one), and the slack the grid's tick there waits. */
static int64_t planned_end_ns(const ql_test *t)
{
	if (t->limited)
		return INT64_MAX;
	return t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
}

static int64_t end_slack_ns(const ql_test *t)
{
	return t->period_ns / 20 > 20 * MS ? t->period_ns / 20 : 20 * MS;
}

/* A timed TCP test's tail after the planned end (the senders' wait for
 * their acknowledgements, the receivers' drain) ends within the drain time
 * (max(250 ms, 2 x RTT)), at least the end slack and at most one interval:
 * the data a fast path has in its buffers at the end arrives (also on a
 * slow host), a slow path's queue does not stretch the test, and the last
 * record comes within one interval of its slot. */
static int64_t tcp_tail_ns(const ql_test *t)
{
	int64_t d = t->drain_ns, lo = end_slack_ns(t);
	if (d < lo)
		d = lo;
	if (t->period_ns > lo && d > t->period_ns)
		d = t->period_ns;
	return d;
}

/* Wait (bounded) until the kernel has every sent byte acknowledged, so the
 * receiver holds what the sender counted before anyone ends the test. */
static void tcp_wait_acked(ql_stream *s, int64_t cap_ns)
{
	int64_t deadline = ql_now_ns() + cap_ns;
	while (!atomic_load(&s->t->stop_req) && !atomic_load(&s->t->abort_io) &&
	       ql_now_ns() < deadline) {
		int outq = 0;
		if (ioctl(s->fd, SIOCOUTQ, &outq) < 0 || outq <= 0)
			return;
		struct timespec ts = { 0, 2 * MS };
		nanosleep(&ts, NULL);
	}
}

static void tcp_send_loop(ql_stream *s)
{
	ql_test *t = s->t;
	size_t len = (size_t)t->prm.len_bytes;
	char *buf = malloc(len);
	if (!buf) {
		s->err = ENOMEM;
		return;
	}
	fill_payload(buf, len);
	/* bitrate_bps on TCP: per-stream absolute schedule like UDP's; a
	 * stream that fell behind by more than 10 ms of data re-bases. */
	uint64_t rate = t->prm.bandwidth_bps;
	int64_t origin = ql_now_ns();
	uint64_t paced = 0;
	/* A timed sender stops at the planned end by itself, also inside a
	 * write the path blocks (a slow link held one for seconds): it polls
	 * no longer than until then. */
	int64_t stop_at = planned_end_ns(t);
	while (!atomic_load(&t->send_stop) && !atomic_load(&t->stop_req) &&
	       ql_now_ns() < stop_at) {
		if (rate) {
			int64_t now = ql_now_ns();
			int64_t due = origin + (int64_t)((__int128)paced * 8 * QL_NS_PER_S / rate);
			if (due > now) {
				ql_sleep_until_ns(due < now + 50 * MS ? due : now + 50 * MS, NULL, NULL);
				continue;
			}
			if (now - due > 10 * MS) {
				origin = now - (int64_t)((__int128)paced * 8 * QL_NS_PER_S / rate) - 10 * MS;
			}
		}
		size_t n = len;
		if (t->limited) {
			n = reserve(&t->budget[s->dir], len, NULL);
			if (n == 0)
				break;
		}
		size_t off = 0;
		while (off < n && !atomic_load(&t->stop_req)) {
			/* A time-limited test stops mid-block; a limited one
			 * sends the whole reservation (unless the test failed). */
			if ((!t->limited && atomic_load(&t->send_stop)) || atomic_load(&t->abort_io))
				break;
			int64_t left_ns = stop_at - ql_now_ns();
			if (left_ns <= 0)
				break;
			/* Try first, poll only when the socket is full: one
			 * syscall per block while the path keeps up. */
			ssize_t r = send(s->fd, buf + off, n - off, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (r > 0) {
				off += (size_t)r;
				atomic_fetch_add_explicit(&s->bytes, (uint64_t)r, memory_order_relaxed);
				atomic_fetch_add_explicit(&s->writes, 1, memory_order_relaxed);
				s->last_tx_ns = ql_now_ns();
			} else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
				int64_t w = left_ns < 50 * MS ? left_ns : 50 * MS;
				wait_io(s->fd, POLLOUT, (int)((w + MS - 1) / MS));
			} else if (r < 0) {
				s->err = errno;
				goto out;
			}
		}
		paced += off;
		if (off < n)
			break;
	}
out:
	free(buf);
	/* A stock iperf3 client stops reading when it sends TEST_END, so a
	 * server waiting for its acks would only stall. */
	/* A timed test's wait ends with its tail (tcp_tail_ns) after the
	 * planned end: what a slow path still queues then is sent but not
	 * received. */
	int64_t cap = 10 * QL_NS_PER_S;
	if (!t->limited) {
		cap = stop_at + tcp_tail_ns(t) - ql_now_ns();
		if (cap > TCP_DRAIN_CAP_NS)
			cap = TCP_DRAIN_CAP_NS;
	}
	if (!atomic_load(&t->stop_req) && !atomic_load(&t->abort_io) && cap > 0 &&
	    (t->side == QL_SIDE_CLIENT || t->peer == QL_PEER_QOSLAB))
		tcp_wait_acked(s, cap);
	shutdown(s->fd, SHUT_WR);
}

static void tcp_recv_loop(ql_stream *s)
{
	ql_test *t = s->t;
	/* Reads are not tied to the sender's write size. On loopback,
	 * 64-128 KiB per call measured best; 256 KiB reads cut one stream
	 * from ~14 to ~9 Gbit/s, because the copy target leaves the cache. */
	size_t len = TCP_RX_BYTES;
	char *buf = malloc(len);
	if (!buf) {
		s->err = ENOMEM;
		return;
	}
	while (!atomic_load(&t->recv_stop) && !atomic_load(&t->stop_req)) {
		ssize_t r = recv(s->fd, buf, len, MSG_DONTWAIT);
		if (r > 0) {
			atomic_fetch_add_explicit(&s->bytes, (uint64_t)r, memory_order_relaxed);
			atomic_store(&s->last_rx_ns, ql_now_ns());
		} else if (r == 0) {
			break;
		} else if (errno == EAGAIN || errno == EINTR) {
			wait_io(s->fd, POLLIN, 50);
		} else {
			if (errno != ECONNRESET)
				s->err = errno;
			break;
		}
	}
	free(buf);
}

static void udp_stamp(char *p, uint64_t seq, int seq64, int64_t now)
{
	ql_udp_hdr h = { .sec = (uint32_t)(now / QL_NS_PER_S),
			 .usec = (uint32_t)((now % QL_NS_PER_S) / 1000), .seq = seq };
	ql_udp_hdr_encode(p, &h, seq64);
}

/* The paced sender's stall slack in datagrams (its pacer's max_burst). */
static uint64_t udp_sender_burst(const ql_test *t)
{
	uint64_t burst = 0;
	if (t->prm.bandwidth_bps && t->prm.len_bytes > 0) {
		double slack_s = t->prm.interval_s < 0.1 ? t->prm.interval_s : 0.1;
		burst = (uint64_t)((double)t->prm.bandwidth_bps * slack_s /
				   (8.0 * (double)t->prm.len_bytes));
		if (burst < 8)
			burst = 8;
		if (burst > 65536)
			burst = 65536;
	}
	return burst;
}

static void udp_send_loop(ql_stream *s)
{
	int64_t wrote_at = 0;   /* the pacer's clock read before the last send */
	ql_test *t = s->t;
	size_t len = (size_t)t->prm.len_bytes;
	int batch = t->udp_batch > 0 ? t->udp_batch : UDP_TX_BATCH;
	int gso = t->udp_gso;
	int seq64 = t->prm.udp_counters_64bit;
	if (gso && (size_t)batch * len > 65000)
		batch = (int)(65000 / len);
	if (batch < 1)
		batch = 1;
	char *buf = malloc((size_t)batch * len);
	struct mmsghdr *mm = calloc((size_t)batch, sizeof *mm);
	struct iovec *iov = calloc((size_t)batch, sizeof *iov);
	if (!buf || !mm || !iov) {
		s->err = ENOMEM;
		goto out;
	}
	fill_payload(buf, (size_t)batch * len);
	for (int i = 0; i < batch; i++) {
		if (t->udp_tag)
			ql_udp_tag_put(buf + (size_t)i * len, seq64, t->udp_tag_val);
		iov[i].iov_base = buf + (size_t)i * len;
		iov[i].iov_len = len;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	/* Stall rule: a sender that fell behind by up to one report interval
	 * (at most 100 ms) catches up, so each interval still carries its
	 * target; beyond that slack the pacer re-bases its schedule and the
	 * missed slots are dropped, so a long stall never turns into a long
	 * burst (iperf3 #1912). */
	uint64_t burst = udp_sender_burst(t);
	ql_pacer p;
	ql_err e;
	/* The schedule starts on the test's clock, not when this thread got
	 * going, so the slots before stop_at are exactly rate x duration. */
	int64_t origin = t->start_ns ? t->start_ns : ql_now_ns();
	if (ql_pacer_init(&p, origin, t->prm.bandwidth_bps,
			  (uint32_t)len,
			  (uint32_t)burst, &e) < 0) {
		s->err = EINVAL;
		goto out;
	}
	/* A timed test sends the slots scheduled before its planned end and
	 * no more: the control thread that sets send_stop may wake a few ms
	 * late (seen in the emulated guest: 3004 datagrams in 3 s at 1000/s). */
	int64_t stop_at = t->limited ? INT64_MAX :
			  t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
	uint64_t seq = 1;
	while (!atomic_load(&t->stop_req)) {
		int64_t next = 0, now = ql_now_ns();
		/* At the end (ours or the control thread's stop) the slots
		 * already due still go out, in one last attempt: a thread that
		 * slept across the end would otherwise lose them. */
		int last = atomic_load(&t->send_stop) || now >= stop_at;
		if (now >= stop_at)
			now = stop_at - 1;
		uint64_t due = ql_pacer_due(&p, now, &next);
		if (due == 0 && last)
			break;
		if (due == 0) {
			if (next > stop_at)
				next = stop_at;
			if (next > now + 50 * MS)
				next = now + 50 * MS;
			ql_sleep_until_ns(next, NULL, NULL);
			continue;
		}
		/* A limited test numbers its budget's units down to 1: the
		 * datagrams taking units 2 and 1 may be shortened so the byte
		 * limit is met exactly (udp_setup); `unit` is the number of the
		 * next datagram of this reservation, 0 in a timed test. */
		uint64_t unit = 0;
		if (t->limited) {
			int64_t after = 0;
			uint64_t got = reserve(&t->budget[s->dir], due, &after);
			if (got < due)
				ql_pacer_unsend(&p, due - got);
			due = got;
			if (due == 0)
				break;
			unit = (uint64_t)after + due;
		}
		while (due > 0 && !atomic_load(&t->stop_req)) {
			int n = due > (uint64_t)batch ? batch : (int)due;
			/* the datagrams of units 2 and 1 (the batch's last two) */
			int shortened = unit && unit - (uint64_t)n < 2 &&
					(t->udp_unit_bytes[1] || t->udp_unit_bytes[2]);
			uint64_t bytes = (uint64_t)n * len;
			if (shortened) {
				for (int i = n >= 2 ? n - 2 : 0; i < n; i++) {
					uint64_t u = unit - (uint64_t)i;
					if (u <= 2 && t->udp_unit_bytes[u])
						iov[i].iov_len = t->udp_unit_bytes[u];
				}
			}
			/* One timestamp per batch: the batch leaves in one call. */
			int64_t stamp = realtime_ns();
			for (int i = 0; i < n; i++)
				udp_stamp(buf + (size_t)i * len, seq + (uint64_t)i, seq64, stamp);
			int sent;
			/* GSO segments are equal but the last: a batch with two
			 * shortened datagrams goes as plain datagrams */
			if (gso && n > 1 && !shortened) {
				struct iovec one = { buf, (size_t)n * len };
				char cb[CMSG_SPACE(sizeof(uint16_t))] = { 0 };
				struct msghdr mh = { .msg_iov = &one, .msg_iovlen = 1,
						     .msg_control = cb, .msg_controllen = sizeof cb };
				struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
				cm->cmsg_level = SOL_UDP;
				cm->cmsg_type = UDP_SEGMENT;
				cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
				uint16_t seg = (uint16_t)len;
				memcpy(CMSG_DATA(cm), &seg, sizeof seg);
				ssize_t r = sendmsg(s->fd, &mh, 0);
				if (r < 0 && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT)) {
					gso = 0;   /* no GSO on this path: plain batches */
					continue;
				}
				sent = r < 0 ? -1 : n;
			} else {
				sent = sendmmsg(s->fd, mm, (unsigned)n, 0);
			}
			if (shortened) {
				bytes = 0;
				for (int i = 0; i < n; i++) {
					if (i < sent)
						bytes += iov[i].iov_len;
					iov[i].iov_len = len;
				}
			} else if (sent >= 0) {
				bytes = (uint64_t)sent * len;
			}
			if (sent < 0) {
				if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR ||
				    errno == ECONNREFUSED) {
					/* A refused datagram (ICMP from a peer that
					 * closed) or a full queue: the slot stays due.
					 * A limited test keeps its reservation and
					 * tries again (given back, another stream
					 * could take the units a shortened datagram
					 * of this one already ended). */
					wait_io(s->fd, POLLOUT, 10);
					if (t->limited && !atomic_load(&t->send_stop))
						continue;
					ql_pacer_unsend(&p, due);
					break;
				}
				s->err = errno;
				goto out;
			}
			seq += (uint64_t)sent;
			due -= (uint64_t)sent;
			if (unit)
				unit -= (uint64_t)sent;
			wrote_at = now;
			atomic_fetch_add_explicit(&s->packets, (uint64_t)sent, memory_order_relaxed);
			atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
			atomic_fetch_add_explicit(&s->writes, 1, memory_order_relaxed);
		}
		if (last)
			break;
	}
	if (t->prm.bandwidth_bps && !t->limited && !atomic_load(&t->stop_req)) {
		/* The slots of the schedule before the planned end, against
		 * what went out: re-based stalls, slots still due at the end
		 * (a full queue at the last attempt) and a late start all
		 * count as dropped. */
		/* until the planned end, or the stop that came first (a
		 * client that ended the test early) */
		int64_t end = ql_now_ns();
		if (end > stop_at)
			end = stop_at;
		unsigned __int128 el = (unsigned __int128)(uint64_t)(end > origin ? end - origin : 0);
		unsigned __int128 bits_ns = (unsigned __int128)len * 8 * QL_NS_PER_S;
		uint64_t planned = (uint64_t)((el * t->prm.bandwidth_bps + bits_ns - 1) / bits_ns);
		uint64_t sent = atomic_load(&s->packets);
		s->planned_slots = planned;
		s->skipped_slots = planned > sent ? planned - sent : 0;
	}
out:
	s->last_tx_ns = wrote_at;
	free(buf);
	free(mm);
	free(iov);
}

#define RX_BATCH 64
#define RX_CTL 64

static void udp_recv_loop(ql_stream *s)
{
	ql_test *t = s->t;
	int seq64 = t->prm.udp_counters_64bit;
	/* One slot per datagram. A GRO buffer can hold up to 64 KiB, and a
	 * plain datagram up to the test's length. A slot a little longer than
	 * that keeps the batch compact in cache. A longer stray datagram is
	 * cut short there, which the header decoder tolerates. */
	size_t cap = t->udp_gso ? 65536 : ((size_t)t->prm.len_bytes + 64 + 63) & ~(size_t)63;
	if (cap < 2048)
		cap = 2048;
	char *buf = malloc((size_t)RX_BATCH * cap);
	struct mmsghdr mm[RX_BATCH];
	struct iovec iov[RX_BATCH];
	char ctl[RX_BATCH][RX_CTL];
	if (!buf) {
		s->err = ENOMEM;
		return;
	}
	int one = 1;
	setsockopt(s->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
	/* GRO hands over several datagrams of one flow in one buffer, with
	 * the segment size in a UDP_GRO control message. */
	if (t->udp_gso)
		setsockopt(s->fd, SOL_UDP, UDP_GRO, &one, sizeof one);
	/* What can belong to the test: a datagram at least as long as the
	 * header, carrying the test tag where both ends are qoslab, numbered
	 * no further than the sender can have come (stats.h ql_udp_seq_max).
	 * A client receiving from the server requires the tag once the server
	 * announced itself or a tagged datagram came; a stock iperf3 server's
	 * payload matches a 64-bit tag with odds 2^-64. */
	size_t hdr_min = ql_udp_hdr_bytes(seq64, 0);
	int tag_needed = t->udp_tag && t->side == QL_SIDE_SERVER;
	ql_udp_accept acc = { .rate_bps = t->prm.bandwidth_bps,
			      .length_bytes = (uint32_t)t->prm.len_bytes,
			      .burst_packets = udp_sender_burst(t),
			      .limit_packets = t->limited ? t->limit_packets : 0,
			      /* this worker started before the first datagram
			       * could be sent to it; the slack covers a
			       * sender whose clock origin came a little earlier */
			      .origin_ns = s->run_ns,
			      .slack_ns = QL_UDP_ACCEPT_SLACK_NS };
	int64_t hi_ns = s->run_ns;
	int idle = 1;
	while (!atomic_load(&t->recv_stop) && !atomic_load(&t->stop_req)) {
		/* While datagrams keep coming, read first: poll only after a
		 * read found the queue empty (one syscall per batch). */
		if (idle && wait_io(s->fd, POLLIN, 20) <= 0)
			continue;
		for (int i = 0; i < RX_BATCH; i++) {
			iov[i].iov_base = buf + (size_t)i * cap;
			iov[i].iov_len = cap;
			memset(&mm[i].msg_hdr, 0, sizeof mm[i].msg_hdr);
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
			mm[i].msg_hdr.msg_control = ctl[i];
			mm[i].msg_hdr.msg_controllen = RX_CTL;
		}
		int n = recvmmsg(s->fd, mm, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED) {
				s->err = errno;
				break;
			}
			idle = 1;
			continue;
		}
		idle = n < RX_BATCH;
		int64_t fallback = realtime_ns(), mono = ql_now_ns();
		if (!tag_needed && t->udp_tag && atomic_load(&t->peer_tags))
			tag_needed = 1;
		pthread_mutex_lock(&s->mu);
		/* once per batch: a batch holds at most RX_BATCH x 64 datagrams,
		 * far inside the bound's headroom */
		uint64_t seq_max = ql_udp_seq_max(&acc, s->rx.highest, hi_ns, mono);
		uint64_t dgrams = 0;
		for (int i = 0; i < n; i++) {
			size_t got = mm[i].msg_len;
			int64_t arr = fallback;
			size_t seg = got;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mm[i].msg_hdr); c;
			     c = CMSG_NXTHDR(&mm[i].msg_hdr, c)) {
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
					struct timespec ts;
					memcpy(&ts, CMSG_DATA(c), sizeof ts);
					arr = (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
				} else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
					int gs = 0;
					memcpy(&gs, CMSG_DATA(c), sizeof gs);
					if (gs > 0)
						seg = (size_t)gs;
				}
			}
			for (size_t off = 0; off < got; off += seg) {
				size_t len = got - off < seg ? got - off : seg;
				ql_udp_hdr h;
				dgrams++;
				const char *d = (const char *)iov[i].iov_base + off;
				/* A qoslab client's connect message repeated after
				 * the test began (its reply came late) is 41 bytes:
				 * not a runt, but its cookie is no sequence number. */
				if ((len == 4 + QL_COOKIE_SIZE || len == 4) && ql_udp_connect_msg_ok(d, 4))
					continue;
				if (len < hdr_min || ql_udp_hdr_decode(d, len, seq64, &h) < 0) {
					ql_udp_rx_invalid(&s->rx);   /* runt */
					continue;
				}
				if (t->udp_tag) {
					int tagged = len >= hdr_min + QL_UDP_TAG_BYTES &&
						     ql_udp_tag_get(d, seq64) == t->udp_tag_val;
					if (tagged)
						tag_needed = 1;
					else if (tag_needed) {
						ql_udp_rx_invalid(&s->rx);
						continue;
					}
				}
				uint64_t seq = seq64 ? h.seq
						     : ql_seq_extend32(s->rx.highest, (uint32_t)h.seq);
				if (seq == 0 || seq > seq_max) {
					ql_udp_rx_invalid(&s->rx);
					continue;
				}
				if (seq > s->rx.highest)
					hi_ns = mono;
				int64_t sent_ns = (int64_t)h.sec * QL_NS_PER_S + (int64_t)h.usec * 1000;
				ql_udp_rx_packet(&s->rx, seq, len, sent_ns, arr);
			}
		}
		pthread_mutex_unlock(&s->mu);
		atomic_fetch_add_explicit(&s->packets, dgrams, memory_order_relaxed);
		atomic_store(&s->last_rx_ns, ql_now_ns());
	}
	free(buf);
}

static void *stream_main(void *arg)
{
	ql_stream *s = arg;
	int64_t u0, s0, u1, s1;
	s->run_ns = ql_now_ns();
	thread_cpu(&u0, &s0);
	if (s->t->proto == QL_PROTO_TCP) {
		if (s->sender)
			tcp_send_loop(s);
		else
			tcp_recv_loop(s);
	} else {
		if (s->sender)
			udp_send_loop(s);
		else
			udp_recv_loop(s);
	}
	thread_cpu(&u1, &s1);
	s->cpu_user_ns = u1 - u0;
	s->cpu_sys_ns = s1 - s0;
	s->done_ns = ql_now_ns();
	atomic_store(&s->done, 1);
	return NULL;
}

/* ---------------------------------------------------------- reporter --- */

static void entry_finish(ql_entry *x)
{
	x->bits_per_second = ql_bits_per_second(x->bytes, x->seconds);
}

static void snapshot_stream(ql_test *t, ql_stream *s, int64_t now, ql_entry *x,
			    double secs, int omit_end)
{
	memset(x, 0, sizeof *x);
	x->id = s->id;
	x->dir = s->dir;
	x->role = s->sender ? QL_ROLE_SENDER : QL_ROLE_RECEIVER;
	x->side = t->side;
	x->seconds = secs;
	if (t->proto == QL_PROTO_UDP && !s->sender) {
		ql_udp_counts c;
		double jit = 0;
		int mark_rc = 0;
		ql_err me;
		pthread_mutex_lock(&s->mu);
		/* The warm-up ends with this snapshot: keep which interval books
		 * each sequence number near the boundary from here on, so the
		 * books can be split at the sender's boundary at the end. */
		if (omit_end)
			mark_rc = ql_udp_rx_mark_omit(&s->rx, &me);
		ql_udp_rx_snapshot(&s->rx, realtime_ns(), &c, &jit);
		uint64_t samples = s->rx.jitter.samples;
		pthread_mutex_unlock(&s->mu);
		if (mark_rc < 0)
			add_warning(t, "stream %d: %s; lost + unique may differ from sent "
				    "near the end of the warm-up", s->id, me.msg);
		x->bytes = c.unique_bytes;
		x->packets = c.packets;
		x->unique_packets = c.unique_packets;
		x->lost_packets = c.lost_packets;
		x->duplicate_packets = c.duplicate_packets;
		x->out_of_order_packets = c.out_of_order_packets;
		x->late_packets = c.late_packets;
		x->invalid_packets = c.invalid_packets;
		x->valid |= QL_E_PACKETS | QL_E_UDPRX;
		if (samples >= 2) {
			x->jitter_ms = jit;
			x->valid |= QL_E_JITTER;
		}
	} else {
		uint64_t b = atomic_load(&s->bytes), p = atomic_load(&s->packets),
			 w = atomic_load(&s->writes);
		if (omit_end && t->proto == QL_PROTO_UDP && s->sender && t->prm.bandwidth_bps &&
		    t->omit_ns > 0) {
			/* A paced sender's warm-up holds the slots scheduled
			 * before its end (slot j at j x length / rate); one
			 * sent at the boundary before this tick read the
			 * counter belongs to the measured part (2499 of 2500
			 * were counted after -O 1 at 10 Mbit/s). */
			unsigned __int128 bits_ns = (unsigned __int128)t->prm.len_bytes * 8 * QL_NS_PER_S;
			uint64_t warm = (uint64_t)(((unsigned __int128)(uint64_t)t->omit_ns *
						    t->prm.bandwidth_bps + bits_ns - 1) / bits_ns);
			if (p > warm) {
				/* (the bytes counter trails the packets one
				 * by at most a batch being added) */
				uint64_t d = (p - warm) * (uint64_t)t->prm.len_bytes;
				b = b > d ? b - d : 0;
				p = warm;
			} else {
				/* behind at the boundary: its next datagrams
				 * are warm-up slots sent late */
				s->warm_debt = warm - p;
			}
		} else if (s->warm_debt && p > s->snap_packets) {
			uint64_t d = p - s->snap_packets < s->warm_debt ? p - s->snap_packets
									: s->warm_debt;
			s->warm_debt -= d;
			s->snap_packets += d;
			s->snap_bytes += d * (uint64_t)t->prm.len_bytes;
		}
		x->bytes = b - s->snap_bytes;
		x->writes = w - s->snap_writes;
		s->snap_bytes = b;
		s->snap_writes = w;
		if (s->sender)   /* send calls; reads are not reported */
			x->valid |= QL_E_WRITES;
		if (t->proto == QL_PROTO_UDP) {
			x->packets = p - s->snap_packets;
			s->snap_packets = p;
			x->valid |= QL_E_PACKETS;
		}
	}
	if (t->proto == QL_PROTO_TCP && s->sender && s->fd >= 0) {
		ql_tcp_sample ts;
		if (ql_tcp_sample_read(s->fd, &ts, now, NULL) == 0 && ts.valid) {
			if (!s->tsum_init) {
				/* the kernel's counter starts at 0 on connect */
				ql_tcp_summary_init(&s->tsum, NULL);
				s->tsum_init = 1;
			}
			uint64_t d;
			if (ql_tcp_summary_add(&s->tsum, &ts, &d) == 0) {
				x->retransmits = d;
				x->valid |= QL_E_RETRANS;
			}
			if (ts.valid & QL_TCPS_RTT) {
				x->rtt_us = ts.rtt_us;
				x->rttvar_us = ts.rttvar_us;
				x->valid |= QL_E_RTT;
			}
			if (ts.valid & QL_TCPS_CWND) {
				x->snd_cwnd_bytes = ts.snd_cwnd_bytes;
				x->valid |= QL_E_CWND;
			}
			if ((ts.valid & QL_TCPS_PACING) && !ts.pacing_unlimited) {
				x->pacing_rate_bps = ts.pacing_rate_bps;
				x->valid |= QL_E_PACING;
			}
			if (ts.valid & QL_TCPS_DELIVERY) {
				x->delivery_rate_bps = ts.delivery_rate_bps;
				x->valid |= QL_E_DELIVERY;
			}
		}
	}
	entry_finish(x);
}

/* Add entry x (direction d, role r) into the running sum *s, counting the
 * entries, those with retransmits and those with jitter (for the means). */
static void entry_add(ql_entry *s, int *present, const ql_entry *x, int d,
		      int r, int *ncnt, int *nret, int *njit)
{
	if (!*present) {
		*present = 1;
		s->dir = d;
		s->role = r;
		s->side = x->side;
		s->valid = x->valid & (QL_E_PACKETS | QL_E_WRITES | QL_E_UDPRX);
	}
	(*ncnt)++;
	s->bytes += x->bytes;
	s->packets += x->packets;
	s->writes += x->writes;
	if (x->seconds > s->seconds)
		s->seconds = x->seconds;
	if (x->valid & QL_E_RETRANS) {
		s->retransmits += x->retransmits;
		(*nret)++;
	}
	s->unique_packets += x->unique_packets;
	s->lost_packets += x->lost_packets;
	s->duplicate_packets += x->duplicate_packets;
	s->out_of_order_packets += x->out_of_order_packets;
	s->late_packets += x->late_packets;
	s->invalid_packets += x->invalid_packets;
	if (x->valid & QL_E_JITTER) {
		s->jitter_ms += x->jitter_ms;
		(*njit)++;
	}
}

static void interval_sums(ql_interval *iv)
{
	memset(iv->sum_present, 0, sizeof iv->sum_present);
	memset(iv->sum, 0, sizeof iv->sum);
	int njit[2][2] = { { 0 } };
	int nret[2][2] = { { 0 } }, ncnt[2][2] = { { 0 } };
	for (int i = 0; i < iv->nentries; i++) {
		ql_entry *x = &iv->entries[i];
		int d = x->dir & 1, r = x->role & 1;
		entry_add(&iv->sum[d][r], &iv->sum_present[d][r], x, d, r,
			  &ncnt[d][r], &nret[d][r], &njit[d][r]);
	}
	for (int d = 0; d < 2; d++)
		for (int r = 0; r < 2; r++) {
			ql_entry *s = &iv->sum[d][r];
			if (!iv->sum_present[d][r])
				continue;
			if (nret[d][r] == ncnt[d][r] && nret[d][r] > 0)
				s->valid |= QL_E_RETRANS;
			if (njit[d][r]) {
				s->jitter_ms /= njit[d][r];
				s->valid |= QL_E_JITTER;
			}
			if (s->seconds <= 0)
				s->seconds = iv->seconds;
			entry_finish(s);
		}
}

/* Append an interval covering [last_snap, now]; publish unless held. */
/* Copy iv (deep) and append it to the live queue; caller holds t->mu. */
static ql_interval *live_append(ql_test *t, const ql_interval *iv, int extra)
{
	if (t->nlive == t->clive) {
		int nc = t->clive ? t->clive * 2 : 16;
		ql_interval *n = realloc(t->live, (size_t)nc * sizeof *n);
		if (!n)
			return NULL;
		t->live = n;
		t->clive = nc;
	}
	ql_interval *c = &t->live[t->nlive];
	*c = *iv;
	c->entries = calloc((size_t)(iv->nentries + extra) + 1, sizeof *c->entries);
	if (!c->entries)
		return NULL;
	memcpy(c->entries, iv->entries, (size_t)iv->nentries * sizeof *c->entries);
	t->nlive++;
	return c;
}

static int64_t grid_slot(const ql_test *t, double start_s);
static void entry_accumulate(ql_entry *x, const ql_entry *y);

/* Grid slots [*s0, *s1) that an interval covers (at least one). */
static void iv_slots(const ql_test *t, const ql_interval *iv, int64_t *s0, int64_t *s1)
{
	*s0 = grid_slot(t, iv->start_s);
	*s1 = grid_slot(t, iv->end_s);
	if (*s1 <= *s0)
		*s1 = *s0 + 1;
}

/* Fold the peer interval b's entries into iv (room for cap entries): an
 * entry of a stream and role iv already holds from that side accumulates
 * (two peer intervals in one local one), others are appended. The caller
 * recomputes the sums. */
static void fold_peer(ql_interval *iv, int cap, const ql_interval *b, int side)
{
	for (int i = 0; i < b->nentries; i++) {
		ql_entry y = b->entries[i];
		if (y.seconds <= 0)
			y.seconds = b->seconds;
		y.side = side;
		entry_finish(&y);
		int found = 0;
		for (int m = 0; m < iv->nentries; m++) {
			ql_entry *x = &iv->entries[m];
			if (x->side == y.side && x->id == y.id && x->role == y.role) {
				entry_accumulate(x, &y);
				found = 1;
				break;
			}
		}
		if (!found && iv->nentries < cap)
			iv->entries[iv->nentries++] = y;
	}
}

/* Queue local interval iv (slots [s0, s1)) as a live record with the
 * pending peer intervals of those slots (with last: of every later slot
 * too, the peer measured longer). Peer intervals of earlier slots came
 * after their record was released: the live view leaves them out (the
 * final result has them). Caller holds t->mu. */
static void live_emit(ql_test *t, const ql_interval *iv, int64_t s0, int64_t s1, int last,
		      int missing)
{
	int extra = 0;
	for (int j = 0; j < t->nrlive; j++)
		if (last || grid_slot(t, t->rlive[j].start_s) < s1)
			extra += t->rlive[j].nentries;
	ql_interval *c = live_append(t, iv, extra);
	if (c) {
		c->peer_live = t->peer_live;
		c->peer_missing = missing;
	}
	int keep = 0;
	for (int j = 0; j < t->nrlive; j++) {
		ql_interval *b = &t->rlive[j];
		int64_t g = grid_slot(t, b->start_s);
		if (!last && g >= s1) {
			t->rlive[keep++] = *b;
			continue;
		}
		if (c && g >= s0)
			fold_peer(c, iv->nentries + extra, b, !t->side);
		ql_interval_clear(b);
	}
	t->nrlive = keep;
	if (c)
		interval_sums(c);
}

/* Release ticked local intervals to the live queue, oldest first: one
 * goes when the peer's live series covers its slots, or hold_ns after its
 * end (its peer entries then show as missing), or at once when the peer
 * sends no live series (a stock iperf3). Caller holds t->mu. */
static void live_release(ql_test *t, int64_t now)
{
	while (t->side == QL_SIDE_CLIENT && t->nrel < t->npub) {
		const ql_interval *iv = &t->iv[t->nrel];
		int64_t s0, s1;
		iv_slots(t, iv, &s0, &s1);
		int64_t due = t->start_ns + (int64_t)llround(iv->end_s * 1e9) + t->hold_ns;
		int waiting = t->peer_live && t->peer_upto < s1;
		if (waiting && now < due)
			break;
		live_emit(t, iv, s0, s1, 0, waiting);
		t->nrel++;
	}
}

static void take_snapshot_at(ql_test *t, int publish, int64_t now, int64_t nominal)
{
	ql_interval iv;
	memset(&iv, 0, sizeof iv);
	iv.start_s = (double)(t->last_snap_ns - t->start_ns) / 1e9;
	iv.end_s = (double)(now - t->start_ns) / 1e9;
	iv.seconds = (double)(now - t->last_snap_ns) / 1e9;
	/* The last interval of a timed TCP test sits on the grid's end; its
	 * seconds say how long its bytes took, the bounded tail included. */
	if (t->proto == QL_PROTO_TCP && !t->limited && now > planned_end_ns(t) &&
	    t->last_snap_ns < planned_end_ns(t))
		iv.end_s = (double)(planned_end_ns(t) - t->start_ns) / 1e9;
	/* Omitted: the interval's grid end lies inside the warm-up. */
	iv.omitted = t->omit_ns > 0 && nominal <= t->start_ns + t->omit_ns;
	/* The last omitted one: the grid's next tick lies beyond the warm-up
	 * (maybe_tick skips the ticks that passed). */
	int omit_end = iv.omitted && now >= t->start_ns + t->omit_ns;
	iv.entries = calloc((size_t)t->nstreams, sizeof *iv.entries);
	if (iv.entries) {
		iv.nentries = t->nstreams;
		for (int i = 0; i < t->nstreams; i++)
			snapshot_stream(t, &t->st[i], now, &iv.entries[i], iv.seconds,
					omit_end);
	}
	interval_sums(&iv);
	t->last_snap_ns = now;
	pthread_mutex_lock(&t->mu);
	if (t->niv == t->civ) {
		int nc = t->civ ? t->civ * 2 : 16;
		ql_interval *n = realloc(t->iv, (size_t)nc * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&t->mu);
			ql_interval_clear(&iv);
			return;
		}
		t->iv = n;
		t->civ = nc;
	}
	t->iv[t->niv++] = iv;
	if (publish) {
		t->npub = t->niv;
		live_release(t, ql_now_ns());
		pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&t->mu);
}


static int local_has(ql_test *t, int sender);

/* The last interval ends when the last byte was counted: the senders'
 * stop, or the last arrival during the drain (the idle rest of the drain
 * is not measurement time). */
static void final_snapshot(ql_test *t, int64_t send_end_ns)
{
	int64_t end = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		/* a sender's TCP_INFO keeps meaning something until its data
		 * is acknowledged (done_ns, after the join) */
		int64_t l = s->sender ? s->done_ns : atomic_load(&s->last_rx_ns);
		if (l > end)
			end = l;
	}
	/* The control thread's stop time only stands in for senders that
	 * never ran: it comes later than anything counted, and a final
	 * interval reaching it would hold no bytes (regress 004). */
	if (end == 0 && local_has(t, 1))
		end = send_end_ns;
	int64_t now = ql_now_ns();
	if (end > now)
		end = now;
	/* A timed TCP test whose tick at the planned end has fired: its tail
	 * ended within the slack, and the grid has no interval after its end
	 * (a slow link's queue made three more, regress 017). */
	if (t->proto == QL_PROTO_TCP && !t->limited && t->niv > 0 &&
	    t->last_snap_ns >= planned_end_ns(t)) {
		t->end_ns = t->last_snap_ns;
		return;
	}
	if (end <= t->last_snap_ns && t->niv > 0) {
		/* Nothing was counted after the last tick (it fired during the
		 * drain, after the last arrival): an interval from there to now
		 * would be idle waiting with no bytes (regress 004). */
		t->end_ns = t->last_snap_ns;
		return;
	}
	if (end < t->last_snap_ns)
		end = t->last_snap_ns;
	if (end == t->last_snap_ns && end < now)
		end = now;   /* never a zero-length interval */
	t->end_ns = end;
	take_snapshot_at(t, 0, end, end);
}

/* The latest moment anything was counted: a running sender counts until
 * now, a joined one until its data was acknowledged, a receiver until its
 * last arrival. */
static int64_t last_activity_ns(ql_test *t, int64_t now)
{
	int64_t a = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		int64_t l = !s->sender ? atomic_load(&s->last_rx_ns) :
			    s->th_started ? now : s->done_ns;
		/* a timed TCP sender writes nothing after the planned end (its
		 * acknowledgement wait is no measured time) */
		if (s->sender && t->proto == QL_PROTO_TCP && l > planned_end_ns(t))
			l = planned_end_ns(t);
		if (l > a)
			a = l;
	}
	return a;
}

/* When the next grid tick is due. A tick at the planned end of a timed test
 * would leave a sliver of an interval after it, so it waits one slack: the
 * final snapshot closes that interval if the test ends by then; a test that
 * goes on (a receiver draining, a sender waiting for its acknowledgements)
 * gets it a little late instead of one double-length interval. */
static int64_t tick_due(ql_test *t, int64_t *nominal)
{
	int64_t next = ql_grid_tick_ns(t->start_ns, t->omit_ns, t->period_ns, t->tick_k);
	int64_t planned = t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
	int64_t slack = end_slack_ns(t);
	if (nominal)
		*nominal = next;
	/* a timed TCP test's grid ends with the planned end's tick (a control
	 * thread held up in a read once let the tick after it fire in the
	 * tail) */
	if (t->proto == QL_PROTO_TCP && !t->limited && next >= planned + slack)
		return INT64_MAX;
	if (!t->limited && next > planned - slack && next < planned + slack)
		/* a timed TCP test's tail is bounded: the final snapshot
		 * normally takes this tick */
		return next + (t->proto == QL_PROTO_TCP ? tcp_tail_ns(t) : slack);
	return next;
}

static void maybe_tick(ql_test *t)
{
	int64_t now = ql_now_ns();
	int64_t next;
	int64_t due = tick_due(t, &next);
	if (now < due)
		return;
	int64_t end = now;
	if (due > next) {
		/* The tick at the planned end, held back one slack: the interval
		 * closes at the grid point or the last thing counted after it,
		 * not at the idle end of the slack (a receiver whose data
		 * stopped at the planned end would read low, regress 004). */
		int64_t a = last_activity_ns(t, now);
		end = a > next ? a : next;
		if (end > now || end <= t->last_snap_ns)
			end = now;
	}
	take_snapshot_at(t, 1, end, next);
	/* Skip grid points that passed while we were busy (stay on the grid). */
	while (ql_grid_tick_ns(t->start_ns, t->omit_ns, t->period_ns, t->tick_k) <= now)
		t->tick_k++;
}

static int64_t next_tick(ql_test *t)
{
	return tick_due(t, NULL);
}

/* When a control loop must look again: the next tick, or the planned end
 * of a timed test (the tick there waits a slack; the senders' stop does
 * not). */
static int64_t wake_at(ql_test *t)
{
	int64_t w = next_tick(t);
	int64_t planned = t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
	if (!t->limited && planned > ql_now_ns() && planned < w)
		w = planned;
	return w;
}

/* ------------------------------------------------------- test objects --- */

static ql_test *test_new(int side)
{
	ql_test *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->side = side;
	t->ctl_fd = -1;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	ql_params_init(&t->prm);
	t->udp_batch = 32;
	t->connect_timeout_ns = CTL_TIMEOUT_NS;
	return t;
}

static int streams_alloc(ql_test *t, ql_err *e)
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

static void streams_join(ql_test *t, int senders, int receivers)
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
static void streams_abort(ql_test *t)
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
static void test_close_sockets(ql_test *t)
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

static void test_release(ql_test *t)
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

/* Start the stream threads not yet started; receivers_only starts just
 * the receiving ones. */
static int start_workers(ql_test *t, int receivers_only, ql_err *e)
{
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (s->th_started || (receivers_only && s->sender))
			continue;
		int rc = pthread_create(&s->th, NULL, stream_main, s);
		if (rc != 0)
			return ql_err_set(e, rc, NULL, "cannot start stream thread: %s", strerror(rc));
		s->th_started = 1;
	}
	return 0;
}

static int local_has(ql_test *t, int sender)
{
	for (int i = 0; i < t->nstreams; i++)
		if (t->st[i].sender == sender)
			return 1;
	return 0;
}

static int all_done(ql_test *t, int sender)
{
	for (int i = 0; i < t->nstreams; i++)
		if (t->st[i].sender == sender && !atomic_load(&t->st[i].done))
			return 0;
	return 1;
}

static uint64_t received_bytes(ql_test *t, int dir)
{
	uint64_t b = 0;
	for (int i = 0; i < t->nstreams; i++)
		if (!t->st[i].sender && t->st[i].dir == dir)
			b += atomic_load(&t->st[i].bytes);
	return b;
}

static uint64_t received_packets(ql_test *t, int dir)
{
	uint64_t n = 0;
	for (int i = 0; i < t->nstreams; i++)
		if (!t->st[i].sender && t->st[i].dir == dir)
			n += atomic_load(&t->st[i].packets);
	return n;
}

/* Sleep until `until` (or cond), ticking the grid meanwhile. */
static int read_peer_interval(ql_test *t);
static int fail_io(ql_test *t, int rc, const char *what);

/* Server: send the intervals ticked since the last call to a qoslab
 * client (the live series). */
static int ship_live(ql_test *t)
{
	while (t->side == QL_SIDE_SERVER && t->peer == QL_PEER_QOSLAB && t->nshipped < t->niv) {
		char *js = ql_interval_encode(&t->iv[t->nshipped]);
		int rc = js ? ql_io_write_state(t->ctl_fd, QL_ST_QL_INTERVAL,
						ql_now_ns() + CTL_TIMEOUT_NS, NULL) : 0;
		if (js && rc == 0)
			rc = ql_io_write_json(t->ctl_fd, js, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
		free(js);
		if (rc < 0)
			return fail_io(t, rc, "sending an interval");
		t->nshipped++;
	}
	return 0;
}

/* Client: take the server's live records that are waiting on the control
 * connection, and only those (a peek at the state byte: every other state
 * is left for the protocol loop). */
static void take_live(ql_test *t)
{
	signed char st;
	while (t->side == QL_SIDE_CLIENT && t->peer_live && t->ctl_fd >= 0 &&
	       recv(t->ctl_fd, &st, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && st == QL_ST_QL_INTERVAL) {
		int state;
		if (ql_io_read_state(t->ctl_fd, &state, ql_now_ns() + CTL_TIMEOUT_NS, NULL) < 0 ||
		    read_peer_interval(t) < 0)
			return;
	}
}

/* Tick while a test winds down (senders waiting for their acknowledgements,
 * receivers draining); the live series keeps flowing both ways meanwhile, so
 * the records of the tail have both ends' entries too. */
static void wait_ticking(ql_test *t, int64_t until, int (*cond)(ql_test *))
{
	for (;;) {
		maybe_tick(t);
		ship_live(t);
		take_live(t);
		if (atomic_load(&t->stop_req) || (cond && cond(t)))
			return;
		int64_t now = ql_now_ns();
		if (now >= until)
			return;
		int64_t w = next_tick(t);
		if (w > until)
			w = until;
		if (w > now + 10 * MS)
			w = now + 10 * MS;
		ql_sleep_until_ns(w, NULL, NULL);
	}
}

static int receivers_eof(ql_test *t)
{
	return all_done(t, 0);
}

static int senders_done(ql_test *t)
{
	return all_done(t, 1);
}

/* Stopped senders wait (bounded) until their data is acknowledged; the
 * grid keeps ticking meanwhile, so the sending socket's TCP_INFO covers
 * every interval in which the receiver still gets data (case 008). */
static void wait_senders(ql_test *t)
{
	wait_ticking(t, INT64_MAX, senders_done);
	streams_join(t, 1, 0);
}

/* TCP receivers: until every stream saw EOF or nothing came for the drain
 * time; UDP: the drain time after the sender's end. */
static void drain_receivers(ql_test *t)
{
	if (!local_has(t, 0))
		return;
	int64_t t0 = ql_now_ns();
	if (t->proto == QL_PROTO_UDP) {
		wait_ticking(t, t0 + t->drain_ns, NULL);
	} else {
		int64_t cap = t0 + TCP_DRAIN_CAP_NS;
		/* a timed test: until the grid end's slack, but the data
		 * already in the socket is read (at least 20 ms) */
		if (!t->limited) {
			int64_t c = planned_end_ns(t) + tcp_tail_ns(t);
			if (c < t0 + 20 * MS)
				c = t0 + 20 * MS;
			if (c < cap)
				cap = c;
		}
		for (;;) {
			wait_ticking(t, ql_now_ns() + 20 * MS, receivers_eof);
			if (receivers_eof(t) || atomic_load(&t->stop_req))
				break;
			int64_t now = ql_now_ns(), last = t0;
			for (int i = 0; i < t->nstreams; i++) {
				int64_t l = atomic_load(&t->st[i].last_rx_ns);
				if (!t->st[i].sender && l > last)
					last = l;
			}
			if (now - last >= t->drain_ns || now >= cap)
				break;
		}
	}
	atomic_store(&t->recv_stop, 1);
	streams_join(t, 0, 1);
}

static void default_drain(ql_test *t)
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
static void live_hold(ql_test *t)
{
	int64_t h = 300 * MS;
	ql_tcp_sample ts;
	if (t->ctl_fd >= 0 && ql_tcp_sample_read(t->ctl_fd, &ts, 0, NULL) == 0 &&
	    (ts.valid & QL_TCPS_RTT))
		h += 2LL * ts.rtt_us * 1000;
	t->hold_ns = h < 3 * QL_NS_PER_S ? h : 3 * QL_NS_PER_S;
}

/* ------------------------------------------------------------ results --- */

/* Local per-stream totals over the non-omitted intervals. */
static void local_totals(ql_test *t, ql_entry *out)
{
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		ql_entry *x = &out[i];
		memset(x, 0, sizeof *x);
		x->id = s->id;
		x->dir = s->dir;
		x->role = s->sender ? QL_ROLE_SENDER : QL_ROLE_RECEIVER;
		x->side = t->side;
		int nret = 0, nint = 0;
		double jit = 0, from_s = -1;
		int has_jit = 0;
		for (int k = 0; k < t->niv; k++) {
			ql_interval *iv = &t->iv[k];
			if (iv->omitted || i >= iv->nentries)
				continue;
			ql_entry *y = &iv->entries[i];
			if (from_s < 0)
				from_s = iv->start_s;
			nint++;
			x->valid |= y->valid & (QL_E_PACKETS | QL_E_WRITES | QL_E_UDPRX);
			x->bytes += y->bytes;
			x->seconds += iv->seconds;
			x->packets += y->packets;
			x->writes += y->writes;
			if (y->valid & QL_E_RETRANS) {
				x->retransmits += y->retransmits;
				nret++;
			}
			x->unique_packets += y->unique_packets;
			x->lost_packets += y->lost_packets;
			x->duplicate_packets += y->duplicate_packets;
			x->out_of_order_packets += y->out_of_order_packets;
			x->late_packets += y->late_packets;
			x->invalid_packets += y->invalid_packets;
			if (y->valid & QL_E_JITTER) {
				jit = y->jitter_ms;   /* the running estimate at the end */
				has_jit = 1;
			}
		}
		/* The span over which the bytes were counted, on this side's
		 * clock from the end of the warm-up: a sender's ends when its
		 * last write returned (not when the acks came), a receiver's
		 * when it read its last byte (the tail included). The receiver
		 * reads the last byte after that write returned and, forward,
		 * started its clock first; in reverse it started one control
		 * message later, which the last byte's trip over the same
		 * path (behind the queued data) outlasts. So receiver seconds
		 * >= sender seconds (case 019). */
		int64_t last = s->sender ? s->last_tx_ns : atomic_load(&s->last_rx_ns);
		/* A timed test measures until its planned end (or its earlier
		 * stop) even when the last datagram of a slow flow went out
		 * before it: 9 datagrams of 100 kbit/s in 1 s are not 9 over
		 * the 0.94 s from the first to the last. */
		if (!t->limited) {
			int64_t planned = t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
			if (t->end_ns > 0 && t->end_ns < planned)
				planned = t->end_ns;
			if (planned > last)
				last = planned;
			/* and a TCP receiver's bytes after the last interval's
			 * end (a slow link's tail) are not counted */
			if (t->proto == QL_PROTO_TCP && t->end_ns > 0 && last > t->end_ns)
				last = t->end_ns;
		}
		double span = (double)(last - t->start_ns) / 1e9 - from_s;
		if (from_s >= 0 && last > t->start_ns && span > 0 && x->bytes > 0)
			x->seconds = span;
		if (nret && nret == nint)
			x->valid |= QL_E_RETRANS;
		if (has_jit) {
			x->jitter_ms = jit;
			x->valid |= QL_E_JITTER;
		}
		if (s->tsum_init && s->tsum.rtt_samples) {
			x->min_rtt_us = s->tsum.min_rtt_us;
			x->max_rtt_us = s->tsum.max_rtt_us;
			x->mean_rtt_us = (uint32_t)llround(ql_tcp_summary_mean_rtt_us(&s->tsum));
			x->max_snd_cwnd_bytes = s->tsum.max_snd_cwnd_bytes;
			x->valid |= QL_E_RTTSUM;
		}
		x->buf = s->sender ? s->sndbuf : s->rcvbuf;
		entry_finish(x);
	}
}

/* CPU use of this end, after its workers were joined. Each thread's CPU
 * time covers its whole life (receivers start before the test's clock,
 * senders wait for their acknowledgements, receivers drain after it), so
 * it is divided by the wall time that covers those lives, not by the
 * test's duration: a 1-datagram test once read 460 % on 2 cores. A
 * thread's own share is its CPU over its own life. */
static void cpu_local(ql_test *t, ql_cpu_result *c)
{
	int64_t u1, s1, now = ql_now_ns();
	thread_cpu(&u1, &s1);
	int64_t user = u1 - t->ctl_cpu_user0, sys = s1 - t->ctl_cpu_sys0;
	int64_t from = t->start_ns;
	double busiest = ql_cpu_pct(user + sys, now - t->start_ns);
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (!s->th_started && !s->done_ns)
			continue;
		user += s->cpu_user_ns;
		sys += s->cpu_sys_ns;
		if (s->run_ns > 0 && s->run_ns < from)
			from = s->run_ns;
		double own = ql_cpu_pct(s->cpu_user_ns + s->cpu_sys_ns,
					(s->done_ns > s->run_ns ? s->done_ns : now) - s->run_ns);
		if (own > busiest)
			busiest = own;
	}
	c->present = 1;
	c->user_pct = ql_cpu_pct(user, now - from);
	c->system_pct = ql_cpu_pct(sys, now - from);
	c->total_pct = c->user_pct + c->system_pct;
	c->busiest_thread_pct = busiest > 100 ? 100 : busiest;
	c->has_busiest = 1;
}

static const char *side_label(int side);

/* A paced UDP sender that fell behind its schedule by more than its slack
 * dropped the missed slots (no bursts): say so once per side, with the
 * share and the worst stream. */
static void warn_skipped_slots(ql_test *t)
{
	uint64_t skipped = 0, planned = 0;
	int n = 0, worst = -1;
	double worst_pct = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (!s->sender)
			continue;
		uint64_t p = s->planned_slots;
		planned += p;
		if (s->skipped_slots == 0)
			continue;
		double pct = 100.0 * (double)s->skipped_slots / (double)p;
		skipped += s->skipped_slots;
		n++;
		if (pct > worst_pct) {
			worst_pct = pct;
			worst = s->id;
		}
	}
	if (n == 0)
		return;
	add_warning(t, "%s's senders fell behind their schedule and dropped %llu of %llu datagram "
		    "slots (%.2f %%; %d stream%s, the worst stream %d: %.2f %%): a busy CPU or a "
		    "full socket or qdisc queue on the sending host, not loss on the path",
		    side_label(t->side), (unsigned long long)skipped, (unsigned long long)planned,
		    100.0 * (double)skipped / (double)planned, n, n == 1 ? "" : "s", worst, worst_pct);
}

/* Every sequence number a receiving stream booked (unique or lost), the
 * warm-up included. */
static uint64_t udp_booked_packets(ql_test *t, int i)
{
	uint64_t n = 0;
	for (int k = 0; k < t->niv; k++)
		if (i < t->iv[k].nentries)
			n += t->iv[k].entries[i].unique_packets + t->iv[k].entries[i].lost_packets;
	return n;
}

/* What one of our sending streams counted as measured (after the warm-up). */
static uint64_t udp_measured_sent(ql_test *t, int i)
{
	uint64_t n = 0;
	for (int k = 0; k < t->niv; k++)
		if (!t->iv[k].omitted && i < t->iv[k].nentries)
			n += t->iv[k].entries[i].packets;
	return n;
}

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 && n < (1 << 20) ? (int)n : 0;
}

/* The kernel's boot id ("" when unreadable): two ends with the same id run
 * on one host and share its CPUs (loopback, namespaces on one machine). */
static void host_boot_id(char *out, size_t len)
{
	out[0] = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = 0;
	else
		out[0] = 0;
	fclose(f);
}

/* Our results object for the peer. */
static char *encode_local(ql_test *t, const ql_cpu_result *cpu)
{
	ql_peer_results r;
	memset(&r, 0, sizeof r);
	r.cpu_total_pct = cpu->total_pct;
	r.cpu_user_pct = cpu->user_pct;
	r.cpu_system_pct = cpu->system_pct;
	r.has_busiest = 1;
	r.cpus = online_cpus();
	host_boot_id(r.boot_id, sizeof r.boot_id);
	r.busiest_thread_pct = cpu->busiest_thread_pct;
	r.sender_has_retransmits = t->proto == QL_PROTO_TCP && local_has(t, 1);
	if (t->prm.congestion[0])
		copy_str(r.congestion_used, sizeof r.congestion_used, t->prm.congestion);
	ql_entry *tot = calloc((size_t)t->nstreams + 1, sizeof *tot);
	ql_peer_stream *ps = calloc((size_t)t->nstreams + 1, sizeof *ps);
	char *out = NULL;
	if (!tot || !ps)
		goto done;
	local_totals(t, tot);
	double dur = t->end_ns > t->start_ns + t->omit_ns
		     ? (double)(t->end_ns - t->start_ns - t->omit_ns) / 1e9 : 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_peer_stream *p = &ps[i];
		ql_entry *x = &tot[i];
		p->id = x->id;
		p->bytes = x->bytes;
		p->retransmits = (x->valid & QL_E_RETRANS) ? (int64_t)x->retransmits : -1;
		if (t->proto == QL_PROTO_UDP) {
			/* iperf3's convention: packets over the whole test,
			 * the warm-up's share in omitted_packets; errors are
			 * the measured losses only (an iperf3 3.12 sender
			 * shows them as they come). */
			uint64_t measured = x->role == QL_ROLE_SENDER ? x->packets
					    : x->unique_packets + x->lost_packets;
			if (x->role == QL_ROLE_SENDER) {
				p->packets = atomic_load(&t->st[i].packets);
			} else {
				p->packets = udp_booked_packets(t, i);
				p->errors = (int64_t)x->lost_packets;
				p->jitter_s = x->jitter_ms / 1000.0;
			}
			p->omitted_packets = p->packets > measured ? p->packets - measured : 0;
		}
		p->start_time_s = 0;
		p->end_time_s = x->seconds > 0 ? x->seconds : dur;
	}
	r.streams = ps;
	r.nstreams = t->nstreams;
	r.entries = tot;
	r.nentries = t->nstreams;
	r.duration_s = dur;
	r.intervals = t->iv;
	r.nintervals = t->niv;
	r.warnings = t->warn;
	r.nwarnings = t->nwarn;
	out = ql_results_encode(&r, t->peer == QL_PEER_QOSLAB);
done:
	free(tot);
	free(ps);
	return out;
}

static const ql_peer_stream *peer_stream(const ql_peer_results *pr, int id)
{
	for (int i = 0; i < pr->nstreams; i++)
		if (pr->streams[i].id == id)
			return &pr->streams[i];
	return NULL;
}

static const ql_entry *peer_entry(const ql_peer_results *pr, int id, int role)
{
	for (int i = 0; i < pr->nentries; i++)
		if (pr->entries[i].id == id && pr->entries[i].role == role)
			return &pr->entries[i];
	return NULL;
}

/* Move one sequence number's booking between the warm-up and the measured
 * intervals (ql_udp_rx_omit_split). */
typedef struct omit_mover {
	ql_test *t;
	int i;          /* stream index */
	int k0;         /* first measured interval */
	int bad;        /* a record did not hold what the books said */
} omit_mover;

static int entry_take(ql_entry *x, const ql_udp_move *m, uint64_t len)
{
	if (m->lost) {
		if (x->lost_packets < 1)
			return -1;
		x->lost_packets--;
		return 0;
	}
	/* out_of_order <= unique holds afterwards too */
	if (x->unique_packets < 1 || x->packets < 1 || x->bytes < len ||
	    (m->out_of_order ? x->out_of_order_packets < 1
			     : x->out_of_order_packets >= x->unique_packets))
		return -1;
	x->unique_packets--;
	x->packets--;
	x->bytes -= len;
	if (m->out_of_order)
		x->out_of_order_packets--;
	return 0;
}

static void entry_give(ql_entry *x, const ql_udp_move *m, uint64_t len)
{
	if (m->lost) {
		x->lost_packets++;
		return;
	}
	x->unique_packets++;
	x->packets++;
	x->bytes += len;
	if (m->out_of_order)
		x->out_of_order_packets++;
}

static void omit_move(void *ctx, const ql_udp_move *m)
{
	omit_mover *o = ctx;
	ql_test *t = o->t;
	int src = m->index < (uint32_t)t->niv ? (int)m->index : t->niv - 1;
	int dst = m->to_omitted ? o->k0 - 1 : o->k0;
	if (o->i >= t->iv[dst].nentries) {
		o->bad = 1;
		return;
	}
	uint64_t len = (uint64_t)t->prm.len_bytes;
	if (m->index == QL_UDP_MOVE_WARMUP) {
		/* Received before the books marked the warm-up's end: it is in
		 * one of the warm-up intervals, the later ones the likelier. */
		ql_udp_move w = *m;
		for (src = o->k0 - 1; src >= 0; src--) {
			if (o->i >= t->iv[src].nentries)
				continue;
			ql_entry *x = &t->iv[src].entries[o->i];
			/* in order or not is unknown: whichever the record has */
			w.out_of_order = 0;
			if (entry_take(x, &w, len) == 0)
				break;
			w.out_of_order = 1;
			if (entry_take(x, &w, len) == 0)
				break;
		}
		if (src < 0)
			o->bad = 1;
		else
			entry_give(&t->iv[dst].entries[o->i], &w, len);
		return;
	}
	if (src == dst)
		return;   /* the finish share, folded into the first measured one */
	if (o->i >= t->iv[src].nentries || entry_take(&t->iv[src].entries[o->i], m, len) < 0) {
		o->bad = 1;
		return;
	}
	entry_give(&t->iv[dst].entries[o->i], m, len);
}

/* Datagrams a peer's sending stream counted in its warm-up, or -1 when its
 * results do not tell: a qoslab peer's extras (its total minus its measured
 * count), iperf3's omitted_packets, or, from iperf3 3.12 (which sends
 * neither), its total minus its measured bytes over the datagram length. */
static int64_t peer_sender_warmup(ql_test *t, const ql_peer_results *pr,
				  const ql_peer_stream *ps, int id)
{
	const ql_entry *pe = peer_entry(pr, id, QL_ROLE_SENDER);
	if (pe && (pe->valid & QL_E_PACKETS))
		return pe->packets <= ps->packets ? (int64_t)(ps->packets - pe->packets) : -1;
	if (ps->has_omitted)
		return ps->omitted_packets <= ps->packets ? (int64_t)ps->omitted_packets : -1;
	uint64_t len = (uint64_t)t->prm.len_bytes;
	if (len > 0 && ps->bytes % len == 0 && ps->bytes / len <= ps->packets)
		return (int64_t)(ps->packets - ps->bytes / len);
	return -1;
}

/* End the receiver's warm-up where the sender ended it (caller holds
 * t->mu; this takes s->mu inside it): the datagrams the
 * sender counted in its warm-up are the first P sequence numbers (P = its
 * total minus its measured count, from a qoslab peer's extras), so the
 * measured lost + unique == the sender's measured sent exactly. A stock
 * iperf3 peer sends no measured count: the split stays on our clock. */
static void udp_omit_split(ql_test *t, ql_stream *s, int i, const ql_peer_results *pr,
			   const ql_peer_stream *ps)
{
	if (!s->rx.omit_rec)
		return;
	int k0 = 0;
	while (k0 < t->niv && t->iv[k0].omitted)
		k0++;
	if (k0 == 0 || k0 >= t->niv)
		return;
	int64_t warm = peer_sender_warmup(t, pr, ps, s->id);
	if (warm < 0) {
		add_warning(t, "stream %d: the sender's results do not say how many datagrams "
			    "it sent in its warm-up; the warm-up ends on this side's clock", s->id);
		return;
	}
	omit_mover o = { t, i, k0, 0 };
	ql_err e;
	pthread_mutex_lock(&s->mu);
	int rc = ql_udp_rx_omit_split(&s->rx, (uint64_t)warm, (uint32_t)k0,
				      omit_move, &o, &e);
	pthread_mutex_unlock(&s->mu);
	if (rc < 0)
		add_warning(t, "stream %d: %s; lost + unique may differ from sent near "
			    "the end of the warm-up", s->id, e.msg);
	if (o.bad)
		add_warning(t, "stream %d: the warm-up split found an interval record "
			    "short of what the books booked in it", s->id);
	if (rc > 0)
		for (int k = 0; k < t->niv; k++) {
			if (i < t->iv[k].nentries)
				entry_finish(&t->iv[k].entries[i]);
			interval_sums(&t->iv[k]);
		}
}

/* Close the UDP books of our receiving streams with the peer's sent counts
 * and fold the final share (the remaining loss) into the last interval. */
static void close_udp_books(ql_test *t, const ql_peer_results *pr)
{
	if (t->proto != QL_PROTO_UDP)
		return;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (s->sender)
			continue;
		const ql_peer_stream *ps = pr ? peer_stream(pr, s->id) : NULL;
		if (!ps)
			continue;
		ql_err e;
		pthread_mutex_lock(&s->mu);
		int rc = ql_udp_rx_finish(&s->rx, ps->packets, &e);
		ql_udp_counts c;
		double jit;
		ql_udp_rx_snapshot(&s->rx, realtime_ns(), &c, &jit);
		pthread_mutex_unlock(&s->mu);
		if (rc < 0) {
			add_warning(t, "stream %d: %s", s->id, e.msg);
			continue;
		}
		s->sent_final = ps->packets;
		/* The interval records are shared with the live queue (a
		 * client's next_interval copies them under t->mu). */
		pthread_mutex_lock(&t->mu);
		if (t->niv > 0) {
			ql_entry *x = &t->iv[t->niv - 1].entries[i];
			x->lost_packets += c.lost_packets;
			x->unique_packets += c.unique_packets;
			x->bytes += c.unique_bytes;
			x->packets += c.packets;
			x->duplicate_packets += c.duplicate_packets;
			x->late_packets += c.late_packets;
			x->invalid_packets += c.invalid_packets;
			x->out_of_order_packets += c.out_of_order_packets;
			entry_finish(x);
			interval_sums(&t->iv[t->niv - 1]);
		}
		udp_omit_split(t, s, i, pr, ps);
		pthread_mutex_unlock(&t->mu);
	}
}

/* The peer's totals for one stream as an entry (qoslab extras or iperf3's
 * basic keys). */
static int remote_entry(ql_test *t, const ql_stream *s, ql_entry *x)
{
	const ql_peer_results *pr = &t->peer_res;
	int role = s->sender ? QL_ROLE_RECEIVER : QL_ROLE_SENDER;
	const ql_entry *pe = peer_entry(pr, s->id, role);
	if (pe) {
		*x = *pe;
		x->dir = s->dir;
		x->side = !t->side;
		if (t->proto == QL_PROTO_UDP && role == QL_ROLE_RECEIVER &&
		    t->side == QL_SIDE_SERVER && (x->valid & QL_E_UDPRX)) {
			/* A client sends its results before it learns our
			 * sent count, so its books were open: what it had
			 * not received by then it rules lost at its close,
			 * and so do we (lost + unique == sent at both ends). */
			uint64_t sent = udp_measured_sent(t, (int)(s - t->st));
			if (x->unique_packets <= sent && x->unique_packets + x->lost_packets < sent) {
				x->lost_packets = sent - x->unique_packets;
				x->lost_pct = ql_loss_pct(x->lost_packets, sent);
			}
		}
		return 1;
	}
	const ql_peer_stream *ps = peer_stream(pr, s->id);
	if (!ps)
		return 0;
	memset(x, 0, sizeof *x);
	x->id = s->id;
	x->dir = s->dir;
	x->role = role;
	x->side = !t->side;
	x->bytes = ps->bytes;
	x->seconds = ps->end_time_s - ps->start_time_s;
	if (role == QL_ROLE_SENDER && ps->retransmits >= 0 && t->proto == QL_PROTO_TCP &&
	    pr->sender_has_retransmits == 1) {
		x->retransmits = (uint64_t)ps->retransmits;
		x->valid |= QL_E_RETRANS;
	}
	if (t->proto == QL_PROTO_UDP) {
		/* packets counts the whole test (iperf3's convention): the
		 * measured share is what the peer's sender left after its
		 * warm-up */
		int64_t warm = role == QL_ROLE_SENDER ? peer_sender_warmup(t, pr, ps, s->id) : 0;
		x->packets = warm > 0 ? ps->packets - (uint64_t)warm : ps->packets;
		x->valid |= QL_E_PACKETS;
		if (role == QL_ROLE_RECEIVER) {
			/* An iperf3 receiver: our measured sent and its losses.
			 * With a warm-up iperf3 3.12 counts the warm-up's
			 * losses in errors (no omitted_errors), but its bytes
			 * are those received after its warm-up: then the
			 * datagrams it got are bytes / length. */
			uint64_t sent = udp_measured_sent(t, (int)(s - t->st));
			uint64_t len = (uint64_t)t->prm.len_bytes, lost;
			if (t->omit_ns > 0 && !ps->has_omitted && len > 0) {
				uint64_t got = ps->bytes / len;
				lost = sent > got ? sent - got : 0;
			} else {
				int64_t le = ps->errors - (ps->has_omitted ? ps->omitted_errors : 0);
				lost = le > 0 ? (uint64_t)le : 0;
			}
			if (lost > sent)
				lost = sent;
			x->lost_packets = lost;
			x->unique_packets = sent - lost;
			x->packets = x->unique_packets;   /* it reports no duplicates */
			x->valid |= QL_E_UDPRX | QL_E_JITTER;
			x->jitter_ms = ps->jitter_s * 1000.0;
			/* iperf3 counts every received byte; goodput from the
			 * unique count is the honest figure. */
			x->bytes = x->unique_packets * (uint64_t)t->prm.len_bytes;
		}
	}
	entry_finish(x);
	return 1;
}

/* Add y's counts into x (same stream and role, consecutive spans). */
static void entry_accumulate(ql_entry *x, const ql_entry *y)
{
	x->bytes += y->bytes;
	x->seconds += y->seconds;
	x->packets += y->packets;
	x->writes += y->writes;
	if ((x->valid & QL_E_RETRANS) && (y->valid & QL_E_RETRANS))
		x->retransmits += y->retransmits;
	else
		x->valid &= ~QL_E_RETRANS;
	x->unique_packets += y->unique_packets;
	x->lost_packets += y->lost_packets;
	x->duplicate_packets += y->duplicate_packets;
	x->out_of_order_packets += y->out_of_order_packets;
	x->late_packets += y->late_packets;
	x->invalid_packets += y->invalid_packets;
	/* Gauges (rtt, cwnd, rates, jitter): the later sample wins. */
	unsigned gauges = QL_E_RTT | QL_E_CWND | QL_E_PACING | QL_E_DELIVERY | QL_E_JITTER;
	if (y->valid & QL_E_RTT) {
		x->rtt_us = y->rtt_us;
		x->rttvar_us = y->rttvar_us;
	}
	if (y->valid & QL_E_CWND)
		x->snd_cwnd_bytes = y->snd_cwnd_bytes;
	if (y->valid & QL_E_PACING)
		x->pacing_rate_bps = y->pacing_rate_bps;
	if (y->valid & QL_E_DELIVERY)
		x->delivery_rate_bps = y->delivery_rate_bps;
	if (y->valid & QL_E_JITTER)
		x->jitter_ms = y->jitter_ms;
	x->valid |= y->valid & (gauges | QL_E_PACKETS | QL_E_WRITES | QL_E_UDPRX);
	entry_finish(x);
}

/* Grid slot of an interval that starts start_s after its side's start: the
 * number of grid ticks at or before that moment. Both ends tick the same
 * grid from their own start, so equal slots are the same stretch of the
 * test, whatever the offset between the two clocks' starts. */
static int64_t grid_slot(const ql_test *t, double start_s)
{
	int64_t at = (int64_t)llround(start_s * 1e9) + 1000, p = t->period_ns;
	if (p <= 0 || at < 0)
		return 0;
	if (t->omit_ns <= 0 || at < t->omit_ns)
		return at / p;
	int64_t m = (t->omit_ns + p - 1) / p - 1;
	return m + 1 + (at - t->omit_ns) / p;
}

/*
 * The result's interval list is the local timeline; each of the peer's
 * intervals is folded into the local interval of the same grid slot (the
 * last one for a peer that measured longer, e.g. a draining receiver or a
 * sender waiting for its acknowledgements). Matching slots, not end times:
 * the peer's clock started earlier or later by a control message's trip,
 * and an end near a tick would land one interval off, leaving one local
 * interval without the peer's entries and another with two (case 008).
 * Peer entries keep their own seconds and bits_per_second, and every peer
 * entry lands exactly once, so each side's Σ intervals == its totals.
 */
static void merge_remote_intervals(ql_test *t, ql_result *r)
{
	const ql_peer_results *pr = &t->peer_res;
	int n = t->niv ? t->niv : pr->nintervals;
	const ql_interval *base = t->niv ? t->iv : pr->intervals;
	int local = t->niv > 0;
	r->intervals = calloc((size_t)n + 1, sizeof *r->intervals);
	if (!r->intervals)
		return;
	for (int k = 0; k < n; k++) {
		ql_interval *iv = &r->intervals[k];
		*iv = base[k];
		int cap = base[k].nentries + (local ? t->nstreams : 0) + 1;
		iv->entries = calloc((size_t)cap, sizeof *iv->entries);
		iv->nentries = 0;
		if (!iv->entries)
			continue;
		for (int i = 0; i < base[k].nentries; i++) {
			iv->entries[iv->nentries] = base[k].entries[i];
			if (!local)
				iv->entries[iv->nentries].side = !t->side;
			iv->nentries++;
		}
	}
	r->nintervals = n;
	int k = 0;
	for (int j = 0; local && j < pr->nintervals; j++) {
		const ql_interval *b = &pr->intervals[j];
		int64_t g = grid_slot(t, b->start_s), s0, s1;
		/* the local interval whose slots [s0, s1) hold g (as live) */
		for (; k < n - 1; k++) {
			iv_slots(t, &r->intervals[k], &s0, &s1);
			if (s1 > g)
				break;
		}
		/* Omitted peer intervals only go where omitted local ones are. */
		if (b->omitted)
			while (k > 0 && !r->intervals[k].omitted)
				k--;
		else
			while (k < n - 1 && r->intervals[k].omitted)
				k++;
		ql_interval *iv = &r->intervals[k];
		if (iv->entries)
			fold_peer(iv, base[k].nentries + t->nstreams, b, !t->side);
	}
	for (int q = 0; q < n; q++)
		interval_sums(&r->intervals[q]);
}

/* The loss a server completed in a client's open UDP books (remote_entry)
 * goes into the client's last measured interval of that stream too, so
 * the intervals still add up to the totals. */
static void complete_peer_intervals(ql_test *t, ql_result *r)
{
	if (t->proto != QL_PROTO_UDP || t->side != QL_SIDE_SERVER || !r->intervals)
		return;
	for (int i = 0; i < r->nstreams; i++) {
		const ql_entry *tot = &r->streams[i].receiver;
		if (tot->side == t->side || !(tot->valid & QL_E_UDPRX))
			continue;
		uint64_t sum = 0;
		ql_entry *last = NULL;
		ql_interval *last_iv = NULL;
		for (int k = 0; k < r->nintervals; k++) {
			ql_interval *iv = &r->intervals[k];
			if (iv->omitted || !iv->entries)
				continue;
			for (int j = 0; j < iv->nentries; j++) {
				ql_entry *x = &iv->entries[j];
				if (x->id == tot->id && x->role == QL_ROLE_RECEIVER && x->side != t->side) {
					sum += x->lost_packets;
					last = x;
					last_iv = iv;
				}
			}
		}
		if (last && tot->lost_packets > sum) {
			last->lost_packets += tot->lost_packets - sum;
			interval_sums(last_iv);
		}
	}
}

static const char *side_label(int side)
{
	return side == QL_SIDE_SERVER ? "the server" : "the client";
}

static void build_result(ql_test *t, const ql_cpu_result *cpu_local_r)
{
	ql_result *r = &t->res;
	ql_peer_results *pr = &t->peer_res;
	r->proto = t->proto;
	r->reverse = t->prm.reverse;
	r->bidir = t->prm.bidir;
	r->parallel = t->prm.parallel;
	copy_str(r->host, sizeof r->host, t->host);
	r->port = t->port;
	if (t->srv) {
		r->server_test = t->srv_no;
		r->peer_port = t->peer_addr.ss_family == AF_INET6
				       ? ntohs(((const struct sockaddr_in6 *)&t->peer_addr)->sin6_port)
				       : ntohs(((const struct sockaddr_in *)&t->peer_addr)->sin_port);
	}
	r->local_role = t->side;
	r->start_time_unix_s = t->start_unix;
	r->omit_s = t->prm.omit_s;
	r->duration_s = t->end_ns > t->start_ns + t->omit_ns
			? (double)(t->end_ns - t->start_ns - t->omit_ns) / 1e9 : 0;
	if (t->side == QL_SIDE_CLIENT)
		t->peer = pr->qoslab ? QL_PEER_QOSLAB : QL_PEER_IPERF3;
	r->peer = t->peer;
	copy_str(r->title, sizeof r->title, t->prm.title);
	ql_entry *loc = calloc((size_t)t->nstreams + 1, sizeof *loc);
	r->streams = calloc((size_t)t->nstreams + 1, sizeof *r->streams);
	if (!loc || !r->streams) {
		free(loc);
		return;
	}
	local_totals(t, loc);
	r->nstreams = t->nstreams;
	int nsum[2][2] = { { 0 } }, nret[2][2] = { { 0 } }, njit[2][2] = { { 0 } };
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		ql_stream_result *sr = &r->streams[i];
		sr->id = s->id;
		sr->dir = s->dir;
		ql_entry rem;
		int has_rem = remote_entry(t, s, &rem);
		if (s->sender) {
			sr->sender = loc[i];
			sr->has_sender = 1;
			if (has_rem) {
				sr->receiver = rem;
				sr->has_receiver = 1;
			}
		} else {
			sr->receiver = loc[i];
			sr->has_receiver = 1;
			if (has_rem) {
				sr->sender = rem;
				sr->has_sender = 1;
			}
		}
		/* UDP receiver loss relative to the sender's count. */
		if (sr->has_receiver && (sr->receiver.valid & QL_E_UDPRX)) {
			uint64_t sent = sr->receiver.unique_packets + sr->receiver.lost_packets;
			sr->receiver.lost_pct = ql_loss_pct(sr->receiver.lost_packets, sent);
		}
		for (int k = 0; k < 2; k++) {
			if (!(k == 0 ? sr->has_sender : sr->has_receiver))
				continue;
			ql_entry *x = k == 0 ? &sr->sender : &sr->receiver;
			int d = s->dir;
			entry_add(&r->tot[d][k], &r->tot_present[d][k], x, d, k,
				  &nsum[d][k], &nret[d][k], &njit[d][k]);
		}
	}
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < 2; k++) {
			ql_entry *tt = &r->tot[d][k];
			if (!r->tot_present[d][k])
				continue;
			if (nret[d][k] && nret[d][k] == nsum[d][k])
				tt->valid |= QL_E_RETRANS;
			if (njit[d][k]) {
				tt->jitter_ms /= njit[d][k];
				tt->valid |= QL_E_JITTER;
			}
			if (tt->valid & QL_E_UDPRX)
				tt->lost_pct = ql_loss_pct(tt->lost_packets,
							   tt->lost_packets + tt->unique_packets);
			entry_finish(tt);
		}
	free(loc);
	merge_remote_intervals(t, r);
	complete_peer_intervals(t, r);
	ql_cpu_result *mine = t->side == QL_SIDE_CLIENT ? &r->cpu_client : &r->cpu_server;
	ql_cpu_result *theirs = t->side == QL_SIDE_CLIENT ? &r->cpu_server : &r->cpu_client;
	*mine = *cpu_local_r;
	if (pr->nstreams || pr->qoslab) {
		theirs->present = 1;
		theirs->total_pct = pr->cpu_total_pct;
		theirs->user_pct = pr->cpu_user_pct;
		theirs->system_pct = pr->cpu_system_pct;
		theirs->has_busiest = pr->has_busiest;
		theirs->busiest_thread_pct = pr->busiest_thread_pct;
	}
	r->cpu_limited = (mine->has_busiest && mine->busiest_thread_pct >= QL_CPU_LIMITED_PCT) ||
			 (theirs->has_busiest && theirs->busiest_thread_pct >= QL_CPU_LIMITED_PCT);
	/* Many threads can fill every core while none is busy alone: the
	 * host as a whole (both ends, when they share it) counts too. */
	char boot[40];
	host_boot_id(boot, sizeof boot);
	int ncpu = online_cpus();
	int shared = boot[0] && strcmp(boot, pr->boot_id) == 0;
	double host_pct = mine->total_pct + (shared ? theirs->total_pct : 0);
	int host_busy = ncpu > 0 && host_pct >= QL_CPU_LIMITED_PCT * ncpu;
	int peer_busy = !shared && pr->cpus > 0 &&
			theirs->total_pct >= QL_CPU_LIMITED_PCT * pr->cpus;
	if (host_busy || peer_busy) {
		r->cpu_limited = 1;
		add_warning(t, "CPU-limited: %s used %.0f %% of %d CPUs (the result may measure "
			    "the host, not the network)",
			    host_busy ? (shared ? "both ends on this host" : side_label(t->side))
				      : side_label(!t->side),
			    host_busy ? host_pct : theirs->total_pct, host_busy ? ncpu : pr->cpus);
	} else if (r->cpu_limited)
		add_warning(t, "CPU-limited: the busiest thread on %s used %.0f %% of a core "
			    "(the result may measure the host, not the network)",
			    mine->busiest_thread_pct >= theirs->busiest_thread_pct
			    ? side_label(t->side) : side_label(!t->side),
			    mine->busiest_thread_pct > theirs->busiest_thread_pct
			    ? mine->busiest_thread_pct : theirs->busiest_thread_pct);
	for (int i = 0; i < pr->nwarnings; i++)   /* they name their side */
		add_warning(t, "%s", pr->warnings[i]);
	r->warnings = t->warn;
	r->nwarnings = t->nwarn;
	t->warn = NULL;
	t->nwarn = 0;
}

/* Append peer interval iv (taken over) to the pending ones. Caller holds
 * t->mu. Returns 0, or -ENOMEM (iv cleared). */
static int rlive_push(ql_test *t, ql_interval *iv)
{
	if (t->nrlive == t->crlive) {
		int nc = t->crlive ? t->crlive * 2 : 8;
		ql_interval *n = realloc(t->rlive, (size_t)nc * sizeof *n);
		if (!n) {
			ql_interval_clear(iv);
			return -ENOMEM;
		}
		t->rlive = n;
		t->crlive = nc;
	}
	t->rlive[t->nrlive++] = *iv;
	return 0;
}

/* Publish every interval and mark the test over. */
static void test_finish(ql_test *t, int rc)
{
	pthread_mutex_lock(&t->mu);
	t->rc = rc;
	if (t->side == QL_SIDE_CLIENT) {
		/* The peer's intervals that only came with its results join the
		 * pending ones; every local interval not yet shown goes now with
		 * the peer's entries of its slots (the last one takes the rest). */
		const ql_peer_results *pr = &t->peer_res;
		for (int j = t->nrlive_total; j < pr->nintervals; j++) {
			ql_interval c = pr->intervals[j];
			c.entries = malloc(((size_t)c.nentries + 1) * sizeof *c.entries);
			if (!c.entries)
				break;
			memcpy(c.entries, pr->intervals[j].entries, (size_t)c.nentries * sizeof *c.entries);
			if (rlive_push(t, &c) < 0)
				break;
		}
		for (int k = t->nrel; k < t->niv; k++) {
			int64_t s0, s1;
			iv_slots(t, &t->iv[k], &s0, &s1);
			/* without the server's results (a failed exchange) the
			 * slots its live series did not reach stay missing */
			live_emit(t, &t->iv[k], s0, s1, k == t->niv - 1,
				  t->peer_live && !pr->qoslab && t->peer_upto < s1);
		}
		for (int j = 0; j < t->nrlive; j++)
			ql_interval_clear(&t->rlive[j]);
		t->nrlive = 0;
		t->nrel = t->niv;
	}
	t->npub = t->niv;
	t->finished = 1;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------- client --- */

static int fail_io(ql_test *t, int rc, const char *what)
{
	if (rc == -EINTR)
		return ql_err_set(&t->err, EINTR, "EINTR", "test stopped during %s", what);
	if (rc == -ETIMEDOUT)
		return ql_err_set(&t->err, ETIMEDOUT, NULL, "peer silent during %s (timed out)", what);
	if (rc == -ECONNRESET)
		return ql_err_set(&t->err, ECONNRESET, NULL, "peer closed the control connection during %s",
				  what);
	if (rc == -EMSGSIZE)
		return ql_err_set(&t->err, EMSGSIZE, NULL, "oversized message during %s", what);
	return ql_err_set(&t->err, -rc, NULL, "%s: %s", what, strerror(-rc));
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

/* Read a QL_ST_QL_INTERVAL body and keep it for the live queue. */
static int read_peer_interval(ql_test *t)
{
	char *js = NULL;
	size_t jl = 0;
	int rc = ql_io_read_json(t->ctl_fd, 1 << 20, &js, &jl, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
	if (rc < 0)
		return fail_io(t, rc, "reading a server interval");
	ql_interval iv;
	ql_err e;
	rc = ql_interval_parse(js, jl, &iv, &e);
	free(js);
	if (rc < 0)
		return 0;   /* a bad live record only costs the live view */
	int64_t g0, g1;
	iv_slots(t, &iv, &g0, &g1);
	pthread_mutex_lock(&t->mu);
	t->peer_live = 1;
	t->nrlive_total++;
	if (rlive_push(t, &iv) == 0 && g1 > t->peer_upto)
		t->peer_upto = g1;
	live_release(t, ql_now_ns());
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
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
		if (t->proto == QL_PROTO_TCP && t->limit_bytes &&
		    received_bytes(t, QL_DIR_REVERSE) >= t->limit_bytes)
			rcv_ok = 1;
		/* a stock iperf3 server sends until told TEST_END, which its
		 * own client sends once it received the limit */
		if (t->proto == QL_PROTO_UDP && t->limit_packets && !atomic_load(&t->peer_tags) &&
		    received_packets(t, QL_DIR_REVERSE) >= t->limit_packets)
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
		int ms = w > now ? (int)((w - now + MS - 1) / MS) : 0;
		if (wait_io(t->ctl_fd, POLLIN, ms) > 0) {
			int st;
			int rc = ql_io_read_state(t->ctl_fd, &st, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
			if (rc < 0)
				return fail_io(t, rc, "the test");
			if (st == QL_ST_QL_SENDER_DONE)
				sender_done_signal = 1;
			else if (st == QL_ST_QL_INTERVAL && (rc = read_peer_interval(t)) < 0)
				return rc;
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

static int exchange_results(ql_test *t, int client_first, ql_cpu_result *cpu)
{
	int rc;
	char *mine = NULL, *theirs = NULL;
	size_t tl = 0;
	int64_t dl = ql_now_ns() + CTL_TIMEOUT_NS;
	/* The peer's results can hold no more than this test could report:
	 * its streams, and intervals over the time it ran. Both ends start
	 * their clock when TEST_RUNNING leaves or arrives and read the other's
	 * results one trip after it encoded them, so the time this end ran
	 * until now covers the peer's; a peer that ends a long test early
	 * gets the caps of the short one. */
	ql_results_caps caps;
	double ran_s = t->start_ns ? (double)(ql_now_ns() - t->start_ns) / 1e9 : t->prm.time_s;
	ql_results_caps_for(t->nstreams, t->prm.interval_s, t->prm.omit_s, ran_s, &caps);
	if (client_first) {
		mine = encode_local(t, cpu);
		if (!mine)
			return ql_err_set(&t->err, ENOMEM, NULL, "out of memory");
		rc = ql_io_write_json(t->ctl_fd, mine, dl, NULL);
		free(mine);
		if (rc < 0)
			return fail_io(t, rc, "sending results");
		rc = ql_io_read_json(t->ctl_fd, caps.bytes, &theirs, &tl, dl, NULL);
		if (rc < 0)
			return fail_io(t, rc, "reading the server's results");
		rc = ql_results_parse_capped(theirs, tl, &caps, &t->peer_res, &t->err);
		free(theirs);
		if (rc < 0)
			return rc;
		close_udp_books(t, &t->peer_res);
		return 0;
	}
	rc = ql_io_read_json(t->ctl_fd, caps.bytes, &theirs, &tl, dl,
			     (const volatile int *)&t->stop_req);
	if (rc == -EMSGSIZE)
		return ql_err_set(&t->err, EMSGSIZE, NULL, "the client's results are longer than "
				  "the %zu bytes this test can need", caps.bytes);
	if (rc < 0)
		return fail_io(t, rc, "reading the client's results");
	rc = ql_results_parse_capped(theirs, tl, &caps, &t->peer_res, &t->err);
	free(theirs);
	if (rc < 0)
		return rc;
	close_udp_books(t, &t->peer_res);
	mine = encode_local(t, cpu);
	if (!mine)
		return ql_err_set(&t->err, ENOMEM, NULL, "out of memory");
	rc = ql_io_write_json(t->ctl_fd, mine, dl, NULL);
	free(mine);
	if (rc < 0)
		return fail_io(t, rc, "sending results");
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
	if (t->bind_device[0])
		setsockopt(t->ctl_fd, SOL_SOCKET, SO_BINDTODEVICE, t->bind_device,
			   (socklen_t)strlen(t->bind_device));
	if ((rc = bind_local(t->ctl_fd, ss.ss_family, t->bind_address, 0, &t->err)) < 0)
		return rc;
	rc = connect_timeout(t->ctl_fd, (struct sockaddr *)&ss, len, t->connect_timeout_ns,
			     (const volatile int *)&t->stop_req, &t->err, t->host, t->port);
	if (rc < 0)
		return rc;
	ql_cookie_make(t->cookie);
	rc = ql_io_write_full(t->ctl_fd, t->cookie, QL_COOKIE_SIZE, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
	if (rc < 0)
		return fail_io(t, rc, "sending the cookie");
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
	ql_cpu_result cpu;
	memset(&cpu, 0, sizeof cpu);
	for (;;) {
		int st;
		/* Once the test ran, a stop request only shortens it: the
		 * results exchange still happens (bounded by the deadline). */
		int64_t dl = ql_now_ns() + 30 * QL_NS_PER_S;
		rc = ql_io_read_state(t->ctl_fd, &st, dl, t->state == T_RUNNING ? NULL
					: (const volatile int *)&t->stop_req);
		if (rc == -EINTR && t->state == T_NEW)
			return fail_io(t, rc, "the handshake");
		if (rc < 0)
			return fail_io(t, rc, "the control exchange");
		switch (st) {
		case QL_ST_PARAM_EXCHANGE: {
			char *js = NULL;
			if ((rc = ql_params_to_json(&t->prm, &js, &t->err)) < 0)
				return rc;
			rc = ql_io_write_json(t->ctl_fd, js, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
			free(js);
			if (rc < 0)
				return fail_io(t, rc, "sending parameters");
			break;
		}
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
			/* Receive from now on: the server sends as soon as it has
			 * written TEST_RUNNING, and if that message is delayed (a
			 * lossy path retransmits it) the data must not overflow an
			 * unread socket (guest case 015, reverse: 271 of 2000
			 * datagrams lost to the receive buffer). */
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
			if ((rc = read_peer_interval(t)) < 0)
				return rc;
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

int ql_client_start(const ql_client_opts *o, ql_test **out, ql_err *e)
{
	*out = NULL;
	if (!o->host || !*o->host)
		return ql_err_usage(e, "opts.host: expected a host name or address");
	if (o->parallel < 1 || o->parallel > QL_PARALLEL_MAX)
		return ql_err_usage(e, "opts.parallel: expected 1..128, got %d", o->parallel);
	if (!(o->interval_s >= 0.1 && o->interval_s <= 3600))
		return ql_err_usage(e, "opts.interval_s: expected 0.1..3600, got %g", o->interval_s);
	if (!o->bytes && !o->packets && !(o->duration_s > 0 && o->duration_s <= 86400))
		return ql_err_usage(e, "opts.duration_s: expected (0, 86400], got %g", o->duration_s);
	if (!(o->omit_s >= 0 && o->omit_s <= 3600))
		return ql_err_usage(e, "opts.omit_s: expected 0..3600, got %g", o->omit_s);
	if (o->port < 1 || o->port > 65535)
		return ql_err_usage(e, "opts.port: expected 1..65535, got %d", o->port);
	if (o->proto == QL_PROTO_UDP && o->length_bytes &&
	    (o->length_bytes < QL_UDP_MIN_BYTES || o->length_bytes > QL_UDP_MAX_BYTES))
		return ql_err_usage(e, "opts.length_bytes: expected 16..65507 for UDP, got %d",
				    o->length_bytes);
	if (o->length_bytes < 0 || o->length_bytes > (1 << 24))
		return ql_err_usage(e, "opts.length_bytes: expected 1..16777216, got %d",
				    o->length_bytes);
	if (o->packets && o->proto != QL_PROTO_UDP)
		return ql_err_usage(e, "opts.packets: only for proto \"udp\" (use bytes for tcp)");
	if (o->reverse && o->bidir)
		return ql_err_usage(e, "opts.bidir: cannot be combined with opts.reverse");
	if (o->congestion && strlen(o->congestion) >= 16)
		return ql_err_usage(e, "opts.congestion: name too long");
	if (o->bind_device && strlen(o->bind_device) >= 16)
		return ql_err_usage(e, "opts.bind_device: interface names have at most 15 characters");
	ql_test *t = test_new(QL_SIDE_CLIENT);
	if (!t)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	copy_str(t->host, sizeof t->host, o->host);
	t->port = o->port;
	t->proto = o->proto;
	copy_str(t->netns, sizeof t->netns, o->netns);
	copy_str(t->bind_address, sizeof t->bind_address, o->bind_address);
	copy_str(t->bind_device, sizeof t->bind_device, o->bind_device);
	t->udp_batch = o->udp_batch > 0 ? o->udp_batch : 32;
	t->udp_gso = o->udp_gso;
	t->prm.udp_gso = o->udp_gso;
	if (o->connect_timeout_s > 0)
		t->connect_timeout_ns = (int64_t)(o->connect_timeout_s * 1e9);
	ql_params *p = &t->prm;
	p->udp = o->proto == QL_PROTO_UDP;
	p->omit_s = o->omit_s;
	t->limit_bytes = o->bytes;
	t->limit_packets = o->packets;
	t->limited = o->bytes || o->packets;
	p->time_s = t->limited ? 0 : o->duration_s;
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
	p->nodelay = o->nodelay;
	p->mss_bytes = o->mss_bytes;
	copy_str(p->congestion, sizeof p->congestion, o->congestion);
	copy_str(p->title, sizeof p->title, o->title);
	p->udp_counters_64bit = p->udp;
	copy_str(p->qoslab, sizeof p->qoslab, QL_ENGINE_VERSION);
	p->udp_drain_s = o->udp_drain_s;
	p->interval_s = o->interval_s;
	t->period_ns = (int64_t)(o->interval_s * 1e9);
	t->omit_ns = (int64_t)(o->omit_s * 1e9);
	/* qoslab peers are recognised from their results; assume iperf3 until
	 * then (only affects extras we send, which a stock peer ignores). */
	t->peer = QL_PEER_QOSLAB;
	int rc = streams_alloc(t, e);
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

void ql_test_stop(ql_test *t)
{
	if (t)
		atomic_store(&t->stop_req, 1);
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

/* ------------------------------------------------------------- server --- */

/* A connection from its accept on; while unidentified (no cookie of a
 * test, no accepted parameters) it is in the server's unid list, oldest
 * first, and its fd stays open until it leaves the list (so the listener
 * may shut it down under s->mu to evict it). */
typedef struct conn_arg {
	ql_server *s;
	int fd;
	uint64_t seq;
	struct sockaddr_storage peer;
	socklen_t plen;
	struct conn_arg *prev, *next;
	int listed, evicted, past_cookie;
	int64_t since_ns;
} conn_arg;

static int same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
static int same_group(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
static int unid_allowance(ql_server *s, const struct sockaddr_storage *peer);

static void srv_thread_exit(ql_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->threads--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static int peer_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return 0;
}

/* A peer's address as text (IPv4-mapped IPv6 addresses as IPv4). */
static void peer_host(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "";
	if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof host);
	else if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof host);
	copy_str(out, len, strncmp(host, "::ffff:", 7) == 0 ? host + 7 : host);
}

/* Caller holds s->mu: s->problem holds the new problem's line; it goes to
 * the ring too, with its peer and test number (0 = none). */
static void srv_problem_logged(ql_server *s, const struct sockaddr_storage *peer, uint64_t test)
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

/* Tell a peer why the server refuses or ends its test: the state byte
 * (SERVER_ERROR with iperf3's error number ierr and errno 0), then a
 * length-prefixed "qoslab-refused: why" that a qoslab client reads and a
 * stock iperf3 client, which stops at the state, never sees. */
static void srv_tell(int fd, int state, int ierr, const char *why)
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

static void srv_reject(ql_server *s, int fd, const struct sockaddr_storage *peer, int state,
		       const char *why)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (peer)
		peer_host(peer, host, sizeof host);
	if (state)
		srv_tell(fd, state, 0, why);
	close(fd);
	pthread_mutex_lock(&s->mu);
	s->rejected++;
	snprintf(s->problem, sizeof s->problem, "control connection rejected from %s port %d: %s",
		 host[0] ? host : "?", peer ? peer_port(peer) : 0, why);
	srv_problem_logged(s, peer, 0);
	pthread_mutex_unlock(&s->mu);
}

/* Caller holds s->mu. */
static void unid_unlink(ql_server *s, conn_arg *c)
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
static int unid_leave(ql_server *s, conn_arg *c)
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
static conn_arg *unid_victim(ql_server *s, const struct sockaddr_storage *peer)
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
static void unid_evict(ql_server *s, conn_arg *c, const char *limit, int value, int64_t now)
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
static int srv_full(ql_server *s, const struct sockaddr_storage *peer, char *why, size_t len)
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
		int64_t batch = UDP_TX_BATCH;
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

static void server_error(ql_test *t, int code, int eno)
{
	uint32_t v[2] = { htonl((uint32_t)code), htonl((uint32_t)eno) };
	if (ql_io_write_state(t->ctl_fd, QL_ST_SERVER_ERROR, ql_now_ns() + 200 * MS, NULL) == 0)
		ql_io_write_full(t->ctl_fd, v, sizeof v, ql_now_ns() + 200 * MS, NULL);
}

/* The parameters are in: refuse the test over a limit (telling the peer
 * which, and logging it), else count it as running from now on. */
static int srv_admit(ql_test *t)
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
	return ql_err_set(&t->err, state == QL_ST_SERVER_ERROR ? EINVAL : EBUSY, NULL,
			  "test refused: %s", why);
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
	int64_t silence = t->srv->o.idle_timeout_s > 0
			  ? (int64_t)(t->srv->o.idle_timeout_s * 1e9) : 30 * QL_NS_PER_S;
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
			if (st == QL_ST_TEST_END)
				break;
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
	int64_t idle = t->srv->o.idle_timeout_s > 0
		       ? (int64_t)(t->srv->o.idle_timeout_s * 1e9) : 30 * QL_NS_PER_S;
	const volatile int *stop = (const volatile int *)&t->srv->stop;
	rc = ql_io_write_state(t->ctl_fd, QL_ST_PARAM_EXCHANGE, ql_now_ns() + idle, stop);
	if (rc < 0)
		return fail_io(t, rc, "PARAM_EXCHANGE");
	char *js = NULL;
	size_t jl = 0;
	rc = ql_io_read_json(t->ctl_fd, QL_PARAMS_MAX_BYTES, &js, &jl, ql_now_ns() + idle, stop);
	if (rc == -EMSGSIZE)
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

static void *server_test_main(ql_test *t)
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
	if (s->o.one_off)
		atomic_store(&s->stop, 1);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	ql_test_free(t);
	return NULL;
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

static void *conn_main(void *arg)
{
	conn_arg *ca = arg;
	ql_server *s = ca->s;
	int fd = ca->fd;
	char cookie[QL_COOKIE_SIZE];
	char why[320];
	int64_t idle = s->o.idle_timeout_s > 0 ? (int64_t)(s->o.idle_timeout_s * 1e9)
					       : CTL_TIMEOUT_NS;
	int rc = read_cookie(ca, cookie, ql_now_ns() + idle);
	if (rc < 0 || !ql_cookie_valid(cookie)) {
		if (unid_leave(s, ca))
			close(fd);
		else
			srv_reject(s, fd, &ca->peer, rc < 0 ? 0 : QL_ST_ACCESS_DENIED,
				   rc == -ETIMEDOUT ? "no cookie within the idle timeout" :
				   rc < 0 ? "closed before sending its cookie" : "malformed cookie");
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

static int same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
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
static void group_key(const struct sockaddr_storage *ss, uint8_t key[9])
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

static int same_group(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	uint8_t ka[9], kb[9];
	group_key(a, ka);
	group_key(b, kb);
	return memcmp(ka, kb, 9) == 0;
}

/* Caller holds s->mu: the data connections the tests from `peer`'s group
 * still expect (tests in CREATE_STREAMS); that many unidentified
 * connections of the group are allowed over max_unidentified_per_address. */
static int unid_allowance(ql_server *s, const struct sockaddr_storage *peer)
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
static const struct sockaddr_storage *unid_global_victim_group(ql_server *s)
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

static int same_endpoint(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (!same_ip(a, b))
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_port ==
		       ((const struct sockaddr_in *)b)->sin_port;
	return ((const struct sockaddr_in6 *)a)->sin6_port ==
	       ((const struct sockaddr_in6 *)b)->sin6_port;
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
static void server_udp_accept(ql_server *s)
{
	char buf[64];
	struct sockaddr_storage peer;
	socklen_t pl = sizeof peer;
	ssize_t r = recvfrom(s->ufd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&peer, &pl);
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
		if (pf[1].revents & POLLIN)
			server_udp_accept(s);
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
	if (s->family == AF_INET6)
		setsockopt(s->ufd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	if (bind(s->ufd, (struct sockaddr *)&ss, len) < 0)
		return ql_err_set(e, errno, NULL, "bind UDP port %d: %s", s->port, strerror(errno));
	return 0;
}

int ql_server_start(const ql_server_opts *o, ql_server **out, ql_err *e)
{
	*out = NULL;
	if (o->port < -1 || o->port > 65535)
		return ql_err_usage(e, "opts.port: expected 0..65535, got %d", o->port);
	if (o->idle_timeout_s < 0 || o->idle_timeout_s > 86400)
		return ql_err_usage(e, "opts.idle_timeout_s: expected 0..86400");
	if (o->keep_results < 0 || o->keep_results > QL_KEEP_RESULTS_MAX)
		return ql_err_usage(e, "opts.keep_results: expected 0..%d, got %d",
				    QL_KEEP_RESULTS_MAX, o->keep_results);
	static const struct { const char *name; int hi; } lim[] = {
		{ "max_tests", 4096 }, { "max_tests_per_address", 4096 },
		{ "max_streams_per_address", 65536 }, { "max_unidentified", 65536 },
		{ "max_unidentified_per_address", 65536 },
	};
	const int val[] = { o->max_tests, o->max_tests_per_address, o->max_streams_per_address,
			    o->max_unidentified, o->max_unidentified_per_address };
	for (size_t i = 0; i < sizeof val / sizeof val[0]; i++)
		if (val[i] < 0 || val[i] > lim[i].hi)
			return ql_err_usage(e, "opts.%s: expected 1..%d (0 = default), got %d",
					    lim[i].name, lim[i].hi, val[i]);
	if (!(o->data_idle_s >= 0 && o->data_idle_s <= 86400))
		return ql_err_usage(e, "opts.data_idle_s: expected 0..86400 s (0 = default)");
	if (!(o->max_duration_s >= 0 && o->max_duration_s <= 31 * 86400.0))
		return ql_err_usage(e, "opts.max_duration_s: expected 0..2678400 s (0 = default)");
	if (o->test_buffer_bytes < 0)
		return ql_err_usage(e, "opts.test_buffer_bytes: expected >= 0 (0 = default)");
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
	s->lfd = s->ufd = -1;
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

void ql_server_limits(const ql_server *s, ql_server_opts *out)
{
	*out = s->o;
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
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
