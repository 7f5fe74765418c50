/*
 * C unit tests of csrc/core/netem.c without a kernel: build the RTM_NEWQDISC
 * message, then decode it with the same decoder that reads kernel replies.
 * Percent scaling (rint(p * UINT32_MAX)), time units (ns and psched
 * ticks), rates above 2^32 bytes/s (RATE64) and the Gilbert-Elliott
 * complement.
 */
#include "ctest.h"

#include <errno.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

#include "err.h"
#include "netem.h"

/* Build, then decode back through ql_netem_decode. */
static int roundtrip(const ql_netem_spec *in, ql_netem_spec *out, struct nl_msg **keep)
{
	ql_err e;
	struct nl_msg *msg;
	int rc = ql_netem_build(&msg, 7, TC_H_ROOT, 0, in, 0, &e);
	if (rc < 0) {
		fprintf(stderr, "  build: %s\n", e.msg);
		return rc;
	}
	int ifindex = 0;
	char kind[16];
	ql_netem_info info;
	rc = ql_netem_decode(nlmsg_hdr(msg), &ifindex, kind, sizeof kind, &info, &e);
	if (rc != 1) {
		fprintf(stderr, "  decode: %d %s\n", rc, e.msg);
		nlmsg_free(msg);
		return -1;
	}
	if (ifindex != 7 || info.parent != TC_H_ROOT || strcmp(kind, "netem")) {
		nlmsg_free(msg);
		return -1;
	}
	*out = info.spec;
	if (keep)
		*keep = msg;
	else
		nlmsg_free(msg);
	return 0;
}

/* The netem attributes after the qopt struct inside TCA_OPTIONS. */
static void netem_attrs(struct nl_msg *msg, struct nlattr **tb, struct tc_netem_qopt *qopt)
{
	struct nlattr *top[TCA_MAX + 1];
	CHECK(nlmsg_parse(nlmsg_hdr(msg), sizeof(struct tcmsg), top, TCA_MAX, NULL) == 0);
	struct nlattr *o = top[TCA_OPTIONS];
	CHECK(o != NULL);
	CHECK((o->nla_type & NLA_F_NESTED) == 0);
	memcpy(qopt, nla_data(o), sizeof *qopt);
	CHECK(nla_parse(tb, 14, (struct nlattr *)((char *)nla_data(o) + NLA_ALIGN(sizeof *qopt)),
			nla_len(o) - (int)NLA_ALIGN(sizeof *qopt), NULL) == 0);
}

