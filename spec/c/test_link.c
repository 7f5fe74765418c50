/* C tests of csrc/core/netns.c, link.c and shape.c (need root: namespaces). */
#include "ctest.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "link.h"
#include "netns.h"
#include "shape.h"

static char ns_a[64], ns_b[64];

#define NEED_ROOT() do { if (geteuid() != 0) SKIP("needs root (CAP_SYS_ADMIN) for namespaces"); } while (0)

TEST(netns_add_list_exists_del)
{
	NEED_ROOT();
	ql_err e;
	char name[64];
	snprintf(name, sizeof name, "qlct-%d-x", (int)getpid());
	CHECK_EQ_INT(ql_netns_add(name, &e), 0);
	CHECK_EQ_INT(ql_netns_exists(name), 1);
	CHECK_EQ_INT(ql_netns_add(name, &e), -EEXIST);
	CHECK_STR(e.code, "EEXIST");
	char **v;
	size_t n;
	int seen = 0;
	CHECK_EQ_INT(ql_netns_list(&v, &n, &e), 0);
	for (size_t i = 0; i < n; i++)
		seen += strcmp(v[i], name) == 0;
	ql_netns_list_free(v, n);
	CHECK_EQ_INT(seen, 1);
	CHECK_EQ_INT(ql_netns_del(name, &e), 0);
	CHECK_EQ_INT(ql_netns_exists(name), 0);
	CHECK_EQ_INT(ql_netns_del(name, &e), -ENOENT);
	CHECK_STR(e.code, "ENOENT");
	CHECK_EQ_INT(ql_netns_add("a/b", &e), -EINVAL);
	CHECK_EQ_INT(e.usage, 1);
}

TEST(veth_across_namespaces)
{
	NEED_ROOT();
	ql_err e;
	ql_veth v = { "qlc0", "qlc1", ns_a, ns_b };
	CHECK_EQ_INT(ql_link_add_veth(&v, &e), 0);
	CHECK_EQ_INT(ql_link_add_veth(&v, &e), -EEXIST);
	CHECK_STR(e.code, "EEXIST");
	ql_link_info a, b;
	CHECK_EQ_INT(ql_link_get("qlc0", ns_a, &a, &e), 0);
	CHECK_EQ_INT(ql_link_get("qlc1", ns_b, &b, &e), 0);
	CHECK_STR(a.kind, "veth");
	CHECK_EQ_INT(a.up, 0);
	CHECK_EQ_INT(ql_link_get("qlc1", ns_a, &b, &e), -ENODEV);
	CHECK(strstr(e.msg, "qlc1") && strstr(e.msg, ns_a));
	CHECK_EQ_INT(ql_link_set("qlc0", ns_a, 1, 9000, &e), 0);
	CHECK_EQ_INT(ql_link_set("qlc1", ns_b, 1, 9000, &e), 0);
	CHECK_EQ_INT(ql_link_get("qlc0", ns_a, &a, &e), 0);
	CHECK_EQ_INT(a.up, 1);
	CHECK_EQ_U64(a.mtu_bytes, 9000);
	CHECK_EQ_INT(a.speed_mbps, 10000); /* veth reports 10 Gbit/s */
	CHECK_EQ_INT(ql_link_addr("qlc0", ns_a, "10.77.0.1/24", 1, &e), 0);
	CHECK_EQ_INT(ql_link_addr("qlc0", ns_a, "10.77.0.1/24", 1, &e), -EEXIST);
	CHECK_EQ_INT(ql_link_addr("qlc0", ns_a, "fd00:77::1/64", 1, &e), 0);
	CHECK_EQ_INT(ql_link_addr("qlc0", ns_a, "10.77.0.1/33", 1, &e), -EINVAL);
	CHECK_EQ_INT(ql_link_addr("qlc0", ns_a, "10.77.0.1/24", 0, &e), 0);
	ql_offloads off = { 0, 0, 0 }, now;
	CHECK_EQ_INT(ql_link_offloads("qlc0", ns_a, &off, &now, &e), 0);
	CHECK_EQ_INT(now.tso + now.gso + now.gro, 0);
	ql_offloads on = { 1, -1, 1 };
	CHECK_EQ_INT(ql_link_offloads("qlc0", ns_a, &on, &now, &e), 0);
	CHECK_EQ_INT(now.tso, 1);
	CHECK_EQ_INT(now.gso, 0);
	CHECK_EQ_INT(now.gro, 1);
}

