/*
 * ifb.h - ingress impairment: netem only acts on a device's egress, so
 * incoming traffic is redirected to an ifb device (ingress qdisc on the
 * device + u32 filter + mirred egress-redirect action) and netem goes on the
 * ifb's root. Built with libnl-route-3's link, qdisc, u32 and mirred objects.
 *
 * The ifb for device D is named "qlifb<ifindex of D>" in D's namespace, so
 * any process can find (and remove) it from the device alone. The ingress
 * qdisc ffff: of D is owned by the impairment while it is on: removal
 * deletes it with every filter it holds.
 */
#ifndef QL_IFB_H
#define QL_IFB_H

#include <stddef.h>

#include "err.h"

/* u32 filter priority used for the redirect. */
#define QL_IFB_PRIO 0xC0DE

/* Name of the ifb that serves ifname ("qlifb<ifindex>"). ENODEV if absent. */
int ql_ifb_name(const char *netns, const char *ifname, char *out, size_t cap,
		ql_err *e);

/* *exists = 1 if a link called name exists in netns. */
int ql_link_exists(const char *netns, const char *name, int *exists, ql_err *e);

/*
 * Make ingress traffic of ifname go through ifb_name: create the ifb (type
 * "ifb", up) unless it exists, add the ingress qdisc unless present, and
 * (re)place the redirect filter. src NULL/"" matches every packet (protocol
 * all); "ADDR" or "ADDR/PREFIX" (IPv4 or IPv6) matches the source address,
 * i.e. traffic coming FROM that peer. *created_ifb tells whether the ifb was
 * new. On failure what this call created is removed again.
 */
int ql_ifb_attach(const char *netns, const char *ifname, const char *ifb_name,
		  const char *src, int *created_ifb, ql_err *e);

/* The rule of ql_ifb_attach's src, without touching the kernel: NULL, "",
 * "ADDR" or "ADDR/PREFIX" (IPv4 or IPv6, prefix 1..32 or 1..128); else a
 * usage error naming opts.ingress_src. */
int ql_ifb_src_check(const char *src, ql_err *e);

/* Remove the ingress qdisc of ifname (and its filters) and the ifb link.
 * Parts already gone are skipped; *removed = 1 if anything was there. */
int ql_ifb_detach(const char *netns, const char *ifname, const char *ifb_name,
		  int *removed, ql_err *e);

#endif
