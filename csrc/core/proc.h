/*
 * proc.h - a child process with pipes to its stdin, stdout and stderr, read
 * and written with deadlines (poll(2) on CLOCK_MONOTONIC), for the Lua
 * layers that drive other programs (the ssh client of qoslab.host): no
 * shell, no blocking read that a hung peer could stretch forever.
 */
#ifndef QL_PROC_H
#define QL_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* Output kept per stream at most (a runaway child is an error, not OOM). */
#define QL_PROC_OUTPUT_MAX ((size_t)256 << 20)

typedef struct ql_proc_opts {
	const char *cwd;          /* working directory of the child (NULL: ours) */
	int stdin_pipe;           /* 1: a pipe the caller writes; 0: /dev/null */
	const char *stdout_path;  /* NULL: a pipe; else a file (truncated) */
	const char *stderr_path;  /* NULL: a pipe; else a file (truncated) */
	int new_group;            /* 1: the child leads a new process group, so
				   * a terminal's Ctrl-C does not reach it */
} ql_proc_opts;

typedef struct ql_proc {
	pid_t pid;        /* 0 when none was started */
	int fd[3];        /* our ends: stdin (write), stdout, stderr (read); -1 */
	char *buf[3];     /* buf[1], buf[2]: output read and not yet taken */
	size_t len[3], cap[3];
	int reaped, exited, status;
} ql_proc;

/* An empty record (nothing started). */
void ql_proc_init(ql_proc *p);

/* Start argv[0] (PATH lookup without "/"), via posix_spawn. */
int ql_proc_start(char *const argv[], const ql_proc_opts *o, ql_proc *p, ql_err *e);

enum { QL_PROC_UNTIL_WRITTEN, QL_PROC_UNTIL_LINE, QL_PROC_UNTIL_EOF };

/*
 * Move data until `until` holds or deadline_ns (CLOCK_MONOTONIC ns; 0: no
 * deadline) passes: in[*in_off..in_len) goes to the child's stdin (EPIPE:
 * the child stopped reading, the rest is dropped), its stdout and stderr
 * pipes are read into buf[1], buf[2]. close_in: close stdin once in is
 * written. until: WRITTEN (all of in is written), LINE (buf[1] holds a
 * '\n'; also returns at stdout's EOF), EOF (stdout and stderr pipes at EOF).
 * stop() (may be NULL) is asked after each interrupted poll: 1 ends with
 * -EINTR. Returns 0, -ETIMEDOUT, -EINTR or another -errno.
 */
int ql_proc_pump(ql_proc *p, const char *in, size_t in_len, size_t *in_off, int close_in,
		 int until, int64_t deadline_ns, int (*stop)(void *), void *arg, ql_err *e);

/* Close our end of the child's stdin (EOF for it). */
void ql_proc_close_stdin(ql_proc *p);

/*
 * Reap the child by deadline_ns (0: wait without one). Sets reaped, exited
 * (1: exit status, 0: killed by status = the signal). Returns 0,
 * -ETIMEDOUT, -EINTR (stop said 1).
 */
int ql_proc_wait(ql_proc *p, int64_t deadline_ns, int (*stop)(void *), void *arg, ql_err *e);

/* Signal the child (a no-op once reaped). */
int ql_proc_kill(ql_proc *p, int sig, ql_err *e);

/* Close every pipe; a child still running gets SIGKILL and is reaped. */
void ql_proc_release(ql_proc *p);

#endif
