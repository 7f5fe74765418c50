/*
 * tcp.c - the TCP send and receive loops of one stream's worker, paced by
 * the engine's pacer, the sender with MSG_ZEROCOPY on request. Stands on
 * pace.h, zerocopy.h and test.h.
 */
#include "tcp.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "pace.h"
#include "test.h"
#include "zerocopy.h"
#include "../timer.h"

/* Wait (bounded) until the kernel has every sent byte acknowledged, so the
 * receiver holds what the sender counted before anyone ends the test. */
static void tcp_wait_acked(ql_stream *s, int64_t cap_ns)
{
	int64_t deadline = ql_now_ns() + cap_ns;
	while (!atomic_load(&s->t->stop_req) && !atomic_load(&s->t->abort_io) &&
	       ql_now_ns() < deadline) {
		int outq = 0;
		if (ioctl(s->fd, SIOCOUTQ, &outq) < 0 || outq <= 0)
			return;
		struct timespec ts = { 0, 2 * MS };
		nanosleep(&ts, NULL);
	}
}

void tcp_send_loop(ql_stream *s)
{
	ql_test *t = s->t;
	size_t len = (size_t)t->prm.len_bytes;
	char *buf = malloc(len);
	if (!buf) {
		s->err = ENOMEM;
		return;
	}
	fill_payload(buf, len);
	/* bitrate_bps on TCP: the pacer's absolute schedule over this
	 * stream's blocks; a stream that fell behind by more than 10 ms of
	 * data re-bases (QL_PACER_TCP_SLACK_NS). credit = blocks released and
	 * not yet written. */
	uint64_t rate = t->prm.bandwidth_bps;
	ql_pacer pacer;
	uint64_t credit = 0;
	ql_err e;
	if (rate && ql_pacer_init_blocks(&pacer, ql_now_ns(), rate, len, QL_PACER_TCP_SLACK_NS,
					 &e) < 0) {
		s->err = EINVAL;
		free(buf);
		return;
	}
	/* A timed sender stops at the planned end by itself, also inside a
	 * write the path blocks (a slow link held one for seconds): it polls
	 * no longer than until then. */
	int64_t stop_at = planned_end_ns(t);
	/* zerocopy: a kernel that refuses SO_ZEROCOPY gets copies (and the
	 * stream's result no zerocopy record). The completions are drained
	 * every 32 sends and whenever the socket's option memory is full. */
	int flags = MSG_DONTWAIT | MSG_NOSIGNAL;
	if (t->prm.zerocopy && zc_enable(s->fd, &s->zc) == 0)
		flags |= MSG_ZEROCOPY;
	/* One clock read per write: the one after it returns stamps the
	 * write's end and serves the next checks (nothing runs between). */
	int64_t now = ql_now_ns();
	while (!atomic_load(&t->send_stop) && !atomic_load(&t->stop_req) && now < stop_at) {
		if (rate && credit == 0) {
			int64_t due;
			credit = ql_pacer_due(&pacer, now, &due);
			if (credit == 0) {
				ql_sleep_until_ns(due < now + 50 * MS ? due : now + 50 * MS, NULL, NULL);
				now = ql_now_ns();
				continue;
			}
		}
		if (rate)
			credit--;
		size_t n = len;
		if (t->limited) {
			n = reserve(&t->budget[s->dir], len, NULL);
			if (n == 0)
				break;
		}
		size_t off = 0;
		while (off < n && !atomic_load(&t->stop_req)) {
			/* A time-limited test stops mid-block; a limited one
			 * sends the whole reservation (unless the test failed). */
			if ((!t->limited && atomic_load(&t->send_stop)) || atomic_load(&t->abort_io))
				break;
			int64_t left_ns = stop_at - now;
			if (left_ns <= 0)
				break;
			/* Try first, poll only when the socket is full: one
			 * syscall per block while the path keeps up. */
			ssize_t r = send(s->fd, buf + off, n - off, flags);
			now = ql_now_ns();
			if (r > 0 && (flags & MSG_ZEROCOPY) && (++s->zc.sends & 31) == 0)
				zc_drain(s->fd, &s->zc, 0);
			if (r > 0) {
				off += (size_t)r;
				ctr_add(&s->bytes, (uint64_t)r);
				ctr_add(&s->writes, 1);
				s->last_tx_ns = now;
			} else if (r < 0 && errno == ENOBUFS && (flags & MSG_ZEROCOPY)) {
				zc_drain(s->fd, &s->zc, 10);
				now = ql_now_ns();
			} else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
				int64_t w = left_ns < 50 * MS ? left_ns : 50 * MS;
				wait_io(s->fd, POLLOUT, (int)((w + MS - 1) / MS));
				now = ql_now_ns();
			} else if (r < 0) {
				s->err = errno;
				goto out;
			}
		}
		if (off < n)
			break;
	}
out:
	free(buf);
	/* A stock iperf3 client stops reading when it sends TEST_END, so a
	 * server waiting for its acks would only stall. */
	/* A timed test's wait ends with its tail (tcp_tail_ns) after the
	 * planned end: what a slow path still queues then is sent but not
	 * received. */
	int64_t cap = 10 * QL_NS_PER_S;
	if (!t->limited) {
		cap = stop_at + tcp_tail_ns(t) - ql_now_ns();
		if (cap > TCP_DRAIN_CAP_NS)
			cap = TCP_DRAIN_CAP_NS;
	}
	if (!atomic_load(&t->stop_req) && !atomic_load(&t->abort_io) && cap > 0 &&
	    (t->side == QL_SIDE_CLIENT || t->peer == QL_PEER_QOSLAB))
		tcp_wait_acked(s, cap);
	/* acknowledged data is freed, so its completions are queued by now
	 * (bounded: a path that lost the data never completes them) */
	if (flags & MSG_ZEROCOPY)
		zc_drain(s->fd, &s->zc, 100);
	shutdown(s->fd, SHUT_WR);
}

void tcp_recv_loop(ql_stream *s)
{
	ql_test *t = s->t;
	/* Reads are not tied to the sender's write size. On loopback,
	 * 64-128 KiB per call measured best; 256 KiB reads cut one stream
	 * from ~14 to ~9 Gbit/s, because the copy target leaves the cache. */
	size_t len = TCP_RX_BYTES;
	/* skip_rx_copy: MSG_TRUNC on a TCP socket (Linux >= 4.8) drops what
	 * it returns instead of copying it, so only the count arrives. */
	int flags = MSG_DONTWAIT | (t->prm.skip_rx_copy ? MSG_TRUNC : 0);
	char *buf = malloc(len);
	if (!buf) {
		s->err = ENOMEM;
		return;
	}
	while (!atomic_load(&t->recv_stop) && !atomic_load(&t->stop_req)) {
		ssize_t r = recv(s->fd, buf, len, flags);
		if (r > 0) {
			ctr_add(&s->bytes, (uint64_t)r);
			atomic_store_explicit(&s->last_rx_ns, ql_now_ns(), memory_order_release);
		} else if (r == 0) {
			break;
		} else if (errno == EAGAIN || errno == EINTR) {
			wait_io(s->fd, POLLIN, 50);
		} else {
			if (errno != ECONNRESET)
				s->err = errno;
			break;
		}
	}
	free(buf);
}
