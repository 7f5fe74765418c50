/* textfile.c - bounded reads of regular files; see textfile.h. */
#include "textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Codes for what stat(2), open(2) and read(2) can say about a path. */
static const char *path_code(int err)
{
	switch (err) {
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOTDIR: return "ENOTDIR";
	case ELOOP: return "ELOOP";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case EISDIR: return "EISDIR";
	default: return NULL; /* ql_errno_name's */
	}
}

static int path_fail(ql_err *e, int err, const char *what, const char *path, const char *step)
{
	const char *advice = err == ENOENT ? " (check the path)"
			   : err == EACCES || err == EPERM ? " (no permission to read it)" : "";
	return ql_err_set(e, err, path_code(err), "%s %s: cannot %s: %s%s", what, path, step,
			  strerror(err), advice);
}

static const char *kind_of(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

/* Refuse anything but a regular file of at most max bytes. */
static int check_stat(const struct stat *st, const char *what, const char *path, size_t max,
		      ql_err *e)
{
	if (S_ISDIR(st->st_mode))
		return ql_err_set(e, EISDIR, "EISDIR", "%s %s: is a directory, not a file", what,
				  path);
	if (!S_ISREG(st->st_mode))
		return ql_err_set(e, EINVAL, "EFTYPE",
				  "%s %s: is %s, not a regular file (it could block or never end)",
				  what, path, kind_of(st->st_mode));
	if (st->st_size < 0 || (unsigned long long)st->st_size > max)
		return ql_err_set(e, EFBIG, "EFBIG", "%s %s: %lld bytes, more than the %zu read at most",
				  what, path, (long long)st->st_size, max);
	return 0;
}

int ql_textfile_read(const char *path, const char *what, size_t max_bytes, char **out,
		     size_t *len, ql_err *e)
{
	*out = NULL;
	*len = 0;
	struct stat st;
	if (stat(path, &st) < 0)
		return path_fail(e, errno, what, path, "read it");
	int rc = check_stat(&st, what, path, max_bytes, e);
	if (rc < 0)
		return rc;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return path_fail(e, errno, what, path, "open it");
	if (fstat(fd, &st) < 0 || (rc = check_stat(&st, what, path, max_bytes, e)) < 0) {
		if (rc == 0)
			rc = path_fail(e, errno, what, path, "read it");
		close(fd);
		return rc;
	}
	/* st_size is a hint (0 for /proc files): read up to max + 1 bytes. */
	size_t cap = (size_t)st.st_size + 1 < 4096 ? 4096 : (size_t)st.st_size + 1;
	if (cap > max_bytes + 1)
		cap = max_bytes + 1;
	char *buf = malloc(cap + 1);
	size_t n = 0;
	if (!buf) {
		close(fd);
		return ql_err_set(e, ENOMEM, NULL, "%s %s: out of memory", what, path);
	}
	for (;;) {
		if (n == cap) {
			if (cap > max_bytes) {
				free(buf);
				close(fd);
				return ql_err_set(e, EFBIG, "EFBIG",
						  "%s %s: more than the %zu bytes read at most", what,
						  path, max_bytes);
			}
			size_t ncap = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
			char *nb = realloc(buf, ncap + 1);
			if (!nb) {
				free(buf);
				close(fd);
				return ql_err_set(e, ENOMEM, NULL, "%s %s: out of memory", what, path);
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			free(buf);
			close(fd);
			return path_fail(e, err, what, path, "read it");
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}
