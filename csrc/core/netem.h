/*
 * netem.h - the kernel's network emulator qdisc (sch_netem) over rtnetlink.
 *
 * The spec is kept in the kernel's own units: nanoseconds, probabilities as
 * u32 fractions (QL_FRAC32_ONE = 100 %), bytes per second. Encoding follows
 * iproute2's tc/q_netem.c and the kernel's netem_change(): TCA_OPTIONS holds
 * struct tc_netem_qopt ("compat" form) followed by nested attributes; times
 * go in LATENCY64/JITTER64 (ns) while the qopt fields carry psched ticks
 * (64 ns); RATE64 is added only at >= 2^32 B/s with the u32 field saturated.
 *
 * netem_change() leaves state it is not told about (rate, correlations,
 * reorder, corrupt, ECN, slot) as it was, so every encoding sends all of
 * them, zero meaning "off": a replace therefore always yields exactly the
 * spec. Distribution tables cannot be removed by a change; when a netem
 * already exists and the spec has jitter but no table, a generated uniform
 * table is sent (the kernel's table-less behaviour, quantised to 1/4096).
 */
#ifndef QL_NETEM_H
#define QL_NETEM_H

#include <stddef.h>
#include <stdint.h>

#include <netlink/msg.h>

#include "err.h"

#define QL_FRAC32_ONE 4294967295u     /* 100 % */
#define QL_NETEM_DIST_MAX 16384       /* kernel NETEM_DIST_MAX entries */
#define QL_NETEM_DIST_SCALE 8192      /* kernel NETEM_DIST_SCALE */

enum ql_netem_loss_model {
	QL_NETEM_LOSS_RANDOM = 0,  /* loss_frac32 with loss_corr_frac32 */
	QL_NETEM_LOSS_STATE,       /* 4-state Markov (NETEM_LOSS_GI) */
	QL_NETEM_LOSS_GEMODEL,     /* Gilbert-Elliott (NETEM_LOSS_GE) */
};

typedef struct ql_netem_spec {
	int64_t delay_ns;              /* >= 0 */
	int64_t jitter_ns;             /* 0..INT32_MAX (kernel caps there) */
	uint32_t delay_corr_frac32;
	const int16_t *dist;           /* delay table (borrowed), NULL = uniform */
	size_t dist_len;               /* 1..QL_NETEM_DIST_MAX */

	int loss_model;                /* enum ql_netem_loss_model */
	uint32_t loss_frac32, loss_corr_frac32;
	/* 4-state model, kernel fields as-is */
	uint32_t state_p13_frac32, state_p31_frac32, state_p32_frac32,
		 state_p23_frac32, state_p14_frac32;
	/* Gilbert-Elliott, kernel fields as-is: ge_h_frac32 is h (success in
	 * the bad state), i.e. QL_FRAC32_ONE minus tc's "1-h"; ge_k1_frac32 is
	 * tc's "1-k" (loss in the good state) unchanged. */
	uint32_t ge_p_frac32, ge_r_frac32, ge_h_frac32, ge_k1_frac32;

	uint32_t duplicate_frac32, duplicate_corr_frac32;
	uint32_t reorder_frac32, reorder_corr_frac32;
	uint32_t reorder_gap_packets;
	uint32_t corrupt_frac32, corrupt_corr_frac32;

	uint64_t rate_bytes_per_s;     /* 0 = no rate limit */
	/* Not a kernel field: keep packets in order under jitter, which netem
	 * does whenever it has a rate (each packet is scheduled after the one
	 * queued last). qoslab.netem turns it into rate_bytes_per_s (the link
	 * speed) before building; ql_netem_build refuses it without a rate. */
	int keep_order;                /* 0/1 */
	int32_t packet_overhead_bytes;
	uint32_t cell_size_bytes;
	int32_t cell_overhead_bytes;

	/* slot: either min/max delay, or dist_delay/dist_jitter with slot_dist */
	int64_t slot_min_delay_ns, slot_max_delay_ns;
	int64_t slot_dist_delay_ns, slot_dist_jitter_ns;
	int32_t slot_max_packets, slot_max_bytes;  /* 0 = unlimited */
	const int16_t *slot_dist;      /* borrowed, NULL = none */
	size_t slot_dist_len;

	int ecn;                       /* 0/1 */
	uint32_t limit_packets;        /* >= 1 */
	int has_seed;                  /* seed sent / read back */
	uint64_t seed;
} ql_netem_spec;

/* Where a qdisc sits. */
typedef struct ql_qdisc_target {
	const char *netns;   /* NULL/"" = this namespace */
	const char *ifname;
	uint32_t parent;     /* TC_H_ROOT or a class handle MAJ:MIN */
	uint32_t handle;     /* MAJ:0, or 0 to let the kernel choose */
} ql_qdisc_target;

/* Qdisc counters (TCA_STATS2), all widened to 64 bits. */
typedef struct ql_qdisc_stats {
	uint64_t packets, bytes, drops, overlimits, requeues;
	uint64_t backlog_bytes, backlog_packets;
} ql_qdisc_stats;

/* A netem qdisc as read from the kernel. */
typedef struct ql_netem_info {
	uint32_t handle, parent;
	ql_netem_spec spec;     /* dist/slot_dist are NULL (never dumped) */
	ql_qdisc_stats stats;
} ql_netem_info;

