/* pktq.c - see pktq.h. */
#include "pktq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void ql_pktq_init(ql_pktq *q)
{
	memset(q, 0, sizeof *q);
}

void ql_pktq_free(ql_pktq *q)
{
	ql_pkt *p;
	while ((p = ql_pktq_pop(q)))
		free(p);
	free(q->heap);
	ql_pktq_init(q);
}

ql_pkt *ql_pkt_new(const void *data, size_t len)
{
	ql_pkt *p = malloc(sizeof *p + len);
	if (!p)
		return NULL;
	memset(p, 0, sizeof *p);
	p->len = (uint32_t)len;
	memcpy(p->data, data, len);
	return p;
}

static int before(const ql_pkt *a, const ql_pkt *b)
{
	return a->tts_ns < b->tts_ns || (a->tts_ns == b->tts_ns && a->seq < b->seq);
}

int ql_pktq_push(ql_pktq *q, ql_pkt *p, int *new_first)
{
	p->seq = q->seq++;
	if (p->at_head) {
		p->next = q->head;
		q->head = p;
		q->head_n++;
		*new_first = 1;
	} else {
		if (q->n == q->cap) {
			size_t cap = q->cap ? q->cap * 2 : 256;
			ql_pkt **h = realloc(q->heap, cap * sizeof *h);
			if (!h)
				return -ENOMEM;
			q->heap = h;
			q->cap = cap;
		}
		size_t i = q->n++;
		while (i > 0) {
			size_t up = (i - 1) / 2;
			if (!before(p, q->heap[up]))
				break;
			q->heap[i] = q->heap[up];
			i = up;
		}
		q->heap[i] = p;
		*new_first = !q->head && i == 0;
	}
	q->bytes += p->len;
	q->cost_bytes += QL_PKT_COST(p->len);
	return 0;
}

ql_pkt *ql_pktq_peek(const ql_pktq *q)
{
	if (q->head)
		return q->head;
	return q->n ? q->heap[0] : NULL;
}

ql_pkt *ql_pktq_pop(ql_pktq *q)
{
	ql_pkt *p;
	if (q->head) {
		p = q->head;
		q->head = p->next;
		q->head_n--;
		p->next = NULL;
	} else if (q->n) {
		p = q->heap[0];
		ql_pkt *last = q->heap[--q->n];
		size_t i = 0;
		for (;;) {
			size_t c = 2 * i + 1;
			if (c >= q->n)
				break;
			if (c + 1 < q->n && before(q->heap[c + 1], q->heap[c]))
				c++;
			if (!before(q->heap[c], last))
				break;
			q->heap[i] = q->heap[c];
			i = c;
		}
		if (q->n)
			q->heap[i] = last;
	} else {
		return NULL;
	}
	q->bytes -= p->len;
	q->cost_bytes -= QL_PKT_COST(p->len);
	return p;
}
