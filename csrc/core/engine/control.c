/*
 * control.c - the control channel around the run: live records both ways,
 * waiting out senders and receivers, the results exchange. Stands on
 * ctl_reader.h, results.h, udp_books.h, report.h and test.h.
 */
#include "control.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "ctl_reader.h"
#include "report.h"
#include "results.h"
#include "test.h"
#include "udp_books.h"
#include "../timer.h"

/* Sleep until `until` (or cond), ticking the grid meanwhile. */

/* Server: send the intervals ticked since the last call to a qoslab
 * client (the live series). */
int ship_live(ql_test *t)
{
	while (t->side == QL_SIDE_SERVER && t->peer == QL_PEER_QOSLAB && t->nshipped < t->niv) {
		char *js = ql_interval_encode(&t->iv[t->nshipped]);
		int rc = js ? ql_io_write_state(t->ctl_fd, QL_ST_QL_INTERVAL,
						ql_now_ns() + CTL_TIMEOUT_NS, NULL) : 0;
		if (js && rc == 0)
			rc = ql_io_write_json(t->ctl_fd, js, ql_now_ns() + CTL_TIMEOUT_NS, NULL);
		free(js);
		if (rc < 0)
			return fail_io(t, rc, "sending an interval");
		t->nshipped++;
	}
	return 0;
}

/* Client: take the server's live records that are on the control
 * connection, and only those: any other message stays in the reader for
 * the protocol loop, and so does a record that has not all come yet (an
 * error too: the protocol loop's next read reports it). */
static void take_live(ql_test *t)
{
	int st;
	while (t->side == QL_SIDE_CLIENT && t->peer_live && t->ctl_fd >= 0 &&
	       ql_ctl_reader_recv(&t->ctl_rd, t->ctl_fd) == 1 &&
	       ql_ctl_reader_peek(&t->ctl_rd, &st) == 0 && st == QL_ST_QL_INTERVAL) {
		char *js = NULL;
		size_t jl = 0;
		ql_ctl_reader_take(&t->ctl_rd, &st, &js, &jl);
		peer_interval_take(t, js, jl);
	}
}

/* Tick while a test winds down (senders waiting for their acknowledgements,
 * receivers draining); the live series keeps flowing both ways meanwhile, so
 * the records of the tail have both ends' entries too. */
static void wait_ticking(ql_test *t, int64_t until, int (*cond)(ql_test *))
{
	for (;;) {
		maybe_tick(t);
		ship_live(t);
		take_live(t);
		if (atomic_load(&t->stop_req) || (cond && cond(t)))
			return;
		int64_t now = ql_now_ns();
		if (now >= until)
			return;
		int64_t w = next_tick(t);
		if (w > until)
			w = until;
		if (w > now + 10 * MS)
			w = now + 10 * MS;
		ql_sleep_until_ns(w, NULL, NULL);
	}
}

int receivers_eof(ql_test *t)
{
	return all_done(t, 0);
}

static int senders_done(ql_test *t)
{
	return all_done(t, 1);
}

/* Stopped senders wait (bounded) until their data is acknowledged; the
 * grid keeps ticking meanwhile, so the sending socket's TCP_INFO covers
 * every interval in which the receiver still gets data. */
void wait_senders(ql_test *t)
{
	wait_ticking(t, INT64_MAX, senders_done);
	streams_join(t, 1, 0);
}

/* TCP receivers: until every stream saw EOF or nothing came for the drain
 * time; UDP: the drain time after the sender's end. */
