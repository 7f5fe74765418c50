/*
 * C unit tests of csrc/core/netem_advice.c and of keep_order's rules in
 * netem.c. The correlated generator's loss rate is checked against a run of
 * the same integer recurrence sch_netem uses (answer = (value * (2^32 - rho')
 * + last * rho') >> 32, rho' = rho + 1, lost when loss >= answer) over
 * millions of draws; the suggested Gilbert model against a run of the
 * kernel's two-state chain (the loss decided in the state the packet finds,
 * then the transition).
 */
#include "ctest.h"

#include <errno.h>
#include <linux/pkt_sched.h>
#include <math.h>

#include <netlink/msg.h>

#include "err.h"
#include "netem.h"
#include "netem_advice.h"

/* splitmix64: a fixed, well-mixed sequence so every run sees the same draws */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t draw(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* Loss rate of `loss p rho` over n packets, as the kernel draws it. */
static double kernel_correlated_loss(uint32_t loss, uint32_t rho, long n)
{
	uint64_t last = draw(), r = (uint64_t)rho + 1;
	long lost = 0;
	for (long i = 0; i < n; i++) {
		uint64_t value = draw();
		uint32_t answer = (uint32_t)((value * ((1ull << 32) - r) + last * r) >> 32);
		last = answer;
		lost += loss >= answer;
	}
	return (double)lost / (double)n;
}

TEST(correlated_generator_loss_matches_the_kernel_recurrence)
{
	static const double cases[][2] = {
		{ 5, 25 }, { 20, 25 }, { 70, 25 }, { 50, 25 }, { 10, 50 }, { 30, 80 },
	};
	const long n = 4000000;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		uint32_t p = ql_netem_pct_to_frac32(cases[i][0]);
		uint32_t rho = ql_netem_pct_to_frac32(cases[i][1]);
		double want = kernel_correlated_loss(p, rho, n);
		double got = ql_netem_crandom_below(p, rho);
		/* successive draws are correlated: a bound 3x wider than binomial */
		double sd = sqrt(want * (1 - want) / (double)n) * 3;
		CHECK_NEAR(got, want, 5 * sd + 2e-4);
	}
	/* the case the advice is about: 5 % with 25 % is about 0.19 % */
	CHECK_NEAR(ql_netem_crandom_below(ql_netem_pct_to_frac32(5), ql_netem_pct_to_frac32(25)),
		   0.0019, 0.0002);
	CHECK_NEAR(ql_netem_crandom_below(ql_netem_pct_to_frac32(5), 0), 0.05, 1e-9);
	CHECK_NEAR(ql_netem_crandom_below(QL_FRAC32_ONE, ql_netem_pct_to_frac32(25)), 1, 0);
}

TEST(gilbert_from_loss_and_burst)
{
	double p, r;
	CHECK_EQ_INT(ql_netem_gilbert(0.05, 4, &p, &r), 0);
	CHECK_NEAR(r, 0.25, 1e-12);
	CHECK_NEAR(p, 0.05 / (4 * 0.95), 1e-12);
	CHECK_NEAR(p / (p + r), 0.05, 1e-12);  /* the chain's mean loss */
	CHECK_EQ_INT(ql_netem_gilbert(0.9, 1, &p, &r), -EINVAL);  /* p would be 9 */
	CHECK_EQ_INT(ql_netem_gilbert(0, 2, &p, &r), -EINVAL);
	CHECK_EQ_INT(ql_netem_gilbert(0.1, 0.5, &p, &r), -EINVAL);
}

