/*
 * proto.h - the iperf3 control protocol and UDP data header (Lua-free).
 * Stands on err.h only.
 *
 * Wire facts (checked against Debian's iperf3 3.12): a 37-byte cookie (36
 * characters of a-z2-7 plus NUL) opens the control connection and every TCP
 * data connection; each control step is one signed byte; parameters and
 * results are JSON objects framed by a 4-byte big-endian length; UDP data
 * datagrams start with sec, usec (u32) and a sequence number (u32, or u64
 * with udp_counters_64bit), all big-endian, sequence starting at 1.
 *
 * Between two qoslab ends extra facts travel as extra JSON keys (a stock
 * iperf3 ignores unknown keys): "qoslab" (version) in the parameters, and a
 * "qoslab" object in the results holding per-stream receive counters,
 * buffer sizes, TCP_INFO summaries and the interval series of that side.
 */
#ifndef QL_PROTO_H
#define QL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "../err.h"

#define QL_COOKIE_SIZE 37

/* Control states (one signed byte each). */
enum {
	QL_ST_TEST_START = 1,
	QL_ST_TEST_RUNNING = 2,
	QL_ST_TEST_END = 4,
	QL_ST_PARAM_EXCHANGE = 9,
	QL_ST_CREATE_STREAMS = 10,
	QL_ST_SERVER_TERMINATE = 11,
	QL_ST_CLIENT_TERMINATE = 12,
	QL_ST_EXCHANGE_RESULTS = 13,
	QL_ST_DISPLAY_RESULTS = 14,
	QL_ST_IPERF_START = 15,
	QL_ST_IPERF_DONE = 16,
	/* qoslab extension, only sent to a peer that announced "qoslab":
	 * the server's limited senders have emitted everything. */
	QL_ST_QL_SENDER_DONE = 100,
	/* qoslab extension: the server's interval record (framed JSON
	 * follows), sent during the test so reverse-mode TCP_INFO and the
	 * server's receive counters reach the client live. */
	QL_ST_QL_INTERVAL = 101,
	/* qoslab extension, right after TEST_RUNNING: interval records will
	 * follow live, so the client holds each of its own for the server's
	 * record of the same grid slot. */
	QL_ST_QL_LIVE = 102,
	QL_ST_ACCESS_DENIED = -1,
	QL_ST_SERVER_ERROR = -2,
};

/* A server's reason for refusing or ending a test, after the state byte. */
#define QL_REFUSAL_PREFIX "qoslab-refused: "
#define QL_REFUSAL_MAX_BYTES 512

/* Limits of the hardened control path. */
#define QL_PARAMS_MAX_BYTES 8192        /* like iperf3's server cap */
#define QL_RESULTS_MAX_BYTES (4 << 20)  /* qoslab results carry intervals */
#define QL_INTERVAL_MAX_BYTES (1 << 20) /* one live interval record */

/* The UDP "connect" handshake: 4 bytes each way. iperf3 writes its host-
 * order integer 0x36373839 ("9876" on x86) and replies 0x39383736; older
 * versions used 123456789 / 987654321. Both byte orders are accepted.
 * A qoslab client appends its 37-byte cookie (41 bytes in all; iperf3
 * 3.12 servers read only the first 4) so a qoslab server serving several
 * tests from one address gives each stream to the right test. */
#define QL_UDP_CONNECT_MSG 0x36373839u
#define QL_UDP_CONNECT_REPLY 0x39383736u
#define QL_UDP_CONNECT_MSG_LEGACY 123456789u
#define QL_UDP_CONNECT_REPLY_LEGACY 987654321u
int ql_udp_connect_msg_ok(const void *buf, size_t len);
int ql_udp_connect_reply_ok(const void *buf, size_t len);

/* Fill out[0..35] with random a-z2-7 characters and out[36] = 0. */
void ql_cookie_make(char out[QL_COOKIE_SIZE]);
/* 1 if buf holds a well-formed cookie (36 allowed chars + NUL). */
int ql_cookie_valid(const char buf[QL_COOKIE_SIZE]);

/* UDP data header. */
#define QL_UDP_HDR32_BYTES 12
#define QL_UDP_HDR64_BYTES 16
#define QL_UDP_MIN_BYTES 16
#define QL_UDP_MAX_BYTES 65507

typedef struct ql_udp_hdr {
	uint32_t sec;
	uint32_t usec;
	uint64_t seq;
} ql_udp_hdr;

/*
 * Test tag of qoslab's own datagrams. Between two qoslab ends (the client
 * asks with "qoslab_udp_tag" in the parameters; a stock iperf3 ignores the
 * key and neither sends nor expects a tag) every datagram of at least
 * header + QL_UDP_TAG_BYTES carries, right after iperf3's sec/usec/seq
 * fields, 8 bytes derived from the test's cookie, so a receiver can tell a
 * datagram of this test from a stray one on the same 5-tuple (a previous
 * test's late datagrams, another sender reusing the port, a forgery that
 * does not know the cookie). The datagram length keeps its meaning: the
 * tag is part of the payload that length_bytes counts.
 */
#define QL_UDP_TAG_BYTES 8
/* The tag of a test: a 64-bit FNV-1a hash of the cookie's 36 characters. */
uint64_t ql_udp_test_tag(const char cookie[QL_COOKIE_SIZE]);
/* Header size of a test's datagrams: 12 or 16, plus the tag when tagged. */
size_t ql_udp_hdr_bytes(int seq64, int tagged);
/* Write / read the tag at buf + ql_udp_hdr_bytes(seq64, 0) (big-endian). */
void ql_udp_tag_put(void *buf, int seq64, uint64_t tag);
uint64_t ql_udp_tag_get(const void *buf, int seq64);

