/*
 * report.c - the reporter: snapshots on the interval grid, interval records,
 * the live queue handed to the caller. Stands on test.h.
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "../timer.h"

static void snapshot_stream(ql_test *t, ql_stream *s, int64_t now, ql_entry *x,
			    double secs, int omit_end)
{
	memset(x, 0, sizeof *x);
	x->id = s->id;
	x->dir = s->dir;
	x->role = s->sender ? QL_ROLE_SENDER : QL_ROLE_RECEIVER;
	x->side = t->side;
	x->seconds = secs;
	if (t->proto == QL_PROTO_UDP && !s->sender) {
		ql_udp_counts c;
		double jit = 0;
		int mark_rc = 0;
		ql_err me;
		pthread_mutex_lock(&s->mu);
		/* The warm-up ends with this snapshot: keep which interval books
		 * each sequence number near the boundary from here on, so the
		 * books can be split at the sender's boundary at the end. */
		if (omit_end)
			mark_rc = ql_udp_rx_mark_omit(&s->rx, &me);
		ql_udp_rx_snapshot(&s->rx, realtime_ns(), &c, &jit);
		uint64_t samples = s->rx.jitter.samples;
		pthread_mutex_unlock(&s->mu);
		if (mark_rc < 0)
			add_warning(t, "stream %d: %s; lost + unique may differ from sent "
				    "near the end of the warm-up", s->id, me.msg);
		x->bytes = c.unique_bytes;
		x->packets = c.packets;
		x->unique_packets = c.unique_packets;
		x->lost_packets = c.lost_packets;
		x->duplicate_packets = c.duplicate_packets;
		x->out_of_order_packets = c.out_of_order_packets;
		x->late_packets = c.late_packets;
		x->invalid_packets = c.invalid_packets;
		x->jitter_pairs = c.jitter_pairs;
		x->jitter_abs_sum_ms = (double)c.jitter_abs_sum_ns / 1e6;
		x->valid |= QL_E_PACKETS | QL_E_UDPRX | QL_E_JITMEAN;
		if (samples >= 2) {
			x->jitter_ms = jit;
			x->valid |= QL_E_JITTER;
		}
	} else {
		uint64_t b = atomic_load(&s->bytes), p = atomic_load(&s->packets),
			 w = atomic_load(&s->writes);
		if (omit_end && t->proto == QL_PROTO_UDP && s->sender && t->prm.bandwidth_bps &&
		    t->omit_ns > 0) {
			/* A paced sender's warm-up holds the slots scheduled
			 * before its end (slot j at j x length / rate); one
			 * sent at the boundary before this tick read the
			 * counter belongs to the measured part (2499 of 2500
			 * were counted after -O 1 at 10 Mbit/s). */
			unsigned __int128 bits_ns = (unsigned __int128)t->prm.len_bytes * 8 * QL_NS_PER_S;
			uint64_t warm = (uint64_t)(((unsigned __int128)(uint64_t)t->omit_ns *
						    t->prm.bandwidth_bps + bits_ns - 1) / bits_ns);
			if (p > warm) {
				/* (the bytes counter trails the packets one
				 * by at most a batch being added) */
				uint64_t d = (p - warm) * (uint64_t)t->prm.len_bytes;
				b = b > d ? b - d : 0;
				p = warm;
			} else {
				/* behind at the boundary: its next datagrams
				 * are warm-up slots sent late */
				s->warm_debt = warm - p;
			}
		} else if (s->warm_debt && p > s->snap_packets) {
			uint64_t d = p - s->snap_packets < s->warm_debt ? p - s->snap_packets
									: s->warm_debt;
			s->warm_debt -= d;
			s->snap_packets += d;
			s->snap_bytes += d * (uint64_t)t->prm.len_bytes;
		}
		x->bytes = b - s->snap_bytes;
		x->writes = w - s->snap_writes;
		s->snap_bytes = b;
		s->snap_writes = w;
		if (s->sender)   /* send calls; reads are not reported */
			x->valid |= QL_E_WRITES;
		if (t->proto == QL_PROTO_UDP) {
			x->packets = p - s->snap_packets;
			s->snap_packets = p;
			x->valid |= QL_E_PACKETS;
		}
	}
	if (t->proto == QL_PROTO_TCP && s->sender && s->fd >= 0) {
		ql_tcp_sample ts;
		if (ql_tcp_sample_read(s->fd, &ts, now, NULL) == 0 && ts.valid) {
			if (!s->tsum_init) {
				/* the kernel's counter starts at 0 on connect */
				ql_tcp_summary_init(&s->tsum, NULL);
				s->tsum_init = 1;
			}
			uint64_t d;
			if (ql_tcp_summary_add(&s->tsum, &ts, &d) == 0) {
				x->retransmits = d;
				x->valid |= QL_E_RETRANS;
			}
			if (ts.valid & QL_TCPS_RTT) {
				x->rtt_us = ts.rtt_us;
				x->rttvar_us = ts.rttvar_us;
				x->valid |= QL_E_RTT;
			}
			if (ts.valid & QL_TCPS_CWND) {
				x->snd_cwnd_bytes = ts.snd_cwnd_bytes;
				x->valid |= QL_E_CWND;
			}
			if (ts.valid & QL_TCPS_SND_WND) {
				x->snd_wnd_bytes = ts.snd_wnd_bytes;
				x->valid |= QL_E_SNDWND;
			}
			if (ts.valid & QL_TCPS_PMTU) {
				x->pmtu_bytes = ts.pmtu_bytes;
				x->valid |= QL_E_PMTU;
			}
			if ((ts.valid & QL_TCPS_PACING) && !ts.pacing_unlimited) {
				x->pacing_rate_bps = ts.pacing_rate_bps;
				x->valid |= QL_E_PACING;
			}
			if (ts.valid & QL_TCPS_DELIVERY) {
				x->delivery_rate_bps = ts.delivery_rate_bps;
				x->valid |= QL_E_DELIVERY;
			}
		}
	}
	ql_entry_finish(x);
}

