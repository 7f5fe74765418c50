/*
 * engine.h - the traffic engine: an iperf3-compatible client and server for
 * TCP and UDP over IPv4/IPv6, one thread per stream (Lua-free).
 *
 * Threads. A client test has one control thread (it speaks the control
 * protocol, enters the test's network namespace to create the sockets, and
 * doubles as the reporter: it wakes on an absolute CLOCK_MONOTONIC grid,
 * snapshots the per-stream counters and queues interval records) plus one
 * worker thread per stream. A server has one listener thread (in its
 * namespace), a short-lived thread per new connection that reads the
 * cookie, and per test the same control + worker threads as the client.
 * Workers only touch their own stream: counters are atomics, the UDP
 * receive books are guarded by the stream's mutex.
 *
 * Termination rules (documented policy):
 *  - duration: each end's planned end (its test clock + omit + time)
 *    stops its senders, also inside a write a slow path blocks; a TCP
 *    sender then waits for its send queue to be acknowledged, and TCP
 *    receivers read until end-of-file, idle for the drain time, or the
 *    tail's end: the drain time after the planned end, at least the grid
 *    end tick's slack (max(period / 20, 20 ms)), at most one interval (a
 *    receiver reads at least 20 ms after it learns the end). So a timed TCP
 *    test ends on its grid: no interval starts after the planned end, the
 *    last one ends there (end_s) and its seconds include the tail, and what
 *    a slow path still queues then was sent but is not counted as received
 *    (the sender's count exceeds the receiver's, as with iperf3).
 *  - byte / packet limit: "the sender emits exactly N" in both directions.
 *    Senders of a test share one budget; the last block of a stream is cut
 *    to what is left (UDP: the last datagram; a remainder shorter than the
 *    header is taken from the datagram before it). A receiving client ends when every stream saw EOF
 *    (TCP), when the qoslab server signals its senders are done (UDP), or
 *    when N bytes have arrived.
 *  - UDP receivers keep counting for udp_drain_s after the sender's end
 *    (default max(0.25 s, 2 x the control connection's smoothed RTT)), then
 *    close the books with the sender's final datagram count, so
 *    lost + unique == sent holds exactly.
 *
 * UDP pacing: an absolute schedule (stats.h ql_pacer). A sender that fell
 * behind by up to one report interval (at most 100 ms of datagrams, at
 * least 8) catches up, so every interval reports the target rate; after a
 * longer stall the schedule is re-based at "now" and the missed slots are
 * dropped, so a long stall never becomes a long burst. TCP bitrate_bps
 * pacing uses the same absolute schedule with a 10 ms slack.
 *
 * Socket buffers: setsockopt before connect() on the client and on the
 * server's UDP sockets; for TCP the server sets them on the accepted socket
 * before a byte of data flows (the listening socket is shared by concurrent
 * tests). Linux picks the receive window scale from the sysctl maxima
 * (tcp_rmem[2], rmem_max), not from the socket's buffer, so the window can
 * still grow to the requested size; granted sizes are read back with
 * getsockopt and reported with the sysctl that clamps them.
 */
#ifndef QL_ENGINE_H
#define QL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "proto.h"

enum { QL_PROTO_TCP = 0, QL_PROTO_UDP = 1 };
enum { QL_DIR_FORWARD = 0, QL_DIR_REVERSE = 1 };  /* client->server, back */
enum { QL_ROLE_SENDER = 0, QL_ROLE_RECEIVER = 1 };
enum { QL_SIDE_CLIENT = 0, QL_SIDE_SERVER = 1 };
enum { QL_PEER_IPERF3 = 0, QL_PEER_QOSLAB = 1 };

#define QL_PARALLEL_MAX 128
#define QL_DEFAULT_PORT 5201
#define QL_TCP_DEFAULT_LEN 131072
#define QL_UDP_DEFAULT_LEN 1460
#define QL_UDP_DEFAULT_BPS 1000000ULL

