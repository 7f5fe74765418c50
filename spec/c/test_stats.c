/* C unit tests of csrc/core/engine/stats.c: the UDP books (reordering,
 * duplicates, loss), jitter, TCP_INFO, CPU shares and pacing. */
#include "ctest.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/tcp.h>

#include "err.h"
#include "engine/pace.h"
#include "engine/stats.h"
#include "timer.h"

/* Deterministic PRNG (xorshift64*), so every run checks the same packets. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}
static int chance(unsigned pct) { return rnd() % 100 < pct; }

#define REALTIME_BASE 1764460800000000000LL /* ~2025-11-30 in ns */

/* Identity that must hold after every datagram. */
static int books_consistent(const ql_udp_rx *rx)
{
	const ql_udp_counts *c = &rx->total;
	return c->packets == c->unique_packets + c->duplicate_packets + c->late_packets &&
	       c->out_of_order_packets <= c->unique_packets &&
	       c->unique_packets + c->lost_packets <= rx->highest - rx->first_seq + 1;
}

/* ---------------------------------------------------------- reordering -- */

/* netem "reorder 25% 50%" with gap 1 sends some datagrams immediately while
 * the others wait the delay; the effect on the receiver is that a share of
 * datagrams overtakes a few predecessors. Model: hold a datagram back with
 * probability 25 % and release it after 1..5 later ones. */
TEST(udp_reorder_is_not_loss)
{
	ql_err e;
	ql_udp_rx rx;
	const uint64_t sent = 10000;
	uint64_t held[8], nheld = 0, release_after[8], seq, i, prev_lost = 0;
	int ok = 1;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	for (seq = 1; seq <= sent; seq++) {
		if (nheld < 8 && chance(25)) {
			held[nheld] = seq;
			release_after[nheld++] = 1 + rnd() % 5;
			continue;
		}
		ql_udp_rx_packet(&rx, seq, 1000, 0, 0);
		for (i = 0; i < nheld;) {
			if (--release_after[i] == 0) {
				ql_udp_rx_packet(&rx, held[i], 1000, 0, 0);
				held[i] = held[--nheld];
				release_after[i] = release_after[nheld];
			} else {
				i++;
			}
		}
		ok &= books_consistent(&rx);
		ok &= rx.total.lost_packets >= prev_lost;
		prev_lost = rx.total.lost_packets;
	}
	for (i = 0; i < nheld; i++)
		ql_udp_rx_packet(&rx, held[i], 1000, 0, 0);
	CHECK(ok);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, sent, &e), 0);
	CHECK_EQ_U64(rx.total.lost_packets, 0);
	CHECK_EQ_U64(rx.total.unique_packets, sent);
	CHECK_EQ_U64(rx.total.unique_bytes, sent * 1000);
	CHECK_EQ_U64(rx.total.duplicate_packets, 0);
	CHECK_EQ_U64(rx.total.late_packets, 0);
	CHECK(rx.total.out_of_order_packets > 0);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, sent);
	ql_udp_rx_free(&rx);
}

/* A simple swap: 1 3 2 4 6 5 ... gives exactly one out-of-order per pair. */
TEST(udp_out_of_order_counts_rfc4737)
{
	ql_err e;
	ql_udp_rx rx;
	uint64_t s;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 1, 100, 0, 0), QL_UDP_UNIQUE);
	for (s = 2; s + 1 <= 101; s += 2) {
		CHECK_EQ_INT(ql_udp_rx_packet(&rx, s + 1, 100, 0, 0), QL_UDP_UNIQUE);
		CHECK_EQ_INT(ql_udp_rx_packet(&rx, s, 100, 0, 0), QL_UDP_OUT_OF_ORDER);
	}
	CHECK_EQ_U64(rx.total.out_of_order_packets, 50);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 101, &e), 0);
	CHECK_EQ_U64(rx.total.lost_packets, 0);
	CHECK_EQ_U64(rx.total.unique_packets, 101);
	ql_udp_rx_free(&rx);
}

/* ---------------------------------------------------------- duplicates -- */

TEST(udp_duplicates_are_not_unique)
{
	ql_err e;
	ql_udp_rx rx;
	const uint64_t sent = 10000;
	uint64_t seq, dups = 0, delayed_dup = 0;
	int ok = 1;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	for (seq = 1; seq <= sent; seq++) {
		ok &= ql_udp_rx_packet(&rx, seq, 1000, 0, 0) == QL_UDP_UNIQUE;
		if (delayed_dup) {
			/* a copy that arrives after a higher number: still a
			 * duplicate, not out-of-order */
			ok &= ql_udp_rx_packet(&rx, delayed_dup, 1000, 0, 0) == QL_UDP_DUPLICATE;
			delayed_dup = 0;
			dups++;
		}
		if (chance(10)) {
			if (chance(50)) {
				ok &= ql_udp_rx_packet(&rx, seq, 1000, 0, 0) == QL_UDP_DUPLICATE;
				dups++;
			} else {
				delayed_dup = seq;
			}
		}
		ok &= books_consistent(&rx);
	}
	CHECK(ok);
	CHECK(dups > 800 && dups < 1200);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, sent, &e), 0);
	CHECK_EQ_U64(rx.total.unique_packets, sent);
	CHECK_EQ_U64(rx.total.lost_packets, 0);
	CHECK_EQ_U64(rx.total.duplicate_packets, dups);
	CHECK_EQ_U64(rx.total.duplicate_bytes, dups * 1000);
	CHECK_EQ_U64(rx.total.out_of_order_packets, 0);
	CHECK_EQ_U64(rx.total.packets, sent + dups);
	CHECK_EQ_U64(rx.total.bytes, (sent + dups) * 1000);
	CHECK_EQ_U64(rx.total.unique_bytes, sent * 1000);
	ql_udp_rx_free(&rx);
}

/* ------------------------------------------------ mixed, vs. a reference -- */

/* Loss + reorder + duplicates + interval snapshots, checked against a
 * plain reference model (a byte per sequence number). The window is large
 * and time ruling off, so nothing is late and the expected counters are
 * known exactly. */