TEST(percent_scaling_case_025)
{
	static const struct { double pct; uint32_t raw; } cases[] = {
		{ 0.001, 42950 }, { 0.1, 4294967 }, { 0.5, 21474836 }, { 1, 42949673 },
		{ 12.5, 536870912 }, { 50, 2147483648u }, { 75, 3221225471u },
		{ 100, 4294967295u }, { 0, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		uint32_t raw = ql_netem_pct_to_frac32(cases[i].pct);
		CHECK_EQ_U64(raw, cases[i].raw);
		CHECK_NEAR(ql_netem_frac32_to_pct(raw), cases[i].pct, 1e-7);
		ql_netem_spec s, back;
		ql_netem_spec_init(&s);
		s.delay_ns = 10000000;
		s.loss_frac32 = s.duplicate_frac32 = s.corrupt_frac32 = s.reorder_frac32 = raw;
		s.reorder_gap_packets = raw ? 1 : 0;
		struct nl_msg *msg = NULL;
		CHECK_EQ_INT(roundtrip(&s, &back, &msg), 0);
		if (!msg)
			continue;
		/* Same raw value in all four fields, read back unsigned. */
		CHECK_EQ_U64(back.loss_frac32, cases[i].raw);
		CHECK_EQ_U64(back.duplicate_frac32, cases[i].raw);
		CHECK_EQ_U64(back.corrupt_frac32, cases[i].raw);
		CHECK_EQ_U64(back.reorder_frac32, cases[i].raw);
		CHECK(ql_netem_frac32_to_pct(back.loss_frac32) >= 0);
		struct nlattr *tb[15];
		struct tc_netem_qopt q;
		netem_attrs(msg, tb, &q);
		CHECK_EQ_U64(q.loss, cases[i].raw);
		CHECK_EQ_U64(q.duplicate, cases[i].raw);
		nlmsg_free(msg);
	}
}

TEST(time_units_case_026)
{
	static const int64_t ns[] = { 50000000, 1500000, 250000, 1, 4294967296LL * 64 + 5 };
	for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
		ql_netem_spec s, back;
		ql_netem_spec_init(&s);
		s.delay_ns = ns[i];
		s.jitter_ns = ns[i] > INT32_MAX ? 1000 : ns[i];
		struct nl_msg *msg = NULL;
		CHECK_EQ_INT(roundtrip(&s, &back, &msg), 0);
		if (!msg)
			continue;
		/* 64-bit attributes carry exact ns (well inside +-1 us). */
		CHECK_EQ_INT(back.delay_ns, s.delay_ns);
		CHECK_EQ_INT(back.jitter_ns, s.jitter_ns);
		struct nlattr *tb[15];
		struct tc_netem_qopt q;
		netem_attrs(msg, tb, &q);
		CHECK(tb[TCA_NETEM_LATENCY64] && tb[TCA_NETEM_JITTER64]);
		/* compat fields: psched ticks of 64 ns, saturated */
		uint64_t ticks = (uint64_t)ns[i] >> 6;
		CHECK_EQ_U64(q.latency, ticks > UINT32_MAX ? UINT32_MAX : ticks);
		nlmsg_free(msg);
	}
	/* An old kernel answering only with ticks: within 64 ns < 1 us. */
	struct tc_netem_qopt q = { .latency = 1500000 >> 6, .limit = 1000 };
	ql_netem_spec d;
	ql_err e;
	CHECK_EQ_INT(ql_netem_decode_options(&q, sizeof q, &d, &e), 0);
	CHECK(d.delay_ns <= 1500000 && 1500000 - d.delay_ns < 1000);
}

TEST(rate64_iff_at_least_2_32_case_028)
{
	static const uint64_t rates[] = { 250000000ULL, 4294967250ULL, 4294967295ULL,
					  4294967296ULL, 5000000000ULL, 125000000000ULL };
	for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
		ql_netem_spec s, back;
		ql_netem_spec_init(&s);
		s.rate_bytes_per_s = rates[i];
		struct nl_msg *msg = NULL;
		CHECK_EQ_INT(roundtrip(&s, &back, &msg), 0);
		if (!msg)
			continue;
		CHECK_EQ_U64(back.rate_bytes_per_s, rates[i]);
		struct nlattr *tb[15];
		struct tc_netem_qopt q;
		netem_attrs(msg, tb, &q);
		int big = rates[i] >= (1ULL << 32);
		CHECK_EQ_INT(tb[TCA_NETEM_RATE64] != NULL, big);
		struct tc_netem_rate r;
		memcpy(&r, nla_data(tb[TCA_NETEM_RATE]), sizeof r);
		CHECK_EQ_U64(r.rate, big ? UINT32_MAX : rates[i]);
		if (big)
			CHECK_EQ_U64(nla_get_u64(tb[TCA_NETEM_RATE64]), rates[i]);
		nlmsg_free(msg);
	}
}

TEST(rate_always_sent_so_replace_clears_it)
{
	ql_netem_spec s;
	ql_netem_spec_init(&s);
	ql_err e;
	struct nl_msg *msg;
	CHECK_EQ_INT(ql_netem_build(&msg, 1, TC_H_ROOT, 0, &s, 0, &e), 0);
	struct nlattr *tb[15];
	struct tc_netem_qopt q;
	netem_attrs(msg, tb, &q);
	CHECK(tb[TCA_NETEM_RATE] && tb[TCA_NETEM_ECN] && tb[TCA_NETEM_SLOT] &&
	      tb[TCA_NETEM_CORR] && tb[TCA_NETEM_REORDER] && tb[TCA_NETEM_CORRUPT]);
	CHECK(!tb[TCA_NETEM_LOSS] && !tb[TCA_NETEM_DELAY_DIST] && !tb[14]);
	CHECK_EQ_INT(nlmsg_hdr(msg)->nlmsg_flags & (NLM_F_CREATE | NLM_F_REPLACE | NLM_F_EXCL),
		     NLM_F_CREATE | NLM_F_REPLACE);
	CHECK_EQ_INT(q.limit, 1000);
	nlmsg_free(msg);
}

