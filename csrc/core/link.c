/* link.c - see link.h. */
#include "link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>

#include "netns.h"
#include "nl.h"

int ql_link_check_ifname(const char *field, const char *ifname, ql_err *e)
{
	size_t n = ifname ? strlen(ifname) : 0;
	int bad = n == 0 || n > QL_IFNAME_MAX || strcmp(ifname, ".") == 0 ||
		  strcmp(ifname, "..") == 0;
	for (size_t i = 0; !bad && i < n; i++)
		if (ifname[i] == '/' || ifname[i] == ':' || ifname[i] <= ' ' || ifname[i] == 0x7f)
			bad = 1;
	if (bad)
		return ql_err_usage(e, "%s: expected an interface name (1..%d bytes, no '/', ':' or spaces), got \"%s\"",
				    field, QL_IFNAME_MAX, ifname ? ifname : "(null)");
	return 0;
}

static int check_netns(const char *field, const char *netns, ql_err *e)
{
	if (!netns || !*netns)
		return 0;
	return ql_netns_check_name(field, netns, e);
}

static const char *ns_label(const char *netns)
{
	return netns && *netns ? netns : "(this process's)";
}

/* Socket in netns plus the ifindex of ifname there. */
static int open_link(const char *ifname, const char *netns, struct nl_sock **sk,
		     int *ifindex, ql_err *e)
{
	int rc;
	if ((rc = ql_link_check_ifname("ifname", ifname, e)) < 0 ||
	    (rc = check_netns("netns", netns, e)) < 0)
		return rc;
	if ((rc = ql_nl_open(sk, netns, e)) < 0)
		return rc;
	if ((rc = ql_nl_ifindex(*sk, ifname, netns, ifindex, e)) < 0) {
		ql_nl_close(*sk);
		*sk = NULL;
	}
	return rc;
}

static int open_ns_fd(const char *netns, int *fd, ql_err *e)
{
	char path[256];
	if (netns && *netns)
		snprintf(path, sizeof path, QL_NETNS_DIR "/%s", netns);
	else
		snprintf(path, sizeof path, "/proc/thread-self/ns/net");
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		int err = errno;
		if (err == ENOENT)
			return ql_err_set(e, ENOENT, "ENOENT",
					  "network namespace \"%s\" does not exist (create it with qoslab.netns.add or ip netns add)",
					  netns);
		return ql_err_set(e, err, NULL, "cannot open %s: %s", path, strerror(err));
	}
	return 0;
}

/* Turn a kernel EEXIST on link creation into a message naming the names. */
static int veth_fail(const ql_veth *v, ql_err *e, int rc)
{
	if (rc == -EEXIST)
		return ql_err_set(e, EEXIST, "EEXIST",
				  "cannot create veth pair %s (namespace %s) / %s (namespace %s): a device with one of these names already exists",
				  v->name, ns_label(v->netns), v->peer, ns_label(v->peer_netns));
	return rc;
}

int ql_link_add_veth(const ql_veth *v, ql_err *e)
{
	int rc;
	if ((rc = ql_link_check_ifname("name", v->name, e)) < 0 ||
	    (rc = ql_link_check_ifname("peer", v->peer, e)) < 0 ||
	    (rc = check_netns("netns", v->netns, e)) < 0 ||
	    (rc = check_netns("peer_netns", v->peer_netns, e)) < 0)
		return rc;
	int fd = -1, peer_fd = -1;
	struct nl_sock *sk = NULL;
	struct rtnl_link *link = NULL;
	struct nl_msg *msg = NULL;
	/* The request is sent from the caller's namespace; each end is placed
	 * by IFLA_NET_NS_FD, so both ends appear at once in their namespaces. */
	if ((rc = open_ns_fd(v->netns, &fd, e)) < 0 ||
	    (rc = open_ns_fd(v->peer_netns, &peer_fd, e)) < 0)
		goto out;
	if ((rc = ql_nl_open(&sk, NULL, e)) < 0)
		goto out;
	if (!(link = rtnl_link_veth_alloc())) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	struct rtnl_link *peer = rtnl_link_veth_get_peer(link);
	rtnl_link_set_name(link, v->name);
	rtnl_link_set_ns_fd(link, fd);
	rtnl_link_set_name(peer, v->peer);
	rtnl_link_set_ns_fd(peer, peer_fd);
	rtnl_link_put(peer);
	int nlrc = rtnl_link_build_add_request(link, NLM_F_CREATE | NLM_F_EXCL, &msg);
	if (nlrc < 0) {
		rc = ql_nl_fail(e, nlrc, "build veth request");
		goto out;
	}
	rc = veth_fail(v, e, ql_nl_transact(sk, msg, "create veth pair", e));
out:
	nlmsg_free(msg);
	if (link)
		rtnl_link_veth_release(link);
	ql_nl_close(sk);
	if (fd >= 0)
		close(fd);
	if (peer_fd >= 0)
		close(peer_fd);
	return rc;
}

