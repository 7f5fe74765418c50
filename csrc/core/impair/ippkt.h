/*
 * ippkt.h - the few IP header edits the impairment link makes on a raw
 * IPv4/IPv6 packet (as a TUN device hands it over): read the ECN field,
 * set CE (RFC 3168) keeping the IPv4 header checksum right (RFC 1624's
 * incremental update), flip a bit, tell the transport protocol apart.
 * Pure functions on bytes.
 */
#ifndef QL_IPPKT_H
#define QL_IPPKT_H

#include <stddef.h>

/* The ECN field (0..3) of the packet, or -1 when it is no IPv4/IPv6 packet
 * (too short or another version). */
int ql_ippkt_ecn(const unsigned char *p, size_t len);

/* 1 when the ECN field says ECT(0) or ECT(1). */
int ql_ippkt_ecn_capable(const unsigned char *p, size_t len);

/* Set ECN to CE (and fix the IPv4 checksum). Returns 0, or -1 when the
 * packet is no IPv4/IPv6 packet (left as it is). */
int ql_ippkt_set_ce(unsigned char *p, size_t len);

/* The transport classes the link counts apart. */
enum ql_ippkt_proto {
	QL_IPPKT_TCP = 0,
	QL_IPPKT_UDP,
	QL_IPPKT_ICMP,            /* ICMP or ICMPv6 */
	QL_IPPKT_OTHER,           /* anything else, or no IPv4/IPv6 packet */
	QL_IPPKT_NPROTOS
};

/* The class of the packet by its IPv4 protocol or IPv6 next header field
 * (an IPv6 extension header counts as other). */
int ql_ippkt_proto(const unsigned char *p, size_t len);

/* Bytes of the IP header and the TCP (its data offset) or UDP (8) header
 * at the packet's front: what every segment of a GSO packet carries. 0 when
 * it is no IPv4/IPv6 TCP/UDP packet (an IPv6 extension header included) or
 * too short for its headers. */
size_t ql_ippkt_headers_bytes(const unsigned char *p, size_t len);

/* Flip bit (0..7) of byte (< len). */
void ql_ippkt_flip(unsigned char *p, size_t len, size_t byte, int bit);

#endif
