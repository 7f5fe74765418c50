/*
 * stats.h - measurement arithmetic of the traffic engine (Lua-free).
 * Stands on err.h and udp_path.h (the books' path statistics).
 *
 * Everything here is O(1) per datagram and allocation-free on the hot path
 * (ql_udp_rx_init allocates the bitmap once). Nothing is thread-safe: each
 * object belongs to one thread (the stream's thread); take interval
 * snapshots from that thread or under the caller's lock.
 *
 * Parts:
 *   - UDP receive accounting: exact unique / duplicate / out-of-order / late
 *     counters over 64-bit sequence numbers with a sliding bitmap, loss ruled
 *     with finality (never refunded), lost + unique == sent at the end.
 *   - Interarrival jitter per RFC 3550 section 6.4.1 / appendix A.8.
 *   - TCP_INFO (linux/tcp.h) to a sample in explicit units, with per-field
 *     presence flags (a missing value is never reported as 0).
 *   - CPU utilisation of the process and of the busiest thread.
 *   - bits_per_second with a zero-duration guard.
 * (The send schedule is pace.h's.)
 *
 * Times are int64 nanoseconds. Intervals, deadlines and pacing use
 * CLOCK_MONOTONIC; jitter transit times use whatever clock pair the caller
 * has (sender timestamp vs. receive timestamp, usually CLOCK_REALTIME from
 * the peer and SO_TIMESTAMPNS locally): only differences of transits matter.
 */
#ifndef QL_STATS_H
#define QL_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "udp_path.h"

/* ------------------------------------------------------------ helpers -- */

/*
 * Bits per second of `bytes` over `seconds`: bytes * 8 / seconds.
 * @param bytes   payload bytes (0..2^64-1)
 * @param seconds duration in s; below 1 ns (incl. <= 0), NaN or inf gives
 *                0.0, so the result is never NaN/inf
 * @return float bits/s, finite and >= 0
 * Usage: r = ql_bits_per_second(st.bytes, 10.0);
 */
double ql_bits_per_second(uint64_t bytes, double seconds);

/* Same with a duration in ns (<= 0 gives 0.0). Usage: see above. */
double ql_bits_per_second_ns(uint64_t bytes, int64_t duration_ns);

/*
 * Extend a 32-bit wire sequence number to 64 bits: the value congruent to
 * seq32 mod 2^32 nearest to `reference` (usually the highest 64-bit sequence
 * seen so far), in the manner of RFC 3550 appendix A.1's extended highest
 * sequence number. For peers that only send 32-bit counters (iperf3 without
 * the 64-bit UDP counter flag). Never returns a value below 0.
 */
uint64_t ql_seq_extend32(uint64_t reference, uint32_t seq32);

/* --------------------------------------------------------------- jitter -- */

/*
 * Interarrival jitter, RFC 3550 section 6.4.1 and appendix A.8:
 *   transit_i = arrival_i - sent_i
 *   D = transit_i - transit_(i-1)
 *   J += (|D| - J) / 16
 * The first sample only records transit (J stays 0): a clock offset between
 * hosts or a constant one-way delay therefore never enters J.
 * Samples are taken in arrival order as RFC 3550 prescribes, reordered
 * datagrams included; ql_udp_rx feeds only unique datagrams (a duplicate's
 * transit carries no new information, a late one was already ruled lost).
 * J is kept as a double in ns: with constant transit it is exactly 0, a
 * single step of d ns gives exactly d/16, then it decays by exactly 15/16 per
 * sample while the binary fraction fits in 53 bits.
 */
typedef struct ql_jitter {
	double jitter_ns;         /* J, ns, >= 0 */
	int64_t prev_transit_ns;  /* valid when samples > 0 */
	uint64_t samples;         /* transits seen (first one initialises) */
} ql_jitter;

/* Reset to "no sample" (J = 0). */
void ql_jitter_init(ql_jitter *j);

/*
 * Feed one datagram: sent_ns is the sender's timestamp, arrival_ns the local
 * receive time (SO_TIMESTAMPNS preferred), both ns. Differences saturate
 * instead of overflowing, so garbage timestamps cannot produce inf/NaN.
 */
void ql_jitter_update(ql_jitter *j, int64_t sent_ns, int64_t arrival_ns);

/* J in milliseconds (float, >= 0; 0.0 before the second sample). */
double ql_jitter_ms(const ql_jitter *j);

