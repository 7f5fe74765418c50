/*
 * impair.c - sch_netem's enqueue decisions and slot dequeue gate in user
 * space, for one direction of the native link (contract: impair.h).
 *
 * Like the kernel (net/sched/sch_netem.c, netem_enqueue and netem_dequeue),
 * an arriving packet goes through, in this order:
 *   1. duplicate: a second copy with probability duplicate (correlated);
 *   2. loss: random (correlated), 4-state Markov or Gilbert-Elliott; a lost
 *      packet that is ECN-capable is CE-marked instead when spec.ecn; a
 *      duplicated packet that loses one copy goes on with the other;
 *   3. corrupt: one random bit of one random byte (< len) flipped;
 *   4. limit: tail drop when limit_packets are already queued;
 *   5. reorder or delay: with gap G, after G-1 delayed packets the next one
 *      is sent at once, ahead of the queue, with probability reorder
 *      (correlated), which restarts the count; otherwise it is delayed by
 *      delay +- jitter (uniform, or the distribution table scaled by
 *      jitter), delay-correlated; with a rate (or keep_order) it is
 *      scheduled no earlier than the latest queued packet, and a rate adds
 *      its transmission time: (len + packet_overhead) bytes, or that many
 *      rounded up to whole cells of cell_size + cell_overhead bytes, at
 *      rate bytes/s, in whole nanoseconds (floor), as packet_time_ns;
 *   6. at dequeue, slots: a packet leaves only inside a slot; a slot starts
 *      after a delay drawn uniformly in [min, max] (or from the slot
 *      table) and closes after max_packets packets or max_bytes bytes.
 * A spec change restarts the reorder count, the correlations, the loss
 * model's state and the slots, and reseeds only when the spec has a seed,
 * as netem_change() does with the full attribute set qoslab sends.
 *
 * The main random stream is the kernel's own generator with the kernel's
 * seeding, drawn once per decision in the kernel's order (duplicate, loss,
 * corrupt, reorder, delay; slot tables at dequeue): without duplication,
 * correlations and slot tables, a model and a netem given the same seed (its
 * TCA_NETEM_PRNG_SEED) take the same loss, corruption and reorder
 * decisions packet by packet. What the kernel takes from get_random_u32()
 * (the start value of each correlation, which byte and bit to corrupt,
 * uniform slot lengths) comes from a side stream of the same seed.
 *
 * Where this model differs from the kernel, on purpose:
 *  - Jitter: the kernel maps the (correlated) random value onto the jitter
 *    range with its low bits (value % 2*jitter, table[value % size]), which
 *    leaves consecutive delays all but uncorrelated whatever delay_corr
 *    says; here the high bits are used ((value * range) >> 32), so
 *    delay_corr_pct does correlate consecutive delays. Without correlation
 *    the distribution is the same (uniform, or the table's).
 *  - Duplicate: the kernel sends the copy through the qdisc once more
 *    (its own loss, corruption, reorder and delay draws); here the copy
 *    draws its own loss but otherwise
 *    shares the original's verdict: same time_to_send (under a rate the
 *    copy takes no transmission time of its own), same CE mark, and
 *    corruption applies to the original only (the kernel clones before it
 *    corrupts, so its copy is intact too unless its own draw corrupts it).
 *  - Counters: the kernel counts a CE-marked packet among its drops, and
 *    a duplicated packet's loss only when the copy is lost; here a mark
 *    counts in ce_marked only, and either copy lost from a duplicated
 *    packet counts one loss drop.
 *  - Rate overhead: a length that packet or cell overhead makes negative
 *    counts as 0 bytes (the kernel's unsigned arithmetic wraps); the
 *    4-state model's two-way thresholds (p13 + p14, p31 + p32) are summed
 *    without the kernel's 32-bit wrap.
 *  - Without a table the delay is exactly uniform; kernel netem replaced
 *    by qoslab gets a generated uniform table (1/4096 steps).
 *  - keep_order without a rate is honoured (every packet scheduled no
 *    earlier than the latest queued one); the kernel has no such field.
 */
