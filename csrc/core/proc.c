/*
 * proc.c - see proc.h.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ql_proc_init(ql_proc *p)
{
	memset(p, 0, sizeof *p);
	p->fd[0] = p->fd[1] = p->fd[2] = -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

int ql_proc_start(char *const argv[], const ql_proc_opts *o, ql_proc *p, ql_err *e)
{
	if (!argv || !argv[0] || !argv[0][0])
		return ql_err_usage(e, "argv[1]: expected a program name");
	ql_proc_init(p);
	int child[3] = { -1, -1, -1 };
	int rc = 0;
	const char *paths[3] = { NULL, o ? o->stdout_path : NULL, o ? o->stderr_path : NULL };
	for (int i = 0; i < 3 && rc == 0; i++) {
		if (i == 0 && !(o && o->stdin_pipe))
			continue;
		if (i > 0 && paths[i])
			continue;
		int fds[2];
		if (pipe2(fds, O_CLOEXEC) < 0) {
			rc = errno;
			break;
		}
		/* Our end: [1] for stdin, [0] for the outputs; non-blocking so a
		 * poll loop never stalls on a full or empty pipe. */
		p->fd[i] = i == 0 ? fds[1] : fds[0];
		child[i] = i == 0 ? fds[0] : fds[1];
		fcntl(p->fd[i], F_SETFL, O_NONBLOCK);
	}
	if (rc != 0) {
		for (int i = 0; i < 3; i++) {
			close_fd(&child[i]);
			close_fd(&p->fd[i]);
		}
		return ql_err_set(e, rc, NULL, "cannot make a pipe for %s: %s", argv[0], strerror(rc));
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	rc = posix_spawn_file_actions_init(&fa);
	if (rc == 0 && (rc = posix_spawnattr_init(&at)) != 0)
		posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		for (int i = 0; i < 3; i++) {
			close_fd(&child[i]);
			close_fd(&p->fd[i]);
		}
		return ql_err_set(e, rc, NULL, "cannot start %s: %s", argv[0], strerror(rc));
	}
	if (child[0] >= 0)
		rc = posix_spawn_file_actions_adddup2(&fa, child[0], 0);
	else
		rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	for (int i = 1; i < 3 && rc == 0; i++) {
		if (child[i] >= 0)
			rc = posix_spawn_file_actions_adddup2(&fa, child[i], i);
		else
			rc = posix_spawn_file_actions_addopen(&fa, i, paths[i],
							      O_WRONLY | O_CREAT | O_TRUNC, 0600);
	}
	/* chdir last: the output files are the caller's paths. */
	if (rc == 0 && o && o->cwd)
		rc = posix_spawn_file_actions_addchdir_np(&fa, o->cwd);
	/* The child starts with default signal dispositions and no blocked
	 * signal, whatever this process set for itself. */
	sigset_t all, none;
	sigfillset(&all);
	sigemptyset(&none);
	short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
	if (o && o->new_group)
		flags |= POSIX_SPAWN_SETPGROUP;
	if (rc == 0)
		rc = posix_spawnattr_setsigdefault(&at, &all);
	if (rc == 0)
		rc = posix_spawnattr_setsigmask(&at, &none);
	if (rc == 0)
		rc = posix_spawnattr_setpgroup(&at, 0);
	if (rc == 0)
		rc = posix_spawnattr_setflags(&at, flags);
	if (rc == 0)
		rc = posix_spawnp(&p->pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	for (int i = 0; i < 3; i++)
		close_fd(&child[i]);
	if (rc != 0) {
		p->pid = 0;
		for (int i = 0; i < 3; i++)
			close_fd(&p->fd[i]);
		return ql_err_set(e, rc, NULL, "cannot start %s: %s", argv[0], strerror(rc));
	}
	return 0;
}

void ql_proc_close_stdin(ql_proc *p)
{
	close_fd(&p->fd[0]);
}

/* Append n bytes to buf[i]. */
static int keep(ql_proc *p, int i, const char *b, size_t n, ql_err *e)
{
	if (p->len[i] + n > QL_PROC_OUTPUT_MAX)
		return ql_err_set(e, EFBIG, "EFBIG", "the %s of process %ld exceeds %zu bytes",
				  i == 1 ? "stdout" : "stderr", (long)p->pid, QL_PROC_OUTPUT_MAX);
	if (p->len[i] + n > p->cap[i]) {
		size_t cap = p->cap[i] ? p->cap[i] : 4096;
		while (cap < p->len[i] + n)
			cap *= 2;
		char *nb = realloc(p->buf[i], cap);
		if (!nb)
			return ql_err_set(e, ENOMEM, NULL, "out of memory reading process %ld", (long)p->pid);
		p->buf[i] = nb;
		p->cap[i] = cap;
	}
	memcpy(p->buf[i] + p->len[i], b, n);
	p->len[i] += n;
	return 0;
}

/* write(2) without SIGPIPE: a reader that went away gives EPIPE here, it
 * does not kill this process. */
