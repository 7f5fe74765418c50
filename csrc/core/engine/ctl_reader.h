/*
 * ctl_reader.h - an incremental, non-blocking reader of the control
 * connection's messages (ctl_reader.c). Stands on proto.h only.
 *
 * A control loop that also ticks the interval grid must never wait in a read
 * for the rest of a message whose segments trickle in over a slow path. The
 * reader takes what the socket holds, keeps a partial message between calls,
 * and hands out one complete message at a time: a state byte, and for
 * QL_ST_QL_INTERVAL its length-prefixed JSON. It never reads past the message
 * it is assembling, so once it holds no partial message the connection sits
 * on a message boundary and the framed calls of proto.h can go on from there
 * (the results exchange, a refusal's reason).
 */
#ifndef QL_CTL_READER_H
#define QL_CTL_READER_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

typedef struct ql_ctl_reader {
	size_t max_json_bytes;   /* a longer frame is -EMSGSIZE */
	int state;               /* the message's state byte */
	int have_state;
	unsigned char len_be[4]; /* a JSON frame's length, as it comes */
	size_t len_got;
	char *json;              /* the JSON text (NUL-terminated) */
	size_t json_len, json_got;
	int ready;               /* a complete message waits to be taken */
	int failed;              /* the last error, sticky (negative errno) */
} ql_ctl_reader;

/* An empty reader; JSON frames up to max_json_bytes. */
void ql_ctl_reader_init(ql_ctl_reader *r, size_t max_json_bytes);
/* Free what the reader holds (idempotent; init again to reuse). */
void ql_ctl_reader_free(ql_ctl_reader *r);

/* How many bytes the message being assembled still needs before the reader
 * knows more (a caller that reads at most this many never reads past the
 * message); 0 when a message is ready or the reader failed. */
size_t ql_ctl_reader_want(const ql_ctl_reader *r);
/* Take bytes of buf[0..n) up to the end of the message (*used: how many;
 * none while a message waits to be taken). Returns 1 when a message is
 * complete, 0 when more is needed, -EMSGSIZE for a JSON frame longer than
 * max_json_bytes (nothing allocated), -ENODATA for an empty one (as
 * ql_io_read_json), -ENOMEM. An error is sticky: the framing is lost. */
int ql_ctl_reader_feed(ql_ctl_reader *r, const void *buf, size_t n, size_t *used);
/* Read what fd holds now, without blocking and never past the message being
 * assembled. Returns 1 when a message is ready (also one left from before),
 * 0 when fd has no more for now, -ECONNRESET when the peer closed (between or
 * inside a message), a feed error, or another negative errno. */
int ql_ctl_reader_recv(ql_ctl_reader *r, int fd);
/* As ql_ctl_reader_recv, but waits for a complete message until deadline_ns
 * (CLOCK_MONOTONIC; <= 0: none) or the stop flag (read atomically, before
 * each read and every 50 ms): 1, -ETIMEDOUT, -EINTR or an error of
 * ql_ctl_reader_recv. */
int ql_ctl_reader_wait(ql_ctl_reader *r, int fd, int64_t deadline_ns,
		       const volatile int *stop);
/* 1 when the reader holds part of a message (the connection is not on a
 * message boundary). */
int ql_ctl_reader_partial(const ql_ctl_reader *r);

/* The ready message: its state byte; with QL_ST_QL_INTERVAL its JSON, handed
 * over to the caller (malloc'd, NUL-terminated; *json_len its length), else
 * *json = NULL (json NULL: the JSON is dropped). The reader then assembles the next message. Returns 0, or
 * -EAGAIN when no message is ready. */
int ql_ctl_reader_take(ql_ctl_reader *r, int *state, char **json, size_t *json_len);
/* The ready message's state byte without taking it, or -EAGAIN. */
int ql_ctl_reader_peek(const ql_ctl_reader *r, int *state);

#endif
