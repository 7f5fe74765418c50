/*
 * engine.h - the traffic engine: an iperf3-compatible client and server for
 * TCP and UDP over IPv4/IPv6, one thread per stream (Lua-free). The public
 * face (client.c, server.c and test.c implement it); stands on record.h and
 * proto.h.
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
 * Pacing: one pacer (pace.h ql_pacer), an absolute schedule, for both
 * protocols. A UDP sender that fell behind by up to one report interval (at
 * most 100 ms of datagrams, at least 8) catches up, so every interval
 * reports the target rate; after a longer stall the schedule is re-based at
 * "now" with 250 us of datagrams and the missed slots are dropped, so a
 * long stall never becomes a burst (the windows after it carry the target,
 * within +10 % over 10 ms). TCP bitrate_bps pacing is the same schedule
 * over the stream's write blocks with a 10 ms slack (at least one block).
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
#include "record.h"

#define QL_PARALLEL_MAX 128
#define QL_DEFAULT_PORT 5201
#define QL_TCP_DEFAULT_LEN 131072
#define QL_UDP_DEFAULT_LEN 1460
#define QL_UDP_DEFAULT_BPS 1000000ULL
#define QL_DURATION_DEFAULT_S 10.0
#define QL_CONNECT_TIMEOUT_DEFAULT_S 10.0
/* Datagrams per sendmmsg call of a UDP sender (client: opts.udp_batch = 0;
 * a server's tests always), and the most a client may ask (UIO_MAXIOV). */
#define QL_UDP_BATCH_DEFAULT 32
#define QL_UDP_BATCH_MAX 1024

/* ------------------------------------------------------------- client -- */

/* A TOS byte per stream of a direction (opts.tos_per_stream): n = 0 is
 * not given, else n == parallel entries. */
typedef struct ql_tos_list {
	int n;
	unsigned char tos[QL_PARALLEL_MAX];
} ql_tos_list;

/* CPUs for the stream threads of one end (opts.cpu_affinity,
 * opts.server_cpu_affinity): stream thread k is pinned to cpu[k % n];
 * n = 0 is not given (the scheduler's choice). */
#define QL_CPU_ID_MAX 1023           /* CPU_SETSIZE - 1 */
typedef struct ql_cpu_list {
	int n;
	unsigned short cpu[QL_PARALLEL_MAX];
} ql_cpu_list;

typedef struct ql_client_opts {
	const char *host;            /* required: name or address */
	int port;                    /* 1..65535 (init: QL_DEFAULT_PORT) */
	int proto;                   /* QL_PROTO_* */
	int parallel;                /* 1..128 */
	double duration_s;           /* used when no byte/packet limit;
	                                0 = QL_DURATION_DEFAULT_S */
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
	/* stream i (0-based) of each direction gets tos[i]; both ends set
	 * it on the streams they send (a stock iperf3 server: none) */
	ql_tos_list tos_per_stream;
	int nodelay;                 /* -1 = not given (TCP: off) */
	uint64_t fq_rate_bps;
	const char *bind_address, *bind_device, *netns;
	double connect_timeout_s;    /* 0 = QL_CONNECT_TIMEOUT_DEFAULT_S */
	int udp_batch;               /* 1..1024, 0 = QL_UDP_BATCH_DEFAULT (32) */
	int udp_gso;                 /* -1 = not given (off) */
	/* TCP receivers read with MSG_TRUNC: the kernel counts and drops
	 * the data, nothing is copied to the engine (both qoslab ends) */
	int skip_rx_copy;            /* -1 = not given (off) */
	/* TCP senders write with MSG_ZEROCOPY (SO_ZEROCOPY), completions
	 * read from the error queue (both qoslab ends) */
	int zerocopy;                /* -1 = not given (off) */
	/* this end's stream threads, and the server's (sent as iperf3's
	 * "server_affinity" when it is one CPU, else as a qoslab list) */
	ql_cpu_list cpu_affinity, server_cpu_affinity;
	double udp_drain_s;          /* < 0 = default rule */
	const char *title;
} ql_client_opts;

void ql_client_opts_init(ql_client_opts *o);

