/* C unit tests of proc.c: a child with pipes both ways, read to the end or
 * line by line, a deadline that ends the wait (and not the child), a stdin
 * whose reader is gone (EPIPE dropped, no SIGPIPE here), the output bound,
 * and release killing what still runs. */
#include "ctest.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "proc.h"

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

TEST(both_ways_to_the_end)
{
	char *argv[] = { "sh", "-c", "cat; echo err >&2; exit 4", NULL };
	ql_proc_opts o = { NULL, 1, NULL, NULL, 0 };
	ql_proc p;
	ql_err e;
	CHECK_EQ_INT(ql_proc_start(argv, &o, &p, &e), 0);
	const char *in = "a b 'c'\n";
	size_t off = 0;
	CHECK_EQ_INT(ql_proc_pump(&p, in, strlen(in), &off, 1, QL_PROC_UNTIL_EOF, now_ns() + 5000000000LL,
				  NULL, NULL, &e), 0);
	CHECK_EQ_INT(p.len[1], strlen(in));
	CHECK(memcmp(p.buf[1], in, strlen(in)) == 0);
	CHECK_EQ_INT(p.len[2], 4);
	CHECK_EQ_INT(ql_proc_wait(&p, now_ns() + 5000000000LL, NULL, NULL, &e), 0);
	CHECK_EQ_INT(p.exited, 1);
	CHECK_EQ_INT(p.status, 4);
	ql_proc_release(&p);
}

TEST(deadline_ends_the_wait_not_the_child)
{
	char *argv[] = { "sh", "-c", "echo first; exec sleep 30", NULL };
	ql_proc p;
	ql_err e;
	CHECK_EQ_INT(ql_proc_start(argv, NULL, &p, &e), 0);
	size_t off = 0;
	CHECK_EQ_INT(ql_proc_pump(&p, NULL, 0, &off, 0, QL_PROC_UNTIL_LINE, now_ns() + 5000000000LL,
				  NULL, NULL, &e), 0);
	CHECK_EQ_INT(p.len[1], 6);
	int64_t t0 = now_ns();
	CHECK_EQ_INT(ql_proc_pump(&p, NULL, 0, &off, 0, QL_PROC_UNTIL_EOF, t0 + 200000000, NULL, NULL, &e),
		     -ETIMEDOUT);
	int64_t took = now_ns() - t0;
	CHECK(took >= 200000000 && took < 2000000000);
	CHECK_STR(e.code, "ETIMEDOUT");
	CHECK_EQ_INT(ql_proc_wait(&p, now_ns() + 50000000, NULL, NULL, &e), -ETIMEDOUT);
	CHECK_EQ_INT(kill(p.pid, 0), 0);
	CHECK_EQ_INT(ql_proc_kill(&p, SIGKILL, &e), 0);
	CHECK_EQ_INT(ql_proc_wait(&p, now_ns() + 5000000000LL, NULL, NULL, &e), 0);
	CHECK_EQ_INT(p.exited, 0);
	CHECK_EQ_INT(p.status, SIGKILL);
	ql_proc_release(&p);
}

TEST(gone_reader_is_no_sigpipe)
{
	char *argv[] = { "true", NULL };
	ql_proc_opts o = { NULL, 1, NULL, NULL, 0 };
	ql_proc p;
	ql_err e;
	CHECK_EQ_INT(ql_proc_start(argv, &o, &p, &e), 0);
	CHECK_EQ_INT(ql_proc_wait(&p, now_ns() + 5000000000LL, NULL, NULL, &e), 0);
	static char big[1 << 20];
	size_t off = 0;
	CHECK_EQ_INT(ql_proc_pump(&p, big, sizeof big, &off, 1, QL_PROC_UNTIL_WRITTEN, now_ns() + 5000000000LL,
				  NULL, NULL, &e), 0);
	CHECK_EQ_INT(off, sizeof big);  /* dropped: the reader is gone */
	CHECK_EQ_INT(p.fd[0], -1);
	ql_proc_release(&p);
}

TEST(release_kills_a_running_child_and_names_a_missing_program)
{
	char *argv[] = { "sleep", "30", NULL };
	ql_proc p;
	ql_err e;
	CHECK_EQ_INT(ql_proc_start(argv, NULL, &p, &e), 0);
	pid_t pid = p.pid;
	ql_proc_release(&p);
	CHECK_EQ_INT(kill(pid, 0), -1);
	CHECK_EQ_INT(errno, ESRCH);
	char *none[] = { "/nonexistent/program", NULL };
	CHECK(ql_proc_start(none, NULL, &p, &e) < 0);
	CHECK_STR(e.code, "ENOENT");
	CHECK_EQ_INT(p.pid, 0);
}

int main(void)
{
	RUN(both_ways_to_the_end);
	RUN(deadline_ends_the_wait_not_the_child);
	RUN(gone_reader_is_no_sigpipe);
	RUN(release_kills_a_running_child_and_names_a_missing_program);
	return ctest_done();
}
