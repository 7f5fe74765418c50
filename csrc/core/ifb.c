/* ifb.c - see ifb.h. */
#include "ifb.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/errno.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>

#include "nl.h"

/* ffff:, the ingress qdisc (unsigned: libnl's TC_HANDLE shifts an int). */
#define QL_INGRESS_HANDLE 0xFFFF0000U

int ql_ifb_name(const char *netns, const char *ifname, char *out, size_t cap,
		ql_err *e)
{
	struct nl_sock *sk;
	int rc = ql_nl_open(&sk, netns, e);
	if (rc < 0)
		return rc;
	int ifindex;
	rc = ql_nl_ifindex(sk, ifname, netns, &ifindex, e);
	ql_nl_close(sk);
	if (rc < 0)
		return rc;
	if ((size_t)snprintf(out, cap, "qlifb%d", ifindex) >= cap)
		return ql_err_set(e, ENAMETOOLONG, NULL, "ifb name buffer too small");
	return 0;
}

int ql_link_exists(const char *netns, const char *name, int *exists, ql_err *e)
{
	*exists = 0;
	struct nl_sock *sk;
	int rc = ql_nl_open(&sk, netns, e);
	if (rc < 0)
		return rc;
	struct rtnl_link *link = NULL;
	rc = rtnl_link_get_kernel(sk, 0, name, &link);
	ql_nl_close(sk);
	if (rc == 0 && link) {
		*exists = 1;
		rtnl_link_put(link);
		return 0;
	}
	if (rc == -NLE_NODEV || rc == -NLE_OBJ_NOTFOUND)
		return 0;
	return ql_nl_fail(e, rc, "link lookup");
}

static int ifb_create(struct nl_sock *sk, const char *name, ql_err *e)
{
	struct rtnl_link *link = rtnl_link_alloc();
	if (!link)
		return ql_err_set(e, ENOMEM, NULL, "ifb: out of memory");
	rtnl_link_set_name(link, name);
	int rc = rtnl_link_set_type(link, "ifb");
	if (rc == 0) {
		rtnl_link_set_flags(link, IFF_UP);
		rc = rtnl_link_add(sk, link, NLM_F_CREATE | NLM_F_EXCL);
	}
	rtnl_link_put(link);
	if (rc < 0) {
		ql_nl_fail(e, rc, "ifb create");
		if (rc == -NLE_OPNOTSUPP || rc == -NLE_OBJ_NOTFOUND || rc == -NLE_INVAL)
			return ql_err_set(e, EOPNOTSUPP, "ENOTSUP",
					  "%s (kernel has no ifb device support: modprobe ifb)", e->msg);
		return -e->errnum;
	}
	return 0;
}

static int ifb_up(struct nl_sock *sk, const char *name, ql_err *e)
{
	struct rtnl_link *link = NULL, *change = NULL;
	int rc = rtnl_link_get_kernel(sk, 0, name, &link);
	if (rc < 0)
		return ql_nl_fail(e, rc, "ifb lookup");
	change = rtnl_link_alloc();
	if (!change) {
		rtnl_link_put(link);
		return ql_err_set(e, ENOMEM, NULL, "ifb: out of memory");
	}
	rtnl_link_set_flags(change, IFF_UP);
	rc = rtnl_link_change(sk, link, change, 0);
	rtnl_link_put(change);
	rtnl_link_put(link);
	return rc < 0 ? ql_nl_fail(e, rc, "ifb up") : 0;
}

static int link_delete(struct nl_sock *sk, const char *name, int *removed, ql_err *e)
{
	struct rtnl_link *link = rtnl_link_alloc();
	if (!link)
		return ql_err_set(e, ENOMEM, NULL, "ifb: out of memory");
	rtnl_link_set_name(link, name);
	int rc = rtnl_link_delete(sk, link);
	rtnl_link_put(link);
	if (rc == 0) {
		*removed = 1;
		return 0;
	}
	if (rc == -NLE_NODEV || rc == -NLE_OBJ_NOTFOUND)
		return 0;
	return ql_nl_fail(e, rc, "ifb delete");
}

