/*
 * ctl_reader.c - the control connection's messages read incrementally,
 * without blocking (ctl_reader.h). Stands on ctl_reader.h and proto.h.
 */
#include "ctl_reader.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void ql_ctl_reader_init(ql_ctl_reader *r, size_t max_json_bytes)
{
	memset(r, 0, sizeof *r);
	r->max_json_bytes = max_json_bytes;
}

void ql_ctl_reader_free(ql_ctl_reader *r)
{
	free(r->json);
	r->json = NULL;
}

/* Of the states a peer sends, only the live interval record carries a
 * frame of its own; what follows a refusal or an error is read by the
 * caller after the message (the test is over by then). */
static int has_json(int state)
{
	return state == QL_ST_QL_INTERVAL;
}

static void reset(ql_ctl_reader *r)
{
	free(r->json);
	r->json = NULL;
	r->have_state = 0;
	r->len_got = 0;
	r->json_len = r->json_got = 0;
	r->ready = 0;
}

size_t ql_ctl_reader_want(const ql_ctl_reader *r)
{
	if (r->ready || r->failed)
		return 0;
	if (!r->have_state)
		return 1;
	if (r->len_got < sizeof r->len_be)
		return sizeof r->len_be - r->len_got;
	return r->json_len - r->json_got;
}

int ql_ctl_reader_feed(ql_ctl_reader *r, const void *buf, size_t n, size_t *used)
{
	const unsigned char *p = buf, *p0 = buf;
	*used = 0;
	if (r->failed)
		return r->failed;
	while (n > 0 && !r->ready) {
		if (!r->have_state) {
			r->state = (signed char)*p++;
			n--;
			r->have_state = 1;
			if (!has_json(r->state))
				r->ready = 1;
		} else if (r->len_got < sizeof r->len_be) {
			size_t k = sizeof r->len_be - r->len_got;
			if (k > n)
				k = n;
			memcpy(r->len_be + r->len_got, p, k);
			r->len_got += k;
			p += k;
			n -= k;
			if (r->len_got == sizeof r->len_be) {
				uint32_t be;
				memcpy(&be, r->len_be, 4);
				uint32_t len = ntohl(be);
				*used = (size_t)(p - p0);
				if (len == 0)
					return r->failed = -ENODATA;
				if (len > r->max_json_bytes)
					return r->failed = -EMSGSIZE;
				if (!(r->json = malloc((size_t)len + 1)))
					return r->failed = -ENOMEM;
				r->json_len = len;
			}
		} else {
			size_t k = r->json_len - r->json_got;
			if (k > n)
				k = n;
			memcpy(r->json + r->json_got, p, k);
			r->json_got += k;
			p += k;
			n -= k;
			if (r->json_got == r->json_len) {
				r->json[r->json_len] = 0;
				r->ready = 1;
			}
		}
	}
	*used = (size_t)(p - p0);
	return r->ready;
}

int ql_ctl_reader_recv(ql_ctl_reader *r, int fd)
{
	if (r->failed)
		return r->failed;
	while (!r->ready) {
		char buf[4096];
		size_t want = ql_ctl_reader_want(r);
		ssize_t got = recv(fd, buf, want < sizeof buf ? want : sizeof buf, MSG_DONTWAIT);
		if (got == 0)
			return r->failed = -ECONNRESET;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return r->failed = -errno;
		}
		size_t used;
		int rc = ql_ctl_reader_feed(r, buf, (size_t)got, &used);
		if (rc < 0)
			return rc;
	}
	return 1;
}

int ql_ctl_reader_wait(ql_ctl_reader *r, int fd, int64_t deadline_ns,
		       const volatile int *stop)
{
	for (;;) {
		/* the stop flag first, as ql_io_read_full: a stopped caller
		 * takes no more messages */
		if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
			return -EINTR;
		int rc = ql_ctl_reader_recv(r, fd);
		if (rc != 0)
			return rc;
		if ((rc = ql_io_wait_fd(fd, POLLIN, deadline_ns, stop)) < 0)
			return rc;
	}
}

int ql_ctl_reader_partial(const ql_ctl_reader *r)
{
	return !r->ready && r->have_state;
}

int ql_ctl_reader_take(ql_ctl_reader *r, int *state, char **json, size_t *json_len)
{
	if (!r->ready)
		return -EAGAIN;
	*state = r->state;
	if (json) {
		*json = r->json;
		r->json = NULL;
	}
	if (json_len)
		*json_len = r->json_len;
	reset(r);
	return 0;
}

int ql_ctl_reader_peek(const ql_ctl_reader *r, int *state)
{
	if (!r->ready)
		return -EAGAIN;
	*state = r->state;
	return 0;
}
