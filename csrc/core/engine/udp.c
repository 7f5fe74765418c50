/*
 * udp.c - the UDP send and receive loops of one stream's worker (paced
 * batches, GSO/GRO, the receive books). Stands on pace.h and test.h.
 */
#include "udp.h"

#include <errno.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "pace.h"
#include "test.h"
#include "../timer.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

static void udp_stamp(char *p, uint64_t seq, int seq64, int64_t now)
{
	ql_udp_hdr h = { .sec = (uint32_t)(now / QL_NS_PER_S),
			 .usec = (uint32_t)((now % QL_NS_PER_S) / 1000), .seq = seq };
	ql_udp_hdr_encode(p, &h, seq64);
}

/* The paced sender's stall slack in datagrams (its pacer's max_burst). */
static uint64_t udp_sender_burst(const ql_test *t)
{
	uint64_t burst = 0;
	if (t->prm.bandwidth_bps && t->prm.len_bytes > 0) {
		double slack_s = t->prm.interval_s < 0.1 ? t->prm.interval_s : 0.1;
		burst = (uint64_t)((double)t->prm.bandwidth_bps * slack_s /
				   (8.0 * (double)t->prm.len_bytes));
		if (burst < 8)
			burst = 8;
		if (burst > 65536)
			burst = 65536;
	}
	return burst;
}

