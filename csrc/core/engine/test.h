/*
 * test.h - one test's state (ql_test, its streams ql_stream) and the calls of
 * its lifetime, shared by the engine's files. Stands on record.h, results_json.h,
 * stats.h, ctl_reader.h and proto.h.
 */
#ifndef QL_TEST_H
#define QL_TEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ctl_reader.h"
#include "engine.h"
#include "proto.h"
#include "record.h"
#include "results_json.h"
#include "stats.h"

#define MS (1000000LL)
#define CTL_TIMEOUT_NS (10 * QL_NS_PER_S)
#define TCP_DRAIN_CAP_NS (3 * QL_NS_PER_S)
#define TCP_RX_BYTES (128 * 1024)
#define RX_BATCH 64

enum {
	T_NEW = 0, T_ACCEPTING, T_RUNNING, T_ENDING, T_DONE
};

typedef struct ql_stream {
	struct ql_test *t;
	int idx, id, dir, sender;
	int fd;
	pthread_t th;
	int th_started;
	_Atomic uint64_t bytes, packets, writes;
	_Atomic int done;                /* sender finished / receiver EOF */
	_Atomic int64_t last_rx_ns;
	/* sender: when its last write returned (its span's end) and when it
	 * finished (data acknowledged); set by the worker before `done` */
	int64_t last_tx_ns, done_ns;
	int64_t run_ns;                  /* worker: when it started */
	uint64_t planned_slots, skipped_slots;    /* timed, paced UDP sender */
	uint64_t warm_debt;              /* warm-up slots still to be sent */
	pthread_mutex_t mu;              /* guards rx */
	ql_udp_rx rx;
	int rx_init;
	int64_t cpu_user_ns, cpu_sys_ns;
	ql_bufinfo sndbuf, rcvbuf;
	ql_sock_info sock;               /* as set up (sockets_read) */
	/* reporter state (control thread only) */
	uint64_t snap_bytes, snap_packets, snap_writes;
	ql_tcp_summary tsum;             /* TCP sender: from connect on */
	int tsum_init;
	uint64_t sent_final;             /* UDP: peer's sent count */
	int err;                         /* worker's errno, 0 = fine */
	ql_zc_counts zc;                 /* TCP sender with zerocopy; set by
	                                    the worker before `done` */
} ql_stream;

