/* shape.c - see shape.h. */
#include "shape.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/gen_stats.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/link.h>

#include "link.h"
#include "netns.h"
#include "nl.h"

#define HANDLE_1 0x10000u
#define TBF_CHILD 0x10001u
#define HTB_LEAF_MINOR 0x10u
#define HTB_LEAF (HANDLE_1 | HTB_LEAF_MINOR)
#define TICK_NS 64u /* kernel PSCHED_TICKS2NS: 1 tick = 2^6 ns */

void ql_tc_handle_str(uint32_t h, char *buf, size_t len)
{
	if (h == TC_H_ROOT)
		snprintf(buf, len, "root");
	else if (h == 0)
		snprintf(buf, len, "none");
	else if (TC_H_MIN(h) == 0)
		snprintf(buf, len, "%x:", TC_H_MAJ(h) >> 16);
	else
		snprintf(buf, len, "%x:%x", TC_H_MAJ(h) >> 16, TC_H_MIN(h));
}

/* Bucket size in bytes -> kernel ticks, rounding the time up. */
static int bytes_to_ticks(uint64_t bytes, uint64_t rate, uint32_t *ticks)
{
	unsigned __int128 num = (unsigned __int128)bytes * 1000000000u;
	unsigned __int128 den = (unsigned __int128)rate * TICK_NS;
	unsigned __int128 t = (num + den - 1) / den;
	if (t > UINT32_MAX)
		return -1;
	*ticks = (uint32_t)t;
	return 0;
}

