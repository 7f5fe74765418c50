/*
 * pace.h - the engine's one pacer, for UDP datagrams and TCP writes alike: an
 * absolute send schedule that re-bases after a stall instead of bursting.
 * Lua-free, no threads; stands on err.h only.
 */
#ifndef QL_PACE_H
#define QL_PACE_H

#include <stdint.h>

#include "../err.h"

/*
 * Absolute schedule: datagram k (counted from the schedule's origin) is due
 * at origin + floor(k * length_bytes * 8 * 1e9 / rate_bps) ns, computed in
 * 128-bit integers, so there is no drift and the long-run rate is exact.
 *
 * Stall rule: if at some call more than max_burst datagrams are due, only
 * max_burst are released and the schedule is re-based: origin = now and the
 * released datagrams take the first slots of the new schedule, so the next
 * one is due at now + max_burst * gap. The slots that fell due during the
 * stall are dropped (counted in skipped_slots), never sent as a burst. So
 * no call ever releases more than max_burst, and over any span starting at
 * a call the number released is at most max_burst + span * rate / bits.
 *
 * Default max_burst (0 in init): the datagrams of 1 ms at the target rate,
 * at least 4 and at most 1024. rate_bps == 0 means unlimited: every call
 * releases max_burst (default 64) and next_due is now.
 */
#define QL_PACER_BURST_MIN        4
#define QL_PACER_BURST_MAX        1024
#define QL_PACER_BURST_UNLIMITED  64
#define QL_PACER_BURST_SPAN_NS    1000000LL

typedef struct ql_pacer {
	int64_t origin_ns;        /* schedule origin (CLOCK_MONOTONIC) */
	uint64_t rate_bps;        /* 0 = unlimited */
	uint64_t bits;            /* length_bytes * 8 */
	uint64_t k;               /* datagrams released since origin */
	uint64_t max_burst;
	uint64_t released;        /* datagrams released since init */
	uint64_t skipped_slots;   /* slots dropped by re-basing */
	uint64_t rebases;         /* stalls seen */
	uint64_t rebase_burst;    /* 0 = max_burst (ql_pacer_set_rebase_burst) */
} ql_pacer;

/*
 * @param start_ns      time of datagram 0 (CLOCK_MONOTONIC ns)
 * @param rate_bps      target payload rate in bits/s, 0 = unlimited
 * @param length_bytes  payload per datagram, 1..65507
 * @param max_burst     datagrams per call at most; 0 = default (see above)
 * @return 0 or -EINVAL (usage error naming length_bytes).
 */
int ql_pacer_init(ql_pacer *p, int64_t start_ns, uint64_t rate_bps,
		  uint32_t length_bytes, uint32_t max_burst, ql_err *e);

/*
 * The same schedule over blocks of block_bytes (a TCP sender's writes):
 * block k is due at origin + floor(k * block_bytes * 8 * 1e9 / rate_bps) ns,
 * and the stall slack is a time: max_burst = the whole blocks of slack_ns at
 * the target rate, at least 1 (at most 2^32 - 1). A sender behind by up to
 * slack_ns catches up; after a longer stall it sends max_burst blocks at
 * once and the schedule re-bases, so it never bursts more than slack_ns of
 * data (or one block, when a block is longer). rate_bps == 0: unlimited, as
 * above.
 * @param block_bytes  bytes per block, 1..QL_PACER_BLOCK_MAX_BYTES
 * @param slack_ns     the catch-up slack in ns, >= 0
 * @return 0 or -EINVAL (usage error naming block_bytes or slack_ns).
 * Usage: ql_pacer_init_blocks(&p, ql_now_ns(), rate, len, QL_PACER_TCP_SLACK_NS, &e);
 */
#define QL_PACER_BLOCK_MAX_BYTES  ((uint64_t)1 << 32)
/* The TCP sender's slack: 10 ms of data. */
#define QL_PACER_TCP_SLACK_NS     10000000LL
int ql_pacer_init_blocks(ql_pacer *p, int64_t start_ns, uint64_t rate_bps,
			 uint64_t block_bytes, int64_t slack_ns, ql_err *e);

/*
 * How many datagrams are due at now_ns (0..max_burst); the caller sends
 * exactly that many (or fewer and calls again: unsent ones stay due).
 * *next_due_ns (may be NULL) receives when the next datagram after those
 * returned is due, for sleeping (ql_sleep_until_ns).
 * Usage: n = ql_pacer_due(&p, ql_now_ns(), &next); send n; sleep to next.
 */
uint64_t ql_pacer_due(ql_pacer *p, int64_t now_ns, int64_t *next_due_ns);

/*
 * Give back `unsent` of the datagrams the last ql_pacer_due returned (e.g.
 * the socket said EAGAIN): they are due again at once, in the same slots.
 * unsent is capped at what was released since the origin.
 */
void ql_pacer_unsend(ql_pacer *p, uint64_t unsent);

/*
 * After a stall beyond max_burst, release at most n datagrams at the
 * re-base instead of max_burst (n = 0: max_burst; capped at max_burst); the
 * rest of max_burst is dropped with the missed slots. So a sender whose
 * slack is long (the UDP sender catches up to 100 ms) starts the new
 * schedule with n datagrams, not with a burst of its whole slack: the
 * windows after a long stall carry the target rate. Stalls within the
 * slack are caught up at once, as before (each report interval keeps its
 * share). Usage: ql_pacer_set_rebase_burst(&p, ql_pacer_burst_of_ns(&p, 250000));
 */
void ql_pacer_set_rebase_burst(ql_pacer *p, uint64_t n);
/* The datagrams of span_ns at the pacer's rate, at least
 * QL_PACER_BURST_MIN (rate 0: QL_PACER_BURST_UNLIMITED). */
uint64_t ql_pacer_burst_of_ns(const ql_pacer *p, int64_t span_ns);
#define QL_PACER_REBASE_SPAN_NS   250000LL

/* Time slot k of the current schedule is due (ns). */
int64_t ql_pacer_slot_ns(const ql_pacer *p, uint64_t k);

#endif
