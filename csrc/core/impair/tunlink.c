/* tunlink.c - see tunlink.h. */
#include "tunlink.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/virtio_net.h>

#include "../link.h"
#include "../netns.h"
#include "ippkt.h"
#include "pktq.h"
#include "tun.h"

/* Lateness histogram: 1 µs buckets, the last one "or more". */
#define LATE_BUCKETS 2048
/* A read buffer takes the largest IP packet a TUN can hand over. */
#define READ_BUF_BYTES 65536
/* The sender sleeps until this long before a packet's time, then waits
 * out the rest on the CPU: a wake-up's own latency (the timer and the
 * scheduler, tens of µs even when idle) falls inside the margin. A build
 * may set another (bench/impair_link.lua compares them). */
#ifndef QL_TUNLINK_SPIN_MARGIN_NS
#define QL_TUNLINK_SPIN_MARGIN_NS 60000
#endif
#define SPIN_MARGIN_NS QL_TUNLINK_SPIN_MARGIN_NS

typedef struct dir {
	struct ql_tunlink *link;
	int idx;
	int in_fd, out_fd;
	size_t hdr;                       /* vnet header bytes before the IP packet */
	const char *in_name, *out_name;  /* for messages */

	pthread_mutex_t mu;
	pthread_cond_t cv;                /* sender: queue changed / stop */
	ql_impair *model;
	ql_pktq q;
	int64_t last_tts_ns;             /* time to send of the packet queued last */
	int sending;                      /* the sender writes a packet it popped */
	uint64_t budget_bytes;

	/* the link's own counters (the model keeps the rest) */
	uint64_t forwarded_packets, forwarded_bytes;
	uint64_t memory_drops, rejected_packets;
	ql_err over_budget;               /* set at the first memory drop */
	ql_tunlink_proto_stats proto[QL_IPPKT_NPROTOS];
	int in_burst[QL_IPPKT_NPROTOS];   /* the class's last arrival was lost */
	uint64_t loss_bursts;
	int dir_in_burst;                 /* the last arrival was lost */
	int64_t delay_sum_ns, delay_max_ns;
	int64_t late_max_ns;
	uint64_t late_n;
	uint32_t late_hist[LATE_BUCKETS];

	pthread_t reader, sender;
	int reader_started, sender_started;
} dir;