TEST(udp_mixed_matches_reference)
{
	ql_err e;
	ql_udp_rx rx;
	ql_udp_rx_opts o = {.window_packets = 4096, .loss_horizon_ns = -1};
	const uint64_t sent = 50000;
	unsigned char *seen = calloc(sent + 2, 1);
	uint64_t queue[64], nq = 0, seq, i, max = 0;
	uint64_t exp_unique = 0, exp_dup = 0, exp_ooo = 0, deliveries = 0;
	ql_udp_counts sum = {0}, iv;
	int ok = 1;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	for (seq = 1; seq <= sent || nq; seq++) {
		if (seq <= sent && !chance(3))             /* 3 % loss */
			queue[nq++] = seq;
		if (seq <= sent && chance(5) && nq < 64)   /* 5 % duplicated */
			queue[nq++] = seq;
		/* deliver a random subset of the queue in random order */
		while (nq && (seq > sent || nq > 16 || chance(60))) {
			uint64_t j = rnd() % nq, s = queue[j];
			ql_udp_verdict v;
			queue[j] = queue[--nq];
			v = ql_udp_rx_packet(&rx, s, 500, 0, 0);
			deliveries++;
			if (seen[s]) {
				exp_dup++;
				ok &= v == QL_UDP_DUPLICATE;
			} else {
				seen[s] = 1;
				exp_unique++;
				if (s < max) {
					exp_ooo++;
					ok &= v == QL_UDP_OUT_OF_ORDER;
				} else {
					ok &= v == QL_UDP_UNIQUE;
				}
				if (s > max)
					max = s;
			}
			ok &= books_consistent(&rx);
			if (deliveries % 997 == 0) {
				ql_udp_rx_snapshot(&rx, 0, &iv, NULL);
				sum.packets += iv.packets;
				sum.unique_packets += iv.unique_packets;
				sum.unique_bytes += iv.unique_bytes;
				sum.duplicate_packets += iv.duplicate_packets;
				sum.out_of_order_packets += iv.out_of_order_packets;
				sum.lost_packets += iv.lost_packets;
				sum.late_packets += iv.late_packets;
			}
		}
	}
	CHECK(ok);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, sent, &e), 0);
	ql_udp_rx_snapshot(&rx, 0, &iv, NULL);
	sum.packets += iv.packets;
	sum.unique_packets += iv.unique_packets;
	sum.unique_bytes += iv.unique_bytes;
	sum.duplicate_packets += iv.duplicate_packets;
	sum.out_of_order_packets += iv.out_of_order_packets;
	sum.lost_packets += iv.lost_packets;
	sum.late_packets += iv.late_packets;

	CHECK_EQ_U64(rx.total.unique_packets, exp_unique);
	CHECK_EQ_U64(rx.total.duplicate_packets, exp_dup);
	CHECK_EQ_U64(rx.total.out_of_order_packets, exp_ooo);
	CHECK_EQ_U64(rx.total.late_packets, 0);
	CHECK_EQ_U64(rx.total.packets, deliveries);
	CHECK_EQ_U64(rx.total.lost_packets, sent - exp_unique);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, sent);
	CHECK(exp_dup > 0 && exp_ooo > 0 && sent - exp_unique > 0);
	/* interval deltas add up to the totals */
	CHECK_EQ_U64(sum.packets, rx.total.packets);
	CHECK_EQ_U64(sum.unique_packets, rx.total.unique_packets);
	CHECK_EQ_U64(sum.unique_bytes, rx.total.unique_bytes);
	CHECK_EQ_U64(sum.duplicate_packets, rx.total.duplicate_packets);
	CHECK_EQ_U64(sum.out_of_order_packets, rx.total.out_of_order_packets);
	CHECK_EQ_U64(sum.lost_packets, rx.total.lost_packets);
	CHECK_EQ_U64(sum.late_packets, rx.total.late_packets);
	for (i = 1; i <= sent; i++)
		if (!seen[i])
			break;
	CHECK(i <= sent); /* some sequence number really was lost */
	free(seen);
	ql_udp_rx_free(&rx);
}

/* Small window, short horizon, heavy reordering: many late datagrams. The
 * verdicts must agree with a reference of what was delivered before, and
 * the identities must hold throughout. */
TEST(udp_invariants_under_stress)
{
	ql_err e;
	ql_udp_rx rx;
	ql_udp_rx_opts o = {.window_packets = 64, .loss_horizon_ns = 5000};
	const uint64_t sent = 30000;
	unsigned char *seen = calloc(sent + 2, 1);
	uint64_t queue[256], nq = 0, seq, prev_lost = 0, distinct = 0;
	int64_t t = 0;
	int ok = 1;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	for (seq = 1; seq <= sent || nq; seq++) {
		if (seq <= sent && !chance(2))
			queue[nq++] = seq;
		if (seq <= sent && chance(4))
			queue[nq++] = seq;
		while (nq && (seq > sent || nq > 200 || chance(55))) {
			uint64_t j = rnd() % nq, q = queue[j];
			uint64_t h = rx.highest;
			ql_udp_verdict v;
			queue[j] = queue[--nq];
			t += (int64_t)(rnd() % 200);
			v = ql_udp_rx_packet(&rx, q, 100, 0, t);
			if (seen[q])
				ok &= v == QL_UDP_DUPLICATE ||
				      (v == QL_UDP_LATE && h - q >= 64);
			else
				ok &= v != QL_UDP_DUPLICATE;
			distinct += !seen[q];
			seen[q] = 1;
			ok &= books_consistent(&rx);
			ok &= rx.total.lost_packets >= prev_lost;
			prev_lost = rx.total.lost_packets;
		}
		if (rnd() % 50 == 0)
			ql_udp_rx_tick(&rx, t);
	}
	CHECK(ok);
	CHECK(rx.total.late_packets > 100);
	CHECK(rx.total.duplicate_packets > 100);
	CHECK(rx.total.unique_packets <= distinct);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, sent, &e), 0);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, sent);
	CHECK_EQ_U64(rx.total.packets, rx.total.unique_packets +
		     rx.total.duplicate_packets + rx.total.late_packets);
	free(seen);
	ql_udp_rx_free(&rx);
}

/* --------------------------------------------------- 64-bit sequences -- */

TEST(udp_sequences_cross_2_pow_32)
{
	ql_err e;
	ql_udp_rx rx;
	const uint64_t first = ((uint64_t)1 << 32) - 100;
	ql_udp_rx_opts o = {.first_seq = first};
	uint64_t s;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	for (s = first; s < first + 200; s += 2) {
		if (s + 1 != first + 151)  /* one lost just past 2^32 */
			ql_udp_rx_packet(&rx, s + 1, 10, 0, 0);
		ql_udp_rx_packet(&rx, s, 10, 0, 0);
	}
	CHECK_EQ_U64(rx.highest, first + 199);
	CHECK_EQ_U64(rx.total.unique_packets, 199);
	CHECK_EQ_U64(rx.total.out_of_order_packets, 99);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 200, &e), 0);
	CHECK_EQ_U64(rx.total.lost_packets, 1);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, 200);
	ql_udp_rx_free(&rx);
}

TEST(seq_extend32_wraps)
{
	const uint64_t span = (uint64_t)1 << 32;
	CHECK_EQ_U64(ql_seq_extend32(0, 1), 1);
	CHECK_EQ_U64(ql_seq_extend32(span - 3, 2), span + 2);          /* forward wrap */
	CHECK_EQ_U64(ql_seq_extend32(span + 2, 0xFFFFFFFEu), span - 2); /* late, before wrap */
	CHECK_EQ_U64(ql_seq_extend32(5 * span + 7, 9), 5 * span + 9);
	CHECK_EQ_U64(ql_seq_extend32(3, 0xFFFFFFF0u), 0xFFFFFFF0u);      /* never below 0 */
}

/* ------------------------------------------------------- late / window -- */

TEST(udp_window_overflow_is_late)
{
	ql_err e;
	ql_udp_rx rx;
	ql_udp_rx_opts o = {.window_packets = 64, .loss_horizon_ns = -1};
	uint64_t s;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	CHECK_EQ_U64(rx.window_packets, 64);
	for (s = 1; s <= 200; s++)
		if (s != 5)
			ql_udp_rx_packet(&rx, s, 100, 0, 0);
	/* 5 left the window (64 numbers: 6..69) when 69 arrived: ruled lost */
	CHECK_EQ_U64(rx.total.lost_packets, 1);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 5, 100, 0, 0), QL_UDP_LATE);
	/* a copy of 7 (received, but outside the window now): cannot tell */
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 7, 100, 0, 0), QL_UDP_LATE);
	/* inside the window a copy is still recognised exactly */
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 150, 100, 0, 0), QL_UDP_DUPLICATE);
	CHECK_EQ_U64(rx.total.late_packets, 2);
	CHECK_EQ_U64(rx.total.late_bytes, 200);
	CHECK(books_consistent(&rx));
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 200, &e), 0);
	CHECK_EQ_U64(rx.total.unique_packets, 199);
	CHECK_EQ_U64(rx.total.lost_packets, 1);
	CHECK_EQ_U64(rx.total.packets, 202);
	ql_udp_rx_free(&rx);
}

