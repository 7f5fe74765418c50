/*
 * route.h - IP routing inside a named namespace: a route through a gateway
 * and the namespace's forwarding switches (what makes a namespace a router).
 *
 * Both take the namespace by name (NULL or "" = the caller's own). Routes go
 * over rtnetlink (libnl-route, nl.h); forwarding is the namespace's own
 * sysctl (/proc/sys/net is per namespace: the file is opened from a thread
 * inside it), so the host's forwarding is never touched for another one.
 */
#ifndef QL_ROUTE_H
#define QL_ROUTE_H

#include "err.h"

/*
 * Add a route to dst ("default" or "A.B.C.D/N" or "X:..:Y/N") through the
 * gateway address via (same family as dst; "default" takes via's family).
 * The gateway must be reachable on a link of the namespace (-ENETUNREACH
 * otherwise); an existing route to dst gives -EEXIST.
 */
int ql_route_add(const char *netns, const char *dst, const char *via, ql_err *e);

/*
 * Turn IPv4 (net.ipv4.ip_forward) and IPv6 (net.ipv6.conf.all.forwarding)
 * forwarding on (1) or off (0) in netns. ipv6 0 leaves IPv6 alone.
 * -ENOENT when the namespace does not exist.
 */
int ql_route_forwarding(const char *netns, int on, int ipv6, ql_err *e);

#endif
