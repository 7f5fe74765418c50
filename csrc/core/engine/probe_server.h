/*
 * probe_server.h - a qoslab server's latency probe responder (Lua-free):
 * answers UDP probe requests on the server's UDP port (read by its
 * listener) and TCP probe connections (handed over by the connection
 * thread that read their greeting). Stands on probe_wire.h and sockopt.h.
 *
 * Facing hostile peers:
 *  - a reply is the request with the header rewritten: never larger (no
 *    amplification); a request must be well formed (magic, version, type
 *    request, its length field equal to the datagram's) or it is dropped
 *    and counted as malformed;
 *  - replies are rate-limited per peer address group (IPv4 address, IPv6
 *    /64) to QL_PROBE_SRV_PEER_RATE per second (bursts of
 *    QL_PROBE_SRV_PEER_BURST) and over all peers to QL_PROBE_SRV_RATE
 *    (bursts of QL_PROBE_SRV_BURST), and their bytes likewise to
 *    QL_PROBE_SRV_PEER_BYTE_RATE and QL_PROBE_SRV_BYTE_RATE (a reply is
 *    never larger than its request, but 64 KiB requests at the reply rate
 *    would reflect ~1 Gbit/s to a spoofed source); over a limit the
 *    request is dropped and counted. The per-peer table has QL_PROBE_SRV_PEERS slots (a new
 *    peer takes the slot of its hash): memory is fixed;
 *  - TCP probe connections count against the server's max_tests_per_address
 *    and max_tests (as probe sessions, apart from tests: a test and its
 *    probe from one address both fit the default of 2); a refused one is
 *    told why (the state ACCESS_DENIED and a "qoslab-refused: " text, as a
 *    refused test is). A session is closed when it sends no first request
 *    within 2 s of its greeting, or no request for the server's
 *    idle_timeout_s, and may be evicted for a newcomer (see
 *    ql_probe_srv_tcp_admit); a malformed request closes it.
 */
#ifndef QL_PROBE_SERVER_H
#define QL_PROBE_SERVER_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define QL_PROBE_SRV_PEER_RATE 2000
#define QL_PROBE_SRV_PEER_BURST 200
#define QL_PROBE_SRV_RATE 20000
#define QL_PROBE_SRV_BURST 2000
#define QL_PROBE_SRV_PEERS 1024
/* A TCP probe session must send its first request this soon after its
 * greeting (a probe sends it at once); past it, and idle this long between
 * requests, it may be evicted for a newcomer. */
#define QL_PROBE_SRV_FIRST_REQUEST_NS (2 * 1000000000LL)
#define QL_PROBE_SRV_EVICT_IDLE_NS (2 * 1000000000LL)
/* Reply bytes: 2 MB/s per peer group (16 Mbit/s, bursts of 256 KiB: four
 * of the largest replies) and 8 MB/s in all (64 Mbit/s, bursts of 1 MiB),
 * so a spoofed source is reflected no more than that (the default probe
 * sends 6.4 kB/s). */
#define QL_PROBE_SRV_PEER_BYTE_RATE 2000000LL
#define QL_PROBE_SRV_PEER_BYTE_BURST (256LL << 10)
#define QL_PROBE_SRV_BYTE_RATE 8000000LL
#define QL_PROBE_SRV_BYTE_BURST (1LL << 20)

typedef struct ql_probe_srv ql_probe_srv;

typedef struct ql_probe_srv_counters {
	uint64_t udp_replies, udp_malformed, udp_rate_limited;
	uint64_t udp_unknown;        /* neither a probe nor a connect message */
	uint64_t tcp_sessions, tcp_refused, tcp_replies, tcp_malformed, tcp_rate_limited;
	uint64_t tcp_idle_closed;
	uint64_t tcp_evicted;        /* closed to admit a newcomer */
	int tcp_open;                /* sessions open now */
} ql_probe_srv_counters;

/* A responder whose TCP sessions obey these limits (> 0). NULL: no memory. */
ql_probe_srv *ql_probe_srv_new(int max_sessions, int max_sessions_per_address);
void ql_probe_srv_free(ql_probe_srv *ps);

/*
 * Read one datagram from the server's UDP socket fd (non-blocking). A
 * probe request is answered (or dropped) here: returns 1. Anything else is
 * left for the caller in buf[*len] (at least 64 bytes of it are kept;
 * longer datagrams are no connect message) with its sender: returns 0.
 * Returns -1 when nothing was queued.
 */
int ql_probe_srv_udp(ql_probe_srv *ps, int fd, char *buf, size_t cap, size_t *len,
		     struct sockaddr_storage *peer, socklen_t *plen);

/*
 * Admit a TCP probe connection whose greeting was read (fd stays the
 * caller's): its session number (>= 0), or -1 with the refusal, naming
 * the limit and its value, in why[len] (for the peer and the log). Over
 * max_tests_per_address a session of the same address idle for
 * QL_PROBE_SRV_EVICT_IDLE_NS makes room; over max_tests one of an address
 * holding more than its fair share (max_tests over the addresses holding
 * sessions), else one idle that long: a working probe only when its
 * address holds more than its share, and never the newcomer refused while
 * such a session stays. An eviction is told in
 * note[nlen] ("" when none) for the log, with the evicted peer in
 * *victim.
 */
int ql_probe_srv_tcp_admit(ql_probe_srv *ps, int fd, const struct sockaddr_storage *peer,
			   char *why, size_t len, char *note, size_t nlen,
			   struct sockaddr_storage *victim);

/* Serve admitted session slot on fd until it ends (closed by the peer, no
 * first request within QL_PROBE_SRV_FIRST_REQUEST_NS, then idle for
 * idle_ns, malformed, evicted, or *stop). Does not close fd. */
void ql_probe_srv_tcp(ql_probe_srv *ps, int slot, int fd, int64_t idle_ns,
		      const _Atomic int *stop);

void ql_probe_srv_get_counters(ql_probe_srv *ps, ql_probe_srv_counters *out);

/* A server's responder counters (server.c). */
struct ql_server;
void ql_server_probe_counters(struct ql_server *s, ql_probe_srv_counters *out);

/* Turn on the kernel RX stamps on a server socket (the UDP port's). */
void ql_probe_srv_stamp_socket(int fd);

#endif