TEST(udp_window_rounds_and_rejects)
{
	ql_err e;
	ql_udp_rx rx;
	ql_udp_rx_opts o = {.window_packets = 100};

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	CHECK_EQ_U64(rx.window_packets, 128);
	ql_udp_rx_free(&rx);
	ql_udp_rx_free(&rx); /* idempotent */
	o.window_packets = 10;
	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), -EINVAL);
	CHECK_STR(e.code, "EINVAL");
	CHECK(strstr(e.msg, "udp_window_packets") != NULL);
	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	CHECK_EQ_U64(rx.window_packets, QL_UDP_WINDOW_DEFAULT);
	CHECK_EQ_U64(rx.first_seq, 1);
	ql_udp_rx_free(&rx);
}

/* Time-based ruling: a gap older than the horizon is lost for good; the
 * datagram that fills it afterwards is late (not unique), its copy a
 * duplicate, and the interval loss never goes negative. */
TEST(udp_loss_horizon_rules_once)
{
	ql_err e;
	ql_udp_rx rx;
	const int64_t ms = 1000000;
	ql_udp_rx_opts o = {.loss_horizon_ns = 16 * ms};
	ql_udp_counts iv;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	ql_udp_rx_packet(&rx, 1, 100, 0, 0);
	ql_udp_rx_packet(&rx, 3, 100, 0, 1 * ms);      /* gap at 2 seen at 1 ms */
	ql_udp_rx_snapshot(&rx, 10 * ms, &iv, NULL);
	CHECK_EQ_U64(iv.lost_packets, 0);              /* too early to rule */
	CHECK_EQ_U64(iv.unique_packets, 2);
	ql_udp_rx_snapshot(&rx, 17 * ms, &iv, NULL);   /* 1 ms + horizon */
	CHECK_EQ_U64(iv.lost_packets, 1);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 2, 100, 0, 18 * ms), QL_UDP_LATE);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 2, 100, 0, 18 * ms), QL_UDP_DUPLICATE);
	ql_udp_rx_snapshot(&rx, 20 * ms, &iv, NULL);
	CHECK_EQ_U64(iv.lost_packets, 0);
	CHECK_EQ_U64(iv.late_packets, 1);
	CHECK_EQ_U64(iv.duplicate_packets, 1);
	CHECK_EQ_U64(iv.unique_packets, 0);
	/* a gap inside the horizon is filled in time: out-of-order, no loss */
	ql_udp_rx_packet(&rx, 5, 100, 0, 21 * ms);
	ql_udp_rx_packet(&rx, 4, 100, 0, 30 * ms);
	CHECK_EQ_U64(rx.total.out_of_order_packets, 1);
	CHECK_EQ_U64(rx.total.lost_packets, 1);
	/* the sender sent 7: 6 and 7 never arrived */
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 7, &e), 0);
	ql_udp_rx_snapshot(&rx, 40 * ms, &iv, NULL);
	CHECK_EQ_U64(iv.lost_packets, 2);
	CHECK_EQ_U64(rx.total.lost_packets, 3);
	CHECK_EQ_U64(rx.total.unique_packets, 4);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, 7);
	/* after the books are closed everything is late */
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 6, 100, 0, 41 * ms), QL_UDP_LATE);
	CHECK_EQ_U64(rx.total.unique_packets, 4);
	ql_udp_rx_free(&rx);
}

/* The horizon keeps ruling while traffic flows steadily: every gap is
 * booked between horizon and horizon * 17/16 + two datagram gaps after a
 * higher number arrived. */
TEST(udp_loss_horizon_steady_stream)
{
	ql_err e;
	ql_udp_rx rx;
	const int64_t ms = 1000000, horizon = 100 * ms;
	ql_udp_rx_opts o = {.loss_horizon_ns = horizon};
	uint64_t s, lost_seen = 0;
	int64_t t = 0, gap_seen_at[64];
	unsigned ngaps = 0, booked = 0;
	int ok = 1;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	for (s = 1; s <= 5000; s++, t += ms) {      /* 1000 pps, 5 s */
		if (s % 100 == 50) {                 /* lose every 100th */
			if (ngaps < 64)
				gap_seen_at[ngaps++] = t + ms;
			continue;
		}
		ql_udp_rx_packet(&rx, s, 100, 0, t);
		while (booked < rx.total.lost_packets) {
			ok &= t - gap_seen_at[booked] >= horizon;
			ok &= t - gap_seen_at[booked] <= horizon + horizon / 16 + 2 * ms;
			booked++;
		}
		lost_seen = rx.total.lost_packets;
	}
	CHECK(ok);
	CHECK(lost_seen >= 48); /* 50 gaps, the last within the horizon */
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 5000, &e), 0);
	CHECK_EQ_U64(rx.total.lost_packets, 50);
	ql_udp_rx_free(&rx);
}

TEST(udp_finish_rejects_wrong_count)
{
	ql_err e;
	ql_udp_rx rx;
	uint64_t s;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	for (s = 1; s <= 10; s++)
		ql_udp_rx_packet(&rx, s, 1, 0, 0);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 9, &e), -EPROTO);
	CHECK_STR(e.code, "EPROTO");
	CHECK_EQ_U64(rx.total.lost_packets, 0);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 12, &e), 0);
	CHECK_EQ_U64(rx.total.lost_packets, 2);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 12, &e), 0);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 13, &e), -EPROTO);
	CHECK_EQ_U64(rx.total.lost_packets, 2);
	ql_udp_rx_free(&rx);
}

TEST(udp_huge_forward_jump)
{
	ql_err e;
	ql_udp_rx rx;
	ql_udp_rx_opts o = {.window_packets = 1024, .loss_horizon_ns = -1};

	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	ql_udp_rx_packet(&rx, 1, 1, 0, 0);
	ql_udp_rx_packet(&rx, 3, 1, 0, 0);
	ql_udp_rx_packet(&rx, 1000000, 1, 0, 0);
	CHECK_EQ_U64(rx.total.lost_packets, 1000000 - 1024 - 2);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 999990, 1, 0, 0), QL_UDP_OUT_OF_ORDER);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, 3, 1, 0, 0), QL_UDP_LATE);
	CHECK_EQ_INT(ql_udp_rx_packet(&rx, UINT64_MAX, 1, 0, 0), QL_UDP_LATE);
	CHECK_EQ_U64(rx.highest, 1000000);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 1000000, &e), 0);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, 1000000);
	CHECK_EQ_U64(rx.total.unique_packets, 4);
	ql_udp_rx_free(&rx);
}

/* -------------------------------------------------------------- jitter -- */

TEST(jitter_constant_transit_is_zero)
{
	ql_jitter j;
	int i;

	ql_jitter_init(&j);
	/* 16 datagrams/s, 200 ms one-way delay, realtime-sized timestamps:
	 * the buggy seed would give 12.5 ms here. */
	for (i = 0; i < 160; i++) {
		int64_t sent = REALTIME_BASE + (int64_t)i * 62500000;
		ql_jitter_update(&j, sent, sent + 200000000);
		if (i == 0)
			CHECK(j.jitter_ns == 0.0);
	}
	CHECK(j.jitter_ns == 0.0);
	CHECK(ql_jitter_ms(&j) == 0.0);
	CHECK_EQ_U64(j.samples, 160);
}

TEST(jitter_step_then_exact_decay)
{
	ql_jitter j;
	int64_t sent = REALTIME_BASE, transit = 5000000;
	uint64_t num = 62500; /* J_k = 62500 * 15^k / 16^k ns */
	double den = 1.0;
	int k;

	ql_jitter_init(&j);
	ql_jitter_update(&j, sent, sent + transit);
	ql_jitter_update(&j, sent + 1000, sent + 1000 + transit);
	CHECK(j.jitter_ns == 0.0);
	transit += 1000000; /* one 1 ms step */
	ql_jitter_update(&j, sent + 2000, sent + 2000 + transit);
	CHECK(j.jitter_ns == 62500.0);  /* 1 ms / 16 exactly */
	CHECK_NEAR(ql_jitter_ms(&j), 0.0625, 1e-15);
	for (k = 1; k <= 12; k++) {
		ql_jitter_update(&j, sent + 2000 + k * 1000,
				 sent + 2000 + k * 1000 + transit);
		num *= 15;
		den *= 16.0;
		if (k <= 8)
			CHECK(j.jitter_ns == (double)num / den);  /* exact */
		else
			CHECK_NEAR(j.jitter_ns, (double)num / den, 1e-6);
	}
}

