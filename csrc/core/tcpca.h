/*
 * tcpca.h - TCP congestion-control names: syntax and availability, checked
 * before a test starts so a bad name never gets as far as a stream's
 * setsockopt(TCP_CONGESTION).
 *
 * The kernel keeps one list of congestion controls for all network
 * namespaces (tcp_cong.c registers them globally); only the default is per
 * namespace. So a check made in the caller's namespace holds for a test
 * run in any other.
 */
#ifndef QL_TCPCA_H
#define QL_TCPCA_H

#include <stddef.h>

#include "err.h"

/* TCP_CA_NAME_MAX (include/net/tcp.h) is 16 with the terminating NUL. */
#define QL_TCP_CA_NAME_MAX 15

#define QL_TCP_CA_AVAILABLE "/proc/sys/net/ipv4/tcp_available_congestion_control"
#define QL_TCP_CA_ALLOWED "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

/*
 * Check the syntax of a name: 1..QL_TCP_CA_NAME_MAX bytes of a-z, 0-9 and
 * '_' (every name the kernel's own modules register, and what a qoslab
 * server accepts from its peer). Returns 0 or -EINVAL (usage error naming
 * field).
 */
int ql_tcp_ca_check_name(const char *field, const char *name, ql_err *e);

/*
 * Read the kernel's list of available congestion controls (space
 * separated, as in QL_TCP_CA_AVAILABLE) into buf. Returns 0, or a
 * negative errno when the file cannot be read (buf is then "").
 */
int ql_tcp_ca_list(char *buf, size_t size);

/*
 * Whether this kernel lets a TCP socket use the congestion control name
 * (syntax checked first). Asks the kernel itself: setsockopt(TCP_CONGESTION)
 * on a throwaway socket, so a module the kernel loads on demand (root) and
 * the tcp_allowed_congestion_control rule for other users count as they
 * will for the test. Returns 0, or:
 *   -ENOTSUP  the kernel has no such congestion control (message lists the
 *             available ones and says modprobe tcp_NAME),
 *   -EPERM    not allowed for this user (message names the allowed list),
 *   another negative errno when no socket can be made.
 */
int ql_tcp_ca_check_available(const char *field, const char *name, ql_err *e);

#endif