int ql_link_del(const char *ifname, const char *netns, ql_err *e)
{
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_link(ifname, netns, &sk, &ifindex, e)) < 0)
		return rc;
	struct rtnl_link *link = rtnl_link_alloc();
	struct nl_msg *msg = NULL;
	if (!link) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	rtnl_link_set_ifindex(link, ifindex);
	int nlrc = rtnl_link_build_delete_request(link, &msg);
	if (nlrc < 0)
		rc = ql_nl_fail(e, nlrc, "build link delete request");
	else
		rc = ql_nl_transact(sk, msg, "delete link", e);
out:
	nlmsg_free(msg);
	if (link)
		rtnl_link_put(link);
	ql_nl_close(sk);
	return rc;
}

int ql_link_set(const char *ifname, const char *netns, int up, uint32_t mtu_bytes,
		ql_err *e)
{
	if (mtu_bytes != 0 && mtu_bytes < 68)
		return ql_err_usage(e, "mtu_bytes: expected an integer in [68, 65535], got %u", mtu_bytes);
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_link(ifname, netns, &sk, &ifindex, e)) < 0)
		return rc;
	struct rtnl_link *orig = rtnl_link_alloc(), *chg = rtnl_link_alloc();
	struct nl_msg *msg = NULL;
	if (!orig || !chg) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	rtnl_link_set_ifindex(orig, ifindex);
	rtnl_link_set_ifindex(chg, ifindex);
	if (up == 1)
		rtnl_link_set_flags(chg, IFF_UP);
	else if (up == 0)
		rtnl_link_unset_flags(chg, IFF_UP);
	if (mtu_bytes)
		rtnl_link_set_mtu(chg, mtu_bytes);
	int nlrc = rtnl_link_build_change_request(orig, chg, 0, &msg);
	if (nlrc < 0) {
		rc = ql_nl_fail(e, nlrc, "build link change request");
		goto out;
	}
	char what[96];
	snprintf(what, sizeof what, "set link %s in namespace %s", ifname, ns_label(netns));
	rc = ql_nl_transact(sk, msg, what, e);
out:
	nlmsg_free(msg);
	if (orig)
		rtnl_link_put(orig);
	if (chg)
		rtnl_link_put(chg);
	ql_nl_close(sk);
	return rc;
}

/* Parse "A.B.C.D/N" or "X:..:Y/N" (prefix length required). */
static int parse_cidr(const char *cidr, int *family, unsigned char *bytes, int *len,
		      int *prefix, ql_err *e)
{
	char buf[64];
	const char *slash = cidr ? strchr(cidr, '/') : NULL;
	if (!cidr || !slash || (size_t)(slash - cidr) >= sizeof buf || slash == cidr)
		goto bad;
	memcpy(buf, cidr, (size_t)(slash - cidr));
	buf[slash - cidr] = '\0';
	char *end;
	errno = 0;
	long p = strtol(slash + 1, &end, 10);
	if (*end || end == slash + 1 || errno || p < 0)
		goto bad;
	if (inet_pton(AF_INET, buf, bytes) == 1 && p <= 32) {
		*family = AF_INET;
		*len = 4;
	} else if (inet_pton(AF_INET6, buf, bytes) == 1 && p <= 128) {
		*family = AF_INET6;
		*len = 16;
	} else {
		goto bad;
	}
	*prefix = (int)p;
	return 0;
bad:
	return ql_err_usage(e, "addr: expected \"A.B.C.D/0..32\" or \"X:...:Y/0..128\", got \"%s\"",
			    cidr ? cidr : "(null)");
}

/* Add or delete cidr on ifname; with peer_cidr (point-to-point) the prefix
 * is the peer's and the kernel routes the peer through the link. */
