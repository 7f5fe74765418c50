/* netem.c - see netem.h. */
#include "netem.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <linux/ethtool.h>
#include <linux/gen_stats.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <math.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/socket.h>

#include "nl.h"

/* Newer than Debian 12's uapi headers. */
#define QL_TCA_NETEM_PRNG_SEED 14
#define QL_TCA_NETEM_MAX 14
#ifndef TCA_STATS_PKT64
#define TCA_STATS_PKT64 8
#endif

uint32_t ql_netem_pct_to_frac32(double pct)
{
	if (!(pct > 0))
		return 0;
	if (pct >= 100)
		return QL_FRAC32_ONE;
	return (uint32_t)rint(pct / 100.0 * (double)QL_FRAC32_ONE);
}

double ql_netem_frac32_to_pct(uint32_t frac)
{
	return 100.0 * (double)frac / (double)QL_FRAC32_ONE;
}

double ql_netem_frac32_to_short_pct(uint32_t frac)
{
	char buf[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, ql_netem_frac32_to_pct(frac));
		double v = strtod(buf, NULL);
		if (ql_netem_pct_to_frac32(v) == frac)
			return v;
	}
	return ql_netem_frac32_to_pct(frac);
}

uint32_t ql_netem_ns_to_ticks(int64_t ns)
{
	if (ns <= 0)
		return 0;
	uint64_t t = (uint64_t)ns >> 6;  /* PSCHED_SHIFT: a tick is 64 ns */
	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

void ql_netem_spec_init(ql_netem_spec *s)
{
	memset(s, 0, sizeof *s);
	s->limit_packets = 1000;
}

int ql_netem_validate(const ql_netem_spec *s, ql_err *e)
{
	if (s->delay_ns < 0)
		return ql_err_usage(e, "spec.delay_ms: expected >= 0");
	if (s->jitter_ns < 0 || s->jitter_ns > INT32_MAX)
		return ql_err_usage(e, "spec.jitter_ms: expected 0..2147.483647 ms (the kernel caps jitter at INT_MAX ns)");
	if (s->delay_corr_frac32 && !s->jitter_ns)
		return ql_err_usage(e, "spec.delay_corr_pct: a delay correlation needs spec.jitter_ms > 0");
	if (s->dist && !s->jitter_ns)
		return ql_err_usage(e, "spec.distribution: a delay distribution needs spec.jitter_ms > 0");
	if (s->dist && (s->dist_len == 0 || s->dist_len > QL_NETEM_DIST_MAX))
		return ql_err_usage(e, "spec.distribution: expected 1..%d table entries, got %zu",
				    QL_NETEM_DIST_MAX, s->dist_len);
	if (s->loss_model != QL_NETEM_LOSS_RANDOM) {
		if (s->loss_model != QL_NETEM_LOSS_STATE && s->loss_model != QL_NETEM_LOSS_GEMODEL)
			return ql_err_usage(e, "spec.loss_state: unknown loss model %d", s->loss_model);
		const char *m = s->loss_model == QL_NETEM_LOSS_STATE ? "loss_state" : "loss_gemodel";
		if (s->loss_frac32)
			return ql_err_usage(e, "spec.loss_pct: cannot be combined with spec.%s (one loss model at a time)", m);
		if (s->loss_corr_frac32)
			return ql_err_usage(e, "spec.loss_corr_pct: only applies to random loss, not spec.%s", m);
	} else if (s->loss_corr_frac32 && !s->loss_frac32) {
		return ql_err_usage(e, "spec.loss_corr_pct: a loss correlation needs spec.loss_pct > 0");
	}
	if (s->duplicate_corr_frac32 && !s->duplicate_frac32)
		return ql_err_usage(e, "spec.duplicate_corr_pct: needs spec.duplicate_pct > 0");
	if (s->corrupt_corr_frac32 && !s->corrupt_frac32)
		return ql_err_usage(e, "spec.corrupt_corr_pct: needs spec.corrupt_pct > 0");
	if (s->reorder_frac32) {
		if (!s->delay_ns)
			return ql_err_usage(e, "spec.reorder_pct: reordering needs spec.delay_ms > 0 (packets are reordered by sending them without the delay)");
		if (!s->reorder_gap_packets)
			return ql_err_usage(e, "spec.reorder_gap_packets: expected >= 1 with reordering (the kernel never reorders with gap 0)");
	} else {
		if (s->reorder_corr_frac32)
			return ql_err_usage(e, "spec.reorder_corr_pct: needs spec.reorder_pct > 0");
		if (s->reorder_gap_packets)
			return ql_err_usage(e, "spec.reorder_gap_packets: needs spec.reorder_pct > 0");
	}
	if (s->keep_order && s->reorder_frac32)
		return ql_err_usage(e, "spec.keep_order: cannot be combined with spec.reorder_pct (reordering sends packets ahead of the queue on purpose)");
	if (s->ecn && s->loss_model == QL_NETEM_LOSS_RANDOM && !s->loss_frac32)
		return ql_err_usage(e, "spec.ecn: ECN marking needs a loss (spec.loss_pct, spec.loss_state or spec.loss_gemodel)");
	if (!s->rate_bytes_per_s && (s->packet_overhead_bytes || s->cell_size_bytes || s->cell_overhead_bytes))
		return ql_err_usage(e, "spec.rate_packet_overhead_bytes/rate_cell_bytes/rate_cell_overhead_bytes: need spec.rate_bps > 0");
	if (s->cell_overhead_bytes && !s->cell_size_bytes)
		return ql_err_usage(e, "spec.rate_cell_overhead_bytes: needs spec.rate_cell_bytes > 0");
	if (s->slot_min_delay_ns < 0 || s->slot_max_delay_ns < 0 ||
	    s->slot_dist_delay_ns < 0 || s->slot_dist_jitter_ns < 0)
		return ql_err_usage(e, "spec.slot: delays must be >= 0");
	if (s->slot_min_delay_ns > s->slot_max_delay_ns)
		return ql_err_usage(e, "spec.slot.min_delay_ms: greater than spec.slot.max_delay_ms");
	if (s->slot_dist_jitter_ns > INT32_MAX)
		return ql_err_usage(e, "spec.slot.jitter_ms: expected <= 2147.483647 ms");
	if (s->slot_max_packets < 0 || s->slot_max_bytes < 0)
		return ql_err_usage(e, "spec.slot.packets/bytes: expected >= 1");
	int slot_mm = s->slot_min_delay_ns || s->slot_max_delay_ns;
	int slot_dd = s->slot_dist_delay_ns || s->slot_dist_jitter_ns;
	if (slot_mm && (slot_dd || s->slot_dist))
		return ql_err_usage(e, "spec.slot: use either min_delay_ms/max_delay_ms or distribution/delay_ms/jitter_ms");
	if (s->slot_dist && !slot_dd)
		return ql_err_usage(e, "spec.slot.distribution: needs spec.slot.delay_ms or spec.slot.jitter_ms");
	if (slot_dd && !s->slot_dist)
		return ql_err_usage(e, "spec.slot.delay_ms: needs spec.slot.distribution");
	if (s->slot_dist && (s->slot_dist_len == 0 || s->slot_dist_len > QL_NETEM_DIST_MAX))
		return ql_err_usage(e, "spec.slot.distribution: expected 1..%d table entries", QL_NETEM_DIST_MAX);
	if (!slot_mm && !slot_dd && (s->slot_max_packets || s->slot_max_bytes))
		return ql_err_usage(e, "spec.slot.packets/bytes: need slot delays");
	if (s->limit_packets == 0)
		return ql_err_usage(e, "spec.limit_packets: expected >= 1");
	return 0;
}

/* hex+ ":" hex* with the minor part required (class) or forbidden (handle). */
static int strict_handle(const char *s, int want_minor)
{
	size_t maj = strspn(s, "0123456789abcdefABCDEF");
	if (maj == 0 || s[maj] != ':')
		return 0;
	size_t min = strspn(s + maj + 1, "0123456789abcdefABCDEF");
	if (s[maj + 1 + min] != '\0')
		return 0;
	return want_minor ? min > 0 : min == 0;
}

int ql_netem_where_check(const ql_netem_where *w, int with_handle,
			 uint32_t *parent, uint32_t *handle, ql_err *e)
{
	const char *p = w->parent ? w->parent : "root";
	*parent = TC_H_ROOT;
	*handle = 0;
	if (strcmp(p, "root") != 0 &&
	    (!strict_handle(p, 1) || ql_tc_handle_parse(p, parent) < 0 || !TC_H_MIN(*parent)))
		return ql_err_usage(e, "opts.parent: expected \"root\" or \"MAJ:MIN\" (hex, as tc), got string \"%s\"", p);
	if (w->handle) {
		if (!strict_handle(w->handle, 0) || ql_tc_handle_parse(w->handle, handle) < 0 ||
		    *handle == 0)
			return ql_err_usage(e, "opts.handle: expected \"MAJ:\" (hex, as tc), got string \"%s\"", w->handle);
		if (!with_handle)
			return ql_err_usage(e, "opts.handle: expected nil (only apply takes a handle), got string \"%s\"", w->handle);
	}
	if (w->ingress && *parent != TC_H_ROOT)
		return ql_err_usage(e, "opts.parent: expected \"root\" with direction = \"ingress\" (netem sits on the ifb root), got string \"%s\"", p);
	if (w->ingress_src && !w->ingress)
		return ql_err_usage(e, "opts.ingress_src: expected nil unless direction = \"ingress\", got string \"%s\"", w->ingress_src);
	return 0;
}

void ql_netem_uniform_table(int16_t *out, size_t n)
{
	/* Midpoints of n equal cells over [-SCALE, SCALE]. */
	for (size_t i = 0; i < n; i++) {
		double v = -QL_NETEM_DIST_SCALE + (2.0 * (double)i + 1.0) * QL_NETEM_DIST_SCALE / (double)n;
		out[i] = (int16_t)lrint(v);
	}
}

#define UNIFORM_LEN 4096

int ql_netem_build(struct nl_msg **out, int ifindex, uint32_t parent,
		   uint32_t handle, const ql_netem_spec *s, int uniform_fill,
		   ql_err *e)
{
	*out = NULL;
	int rc = ql_netem_validate(s, e);
	if (rc < 0)
		return rc;
	if (s->keep_order && !s->rate_bytes_per_s)
		return ql_err_usage(e, "spec.keep_order: needs a rate on the wire (qoslab.netem.apply sets spec.rate_bps to the link speed; the kernel has no such field)");
	int16_t uniform[UNIFORM_LEN];
	const int16_t *dist = s->dist;
	size_t dist_len = s->dist_len;
	if (!dist && uniform_fill && s->jitter_ns) {
		ql_netem_uniform_table(uniform, UNIFORM_LEN);
		dist = uniform;
		dist_len = UNIFORM_LEN;
	}
	size_t tables = (dist ? dist_len * 2 : 0) + (s->slot_dist ? s->slot_dist_len * 2 : 0);
	/* Everything sits inside TCA_OPTIONS, whose length is a u16. */
	if (tables > 65535 - 1024)
		return ql_err_usage(e, "spec.distribution + spec.slot.distribution: at most %d entries together (netlink attribute size)",
				    (65535 - 1024) / 2);
	size_t need = 4096 + tables;
	struct nl_msg *msg = nlmsg_alloc_size(need);
	if (!msg)
		return ql_err_set(e, ENOMEM, NULL, "netem: cannot allocate a netlink message");
	if (!nlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, RTM_NEWQDISC, 0, NLM_F_CREATE | NLM_F_REPLACE))
		goto nomem;
	struct tcmsg tcm = {
		.tcm_family = AF_UNSPEC,
		.tcm_ifindex = ifindex,
		.tcm_handle = handle,
		.tcm_parent = parent,
	};
	if (nlmsg_append(msg, &tcm, sizeof tcm, NLMSG_ALIGNTO) < 0)
		goto nomem;
	if (nla_put_string(msg, TCA_KIND, "netem") < 0)
		goto nomem;

	struct nlattr *opts = nla_nest_start(msg, TCA_OPTIONS);
	if (!opts)
		goto nomem;
	/* TCA_OPTIONS is not a real nest for netem: its payload starts with
	 * the qopt struct, so the nested flag must not be set. */
	opts->nla_type = TCA_OPTIONS;

	struct tc_netem_qopt qopt = {
		.latency = ql_netem_ns_to_ticks(s->delay_ns),
		.limit = s->limit_packets,
		.loss = s->loss_model == QL_NETEM_LOSS_RANDOM ? s->loss_frac32 : 0,
		.gap = s->reorder_gap_packets,
		.duplicate = s->duplicate_frac32,
		.jitter = ql_netem_ns_to_ticks(s->jitter_ns),
	};
	if (nlmsg_append(msg, &qopt, sizeof qopt, NLMSG_ALIGNTO) < 0)
		goto nomem;

	struct tc_netem_corr cor = {
		.delay_corr = s->delay_corr_frac32,
		.loss_corr = s->loss_model == QL_NETEM_LOSS_RANDOM ? s->loss_corr_frac32 : 0,
		.dup_corr = s->duplicate_corr_frac32,
	};
	struct tc_netem_reorder reorder = {
		.probability = s->reorder_frac32, .correlation = s->reorder_corr_frac32,
	};
	struct tc_netem_corrupt corrupt = {
		.probability = s->corrupt_frac32, .correlation = s->corrupt_corr_frac32,
	};
	struct tc_netem_rate rate = {
		.rate = s->rate_bytes_per_s >= (1ULL << 32) ? UINT32_MAX : (uint32_t)s->rate_bytes_per_s,
		.packet_overhead = s->packet_overhead_bytes,
		.cell_size = s->cell_size_bytes,
		.cell_overhead = s->cell_overhead_bytes,
	};
	struct tc_netem_slot slot = {
		.min_delay = s->slot_min_delay_ns,
		.max_delay = s->slot_max_delay_ns,
		.max_packets = s->slot_max_packets,
		.max_bytes = s->slot_max_bytes,
		.dist_delay = s->slot_dist_delay_ns,
		.dist_jitter = s->slot_dist_jitter_ns,
	};
	uint32_t ecn = s->ecn ? 1 : 0;
	if (nla_put(msg, TCA_NETEM_CORR, sizeof cor, &cor) < 0 ||
	    nla_put(msg, TCA_NETEM_REORDER, sizeof reorder, &reorder) < 0 ||
	    nla_put(msg, TCA_NETEM_CORRUPT, sizeof corrupt, &corrupt) < 0 ||
	    nla_put(msg, TCA_NETEM_RATE, sizeof rate, &rate) < 0 ||
	    nla_put_u32(msg, TCA_NETEM_ECN, ecn) < 0 ||
	    nla_put_s64(msg, TCA_NETEM_LATENCY64, s->delay_ns) < 0 ||
	    nla_put_s64(msg, TCA_NETEM_JITTER64, s->jitter_ns) < 0 ||
	    nla_put(msg, TCA_NETEM_SLOT, sizeof slot, &slot) < 0)
		goto nomem;
	if (s->rate_bytes_per_s >= (1ULL << 32) &&
	    nla_put_u64(msg, TCA_NETEM_RATE64, s->rate_bytes_per_s) < 0)
		goto nomem;
	if (s->loss_model != QL_NETEM_LOSS_RANDOM) {
		struct nlattr *loss = nla_nest_start(msg, TCA_NETEM_LOSS);
		if (!loss)
			goto nomem;
		if (s->loss_model == QL_NETEM_LOSS_STATE) {
			struct tc_netem_gimodel gi = {
				.p13 = s->state_p13_frac32, .p31 = s->state_p31_frac32,
				.p32 = s->state_p32_frac32, .p14 = s->state_p14_frac32,
				.p23 = s->state_p23_frac32,
			};
			if (nla_put(msg, NETEM_LOSS_GI, sizeof gi, &gi) < 0)
				goto nomem;
		} else {
			struct tc_netem_gemodel ge = {
				.p = s->ge_p_frac32, .r = s->ge_r_frac32,
				.h = s->ge_h_frac32, .k1 = s->ge_k1_frac32,
			};
			if (nla_put(msg, NETEM_LOSS_GE, sizeof ge, &ge) < 0)
				goto nomem;
		}
		nla_nest_end(msg, loss);
	}
	if (dist && nla_put(msg, TCA_NETEM_DELAY_DIST, (int)(dist_len * sizeof *dist), dist) < 0)
		goto nomem;
	if (s->slot_dist &&
	    nla_put(msg, TCA_NETEM_SLOT_DIST, (int)(s->slot_dist_len * sizeof *s->slot_dist), s->slot_dist) < 0)
		goto nomem;
	if (s->has_seed && nla_put_u64(msg, QL_TCA_NETEM_PRNG_SEED, s->seed) < 0)
		goto nomem;
	if (nla_nest_end(msg, opts) < 0)
		goto nomem;
	*out = msg;
	return 0;
nomem:
	nlmsg_free(msg);
	return ql_err_set(e, ENOMEM, NULL, "netem: netlink message too small for the spec");
}

