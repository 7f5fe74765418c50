/*
 * pace.c - the engine's one pacer (pace.h), for UDP datagrams and TCP
 * writes. Stands on pace.h and the core's timer.h only.
 */
#include "pace.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../timer.h"

typedef unsigned __int128 u128;

int ql_pacer_init(ql_pacer *p, int64_t start_ns, uint64_t rate_bps,
		  uint32_t length_bytes, uint32_t max_burst, ql_err *e)
{
	memset(p, 0, sizeof *p);
	if (length_bytes < 1 || length_bytes > 65507)
		return ql_err_usage(e, "length_bytes: expected 1..65507, got %u",
				    length_bytes);
	p->origin_ns = start_ns;
	p->rate_bps = rate_bps;
	p->bits = (uint64_t)length_bytes * 8;
	if (max_burst) {
		p->max_burst = max_burst;
	} else if (rate_bps == 0) {
		p->max_burst = QL_PACER_BURST_UNLIMITED;
	} else {
		/* datagrams per QL_PACER_BURST_SPAN_NS at the target rate */
		u128 per = (u128)rate_bps * QL_PACER_BURST_SPAN_NS /
			   ((u128)p->bits * QL_NS_PER_S);
		p->max_burst = per < QL_PACER_BURST_MIN ? QL_PACER_BURST_MIN :
			       per > QL_PACER_BURST_MAX ? QL_PACER_BURST_MAX :
			       (uint64_t)per;
	}
	return 0;
}

int ql_pacer_init_blocks(ql_pacer *p, int64_t start_ns, uint64_t rate_bps,
			 uint64_t block_bytes, int64_t slack_ns, ql_err *e)
{
	memset(p, 0, sizeof *p);
	if (block_bytes < 1 || block_bytes > QL_PACER_BLOCK_MAX_BYTES)
		return ql_err_usage(e, "block_bytes: expected 1..%llu, got %llu",
				    (unsigned long long)QL_PACER_BLOCK_MAX_BYTES,
				    (unsigned long long)block_bytes);
	if (slack_ns < 0)
		return ql_err_usage(e, "slack_ns: expected >= 0, got %lld", (long long)slack_ns);
	p->origin_ns = start_ns;
	p->rate_bps = rate_bps;
	p->bits = block_bytes * 8;
	if (rate_bps == 0) {
		p->max_burst = QL_PACER_BURST_UNLIMITED;
	} else {
		/* whole blocks of slack_ns at the target rate, at least one */
		u128 per = (u128)rate_bps * (uint64_t)slack_ns / ((u128)p->bits * QL_NS_PER_S);
		p->max_burst = per < 1 ? 1 : per > UINT32_MAX ? UINT32_MAX : (uint64_t)per;
	}
	return 0;
}

void ql_pacer_set_rebase_burst(ql_pacer *p, uint64_t n)
{
	p->rebase_burst = n > p->max_burst ? p->max_burst : n;
}

uint64_t ql_pacer_burst_of_ns(const ql_pacer *p, int64_t span_ns)
{
	if (p->rate_bps == 0)
		return QL_PACER_BURST_UNLIMITED;
	u128 per = (u128)p->rate_bps * (uint64_t)(span_ns > 0 ? span_ns : 0) /
		   ((u128)p->bits * QL_NS_PER_S);
	return per < QL_PACER_BURST_MIN ? QL_PACER_BURST_MIN :
	       per > UINT32_MAX ? UINT32_MAX : (uint64_t)per;
}

int64_t ql_pacer_slot_ns(const ql_pacer *p, uint64_t k)
{
	u128 off;

	if (p->rate_bps == 0)
		return p->origin_ns;
	off = (u128)k * p->bits * QL_NS_PER_S / p->rate_bps;
	if (off > (u128)(INT64_MAX - (p->origin_ns > 0 ? p->origin_ns : 0)))
		return INT64_MAX;
	return p->origin_ns + (int64_t)off;
}

uint64_t ql_pacer_due(ql_pacer *p, int64_t now_ns, int64_t *next_due_ns)
{
	uint64_t n;

	if (p->rate_bps == 0) {
		n = p->max_burst;
		p->k += n;
		p->released += n;
		if (next_due_ns)
			*next_due_ns = now_ns;
		return n;
	}
	if (now_ns < p->origin_ns) {
		n = 0;
	} else {
		/* slots j with floor(j * B / rate) <= el, B = bits * 1e9:
		 * j < (el + 1) * rate / B, so their count is the ceiling. */
		u128 el = (u128)(uint64_t)(now_ns - p->origin_ns);
		u128 B = (u128)p->bits * QL_NS_PER_S;
		u128 count = ((el + 1) * p->rate_bps + B - 1) / B;
		n = count > p->k ? (uint64_t)(count - p->k) : 0;
		if (n > p->max_burst) {
			/* A stall: drop the missed slots and start a new
			 * schedule now rather than catching up in a burst. */
			uint64_t go = p->rebase_burst ? p->rebase_burst : p->max_burst;
			p->skipped_slots += n - go;
			p->rebases++;
			p->origin_ns = now_ns;
			p->k = 0;
			n = go;
		}
	}
	p->k += n;
	p->released += n;
	if (next_due_ns)
		*next_due_ns = ql_pacer_slot_ns(p, p->k);
	return n;
}

void ql_pacer_unsend(ql_pacer *p, uint64_t unsent)
{
	if (unsent > p->k)
		unsent = p->k;
	p->k -= unsent;
	p->released -= unsent;
}