void udp_send_loop(ql_stream *s)
{
	int64_t wrote_at = 0;   /* the pacer's clock read before the last send */
	ql_test *t = s->t;
	size_t len = (size_t)t->prm.len_bytes;
	int batch = t->udp_batch > 0 ? t->udp_batch : QL_UDP_BATCH_DEFAULT;
	int gso = t->udp_gso;
	int seq64 = t->prm.udp_counters_64bit;
	if (gso && (size_t)batch * len > 65000)
		batch = (int)(65000 / len);
	if (batch < 1)
		batch = 1;
	char *buf = malloc((size_t)batch * len);
	struct mmsghdr *mm = calloc((size_t)batch, sizeof *mm);
	struct iovec *iov = calloc((size_t)batch, sizeof *iov);
	if (!buf || !mm || !iov) {
		s->err = ENOMEM;
		goto out;
	}
	fill_payload(buf, (size_t)batch * len);
	for (int i = 0; i < batch; i++) {
		if (t->udp_tag)
			ql_udp_tag_put(buf + (size_t)i * len, seq64, t->udp_tag_val);
		iov[i].iov_base = buf + (size_t)i * len;
		iov[i].iov_len = len;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	/* Stall rule: a sender that fell behind by up to one report interval
	 * (at most 100 ms) catches up, so each interval still carries its
	 * target; beyond that slack the pacer re-bases its schedule and the
	 * missed slots are dropped, so a long stall never turns into a long
	 * burst (iperf3 #1912). */
	uint64_t burst = udp_sender_burst(t);
	ql_pacer p;
	ql_err e;
	/* The schedule starts on the test's clock, not when this thread got
	 * going, so the slots before stop_at are exactly rate x duration. */
	int64_t origin = t->start_ns ? t->start_ns : ql_now_ns();
	if (ql_pacer_init(&p, origin, t->prm.bandwidth_bps,
			  (uint32_t)len,
			  (uint32_t)burst, &e) < 0) {
		s->err = EINVAL;
		goto out;
	}
	/* A stall beyond the slack starts the new schedule with 250 us of
	 * datagrams, not with the slack's 100 ms at once: the windows after
	 * a long stall carry the target, no burst. */
	ql_pacer_set_rebase_burst(&p, ql_pacer_burst_of_ns(&p, QL_PACER_REBASE_SPAN_NS));
	/* A timed test sends the slots scheduled before its planned end and
	 * no more: the control thread that sets send_stop may wake a few ms
	 * late (seen in the emulated guest: 3004 datagrams in 3 s at 1000/s). */
	int64_t stop_at = t->limited ? INT64_MAX :
			  t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
	uint64_t seq = 1;
	/* A stock iperf3 receiver that sent TEST_END counts nothing more:
	 * a sender stalled across the end sent its last due slots (up to
	 * `burst`) after it, and they were missing from iperf3's count (seen:
	 * 52 at 5 Mbit/s, sent 300 ms after TEST_END) */
	while (!atomic_load(&t->stop_req) && !atomic_load(&t->peer_done)) {
		int64_t next = 0, now = ql_now_ns();
		/* At the end (ours or the control thread's stop) the slots
		 * already due still go out, in one last attempt: a thread that
		 * slept across the end would otherwise lose them. */
		int last = atomic_load(&t->send_stop) || now >= stop_at;
		if (now >= stop_at)
			now = stop_at - 1;
		uint64_t due = ql_pacer_due(&p, now, &next);
		if (due == 0 && last)
			break;
		if (due == 0) {
			if (next > stop_at)
				next = stop_at;
			if (next > now + 50 * MS)
				next = now + 50 * MS;
			ql_sleep_until_ns(next, NULL, NULL);
			continue;
		}
		/* A limited test numbers its budget's units down to 1: the
		 * datagrams taking units 2 and 1 may be shortened so the byte
		 * limit is met exactly (udp_setup); `unit` is the number of the
		 * next datagram of this reservation, 0 in a timed test. */
		uint64_t unit = 0;
		if (t->limited) {
			int64_t after = 0;
			uint64_t got = reserve(&t->budget[s->dir], due, &after);
			if (got < due)
				ql_pacer_unsend(&p, due - got);
			due = got;
			if (due == 0)
				break;
			unit = (uint64_t)after + due;
		}
		while (due > 0 && !atomic_load(&t->stop_req) && !atomic_load(&t->peer_done)) {
			int n = due > (uint64_t)batch ? batch : (int)due;
			/* the datagrams of units 2 and 1 (the batch's last two) */
			int shortened = unit && unit - (uint64_t)n < 2 &&
					(t->udp_unit_bytes[1] || t->udp_unit_bytes[2]);
			uint64_t bytes = (uint64_t)n * len;
			if (shortened) {
				for (int i = n >= 2 ? n - 2 : 0; i < n; i++) {
					uint64_t u = unit - (uint64_t)i;
					if (u <= 2 && t->udp_unit_bytes[u])
						iov[i].iov_len = t->udp_unit_bytes[u];
				}
			}
			/* One timestamp per batch: the batch leaves in one call. */
			int64_t stamp = realtime_ns();
			for (int i = 0; i < n; i++)
				udp_stamp(buf + (size_t)i * len, seq + (uint64_t)i, seq64, stamp);
			int sent;
			/* GSO segments are equal but the last: a batch with two
			 * shortened datagrams goes as plain datagrams */
			if (gso && n > 1 && !shortened) {
				struct iovec one = { buf, (size_t)n * len };
				char cb[CMSG_SPACE(sizeof(uint16_t))] = { 0 };
				struct msghdr mh = { .msg_iov = &one, .msg_iovlen = 1,
						     .msg_control = cb, .msg_controllen = sizeof cb };
				struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
				cm->cmsg_level = SOL_UDP;
				cm->cmsg_type = UDP_SEGMENT;
				cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
				uint16_t seg = (uint16_t)len;
				memcpy(CMSG_DATA(cm), &seg, sizeof seg);
				ssize_t r = sendmsg(s->fd, &mh, 0);
				if (r < 0 && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT)) {
					gso = 0;   /* no GSO on this path: plain batches */
					continue;
				}
				sent = r < 0 ? -1 : n;
			} else {
				sent = sendmmsg(s->fd, mm, (unsigned)n, 0);
			}
			if (shortened) {
				bytes = 0;
				for (int i = 0; i < n; i++) {
					if (i < sent)
						bytes += iov[i].iov_len;
					iov[i].iov_len = len;
				}
			} else if (sent >= 0) {
				bytes = (uint64_t)sent * len;
			}
			if (sent < 0) {
				if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR ||
				    errno == ECONNREFUSED) {
					/* A refused datagram (ICMP from a peer that
					 * closed) or a full queue: the slot stays due.
					 * A limited test keeps its reservation and
					 * tries again (given back, another stream
					 * could take the units a shortened datagram
					 * of this one already ended). */
					wait_io(s->fd, POLLOUT, 10);
					if (t->limited && !atomic_load(&t->send_stop))
						continue;
					ql_pacer_unsend(&p, due);
					break;
				}
				s->err = errno;
				goto out;
			}
			seq += (uint64_t)sent;
			due -= (uint64_t)sent;
			if (unit)
				unit -= (uint64_t)sent;
			wrote_at = now;
			atomic_fetch_add_explicit(&s->packets, (uint64_t)sent, memory_order_relaxed);
			atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
			atomic_fetch_add_explicit(&s->writes, 1, memory_order_relaxed);
		}
		if (last)
			break;
	}
	if (t->prm.bandwidth_bps && !t->limited && !atomic_load(&t->stop_req)) {
		/* The slots of the schedule before the planned end, against
		 * what went out: re-based stalls, slots still due at the end
		 * (a full queue at the last attempt) and a late start all
		 * count as dropped. */
		/* until the planned end, or the stop that came first (a
		 * client that ended the test early) */
		int64_t end = ql_now_ns();
		if (end > stop_at)
			end = stop_at;
		unsigned __int128 el = (unsigned __int128)(uint64_t)(end > origin ? end - origin : 0);
		unsigned __int128 bits_ns = (unsigned __int128)len * 8 * QL_NS_PER_S;
		uint64_t planned = (uint64_t)((el * t->prm.bandwidth_bps + bits_ns - 1) / bits_ns);
		uint64_t sent = atomic_load(&s->packets);
		s->planned_slots = planned;
		s->skipped_slots = planned > sent ? planned - sent : 0;
	}