/* -------------------------------------------------- UDP receive books -- */

/*
 * Definitions (sequence numbers are 64-bit; the sender numbers datagrams
 * first_seq, first_seq + 1, ... ; iperf3 and qoslab start at 1):
 *
 *   highest      the highest sequence number received so far.
 *   unique       a datagram whose sequence number had not been received
 *                before and had not yet been ruled lost. Only these count
 *                towards unique_packets / unique_bytes (goodput).
 *   duplicate    a datagram whose sequence number was already received
 *                (known exactly while it is inside the window). Never
 *                unique, never out-of-order, never changes loss.
 *   out-of-order a unique datagram whose sequence number is below highest
 *                at its arrival (RFC 4737 section 3.3 "reordered": it
 *                arrived after a datagram with a higher number). It is a
 *                subset of unique and never implies loss.
 *   ruled lost   a sequence number that had not arrived when it was passed
 *                by the loss ruling point R. R only moves forward; it
 *                advances (a) so that it is always > highest - window, i.e.
 *                a sequence number leaving the bitmap window is ruled, (b)
 *                when loss_horizon_ns >= 0, past every sequence number below
 *                a datagram that arrived at least loss_horizon_ns ago (the
 *                RFC 7680 "Tmax" idea: waiting longer is not worth it;
 *                checkpoints are kept every horizon/16, so while datagrams
 *                keep arriving a gap is ruled between horizon and horizon
 *                * 17/16 + two datagram gaps after a higher number arrived;
 *                ticks without datagrams also rule, see ql_udp_rx_tick),
 *                (c) at ql_udp_rx_finish to first_seq + sent.
 *                lost_packets is monotone: per-interval loss is never
 *                negative and is never refunded.
 *   late         a datagram below R that is not a known duplicate: either it
 *                had been ruled lost already (its number is still in the
 *                window, so we know it is new, but the books on it are
 *                closed), or it is older than the window (we cannot tell a
 *                duplicate from a new one). Late datagrams are NOT unique:
 *                they stay in lost, which keeps lost + unique == sent.
 *
 * Invariants after every call:
 *   packets == unique_packets + duplicate_packets + late_packets
 *   out_of_order_packets <= unique_packets
 * After ql_udp_rx_finish(sent): lost_packets + unique_packets == sent.
 *
 * The path statistics (udp_path.h) ride along: every unique datagram's
 * transit books the |D| pairs it completes (jitter_pairs and
 * jitter_abs_sum_ns, interval deltas like the counters), every
 * non-duplicate one its arrival position and an out-of-order one its
 * extent; the ruling point hands the run tracker each sequence number as
 * it becomes final. trk.path counts from init, or from the mark of
 * ql_udp_rx_mark_omit on (it starts anew there); after ql_udp_rx_finish:
 *   path.burst_packets == the lost_packets ruled since then
 *   path.extent_packets == the out_of_order_packets booked since then
 */

/* Default bitmap window: 2^18 sequence numbers (32 KiB per stream); at
 * 1 Mpps that covers 262 ms of reordering, at 10 kpps 26 s. */
#define QL_UDP_WINDOW_DEFAULT ((uint64_t)1 << 18)
#define QL_UDP_WINDOW_MIN     ((uint64_t)64)
#define QL_UDP_WINDOW_MAX     ((uint64_t)1 << 30)
/* Default loss horizon: a gap is ruled lost 1 s (to about 1.0625 s) after a
 * higher sequence number arrived, so interval loss lags the gap by about a
 * second; loss_horizon_ns < 0 in the options disables time-based ruling
 * (then only the window and ql_udp_rx_finish rule). */
#define QL_UDP_LOSS_HORIZON_DEFAULT_NS 1000000000LL
#define QL_UDP_CHECKPOINTS 32

/* Counters. In an interval snapshot every field is the delta over the
 * interval (all monotone, so never negative). */
typedef struct ql_udp_counts {
	uint64_t packets;               /* raw datagrams received */
	uint64_t bytes;                 /* raw payload bytes received */
	uint64_t unique_packets;
	uint64_t unique_bytes;          /* payload bytes of unique datagrams */
	uint64_t duplicate_packets;
	uint64_t duplicate_bytes;
	uint64_t out_of_order_packets;  /* subset of unique */
	uint64_t late_packets;
	uint64_t late_bytes;
	uint64_t lost_packets;          /* ruled lost so far (final at finish) */
	uint64_t invalid_packets;       /* rejected before the books (runts,
	                                   foreign datagrams): not in packets */
	uint64_t jitter_pairs;          /* pairs s - 1, s booked (udp_path.h) */
	uint64_t jitter_abs_sum_ns;     /* Σ |D| over them, ns (saturating) */
} ql_udp_counts;

