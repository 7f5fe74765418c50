/* STAND-IN for impair.c, to be deleted when impair.c lands: fixed delay_ns, limit_packets tail drop, random loss at loss_frac32; nothing else. */
/*
 * impair_fixed_delay.c - the smallest model that keeps impair.h's promises
 * for those three fields, so the link (tunlink.c) can be built and tested
 * before the real model exists. Every other spec field is accepted (checked
 * by ql_netem_validate) and ignored. Nothing may depend on this file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "impair.h"

struct ql_impair {
	int64_t delay_ns;
	uint32_t loss_frac32;
	uint32_t limit_packets;
	uint64_t rng;
	ql_impair_counters c;
};

/* xorshift64*: a uniform u32 per call, never 0 state. */
static uint32_t next_u32(ql_impair *m)
{
	uint64_t x = m->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	m->rng = x;
	return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

static void take_spec(ql_impair *m, const ql_netem_spec *s)
{
	m->delay_ns = s->delay_ns;
	m->loss_frac32 = s->loss_frac32;
	m->limit_packets = s->limit_packets;
}

int ql_impair_new(const ql_netem_spec *spec, uint64_t seed, ql_impair **out, ql_err *e)
{
	*out = NULL;
	int rc = ql_netem_validate(spec, e);
	if (rc < 0)
		return rc;
	ql_impair *m = calloc(1, sizeof *m);
	if (!m)
		return ql_err_set(e, ENOMEM, NULL, "out of memory for the impairment model");
	take_spec(m, spec);
	m->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
	*out = m;
	return 0;
}

void ql_impair_free(ql_impair *m)
{
	free(m);
}

int ql_impair_set_spec(ql_impair *m, const ql_netem_spec *spec, ql_err *e)
{
	int rc = ql_netem_validate(spec, e);
	if (rc < 0)
		return rc;
	take_spec(m, spec);
	return 0;
}

void ql_impair_enqueue(ql_impair *m, size_t len, int ecn_capable, int64_t now_ns,
		       uint32_t qlen_packets, int64_t last_tts_ns, ql_impair_verdict *v)
{
	memset(v, 0, sizeof *v);
	m->c.arrived_packets++;
	m->c.arrived_bytes += len;
	/* as netem: lost when loss >= a uniform u32, so 0 never loses */
	if (m->loss_frac32 && m->loss_frac32 >= next_u32(m)) {
		v->drop = QL_IMPAIR_DROP_LOSS;
		m->c.drops[QL_IMPAIR_DROP_LOSS]++;
		return;
	}
	if (qlen_packets >= m->limit_packets) {
		v->drop = QL_IMPAIR_DROP_LIMIT;
		m->c.drops[QL_IMPAIR_DROP_LIMIT]++;
		return;
	}
	v->copies = 1;
	v->time_to_send_ns = now_ns + m->delay_ns;
}

int64_t ql_impair_dequeue_at(ql_impair *m, size_t len, int64_t due_ns, int64_t now_ns)
{
	return due_ns;
}

void ql_impair_sent(ql_impair *m, size_t len, int64_t now_ns)
{
}

const ql_impair_counters *ql_impair_counters_get(const ql_impair *m)
{
	return &m->c;
}
