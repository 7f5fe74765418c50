/* C tests of csrc/core/engine/ctl_reader.c: control messages assembled from
 * pieces (byte by byte, over a socket that has only part of a frame), never
 * read past the message, oversized and empty frames refused, EOF inside a
 * frame and between frames. */
#include "ctest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/ctl_reader.h"
#include "engine/proto.h"
#include "timer.h"

/* An interval frame: state byte, 4-byte big-endian length, the text. */
static size_t frame(unsigned char *out, const char *json)
{
	size_t n = strlen(json);
	uint32_t be = htonl((uint32_t)n);
	out[0] = (unsigned char)QL_ST_QL_INTERVAL;
	memcpy(out + 1, &be, 4);
	memcpy(out + 5, json, n);
	return n + 5;
}

/* Feed n bytes; all of them must be taken unless a message completed. */
static int fed_all;
static int feed(ql_ctl_reader *r, const void *buf, size_t n)
{
	size_t used = 99;
	int rc = ql_ctl_reader_feed(r, buf, n, &used);
	fed_all = used == n;
	return rc;
}

TEST(byte_by_byte_feed)
{
	ql_ctl_reader r;
	ql_ctl_reader_init(&r, 1024);
	unsigned char b[64];
	const char *js = "{\"start\":0,\"end\":1}";
	size_t n = frame(b, js);
	b[n++] = (unsigned char)QL_ST_QL_SENDER_DONE;
	b[n++] = (unsigned char)(signed char)QL_ST_SERVER_ERROR;
	size_t i = 0;
	/* the interval: every byte but its last leaves the message open */
	for (; i < strlen(js) + 4; i++) {
		CHECK_EQ_INT(ql_ctl_reader_want(&r) >= 1, 1);
		CHECK_EQ_INT(feed(&r, b + i, 1), 0);
		CHECK(fed_all);
		CHECK(ql_ctl_reader_partial(&r));
		int st;
		CHECK_EQ_INT(ql_ctl_reader_peek(&r, &st), -EAGAIN);
	}
	CHECK_EQ_INT(feed(&r, b + i++, 1), 1);
	CHECK_EQ_INT(ql_ctl_reader_want(&r), 0);
	CHECK(!ql_ctl_reader_partial(&r));
	/* nothing more is taken until the message is */
	CHECK_EQ_INT(feed(&r, b + i, 1), 1);
	CHECK(!fed_all);
	int st = 0;
	char *got = NULL;
	size_t gl = 0;
	CHECK_EQ_INT(ql_ctl_reader_peek(&r, &st), 0);
	CHECK_EQ_INT(st, QL_ST_QL_INTERVAL);
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, &got, &gl), 0);
	CHECK_EQ_INT(st, QL_ST_QL_INTERVAL);
	CHECK(got != NULL);
	CHECK_EQ_INT(gl, strlen(js));
	if (got)
		CHECK_STR(got, js);
	free(got);
	/* states without a frame are whole at their byte; negative ones too */
	CHECK_EQ_INT(ql_ctl_reader_want(&r), 1);
	CHECK_EQ_INT(feed(&r, b + i++, 1), 1);
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, &got, &gl), 0);
	CHECK_EQ_INT(st, QL_ST_QL_SENDER_DONE);
	CHECK(got == NULL);
	CHECK_EQ_INT(feed(&r, b + i++, 1), 1);
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, NULL, NULL), 0);
	CHECK_EQ_INT(st, QL_ST_SERVER_ERROR);
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, NULL, NULL), -EAGAIN);
	CHECK_EQ_INT(i, n);
	ql_ctl_reader_free(&r);
}

TEST(oversize_and_empty_refused)
{
	ql_ctl_reader r;
	ql_ctl_reader_init(&r, 16);
	unsigned char b[64];
	size_t n = frame(b, "{\"a\":123456789012}");   /* 18 bytes > 16 */
	CHECK_EQ_INT(n, 23);
	CHECK_EQ_INT(feed(&r, b, 3), 0);
	CHECK(fed_all);
	CHECK_EQ_INT(feed(&r, b + 3, 6), -EMSGSIZE);
	CHECK(!fed_all);   /* stopped at the length */
	/* sticky: the framing is lost, nothing more is taken */
	CHECK_EQ_INT(ql_ctl_reader_want(&r), 0);
	CHECK_EQ_INT(feed(&r, b + 5, 0), -EMSGSIZE);
	ql_ctl_reader_free(&r);
	/* a hostile length near 4 GiB allocates nothing */
	ql_ctl_reader_init(&r, QL_INTERVAL_MAX_BYTES);
	unsigned char huge[5] = { (unsigned char)QL_ST_QL_INTERVAL, 0xff, 0xff, 0xff, 0xff };
	CHECK_EQ_INT(feed(&r, huge, 5), -EMSGSIZE);
	ql_ctl_reader_free(&r);
	ql_ctl_reader_init(&r, 16);
	unsigned char empty[5] = { (unsigned char)QL_ST_QL_INTERVAL, 0, 0, 0, 0 };
	CHECK_EQ_INT(feed(&r, empty, 5), -ENODATA);
	ql_ctl_reader_free(&r);
	/* exactly the limit is fine; a buffer holding more than the message
	 * gives up only the message's bytes */
	ql_ctl_reader_init(&r, 18);
	b[n] = (unsigned char)QL_ST_TEST_END;
	size_t used = 0;
	CHECK_EQ_INT(ql_ctl_reader_feed(&r, b, n + 1, &used), 1);
	CHECK_EQ_INT(used, n);
	int st;
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, NULL, NULL), 0);
	CHECK_EQ_INT(ql_ctl_reader_feed(&r, b + n, 1, &used), 1);
	CHECK_EQ_INT(used, 1);
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, NULL, NULL), 0);
	CHECK_EQ_INT(st, QL_ST_TEST_END);
	ql_ctl_reader_free(&r);
}

