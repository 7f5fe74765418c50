/*
 * options.h - the rules of the traffic client and server options, written
 * once: each key with its kind, range and place in ql_client_opts /
 * ql_server_opts (the table the binding converts a Lua table by), and the
 * validate functions that check a filled struct (ranges and cross-field
 * rules), run by ql_client_start / ql_server_start and by the binding's
 * check-only calls. Every message is "opts.<key>: expected <what>, got
 * <value>" or "opts.<key>: <rule>". Stands on engine.h.
 */
#ifndef QL_ENGINE_OPTIONS_H
#define QL_ENGINE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "engine.h"

/* Kinds of a key: the C type at its offset. */
enum {
	QL_OPT_STR,     /* const char *, NULL = not given */
	QL_OPT_INT,     /* int */
	QL_OPT_I64,     /* int64_t */
	QL_OPT_U64,     /* uint64_t */
	QL_OPT_DBL,     /* double, finite */
	QL_OPT_BOOL,    /* int 0/1 (-1 = not given, where the struct says so) */
	QL_OPT_PROTO,   /* int QL_PROTO_*, given as "tcp" | "udp" */
	QL_OPT_TOS_LIST, /* ql_tos_list, given as a list of 1..128 integers in [0, 255] */
	QL_OPT_CPU_LIST  /* ql_cpu_list, given as an integer or a list of 1..128 in [0, 1023] */
};

/* Flags of a key. */
#define QL_OPT_REQUIRED 1u     /* must be given (opts.host) */
#define QL_OPT_ZERO_ANY 2u     /* 0 given is stored as -1 (server port: any free port) */
#define QL_OPT_GIVEN_BPS 4u    /* given sets ql_client_opts.bitrate_set */
#define QL_OPT_UDP_LEN 8u      /* the range is the UDP payload's with proto "udp" */

typedef struct ql_opt_desc {
	const char *key;
	int kind;
	unsigned flags;
	size_t offset;               /* in the options struct */
	int64_t imin, imax;          /* integer kinds: a given value's range */
	double dmin, dmax;           /* QL_OPT_DBL: a given value's range */
	const char *expect;          /* QL_OPT_STR: what a value must be (NULL = a string) */
} ql_opt_desc;

/* The keys of ql_client_opts / ql_server_opts, ended by key == NULL; proto
 * comes before length_bytes (whose range depends on it). */
extern const ql_opt_desc ql_client_opt_desc[];
extern const ql_opt_desc ql_server_opt_desc[];

/* The proto names, indexed by QL_PROTO_*, NULL-ended. */
extern const char *const ql_proto_names[];

/* What a given value of d must be, as every message words it: "an integer
 * in [1, 128]", "a finite number in [0.001, 86400]", "an integer in [16,
 * 65507] for UDP" (length_bytes with proto QL_PROTO_UDP), "a boolean", ...
 * Integer kinds also give their range in *min / *max (may be NULL). */
const char *ql_opt_expected(const ql_opt_desc *d, int proto, char *buf, size_t len,
			    int64_t *min, int64_t *max);

/*
 * Every rule of a filled ql_client_opts / ql_server_opts: the ranges of the
 * table above (a value at its "not given" default passes), the strings'
 * rules (host, netns, congestion name syntax, bind_device, no empty
 * strings) and the cross-field rules (one end condition; packets, the UDP
 * options and the UDP payload range only with UDP; the TCP options not with
 * UDP; bidir not with reverse; window_bytes not with sndbuf/rcvbuf_bytes;
 * tos_per_stream has one entry per stream (parallel) and not with tos).
 * A violation is ql_err_usage naming the field; 0 when all hold. Touches
 * nothing else (whether this kernel has the congestion control is
 * ql_tcp_ca_check_available's, at start).
 */
int ql_client_opts_validate(const ql_client_opts *o, ql_err *e);
int ql_server_opts_validate(const ql_server_opts *o, ql_err *e);

#endif
