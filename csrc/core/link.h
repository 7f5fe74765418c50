/*
 * link.h - network links inside named namespaces: veth pairs, delete,
 * up/down, MTU, IPv4/IPv6 addresses, link info and offloads (TSO/GSO/GRO).
 *
 * Every function takes the namespace by name (NULL or "" = the caller's
 * own) and works on a libnl-route socket opened there (nl.h), so kernel
 * errno and extended-ACK text survive into the ql_err. ENODEV messages name
 * the device and the namespace; EPERM ones say which capability is missing.
 */
#ifndef QL_LINK_H
#define QL_LINK_H

#include <stdint.h>

#include "err.h"

#define QL_IFNAME_MAX 15 /* IFNAMSIZ - 1 */

/* Check an interface name (1..15 bytes, no '/', ':' or whitespace). */
int ql_link_check_ifname(const char *field, const char *ifname, ql_err *e);

typedef struct ql_veth {
	const char *name;        /* first end */
	const char *peer;        /* second end */
	const char *netns;       /* namespace of the first end (NULL = own) */
	const char *peer_netns;  /* namespace of the second end (NULL = own) */
} ql_veth;

/* Create a veth pair, each end directly in its namespace. -EEXIST when a
 * name is taken, -ENOENT when a namespace is missing. */
int ql_link_add_veth(const ql_veth *v, ql_err *e);

/* Delete a link (a veth's peer goes with it). -ENODEV if absent. */
int ql_link_del(const char *ifname, const char *netns, ql_err *e);

/* Set administrative state (up: 1 up, 0 down, -1 leave) and MTU
 * (mtu_bytes 0 = leave). */
int ql_link_set(const char *ifname, const char *netns, int up, uint32_t mtu_bytes,
		ql_err *e);

/* Add (add = 1) or delete (add = 0) an address "A.B.C.D/N" or "X:..:Y/N".
 * IPv6 addresses are added with IFA_F_NODAD so they are usable at once.
 * Adding an existing address gives -EEXIST. */
int ql_link_addr(const char *ifname, const char *netns, const char *cidr, int add,
		 ql_err *e);

/* Add a point-to-point address: local cidr "A.B.C.D/N" with the peer
 * peer_cidr (its prefix routes the peer through ifname), as `ip addr add
 * LOCAL peer PEER/N dev IF`. IPv4 only (libnl sets no IPv6 peer):
 * -EAFNOSUPPORT otherwise. */
int ql_link_addr_peer(const char *ifname, const char *netns, const char *cidr,
		      const char *peer_cidr, ql_err *e);

typedef struct ql_link_info {
	int ifindex;
	uint32_t mtu_bytes;
	int up;                  /* IFF_UP */
	int carrier;             /* IFF_LOWER_UP */
	char operstate[16];      /* "up", "down", "lowerlayerdown", "unknown", ... */
	char kind[16];           /* "veth", "" when the kernel says nothing */
	int64_t speed_mbps;      /* -1 when the driver does not know */
	char address[32];        /* link-layer address "aa:bb:..", "" if none */
} ql_link_info;

int ql_link_get(const char *ifname, const char *netns, ql_link_info *out, ql_err *e);

/* Offload switches: -1 = leave as is, 0 = off, 1 = on. */
typedef struct ql_offloads {
	int tso, gso, gro;
} ql_offloads;

/* Apply the switches that are not -1 (ethtool ioctl from a socket in the
 * namespace), then read all three back into *now. -EOPNOTSUPP when the
 * driver refuses a change. */
int ql_link_offloads(const char *ifname, const char *netns, const ql_offloads *set,
		     ql_offloads *now, ql_err *e);

#endif