/* RFC 3550 uses arrival order: a reordered datagram contributes the
 * transit difference to its predecessor in arrival order. */
TEST(jitter_in_arrival_order_for_reordered)
{
	ql_err e;
	ql_udp_rx rx;
	const int64_t ms = 1000000;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	/* seq 1 sent at 0 arrives at 10 ms; seq 3 sent at 2 ms arrives at
	 * 12 ms; seq 2 sent at 1 ms arrives at 13 ms (transit 12 ms). */
	ql_udp_rx_packet(&rx, 1, 1, 0, 10 * ms);
	ql_udp_rx_packet(&rx, 3, 1, 2 * ms, 12 * ms);
	CHECK(rx.jitter.jitter_ns == 0.0);
	ql_udp_rx_packet(&rx, 2, 1, 1 * ms, 13 * ms);
	CHECK(rx.jitter.jitter_ns == 2.0 * ms / 16.0);
	/* a duplicate does not move J */
	ql_udp_rx_packet(&rx, 2, 1, 1 * ms, 50 * ms);
	CHECK(rx.jitter.jitter_ns == 2.0 * ms / 16.0);
	CHECK_EQ_U64(rx.jitter.samples, 3);
	ql_udp_rx_free(&rx);
}

TEST(jitter_garbage_timestamps_stay_finite)
{
	ql_jitter j;

	ql_jitter_init(&j);
	ql_jitter_update(&j, INT64_MIN, INT64_MAX);
	ql_jitter_update(&j, INT64_MAX, INT64_MIN);
	ql_jitter_update(&j, 0, 0);
	CHECK(isfinite(j.jitter_ns));
	CHECK(j.jitter_ns >= 0.0);
}

/* ------------------------------------------------------------ TCP_INFO -- */

TEST(tcp_cwnd_bytes_large_window)
{
	struct tcp_info ti;
	ql_tcp_sample s;

	memset(&ti, 0, sizeof ti);
	ti.tcpi_snd_cwnd = 2000000;   /* segments */
	ti.tcpi_snd_mss = 8948;       /* 9000 MTU */
	ti.tcpi_rtt = 100123;
	ti.tcpi_rttvar = 2500;
	ti.tcpi_total_retrans = 7;
	ti.tcpi_pacing_rate = 1250000000ULL;     /* bytes/s */
	ti.tcpi_delivery_rate = 3000000000ULL;
	ti.tcpi_min_rtt = 100000;
	ql_tcp_sample_from_info(&s, &ti, sizeof ti, 42);
	CHECK_EQ_U64(s.snd_cwnd_bytes, 17896000000ULL);  /* > 2^32, exact */
	CHECK_EQ_INT(s.snd_cwnd_segments, 2000000);
	CHECK_EQ_INT(s.snd_mss_bytes, 8948);
	CHECK_EQ_INT(s.rtt_us, 100123);
	CHECK_EQ_INT(s.rttvar_us, 2500);
	CHECK_EQ_INT(s.min_rtt_us, 100000);
	CHECK_EQ_U64(s.pacing_rate_bps, 10000000000ULL);
	CHECK_EQ_U64(s.delivery_rate_bps, 24000000000ULL);
	CHECK_EQ_INT(s.time_ns, 42);
	CHECK(s.valid & QL_TCPS_RTT);
	CHECK(s.valid & QL_TCPS_CWND);
	CHECK(s.valid & QL_TCPS_RETRANS);
	CHECK(s.valid & QL_TCPS_PACING);
	CHECK(s.valid & QL_TCPS_DELIVERY);
	CHECK(s.valid & QL_TCPS_MIN_RTT);
	/* the largest possible product still fits */
	ti.tcpi_snd_cwnd = UINT32_MAX;
	ti.tcpi_snd_mss = UINT32_MAX;
	ql_tcp_sample_from_info(&s, &ti, sizeof ti, 0);
	CHECK_EQ_U64(s.snd_cwnd_bytes, (uint64_t)UINT32_MAX * UINT32_MAX);
}

TEST(tcp_missing_fields_are_absent)
{
	struct tcp_info ti;
	ql_tcp_sample s;
	size_t old_len = offsetof(struct tcp_info, tcpi_total_retrans);

	memset(&ti, 0xAB, sizeof ti);
	ti.tcpi_snd_mss = 1448;
	ti.tcpi_snd_cwnd = 10;
	/* an old kernel's struct ends before tcpi_total_retrans */
	ql_tcp_sample_from_info(&s, &ti, old_len, 0);
	CHECK(s.valid & QL_TCPS_RTT);
	CHECK(s.valid & QL_TCPS_CWND);
	CHECK_EQ_U64(s.snd_cwnd_bytes, 14480);
	CHECK(!(s.valid & QL_TCPS_RETRANS));
	CHECK(!(s.valid & QL_TCPS_PACING));
	CHECK(!(s.valid & QL_TCPS_DELIVERY));
	CHECK(!(s.valid & QL_TCPS_MIN_RTT));
	CHECK(!(s.valid & QL_TCPS_BYTES_SENT));
	/* pre-4.9 kernel: no delivery rate */
	ql_tcp_sample_from_info(&s, &ti, offsetof(struct tcp_info, tcpi_delivery_rate), 0);
	CHECK(s.valid & QL_TCPS_MIN_RTT);
	CHECK(!(s.valid & QL_TCPS_DELIVERY));
	/* nothing at all */
	ql_tcp_sample_from_info(&s, &ti, 0, 0);
	CHECK_EQ_INT(s.valid, 0);
	/* MSS 0 (not connected): cwnd in bytes is unknown, not 0 */
	memset(&ti, 0, sizeof ti);
	ti.tcpi_snd_cwnd = 10;
	ti.tcpi_pacing_rate = ~0ULL;     /* unlimited */
	ti.tcpi_min_rtt = ~0U;           /* no RTT sample yet */
	ql_tcp_sample_from_info(&s, &ti, sizeof ti, 0);
	CHECK(!(s.valid & QL_TCPS_CWND));
	CHECK(!(s.valid & QL_TCPS_PACING));
	CHECK_EQ_INT(s.pacing_unlimited, 1);
	CHECK(!(s.valid & QL_TCPS_MIN_RTT));
}

/* The path MTU and the peer's window come through when the kernel wrote
 * them (tcpi_snd_wnd: Linux 5.4), and the summary keeps the largest
 * window; absent, they are absent, not 0. */
TEST(tcp_pmtu_and_snd_wnd)
{
	struct tcp_info ti;
	ql_tcp_sample s;
	ql_tcp_summary sum;

	memset(&ti, 0, sizeof ti);
	ti.tcpi_snd_mss = 1448;
	ti.tcpi_snd_cwnd = 10;
	ti.tcpi_pmtu = 1500;
	ti.tcpi_snd_wnd = 3000000;
	ql_tcp_sample_from_info(&s, &ti, sizeof ti, 0);
	CHECK(s.valid & QL_TCPS_PMTU);
	CHECK(s.valid & QL_TCPS_SND_WND);
	CHECK_EQ_INT(s.pmtu_bytes, 1500);
	CHECK_EQ_INT(s.snd_wnd_bytes, 3000000);
	ql_tcp_summary_init(&sum, NULL);
	ql_tcp_summary_add(&sum, &s, NULL);
	ti.tcpi_snd_wnd = 65535;
	ql_tcp_sample_from_info(&s, &ti, sizeof ti, 0);
	ql_tcp_summary_add(&sum, &s, NULL);
	CHECK_EQ_U64(sum.max_snd_wnd_bytes, 3000000);
	CHECK_EQ_U64(sum.snd_wnd_samples, 2);
	/* a kernel before 5.4: no snd_wnd; a sample without it is skipped */
	ql_tcp_sample_from_info(&s, &ti, offsetof(struct tcp_info, tcpi_snd_wnd), 0);
	CHECK(s.valid & QL_TCPS_PMTU);
	CHECK(!(s.valid & QL_TCPS_SND_WND));
	ql_tcp_summary_add(&sum, &s, NULL);
	CHECK_EQ_U64(sum.snd_wnd_samples, 2);
	/* nor a path MTU before the socket has one */
	ti.tcpi_pmtu = 0;
	ql_tcp_sample_from_info(&s, &ti, sizeof ti, 0);
	CHECK(!(s.valid & QL_TCPS_PMTU));
}