struct ql_test {
	int side;
	ql_params prm;
	int proto, peer;
	char host[256];
	int port;
	char netns[128], bind_address[128], bind_device[32];
	int udp_batch, udp_gso;
	ql_cpu_list affinity;             /* this end's stream threads */
	int64_t connect_timeout_ns;
	int64_t drain_ns;
	uint64_t limit_bytes, limit_packets;   /* per direction budgets */
	/* UDP: the datagrams that take a limited budget's last two units are
	 * udp_unit_bytes[1] and [2] long (0 = a whole datagram), so a byte
	 * limit is met exactly; the test tag of qoslab-to-qoslab datagrams (udp_tag set) */
	uint32_t udp_unit_bytes[3];       /* [1], [2]; 0 = whole */
	int udp_tag;
	uint64_t udp_tag_val;
	_Atomic int peer_tags;            /* client: the server tags (announced) */
	_Atomic int64_t budget[2];
	int limited;
	int ctl_fd;
	/* client: the control connection's messages, read without blocking
	 * while the grid ticks (a partial one is kept between loop turns) */
	ql_ctl_reader ctl_rd;
	char cookie[QL_COOKIE_SIZE];
	/* read once the streams are set up (sockets_read): the control
	 * connection's MSS and the congestion control of the first TCP
	 * stream (0 / "" = unknown, UDP) */
	int ctrl_mss_bytes;
	char tcp_ca[QL_CA_NAME_MAX];
	_Atomic int sockets_known;
	struct sockaddr_storage peer_addr;
	socklen_t peer_len;
	int nstreams;
	ql_stream *st;
	pthread_t ctl_th;
	int ctl_started;
	_Atomic int stop_req, send_stop, recv_stop;
	/* ql_test_abort: no results exchange (the path is dead) */
	_Atomic int abort_req;
	/* The test failed (the peer ended it, the control connection broke):
	 * senders drop what is left and wait for no acknowledgement. */
	_Atomic int abort_io;
	/* server: a stock iperf3 client sent TEST_END, after which it reads
	 * no more: UDP senders send nothing further (not even slots due) */
	_Atomic int peer_done;
	int state;                        /* T_* (server: under srv->mu) */
	int64_t start_ns, omit_ns, last_snap_ns, end_ns, send_end_ns;
	double start_unix;
	uint64_t tick_k;
	int64_t period_ns;
	int64_t ctl_cpu_user0, ctl_cpu_sys0;
	/* intervals and the live queue */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ql_interval *iv;
	int niv, civ, npub, nread;
	/* live queue handed to next_interval (client only): local intervals
	 * with the peer's entries of the same grid slots, deep copies.
	 * iv[nrel..npub) are ticked but held for the peer's entries. */
	ql_interval *live;
	int nlive, clive, nrel;
	ql_interval *rlive;               /* peer intervals not yet placed */
	int nrlive, crlive, nrlive_total;
	int peer_live;                    /* the server announced QL_ST_QL_LIVE */
	int64_t peer_upto;                /* peer's live series covers slots < this */
	int64_t hold_ns;                  /* longest wait for the peer's entries */
	int nshipped;                     /* server: intervals sent live */
	int finished;
	int rc;
	ql_err err;
	ql_result res;
	char **warn;
	int nwarn;
	ql_peer_results peer_res;
	/* server side */
	struct ql_server *srv;
	struct ql_test *next;
	int published;
	int srv_told;                     /* server: the peer was told why its test ends */
	int *pending_fds;
	uint64_t *pending_seq;            /* accept order of pending_fds */
	int npending;
	struct conn_arg *unid;            /* its control connection while unidentified */
	int admitted;                     /* counted in srv->running (under srv->mu) */
	int admitted_streams;             /* its streams, for the per-address limit */
	int64_t idle_ns;                  /* data-idle limit */
	uint64_t srv_no;                  /* the server's test number, from 1 */
	int64_t buf_base;                 /* its buffers but interval records */
	int64_t rec_bytes;                /* one interval record it keeps */
};

int64_t realtime_ns(void);
void thread_cpu(int64_t *user_ns, int64_t *sys_ns);
void add_warning(ql_test *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int64_t read_sysctl(const char *path);
void copy_str(char *dst, size_t cap, const char *src);
uint64_t reserve(_Atomic int64_t *budget, uint64_t want, int64_t *after);
void udp_setup(ql_test *t);
void fill_payload(char *buf, size_t n);
int wait_io(int fd, short ev, int ms);
int64_t planned_end_ns(const ql_test *t);
int64_t end_slack_ns(const ql_test *t);
int64_t tcp_tail_ns(const ql_test *t);
ql_test *test_new(int side);
int streams_alloc(ql_test *t, ql_err *e);
void streams_join(ql_test *t, int senders, int receivers);
void streams_abort(ql_test *t);
void test_close_sockets(ql_test *t);
void test_release(ql_test *t);
int local_has(ql_test *t, int sender);
int all_done(ql_test *t, int sender);
uint64_t received_bytes(ql_test *t, int dir);
uint64_t received_packets(ql_test *t, int dir);
void default_drain(ql_test *t);
void live_hold(ql_test *t);
int fail_io(ql_test *t, int rc, const char *what);

/* Add to a counter whose only writer is the calling stream thread: a
 * relaxed load and store, no locked read-modify-write on the hot path;
 * readers still see whole values (the reporter's atomic loads). */
static inline void ctr_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

#endif