/* Socket buffer request and read-back (cases 011, 013). */
typedef struct ql_bufinfo {
	int present;
	int64_t requested_bytes;   /* 0 = not requested (kernel default) */
	int64_t granted_bytes;     /* getsockopt after setsockopt */
	int clamped;               /* granted < 2 x requested: sysctl cap */
	char sysctl[24];           /* "net.core.wmem_max" / "net.core.rmem_max" */
} ql_bufinfo;

/* Presence bits of ql_entry.valid. */
#define QL_E_PACKETS   (1u << 0)   /* packets */
#define QL_E_WRITES    (1u << 1)
#define QL_E_RETRANS   (1u << 2)
#define QL_E_RTT       (1u << 3)   /* rtt_us, rttvar_us */
#define QL_E_CWND      (1u << 4)
#define QL_E_PACING    (1u << 5)
#define QL_E_DELIVERY  (1u << 6)
#define QL_E_UDPRX     (1u << 7)   /* unique/lost/dup/ooo/late */
#define QL_E_JITTER    (1u << 8)
#define QL_E_RTTSUM    (1u << 9)   /* min/max/mean rtt, max cwnd (totals) */

/*
 * One side's numbers for one stream (or a sum): in an interval the deltas
 * over the interval, in a result the totals after omit.
 */
typedef struct ql_entry {
	int id;                     /* iperf3 stream id; 0 for sums */
	int dir;                    /* QL_DIR_* */
	int role;                   /* QL_ROLE_* */
	int side;                   /* QL_SIDE_* that measured it */
	unsigned valid;             /* QL_E_* */
	uint64_t bytes;             /* sender: written; receiver: unique payload */
	/* an interval's span; in totals, from the warm-up's end until the
	 * sender's last write returned / the receiver's last byte was read */
	double seconds;
	double bits_per_second;
	uint64_t packets;           /* sender: datagrams sent; receiver: raw */
	uint64_t writes;
	uint64_t retransmits;
	uint32_t rtt_us, rttvar_us;
	uint64_t snd_cwnd_bytes;
	uint64_t pacing_rate_bps, delivery_rate_bps;
	uint64_t unique_packets, lost_packets, duplicate_packets;
	uint64_t out_of_order_packets, late_packets;
	/* receiver: datagrams that could not belong to the test (shorter
	 * than the header, a wrong test tag, a sequence number beyond what
	 * the sender can have sent): in none of the other counters */
	uint64_t invalid_packets;
	double lost_pct;
	double jitter_ms;
	uint32_t min_rtt_us, max_rtt_us, mean_rtt_us;
	uint64_t max_snd_cwnd_bytes;
	ql_bufinfo buf;             /* sender: SO_SNDBUF, receiver: SO_RCVBUF */
} ql_entry;

typedef struct ql_interval {
	double start_s, end_s, seconds;   /* since the test start */
	int omitted;
	int nentries;
	ql_entry *entries;                /* per stream and role */
	/* sums per direction and role; valid when sum_present[d][r] */
	int sum_present[2][2];
	ql_entry sum[2][2];
	/* live records only: the peer sends a live series (a qoslab server),
	 * and its entries for these grid slots had not come when the record
	 * was released (they are in the final result) */
	int peer_live, peer_missing;
} ql_interval;

typedef struct ql_stream_result {
	int id, dir;
	ql_entry sender, receiver;   /* .side says who measured; absent = id 0 */
	int has_sender, has_receiver;
} ql_stream_result;

typedef struct ql_cpu_result {
	int present;
	double total_pct, user_pct, system_pct, busiest_thread_pct;
	int has_busiest;
} ql_cpu_result;

typedef struct ql_result {
	int proto, reverse, bidir, parallel;
	char host[256];
	int port;
	int local_role;              /* QL_SIDE_* */
	double start_time_unix_s, duration_s, omit_s;
	/* [dir][role] totals; present flags */
	int tot_present[2][2];
	ql_entry tot[2][2];
	int nstreams;
	ql_stream_result *streams;
	int nintervals;
	ql_interval *intervals;
	ql_cpu_result cpu_client, cpu_server;
	int cpu_limited;
	int nwarnings;
	char **warnings;
	int peer;                    /* QL_PEER_* */
	char title[128];
	/* a server's result: its test number (as in ql_server_started) and
	 * the peer's control connection port; 0 on a client */
	uint64_t server_test;
	int peer_port;
} ql_result;

