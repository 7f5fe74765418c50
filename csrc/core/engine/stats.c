/*
 * stats.c - the measurement arithmetic of stats.h (UDP books, jitter,
 * TCP_INFO, CPU). Stands on stats.h and the core's timer.h only.
 */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <netinet/in.h>
#include <linux/tcp.h>

#include "../timer.h"

/* ------------------------------------------------------------ helpers -- */

double ql_bits_per_second(uint64_t bytes, double seconds)
{
	/* Below 1 ns the quotient could overflow to inf; no real measurement
	 * spans less than a nanosecond, so treat it as "no duration". */
	if (!(seconds >= 1e-9) || !isfinite(seconds))
		return 0.0;
	return (double)bytes * 8.0 / seconds;
}

double ql_bits_per_second_ns(uint64_t bytes, int64_t duration_ns)
{
	if (duration_ns <= 0)
		return 0.0;
	return (double)bytes * 8.0 * 1e9 / (double)duration_ns;
}

uint64_t ql_seq_extend32(uint64_t reference, uint32_t seq32)
{
	const uint64_t span = (uint64_t)1 << 32;
	uint64_t c = (reference & ~(span - 1)) | seq32;

	if (c > reference && c - reference > span / 2 && c >= span)
		c -= span;
	else if (c < reference && reference - c > span / 2 &&
		 c <= UINT64_MAX - span)
		c += span;
	return c;
}

