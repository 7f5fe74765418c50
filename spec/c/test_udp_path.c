/* C unit tests of the UDP books' path statistics (udp_path.c through
 * stats.c's ql_udp_rx): mean |D| over sequence-adjacent pairs, loss bursts
 * and gaps, RFC 4737 reordering extents, on fixture sequences whose values
 * are computed by hand; and their bounds under a hostile sender. */
#include "ctest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "engine/stats.h"
#include "engine/udp_path.h"

#define MS ((int64_t)1000000)

static uint64_t rng_state = 0x243F6A8885A308D3ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static int rx_open(ql_udp_rx *rx, uint64_t window)
{
	ql_err e;
	ql_udp_rx_opts o = { .window_packets = window, .loss_horizon_ns = -1 };
	return ql_udp_rx_init(rx, &o, &e);
}

/* Feed arrivals seq[k] with sender stamp (seq - 1) x 10 ms and the given
 * transit (ms); arrival times follow from them. */
static void feed(ql_udp_rx *rx, const uint64_t *seq, const int64_t *transit_ms, int n)
{
	for (int k = 0; k < n; k++) {
		int64_t sent = ((int64_t)seq[k] - 1) * 10 * MS;
		ql_udp_rx_packet(rx, seq[k], 100, sent, sent + transit_ms[k] * MS);
	}
}

/* ------------------------------------------------------------ mean |D| -- */

/*
 * Transits by sequence number 1..8 (ms): 10 12 15 11 20 20 - 30; 7 lost.
 * Arrival order 1 3 2 5 4 6 8: pairs by sequence number, whichever came
 * first: |D| of (1,2)=2 (2,3)=3 (3,4)=4 (4,5)=9 (5,6)=0, none across 7:
 * 5 pairs, Σ 18 ms, mean 3.6 ms. RFC 3550's J stays in arrival order:
 * |D| 5, 3, 8, 9, 9, 10 in turn from J = 0.
 */
TEST(mean_abs_d_by_sequence_with_reordered_pairs)
{
	ql_udp_rx rx;
	static const uint64_t seq[] = { 1, 3, 2, 5, 4, 6, 8 };
	static const int64_t tr[] = { 10, 15, 12, 20, 11, 20, 30 };
	CHECK_EQ_INT(rx_open(&rx, 0), 0);
	feed(&rx, seq, tr, 7);
	CHECK_EQ_U64(rx.total.jitter_pairs, 5);
	CHECK_EQ_U64(rx.total.jitter_abs_sum_ns, 18 * MS);
	double j = 0;
	static const double d[] = { 5, 3, 8, 9, 9, 10 };
	for (int k = 0; k < 6; k++)
		j += (d[k] * 1e6 - j) / 16.0;
	CHECK(rx.jitter.jitter_ns == j);
	/* interval deltas: the first snapshot holds the 5 pairs */
	ql_udp_counts c;
	ql_udp_rx_snapshot(&rx, 0, &c, NULL);
	CHECK_EQ_U64(c.jitter_pairs, 5);
	static const uint64_t more[] = { 9, 7 };
	static const int64_t trm[] = { 30, 40 };
	feed(&rx, more, trm, 2);   /* (8,9)=0, then 7 closes (6,7)=20 (7,8)=10 */
	ql_udp_rx_snapshot(&rx, 0, &c, NULL);
	CHECK_EQ_U64(c.jitter_pairs, 3);
	CHECK_EQ_U64(c.jitter_abs_sum_ns, 30 * MS);
	CHECK_EQ_U64(rx.total.jitter_pairs, 8);
	ql_udp_rx_free(&rx);
}

/* Duplicates form no pair; a partner whose ring slot was taken by a
 * number QL_UDP_TRACK higher before the pair completed is out of it. */