#include "impair.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* 4-state model states, named as in the GI model's definition. */
enum {
	GI_RX_GAP = 1,     /* received, inside a gap (good) period */
	GI_RX_BURST,       /* received, inside a burst period */
	GI_LOST_BURST,     /* lost, inside a burst period */
	GI_LOST_ISOLATED,  /* isolated loss inside a gap period */
};
enum { GE_GOOD = 1, GE_BAD };

struct ql_impair {
	ql_netem_spec spec;        /* dist/slot_dist point at the copies below */
	int16_t *dist, *slot_dist;
	ql_rng_taus prng;
	ql_rng_aux aux;
	ql_crnd delay_cor, loss_cor, dup_cor, reorder_cor, corrupt_cor;
	uint32_t counter;          /* packets delayed since the last reorder */
	int clg_state;             /* 4-state / Gilbert-Elliott state */
	int slot_on;
	int64_t slot_next_ns;      /* when the current/next slot opens */
	int32_t slot_packets_max, slot_bytes_max;
	int32_t slot_packets_left, slot_bytes_left;
	ql_impair_counters counters;
};

static int copy_table(const int16_t *src, size_t n, int16_t **out, ql_err *e)
{
	*out = NULL;
	if (!src)
		return 0;
	*out = malloc(n * sizeof **out);
	if (!*out)
		return ql_err_set(e, ENOMEM, NULL, "impair: cannot allocate a distribution table of %zu entries", n);
	memcpy(*out, src, n * sizeof **out);
	return 0;
}

/* Install spec (already checked) with its tables; state as after a change. */
static void install(ql_impair *m, const ql_netem_spec *spec, int16_t *dist, int16_t *slot_dist)
{
	free(m->dist);
	free(m->slot_dist);
	m->spec = *spec;
	m->dist = dist;
	m->slot_dist = slot_dist;
	m->spec.dist = dist;
	m->spec.slot_dist = slot_dist;
	if (spec->has_seed) {
		ql_rng_taus_seed(&m->prng, spec->seed);
		ql_rng_aux_seed(&m->aux, spec->seed);
	}
	ql_crnd_init(&m->delay_cor, spec->delay_corr_frac32, &m->aux);
	ql_crnd_init(&m->loss_cor, spec->loss_corr_frac32, &m->aux);
	ql_crnd_init(&m->dup_cor, spec->duplicate_corr_frac32, &m->aux);
	ql_crnd_init(&m->reorder_cor, spec->reorder_corr_frac32, &m->aux);
	ql_crnd_init(&m->corrupt_cor, spec->corrupt_corr_frac32, &m->aux);
	m->counter = 0;
	m->clg_state = spec->loss_model == QL_NETEM_LOSS_GEMODEL ? GE_GOOD : GI_RX_GAP;
	m->slot_packets_max = spec->slot_max_packets ? spec->slot_max_packets : INT32_MAX;
	m->slot_bytes_max = spec->slot_max_bytes ? spec->slot_max_bytes : INT32_MAX;
	m->slot_packets_left = m->slot_packets_max;
	m->slot_bytes_left = m->slot_bytes_max;
	m->slot_on = spec->slot_min_delay_ns || spec->slot_max_delay_ns || spec->slot_dist_jitter_ns;
	/* The kernel opens the first slot at configuration time: any time
	 * before the first packet is due, so the first dequeue draws anew. */
	m->slot_next_ns = m->slot_on ? 1 : 0;
}

static int prepare(const ql_netem_spec *spec, int16_t **dist, int16_t **slot_dist, ql_err *e)
{
	int rc = ql_netem_validate(spec, e);
	if (rc < 0)
		return rc;
	rc = copy_table(spec->dist, spec->dist_len, dist, e);
	if (rc < 0)
		return rc;
	rc = copy_table(spec->slot_dist, spec->slot_dist_len, slot_dist, e);
	if (rc < 0) {
		free(*dist);
		*dist = NULL;
	}
	return rc;
}