void ql_result_free(ql_result *r);
void ql_interval_clear(ql_interval *iv);

/* ------------------------------------------------------------- client -- */

typedef struct ql_client_opts {
	const char *host;            /* required: name or address */
	int port;                    /* 0 = 5201 */
	int proto;                   /* QL_PROTO_* */
	int parallel;                /* 1..128 */
	double duration_s;           /* used when no byte/packet limit */
	uint64_t bytes;              /* total byte limit over all streams, 0 = none */
	uint64_t packets;            /* UDP datagram limit, 0 = none */
	int reverse, bidir;
	double omit_s;
	double interval_s;           /* >= 0.1 */
	int64_t window_bytes, sndbuf_bytes, rcvbuf_bytes;   /* 0 = default */
	uint64_t bitrate_bps;        /* UDP: 0 = default 1 Mbit/s unless
	                                bitrate_set (then 0 = unlimited) */
	int bitrate_set;
	int length_bytes;            /* 0 = default */
	const char *congestion;
	int mss_bytes;
	int tos;                     /* -1 = unset */
	int nodelay;
	uint64_t fq_rate_bps;
	const char *bind_address, *bind_device, *netns;
	double connect_timeout_s;    /* 0 = 10 s */
	int udp_batch;               /* 1..1024, 0 = 64 */
	int udp_gso;
	double udp_drain_s;          /* < 0 = default rule */
	const char *title;
} ql_client_opts;

void ql_client_opts_init(ql_client_opts *o);

typedef struct ql_test ql_test;

/*
 * Check the options (usage errors name the field, e.g. "opts.parallel:
 * expected 1..128") and start the test in background threads. The control
 * handshake happens in the background: its failures show in ql_test_wait.
 */
int ql_client_start(const ql_client_opts *o, ql_test **out, ql_err *e);

/*
 * Next interval record (caller frees with ql_interval_clear + free): what
 * this end measured in one stretch of the grid plus a qoslab server's
 * entries for the same grid slots. A qoslab server sends its records live
 * (QL_ST_QL_LIVE); each local record waits for the server's record of its
 * slots, at most hold (300 ms + 2 x the control connection's RTT, <= 3 s)
 * after its end, then goes with peer_missing set; a server record that
 * comes later is only in the final result. The records after the last
 * tick go at the end with the server's final intervals. A stock iperf3
 * server sends nothing live: records go at once with the local entries.
 * Returns 1 with *out set, 0 on timeout (timeout_ns < 0 waits forever),
 * -ENODATA when the test is over and every interval was delivered.
 */
int ql_test_next_interval(ql_test *t, int64_t timeout_ns, ql_interval **out);

/* Wait for the end; *res stays owned by the test (valid until free). */
int ql_test_wait(ql_test *t, const ql_result **res, ql_err *e);

/* End the test early (a result is still produced). Thread-safe. */
void ql_test_stop(ql_test *t);

/* Stop, join every thread, free. NULL is fine. */
void ql_test_free(ql_test *t);

/* ------------------------------------------------------------- server -- */