TEST(tbf_apply_get_replace)
{
	NEED_ROOT();
	ql_err e;
	ql_shape s = { .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 12500000, .burst_bytes = 50000,
		       .limit_bytes = 300000 }, got, applied;
	ql_shape_result r;
	int found;
	CHECK_EQ_INT(ql_shape_apply("qlc0", ns_a, &s, &r, &applied, &e), 0);
	CHECK_EQ_U64(r.netem_parent, 0x10001);
	CHECK_EQ_INT(ql_shape_get("qlc0", ns_a, &got, &found, &e), 0);
	CHECK_EQ_INT(found, 1);
	CHECK_EQ_INT(got.kind, QL_SHAPE_TBF);
	CHECK_EQ_U64(got.rate_bytes_per_s, 12500000);
	CHECK_EQ_U64(got.burst_bytes, 50000); /* 0.8 B per 64 ns tick: exact */
	CHECK_EQ_U64(got.limit_bytes, 300000);
	CHECK_EQ_U64(applied.burst_bytes, got.burst_bytes);
	/* 40 Gbit/s needs TCA_TBF_RATE64. */
	ql_shape big = { .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 5000000000ull, .latency_us = 1000 };
	CHECK_EQ_INT(ql_shape_apply("qlc0", ns_a, &big, &r, &applied, &e), 0);
	CHECK_EQ_INT(ql_shape_get("qlc0", ns_a, &got, &found, &e), 0);
	CHECK_EQ_U64(got.rate_bytes_per_s, 5000000000ull);
	CHECK(got.burst_bytes >= 20000000 && got.burst_bytes < 20000000 + 320);
	CHECK_EQ_U64(got.limit_bytes, 5000000 + 20000000);
	/* apply(get()) is a fixed point. */
	ql_shape again;
	CHECK_EQ_INT(ql_shape_apply("qlc0", ns_a, &got, &r, &applied, &e), 0);
	CHECK_EQ_INT(ql_shape_get("qlc0", ns_a, &again, &found, &e), 0);
	CHECK_EQ_U64(again.burst_bytes, got.burst_bytes);
	ql_qdisc_stats st[4];
	size_t n;
	CHECK_EQ_INT(ql_qdisc_stats_get("qlc0", ns_a, st, 4, &n, &e), 0);
	CHECK(n >= 1);
	CHECK_STR(st[0].kind, "tbf");
	CHECK_EQ_INT(ql_shape_clear("qlc0", ns_a, &e), 0);
	CHECK_EQ_INT(ql_shape_get("qlc0", ns_a, &got, &found, &e), 0);
	CHECK_EQ_INT(found, 0);
	CHECK_EQ_INT(ql_shape_clear("qlc0", ns_a, &e), 0);
}