/* Options for ql_udp_rx_init; zero-initialise and set what you need. */
typedef struct ql_udp_rx_opts {
	uint64_t window_packets;   /* bitmap size, rounded up to a power of two;
	                              0 = QL_UDP_WINDOW_DEFAULT; 64 .. 2^30 */
	int64_t loss_horizon_ns;   /* 0 = default (1 s); < 0 = no time ruling */
	uint64_t first_seq;        /* first sequence number the sender uses;
	                              0 means 1 (iperf3 / qoslab) */
} ql_udp_rx_opts;

/* What a datagram turned out to be (return of ql_udp_rx_packet). */
typedef enum ql_udp_verdict {
	QL_UDP_UNIQUE = 0,        /* new, in order (seq > highest) */
	QL_UDP_OUT_OF_ORDER = 1,  /* new, seq < highest */
	QL_UDP_DUPLICATE = 2,
	QL_UDP_LATE = 3
} ql_udp_verdict;

typedef struct ql_udp_cp {
	uint64_t seq;     /* ruling point this checkpoint allows */
	int64_t time_ns;  /* arrival time at which it was seen */
} ql_udp_cp;

/* The receiver's books for one stream. Fields are read-only for callers. */
typedef struct ql_udp_rx {
	uint64_t *bitmap;          /* window_packets bits, slot = seq & mask */
	uint64_t window_packets;   /* power of two */
	uint64_t mask;             /* window_packets - 1 */
	uint64_t first_seq;
	uint64_t highest;          /* first_seq - 1 before any datagram */
	uint64_t ruled;            /* R: every seq < ruled has been ruled */
	int64_t loss_horizon_ns;   /* < 0: no time-based ruling */
	int64_t cp_spacing_ns;     /* horizon / 16 */
	unsigned cp_head, cp_count;
	ql_udp_cp cp[QL_UDP_CHECKPOINTS];
	uint64_t pending_seq;      /* newest advance not yet checkpointed */
	int64_t pending_time_ns;   /* INT64_MIN = none */
	int finished;
	uint64_t finished_sent;    /* count given to ql_udp_rx_finish */
	ql_udp_counts total;       /* cumulative */
	ql_udp_counts last_snap;   /* total at the previous snapshot */
	ql_jitter jitter;          /* over unique datagrams, arrival order */
	ql_udp_tracker trk;        /* mean |D|, loss runs, extents */
	uint32_t nsnap;            /* snapshots taken: the interval now booking */
	/* Warm-up split by sequence number (ql_udp_rx_mark_omit): one record
	 * per sequence number of [omit_lo, omit_lo + QL_UDP_OMIT_REGION). */
	uint32_t *omit_rec;
	uint64_t omit_lo;
	uint64_t omit_highest;     /* highest at the mark */
} ql_udp_rx;

/*
 * Prepare the books. opts may be NULL (all defaults).
 * @return 0; -EINVAL (usage: "udp_window_packets: expected 64..2^30") for a
 *   bad window; -ENOMEM if the bitmap or the path tracker's rings cannot be
 *   allocated.
 * Usage: ql_udp_rx rx; if (ql_udp_rx_init(&rx, NULL, &e) < 0) ...
 */
int ql_udp_rx_init(ql_udp_rx *rx, const ql_udp_rx_opts *opts, ql_err *e);

/* Free the bitmap and the tracker; idempotent (rx zeroed afterwards). */
void ql_udp_rx_free(ql_udp_rx *rx);

/*
 * Book one received datagram. O(1) amortised: a forward jump of n sequence
 * numbers costs O(min(n, window) / 64) word operations, paid once per
 * sequence number the sender used.
 * @param seq            64-bit sequence number (see ql_seq_extend32);
 *                       UINT64_MAX is reserved and always LATE
 * @param payload_bytes  UDP payload length
 * @param sent_ns        sender timestamp (ns) for jitter
 * @param arrival_ns     receive time (ns, SO_TIMESTAMPNS or clock_gettime);
 *                       also the clock of the loss horizon, so it should not
 *                       run backwards by more than the horizon
 * @return the verdict. After ql_udp_rx_finish every datagram is LATE.
 */
