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

void ql_pacer_set_ceiling(ql_pacer *p, uint32_t catchup_pct, int64_t tol_ns)
{
	if (catchup_pct == 0 || p->rate_bps == 0) {
		p->ceil_gap_ns = 0;
		return;
	}
	/* a slot's time at rate x (1 + pct/100), rounded down (the ceiling
	 * errs high by < 1 ns per slot), at least 1 ns */
	u128 gap = (u128)p->bits * QL_NS_PER_S * 100 /
		   ((u128)p->rate_bps * (100 + catchup_pct));
	u128 slot = (u128)p->bits * QL_NS_PER_S / p->rate_bps;
	p->ceil_gap_ns = gap < 1 ? 1 : gap > INT32_MAX ? INT32_MAX : (uint64_t)gap;
	u128 min_tol = slot * QL_PACER_BURST_MIN;
	if (tol_ns < 0)
		tol_ns = 0;
	p->ceil_tol_ns = (u128)tol_ns < min_tol ? (min_tol > INT32_MAX ? INT32_MAX : (int64_t)min_tol)
						: tol_ns;
	p->tat_ns = p->origin_ns;
}

/* How many of n due slots the ceiling lets go at now_ns; books them. */
static uint64_t ceiling_take(ql_pacer *p, int64_t now_ns, uint64_t n)
{
	int64_t base = p->tat_ns > now_ns ? p->tat_ns : now_ns;
	if (now_ns + p->ceil_tol_ns < base)
		return 0;
	uint64_t allowed = (uint64_t)(now_ns + p->ceil_tol_ns - base) / p->ceil_gap_ns + 1;
	if (n > allowed)
		n = allowed;
	p->tat_ns = base + (int64_t)(n * p->ceil_gap_ns);
	return n;
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
			 * schedule now rather than catching up in a burst;
			 * under the ceiling only its tolerance goes now, the
			 * rest of max_burst is dropped too. */
			uint64_t lag = n;
			p->rebases++;
			p->origin_ns = now_ns;
			p->k = 0;
			n = p->max_burst;
			if (p->ceil_gap_ns)
				n = ceiling_take(p, now_ns, n);
			p->skipped_slots += lag - n;
		} else if (p->ceil_gap_ns && n) {
			n = ceiling_take(p, now_ns, n);
		}
	}
	p->k += n;
	p->released += n;
	if (next_due_ns) {
		*next_due_ns = ql_pacer_slot_ns(p, p->k);
		if (p->ceil_gap_ns && p->tat_ns - p->ceil_tol_ns > *next_due_ns)
			*next_due_ns = p->tat_ns - p->ceil_tol_ns;
	}
	return n;
}

void ql_pacer_unsend(ql_pacer *p, uint64_t unsent)
{
	if (unsent > p->k)
		unsent = p->k;
	p->k -= unsent;
	p->released -= unsent;
	if (p->ceil_gap_ns)
		p->tat_ns -= (int64_t)(unsent * p->ceil_gap_ns);
}