/* Ticks -> the largest byte count that drains in that time. */
static uint32_t ticks_to_bytes(uint32_t ticks, uint64_t rate)
{
	unsigned __int128 b = (unsigned __int128)ticks * TICK_NS * rate / 1000000000u;
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

static uint32_t default_burst(uint64_t rate, uint32_t mtu)
{
	/* A jiffy at HZ=250 worth of bytes (tc-tbf(8): burst >= rate / HZ) so
	 * timer slack never idles the link, and room for 10 full frames so TCP
	 * bursts do not overflow the bucket at low rates. */
	uint64_t b = (rate + 249) / 250;
	uint64_t m = (uint64_t)(mtu ? mtu : 1500) * 10;
	if (b < m)
		b = m;
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

struct root_info {
	int ifindex;
	int found;
	uint32_t handle;
	char kind[16];
	struct tc_tbf_qopt tbf;
	uint64_t tbf_rate64;
	struct tc_htb_glob htb;
	int has_opts;
};

static int root_cb(struct nlmsghdr *h, void *arg)
{
	struct root_info *ri = arg;
	if (h->nlmsg_type != RTM_NEWQDISC)
		return 0;
	struct tcmsg *t = nlmsg_data(h);
	if (t->tcm_ifindex != ri->ifindex || t->tcm_parent != TC_H_ROOT)
		return 0;
	struct nlattr *tb[TCA_MAX + 1];
	if (nlmsg_parse(h, sizeof *t, tb, TCA_MAX, NULL) < 0 || !tb[TCA_KIND])
		return 0;
	ri->found = 1;
	ri->handle = t->tcm_handle;
	nla_strlcpy(ri->kind, tb[TCA_KIND], sizeof ri->kind);
	if (!tb[TCA_OPTIONS])
		return 0;
	if (strcmp(ri->kind, "tbf") == 0) {
		struct nlattr *o[TCA_TBF_MAX + 1];
		if (nla_parse_nested(o, TCA_TBF_MAX, tb[TCA_OPTIONS], NULL) < 0 || !o[TCA_TBF_PARMS] ||
		    nla_len(o[TCA_TBF_PARMS]) < (int)sizeof ri->tbf)
			return 0;
		memcpy(&ri->tbf, nla_data(o[TCA_TBF_PARMS]), sizeof ri->tbf);
		ri->tbf_rate64 = o[TCA_TBF_RATE64] ? nla_get_u64(o[TCA_TBF_RATE64]) : ri->tbf.rate.rate;
		ri->has_opts = 1;
	} else if (strcmp(ri->kind, "htb") == 0) {
		struct nlattr *o[TCA_HTB_MAX + 1];
		if (nla_parse_nested(o, TCA_HTB_MAX, tb[TCA_OPTIONS], NULL) < 0 || !o[TCA_HTB_INIT] ||
		    nla_len(o[TCA_HTB_INIT]) < (int)sizeof ri->htb)
			return 0;
		memcpy(&ri->htb, nla_data(o[TCA_HTB_INIT]), sizeof ri->htb);
		ri->has_opts = 1;
	}
	return 0;
}

static int dump(struct nl_sock *sk, int type, int ifindex, const char *what,
		int (*cb)(struct nlmsghdr *, void *), void *arg, ql_err *e)
{
	struct nl_msg *msg = nlmsg_alloc_simple(type, NLM_F_DUMP);
	if (!msg)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	struct tcmsg t = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex };
	int rc = nlmsg_append(msg, &t, sizeof t, NLMSG_ALIGNTO);
	if (rc < 0)
		rc = ql_nl_fail(e, rc, what);
	else
		rc = ql_nl_request(sk, msg, what, cb, arg, e);
	nlmsg_free(msg);
	return rc;
}

static int read_root(struct nl_sock *sk, int ifindex, struct root_info *ri, ql_err *e)
{
	memset(ri, 0, sizeof *ri);
	ri->ifindex = ifindex;
	return dump(sk, RTM_GETQDISC, ifindex, "read qdiscs", root_cb, ri, e);
}

struct htb_class_info {
	int ifindex;
	int found;
	struct tc_htb_opt opt;
	uint64_t rate64, ceil64;
};

static int class_cb(struct nlmsghdr *h, void *arg)
{
	struct htb_class_info *ci = arg;
	if (h->nlmsg_type != RTM_NEWTCLASS)
		return 0;
	struct tcmsg *t = nlmsg_data(h);
	if (t->tcm_ifindex != ci->ifindex || t->tcm_handle != HTB_LEAF)
		return 0;
	struct nlattr *tb[TCA_MAX + 1], *o[TCA_HTB_MAX + 1];
	if (nlmsg_parse(h, sizeof *t, tb, TCA_MAX, NULL) < 0 || !tb[TCA_OPTIONS] ||
	    nla_parse_nested(o, TCA_HTB_MAX, tb[TCA_OPTIONS], NULL) < 0 || !o[TCA_HTB_PARMS] ||
	    nla_len(o[TCA_HTB_PARMS]) < (int)sizeof ci->opt)
		return 0;
	memcpy(&ci->opt, nla_data(o[TCA_HTB_PARMS]), sizeof ci->opt);
	ci->rate64 = o[TCA_HTB_RATE64] ? nla_get_u64(o[TCA_HTB_RATE64]) : ci->opt.rate.rate;
	ci->ceil64 = o[TCA_HTB_CEIL64] ? nla_get_u64(o[TCA_HTB_CEIL64]) : ci->opt.ceil.rate;
	ci->found = 1;
	return 0;
}

static struct nl_msg *tc_msg(int type, int flags, int ifindex, uint32_t handle, uint32_t parent,
			     const char *kind)
{
	struct nl_msg *msg = nlmsg_alloc_simple(type, flags);
	if (!msg)
		return NULL;
	struct tcmsg t = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex,
			   .tcm_handle = handle, .tcm_parent = parent };
	if (nlmsg_append(msg, &t, sizeof t, NLMSG_ALIGNTO) < 0 ||
	    (kind && nla_put_string(msg, TCA_KIND, kind) < 0)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

/* A ratespec the kernel takes without a rate table: linklayer ethernet
 * (so no table is needed to guess it), the rate clamped to 32 bits (the
 * 64-bit attribute carries the full value). */
static void ratespec(struct tc_ratespec *r, uint64_t rate)
{
	memset(r, 0, sizeof *r);
	r->linklayer = TC_LINKLAYER_ETHERNET;
	r->rate = rate >= UINT32_MAX ? UINT32_MAX : (uint32_t)rate;
}

static int open_dev(const char *ifname, const char *netns, struct nl_sock **sk, int *ifindex,
		    uint32_t *mtu, ql_err *e)
{
	int rc;
	if ((rc = ql_link_check_ifname("ifname", ifname, e)) < 0)
		return rc;
	if (netns && *netns && (rc = ql_netns_check_name("netns", netns, e)) < 0)
		return rc;
	if ((rc = ql_nl_open(sk, netns, e)) < 0)
		return rc;
	struct rtnl_link *link = NULL;
	int nlrc = rtnl_link_get_kernel(*sk, 0, ifname, &link);
	if (nlrc < 0 || !link) {
		ql_nl_close(*sk);
		*sk = NULL;
		if (nlrc == -NLE_NODEV || nlrc == -NLE_OBJ_NOTFOUND || !link)
			return ql_err_set(e, ENODEV, "ENODEV", "no such network device \"%s\" in namespace %s",
					  ifname, netns && *netns ? netns : "(this process's)");
		return ql_nl_fail(e, nlrc, "link lookup");
	}
	*ifindex = rtnl_link_get_ifindex(link);
	if (mtu)
		*mtu = rtnl_link_get_mtu(link);
	rtnl_link_put(link);
	return 0;
}

static int put_tbf(struct nl_msg *msg, const ql_shape *s, uint32_t buffer_ticks)
{
	struct tc_tbf_qopt q;
	memset(&q, 0, sizeof q);
	ratespec(&q.rate, s->rate_bytes_per_s);
	q.limit = s->limit_bytes;
	q.buffer = buffer_ticks;
	struct nlattr *o = nla_nest_start(msg, TCA_OPTIONS);
	if (!o || nla_put(msg, TCA_TBF_PARMS, sizeof q, &q) < 0)
		return -1;
	if (s->rate_bytes_per_s >= UINT32_MAX &&
	    nla_put_u64(msg, TCA_TBF_RATE64, s->rate_bytes_per_s) < 0)
		return -1;
	nla_nest_end(msg, o);
	return 0;
}

static int put_htb_class(struct nl_msg *msg, const ql_shape *s, uint32_t buf, uint32_t cbuf)
{
	struct tc_htb_opt o;
	memset(&o, 0, sizeof o);
	ratespec(&o.rate, s->rate_bytes_per_s);
	ratespec(&o.ceil, s->ceil_bytes_per_s);
	o.buffer = buf;
	o.cbuffer = cbuf;
	/* The quantum the kernel would derive (rate / r2q 10), clamped to its
	 * sane range here so it need not warn in the kernel log. */
	uint64_t q = s->rate_bytes_per_s / 10;
	o.quantum = q < 1000 ? 1000 : q > 200000 ? 200000 : (uint32_t)q;
	struct nlattr *n = nla_nest_start(msg, TCA_OPTIONS);
	if (!n || nla_put(msg, TCA_HTB_PARMS, sizeof o, &o) < 0)
		return -1;
	if (s->rate_bytes_per_s >= UINT32_MAX &&
	    nla_put_u64(msg, TCA_HTB_RATE64, s->rate_bytes_per_s) < 0)
		return -1;
	if (s->ceil_bytes_per_s >= UINT32_MAX &&
	    nla_put_u64(msg, TCA_HTB_CEIL64, s->ceil_bytes_per_s) < 0)
		return -1;
	nla_nest_end(msg, n);
	return 0;
}

static int send_tc(struct nl_sock *sk, struct nl_msg *msg, const char *what, ql_err *e)
{
	int rc = ql_nl_transact(sk, msg, what, e);
	nlmsg_free(msg);
	return rc;
}

const ql_shape_names ql_shape_spec_names = {
	.kind = "spec.kind", .rate = "spec.rate_bps", .ceil = "spec.ceil_bps",
	.burst = "spec.burst_bytes", .cburst = "spec.cburst_bytes",
	.limit = "spec.limit_bytes", .latency = "spec.latency_ms",
};

int ql_shape_validate_named(const ql_shape *s, const ql_shape_names *n, ql_err *e)
{
	if (s->kind != QL_SHAPE_TBF && s->kind != QL_SHAPE_HTB)
		return ql_err_usage(e, "%s: expected \"tbf\" or \"htb\"", n->kind);
	if (s->rate_bytes_per_s == 0)
		return ql_err_usage(e, "%s: expected at least 8 (one byte per second)", n->rate);
	if (s->latency_us && s->limit_bytes)
		return ql_err_usage(e, "%s: give either latency_ms or limit_bytes, not both", n->latency);
	if (s->kind == QL_SHAPE_TBF && (s->ceil_bytes_per_s || s->cburst_bytes))
		return ql_err_usage(e, "%s: only for kind \"htb\"",
				    s->ceil_bytes_per_s ? n->ceil : n->cburst);
	if (s->kind == QL_SHAPE_HTB && (s->limit_bytes || s->latency_us))
		return ql_err_usage(e, "%s: only for kind \"tbf\"",
				    s->limit_bytes ? n->limit : n->latency);
	if (s->kind == QL_SHAPE_HTB && s->ceil_bytes_per_s && s->ceil_bytes_per_s < s->rate_bytes_per_s)
		return ql_err_usage(e, "%s: expected at least %s", n->ceil, n->rate);
	return 0;
}

int ql_shape_validate(const ql_shape *s, ql_err *e)
{
	return ql_shape_validate_named(s, &ql_shape_spec_names, e);
}

/* The lowest rate (bytes/s) at which `bytes` drain within the longest
 * bucket time the kernel takes (2^32 - 1 ticks, about 275 s). */
static uint64_t min_rate_for(uint64_t bytes)
{
	unsigned __int128 den = (unsigned __int128)UINT32_MAX * TICK_NS;
	return (uint64_t)(((unsigned __int128)bytes * 1000000000u + den - 1) / den);
}

/* A bucket of `bytes` at `rate` in ticks; when it takes too long, the
 * error names the field given (the bucket's) or, for a default bucket,
 * the rate. */
static int bucket_ticks(uint32_t bytes, int given, uint64_t rate, const char *bucket_field,
			const char *rate_field, uint32_t *ticks, ql_err *e)
{
	if (bytes_to_ticks(bytes, rate, ticks) == 0)
		return 0;
	uint64_t need = min_rate_for(bytes) * 8;
	if (given)
		return ql_err_usage(e, "%s: %u bytes take too long to send at this rate (more than "
				    "2^32 kernel ticks of 64 ns); expected a smaller burst or a rate of "
				    "at least %llu bit/s", bucket_field, bytes, (unsigned long long)need);
	return ql_err_usage(e, "%s: expected at least %llu bit/s: the default burst (%u bytes, "
			    "10 MTU-sized frames) takes too long to send at this rate (more than "
			    "2^32 kernel ticks of 64 ns)", rate_field, (unsigned long long)need, bytes);
}

int ql_shape_resolve(ql_shape *s, uint32_t mtu, const char *link, const ql_shape_names *n,
		     uint32_t *buf_ticks, uint32_t *cbuf_ticks, ql_err *e)
{
	int rc;
	int burst_given = s->burst_bytes != 0;
	if (!burst_given)
		s->burst_bytes = default_burst(s->rate_bytes_per_s, mtu);
	else if (s->burst_bytes < mtu)
		return ql_err_usage(e, "%s: expected at least the MTU of %s (%u bytes), got %u",
				    n->burst, link, mtu, s->burst_bytes);
	if ((rc = bucket_ticks(s->burst_bytes, burst_given, s->rate_bytes_per_s, n->burst, n->rate,
			       buf_ticks, e)) < 0)
		return rc;
	*cbuf_ticks = 0;
	if (s->kind == QL_SHAPE_TBF) {
		if (!s->limit_bytes) {
			uint64_t lat = s->latency_us ? s->latency_us : QL_SHAPE_DEFAULT_LATENCY_US;
			unsigned __int128 l = (unsigned __int128)s->rate_bytes_per_s * lat / 1000000u +
					      s->burst_bytes;
			if (l > UINT32_MAX)
				return ql_err_usage(e, "%s: rate * latency (%g ms) + burst exceeds 4 GiB, "
						    "the largest tbf queue; expected a lower rate%s",
						    s->latency_us ? n->latency : n->rate, (double)lat / 1000.0,
						    s->latency_us ? " or a shorter latency" : "");
			s->limit_bytes = (uint32_t)l;
		} else if (s->limit_bytes < mtu + QL_SHAPE_FRAME_HEADER_BYTES) {
			/* tbf queues in a byte fifo that drops a packet which does
			 * not fit whole: below one full frame nothing full-sized
			 * would ever pass. */
			return ql_err_usage(e, "%s: expected at least one MTU-sized frame of %s (%u + %u "
					    "bytes of link header), got %u", n->limit, link, mtu,
					    QL_SHAPE_FRAME_HEADER_BYTES, s->limit_bytes);
		}
		s->latency_us = 0;
	} else {
		if (!s->ceil_bytes_per_s)
			s->ceil_bytes_per_s = s->rate_bytes_per_s;
		int cburst_given = s->cburst_bytes != 0;
		if (!cburst_given)
			s->cburst_bytes = default_burst(s->ceil_bytes_per_s, mtu);
		if ((rc = bucket_ticks(s->cburst_bytes, cburst_given, s->ceil_bytes_per_s, n->cburst,
				       n->ceil, cbuf_ticks, e)) < 0)
			return rc;
	}
	return 0;
}

int ql_shape_apply(const char *ifname, const char *netns, const ql_shape *in,
		   ql_shape_result *r, ql_shape *applied, ql_err *e)
{
	ql_shape s = *in;
	int rc = ql_shape_validate(&s, e);
	if (rc < 0)
		return rc;
	struct nl_sock *sk;
	int ifindex;
	uint32_t mtu;
	if ((rc = open_dev(ifname, netns, &sk, &ifindex, &mtu, e)) < 0)
		return rc;
	uint32_t buf_ticks, cbuf_ticks;
	if ((rc = ql_shape_resolve(&s, mtu, ifname, &ql_shape_spec_names, &buf_ticks, &cbuf_ticks,
				   e)) < 0)
		goto out;
	char what[128];
	snprintf(what, sizeof what, "%s rate limit on %s in namespace %s",
		 s.kind == QL_SHAPE_TBF ? "tbf" : "htb", ifname, netns && *netns ? netns : "(this process's)");
	struct nl_msg *msg;
	/* The kernel replaces a root qdisc in place only with one of the same
	 * kind under the same handle; switching between tbf and htb at 1: has
	 * to remove the old one first (the one step here that is not atomic). */
	struct root_info ri;
	const char *kind = s.kind == QL_SHAPE_TBF ? "tbf" : "htb";
	if ((rc = read_root(sk, ifindex, &ri, e)) < 0)
		goto out;
	if (ri.found && ri.handle == HANDLE_1 && strcmp(ri.kind, kind) != 0) {
		msg = tc_msg(RTM_DELQDISC, 0, ifindex, HANDLE_1, TC_H_ROOT, NULL);
		if (!msg) {
			rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
			goto out;
		}
		if ((rc = send_tc(sk, msg, what, e)) < 0)
			goto out;
		ri.found = 0;
	}
	if (s.kind == QL_SHAPE_TBF) {
		msg = tc_msg(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, ifindex, HANDLE_1, TC_H_ROOT, "tbf");
		if (!msg || put_tbf(msg, &s, buf_ticks) < 0) {
			nlmsg_free(msg);
			rc = ql_err_set(e, ENOMEM, NULL, "cannot build tbf message");
			goto out;
		}
		rc = send_tc(sk, msg, what, e);
	} else {
		/* htb cannot change its own parameters in place: keep a root
		 * that is already ours (and the leaf qdisc under its class). */
		if (!(ri.found && strcmp(ri.kind, "htb") == 0 && ri.handle == HANDLE_1 &&
		      ri.has_opts && ri.htb.defcls == HTB_LEAF_MINOR)) {
			msg = tc_msg(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, ifindex, HANDLE_1,
				     TC_H_ROOT, "htb");
			struct tc_htb_glob g = { .version = 3, .rate2quantum = 10, .defcls = HTB_LEAF_MINOR };
			struct nlattr *o = msg ? nla_nest_start(msg, TCA_OPTIONS) : NULL;
			if (!o || nla_put(msg, TCA_HTB_INIT, sizeof g, &g) < 0) {
				nlmsg_free(msg);
				rc = ql_err_set(e, ENOMEM, NULL, "cannot build htb message");
				goto out;
			}
			nla_nest_end(msg, o);
			if ((rc = send_tc(sk, msg, what, e)) < 0)
				goto out;
		}
		msg = tc_msg(RTM_NEWTCLASS, NLM_F_CREATE | NLM_F_REPLACE, ifindex, HTB_LEAF, HANDLE_1, "htb");
		if (!msg || put_htb_class(msg, &s, buf_ticks, cbuf_ticks) < 0) {
			nlmsg_free(msg);
			rc = ql_err_set(e, ENOMEM, NULL, "cannot build htb class message");
			goto out;
		}
		rc = send_tc(sk, msg, what, e);
	}
	if (rc == 0) {
		if (r) {
			r->handle = HANDLE_1;
			r->netem_parent = s.kind == QL_SHAPE_TBF ? TBF_CHILD : HTB_LEAF;
		}
		if (applied) {
			/* What get() will read back. */
			s.burst_bytes = ticks_to_bytes(buf_ticks, s.rate_bytes_per_s);
			if (s.kind == QL_SHAPE_HTB)
				s.cburst_bytes = ticks_to_bytes(cbuf_ticks, s.ceil_bytes_per_s);
			*applied = s;
		}
	}
out:
	ql_nl_close(sk);
	return rc;
}

int ql_shape_get(const char *ifname, const char *netns, ql_shape *out, int *found, ql_err *e)
{
	memset(out, 0, sizeof *out);
	*found = 0;
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_dev(ifname, netns, &sk, &ifindex, NULL, e)) < 0)
		return rc;
	struct root_info ri;
	if ((rc = read_root(sk, ifindex, &ri, e)) < 0)
		goto out;
	if (!ri.found || !ri.has_opts || ri.handle != HANDLE_1)
		goto out;
	if (strcmp(ri.kind, "tbf") == 0) {
		out->kind = QL_SHAPE_TBF;
		out->rate_bytes_per_s = ri.tbf_rate64;
		out->burst_bytes = ticks_to_bytes(ri.tbf.buffer, ri.tbf_rate64);
		out->limit_bytes = ri.tbf.limit;
		*found = 1;
	} else if (strcmp(ri.kind, "htb") == 0 && ri.htb.defcls == HTB_LEAF_MINOR) {
		struct htb_class_info ci = { .ifindex = ifindex };
		if ((rc = dump(sk, RTM_GETTCLASS, ifindex, "read htb classes", class_cb, &ci, e)) < 0)
			goto out;
		if (!ci.found)
			goto out;
		out->kind = QL_SHAPE_HTB;
		out->rate_bytes_per_s = ci.rate64;
		out->ceil_bytes_per_s = ci.ceil64;
		out->burst_bytes = ticks_to_bytes(ci.opt.buffer, ci.rate64);
		out->cburst_bytes = ticks_to_bytes(ci.opt.cbuffer, ci.ceil64);
		*found = 1;
	}
out:
	ql_nl_close(sk);
	return rc;
}