/* Copy an attribute's payload when it is at least `size` bytes. */
static int attr_copy(const struct nlattr *a, void *dst, size_t size)
{
	if (!a || nla_len(a) < (int)size)
		return 0;
	memcpy(dst, nla_data(a), size);
	return 1;
}

int ql_netem_decode_options(const void *data, size_t len, ql_netem_spec *s,
			    ql_err *e)
{
	ql_netem_spec_init(s);
	struct tc_netem_qopt qopt;
	if (len < sizeof qopt)
		return ql_err_set(e, EPROTO, "EPROTO", "netem: TCA_OPTIONS shorter than tc_netem_qopt (%zu bytes)", len);
	memcpy(&qopt, data, sizeof qopt);
	s->limit_packets = qopt.limit;
	s->loss_frac32 = qopt.loss;
	s->reorder_gap_packets = qopt.gap;
	s->duplicate_frac32 = qopt.duplicate;
	s->delay_ns = (int64_t)qopt.latency << 6;
	s->jitter_ns = (int64_t)qopt.jitter << 6;

	struct nlattr *tb[QL_TCA_NETEM_MAX + 1];
	memset(tb, 0, sizeof tb);
	size_t off = NLA_ALIGN(sizeof qopt);
	if (len > off) {
		int rc = nla_parse(tb, QL_TCA_NETEM_MAX, (struct nlattr *)((const char *)data + off),
				   (int)(len - off), NULL);
		if (rc < 0)
			return ql_err_set(e, EPROTO, "EPROTO", "netem: malformed attributes after tc_netem_qopt");
	}
	int64_t v64;
	if (attr_copy(tb[TCA_NETEM_LATENCY64], &v64, sizeof v64))
		s->delay_ns = v64;
	if (attr_copy(tb[TCA_NETEM_JITTER64], &v64, sizeof v64))
		s->jitter_ns = v64;
	struct tc_netem_corr cor;
	if (attr_copy(tb[TCA_NETEM_CORR], &cor, sizeof cor)) {
		s->delay_corr_frac32 = cor.delay_corr;
		s->loss_corr_frac32 = cor.loss_corr;
		s->duplicate_corr_frac32 = cor.dup_corr;
	}
	struct tc_netem_reorder ro;
	if (attr_copy(tb[TCA_NETEM_REORDER], &ro, sizeof ro)) {
		s->reorder_frac32 = ro.probability;
		s->reorder_corr_frac32 = ro.correlation;
	} else if (s->reorder_gap_packets) {
		s->reorder_frac32 = QL_FRAC32_ONE;  /* kernel: gap alone means 100 % */
	}
	struct tc_netem_corrupt co;
	if (attr_copy(tb[TCA_NETEM_CORRUPT], &co, sizeof co)) {
		s->corrupt_frac32 = co.probability;
		s->corrupt_corr_frac32 = co.correlation;
	}
	struct tc_netem_rate rate;
	if (attr_copy(tb[TCA_NETEM_RATE], &rate, sizeof rate)) {
		s->rate_bytes_per_s = rate.rate;
		s->packet_overhead_bytes = rate.packet_overhead;
		s->cell_size_bytes = rate.cell_size;
		s->cell_overhead_bytes = rate.cell_overhead;
	}
	uint64_t u64;
	if (attr_copy(tb[TCA_NETEM_RATE64], &u64, sizeof u64) && u64 > s->rate_bytes_per_s)
		s->rate_bytes_per_s = u64;
	uint32_t u32;
	if (attr_copy(tb[TCA_NETEM_ECN], &u32, sizeof u32))
		s->ecn = u32 != 0;
	struct tc_netem_slot slot;
	if (attr_copy(tb[TCA_NETEM_SLOT], &slot, sizeof slot)) {
		s->slot_min_delay_ns = slot.min_delay;
		s->slot_max_delay_ns = slot.max_delay;
		s->slot_max_packets = slot.max_packets == INT32_MAX ? 0 : slot.max_packets;
		s->slot_max_bytes = slot.max_bytes == INT32_MAX ? 0 : slot.max_bytes;
		s->slot_dist_delay_ns = slot.dist_delay;
		s->slot_dist_jitter_ns = slot.dist_jitter;
	}
	if (attr_copy(tb[QL_TCA_NETEM_PRNG_SEED], &u64, sizeof u64)) {
		s->has_seed = 1;
		s->seed = u64;
	}
	if (tb[TCA_NETEM_LOSS]) {
		struct nlattr *lb[NETEM_LOSS_MAX + 1];
		if (nla_parse_nested(lb, NETEM_LOSS_MAX, tb[TCA_NETEM_LOSS], NULL) < 0)
			return ql_err_set(e, EPROTO, "EPROTO", "netem: malformed TCA_NETEM_LOSS");
		struct tc_netem_gimodel gi;
		struct tc_netem_gemodel ge;
		if (attr_copy(lb[NETEM_LOSS_GI], &gi, sizeof gi)) {
			s->loss_model = QL_NETEM_LOSS_STATE;
			s->state_p13_frac32 = gi.p13;
			s->state_p31_frac32 = gi.p31;
			s->state_p32_frac32 = gi.p32;
			s->state_p23_frac32 = gi.p23;
			s->state_p14_frac32 = gi.p14;
		} else if (attr_copy(lb[NETEM_LOSS_GE], &ge, sizeof ge)) {
			s->loss_model = QL_NETEM_LOSS_GEMODEL;
			s->ge_p_frac32 = ge.p;
			s->ge_r_frac32 = ge.r;
			s->ge_h_frac32 = ge.h;
			s->ge_k1_frac32 = ge.k1;
		}
	}
	return 0;
}

