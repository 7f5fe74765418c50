/*
 * probe_stats.c - the latency probe's statistics (probe_stats.h): nearest
 * rank quantiles, the log-spaced histogram, span summaries. Stands on
 * probe_stats.h and libc.
 */
#include "probe_stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* round(1000 * 10^(k / 10)) ns, k = 0 .. 80 (computed to 50 digits) */
const int64_t ql_lat_hist_edge_ns[QL_LAT_HIST_EDGES] = {
	1000LL, 1259LL, 1585LL, 1995LL, 2512LL,
	3162LL, 3981LL, 5012LL, 6310LL, 7943LL,
	10000LL, 12589LL, 15849LL, 19953LL, 25119LL,
	31623LL, 39811LL, 50119LL, 63096LL, 79433LL,
	100000LL, 125893LL, 158489LL, 199526LL, 251189LL,
	316228LL, 398107LL, 501187LL, 630957LL, 794328LL,
	1000000LL, 1258925LL, 1584893LL, 1995262LL, 2511886LL,
	3162278LL, 3981072LL, 5011872LL, 6309573LL, 7943282LL,
	10000000LL, 12589254LL, 15848932LL, 19952623LL, 25118864LL,
	31622777LL, 39810717LL, 50118723LL, 63095734LL, 79432823LL,
	100000000LL, 125892541LL, 158489319LL, 199526231LL, 251188643LL,
	316227766LL, 398107171LL, 501187234LL, 630957344LL, 794328235LL,
	1000000000LL, 1258925412LL, 1584893192LL, 1995262315LL, 2511886432LL,
	3162277660LL, 3981071706LL, 5011872336LL, 6309573445LL, 7943282347LL,
	10000000000LL, 12589254118LL, 15848931925LL, 19952623150LL, 25118864315LL,
	31622776602LL, 39810717055LL, 50118723363LL, 63095734448LL, 79432823472LL,
	100000000000LL,
};

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int64_t ql_lat_quantile(const int64_t *sorted, size_t n, int permille)
{
	/* rank = ceil(permille * n / 1000), 1-based, in integers: exact */
	uint64_t rank = ((uint64_t)permille * n + 999) / 1000;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

void ql_lat_dist_of(int64_t *v, size_t n, ql_lat_dist *d)
{
	memset(d, 0, sizeof *d);
	if (!n)
		return;
	qsort(v, n, sizeof *v, cmp_i64);
	long double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	d->n = (int64_t)n;
	d->min_ms = (double)v[0] / 1e6;
	d->max_ms = (double)v[n - 1] / 1e6;
	d->mean_ms = (double)(sum / n) / 1e6;
	d->p50_ms = (double)ql_lat_quantile(v, n, 500) / 1e6;
	d->p90_ms = (double)ql_lat_quantile(v, n, 900) / 1e6;
	d->p99_ms = (double)ql_lat_quantile(v, n, 990) / 1e6;
	d->p999_ms = (double)ql_lat_quantile(v, n, 999) / 1e6;
}

int ql_lat_hist_bucket(int64_t v)
{
	if (v < ql_lat_hist_edge_ns[0])
		return -1;
	if (v >= ql_lat_hist_edge_ns[QL_LAT_HIST_EDGES - 1])
		return QL_LAT_HIST_EDGES - 1;
	int lo = 0, hi = QL_LAT_HIST_EDGES - 1;   /* edge[lo] <= v < edge[hi] */
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;
		if (v >= ql_lat_hist_edge_ns[mid])
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

int ql_probe_server_times_ok(int64_t tx_ns, int64_t rx_ns, int64_t srv_rx_ns,
			     int64_t srv_tx_ns, int shared, int64_t slack_ns)
{
	/* a peer may write any 64 bits: with every stamp positive (as
	 * CLOCK_REALTIME is) no difference below can overflow */
	if (srv_rx_ns <= 0 || srv_tx_ns <= 0 || rx_ns < tx_ns)
		return 0;
	int64_t rtt = rx_ns - tx_ns;
	if (srv_tx_ns < srv_rx_ns || srv_tx_ns - srv_rx_ns > rtt)
		return 0;
	if (!shared)
		return 1;
	int64_t up = srv_rx_ns - tx_ns, down = rx_ns - srv_tx_ns;
	return up >= -slack_ns && down >= -slack_ns;
}

static int in_span(int64_t t, int64_t from_ns, int64_t to_ns, int inside)
{
	return (t >= from_ns && t < to_ns) == inside;
}

static int summarize(const ql_probe_sample *s, size_t n, int64_t from_ns, int64_t to_ns,
		     int inside, int64_t timeout_ns, int64_t pending_ns, int owd,
		     ql_lat_summary *out)
{
	memset(out, 0, sizeof *out);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (in_span(s[i].tx_ns, from_ns, to_ns, inside))
			m++;
	int64_t *rtt = malloc((m ? m : 1) * sizeof *rtt);
	int64_t *up = malloc((m ? m : 1) * sizeof *up);
	int64_t *down = malloc((m ? m : 1) * sizeof *down);
	int64_t *hold = malloc((m ? m : 1) * sizeof *hold);
	if (!rtt || !up || !down || !hold) {
		free(rtt);
		free(up);
		free(down);
		free(hold);
		return -ENOMEM;
	}
	size_t nr = 0, no = 0, nh = 0;
	for (size_t i = 0; i < n; i++) {
		const ql_probe_sample *x = &s[i];
		if (!in_span(x->tx_ns, from_ns, to_ns, inside))
			continue;
		if (!x->rx_ns) {
			if (x->tx_ns < pending_ns)
				out->lost++;
			continue;
		}
		int64_t r = x->rx_ns - x->tx_ns;
		if (r > timeout_ns) {
			out->late++;
			continue;
		}
		rtt[nr++] = r;
		int b = ql_lat_hist_bucket(r);
		if (b < 0)
			out->hist.below++;
		else if (b == QL_LAT_HIST_EDGES - 1)
			out->hist.above++;
		else
			out->hist.count[b]++;
		if (x->flags & QL_PS_SERVER) {
			hold[nh++] = x->srv_tx_ns - x->srv_rx_ns;
			if (owd) {
				up[no] = x->srv_rx_ns - x->tx_ns;
				down[no++] = x->rx_ns - x->srv_tx_ns;
			}
		}
	}
	out->samples = (int64_t)nr;
	ql_lat_dist_of(rtt, nr, &out->rtt);
	ql_lat_dist_of(up, no, &out->up);
	ql_lat_dist_of(down, no, &out->down);
	ql_lat_dist_of(hold, nh, &out->hold);
	free(rtt);
	free(up);
	free(down);
	free(hold);
	return 0;
}

int ql_lat_summarize(const ql_probe_sample *s, size_t n, int64_t from_ns, int64_t to_ns,
		     int64_t timeout_ns, int64_t pending_ns, int owd, ql_lat_summary *out)
{
	return summarize(s, n, from_ns, to_ns, 1, timeout_ns, pending_ns, owd, out);
}

int ql_lat_summarize_outside(const ql_probe_sample *s, size_t n, int64_t from_ns,
			     int64_t to_ns, int64_t timeout_ns, int64_t pending_ns, int owd,
			     ql_lat_summary *out)
{
	return summarize(s, n, from_ns, to_ns, 0, timeout_ns, pending_ns, owd, out);
}

int ql_lat_induced_ms(const ql_lat_summary *loaded, const ql_lat_summary *idle, double *out)
{
	if (!loaded->rtt.n || !idle->rtt.n)
		return -1;
	*out = loaded->rtt.p50_ms - idle->rtt.p50_ms;
	return 0;
}
