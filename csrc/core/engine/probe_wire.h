/*
 * probe_wire.h - the latency probe's messages (Lua-free): the UDP/TCP
 * request and reply that the probe client (probe.c) and a qoslab server's
 * responder (probe_server.c) exchange, and the ICMP echo data the client
 * puts in pings. Stands on nothing but <stdint.h>.
 *
 * A UDP or TCP probe message is QL_PROBE_HDR_BYTES of header, big-endian,
 * then padding up to its total length (the request's payload_bytes):
 *
 *    0 u32 magic 0x514c5052 ("QLPR"; distinct from iperf3's UDP connect
 *          messages 0x36373839 / 123456789, which the server tells apart
 *          by this magic before anything else)
 *    4 u8  version (1)        5 u8 type (1 request, 2 reply)
 *    6 u16 flags (reply: QL_PROBE_F_SRV_KERNEL_RX)
 *    8 u32 total length in bytes (header included; a UDP message's equals
 *          its datagram's)
 *   12 u32 session id (the client's random id: stray replies are ignored)
 *   16 u64 sequence number (0, 1, ... per session)
 *   24 u64 client send time, ns CLOCK_REALTIME (echoed, informational)
 *   32 u64 server receive time, ns CLOCK_REALTIME (kernel RX stamp when
 *          the flag says so, else read just after the read)
 *   40 u64 server send time, ns CLOCK_REALTIME, read just before the send
 *   48 u8[8] the server's boot id, its first 8 characters (the client
 *          compares it with its own to tell a shared clock)
 *
 * A reply is the request with type, flags, server times and boot id
 * overwritten: never a byte longer. A TCP probe connection opens with the
 * 37-byte greeting QL_PROBE_TCP_GREETING (NUL-padded), where an iperf3
 * connection sends its cookie; the greeting is no valid cookie (upper
 * case, digits outside a-z2-7).
 *
 * ICMP echo data: u32 magic, u32 session id, u64 sequence, u64 client send
 * time (QL_PROBE_ICMP_DATA_BYTES), then padding; the echo's own 16-bit
 * sequence is the low bits of ours.
 */
#ifndef QL_PROBE_WIRE_H
#define QL_PROBE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define QL_PROBE_MAGIC 0x514c5052u
#define QL_PROBE_VERSION 1
#define QL_PROBE_REQUEST 1
#define QL_PROBE_REPLY 2
#define QL_PROBE_F_SRV_KERNEL_RX 1u
#define QL_PROBE_HDR_BYTES 56
#define QL_PROBE_ICMP_DATA_BYTES 24
#define QL_PROBE_MAX_BYTES 65507           /* the largest UDP payload */
#define QL_PROBE_TCP_GREETING "QLPROBE1"
#define QL_PROBE_GREETING_BYTES 37          /* = QL_COOKIE_SIZE */

typedef struct ql_probe_msg {
	uint8_t version, type;
	uint16_t flags;
	uint32_t len, session;
	uint64_t seq;
	int64_t client_tx_ns, server_rx_ns, server_tx_ns;
	uint8_t boot[8];
} ql_probe_msg;

/* Write m's header into buf[QL_PROBE_HDR_BYTES] (magic first). */
void ql_probe_msg_put(const ql_probe_msg *m, void *buf);

/* Parse a header: 0 when buf holds our magic, version 1, a known type and a
 * length field of at least the header; -1 otherwise (len < the header, or
 * not a probe message: a caller tells these apart with ql_probe_is_ours). */
int ql_probe_msg_get(ql_probe_msg *m, const void *buf, size_t len);

/* 1 when buf starts with the probe magic (a datagram meant for the probe
 * responder, valid or not). */
int ql_probe_is_ours(const void *buf, size_t len);

/* ICMP echo data: put / get (get: 0 when magic matches, else -1). */
void ql_probe_icmp_put(uint32_t session, uint64_t seq, int64_t tx_ns, void *buf);
int ql_probe_icmp_get(const void *buf, size_t len, uint32_t *session, uint64_t *seq,
		      int64_t *tx_ns);

/* The TCP greeting into buf[QL_PROBE_GREETING_BYTES]; and the test. */
void ql_probe_greeting_put(void *buf);
int ql_probe_greeting_is(const void *buf);

/* This host's boot id, its first 8 characters ("" padded with NUL when
 * unreadable: no two such hosts are taken as one). */
void ql_probe_boot_id(uint8_t out[8]);

#endif
