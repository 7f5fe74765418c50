/* netns.c - see netns.h. */
#include "netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

int ql_netns_check_name(const char *field, const char *name, ql_err *e)
{
	if (!name || !*name || strchr(name, '/') || strlen(name) > QL_NETNS_NAME_MAX ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return ql_err_usage(e, "%s: expected a namespace name (1..%d bytes, no '/', not . or ..), got string \"%s\"",
				    field, QL_NETNS_NAME_MAX, name ? name : "(null)");
	return 0;
}

static int perm_fail(ql_err *e, int err, const char *what)
{
	return ql_err_set(e, err, NULL, "%s: %s%s", what, strerror(err),
			  err == EPERM || err == EACCES ? " (needs CAP_SYS_ADMIN: run as root)" : "");
}

/*
 * Make /run/netns a shared mount point, so that namespace mounts made here
 * show up in every mount namespace that later copies it (and ones made by
 * `ip netns` show up here). If the directory is not a mount point yet,
 * making it shared fails with EINVAL: bind-mount it onto itself first.
 */
static int make_run_dir_shared(ql_err *e)
{
	if (mkdir(QL_NETNS_DIR, 0755) < 0 && errno != EEXIST)
		return perm_fail(e, errno, "cannot create " QL_NETNS_DIR);
	for (int tries = 0; tries < 2; tries++) {
		if (mount("", QL_NETNS_DIR, "none", MS_SHARED | MS_REC, NULL) == 0)
			return 0;
		if (errno != EINVAL || tries > 0)
			return perm_fail(e, errno, "cannot make " QL_NETNS_DIR " a shared mount");
		if (mount(QL_NETNS_DIR, QL_NETNS_DIR, "none", MS_BIND | MS_REC, NULL) < 0)
			return perm_fail(e, errno, "cannot bind-mount " QL_NETNS_DIR " onto itself");
	}
	return 0;
}

struct maker {
	const char *path;
	int err;
};

/* Thread body: a new network namespace for this thread only, pinned by a
 * bind mount of its namespace file. The thread ends right after, so nothing
 * else ever runs in the namespace it leaves behind. */
static void *make_ns(void *arg)
{
	struct maker *m = arg;
	m->err = 0;
	if (unshare(CLONE_NEWNET) < 0)
		m->err = errno;
	else if (mount("/proc/thread-self/ns/net", m->path, "none", MS_BIND, NULL) < 0)
		m->err = errno;
	return NULL;
}

int ql_netns_add(const char *name, ql_err *e)
{
	int rc = ql_netns_check_name("name", name, e);
	if (rc < 0)
		return rc;
	if ((rc = make_run_dir_shared(e)) < 0)
		return rc;
	char path[256];
	snprintf(path, sizeof path, QL_NETNS_DIR "/%s", name);
	int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0) {
		if (errno == EEXIST)
			return ql_err_set(e, EEXIST, "EEXIST",
					  "network namespace \"%s\" already exists (%s); pick another name or delete it",
					  name, path);
		return perm_fail(e, errno, "cannot create namespace file");
	}
	close(fd);
	struct maker m = { path, 0 };
	pthread_t t;
	int perr = pthread_create(&t, NULL, make_ns, &m);
	if (perr != 0) {
		unlink(path);
		return ql_err_set(e, perr, NULL, "cannot start a thread to create namespace \"%s\": %s",
				  name, strerror(perr));
	}
	pthread_join(t, NULL);
	if (m.err) {
		unlink(path);
		return ql_err_set(e, m.err, NULL, "cannot create network namespace \"%s\": %s%s", name,
				  strerror(m.err),
				  m.err == EPERM ? " (needs CAP_SYS_ADMIN: run as root)" : "");
	}
	return 0;
}

int ql_netns_del(const char *name, ql_err *e)
{
	int rc = ql_netns_check_name("name", name, e);
	if (rc < 0)
		return rc;
	char path[256];
	snprintf(path, sizeof path, QL_NETNS_DIR "/%s", name);
	struct stat st;
	if (stat(path, &st) < 0) {
		if (errno == ENOENT)
			return ql_err_set(e, ENOENT, "ENOENT", "network namespace \"%s\" does not exist (no %s)",
					  name, path);
		return perm_fail(e, errno, "cannot inspect namespace file");
	}
	/* A file that is not mounted (a leftover of a crash) is just removed. */
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL)
		return perm_fail(e, errno, "cannot unmount namespace file");
	if (unlink(path) < 0)
		return perm_fail(e, errno, "cannot remove namespace file");
	return 0;
}

int ql_netns_exists(const char *name)
{
	if (ql_netns_check_name("name", name, NULL) < 0)
		return 0;
	char path[256];
	snprintf(path, sizeof path, QL_NETNS_DIR "/%s", name);
	struct statfs sf;
	return statfs(path, &sf) == 0 && sf.f_type == NSFS_MAGIC;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void ql_netns_list_free(char **names, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

int ql_netns_list(char ***names, size_t *count, ql_err *e)
{
	*names = NULL;
	*count = 0;
	DIR *d = opendir(QL_NETNS_DIR);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		return perm_fail(e, errno, "cannot read " QL_NETNS_DIR);
	}
	size_t n = 0, cap = 0;
	char **v = NULL;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **nv = realloc(v, cap * sizeof *v);
			if (!nv)
				goto nomem;
			v = nv;
		}
		if (!(v[n] = strdup(de->d_name)))
			goto nomem;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof *v, cmp_str);
	*names = v;
	*count = n;
	return 0;
nomem:
	closedir(d);
	ql_netns_list_free(v, n);
	return ql_err_set(e, ENOMEM, NULL, "out of memory listing " QL_NETNS_DIR);
}