/* Append an interval covering [last_snap, now]; publish unless held. */
/* Copy iv (deep) and append it to the live queue; caller holds t->mu. */
static ql_interval *live_append(ql_test *t, const ql_interval *iv, int extra)
{
	if (t->nlive == t->clive) {
		int nc = t->clive ? t->clive * 2 : 16;
		ql_interval *n = realloc(t->live, (size_t)nc * sizeof *n);
		if (!n)
			return NULL;
		t->live = n;
		t->clive = nc;
	}
	ql_interval *c = &t->live[t->nlive];
	*c = *iv;
	c->entries = calloc((size_t)(iv->nentries + extra) + 1, sizeof *c->entries);
	if (!c->entries)
		return NULL;
	memcpy(c->entries, iv->entries, (size_t)iv->nentries * sizeof *c->entries);
	t->nlive++;
	return c;
}

/* Grid slots [*s0, *s1) that an interval covers (at least one). */
void iv_slots(const ql_test *t, const ql_interval *iv, int64_t *s0, int64_t *s1)
{
	*s0 = grid_slot(t, iv->start_s);
	*s1 = grid_slot(t, iv->end_s);
	if (*s1 <= *s0)
		*s1 = *s0 + 1;
}

/* Queue local interval iv (slots [s0, s1)) as a live record with the
 * pending peer intervals of those slots (with last: of every later slot
 * too, the peer measured longer). Peer intervals of earlier slots came
 * after their record was released: the live view leaves them out (the
 * final result has them). Caller holds t->mu. */
static void live_emit(ql_test *t, const ql_interval *iv, int64_t s0, int64_t s1, int last,
		      int missing)
{
	int extra = 0;
	for (int j = 0; j < t->nrlive; j++)
		if (last || grid_slot(t, t->rlive[j].start_s) < s1)
			extra += t->rlive[j].nentries;
	ql_interval *c = live_append(t, iv, extra);
	if (c) {
		c->peer_live = t->peer_live;
		c->peer_missing = missing;
	}
	int keep = 0;
	for (int j = 0; j < t->nrlive; j++) {
		ql_interval *b = &t->rlive[j];
		int64_t g = grid_slot(t, b->start_s);
		if (!last && g >= s1) {
			t->rlive[keep++] = *b;
			continue;
		}
		if (c && g >= s0)
			ql_interval_fold_peer(c, iv->nentries + extra, b, !t->side);
		ql_interval_clear(b);
	}
	t->nrlive = keep;
	if (c)
		ql_interval_sums(c);
}

/* Release ticked local intervals to the live queue, oldest first: one
 * goes when the peer's live series covers its slots, or hold_ns after its
 * end (its peer entries then show as missing), or at once when the peer
 * sends no live series (a stock iperf3). Caller holds t->mu. */
void live_release(ql_test *t, int64_t now)
{
	while (t->side == QL_SIDE_CLIENT && t->nrel < t->npub) {
		const ql_interval *iv = &t->iv[t->nrel];
		int64_t s0, s1;
		iv_slots(t, iv, &s0, &s1);
		int64_t due = t->start_ns + (int64_t)llround(iv->end_s * 1e9) + t->hold_ns;
		int waiting = t->peer_live && t->peer_upto < s1;
		if (waiting && now < due)
			break;
		live_emit(t, iv, s0, s1, 0, waiting);
		t->nrel++;
	}
}

