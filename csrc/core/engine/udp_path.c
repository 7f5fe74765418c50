/*
 * udp_path.c - the path statistics of udp_path.h (mean |D|, loss runs,
 * reordering extents). Stands on udp_path.h only.
 */
#include "udp_path.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ql_udp_tracker_init(ql_udp_tracker *t)
{
	memset(t, 0, sizeof *t);
	t->transit = calloc(QL_UDP_TRACK, sizeof *t->transit);
	t->rec = calloc(QL_UDP_TRACK, sizeof *t->rec);
	if (!t->transit || !t->rec) {
		ql_udp_tracker_free(t);
		return -ENOMEM;
	}
	return 0;
}

void ql_udp_tracker_free(ql_udp_tracker *t)
{
	free(t->transit);
	free(t->rec);
	memset(t, 0, sizeof *t);
}

static uint64_t abs_diff(int64_t a, int64_t b)
{
	/* exact in unsigned arithmetic for any two int64 */
	return a >= b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void ql_udp_tracker_pair(ql_udp_tracker *t, uint64_t seq, int64_t transit_ns,
			 uint64_t *pairs, uint64_t *abs_sum_ns)
{
	const uint64_t m = QL_UDP_TRACK - 1;
	const ql_udp_transit *lo = &t->transit[(seq - 1) & m];
	const ql_udp_transit *hi = &t->transit[(seq + 1) & m];
	if (seq > 1 && lo->seq == seq - 1) {
		(*pairs)++;
		*abs_sum_ns = sat_add(*abs_sum_ns, abs_diff(transit_ns, lo->transit_ns));
	}
	if (seq < UINT64_MAX && hi->seq == seq + 1) {
		(*pairs)++;
		*abs_sum_ns = sat_add(*abs_sum_ns, abs_diff(hi->transit_ns, transit_ns));
	}
	t->transit[seq & m].seq = seq;
	t->transit[seq & m].transit_ns = transit_ns;
}

/* Bucket of a value v >= 1 on the log2 scale with n buckets. */
static unsigned log2_bucket(uint64_t v, unsigned n)
{
	unsigned k = 63u - (unsigned)__builtin_clzll(v);
	return k < n - 1 ? k : n - 1;
}

static void book_extent(ql_udp_tracker *t, uint64_t e)
{
	ql_udp_path *p = &t->path;
	p->extent_packets++;
	p->extent_sum += e;
	if (e > p->extent_max)
		p->extent_max = e;
	p->extent_hist[log2_bucket(e, QL_EXTENT_BUCKETS)]++;
}

uint64_t ql_udp_tracker_arrival(ql_udp_tracker *t, uint64_t seq, int raised,
				int reordered)
{
	uint64_t j = ++t->pos;
	if (raised) {
		unsigned tail;
		if (t->rec_count == QL_UDP_TRACK) {
			t->rec_head = (t->rec_head + 1) % QL_UDP_TRACK;
			t->rec_count--;
		}
		tail = (t->rec_head + t->rec_count) % QL_UDP_TRACK;
		t->rec[tail].seq = seq;
		t->rec[tail].pos = j;
		t->rec_count++;
		return 0;
	}
	if (!reordered)
		return 0;
	/* The earliest record above seq: records ascend in seq and pos. */
	unsigned lo = 0, hi = t->rec_count;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (t->rec[(t->rec_head + mid) % QL_UDP_TRACK].seq > seq)
			hi = mid;
		else
			lo = mid + 1;
	}
	/* The newest record is the highest number, above seq, so one is
	 * found. If it is the oldest of a full ring, the true earliest may
	 * have left it, but then both are QL_UDP_TRACK or more positions
	 * back (the ring holds that many distinct positions): capped alike. */
	uint64_t e = lo < t->rec_count ? j - t->rec[(t->rec_head + lo) % QL_UDP_TRACK].pos
				       : QL_UDP_TRACK;
	if (e > QL_UDP_TRACK)
		e = QL_UDP_TRACK;
	book_extent(t, e);
	return e;
}

static void close_run(ql_udp_tracker *t, int at_end)
{
	ql_udp_path *p = &t->path;
	uint64_t n = t->run_len;
	if (n == 0)
		return;
	if (t->run_lost) {
		p->bursts++;
		p->burst_packets += n;
		p->burst_hist[n < QL_BURST_BUCKETS ? n - 1 : QL_BURST_BUCKETS - 1]++;
		t->had_burst = 1;
	} else if (t->had_burst && !at_end) {
		p->gaps++;
		p->gap_packets += n;
		p->gap_hist[log2_bucket(n, QL_GAP_BUCKETS)]++;
	}
	t->run_len = 0;
}

void ql_udp_tracker_runs(ql_udp_tracker *t, uint64_t seq, int lost, uint64_t n)
{
	if (seq < t->runs_from) {
		uint64_t skip = t->runs_from - seq;
		if (skip >= n)
			return;
		n -= skip;
	}
	if (n == 0)
		return;
	lost = lost != 0;
	if (t->run_len > 0 && t->run_lost != lost)
		close_run(t, 0);
	t->run_lost = lost;
	t->run_len += n;
}

void ql_udp_tracker_close(ql_udp_tracker *t)
{
	close_run(t, 1);
}

void ql_udp_tracker_reset(ql_udp_tracker *t, uint64_t runs_from)
{
	t->runs_from = runs_from;
	t->run_len = 0;
	t->run_lost = 0;
	t->had_burst = 0;
	memset(&t->path, 0, sizeof t->path);
}