static int addr_request(const char *ifname, const char *netns, const char *cidr,
			const char *peer_cidr, int add, ql_err *e)
{
	int family = 0, len = 0, prefix = 0, rc;
	unsigned char bytes[16];
	if ((rc = parse_cidr(cidr, &family, bytes, &len, &prefix, e)) < 0)
		return rc;
	int peer_family = 0, peer_len = 0, peer_prefix = 0;
	unsigned char peer_bytes[16];
	if (peer_cidr) {
		if ((rc = parse_cidr(peer_cidr, &peer_family, peer_bytes, &peer_len,
				     &peer_prefix, e)) < 0)
			return rc;
		if (peer_family != family)
			return ql_err_usage(e, "peer: expected an address of the same family as \"%s\", got \"%s\"",
					    cidr, peer_cidr);
	}
	struct nl_sock *sk;
	int ifindex;
	if ((rc = open_link(ifname, netns, &sk, &ifindex, e)) < 0)
		return rc;
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = nl_addr_build(family, bytes, (size_t)len);
	struct nl_msg *msg = NULL;
	if (!a || !local) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	nl_addr_set_prefixlen(local, prefix);
	rtnl_addr_set_ifindex(a, ifindex);
	rtnl_addr_set_family(a, family);
	rtnl_addr_set_local(a, local);
	rtnl_addr_set_prefixlen(a, prefix);
	if (peer_cidr) {
		struct nl_addr *peer = nl_addr_build(family, peer_bytes, (size_t)peer_len);
		if (!peer) {
			rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
			goto out;
		}
		nl_addr_set_prefixlen(peer, peer_prefix);
		int prc = rtnl_addr_set_peer(a, peer);
		nl_addr_put(peer);
		if (prc < 0) {
			rc = ql_nl_fail(e, prc, "set the peer address");
			goto out;
		}
		rtnl_addr_set_prefixlen(a, peer_prefix);
	}
	if (family == AF_INET6)
		rtnl_addr_set_flags(a, IFA_F_NODAD);
	int nlrc = add ? rtnl_addr_build_add_request(a, NLM_F_CREATE | NLM_F_EXCL, &msg)
		       : rtnl_addr_build_delete_request(a, 0, &msg);
	if (nlrc < 0) {
		rc = ql_nl_fail(e, nlrc, "build address request");
		goto out;
	}
	char what[160];
	snprintf(what, sizeof what, "%s address %s %s %s in namespace %s",
		 add ? "add" : "delete", cidr, add ? "to" : "from", ifname, ns_label(netns));
	rc = ql_nl_transact(sk, msg, what, e);
	if (rc == -EEXIST)
		snprintf(e->msg + strlen(e->msg), sizeof e->msg - strlen(e->msg),
			 " (the address is already there)");
	else if (rc == -EADDRNOTAVAIL && !add)
		rc = ql_err_set(e, ENOENT, "ENOENT", "%s: no such address on the link", what);
out:
	nlmsg_free(msg);
	if (local)
		nl_addr_put(local);
	if (a)
		rtnl_addr_put(a);
	ql_nl_close(sk);
	return rc;
}

int ql_link_addr(const char *ifname, const char *netns, const char *cidr, int add,
		 ql_err *e)
{
	return addr_request(ifname, netns, cidr, NULL, add, e);
}

int ql_link_addr_peer(const char *ifname, const char *netns, const char *cidr,
		      const char *peer_cidr, ql_err *e)
{
	return addr_request(ifname, netns, cidr, peer_cidr, 1, e);
}

