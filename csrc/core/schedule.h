/*
 * schedule.h - changes at planned instants on an absolute CLOCK_MONOTONIC
 * grid, made by a thread of their own (Lua-free).
 *
 * A schedule is a list of offsets from one start instant; step i is due at
 * start_ns + offset_ns[i] (absolute, so a late step never delays the next
 * one's time: no drift). The thread sleeps until each instant (TIMER_ABSTIME)
 * and calls the caller's apply function with the step's index; what a step
 * does (replace a netem over rtnetlink, swap an impairment link's spec) is the
 * caller's. Each step's record keeps its planned time, the times its apply
 * began and returned (monotonic) and when it returned on CLOCK_REALTIME (to
 * place it on a traffic test's clock), and its outcome. A failed apply is
 * recorded and the schedule goes on with the next step. The thread runs while
 * the caller's own thread is blocked elsewhere (in a traffic test).
 */
#ifndef QL_SCHEDULE_H
#define QL_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Apply step `step`; 0 or a negative errno with e filled. Called from the
 * schedule's thread only, one step at a time, in order. */
typedef int (*ql_sched_apply_fn)(void *ctx, size_t step, ql_err *e);

typedef struct ql_sched_entry {
	int64_t planned_ns;       /* CLOCK_MONOTONIC: start_ns + offset_ns[i] */
	int64_t begun_ns;         /* CLOCK_MONOTONIC: the apply was called */
	int64_t done_ns;          /* CLOCK_MONOTONIC: the apply returned */
	int64_t done_unix_ns;     /* CLOCK_REALTIME at done_ns */
	int rc;                   /* the apply's return value */
	ql_err err;               /* filled when rc < 0 */
} ql_sched_entry;

typedef struct ql_sched ql_sched;

/* The most steps one schedule takes (the bound of every trace reader): a
 * record of about 100 bytes each here and a spec per step in the caller. */
#define QL_SCHED_MAX_STEPS 100000

/*
 * Start the thread. offset_ns: n offsets >= 0, non-decreasing (copied);
 * start_ns <= 0 means now. fn and ctx must stay valid until ql_sched_free.
 * Usage errors (n == 0 or above QL_SCHED_MAX_STEPS, a negative or
 * decreasing offset) name steps or steps[i].at_s (1-based); a failed thread start is ENOMEM/EAGAIN.
 */
int ql_sched_start(const int64_t *offset_ns, size_t n, int64_t start_ns,
		   ql_sched_apply_fn fn, void *ctx, ql_sched **out, ql_err *e);

/* The start instant (CLOCK_MONOTONIC ns) and the number of steps. */
int64_t ql_sched_start_ns(const ql_sched *s);
size_t ql_sched_steps(const ql_sched *s);

/* Steps finished so far (their entries are final). */
size_t ql_sched_done(ql_sched *s);

/* Copy entry i (i < ql_sched_done) to *out; -ERANGE otherwise. */
int ql_sched_entry_get(ql_sched *s, size_t i, ql_sched_entry *out);

/* Wait until every step is done, the schedule was stopped, or the absolute
 * CLOCK_MONOTONIC deadline_ns passed (<= 0: no deadline). 1 = finished,
 * 0 = deadline. */
int ql_sched_wait(ql_sched *s, int64_t deadline_ns);

/* Whether the thread is past its last step (every step ran, or the
 * schedule was stopped), without waiting: 1 or 0. */
int ql_sched_finished(ql_sched *s);

/* Cancel the steps not yet begun (one being applied completes) and join the
 * thread; idempotent. Returns at once, or when the apply under way returns. */
void ql_sched_stop(ql_sched *s);

/* Stop, then free. NULL ok. */
void ql_sched_free(ql_sched *s);

#endif