static void decode_stats(struct nlattr *st2, ql_qdisc_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!st2)
		return;
	struct nlattr *tb[TCA_STATS_MAX + 1];
	if (nla_parse_nested(tb, TCA_STATS_MAX, st2, NULL) < 0)
		return;
	struct gnet_stats_basic basic;
	if (attr_copy(tb[TCA_STATS_BASIC], &basic, sizeof basic)) {
		out->bytes = basic.bytes;
		out->packets = basic.packets;
	}
	uint64_t pkt64;
	if (attr_copy(tb[TCA_STATS_PKT64], &pkt64, sizeof pkt64))
		out->packets = pkt64;
	struct gnet_stats_queue q;
	if (attr_copy(tb[TCA_STATS_QUEUE], &q, sizeof q)) {
		out->backlog_packets = q.qlen;
		out->backlog_bytes = q.backlog;
		out->drops = q.drops;
		out->requeues = q.requeues;
		out->overlimits = q.overlimits;
	}
}

int ql_netem_decode(const struct nlmsghdr *h, int *ifindex, char *kind,
		    size_t kind_cap, ql_netem_info *info, ql_err *e)
{
	memset(info, 0, sizeof *info);
	*ifindex = 0;
	if (kind_cap)
		kind[0] = '\0';
	if (h->nlmsg_type != RTM_NEWQDISC || h->nlmsg_len < NLMSG_SPACE(sizeof(struct tcmsg)))
		return ql_err_set(e, EPROTO, "EPROTO", "netem: unexpected netlink message type %u", h->nlmsg_type);
	const struct tcmsg *tcm = nlmsg_data(h);
	*ifindex = tcm->tcm_ifindex;
	info->handle = tcm->tcm_handle;
	info->parent = tcm->tcm_parent;
	struct nlattr *tb[TCA_MAX + 1];
	if (nlmsg_parse((struct nlmsghdr *)h, sizeof *tcm, tb, TCA_MAX, NULL) < 0)
		return ql_err_set(e, EPROTO, "EPROTO", "netem: malformed qdisc message");
	if (tb[TCA_KIND] && kind_cap) {
		int n = nla_len(tb[TCA_KIND]);
		const char *k = nla_data(tb[TCA_KIND]);
		size_t m = strnlen(k, (size_t)n);
		if (m >= kind_cap)
			m = kind_cap - 1;
		memcpy(kind, k, m);
		kind[m] = '\0';
	}
	decode_stats(tb[TCA_STATS2], &info->stats);
	if (!tb[TCA_KIND] || strcmp(kind, "netem") != 0)
		return 0;
	if (!tb[TCA_OPTIONS])
		return ql_err_set(e, EPROTO, "EPROTO", "netem: qdisc without TCA_OPTIONS");
	int rc = ql_netem_decode_options(nla_data(tb[TCA_OPTIONS]), (size_t)nla_len(tb[TCA_OPTIONS]),
					 &info->spec, e);
	return rc < 0 ? rc : 1;
}