TEST(mean_abs_d_skips_duplicates_and_far_partners)
{
	ql_udp_rx rx;
	CHECK_EQ_INT(rx_open(&rx, 0), 0);
	ql_udp_rx_packet(&rx, 1, 100, 0, 10 * MS);
	ql_udp_rx_packet(&rx, 1, 100, 0, 99 * MS);   /* duplicate */
	ql_udp_rx_packet(&rx, 2, 100, 10 * MS, 23 * MS);
	CHECK_EQ_U64(rx.total.jitter_pairs, 1);
	CHECK_EQ_U64(rx.total.jitter_abs_sum_ns, 3 * MS);
	/* 4 .. 4 + QL_UDP_TRACK in order, then 3: the slots of 2 and 4
	 * hold 2 + and 4 + QL_UDP_TRACK by then, so 3 pairs with neither */
	for (uint64_t s = 4; s <= 4 + QL_UDP_TRACK; s++)
		ql_udp_rx_packet(&rx, s, 100, 0, 0);
	uint64_t before = rx.total.jitter_pairs;
	CHECK_EQ_U64(before, 1 + QL_UDP_TRACK);
	ql_udp_rx_packet(&rx, 3, 100, 0, 13 * MS);
	CHECK_EQ_U64(rx.total.jitter_pairs, before);
	/* b, b + 2 .. b + QL_UDP_TRACK - 1, b + QL_UDP_TRACK + 2 (in the slot
	 * of b + 2), then b + 1: it pairs with b only */
	uint64_t b = 10 + 2 * QL_UDP_TRACK;
	ql_udp_rx_packet(&rx, b, 100, 0, 0);
	for (uint64_t s = b + 2; s < b + QL_UDP_TRACK; s++)
		ql_udp_rx_packet(&rx, s, 100, 0, 0);
	ql_udp_rx_packet(&rx, b + QL_UDP_TRACK + 2, 100, 0, 0);
	before = rx.total.jitter_pairs;
	ql_udp_rx_packet(&rx, b + 1, 100, 0, 0);
	CHECK_EQ_U64(rx.total.jitter_pairs, before + 1);
	ql_udp_rx_free(&rx);
}

/* ------------------------------------------------------ bursts and gaps -- */

/* Reference runs of a final pattern got[1..n]. */
static void ref_runs(const int *got, uint64_t n, ql_udp_path *p)
{
	memset(p, 0, sizeof *p);
	uint64_t s = 1;
	int seen_burst = 0;
	while (s <= n) {
		uint64_t e = s;
		while (e + 1 <= n && got[e + 1] == got[s])
			e++;
		uint64_t len = e - s + 1;
		if (!got[s]) {
			p->bursts++;
			p->burst_packets += len;
			p->burst_hist[len < QL_BURST_BUCKETS ? len - 1 : QL_BURST_BUCKETS - 1]++;
			seen_burst = 1;
		} else if (seen_burst && e < n) {
			unsigned k = 0;
			while (k + 1 < QL_GAP_BUCKETS && (len >> (k + 1)) != 0)
				k++;
			p->gaps++;
			p->gap_packets += len;
			p->gap_hist[k]++;
		}
		s = e + 1;
	}
}

/*
 * 1..30 with 3-5, 9, 15-16 and 30 lost: bursts 3, 1, 2, 1 (the last one
 * ends the test: ruled at the close), gaps 6-8, 10-14, 17-29 (1-2 before
 * the first burst is no gap). Then the same with 4 arriving behind 8,
 * before it is ruled: 3 and 5 become two bursts, 4 no gap-ending loss.
 */
TEST(bursts_and_gaps_of_a_loss_pattern)
{
	ql_udp_rx rx;
	ql_err e;
	for (int reorder = 0; reorder < 2; reorder++) {
		CHECK_EQ_INT(rx_open(&rx, 0), 0);
		for (uint64_t s = 1; s <= 29; s++) {
			if ((s >= 3 && s <= 5) || s == 9 || s == 15 || s == 16)
				continue;
			ql_udp_rx_packet(&rx, s, 100, 0, 0);
			if (reorder && s == 8)
				ql_udp_rx_packet(&rx, 4, 100, 0, 0);
		}
		CHECK_EQ_INT(ql_udp_rx_finish(&rx, 30, &e), 0);
		const ql_udp_path *p = &rx.trk.path;
		if (!reorder) {
			CHECK_EQ_U64(p->bursts, 4);
			CHECK_EQ_U64(p->burst_packets, 7);
			CHECK_EQ_U64(p->burst_hist[0], 2);
			CHECK_EQ_U64(p->burst_hist[1], 1);
			CHECK_EQ_U64(p->burst_hist[2], 1);
			CHECK_EQ_U64(p->gaps, 3);
			CHECK_EQ_U64(p->gap_packets, 3 + 5 + 13);
			CHECK_EQ_U64(p->gap_hist[1], 1);   /* 3: 2..3 */
			CHECK_EQ_U64(p->gap_hist[2], 1);   /* 5: 4..7 */
			CHECK_EQ_U64(p->gap_hist[3], 1);   /* 13: 8..15 */
		} else {
			CHECK_EQ_U64(p->bursts, 5);        /* 3, 5, 9, 15-16, 30 */
			CHECK_EQ_U64(p->burst_packets, 6);
			CHECK_EQ_U64(p->burst_hist[0], 4);
			CHECK_EQ_U64(p->gaps, 4);          /* 4, 6-8, 10-14, 17-29 */
			CHECK_EQ_U64(p->gap_packets, 1 + 3 + 5 + 13);
			CHECK_EQ_U64(p->gap_hist[0], 1);
		}
		CHECK_EQ_U64(p->burst_packets, rx.total.lost_packets);
		CHECK_EQ_U64(p->gaps, p->bursts - 1);
		ql_udp_rx_free(&rx);
	}
}