void drain_receivers(ql_test *t)
{
	if (!local_has(t, 0))
		return;
	int64_t t0 = ql_now_ns();
	if (t->proto == QL_PROTO_UDP) {
		wait_ticking(t, t0 + t->drain_ns, NULL);
	} else {
		int64_t cap = t0 + TCP_DRAIN_CAP_NS;
		/* a timed test: until the grid end's slack, but the data
		 * already in the socket is read (at least 20 ms) */
		if (!t->limited) {
			int64_t c = planned_end_ns(t) + tcp_tail_ns(t);
			if (c < t0 + 20 * MS)
				c = t0 + 20 * MS;
			if (c < cap)
				cap = c;
		}
		for (;;) {
			wait_ticking(t, ql_now_ns() + 20 * MS, receivers_eof);
			if (receivers_eof(t) || atomic_load(&t->stop_req))
				break;
			int64_t now = ql_now_ns(), last = t0;
			for (int i = 0; i < t->nstreams; i++) {
				int64_t l = atomic_load(&t->st[i].last_rx_ns);
				if (!t->st[i].sender && l > last)
					last = l;
			}
			if (now - last >= t->drain_ns || now >= cap)
				break;
		}
	}
	atomic_store(&t->recv_stop, 1);
	streams_join(t, 0, 1);
}

/* Keep a QL_ST_QL_INTERVAL body (js[0..jl), taken over and freed) for the
 * live queue. */
void peer_interval_take(ql_test *t, char *js, size_t jl)
{
	ql_interval iv;
	ql_err e;
	int rc = js ? ql_interval_parse(js, jl, &iv, &e) : -EINVAL;
	free(js);
	if (rc < 0)
		return;   /* a bad live record only costs the live view */
	int64_t g0, g1;
	iv_slots(t, &iv, &g0, &g1);
	pthread_mutex_lock(&t->mu);
	t->peer_live = 1;
	t->nrlive_total++;
	if (rlive_push(t, &iv) == 0 && g1 > t->peer_upto)
		t->peer_upto = g1;
	live_release(t, ql_now_ns());
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

int exchange_results(ql_test *t, int client_first, ql_cpu_result *cpu)
{
	int rc;
	char *mine = NULL, *theirs = NULL;
	size_t tl = 0;
	int64_t dl = ql_now_ns() + CTL_TIMEOUT_NS;
	/* The peer's results can hold no more than this test could report:
	 * its streams, and intervals over the time it ran. Both ends start
	 * their clock when TEST_RUNNING leaves or arrives and read the other's
	 * results one trip after it encoded them, so the time this end ran
	 * until now covers the peer's; a peer that ends a long test early
	 * gets the caps of the short one. */
	ql_results_caps caps;
	double ran_s = t->start_ns ? (double)(ql_now_ns() - t->start_ns) / 1e9 : t->prm.time_s;
	ql_results_caps_for(t->nstreams, t->prm.interval_s, t->prm.omit_s, ran_s, &caps);
	if (client_first) {
		mine = encode_local(t, cpu);
		if (!mine)
			return ql_err_set(&t->err, ENOMEM, NULL, "out of memory");
		rc = ql_io_write_json(t->ctl_fd, mine, dl, NULL);
		free(mine);
		if (rc < 0)
			return fail_io(t, rc, "sending results");
		rc = ql_io_read_json(t->ctl_fd, caps.bytes, &theirs, &tl, dl, NULL);
		if (rc < 0)
			return fail_io(t, rc, "reading the server's results");
		rc = ql_results_parse_capped(theirs, tl, &caps, &t->peer_res, &t->err);
		free(theirs);
		if (rc < 0)
			return rc;
		close_udp_books(t, &t->peer_res);
		return 0;
	}
	rc = ql_io_read_json(t->ctl_fd, caps.bytes, &theirs, &tl, dl,
			     (const volatile int *)&t->stop_req);
	if (rc == -EMSGSIZE)
		return ql_err_set(&t->err, EMSGSIZE, NULL, "the client's results are longer than "
				  "the %zu bytes this test can need", caps.bytes);
	if (rc < 0)
		return fail_io(t, rc, "reading the client's results");
	rc = ql_results_parse_capped(theirs, tl, &caps, &t->peer_res, &t->err);
	free(theirs);
	if (rc < 0)
		return rc;
	close_udp_books(t, &t->peer_res);
	mine = encode_local(t, cpu);
	if (!mine)
		return ql_err_set(&t->err, ENOMEM, NULL, "out of memory");
	rc = ql_io_write_json(t->ctl_fd, mine, dl, NULL);
	free(mine);
	if (rc < 0)
		return fail_io(t, rc, "sending results");
	return 0;
}
