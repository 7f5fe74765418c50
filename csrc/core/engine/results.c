/*
 * results.c - a test's result: local totals, CPU, this side's results message,
 * both ends merged into one ql_result. Stands on udp_books.h, report.h,
 * sockopt.h and test.h.
 */
#include "results.h"

#include <arpa/inet.h>
#include <math.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "report.h"
#include "sockopt.h"
#include "test.h"
#include "udp_books.h"
#include "../timer.h"

/* Local per-stream totals over the non-omitted intervals, and a closed
 * receiver's path statistics in paths[i] (paths may be NULL). */
static void local_totals(ql_test *t, ql_entry *out, ql_udp_path *paths)
{
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		ql_entry *x = &out[i];
		memset(x, 0, sizeof *x);
		x->id = s->id;
		x->dir = s->dir;
		x->role = s->sender ? QL_ROLE_SENDER : QL_ROLE_RECEIVER;
		x->side = t->side;
		int nret = 0, nint = 0, njm = 0;
		double jit = 0, from_s = -1;
		int has_jit = 0;
		for (int k = 0; k < t->niv; k++) {
			ql_interval *iv = &t->iv[k];
			if (iv->omitted || i >= iv->nentries)
				continue;
			ql_entry *y = &iv->entries[i];
			if (from_s < 0)
				from_s = iv->start_s;
			nint++;
			x->valid |= y->valid & (QL_E_PACKETS | QL_E_WRITES | QL_E_UDPRX);
			x->bytes += y->bytes;
			x->seconds += iv->seconds;
			x->packets += y->packets;
			x->writes += y->writes;
			if (y->valid & QL_E_RETRANS) {
				x->retransmits += y->retransmits;
				nret++;
			}
			x->unique_packets += y->unique_packets;
			x->lost_packets += y->lost_packets;
			x->duplicate_packets += y->duplicate_packets;
			x->out_of_order_packets += y->out_of_order_packets;
			x->late_packets += y->late_packets;
			x->invalid_packets += y->invalid_packets;
			if (y->valid & QL_E_JITTER) {
				jit = y->jitter_ms;   /* the running estimate at the end */
				has_jit = 1;
			}
			if (y->valid & QL_E_JITMEAN) {
				x->jitter_pairs += y->jitter_pairs;
				x->jitter_abs_sum_ms += y->jitter_abs_sum_ms;
				njm++;
			}
		}
		if (njm > 0 && njm == nint)
			x->valid |= QL_E_JITMEAN;
		if (t->proto == QL_PROTO_UDP && !s->sender) {
			/* the loss runs are whole once the books closed */
			pthread_mutex_lock(&s->mu);
			if (s->rx.finished) {
				if (paths)
					paths[i] = s->rx.trk.path;
				x->valid |= QL_E_UDPPATH;
			}
			pthread_mutex_unlock(&s->mu);
		}
		/* The span over which the bytes were counted, on this side's
		 * clock from the end of the warm-up: a sender's ends when its
		 * last write returned (not when the acks came), a receiver's
		 * when it read its last byte (the tail included). The receiver
		 * reads the last byte after that write returned and, forward,
		 * started its clock first; in reverse it started one control
		 * message later, which the last byte's trip over the same
		 * path (behind the queued data) outlasts. So receiver seconds
		 * >= sender seconds. */
		int64_t last = s->sender ? s->last_tx_ns : atomic_load(&s->last_rx_ns);
		/* A timed test measures until its planned end (or its earlier
		 * stop) even when the last datagram of a slow flow went out
		 * before it: 9 datagrams of 100 kbit/s in 1 s are not 9 over
		 * the 0.94 s from the first to the last. */
		if (!t->limited) {
			int64_t planned = t->start_ns + t->omit_ns + (int64_t)(t->prm.time_s * 1e9);
			if (t->end_ns > 0 && t->end_ns < planned)
				planned = t->end_ns;
			if (planned > last)
				last = planned;
			/* and a TCP receiver's bytes after the last interval's
			 * end (a slow link's tail) are not counted */
			if (t->proto == QL_PROTO_TCP && t->end_ns > 0 && last > t->end_ns)
				last = t->end_ns;
		}
		double span = (double)(last - t->start_ns) / 1e9 - from_s;
		if (from_s >= 0 && last > t->start_ns && span > 0 && x->bytes > 0)
			x->seconds = span;
		if (nret && nret == nint)
			x->valid |= QL_E_RETRANS;
		if (has_jit) {
			x->jitter_ms = jit;
			x->valid |= QL_E_JITTER;
		}
		if (s->tsum_init && s->tsum.snd_wnd_samples) {
			x->max_snd_wnd_bytes = (uint32_t)s->tsum.max_snd_wnd_bytes;
			x->valid |= QL_E_MAXWND;
		}
		if (s->tsum_init && s->tsum.rtt_samples) {
			x->min_rtt_us = s->tsum.min_rtt_us;
			x->max_rtt_us = s->tsum.max_rtt_us;
			x->mean_rtt_us = (uint32_t)llround(ql_tcp_summary_mean_rtt_us(&s->tsum));
			x->max_snd_cwnd_bytes = s->tsum.max_snd_cwnd_bytes;
			x->valid |= QL_E_RTTSUM;
		}
		x->buf = s->sender ? s->sndbuf : s->rcvbuf;
		ql_entry_finish(x);
	}
}

