/* C unit tests of csrc/core/engine/pace.c over blocks, the TCP sender's
 * schedule: exact slots, the 10 ms catch-up slack, no burst after a stall
 * (the datagram schedule is tested in test_stats.c). */
#include "ctest.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "engine/pace.h"
#include "err.h"
#include "timer.h"

static const int64_t MS_NS = 1000000;

TEST(blocks_exact_schedule)
{
	ql_err e;
	ql_pacer p;
	int64_t next = 0, t;
	uint64_t total = 0, n;
	int ok = 1;

	/* 10 Mbit/s of 125000 B blocks: one block per 100 ms; 10 ms of slack
	 * is a tenth of a block, so the slack is one block */
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 10000000, 125000, QL_PACER_TCP_SLACK_NS, &e), 0);
	CHECK_EQ_U64(p.max_burst, 1);
	for (t = 0; t <= QL_NS_PER_S; t += MS_NS) {
		n = ql_pacer_due(&p, t, &next);
		ok &= n <= 1;
		ok &= next > t;
		total += n;
	}
	CHECK(ok);
	/* blocks 0..10 are due at 0, 100, ..., 1000 ms */
	CHECK_EQ_U64(total, 11);
	CHECK_EQ_U64(p.rebases, 0);
	CHECK_EQ_INT(next, 1100 * MS_NS);
	/* 7 Mbit/s of 131072 B: slot 3 at floor(3 * 131072 * 8e9 / 7e6) ns */
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 5, 7000000, 131072, QL_PACER_TCP_SLACK_NS, &e), 0);
	CHECK_EQ_INT(ql_pacer_slot_ns(&p, 3), 5 + 449389714LL);
}

TEST(blocks_catch_up_within_slack_then_rebase)
{
	ql_err e;
	ql_pacer p;
	int64_t next, t;
	uint64_t n, after = 0;
	int ok = 1;

	/* 100 Mbit/s of 12500 B = one block per ms; slack 10 ms = 10 blocks */
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 100000000, 12500, QL_PACER_TCP_SLACK_NS, &e), 0);
	CHECK_EQ_U64(p.max_burst, 10);
	CHECK_EQ_U64(ql_pacer_due(&p, 0, &next), 1);
	CHECK_EQ_INT(next, MS_NS);
	/* behind by 8 ms (inside the slack): the 8 blocks go, the schedule
	 * stays where it was */
	CHECK_EQ_U64(ql_pacer_due(&p, 8 * MS_NS, &next), 8);
	CHECK_EQ_U64(p.rebases, 0);
	CHECK_EQ_INT(next, 9 * MS_NS);
	/* a 500 ms stall: 492 blocks due, 10 (the slack) go, the rest is
	 * dropped and the schedule starts again at the stall's end */
	n = ql_pacer_due(&p, 500 * MS_NS, &next);
	CHECK_EQ_U64(n, 10);
	CHECK_EQ_U64(p.rebases, 1);
	CHECK_EQ_U64(p.skipped_slots, 492 - 10);
	CHECK_EQ_INT(next, 510 * MS_NS);
	/* then the target rate again: slots 10..999 of the new schedule over
	 * the next second, never more than the slack in one call */
	for (t = 500 * MS_NS + 1; t <= 1500 * MS_NS; t += MS_NS / 4) {
		n = ql_pacer_due(&p, t, NULL);
		ok &= n <= p.max_burst;
		after += n;
	}
	CHECK(ok);
	CHECK_EQ_U64(after, 990);
	CHECK_EQ_U64(p.rebases, 1);
}

TEST(blocks_longer_than_the_slack_go_one_at_a_time)
{
	ql_err e;
	ql_pacer p;
	int64_t next;

	/* 1 Mbit/s of 131072 B (1.048576 s per block): after a 5 s stall one
	 * block goes, the next is a whole gap later */
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 1000000, 131072, QL_PACER_TCP_SLACK_NS, &e), 0);
	CHECK_EQ_U64(p.max_burst, 1);
	CHECK_EQ_U64(ql_pacer_due(&p, 0, &next), 1);
	CHECK_EQ_INT(next, 1048576000LL);
	CHECK_EQ_U64(ql_pacer_due(&p, 5 * QL_NS_PER_S, &next), 1);
	CHECK_EQ_U64(p.rebases, 1);
	CHECK_EQ_INT(next, 5 * QL_NS_PER_S + 1048576000LL);
	CHECK_EQ_U64(ql_pacer_due(&p, 5 * QL_NS_PER_S + 1048575999LL, &next), 0);
}

/* Over any span that starts at a call, a sender released no more than the
 * slack plus span x rate, whatever its stalls: the bound the header states.
 * Stalls of 0..40 ms (some beyond the slack) from a fixed LCG. */
TEST(blocks_never_burst_beyond_slack)
{
	ql_err e;
	ql_pacer p;
	enum { CALLS = 4000 };
	static int64_t at[CALLS];
	static uint64_t rel[CALLS + 1];
	uint64_t seed = 12345;
	int64_t t = 0;
	int ok = 1;

	/* 40 Mbit/s of 10000 B = 2 ms per block; slack 10 ms = 5 blocks */
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 40000000, 10000, QL_PACER_TCP_SLACK_NS, &e), 0);
	CHECK_EQ_U64(p.max_burst, 5);
	rel[0] = 0;
	for (int i = 0; i < CALLS; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		t += (int64_t)((seed >> 33) % 40) * MS_NS + 1;
		at[i] = t;
		rel[i + 1] = rel[i] + ql_pacer_due(&p, t, NULL);
	}
	for (int i = 0; i < CALLS; i += 7)
		for (int j = i; j < CALLS; j += 13) {
			/* blocks released by the calls at[i]..at[j] */
			uint64_t n = rel[j + 1] - rel[i];
			uint64_t span_blocks = (uint64_t)(at[j] - at[i]) / (2 * MS_NS);
			ok &= n <= p.max_burst + span_blocks + 1;
		}
	CHECK(ok);
	CHECK(p.rebases > 0);
	CHECK(p.skipped_slots > 0);
}

TEST(blocks_args)
{
	ql_err e;
	ql_pacer p;
	int64_t next = -1;

	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 1000000, 0, QL_PACER_TCP_SLACK_NS, &e), -EINVAL);
	CHECK(strstr(e.msg, "block_bytes") != NULL);
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 1000000, QL_PACER_BLOCK_MAX_BYTES + 1,
					  QL_PACER_TCP_SLACK_NS, &e), -EINVAL);
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 1000000, 1000, -1, &e), -EINVAL);
	CHECK(strstr(e.msg, "slack_ns") != NULL);
	/* unlimited: every call releases the unlimited burst, due at once */
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 0, 131072, QL_PACER_TCP_SLACK_NS, &e), 0);
	CHECK_EQ_U64(ql_pacer_due(&p, 7, &next), QL_PACER_BURST_UNLIMITED);
	CHECK_EQ_INT(next, 7);
	/* no slack at all still lets one block go */
	CHECK_EQ_INT(ql_pacer_init_blocks(&p, 0, 1000000000, 1000, 0, &e), 0);
	CHECK_EQ_U64(p.max_burst, 1);
}

int main(void)
{
	RUN(blocks_exact_schedule);
	RUN(blocks_catch_up_within_slack_then_rebase);
	RUN(blocks_longer_than_the_slack_go_one_at_a_time);
	RUN(blocks_never_burst_beyond_slack);
	RUN(blocks_args);
	return ctest_done();
}
