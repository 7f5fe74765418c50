/*
 * pktq.h - one direction's queue of the impairment link: packets ordered by
 * their time to send (a binary heap on (time, arrival number), so equal
 * times leave in arrival order, as sch_netem's tfifo), and a head list for
 * reordered packets, which leave before everything in the heap (newest
 * first, as a packet put at the head of netem's queue). Counts its packets
 * and bytes against a byte budget. No locking (the link holds its lock).
 */
#ifndef QL_PKTQ_H
#define QL_PKTQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct ql_pkt {
	struct ql_pkt *next;       /* head list link */
	int64_t tts_ns;            /* time to send, CLOCK_MONOTONIC */
	int64_t enq_ns;            /* when it was queued */
	uint64_t seq;              /* arrival number (heap tie-break) */
	uint32_t len;              /* bytes of data */
	int at_head;               /* 1 = reordered, sent at once */
	unsigned char data[];
} ql_pkt;

/* What a queued packet costs against the budget (data and record). */
#define QL_PKT_RECORD_BYTES sizeof(ql_pkt)
#define QL_PKT_COST(len) ((uint64_t)(len) + QL_PKT_RECORD_BYTES)

typedef struct ql_pktq {
	ql_pkt **heap;
	size_t n, cap;             /* heap entries, heap capacity */
	ql_pkt *head;              /* head list (LIFO) */
	size_t head_n;
	uint64_t seq;
	uint64_t bytes;            /* data bytes queued */
	uint64_t cost_bytes;       /* QL_PKT_COST summed */
} ql_pktq;

void ql_pktq_init(ql_pktq *q);
/* Free every queued packet and the heap. */
void ql_pktq_free(ql_pktq *q);

/* A packet of len bytes (malloc'd, data copied), not queued; NULL on ENOMEM. */
ql_pkt *ql_pkt_new(const void *data, size_t len);

/* Queue p (its tts_ns/enq_ns/at_head set). Returns 0 or -ENOMEM (p not
 * queued then). *new_first = 1 when p is now the packet that leaves first. */
int ql_pktq_push(ql_pktq *q, ql_pkt *p, int *new_first);

/* The packet that leaves next (NULL = empty); ql_pktq_pop removes it. */
ql_pkt *ql_pktq_peek(const ql_pktq *q);
ql_pkt *ql_pktq_pop(ql_pktq *q);

static inline size_t ql_pktq_len(const ql_pktq *q)
{
	return q->n + q->head_n;
}

#endif
