/*
 * common.h - what the bare ceiling programs of bench/ceiling.lua share: the
 * monotonic clock, a thread's CPU seconds, entering a named network
 * namespace from one thread, and the one result line each program prints.
 *
 * The result line is "ceiling KEY=VALUE ..." with at least path, bytes,
 * datagrams, seconds, tx_cpu_s and rx_cpu_s (CPU user + system of the
 * sending and of the receiving threads, from getrusage(RUSAGE_THREAD)).
 */
#ifndef BENCH_CEILING_COMMON_H
#define BENCH_CEILING_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU user + system seconds of the calling thread so far */
static inline double thread_cpu_s(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Move the calling thread into the named namespace (ip netns's
 * /var/run/netns/NAME); NULL or "" stays. Exits on failure: these are
 * benchmark programs, and a half-set-up measurement is worse than none. */
static inline void enter_netns(const char *name)
{
	char path[256];
	if (!name || !*name)
		return;
	snprintf(path, sizeof path, "/var/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "ceiling: netns %s: %s\n", name, strerror(errno));
		exit(1);
	}
	close(fd);
}

static inline double arg_num(const char *s, const char *what, double lo, double hi)
{
	char *end;
	double v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
		fprintf(stderr, "ceiling: %s: expected a number in [%g, %g], got '%s'\n", what, lo,
			hi, s);
		exit(2);
	}
	return v;
}

#endif