int ql_impair_new(const ql_netem_spec *spec, uint64_t seed, ql_impair **out, ql_err *e)
{
	*out = NULL;
	int16_t *dist, *slot_dist;
	int rc = prepare(spec, &dist, &slot_dist, e);
	if (rc < 0)
		return rc;
	ql_impair *m = calloc(1, sizeof *m);
	if (!m) {
		free(dist);
		free(slot_dist);
		return ql_err_set(e, ENOMEM, NULL, "impair: cannot allocate the model");
	}
	ql_rng_taus_seed(&m->prng, seed);
	ql_rng_aux_seed(&m->aux, seed);
	install(m, spec, dist, slot_dist);
	*out = m;
	return 0;
}

void ql_impair_free(ql_impair *m)
{
	if (!m)
		return;
	free(m->dist);
	free(m->slot_dist);
	free(m);
}

int ql_impair_set_spec(ql_impair *m, const ql_netem_spec *spec, ql_err *e)
{
	int16_t *dist, *slot_dist;
	int rc = prepare(spec, &dist, &slot_dist, e);
	if (rc < 0)
		return rc;
	install(m, spec, dist, slot_dist);
	return 0;
}

const ql_impair_counters *ql_impair_counters_get(const ql_impair *m)
{
	return &m->counters;
}

/* Value mu +- sigma: uniform, or table[] (scaled by sigma / SCALE, rounded
 * half away from zero as the kernel's tabledist). The random value is
 * mapped with its high bits (see the file's head). */
static int64_t table_value(int64_t mu, int32_t sigma, uint32_t rnd, const int16_t *table, size_t n)
{
	if (!table) {
		uint64_t range = 2 * (uint64_t)sigma;
		return (int64_t)(((uint64_t)rnd * range) >> 32) + mu - sigma;
	}
	int64_t t = table[((uint64_t)rnd * n) >> 32];
	int64_t x = (int64_t)(sigma % QL_NETEM_DIST_SCALE) * t;
	x += x >= 0 ? QL_NETEM_DIST_SCALE / 2 : -(QL_NETEM_DIST_SCALE / 2);
	return x / QL_NETEM_DIST_SCALE + (int64_t)(sigma / QL_NETEM_DIST_SCALE) * t + mu;
}

static int64_t draw_delay(ql_impair *m)
{
	const ql_netem_spec *s = &m->spec;
	if (s->jitter_ns == 0)
		return s->delay_ns;   /* no draw, as the kernel */
	uint32_t rnd = ql_crnd_next(&m->delay_cor, &m->prng);
	return table_value(s->delay_ns, (int32_t)s->jitter_ns, rnd, m->dist, s->dist_len);
}

static int loss_4state(ql_impair *m)
{
	const ql_netem_spec *s = &m->spec;
	uint64_t rnd = ql_rng_taus_next(&m->prng);
	switch (m->clg_state) {
	case GI_RX_GAP:
		if (rnd < s->state_p14_frac32) {
			m->clg_state = GI_LOST_ISOLATED;
			return 1;
		}
		if (rnd < (uint64_t)s->state_p13_frac32 + s->state_p14_frac32) {
			m->clg_state = GI_LOST_BURST;
			return 1;
		}
		return 0;
	case GI_RX_BURST:
		if (rnd < s->state_p23_frac32) {
			m->clg_state = GI_LOST_BURST;
			return 1;
		}
		return 0;
	case GI_LOST_BURST:
		if (rnd < s->state_p32_frac32) {
			m->clg_state = GI_RX_BURST;
			return 0;
		}
		if (rnd < (uint64_t)s->state_p31_frac32 + s->state_p32_frac32) {
			m->clg_state = GI_RX_GAP;
			return 0;
		}
		return 1;
	default: /* GI_LOST_ISOLATED: always back to the gap */
		m->clg_state = GI_RX_GAP;
		return 0;
	}
}

/* The state decides this packet's fate; the transition is drawn first and
 * applies from the next packet on. */