int ql_shape_reset_child(const char *ifname, const char *netns, ql_err *e)
{
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_dev(ifname, netns, &sk, &ifindex, NULL, e)) < 0)
		return rc;
	struct root_info ri;
	if ((rc = read_root(sk, ifindex, &ri, e)) < 0)
		goto out;
	int tbf = ri.found && ri.has_opts && ri.handle == HANDLE_1 && strcmp(ri.kind, "tbf") == 0;
	int htb = ri.found && ri.has_opts && ri.handle == HANDLE_1 && strcmp(ri.kind, "htb") == 0;
	if (!tbf && !htb) {
		rc = ql_err_set(e, ENOENT, "ENOENT", "%s has no tbf or htb rate limit made by qoslab.shape",
				ifname);
		goto out;
	}
	struct tc_fifo_qopt fifo = { .limit = ri.tbf.limit };
	if (htb) {
		struct rtnl_link *link = NULL;
		fifo.limit = 1000;
		if (rtnl_link_get_kernel(sk, ifindex, NULL, &link) == 0 && link) {
			if (rtnl_link_get_txqlen(link) > 0)
				fifo.limit = rtnl_link_get_txqlen(link);
			rtnl_link_put(link);
		}
	}
	struct nl_msg *msg = tc_msg(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, ifindex, 0,
				    tbf ? TBF_CHILD : HTB_LEAF, tbf ? "bfifo" : "pfifo");
	if (!msg || nla_put(msg, TCA_OPTIONS, sizeof fifo, &fifo) < 0) {
		nlmsg_free(msg);
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	char what[96];
	snprintf(what, sizeof what, "reset the qdisc under the rate limit of %s", ifname);
	rc = send_tc(sk, msg, what, e);
out:
	ql_nl_close(sk);
	return rc;
}