/*
 * Limits of a server shared by untrusted peers. A connection is
 * "unidentified" from its accept until it is a data connection of a test
 * (its cookie matched) or a control connection whose parameters were
 * accepted. Per peer address (IPv4-mapped IPv6 counts as IPv4, IPv6 per
 * /64) a server holds at most max_unidentified_per_address unidentified
 * connections (plus the data connections its tests in CREATE_STREAMS still
 * expect),
 * max_tests_per_address running tests and max_streams_per_address data
 * streams of them (bidir counts both ways); over all peers at most
 * max_unidentified unidentified connections and max_tests tests. A new
 * unidentified connection over either unidentified limit is kept and an
 * unidentified connection of that address (at the global cap: of the
 * address most over its allowance) is closed instead, the one silent
 * longest first, so a flood only ever pushes out its own connections; tests over a limit are refused with ACCESS_DENIED and a
 * qoslab client is told which limit and its value. Every action is in
 * ql_server_problems, naming the peer.
 *
 * Per test: its user-space buffers (per stream the write or read buffer:
 * TCP len or 128 KiB, UDP batch x len) plus the socket buffer of its role
 * that it requests (as the kernel would grant it: 2 x min(request,
 * net.core.wmem_max / rmem_max)) plus the interval records kept for its
 * result (sizeof(ql_interval) + streams x sizeof(ql_entry) each; a timed
 * test's ceil((time + omit) / interval) + 2 counted at admission, a limited
 * test's as they come: it is ended when they reach the budget) must fit
 * test_buffer_bytes (the default
 * holds 128 streams of 128 KiB writes, or 32 streams with 1 MiB windows
 * where the sysctls allow them); time + omit at most
 * max_duration_s (else SERVER_ERROR 37, iperf3's "requested duration
 * exceeds the server's maximum"), and a test still running at
 * max_duration_s + idle_timeout_s (a byte-limited one too) is ended.
 * A running test whose streams move no byte (TCP senders: no byte
 * acknowledged) for the data-idle time is ended; so is a test whose data
 * connections do not arrive (the wait restarts at each one). The data-idle
 * time is data_idle_s, or when 0: max(10 s, 64 x the control connection's
 * RTO (max(200 ms, srtt + 4 rttvar): six back-to-back RTO backoffs of a
 * lossy path), 3 x the gap between two paced writes of a test (<= 120 s)).
 * An explicit data_idle_s drops the RTO term and keeps the pacing term.
 */
#define QL_SRV_MAX_TESTS_DEFAULT 64
#define QL_SRV_TESTS_PER_ADDR_DEFAULT 2
#define QL_SRV_STREAMS_PER_ADDR_DEFAULT 128
#define QL_SRV_UNIDENTIFIED_DEFAULT 256
#define QL_SRV_UNIDENTIFIED_PER_ADDR_DEFAULT 8
#define QL_SRV_MAX_DURATION_DEFAULT_S 3600.0
#define QL_SRV_TEST_BUFFER_DEFAULT_BYTES ((int64_t)128 << 20)
#define QL_SRV_DATA_IDLE_FLOOR_S 10.0

typedef struct ql_server_opts {
	int port;                    /* 0 = 5201; -1 = any free port */
	const char *bind_address, *netns;
	int one_off;
	int64_t window_bytes, sndbuf_bytes, rcvbuf_bytes;  /* defaults */
	double idle_timeout_s;       /* control silence limit, 0 = 30 s */
	int max_tests;               /* concurrent tests, 0 = 64 */
	int max_tests_per_address;   /* 0 = 2 */
	int max_streams_per_address; /* 0 = 128 */
	int max_unidentified;        /* 0 = 256 */
	int max_unidentified_per_address;   /* 0 = 8 */
	double data_idle_s;          /* 0 = the rule above */
	double max_duration_s;       /* time + omit, 0 = 3600 s */
	int64_t test_buffer_bytes;   /* per-test buffer budget, 0 = 128 MiB */
	int keep_results;            /* finished results kept, 0..100000 */
} ql_server_opts;

/* A server keeps the results of its last QL_KEEP_RESULTS_DEFAULT finished
 * tests (keep_results); older ones are freed, so a server running for days
 * holds a bounded amount of memory. */
#define QL_KEEP_RESULTS_DEFAULT 100
#define QL_KEEP_RESULTS_MAX 100000

void ql_server_opts_init(ql_server_opts *o);

typedef struct ql_server ql_server;