static int ingress_add(struct nl_sock *sk, int ifindex, ql_err *e)
{
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	if (!q)
		return ql_err_set(e, ENOMEM, NULL, "ingress: out of memory");
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), TC_H_INGRESS);
	rtnl_tc_set_handle(TC_CAST(q), QL_INGRESS_HANDLE);
	int rc = rtnl_tc_set_kind(TC_CAST(q), "ingress");
	if (rc == 0)
		rc = rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_qdisc_put(q);
	if (rc == -NLE_EXIST)
		return 0;  /* already there: the filter is added to it */
	return rc < 0 ? ql_nl_fail(e, rc, "ingress qdisc add") : 0;
}

static int ingress_del(struct nl_sock *sk, int ifindex, int *removed, ql_err *e)
{
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	if (!q)
		return ql_err_set(e, ENOMEM, NULL, "ingress: out of memory");
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), TC_H_INGRESS);
	rtnl_tc_set_handle(TC_CAST(q), QL_INGRESS_HANDLE);
	int rc = rtnl_tc_set_kind(TC_CAST(q), "ingress");
	if (rc == 0)
		rc = rtnl_qdisc_delete(sk, q);
	rtnl_qdisc_put(q);
	if (rc == 0) {
		*removed = 1;
		return 0;
	}
	if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_INVAL || rc == -NLE_NODEV)
		return 0;  /* no ingress qdisc */
	return ql_nl_fail(e, rc, "ingress qdisc delete");
}

static struct rtnl_cls *filter_base(int ifindex)
{
	struct rtnl_cls *cls = rtnl_cls_alloc();
	if (!cls)
		return NULL;
	rtnl_tc_set_ifindex(TC_CAST(cls), ifindex);
	rtnl_tc_set_parent(TC_CAST(cls), QL_INGRESS_HANDLE);
	rtnl_cls_set_prio(cls, QL_IFB_PRIO);
	if (rtnl_tc_set_kind(TC_CAST(cls), "u32") < 0) {
		rtnl_cls_put(cls);
		return NULL;
	}
	return cls;
}

static void filter_del(struct nl_sock *sk, int ifindex)
{
	struct rtnl_cls *cls = filter_base(ifindex);
	if (!cls)
		return;
	/* Protocol 0 matches the filter whatever protocol it has. Best
	 * effort: absent means nothing to replace. */
	rtnl_cls_set_protocol(cls, 0);
	(void)rtnl_cls_delete(sk, cls, 0);
	rtnl_cls_put(cls);
}

/* "ADDR[/PREFIX]" -> family, bytes, prefix. */
static int parse_src(const char *src, int *family, unsigned char addr[16], int *prefix, ql_err *e)
{
	char buf[INET6_ADDRSTRLEN + 8];
	if (strlen(src) >= sizeof buf)
		return ql_err_usage(e, "opts.ingress_src: expected ADDR or ADDR/PREFIX, got \"%s\"", src);
	strcpy(buf, src);
	char *slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, buf, addr) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, buf, addr) == 1)
		*family = AF_INET6;
	else
		return ql_err_usage(e, "opts.ingress_src: expected an IPv4/IPv6 address, got \"%s\"", src);
	int max = *family == AF_INET ? 32 : 128;
	*prefix = max;
	if (slash) {
		char *end;
		long p = strtol(slash + 1, &end, 10);
		if (end == slash + 1 || *end || p < 1 || p > max)
			return ql_err_usage(e, "opts.ingress_src: prefix must be 1..%d, got \"%s\"", max, src);
		*prefix = (int)p;
	}
	return 0;
}

int ql_ifb_src_check(const char *src, ql_err *e)
{
	int family = 0, prefix = 0;
	unsigned char addr[16];
	if (!src || !*src)
		return 0;
	return parse_src(src, &family, addr, &prefix, e);
}

