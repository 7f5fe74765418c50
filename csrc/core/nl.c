/* nl.c - see nl.h. */
#include "nl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/errno.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NLM_F_CAPPED
#define NLM_F_CAPPED 0x100
#endif
#ifndef NLM_F_ACK_TLVS
#define NLM_F_ACK_TLVS 0x200
#endif

int ql_netns_enter(const char *name, int *restore, ql_err *e)
{
	*restore = -1;
	if (!name || !*name)
		return 0;
	if (strchr(name, '/') || strlen(name) > 200)
		return ql_err_usage(e, "netns: expected a namespace name without '/', got \"%s\"", name);
	char path[256];
	snprintf(path, sizeof path, "/run/netns/%s", name);
	int target = open(path, O_RDONLY | O_CLOEXEC);
	if (target < 0) {
		int err = errno;
		if (err == ENOENT)
			return ql_err_set(e, ENOENT, "ENOENT",
					  "network namespace \"%s\" does not exist (no %s; create it with qoslab.netns.add or ip netns add)",
					  name, path);
		return ql_err_set(e, err, NULL, "cannot open %s: %s", path, strerror(err));
	}
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		int err = errno;
		close(target);
		return ql_err_set(e, err, NULL, "cannot open /proc/thread-self/ns/net: %s", strerror(err));
	}
	if (setns(target, CLONE_NEWNET) < 0) {
		int err = errno;
		close(target);
		close(self);
		return ql_err_set(e, err, NULL,
				  "cannot enter network namespace \"%s\": %s%s", name, strerror(err),
				  err == EPERM ? " (needs CAP_SYS_ADMIN: run as root)" : "");
	}
	close(target);
	*restore = self;
	return 0;
}

int ql_netns_restore(int restore, ql_err *e)
{
	if (restore < 0)
		return 0;
	int rc = setns(restore, CLONE_NEWNET);
	int err = errno;
	close(restore);
	if (rc < 0)
		return ql_err_set(e, err, NULL, "cannot return to the original network namespace: %s",
				  strerror(err));
	return 0;
}

int ql_nl_fail(ql_err *e, int nlerr, const char *what)
{
	int n = nlerr < 0 ? -nlerr : nlerr;
	int err;
	switch (n) {
	case NLE_NOMEM: err = ENOMEM; break;
	case NLE_EXIST: err = EEXIST; break;
	case NLE_INVAL: err = EINVAL; break;
	case NLE_RANGE: err = ERANGE; break;
	case NLE_OPNOTSUPP: err = EOPNOTSUPP; break;
	case NLE_OBJ_NOTFOUND: err = ENOENT; break;
	case NLE_BUSY: err = EBUSY; break;
	case NLE_NOACCESS: err = EACCES; break;
	case NLE_PERM: err = EPERM; break;
	case NLE_NODEV: err = ENODEV; break;
	case NLE_AGAIN: err = EAGAIN; break;
	case NLE_INTR: err = EINTR; break;
	case NLE_MSGSIZE: err = EMSGSIZE; break;
	default: err = EIO; break;
	}
	return ql_err_set(e, err, NULL, "%s: %s%s", what, nl_geterror(nlerr),
			  err == EPERM ? " (needs CAP_NET_ADMIN: run as root)" : "");
}

int ql_nl_open(struct nl_sock **out, const char *netns, ql_err *e)
{
	*out = NULL;
	int restore = -1, rc;
	if ((rc = ql_netns_enter(netns, &restore, e)) < 0)
		return rc;
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk) {
		ql_netns_restore(restore, NULL);
		return ql_err_set(e, ENOMEM, NULL, "nl_socket_alloc failed");
	}
	int nlrc = nl_connect(sk, NETLINK_ROUTE);
	rc = ql_netns_restore(restore, e);
	if (nlrc < 0) {
		nl_socket_free(sk);
		return ql_nl_fail(e, nlrc, "netlink connect");
	}
	if (rc < 0) {
		nl_socket_free(sk);
		return rc;
	}
	int one = 1;
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
	*out = sk;
	return 0;
}

void ql_nl_close(struct nl_sock *sk)
{
	if (sk)
		nl_socket_free(sk);
}