void take_snapshot_at(ql_test *t, int publish, int64_t now, int64_t nominal)
{
	ql_interval iv;
	memset(&iv, 0, sizeof iv);
	iv.start_s = (double)(t->last_snap_ns - t->start_ns) / 1e9;
	iv.end_s = (double)(now - t->start_ns) / 1e9;
	iv.seconds = (double)(now - t->last_snap_ns) / 1e9;
	/* The last interval of a timed TCP test sits on the grid's end; its
	 * seconds say how long its bytes took, the bounded tail included. */
	if (t->proto == QL_PROTO_TCP && !t->limited && now > planned_end_ns(t) &&
	    t->last_snap_ns < planned_end_ns(t))
		iv.end_s = (double)(planned_end_ns(t) - t->start_ns) / 1e9;
	/* Omitted: the interval's grid end lies inside the warm-up. */
	iv.omitted = t->omit_ns > 0 && nominal <= t->start_ns + t->omit_ns;
	/* The last omitted one: the grid's next tick lies beyond the warm-up
	 * (maybe_tick skips the ticks that passed). */
	int omit_end = iv.omitted && now >= t->start_ns + t->omit_ns;
	iv.entries = calloc((size_t)t->nstreams, sizeof *iv.entries);
	if (iv.entries) {
		iv.nentries = t->nstreams;
		for (int i = 0; i < t->nstreams; i++)
			snapshot_stream(t, &t->st[i], now, &iv.entries[i], iv.seconds,
					omit_end);
	}
	ql_interval_sums(&iv);
	t->last_snap_ns = now;
	pthread_mutex_lock(&t->mu);
	if (t->niv == t->civ) {
		int nc = t->civ ? t->civ * 2 : 16;
		ql_interval *n = realloc(t->iv, (size_t)nc * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&t->mu);
			ql_interval_clear(&iv);
			return;
		}
		t->iv = n;
		t->civ = nc;
	}
	t->iv[t->niv++] = iv;
	if (publish) {
		t->npub = t->niv;
		live_release(t, ql_now_ns());
		pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&t->mu);
}

/* The last interval ends when the last byte was counted: the senders'
 * stop, or the last arrival during the drain (the idle rest of the drain
 * is not measurement time). */
void final_snapshot(ql_test *t, int64_t send_end_ns)
{
	int64_t end = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		/* a sender's TCP_INFO keeps meaning something until its data
		 * is acknowledged (done_ns, after the join) */
		int64_t l = s->sender ? s->done_ns : atomic_load(&s->last_rx_ns);
		if (l > end)
			end = l;
	}
	/* The control thread's stop time only stands in for senders that
	 * never ran: it comes later than anything counted, and a final
	 * interval reaching it would hold no bytes (regress 004). */
	if (end == 0 && local_has(t, 1))
		end = send_end_ns;
	int64_t now = ql_now_ns();
	if (end > now)
		end = now;
	/* A timed TCP test whose tick at the planned end has fired: its tail
	 * ended within the slack, and the grid has no interval after its end
	 * (a slow link's queue made three more, regress 017). */
	if (t->proto == QL_PROTO_TCP && !t->limited && t->niv > 0 &&
	    t->last_snap_ns >= planned_end_ns(t)) {
		t->end_ns = t->last_snap_ns;
		return;
	}
	if (end <= t->last_snap_ns && t->niv > 0) {
		/* Nothing was counted after the last tick (it fired during the
		 * drain, after the last arrival): an interval from there to now
		 * would be idle waiting with no bytes (regress 004). */
		t->end_ns = t->last_snap_ns;
		return;
	}
	if (end < t->last_snap_ns)
		end = t->last_snap_ns;
	if (end == t->last_snap_ns && end < now)
		end = now;   /* never a zero-length interval */
	t->end_ns = end;
	take_snapshot_at(t, 0, end, end);
}

/* The latest moment anything was counted: a running sender counts until
 * now, a joined one until its data was acknowledged, a receiver until its
 * last arrival. */
static int64_t last_activity_ns(ql_test *t, int64_t now)
{
	int64_t a = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		int64_t l = !s->sender ? atomic_load(&s->last_rx_ns) :
			    s->th_started ? now : s->done_ns;
		/* a timed TCP sender writes nothing after the planned end (its
		 * acknowledgement wait is no measured time) */
		if (s->sender && t->proto == QL_PROTO_TCP && l > planned_end_ns(t))
			l = planned_end_ns(t);
		if (l > a)
			a = l;
	}
	return a;
}

/* When the next grid tick is due. A tick at the planned end of a timed test
 * would leave a sliver of an interval after it, so it waits one slack: the
 * final snapshot closes that interval if the test ends by then; a test that
 * goes on (a receiver draining, a sender waiting for its acknowledgements)
 * gets it a little late instead of one double-length interval. */
