/*
 * probe_stats.h - the latency probe's samples and their statistics
 * (Lua-free, pure arithmetic, unit-tested from C: spec/c/test_probe_stats.c).
 * Stands on <stdint.h> only.
 *
 * A sample is one request: its send time and, once answered, the reply's
 * receive time and the server's two times. Summaries take the requests
 * sent within a span [from_ns, to_ns) (by client send time, CLOCK_REALTIME
 * ns) and count them as
 *   - a sample: answered within timeout_ns (reply receive - send);
 *   - late: answered, but after timeout_ns (not a sample);
 *   - lost: not answered, and sent before pending_ns (a request sent at or
 *     after pending_ns may still be answered: counted as neither). A
 *     finished probe passes pending_ns = INT64_MAX.
 * Duplicate replies are dropped by the client before they reach a sample.
 *
 * RTT = client receive - client send, both kernel software timestamps
 * where the kernel gave them: the raw round trip, as ping reports it, the
 * server's turnaround included (it is reported apart, as hold). One-way
 * delays use the server's two times: up = server receive - client send,
 * down = client receive - server send; they mean something only where both
 * ends read one clock (the caller decides: owd).
 *
 * Quantiles are nearest-rank on the sorted values: the p-quantile of n
 * values is the ceil(p * n)-th smallest (1-based; p50 of 4 values is the
 * 2nd). Mean is the arithmetic mean. All results are in milliseconds.
 *
 * Histogram: log-spaced buckets over RTT, QL_LAT_HIST_PER_DECADE per
 * decade, edges edge[k] = round(1000 * 10^(k / 10)) ns for k = 0 ..
 * QL_LAT_HIST_EDGES - 1 (1 us .. 100 s); bucket k counts edge[k] <= rtt <
 * edge[k + 1]; below counts rtt < 1 us, above rtt >= 100 s.
 */
#ifndef QL_PROBE_STATS_H
#define QL_PROBE_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Sample flags */
#define QL_PS_TX_KERNEL 1u          /* tx_ns is the kernel's TX stamp */
#define QL_PS_RX_KERNEL 2u          /* rx_ns is the kernel's RX stamp */
#define QL_PS_SERVER 4u             /* srv_rx_ns / srv_tx_ns are set */
#define QL_PS_BAD_SERVER 8u         /* the reply's server times were impossible:
                                       dropped (not QL_PS_SERVER), RTT kept */

/* How far a shared clock's one-way delay may fall below 0 (the two ends'
 * stamps are taken in different places: kernel and user space). */
#define QL_PROBE_SHARED_SLACK_NS 1000000LL

typedef struct ql_probe_sample {
	int64_t tx_ns;               /* client send, ns CLOCK_REALTIME */
	int64_t rx_ns;               /* client receive, 0 = no reply */
	int64_t srv_rx_ns, srv_tx_ns;
	uint32_t flags;
} ql_probe_sample;

typedef struct ql_lat_dist {
	int64_t n;                   /* values summarised (0: the rest is 0) */
	double min_ms, mean_ms, p50_ms, p90_ms, p99_ms, p999_ms, max_ms;
} ql_lat_dist;

#define QL_LAT_HIST_PER_DECADE 10
#define QL_LAT_HIST_EDGES 81        /* 1 us .. 100 s */

typedef struct ql_lat_hist {
	int64_t below, above;
	int64_t count[QL_LAT_HIST_EDGES - 1];
} ql_lat_hist;

typedef struct ql_lat_summary {
	int64_t samples, lost, late;
	ql_lat_dist rtt, up, down, hold;
	ql_lat_hist hist;
} ql_lat_summary;

/* The histogram's edges in ns (QL_LAT_HIST_EDGES of them, ascending). */
extern const int64_t ql_lat_hist_edge_ns[QL_LAT_HIST_EDGES];

/* The nearest-rank quantile of sorted v[n] (n >= 1) at permille / 1000
 * (500 = p50, 999 = p99.9): the ceil(permille * n / 1000)-th smallest. */
int64_t ql_lat_quantile(const int64_t *sorted, size_t n, int permille);

/* Summarise v[n] (ns, any order; sorted in place) into d (ms). */
void ql_lat_dist_of(int64_t *v, size_t n, ql_lat_dist *d);

/* The bucket of a value: -1 below the first edge, QL_LAT_HIST_EDGES - 1
 * at or above the last, else k with edge[k] <= v < edge[k + 1]. */
int ql_lat_hist_bucket(int64_t v_ns);

/*
 * Whether a reply's server times fit its round trip (tx_ns, rx_ns on our
 * own clock, srv_rx_ns, srv_tx_ns as the server wrote them): the hold
 * (server send - server receive) must lie in [0, RTT]; with a shared
 * clock (shared != 0) the one-way delays too: up = server receive - client
 * send and down = client receive - server send each >= -slack_ns (with
 * the hold in [0, RTT], up + hold + down = RTT then holds, each within
 * [-slack, RTT + slack]). Anything else is a peer's lie or a stepped clock:
 * 0, and the caller keeps the RTT but drops the server times.
 */
int ql_probe_server_times_ok(int64_t tx_ns, int64_t rx_ns, int64_t srv_rx_ns,
			     int64_t srv_tx_ns, int shared, int64_t slack_ns);

/*
 * Summarise the samples s[n] sent in [from_ns, to_ns) (see the top). owd:
 * also the one-way delays. hold (server turnaround) is summarised where
 * the server's times are known. Returns 0, or -ENOMEM.
 */
int ql_lat_summarize(const ql_probe_sample *s, size_t n, int64_t from_ns, int64_t to_ns,
		     int64_t timeout_ns, int64_t pending_ns, int owd, ql_lat_summary *out);

/* The same over the samples sent outside [from_ns, to_ns): a test's idle
 * phases, before and after its load. */
int ql_lat_summarize_outside(const ql_probe_sample *s, size_t n, int64_t from_ns,
			     int64_t to_ns, int64_t timeout_ns, int64_t pending_ns, int owd,
			     ql_lat_summary *out);

/* What the load added to delay: loaded RTT p50 - idle RTT p50 (ms) in
 * *out; -1 (nothing set) when either has no sample. */
int ql_lat_induced_ms(const ql_lat_summary *loaded, const ql_lat_summary *idle, double *out);

#endif
