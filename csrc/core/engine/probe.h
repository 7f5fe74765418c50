/*
 * probe.h - the latency probe's client (Lua-free): an isochronous
 * request/response probe on its own socket and thread, beside a test or
 * alone. Stands on probe_stats.h (samples), probe_wire.h (messages) and
 * err.h.
 *
 * Protocols: "udp" (default) - requests to a qoslab server's UDP port,
 * answered by its responder (probe_server.c); "icmp" - echo requests on an
 * unprivileged ping socket (SOCK_DGRAM, IPPROTO_ICMP / ICMPV6; where
 * net.ipv4.ping_group_range refuses it, a raw socket when the process may
 * open one), answered by any host; "tcp" - requests on one TCP connection
 * to a qoslab server's TCP port (its greeting where a cookie would go),
 * like netperf's TCP_RR but isochronous: a request goes every interval
 * whether or not the last was answered, so a stalled connection shows as
 * late and lost requests, not as a slower probe.
 *
 * Schedule: request k goes at start + k * interval (CLOCK_MONOTONIC); a
 * thread that wakes after its slot sends once and skips the slots it
 * missed (no catch-up burst). Timestamps: SO_TIMESTAMPING software TX
 * stamps taken as the request enters the packet scheduler (TX_SCHED, so
 * this host's own egress queue counts, as it does for an application; the
 * user-space clock just before the send where the kernel gives none) and
 * software RX stamps, both CLOCK_REALTIME. At most
 * QL_PROBE_MAX_SAMPLES requests are sent; past that the probe sends no
 * more (ql_probe_info's capped) and its books stay exact.
 */
#ifndef QL_PROBE_H
#define QL_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "probe_stats.h"

enum { QL_PROBE_UDP, QL_PROBE_ICMP, QL_PROBE_TCP };

#define QL_PROBE_MAX_SAMPLES ((size_t)1 << 20)
#define QL_PROBE_INTERVAL_DEFAULT_MS 10.0
#define QL_PROBE_IDLE_DEFAULT_S 2.0
#define QL_PROBE_TIMEOUT_DEFAULT_MS 2000.0
#define QL_PROBE_DURATION_DEFAULT_S 10.0
#define QL_PROBE_PAYLOAD_DEFAULT_BYTES 64
/* A probe that has no reply after this long (or timeout_ms, if longer)
 * fails at start (see ql_probe_start). */
#define QL_PROBE_FIRST_REPLY_MS 1000.0

/* Clock of the two ends */
enum { QL_CLOCK_UNSYNCED, QL_CLOCK_SHARED, QL_CLOCK_SYNCED };

typedef struct ql_probe_opts {
	const char *host;            /* required */
	int port;                    /* 1..65535, 0 = 5201; unused by ICMP */
	const char *proto;           /* "udp" (NULL) | "icmp" | "tcp" */
	double interval_ms;          /* 0 = QL_PROBE_INTERVAL_DEFAULT_MS */
	int tos;                     /* -1 = unset */
	int payload_bytes;           /* 0 = default */
	double idle_s;               /* < 0 = default (the caller's phases) */
	double timeout_ms;           /* 0 = default */
	int clock_synced;            /* -1 = not given */
	double duration_s;           /* the standalone probe's, 0 = default */
	const char *netns, *bind_address;
} ql_probe_opts;

void ql_probe_opts_init(ql_probe_opts *o);

/* QL_PROBE_* of a proto name (NULL = udp), -1 when unknown. */
int ql_probe_proto_of(const char *name);
extern const char *const ql_probe_proto_names[];   /* by QL_PROBE_*, NULL-ended */

/* The payload range of a proto: [min, max] bytes (UDP/TCP: the whole
 * message, header included; ICMP: the echo data). */
void ql_probe_payload_range(int proto, int *min, int *max);

/*
 * Every rule of the options (options.c's wording: "<prefix>.<key>:
 * expected ..., got ..."); standalone: the options of a probe alone (host
 * required, duration_s allowed); else the options of a probe beside a
 * test (host, netns and bind_address come from the test, duration_s from
 * its run). prefix names the table in messages ("opts", "opts.probe").
 */
int ql_probe_opts_validate(const ql_probe_opts *o, int standalone, const char *prefix,
			   ql_err *e);

typedef struct ql_probe ql_probe;

/*
 * Validate, resolve the host, open the socket (in o->netns), start the
 * thread, and wait for the first reply: at most max(QL_PROBE_FIRST_REPLY_MS,
 * timeout_ms). Failures (nil, message, code in Lua):
 *   EPROTONOSUPPORT  udp/tcp: no qoslab responder answers (e.g. a stock
 *                    iperf3 server: use proto "icmp")
 *   ETIMEDOUT        icmp: no echo reply
 *   EACCES           icmp: ping sockets refused by net.ipv4.ping_group_range
 *                    and no raw socket allowed (the message names the sysctl)
 *   ECONNREFUSED, ENOENT (no such namespace, unresolvable host), ...
 */
int ql_probe_start(const ql_probe_opts *o, ql_probe **out, ql_err *e);

/* Stop sending; wait for the replies still due (at most timeout_ms after
 * the last request), join the thread. Idempotent. */
void ql_probe_stop(ql_probe *p);

typedef struct ql_probe_info {
	int proto;
	double interval_ms, timeout_ms;
	int payload_bytes;
	int clock;                   /* QL_CLOCK_*, from the replies' boot id and
	                                clock_synced */
	int stopped, capped;
	uint64_t sent, replies, duplicates, bad_replies, send_errors;
	uint64_t bad_server_times;   /* replies whose server times did not fit
	                                their RTT (ql_probe_server_times_ok):
	                                RTT kept, hold and one-way delays not */
	uint64_t tx_kernel;          /* requests with a kernel TX stamp */
	uint64_t rx_kernel;          /* replies with a kernel RX stamp */
	int64_t first_tx_ns, now_rt_ns;  /* CLOCK_REALTIME */
} ql_probe_info;

void ql_probe_get_info(ql_probe *p, ql_probe_info *out);

/* A copy of the samples so far (malloc'd, caller frees; *n may be 0 with
 * *out NULL). Thread-safe: also while the probe runs. */
int ql_probe_samples(ql_probe *p, ql_probe_sample **out, size_t *n);

/* Stop (if running) and free. NULL is fine. */
void ql_probe_free(ql_probe *p);

#endif
