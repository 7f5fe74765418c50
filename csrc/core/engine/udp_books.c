/*
 * udp_books.c - the UDP books: the warm-up split of each stream's counts and
 * closing the books with the sender's final count. Stands on test.h.
 */
#include "udp_books.h"

#include <pthread.h>

#include "test.h"

/* A paced UDP sender that fell behind its schedule by more than its slack
 * dropped the missed slots (no bursts): say so once per side, with the
 * share and the worst stream. */
void warn_skipped_slots(ql_test *t)
{
	uint64_t skipped = 0, planned = 0;
	int n = 0, worst = -1;
	double worst_pct = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (!s->sender)
			continue;
		uint64_t p = s->planned_slots;
		planned += p;
		if (s->skipped_slots == 0)
			continue;
		double pct = 100.0 * (double)s->skipped_slots / (double)p;
		skipped += s->skipped_slots;
		n++;
		if (pct > worst_pct) {
			worst_pct = pct;
			worst = s->id;
		}
	}
	if (n == 0)
		return;
	add_warning(t, "%s's senders fell behind their schedule and dropped %llu of %llu datagram "
		    "slots (%.2f %%; %d stream%s, the worst stream %d: %.2f %%): a busy CPU or a "
		    "full socket or qdisc queue on the sending host, not loss on the path",
		    ql_side_label(t->side), (unsigned long long)skipped, (unsigned long long)planned,
		    100.0 * (double)skipped / (double)planned, n, n == 1 ? "" : "s", worst, worst_pct);
}

/* Every sequence number a receiving stream booked (unique or lost), the
 * warm-up included. */
uint64_t udp_booked_packets(ql_test *t, int i)
{
	uint64_t n = 0;
	for (int k = 0; k < t->niv; k++)
		if (i < t->iv[k].nentries)
			n += t->iv[k].entries[i].unique_packets + t->iv[k].entries[i].lost_packets;
	return n;
}

/* What one of our sending streams counted as measured (after the warm-up). */
uint64_t udp_measured_sent(ql_test *t, int i)
{
	uint64_t n = 0;
	for (int k = 0; k < t->niv; k++)
		if (!t->iv[k].omitted && i < t->iv[k].nentries)
			n += t->iv[k].entries[i].packets;
	return n;
}

const ql_peer_stream *peer_stream(const ql_peer_results *pr, int id)
{
	for (int i = 0; i < pr->nstreams; i++)
		if (pr->streams[i].id == id)
			return &pr->streams[i];
	return NULL;
}

const ql_entry *peer_entry(const ql_peer_results *pr, int id, int role)
{
	for (int i = 0; i < pr->nentries; i++)
		if (pr->entries[i].id == id && pr->entries[i].role == role)
			return &pr->entries[i];
	return NULL;
}

/* Move one sequence number's booking between the warm-up and the measured
 * intervals (ql_udp_rx_omit_split). */
typedef struct omit_mover {
	ql_test *t;
	int i;          /* stream index */
	int k0;         /* first measured interval */
	int bad;        /* a record did not hold what the books said */
} omit_mover;

static int entry_take(ql_entry *x, const ql_udp_move *m, uint64_t len)
{
	if (m->lost) {
		if (x->lost_packets < 1)
			return -1;
		x->lost_packets--;
		return 0;
	}
	/* out_of_order <= unique holds afterwards too */
	if (x->unique_packets < 1 || x->packets < 1 || x->bytes < len ||
	    (m->out_of_order ? x->out_of_order_packets < 1
			     : x->out_of_order_packets >= x->unique_packets))
		return -1;
	x->unique_packets--;
	x->packets--;
	x->bytes -= len;
	if (m->out_of_order)
		x->out_of_order_packets--;
	return 0;
}

static void entry_give(ql_entry *x, const ql_udp_move *m, uint64_t len)
{
	if (m->lost) {
		x->lost_packets++;
		return;
	}
	x->unique_packets++;
	x->packets++;
	x->bytes += len;
	if (m->out_of_order)
		x->out_of_order_packets++;
}

static void omit_move(void *ctx, const ql_udp_move *m)
{
	omit_mover *o = ctx;
	ql_test *t = o->t;
	int src = m->index < (uint32_t)t->niv ? (int)m->index : t->niv - 1;
	int dst = m->to_omitted ? o->k0 - 1 : o->k0;
	if (o->i >= t->iv[dst].nentries) {
		o->bad = 1;
		return;
	}
	uint64_t len = (uint64_t)t->prm.len_bytes;
	if (m->index == QL_UDP_MOVE_WARMUP) {
		/* Received before the books marked the warm-up's end: it is in
		 * one of the warm-up intervals, the later ones the likelier. */
		ql_udp_move w = *m;
		for (src = o->k0 - 1; src >= 0; src--) {
			if (o->i >= t->iv[src].nentries)
				continue;
			ql_entry *x = &t->iv[src].entries[o->i];
			/* in order or not is unknown: whichever the record has */
			w.out_of_order = 0;
			if (entry_take(x, &w, len) == 0)
				break;
			w.out_of_order = 1;
			if (entry_take(x, &w, len) == 0)
				break;
		}
		if (src < 0)
			o->bad = 1;
		else
			entry_give(&t->iv[dst].entries[o->i], &w, len);
		return;
	}
	if (src == dst)
		return;   /* the finish share, folded into the first measured one */
	if (o->i >= t->iv[src].nentries || entry_take(&t->iv[src].entries[o->i], m, len) < 0) {
		o->bad = 1;
		return;
	}
	entry_give(&t->iv[dst].entries[o->i], m, len);
}

