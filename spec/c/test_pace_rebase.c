/* C unit tests of the pacer's re-base burst (csrc/core/engine/pace.c) as
 * the UDP sender runs it: a slack of 100 ms of datagrams, 250 us of them
 * at a re-base, fed a clock that stalls. The fault it guards: after a 1 s
 * stall the re-based schedule began with the whole slack, 100 ms of
 * datagrams in one go, so one 10 ms window at the receiver carried ten
 * times its share. Now every 10 ms window stays within +-5 % of the target
 * while the clock runs on time and within +10 % after the 1 s stall; the
 * shorter stalls (50 ms, 5 ms: within the slack) are still caught up, so
 * every slot but the long stall's goes out. */
#include "ctest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pace.h"
#include "err.h"
#include "timer.h"

#define WIN_NS   10000000LL         /* 10 ms windows */
#define RUN_NS   (6 * QL_NS_PER_S)
#define NWIN     (RUN_NS / WIN_NS)

typedef struct sim {
	uint64_t win[NWIN];         /* datagrams released per window */
	uint64_t released;
} sim;

/* A sender that sleeps to the pacer's next slot and wakes wake_late_ns
 * late, stalled at three moments: 1 s at 1.0 s (beyond the slack), 50 ms
 * at 3.0 s and 5 ms at 4.0 s (within it). */
static void run_sender(ql_pacer *p, sim *s, int64_t wake_late_ns)
{
	const int64_t stall_at[3] = { QL_NS_PER_S, 3 * QL_NS_PER_S, 4 * QL_NS_PER_S };
	const int64_t stall_ns[3] = { QL_NS_PER_S, 50000000LL, 5000000LL };
	int next_stall = 0;
	int64_t now = 0, next;
	memset(s, 0, sizeof *s);
	while (now < RUN_NS) {
		uint64_t n = ql_pacer_due(p, now, &next);
		s->win[now / WIN_NS] += n;
		s->released += n;
		int64_t wake = (next > now ? next : now + 1) + wake_late_ns;
		if (next_stall < 3 && wake >= stall_at[next_stall]) {
			wake = stall_at[next_stall] + stall_ns[next_stall];
			next_stall++;
		}
		now = wake;
	}
}

/* As shares of the target: the largest window from the end of the 1 s
 * stall (2.0 s) to the next stall (3.0 s), and the smallest and largest
 * on-time window (0.1 s to 1 s, before the first stall). */
static void windows(const sim *s, double target, double *max_rebased, double *min_idle,
		    double *max_idle)
{
	*max_rebased = 0;
	*min_idle = 1e9;
	*max_idle = 0;
	for (int i = 0; i < NWIN - 1; i++) {
		double r = (double)s->win[i] / target;
		if (i >= 200 && i < 300 && r > *max_rebased)
			*max_rebased = r;
		if (i >= 10 && i < 100) {
			if (r < *min_idle)
				*min_idle = r;
			if (r > *max_idle)
				*max_idle = r;
		}
	}
}

static void udp_pacer(ql_pacer *p, uint64_t rate_bps, uint32_t len, int limited)
{
	ql_err e;
	/* the UDP sender's slack: 100 ms of datagrams */
	uint64_t burst = rate_bps / 10 / (8ULL * len);
	CHECK_EQ_INT(ql_pacer_init(p, 0, rate_bps, len, (uint32_t)burst, &e), 0);
	if (limited)
		ql_pacer_set_rebase_burst(p, ql_pacer_burst_of_ns(p, QL_PACER_REBASE_SPAN_NS));
}

static void check_rate(uint64_t rate_bps, uint32_t len)
{
	ql_pacer p;
	sim *s = calloc(1, sizeof *s);
	double target = (double)rate_bps * WIN_NS / 1e9 / (8.0 * len);
	double max_rebased, min_idle, max_idle;

	/* without the limit: the burst after the re-base this guards against */
	udp_pacer(&p, rate_bps, len, 0);
	run_sender(&p, s, 30000);
	windows(s, target, &max_rebased, &min_idle, &max_idle);
	CHECK(max_rebased > 2.0);

	udp_pacer(&p, rate_bps, len, 1);
	run_sender(&p, s, 30000);
	windows(s, target, &max_rebased, &min_idle, &max_idle);
	CHECK(max_rebased <= 1.10);
	CHECK(min_idle >= 0.95);
	CHECK(max_idle <= 1.05);
	/* the 1 s stall re-based (its slots dropped); the 50 ms and 5 ms
	 * ones were caught up: every other slot went out */
	CHECK_EQ_U64(p.rebases, 1);
	double planned = (double)RUN_NS / 1e9 * (double)rate_bps / (8.0 * len);
	double lost_s = (double)p.skipped_slots * 8.0 * len / (double)rate_bps;
	CHECK(lost_s > 0.99 && lost_s < 1.0);
	CHECK((double)s->released + (double)p.skipped_slots > planned - target);
	CHECK((double)s->released + (double)p.skipped_slots < planned + target);
	free(s);
}

TEST(rebase_100_mbit)
{
	check_rate(100000000ULL, 1400);
}

TEST(rebase_1_gbit)
{
	check_rate(1000000000ULL, 1400);
}

TEST(rebase_burst_args)
{
	ql_err e;
	ql_pacer p;
	int64_t next;
	/* 8 Mbit/s of 1000 B: a slot per ms; 250 us is less than the
	 * minimum, so 4 go at a re-base */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 8000000, 1000, 100, &e), 0);
	CHECK_EQ_U64(ql_pacer_burst_of_ns(&p, QL_PACER_REBASE_SPAN_NS), QL_PACER_BURST_MIN);
	CHECK_EQ_U64(ql_pacer_burst_of_ns(&p, 20000000), 20);
	ql_pacer_set_rebase_burst(&p, 4);
	/* 50 ms late: 51 due, within the slack of 100: all go */
	CHECK_EQ_U64(ql_pacer_due(&p, 50000000, &next), 51);
	CHECK_EQ_U64(p.rebases, 0);
	/* 200 ms later: 200 due, over the slack: 4 go, 196 dropped */
	CHECK_EQ_U64(ql_pacer_due(&p, 250000000, &next), 4);
	CHECK_EQ_U64(p.rebases, 1);
	CHECK_EQ_U64(p.skipped_slots, 196);
	CHECK_EQ_INT(next, 254000000);
	/* capped at max_burst; unlimited rate: its burst */
	ql_pacer_set_rebase_burst(&p, 1000);
	CHECK_EQ_U64(p.rebase_burst, 100);
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 0, 1000, 0, &e), 0);
	CHECK_EQ_U64(ql_pacer_burst_of_ns(&p, 250000), QL_PACER_BURST_UNLIMITED);
}

int main(void)
{
	RUN(rebase_100_mbit);
	RUN(rebase_1_gbit);
	RUN(rebase_burst_args);
	return ctest_done();
}
