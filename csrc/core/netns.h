/*
 * netns.h - named network namespaces compatible with `ip netns`.
 *
 * A named namespace is a bind mount of a namespace file on
 * /run/netns/<name>; /run/netns itself is made a shared mount point so the
 * bind mounts propagate to other mount namespaces (see ip-netns(8)). The
 * namespace is created by a short-lived helper thread that unshares its own
 * network namespace, so the caller's threads never change namespace.
 * Running code inside a namespace: ql_netns_enter/ql_netns_restore (nl.h).
 */
#ifndef QL_NETNS_H
#define QL_NETNS_H

#include <stddef.h>

#include "err.h"

#define QL_NETNS_DIR "/run/netns"
#define QL_NETNS_NAME_MAX 200

/* Check a namespace name: non-empty, at most QL_NETNS_NAME_MAX bytes, no '/',
 * not "." or "..". Returns 0 or -EINVAL (usage error naming field). */
int ql_netns_check_name(const char *field, const char *name, ql_err *e);

#define QL_NETNS_PREFIX_MAX 64
#define QL_NETNS_PREFIX_EXPECTED "a string of 1..64 letters, digits, \"-\", \"_\" or \".\""

/* Check a prefix for generated namespace names: 1..QL_NETNS_PREFIX_MAX
 * letters, digits, '-', '_' or '.'. Returns 0 or -EINVAL naming field. */
int ql_netns_check_prefix(const char *field, const char *prefix, ql_err *e);

/* Create /run/netns/<name>. -EEXIST if it exists, -EPERM without
 * CAP_SYS_ADMIN. Nothing is left behind on failure. */
int ql_netns_add(const char *name, ql_err *e);

/* Unmount and remove /run/netns/<name>. -ENOENT if there is no such
 * namespace. Links inside it die with the namespace once no process and no
 * other mount keeps it alive. */
int ql_netns_del(const char *name, ql_err *e);

/* 1 if /run/netns/<name> is a mounted namespace file, 0 otherwise. */
int ql_netns_exists(const char *name);

/* Names of all namespaces under /run/netns, sorted. *names is a malloc'd
 * array of malloc'd strings, freed with ql_netns_list_free. */
int ql_netns_list(char ***names, size_t *count, ql_err *e);
void ql_netns_list_free(char **names, size_t count);

#endif