/* ---------------------------------------------------------- kernel I/O -- */

struct find_ctx {
	int ifindex;
	uint32_t parent;
	int found;           /* 1 netem, 2 other kind */
	char kind[32];
	ql_netem_info *info;
	ql_err *e;
};

static int find_cb(struct nlmsghdr *h, void *arg)
{
	struct find_ctx *c = arg;
	if (h->nlmsg_type != RTM_NEWQDISC || c->found)
		return 0;
	int ifindex;
	char kind[32];
	ql_netem_info tmp;
	ql_err e2;
	int rc = ql_netem_decode(h, &ifindex, kind, sizeof kind, &tmp, &e2);
	if (ifindex != c->ifindex || tmp.parent != c->parent)
		return 0;
	if (rc < 0) {
		*c->e = e2;
		return rc;
	}
	c->found = rc == 1 ? 1 : 2;
	snprintf(c->kind, sizeof c->kind, "%s", kind);
	*c->info = tmp;
	return 0;
}

static int lookup(struct nl_sock *sk, int ifindex, uint32_t parent,
		  struct find_ctx *c, ql_netem_info *info, ql_err *e)
{
	memset(c, 0, sizeof *c);
	c->ifindex = ifindex;
	c->parent = parent;
	c->info = info;
	c->e = e;
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETQDISC, NLM_F_DUMP);
	if (!msg)
		return ql_err_set(e, ENOMEM, NULL, "netem: cannot allocate a netlink message");
	struct tcmsg tcm = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex };
	int rc;
	if (nlmsg_append(msg, &tcm, sizeof tcm, NLMSG_ALIGNTO) < 0)
		rc = ql_err_set(e, ENOMEM, NULL, "netem: cannot build a qdisc dump request");
	else
		rc = ql_nl_request(sk, msg, "qdisc dump", find_cb, c, e);
	nlmsg_free(msg);
	return rc;
}