ql_udp_verdict ql_udp_rx_packet(ql_udp_rx *rx, uint64_t seq,
				uint64_t payload_bytes, int64_t sent_ns,
				int64_t arrival_ns);

/*
 * Count one datagram that does not belong to the test (shorter than the
 * header, a wrong test tag, a sequence number the sender cannot have used:
 * see ql_udp_seq_max). It touches no other counter, so it can neither
 * create loss nor refund it, and lost + unique == sent still holds.
 */
void ql_udp_rx_invalid(ql_udp_rx *rx);

/*
 * Acceptance bound: the highest sequence number the test's sender can have
 * used by now_ns, so a datagram numbered beyond it is not the test's.
 *
 * Paced sender (rate_bps > 0): an absolute schedule from origin releases
 * at most 1 + elapsed * rate / (length * 8) datagrams plus what its stall
 * rule lets it send ahead (burst_packets; iperf3's own burst and catch-up
 * stay within QL_UDP_ACCEPT_EXTRA more). The bound takes the elapsed time
 * from origin_ns minus slack_ns, so a receiver whose clock origin is later
 * than the sender's (the control message that starts the test travels one
 * way first) or a path whose delay shrinks never rejects a real datagram.
 * Unpaced sender: the sequence number cannot run further ahead of the
 * highest one seen than QL_UDP_ACCEPT_AHEAD plus QL_UDP_ACCEPT_MAX_PPS for
 * every second since that datagram arrived (no sender moves 2^24 datagrams
 * a second on one socket; the fixed part covers that rate for 15 ms of
 * arrival jitter and a legit burst far beyond any socket queue).
 * A limited test (limit_packets > 0) also bounds it at first_seq - 1 +
 * limit_packets. All arithmetic saturates.
 * Times are CLOCK_MONOTONIC ns; highest_ns is when the highest sequence
 * number arrived (origin_ns before any).
 * Usage: if (seq > ql_udp_seq_max(&acc, rx.highest, hi_ns, now)) invalid.
 */
#define QL_UDP_ACCEPT_EXTRA     ((uint64_t)1024)
#define QL_UDP_ACCEPT_AHEAD     ((uint64_t)1 << 18)
#define QL_UDP_ACCEPT_MAX_PPS   ((uint64_t)1 << 24)
#define QL_UDP_ACCEPT_SLACK_NS  (2 * 1000000000LL)

typedef struct ql_udp_accept {
	uint64_t rate_bps;        /* sender's target payload rate, 0 = unpaced */
	uint32_t length_bytes;    /* datagram length (rate_bps > 0: >= 1) */
	uint64_t burst_packets;   /* most the sender's pacer may send early */
	uint64_t limit_packets;   /* datagram limit of the test, 0 = none */
	uint64_t first_seq;       /* 0 means 1 */
	int64_t origin_ns;        /* no later than the receiver's first read */
	int64_t slack_ns;         /* 0 = QL_UDP_ACCEPT_SLACK_NS */
} ql_udp_accept;

uint64_t ql_udp_seq_max(const ql_udp_accept *a, uint64_t highest,
			int64_t highest_ns, int64_t now_ns);

/*
 * Apply time-based loss ruling at now_ns (same clock as arrival_ns) without
 * a datagram; called by ql_udp_rx_snapshot, useful when traffic stops.
 */
void ql_udp_rx_tick(ql_udp_rx *rx, int64_t now_ns);

/*
 * Interval snapshot: rules losses due at now_ns (ql_udp_rx_tick), then
 * writes the deltas of every counter since the previous snapshot (or since
 * init) to *interval, and the current jitter (ms) to *jitter_ms (may be
 * NULL). Σ of all snapshots == the totals at the last snapshot; an omitted
 * warm-up is excluded by snapshotting at its end and dropping that delta.
 * now_ns must be on the clock of arrival_ns: with SO_TIMESTAMPNS
 * (CLOCK_REALTIME) arrivals pass clock_gettime(CLOCK_REALTIME), or convert
 * the kernel stamps to CLOCK_MONOTONIC once (a realtime step of the system
 * clock would otherwise shift the loss horizon by the step).
 */
void ql_udp_rx_snapshot(ql_udp_rx *rx, int64_t now_ns,
			ql_udp_counts *interval, double *jitter_ms);