TEST(gemodel_complement_and_state)
{
	ql_netem_spec s, back;
	ql_netem_spec_init(&s);
	s.loss_model = QL_NETEM_LOSS_GEMODEL;
	s.ge_p_frac32 = ql_netem_pct_to_frac32(1);
	s.ge_r_frac32 = ql_netem_pct_to_frac32(10);
	/* tc "1-h 70%" -> kernel h = 100 % - 70 % */
	s.ge_h_frac32 = QL_FRAC32_ONE - ql_netem_pct_to_frac32(70);
	s.ge_k1_frac32 = ql_netem_pct_to_frac32(0.1);
	s.ecn = 1;
	CHECK_EQ_INT(roundtrip(&s, &back, NULL), 0);
	CHECK_EQ_INT(back.loss_model, QL_NETEM_LOSS_GEMODEL);
	CHECK_EQ_U64(back.ge_h_frac32, QL_FRAC32_ONE - 3006477106u);
	CHECK_NEAR(ql_netem_frac32_to_pct(QL_FRAC32_ONE - back.ge_h_frac32), 70, 1e-7);
	CHECK_EQ_U64(back.ge_k1_frac32, ql_netem_pct_to_frac32(0.1));
	CHECK_EQ_INT(back.ecn, 1);

	ql_netem_spec_init(&s);
	s.loss_model = QL_NETEM_LOSS_STATE;
	s.state_p13_frac32 = 1;
	s.state_p31_frac32 = 2;
	s.state_p32_frac32 = 3;
	s.state_p23_frac32 = 4;
	s.state_p14_frac32 = 5;
	CHECK_EQ_INT(roundtrip(&s, &back, NULL), 0);
	CHECK_EQ_INT(back.loss_model, QL_NETEM_LOSS_STATE);
	CHECK_EQ_U64(back.state_p13_frac32, 1);
	CHECK_EQ_U64(back.state_p31_frac32, 2);
	CHECK_EQ_U64(back.state_p32_frac32, 3);
	CHECK_EQ_U64(back.state_p23_frac32, 4);
	CHECK_EQ_U64(back.state_p14_frac32, 5);
}

