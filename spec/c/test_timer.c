/* C unit tests of csrc/core/timer.c and err.c. */
#include "ctest.h"

#include <errno.h>
#include <unistd.h>

#include "err.h"
#include "timer.h"

TEST(now_is_monotonic_ns)
{
	int64_t a = ql_now_ns(), b = ql_now_ns();
	CHECK(a > 0);
	CHECK(b >= a);
}

TEST(sleep_until_reaches_deadline)
{
	ql_err e;
	int64_t t0 = ql_now_ns();
	CHECK_EQ_INT(ql_sleep_until_ns(t0 + 20000000, NULL, &e), 0);
	CHECK(ql_now_ns() >= t0 + 20000000);
}

TEST(sleep_stops_on_flag)
{
	ql_err e;
	volatile int stop = 1;
	CHECK_EQ_INT(ql_sleep_until_ns(ql_now_ns() + 1000000000LL, &stop, &e), -EINTR);
	CHECK_STR(e.code, "EINTR");
}

TEST(periodic_stays_on_grid_and_counts_missed)
{
	ql_err e;
	ql_periodic p;
	int64_t period = 10000000; /* 10 ms */
	int64_t start = ql_now_ns() + period;
	CHECK_EQ_INT(ql_periodic_open(&p, start, period, &e), 0);
	uint64_t n = 0;
	CHECK_EQ_INT(ql_periodic_wait(&p, &n, NULL, &e), 0);
	CHECK_EQ_U64(n, 1);
	CHECK(ql_now_ns() >= start);
	/* Sleep over 3.5 periods: the next wait reports 3 or 4 expirations. */
	ql_sleep_until_ns(start + 45000000, NULL, &e);
	CHECK_EQ_INT(ql_periodic_wait(&p, &n, NULL, &e), 0);
	CHECK(n >= 3);
	CHECK_EQ_U64(p.missed, n - 1);
	/* The grid does not drift: next tick = start + ticks * period exactly. */
	CHECK_EQ_INT(ql_periodic_next_ns(&p), start + (int64_t)p.ticks * period);
	ql_periodic_close(&p);
	ql_periodic_close(&p); /* idempotent */
	CHECK_EQ_INT(p.fd, -1);
}

TEST(periodic_rejects_tiny_period)
{
	ql_err e;
	ql_periodic p;
	CHECK_EQ_INT(ql_periodic_open(&p, 0, 10, &e), -EINVAL);
	CHECK_EQ_INT(e.usage, 1);
}

TEST(errno_names_are_stable)
{
	CHECK_STR(ql_errno_name(EPERM), "EPERM");
	CHECK_STR(ql_errno_name(-ENODEV), "ENODEV");
	CHECK_STR(ql_errno_name(EOPNOTSUPP), "ENOTSUP");
	CHECK_STR(ql_errno_name(99999), "EUNKNOWN");
	ql_err e;
	CHECK_EQ_INT(ql_err_set(&e, ENODEV, NULL, "no %s", "dev"), -ENODEV);
	CHECK_STR(e.msg, "no dev");
	CHECK_EQ_INT(e.usage, 0);
}

TEST(wait_eof_times_out_drops_data_and_sees_the_end)
{
	ql_err e;
	int p[2];
	CHECK_EQ_INT(pipe(p), 0);
	int64_t t0 = ql_now_ns();
	/* nothing written, writer open: the deadline */
	CHECK_EQ_INT(ql_fd_wait_eof(p[0], t0 + 30000000, NULL, &e), 0);
	CHECK(ql_now_ns() >= t0 + 30000000);
	/* data is not the end: read, dropped, still the deadline */
	CHECK_EQ_INT((int)write(p[1], "hello\n", 6), 6);
	t0 = ql_now_ns();
	CHECK_EQ_INT(ql_fd_wait_eof(p[0], t0 + 20000000, NULL, &e), 0);
	CHECK(ql_now_ns() >= t0 + 20000000);
	/* the writer closed: the end, at once; also seen with a deadline passed */
	close(p[1]);
	CHECK_EQ_INT(ql_fd_wait_eof(p[0], ql_now_ns() - 1000000, NULL, &e), 1);
	t0 = ql_now_ns();
	CHECK_EQ_INT(ql_fd_wait_eof(p[0], t0 + 1000000000LL, NULL, &e), 1);
	CHECK(ql_now_ns() - t0 < 500000000LL);
	close(p[0]);
	/* a closed fd: EBADF, not a wait */
	CHECK_EQ_INT(ql_fd_wait_eof(p[0], ql_now_ns() + 1000000000LL, NULL, &e), -EBADF);
	CHECK_STR(e.code, "EBADF");
	volatile int stop = 1;
	CHECK_EQ_INT(pipe(p), 0);
	/* a deadline passed, nothing there: 0 at once */
	t0 = ql_now_ns();
	CHECK_EQ_INT(ql_fd_wait_eof(p[0], t0, NULL, &e), 0);
	CHECK(ql_now_ns() - t0 < 100000000LL);
	CHECK_EQ_INT(ql_fd_wait_eof(p[0], ql_now_ns() + 1000000000LL, &stop, &e), -EINTR);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	RUN(now_is_monotonic_ns);
	RUN(sleep_until_reaches_deadline);
	RUN(sleep_stops_on_flag);
	RUN(periodic_stays_on_grid_and_counts_missed);
	RUN(periodic_rejects_tiny_period);
	RUN(errno_names_are_stable);
	RUN(wait_eof_times_out_drops_data_and_sees_the_end);
	return ctest_done();
}