static int open_target(const ql_qdisc_target *t, struct nl_sock **sk, int *ifindex, ql_err *e)
{
	int rc = ql_nl_open(sk, t->netns, e);
	if (rc < 0)
		return rc;
	rc = ql_nl_ifindex(*sk, t->ifname, t->netns, ifindex, e);
	if (rc < 0) {
		ql_nl_close(*sk);
		*sk = NULL;
	}
	return rc;
}

/* The kernel's answers to a netem request, turned into advice. */
static int kernel_advice(int rc, const ql_qdisc_target *t, ql_err *e)
{
	if (rc == -ENOENT && strstr(e->msg, "kind is unknown"))
		return ql_err_set(e, EOPNOTSUPP, "ENOTSUP",
				  "kernel has no sch_netem: load it with modprobe sch_netem, impair a qoslab.testbed "
				  "instead (its backend \"auto\" takes qoslab's native link on such a kernel), or run "
				  "the script with `qoslab run FILE --guest` (a qemu guest with real netem)");
	if (rc == -ENOENT && t->parent != TC_H_ROOT)
		return ql_err_set(e, ENOENT, "ENOENT",
				  "no class %x:%x on %s%s%s: opts.parent must name an existing class "
				  "(e.g. a testbed shaper's netem_parent; see `tc class show dev %s`)",
				  TC_H_MAJ(t->parent) >> 16, TC_H_MIN(t->parent), t->ifname,
				  t->netns && *t->netns ? " in netns " : "",
				  t->netns && *t->netns ? t->netns : "", t->ifname);
	return rc;
}

