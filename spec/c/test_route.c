/* C tests of csrc/core/route.c: routes through a gateway and a namespace's
 * own forwarding switches (the namespace cases need root). */
#include "ctest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "link.h"
#include "netns.h"
#include "nl.h"
#include "route.h"

static char ns_r[64];

#define NEED_ROOT() do { if (geteuid() != 0) SKIP("needs root (CAP_SYS_ADMIN) for namespaces"); } while (0)

/* The first byte of a sysctl file as seen from inside netns ('?' on error). */
static char switch_in(const char *netns, const char *path)
{
	int restore;
	ql_err e;
	if (ql_netns_enter(netns, &restore, &e) < 0)
		return '?';
	char c = '?';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = '?';
		close(fd);
	}
	ql_netns_restore(restore, &e);
	return c;
}

TEST(usage_errors_name_the_field)
{
	ql_err e;
	CHECK_EQ_INT(ql_route_add(NULL, "default", "gw", &e), -EINVAL);
	CHECK_EQ_INT(e.usage, 1);
	CHECK(strncmp(e.msg, "via: ", 5) == 0);
	CHECK_EQ_INT(ql_route_add(NULL, "10.0.0.0", "10.0.0.1", &e), -EINVAL);
	CHECK(strncmp(e.msg, "dst: ", 5) == 0);
	CHECK_EQ_INT(ql_route_add(NULL, "10.0.0.0/33", "10.0.0.1", &e), -EINVAL);
	CHECK_EQ_INT(ql_route_add(NULL, "fd00::/64", "10.0.0.1", &e), -EINVAL);
	CHECK(strstr(e.msg, "IPv6") != NULL);
	CHECK_EQ_INT(ql_route_add(NULL, "default", "10.0.0.1/24", &e), -EINVAL);
	CHECK_EQ_INT(ql_route_add("a/b", "default", "10.0.0.1", &e), -EINVAL);
	CHECK_EQ_INT(ql_route_forwarding("a/b", 1, 1, &e), -EINVAL);
	CHECK_EQ_INT(e.usage, 1);
}

TEST(route_through_a_gateway)
{
	NEED_ROOT();
	ql_err e;
	ql_veth v = { "qlrt0", "qlrt1", ns_r, ns_r };
	CHECK_EQ_INT(ql_link_add_veth(&v, &e), 0);
	CHECK_EQ_INT(ql_link_set("qlrt0", ns_r, 1, 0, &e), 0);
	CHECK_EQ_INT(ql_link_set("qlrt1", ns_r, 1, 0, &e), 0);
	CHECK_EQ_INT(ql_link_addr("qlrt0", ns_r, "10.9.0.1/24", 1, &e), 0);
	CHECK_EQ_INT(ql_link_addr("qlrt0", ns_r, "fd00:9::1/64", 1, &e), 0);
	/* no link reaches 10.8.0.254 */
	CHECK_EQ_INT(ql_route_add(ns_r, "default", "10.8.0.254", &e), -ENETUNREACH);
	CHECK_STR(e.code, "ENETUNREACH");
	CHECK(strstr(e.msg, "10.8.0.254") != NULL);
	CHECK_EQ_INT(ql_route_add(ns_r, "default", "10.9.0.254", &e), 0);
	CHECK_EQ_INT(ql_route_add(ns_r, "default", "10.9.0.253", &e), -EEXIST);
	CHECK_STR(e.code, "EEXIST");
	CHECK_EQ_INT(ql_route_add(ns_r, "10.7.0.0/16", "10.9.0.253", &e), 0);
	CHECK_EQ_INT(ql_route_add(ns_r, "default", "fd00:9::fe", &e), 0);
	CHECK_EQ_INT(ql_route_add("qlct-no-such-ns", "default", "10.9.0.254", &e), -ENOENT);
	CHECK_STR(e.code, "ENOENT");
}

TEST(forwarding_of_that_namespace_only)
{
	NEED_ROOT();
	ql_err e;
	char host4 = switch_in(NULL, "/proc/sys/net/ipv4/ip_forward");
	CHECK_EQ_INT(switch_in(ns_r, "/proc/sys/net/ipv4/ip_forward"), '0');
	CHECK_EQ_INT(ql_route_forwarding(ns_r, 1, 0, &e), 0);
	CHECK_EQ_INT(switch_in(ns_r, "/proc/sys/net/ipv4/ip_forward"), '1');
	CHECK_EQ_INT(switch_in(ns_r, "/proc/sys/net/ipv6/conf/all/forwarding"), '0');
	CHECK_EQ_INT(ql_route_forwarding(ns_r, 1, 1, &e), 0);
	CHECK_EQ_INT(switch_in(ns_r, "/proc/sys/net/ipv6/conf/all/forwarding"), '1');
	CHECK_EQ_INT(switch_in(NULL, "/proc/sys/net/ipv4/ip_forward"), host4);
	CHECK_EQ_INT(ql_route_forwarding(ns_r, 0, 1, &e), 0);
	CHECK_EQ_INT(switch_in(ns_r, "/proc/sys/net/ipv4/ip_forward"), '0');
	CHECK_EQ_INT(ql_route_forwarding("qlct-no-such-ns", 1, 0, &e), -ENOENT);
}

int main(void)
{
	ql_err e;
	snprintf(ns_r, sizeof ns_r, "qlct-%d-r", (int)getpid());
	RUN(usage_errors_name_the_field);
	int have = geteuid() == 0 && ql_netns_add(ns_r, &e) == 0;
	if (have || geteuid() != 0) {
		RUN(route_through_a_gateway);
		RUN(forwarding_of_that_namespace_only);
	} else {
		fprintf(stderr, "  cannot create the test namespace: %s\n", e.msg);
		ctest_failed++;
	}
	ql_netns_del(ns_r, &e);
	return ctest_done();
}