/* CPU use of this end, after its workers were joined. Each thread's CPU
 * time covers its whole life (receivers start before the test's clock,
 * senders wait for their acknowledgements, receivers drain after it), so
 * it is divided by the wall time that covers those lives, not by the
 * test's duration: a 1-datagram test once read 460 % on 2 cores. A
 * thread's own share is its CPU over its own life. */
void cpu_local(ql_test *t, ql_cpu_result *c)
{
	int64_t u1, s1, now = ql_now_ns();
	thread_cpu(&u1, &s1);
	int64_t user = u1 - t->ctl_cpu_user0, sys = s1 - t->ctl_cpu_sys0;
	int64_t from = t->start_ns;
	double busiest = ql_cpu_pct(user + sys, now - t->start_ns);
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		if (!s->th_started && !s->done_ns)
			continue;
		user += s->cpu_user_ns;
		sys += s->cpu_sys_ns;
		if (s->run_ns > 0 && s->run_ns < from)
			from = s->run_ns;
		double own = ql_cpu_pct(s->cpu_user_ns + s->cpu_sys_ns,
					(s->done_ns > s->run_ns ? s->done_ns : now) - s->run_ns);
		if (own > busiest)
			busiest = own;
	}
	c->present = 1;
	c->user_pct = ql_cpu_pct(user, now - from);
	c->system_pct = ql_cpu_pct(sys, now - from);
	c->total_pct = c->user_pct + c->system_pct;
	c->busiest_thread_pct = busiest > 100 ? 100 : busiest;
	c->has_busiest = 1;
}

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 && n < (1 << 20) ? (int)n : 0;
}

/* The kernel's boot id ("" when unreadable): two ends with the same id run
 * on one host and share its CPUs (loopback, namespaces on one machine). */
static void host_boot_id(char *out, size_t len)
{
	out[0] = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = 0;
	else
		out[0] = 0;
	fclose(f);
}

/* Our results object for the peer. */
char *encode_local(ql_test *t, const ql_cpu_result *cpu)
{
	ql_peer_results r;
	memset(&r, 0, sizeof r);
	r.cpu_total_pct = cpu->total_pct;
	r.cpu_user_pct = cpu->user_pct;
	r.cpu_system_pct = cpu->system_pct;
	r.has_busiest = 1;
	r.cpus = online_cpus();
	host_boot_id(r.boot_id, sizeof r.boot_id);
	r.busiest_thread_pct = cpu->busiest_thread_pct;
	r.sender_has_retransmits = t->proto == QL_PROTO_TCP && local_has(t, 1);
	/* the congestion control the kernel runs (as iperf3 reports it),
	 * the one asked for when it could not be read */
	copy_str(r.congestion_used, sizeof r.congestion_used,
		 t->tcp_ca[0] ? t->tcp_ca : t->prm.congestion);
	ql_entry *tot = calloc((size_t)t->nstreams + 1, sizeof *tot);
	ql_peer_stream *ps = calloc((size_t)t->nstreams + 1, sizeof *ps);
	ql_udp_path *paths = calloc((size_t)t->nstreams + 1, sizeof *paths);
	char *out = NULL;
	if (!tot || !ps || !paths)
		goto done;
	local_totals(t, tot, paths);
	double dur = t->end_ns > t->start_ns + t->omit_ns
		     ? (double)(t->end_ns - t->start_ns - t->omit_ns) / 1e9 : 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_peer_stream *p = &ps[i];
		ql_entry *x = &tot[i];
		p->id = x->id;
		p->bytes = x->bytes;
		p->retransmits = (x->valid & QL_E_RETRANS) ? (int64_t)x->retransmits : -1;
		if (t->proto == QL_PROTO_UDP) {
			/* iperf3's convention: packets over the whole test,
			 * the warm-up's share in omitted_packets; errors are
			 * the measured losses only (an iperf3 3.12 sender
			 * shows them as they come). */
			uint64_t measured = x->role == QL_ROLE_SENDER ? x->packets
					    : x->unique_packets + x->lost_packets;
			if (x->role == QL_ROLE_SENDER) {
				p->packets = atomic_load(&t->st[i].packets);
			} else {
				p->packets = udp_booked_packets(t, i);
				p->errors = (int64_t)x->lost_packets;
				p->jitter_s = x->jitter_ms / 1000.0;
			}
			p->omitted_packets = p->packets > measured ? p->packets - measured : 0;
		}
		p->start_time_s = 0;
		p->end_time_s = x->seconds > 0 ? x->seconds : dur;
	}
	r.streams = ps;
	r.nstreams = t->nstreams;
	r.entries = tot;
	r.paths = paths;
	r.nentries = t->nstreams;
	r.duration_s = dur;
	r.intervals = t->iv;
	r.nintervals = t->niv;
	r.warnings = t->warn;
	r.nwarnings = t->nwarn;
	out = ql_results_encode(&r, t->peer == QL_PEER_QOSLAB);