static ssize_t write_nosig(int fd, const void *b, size_t n)
{
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	ssize_t w = write(fd, b, n);
	int saved = errno;
	if (w < 0 && saved == EPIPE) {
		struct timespec zero = { 0, 0 };
		sigset_t pending;
		sigpending(&pending);
		if (sigismember(&pending, SIGPIPE) && !sigismember(&old, SIGPIPE))
			sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return w;
}

static int done(const ql_proc *p, const char *in, size_t in_len, const size_t *in_off, int until)
{
	switch (until) {
	case QL_PROC_UNTIL_WRITTEN:
		return !in || *in_off >= in_len || p->fd[0] < 0;
	case QL_PROC_UNTIL_LINE:
		return p->fd[1] < 0 || (p->len[1] && memchr(p->buf[1], '\n', p->len[1]));
	default:
		return p->fd[1] < 0 && p->fd[2] < 0;
	}
}

int ql_proc_pump(ql_proc *p, const char *in, size_t in_len, size_t *in_off, int close_in,
		 int until, int64_t deadline_ns, int (*stop)(void *), void *arg, ql_err *e)
{
	char chunk[65536];
	for (;;) {
		if (in && close_in && *in_off >= in_len)
			ql_proc_close_stdin(p);
		if (done(p, in, in_len, in_off, until))
			return 0;
		struct pollfd pf[3];
		int n = 0, which[3];
		if (in && *in_off < in_len && p->fd[0] >= 0) {
			pf[n] = (struct pollfd){ p->fd[0], POLLOUT, 0 };
			which[n++] = 0;
		}
		for (int i = 1; i < 3; i++) {
			if (p->fd[i] >= 0) {
				pf[n] = (struct pollfd){ p->fd[i], POLLIN, 0 };
				which[n++] = i;
			}
		}
		if (n == 0)  /* nothing left to move: the condition cannot come */
			return 0;
		int timeout_ms = -1;
		if (deadline_ns > 0) {
			int64_t left = deadline_ns - mono_ns();
			if (left <= 0)
				return ql_err_set(e, ETIMEDOUT, "ETIMEDOUT", "process %ld: timed out", (long)p->pid);
			timeout_ms = (int)((left + 999999) / 1000000);
		}
		int r = poll(pf, (nfds_t)n, timeout_ms);
		if (r < 0) {
			if (errno != EINTR)
				return ql_err_set(e, errno, NULL, "poll: %s", strerror(errno));
			if (stop && stop(arg))
				return ql_err_set(e, EINTR, "EINTR", "interrupted");
			continue;
		}
		for (int k = 0; k < n; k++) {
			int i = which[k];
			if (!pf[k].revents)
				continue;
			if (i == 0) {
				ssize_t w = write_nosig(p->fd[0], in + *in_off, in_len - *in_off);
				if (w > 0) {
					*in_off += (size_t)w;
				} else if (w < 0 && errno == EPIPE) {
					*in_off = in_len;
					ql_proc_close_stdin(p);
				} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
					return ql_err_set(e, errno, NULL, "write to process %ld: %s",
							  (long)p->pid, strerror(errno));
				}
				continue;
			}
			ssize_t got = read(p->fd[i], chunk, sizeof chunk);
			if (got > 0) {
				int rc = keep(p, i, chunk, (size_t)got, e);
				if (rc < 0)
					return rc;
			} else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
				close_fd(&p->fd[i]);
			}
		}
	}
}

int ql_proc_wait(ql_proc *p, int64_t deadline_ns, int (*stop)(void *), void *arg, ql_err *e)
{
	if (p->reaped || p->pid <= 0)
		return 0;
	for (;;) {
		int st;
		pid_t r = waitpid(p->pid, &st, WNOHANG);
		if (r == p->pid) {
			p->reaped = 1;
			p->exited = WIFEXITED(st);
			p->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? WTERMSIG(st) : 0;
			return 0;
		}
		if (r < 0 && errno != EINTR)
			return ql_err_set(e, errno, NULL, "wait for process %ld: %s", (long)p->pid, strerror(errno));
		if (stop && stop(arg))
			return ql_err_set(e, EINTR, "EINTR", "interrupted");
		int64_t now = mono_ns();
		if (deadline_ns > 0 && now >= deadline_ns)
			return ql_err_set(e, ETIMEDOUT, "ETIMEDOUT", "process %ld: still running", (long)p->pid);
		/* 2 ms steps: a child's exit is seen soon after, at little cost. */
		int64_t step = 2000000;
		if (deadline_ns > 0 && deadline_ns - now < step)
			step = deadline_ns - now;
		struct timespec ts = { 0, (long)step };
		nanosleep(&ts, NULL);
	}
}

int ql_proc_kill(ql_proc *p, int sig, ql_err *e)
{
	if (p->reaped || p->pid <= 0)
		return 0;
	if (kill(p->pid, sig) < 0 && errno != ESRCH)
		return ql_err_set(e, errno, NULL, "kill %ld: %s", (long)p->pid, strerror(errno));
	return 0;
}

void ql_proc_release(ql_proc *p)
{
	for (int i = 0; i < 3; i++)
		close_fd(&p->fd[i]);
	if (p->pid > 0 && !p->reaped) {
		kill(p->pid, SIGKILL);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
		p->reaped = 1;
	}
	for (int i = 0; i < 3; i++) {
		free(p->buf[i]);
		p->buf[i] = NULL;
		p->len[i] = p->cap[i] = 0;
	}
}
