/* C unit tests of the pacer's catch-up ceiling (csrc/core/engine/pace.c)
 * as the UDP sender runs it: a slack of 100 ms of datagrams, the ceiling
 * at +25 % with 250 us of tolerance, fed a clock that stalls. The fault it
 * guards: with only the slack, a sender that woke 50 ms late sent the 50 ms
 * of missed datagrams at once, and after a 1 s stall the re-based schedule
 * began with 100 ms of datagrams in one go, so one 10 ms window at the
 * receiver carried up to ten times its share. Now every 10 ms window stays
 * within +-5 % of the target while the clock runs on time and within
 * +10 % after the 1 s stall, and a short stall is caught up at no more than
 * the ceiling (+25 % and the tolerance). */
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

/* As shares of the target: the largest window, the largest from the end
 * of the 1 s stall (2.0 s) to the next (3.0 s), and the smallest and
 * largest on-time window (0.1 s to 1 s, before the first stall). */
static void windows(const sim *s, double target, double *max_all, double *max_rebased,
		    double *min_idle, double *max_idle)
{
	*max_all = 0;
	*max_rebased = 0;
	*min_idle = 1e9;
	*max_idle = 0;
	for (int i = 0; i < NWIN - 1; i++) {
		double r = (double)s->win[i] / target;
		if (r > *max_all)
			*max_all = r;
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

static void udp_pacer(ql_pacer *p, uint64_t rate_bps, uint32_t len, int ceiling)
{
	ql_err e;
	/* the UDP sender's slack: 100 ms of datagrams */
	uint64_t burst = rate_bps / 10 / (8ULL * len);
	CHECK_EQ_INT(ql_pacer_init(p, 0, rate_bps, len, (uint32_t)burst, &e), 0);
	if (ceiling)
		ql_pacer_set_ceiling(p, QL_PACER_CATCHUP_PCT, QL_PACER_CEIL_TOL_NS);
}

static void check_rate(uint64_t rate_bps, uint32_t len)
{
	ql_pacer p;
	sim *s = calloc(1, sizeof *s);
	double target = (double)rate_bps * WIN_NS / 1e9 / (8.0 * len);
	double max_all, max_rebased, min_idle, max_idle;

	/* without the ceiling: the bursts this guards against */
	udp_pacer(&p, rate_bps, len, 0);
	run_sender(&p, s, 30000);
	windows(s, target, &max_all, &max_rebased, &min_idle, &max_idle);
	CHECK(max_all > 2.0);
	CHECK(max_rebased > 2.0);

	udp_pacer(&p, rate_bps, len, 1);
	run_sender(&p, s, 30000);
	windows(s, target, &max_all, &max_rebased, &min_idle, &max_idle);
	CHECK(max_rebased <= 1.10);
	CHECK(max_all <= 1.25 * (1 + 0.5 / 10));
	CHECK(min_idle >= 0.95);
	CHECK(max_idle <= 1.05);
	/* the 1 s stall re-based (its slots dropped); the 50 ms and 5 ms
	 * ones were caught up: every other slot went out */
	CHECK_EQ_U64(p.rebases, 1);
	double planned = (double)RUN_NS / 1e9 * (double)rate_bps / (8.0 * len);
	double lost_s = (double)p.skipped_slots * 8.0 * len / (double)rate_bps;
	CHECK(lost_s > 0.89 && lost_s < 1.0);
	CHECK((double)s->released + (double)p.skipped_slots > planned - target);
	CHECK((double)s->released + (double)p.skipped_slots < planned + target);
	free(s);
}

TEST(ceiling_100_mbit)
{
	check_rate(100000000ULL, 1400);
}

TEST(ceiling_1_gbit)
{
	check_rate(1000000000ULL, 1400);
}

TEST(ceiling_unsend_and_off)
{
	ql_err e;
	ql_pacer p;
	int64_t next;
	/* 8 Mbit/s of 1000 B: a slot per ms; tolerance at least 4 slots;
	 * +4 %: a slot per 961538 ns at the ceiling */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 8000000, 1000, 100, &e), 0);
	ql_pacer_set_ceiling(&p, 4, 0);
	CHECK_EQ_U64(p.ceil_gap_ns, 961538);
	CHECK_EQ_INT(p.ceil_tol_ns, 4000000);
	/* 20 ms late: 21 due, the ceiling lets the tolerance's 5 go */
	CHECK_EQ_U64(ql_pacer_due(&p, 20000000, &next), 5);
	CHECK(next > 20000000 && next < 21000000);
	/* given back: due again at once, in the same ceiling slots */
	ql_pacer_unsend(&p, 2);
	CHECK_EQ_U64(ql_pacer_due(&p, 20000000, &next), 2);
	/* off: the rest of the lag goes at once */
	ql_pacer_set_ceiling(&p, 0, 0);
	CHECK_EQ_U64(ql_pacer_due(&p, 20000000, &next), 16);
	CHECK_EQ_INT(next, 21000000);
	/* unlimited rate: no ceiling */
	CHECK_EQ_INT(ql_pacer_init(&p, 0, 0, 1000, 0, &e), 0);
	ql_pacer_set_ceiling(&p, 4, 250000);
	CHECK_EQ_U64(p.ceil_gap_ns, 0);
}

int main(void)
{
	RUN(ceiling_100_mbit);
	RUN(ceiling_1_gbit);
	RUN(ceiling_unsend_and_off);
	return ctest_done();
}