double ql_loss_pct(uint64_t lost_packets, uint64_t sent_packets)
{
	if (sent_packets == 0)
		return 0.0;
	return 100.0 * (double)lost_packets / (double)sent_packets;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* --------------------------------------------------------------- jitter -- */

void ql_jitter_init(ql_jitter *j)
{
	j->jitter_ns = 0.0;
	j->prev_transit_ns = 0;
	j->samples = 0;
}

void ql_jitter_update(ql_jitter *j, int64_t sent_ns, int64_t arrival_ns)
{
	/* Transit and D stay in int64 (exact: absolute ns timestamps exceed
	 * double's 53-bit mantissa); only |D| becomes a double. */
	int64_t transit = sat_sub(arrival_ns, sent_ns);

	if (j->samples++ > 0) {
		int64_t d = sat_sub(transit, j->prev_transit_ns);
		double ad = d < 0 ? -(double)d : (double)d;
		j->jitter_ns += (ad - j->jitter_ns) / 16.0;
	}
	j->prev_transit_ns = transit;
}

double ql_jitter_ms(const ql_jitter *j)
{
	return j->jitter_ns / 1e6;
}

/* -------------------------------------------------- UDP receive books -- */

static uint64_t round_pow2(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

int ql_udp_rx_init(ql_udp_rx *rx, const ql_udp_rx_opts *opts, ql_err *e)
{
	ql_udp_rx_opts o = {0};
	uint64_t w;

	memset(rx, 0, sizeof *rx);
	if (opts)
		o = *opts;
	w = o.window_packets ? o.window_packets : QL_UDP_WINDOW_DEFAULT;
	if (w < QL_UDP_WINDOW_MIN || w > QL_UDP_WINDOW_MAX)
		return ql_err_usage(e, "udp_window_packets: expected %llu..%llu, got %llu",
				    (unsigned long long)QL_UDP_WINDOW_MIN,
				    (unsigned long long)QL_UDP_WINDOW_MAX,
				    (unsigned long long)w);
	w = round_pow2(w);
	rx->bitmap = calloc(w / 64, sizeof *rx->bitmap);
	if (!rx->bitmap)
		return ql_err_set(e, ENOMEM, NULL,
				  "UDP receive window of %llu sequence numbers: out of memory",
				  (unsigned long long)w);
	rx->window_packets = w;
	rx->mask = w - 1;
	rx->first_seq = o.first_seq ? o.first_seq : 1;
	rx->highest = rx->first_seq - 1;
	rx->ruled = rx->first_seq;
	if (o.loss_horizon_ns == 0)
		rx->loss_horizon_ns = QL_UDP_LOSS_HORIZON_DEFAULT_NS;
	else
		rx->loss_horizon_ns = o.loss_horizon_ns < 0 ? -1 : o.loss_horizon_ns;
	rx->cp_spacing_ns = rx->loss_horizon_ns > 16 ? rx->loss_horizon_ns / 16 : 1;
	rx->pending_time_ns = INT64_MIN;
	ql_jitter_init(&rx->jitter);
	if (ql_udp_tracker_init(&rx->trk) < 0) {
		ql_udp_rx_free(rx);
		return ql_err_set(e, ENOMEM, NULL,
				  "UDP receive path statistics: out of memory");
	}
	return 0;
}

void ql_udp_rx_free(ql_udp_rx *rx)
{
	free(rx->bitmap);
	free(rx->omit_rec);
	ql_udp_tracker_free(&rx->trk);
	memset(rx, 0, sizeof *rx);
}

static int bit_get(const ql_udp_rx *rx, uint64_t seq)
{
	uint64_t s = seq & rx->mask;
	return (int)((rx->bitmap[s >> 6] >> (s & 63)) & 1);
}

static void bit_set(ql_udp_rx *rx, uint64_t seq)
{
	uint64_t s = seq & rx->mask;
	rx->bitmap[s >> 6] |= (uint64_t)1 << (s & 63);
}

/*
 * Walk the slots of sequence numbers [a, b) (b - a <= window) word by word.
 * The window is a power of two >= 64, so a word never straddles the wrap.
 * clear != 0 zeroes the bits; the return is the number of bits that were set.
 */
static uint64_t range_op(ql_udp_rx *rx, uint64_t a, uint64_t b, int clear)
{
	uint64_t set = 0;

	while (a < b) {
		uint64_t s = a & rx->mask;
		unsigned bit = (unsigned)(s & 63);
		uint64_t n = 64 - bit;
		uint64_t m;

		if (n > b - a)
			n = b - a;
		m = (n == 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1)) << bit;
		set += (uint64_t)__builtin_popcountll(rx->bitmap[s >> 6] & m);
		if (clear)
			rx->bitmap[s >> 6] &= ~m;
		a += n;
	}
	return set;
}

/* Warm-up region records: 0 = not booked yet, else the booking interval + 1
 * in the low bits, with the kind in the two high bits. */
#define OREC_LOST 0x80000000u
#define OREC_OOO  0x40000000u
#define OREC_IDX  0x3fffffffu

/* OREC_IDX itself marks "received before the mark" (some warm-up interval). */
static uint32_t orec_index(const ql_udp_rx *rx)
{
	return rx->nsnap < OREC_IDX - 2 ? rx->nsnap + 1 : OREC_IDX - 1;
}

static void orec_book(ql_udp_rx *rx, uint64_t seq, uint32_t kind)
{
	if (rx->omit_rec && seq >= rx->omit_lo && seq - rx->omit_lo < QL_UDP_OMIT_REGION)
		rx->omit_rec[seq - rx->omit_lo] = orec_index(rx) | kind;
}

/* Book the not-yet-booked sequence numbers of [a, b) in the region as lost
 * (called by rule_to for the range it rules; received ones are booked). */
static void orec_rule(ql_udp_rx *rx, uint64_t a, uint64_t b)
{
	if (!rx->omit_rec)
		return;
	uint64_t hi = rx->omit_lo + QL_UDP_OMIT_REGION;
	if (a < rx->omit_lo)
		a = rx->omit_lo;
	if (b > hi)
		b = hi;
	for (uint64_t s = a; s < b; s++)
		if (rx->omit_rec[s - rx->omit_lo] == 0)
			rx->omit_rec[s - rx->omit_lo] = orec_index(rx) | OREC_LOST;
}

/* Hand the run tracker the final state of [a, b) (b - a <= window) from
 * the bitmap, one run at a time: O(words + runs). */
static void range_runs(ql_udp_rx *rx, uint64_t a, uint64_t b)
{
	while (a < b) {
		uint64_t s = a & rx->mask;
		unsigned bit = (unsigned)(s & 63);
		uint64_t n = 64 - bit;
		uint64_t w = rx->bitmap[s >> 6] >> bit;
		uint64_t done = 0;

		if (n > b - a)
			n = b - a;
		while (done < n) {
			uint64_t v = w >> done;   /* done < n <= 64 - bit */
			int got = (int)(v & 1);
			uint64_t run = got ? (~v ? (uint64_t)__builtin_ctzll(~v) : 64)
					   : (v ? (uint64_t)__builtin_ctzll(v) : 64);
			if (run > n - done)
				run = n - done;
			ql_udp_tracker_runs(&rx->trk, a + done, !got, run);
			done += run;
		}
		a += n;
	}
}

/* Move the ruling point to r: every sequence number below r not received
 * by now is lost for good. Bits of [ruled, highest] are still valid because
 * ruled > highest - window is maintained. */
static void rule_to(ql_udp_rx *rx, uint64_t r)
{
	uint64_t top, lost = 0;

	if (r <= rx->ruled)
		return;
	top = rx->highest + 1 < r ? rx->highest + 1 : r;
	if (rx->ruled < top) {
		lost += (top - rx->ruled) - range_op(rx, rx->ruled, top, 0);
		range_runs(rx, rx->ruled, top);
	}
	if (r > top) {
		uint64_t from = rx->ruled > top ? rx->ruled : top;
		lost += r - from;
		ql_udp_tracker_runs(&rx->trk, from, 1, r - from);
	}
	rx->total.lost_packets += lost;
	orec_rule(rx, rx->ruled, r);
	rx->ruled = r;
}

/* A checkpoint (s, t) says: at time t every sequence number below s had
 * been passed by a received datagram, so at t + horizon they may be ruled.
 * At most one checkpoint per cp_spacing_ns; the newest advance in between
 * waits in pending_seq / pending_time_ns (a checkpoint may only be late,
 * never early, so it carries the time of its own advance). */
static void cp_push(ql_udp_rx *rx, uint64_t seq, int64_t t)
{
	unsigned tail;

	if (rx->cp_count == QL_UDP_CHECKPOINTS)
		return; /* only delays ruling, never rules early */
	tail = (rx->cp_head + rx->cp_count) % QL_UDP_CHECKPOINTS;
	rx->cp[tail].seq = seq;
	rx->cp[tail].time_ns = t;
	rx->cp_count++;
}

static const ql_udp_cp *cp_last(const ql_udp_rx *rx)
{
	if (rx->cp_count == 0)
		return NULL;
	return &rx->cp[(rx->cp_head + rx->cp_count - 1) % QL_UDP_CHECKPOINTS];
}

void ql_udp_rx_tick(ql_udp_rx *rx, int64_t now_ns)
{
	if (rx->loss_horizon_ns < 0)
		return;
	while (rx->cp_count > 0) {
		const ql_udp_cp *c = &rx->cp[rx->cp_head];
		if (sat_sub(now_ns, c->time_ns) < rx->loss_horizon_ns)
			break;
		rule_to(rx, c->seq);
		rx->cp_head = (rx->cp_head + 1) % QL_UDP_CHECKPOINTS;
		rx->cp_count--;
	}
	/* Record the newest advance once the spacing allows, even if no
	 * further datagram arrives to trigger it. */
	if (rx->pending_time_ns != INT64_MIN &&
	    (rx->cp_count == 0 ||
	     sat_sub(now_ns, cp_last(rx)->time_ns) >= rx->cp_spacing_ns)) {
		cp_push(rx, rx->pending_seq, rx->pending_time_ns);
		rx->pending_time_ns = INT64_MIN;
	}
}

static void advance(ql_udp_rx *rx, uint64_t seq, int64_t t)
{
	uint64_t w = rx->window_packets;
	uint64_t h = rx->highest;

	/* Sequence numbers about to leave the window are ruled first, while
	 * their bits are still readable. */
	if (seq >= w - 1)
		rule_to(rx, seq - w + 1);
	if (seq - h >= w)
		memset(rx->bitmap, 0, (size_t)(w / 64) * sizeof *rx->bitmap);
	else
		range_op(rx, h + 1, seq + 1, 1);
	bit_set(rx, seq);
	rx->highest = seq;
	if (rx->loss_horizon_ns >= 0) {
		const ql_udp_cp *last = cp_last(rx);
		if (!last || sat_sub(t, last->time_ns) >= rx->cp_spacing_ns) {
			cp_push(rx, seq, t);
			rx->pending_time_ns = INT64_MIN;
		} else {
			rx->pending_seq = seq;
			rx->pending_time_ns = t;
		}
	}
}

ql_udp_verdict ql_udp_rx_packet(ql_udp_rx *rx, uint64_t seq,
				uint64_t payload_bytes, int64_t sent_ns,
				int64_t arrival_ns)
{
	ql_udp_counts *c = &rx->total;
	ql_udp_verdict v;

	c->packets++;
	c->bytes += payload_bytes;
	/* UINT64_MAX is reserved so highest + 1 never wraps; no sender gets
	 * there honestly. */
	if (rx->finished || seq == UINT64_MAX)
		goto late;
	if (rx->loss_horizon_ns >= 0 && rx->cp_count > 0)
		ql_udp_rx_tick(rx, arrival_ns);

	if (seq > rx->highest) {
		advance(rx, seq, arrival_ns);
		v = QL_UDP_UNIQUE;
	} else if (rx->highest - seq < rx->window_packets && bit_get(rx, seq)) {
		c->duplicate_packets++;
		c->duplicate_bytes += payload_bytes;
		return QL_UDP_DUPLICATE;
	} else if (seq < rx->ruled) {
		/* Already ruled lost: the books on it are closed. Still mark it
		 * (when inside the window) so a later copy is a duplicate. */
		if (rx->highest - seq < rx->window_packets)
			bit_set(rx, seq);
		goto late;
	} else {
		bit_set(rx, seq);
		c->out_of_order_packets++;
		v = QL_UDP_OUT_OF_ORDER;
	}
	orec_book(rx, seq, v == QL_UDP_OUT_OF_ORDER ? OREC_OOO : 0);
	c->unique_packets++;
	c->unique_bytes += payload_bytes;
	ql_jitter_update(&rx->jitter, sent_ns, arrival_ns);
	ql_udp_tracker_pair(&rx->trk, seq, sat_sub(arrival_ns, sent_ns),
			    &c->jitter_pairs, &c->jitter_abs_sum_ns);
	ql_udp_tracker_arrival(&rx->trk, seq, v == QL_UDP_UNIQUE, v == QL_UDP_OUT_OF_ORDER);
	return v;
late:
	/* a position in arrival order all the same (RFC 4737 counts every
	 * non-duplicate arrival) */
	ql_udp_tracker_arrival(&rx->trk, seq, 0, 0);
	c->late_packets++;
	c->late_bytes += payload_bytes;
	return QL_UDP_LATE;
}

void ql_udp_rx_invalid(ql_udp_rx *rx)
{
	rx->total.invalid_packets++;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t ql_udp_seq_max(const ql_udp_accept *a, uint64_t highest,
			int64_t highest_ns, int64_t now_ns)
{
	uint64_t first = a->first_seq ? a->first_seq : 1;
	uint64_t bound;
	if (a->rate_bps > 0 && a->length_bytes > 0) {
		int64_t slack = a->slack_ns > 0 ? a->slack_ns : QL_UDP_ACCEPT_SLACK_NS;
		int64_t el = now_ns - a->origin_ns;
		unsigned __int128 span = (unsigned __int128)(uint64_t)(el > 0 ? el : 0) +
					 (uint64_t)slack;
		unsigned __int128 bits_ns = (unsigned __int128)a->length_bytes * 8 * 1000000000ULL;
		unsigned __int128 n = span * a->rate_bps / bits_ns + 1;
		bound = n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
		bound = sat_add(sat_add(bound, a->burst_packets), QL_UDP_ACCEPT_EXTRA);
		bound = sat_add(bound, first - 1);
	} else {
		int64_t since = now_ns - highest_ns;
		unsigned __int128 run = (unsigned __int128)(uint64_t)(since > 0 ? since : 0) *
					QL_UDP_ACCEPT_MAX_PPS / 1000000000ULL;
		uint64_t h = highest >= first ? highest : first - 1;
		bound = sat_add(h, QL_UDP_ACCEPT_AHEAD);
		bound = run > UINT64_MAX ? UINT64_MAX : sat_add(bound, (uint64_t)run);
	}
	if (a->limit_packets) {
		uint64_t lim = sat_add(first - 1, a->limit_packets);
		if (lim < bound)
			bound = lim;
	}
	return bound;
}

void ql_udp_counts_sub(const ql_udp_counts *a, const ql_udp_counts *b,
		       ql_udp_counts *out)
{
	out->packets = a->packets - b->packets;
	out->bytes = a->bytes - b->bytes;
	out->unique_packets = a->unique_packets - b->unique_packets;
	out->unique_bytes = a->unique_bytes - b->unique_bytes;
	out->duplicate_packets = a->duplicate_packets - b->duplicate_packets;
	out->duplicate_bytes = a->duplicate_bytes - b->duplicate_bytes;
	out->out_of_order_packets = a->out_of_order_packets - b->out_of_order_packets;
	out->late_packets = a->late_packets - b->late_packets;
	out->late_bytes = a->late_bytes - b->late_bytes;
	out->lost_packets = a->lost_packets - b->lost_packets;
	out->invalid_packets = a->invalid_packets - b->invalid_packets;
	out->jitter_pairs = a->jitter_pairs - b->jitter_pairs;
	out->jitter_abs_sum_ns = a->jitter_abs_sum_ns - b->jitter_abs_sum_ns;
}

void ql_udp_rx_snapshot(ql_udp_rx *rx, int64_t now_ns,
			ql_udp_counts *interval, double *jitter_ms)
{
	if (!rx->finished)
		ql_udp_rx_tick(rx, now_ns);
	ql_udp_counts_sub(&rx->total, &rx->last_snap, interval);
	rx->last_snap = rx->total;
	if (rx->nsnap < UINT32_MAX)
		rx->nsnap++;
	if (jitter_ms)
		*jitter_ms = ql_jitter_ms(&rx->jitter);
}

int ql_udp_rx_finish(ql_udp_rx *rx, uint64_t sent_packets, ql_err *e)
{
	uint64_t end;

	if (rx->finished) {
		if (sent_packets == rx->finished_sent)
			return 0;
		return ql_err_set(e, EPROTO, "EPROTO",
				  "UDP books already closed with %llu sent datagrams, not %llu",
				  (unsigned long long)rx->finished_sent,
				  (unsigned long long)sent_packets);
	}
	if (__builtin_add_overflow(rx->first_seq, sent_packets, &end) ||
	    rx->highest >= end)
		return ql_err_set(e, EPROTO, "EPROTO",
				  "UDP receiver saw sequence number %llu but the sender reports "
				  "only %llu datagrams (numbered from %llu): the peer's count is "
				  "wrong or foreign datagrams reached the port",
				  (unsigned long long)rx->highest,
				  (unsigned long long)sent_packets,
				  (unsigned long long)rx->first_seq);
	rule_to(rx, end);
	ql_udp_tracker_close(&rx->trk);
	rx->finished = 1;
	rx->finished_sent = sent_packets;
	rx->cp_count = 0;
	return 0;
}

int ql_udp_rx_mark_omit(ql_udp_rx *rx, ql_err *e)
{
	if (rx->omit_rec || rx->finished)
		return 0;
	uint64_t lo = rx->highest + 1 > rx->first_seq + QL_UDP_OMIT_BELOW
		      ? rx->highest + 1 - QL_UDP_OMIT_BELOW : rx->first_seq;
	if (lo < rx->ruled)
		lo = rx->ruled;
	uint32_t *rec = calloc(QL_UDP_OMIT_REGION, sizeof *rec);
	if (!rec)
		return ql_err_set(e, ENOMEM, NULL,
				  "UDP warm-up split: out of memory for %llu records",
				  (unsigned long long)QL_UDP_OMIT_REGION);
	/* Far stragglers of the warm-up are ruled now, in the warm-up; the
	 * path statistics start anew here, the runs above highest. */
	rule_to(rx, lo);
	ql_udp_tracker_reset(&rx->trk, rx->highest + 1);
	/* Received ones of [lo, highest] were booked in some warm-up interval. */
	for (uint64_t s = lo; s <= rx->highest && s - lo < QL_UDP_OMIT_REGION; s++)
		if (bit_get(rx, s))
			rec[s - lo] = OREC_IDX;
	rx->omit_rec = rec;
	rx->omit_lo = lo;
	rx->omit_highest = rx->highest;
	return 0;
}

int ql_udp_rx_omit_split(const ql_udp_rx *rx, uint64_t sender_omit_packets,
			 uint32_t first_nonomitted,
			 void (*move)(void *ctx, const ql_udp_move *m), void *ctx,
			 ql_err *e)
{
	if (!rx->omit_rec || !rx->finished)
		return ql_err_set(e, EINVAL, NULL, "UDP warm-up split: books %s",
				  rx->omit_rec ? "not closed yet" : "not marked at the warm-up end");
	uint64_t lo = rx->omit_lo, hi = lo + QL_UDP_OMIT_REGION;
	/* The sender's last warm-up sequence number is P_end = first + P - 1;
	 * every s <= P_end is warm-up. Exact when lo - 1 <= P_end < hi. */
	uint64_t p_end = rx->first_seq + sender_omit_packets;   /* one past */
	if (p_end < lo || p_end > hi) {
		uint64_t d = p_end < lo ? lo - p_end : p_end - hi;
		return ql_err_set(e, ERANGE, "ERANGE",
				  "the sender ended its warm-up %llu datagrams %s the region this "
				  "receiver recorded around its own (%llu..%llu)",
				  (unsigned long long)d, p_end < lo ? "before" : "after",
				  (unsigned long long)lo, (unsigned long long)hi - 1);
	}
	uint64_t end = rx->first_seq + rx->finished_sent;
	if (end > hi)
		end = hi;
	int n = 0;
	for (uint64_t s = lo; s < end; s++) {
		uint32_t r = rx->omit_rec[s - lo];
		if (r == 0)
			continue;   /* not booked (cannot happen once finished) */
		uint32_t idx = (r & OREC_IDX) == OREC_IDX ? QL_UDP_MOVE_WARMUP : (r & OREC_IDX) - 1;
		int warm = s < p_end;
		int booked_warm = idx == QL_UDP_MOVE_WARMUP || idx < first_nonomitted;
		if (warm == booked_warm)
			continue;
		ql_udp_move m = { idx, warm, (r & OREC_LOST) != 0, (r & OREC_OOO) != 0 };
		move(ctx, &m);
		n++;
	}
	return n;
}

/* ------------------------------------------------------------- TCP_INFO -- */

#define TI_HAS(len, f) \
	(offsetof(struct tcp_info, f) + sizeof(((struct tcp_info *)0)->f) <= (len))

static uint64_t bytes_to_bits(uint64_t v)
{
	return v > UINT64_MAX / 8 ? UINT64_MAX : v * 8;
}

void ql_tcp_sample_from_info(ql_tcp_sample *s, const void *info,
			     size_t optlen, int64_t time_ns)
{
	struct tcp_info ti;
	size_t len = optlen < sizeof ti ? optlen : sizeof ti;

	/* Copy only what the kernel wrote: the caller's struct may be an
	 * older/shorter definition than ours. */
	memset(&ti, 0, sizeof ti);
	memcpy(&ti, info, len);
	memset(s, 0, sizeof *s);
	s->time_ns = time_ns;

	if (TI_HAS(len, tcpi_rttvar)) {
		s->rtt_us = ti.tcpi_rtt;
		s->rttvar_us = ti.tcpi_rttvar;
		s->valid |= QL_TCPS_RTT;
	}
	if (TI_HAS(len, tcpi_snd_cwnd) && ti.tcpi_snd_mss > 0) {
		s->snd_mss_bytes = ti.tcpi_snd_mss;
		s->snd_cwnd_segments = ti.tcpi_snd_cwnd;
		s->snd_ssthresh_segments = ti.tcpi_snd_ssthresh;
		s->snd_cwnd_bytes = (uint64_t)ti.tcpi_snd_cwnd * ti.tcpi_snd_mss;
		s->valid |= QL_TCPS_CWND;
	}
	if (TI_HAS(len, tcpi_total_retrans)) {
		s->total_retrans = ti.tcpi_total_retrans;
		s->unacked_segments = ti.tcpi_unacked;
		s->lost_segments = ti.tcpi_lost;
		s->valid |= QL_TCPS_RETRANS;
	}
	if (TI_HAS(len, tcpi_pacing_rate)) {
		if (ti.tcpi_pacing_rate == ~(uint64_t)0) {
			s->pacing_unlimited = 1;
		} else {
			s->pacing_rate_bps = bytes_to_bits(ti.tcpi_pacing_rate);
			s->valid |= QL_TCPS_PACING;
		}
	}
	if (TI_HAS(len, tcpi_bytes_received)) {
		s->bytes_acked = ti.tcpi_bytes_acked;
		s->bytes_received = ti.tcpi_bytes_received;
		s->valid |= QL_TCPS_BYTES;
	}
	if (TI_HAS(len, tcpi_notsent_bytes)) {
		s->notsent_bytes = ti.tcpi_notsent_bytes;
		s->valid |= QL_TCPS_NOTSENT;
	}
	/* ~0U means "no RTT sample yet", not a value. */
	if (TI_HAS(len, tcpi_min_rtt) && ti.tcpi_min_rtt != ~(uint32_t)0) {
		s->min_rtt_us = ti.tcpi_min_rtt;
		s->valid |= QL_TCPS_MIN_RTT;
	}
	if (TI_HAS(len, tcpi_delivery_rate)) {
		s->delivery_rate_bps = bytes_to_bits(ti.tcpi_delivery_rate);
		s->delivery_app_limited = ti.tcpi_delivery_rate_app_limited;
		s->valid |= QL_TCPS_DELIVERY;
	}
	if (TI_HAS(len, tcpi_bytes_retrans)) {
		s->bytes_sent = ti.tcpi_bytes_sent;
		s->bytes_retrans = ti.tcpi_bytes_retrans;
		s->valid |= QL_TCPS_BYTES_SENT;
	}
	if (TI_HAS(len, tcpi_pmtu) && ti.tcpi_pmtu > 0) {
		s->pmtu_bytes = ti.tcpi_pmtu;
		s->valid |= QL_TCPS_PMTU;
	}
	if (TI_HAS(len, tcpi_snd_wnd)) {
		s->snd_wnd_bytes = ti.tcpi_snd_wnd;
		s->valid |= QL_TCPS_SND_WND;
	}
}

int ql_tcp_sample_read(int fd, ql_tcp_sample *s, int64_t time_ns, ql_err *e)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;

	memset(&ti, 0, sizeof ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0) {
		int err = errno;
		memset(s, 0, sizeof *s);
		s->time_ns = time_ns;
		return ql_err_set(e, err, NULL, "getsockopt(TCP_INFO) on fd %d: %s",
				  fd, strerror(err));
	}
	ql_tcp_sample_from_info(s, &ti, len, time_ns);
	return 0;
}

int ql_tcp_retrans_delta(const ql_tcp_sample *prev, const ql_tcp_sample *cur,
			 uint64_t *delta)
{
	if (!(prev->valid & QL_TCPS_RETRANS) || !(cur->valid & QL_TCPS_RETRANS))
		return -ENODATA;
	*delta = (uint32_t)(cur->total_retrans - prev->total_retrans);
	return 0;
}

void ql_tcp_summary_init(ql_tcp_summary *sum, const ql_tcp_sample *baseline)
{
	memset(sum, 0, sizeof *sum);
	if (baseline && (baseline->valid & QL_TCPS_RETRANS))
		sum->last_total_retrans = baseline->total_retrans;
}

int ql_tcp_summary_add(ql_tcp_summary *sum, const ql_tcp_sample *s,
		       uint64_t *retrans_delta)
{
	if (s->valid & QL_TCPS_RTT) {
		if (sum->rtt_samples == 0 || s->rtt_us < sum->min_rtt_us)
			sum->min_rtt_us = s->rtt_us;
		if (s->rtt_us > sum->max_rtt_us)
			sum->max_rtt_us = s->rtt_us;
		sum->sum_rtt_us += s->rtt_us;
		sum->rtt_samples++;
	}
	if (s->valid & QL_TCPS_CWND) {
		if (s->snd_cwnd_bytes > sum->max_snd_cwnd_bytes)
			sum->max_snd_cwnd_bytes = s->snd_cwnd_bytes;
		sum->cwnd_samples++;
	}
	if (s->valid & QL_TCPS_SND_WND) {
		if (s->snd_wnd_bytes > sum->max_snd_wnd_bytes)
			sum->max_snd_wnd_bytes = s->snd_wnd_bytes;
		sum->snd_wnd_samples++;
	}
	if (!(s->valid & QL_TCPS_RETRANS))
		return -ENODATA;
	{
		uint64_t d = (uint32_t)(s->total_retrans - sum->last_total_retrans);
		sum->retransmits += d;
		sum->last_total_retrans = s->total_retrans;
		sum->retrans_samples++;
		if (retrans_delta)
			*retrans_delta = d;
	}
	return 0;
}

double ql_tcp_summary_mean_rtt_us(const ql_tcp_summary *sum)
{
	if (sum->rtt_samples == 0)
		return 0.0;
	return (double)sum->sum_rtt_us / (double)sum->rtt_samples;
}

/* ------------------------------------------------------------------ CPU -- */

static int64_t tv_ns(const struct timeval *tv)
{
	return (int64_t)tv->tv_sec * QL_NS_PER_S + (int64_t)tv->tv_usec * 1000;
}

int ql_cpu_mark_now(ql_cpu_mark *m, ql_err *e)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return ql_err_set(e, errno, NULL, "getrusage: %s", strerror(errno));
	m->wall_ns = ql_now_ns();
	m->user_ns = tv_ns(&ru.ru_utime);
	m->system_ns = tv_ns(&ru.ru_stime);
	return 0;
}