int ql_netem_apply_checked(const ql_qdisc_target *t, const ql_netem_spec *s,
			   int *before_found, char *before_kind, size_t kind_cap,
			   ql_netem_info *after, int *after_found, ql_err *e)
{
	*before_found = 0;
	*after_found = 0;
	if (kind_cap)
		before_kind[0] = '\0';
	int rc = ql_netem_validate(s, e);
	if (rc < 0)
		return rc;
	struct nl_sock *sk;
	int ifindex;
	if ((rc = open_target(t, &sk, &ifindex, e)) < 0)
		return rc;
	/* Room for a 32 KiB distribution table in one message. */
	nl_socket_set_buffer_size(sk, 262144, 262144);
	struct find_ctx c;
	ql_netem_info cur;
	rc = lookup(sk, ifindex, t->parent, &c, &cur, e);
	if (rc == 0) {
		*before_found = c.found == 1;
		if (c.found == 2 && kind_cap)
			snprintf(before_kind, kind_cap, "%s", c.kind);
		struct nl_msg *msg;
		rc = ql_netem_build(&msg, ifindex, t->parent, t->handle, s, c.found == 1, e);
		if (rc == 0) {
			rc = ql_nl_transact(sk, msg, "netem apply", e);
			nlmsg_free(msg);
			if (rc < 0)
				rc = kernel_advice(rc, t, e);
		}
	}
	if (rc == 0 && after) {
		/* The change is made: a failed read-back only means no check. */
		ql_err e2;
		*after_found = lookup(sk, ifindex, t->parent, &c, after, &e2) == 0 &&
			       c.found == 1;
	}
	ql_nl_close(sk);
	return rc;
}