static int64_t tick_due(ql_test *t, int64_t *nominal)
{
	int64_t next = ql_grid_tick_ns(t->start_ns, t->omit_ns, t->period_ns, t->tick_k);
	int64_t planned = t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
	int64_t slack = end_slack_ns(t);
	if (nominal)
		*nominal = next;
	/* a timed TCP test's grid ends with the planned end's tick (a control
	 * thread held up in a read once let the tick after it fire in the
	 * tail) */
	if (t->proto == QL_PROTO_TCP && !t->limited && next >= planned + slack)
		return INT64_MAX;
	if (!t->limited && next > planned - slack && next < planned + slack)
		/* a timed TCP test's tail is bounded: the final snapshot
		 * normally takes this tick */
		return next + (t->proto == QL_PROTO_TCP ? tcp_tail_ns(t) : slack);
	return next;
}

void maybe_tick(ql_test *t)
{
	int64_t now = ql_now_ns();
	int64_t next;
	int64_t due = tick_due(t, &next);
	if (now < due)
		return;
	int64_t end = now;
	if (due > next) {
		/* The tick at the planned end, held back one slack: the interval
		 * closes at the grid point or the last thing counted after it,
		 * not at the idle end of the slack (a receiver whose data
		 * stopped at the planned end would read low, regress 004). */
		int64_t a = last_activity_ns(t, now);
		end = a > next ? a : next;
		if (end > now || end <= t->last_snap_ns)
			end = now;
	}
	take_snapshot_at(t, 1, end, next);
	/* Skip grid points that passed while we were busy (stay on the grid). */
	while (ql_grid_tick_ns(t->start_ns, t->omit_ns, t->period_ns, t->tick_k) <= now)
		t->tick_k++;
}

int64_t next_tick(ql_test *t)
{
	return tick_due(t, NULL);
}

/* When a control loop must look again: the next tick, or the planned end
 * of a timed test (the tick there waits a slack; the senders' stop does
 * not). */
int64_t wake_at(ql_test *t)
{
	int64_t w = next_tick(t);
	int64_t planned = t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
	if (!t->limited && planned > ql_now_ns() && planned < w)
		w = planned;
	return w;
}

/* Grid slot of an interval that starts start_s after its side's start: the
 * number of grid ticks at or before that moment. Both ends tick the same
 * grid from their own start, so equal slots are the same stretch of the
 * test, whatever the offset between the two clocks' starts. */
int64_t grid_slot(const ql_test *t, double start_s)
{
	int64_t at = (int64_t)llround(start_s * 1e9) + 1000, p = t->period_ns;
	if (p <= 0 || at < 0)
		return 0;
	if (t->omit_ns <= 0 || at < t->omit_ns)
		return at / p;
	int64_t m = (t->omit_ns + p - 1) / p - 1;
	return m + 1 + (at - t->omit_ns) / p;
}

/* Append peer interval iv (taken over) to the pending ones. Caller holds
 * t->mu. Returns 0, or -ENOMEM (iv cleared). */
int rlive_push(ql_test *t, ql_interval *iv)
{
	if (t->nrlive == t->crlive) {
		int nc = t->crlive ? t->crlive * 2 : 8;
		ql_interval *n = realloc(t->rlive, (size_t)nc * sizeof *n);
		if (!n) {
			ql_interval_clear(iv);
			return -ENOMEM;
		}
		t->rlive = n;
		t->crlive = nc;
	}
	t->rlive[t->nrlive++] = *iv;
	return 0;
}

/* Publish every interval and mark the test over. */
void test_finish(ql_test *t, int rc)
{
	pthread_mutex_lock(&t->mu);
	t->rc = rc;
	if (t->side == QL_SIDE_CLIENT) {
		/* The peer's intervals that only came with its results join the
		 * pending ones; every local interval not yet shown goes now with
		 * the peer's entries of its slots (the last one takes the rest). */
		const ql_peer_results *pr = &t->peer_res;
		for (int j = t->nrlive_total; j < pr->nintervals; j++) {
			ql_interval c = pr->intervals[j];
			c.entries = malloc(((size_t)c.nentries + 1) * sizeof *c.entries);
			if (!c.entries)
				break;
			memcpy(c.entries, pr->intervals[j].entries, (size_t)c.nentries * sizeof *c.entries);
			if (rlive_push(t, &c) < 0)
				break;
		}
		for (int k = t->nrel; k < t->niv; k++) {
			int64_t s0, s1;
			iv_slots(t, &t->iv[k], &s0, &s1);
			/* without the server's results (a failed exchange) the
			 * slots its live series did not reach stay missing */
			live_emit(t, &t->iv[k], s0, s1, k == t->niv - 1,
				  t->peer_live && !pr->qoslab && t->peer_upto < s1);
		}
		for (int j = 0; j < t->nrlive; j++)
			ql_interval_clear(&t->rlive[j]);
		t->nrlive = 0;
		t->nrel = t->niv;
	}
	t->npub = t->niv;
	t->finished = 1;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}
