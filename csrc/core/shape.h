/*
 * shape.h - rate limits on a link's egress with tbf or htb, under which a
 * netem qdisc can sit as a child.
 *
 *   tbf: root qdisc tbf handle 1:, netem child at parent 1:1
 *   htb: root qdisc htb handle 1: default 10, one class 1:10 (rate, ceil),
 *        netem child (leaf qdisc) at parent 1:10
 *
 * Messages are encoded with libnl-3's message API rather than libnl-route's
 * tbf/htb objects: libnl 3.7's tbf API takes an int rate (no TCA_TBF_RATE64,
 * so nothing above 2^31 bytes/s and wrong read-back above 2^32), and its
 * htb class converts buffers through rounded microseconds, which breaks
 * exact read-back. Burst sizes travel as kernel time ticks (PSCHED_SHIFT 6:
 * 64 ns); apply rounds the time up, get returns the largest byte count that
 * time holds, so get(apply(x)) >= x by less than rate * 64 ns and
 * apply(get()) changes nothing.
 */
#ifndef QL_SHAPE_H
#define QL_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum { QL_SHAPE_NONE = 0, QL_SHAPE_TBF = 1, QL_SHAPE_HTB = 2 };

#define QL_SHAPE_DEFAULT_LATENCY_US 20000u

typedef struct ql_shape {
	int kind;                   /* QL_SHAPE_TBF or QL_SHAPE_HTB */
	uint64_t rate_bytes_per_s;  /* > 0 */
	uint64_t ceil_bytes_per_s;  /* htb only; 0 = rate */
	uint32_t burst_bytes;       /* 0 = default: max(rate * 4 ms, 10 * MTU) */
	uint32_t cburst_bytes;      /* htb only; 0 = same rule with the ceil */
	uint32_t limit_bytes;       /* tbf only; 0 = rate * latency + burst */
	uint32_t latency_us;        /* tbf only, used when limit is 0; 0 = 20 ms */
} ql_shape;

typedef struct ql_shape_result {
	uint32_t handle;            /* 0x10000 ("1:") */
	uint32_t netem_parent;      /* 0x10001 (tbf) or 0x10010 (htb) */
} ql_shape_result;

/* The names a caller's spec gives the shaper's fields, for errors. */
typedef struct ql_shape_names {
	const char *kind, *rate, *ceil, *burst, *cburst, *limit, *latency;
} ql_shape_names;

/* qoslab.shape's own: "spec.kind", "spec.rate_bps", ... */
extern const ql_shape_names ql_shape_spec_names;

/* Bytes of link-layer header a frame carries in the qdisc besides the MTU
 * (Ethernet's, as on veth); a tbf limit below MTU + this drops every full
 * frame. */
#define QL_SHAPE_FRAME_HEADER_BYTES 14u

/* The rules of a shaper spec that need no device: kind, rate, the fields
 * each kind takes, latency or limit, ceil at least rate. A violation is
 * ql_err_usage naming the spec field. (The rules that need the link's MTU
 * are ql_shape_resolve's.) ql_shape_validate names the fields as
 * ql_shape_spec_names. */
int ql_shape_validate_named(const ql_shape *s, const ql_shape_names *n, ql_err *e);
int ql_shape_validate(const ql_shape *s, ql_err *e);

/* The rest of the rules, given the MTU of the link (`link` names it in
 * errors): the burst at least the MTU and drained within the kernel's
 * longest bucket time (likewise cburst at the ceil), the tbf limit (rate *
 * latency + burst within 4 GiB, or a given limit_bytes at least one
 * MTU-sized frame). Fills the defaults into *s as ql_shape_apply sends
 * them (burst, cburst, ceil, limit; latency_us becomes 0) and the buckets
 * in kernel ticks. Needs no device: a caller that knows the MTU a link
 * will have can refuse a spec before making anything. */
int ql_shape_resolve(ql_shape *s, uint32_t mtu, const char *link, const ql_shape_names *n,
		     uint32_t *buf_ticks, uint32_t *cbuf_ticks, ql_err *e);

/* Create or atomically replace the root rate limit of ifname. Validates
 * first. A qdisc
 * already attached under the same shaper (netem at the parent above) stays.
 * Fills the effective values into *applied when non-NULL. */
int ql_shape_apply(const char *ifname, const char *netns, const ql_shape *s,
		   ql_shape_result *r, ql_shape *applied, ql_err *e);

/* Read the root rate limit back. *found = 0 (and *out zeroed) when the root
 * qdisc is not a tbf or htb in the shape apply makes. */
int ql_shape_get(const char *ifname, const char *netns, ql_shape *out, int *found,
		 ql_err *e);

/* Put the shaper's own default child back under it (atomically replacing
 * whatever qdisc, e.g. netem, sits there): tbf gets a bfifo of the tbf's
 * byte limit at 1:1, htb a pfifo of the device's txqueuelen at 1:10. This is
 * how an impairment under a shaper is removed: deleting the child instead
 * would leave tbf with a qdisc that drops everything. -ENOENT when the root
 * is not a shaper made by ql_shape_apply. */
int ql_shape_reset_child(const char *ifname, const char *netns, ql_err *e);

/* Remove the root qdisc (and so any netem child). No root qdisc: 0. */
int ql_shape_clear(const char *ifname, const char *netns, ql_err *e);

typedef struct ql_qdisc_stats {
	char kind[16];
	uint32_t handle, parent;    /* parent 0xffffffff = root */
	uint64_t bytes, packets, drops, overlimits, requeues;
	uint64_t backlog_bytes, qlen_packets;
} ql_qdisc_stats;

/* Counters of every qdisc on ifname (root first), up to max entries. */
int ql_qdisc_stats_get(const char *ifname, const char *netns, ql_qdisc_stats *out,
		       size_t max, size_t *count, ql_err *e);

/* "1:", "1:10", "root", "none": tc's spelling of a handle. */
void ql_tc_handle_str(uint32_t h, char *buf, size_t len);

#endif