int ql_server_start(const ql_server_opts *o, ql_server **out, ql_err *e);
int ql_server_port(const ql_server *s);
int ql_server_tests_running(ql_server *s);
/* 1 when the server has stopped (one_off test done, or ql_server_stop). */
int ql_server_done(ql_server *s);
/* The kept results, oldest first (at most keep_results; the last one is
 * test number *total, counting every test finished since the start).
 * *out is a malloc'd array holding a reference to each result: they stay
 * valid, even after the server evicts them or is freed, until
 * ql_server_results_release(*out, *n). total may be NULL. */
int ql_server_results(ql_server *s, const ql_result ***out, int *n, uint64_t *total);
void ql_server_results_release(const ql_result **rs, int n);
/* Tests finished (results published) since the start, kept or not. */
uint64_t ql_server_finished(ql_server *s);
/* Number of control connections rejected (bad cookie, bad JSON, ...). */
uint64_t ql_server_rejected(ql_server *s);
/* Rejected connections (returned), tests that started and failed
 * (*failed), and the text of the last of either ("" when none) in
 * last[len], e.g. "test failed from 10.0.0.2: peer closed the control
 * connection during the test". For a server's log. */
uint64_t ql_server_problems(ql_server *s, uint64_t *failed, char *last, size_t len);
/* The server's problem log: its last QL_SRV_PROBLEMS_KEPT problems (each
 * rejection, eviction, refusal and failed test), oldest first. seq is the
 * problem's number since the start (1, 2, ...), test the server's test
 * number (as in ql_server_started's "test N"; 0 when the connection never
 * became a test), host and port the peer's, text the line that names it. */
#define QL_SRV_PROBLEMS_KEPT 256
typedef struct ql_srv_problem {
	uint64_t seq, test;
	double time_unix_s;
	char host[64];
	int port;
	char text[QL_ERR_MSG_MAX + 320];
} ql_srv_problem;
/* Copies those with seq > since into out[max] (oldest first) and returns
 * how many; *total = problems since the start (so total - the last copied
 * seq are newer ones that did not fit, and problems below
 * total - QL_SRV_PROBLEMS_KEPT + 1 are no longer kept). */
int ql_server_problem_log(ql_server *s, uint64_t since, ql_srv_problem *out, int max,
			  uint64_t *total);
/* Tests whose parameters the server accepted (returned) and a line on the
 * last of them in last[len] ("" when none), e.g. "test from 10.0.0.2: UDP,
 * 4 streams, reverse (server sends), 10 s at 100 Mbit/s each, qoslab
 * client". For a server's log. */
uint64_t ql_server_started(ql_server *s, char *last, size_t len);
/* The options in effect (defaults filled in; data_idle_s 0 = the rule). */
void ql_server_limits(const ql_server *s, ql_server_opts *out);
void ql_server_stop(ql_server *s);
void ql_server_free(ql_server *s);

/* ------------------------------------------- internals exposed for tests */

/* A peer's results JSON (iperf3 keys + optional "qoslab" extras). */
typedef struct ql_peer_stream {
	int id;
	uint64_t bytes;
	int64_t retransmits;          /* -1 = not reported */
	double jitter_s;
	int64_t errors;
	uint64_t packets;
	/* iperf3's convention for UDP: packets counts the whole test (the
	 * warm-up included; a receiver: every sequence number ruled); the
	 * warm-up's share is omitted_packets (iperf3 3.12 sends none: its
	 * sender's bytes are the measured ones instead) */
	uint64_t omitted_packets;
	int64_t omitted_errors;
	int has_omitted;              /* omitted_packets was present */
	double start_time_s, end_time_s;
} ql_peer_stream;

typedef struct ql_peer_results {
	double cpu_total_pct, cpu_user_pct, cpu_system_pct;
	int sender_has_retransmits;
	char congestion_used[32];
	int nstreams;
	ql_peer_stream *streams;
	int qoslab;                   /* extras present */
	double duration_s;
	int has_busiest;
	double busiest_thread_pct;
	int cpus;                     /* that host's online CPUs (0 = unknown) */
	char boot_id[40];             /* that host's boot id ("" = unknown):
	                                 equal ids = both ends share the CPUs */
	int nentries;                 /* per-stream totals of that side */
	ql_entry *entries;
	int nintervals;
	ql_interval *intervals;
	int nwarnings;
	char **warnings;
} ql_peer_results;