/*
 * Close the books with the sender's final count `sent_packets` (datagrams
 * first_seq .. first_seq + sent - 1). Every sequence number not received
 * becomes lost, so lost_packets + unique_packets == sent_packets exactly.
 * Take a last ql_udp_rx_snapshot afterwards to get the final interval's
 * share. Idempotent for the same count.
 * @return 0; -EPROTO (code "EPROTO") if datagrams numbered at or beyond
 *   first_seq + sent were received (the sender's count is wrong or the
 *   datagrams belong to someone else) or finish was already called with a
 *   different count; the books are left unchanged then.
 */
int ql_udp_rx_finish(ql_udp_rx *rx, uint64_t sent_packets, ql_err *e);

/*
 * Warm-up split by sequence number (exact lost + unique == sent with omit_s).
 *
 * Each end of a test ends its warm-up on its own clock, so a time split puts
 * the datagrams near the boundary on different sides at the two ends. The
 * sender's split is the truth: datagrams first_seq .. first_seq + P - 1
 * went out during its warm-up. The receiver learns P only later, so it
 * keeps, from its own boundary on, which interval booked each sequence
 * number near that boundary (as unique, out-of-order or lost), and moves
 * the ones on the wrong side when P arrives (ql_udp_rx_omit_split).
 *
 * ql_udp_rx_mark_omit: call just before the snapshot that closes the last
 * omitted interval, under the same lock. It rules lost every sequence
 * number more than QL_UDP_OMIT_BELOW below highest that has not arrived
 * (booked in that omitted interval; a later arrival is LATE), and records
 * the region [lo, lo + QL_UDP_OMIT_REGION) with lo = max(ruled, highest + 1
 * - QL_UDP_OMIT_BELOW). The split is exact when the sender's last warm-up
 * sequence number lies in [lo - 1, lo + QL_UDP_OMIT_REGION); 256 KiB each.
 * @return 0; -ENOMEM (books unchanged, no split later); a second call is a
 *   no-op returning 0.
 */
#define QL_UDP_OMIT_REGION ((uint64_t)1 << 16)
#define QL_UDP_OMIT_BELOW  ((uint64_t)1 << 13)
int ql_udp_rx_mark_omit(ql_udp_rx *rx, ql_err *e);

/* One sequence number booked on the wrong side of the sender's boundary:
 * booked in interval `index` (snapshot number; the finish share carries the
 * number of the snapshot after the last; QL_UDP_MOVE_WARMUP: received
 * before the mark, in some warm-up interval), as lost or unique
 * (out_of_order a subset of unique); to_omitted says which way it goes. */
#define QL_UDP_MOVE_WARMUP UINT32_MAX
typedef struct ql_udp_move {
	uint32_t index;
	int to_omitted;
	int lost;
	int out_of_order;
} ql_udp_move;

/*
 * After ql_udp_rx_finish: call move(ctx, m) for every sequence number that
 * the receiver booked on the other side of the sender's boundary than the
 * sender did. sender_omit_packets = P, the datagrams the sender counted in
 * its warm-up; first_nonomitted = the index of the first interval that is
 * not omitted (the snapshot after the mark).
 * @return the number of moves (>= 0); -ERANGE (code "ERANGE", message with
 *   the distance) if P lies outside the recorded region, -EINVAL if the
 *   books were not marked or not finished. The books are left unchanged;
 *   the caller applies the moves to its interval records.
 */
int ql_udp_rx_omit_split(const ql_udp_rx *rx, uint64_t sender_omit_packets,
			 uint32_t first_nonomitted,
			 void (*move)(void *ctx, const ql_udp_move *m), void *ctx,
			 ql_err *e);

/* out = a - b field by field (a must be a later state than b). */
void ql_udp_counts_sub(const ql_udp_counts *a, const ql_udp_counts *b,
		       ql_udp_counts *out);

/* Loss in percent of sent (0..100; 0.0 when sent == 0). */
double ql_loss_pct(uint64_t lost_packets, uint64_t sent_packets);

/* ------------------------------------------------------------- TCP_INFO -- */

/* Presence bits of ql_tcp_sample.valid. A field without its bit is absent
 * (kernel too old for it, or the sample failed): report it as nil, not 0. */
#define QL_TCPS_RTT            (1u << 0)  /* rtt_us, rttvar_us */
#define QL_TCPS_CWND           (1u << 1)  /* snd_cwnd_segments, snd_mss_bytes,
                                             snd_cwnd_bytes, snd_ssthresh */