TEST(tcp_retrans_delta_64bit)
{
	ql_tcp_sample a = {0}, b = {0};
	uint64_t d = 12345;

	a.valid = b.valid = QL_TCPS_RETRANS;
	a.total_retrans = 100;
	b.total_retrans = 130;
	CHECK_EQ_INT(ql_tcp_retrans_delta(&a, &b, &d), 0);
	CHECK_EQ_U64(d, 30);
	a.total_retrans = 0xFFFFFFF0u;   /* 32-bit counter wrapped */
	b.total_retrans = 5;
	CHECK_EQ_INT(ql_tcp_retrans_delta(&a, &b, &d), 0);
	CHECK_EQ_U64(d, 21);
	b.valid = QL_TCPS_RTT;           /* failed sample: no delta, not 0 */
	d = 12345;
	CHECK_EQ_INT(ql_tcp_retrans_delta(&a, &b, &d), -ENODATA);
	CHECK_EQ_U64(d, 12345);
}

/* Interval retransmits sum to the total even across a failed sample. */
TEST(tcp_summary_accumulates)
{
	ql_tcp_summary sum;
	ql_tcp_sample s = {0}, base = {0};
	uint64_t d = 999;
	const uint32_t totals[5] = {3, 3, 10, 12, 12};
	const uint32_t rtts[5] = {500, 200, 900, 400, 100};
	uint64_t seen = 0;
	int i;

	base.valid = QL_TCPS_RETRANS;
	base.total_retrans = 2;  /* retransmits during the omit period */
	ql_tcp_summary_init(&sum, &base);
	CHECK_EQ_U64(sum.rtt_samples, 0);
	for (i = 0; i < 5; i++) {
		s.valid = QL_TCPS_RTT | QL_TCPS_CWND | QL_TCPS_RETRANS;
		if (i == 2)
			s.valid = QL_TCPS_RTT;        /* this sample lost its counter */
		if (i == 3)
			s.valid = 0;                  /* this one failed entirely */
		s.total_retrans = totals[i];
		s.rtt_us = rtts[i];
		s.snd_cwnd_bytes = 14480ULL * (uint64_t)(i + 1);
		d = 999;
		if (ql_tcp_summary_add(&sum, &s, &d) == 0)
			seen += d;
		else
			CHECK_EQ_U64(d, 999);
	}
	CHECK_EQ_U64(sum.retransmits, 10);   /* 12 - 2 */
	CHECK_EQ_U64(seen, 10);
	CHECK_EQ_U64(sum.retrans_samples, 3);
	CHECK_EQ_U64(sum.rtt_samples, 4);
	CHECK_EQ_INT(sum.min_rtt_us, 100);
	CHECK_EQ_INT(sum.max_rtt_us, 900);
	CHECK(ql_tcp_summary_mean_rtt_us(&sum) == 425.0);
	CHECK_EQ_U64(sum.cwnd_samples, 3);
	CHECK_EQ_U64(sum.max_snd_cwnd_bytes, 14480ULL * 5);
	ql_tcp_summary_init(&sum, NULL);
	CHECK(ql_tcp_summary_mean_rtt_us(&sum) == 0.0);
	s.valid = QL_TCPS_RETRANS;
	s.total_retrans = 4;
	CHECK_EQ_INT(ql_tcp_summary_add(&sum, &s, NULL), 0);
	CHECK_EQ_U64(sum.retransmits, 4);
}

TEST(tcp_sample_from_real_socket)
{
	ql_err e;
	ql_tcp_sample s;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), u;

	if (l < 0 || c < 0)
		SKIP("no TCP sockets");
	CHECK_EQ_INT(bind(l, (struct sockaddr *)&a, sizeof a), 0);
	CHECK_EQ_INT(listen(l, 1), 0);
	CHECK_EQ_INT(getsockname(l, (struct sockaddr *)&a, &alen), 0);
	CHECK_EQ_INT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	CHECK_EQ_INT(write(c, "x", 1), 1);
	CHECK_EQ_INT(ql_tcp_sample_read(c, &s, 7, &e), 0);
	CHECK(s.valid & QL_TCPS_RTT);
	CHECK(s.valid & QL_TCPS_CWND);
	CHECK(s.valid & QL_TCPS_RETRANS);
	CHECK(s.valid & QL_TCPS_DELIVERY);
	CHECK(s.valid & QL_TCPS_BYTES_SENT);
	CHECK(s.snd_cwnd_segments >= 1);
	CHECK(s.snd_mss_bytes > 0);
	CHECK_EQ_U64(s.snd_cwnd_bytes, (uint64_t)s.snd_cwnd_segments * s.snd_mss_bytes);
	close(c);
	close(l);
	/* a UDP socket has no TCP_INFO: the sample fails and says so */
	u = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(ql_tcp_sample_read(u, &s, 0, &e) < 0);
	CHECK_EQ_INT(s.valid, 0);
	close(u);
	CHECK_EQ_INT(ql_tcp_sample_read(-1, &s, 0, &e), -EBADF);
	CHECK_STR(e.code, "EBADF");
}

/* ----------------------------------------------------------------- CPU -- */

TEST(cpu_usage_percentages)
{
	ql_cpu_mark a = {.wall_ns = 1000, .user_ns = 0, .system_ns = 0};
	ql_cpu_mark b = {.wall_ns = 1000 + QL_NS_PER_S, .user_ns = 500000000,
			 .system_ns = 250000000};
	int64_t th[3] = {100000000, 950000000, 1};
	ql_cpu_usage u;

	ql_cpu_usage_compute(&a, &b, th, 3, &u);
	CHECK_NEAR(u.user_pct, 50.0, 1e-12);
	CHECK_NEAR(u.system_pct, 25.0, 1e-12);
	CHECK_NEAR(u.total_pct, 75.0, 1e-12);
	CHECK_NEAR(u.busiest_thread_pct, 95.0, 1e-12);
	CHECK_EQ_INT(u.cpu_limited, 1);
	th[1] = 899999999;
	ql_cpu_usage_compute(&a, &b, th, 3, &u);
	CHECK_EQ_INT(u.cpu_limited, 0);
	th[1] = 900000000;
	ql_cpu_usage_compute(&a, &b, th, 3, &u);
	CHECK_EQ_INT(u.cpu_limited, 1);
	/* two busy cores: 200 % total, a thread still at most 100 % */
	b.user_ns = 2 * QL_NS_PER_S;
	b.system_ns = 0;
	th[0] = QL_NS_PER_S + 1000;
	ql_cpu_usage_compute(&a, &b, th, 3, &u);
	CHECK_NEAR(u.total_pct, 200.0, 1e-12);
	CHECK(u.busiest_thread_pct == 100.0);
	/* zero span: zeros, never NaN */
	ql_cpu_usage_compute(&a, &a, th, 3, &u);
	CHECK(u.total_pct == 0.0 && u.busiest_thread_pct == 0.0 && !u.cpu_limited);
	ql_cpu_usage_compute(&a, &b, NULL, 0, &u);
	CHECK(u.busiest_thread_pct == 0.0);
	CHECK(ql_cpu_pct(5, 0) == 0.0);
	CHECK(ql_cpu_pct(-5, 10) == 0.0);
}