/* Datagrams a peer's sending stream counted in its warm-up, or -1 when its
 * results do not tell: a qoslab peer's extras (its total minus its measured
 * count), iperf3's omitted_packets, or, from iperf3 3.12 (which sends
 * neither), its total minus its measured bytes over the datagram length. */
int64_t peer_sender_warmup(ql_test *t, const ql_peer_results *pr,
			   const ql_peer_stream *ps, int id)
{
	const ql_entry *pe = peer_entry(pr, id, QL_ROLE_SENDER);
	if (pe && (pe->valid & QL_E_PACKETS))
		return pe->packets <= ps->packets ? (int64_t)(ps->packets - pe->packets) : -1;
	if (ps->has_omitted)
		return ps->omitted_packets <= ps->packets ? (int64_t)ps->omitted_packets : -1;
	uint64_t len = (uint64_t)t->prm.len_bytes;
	if (len > 0 && ps->bytes % len == 0 && ps->bytes / len <= ps->packets)
		return (int64_t)(ps->packets - ps->bytes / len);
	return -1;
}

/* End the receiver's warm-up where the sender ended it (caller holds
 * t->mu; this takes s->mu inside it): the datagrams the
 * sender counted in its warm-up are the first P sequence numbers (P = its
 * total minus its measured count, from a qoslab peer's extras), so the
 * measured lost + unique == the sender's measured sent exactly. A stock
 * iperf3 peer sends no measured count: the split stays on our clock. */
static void udp_omit_split(ql_test *t, ql_stream *s, int i, const ql_peer_results *pr,
			   const ql_peer_stream *ps)
{
	if (!s->rx.omit_rec)
		return;
	int k0 = 0;
	while (k0 < t->niv && t->iv[k0].omitted)
		k0++;
	if (k0 == 0 || k0 >= t->niv)
		return;
	int64_t warm = peer_sender_warmup(t, pr, ps, s->id);
	if (warm < 0) {
		add_warning(t, "stream %d: the sender's results do not say how many datagrams "
			    "it sent in its warm-up; the warm-up ends on this side's clock", s->id);
		return;
	}
	omit_mover o = { t, i, k0, 0 };
	ql_err e;
	pthread_mutex_lock(&s->mu);
	int rc = ql_udp_rx_omit_split(&s->rx, (uint64_t)warm, (uint32_t)k0,
				      omit_move, &o, &e);
	pthread_mutex_unlock(&s->mu);
	if (rc < 0)
		add_warning(t, "stream %d: %s; lost + unique may differ from sent near "
			    "the end of the warm-up", s->id, e.msg);
	if (o.bad)
		add_warning(t, "stream %d: the warm-up split found an interval record "
			    "short of what the books booked in it", s->id);
	if (rc > 0)
		for (int k = 0; k < t->niv; k++) {
			if (i < t->iv[k].nentries)
				ql_entry_finish(&t->iv[k].entries[i]);
			ql_interval_sums(&t->iv[k]);
		}
}

/* Close the UDP books of our receiving streams with the peer's sent counts
 * and fold the final share (the remaining loss) into the last interval. */
void close_udp_books(ql_test *t, const ql_peer_results *pr)
{
	if (t->proto != QL_PROTO_UDP)
		return;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (s->sender)
			continue;
		const ql_peer_stream *ps = pr ? peer_stream(pr, s->id) : NULL;
		if (!ps)
			continue;
		ql_err e;
		pthread_mutex_lock(&s->mu);
		int rc = ql_udp_rx_finish(&s->rx, ps->packets, &e);
		ql_udp_counts c;
		double jit;
		ql_udp_rx_snapshot(&s->rx, realtime_ns(), &c, &jit);
		pthread_mutex_unlock(&s->mu);
		if (rc < 0) {
			add_warning(t, "stream %d: %s", s->id, e.msg);
			continue;
		}
		s->sent_final = ps->packets;
		/* The interval records are shared with the live queue (a
		 * client's next_interval copies them under t->mu). */
		pthread_mutex_lock(&t->mu);
		if (t->niv > 0) {
			ql_entry *x = &t->iv[t->niv - 1].entries[i];
			x->lost_packets += c.lost_packets;
			x->unique_packets += c.unique_packets;
			x->bytes += c.unique_bytes;
			x->packets += c.packets;
			x->duplicate_packets += c.duplicate_packets;
			x->late_packets += c.late_packets;
			x->invalid_packets += c.invalid_packets;
			x->out_of_order_packets += c.out_of_order_packets;
			if (x->valid & QL_E_JITMEAN) {
				x->jitter_pairs += c.jitter_pairs;
				x->jitter_abs_sum_ms += (double)c.jitter_abs_sum_ns / 1e6;
			}
			ql_entry_finish(x);
			ql_interval_sums(&t->iv[t->niv - 1]);
		}
		udp_omit_split(t, s, i, pr, ps);
		pthread_mutex_unlock(&t->mu);
	}
}