/* Extended-ACK text from an NLMSG_ERROR message, or NULL. */
static const char *extack_msg(struct nlmsghdr *h)
{
	if (!(h->nlmsg_flags & NLM_F_ACK_TLVS))
		return NULL;
	struct nlmsgerr *err = nlmsg_data(h);
	size_t off = sizeof *err;
	if (!(h->nlmsg_flags & NLM_F_CAPPED))
		off += err->msg.nlmsg_len - sizeof(struct nlmsghdr);
	if (h->nlmsg_len < NLMSG_HDRLEN + off)
		return NULL;
	struct nlattr *a = (struct nlattr *)((char *)err + NLMSG_ALIGN(off));
	int len = (int)(h->nlmsg_len - NLMSG_HDRLEN - NLMSG_ALIGN(off));
	struct nlattr *pos;
	int rem;
	nla_for_each_attr(pos, a, len, rem) {
		if (nla_type(pos) == 1 /* NLMSGERR_ATTR_MSG */ && nla_len(pos) > 0) {
			const char *s = nla_data(pos);
			if (s[nla_len(pos) - 1] == '\0')
				return s;
		}
	}
	return NULL;
}

static int kernel_fail(ql_err *e, int err, const char *what, const char *ext)
{
	const char *advice = "";
	if (err == EPERM || err == EACCES)
		advice = " (needs CAP_NET_ADMIN: run as root)";
	return ql_err_set(e, err, NULL, "%s: %s%s%s%s", what, strerror(err),
			  ext ? ": " : "", ext ? ext : "", advice);
}

/* Read replies until ACK/DONE; dispatch data messages to cb. */
static int recv_loop(struct nl_sock *sk, uint32_t seq, const char *what,
		     int (*cb)(struct nlmsghdr *, void *), void *arg, ql_err *e)
{
	for (;;) {
		struct sockaddr_nl nla;
		unsigned char *buf = NULL;
		int n = nl_recv(sk, &nla, &buf, NULL);
		if (n <= 0) {
			free(buf);
			if (n == 0)
				return ql_err_set(e, EIO, NULL, "%s: netlink socket closed", what);
			return ql_nl_fail(e, n, what);
		}
		struct nlmsghdr *h = (struct nlmsghdr *)buf;
		int done = 0, rc = 0;
		for (; nlmsg_ok(h, n); h = nlmsg_next(h, &n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *er = nlmsg_data(h);
				if (er->error != 0)
					rc = kernel_fail(e, -er->error, what, extack_msg(h));
				done = 1;
				break;
			}
			if (cb) {
				rc = cb(h, arg);
				if (rc < 0) {
					done = 1;
					break;
				}
			}
		}
		free(buf);
		if (rc < 0)
			return rc;
		if (done)
			return 0;
	}
}

int ql_nl_transact(struct nl_sock *sk, struct nl_msg *msg, const char *what,
		   ql_err *e)
{
	struct nlmsghdr *h = nlmsg_hdr(msg);
	h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nl_complete_msg(sk, msg);
	int rc = nl_send(sk, msg);
	if (rc < 0)
		return ql_nl_fail(e, rc, what);
	return recv_loop(sk, h->nlmsg_seq, what, NULL, NULL, e);
}

int ql_nl_request(struct nl_sock *sk, struct nl_msg *msg, const char *what,
		  int (*cb)(struct nlmsghdr *h, void *arg), void *arg,
		  ql_err *e)
{
	struct nlmsghdr *h = nlmsg_hdr(msg);
	/* ACK so that a non-dump get also ends with an NLMSG_ERROR(0). */
	h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nl_complete_msg(sk, msg);
	int rc = nl_send(sk, msg);
	if (rc < 0)
		return ql_nl_fail(e, rc, what);
	return recv_loop(sk, h->nlmsg_seq, what, cb, arg, e);
}

int ql_nl_ifindex(struct nl_sock *sk, const char *ifname, const char *netns,
		  int *ifindex, ql_err *e)
{
	struct rtnl_link *link = NULL;
	int rc = rtnl_link_get_kernel(sk, 0, ifname, &link);
	if (rc < 0 || !link) {
		if (rc == -NLE_NODEV || rc == -NLE_OBJ_NOTFOUND || !link)
			return ql_err_set(e, ENODEV, "ENODEV", "no such network device \"%s\"%s%s%s",
					  ifname, netns && *netns ? " in namespace \"" : "",
					  netns && *netns ? netns : "", netns && *netns ? "\"" : "");
		return ql_nl_fail(e, rc, "link lookup");
	}
	*ifindex = rtnl_link_get_ifindex(link);
	rtnl_link_put(link);
	return 0;
}
