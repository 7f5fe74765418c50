/*
 * C unit tests of the option rules the core holds for the Lua layer without
 * needing a device or root: a shaper spec's rules (ql_shape_validate) and
 * the prefix of generated namespace names (ql_netns_check_prefix). Each
 * violation is a usage error whose message starts with the field.
 */
#include "ctest.h"

#include <errno.h>
#include <string.h>

#include "err.h"
#include "netns.h"
#include "shape.h"

static void expect_usage(const ql_shape *s, const char *msg)
{
	ql_err e;
	CHECK_EQ_INT(ql_shape_validate(s, &e), -EINVAL);
	CHECK(e.usage);
	CHECK_STR(e.msg, msg);
}

TEST(shape_rules_name_the_field)
{
	ql_err e;
	ql_shape ok_tbf = { .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 125000, .latency_us = 5000 };
	CHECK_EQ_INT(ql_shape_validate(&ok_tbf, &e), 0);
	ql_shape ok_htb = { .kind = QL_SHAPE_HTB, .rate_bytes_per_s = 125000, .ceil_bytes_per_s = 125000 };
	CHECK_EQ_INT(ql_shape_validate(&ok_htb, &e), 0);

	expect_usage(&(ql_shape){ .kind = 9, .rate_bytes_per_s = 1 }, "spec.kind: expected \"tbf\" or \"htb\"");
	expect_usage(&(ql_shape){ .kind = QL_SHAPE_TBF }, "spec.rate_bps: expected at least 8 (one byte per second)");
	expect_usage(&(ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 1, .latency_us = 1, .limit_bytes = 1 },
		     "spec.latency_ms: give either latency_ms or limit_bytes, not both");
	expect_usage(&(ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 1, .ceil_bytes_per_s = 2 },
		     "spec.ceil_bps: only for kind \"htb\"");
	expect_usage(&(ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 1, .cburst_bytes = 2 },
		     "spec.cburst_bytes: only for kind \"htb\"");
	expect_usage(&(ql_shape){ .kind = QL_SHAPE_HTB, .rate_bytes_per_s = 1, .limit_bytes = 2 },
		     "spec.limit_bytes: only for kind \"tbf\"");
	expect_usage(&(ql_shape){ .kind = QL_SHAPE_HTB, .rate_bytes_per_s = 1, .latency_us = 2 },
		     "spec.latency_ms: only for kind \"tbf\"");
	expect_usage(&(ql_shape){ .kind = QL_SHAPE_HTB, .rate_bytes_per_s = 2, .ceil_bytes_per_s = 1 },
		     "spec.ceil_bps: expected at least spec.rate_bps");
	/* ql_shape_apply runs the same rules before it opens the device */
	ql_shape bad = { .kind = QL_SHAPE_HTB, .rate_bytes_per_s = 2, .ceil_bytes_per_s = 1 };
	ql_shape_result r;
	CHECK_EQ_INT(ql_shape_apply("no-such-dev0", NULL, &bad, &r, NULL, &e), -EINVAL);
	CHECK_STR(e.msg, "spec.ceil_bps: expected at least spec.rate_bps");
}

/* The rules that need the link's MTU, under the caller's names: a tbf
 * limit_bytes below one MTU-sized frame (the MTU + 14 bytes of Ethernet
 * header) would drop every full frame and is refused; the queue a rate
 * implies must fit 4 GiB; a default bucket too long to drain names the
 * rate. */
TEST(shape_resolve_rules)
{
	ql_err e;
	uint32_t bt, cbt;
	ql_shape s = { .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 125000, .limit_bytes = 1 };
	CHECK_EQ_INT(ql_shape_resolve(&s, 1500, "eth9", &ql_shape_spec_names, &bt, &cbt, &e), -EINVAL);
	CHECK(e.usage);
	CHECK_STR(e.msg, "spec.limit_bytes: expected at least one MTU-sized frame of eth9 (1500 + 14 "
		  "bytes of link header), got 1");
	s = (ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 125000, .limit_bytes = 1513 };
	CHECK_EQ_INT(ql_shape_resolve(&s, 1500, "eth9", &ql_shape_spec_names, &bt, &cbt, &e), -EINVAL);
	s = (ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 125000, .limit_bytes = 1514 };
	CHECK_EQ_INT(ql_shape_resolve(&s, 1500, "eth9", &ql_shape_spec_names, &bt, &cbt, &e), 0);
	CHECK_EQ_INT(s.burst_bytes, 15000);
	s = (ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 1000000000000000ull };
	CHECK_EQ_INT(ql_shape_resolve(&s, 1500, "eth9", &ql_shape_spec_names, &bt, &cbt, &e), -EINVAL);
	CHECK(strncmp(e.msg, "spec.rate_bps: rate * latency (20 ms) + burst exceeds 4 GiB", 59) == 0);
	s = (ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 1000000000000000ull, .latency_us = 1000 };
	CHECK_EQ_INT(ql_shape_resolve(&s, 1500, "eth9", &ql_shape_spec_names, &bt, &cbt, &e), -EINVAL);
	CHECK(strncmp(e.msg, "spec.latency_ms: rate * latency (1 ms)", 38) == 0);
	s = (ql_shape){ .kind = QL_SHAPE_HTB, .rate_bytes_per_s = 1 };
	CHECK_EQ_INT(ql_shape_resolve(&s, 1500, "eth9", &ql_shape_spec_names, &bt, &cbt, &e), -EINVAL);
	CHECK(strncmp(e.msg, "spec.rate_bps: expected at least 440 bit/s", 42) == 0);
	/* the defaults as apply sends them */
	s = (ql_shape){ .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 125000000 };
	CHECK_EQ_INT(ql_shape_resolve(&s, 1500, "eth9", &ql_shape_spec_names, &bt, &cbt, &e), 0);
	CHECK_EQ_INT(s.burst_bytes, 500000);
	CHECK_EQ_INT(s.limit_bytes, 500000 + 125000000 / 50);
}

TEST(netns_prefix_rule)
{
	ql_err e;
	CHECK_EQ_INT(ql_netns_check_prefix("opts.prefix", "qoslab", &e), 0);
	CHECK_EQ_INT(ql_netns_check_prefix("opts.prefix", "a-b_c.9", &e), 0);
	char long_ok[QL_NETNS_PREFIX_MAX + 2];
	memset(long_ok, 'x', sizeof long_ok);
	long_ok[QL_NETNS_PREFIX_MAX] = '\0';
	CHECK_EQ_INT(ql_netns_check_prefix("p", long_ok, &e), 0);
	long_ok[QL_NETNS_PREFIX_MAX] = 'x';
	long_ok[QL_NETNS_PREFIX_MAX + 1] = '\0';
	CHECK_EQ_INT(ql_netns_check_prefix("p", long_ok, &e), -EINVAL);
	static const char *const bad[] = { "", "a/b", "a b", "a:b", "é", NULL };
	for (const char *const *p = bad; *p; p++) {
		CHECK_EQ_INT(ql_netns_check_prefix("opts.prefix", *p, &e), -EINVAL);
		CHECK(e.usage && strncmp(e.msg, "opts.prefix: expected " QL_NETNS_PREFIX_EXPECTED ", got string",
					 strlen("opts.prefix: expected " QL_NETNS_PREFIX_EXPECTED ", got string")) == 0);
	}
}

int main(void)
{
	RUN(shape_rules_name_the_field);
	RUN(shape_resolve_rules);
	RUN(netns_prefix_rule);
	return ctest_done();
}
