/*
 * workers.c - the threads that run a test's streams, one per stream, each
 * running its TCP or UDP loop, pinned to its CPU. Stands on affinity.h,
 * tcp.h, udp.h and test.h.
 */
#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "affinity.h"
#include "tcp.h"
#include "test.h"
#include "udp.h"
#include "../timer.h"

static void *stream_main(void *arg)
{
	ql_stream *s = arg;
	int64_t u0, s0, u1, s1;
	/* a name to find the stream threads by (ps -L, /proc/PID/task) */
	pthread_setname_np(pthread_self(), "qoslab-stream");
	/* the CPU was checked allowed when the test started; a pin that the
	 * kernel still refuses leaves the thread where the scheduler puts it */
	(void)affinity_pin(&s->t->affinity, s->idx);
	s->run_ns = ql_now_ns();
	thread_cpu(&u0, &s0);
	if (s->t->proto == QL_PROTO_TCP) {
		if (s->sender)
			tcp_send_loop(s);
		else
			tcp_recv_loop(s);
	} else {
		if (s->sender)
			udp_send_loop(s);
		else
			udp_recv_loop(s);
	}
	thread_cpu(&u1, &s1);
	s->cpu_user_ns = u1 - u0;
	s->cpu_sys_ns = s1 - s0;
	s->done_ns = ql_now_ns();
	atomic_store(&s->done, 1);
	return NULL;
}

/* Start the stream threads not yet started; receivers_only starts just
 * the receiving ones. */
int start_workers(ql_test *t, int receivers_only, ql_err *e)
{
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (s->th_started || (receivers_only && s->sender))
			continue;
		int rc = pthread_create(&s->th, NULL, stream_main, s);
		if (rc != 0)
			return ql_err_set(e, rc, NULL, "cannot start stream thread: %s", strerror(rc));
		s->th_started = 1;
	}
	return 0;
}
