/*
 * test_schedule.c - csrc/core/schedule.c: steps run in order at their
 * planned instants (never before; planned times on the absolute grid even
 * when one step is slow), a failed step is recorded and the next still runs,
 * stop drops the steps not yet due, and bad offsets are usage errors naming
 * the step.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "../../csrc/core/schedule.h"
#include "../../csrc/core/timer.h"
#include "ctest.h"

typedef struct rec {
	int calls;
	int64_t at_ns[8];
	int fail_step;     /* this step returns -EPERM; -1 = none */
	int slow_step;     /* this step takes 30 ms; -1 = none */
} rec;

static int apply(void *ctx, size_t step, ql_err *e)
{
	rec *r = ctx;
	r->at_ns[r->calls++] = ql_now_ns();
	if ((int)step == r->slow_step) {
		struct timespec ts = { 0, 30000000 };
		nanosleep(&ts, NULL);
	}
	if ((int)step == r->fail_step)
		return ql_err_set(e, EPERM, NULL, "step %zu refused", step);
	return 0;
}

TEST(steps_run_in_order_at_their_instants)
{
	rec r = { .fail_step = -1, .slow_step = 0 };
	const int64_t off[] = { 0, 20000000, 20000000, 60000000 };
	ql_sched *s;
	ql_err e;
	int64_t t0 = ql_now_ns() + 10000000;
	CHECK_EQ_INT(ql_sched_start(off, 4, t0, apply, &r, &s, &e), 0);
	CHECK_EQ_INT(ql_sched_start_ns(s), t0);
	CHECK_EQ_INT(ql_sched_wait(s, ql_now_ns() + 5 * QL_NS_PER_S), 1);
	CHECK_EQ_INT(ql_sched_finished(s), 1);
	CHECK_EQ_INT(ql_sched_done(s), 4);
	CHECK_EQ_INT(r.calls, 4);
	for (size_t i = 0; i < 4; i++) {
		ql_sched_entry en;
		CHECK_EQ_INT(ql_sched_entry_get(s, i, &en), 0);
		CHECK_EQ_INT(en.planned_ns, t0 + off[i]);
		CHECK(en.begun_ns >= en.planned_ns);     /* never early */
		CHECK(en.done_ns >= en.begun_ns);
		CHECK(en.done_unix_ns > 0);
		CHECK_EQ_INT(en.rc, 0);
	}
	/* step 0 took 30 ms: step 1 (due at +20 ms) began after it returned,
	 * and the later steps' planned times stayed on the grid */
	ql_sched_entry e0, e1;
	ql_sched_entry_get(s, 0, &e0);
	ql_sched_entry_get(s, 1, &e1);
	CHECK(e1.begun_ns >= e0.done_ns);
	CHECK(e0.done_ns - e0.begun_ns >= 30000000);
	ql_sched_entry last;
	CHECK_EQ_INT(ql_sched_entry_get(s, 4, &last), -ERANGE);
	ql_sched_free(s);
}

TEST(a_failed_step_is_recorded_and_the_next_runs)
{
	rec r = { .fail_step = 0, .slow_step = -1 };
	const int64_t off[] = { 0, 1000000 };
	ql_sched *s;
	ql_err e;
	CHECK_EQ_INT(ql_sched_start(off, 2, 0, apply, &r, &s, &e), 0);
	CHECK_EQ_INT(ql_sched_wait(s, 0), 1);
	ql_sched_entry en;
	ql_sched_entry_get(s, 0, &en);
	CHECK_EQ_INT(en.rc, -EPERM);
	CHECK_STR(en.err.code, "EPERM");
	CHECK_STR(en.err.msg, "step 0 refused");
	ql_sched_entry_get(s, 1, &en);
	CHECK_EQ_INT(en.rc, 0);
	ql_sched_free(s);
}