typedef struct ql_test ql_test;

/*
 * Check the options (ql_client_opts_validate in options.h: usage errors
 * name the field, e.g. "opts.parallel: expected an integer in [1, 128],
 * got 129") and start the test in background threads. The control
 * handshake happens in the background: its failures show in ql_test_wait.
 */
int ql_client_start(const ql_client_opts *o, ql_test **out, ql_err *e);

/*
 * What this host can refuse of checked options before a test connects
 * anywhere (ql_client_start makes the same checks; a binding or command
 * line calls this first, before a latency probe or a delayed start):
 * cpu_affinity's CPUs must be ones this process may run on (-EINVAL, code
 * "EINVAL", *field = "opts.cpu_affinity"), netns must be one this thread
 * can enter (ENOENT, EPERM: *field = "opts.netns"), bind_device a device
 * of that namespace (-ENODEV, *field = "opts.bind_device").
 * Failures of the world, never usage errors: the same options may be
 * right on another host. field may be NULL.
 */
int ql_client_check_host(const ql_client_opts *o, const char **field, ql_err *e);

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

/* The test clock's zero as a CLOCK_REALTIME time in seconds (what the
 * result's start_time_unix_s will be): valid once ql_test_next_interval
 * returned a record (the record's queueing orders it after the write), 0
 * before the test started. For placing a latency probe's samples on the
 * test's grid while it runs. */
double ql_test_start_unix(const ql_test *t);

/* A test's sockets as the kernel set them up, before its result: what
 * iperf3 prints when a test starts. */
typedef struct ql_test_setup {
	char cookie[40];             /* as ql_result.cookie */
	int ctrl_mss_bytes;          /* as ql_result.ctrl_mss_bytes */
	char tcp_ca[QL_CA_NAME_MAX]; /* this end's congestion control ("" = UDP) */
	int nstreams;
	ql_stream_result *streams;   /* id, dir and sock of each; malloc'd */
} ql_test_setup;

/* Fill *out once the test's streams are set up (always so once
 * ql_test_next_interval returned a record); -EAGAIN before, -ENOMEM.
 * The caller frees out->streams. */
int ql_test_setup_get(ql_test *t, ql_test_setup *out);

/* End the test early (a result is still produced). Thread-safe. */
void ql_test_stop(ql_test *t);

/* End the test at once without the results exchange, for a path known to
 * be dead (e.g. an impairment link that failed): ql_test_wait then returns
 * -EINTR instead of waiting for a peer that cannot answer. Thread-safe. */
void ql_test_abort(ql_test *t);

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
/* idle_timeout_s when 0: how long an identified control connection (a
 * test's, a latency probe session's) may stay silent. */
#define QL_SRV_IDLE_TIMEOUT_DEFAULT_S 30.0
/* The cookie timeout: a new connection that has not sent its whole
 * 37-byte cookie (or a probe's greeting) this long after its accept is
 * closed, or after idle_timeout_s when that is shorter. Every client sends
 * the cookie as soon as it is connected (a qoslab client with its
 * parameters, in one write; a qoslab client itself gives up on the
 * control exchange after 10 s), so a longer silence is no client: it only
 * holds a slot of max_unidentified. */
#define QL_SRV_COOKIE_TIMEOUT_S 10.0

typedef struct ql_server_opts {
	int port;                    /* 0 = 5201; -1 = any free port */
	const char *bind_address, *netns;
	int one_off;
	int64_t window_bytes, sndbuf_bytes, rcvbuf_bytes;  /* defaults */
	double idle_timeout_s;       /* control silence limit, 0 = 30 s
	                                (QL_SRV_IDLE_TIMEOUT_DEFAULT_S) */
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

/* Check the options (ql_server_opts_validate in options.h), then listen. */
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
/* The cookie timeout of a server with these options (seconds):
 * QL_SRV_COOKIE_TIMEOUT_S, or idle_timeout_s when that is shorter. */
double ql_server_cookie_timeout_s(const ql_server_opts *o);
void ql_server_stop(ql_server *s);
void ql_server_free(ql_server *s);

#endif
