/* sys.c - see sys.h. */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int ql_sys_fsync_path(const char *path, ql_err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ql_err_set(e, errno, NULL, "cannot open %s to sync it: %s", path, strerror(errno));
	int rc = 0;
	if (fsync(fd) < 0)
		rc = ql_err_set(e, errno, NULL, "fsync %s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

int ql_sys_realpath(const char *path, char *out, size_t cap, ql_err *e)
{
	char *r = realpath(path, NULL);
	if (!r)
		return ql_err_set(e, errno, NULL, "cannot resolve %s: %s", path, strerror(errno));
	size_t n = strlen(r);
	if (n >= cap) {
		free(r);
		return ql_err_set(e, ENAMETOOLONG, NULL, "resolved path of %s is too long", path);
	}
	memcpy(out, r, n + 1);
	free(r);
	return 0;
}

int ql_sys_kill(pid_t pid, int sig, ql_err *e)
{
	if (pid <= 0)
		return ql_err_usage(e, "pid: expected a process id > 0, got %ld", (long)pid);
	if (kill(pid, sig) < 0)
		return ql_err_set(e, errno, NULL, "kill %ld: %s", (long)pid, strerror(errno));
	return 0;
}

int ql_sys_spawn(char *const argv[], const ql_spawn_opts *o, pid_t *pid, ql_err *e)
{
	if (!argv || !argv[0] || !argv[0][0])
		return ql_err_usage(e, "argv[1]: expected a program name");
	posix_spawn_file_actions_t fa;
	int rc = posix_spawn_file_actions_init(&fa);
	if (rc != 0)
		return ql_err_set(e, rc, NULL, "cannot start %s: %s", argv[0], strerror(rc));
	int to_fd = o && o->stdout_fd >= 0;
	rc = to_fd ? posix_spawn_file_actions_adddup2(&fa, o->stdout_fd, 1)
		   : posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0 && o && o->cwd)
		rc = posix_spawn_file_actions_addchdir_np(&fa, o->cwd);
	/* The output path is opened after the chdir: a relative one is the
	 * caller's, so make it absolute first. */
	char abs[PATH_MAX];
	const char *out = o && !to_fd ? o->output : NULL;
	if (rc == 0 && out && out[0] != '/' && o->cwd) {
		char here[PATH_MAX];
		if (!getcwd(here, sizeof here) ||
		    (size_t)snprintf(abs, sizeof abs, "%s/%s", here, out) >= sizeof abs)
			rc = ENAMETOOLONG;
		out = abs;
	}
	if (rc == 0 && out)
		rc = posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (rc == 0 && out)
		rc = posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (rc == 0)
		rc = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return ql_err_set(e, rc, NULL, "cannot start %s: %s", argv[0], strerror(rc));
	return 0;
}

int ql_sys_wait(pid_t pid, int (*stop)(void *), void *arg, int *exited, int *status, ql_err *e)
{
	int st, stopping = 0;
	for (;;) {
		pid_t r = waitpid(pid, &st, 0);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return ql_err_set(e, errno, NULL, "wait for process %ld: %s", (long)pid, strerror(errno));
		if (!stopping && stop && stop(arg)) {
			stopping = 1;
			kill(pid, SIGTERM);
		}
	}
	*exited = WIFEXITED(st);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	if (stopping)
		return ql_err_set(e, EINTR, "EINTR", "interrupted: process %ld was stopped", (long)pid);
	return 0;
}