int ql_netem_apply(const ql_qdisc_target *t, const ql_netem_spec *s, ql_err *e)
{
	int before;
	char kind[32];
	int after_found;
	return ql_netem_apply_checked(t, s, &before, kind, sizeof kind, NULL,
				      &after_found, e);
}

int ql_netem_get(const ql_qdisc_target *t, ql_netem_info *info, int *found,
		 char *other_kind, size_t kind_cap, ql_err *e)
{
	*found = 0;
	if (kind_cap)
		other_kind[0] = '\0';
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_target(t, &sk, &ifindex, e)) < 0)
		return rc;
	struct find_ctx c;
	rc = lookup(sk, ifindex, t->parent, &c, info, e);
	ql_nl_close(sk);
	if (rc < 0)
		return rc;
	*found = c.found == 1;
	if (c.found == 2 && kind_cap)
		snprintf(other_kind, kind_cap, "%s", c.kind);
	return 0;
}

int ql_netem_clear(const ql_qdisc_target *t, int *removed, ql_err *e)
{
	*removed = 0;
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_target(t, &sk, &ifindex, e)) < 0)
		return rc;
	struct find_ctx c;
	ql_netem_info cur;
	rc = lookup(sk, ifindex, t->parent, &c, &cur, e);
	if (rc == 0 && c.found == 1) {
		struct nl_msg *msg = nlmsg_alloc_simple(RTM_DELQDISC, 0);
		struct tcmsg tcm = {
			.tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex,
			.tcm_handle = cur.handle, .tcm_parent = t->parent,
		};
		if (!msg || nlmsg_append(msg, &tcm, sizeof tcm, NLMSG_ALIGNTO) < 0)
			rc = ql_err_set(e, ENOMEM, NULL, "netem: cannot build a qdisc delete request");
		else
			rc = ql_nl_transact(sk, msg, "netem clear", e);
		if (msg)
			nlmsg_free(msg);
		if (rc == 0)
			*removed = 1;
	}
	ql_nl_close(sk);
	return rc;
}