static int loss_gilbert_elliott(ql_impair *m)
{
	const ql_netem_spec *s = &m->spec;
	if (m->clg_state == GE_GOOD) {
		if (ql_rng_taus_next(&m->prng) < s->ge_p_frac32)
			m->clg_state = GE_BAD;
		return ql_rng_taus_next(&m->prng) < s->ge_k1_frac32;
	}
	if (ql_rng_taus_next(&m->prng) < s->ge_r_frac32)
		m->clg_state = GE_GOOD;
	return ql_rng_taus_next(&m->prng) > s->ge_h_frac32;
}

static int loss_event(ql_impair *m)
{
	switch (m->spec.loss_model) {
	case QL_NETEM_LOSS_STATE:
		return loss_4state(m);
	case QL_NETEM_LOSS_GEMODEL:
		return loss_gilbert_elliott(m);
	default:
		return m->spec.loss_frac32 &&
		       m->spec.loss_frac32 >= ql_crnd_next(&m->loss_cor, &m->prng);
	}
}

/* Bytes on the wire of one packet of len bytes: overhead added, then whole
 * cells. */
static int64_t wire_bytes(const ql_netem_spec *s, int64_t len)
{
	int64_t bytes = len + s->packet_overhead_bytes;
	if (bytes < 0)
		bytes = 0;
	if (s->cell_size_bytes) {
		int64_t cs = s->cell_size_bytes;
		int64_t cells = bytes / cs + (bytes % cs ? 1 : 0);
		bytes = cells * (cs + s->cell_overhead_bytes);
		if (bytes < 0)
			bytes = 0;
	}
	return bytes;
}

/* Transmission time at the rate. A GSO packet (seg: its segments' headers
 * and payload size) costs what its segments would one by one, each with
 * its headers and the overhead, as netem charges a GSO skb on an Ethernet
 * device (the qdisc length counts every segment's headers, MAC included). */
static int64_t tx_time_ns(const ql_impair *m, size_t len, const ql_impair_gso *seg)
{
	const ql_netem_spec *s = &m->spec;
	int64_t bytes;
	if (seg && seg->payload_bytes > 0 && len > seg->hdr_bytes + seg->payload_bytes) {
		int64_t payload = (int64_t)(len - seg->hdr_bytes), size = (int64_t)seg->payload_bytes;
		int64_t n = (payload + size - 1) / size;
		int64_t last = payload - (n - 1) * size;
		bytes = (n - 1) * wire_bytes(s, (int64_t)seg->hdr_bytes + size) +
			wire_bytes(s, (int64_t)seg->hdr_bytes + last);
	} else {
		bytes = wire_bytes(s, (int64_t)len);
	}
	return (int64_t)((unsigned __int128)bytes * 1000000000u / s->rate_bytes_per_s);
}

void ql_impair_enqueue(ql_impair *m, size_t len, int ecn_capable, int64_t now_ns,
		       uint32_t qlen_packets, int64_t last_tts_ns, ql_impair_verdict *v)
{
	ql_impair_enqueue_gso(m, len, NULL, ecn_capable, now_ns, qlen_packets, last_tts_ns, v);
}