out:
	s->last_tx_ns = wrote_at;
	free(buf);
	free(mm);
	free(iov);
}

#define RX_CTL 64

/* Whether the sender of this receiving stream stops at the test's datagram
 * limit by itself, so a higher sequence number cannot be the test's. A
 * stock iperf3 server sending to our client does not: it sends until our
 * TEST_END reaches it, and what it sent in the meantime are well-formed
 * datagrams of the stream that it counts as sent (seen: 25 past a limit
 * of 101 at 10 Mbit/s). Those are received like any other, so the books
 * close on its count with nothing lost. */
static int udp_limit_honoured(ql_test *t)
{
	if (!t->limited)
		return 0;
	return t->side == QL_SIDE_SERVER || atomic_load(&t->peer_tags);
}

void udp_recv_loop(ql_stream *s)
{
	ql_test *t = s->t;
	int seq64 = t->prm.udp_counters_64bit;
	/* One slot per datagram. A GRO buffer can hold up to 64 KiB, and a
	 * plain datagram up to the test's length. A slot a little longer than
	 * that keeps the batch compact in cache. A longer stray datagram is
	 * cut short there, which the header decoder tolerates. */
	size_t cap = t->udp_gso ? 65536 : ((size_t)t->prm.len_bytes + 64 + 63) & ~(size_t)63;
	if (cap < 2048)
		cap = 2048;
	char *buf = malloc((size_t)RX_BATCH * cap);
	struct mmsghdr mm[RX_BATCH];
	struct iovec iov[RX_BATCH];
	char ctl[RX_BATCH][RX_CTL];
	if (!buf) {
		s->err = ENOMEM;
		return;
	}
	int one = 1;
	setsockopt(s->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
	/* GRO hands over several datagrams of one flow in one buffer, with
	 * the segment size in a UDP_GRO control message. */
	if (t->udp_gso)
		setsockopt(s->fd, SOL_UDP, UDP_GRO, &one, sizeof one);
	/* What can belong to the test: a datagram at least as long as the
	 * header, carrying the test tag where both ends are qoslab, numbered
	 * no further than the sender can have come (stats.h ql_udp_seq_max).
	 * A client receiving from the server requires the tag once the server
	 * announced itself or a tagged datagram came; a stock iperf3 server's
	 * payload matches a 64-bit tag with odds 2^-64. */
	size_t hdr_min = ql_udp_hdr_bytes(seq64, 0);
	int tag_needed = t->udp_tag && t->side == QL_SIDE_SERVER;
	ql_udp_accept acc = { .rate_bps = t->prm.bandwidth_bps,
			      .length_bytes = (uint32_t)t->prm.len_bytes,
			      .burst_packets = udp_sender_burst(t),
			      .limit_packets = 0,   /* set per batch: udp_limit_honoured */
			      /* this worker started before the first datagram
			       * could be sent to it; the slack covers a
			       * sender whose clock origin came a little earlier */
			      .origin_ns = s->run_ns,
			      .slack_ns = QL_UDP_ACCEPT_SLACK_NS };
	int64_t hi_ns = s->run_ns;
	int idle = 1;
	while (!atomic_load(&t->recv_stop) && !atomic_load(&t->stop_req)) {
		/* While datagrams keep coming, read first: poll only after a
		 * read found the queue empty (one syscall per batch). */
		if (idle && wait_io(s->fd, POLLIN, 20) <= 0)
			continue;
		for (int i = 0; i < RX_BATCH; i++) {
			iov[i].iov_base = buf + (size_t)i * cap;
			iov[i].iov_len = cap;
			memset(&mm[i].msg_hdr, 0, sizeof mm[i].msg_hdr);
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
			mm[i].msg_hdr.msg_control = ctl[i];
			mm[i].msg_hdr.msg_controllen = RX_CTL;
		}
		int n = recvmmsg(s->fd, mm, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED) {
				s->err = errno;
				break;
			}
			idle = 1;
			continue;
		}
		idle = n < RX_BATCH;
		int64_t fallback = realtime_ns(), mono = ql_now_ns();
		if (!tag_needed && t->udp_tag && atomic_load(&t->peer_tags))
			tag_needed = 1;
		acc.limit_packets = udp_limit_honoured(t) ? t->limit_packets : 0;
		pthread_mutex_lock(&s->mu);
		/* once per batch: a batch holds at most RX_BATCH x 64 datagrams,
		 * far inside the bound's headroom */
		uint64_t seq_max = ql_udp_seq_max(&acc, s->rx.highest, hi_ns, mono);
		uint64_t dgrams = 0;
		for (int i = 0; i < n; i++) {
			size_t got = mm[i].msg_len;
			int64_t arr = fallback;
			size_t seg = got;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mm[i].msg_hdr); c;
			     c = CMSG_NXTHDR(&mm[i].msg_hdr, c)) {
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
					struct timespec ts;
					memcpy(&ts, CMSG_DATA(c), sizeof ts);
					arr = (int64_t)ts.tv_sec * QL_NS_PER_S + ts.tv_nsec;
				} else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
					int gs = 0;
					memcpy(&gs, CMSG_DATA(c), sizeof gs);
					if (gs > 0)
						seg = (size_t)gs;
				}
			}
			for (size_t off = 0; off < got; off += seg) {
				size_t len = got - off < seg ? got - off : seg;
				ql_udp_hdr h;
				const char *d = (const char *)iov[i].iov_base + off;
				/* A qoslab client's connect message repeated after
				 * the test began (its reply came late) is 41 bytes:
				 * not a runt, but its cookie is no sequence number.
				 * Nor is it a datagram of the test: a client that
				 * ends at a datagram limit counts only those (a
				 * repeated 4-byte reply ended a test of 101 at 100). */
				if ((len == 4 + QL_COOKIE_SIZE || len == 4) && ql_udp_connect_msg_ok(d, 4))
					continue;
				dgrams++;
				if (len < hdr_min || ql_udp_hdr_decode(d, len, seq64, &h) < 0) {
					ql_udp_rx_invalid(&s->rx);   /* runt */
					continue;
				}
				if (t->udp_tag) {
					int tagged = len >= hdr_min + QL_UDP_TAG_BYTES &&
						     ql_udp_tag_get(d, seq64) == t->udp_tag_val;
					if (tagged)
						tag_needed = 1;
					else if (tag_needed) {
						ql_udp_rx_invalid(&s->rx);
						continue;
					}
				}
				uint64_t seq = seq64 ? h.seq
						     : ql_seq_extend32(s->rx.highest, (uint32_t)h.seq);
				if (seq == 0 || seq > seq_max) {
					ql_udp_rx_invalid(&s->rx);
					continue;
				}
				if (seq > s->rx.highest)
					hi_ns = mono;
				int64_t sent_ns = (int64_t)h.sec * QL_NS_PER_S + (int64_t)h.usec * 1000;
				ql_udp_rx_packet(&s->rx, seq, len, sent_ns, arr);
			}
		}
		pthread_mutex_unlock(&s->mu);
		atomic_fetch_add_explicit(&s->packets, dgrams, memory_order_relaxed);
		atomic_store(&s->last_rx_ns, ql_now_ns());
	}
	free(buf);
}
