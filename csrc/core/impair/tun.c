/* tun.c - see tun.h. */
#include "tun.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../link.h"
#include "../nl.h"

/* The device gets no IPv6 link-local address when it comes up
 * (addr_gen_mode 1, "none"; the calling thread is in its namespace and the
 * device is still down): there is no neighbour to discover on a
 * point-to-point TUN, so no duplicate address detection to wait for and no
 * router solicitation crosses the link uninvited. Best effort: without IPv6
 * (no such file) there is nothing to generate. */
static void no_link_local(const char *ifname)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/sys/net/ipv6/conf/%s/addr_gen_mode", ifname);
	int f = open(path, O_WRONLY | O_CLOEXEC);
	if (f < 0)
		return;
	ssize_t w = write(f, "1", 1);
	(void)w;
	close(f);
}

int ql_tun_open(const char *netns, const char *ifname, int gso, int *fd, ql_err *e)
{
	*fd = -1;
	int rc = ql_link_check_ifname("ifname", ifname, e);
	if (rc < 0)
		return rc;
	int restore;
	if ((rc = ql_netns_enter(netns, &restore, e)) < 0)
		return rc;
	const char *where = netns && *netns ? netns : "(own)";
	int t = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (t < 0) {
		int err = errno;
		ql_netns_restore(restore, NULL);
		return ql_err_set(e, err, NULL, "cannot open /dev/net/tun: %s%s", strerror(err),
				  err == ENOENT ? " (no TUN support: load the tun module)" : "");
	}
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (gso ? IFF_VNET_HDR : 0);
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	int hdr = QL_TUN_VNET_HDR_BYTES;
	unsigned offload = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
	if (ioctl(t, TUNSETIFF, &ifr) < 0 ||
	    (gso && (ioctl(t, TUNSETVNETHDRSZ, &hdr) < 0 || ioctl(t, TUNSETOFFLOAD, offload) < 0))) {
		int err = errno;
		close(t);
		ql_netns_restore(restore, NULL);
		return ql_err_set(e, err, NULL,
				  "cannot make TUN device %s in namespace %s: %s%s", ifname, where,
				  strerror(err),
				  err == EPERM ? " (needs CAP_NET_ADMIN: run as root)" :
				  err == EBUSY || err == EEXIST ? " (the name is taken there: pick another)" : "");
	}
	/* A deeper device queue than TUN's 500 packets: while a reader
	 * waits for a CPU the kernel queues here, and drops only beyond it
	 * (those drops are the device's tx_dropped, not the link's). */
	int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sk >= 0) {
		struct ifreq q;
		memset(&q, 0, sizeof q);
		strncpy(q.ifr_name, ifname, IFNAMSIZ - 1);
		q.ifr_qlen = QL_TUN_TXQUEUELEN;
		ioctl(sk, SIOCSIFTXQLEN, &q);  /* best effort: 500 still works */
		close(sk);
	}
	no_link_local(ifname);
	if ((rc = ql_netns_restore(restore, e)) < 0) {
		close(t);
		return rc;
	}
	*fd = t;
	return 0;
}

int ql_tun_configure(const char *netns, const char *ifname, uint32_t mtu_bytes,
		     const char *local_cidr, const char *peer_cidr, ql_err *e)
{
	int rc = ql_link_set(ifname, netns, 1, mtu_bytes, e);
	if (rc < 0)
		return rc;
	return ql_link_addr_peer(ifname, netns, local_cidr, peer_cidr, e);
}
