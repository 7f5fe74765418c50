/*
 * sockopt.h - socket setup and peer addresses of a test (sockopt.c).
 * Stands on test.h.
 */
#ifndef QL_SOCKOPT_H
#define QL_SOCKOPT_H

#include <stdint.h>

#include "test.h"

/* The TOS byte stream s carries when it sends (opts.tos_per_stream's entry
 * for its index in its direction, else opts.tos), -1 = none set. */
int stream_tos(const ql_params *p, const ql_stream *s);
int apply_opts(ql_test *t, int fd, int family, ql_stream *s, ql_err *e);
/* The error of binding a socket to device dev (SO_BINDTODEVICE's errno, or
 * ENODEV from a lookup) in namespace netns ("" or NULL: this one). */
int bind_device_error(const char *dev, const char *netns, int err, ql_err *e);
int resolve(const char *host, int port, int socktype,
	    struct sockaddr_storage *ss, socklen_t *len, ql_err *e);
int bind_local(int fd, int family, const char *addr, int port, ql_err *e);
int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len,
		    int64_t timeout_ns, const volatile int *stop, ql_err *e,
		    const char *host, int port);
/* Once a test's streams are set up (connected or accepted, options set):
 * each stream's ql_sock_info (addresses from the kernel, buffers as
 * granted by set_buffers), the control connection's MSS and the first TCP
 * stream's congestion control, as the kernel reports them. */
void sockets_read(ql_test *t);
int peer_port(const struct sockaddr_storage *ss);
void peer_host(const struct sockaddr_storage *ss, char *out, size_t len);
int same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
void group_key(const struct sockaddr_storage *ss, uint8_t key[9]);
int same_group(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
int same_endpoint(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

#endif