struct ql_tunlink {
	char a_ifname[QL_IFNAME_MAX + 1], b_ifname[QL_IFNAME_MAX + 1];
	int a_fd, b_fd;
	int stop_fd;                       /* eventfd: readers leave poll */
	atomic_int stop;
	int realtime;                      /* asked for SCHED_FIFO threads */
	atomic_int senders_realtime;       /* senders that got it */
	atomic_int readers_realtime;       /* readers that got it */
	pthread_mutex_t fail_mu;
	int failed;
	ql_err failure;
	dir d[2];
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void wake_all(ql_tunlink *l)
{
	uint64_t one = 1;
	if (l->stop_fd < 0)
		return;
	ssize_t w = write(l->stop_fd, &one, sizeof one);
	(void)w;  /* an eventfd write fails only on overflow: already awake */
	for (int i = 0; i < 2; i++) {
		pthread_mutex_lock(&l->d[i].mu);
		pthread_cond_broadcast(&l->d[i].cv);
		pthread_mutex_unlock(&l->d[i].mu);
	}
}

/* Record the first fault and stop every thread. Never called holding a
 * direction's lock (wake_all takes both). */
static void fail(ql_tunlink *l, int err, const char *what, const char *dev)
{
	pthread_mutex_lock(&l->fail_mu);
	if (!l->failed) {
		l->failed = 1;
		ql_err_set(&l->failure, err, "ELINKFAILED",
			   "impairment link failed: %s %s: %s (%s); it forwards nothing any more: close it",
			   what, dev, strerror(err), ql_errno_name(err));
	}
	pthread_mutex_unlock(&l->fail_mu);
	atomic_store(&l->stop, 1);
	wake_all(l);
}

/* The link's threads take no signals: SIGINT/SIGTERM go to the threads
 * that wait in Lua's calls (sig.h), and timers want no slack. */
static void thread_setup(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

/* SCHED_FIFO at the lowest real-time priority: a sender whose packet is
 * due, or a reader whose TUN has a packet, preempts the host's ordinary
 * threads at once instead of waiting its turn (milliseconds on a loaded
 * host; a reader's wait is the packet's, as its time counts from the
 * read). Kept only where the process may
 * (CAP_SYS_NICE or RLIMIT_RTPRIO); the kernel's real-time throttling
 * (sched_rt_runtime_us) leaves the others their share if it ever spins. */
static void thread_priority(ql_tunlink *l, atomic_int *granted)
{
	if (!l->realtime)
		return;
	struct sched_param sp = { .sched_priority = sched_get_priority_min(SCHED_FIFO) };
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
		atomic_fetch_add(granted, 1);
}

/* A packet the budget (or malloc) refused: dropped, never forwarded early,
 * and said once per direction (ql_tunlink_stats.over_budget). */
static void memory_drop(dir *d, int cls)
{
	if (!d->memory_drops)
		ql_err_set(&d->over_budget, ENOBUFS, "ENOBUFS",
			   "impairment link %s -> %s: its queue reached memory_bytes (%llu bytes for %zu packets): "
			   "packets over it are dropped (reason memory): raise memory_bytes or lower limit_packets",
			   d->in_name, d->out_name, (unsigned long long)d->budget_bytes, ql_pktq_len(&d->q));
	d->memory_drops++;
	d->proto[cls].drops[QL_IMPAIR_DROP_MEMORY]++;
}

/* Queue one copy of the packet of class cls; d->mu held. */
static void queue_copy(dir *d, const unsigned char *buf, size_t len, int cls,
		       const ql_impair_verdict *v, int64_t now, int *wake)
{
	if (d->q.cost_bytes + QL_PKT_COST(len) > d->budget_bytes) {
		memory_drop(d, cls);
		return;
	}
	ql_pkt *p = ql_pkt_new(buf, len);
	if (!p) {
		memory_drop(d, cls);
		return;
	}
	p->enq_ns = now;
	p->at_head = v->to_head;
	p->tts_ns = v->to_head ? now : v->time_to_send_ns;
	int first = 0;
	if (ql_pktq_push(&d->q, p, &first) < 0) {
		free(p);
		memory_drop(d, cls);
		return;
	}
	if (!v->to_head)
		d->last_tts_ns = p->tts_ns;
	if (first)
		*wake = 1;
}

/* Write one packet into the other TUN and count it; d->mu held from the
 * count on (the reader's direct path holds it throughout: its write keeps
 * its place in the order). Returns 0, or the errno of a write that fails
 * the link. */
static int write_out(dir *d, const unsigned char *data, size_t len, int64_t enq_ns,
		     int locked)
{
	ssize_t w;
	do
		w = write(d->out_fd, data, len);
	while (w < 0 && errno == EINTR);
	int err = w < 0 ? errno : 0;
	int64_t sent = mono_ns();
	if (!locked)
		pthread_mutex_lock(&d->mu);
	if (w >= 0) {
		d->forwarded_packets++;
		d->forwarded_bytes += len - d->hdr;
		int64_t q = sent - enq_ns;
		d->delay_sum_ns += q;
		if (q > d->delay_max_ns)
			d->delay_max_ns = q;
		ql_impair_sent(d->model, len - d->hdr, sent);
	} else if (err == EINVAL || err == EAGAIN || err == ENOBUFS) {
		/* the kernel refused this one packet (a corrupted header
		 * names no IP version) or its queue was full: counted,
		 * the link goes on */
		d->rejected_packets++;
		err = 0;
	}
	return err;
}

/* A packet due now with nothing queued before it and no write of the
 * sender's under way goes out from the reader at once: a zero-delay
 * packet (the far end's reply to a delayed request, say) never waits for
 * a sender's wake-up. d->mu held. */
static int due_now(dir *d, const ql_impair_verdict *v, size_t len, int64_t now)
{
	if (v->copies != 1 || ql_pktq_len(&d->q) || d->sending)
		return 0;
	int64_t tts = v->to_head ? now : v->time_to_send_ns;
	return tts <= now && ql_impair_dequeue_at(d->model, len - d->hdr, tts, now) <= now;
}

static void *reader_main(void *arg)
{
	dir *d = arg;
	ql_tunlink *l = d->link;
	thread_setup();
	thread_priority(l, &l->readers_realtime);
	unsigned char *buf = malloc(READ_BUF_BYTES);
	unsigned char *copy = malloc(READ_BUF_BYTES);
	if (!buf || !copy) {
		free(buf);
		free(copy);
		fail(l, ENOMEM, "read buffers for", d->in_name);
		return NULL;
	}
	while (!atomic_load(&l->stop)) {
		ssize_t n = read(d->in_fd, buf, READ_BUF_BYTES);
		if (n < 0) {
			int err = errno;
			if (err == EINTR)
				continue;
			if (err != EAGAIN) {
				fail(l, err, "read from TUN device", d->in_name);
				break;
			}
			struct pollfd pf[2] = {
				{ .fd = d->in_fd, .events = POLLIN },
				{ .fd = l->stop_fd, .events = POLLIN },
			};
			if (poll(pf, 2, -1) < 0 && errno != EINTR) {
				fail(l, errno, "poll on TUN device", d->in_name);
				break;
			}
			continue;
		}
		if ((size_t)n < d->hdr)
			continue;  /* no packet behind the header: nothing to forward */
		size_t len = (size_t)n, ip_len = len - d->hdr;
		unsigned char *ip = buf + d->hdr;
		int64_t now = mono_ns();
		int ecn_capable = ql_ippkt_ecn_capable(ip, ip_len);
		int cls = ql_ippkt_proto(ip, ip_len);
		ql_impair_verdict v;
		int wake = 0;
		pthread_mutex_lock(&d->mu);
		const ql_impair_counters *mc = ql_impair_counters_get(d->model);
		uint64_t lost0 = mc->drops[QL_IMPAIR_DROP_LOSS];
		/* a GSO packet: its segments' headers and size, for the rate */
		ql_impair_gso seg = { 0, 0 };
		if (d->hdr >= sizeof(struct virtio_net_hdr)) {
			struct virtio_net_hdr vh;
			memcpy(&vh, buf, sizeof vh);
			if (vh.gso_type != VIRTIO_NET_HDR_GSO_NONE && vh.gso_size > 0) {
				seg.hdr_bytes = ql_ippkt_headers_bytes(ip, ip_len);
				seg.payload_bytes = seg.hdr_bytes ? vh.gso_size : 0;
			}
		}
		ql_impair_enqueue_gso(d->model, ip_len, seg.payload_bytes ? &seg : NULL, ecn_capable, now,
				      (uint32_t)ql_pktq_len(&d->q), ql_pktq_len(&d->q) ? d->last_tts_ns : 0, &v);
		ql_tunlink_proto_stats *ps = &d->proto[cls];
		ps->arrived_packets++;
		/* a duplicated packet may lose one copy: the model's count */
		ps->drops[QL_IMPAIR_DROP_LOSS] += mc->drops[QL_IMPAIR_DROP_LOSS] - lost0;
		if (v.drop == QL_IMPAIR_DROP_LIMIT)
			ps->drops[QL_IMPAIR_DROP_LIMIT]++;
		int lost = v.copies == 0 && v.drop == QL_IMPAIR_DROP_LOSS;
		if (lost && !d->in_burst[cls])
			ps->loss_bursts++;
		d->in_burst[cls] = lost;
		if (lost && !d->dir_in_burst)
			d->loss_bursts++;
		d->dir_in_burst = lost;
		if (v.copies > 0) {
			if (v.ce_mark)
				ql_ippkt_set_ce(ip, ip_len);
			if (v.copies > 1)  /* the copy is not corrupted, as netem's clone */
				memcpy(copy, buf, len);
			if (v.corrupt)
				ql_ippkt_flip(ip, ip_len, v.corrupt_byte, v.corrupt_bit);
			if (due_now(d, &v, len, now)) {
				int err = write_out(d, buf, len, now, 1);
				if (err) {
					pthread_mutex_unlock(&d->mu);
					fail(l, err, "write to TUN device", d->out_name);
					break;
				}
			} else {
				queue_copy(d, buf, len, cls, &v, now, &wake);
				for (int i = 1; i < v.copies; i++)
					queue_copy(d, copy, len, cls, &v, now, &wake);
			}
		}
		if (wake)
			pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
	}
	free(buf);
	free(copy);
	return NULL;
}

static void note_lateness(dir *d, int64_t late_ns)
{
	if (late_ns < 0)
		late_ns = 0;
	int64_t us = late_ns / 1000;
	d->late_hist[us >= LATE_BUCKETS ? LATE_BUCKETS - 1 : us]++;
	d->late_n++;
	if (late_ns > d->late_max_ns)
		d->late_max_ns = late_ns;
}

/* Wait on the CPU until at (CLOCK_MONOTONIC ns), for the last
 * SPIN_MARGIN_NS at most; d->mu not held. */
static void spin_until(int64_t at)
{
	while (mono_ns() < at)
		;
}

static void *sender_main(void *arg)
{
	dir *d = arg;
	ql_tunlink *l = d->link;
	thread_setup();
	thread_priority(l, &l->senders_realtime);
	/* the packet the sender slept for: only its wake-up measures the
	 * timer (a packet already due when seen waited behind others, which
	 * its queue delay shows) */
	const ql_pkt *slept_for = NULL;
	pthread_mutex_lock(&d->mu);
	while (!atomic_load(&l->stop)) {
		ql_pkt *p = ql_pktq_peek(&d->q);
		if (!p) {
			pthread_cond_wait(&d->cv, &d->mu);
			continue;
		}
		int64_t now = mono_ns();
		int64_t at = p->at_head ? now : ql_impair_dequeue_at(d->model, p->len - d->hdr, p->tts_ns, now);
		if (now < at - SPIN_MARGIN_NS) {
			int64_t wake = at - SPIN_MARGIN_NS;
			struct timespec ts = { .tv_sec = wake / 1000000000, .tv_nsec = wake % 1000000000 };
			slept_for = p;
			/* woken early by a packet that became first, or by stop */
			pthread_cond_timedwait(&d->cv, &d->mu, &ts);
			continue;
		}
		if (now < at) {
			/* inside the margin: the rest on the CPU, the lock free for
			 * the reader; a packet that became first meanwhile (sooner
			 * than this one) is looked at again */
			pthread_mutex_unlock(&d->mu);
			spin_until(at);
			pthread_mutex_lock(&d->mu);
			if (ql_pktq_peek(&d->q) != p)
				continue;
			if (!slept_for)
				slept_for = p;
		}
		ql_pktq_pop(&d->q);
		int timed = p == slept_for;
		slept_for = NULL;
		if (!ql_pktq_len(&d->q))
			d->last_tts_ns = 0;
		d->sending = 1;   /* the reader's direct path waits its turn */
		pthread_mutex_unlock(&d->mu);

		/* lateness as the packet goes: the lock and the pop included */
		int64_t late = mono_ns() - at;
		int err = write_out(d, p->data, p->len, p->enq_ns, 0);
		d->sending = 0;
		if (timed)
			note_lateness(d, late);
		free(p);
		if (err) {
			pthread_mutex_unlock(&d->mu);
			fail(l, err, "write to TUN device", d->out_name);
			return NULL;
		}
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static int dir_init(ql_tunlink *l, int idx, const ql_netem_spec *spec, uint64_t seed,
		    uint64_t budget, ql_err *e)
{
	dir *d = &l->d[idx];
	d->link = l;
	d->idx = idx;
	d->in_fd = idx == QL_TUNLINK_FORWARD ? l->a_fd : l->b_fd;
	d->out_fd = idx == QL_TUNLINK_FORWARD ? l->b_fd : l->a_fd;
	d->in_name = idx == QL_TUNLINK_FORWARD ? l->a_ifname : l->b_ifname;
	d->out_name = idx == QL_TUNLINK_FORWARD ? l->b_ifname : l->a_ifname;
	d->budget_bytes = budget;
	uint64_t s = spec->has_seed ? spec->seed : seed + (uint64_t)idx * 0x9E3779B97F4A7C15ull;
	int rc = ql_impair_new(spec, s, &d->model, e);
	if (rc < 0 && e->usage) {
		/* name the direction in front of the spec field */
		char msg[QL_ERR_MSG_MAX];
		snprintf(msg, sizeof msg, "%s", e->msg);
		ql_err_usage(e, "%s: %s", idx == QL_TUNLINK_FORWARD ? "forward" : "reverse", msg);
	}
	return rc;
}

/* The point-to-point pair is IPv4 (ql_link_addr_peer); IPv6 addresses go
 * on the devices afterwards (link.addr_add), and IPv6 packets cross as
 * IPv4 ones do. */
static int check_addr(const char *field, const char *addr, ql_err *e)
{
	unsigned char buf[16];
	if (addr && inet_pton(AF_INET, addr, buf) == 1)
		return 0;
	if (addr && inet_pton(AF_INET6, addr, buf) == 1)
		return ql_err_usage(e, "%s: expected an IPv4 address (the point-to-point pair is IPv4: add IPv6 "
				    "addresses to the devices with qoslab.link.addr_add), got \"%s\"",
				    field, addr);
	return ql_err_usage(e, "%s: expected an IPv4 address without prefix, got \"%s\"",
			    field, addr ? addr : "(none)");
}

static int check_opts(const ql_tunlink_opts *o, ql_err *e)
{
	int rc;
	if ((rc = ql_netns_check_name("a_netns", o->a_netns, e)) < 0 ||
	    (rc = ql_netns_check_name("b_netns", o->b_netns, e)) < 0)
		return rc;
	if (!strcmp(o->a_netns, o->b_netns))
		return ql_err_usage(e, "b_netns: expected a namespace other than a_netns, got \"%s\" for both",
				    o->b_netns);
	if ((rc = ql_link_check_ifname("a_ifname", o->a_ifname, e)) < 0 ||
	    (rc = ql_link_check_ifname("b_ifname", o->b_ifname, e)) < 0)
		return rc;
	if ((rc = check_addr("a_addr", o->a_addr, e)) < 0 ||
	    (rc = check_addr("b_addr", o->b_addr, e)) < 0)
		return rc;
	if (!strcmp(o->a_addr, o->b_addr))
		return ql_err_usage(e, "b_addr: expected an address other than a_addr, got \"%s\"",
				    o->b_addr);
	if (o->mtu_bytes < 68 || o->mtu_bytes > 65535)
		return ql_err_usage(e, "mtu_bytes: expected an integer in [68, 65535], got %u",
				    o->mtu_bytes);
	if (o->memory_bytes < 1)
		return ql_err_usage(e, "memory_bytes: expected a positive integer, got 0");
	if (!o->forward || !o->reverse)
		return ql_err_usage(e, "%s: expected a spec", o->forward ? "reverse" : "forward");
	return 0;
}

int ql_tunlink_open(const ql_tunlink_opts *o, ql_tunlink **out, ql_err *e)
{
	*out = NULL;
	int rc = check_opts(o, e);
	if (rc < 0)
		return rc;
	ql_tunlink *l = calloc(1, sizeof *l);
	if (!l)
		return ql_err_set(e, ENOMEM, NULL, "out of memory for the link");
	l->a_fd = l->b_fd = -1;
	pthread_mutex_init(&l->fail_mu, NULL);
	l->realtime = o->realtime;
	snprintf(l->a_ifname, sizeof l->a_ifname, "%s", o->a_ifname);
	snprintf(l->b_ifname, sizeof l->b_ifname, "%s", o->b_ifname);
	for (int i = 0; i < 2; i++) {
		dir *d = &l->d[i];
		ql_pktq_init(&d->q);
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&d->cv, &ca);
		pthread_condattr_destroy(&ca);
		pthread_mutex_init(&d->mu, NULL);
	}
	l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->stop_fd < 0) {
		rc = ql_err_set(e, errno, NULL, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* the models first: a bad spec leaves no device behind even briefly */
	if ((rc = dir_init(l, QL_TUNLINK_FORWARD, o->forward, o->seed, o->memory_bytes, e)) < 0 ||
	    (rc = dir_init(l, QL_TUNLINK_REVERSE, o->reverse, o->seed, o->memory_bytes, e)) < 0)
		goto fail;
	char a_cidr[64], b_cidr[64];
	snprintf(a_cidr, sizeof a_cidr, "%s/32", o->a_addr);
	snprintf(b_cidr, sizeof b_cidr, "%s/32", o->b_addr);
	l->d[0].hdr = l->d[1].hdr = o->gso ? QL_TUN_VNET_HDR_BYTES : 0;
	if ((rc = ql_tun_open(o->a_netns, o->a_ifname, o->gso, &l->a_fd, e)) < 0 ||
	    (rc = ql_tun_open(o->b_netns, o->b_ifname, o->gso, &l->b_fd, e)) < 0)
		goto fail;
	l->d[0].in_fd = l->d[1].out_fd = l->a_fd;
	l->d[0].out_fd = l->d[1].in_fd = l->b_fd;
	if ((rc = ql_tun_configure(o->a_netns, o->a_ifname, o->mtu_bytes, a_cidr, b_cidr, e)) < 0 ||
	    (rc = ql_tun_configure(o->b_netns, o->b_ifname, o->mtu_bytes, b_cidr, a_cidr, e)) < 0)
		goto fail;
	for (int i = 0; i < 2; i++) {
		dir *d = &l->d[i];
		int err = pthread_create(&d->sender, NULL, sender_main, d);
		if (!err) {
			d->sender_started = 1;
			err = pthread_create(&d->reader, NULL, reader_main, d);
		}
		if (err) {
			rc = ql_err_set(e, err, NULL, "cannot start the link's threads: %s", strerror(err));
			goto fail;
		}
		d->reader_started = 1;
	}
	*out = l;
	return 0;
fail:
	ql_tunlink_close(l);  /* copes with what is half made */
	return rc;
}

int ql_tunlink_set_spec(ql_tunlink *l, int dir_idx, const ql_netem_spec *s, ql_err *e)
{
	if (dir_idx != QL_TUNLINK_FORWARD && dir_idx != QL_TUNLINK_REVERSE)
		return ql_err_usage(e, "direction: expected \"forward\" or \"reverse\"");
	dir *d = &l->d[dir_idx];
	pthread_mutex_lock(&d->mu);
	int rc = ql_impair_set_spec(d->model, s, e);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void ql_tunlink_stats_get(ql_tunlink *l, int dir_idx, ql_tunlink_stats *st)
{
	memset(st, 0, sizeof *st);
	dir *d = &l->d[dir_idx & 1];
	pthread_mutex_lock(&d->mu);
	const ql_impair_counters *c = ql_impair_counters_get(d->model);
	st->arrived_packets = c->arrived_packets;
	st->arrived_bytes = c->arrived_bytes;
	for (int i = 0; i < QL_IMPAIR_DROP_NREASONS; i++)
		st->drops[i] = c->drops[i];
	st->drops[QL_IMPAIR_DROP_MEMORY] += d->memory_drops;
	memcpy(st->proto, d->proto, sizeof st->proto);
	st->loss_bursts = d->loss_bursts;
	st->over_budget = d->memory_drops > 0;
	if (st->over_budget)
		st->over_budget_err = d->over_budget;
	st->duplicated = c->duplicated;
	st->reordered = c->reordered;
	st->corrupted = c->corrupted;
	st->ce_marked = c->ce_marked;
	st->forwarded_packets = d->forwarded_packets;
	st->forwarded_bytes = d->forwarded_bytes;
	st->rejected_packets = d->rejected_packets;
	st->backlog_packets = ql_pktq_len(&d->q);
	st->backlog_bytes = d->q.bytes - d->hdr * ql_pktq_len(&d->q);
	if (d->forwarded_packets)
		st->queue_delay_mean_ns = d->delay_sum_ns / (int64_t)d->forwarded_packets;
	st->queue_delay_max_ns = d->delay_max_ns;
	st->lateness_max_ns = d->late_max_ns;
	st->lateness_samples = d->late_n;
	if (d->late_n) {
		uint64_t want = d->late_n - d->late_n / 100, acc = 0;  /* 99th percentile */
		for (int i = 0; i < LATE_BUCKETS; i++) {
			acc += d->late_hist[i];
			if (acc >= want) {
				/* a bucket's upper edge; the last one is open */
				st->lateness_p99_ns = i == LATE_BUCKETS - 1 ? d->late_max_ns
									    : (int64_t)(i + 1) * 1000;
				break;
			}
		}
	}
	st->sender_realtime = atomic_load(&l->senders_realtime) >= 2 &&
			      atomic_load(&l->readers_realtime) >= 2;
	pthread_mutex_unlock(&d->mu);
}

int ql_tunlink_failed(ql_tunlink *l, ql_err *e)
{
	pthread_mutex_lock(&l->fail_mu);
	int failed = l->failed;
	if (failed && e)
		*e = l->failure;
	pthread_mutex_unlock(&l->fail_mu);
	return failed;
}

void ql_tunlink_close(ql_tunlink *l)
{
	if (!l)
		return;
	atomic_store(&l->stop, 1);
	wake_all(l);
	for (int i = 0; i < 2; i++) {
		dir *d = &l->d[i];
		if (d->reader_started)
			pthread_join(d->reader, NULL);
		if (d->sender_started)
			pthread_join(d->sender, NULL);
	}
	if (l->a_fd >= 0)
		close(l->a_fd);
	if (l->b_fd >= 0)
		close(l->b_fd);
	if (l->stop_fd >= 0)
		close(l->stop_fd);
	for (int i = 0; i < 2; i++) {
		dir *d = &l->d[i];
		ql_pktq_free(&d->q);
		if (d->model)
			ql_impair_free(d->model);
		pthread_mutex_destroy(&d->mu);
		pthread_cond_destroy(&d->cv);
	}
	pthread_mutex_destroy(&l->fail_mu);
	free(l);
}
