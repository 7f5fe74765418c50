/*
 * impair.h - netem's impairment model in user space, one direction of a
 * link: for each packet that arrives, what sch_netem's enqueue path would
 * do with it (duplicate, lose or ECN-mark, corrupt, tail-drop at the limit,
 * delay with jitter/distribution/correlation, rate with overhead, reorder
 * with gap), and at dequeue when the slot model lets the next packet go.
 * The queue itself (time-ordered, head insertion for reordered packets) is
 * the caller's (the link's); this file decides, the caller moves bytes.
 * Lua-free, no threads, no clock reads (times come in): testable alone.
 * Stands on ../netem.h (the spec and its checks, shared with kernel netem).
 */
#ifndef QL_IMPAIR_H
#define QL_IMPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "../netem.h"

/* Why a packet was not forwarded (index into the drop counters). */
enum ql_impair_drop {
	QL_IMPAIR_KEPT = 0,
	QL_IMPAIR_DROP_LOSS,      /* the loss model (random, 4-state, GE) */
	QL_IMPAIR_DROP_LIMIT,     /* the queue held limit_packets (tail drop) */
	QL_IMPAIR_DROP_MEMORY,    /* the caller's memory budget (see the link) */
	QL_IMPAIR_DROP_NREASONS
};

/* The model's verdict on one arriving packet. */
typedef struct ql_impair_verdict {
	int copies;               /* 0 = dropped (drop says why), 1, or 2 (duplicated) */
	int drop;                 /* enum ql_impair_drop */
	int ce_mark;              /* lost but ECN-capable with spec.ecn: forward with CE set */
	int corrupt;              /* flip bit corrupt_bit of byte corrupt_byte (< len) */
	size_t corrupt_byte;
	int corrupt_bit;          /* 0..7 */
	int to_head;              /* reordered: send now, ahead of the queue */
	int64_t time_to_send_ns;  /* CLOCK_MONOTONIC ns: when it leaves the queue */
} ql_impair_verdict;

/* Per-direction counters the model keeps (the link adds forwarded ones). */
typedef struct ql_impair_counters {
	uint64_t arrived_packets, arrived_bytes;
	uint64_t drops[QL_IMPAIR_DROP_NREASONS];
	uint64_t duplicated, corrupted, reordered, ce_marked;
} ql_impair_counters;

/* Opaque: made by ql_impair_new (no allocation per packet, none at all
 * after that). */
typedef struct ql_impair ql_impair;

/* A model for spec (checked with netem's own checks: the same fields,
 * ranges and wording as kernel netem; dist/slot_dist tables are copied).
 * seed: spec->has_seed ? spec->seed : the caller's random seed.
 * Returns 0, or -errno with e set (EINVAL naming the spec field, ENOMEM). */
int ql_impair_new(const ql_netem_spec *spec, uint64_t seed, ql_impair **out, ql_err *e);
void ql_impair_free(ql_impair *m);

/* Replace the spec while packets flow (the caller serialises calls on one
 * model; the link swaps under its direction's lock): packets already
 * queued keep their times; correlation and loss-model state restart as
 * the kernel's does when netem is changed. Same errors as ql_impair_new;
 * on error the old spec stays. */
int ql_impair_set_spec(ql_impair *m, const ql_netem_spec *spec, ql_err *e);

/* One arriving packet of len bytes (the IP packet; rate overhead is added
 * by the model), ECN-capable (ECT(0)/ECT(1)) or not, at now_ns, with
 * qlen_packets already queued in this direction. last_tts_ns is the
 * time_to_send of the packet queued last (0 = queue empty): with a rate,
 * as netem, a packet is scheduled after it. Fills v. */
void ql_impair_enqueue(ql_impair *m, size_t len, int ecn_capable, int64_t now_ns,
		       uint32_t qlen_packets, int64_t last_tts_ns, ql_impair_verdict *v);

/* A GSO packet's segments: each carries hdr_bytes of IP and transport
 * headers and payload_bytes of data (the last one less). */
typedef struct ql_impair_gso {
	size_t hdr_bytes, payload_bytes;
} ql_impair_gso;

/* ql_impair_enqueue for a GSO packet of len bytes (seg NULL: a plain
 * packet): the model takes it as one packet (one loss, one limit slot, as
 * netem takes a GSO skb), and a rate charges it what its segments would
 * cost one by one, each with its headers, packet_overhead_bytes and cells
 * (netem on an Ethernet device counts every segment's headers likewise). */
void ql_impair_enqueue_gso(ql_impair *m, size_t len, const ql_impair_gso *seg, int ecn_capable,
			   int64_t now_ns, uint32_t qlen_packets, int64_t last_tts_ns, ql_impair_verdict *v);

/* Slot model (spec slot_*): the head packet (len bytes, due at its
 * time_to_send) may leave at the returned time (>= due); call
 * ql_impair_sent after it left. Without slots returns due. */
int64_t ql_impair_dequeue_at(ql_impair *m, size_t len, int64_t due_ns, int64_t now_ns);
void ql_impair_sent(ql_impair *m, size_t len, int64_t now_ns);

const ql_impair_counters *ql_impair_counters_get(const ql_impair *m);

#endif
