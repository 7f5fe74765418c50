/* C tests of csrc/core/tcpca.c: congestion-control names, asked of this kernel. */
#include "ctest.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcpca.h"

static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return 1;
	return 0;
}

TEST(name_syntax)
{
	ql_err e;
	CHECK_EQ_INT(ql_tcp_ca_check_name("opts.congestion", "cubic", &e), 0);
	CHECK_EQ_INT(ql_tcp_ca_check_name("opts.congestion", "a_1", &e), 0);
	CHECK_EQ_INT(ql_tcp_ca_check_name("opts.congestion", "abcdefghijklmno", &e), 0);
	const char *bad[] = { "", "abcdefghijklmnop", "BBR", "a-b", "a b", "../x", "cubic\n" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		CHECK_EQ_INT(ql_tcp_ca_check_name("opts.congestion", bad[i], &e), -EINVAL);
		CHECK_EQ_INT(e.usage, 1);
		CHECK(strncmp(e.msg, "opts.congestion: expected a congestion control name", 51) == 0);
	}
	CHECK_EQ_INT(ql_tcp_ca_check_name("opts.congestion", NULL, &e), -EINVAL);
}

TEST(available_list_and_probe)
{
	char list[512];
	if (ql_tcp_ca_list(list, sizeof list) < 0)
		SKIP(QL_TCP_CA_AVAILABLE " is not readable here");
	/* reno is built into every kernel (tcp_cong.c) */
	CHECK(in_list(list, "reno"));
	ql_err e;
	CHECK_EQ_INT(ql_tcp_ca_check_available("opts.congestion", "reno", &e), 0);
	/* every listed name is usable by root */
	if (geteuid() == 0) {
		char copy[512];
		strcpy(copy, list);
		for (char *save, *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
			CHECK_EQ_INT(ql_tcp_ca_check_available("opts.congestion", t, &e), 0);
	}
	CHECK_EQ_INT(ql_tcp_ca_check_available("opts.congestion", "nosuchcc", &e), -ENOTSUP);
	CHECK_EQ_INT(e.usage, 0);
	CHECK_STR(e.code, "ENOTSUP");
	CHECK(strstr(e.msg, "opts.congestion: this kernel has no congestion control \"nosuchcc\"") == e.msg);
	CHECK(strstr(e.msg, list) != NULL);
	CHECK(strstr(e.msg, "modprobe tcp_nosuchcc") != NULL);
	/* bad syntax is the caller's mistake, before the kernel is asked */
	CHECK_EQ_INT(ql_tcp_ca_check_available("opts.congestion", "Cubic", &e), -EINVAL);
	CHECK_EQ_INT(e.usage, 1);
}

/* An unprivileged user may only use names in tcp_allowed_congestion_control. */
TEST(not_allowed_is_eperm)
{
	if (geteuid() != 0)
		SKIP("needs root to drop to an unprivileged user");
	char avail[512], allowed[512];
	FILE *f = fopen(QL_TCP_CA_ALLOWED, "r");
	if (ql_tcp_ca_list(avail, sizeof avail) < 0 || !f) {
		if (f)
			fclose(f);
		SKIP("congestion-control lists not readable");
	}
	if (!fgets(allowed, sizeof allowed, f))
		allowed[0] = '\0';
	fclose(f);
	allowed[strcspn(allowed, "\n")] = '\0';
	const char *pick = NULL;
	for (char *save, *t = strtok_r(avail, " ", &save); t; t = strtok_r(NULL, " ", &save))
		if (!in_list(allowed, t)) {
			pick = t;
			break;
		}
	if (!pick)
		SKIP("every available congestion control is allowed for every user here");
	pid_t pid = fork();
	if (pid == 0) {
		ql_err e;
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		int rc = ql_tcp_ca_check_available("opts.congestion", pick, &e);
		_exit(rc == -EPERM && strcmp(e.code, "EPERM") == 0 &&
		      strstr(e.msg, "not allowed for this user") != NULL ? 0 : 1);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

int main(void)
{
	RUN(name_syntax);
	RUN(available_list_and_probe);
	RUN(not_allowed_is_eperm);
	return ctest_done();
}