static int filter_add(struct nl_sock *sk, int ifindex, int ifb_index, const char *src, ql_err *e)
{
	int family = 0, prefix = 0, rc;
	unsigned char addr[16];
	if (src && *src && (rc = parse_src(src, &family, addr, &prefix, e)) < 0)
		return rc;
	struct rtnl_cls *cls = filter_base(ifindex);
	struct rtnl_act *act = rtnl_act_alloc();
	if (!cls || !act) {
		if (cls)
			rtnl_cls_put(cls);
		if (act)
			rtnl_act_put(act);
		return ql_err_set(e, ENOMEM, NULL, "ingress filter: out of memory");
	}
	if (family == AF_INET) {
		rtnl_cls_set_protocol(cls, ETH_P_IP);
		/* IPv4 source address: offset 12 of the IP header */
		rc = rtnl_u32_add_key_in_addr(cls, (const struct in_addr *)addr, (uint8_t)prefix, 12, 0);
	} else if (family == AF_INET6) {
		rtnl_cls_set_protocol(cls, ETH_P_IPV6);
		/* IPv6 source address: offset 8 of the IPv6 header */
		rc = rtnl_u32_add_key_in6_addr(cls, (const struct in6_addr *)addr, (uint8_t)prefix, 8, 0);
	} else {
		rtnl_cls_set_protocol(cls, ETH_P_ALL);
		rc = rtnl_u32_add_key_uint32(cls, 0, 0, 0, 0);  /* match everything */
	}
	if (rc == 0)
		rc = rtnl_tc_set_kind(TC_CAST(act), "mirred");
	if (rc == 0)
		rc = rtnl_mirred_set_action(act, TCA_EGRESS_REDIR);
	if (rc == 0)
		rc = rtnl_mirred_set_policy(act, TC_ACT_STOLEN);
	if (rc == 0)
		rc = rtnl_mirred_set_ifindex(act, (uint32_t)ifb_index);
	if (rc == 0)
		rc = rtnl_u32_add_action(cls, act);
	if (rc == 0)
		rc = rtnl_u32_set_cls_terminal(cls);
	if (rc == 0)
		rc = rtnl_cls_add(sk, cls, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_act_put(act);
	rtnl_cls_put(cls);
	return rc < 0 ? ql_nl_fail(e, rc, "ingress redirect filter add") : 0;
}

int ql_ifb_attach(const char *netns, const char *ifname, const char *ifb_name,
		  const char *src, int *created_ifb, ql_err *e)
{
	*created_ifb = 0;
	int family, prefix, rc;
	unsigned char addr[16];
	if (src && *src && (rc = parse_src(src, &family, addr, &prefix, e)) < 0)
		return rc;
	if (strlen(ifb_name) >= IFNAMSIZ)
		return ql_err_usage(e, "ifb name \"%s\" longer than %d characters", ifb_name, IFNAMSIZ - 1);
	struct nl_sock *sk;
	if ((rc = ql_nl_open(&sk, netns, e)) < 0)
		return rc;
	int ifindex, ifb_index, exists = 0, dummy = 0;
	if ((rc = ql_nl_ifindex(sk, ifname, netns, &ifindex, e)) < 0)
		goto out;
	struct rtnl_link *link = NULL;
	if (rtnl_link_get_kernel(sk, 0, ifb_name, &link) == 0 && link) {
		exists = 1;
		rtnl_link_put(link);
	}
	if (!exists) {
		if ((rc = ifb_create(sk, ifb_name, e)) < 0)
			goto out;
		*created_ifb = 1;
	}
	if ((rc = ifb_up(sk, ifb_name, e)) < 0 ||
	    (rc = ql_nl_ifindex(sk, ifb_name, netns, &ifb_index, e)) < 0 ||
	    (rc = ingress_add(sk, ifindex, e)) < 0)
		goto undo;
	filter_del(sk, ifindex);
	if ((rc = filter_add(sk, ifindex, ifb_index, src, e)) < 0)
		goto undo;
	goto out;
undo:
	if (*created_ifb) {
		ql_err e2;
		ingress_del(sk, ifindex, &dummy, &e2);
		link_delete(sk, ifb_name, &dummy, &e2);
		*created_ifb = 0;
	}
out:
	ql_nl_close(sk);
	return rc;
}

int ql_ifb_detach(const char *netns, const char *ifname, const char *ifb_name,
		  int *removed, ql_err *e)
{
	*removed = 0;
	struct nl_sock *sk;
	int rc = ql_nl_open(&sk, netns, e);
	if (rc < 0)
		return rc;
	int ifindex;
	/* The device may be gone already (its namespace deleted): then only
	 * the ifb can be left. */
	ql_err e2;
	if (ql_nl_ifindex(sk, ifname, netns, &ifindex, &e2) == 0)
		rc = ingress_del(sk, ifindex, removed, e);
	if (rc == 0)
		rc = link_delete(sk, ifb_name, removed, e);
	ql_nl_close(sk);
	return rc;
}