int64_t ql_cpu_thread_self_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return -1;
	return (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
}

int ql_cpu_thread_ns(pthread_t thread, int64_t *cpu_ns, ql_err *e)
{
	clockid_t cid;
	struct timespec ts;
	int rc = pthread_getcpuclockid(thread, &cid);

	if (rc != 0)
		return ql_err_set(e, rc, NULL, "pthread_getcpuclockid: %s",
				  strerror(rc));
	if (clock_gettime(cid, &ts) < 0)
		return ql_err_set(e, errno, NULL,
				  "clock_gettime(thread CPU clock): %s",
				  strerror(errno));
	*cpu_ns = (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
	return 0;
}

double ql_cpu_pct(int64_t cpu_ns, int64_t wall_ns)
{
	if (wall_ns <= 0 || cpu_ns < 0)
		return 0.0;
	return 100.0 * (double)cpu_ns / (double)wall_ns;
}

void ql_cpu_usage_compute(const ql_cpu_mark *start, const ql_cpu_mark *end,
			  const int64_t *thread_cpu_ns, size_t n,
			  ql_cpu_usage *out)
{
	int64_t wall = sat_sub(end->wall_ns, start->wall_ns);
	int64_t user = sat_sub(end->user_ns, start->user_ns);
	int64_t sys = sat_sub(end->system_ns, start->system_ns);
	int64_t busiest = 0;
	size_t i;

	memset(out, 0, sizeof *out);
	if (wall <= 0)
		return;
	out->user_pct = ql_cpu_pct(user, wall);
	out->system_pct = ql_cpu_pct(sys, wall);
	out->total_pct = out->user_pct + out->system_pct;
	for (i = 0; thread_cpu_ns && i < n; i++)
		if (thread_cpu_ns[i] > busiest)
			busiest = thread_cpu_ns[i];
	out->busiest_thread_pct = ql_cpu_pct(busiest, wall);
	/* One thread cannot exceed one core; more is clock granularity. */
	if (out->busiest_thread_pct > 100.0)
		out->busiest_thread_pct = 100.0;
	out->cpu_limited = out->busiest_thread_pct >= QL_CPU_LIMITED_PCT;
}