/* A datagram ruled lost that arrives later stays in its burst: 5 of 1..10
 * is ruled when the 64-slot window passes it, then comes late. */
TEST(bursts_are_final_when_ruled)
{
	ql_udp_rx rx;
	ql_err e;
	CHECK_EQ_INT(rx_open(&rx, 64), 0);
	for (uint64_t s = 1; s <= 100; s++)
		if (s != 5)
			ql_udp_rx_packet(&rx, s, 100, 0, 0);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 5, 100, 0, 0), QL_UDP_LATE);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 100, &e), 0);
	CHECK_EQ_U64(rx.trk.path.bursts, 1);
	CHECK_EQ_U64(rx.trk.path.burst_packets, 1);
	CHECK_EQ_U64(rx.trk.path.gaps, 0);      /* 6..100 ends at the test's end */
	CHECK_EQ_U64(rx.total.lost_packets, 1);
	ql_udp_rx_free(&rx);
}

/* Random loss and a run of 70 over a small window (ruled word by word as
 * the window slides, across word and wrap boundaries) == the reference. */
TEST(bursts_match_reference_across_words)
{
	enum { N = 20000 };
	static int got[N + 1];
	ql_udp_rx rx;
	ql_err e;
	for (uint64_t s = 1; s <= N; s++)
		got[s] = !(rnd() % 5 == 0 || (s >= 1000 && s < 1070) || s % 97 == 0);
	got[N] = 1;
	CHECK_EQ_INT(rx_open(&rx, 128), 0);
	for (uint64_t s = 1; s <= N; s++)
		if (got[s])
			ql_udp_rx_packet(&rx, s, 100, 0, 0);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, N, &e), 0);
	ql_udp_path ref;
	ref_runs(got, N, &ref);
	CHECK(memcmp(&ref, &rx.trk.path, sizeof ref) == 0);
	CHECK_EQ_U64(rx.trk.path.burst_packets, rx.total.lost_packets);
	CHECK_EQ_U64(rx.trk.path.burst_hist[QL_BURST_BUCKETS - 1], 1);   /* the 70 */
	CHECK(rx.trk.path.gap_packets <= rx.total.unique_packets);
	ql_udp_rx_free(&rx);
}

/* -------------------------------------------------- RFC 4737 extents -- */

static void extents(const uint64_t *seq, int n, ql_udp_rx *rx)
{
	rx_open(rx, 0);
	for (int k = 0; k < n; k++)
		ql_udp_rx_packet(rx, seq[k], 100, 0, 0);
}

/*
 * RFC 4737 section 4.2.1: extent e = j - i, i the earliest arrival position
 * with a higher sequence number. 1 2 3 5 6 7 8 4: 4 at position 8, 5 at 4:
 * e = 4. 1 5 2 3: 2 has e = 1, and 3 has e = 2 although only one earlier
 * datagram (5) is higher: the positions in between count, not the higher
 * ones. A duplicate takes no position: 1 3 3 2 gives e = 1.
 */
TEST(extents_follow_rfc4737)
{
	ql_udp_rx rx;
	static const uint64_t a[] = { 1, 2, 3, 5, 6, 7, 8, 4 };
	extents(a, 8, &rx);
	CHECK_EQ_U64(rx.trk.path.extent_packets, 1);
	CHECK_EQ_U64(rx.trk.path.extent_max, 4);
	CHECK_EQ_U64(rx.trk.path.extent_sum, 4);
	CHECK_EQ_U64(rx.trk.path.extent_hist[2], 1);   /* 4..7 */
	CHECK_EQ_U64(rx.total.out_of_order_packets, 1);
	ql_udp_rx_free(&rx);

	static const uint64_t b[] = { 1, 5, 2, 3 };
	extents(b, 4, &rx);
	CHECK_EQ_U64(rx.trk.path.extent_packets, 2);
	CHECK_EQ_U64(rx.trk.path.extent_sum, 3);
	CHECK_EQ_U64(rx.trk.path.extent_max, 2);
	CHECK_EQ_U64(rx.trk.path.extent_hist[0], 1);
	CHECK_EQ_U64(rx.trk.path.extent_hist[1], 1);
	ql_udp_rx_free(&rx);

	static const uint64_t c[] = { 1, 3, 3, 2 };
	extents(c, 4, &rx);
	CHECK_EQ_U64(rx.trk.path.extent_packets, 1);
	CHECK_EQ_U64(rx.trk.path.extent_sum, 1);
	ql_udp_rx_free(&rx);

	/* 1 4 6 2 5 3: 2 -> 4 at position 2, j 4: e 2; 5 -> 6 at 3, j 5:
	 * e 2; 3 -> 4 at 2, j 6: e 4 */
	static const uint64_t d[] = { 1, 4, 6, 2, 5, 3 };
	extents(d, 6, &rx);
	CHECK_EQ_U64(rx.trk.path.extent_packets, 3);
	CHECK_EQ_U64(rx.trk.path.extent_sum, 8);
	CHECK_EQ_U64(rx.trk.path.extent_max, 4);
	CHECK_EQ_U64(rx.total.out_of_order_packets, 3);
	ql_udp_rx_free(&rx);
}