#define QL_TCPS_RETRANS        (1u << 2)  /* total_retrans, lost/unacked */
#define QL_TCPS_PACING         (1u << 3)  /* pacing_rate_bps (absent when
                                             the kernel says "unlimited") */
#define QL_TCPS_MIN_RTT        (1u << 4)  /* min_rtt_us (Linux >= 4.6) */
#define QL_TCPS_DELIVERY       (1u << 5)  /* delivery_rate_bps, app_limited
                                             (Linux >= 4.9) */
#define QL_TCPS_BYTES          (1u << 6)  /* bytes_acked, bytes_received */
#define QL_TCPS_BYTES_SENT     (1u << 7)  /* bytes_sent, bytes_retrans
                                             (Linux >= 4.19) */
#define QL_TCPS_NOTSENT        (1u << 8)  /* notsent_bytes */
#define QL_TCPS_PMTU           (1u << 9)  /* pmtu_bytes */
#define QL_TCPS_SND_WND        (1u << 10) /* snd_wnd_bytes (Linux >= 5.4) */

/* One TCP_INFO sample in explicit units (Linux: cwnd is in segments, rtt in
 * us, rates in bytes/s; converted here once). */
typedef struct ql_tcp_sample {
	unsigned valid;              /* QL_TCPS_* bits; 0 = sample failed */
	int64_t time_ns;             /* when it was taken (caller's clock) */
	uint32_t rtt_us;             /* smoothed RTT */
	uint32_t rttvar_us;
	uint32_t min_rtt_us;
	uint32_t snd_mss_bytes;
	uint32_t snd_cwnd_segments;
	uint32_t snd_ssthresh_segments;
	uint64_t snd_cwnd_bytes;     /* segments x MSS in 64 bits (no 32-bit wrap) */
	uint32_t total_retrans;      /* kernel's 32-bit cumulative count */
	uint32_t unacked_segments;
	uint32_t lost_segments;
	int pacing_unlimited;        /* 1: kernel reported ~0 (no pacing cap) */
	uint64_t pacing_rate_bps;    /* bits/s (kernel bytes/s x 8, saturating) */
	uint64_t delivery_rate_bps;  /* bits/s */
	int delivery_app_limited;    /* 1: the rate sample was app-limited */
	uint64_t bytes_acked;
	uint64_t bytes_received;
	uint64_t bytes_sent;
	uint64_t bytes_retrans;
	uint32_t notsent_bytes;
	uint32_t pmtu_bytes;         /* the path MTU the socket uses */
	uint32_t snd_wnd_bytes;      /* the peer's advertised receive window */
} ql_tcp_sample;

/*
 * Convert a struct tcp_info (from <linux/tcp.h>) filled by getsockopt with
 * the returned optlen. A field is present only if the kernel wrote it
 * (offset + size <= optlen); an older kernel's shorter struct gives fewer
 * valid bits, never zeros. `info` is a void pointer so callers may include
 * either <netinet/tcp.h> or <linux/tcp.h>.
 * Usage: ql_tcp_sample_from_info(&s, &ti, optlen, now_ns);
 */
void ql_tcp_sample_from_info(ql_tcp_sample *s, const void *info,
			     size_t optlen, int64_t time_ns);

/*
 * getsockopt(fd, IPPROTO_TCP, TCP_INFO) and convert. On failure s->valid is
 * 0 and the errno is returned (code e.g. "EBADF", "ENOTCONN").
 * @return 0 or a negative errno.
 */
int ql_tcp_sample_read(int fd, ql_tcp_sample *s, int64_t time_ns, ql_err *e);

/*
 * Retransmissions between two samples as a 64-bit delta: the 32-bit kernel
 * counter's difference modulo 2^32 (a wrap is handled; a counter cannot fall).
 * @return 0 and *delta; -ENODATA if either sample lacks QL_TCPS_RETRANS
 *   (then *delta is untouched: report nil, not 0).
 * Usage: if (ql_tcp_retrans_delta(&prev, &cur, &d) == 0) total += d;
 */
int ql_tcp_retrans_delta(const ql_tcp_sample *prev, const ql_tcp_sample *cur,
			 uint64_t *delta);

/*
 * Per-stream accumulation of TCP_INFO samples for the result's sender block
 * (min/mean/max RTT, max cwnd, max send window) and retransmit totals.
 * Samples without the relevant bit are skipped for that statistic; a
 * statistic with no sample is absent (its count is 0), never 0.
 */
