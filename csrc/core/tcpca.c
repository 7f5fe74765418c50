/* tcpca.c - TCP congestion-control names; see tcpca.h. */
#include "tcpca.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int ql_tcp_ca_check_name(const char *field, const char *name, ql_err *e)
{
	size_t n = name ? strlen(name) : 0;
	int ok = n >= 1 && n <= QL_TCP_CA_NAME_MAX;
	for (size_t i = 0; ok && i < n; i++) {
		char c = name[i];
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
	}
	if (!ok)
		return ql_err_usage(e, "%s: expected a congestion control name (1..%d of a-z, 0-9, _; "
				    "e.g. \"cubic\", \"bbr\"), got string \"%s\"", field,
				    QL_TCP_CA_NAME_MAX, name ? name : "(null)");
	return 0;
}

/* Read a small /proc file into buf without its trailing newline. */
static int read_line(const char *path, char *buf, size_t size)
{
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	int err = errno;
	close(fd);
	if (n < 0) {
		buf[0] = '\0';
		return -err;
	}
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

int ql_tcp_ca_list(char *buf, size_t size)
{
	return read_line(QL_TCP_CA_AVAILABLE, buf, size);
}

int ql_tcp_ca_check_available(const char *field, const char *name, ql_err *e)
{
	int rc = ql_tcp_ca_check_name(field, name, e);
	if (rc < 0)
		return rc;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	if (fd < 0)
		fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	if (fd < 0) {
		int err = errno;
		return ql_err_set(e, err, NULL, "%s: cannot make a TCP socket to check \"%s\": %s",
				  field, name, strerror(err));
	}
	rc = setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name));
	int err = errno;
	close(fd);
	if (rc == 0)
		return 0;
	char list[512];
	if (err == ENOENT) {
		if (ql_tcp_ca_list(list, sizeof list) < 0 || !list[0])
			snprintf(list, sizeof list, "unknown: %s unreadable", QL_TCP_CA_AVAILABLE);
		return ql_err_set(e, ENOTSUP, "ENOTSUP",
				  "%s: this kernel has no congestion control \"%s\" (available: %s); "
				  "load its module (modprobe tcp_%s) or pick an available one",
				  field, name, list, name);
	}
	if (err == EPERM) {
		if (read_line(QL_TCP_CA_ALLOWED, list, sizeof list) < 0 || !list[0])
			snprintf(list, sizeof list, "unknown: %s unreadable", QL_TCP_CA_ALLOWED);
		return ql_err_set(e, EPERM, "EPERM",
				  "%s: congestion control \"%s\" is not allowed for this user "
				  "(allowed: %s); run as root (CAP_NET_ADMIN) or add it to %s",
				  field, name, list, QL_TCP_CA_ALLOWED);
	}
	return ql_err_set(e, err, NULL, "%s: setsockopt(TCP_CONGESTION, \"%s\"): %s", field, name,
			  strerror(err));
}