done:
	free(tot);
	free(ps);
	free(paths);
	return out;
}

/* The peer's totals for one stream as an entry (qoslab extras or iperf3's
 * basic keys), and its path statistics in *path when it has them. */
static int remote_entry(ql_test *t, const ql_stream *s, ql_entry *x, ql_udp_path *path)
{
	const ql_peer_results *pr = &t->peer_res;
	int role = s->sender ? QL_ROLE_RECEIVER : QL_ROLE_SENDER;
	const ql_entry *pe = peer_entry(pr, s->id, role);
	if (pe) {
		*x = *pe;
		if (pr->paths && (pe->valid & QL_E_UDPPATH))
			*path = pr->paths[pe - pr->entries];
		else
			x->valid &= ~QL_E_UDPPATH;
		x->dir = s->dir;
		x->side = !t->side;
		if (t->proto == QL_PROTO_UDP && role == QL_ROLE_RECEIVER &&
		    t->side == QL_SIDE_SERVER && (x->valid & QL_E_UDPRX)) {
			/* A client sends its results before it learns our
			 * sent count, so its books were open: what it had
			 * not received by then it rules lost at its close,
			 * and so do we (lost + unique == sent at both ends). */
			uint64_t sent = udp_measured_sent(t, (int)(s - t->st));
			if (x->unique_packets <= sent && x->unique_packets + x->lost_packets < sent) {
				x->lost_packets = sent - x->unique_packets;
				ql_entry_finish(x);
			}
		}
		return 1;
	}
	const ql_peer_stream *ps = peer_stream(pr, s->id);
	if (!ps)
		return 0;
	memset(x, 0, sizeof *x);
	x->id = s->id;
	x->dir = s->dir;
	x->role = role;
	x->side = !t->side;
	x->bytes = ps->bytes;
	x->seconds = ps->end_time_s - ps->start_time_s;
	if (role == QL_ROLE_SENDER && ps->retransmits >= 0 && t->proto == QL_PROTO_TCP &&
	    pr->sender_has_retransmits == 1) {
		x->retransmits = (uint64_t)ps->retransmits;
		x->valid |= QL_E_RETRANS;
	}
	if (t->proto == QL_PROTO_UDP) {
		/* packets counts the whole test (iperf3's convention): the
		 * measured share is what the peer's sender left after its
		 * warm-up */
		int64_t warm = role == QL_ROLE_SENDER ? peer_sender_warmup(t, pr, ps, s->id) : 0;
		x->packets = warm > 0 ? ps->packets - (uint64_t)warm : ps->packets;
		x->valid |= QL_E_PACKETS;
		if (role == QL_ROLE_RECEIVER) {
			/* An iperf3 receiver: our measured sent and its losses.
			 * With a warm-up iperf3 3.12 counts the warm-up's
			 * losses in errors (no omitted_errors), but its bytes
			 * are those received after its warm-up: then the
			 * datagrams it got are bytes / length. */
			uint64_t sent = udp_measured_sent(t, (int)(s - t->st));
			uint64_t len = (uint64_t)t->prm.len_bytes, lost;
			if (t->omit_ns > 0 && !ps->has_omitted && len > 0) {
				uint64_t got = ps->bytes / len;
				lost = sent > got ? sent - got : 0;
			} else {
				int64_t le = ps->errors - (ps->has_omitted ? ps->omitted_errors : 0);
				lost = le > 0 ? (uint64_t)le : 0;
			}
			if (lost > sent)
				lost = sent;
			x->lost_packets = lost;
			x->unique_packets = sent - lost;
			x->packets = x->unique_packets;   /* it reports no duplicates */
			x->valid |= QL_E_UDPRX | QL_E_JITTER;
			x->jitter_ms = ps->jitter_s * 1000.0;
			/* iperf3 counts every received byte; goodput from the
			 * unique count is the honest figure. */
			x->bytes = x->unique_packets * (uint64_t)t->prm.len_bytes;
		}
	}
	ql_entry_finish(x);
	return 1;
}