/* ------------------------------------------------------ distributions -- */

static int parse_dist_file(FILE *f, const char *path, int16_t *buf, size_t cap,
			   size_t *len, ql_err *e)
{
	char line[4096];
	size_t n = 0;
	unsigned lineno = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (line[0] == '#')
			continue;
		char *p = line;
		for (;;) {
			while (isspace((unsigned char)*p))
				p++;
			if (!*p)
				break;
			char *end;
			errno = 0;
			long v = strtol(p, &end, 10);
			if (end == p || errno || v < INT16_MIN || v > INT16_MAX)
				return ql_err_set(e, EINVAL, "EINVAL", "%s:%u: expected integers in [-32768, 32767]",
						  path, lineno);
			if (n >= cap)
				return ql_err_set(e, E2BIG, "E2BIG", "%s: more than %zu entries", path, cap);
			buf[n++] = (int16_t)v;
			p = end;
		}
	}
	if (n == 0)
		return ql_err_set(e, EINVAL, "EINVAL", "%s: no table entries", path);
	*len = n;
	return 0;
}

int ql_netem_load_dist(const char *name, int16_t *buf, size_t cap, size_t *len,
		       ql_err *e)
{
	for (const char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
			return ql_err_usage(e, "spec.distribution: expected a table name of letters, digits, '-', '_', got \"%s\"", name);
	const char *env = getenv("TC_LIB_DIR");
	const char *dirs[] = { env, "/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc",
			       "/usr/share/tc", "/usr/local/lib/tc", "/usr/lib64/tc" };
	char tried[256] = "";
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		if (!dirs[i] || !*dirs[i])
			continue;
		char path[512];
		snprintf(path, sizeof path, "%s/%s.dist", dirs[i], name);
		FILE *f = fopen(path, "r");
		if (!f) {
			if (strlen(tried) + strlen(dirs[i]) + 3 < sizeof tried) {
				if (tried[0])
					strcat(tried, ", ");
				strcat(tried, dirs[i]);
			}
			continue;
		}
		int rc = parse_dist_file(f, path, buf, cap, len, e);
		fclose(f);
		return rc;
	}
	return ql_err_set(e, ENOENT, "ENOENT",
			  "no distribution table \"%s.dist\" (looked in %s; Debian ships them in the iproute2 package, or pass a table of integers)",
			  name, tried);
}

/* ---------------------------------------------------------------- misc -- */

int ql_link_speed_mbps(const char *netns, const char *ifname, int64_t *mbps,
		       ql_err *e)
{
	*mbps = -1;
	if (strlen(ifname) >= IFNAMSIZ)
		return ql_err_usage(e, "ifname: longer than %d characters", IFNAMSIZ - 1);
	int restore, rc;
	if ((rc = ql_netns_enter(netns, &restore, e)) < 0)
		return rc;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int err = errno;
	if ((rc = ql_netns_restore(restore, e)) < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (fd < 0)
		return ql_err_set(e, err, NULL, "socket: %s", strerror(err));
	struct ethtool_cmd cmd = { .cmd = ETHTOOL_GSET };
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, ifname, strlen(ifname));
	ifr.ifr_data = (char *)&cmd;
	if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) {
		uint32_t sp = ethtool_cmd_speed(&cmd);
		if (sp != 0 && sp != (uint32_t)SPEED_UNKNOWN && sp != UINT16_MAX)
			*mbps = sp;
	}
	close(fd);
	return 0;
}

int ql_tc_handle_parse(const char *s, uint32_t *out)
{
	if (!strcmp(s, "root")) {
		*out = TC_H_ROOT;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long maj = strtoul(s, &end, 16);
	if (end == s || *end != ':' || errno || maj > 0xFFFF)
		return -EINVAL;
	const char *m = end + 1;
	unsigned long min = 0;
	if (*m) {
		min = strtoul(m, &end, 16);
		if (end == m || *end || errno || min > 0xFFFF)
			return -EINVAL;
	}
	*out = TC_H_MAKE(maj << 16, min);
	return 0;
}