/* Over a socket: a frame that comes in two parts is not waited for, the
 * reader never takes the next message's bytes, and EOF inside a frame is
 * -ECONNRESET. */
TEST(socket_partial_boundary_and_eof)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		SKIP("no socketpair");
	ql_ctl_reader r;
	ql_ctl_reader_init(&r, 1024);
	unsigned char b[64];
	size_t n = frame(b, "{\"k\":1}");
	CHECK_EQ_INT(ql_ctl_reader_recv(&r, sv[0]), 0);   /* nothing there */
	CHECK_EQ_INT(write(sv[1], b, 7), 7);
	CHECK_EQ_INT(ql_ctl_reader_recv(&r, sv[0]), 0);
	CHECK(ql_ctl_reader_partial(&r));
	/* the rest, then the next state: only the frame is read */
	b[n] = (unsigned char)QL_ST_EXCHANGE_RESULTS;
	CHECK_EQ_INT(write(sv[1], b + 7, n + 1 - 7), (long long)(n + 1 - 7));
	CHECK_EQ_INT(ql_ctl_reader_recv(&r, sv[0]), 1);
	CHECK_EQ_INT(ql_ctl_reader_recv(&r, sv[0]), 1);   /* still the same one */
	int st;
	char *js = NULL;
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, &js, NULL), 0);
	CHECK_EQ_INT(st, QL_ST_QL_INTERVAL);
	if (js)
		CHECK_STR(js, "{\"k\":1}");
	free(js);
	unsigned char next = 0;
	CHECK_EQ_INT(recv(sv[0], &next, 1, MSG_PEEK | MSG_DONTWAIT), 1);
	CHECK_EQ_INT(next, QL_ST_EXCHANGE_RESULTS);
	CHECK_EQ_INT(ql_ctl_reader_wait(&r, sv[0], ql_now_ns() + 1000000000LL, NULL), 1);
	CHECK_EQ_INT(ql_ctl_reader_take(&r, &st, NULL, NULL), 0);
	CHECK_EQ_INT(st, QL_ST_EXCHANGE_RESULTS);
	/* a deadline with half a frame */
	CHECK_EQ_INT(write(sv[1], b, 3), 3);
	int64_t t0 = ql_now_ns();
	CHECK_EQ_INT(ql_ctl_reader_wait(&r, sv[0], t0 + 60000000LL, NULL), -ETIMEDOUT);
	CHECK(ql_now_ns() - t0 >= 60000000LL);
	/* the peer goes away inside the frame */
	close(sv[1]);
	CHECK_EQ_INT(ql_ctl_reader_recv(&r, sv[0]), -ECONNRESET);
	CHECK_EQ_INT(ql_ctl_reader_wait(&r, sv[0], 0, NULL), -ECONNRESET);
	ql_ctl_reader_free(&r);
	close(sv[0]);
	/* and between frames */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		SKIP("no socketpair");
	ql_ctl_reader_init(&r, 1024);
	close(sv[1]);
	CHECK_EQ_INT(ql_ctl_reader_recv(&r, sv[0]), -ECONNRESET);
	CHECK(!ql_ctl_reader_partial(&r));
	ql_ctl_reader_free(&r);
	close(sv[0]);
}

TEST(stop_flag_ends_the_wait)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		SKIP("no socketpair");
	ql_ctl_reader r;
	ql_ctl_reader_init(&r, 1024);
	volatile int stop = 1;
	CHECK_EQ_INT(ql_ctl_reader_wait(&r, sv[0], 0, &stop), -EINTR);
	/* also with a message there: a stopped caller takes no more */
	unsigned char b = (unsigned char)QL_ST_TEST_START;
	CHECK_EQ_INT(write(sv[1], &b, 1), 1);
	CHECK_EQ_INT(ql_ctl_reader_wait(&r, sv[0], 0, &stop), -EINTR);
	stop = 0;
	CHECK_EQ_INT(ql_ctl_reader_wait(&r, sv[0], 0, &stop), 1);
	ql_ctl_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	RUN(byte_by_byte_feed);
	RUN(oversize_and_empty_refused);
	RUN(socket_partial_boundary_and_eof);
	RUN(stop_flag_ends_the_wait);
	return ctest_done();
}