/*
 * The result's interval list is the local timeline; each of the peer's
 * intervals is folded into the local interval of the same grid slot (the
 * last one for a peer that measured longer, e.g. a draining receiver or a
 * sender waiting for its acknowledgements). Matching slots, not end times:
 * the peer's clock started earlier or later by a control message's trip,
 * and an end near a tick would land one interval off, leaving one local
 * interval without the peer's entries and another with two.
 * Peer entries keep their own seconds and bits_per_second, and every peer
 * entry lands exactly once, so each side's Σ intervals == its totals.
 */
static void merge_remote_intervals(ql_test *t, ql_result *r)
{
	const ql_peer_results *pr = &t->peer_res;
	int n = t->niv ? t->niv : pr->nintervals;
	const ql_interval *base = t->niv ? t->iv : pr->intervals;
	int local = t->niv > 0;
	r->intervals = calloc((size_t)n + 1, sizeof *r->intervals);
	if (!r->intervals)
		return;
	for (int k = 0; k < n; k++) {
		ql_interval *iv = &r->intervals[k];
		*iv = base[k];
		int cap = base[k].nentries + (local ? t->nstreams : 0) + 1;
		iv->entries = calloc((size_t)cap, sizeof *iv->entries);
		iv->nentries = 0;
		if (!iv->entries)
			continue;
		for (int i = 0; i < base[k].nentries; i++) {
			iv->entries[iv->nentries] = base[k].entries[i];
			if (!local)
				iv->entries[iv->nentries].side = !t->side;
			iv->nentries++;
		}
	}
	r->nintervals = n;
	int k = 0;
	for (int j = 0; local && j < pr->nintervals; j++) {
		const ql_interval *b = &pr->intervals[j];
		int64_t g = grid_slot(t, b->start_s), s0, s1;
		/* the local interval whose slots [s0, s1) hold g (as live) */
		for (; k < n - 1; k++) {
			iv_slots(t, &r->intervals[k], &s0, &s1);
			if (s1 > g)
				break;
		}
		/* Omitted peer intervals only go where omitted local ones are. */
		if (b->omitted)
			while (k > 0 && !r->intervals[k].omitted)
				k--;
		else
			while (k < n - 1 && r->intervals[k].omitted)
				k++;
		ql_interval *iv = &r->intervals[k];
		if (iv->entries)
			ql_interval_fold_peer(iv, base[k].nentries + t->nstreams, b, !t->side);
	}
	for (int q = 0; q < n; q++)
		ql_interval_sums(&r->intervals[q]);
}

/* The loss a server completed in a client's open UDP books (remote_entry)
 * goes into the client's last measured interval of that stream too, so
 * the intervals still add up to the totals. */
static void complete_peer_intervals(ql_test *t, ql_result *r)
{
	if (t->proto != QL_PROTO_UDP || t->side != QL_SIDE_SERVER || !r->intervals)
		return;
	for (int i = 0; i < r->nstreams; i++) {
		const ql_entry *tot = &r->streams[i].receiver;
		if (tot->side == t->side || !(tot->valid & QL_E_UDPRX))
			continue;
		uint64_t sum = 0;
		ql_entry *last = NULL;
		ql_interval *last_iv = NULL;
		for (int k = 0; k < r->nintervals; k++) {
			ql_interval *iv = &r->intervals[k];
			if (iv->omitted || !iv->entries)
				continue;
			for (int j = 0; j < iv->nentries; j++) {
				ql_entry *x = &iv->entries[j];
				if (x->id == tot->id && x->role == QL_ROLE_RECEIVER && x->side != t->side) {
					sum += x->lost_packets;
					last = x;
					last_iv = iv;
				}
			}
		}
		if (last && tot->lost_packets > sum) {
			last->lost_packets += tot->lost_packets - sum;
			ql_entry_finish(last);
			ql_interval_sums(last_iv);
		}
	}
}

