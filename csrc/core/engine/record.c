/*
 * record.c - pure arithmetic over the engine's records: rates, sums, spans
 * accumulated, a peer's entries folded in, the interval grid, buffer read-back.
 * Stands on record.h and stats.h only: no sockets, no threads, no test.
 */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

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

void ql_entry_finish(ql_entry *x)
{
	x->bits_per_second = ql_bits_per_second(x->bytes, x->seconds);
	/* the one derivation of an entry's loss: the codec, the books and
	 * the result merge all finish their entries here, and the binding
	 * and the Lua writers read lost_pct as carried */
	if (x->valid & QL_E_UDPRX)
		x->lost_pct = ql_loss_pct(x->lost_packets, x->lost_packets + x->unique_packets);
}

/* The one derivation of the mean |D| (ms): 0.0 without pairs (absent). */
double ql_jitter_mean_abs_ms(const ql_entry *x)
{
	return (x->valid & QL_E_JITMEAN) && x->jitter_pairs > 0
	       ? x->jitter_abs_sum_ms / (double)x->jitter_pairs : 0.0;
}

/* Counts add, histograms add bucket by bucket, the largest extent wins. */
void ql_udp_path_add(ql_udp_path *to, const ql_udp_path *from)
{
	to->bursts += from->bursts;
	to->burst_packets += from->burst_packets;
	for (int k = 0; k < QL_BURST_BUCKETS; k++)
		to->burst_hist[k] += from->burst_hist[k];
	to->gaps += from->gaps;
	to->gap_packets += from->gap_packets;
	for (int k = 0; k < QL_GAP_BUCKETS; k++)
		to->gap_hist[k] += from->gap_hist[k];
	to->extent_packets += from->extent_packets;
	to->extent_sum += from->extent_sum;
	if (from->extent_max > to->extent_max)
		to->extent_max = from->extent_max;
	for (int k = 0; k < QL_EXTENT_BUCKETS; k++)
		to->extent_hist[k] += from->extent_hist[k];
}

/* The mean |D| and the path statistics are whole only when every part had
 * them: a part without them (a stock iperf3 end) leaves them absent. The
 * caller adds the paths themselves (ql_udp_path_add: they live beside). */
static void add_path_parts(ql_entry *s, const ql_entry *x, int first)
{
	const unsigned bits = QL_E_JITMEAN | QL_E_UDPPATH;
	if (first)
		s->valid |= x->valid & bits;
	else
		s->valid &= ~(bits & ~x->valid);
	if (x->valid & QL_E_JITMEAN) {
		s->jitter_pairs += x->jitter_pairs;
		s->jitter_abs_sum_ms += x->jitter_abs_sum_ms;
	}
}

/* Add entry x (direction d, role r) into the running sum *s, counting the
 * entries, those with retransmits and those with jitter (for the means). */
void ql_entry_add(ql_entry *s, int *present, const ql_entry *x, int d,
		  int r, int *ncnt, int *nret, int *njit)
{
	if (!*present) {
		*present = 1;
		s->dir = d;
		s->role = r;
		s->side = x->side;
		s->valid = x->valid & (QL_E_PACKETS | QL_E_WRITES | QL_E_UDPRX);
	}
	add_path_parts(s, x, *ncnt == 0);
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

void ql_interval_sums(ql_interval *iv)
{
	memset(iv->sum_present, 0, sizeof iv->sum_present);
	memset(iv->sum, 0, sizeof iv->sum);
	int njit[2][2] = { { 0 } };
	int nret[2][2] = { { 0 } }, ncnt[2][2] = { { 0 } };
	for (int i = 0; i < iv->nentries; i++) {
		ql_entry *x = &iv->entries[i];
		int d = x->dir & 1, r = x->role & 1;
		ql_entry_add(&iv->sum[d][r], &iv->sum_present[d][r], x, d, r,
			     &ncnt[d][r], &nret[d][r], &njit[d][r]);
	}
	for (int d = 0; d < 2; d++)
		for (int r = 0; r < 2; r++) {
			ql_entry *s = &iv->sum[d][r];
			if (!iv->sum_present[d][r])
				continue;
			if (s->seconds <= 0)
				s->seconds = iv->seconds;
			ql_sum_close(s, ncnt[d][r], nret[d][r], njit[d][r]);
		}
}

/* Close a sum that ql_entry_add built from n entries: retransmits are valid
 * only when every entry had them, jitter is the mean of those that had it,
 * then the derived values (ql_entry_finish). */
void ql_sum_close(ql_entry *s, int n, int nret, int njit)
{
	if (nret > 0 && nret == n)
		s->valid |= QL_E_RETRANS;
	if (njit) {
		s->jitter_ms /= njit;
		s->valid |= QL_E_JITTER;
	}
	ql_entry_finish(s);
}

static void entry_accumulate(ql_entry *x, const ql_entry *y);

/* Fold the peer interval b's entries into iv (room for cap entries): an
 * entry of a stream and role iv already holds from that side accumulates
 * (two peer intervals in one local one), others are appended. The caller
 * recomputes the sums. */
void ql_interval_fold_peer(ql_interval *iv, int cap, const ql_interval *b, int side)
{
	for (int i = 0; i < b->nentries; i++) {
		ql_entry y = b->entries[i];
		if (y.seconds <= 0)
			y.seconds = b->seconds;
		y.side = side;
		ql_entry_finish(&y);
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
	add_path_parts(x, y, 0);
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
	ql_entry_finish(x);
}

const char *ql_side_label(int side)
{
	return side == QL_SIDE_SERVER ? "the server" : "the client";
}