static volatile uint64_t spin_sink;
static volatile int spin_release;

/* Spin for 30 ms of CPU, then stay alive (idle) until released, so the
 * main thread can read this thread's CPU clock. */
static void *spin_thread(void *arg)
{
	int64_t until = ql_cpu_thread_self_ns() + 30000000;
	(void)arg;
	while (ql_cpu_thread_self_ns() < until)
		spin_sink++;
	__atomic_store_n(&spin_release, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&spin_release, __ATOMIC_ACQUIRE) != 2)
		usleep(1000);
	return NULL;
}

TEST(cpu_thread_clocks_measure_spin)
{
	ql_err e;
	ql_cpu_mark m0, m1;
	pthread_t t;
	int64_t other = -1, self0, self1, d;
	ql_cpu_usage u;

	spin_release = 0;
	self0 = ql_cpu_thread_self_ns();
	CHECK(self0 >= 0);
	CHECK_EQ_INT(ql_cpu_mark_now(&m0, &e), 0);
	CHECK_EQ_INT(pthread_create(&t, NULL, spin_thread, NULL), 0);
	while (__atomic_load_n(&spin_release, __ATOMIC_ACQUIRE) != 1)
		usleep(1000);
	CHECK_EQ_INT(ql_cpu_thread_ns(t, &other, &e), 0);
	CHECK(other >= 30000000);
	CHECK(other < 1000000000);     /* it idled afterwards */
	__atomic_store_n(&spin_release, 2, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	self1 = ql_cpu_thread_self_ns();
	CHECK_EQ_INT(ql_cpu_mark_now(&m1, &e), 0);
	/* the process clock includes the finished thread's 30 ms (getrusage
	 * has microsecond granularity) */
	CHECK(m1.user_ns + m1.system_ns - m0.user_ns - m0.system_ns >= 29000000);
	d = other;
	ql_cpu_usage_compute(&m0, &m1, &d, 1, &u);
	CHECK(u.busiest_thread_pct > 0.0 && u.busiest_thread_pct <= 100.0);
	CHECK(u.total_pct > 0.0);
	/* the calling thread's own clock is monotone */
	CHECK(self1 >= self0);
}

/* -------------------------------------------------------------- pacing -- */

TEST(pacer_exact_schedule)
{
	ql_err e;
	ql_pacer p;
	int64_t next = 0, t;
	uint64_t total = 0, n;
	int ok = 1;

	/* 7 Mbit/s of 1000 B: slot j at floor(j * 8e12 / 7e6) ns, not an
	 * integer gap; poll every 100 us for 7 s */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 7000000, 1000, 0, &e), 0);
	CHECK_EQ_U64(p.max_burst, QL_PACER_BURST_MIN);
	for (t = 0; t <= 7 * QL_NS_PER_S; t += 100000) {
		n = ql_pacer_due(&p, t, &next);
		ok &= n <= 1;
		ok &= next > t;
		total += n;
	}
	CHECK(ok);
	/* j <= 7e9 * 7e6 / 8e12 = 6125  ->  6126 slots (j = 0..6125) */
	CHECK_EQ_U64(total, 6126);
	CHECK_EQ_U64(p.released, 6126);
	CHECK_EQ_U64(p.rebases, 0);
	CHECK_EQ_INT(next, ql_pacer_slot_ns(&p, 6126));
	CHECK_EQ_INT(ql_pacer_slot_ns(&p, 6126), 7001142857LL);
}

TEST(pacer_no_burst_after_stall)
{
	ql_err e;
	ql_pacer p;
	const int64_t ms = 1000000;
	int64_t next, t;
	uint64_t n, released_after = 0;
	int ok = 1;

	/* 8 Mbit/s of 1000 B = one datagram per ms */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 8000000, 1000, 0, &e), 0);
	CHECK_EQ_U64(ql_pacer_due(&p, 0, &next), 1);
	CHECK_EQ_INT(next, ms);
	CHECK_EQ_U64(ql_pacer_due(&p, ms / 2, &next), 0);
	CHECK_EQ_U64(ql_pacer_due(&p, 3 * ms, &next), 3);  /* lag 3 <= cap 4: kept */
	CHECK_EQ_INT(next, 4 * ms);
	/* stalled 100 ms: slots 4..103 are due, only max_burst are released */
	n = ql_pacer_due(&p, 103 * ms, &next);
	CHECK_EQ_U64(n, 4);
	CHECK_EQ_U64(p.rebases, 1);
	CHECK_EQ_U64(p.skipped_slots, 100 - 4);
	CHECK_EQ_INT(next, 107 * ms);  /* re-based: burst used slots 0..3 */
	/* from here on the rate is the target again: over 1 s after the stall
	 * at most 1000 + max_burst datagrams, never more than cap per call */
	for (t = 103 * ms + 1; t <= 1103 * ms; t += ms / 4) {
		n = ql_pacer_due(&p, t, NULL);
		ok &= n <= p.max_burst;
		released_after += n;
	}
	CHECK(ok);
	CHECK_EQ_U64(released_after, 996);  /* slots 4..999 of the new schedule */
	CHECK_EQ_U64(p.rebases, 1);
}

TEST(pacer_unlimited_unsend_and_args)
{
	ql_err e;
	ql_pacer p;
	int64_t next = -1;

	CHECK_EQ_INT(ql_pacer_init(&p, 0, 0, 1460, 0, &e), 0);
	CHECK_EQ_U64(ql_pacer_due(&p, 5, &next), QL_PACER_BURST_UNLIMITED);
	CHECK_EQ_INT(next, 5);
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 8000000, 0, 0, &e), -EINVAL);
	CHECK(strstr(e.msg, "length_bytes") != NULL);
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 8000000, 65508, 0, &e), -EINVAL);
	/* 1 Gbit/s of 1250 B = 100 kpps: default burst = 1 ms worth = 100 */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 1000000000, 1250, 0, &e), 0);
	CHECK_EQ_U64(p.max_burst, 100);
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 100000000000ULL, 100, 0, &e), 0);
	CHECK_EQ_U64(p.max_burst, QL_PACER_BURST_MAX);
	/* EAGAIN: give back 2 of 5; they are due again at once */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 8000000, 1000, 8, &e), 0);
	CHECK_EQ_U64(ql_pacer_due(&p, 4000000, &next), 5);
	ql_pacer_unsend(&p, 2);
	CHECK_EQ_U64(p.released, 3);
	CHECK_EQ_U64(ql_pacer_due(&p, 4000000, &next), 2);
	CHECK_EQ_INT(next, 5000000);
	ql_pacer_unsend(&p, 1000);
	CHECK_EQ_U64(p.k, 0);
	/* before the start nothing is due */
	CHECK_EQ_INT(ql_pacer_init(&p, 1000, 8000000, 1000, 0, &e), 0);
	CHECK_EQ_U64(ql_pacer_due(&p, 999, &next), 0);
	CHECK_EQ_INT(next, 1000);
}

/* ------------------------------------------------------------- helpers -- */

TEST(bits_per_second_guard)
{
	CHECK(ql_bits_per_second(1000000, 1.0) == 8000000.0);
	CHECK(ql_bits_per_second(1250, 0.5) == 20000.0);
	CHECK(ql_bits_per_second(1000, 0.0) == 0.0);
	CHECK(ql_bits_per_second(1000, -1.0) == 0.0);
	CHECK(ql_bits_per_second(1000, NAN) == 0.0);
	CHECK(ql_bits_per_second(1000, INFINITY) == 0.0);
	CHECK(ql_bits_per_second(UINT64_MAX, 1e-300) == 0.0);
	CHECK(isfinite(ql_bits_per_second(UINT64_MAX, 1e-9)));
	CHECK(ql_bits_per_second_ns(1000000, QL_NS_PER_S) == 8000000.0);
	CHECK(ql_bits_per_second_ns(1000000, 0) == 0.0);
	CHECK(ql_bits_per_second_ns(1000000, -5) == 0.0);
	CHECK(ql_loss_pct(0, 0) == 0.0);
	CHECK(ql_loss_pct(1, 4) == 25.0);
}

