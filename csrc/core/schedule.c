/*
 * schedule.c - the schedule thread (see schedule.h).
 *
 * The thread alone writes the entries; ndone, under the mutex, publishes
 * them: an entry below ndone is never written again, so readers copy it
 * under the same mutex. The thread waits for each instant on a condition
 * variable bound to CLOCK_MONOTONIC with an absolute timeout (a futex wait,
 * as precise as clock_nanosleep), so a stop wakes it at once.
 */
#include "schedule.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timer.h"

struct ql_sched {
	pthread_t thread;
	int joined;
	pthread_mutex_t mu;
	pthread_cond_t cv;        /* ndone, finished or stop changed */
	int stop;                 /* under mu */
	int finished;             /* the thread is past its last step */
	size_t n, ndone;
	int64_t start_ns;
	ql_sched_apply_fn fn;
	void *ctx;
	ql_sched_entry *entries;
};

static int64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
}

static void *run(void *arg)
{
	ql_sched *s = arg;
	for (size_t i = 0; i < s->n; i++) {
		ql_sched_entry *en = &s->entries[i];
		struct timespec ts = { .tv_sec = en->planned_ns / QL_NS_PER_S,
				       .tv_nsec = en->planned_ns % QL_NS_PER_S };
		pthread_mutex_lock(&s->mu);
		while (!s->stop && ql_now_ns() < en->planned_ns)
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		int stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		ql_err_clear(&en->err);
		en->begun_ns = ql_now_ns();
		en->rc = s->fn(s->ctx, i, &en->err);
		en->done_ns = ql_now_ns();
		en->done_unix_ns = realtime_ns();
		pthread_mutex_lock(&s->mu);
		s->ndone = i + 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&s->mu);
	s->finished = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int ql_sched_start(const int64_t *offset_ns, size_t n, int64_t start_ns,
		   ql_sched_apply_fn fn, void *ctx, ql_sched **out, ql_err *e)
{
	*out = NULL;
	if (n == 0)
		return ql_err_usage(e, "steps: expected a non-empty list of steps");
	if (n > QL_SCHED_MAX_STEPS)
		return ql_err_usage(e, "steps: expected at most %d steps, got %zu",
				    QL_SCHED_MAX_STEPS, n);
	for (size_t i = 0; i < n; i++) {
		if (offset_ns[i] < 0)
			return ql_err_usage(e, "steps[%zu].at_s: expected >= 0", i + 1);
		if (i > 0 && offset_ns[i] < offset_ns[i - 1])
			return ql_err_usage(e, "steps[%zu].at_s: expected >= steps[%zu].at_s (steps in time order)",
					    i + 1, i);
	}
	ql_sched *s = calloc(1, sizeof *s);
	if (!s)
		return ql_err_set(e, ENOMEM, NULL, "out of memory for a schedule of %zu steps", n);
	s->entries = calloc(n, sizeof *s->entries);
	if (!s->entries) {
		free(s);
		return ql_err_set(e, ENOMEM, NULL, "out of memory for a schedule of %zu steps", n);
	}
	s->n = n;
	s->fn = fn;
	s->ctx = ctx;
	s->start_ns = start_ns > 0 ? start_ns : ql_now_ns();
	for (size_t i = 0; i < n; i++)
		s->entries[i].planned_ns = s->start_ns + offset_ns[i];
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	int rc = pthread_create(&s->thread, NULL, run, s);
	if (rc != 0) {
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free(s->entries);
		free(s);
		return ql_err_set(e, rc, NULL, "cannot start the schedule thread: %s",
				  strerror(rc));
	}
	*out = s;
	return 0;
}

int64_t ql_sched_start_ns(const ql_sched *s) { return s->start_ns; }
size_t ql_sched_steps(const ql_sched *s) { return s->n; }

size_t ql_sched_done(ql_sched *s)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->ndone;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int ql_sched_entry_get(ql_sched *s, size_t i, ql_sched_entry *out)
{
	pthread_mutex_lock(&s->mu);
	int ok = i < s->ndone;
	if (ok)
		*out = s->entries[i];
	pthread_mutex_unlock(&s->mu);
	return ok ? 0 : -ERANGE;
}

int ql_sched_wait(ql_sched *s, int64_t deadline_ns)
{
	pthread_mutex_lock(&s->mu);
	while (!s->finished) {
		if (deadline_ns <= 0) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		struct timespec ts = { .tv_sec = deadline_ns / QL_NS_PER_S,
				       .tv_nsec = deadline_ns % QL_NS_PER_S };
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
			break;
	}
	int done = s->finished;
	pthread_mutex_unlock(&s->mu);
	return done;
}

int ql_sched_finished(ql_sched *s)
{
	pthread_mutex_lock(&s->mu);
	int done = s->finished;
	pthread_mutex_unlock(&s->mu);
	return done;
}

void ql_sched_stop(ql_sched *s)
{
	if (!s || s->joined)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	s->joined = 1;
}

void ql_sched_free(ql_sched *s)
{
	if (!s)
		return;
	ql_sched_stop(s);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->entries);
	free(s);
}
