/*
 * sys.h - the few system calls the Lua layers need that Lua lacks: fsync of
 * a file by path, uname(2), realpath(3), kill(2), and running a program by
 * argv (no shell) with its output sent to a file.
 */
#ifndef QL_SYS_H
#define QL_SYS_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Open path read-only, fsync(2) it, close it. */
int ql_sys_fsync_path(const char *path, ql_err *e);

/* realpath(3) into out (cap bytes, at least PATH_MAX for every path). */
int ql_sys_realpath(const char *path, char *out, size_t cap, ql_err *e);

/* kill(2); sig 0 only checks that pid exists. */
int ql_sys_kill(pid_t pid, int sig, ql_err *e);

/* Options of ql_sys_spawn. */
typedef struct ql_spawn_opts {
	const char *cwd;     /* working directory of the child (NULL: ours) */
	const char *output;  /* stdout and stderr of the child go here, truncated
			      * (NULL: ours) */
	int stdout_fd;       /* >= 0: this descriptor becomes the child's stdout
			      * (instead of output), stdin and stderr stay ours */
} ql_spawn_opts;

/*
 * Start argv[0] (looked up in PATH when it has no "/") with argv, stdin
 * from /dev/null (unless stdout_fd is given), via posix_spawn: no shell
 * sees any argument. *pid is set.
 */
int ql_sys_spawn(char *const argv[], const ql_spawn_opts *o, pid_t *pid, ql_err *e);

/*
 * Wait for pid. On return *exited is 1 and *status the exit status, or
 * *exited is 0 and *status the signal that ended it. stop() (may be NULL)
 * is asked after each interrupted wait; when it says 1 the child gets
 * SIGTERM and is reaped, and -EINTR is returned.
 */
int ql_sys_wait(pid_t pid, int (*stop)(void *), void *arg, int *exited, int *status, ql_err *e);

#endif