TEST(htb_apply_get)
{
	NEED_ROOT();
	ql_err e;
	ql_shape s = { .kind = QL_SHAPE_HTB, .rate_bytes_per_s = 12500000,
		       .ceil_bytes_per_s = 25000000, .burst_bytes = 50000, .cburst_bytes = 100000 }, got;
	ql_shape_result r;
	int found;
	CHECK_EQ_INT(ql_shape_apply("qlc0", ns_a, &s, &r, NULL, &e), 0);
	CHECK_EQ_U64(r.netem_parent, 0x10010);
	CHECK_EQ_INT(ql_shape_get("qlc0", ns_a, &got, &found, &e), 0);
	CHECK_EQ_INT(found, 1);
	CHECK_EQ_INT(got.kind, QL_SHAPE_HTB);
	CHECK_EQ_U64(got.rate_bytes_per_s, 12500000);
	CHECK_EQ_U64(got.ceil_bytes_per_s, 25000000);
	CHECK_EQ_U64(got.burst_bytes, 50000);
	CHECK_EQ_U64(got.cburst_bytes, 100000);
	s.rate_bytes_per_s = 6000000000ull; /* 48 Gbit/s: RATE64/CEIL64 */
	s.ceil_bytes_per_s = 0;
	s.burst_bytes = 0;
	s.cburst_bytes = 0;
	CHECK_EQ_INT(ql_shape_apply("qlc0", ns_a, &s, &r, NULL, &e), 0);
	CHECK_EQ_INT(ql_shape_get("qlc0", ns_a, &got, &found, &e), 0);
	CHECK_EQ_U64(got.rate_bytes_per_s, 6000000000ull);
	CHECK_EQ_U64(got.ceil_bytes_per_s, 6000000000ull);
	/* Switching kinds replaces the root atomically. */
	ql_shape t = { .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 1250000 };
	CHECK_EQ_INT(ql_shape_apply("qlc0", ns_a, &t, &r, NULL, &e), 0);
	CHECK_EQ_INT(ql_shape_get("qlc0", ns_a, &got, &found, &e), 0);
	CHECK_EQ_INT(got.kind, QL_SHAPE_TBF);
	CHECK_EQ_U64(got.burst_bytes, 90000); /* default: 10 * MTU 9000 > rate * 4 ms */
	CHECK_EQ_INT(ql_shape_clear("qlc0", ns_a, &e), 0);
}

TEST(errors_name_device_and_namespace)
{
	NEED_ROOT();
	ql_err e;
	ql_shape s = { .kind = QL_SHAPE_TBF, .rate_bytes_per_s = 1000 };
	CHECK_EQ_INT(ql_shape_apply("nope0", ns_a, &s, NULL, NULL, &e), -ENODEV);
	CHECK_STR(e.code, "ENODEV");
	CHECK(strstr(e.msg, "nope0") != NULL);
	CHECK_EQ_INT(ql_link_set("qlc0", "qlct-no-such-ns", 1, 0, &e), -ENOENT);
	CHECK_STR(e.code, "ENOENT");
	s.burst_bytes = 100;
	CHECK_EQ_INT(ql_shape_apply("qlc0", ns_a, &s, NULL, NULL, &e), -EINVAL);
	CHECK(strstr(e.msg, "burst_bytes") != NULL);
	CHECK_EQ_INT(ql_link_del("qlc9", ns_a, &e), -ENODEV);
}

TEST(delete_veth_removes_both_ends)
{
	NEED_ROOT();
	ql_err e;
	ql_link_info i;
	CHECK_EQ_INT(ql_link_del("qlc0", ns_a, &e), 0);
	CHECK_EQ_INT(ql_link_get("qlc1", ns_b, &i, &e), -ENODEV);
}

int main(void)
{
	ql_err e;
	snprintf(ns_a, sizeof ns_a, "qlct-%d-a", (int)getpid());
	snprintf(ns_b, sizeof ns_b, "qlct-%d-b", (int)getpid());
	int have = geteuid() == 0 && ql_netns_add(ns_a, &e) == 0 && ql_netns_add(ns_b, &e) == 0;
	RUN(netns_add_list_exists_del);
	if (have || geteuid() != 0) {
		RUN(veth_across_namespaces);
		RUN(tbf_apply_get_replace);
		RUN(htb_apply_get);
		RUN(errors_name_device_and_namespace);
		RUN(delete_veth_removes_both_ends);
	} else {
		fprintf(stderr, "  cannot create test namespaces: %s\n", e.msg);
		ctest_failed++;
	}
	/* Deleting the namespaces takes any link left in them along. */
	ql_netns_del(ns_a, &e);
	ql_netns_del(ns_b, &e);
	return ctest_done();
}
