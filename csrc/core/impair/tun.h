/*
 * tun.h - a TUN device (layer 3, no packet information header) made inside a
 * named namespace: the calling thread enters the namespace for the open and
 * the TUNSETIFF ioctl and returns (nl.h), the file descriptor keeps working
 * from anywhere. The device is not persistent: it vanishes when the fd is
 * closed (also when the process dies). Stands on nl.h and link.h.
 */
#ifndef QL_TUN_H
#define QL_TUN_H

#include <stdint.h>

#include "../err.h"

/* Names of the link's devices start with this (what `qoslab cleanup` may
 * look for; the devices themselves die with their fd). */
#define QL_TUN_PREFIX "qltun"
/* The devices' transmit queue (packets the kernel holds for the reader). */
#define QL_TUN_TXQUEUELEN 4096

/* Open /dev/net/tun (non-blocking, close-on-exec) and make the device
 * ifname in netns (NULL/"" = the caller's). -EBUSY/-EEXIST when the name
 * is taken, -ENOENT when netns is missing, -EPERM without CAP_NET_ADMIN.
 * Its transmit queue is set to QL_TUN_TXQUEUELEN packets. gso: see below. */
int ql_tun_open(const char *netns, const char *ifname, int gso, int *fd, ql_err *e);

/* With gso, the device takes and hands over GSO super-packets (up to 64 KiB,
 * TSO for IPv4/IPv6, checksums left to the receiver) behind a struct
 * virtio_net_hdr of this size (IFF_VNET_HDR): what is read from one such
 * device can be written unchanged into another. */
#define QL_TUN_VNET_HDR_BYTES 10

/* Bring ifname up with mtu_bytes and the point-to-point address local_cidr
 * with peer_cidr (ql_link_addr_peer). */
int ql_tun_configure(const char *netns, const char *ifname, uint32_t mtu_bytes,
		     const char *local_cidr, const char *peer_cidr, ql_err *e);

#endif