/* percent (0..100) -> u32 fraction, as iproute2: rint(pct/100 * UINT32_MAX). */
uint32_t ql_netem_pct_to_frac32(double pct);
/* u32 fraction -> percent, exact inverse up to rounding. */
double ql_netem_frac32_to_pct(uint32_t frac);
/* The shortest decimal percent that encodes to the same u32 (5 %, not
 * 4.99999999906 %): how percentages are read back. */
double ql_netem_frac32_to_short_pct(uint32_t frac);
/* ns -> psched ticks for the compat qopt fields (saturated at UINT32_MAX). */
uint32_t ql_netem_ns_to_ticks(int64_t ns);

/* Zero spec with the kernel's neutral values (limit 1000, 4-state/GE unset). */
void ql_netem_spec_init(ql_netem_spec *s);

/*
 * Where a netem goes, as a caller names it (the Lua API's opts). parent is
 * "root" or a class "MAJ:MIN", handle NULL or "MAJ:" (hex digits only, as
 * tc prints them); ingress puts the netem on the device's ifb, which only
 * has a root, and only there may ingress_src (NULL = none) pick a source.
 * with_handle = 0 where a handle means nothing (get, stats, clear).
 */
typedef struct ql_netem_where {
	const char *parent;        /* NULL = "root" */
	const char *handle;        /* NULL = the kernel chooses */
	int ingress;               /* 0 = egress */
	const char *ingress_src;   /* "ADDR" or "ADDR/PREFIX", or NULL */
} ql_netem_where;

/* Parse and check w: the tc handles go to *parent and *handle (handle 0
 * when none). A violation is ql_err_usage naming the opts field. */
int ql_netem_where_check(const ql_netem_where *w, int with_handle,
			 uint32_t *parent, uint32_t *handle, ql_err *e);

/* Cross-field and range rules; a violation is ql_err_usage naming the spec
 * field in the Lua API's terms ("spec.reorder_pct: ..."). */
int ql_netem_validate(const ql_netem_spec *s, ql_err *e);

/*
 * Build an RTM_NEWQDISC (flags NLM_F_CREATE|NLM_F_REPLACE) message for the
 * spec. uniform_fill: when the spec has jitter but no table, send a generated
 * uniform table (to overwrite a table a previous netem may hold). *out is
 * freed by the caller with nlmsg_free. Validates first.
 */
int ql_netem_build(struct nl_msg **out, int ifindex, uint32_t parent,
		   uint32_t handle, const ql_netem_spec *s, int uniform_fill,
		   ql_err *e);

/*
 * Decode a qdisc message (RTM_NEWQDISC reply). Returns 1 if it is a netem
 * qdisc (info filled), 0 if another kind (info->handle/parent filled), or a
 * negative errno (EPROTO: malformed). Every length is checked.
 */
int ql_netem_decode(const struct nlmsghdr *h, int *ifindex, char *kind,
		    size_t kind_cap, ql_netem_info *info, ql_err *e);

/* Decode just the TCA_OPTIONS payload of a netem qdisc. */
int ql_netem_decode_options(const void *data, size_t len, ql_netem_spec *s,
			    ql_err *e);

/* Create or atomically replace the netem at t (never delete-then-add). */
int ql_netem_apply(const ql_qdisc_target *t, const ql_netem_spec *s, ql_err *e);

/*
 * ql_netem_apply that also reports, from the same socket, what was at t
 * before (*before_found as ql_netem_get's *found, before_kind the kind of a
 * non-netem qdisc there, "" when none) and what the kernel holds afterwards
 * (*after_found, *after). One socket and namespace switch instead of three.
 */
int ql_netem_apply_checked(const ql_qdisc_target *t, const ql_netem_spec *s,
			   int *before_found, char *before_kind, size_t kind_cap,
			   ql_netem_info *after, int *after_found, ql_err *e);

/* Read the netem at t: *found = 0 when the qdisc there is absent or is not
 * netem (kind, if any, is copied to other_kind). */
int ql_netem_get(const ql_qdisc_target *t, ql_netem_info *info, int *found,
		 char *other_kind, size_t kind_cap, ql_err *e);

/* Delete the netem at t; *removed = 0 (and success) if there was none. */
int ql_netem_clear(const ql_qdisc_target *t, int *removed, ql_err *e);

/*
 * Load an iproute2 distribution table "<name>.dist" from the first of
 * /usr/lib/x86_64-linux-gnu/tc, /usr/lib/tc, /usr/share/tc, /usr/local/lib/tc
 * (or $TC_LIB_DIR first) into buf (cap entries). Format: '#' comment lines,
 * whitespace-separated integers in [-32768, 32767].
 */
int ql_netem_load_dist(const char *name, int16_t *buf, size_t cap, size_t *len,
		       ql_err *e);

/* Fill out[0..n) with a uniform table over [-SCALE, SCALE] (n >= 1). */
void ql_netem_uniform_table(int16_t *out, size_t n);

/* Link speed in Mbit/s from the ethtool ioctl (what /sys/class/net/DEV/speed
 * shows) inside netns; *mbps = -1 when the driver reports none. */
int ql_link_speed_mbps(const char *netns, const char *ifname, int64_t *mbps,
		       ql_err *e);

/* Parse "root" / "MAJ:MIN" / "MAJ:" (hex, as tc) into a handle. Returns 0 or
 * -EINVAL. */
int ql_tc_handle_parse(const char *s, uint32_t *out);

#endif