TEST(every_field_roundtrips)
{
	static int16_t table[] = { -100, 0, 100, 32767, -32768 };
	ql_netem_spec s, back;
	ql_netem_spec_init(&s);
	s.delay_ns = 100000000;
	s.jitter_ns = 10000000;
	s.delay_corr_frac32 = 111;
	s.dist = table;
	s.dist_len = 5;
	s.loss_frac32 = 222;
	s.loss_corr_frac32 = 333;
	s.duplicate_frac32 = 444;
	s.duplicate_corr_frac32 = 555;
	s.reorder_frac32 = 666;
	s.reorder_corr_frac32 = 777;
	s.reorder_gap_packets = 5;
	s.corrupt_frac32 = 888;
	s.corrupt_corr_frac32 = 999;
	s.rate_bytes_per_s = 1250000;
	s.packet_overhead_bytes = -4;
	s.cell_size_bytes = 48;
	s.cell_overhead_bytes = 5;
	s.slot_min_delay_ns = 1000000;
	s.slot_max_delay_ns = 2000000;
	s.slot_max_packets = 10;
	s.slot_max_bytes = 15000;
	s.ecn = 1;
	s.limit_packets = 123456;
	s.has_seed = 1;
	s.seed = 0xFFFFFFFFFFFFFFFFULL;
	struct nl_msg *msg = NULL;
	CHECK_EQ_INT(roundtrip(&s, &back, &msg), 0);
	if (!msg)
		return;
	struct nlattr *tb[15];
	struct tc_netem_qopt q;
	netem_attrs(msg, tb, &q);
	CHECK(tb[TCA_NETEM_DELAY_DIST] && nla_len(tb[TCA_NETEM_DELAY_DIST]) == 10);
	nlmsg_free(msg);
	/* Tables are not decoded (the kernel never dumps them). */
	CHECK(back.dist == NULL);
	CHECK_EQ_U64(back.delay_ns, s.delay_ns);
	CHECK_EQ_U64(back.jitter_ns, s.jitter_ns);
	CHECK_EQ_U64(back.delay_corr_frac32, s.delay_corr_frac32);
	CHECK_EQ_U64(back.loss_model, s.loss_model);
	CHECK_EQ_U64(back.loss_frac32, s.loss_frac32);
	CHECK_EQ_U64(back.loss_corr_frac32, s.loss_corr_frac32);
	CHECK_EQ_U64(back.duplicate_frac32, s.duplicate_frac32);
	CHECK_EQ_U64(back.duplicate_corr_frac32, s.duplicate_corr_frac32);
	CHECK_EQ_U64(back.reorder_frac32, s.reorder_frac32);
	CHECK_EQ_U64(back.reorder_corr_frac32, s.reorder_corr_frac32);
	CHECK_EQ_U64(back.reorder_gap_packets, s.reorder_gap_packets);
	CHECK_EQ_U64(back.corrupt_frac32, s.corrupt_frac32);
	CHECK_EQ_U64(back.corrupt_corr_frac32, s.corrupt_corr_frac32);
	CHECK_EQ_U64(back.rate_bytes_per_s, s.rate_bytes_per_s);
	CHECK_EQ_U64(back.packet_overhead_bytes, s.packet_overhead_bytes);
	CHECK_EQ_U64(back.cell_size_bytes, s.cell_size_bytes);
	CHECK_EQ_U64(back.cell_overhead_bytes, s.cell_overhead_bytes);
	CHECK_EQ_U64(back.slot_min_delay_ns, s.slot_min_delay_ns);
	CHECK_EQ_U64(back.slot_max_delay_ns, s.slot_max_delay_ns);
	CHECK_EQ_U64(back.slot_dist_delay_ns, s.slot_dist_delay_ns);
	CHECK_EQ_U64(back.slot_dist_jitter_ns, s.slot_dist_jitter_ns);
	CHECK_EQ_U64(back.slot_max_packets, s.slot_max_packets);
	CHECK_EQ_U64(back.slot_max_bytes, s.slot_max_bytes);
	CHECK_EQ_U64(back.ecn, s.ecn);
	CHECK_EQ_U64(back.limit_packets, s.limit_packets);
	CHECK_EQ_U64(back.has_seed, s.has_seed);
	CHECK_EQ_U64(back.seed, s.seed);
}

TEST(validation_names_the_field)
{
	ql_netem_spec s;
	ql_err e;
	ql_netem_spec_init(&s);
	s.reorder_frac32 = 5;
	s.reorder_gap_packets = 1;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), -EINVAL);
	CHECK(e.usage && strstr(e.msg, "spec.reorder_pct") && strstr(e.msg, "delay_ms"));

	ql_netem_spec_init(&s);
	s.ecn = 1;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), -EINVAL);
	CHECK(strstr(e.msg, "spec.ecn") != NULL);

	ql_netem_spec_init(&s);
	s.jitter_ns = (int64_t)INT32_MAX + 1;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), -EINVAL);
	CHECK(strstr(e.msg, "spec.jitter_ms") != NULL);

	ql_netem_spec_init(&s);
	s.loss_model = QL_NETEM_LOSS_GEMODEL;
	s.loss_frac32 = 1;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), -EINVAL);
	CHECK(strstr(e.msg, "spec.loss_pct") != NULL);

	ql_netem_spec_init(&s);
	s.slot_min_delay_ns = 5;
	s.slot_max_delay_ns = 4;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), -EINVAL);
	CHECK(strstr(e.msg, "spec.slot.min_delay_ms") != NULL);

	ql_netem_spec_init(&s);
	s.cell_size_bytes = 48;
	CHECK_EQ_INT(ql_netem_validate(&s, &e), -EINVAL);
	CHECK(strstr(e.msg, "rate_bps") != NULL);
}

