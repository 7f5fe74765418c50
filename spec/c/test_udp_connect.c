/*
 * test_udp_connect.c - the server answers a repeated UDP connect message.
 *
 * What went wrong (case 015, engine3): a client whose connect reply was
 * lost repeated its connect message, but the repeat reached the stream's
 * connected socket, which nobody read before the test ran, so no reply
 * came and the test failed with "no reply to the connect message
 * (ETIMEDOUT)" under 20 % loss (iperf3 #351 is the same fault without any
 * repeat). The server must answer every copy and keep it one stream.
 * Loopback only; a raw client speaks the control protocol.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctest.h"
#include "engine.h"
#include "proto.h"
#include "timer.h"

static int connect_to(int type, int port)
{
	int fd = socket(AF_INET, type, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int readable(int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	return poll(&pf, 1, ms) > 0;
}

/* Send the connect message on u; 1 when a valid reply comes within 1 s. */
static int connect_msg(int u, const char *cookie)
{
	char msg[4 + QL_COOKIE_SIZE];
	uint32_t magic = QL_UDP_CONNECT_MSG;
	memcpy(msg, &magic, 4);
	memcpy(msg + 4, cookie, QL_COOKIE_SIZE);
	if (send(u, msg, sizeof msg, 0) != (ssize_t)sizeof msg || !readable(u, 1000))
		return 0;
	char buf[64];
	ssize_t r = recv(u, buf, sizeof buf, 0);
	return r == 4 && ql_udp_connect_reply_ok(buf, 4);
}

TEST(repeated_connect_message_gets_a_reply_and_stays_one_stream)
{
	ql_server_opts o;
	ql_server_opts_init(&o);
	o.port = -1;
	o.bind_address = "127.0.0.1";
	ql_server *srv = NULL;
	ql_err e;
	CHECK_EQ_INT(ql_server_start(&o, &srv, &e), 0);
	if (!srv)
		return;
	int port = ql_server_port(srv);
	int ctl = connect_to(SOCK_STREAM, port);
	int u1 = connect_to(SOCK_DGRAM, port), u2 = connect_to(SOCK_DGRAM, port);
	CHECK(ctl >= 0 && u1 >= 0 && u2 >= 0);
	char cookie[QL_COOKIE_SIZE];
	ql_cookie_make(cookie);
	int64_t dl = ql_now_ns() + 5 * QL_NS_PER_S;
	int st = 0;
	CHECK_EQ_INT(ql_io_write_full(ctl, cookie, QL_COOKIE_SIZE, dl, NULL), 0);
	CHECK_EQ_INT(ql_io_read_state(ctl, &st, dl, NULL), 0);
	CHECK_EQ_INT(st, QL_ST_PARAM_EXCHANGE);
	ql_params p;
	ql_params_init(&p);
	p.udp = 1;
	p.parallel = 2;
	p.time_s = 1;
	p.len_bytes = 100;
	p.bandwidth_bps = 8000;
	snprintf(p.qoslab, sizeof p.qoslab, "test");
	char *js = NULL;
	CHECK_EQ_INT(ql_params_to_json(&p, &js, &e), 0);
	CHECK_EQ_INT(ql_io_write_json(ctl, js, dl, NULL), 0);
	free(js);
	CHECK_EQ_INT(ql_io_read_state(ctl, &st, dl, NULL), 0);
	CHECK_EQ_INT(st, QL_ST_CREATE_STREAMS);

	CHECK(connect_msg(u1, cookie));
	/* as if that reply was lost: the same stream asks again */
	CHECK(connect_msg(u1, cookie));
	/* still one stream of two: the server waits for the second */
	CHECK(!readable(ctl, 300));
	CHECK(connect_msg(u2, cookie));
	CHECK_EQ_INT(ql_io_read_state(ctl, &st, dl, NULL), 0);
	CHECK_EQ_INT(st, QL_ST_TEST_START);

	ql_io_write_state(ctl, QL_ST_CLIENT_TERMINATE, dl, NULL);
	close(ctl);
	close(u1);
	close(u2);
	ql_server_stop(srv);
	ql_server_free(srv);
}

int main(void)
{
	RUN(repeated_connect_message_gets_a_reply_and_stays_one_stream);
	return ctest_done();
}