TEST(advice_for_correlated_loss_only)
{
	ql_netem_spec s;
	ql_netem_advice a[QL_NETEM_ADVICE_MAX];
	ql_netem_spec_init(&s);
	s.loss_frac32 = ql_netem_pct_to_frac32(5);
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);  /* no correlation */
	s.loss_corr_frac32 = ql_netem_pct_to_frac32(25);
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 1);
	CHECK_STR(a[0].code, "CORRELATED_LOSS");
	CHECK_STR(a[0].field, "spec.loss_corr_pct");
	CHECK_NEAR(a[0].kernel_loss_pct, 0.19, 0.02);
	CHECK(a[0].has_gilbert);
	CHECK_EQ_U64(a[0].ge_p_frac32, ql_netem_pct_to_frac32(3.75));   /* 5 x 0.75 */
	CHECK_EQ_U64(a[0].ge_r_frac32, ql_netem_pct_to_frac32(71.25));  /* 95 x 0.75 */
	CHECK_NEAR(a[0].mean_burst_packets, 1 / 0.7125, 1e-9);
	CHECK(strstr(a[0].msg, "spec.loss_gemodel") && strstr(a[0].msg, "spec.loss_state"));
	CHECK_EQ_INT(ql_netem_advise(&s, a, 0), 0);  /* cap respected */

	s.loss_corr_frac32 = QL_FRAC32_ONE;  /* all or nothing: no equivalent */
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 1);
	CHECK(!a[0].has_gilbert);
	s.loss_frac32 = QL_FRAC32_ONE;  /* everything is lost anyway */
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);

	ql_netem_spec_init(&s);
	s.loss_model = QL_NETEM_LOSS_GEMODEL;
	s.ge_p_frac32 = ql_netem_pct_to_frac32(3.75);
	s.ge_r_frac32 = ql_netem_pct_to_frac32(71.25);
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);
}

/* Jitter without keep_order, a rate or reorder reorders closely spaced
 * packets: JITTER_REORDERS says so, naming twice the jitter; with any of
 * the three there is nothing to say. */
TEST(advice_for_jitter_without_order)
{
	ql_netem_spec s;
	ql_netem_advice a[QL_NETEM_ADVICE_MAX];
	ql_netem_spec_init(&s);
	s.delay_ns = 50000000;
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);  /* no jitter */
	s.jitter_ns = 10000000;
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 1);
	CHECK_STR(a[0].code, "JITTER_REORDERS");
	CHECK_STR(a[0].field, "spec.jitter_ms");
	CHECK(!a[0].has_gilbert);
	CHECK(strstr(a[0].msg, "spec.jitter_ms = 10 ") && strstr(a[0].msg, "about 20 ms")
	      && strstr(a[0].msg, "spec.keep_order = true"));
	s.loss_frac32 = ql_netem_pct_to_frac32(5);  /* both, in a fixed order */
	s.loss_corr_frac32 = ql_netem_pct_to_frac32(25);
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 2);
	CHECK_STR(a[0].code, "CORRELATED_LOSS");
	CHECK_STR(a[1].code, "JITTER_REORDERS");
	CHECK_EQ_INT(ql_netem_advise(&s, a, 1), 1);  /* cap respected */
	s.loss_frac32 = s.loss_corr_frac32 = 0;
	s.keep_order = 1;
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);
	s.keep_order = 0;
	s.rate_bytes_per_s = 12500000;
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);
	s.rate_bytes_per_s = 0;
	s.reorder_frac32 = ql_netem_pct_to_frac32(5);
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);
}

/* Jitter above the delay was taken without a word (tc netem's `delay 0ms
 * 20ms` too): the draws below 0 are sent at once, so the mean delay is not
 * the asked one. JITTER_CLIPS gives the clipped mean of the uniform draws,
 * (d + j)^2 / 4j, 5 ms for 0 +- 20 ms; jitter up to the delay says nothing. */
TEST(advice_for_jitter_above_the_delay)
{
	ql_netem_spec s;
	ql_netem_advice a[QL_NETEM_ADVICE_MAX];
	ql_netem_spec_init(&s);
	s.jitter_ns = 20000000;
	s.keep_order = 1;  /* JITTER_REORDERS apart */
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 1);
	CHECK_STR(a[0].code, "JITTER_CLIPS");
	CHECK_STR(a[0].field, "spec.jitter_ms");
	CHECK(strstr(a[0].msg, "spec.jitter_ms = 20 is above spec.delay_ms = 0: ") != NULL);
	CHECK(strstr(a[0].msg, "their mean is about 5 ms (uniform draws), not 0 ms") != NULL);
	s.delay_ns = 10000000;  /* 10 +- 20: (30)^2 / 80 = 11.25 */
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 1);
	CHECK(strstr(a[0].msg, "about 11.25 ms (uniform draws), not 10 ms") != NULL);
	static const int16_t table[] = { -4096, 0, 4096 };
	s.dist = table;
	s.dist_len = 3;
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 1);
	CHECK(strstr(a[0].msg, "their mean is above 10 ms;") != NULL);
	s.dist = NULL;
	s.dist_len = 0;
	s.delay_ns = 20000000;  /* jitter = delay: nothing below 0 */
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 0);
	s.keep_order = 0;  /* both jitter advice, in a fixed order */
	s.delay_ns = 0;
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 2);
	CHECK_STR(a[0].code, "JITTER_REORDERS");
	CHECK_STR(a[1].code, "JITTER_CLIPS");
}