/* Where a netem goes: parsed strictly (hex digits, as tc prints them) and
 * the opts rules, each naming its field. */
TEST(where_rules_name_the_field)
{
	ql_err e;
	uint32_t parent, handle;
	ql_netem_where w = { .parent = "1:a", .handle = "2:" };
	CHECK_EQ_INT(ql_netem_where_check(&w, 1, &parent, &handle, &e), 0);
	CHECK_EQ_U64(parent, 0x1000a);
	CHECK_EQ_U64(handle, 0x20000);
	w = (ql_netem_where){ 0 };
	CHECK_EQ_INT(ql_netem_where_check(&w, 0, &parent, &handle, &e), 0);
	CHECK_EQ_U64(parent, TC_H_ROOT);
	CHECK_EQ_U64(handle, 0);

	static const char *const bad_parents[] = { "1", "1:", "1:0", " 1:1", "+1:1", "0x1:1", "1:1x", "10000:1", NULL };
	for (const char *const *p = bad_parents; *p; p++) {
		w = (ql_netem_where){ .parent = *p };
		CHECK_EQ_INT(ql_netem_where_check(&w, 1, &parent, &handle, &e), -EINVAL);
		CHECK(e.usage && strncmp(e.msg, "opts.parent: expected \"root\" or \"MAJ:MIN\"", 40) == 0);
	}
	static const char *const bad_handles[] = { "1:1", "1", ":", "-1:", "0:", NULL };
	for (const char *const *h = bad_handles; *h; h++) {
		w = (ql_netem_where){ .handle = *h };
		CHECK_EQ_INT(ql_netem_where_check(&w, 1, &parent, &handle, &e), -EINVAL);
		CHECK(strncmp(e.msg, "opts.handle: expected \"MAJ:\"", 28) == 0);
	}
	w = (ql_netem_where){ .handle = "1:" };
	CHECK_EQ_INT(ql_netem_where_check(&w, 0, &parent, &handle, &e), -EINVAL);
	CHECK_STR(e.msg, "opts.handle: expected nil (only apply takes a handle), got string \"1:\"");
	w = (ql_netem_where){ .parent = "1:1", .ingress = 1 };
	CHECK_EQ_INT(ql_netem_where_check(&w, 1, &parent, &handle, &e), -EINVAL);
	CHECK(strstr(e.msg, "opts.parent: expected \"root\" with direction = \"ingress\"") == e.msg);
	w = (ql_netem_where){ .ingress_src = "10.0.0.1" };
	CHECK_EQ_INT(ql_netem_where_check(&w, 1, &parent, &handle, &e), -EINVAL);
	CHECK_STR(e.msg, "opts.ingress_src: expected nil unless direction = \"ingress\", got string \"10.0.0.1\"");
	w = (ql_netem_where){ .ingress = 1, .ingress_src = "10.0.0.0/8" };
	CHECK_EQ_INT(ql_netem_where_check(&w, 1, &parent, &handle, &e), 0);
}

TEST(decoder_rejects_short_and_bounds_attrs)
{
	ql_netem_spec s;
	ql_err e;
	char buf[64] = { 0 };
	CHECK_EQ_INT(ql_netem_decode_options(buf, 10, &s, &e), -EPROTO);
	/* A truncated attribute header after the qopt must not be read past. */
	struct tc_netem_qopt q = { .limit = 5 };
	memcpy(buf, &q, sizeof q);
	struct nlattr *a = (struct nlattr *)(buf + sizeof q);
	a->nla_len = 200;
	a->nla_type = TCA_NETEM_RATE;
	int rc = ql_netem_decode_options(buf, sizeof q + 8, &s, &e);
	CHECK(rc == 0 || rc == -EPROTO);
	CHECK_EQ_U64(s.rate_bytes_per_s, 0);
	/* A too-short RATE attribute is ignored, not over-read. */
	a->nla_len = 8;
	rc = ql_netem_decode_options(buf, sizeof q + 8, &s, &e);
	CHECK_EQ_INT(rc, 0);
	CHECK_EQ_U64(s.rate_bytes_per_s, 0);
	CHECK_EQ_INT(s.limit_packets, 5);
}

