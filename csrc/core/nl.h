/*
 * nl.h - rtnetlink plumbing shared by the netlink concerns (netem, qdiscs,
 * links): a libnl-route-3 socket opened inside a named network namespace,
 * request/ACK transactions that keep the kernel's errno and extended-ACK
 * text (libnl's own error codes lose both), and the mapping of either to a
 * ql_err with advice.
 */
#ifndef QL_NL_H
#define QL_NL_H

#include <netlink/msg.h>
#include <netlink/netlink.h>

#include "err.h"

/*
 * Open a NETLINK_ROUTE socket. With netns non-NULL and non-empty the socket
 * is created inside /run/netns/<netns> (the calling thread enters the
 * namespace for the socket() call and returns to its own), so it keeps
 * acting there. Extended ACKs are requested. Returns 0 or a negative errno
 * (ENOENT: no such namespace; EPERM: not allowed, needs CAP_SYS_ADMIN).
 */
int ql_nl_open(struct nl_sock **out, const char *netns, ql_err *e);
void ql_nl_close(struct nl_sock *sk);

/*
 * Send msg (flags NLM_F_REQUEST|NLM_F_ACK are added) and wait for the ACK.
 * On failure fills e with the kernel's errno name as code and a message
 * "<what>: <strerror>[: <extack text>]" plus advice for EPERM (CAP_NET_ADMIN).
 * Does not free msg. Returns 0 or a negative errno.
 */
int ql_nl_transact(struct nl_sock *sk, struct nl_msg *msg, const char *what,
		   ql_err *e);

/*
 * Send msg (a dump or get request) and call cb(nlmsghdr, arg) for each reply
 * until NLMSG_DONE (or the single reply of a non-dump get). Kernel errors
 * are reported as in ql_nl_transact. cb returns 0 to go on or a negative
 * errno to stop (that errno is returned, e left to cb).
 */
int ql_nl_request(struct nl_sock *sk, struct nl_msg *msg, const char *what,
		  int (*cb)(struct nlmsghdr *h, void *arg), void *arg,
		  ql_err *e);

/* Map a libnl error code (negative NLE_*) to a ql_err ("<what>: <text>"). */
int ql_nl_fail(ql_err *e, int nlerr, const char *what);

/* Interface index of ifname in the socket's namespace; -ENODEV if absent
 * (message names the device and the namespace). */
int ql_nl_ifindex(struct nl_sock *sk, const char *ifname, const char *netns,
		  int *ifindex, ql_err *e);

/*
 * Move the calling thread into /run/netns/<name>. *restore receives an fd
 * of the thread's current namespace for ql_netns_restore. name NULL or ""
 * is a no-op (*restore = -1). Returns 0 or a negative errno.
 */
int ql_netns_enter(const char *name, int *restore, ql_err *e);
/* Return to the namespace saved by ql_netns_enter and close the fd. */
int ql_netns_restore(int restore, ql_err *e);

#endif