void build_result(ql_test *t, const ql_cpu_result *cpu_local_r)
{
	ql_result *r = &t->res;
	ql_peer_results *pr = &t->peer_res;
	r->proto = t->proto;
	r->reverse = t->prm.reverse;
	r->bidir = t->prm.bidir;
	r->parallel = t->prm.parallel;
	copy_str(r->host, sizeof r->host, t->host);
	r->port = t->port;
	if (t->srv) {
		r->server_test = t->srv_no;
		r->peer_port = t->peer_addr.ss_family == AF_INET6
				       ? ntohs(((const struct sockaddr_in6 *)&t->peer_addr)->sin6_port)
				       : ntohs(((const struct sockaddr_in *)&t->peer_addr)->sin_port);
	}
	r->local_role = t->side;
	r->start_time_unix_s = t->start_unix;
	r->omit_s = t->prm.omit_s;
	r->duration_s = t->end_ns > t->start_ns + t->omit_ns
			? (double)(t->end_ns - t->start_ns - t->omit_ns) / 1e9 : 0;
	if (t->side == QL_SIDE_CLIENT)
		t->peer = pr->qoslab ? QL_PEER_QOSLAB : QL_PEER_IPERF3;
	r->peer = t->peer;
	copy_str(r->title, sizeof r->title, t->prm.title);
	memcpy(r->cookie, t->cookie, QL_COOKIE_SIZE);
	r->cookie[QL_COOKIE_SIZE - 1] = 0;
	r->ctrl_mss_bytes = t->ctrl_mss_bytes;
	if (t->proto == QL_PROTO_TCP) {
		copy_str(r->tcp_ca[t->side], sizeof r->tcp_ca[0], t->tcp_ca);
		copy_str(r->tcp_ca[!t->side], sizeof r->tcp_ca[0], pr->congestion_used);
	}
	ql_entry *loc = calloc((size_t)t->nstreams + 1, sizeof *loc);
	ql_udp_path *lpath = calloc((size_t)t->nstreams + 1, sizeof *lpath);
	r->streams = calloc((size_t)t->nstreams + 1, sizeof *r->streams);
	if (!loc || !lpath || !r->streams) {
		free(loc);
		free(lpath);
		return;
	}
	local_totals(t, loc, lpath);
	r->nstreams = t->nstreams;
	int nsum[2][2] = { { 0 } }, nret[2][2] = { { 0 } }, njit[2][2] = { { 0 } };
	int unmarked = 0;
	for (int i = 0; i < t->nstreams; i++) {
		ql_stream *s = &t->st[i];
		ql_stream_result *sr = &r->streams[i];
		sr->id = s->id;
		sr->dir = s->dir;
		sr->sock = s->sock;
		sr->zc = s->zc;
		/* a stock iperf3 server reads no qoslab_tos_per_stream */
		sr->tos = stream_tos(&t->prm, s);
		if (t->side == QL_SIDE_CLIENT && !s->sender && t->prm.nstream_tos &&
		    t->peer != QL_PEER_QOSLAB) {
			sr->tos = -1;
			unmarked++;
		}
		ql_entry rem;
		ql_udp_path rpath;
		int has_rem = remote_entry(t, s, &rem, &rpath);
		if (s->sender) {
			sr->sender = loc[i];
			sr->has_sender = 1;
			if (has_rem) {
				sr->receiver = rem;
				sr->has_receiver = 1;
				if (rem.valid & QL_E_UDPPATH)
					sr->path = rpath;
			}
		} else {
			sr->receiver = loc[i];
			sr->has_receiver = 1;
			if (loc[i].valid & QL_E_UDPPATH)
				sr->path = lpath[i];
			if (has_rem) {
				sr->sender = rem;
				sr->has_sender = 1;
			}
		}
		for (int k = 0; k < 2; k++) {
			if (!(k == 0 ? sr->has_sender : sr->has_receiver))
				continue;
			ql_entry *x = k == 0 ? &sr->sender : &sr->receiver;
			int d = s->dir;
			ql_entry_add(&r->tot[d][k], &r->tot_present[d][k], x, d, k,
				     &nsum[d][k], &nret[d][k], &njit[d][k]);
			if (k == QL_ROLE_RECEIVER && (x->valid & QL_E_UDPPATH))
				ql_udp_path_add(&r->tot_path[d], &sr->path);
		}
	}
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < 2; k++) {
			ql_entry *tt = &r->tot[d][k];
			if (!r->tot_present[d][k])
				continue;
			ql_sum_close(tt, nsum[d][k], nret[d][k], njit[d][k]);
		}
	free(loc);
	free(lpath);
	if (unmarked)
		add_warning(t, "tos_per_stream: the peer is not a qoslab server, so the %d "
			    "stream%s it sent carried no TOS from the list (a stock iperf3 sets "
			    "only the single opts.tos)", unmarked, unmarked == 1 ? "" : "s");
	if (t->side == QL_SIDE_CLIENT && t->prm.skip_rx_copy && t->peer != QL_PEER_QOSLAB &&
	    !t->prm.reverse)
		add_warning(t, "skip_rx_copy: the peer is not a qoslab server, so its "
			    "receivers copied what they read (MSG_TRUNC applies to this end's only)");
	if (t->side == QL_SIDE_CLIENT && t->prm.nserver_cpu > 1 && t->peer != QL_PEER_QOSLAB)
		add_warning(t, "server_cpu_affinity: the peer is not a qoslab server, which takes "
			    "one CPU only (iperf3's server_affinity): its streams were not pinned");
	merge_remote_intervals(t, r);
	complete_peer_intervals(t, r);
	ql_cpu_result *mine = t->side == QL_SIDE_CLIENT ? &r->cpu_client : &r->cpu_server;
	ql_cpu_result *theirs = t->side == QL_SIDE_CLIENT ? &r->cpu_server : &r->cpu_client;
	*mine = *cpu_local_r;
	if (pr->nstreams || pr->qoslab) {
		theirs->present = 1;
		theirs->total_pct = pr->cpu_total_pct;
		theirs->user_pct = pr->cpu_user_pct;
		theirs->system_pct = pr->cpu_system_pct;
		theirs->has_busiest = pr->has_busiest;
		theirs->busiest_thread_pct = pr->busiest_thread_pct;
	}
	r->cpu_limited = (mine->has_busiest && mine->busiest_thread_pct >= QL_CPU_LIMITED_PCT) ||
			 (theirs->has_busiest && theirs->busiest_thread_pct >= QL_CPU_LIMITED_PCT);
	/* Many threads can fill every core while none is busy alone: the
	 * host as a whole (both ends, when they share it) counts too. */
	char boot[40];
	host_boot_id(boot, sizeof boot);
	int ncpu = online_cpus();
	int shared = boot[0] && strcmp(boot, pr->boot_id) == 0;
	double host_pct = mine->total_pct + (shared ? theirs->total_pct : 0);
	int host_busy = ncpu > 0 && host_pct >= QL_CPU_LIMITED_PCT * ncpu;
	int peer_busy = !shared && pr->cpus > 0 &&
			theirs->total_pct >= QL_CPU_LIMITED_PCT * pr->cpus;
	if (host_busy || peer_busy) {
		r->cpu_limited = 1;
		add_warning(t, "CPU-limited: %s used %.0f %% of %d CPUs (the result may measure "
			    "the host, not the network)",
			    host_busy ? (shared ? "both ends on this host" : ql_side_label(t->side))
				      : ql_side_label(!t->side),
			    host_busy ? host_pct : theirs->total_pct, host_busy ? ncpu : pr->cpus);
	} else if (r->cpu_limited)
		add_warning(t, "CPU-limited: the busiest thread on %s used %.0f %% of a core "
			    "(the result may measure the host, not the network)",
			    mine->busiest_thread_pct >= theirs->busiest_thread_pct
			    ? ql_side_label(t->side) : ql_side_label(!t->side),
			    mine->busiest_thread_pct > theirs->busiest_thread_pct
			    ? mine->busiest_thread_pct : theirs->busiest_thread_pct);
	for (int i = 0; i < pr->nwarnings; i++)   /* they name their side */
		add_warning(t, "%s", pr->warnings[i]);
	r->warnings = t->warn;
	r->nwarnings = t->nwarn;
	t->warn = NULL;
	t->nwarn = 0;
}