/* Encode into buf (at least 12 or 16 bytes). Returns bytes written. */
size_t ql_udp_hdr_encode(void *buf, const ql_udp_hdr *h, int seq64);
/* Decode; -EINVAL if len is too short for the header, else 0. A 32-bit
 * sequence number is taken as unsigned (iperf3 3.12 never sends < 1). */
int ql_udp_hdr_decode(const void *buf, size_t len, int seq64, ql_udp_hdr *h);

/* Test parameters as exchanged (PARAM_EXCHANGE). Absent keys keep the
 * defaults set by ql_params_init. */
/* The most entries of qoslab_tos_per_stream: one per stream of a
 * direction (QL_PARALLEL_MAX). */
#define QL_STREAM_TOS_MAX 128

typedef struct ql_params {
	int udp;                  /* 0 tcp, 1 udp */
	double omit_s;
	double time_s;            /* 0 when a byte/packet limit is set */
	uint64_t num_bytes;       /* byte limit, 0 = none */
	uint64_t blockcount;      /* block (packet) limit, 0 = none */
	int mss_bytes;            /* 0 = default */
	int nodelay;
	int parallel;
	int reverse;
	int bidir;
	int64_t window_bytes;     /* 0 = default; SO_SNDBUF and SO_RCVBUF */
	int len_bytes;            /* block / datagram length */
	uint64_t bandwidth_bps;   /* 0 = unlimited */
	uint64_t fqrate_bps;      /* SO_MAX_PACING_RATE, bits/s; 0 = none */
	int tos;                  /* -1 = unset */
	/* qoslab_tos_per_stream: the TOS of stream i of each direction is
	 * stream_tos[i % parallel]; nstream_tos is 0 (unset) or parallel,
	 * and then tos is unset */
	int nstream_tos;
	unsigned char stream_tos[QL_STREAM_TOS_MAX];
	char congestion[32];
	char title[128];
	int udp_counters_64bit;
	/* qoslab extensions (0 / "" when the peer is a stock iperf3) */
	char qoslab[32];          /* peer version, "" = stock iperf3 */
	int64_t sndbuf_bytes;     /* separate buffers, 0 = as window_bytes */
	int64_t rcvbuf_bytes;
	double udp_drain_s;       /* < 0 = default rule */
	int udp_gso;              /* GSO on senders, GRO on receivers */
	int skip_rx_copy;         /* TCP receivers read with MSG_TRUNC */
	int zerocopy;             /* TCP senders write with MSG_ZEROCOPY */
	/* the server's stream thread k runs on server_cpu[k % nserver_cpu]:
	 * iperf3's "server_affinity" (one CPU; a stock iperf3 server pins its
	 * whole process) or "qoslab_server_affinity" (a list) */
	int nserver_cpu;
	unsigned short server_cpu[QL_STREAM_TOS_MAX];
	uint64_t udp_limit_bytes; /* UDP byte limit (blockcount is rounded
	                             up; the last datagram is shortened) */
	int udp_tag;              /* datagrams carry the test tag (both
	                             ends qoslab, length >= header + tag) */
	double interval_s;
} ql_params;

void ql_params_init(ql_params *p);
/* Serialize to a NUL-terminated JSON text (malloc'd, caller frees). */
int ql_params_to_json(const ql_params *p, char **out, ql_err *e);
/* Parse text[0..len) (not necessarily NUL-terminated). Rejects non-objects,
 * wrong types and out-of-range values with -EINVAL (code "EPROTO"),
 * naming the key; "qoslab_tos_per_stream" must be an array of exactly
 * "parallel" integers in 0..255 and not come with "TOS". */
int ql_params_from_json(const char *text, size_t len, ql_params *p, ql_err *e);

/*
 * Framed I/O on a blocking or non-blocking socket, with an absolute
 * CLOCK_MONOTONIC deadline (deadline_ns <= 0: none) and a stop flag polled
 * every 50 ms (read atomically: other threads set it). Return 0, -ETIMEDOUT, -EINTR (stop), -ECONNRESET (peer
 * closed early) or another negative errno.
 */
int ql_io_read_full(int fd, void *buf, size_t n, int64_t deadline_ns,
		    const volatile int *stop);
/* Until fd is ready for ev (POLLIN/POLLOUT), under the same deadline and
 * stop flag: 0, -ETIMEDOUT, -EINTR (stop) or another negative errno. */
int ql_io_wait_fd(int fd, short ev, int64_t deadline_ns, const volatile int *stop);
int ql_io_write_full(int fd, const void *buf, size_t n, int64_t deadline_ns,
		     const volatile int *stop);
/* One state byte. */
int ql_io_write_state(int fd, int state, int64_t deadline_ns,
		      const volatile int *stop);
int ql_io_read_state(int fd, int *state, int64_t deadline_ns,
		     const volatile int *stop);
/* Length-prefixed JSON: reads a 4-byte big-endian length (> max_len is
 * -EMSGSIZE, 0 is -ENODATA: an empty message) then the text, returned
 * malloc'd and NUL-terminated. */
int ql_io_read_json(int fd, size_t max_len, char **out, size_t *outlen,
		    int64_t deadline_ns, const volatile int *stop);
int ql_io_write_json(int fd, const char *text, int64_t deadline_ns,
		     const volatile int *stop);
/* prefix_len bytes of prefix, then length-prefixed JSON, in one buffer:
 * a single write while the socket has room, so nothing the peer does
 * after the first byte arrives (a refusal and a reset) can fail a second
 * write. */
int ql_io_write_prefixed_json(int fd, const void *prefix, size_t prefix_len, const char *text,
			      int64_t deadline_ns, const volatile int *stop);

#endif
