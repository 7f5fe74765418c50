/* C tests of csrc/core/impair/tunlink.c without Lua (root: two namespaces
 * made and removed here): open and close leave no device and, under ASan's
 * leak check, no memory; a half-made link (second namespace missing, second
 * device name taken) is undone; a spec change and the stats of an idle
 * link; the devices come up without an IPv6 link-local address; options
 * refused before anything is made. */
#include "ctest.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "impair/tunlink.h"
#include "link.h"
#include "netem.h"
#include "netns.h"
#include "nl.h"

#define NEED_ROOT() do { if (geteuid() != 0) SKIP("needs root (CAP_SYS_ADMIN) for namespaces"); } while (0)

static char ns_a[64], ns_b[64];

static void opts(ql_tunlink_opts *o, const ql_netem_spec *s)
{
	memset(o, 0, sizeof *o);
	o->a_netns = ns_a;
	o->b_netns = ns_b;
	o->a_ifname = QL_TUNLINK_A_IFNAME;
	o->b_ifname = QL_TUNLINK_B_IFNAME;
	o->a_addr = "10.253.0.1";
	o->b_addr = "10.253.0.2";
	o->mtu_bytes = QL_TUNLINK_MTU_DEFAULT;
	o->memory_bytes = QL_TUNLINK_MEMORY_DEFAULT;
	o->forward = o->reverse = s;
	o->seed = 1;
}

/* Whether ifname in ns has any IPv6 address (a line of /proc/net/if_inet6
 * there ends with its name), -1 when that cannot be read. */
static int has_ipv6_addr(const char *ns, const char *ifname)
{
	int restore;
	ql_err e;
	if (ql_netns_enter(ns, &restore, &e) < 0)
		return -1;
	FILE *f = fopen("/proc/net/if_inet6", "r");
	int found = f ? 0 : -1;
	char line[256], name[64];
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%*s %*s %*s %*s %*s %63s", name) == 1 && !strcmp(name, ifname))
			found = 1;
	if (f)
		fclose(f);
	ql_netns_restore(restore, NULL);
	return found;
}

static int dev_exists(const char *ns, const char *ifname)
{
	ql_link_info info;
	ql_err e;
	return ql_link_get(ifname, ns, &info, &e) == 0;
}

TEST(open_close_leaves_nothing)
{
	NEED_ROOT();
	ql_netem_spec s;
	ql_netem_spec_init(&s);
	s.delay_ns = 1000000;
	ql_tunlink_opts o;
	opts(&o, &s);
	ql_err e;
	ql_tunlink *l = NULL;
	CHECK_EQ_INT(ql_tunlink_open(&o, &l, &e), 0);
	if (!l) {
		fprintf(stderr, "  %s\n", e.msg);
		return;
	}
	CHECK(dev_exists(ns_a, "qltun-a"));
	CHECK(dev_exists(ns_b, "qltun-b"));
	/* up, and no IPv6 link-local address (addr_gen_mode none): no DAD,
	 * no router solicitation of the kernel's own crosses the link */
	CHECK_EQ_INT(has_ipv6_addr(ns_a, "qltun-a"), 0);
	CHECK_EQ_INT(has_ipv6_addr(ns_b, "qltun-b"), 0);
	CHECK_EQ_INT(ql_tunlink_failed(l, &e), 0);
	s.delay_ns = 2000000;
	CHECK_EQ_INT(ql_tunlink_set_spec(l, QL_TUNLINK_REVERSE, &s, &e), 0);
	s.loss_frac32 = 1;
	s.limit_packets = 0;  /* refused: the old spec stays */
	CHECK(ql_tunlink_set_spec(l, QL_TUNLINK_FORWARD, &s, &e) < 0);
	CHECK_EQ_INT(e.usage, 1);
	CHECK(ql_tunlink_set_spec(l, 2, &s, &e) < 0);
	ql_tunlink_stats st;
	ql_tunlink_stats_get(l, QL_TUNLINK_FORWARD, &st);
	CHECK(st.backlog_packets + st.forwarded_packets <= st.arrived_packets);
	CHECK_EQ_U64(st.drops[QL_IMPAIR_DROP_MEMORY], 0);
	ql_tunlink_close(l);
	CHECK(!dev_exists(ns_a, "qltun-a"));
	CHECK(!dev_exists(ns_b, "qltun-b"));
	ql_tunlink_close(NULL);
}

TEST(half_made_is_undone)
{
	NEED_ROOT();
	ql_netem_spec s;
	ql_netem_spec_init(&s);
	ql_tunlink_opts o;
	opts(&o, &s);
	ql_err e;
	ql_tunlink *l = (ql_tunlink *)&o;
	o.b_netns = "qoslab-ctest-missing-ns";
	CHECK_EQ_INT(ql_tunlink_open(&o, &l, &e), -ENOENT);
	CHECK(l == NULL);
	CHECK(!dev_exists(ns_a, "qltun-a"));
	/* the second device's name is taken by a link already there */
	opts(&o, &s);
	ql_tunlink *first = NULL;
	CHECK_EQ_INT(ql_tunlink_open(&o, &first, &e), 0);
	o.a_ifname = "qltun-c";
	o.a_addr = "10.253.1.1";
	o.b_addr = "10.253.1.2";
	CHECK(ql_tunlink_open(&o, &l, &e) < 0);
	CHECK_STR(e.code, "EBUSY");
	CHECK(!dev_exists(ns_a, "qltun-c"));
	ql_tunlink_close(first);
}

TEST(options_refused_first)
{
	ql_netem_spec s;
	ql_netem_spec_init(&s);
	ql_tunlink_opts o;
	opts(&o, &s);
	ql_err e;
	ql_tunlink *l = NULL;
	o.b_netns = ns_a;
	CHECK_EQ_INT(ql_tunlink_open(&o, &l, &e), -EINVAL);
	CHECK(strstr(e.msg, "b_netns") != NULL);
	opts(&o, &s);
	o.b_addr = "fd00::1";
	CHECK_EQ_INT(ql_tunlink_open(&o, &l, &e), -EINVAL);
	CHECK(strstr(e.msg, "b_addr") != NULL);
	opts(&o, &s);
	o.mtu_bytes = 67;
	CHECK_EQ_INT(ql_tunlink_open(&o, &l, &e), -EINVAL);
	CHECK(strstr(e.msg, "mtu_bytes") != NULL);
	opts(&o, &s);
	ql_netem_spec bad = s;
	bad.limit_packets = 0;
	o.reverse = &bad;
	CHECK_EQ_INT(ql_tunlink_open(&o, &l, &e), -EINVAL);
	CHECK(strncmp(e.msg, "reverse: spec.", 14) == 0);
	CHECK(l == NULL);
}

int main(void)
{
	ql_err e;
	snprintf(ns_a, sizeof ns_a, "qoslab-ctl-a-%d", (int)getpid());
	snprintf(ns_b, sizeof ns_b, "qoslab-ctl-b-%d", (int)getpid());
	int have = geteuid() == 0 && ql_netns_add(ns_a, &e) == 0 && ql_netns_add(ns_b, &e) == 0;
	RUN(options_refused_first);
	if (have || geteuid() != 0) {
		RUN(open_close_leaves_nothing);
		RUN(half_made_is_undone);
	}
	if (geteuid() == 0) {
		ql_netns_del(ns_a, &e);
		ql_netns_del(ns_b, &e);
	}
	return ctest_done() || (geteuid() == 0 && !have);
}