/* Parse a results object; hostile input gives -EPROTO (code "EPROTO")
 * naming the key, never a crash. Caps: 1024 streams, 100000 intervals. */
int ql_results_parse(const char *text, size_t len, ql_peer_results *pr,
		     ql_err *e);

/* What one test's results may hold: derived from its own parameters by
 * the engine (ql_results_caps_for), so a peer cannot make the parser
 * allocate more than the test could honestly report. */
typedef struct ql_results_caps {
	int streams;                  /* "streams" elements */
	int entries;                  /* "totals" and per-interval "entries" */
	int intervals;                /* "intervals" elements */
	size_t entries_total;         /* entries in all intervals and totals */
	size_t nodes;                 /* JSON values in the message */
	size_t bytes;                 /* message length */
	double time_s;                /* a stream's start/end_time at most */
} ql_results_caps;

/* A peer's counters are integers up to 2^53: what a JSON number (a double)
 * holds exactly, and far inside a signed 64-bit Lua integer, so sums of
 * them stay positive. A peer's stream times lie within omit + span +
 * this slack (the two ends start their clocks one trip apart, and a path
 * may delay by seconds). */
#define QL_COUNT_MAX ((uint64_t)1 << 53)
#define QL_RESULTS_TIME_SLACK_S 5.0

/* Streams n (parallel x (bidir ? 2 : 1)), the interval period and the
 * time the test ran (span, omit included) give: streams <= n, entries <=
 * 2 n, intervals <= ceil(omit / period) + ceil(span / period) + 4, bytes
 * <= min(4 MiB, 48 KiB + 512 n + (intervals + 1) x (128 + 2 n x 1 KiB)),
 * nodes (JSON values) <= min(64 + 16 n + 64 + (intervals + 1) x (8 + 2 n x
 * 40), bytes / 16 + 1024), entries in all <= min((intervals + 2) x 2 n,
 * bytes / 64) (an encoded entry has 7 keys at least), stream times <=
 * omit + span + QL_RESULTS_TIME_SLACK_S. Parsing a peer's
 * results then takes at most bytes (the text) + nodes x 112 B (cJSON: 64 B
 * + malloc overhead + key) + entries x sizeof(ql_entry) (240 B): for any
 * test under 4 + 28.1 + 15 = 47.1 MiB (the 4 MiB cap), for a 1 s
 * single-stream test (63.4 KiB of text, 760 values, 16 entries) under
 * 150.3 KiB. */
void ql_results_caps_for(int nstreams, double period_s, double omit_s, double span_s,
			 ql_results_caps *c);

/* ql_results_parse within caps (NULL = the fixed caps only): a message with
 * more values than caps->nodes is refused before cJSON builds a tree. */
int ql_results_parse_capped(const char *text, size_t len, const ql_results_caps *caps,
			    ql_peer_results *pr, ql_err *e);
void ql_peer_results_free(ql_peer_results *pr);

/* Interval grid: tick k of a test that started at start_ns, with omit
 * boundary omit_ns (0 = none) and period period_ns. Ticks fall at
 * start + j * period inside the omit period, at start + omit, then at
 * start + omit + j * period. */
int64_t ql_grid_tick_ns(int64_t start_ns, int64_t omit_ns, int64_t period_ns,
			uint64_t k);

/* Linux doubles SO_SNDBUF/SO_RCVBUF requests up to 2 x the sysctl maximum.
 * Fill b from requested and the getsockopt value; max_bytes is the sysctl
 * value (<= 0: unknown). */
void ql_bufinfo_fill(ql_bufinfo *b, int64_t requested, int64_t granted,
		     int64_t max_bytes, const char *sysctl);

#endif