typedef struct ql_tcp_summary {
	uint64_t rtt_samples;          /* samples with QL_TCPS_RTT */
	uint32_t min_rtt_us, max_rtt_us;
	uint64_t sum_rtt_us;           /* for the mean */
	uint64_t cwnd_samples;         /* samples with QL_TCPS_CWND */
	uint64_t max_snd_cwnd_bytes;
	uint64_t snd_wnd_samples;      /* samples with QL_TCPS_SND_WND */
	uint64_t max_snd_wnd_bytes;
	uint64_t retrans_samples;      /* samples with QL_TCPS_RETRANS */
	uint64_t retransmits;          /* Σ deltas since the baseline */
	uint32_t last_total_retrans;   /* baseline for the next delta */
} ql_tcp_summary;

/*
 * Start a summary. baseline is the sample the retransmit count starts from
 * (e.g. taken at the end of the omit period), or NULL for a fresh connection
 * (the kernel's counter starts at 0 when the socket connects).
 */
void ql_tcp_summary_init(ql_tcp_summary *sum, const ql_tcp_sample *baseline);

/*
 * Add one interval's sample. *retrans_delta (may be NULL) receives the
 * retransmissions since the previous sample that had the counter.
 * @return 0, or -ENODATA when the sample lacks QL_TCPS_RETRANS (report the
 *   interval's retransmits as nil; the next good sample covers them, so the
 *   total stays exact).
 * Usage: if (ql_tcp_summary_add(&sum, &s, &d) == 0) iv.retransmits = d;
 */
int ql_tcp_summary_add(ql_tcp_summary *sum, const ql_tcp_sample *s,
		       uint64_t *retrans_delta);

/* Mean smoothed RTT in us (float; 0.0 when rtt_samples == 0: check it). */
double ql_tcp_summary_mean_rtt_us(const ql_tcp_summary *sum);

/* ------------------------------------------------------------------ CPU -- */

/* CPU-limited when the busiest thread used at least this share of a core
 * (advisory: the result may measure the host, not the network). */
#define QL_CPU_LIMITED_PCT 90.0

/* A point in time for process CPU accounting. */
typedef struct ql_cpu_mark {
	int64_t wall_ns;    /* CLOCK_MONOTONIC */
	int64_t user_ns;    /* getrusage(RUSAGE_SELF) user time, all threads */
	int64_t system_ns;  /* ditto, system time */
} ql_cpu_mark;

/* Utilisation between two marks, in percent of ONE core (iperf3's
 * convention: a process using two full cores reports 200). */
typedef struct ql_cpu_usage {
	double total_pct;           /* user + system */
	double user_pct;
	double system_pct;
	double busiest_thread_pct;  /* max over the threads given; 0 if none */
	int cpu_limited;            /* busiest_thread_pct >= QL_CPU_LIMITED_PCT */
} ql_cpu_usage;

/* Read wall clock and getrusage(RUSAGE_SELF). @return 0 or -errno. */
int ql_cpu_mark_now(ql_cpu_mark *m, ql_err *e);

/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns; -1 if the
 * clock is unavailable. */
int64_t ql_cpu_thread_self_ns(void);

/*
 * CPU time of another live thread of this process (pthread_getcpuclockid),
 * ns. A thread's clock disappears when it is joined: sample before joining.
 * @return 0 or a negative errno (ESRCH for a finished thread).
 */
int ql_cpu_thread_ns(pthread_t thread, int64_t *cpu_ns, ql_err *e);

/*
 * Percentages between two marks. thread_cpu_ns lists each thread's CPU time
 * used over the same span (end minus start, ns; n may be 0, the array NULL).
 * A span <= 0 gives all zeros (never NaN). Percentages are not clamped to
 * 100 (several threads), but a single thread is clamped at 100 against clock
 * granularity.
 * Usage: ql_cpu_usage_compute(&m0, &m1, deltas, nthreads, &u);
 */
void ql_cpu_usage_compute(const ql_cpu_mark *start, const ql_cpu_mark *end,
			  const int64_t *thread_cpu_ns, size_t n,
			  ql_cpu_usage *out);

/* cpu_ns as a percentage of wall_ns (0.0 when wall_ns <= 0 or cpu_ns < 0). */
double ql_cpu_pct(int64_t cpu_ns, int64_t wall_ns);

#endif