TEST(distribution_files)
{
	int16_t *buf = calloc(QL_NETEM_DIST_MAX, sizeof *buf);
	size_t n = 0;
	ql_err e;
	int rc = ql_netem_load_dist("normal", buf, QL_NETEM_DIST_MAX, &n, &e);
	if (rc == -ENOENT) {
		free(buf);
		SKIP("iproute2's normal.dist is not installed");
	}
	CHECK_EQ_INT(rc, 0);
	CHECK(n >= 4096);
	CHECK_EQ_INT(buf[0], -32768);
	CHECK_EQ_INT(ql_netem_load_dist("no-such-table", buf, QL_NETEM_DIST_MAX, &n, &e), -ENOENT);
	CHECK(strstr(e.msg, "no-such-table.dist") != NULL);
	CHECK_EQ_INT(ql_netem_load_dist("../etc/passwd", buf, QL_NETEM_DIST_MAX, &n, &e), -EINVAL);
	CHECK(e.usage);
	free(buf);
}

TEST(uniform_table_spans_the_scale)
{
	int16_t t[4096];
	ql_netem_uniform_table(t, 4096);
	CHECK_EQ_INT(t[0], -8190);
	CHECK_EQ_INT(t[4095], 8190);
	long sum = 0;
	for (int i = 0; i < 4096; i++)
		sum += t[i];
	CHECK_EQ_INT(sum, 0);
}

TEST(handles)
{
	uint32_t h;
	CHECK_EQ_INT(ql_tc_handle_parse("root", &h), 0);
	CHECK_EQ_U64(h, TC_H_ROOT);
	CHECK_EQ_INT(ql_tc_handle_parse("1:1", &h), 0);
	CHECK_EQ_U64(h, 0x10001);
	CHECK_EQ_INT(ql_tc_handle_parse("a:", &h), 0);
	CHECK_EQ_U64(h, 0xA0000);
	CHECK_EQ_INT(ql_tc_handle_parse("1", &h), -EINVAL);
	CHECK_EQ_INT(ql_tc_handle_parse("10000:", &h), -EINVAL);
	CHECK_EQ_INT(ql_tc_handle_parse("1:x", &h), -EINVAL);
}

TEST(two_full_tables_do_not_fit_one_attribute)
{
	static int16_t big[QL_NETEM_DIST_MAX];
	ql_netem_spec s;
	ql_netem_spec_init(&s);
	s.delay_ns = 10000000;
	s.jitter_ns = 1000000;
	s.dist = big;
	s.dist_len = QL_NETEM_DIST_MAX;
	struct nl_msg *msg;
	ql_err e;
	CHECK_EQ_INT(ql_netem_build(&msg, 1, TC_H_ROOT, 0, &s, 0, &e), 0);
	if (msg) {
		struct nlattr *tb[15];
		struct tc_netem_qopt q;
		netem_attrs(msg, tb, &q);
		CHECK_EQ_INT(nla_len(tb[TCA_NETEM_DELAY_DIST]), QL_NETEM_DIST_MAX * 2);
		nlmsg_free(msg);
	}
	s.slot_dist = big;
	s.slot_dist_len = QL_NETEM_DIST_MAX;
	s.slot_dist_delay_ns = 1000;
	CHECK_EQ_INT(ql_netem_build(&msg, 1, TC_H_ROOT, 0, &s, 0, &e), -EINVAL);
	CHECK(e.usage && strstr(e.msg, "spec.slot.distribution") != NULL);
}

int main(void)
{
	RUN(percent_scaling_case_025);
	RUN(time_units_case_026);
	RUN(rate64_iff_at_least_2_32_case_028);
	RUN(rate_always_sent_so_replace_clears_it);
	RUN(gemodel_complement_and_state);
	RUN(every_field_roundtrips);
	RUN(validation_names_the_field);
	RUN(where_rules_name_the_field);
	RUN(decoder_rejects_short_and_bounds_attrs);
	RUN(distribution_files);
	RUN(uniform_table_spans_the_scale);
	RUN(handles);
	RUN(two_full_tables_do_not_fit_one_attribute);
	return ctest_done();
}