TEST(stop_drops_the_steps_not_yet_due)
{
	rec r = { .fail_step = -1, .slow_step = -1 };
	const int64_t off[] = { 0, 10 * QL_NS_PER_S };
	ql_sched *s;
	ql_err e;
	CHECK_EQ_INT(ql_sched_start(off, 2, 0, apply, &r, &s, &e), 0);
	/* step 0 is due at once, step 1 10 s away: wait (up to 5 s, a loaded
	 * host may start the thread late) until step 0 is done */
	int64_t until = ql_now_ns() + 5 * QL_NS_PER_S;
	while (ql_sched_done(s) < 1 && ql_now_ns() < until)
		CHECK_EQ_INT(ql_sched_wait(s, ql_now_ns() + 50000000), 0);
	CHECK_EQ_INT(ql_sched_done(s), 1);
	CHECK_EQ_INT(ql_sched_finished(s), 0);   /* asked without waiting */
	int64_t t = ql_now_ns();
	ql_sched_stop(s);
	CHECK_EQ_INT(ql_sched_finished(s), 1);
	CHECK(ql_now_ns() - t < QL_NS_PER_S);    /* woken, not slept out */
	ql_sched_stop(s);                         /* idempotent */
	CHECK_EQ_INT(ql_sched_wait(s, 0), 1);
	CHECK_EQ_INT(r.calls, 1);
	ql_sched_free(s);
}

TEST(bad_offsets_are_usage_errors_naming_the_step)
{
	rec r = { .fail_step = -1, .slow_step = -1 };
	ql_sched *s = (ql_sched *)&r;
	ql_err e;
	const int64_t neg[] = { 0, -1 };
	CHECK_EQ_INT(ql_sched_start(neg, 2, 0, apply, &r, &s, &e), -EINVAL);
	CHECK(s == NULL);
	CHECK(e.usage);
	CHECK_STR(e.msg, "steps[2].at_s: expected >= 0");
	const int64_t back[] = { 5, 4 };
	CHECK_EQ_INT(ql_sched_start(back, 2, 0, apply, &r, &s, &e), -EINVAL);
	CHECK_STR(e.msg, "steps[2].at_s: expected >= steps[1].at_s (steps in time order)");
	CHECK_EQ_INT(ql_sched_start(back, 0, 0, apply, &r, &s, &e), -EINVAL);
	CHECK_STR(e.msg, "steps: expected a non-empty list of steps");
	CHECK_EQ_INT(r.calls, 0);
}

/* A schedule has a bound on its steps (a trace read for 1e6 s would be ten
 * million): one past it is refused before anything is allocated, naming
 * the bound; the bound itself is taken. */
TEST(steps_are_bounded)
{
	rec r = { .fail_step = -1, .slow_step = -1 };
	ql_sched *s = NULL;
	ql_err e;
	int64_t *off = calloc(QL_SCHED_MAX_STEPS + 1, sizeof *off);
	CHECK(off != NULL);
	for (size_t i = 0; i <= QL_SCHED_MAX_STEPS; i++)
		off[i] = 3600 * QL_NS_PER_S;  /* due in an hour: stopped first */
	CHECK_EQ_INT(ql_sched_start(off, QL_SCHED_MAX_STEPS + 1, 0, apply, &r, &s, &e), -EINVAL);
	CHECK(s == NULL);
	CHECK(e.usage);
	CHECK_STR(e.msg, "steps: expected at most 100000 steps, got 100001");
	CHECK_EQ_INT(ql_sched_start(off, QL_SCHED_MAX_STEPS, 0, apply, &r, &s, &e), 0);
	CHECK_EQ_INT((int)ql_sched_steps(s), QL_SCHED_MAX_STEPS);
	ql_sched_free(s);
	CHECK_EQ_INT(r.calls, 0);
	free(off);
}

int main(void)
{
	RUN(steps_are_bounded);
	RUN(steps_run_in_order_at_their_instants);
	RUN(a_failed_step_is_recorded_and_the_next_runs);
	RUN(stop_drops_the_steps_not_yet_due);
	RUN(bad_offsets_are_usage_errors_naming_the_step);
	return ctest_done();
}
