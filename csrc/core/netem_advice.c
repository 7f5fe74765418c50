/* netem_advice.c - see netem_advice.h. */
#include "netem_advice.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define GRID 2048

/* Integral of the piecewise-linear cdf c from 0 to y, i[] its values at
 * the grid points (c is 0 below 0). */
static double integral_at(const double *c, const double *in, double y)
{
	const double h = 1.0 / GRID;
	if (y <= 0)
		return 0;
	double pos = y / h;
	int j = (int)pos;
	if (j >= GRID)
		return in[GRID] + (y - 1.0) * c[GRID];
	double f = pos - j;
	return in[j] + h * (f * c[j] + 0.5 * f * f * (c[j + 1] - c[j]));
}

static double cdf_at(const double *c, double x)
{
	if (x < 0)
		return 0;
	double pos = x * GRID;
	int j = (int)pos;
	if (j >= GRID)
		return c[GRID];
	double f = pos - j;
	return c[j] + f * (c[j + 1] - c[j]);
}

double ql_netem_crandom_below(uint32_t p_frac32, uint32_t rho_frac32)
{
	double p = (double)p_frac32 / 4294967296.0;
	if (p_frac32 == QL_FRAC32_ONE)
		return 1;
	if (rho_frac32 == 0 || rho_frac32 == QL_FRAC32_ONE)
		return p;
	/* the kernel weighs the previous answer by (rho + 1) / 2^32 */
	double rho = ((double)rho_frac32 + 1.0) / 4294967296.0;
	const double h = 1.0 / GRID;
	double c[GRID + 1], in[GRID + 1];
	for (int i = 0; i <= GRID; i++)
		c[i] = 1;  /* all mass at 0 */
	/* Add the terms (1 - rho) rho^k U_k one by one (each a convolution
	 * with a box of that width); the tail of terms narrower than a
	 * quarter bin moves the distribution by its mean instead. */
	double w = 1 - rho, rest = 1;
	for (int k = 0; k < 100000 && w >= h / 4; k++) {
		in[0] = 0;
		for (int i = 1; i <= GRID; i++)
			in[i] = in[i - 1] + 0.5 * h * (c[i - 1] + c[i]);
		for (int i = GRID; i >= 0; i--) {
			double v = (in[i] - integral_at(c, in, i * h - w)) / w;
			c[i] = v > 1 ? 1 : v;
		}
		rest *= rho;
		w *= rho;
	}
	return cdf_at(c, p - rest / 2);
}

int ql_netem_gilbert(double loss, double burst_packets, double *p, double *r)
{
	if (!(loss > 0 && loss < 1) || !(burst_packets >= 1))
		return -EINVAL;
	*r = 1 / burst_packets;
	*p = loss / (burst_packets * (1 - loss));
	return *p <= 1 ? 0 : -EINVAL;
}

