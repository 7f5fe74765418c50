/*
 * netem_advice.h - what a valid netem spec does that its fields do not say,
 * told before it is applied. Stands on netem.h (the spec) and err.h (code
 * and message sizes); no kernel I/O.
 *
 * CORRELATED_LOSS: random loss with a correlation (tc's `loss 5% 25%`).
 * sch_netem's correlated generator (get_crandom) returns a weighted mean of
 * a fresh uniform number and its own previous answer, rho the weight of the
 * previous one; a packet is lost when that value is at most the loss
 * probability. The mean of such a value stays 1/2 but its spread narrows
 * (a stationary sum (1-rho) * sum_k rho^k U_k), so a small loss probability
 * is reached far less often than asked: 5 % with 25 % gives about 0.19 %.
 * The losses do not come in bursts of the asked correlation either. The
 * advice gives the loss the kernel will produce and a Gilbert-Elliott (or
 * 4-state) model with the asked mean loss p and the burst a lag-1
 * correlation rho between successive losses means: P(loss | loss) =
 * p + rho (1 - p), P(loss | delivered) = p (1 - rho), i.e. the simple
 * Gilbert model p_GE = p (1 - rho), r = (1 - p)(1 - rho), 1-h = 100 %,
 * 1-k = 0, whose mean loss is p_GE / (p_GE + r) = p and mean burst 1 / r.
 *
 * JITTER_REORDERS: delay jitter without keep_order, a rate or reorder.
 * netem draws each packet's delay on its own and sends in the order of the
 * send times, so packets closer together than the spread of the delays
 * (2 x jitter for the uniform default) overtake each other; only a rate
 * (what keep_order sets) schedules each after the one queued before.
 *
 * JITTER_CLIPS: jitter above the delay. The delay drawn for a packet
 * (delay +- jitter, or the table scaled by jitter) may be below 0; netem
 * (and the native link) then sends the packet at once, a delay of 0, so the
 * draws are clipped there: the mean delay is above the asked delay (for
 * uniform draws in [d - j, d + j], j > d: (d + j)^2 / 4j) and the spread
 * narrower than asked.
 */
#ifndef QL_NETEM_ADVICE_H
#define QL_NETEM_ADVICE_H

#include <stdint.h>

#include "err.h"
#include "netem.h"

#define QL_NETEM_ADVICE_MAX 4

typedef struct ql_netem_advice {
	char code[QL_ERR_CODE_MAX];    /* stable: "CORRELATED_LOSS", "JITTER_REORDERS", "JITTER_CLIPS" */
	char field[40];                /* the spec field it is about */
	char msg[QL_ERR_MSG_MAX];      /* what happens and what to use instead */
	double kernel_loss_pct;        /* CORRELATED_LOSS: the loss the kernel's generator gives */
	int has_gilbert;               /* a suggestion below (0: rho = 100 %) */
	uint32_t ge_p_frac32, ge_r_frac32;  /* with 1-h = 100 %, 1-k = 0 */
	double mean_burst_packets;     /* 1 / r of the suggestion */
} ql_netem_advice;

/* The advice for s (already valid): fills out[0..cap) and returns how many
 * entries there are (0 when nothing to say). */
int ql_netem_advise(const ql_netem_spec *s, ql_netem_advice *out, int cap);

/*
 * P(value <= p) for the stationary value of sch_netem's correlated
 * generator with correlation rho (u32 fractions, as on the wire), i.e. the
 * loss rate of `loss p rho` over a long run. Computed on a grid (2048
 * points), accurate to about 1e-4 absolute. rho = 100 % keeps the first
 * random value for ever: the rate is then p but all or nothing.
 */
double ql_netem_crandom_below(uint32_t p_frac32, uint32_t rho_frac32);

/*
 * The simple Gilbert model (1-h = 100 %, 1-k = 0) with mean loss loss
 * (0 < loss < 1) and mean burst burst_packets (>= 1): r = 1 / burst,
 * p = loss / (burst (1 - loss)). Returns 0, or -EINVAL when no such model
 * exists (p would exceed 1, i.e. bursts too short for that loss).
 */
int ql_netem_gilbert(double loss, double burst_packets, double *p, double *r);

#endif