/* An extent of QL_UDP_TRACK or more is capped there, also when its
 * earliest higher datagram has left the ring. */
TEST(extents_cap_at_the_ring)
{
	ql_udp_rx rx;
	CHECK_EQ_INT(rx_open(&rx, 0), 0);
	ql_udp_rx_packet(&rx, 1, 100, 0, 0);
	for (uint64_t s = 3; s <= 3 + 2 * QL_UDP_TRACK; s++)
		ql_udp_rx_packet(&rx, s, 100, 0, 0);
	ql_udp_rx_packet(&rx, 2, 100, 0, 0);
	CHECK_EQ_U64(rx.trk.path.extent_packets, 1);
	CHECK_EQ_U64(rx.trk.path.extent_max, QL_UDP_TRACK);
	CHECK_EQ_U64(rx.trk.path.extent_hist[QL_EXTENT_BUCKETS - 1], 1);
	/* exactly QL_UDP_TRACK - 1 back: not capped */
	uint64_t top = 3 + 2 * QL_UDP_TRACK;
	ql_udp_rx_packet(&rx, top + 2, 100, 0, 0);
	for (uint64_t s = top + 3; s < top + 2 + QL_UDP_TRACK - 1; s++)
		ql_udp_rx_packet(&rx, s, 100, 0, 0);
	ql_udp_rx_packet(&rx, top + 1, 100, 0, 0);
	CHECK_EQ_U64(rx.trk.path.extent_packets, 2);
	CHECK_EQ_U64(rx.trk.path.extent_sum, QL_UDP_TRACK + QL_UDP_TRACK - 1);
	CHECK_EQ_U64(rx.trk.path.extent_hist[QL_EXTENT_BUCKETS - 2], 1);
	ql_udp_rx_free(&rx);
}

/* ------------------------------------------------------- hostile input -- */

/* Any sequence numbers and timestamps: the counts keep their identities
 * (extents == out-of-order, Σ bursts == lost), the sums stay finite. */
TEST(path_bounded_under_hostile_sequences)
{
	ql_udp_rx rx;
	ql_err e;
	CHECK_EQ_INT(rx_open(&rx, 1024), 0);
	uint64_t base = 1;
	for (int k = 0; k < 200000; k++) {
		uint64_t r = rnd();
		uint64_t seq = (r & 7) == 0 ? base + (rnd() % 100000) : base + (r % 3000);
		if (seq > base + 2000)
			base += 7;
		int64_t sent = (int64_t)rnd(), arr = (int64_t)rnd();
		ql_udp_rx_packet(&rx, seq, 100, sent, arr);
	}
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, rx.highest, &e), 0);
	const ql_udp_path *p = &rx.trk.path;
	CHECK_EQ_U64(p->burst_packets, rx.total.lost_packets);
	CHECK_EQ_U64(p->extent_packets, rx.total.out_of_order_packets);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, rx.highest);
	CHECK(p->gaps + 1 == p->bursts || p->bursts == 0);
	CHECK(p->gap_packets <= rx.total.unique_packets);
	CHECK(p->extent_max <= QL_UDP_TRACK);
	uint64_t hb = 0, hg = 0, he = 0;
	for (int k = 0; k < QL_BURST_BUCKETS; k++)
		hb += p->burst_hist[k];
	for (int k = 0; k < QL_GAP_BUCKETS; k++)
		hg += p->gap_hist[k];
	for (int k = 0; k < QL_EXTENT_BUCKETS; k++)
		he += p->extent_hist[k];
	CHECK_EQ_U64(hb, p->bursts);
	CHECK_EQ_U64(hg, p->gaps);
	CHECK_EQ_U64(he, p->extent_packets);
	ql_udp_rx_free(&rx);
}

int main(void)
{
	RUN(mean_abs_d_by_sequence_with_reordered_pairs);
	RUN(mean_abs_d_skips_duplicates_and_far_partners);
	RUN(bursts_and_gaps_of_a_loss_pattern);
	RUN(bursts_are_final_when_ruled);
	RUN(bursts_match_reference_across_words);
	RUN(extents_follow_rfc4737);
	RUN(extents_cap_at_the_ring);
	RUN(path_bounded_under_hostile_sequences);
	return ctest_done();
}