static int correlated_loss(const ql_netem_spec *s, ql_netem_advice *a)
{
	if (s->loss_model != QL_NETEM_LOSS_RANDOM || !s->loss_frac32 || !s->loss_corr_frac32 ||
	    s->loss_frac32 == QL_FRAC32_ONE)
		return 0;
	memset(a, 0, sizeof *a);
	snprintf(a->code, sizeof a->code, "CORRELATED_LOSS");
	snprintf(a->field, sizeof a->field, "spec.loss_corr_pct");
	/* the percentages as the caller wrote them, so 5 and 25 give 3.75 */
	double loss = ql_netem_frac32_to_short_pct(s->loss_frac32) / 100;
	double corr = ql_netem_frac32_to_short_pct(s->loss_corr_frac32) / 100;
	a->kernel_loss_pct = 100 * ql_netem_crandom_below(s->loss_frac32, s->loss_corr_frac32);
	char got[40];
	if (a->kernel_loss_pct < 0.001)
		snprintf(got, sizeof got, "almost no loss (below 0.001 %%)");
	else
		snprintf(got, sizeof got, "about %.2g %% loss", a->kernel_loss_pct);
	int n = snprintf(a->msg, sizeof a->msg,
			 "spec.loss_pct = %.4g with spec.loss_corr_pct = %.4g gives %s, not %.4g %%: "
			 "the kernel's correlated generator averages successive random numbers, which narrows "
			 "their spread instead of making losses come in bursts",
			 100 * loss, 100 * corr, got, 100 * loss);
	if (s->loss_corr_frac32 == QL_FRAC32_ONE) {
		snprintf(a->msg + n, sizeof a->msg - (size_t)n,
			 " (at 100 %% the first random number decides for ever: all packets or none); "
			 "for bursts use spec.loss_gemodel or spec.loss_state");
		return 1;
	}
	double p, r;
	if (ql_netem_gilbert(loss, 1 / ((1 - loss) * (1 - corr)), &p, &r) < 0)
		return 1;  /* cannot happen for 0 < loss, corr < 1 */
	a->has_gilbert = 1;
	a->ge_p_frac32 = ql_netem_pct_to_frac32(100 * p);
	a->ge_r_frac32 = ql_netem_pct_to_frac32(100 * r);
	a->mean_burst_packets = 1 / r;
	snprintf(a->msg + n, sizeof a->msg - (size_t)n,
		 "; for %.4g %% loss in bursts of %.3g packets on average use spec.loss_gemodel = "
		 "{p_pct = %.4g, r_pct = %.4g, one_minus_h_pct = 100, one_minus_k_pct = 0} "
		 "(or spec.loss_state = {p13_pct = %.4g, p31_pct = %.4g, p32_pct = 0, p23_pct = 100, p14_pct = 0})",
		 100 * loss, 1 / r, 100 * p, 100 * r, 100 * p, 100 * r);
	return 1;
}

static int jitter_reorders(const ql_netem_spec *s, ql_netem_advice *a)
{
	/* asked-for reordering (reorder_pct) or a rate (keep_order's) keep
	 * nothing to say */
	if (s->jitter_ns <= 0 || s->keep_order || s->rate_bytes_per_s || s->reorder_frac32)
		return 0;
	memset(a, 0, sizeof *a);
	snprintf(a->code, sizeof a->code, "JITTER_REORDERS");
	snprintf(a->field, sizeof a->field, "spec.jitter_ms");
	double jitter_ms = (double)s->jitter_ns / 1e6;
	snprintf(a->msg, sizeof a->msg,
		 "spec.jitter_ms = %.6g without spec.keep_order or spec.rate_bps reorders packets: "
		 "netem draws each packet's delay on its own, so packets sent less than about "
		 "%.6g ms (2 x jitter) apart can overtake each other (datagrams 1 ms apart under "
		 "50 +- 10 ms: about 70 %% out of order); set spec.keep_order = true to keep them "
		 "in order (it changes the delays' distribution, see manual/errors.md)",
		 jitter_ms, 2 * jitter_ms);
	return 1;
}

static int jitter_clips(const ql_netem_spec *s, ql_netem_advice *a)
{
	if (s->jitter_ns <= s->delay_ns)
		return 0;
	memset(a, 0, sizeof *a);
	snprintf(a->code, sizeof a->code, "JITTER_CLIPS");
	snprintf(a->field, sizeof a->field, "spec.jitter_ms");
	double d = (double)s->delay_ns / 1e6, j = (double)s->jitter_ns / 1e6;
	char mean[96];
	if (!s->dist)  /* uniform in [d - j, d + j], below 0 taken as 0 */
		snprintf(mean, sizeof mean, "about %.4g ms (uniform draws), not %.6g ms",
			 (d + j) * (d + j) / (4 * j), d);
	else
		snprintf(mean, sizeof mean, "above %.6g ms", d);
	snprintf(a->msg, sizeof a->msg,
		 "spec.jitter_ms = %.6g is above spec.delay_ms = %.6g: a packet whose drawn delay is "
		 "below 0 is sent at once (a delay of 0), so the delays are not spread around "
		 "spec.delay_ms and their mean is %s; keep spec.jitter_ms <= spec.delay_ms for a "
		 "spread around the delay",
		 j, d, mean);
	return 1;
}

int ql_netem_advise(const ql_netem_spec *s, ql_netem_advice *out, int cap)
{
	int n = 0;
	ql_netem_advice a;
	if (correlated_loss(s, &a) && n < cap)
		out[n++] = a;
	if (jitter_reorders(s, &a) && n < cap)
		out[n++] = a;
	if (jitter_clips(s, &a) && n < cap)
		out[n++] = a;
	return n;
}