/* --------------------------------------------------------------- speed -- */

TEST(udp_books_are_fast)
{
	ql_err e;
	ql_udp_rx rx;
	const uint64_t n = 4000000;
	uint64_t s;
	int64_t t0, dt;

	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	/* thread CPU time, so other load on the machine does not count */
	t0 = ql_cpu_thread_self_ns();
	for (s = 1; s <= n; s += 2) {      /* every pair swapped */
		ql_udp_rx_packet(&rx, s + 1, 1400, (int64_t)s, (int64_t)s * 1000);
		ql_udp_rx_packet(&rx, s, 1400, (int64_t)s, (int64_t)s * 1000 + 10);
	}
	dt = ql_cpu_thread_self_ns() - t0;
	CHECK_EQ_U64(rx.total.unique_packets, n);
	printf("  udp books: %.1f ns CPU/datagram over %" PRIu64 " datagrams\n",
	       (double)dt / (double)n, n);
	/* 1 Mpps leaves < 1000 ns per datagram for everything; the books must
	 * take a small part of that (QL_SLOW_RUN=1 for valgrind runs). */
	CHECK((double)dt / (double)n < 200.0 || getenv("QL_SLOW_RUN") != NULL);
	ql_udp_rx_free(&rx);
}

/* ------------------------------------------- warm-up split by sequence -- */

/* Interval records as the engine keeps them: snapshot deltas by index. */
#define SPLIT_NIV 64
typedef struct split_books {
	int64_t unique[SPLIT_NIV], lost[SPLIT_NIV], ooo[SPLIT_NIV];
	int niv, bad;
	uint32_t k0;
} split_books;

static void split_move(void *ctx, const ql_udp_move *m)
{
	split_books *b = ctx;
	int src = m->index < (uint32_t)b->niv ? (int)m->index : b->niv - 1;
	int dst = m->to_omitted ? (int)b->k0 - 1 : (int)b->k0;
	int64_t *from = m->lost ? b->lost : b->unique, *to = m->lost ? b->lost : b->unique;
	int ooo = m->out_of_order;
	if (m->index == QL_UDP_MOVE_WARMUP) {
		/* received before the mark: in some warm-up interval, in order
		 * or not (whichever that interval still has) */
		CHECK(!m->to_omitted && !m->lost);
		src = (int)b->k0 - 1;
		while (src > 0 && from[src] < 1)
			src--;
		ooo = b->unique[src] <= b->ooo[src];
	}
	if (from[src] < 1)
		b->bad = 1;
	from[src]--;
	to[dst]++;
	if (ooo) {
		b->ooo[src]--;
		b->ooo[dst]++;
	}
}

/* The sender ends its warm-up after P datagrams, the receiver on its own
 * clock somewhere else; after the split the measured intervals hold exactly
 * the sequence numbers after P: lost + unique == sent - P, with reordering
 * and loss across both boundaries, whichever end ended first. */
TEST(udp_omit_split_at_sender_boundary)
{
	ql_err e;
	ql_udp_rx rx;
	const uint64_t sent = 40000;
	ql_udp_rx_opts o = { 0 };
	o.loss_horizon_ns = -1;   /* rule by window and finish only */
	split_books base;
	memset(&base, 0, sizeof base);
	CHECK_EQ_INT(ql_udp_rx_init(&rx, &o, &e), 0);
	uint64_t held[8], nheld = 0, release_after[8], B = 0, lo = 0;
	int marked = 0;
	for (uint64_t seq = 1, n = 0; seq <= sent; seq++) {
		if (chance(4))
			continue;   /* lost on the path */
		if (nheld < 8 && chance(20)) {
			held[nheld] = seq;
			release_after[nheld++] = 1 + rnd() % 5;
			continue;
		}
		ql_udp_rx_packet(&rx, seq, 100, 0, 0);
		for (uint64_t i = 0; i < nheld;) {
			if (--release_after[i] == 0) {
				ql_udp_rx_packet(&rx, held[i], 100, 0, 0);
				held[i] = held[--nheld];
				release_after[i] = release_after[nheld];
			} else {
				i++;
			}
		}
		if (++n % 1000 == 0) {
			/* the 12th snapshot closes the warm-up */
			if (base.niv == 11 && !marked) {
				CHECK_EQ_INT(ql_udp_rx_mark_omit(&rx, &e), 0);
				CHECK_EQ_INT(ql_udp_rx_mark_omit(&rx, &e), 0);   /* no-op */
				B = rx.omit_highest;
				lo = rx.omit_lo;
				marked = 1;
			}
			ql_udp_counts c;
			ql_udp_rx_snapshot(&rx, 0, &c, NULL);
			base.unique[base.niv] = (int64_t)c.unique_packets;
			base.lost[base.niv] = (int64_t)c.lost_packets;
			base.ooo[base.niv] = (int64_t)c.out_of_order_packets;
			base.niv++;
		}
	}
	for (uint64_t i = 0; i < nheld; i++)
		ql_udp_rx_packet(&rx, held[i], 100, 0, 0);
	CHECK(marked);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, sent, &e), 0);
	ql_udp_counts c;
	ql_udp_rx_snapshot(&rx, 0, &c, NULL);
	base.unique[base.niv - 1] += (int64_t)c.unique_packets;   /* folded as the engine does */
	base.lost[base.niv - 1] += (int64_t)c.lost_packets;
	base.ooo[base.niv - 1] += (int64_t)c.out_of_order_packets;
	base.k0 = 12;
	CHECK(B > 12000 && B < 20000);
	CHECK_EQ_U64(lo, B + 1 - QL_UDP_OMIT_BELOW);
	/* P: the sender ended first, at the receiver's point, later (both by
	 * a few and by many datagrams), and at the region's edges. */
	uint64_t ps[] = { B - 700, B - 1, B, B + 1, B + 3, B + 2500, lo - 1,
			  lo + QL_UDP_OMIT_REGION - 1 };
	for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
		uint64_t P = ps[j] < sent ? ps[j] : sent;
		split_books b = base;
		int rc = ql_udp_rx_omit_split(&rx, P, b.k0, split_move, &b, &e);
		CHECK(rc >= 0);
		CHECK(!b.bad);
		if (rc < 0 || b.bad)
			fprintf(stderr, "  P = B %+lld: rc %d\n", (long long)(P - B), rc);
		int64_t warm = 0, measured = 0;
		for (int k = 0; k < b.niv; k++) {
			CHECK(b.unique[k] >= 0 && b.lost[k] >= 0 && b.ooo[k] >= 0);
			CHECK(b.ooo[k] <= b.unique[k]);
			if (k < (int)b.k0)
				warm += b.unique[k] + b.lost[k];
			else
				measured += b.unique[k] + b.lost[k];
		}
		CHECK_EQ_U64((uint64_t)warm, P);
		CHECK_EQ_U64((uint64_t)measured, sent - P);
		if (P == B + 2500)
			CHECK(rc >= 2500);
	}
	/* Outside the recorded region: refused, books unchanged. */
	split_books b = base;
	CHECK_EQ_INT(ql_udp_rx_omit_split(&rx, lo - 2, b.k0, split_move, &b, &e), -ERANGE);
	CHECK_STR(e.code, "ERANGE");
	CHECK_EQ_INT(ql_udp_rx_omit_split(&rx, lo + QL_UDP_OMIT_REGION, b.k0, split_move, &b,
					  &e), -ERANGE);
	CHECK(memcmp(&b, &base, sizeof b) == 0);
	ql_udp_rx_free(&rx);

	/* Not marked: refused. */
	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	ql_udp_rx_packet(&rx, 1, 100, 0, 0);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 1, &e), 0);
	CHECK_EQ_INT(ql_udp_rx_omit_split(&rx, 0, 1, split_move, &b, &e), -EINVAL);
	ql_udp_rx_free(&rx);
}