int ql_shape_clear(const char *ifname, const char *netns, ql_err *e)
{
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_dev(ifname, netns, &sk, &ifindex, NULL, e)) < 0)
		return rc;
	struct root_info ri;
	if ((rc = read_root(sk, ifindex, &ri, e)) < 0 || !ri.found || ri.handle == 0)
		goto out;
	struct nl_msg *msg = tc_msg(RTM_DELQDISC, 0, ifindex, ri.handle, TC_H_ROOT, NULL);
	if (!msg) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	char what[96];
	snprintf(what, sizeof what, "remove root qdisc of %s", ifname);
	rc = send_tc(sk, msg, what, e);
out:
	ql_nl_close(sk);
	return rc;
}

struct stats_ctx {
	int ifindex;
	ql_qdisc_stats *out;
	size_t max, n;
};

static int stats_cb(struct nlmsghdr *h, void *arg)
{
	struct stats_ctx *c = arg;
	if (h->nlmsg_type != RTM_NEWQDISC)
		return 0;
	struct tcmsg *t = nlmsg_data(h);
	if (t->tcm_ifindex != c->ifindex || c->n >= c->max)
		return 0;
	struct nlattr *tb[TCA_MAX + 1];
	if (nlmsg_parse(h, sizeof *t, tb, TCA_MAX, NULL) < 0 || !tb[TCA_KIND])
		return 0;
	ql_qdisc_stats *s = &c->out[c->n];
	memset(s, 0, sizeof *s);
	nla_strlcpy(s->kind, tb[TCA_KIND], sizeof s->kind);
	s->handle = t->tcm_handle;
	s->parent = t->tcm_parent;
	if (tb[TCA_STATS2]) {
		struct nlattr *st[TCA_STATS_MAX + 1];
		if (nla_parse_nested(st, TCA_STATS_MAX, tb[TCA_STATS2], NULL) == 0) {
			if (st[TCA_STATS_BASIC] && nla_len(st[TCA_STATS_BASIC]) >= (int)sizeof(struct gnet_stats_basic)) {
				struct gnet_stats_basic b;
				memcpy(&b, nla_data(st[TCA_STATS_BASIC]), sizeof b);
				s->bytes = b.bytes;
				s->packets = b.packets;
			}
			if (st[TCA_STATS_PKT64])
				s->packets = nla_get_u64(st[TCA_STATS_PKT64]);
			if (st[TCA_STATS_QUEUE] && nla_len(st[TCA_STATS_QUEUE]) >= (int)sizeof(struct gnet_stats_queue)) {
				struct gnet_stats_queue q;
				memcpy(&q, nla_data(st[TCA_STATS_QUEUE]), sizeof q);
				s->drops = q.drops;
				s->overlimits = q.overlimits;
				s->requeues = q.requeues;
				s->backlog_bytes = q.backlog;
				s->qlen_packets = q.qlen;
			}
		}
	}
	c->n++;
	return 0;
}

int ql_qdisc_stats_get(const char *ifname, const char *netns, ql_qdisc_stats *out,
		       size_t max, size_t *count, ql_err *e)
{
	*count = 0;
	struct nl_sock *sk;
	int ifindex, rc;
	if ((rc = open_dev(ifname, netns, &sk, &ifindex, NULL, e)) < 0)
		return rc;
	struct stats_ctx c = { ifindex, out, max, 0 };
	rc = dump(sk, RTM_GETQDISC, ifindex, "read qdisc statistics", stats_cb, &c, e);
	ql_nl_close(sk);
	/* Root first: the kernel dumps a device's root before its children,
	 * but say so explicitly rather than rely on it. */
	for (size_t i = 1; i < c.n; i++)
		if (out[i].parent == TC_H_ROOT) {
			ql_qdisc_stats tmp = out[0];
			out[0] = out[i];
			out[i] = tmp;
			break;
		}
	*count = c.n;
	return rc;
}
