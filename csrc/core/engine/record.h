/*
 * record.h - the engine's records (Lua-free): one side's numbers for a stream
 * (ql_entry), interval and result records, their QL_E_* presence bits and
 * enums, and the pure arithmetic over them. Stands on nothing of the engine.
 */
#ifndef QL_RECORD_H
#define QL_RECORD_H

#include <stddef.h>
#include <stdint.h>

enum { QL_PROTO_TCP = 0, QL_PROTO_UDP = 1 };
enum { QL_DIR_FORWARD = 0, QL_DIR_REVERSE = 1 };  /* client->server, back */
enum { QL_ROLE_SENDER = 0, QL_ROLE_RECEIVER = 1 };
enum { QL_SIDE_CLIENT = 0, QL_SIDE_SERVER = 1 };
enum { QL_PEER_IPERF3 = 0, QL_PEER_QOSLAB = 1 };

/* Socket buffer request and read-back. */
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
#define QL_E_JITMEAN   (1u << 10)  /* jitter_pairs, jitter_abs_sum_ms (a
                                      qoslab receiver's books) */
#define QL_E_UDPPATH   (1u << 11)  /* a ql_udp_path beside the entry (a
                                      closed receiver's totals only) */
#define QL_E_SNDWND    (1u << 12)  /* snd_wnd_bytes (TCP_INFO, Linux >= 5.4) */
#define QL_E_PMTU      (1u << 13)  /* pmtu_bytes */
#define QL_E_MAXWND    (1u << 14)  /* max_snd_wnd_bytes (totals) */

/* Shapes of the path histograms. Loss bursts: bucket k (0-based) holds
 * bursts of k + 1 lost datagrams for k < 16, the last one 17 and more.
 * Gaps and extents: bucket k holds 2^k .. 2^(k+1) - 1, the last one
 * everything from 2^(n-1) on (gaps: >= 32768; extents: >= 4096, which is
 * also where extents are capped, see udp_path.h). */
#define QL_BURST_BUCKETS  17
#define QL_GAP_BUCKETS    16
#define QL_EXTENT_BUCKETS 13

/*
 * The path statistics of one receiving stream over the measured test
 * (udp_path.h says how they are booked): loss runs (bursts of consecutive
 * sequence numbers ruled lost, gaps of consecutive received ones between
 * two bursts) and RFC 4737 reordering extents. Counts are datagrams. Only
 * totals have them, so they live beside an entry (ql_stream_result.path,
 * ql_result.tot_path, ql_peer_results.paths), not in it: interval records
 * stay small.
 */
typedef struct ql_udp_path {
	uint64_t bursts;                       /* loss runs */
	uint64_t burst_packets;                /* Σ their lengths */
	uint64_t burst_hist[QL_BURST_BUCKETS];
	uint64_t gaps;                         /* received runs between bursts */
	uint64_t gap_packets;                  /* Σ their lengths */
	uint64_t gap_hist[QL_GAP_BUCKETS];
	uint64_t extent_packets;               /* reordered datagrams measured */
	uint64_t extent_sum;                   /* Σ extents (capped) */
	uint64_t extent_max;
	uint64_t extent_hist[QL_EXTENT_BUCKETS];
} ql_udp_path;

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
	/* the peer's advertised receive window, the path MTU of the sending
	 * socket (TCP_INFO's 32-bit fields; beside the RTTs, no padding) */
	uint32_t snd_wnd_bytes, pmtu_bytes;
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
	/* mean |D| over pairs of consecutive sequence numbers (udp_path.h):
	 * the pairs and the sum of their |D| (ql_jitter_mean_abs_ms) */
	uint64_t jitter_pairs;
	double jitter_abs_sum_ms;
	uint32_t min_rtt_us, max_rtt_us, mean_rtt_us;
	uint32_t max_snd_wnd_bytes;  /* fills the padding before the next */
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

/* A data socket as the kernel set it up, read on the end that holds it:
 * getsockname, getpeername, and SO_SNDBUF / SO_RCVBUF as granted when its
 * options were set (before connect on a client; autotuning grows them
 * later). present = 0 when the socket never connected. */
#define QL_HOST_MAX 64
typedef struct ql_sock_info {
	int present;
	char local_host[QL_HOST_MAX], remote_host[QL_HOST_MAX];
	int local_port, remote_port;
	int64_t sndbuf_bytes, rcvbuf_bytes;
} ql_sock_info;

/* A TCP congestion control name as the kernel spells it (TCP_CA_NAME_MAX). */
#define QL_CA_NAME_MAX 16

/* A TCP sender's MSG_ZEROCOPY books (zerocopy.h): sends made with the
 * flag, completions the kernel reported, and of those how many it copied
 * after all (loopback and veth always do). */
typedef struct ql_zc_counts {
	int present;                 /* the stream was sent with zerocopy */
	uint64_t sends, completed, copied;
} ql_zc_counts;

typedef struct ql_stream_result {
	int id, dir;
	ql_sock_info sock;           /* this end's socket of the stream */
	ql_entry sender, receiver;   /* .side says who measured; absent = id 0 */
	int has_sender, has_receiver;
	ql_udp_path path;            /* the receiver's, with QL_E_UDPPATH */
	int tos;                     /* the TOS its sender set, -1 = none or unknown */
	ql_zc_counts zc;             /* this end sent it with zerocopy */
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
	/* [dir] the receivers' path sums, with tot[dir][receiver]'s QL_E_UDPPATH */
	ql_udp_path tot_path[2];
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
	/* the test's cookie (36 characters of a-z2-7); the control
	 * connection's MSS (TCP_MAXSEG once connected; TCP tests, 0 =
	 * unknown); the congestion control in use per side (QL_SIDE_*; ""
	 * = unknown: UDP, or a peer that did not say) */
	char cookie[40];
	int ctrl_mss_bytes;
	char tcp_ca[2][QL_CA_NAME_MAX];
} ql_result;

/* A peer's counters are integers up to 2^53: what a JSON number (a double)
 * holds exactly, and far inside a signed 64-bit Lua integer, so sums of
 * them stay positive. */
#define QL_COUNT_MAX ((uint64_t)1 << 53)

void ql_result_free(ql_result *r);
void ql_interval_clear(ql_interval *iv);

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

/* Record arithmetic of the engine (record.c). */
void ql_entry_finish(ql_entry *x);
void ql_entry_add(ql_entry *s, int *present, const ql_entry *x, int d,
		  int r, int *ncnt, int *nret, int *njit);
void ql_sum_close(ql_entry *s, int n, int nret, int njit);
void ql_udp_path_add(ql_udp_path *to, const ql_udp_path *from);
double ql_jitter_mean_abs_ms(const ql_entry *x);
void ql_interval_sums(ql_interval *iv);
void ql_interval_fold_peer(ql_interval *iv, int cap, const ql_interval *b, int side);
const char *ql_side_label(int side);

#endif