/* The acceptance bound never rejects what a real pacer released, yet a
 * stray datagram numbered 400000 in a 1000 datagram/s test is rejected. */
TEST(udp_seq_bound_sound_and_tight)
{
	ql_err e;
	ql_pacer p;
	const int64_t ms = 1000000;
	/* 8 Mbit/s of 1000-byte datagrams, the engine's stall slack of
	 * 100 ms (100 datagrams); the sender's schedule starts 50 ms before
	 * the receiver's clock origin (worse than any real start order) */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 8000000, 1000, 100, &e), 0);
	ql_udp_accept a = { .rate_bps = 8000000, .length_bytes = 1000, .burst_packets = 100,
			    .origin_ns = 50 * ms };
	uint64_t sent = 0;
	int ok = 1;
	for (int64_t now = 0; now <= 20000 * ms; now += ms) {
		/* a stall of 300 ms at 5 s: the pacer re-bases; one of 90 ms at
		 * 9 s: it catches up in one burst */
		if ((now > 5000 * ms && now < 5300 * ms) || (now > 9000 * ms && now < 9090 * ms))
			continue;
		sent += ql_pacer_due(&p, now, NULL);
		/* arriving at once (no path delay): the tightest case */
		if (sent > ql_udp_seq_max(&a, sent, now, now))
			ok = 0;
	}
	CHECK(ok);
	CHECK(sent >= 19000);
	/* 1 s into the test: 1000 + 2 s slack x 1000 + 1 + burst + extra */
	uint64_t b = ql_udp_seq_max(&a, 0, 0, 1050 * ms);
	CHECK_EQ_U64(b, 3000 + 1 + 100 + QL_UDP_ACCEPT_EXTRA);
	CHECK(400000 > ql_udp_seq_max(&a, 10000, 0, 10050 * ms));
	/* before the origin (a clock read early): the slack alone */
	CHECK_EQ_U64(ql_udp_seq_max(&a, 0, 0, 0), 2000 + 1 + 100 + QL_UDP_ACCEPT_EXTRA);
	/* first_seq shifts the bound */
	a.first_seq = 101;
	CHECK_EQ_U64(ql_udp_seq_max(&a, 0, 0, 1050 * ms), 100 + 3000 + 1 + 100 + QL_UDP_ACCEPT_EXTRA);
	a.first_seq = 0;
	/* a limited test: never beyond its datagram count */
	a.limit_packets = 500;
	CHECK_EQ_U64(ql_udp_seq_max(&a, 0, 0, 100000 * ms), 500);
	a.limit_packets = 0;

	/* unpaced: 2^18 ahead of the highest, plus 2^24 a second since it */
	ql_udp_accept u = { .rate_bps = 0 };
	CHECK_EQ_U64(ql_udp_seq_max(&u, 10000, 1000 * ms, 1000 * ms), 10000 + QL_UDP_ACCEPT_AHEAD);
	CHECK_EQ_U64(ql_udp_seq_max(&u, 10000, 1000 * ms, 1001 * ms),
		     10000 + QL_UDP_ACCEPT_AHEAD + (QL_UDP_ACCEPT_MAX_PPS / 1000));
	CHECK(400000 > ql_udp_seq_max(&u, 10000, 1000 * ms, 1001 * ms));
	/* a sender at 2^24 datagrams/s stays inside after any silence */
	ok = 1;
	for (int64_t gap = 0; gap <= 3000 * ms; gap += 7 * ms) {
		uint64_t next = 10000 + (uint64_t)((unsigned __int128)gap * QL_UDP_ACCEPT_MAX_PPS / 1000000000);
		if (next > ql_udp_seq_max(&u, 10000, 1000 * ms, 1000 * ms + gap))
			ok = 0;
	}
	CHECK(ok);
	/* saturation instead of overflow */
	ql_udp_accept big = { .rate_bps = 1000000000000000ULL, .length_bytes = 16,
			      .burst_packets = UINT64_MAX, .origin_ns = INT64_MIN / 2 };
	CHECK_EQ_U64(ql_udp_seq_max(&big, 0, 0, INT64_MAX / 2), UINT64_MAX);
	CHECK_EQ_U64(ql_udp_seq_max(&u, UINT64_MAX - 5, 0, INT64_MAX), UINT64_MAX);
}

/* An invalid datagram touches no counter but its own. */
TEST(udp_invalid_touches_nothing_else)
{
	ql_udp_rx rx;
	ql_err e;
	ql_udp_counts c;
	CHECK_EQ_INT(ql_udp_rx_init(&rx, NULL, &e), 0);
	for (uint64_t s = 1; s <= 100; s++)
		ql_udp_rx_packet(&rx, s, 1000, 0, (int64_t)s);
	ql_udp_rx_invalid(&rx);
	ql_udp_rx_invalid(&rx);
	ql_udp_rx_snapshot(&rx, 200, &c, NULL);
	CHECK_EQ_U64(c.invalid_packets, 2);
	CHECK_EQ_U64(c.packets, 100);
	CHECK_EQ_U64(c.unique_packets, 100);
	CHECK_EQ_U64(c.lost_packets, 0);
	ql_udp_rx_invalid(&rx);
	CHECK_EQ_INT(ql_udp_rx_finish(&rx, 100, &e), 0);
	ql_udp_rx_snapshot(&rx, 300, &c, NULL);
	CHECK_EQ_U64(c.invalid_packets, 1);
	CHECK_EQ_U64(rx.total.lost_packets + rx.total.unique_packets, 100);
	CHECK_EQ_U64(rx.total.invalid_packets, 3);
	ql_udp_rx_free(&rx);
}

int main(void)
{
	RUN(udp_reorder_is_not_loss);
	RUN(udp_out_of_order_counts_rfc4737);
	RUN(udp_duplicates_are_not_unique);
	RUN(udp_mixed_matches_reference);
	RUN(udp_invariants_under_stress);
	RUN(udp_sequences_cross_2_pow_32);
	RUN(seq_extend32_wraps);
	RUN(udp_window_overflow_is_late);
	RUN(udp_window_rounds_and_rejects);
	RUN(udp_loss_horizon_rules_once);
	RUN(udp_loss_horizon_steady_stream);
	RUN(udp_finish_rejects_wrong_count);
	RUN(udp_huge_forward_jump);
	RUN(jitter_constant_transit_is_zero);
	RUN(jitter_step_then_exact_decay);
	RUN(jitter_in_arrival_order_for_reordered);
	RUN(jitter_garbage_timestamps_stay_finite);
	RUN(tcp_cwnd_bytes_large_window);
	RUN(tcp_missing_fields_are_absent);
	RUN(tcp_pmtu_and_snd_wnd);
	RUN(tcp_retrans_delta_64bit);
	RUN(tcp_summary_accumulates);
	RUN(tcp_sample_from_real_socket);
	RUN(cpu_usage_percentages);
	RUN(cpu_thread_clocks_measure_spin);
	RUN(pacer_exact_schedule);
	RUN(pacer_no_burst_after_stall);
	RUN(pacer_unlimited_unsend_and_args);
	RUN(bits_per_second_guard);
	RUN(udp_books_are_fast);
	RUN(udp_omit_split_at_sender_boundary);
	RUN(udp_seq_bound_sound_and_tight);
	RUN(udp_invalid_touches_nothing_else);
	return ctest_done();
}