/* The suggested model run as the kernel runs GE: mean loss and mean burst. */
TEST(suggested_gilbert_gives_the_asked_loss)
{
	ql_netem_spec s;
	ql_netem_advice a[QL_NETEM_ADVICE_MAX];
	ql_netem_spec_init(&s);
	s.loss_frac32 = ql_netem_pct_to_frac32(5);
	s.loss_corr_frac32 = ql_netem_pct_to_frac32(25);
	CHECK_EQ_INT(ql_netem_advise(&s, a, QL_NETEM_ADVICE_MAX), 1);
	const long n = 4000000;
	int bad = 0;
	long lost = 0, bursts = 0;
	int prev_lost = 0;
	for (long i = 0; i < n; i++) {
		int l;
		if (!bad) {
			if (draw() < a[0].ge_p_frac32)
				bad = 1;
			l = 0;  /* 1-k = 0 */
		} else {
			if (draw() < a[0].ge_r_frac32)
				bad = 0;
			l = 1;  /* 1-h = 100 %: h = 0 */
		}
		lost += l;
		bursts += l && !prev_lost;
		prev_lost = l;
	}
	double loss = (double)lost / (double)n;
	/* lag-1 correlation 0.25: variance x (1 + 0.25) / (1 - 0.25) */
	double sd = sqrt(0.05 * 0.95 / (double)n * 1.25 / 0.75);
	CHECK_NEAR(loss, 0.05, 5 * sd);
	CHECK_NEAR((double)lost / (double)bursts, a[0].mean_burst_packets, 0.01);
}

TEST(keep_order_rules)
{
	ql_netem_spec s;
	ql_err e;
	ql_netem_spec_init(&s);
	s.delay_ns = 50000000;
	s.jitter_ns = 10000000;
	s.keep_order = 1;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), 0);
	s.reorder_frac32 = ql_netem_pct_to_frac32(10);
	s.reorder_gap_packets = 1;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), -EINVAL);
	CHECK(e.usage && strncmp(e.msg, "spec.keep_order:", 16) == 0);
	s.reorder_frac32 = 0;
	s.reorder_gap_packets = 0;
	struct nl_msg *msg = NULL;
	/* unresolved: the kernel has no field for it */
	CHECK_EQ_INT(ql_netem_build(&msg, 1, TC_H_ROOT, 0, &s, 0, &e), -EINVAL);
	CHECK(e.usage && strncmp(e.msg, "spec.keep_order:", 16) == 0);
	s.rate_bytes_per_s = 1250000000;  /* 10 Gbit/s */
	CHECK_EQ_INT(ql_netem_build(&msg, 1, TC_H_ROOT, 0, &s, 0, &e), 0);
	if (msg)
		nlmsg_free(msg);
}

TEST(short_percent)
{
	CHECK_NEAR(ql_netem_frac32_to_short_pct(ql_netem_pct_to_frac32(5)), 5, 0);
	CHECK_NEAR(ql_netem_frac32_to_short_pct(ql_netem_pct_to_frac32(71.25)), 71.25, 0);
	CHECK_NEAR(ql_netem_frac32_to_short_pct(ql_netem_pct_to_frac32(0.5)), 0.5, 0);
}

int main(void)
{
	RUN(correlated_generator_loss_matches_the_kernel_recurrence);
	RUN(gilbert_from_loss_and_burst);
	RUN(advice_for_correlated_loss_only);
	RUN(advice_for_jitter_without_order);
	RUN(advice_for_jitter_above_the_delay);
	RUN(suggested_gilbert_gives_the_asked_loss);
	RUN(keep_order_rules);
	RUN(short_percent);
	return ctest_done();
}
