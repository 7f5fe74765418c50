/*
 * timer.h - monotonic time, sleeps and periodic timers (Lua-free).
 *
 * Every interval, deadline and pacing decision in qoslab uses CLOCK_MONOTONIC
 * (clock_gettime(2)); periodic timers are timerfd(2) armed with absolute
 * expirations, so ticks stay on the grid start + k * period and never drift.
 */
#ifndef QL_TIMER_H
#define QL_TIMER_H

#include <stdint.h>

#include "err.h"

#define QL_NS_PER_S 1000000000LL

/* CLOCK_MONOTONIC now, in nanoseconds. */
int64_t ql_now_ns(void);

/*
 * Sleep until the absolute CLOCK_MONOTONIC time deadline_ns (TIMER_ABSTIME,
 * so an interrupted sleep resumes towards the same instant). Returns 0, or
 * -EINTR (code "EINTR") if *stop becomes non-zero while sleeping (checked at
 * least every 50 ms and after every signal); stop may be NULL.
 */
int ql_sleep_until_ns(int64_t deadline_ns, const volatile int *stop,
		      ql_err *e);

/*
 * Wait until fd reaches its end (a read of 0 bytes: the writer of a pipe or
 * the peer of a socket closed it) or until the CLOCK_MONOTONIC time
 * deadline_ns, whichever is first, blocked in poll(2) (no busy loop). What
 * the fd carries meanwhile is read and dropped. Returns 1 at the end, 0 at
 * the deadline, -EINTR if *stop became non-zero (checked at least every
 * 50 ms; stop may be NULL), -EBADF when fd is not open, or another negative
 * errno of poll/read.
 */
int ql_fd_wait_eof(int fd, int64_t deadline_ns, const volatile int *stop,
		   ql_err *e);

/* A periodic timer on an absolute grid. */
typedef struct ql_periodic {
	int fd;             /* timerfd, -1 when closed */
	int64_t start_ns;   /* first tick (CLOCK_MONOTONIC) */
	int64_t period_ns;  /* > 0 */
	uint64_t ticks;     /* ticks elapsed so far (expirations read) */
	uint64_t missed;    /* ticks that passed without a wait() seeing them */
} ql_periodic;

/*
 * Arm a periodic timer whose ticks fall at start_ns + k * period_ns,
 * k = 0, 1, 2, ... (start_ns <= 0 means now + period_ns).
 * period_ns must be >= 1000 (1 us). Returns 0 or a negative errno.
 */
int ql_periodic_open(ql_periodic *p, int64_t start_ns, int64_t period_ns,
		     ql_err *e);

/*
 * Block until the next tick. *expired receives the number of ticks since the
 * previous wait (1 = on time; n > 1 = n - 1 ticks were missed, which are added
 * to p->missed). Returns 0, or -EINTR if *stop became non-zero (checked at
 * least every 50 ms).
 */
int ql_periodic_wait(ql_periodic *p, uint64_t *expired,
		     const volatile int *stop, ql_err *e);

/* Time of the next tick on the grid (CLOCK_MONOTONIC ns). */
int64_t ql_periodic_next_ns(const ql_periodic *p);

/* Disarm and close; idempotent. */
void ql_periodic_close(ql_periodic *p);

#endif