void ql_impair_enqueue_gso(ql_impair *m, size_t len, const ql_impair_gso *seg, int ecn_capable,
			   int64_t now_ns, uint32_t qlen_packets, int64_t last_tts_ns, ql_impair_verdict *v)
{
	const ql_netem_spec *s = &m->spec;
	ql_impair_counters *c = &m->counters;
	memset(v, 0, sizeof *v);
	c->arrived_packets++;
	c->arrived_bytes += len;

	int count = 1, dup = 0;
	if (s->duplicate_frac32 && s->duplicate_frac32 >= ql_crnd_next(&m->dup_cor, &m->prng))
		count = dup = 2;
	if (loss_event(m)) {
		if (s->ecn && ecn_capable)
			v->ce_mark = 1;
		else
			count--;
	}
	if (count == 0) {
		v->drop = QL_IMPAIR_DROP_LOSS;
		c->drops[QL_IMPAIR_DROP_LOSS]++;
		return;
	}
	int corrupt = s->corrupt_frac32 &&
		      s->corrupt_frac32 >= ql_crnd_next(&m->corrupt_cor, &m->prng);
	if (qlen_packets >= s->limit_packets) {
		v->drop = QL_IMPAIR_DROP_LIMIT;
		c->drops[QL_IMPAIR_DROP_LIMIT]++;
		v->ce_mark = 0;
		return;
	}
	/* The copy passes the loss model on its own (the kernel re-enqueues
	 * it); an ECN-capable copy is kept and shares the original's mark.
	 * Each copy the loss model takes from a duplicated packet is a loss
	 * drop, whichever of the two it was. */
	if (count == 2 && loss_event(m) && !(s->ecn && ecn_capable))
		count = 1;
	if (dup && count == 1)
		c->drops[QL_IMPAIR_DROP_LOSS]++;
	v->copies = count;
	if (count == 2)
		c->duplicated++;
	if (v->ce_mark)
		c->ce_marked++;
	if (corrupt && len > 0) {
		v->corrupt = 1;
		v->corrupt_byte = ql_rng_aux_below(&m->aux, len > UINT32_MAX ? UINT32_MAX : (uint32_t)len);
		v->corrupt_bit = (int)ql_rng_aux_below(&m->aux, 8);
		c->corrupted++;
	}

	if (s->reorder_gap_packets == 0 || m->counter < s->reorder_gap_packets - 1 ||
	    s->reorder_frac32 < ql_crnd_next(&m->reorder_cor, &m->prng)) {
		int64_t delay = draw_delay(m);
		int64_t t = now_ns + delay;
		if (s->rate_bytes_per_s || s->keep_order) {
			if (last_tts_ns && last_tts_ns > t)
				t = last_tts_ns;
			if (s->rate_bytes_per_s)
				t += tx_time_ns(m, len, seg);
		}
		v->time_to_send_ns = t;
		m->counter++;
	} else {
		v->time_to_send_ns = now_ns;
		v->to_head = 1;
		m->counter = 0;
		c->reordered++;
	}
}

/* Open the next slot: after a delay in [min, max] or from the slot table. */
static void slot_next(ql_impair *m, int64_t now_ns)
{
	const ql_netem_spec *s = &m->spec;
	int64_t d;
	if (!m->slot_dist) {
		uint64_t span = (uint64_t)(s->slot_max_delay_ns - s->slot_min_delay_ns);
		d = s->slot_min_delay_ns +
		    (int64_t)(((unsigned __int128)span * ql_rng_aux_next(&m->aux)) >> 32);
	} else {   /* slot_on: the table comes with a jitter */
		d = table_value(s->slot_dist_delay_ns, (int32_t)s->slot_dist_jitter_ns,
				ql_rng_taus_next(&m->prng), m->slot_dist, s->slot_dist_len);
	}
	m->slot_next_ns = now_ns + d;
	m->slot_packets_left = m->slot_packets_max;
	m->slot_bytes_left = m->slot_bytes_max;
}

int64_t ql_impair_dequeue_at(ql_impair *m, size_t len, int64_t due_ns, int64_t now_ns)
{
	if (!m->slot_on)
		return due_ns;
	/* A slot that opened before the head packet was due has gone unused:
	 * the next one is drawn from now, as the kernel does at dequeue. */
	if (m->slot_next_ns < due_ns)
		slot_next(m, now_ns);
	return m->slot_next_ns > due_ns ? m->slot_next_ns : due_ns;
}

void ql_impair_sent(ql_impair *m, size_t len, int64_t now_ns)
{
	if (!m->slot_on)
		return;
	m->slot_packets_left--;
	int64_t left = (int64_t)m->slot_bytes_left - (int64_t)(len > INT32_MAX ? INT32_MAX : len);
	m->slot_bytes_left = left < INT32_MIN ? INT32_MIN : (int32_t)left;
	if (m->slot_packets_left <= 0 || m->slot_bytes_left <= 0)
		slot_next(m, now_ns);
}