/* ethtool ioctl on a datagram socket made inside netns. */
static int ethtool(const char *ifname, const char *netns, void *cmd, ql_err *e)
{
	int restore, rc;
	if ((rc = ql_netns_enter(netns, &restore, e)) < 0)
		return rc;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int err = fd < 0 ? errno : 0;
	if ((rc = ql_netns_restore(restore, e)) < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (fd < 0)
		return ql_err_set(e, err, NULL, "socket: %s", strerror(err));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
	ifr.ifr_data = cmd;
	rc = ioctl(fd, SIOCETHTOOL, &ifr);
	err = errno;
	close(fd);
	if (rc >= 0)
		return rc;
	{
		if (err == ENODEV)
			return ql_err_set(e, ENODEV, "ENODEV", "no such network device \"%s\" in namespace %s",
					  ifname, ns_label(netns));
		if (err == EOPNOTSUPP)
			return ql_err_set(e, EOPNOTSUPP, "ENOTSUP",
					  "device \"%s\" does not support this ethtool operation", ifname);
		return ql_err_set(e, err, NULL, "ethtool on %s: %s%s", ifname, strerror(err),
				  err == EPERM ? " (needs CAP_NET_ADMIN: run as root)" : "");
	}
}

int ql_link_get(const char *ifname, const char *netns, ql_link_info *out, ql_err *e)
{
	int rc;
	memset(out, 0, sizeof *out);
	if ((rc = ql_link_check_ifname("ifname", ifname, e)) < 0 ||
	    (rc = check_netns("netns", netns, e)) < 0)
		return rc;
	struct nl_sock *sk;
	if ((rc = ql_nl_open(&sk, netns, e)) < 0)
		return rc;
	struct rtnl_link *link = NULL;
	int nlrc = rtnl_link_get_kernel(sk, 0, ifname, &link);
	ql_nl_close(sk);
	if (nlrc < 0 || !link) {
		if (nlrc == -NLE_NODEV || nlrc == -NLE_OBJ_NOTFOUND || !link)
			return ql_err_set(e, ENODEV, "ENODEV", "no such network device \"%s\" in namespace %s",
					  ifname, ns_label(netns));
		return ql_nl_fail(e, nlrc, "link lookup");
	}
	out->ifindex = rtnl_link_get_ifindex(link);
	out->mtu_bytes = rtnl_link_get_mtu(link);
	unsigned flags = rtnl_link_get_flags(link);
	out->up = !!(flags & IFF_UP);
	out->carrier = !!(flags & IFF_LOWER_UP);
	rtnl_link_operstate2str(rtnl_link_get_operstate(link), out->operstate, sizeof out->operstate);
	const char *kind = rtnl_link_get_type(link);
	snprintf(out->kind, sizeof out->kind, "%s", kind ? kind : "");
	struct nl_addr *ll = rtnl_link_get_addr(link);
	if (ll && nl_addr_get_len(ll) > 0)
		nl_addr2str(ll, out->address, sizeof out->address);
	rtnl_link_put(link);
	out->speed_mbps = -1;
	struct ethtool_cmd cmd;
	memset(&cmd, 0, sizeof cmd);
	cmd.cmd = ETHTOOL_GSET;
	ql_err ignore;
	/* Speed is optional: drivers without ethtool settings just report none. */
	if (ethtool(ifname, netns, &cmd, &ignore) >= 0) {
		uint32_t s = ethtool_cmd_speed(&cmd);
		if (s != 0 && s != (uint32_t)SPEED_UNKNOWN)
			out->speed_mbps = s;
	}
	return 0;
}

/*
 * Offloads go through the feature-bit interface (ETHTOOL_GFEATURES /
 * ETHTOOL_SFEATURES) by feature name, as ethtool -K does: "tso" is every
 * TCP segmentation feature (tx-tcp-segmentation, -ecn-, -mangleid-, tcp6-,
 * -accecn-...), which the legacy ETHTOOL_STSO no longer covers completely on
 * new kernels; "gso" is tx-generic-segmentation and "gro" rx-gro.
 */
static int offload_group(const char *name)
{
	if (strncmp(name, "tx-tcp", 6) == 0 && strstr(name, "segmentation"))
		return 0;
	if (strcmp(name, "tx-generic-segmentation") == 0)
		return 1;
	if (strcmp(name, "rx-gro") == 0)
		return 2;
	return -1;
}

static const char *const offload_names[3] = { "tso", "gso", "gro" };

/* Group (0..2, or -1) of every feature bit of the device; *count bits. */
static int feature_groups(const char *ifname, const char *netns, int **groups,
			  uint32_t *count, ql_err *e)
{
	/* The header and room for one entry of its flexible data[]: the size
	 * of the one string set asked for. A union, not a struct with the
	 * header first (a flexible array not at the end is a GNU extension). */
	union {
		struct ethtool_sset_info hdr;
		unsigned char room[sizeof(struct ethtool_sset_info) + sizeof(uint32_t)];
	} si;
	memset(&si, 0, sizeof si);
	si.hdr.cmd = ETHTOOL_GSSET_INFO;
	si.hdr.sset_mask = 1ull << ETH_SS_FEATURES;
	int rc = ethtool(ifname, netns, &si, e);
	if (rc < 0)
		return rc;
	if (!(si.hdr.sset_mask & (1ull << ETH_SS_FEATURES)) || si.hdr.data[0] == 0 || si.hdr.data[0] > 4096)
		return ql_err_set(e, EOPNOTSUPP, "ENOTSUP", "device \"%s\" reports no ethtool features", ifname);
	uint32_t n = si.hdr.data[0];
	struct ethtool_gstrings *gs = calloc(1, sizeof *gs + (size_t)n * ETH_GSTRING_LEN);
	int *g = calloc(n, sizeof *g);
	if (!gs || !g) {
		free(gs);
		free(g);
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	}
	gs->cmd = ETHTOOL_GSTRINGS;
	gs->string_set = ETH_SS_FEATURES;
	gs->len = n;
	if ((rc = ethtool(ifname, netns, gs, e)) < 0) {
		free(gs);
		free(g);
		return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		char name[ETH_GSTRING_LEN + 1];
		memcpy(name, gs->data + (size_t)i * ETH_GSTRING_LEN, ETH_GSTRING_LEN);
		name[ETH_GSTRING_LEN] = '\0';
		g[i] = offload_group(name);
	}
	free(gs);
	*groups = g;
	*count = n;
	return 0;
}

int ql_link_offloads(const char *ifname, const char *netns, const ql_offloads *set,
		     ql_offloads *now, ql_err *e)
{
	int rc;
	if ((rc = ql_link_check_ifname("ifname", ifname, e)) < 0 ||
	    (rc = check_netns("netns", netns, e)) < 0)
		return rc;
	const int want[3] = { set ? set->tso : -1, set ? set->gso : -1, set ? set->gro : -1 };
	int *groups = NULL;
	uint32_t n = 0;
	if ((rc = feature_groups(ifname, netns, &groups, &n, e)) < 0)
		return rc;
	uint32_t blocks = (n + 31) / 32;
	struct ethtool_gfeatures *gf = calloc(1, sizeof *gf + blocks * sizeof gf->features[0]);
	struct ethtool_sfeatures *sf = calloc(1, sizeof *sf + blocks * sizeof sf->features[0]);
	if (!gf || !sf) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	gf->cmd = ETHTOOL_GFEATURES;
	gf->size = blocks;
	if ((rc = ethtool(ifname, netns, gf, e)) < 0)
		goto out;
	sf->cmd = ETHTOOL_SFEATURES;
	sf->size = blocks;
	int any = 0;
	for (uint32_t i = 0; i < n; i++) {
		int grp = groups[i];
		uint32_t bit = 1u << (i % 32);
		if (grp < 0 || want[grp] < 0 || !(gf->features[i / 32].available & bit))
			continue;
		sf->features[i / 32].valid |= bit;
		if (want[grp])
			sf->features[i / 32].requested |= bit;
		any = 1;
	}
	/* A positive result (ETHTOOL_F_WISH...) means "not all applied"; the
	 * read-back below says which. */
	if (any && (rc = ethtool(ifname, netns, sf, e)) < 0)
		goto out;
	memset(gf->features, 0, blocks * sizeof gf->features[0]);
	gf->cmd = ETHTOOL_GFEATURES;
	gf->size = blocks;
	if ((rc = ethtool(ifname, netns, gf, e)) < 0)
		goto out;
	int got[3] = { 0, 0, 0 };
	for (uint32_t i = 0; i < n; i++)
		if (groups[i] >= 0 && (gf->features[i / 32].active & (1u << (i % 32))))
			got[groups[i]] = 1;
	for (int k = 0; k < 3; k++)
		if (want[k] >= 0 && got[k] != want[k]) {
			rc = ql_err_set(e, EOPNOTSUPP, "ENOTSUP",
					"device \"%s\" kept %s %s (the driver does not allow changing it)",
					ifname, offload_names[k], got[k] ? "on" : "off");
			goto out;
		}
	if (now) {
		now->tso = got[0];
		now->gso = got[1];
		now->gro = got[2];
	}
	rc = 0;
out:
	free(groups);
	free(gf);
	free(sf);
	return rc;
}
