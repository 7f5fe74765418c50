/* timer.c - see timer.h. */
#include "timer.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* Longest single blocking step, so a stop flag set by a signal handler in
 * another thread is seen promptly. */
#define STEP_NS (50 * 1000 * 1000LL)

int64_t ql_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
}

static struct timespec to_ts(int64_t ns)
{
	struct timespec ts;
	ts.tv_sec = ns / QL_NS_PER_S;
	ts.tv_nsec = ns % QL_NS_PER_S;
	return ts;
}

int ql_sleep_until_ns(int64_t deadline_ns, const volatile int *stop,
		      ql_err *e)
{
	for (;;) {
		if (stop && *stop)
			return ql_err_set(e, EINTR, NULL, "sleep interrupted");
		int64_t now = ql_now_ns();
		if (now >= deadline_ns)
			return 0;
		int64_t step = deadline_ns;
		if (stop && deadline_ns - now > STEP_NS)
			step = now + STEP_NS;
		struct timespec ts = to_ts(step);
		int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
					 NULL);
		if (rc != 0 && rc != EINTR)
			return ql_err_set(e, rc, NULL, "clock_nanosleep: %s",
					  strerror(rc));
	}
}

int ql_fd_wait_eof(int fd, int64_t deadline_ns, const volatile int *stop,
		   ql_err *e)
{
	char buf[4096];
	for (;;) {
		if (stop && *stop)
			return ql_err_set(e, EINTR, NULL, "wait interrupted");
		/* a deadline already passed still looks once (poll with 0) */
		int64_t left = deadline_ns - ql_now_ns();
		if (left < 0)
			left = 0;
		if (stop && left > STEP_NS)
			left = STEP_NS;
		/* round up, so a wait never returns before its deadline */
		int ms = (int)((left + 999999) / 1000000);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int rc = poll(&pfd, 1, ms);
		if (rc < 0 && errno != EINTR)
			return ql_err_set(e, errno, NULL, "poll: %s", strerror(errno));
		if (rc > 0 && (pfd.revents & POLLNVAL))
			return ql_err_set(e, EBADF, NULL,
					  "fd %d is not open: nothing to wait for the end of",
					  fd);
		if (rc > 0) {
			/* readable or hung up: what is there is read (and
			 * dropped); a read of 0 bytes is the end */
			ssize_t n = read(fd, buf, sizeof buf);
			if (n == 0)
				return 1;
			if (n < 0 && errno != EINTR && errno != EAGAIN) {
				if (errno == EIO || errno == ECONNRESET)
					return 1;
				return ql_err_set(e, errno, NULL, "read of fd %d: %s",
						  fd, strerror(errno));
			}
		}
		if (ql_now_ns() >= deadline_ns)
			return 0;
	}
}

int ql_periodic_open(ql_periodic *p, int64_t start_ns, int64_t period_ns,
		     ql_err *e)
{
	p->fd = -1;
	p->ticks = 0;
	p->missed = 0;
	if (period_ns < 1000)
		return ql_err_usage(e, "period: expected at least 1 us, got %lld ns",
				    (long long)period_ns);
	if (start_ns <= 0)
		start_ns = ql_now_ns() + period_ns;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0)
		return ql_err_set(e, errno, NULL, "timerfd_create: %s",
				  strerror(errno));
	struct itimerspec its;
	its.it_value = to_ts(start_ns);
	its.it_interval = to_ts(period_ns);
	if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
		int err = errno;
		close(fd);
		return ql_err_set(e, err, NULL, "timerfd_settime: %s",
				  strerror(err));
	}
	p->fd = fd;
	p->start_ns = start_ns;
	p->period_ns = period_ns;
	return 0;
}

int ql_periodic_wait(ql_periodic *p, uint64_t *expired,
		     const volatile int *stop, ql_err *e)
{
	if (p->fd < 0)
		return ql_err_set(e, EBADF, NULL, "periodic timer is closed");
	for (;;) {
		if (stop && *stop)
			return ql_err_set(e, EINTR, NULL, "wait interrupted");
		uint64_t n = 0;
		ssize_t r = read(p->fd, &n, sizeof n);
		if (r == (ssize_t)sizeof n) {
			p->ticks += n;
			p->missed += n - 1;
			*expired = n;
			return 0;
		}
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			return ql_err_set(e, errno, NULL, "timerfd read: %s",
					  strerror(errno));
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
		int rc = poll(&pfd, 1, stop ? (int)(STEP_NS / 1000000) : -1);
		if (rc < 0 && errno != EINTR)
			return ql_err_set(e, errno, NULL, "poll: %s",
					  strerror(errno));
	}
}

int64_t ql_periodic_next_ns(const ql_periodic *p)
{
	return p->start_ns + (int64_t)p->ticks * p->period_ns;
}

void ql_periodic_close(ql_periodic *p)
{
	if (p->fd >= 0) {
		close(p->fd);
		p->fd = -1;
	}
}
