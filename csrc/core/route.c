/* route.c - see route.h. */
#include "route.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/route/route.h>

#include "netns.h"
#include "nl.h"

static const char *ns_label(const char *netns)
{
	return netns && *netns ? netns : "(this process's)";
}

/* An address "A.B.C.D" or "X:..:Y", with "/N" when prefix is non-NULL. */
static int parse_addr(const char *field, const char *s, int with_prefix, int *family,
		      unsigned char *bytes, size_t *len, int *prefix, ql_err *e)
{
	char buf[64];
	const char *slash = s ? strchr(s, '/') : NULL;
	size_t n = s ? (slash ? (size_t)(slash - s) : strlen(s)) : 0;
	if (!s || n == 0 || n >= sizeof buf || (slash != NULL) != (with_prefix != 0))
		goto bad;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (inet_pton(AF_INET, buf, bytes) == 1) {
		*family = AF_INET;
		*len = 4;
	} else if (inet_pton(AF_INET6, buf, bytes) == 1) {
		*family = AF_INET6;
		*len = 16;
	} else {
		goto bad;
	}
	if (with_prefix) {
		char *end;
		errno = 0;
		long p = strtol(slash + 1, &end, 10);
		if (*end || end == slash + 1 || errno || p < 0 || p > (long)*len * 8)
			goto bad;
		*prefix = (int)p;
	}
	return 0;
bad:
	if (with_prefix)
		return ql_err_usage(e, "%s: expected \"default\", \"A.B.C.D/0..32\" or \"X:...:Y/0..128\", got \"%s\"",
				    field, s ? s : "(null)");
	return ql_err_usage(e, "%s: expected an address \"A.B.C.D\" or \"X:...:Y\", got \"%s\"",
			    field, s ? s : "(null)");
}

int ql_route_add(const char *netns, const char *dst, const char *via, ql_err *e)
{
	int rc;
	unsigned char gw_bytes[16], dst_bytes[16] = { 0 };
	int gw_family = 0, dst_family = 0, prefix = 0;
	size_t gw_len = 0, dst_len = 0;
	if (netns && *netns && (rc = ql_netns_check_name("netns", netns, e)) < 0)
		return rc;
	if ((rc = parse_addr("via", via, 0, &gw_family, gw_bytes, &gw_len, NULL, e)) < 0)
		return rc;
	if (dst && strcmp(dst, "default") == 0) {
		dst_family = gw_family;
		dst_len = gw_len;
	} else if ((rc = parse_addr("dst", dst, 1, &dst_family, dst_bytes, &dst_len, &prefix,
				    e)) < 0) {
		return rc;
	}
	if (dst_family != gw_family)
		return ql_err_usage(e, "via: expected an address of dst's family (%s), got \"%s\"",
				    dst_family == AF_INET ? "IPv4" : "IPv6", via);
	struct nl_sock *sk;
	if ((rc = ql_nl_open(&sk, netns, e)) < 0)
		return rc;
	struct rtnl_route *r = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	struct nl_addr *d = nl_addr_build(dst_family, dst_bytes, dst_len);
	struct nl_addr *g = nl_addr_build(gw_family, gw_bytes, gw_len);
	struct nl_msg *msg = NULL;
	if (!r || !nh || !d || !g) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	nl_addr_set_prefixlen(d, prefix);
	rtnl_route_set_family(r, (uint8_t)dst_family);
	rtnl_route_set_table(r, RT_TABLE_MAIN);
	rtnl_route_set_protocol(r, RTPROT_STATIC);
	rtnl_route_set_scope(r, RT_SCOPE_UNIVERSE);
	rtnl_route_set_type(r, RTN_UNICAST);
	if ((rc = rtnl_route_set_dst(r, d)) < 0) {
		rc = ql_nl_fail(e, rc, "set route destination");
		goto out;
	}
	rtnl_route_nh_set_gateway(nh, g);
	rtnl_route_add_nexthop(r, nh);
	nh = NULL;  /* the route owns it now */
	int nlrc = rtnl_route_build_add_request(r, NLM_F_CREATE | NLM_F_EXCL, &msg);
	if (nlrc < 0) {
		rc = ql_nl_fail(e, nlrc, "build route request");
		goto out;
	}
	char what[160];
	snprintf(what, sizeof what, "add route %s via %s in namespace %s", dst, via,
		 ns_label(netns));
	rc = ql_nl_transact(sk, msg, what, e);
	if (rc == -EEXIST)
		snprintf(e->msg + strlen(e->msg), sizeof e->msg - strlen(e->msg),
			 " (a route to %s is already there)", dst);
	else if (rc == -ENETUNREACH)
		snprintf(e->msg + strlen(e->msg), sizeof e->msg - strlen(e->msg),
			 " (no link of the namespace reaches %s: add its address first)", via);
out:
	nlmsg_free(msg);
	if (nh)
		rtnl_route_nh_free(nh);
	if (d)
		nl_addr_put(d);
	if (g)
		nl_addr_put(g);
	if (r)
		rtnl_route_put(r);
	ql_nl_close(sk);
	return rc;
}

/* Write "0" or "1" to a sysctl file of the calling thread's namespace. */
static int write_switch(const char *path, int on, ql_err *e)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		return ql_err_set(e, err, NULL, "cannot open %s: %s%s", path, strerror(err),
				  err == EACCES || err == EPERM ? " (needs root)" : "");
	}
	ssize_t n = write(fd, on ? "1\n" : "0\n", 2);
	int err = n < 0 ? errno : EIO;
	close(fd);
	if (n != 2)
		return ql_err_set(e, err, NULL, "cannot write %s: %s", path, strerror(err));
	return 0;
}

int ql_route_forwarding(const char *netns, int on, int ipv6, ql_err *e)
{
	int rc, restore;
	if (netns && *netns && (rc = ql_netns_check_name("netns", netns, e)) < 0)
		return rc;
	if ((rc = ql_netns_enter(netns, &restore, e)) < 0)
		return rc;
	rc = write_switch("/proc/sys/net/ipv4/ip_forward", on, e);
	if (rc == 0 && ipv6)
		rc = write_switch("/proc/sys/net/ipv6/conf/all/forwarding", on, e);
	ql_err back;
	int rrc = ql_netns_restore(restore, &back);
	if (rrc < 0 && rc == 0) {
		*e = back;
		rc = rrc;
	}
	return rc;
}
