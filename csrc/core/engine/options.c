/*
 * options.c - the rules of the traffic options (options.h): the key tables
 * and the validate functions. Ranges follow the kernel's limits: setsockopt
 * takes an int for buffer sizes; TCP_MAXSEG accepts 88..32767 (TCP_MIN_MSS,
 * MAX_TCP_WINDOW); UDP payloads are 16 (qoslab's 64-bit header) to 65507
 * (65535 - IP and UDP headers); sendmmsg takes at most UIO_MAXIOV (1024)
 * messages; interface names fit in 15 characters (IFNAMSIZ). Stands on
 * engine.h, and on netns.h and tcpca.h for the syntax of those names.
 */
#include "options.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../netns.h"
#include "../tcpca.h"

#define INT_OPT(k, st, f, lo, hi, fl) \
	{ k, QL_OPT_INT, fl, offsetof(st, f), lo, hi, 0, 0, NULL }
#define I64_OPT(k, st, f, lo, hi) \
	{ k, QL_OPT_I64, 0, offsetof(st, f), lo, hi, 0, 0, NULL }
#define U64_OPT(k, st, f, lo, hi, fl) \
	{ k, QL_OPT_U64, fl, offsetof(st, f), lo, hi, 0, 0, NULL }
#define DBL_OPT(k, st, f, lo, hi) \
	{ k, QL_OPT_DBL, 0, offsetof(st, f), 0, 0, lo, hi, NULL }
#define BOOL_OPT(k, st, f) \
	{ k, QL_OPT_BOOL, 0, offsetof(st, f), 0, 0, 0, 0, NULL }
#define STR_OPT(k, st, f, fl, what) \
	{ k, QL_OPT_STR, fl, offsetof(st, f), 0, 0, 0, 0, what }

#define BUF_MAX INT32_MAX           /* setsockopt's int */
#define COUNT_MAX ((int64_t)1 << 62)
#define BPS_MAX ((int64_t)1 << 50)
#define TCP_LEN_MAX (1 << 24)

#define CO ql_client_opts
const ql_opt_desc ql_client_opt_desc[] = {
	STR_OPT("host", CO, host, QL_OPT_REQUIRED, "a host name or address"),
	INT_OPT("port", CO, port, 1, 65535, 0),
	{ "proto", QL_OPT_PROTO, 0, offsetof(CO, proto), 0, 0, 0, 0, NULL },
	INT_OPT("parallel", CO, parallel, 1, QL_PARALLEL_MAX, 0),
	DBL_OPT("duration_s", CO, duration_s, 0.001, 86400),
	U64_OPT("bytes", CO, bytes, 1, COUNT_MAX, 0),
	U64_OPT("packets", CO, packets, 1, COUNT_MAX, 0),
	BOOL_OPT("reverse", CO, reverse),
	BOOL_OPT("bidir", CO, bidir),
	DBL_OPT("omit_s", CO, omit_s, 0, 3600),
	DBL_OPT("interval_s", CO, interval_s, 0.1, 3600),
	I64_OPT("window_bytes", CO, window_bytes, 1, BUF_MAX),
	I64_OPT("sndbuf_bytes", CO, sndbuf_bytes, 1, BUF_MAX),
	I64_OPT("rcvbuf_bytes", CO, rcvbuf_bytes, 1, BUF_MAX),
	U64_OPT("bitrate_bps", CO, bitrate_bps, 0, BPS_MAX, QL_OPT_GIVEN_BPS),
	INT_OPT("length_bytes", CO, length_bytes, 1, TCP_LEN_MAX, QL_OPT_UDP_LEN),
	STR_OPT("congestion", CO, congestion, 0, NULL),
	INT_OPT("mss_bytes", CO, mss_bytes, 88, 32767, 0),
	INT_OPT("tos", CO, tos, 0, 255, 0),
	{ "tos_per_stream", QL_OPT_TOS_LIST, 0, offsetof(CO, tos_per_stream), 0, 255, 0, 0,
	  NULL },
	BOOL_OPT("nodelay", CO, nodelay),
	BOOL_OPT("skip_rx_copy", CO, skip_rx_copy),
	BOOL_OPT("zerocopy", CO, zerocopy),
	{ "cpu_affinity", QL_OPT_CPU_LIST, 0, offsetof(CO, cpu_affinity), 0, QL_CPU_ID_MAX, 0, 0,
	  NULL },
	{ "server_cpu_affinity", QL_OPT_CPU_LIST, 0, offsetof(CO, server_cpu_affinity), 0,
	  QL_CPU_ID_MAX, 0, 0, NULL },
	U64_OPT("fq_rate_bps", CO, fq_rate_bps, 1, BPS_MAX, 0),
	STR_OPT("bind_address", CO, bind_address, 0, NULL),
	STR_OPT("bind_device", CO, bind_device, 0, NULL),
	STR_OPT("netns", CO, netns, 0, NULL),
	DBL_OPT("connect_timeout_s", CO, connect_timeout_s, 0.001, 3600),
	INT_OPT("udp_batch", CO, udp_batch, 1, QL_UDP_BATCH_MAX, 0),
	BOOL_OPT("udp_gso", CO, udp_gso),
	DBL_OPT("udp_drain_s", CO, udp_drain_s, 0, 60),
	STR_OPT("title", CO, title, 0, NULL),
	{ NULL, 0, 0, 0, 0, 0, 0, 0, NULL }
};
#undef CO

#define SO ql_server_opts
const ql_opt_desc ql_server_opt_desc[] = {
	INT_OPT("port", SO, port, 0, 65535, QL_OPT_ZERO_ANY),
	STR_OPT("bind_address", SO, bind_address, 0, NULL),
	STR_OPT("netns", SO, netns, 0, NULL),
	BOOL_OPT("one_off", SO, one_off),
	I64_OPT("window_bytes", SO, window_bytes, 1, BUF_MAX),
	I64_OPT("sndbuf_bytes", SO, sndbuf_bytes, 1, BUF_MAX),
	I64_OPT("rcvbuf_bytes", SO, rcvbuf_bytes, 1, BUF_MAX),
	DBL_OPT("idle_timeout_s", SO, idle_timeout_s, 0.001, 86400),
	INT_OPT("max_tests", SO, max_tests, 1, 4096, 0),
	INT_OPT("keep_results", SO, keep_results, 0, QL_KEEP_RESULTS_MAX, 0),
	INT_OPT("max_tests_per_address", SO, max_tests_per_address, 1, 4096, 0),
	INT_OPT("max_streams_per_address", SO, max_streams_per_address, 1, 65536, 0),
	INT_OPT("max_unidentified", SO, max_unidentified, 1, 65536, 0),
	INT_OPT("max_unidentified_per_address", SO, max_unidentified_per_address, 1, 65536, 0),
	DBL_OPT("data_idle_s", SO, data_idle_s, 0.001, 86400),
	DBL_OPT("max_duration_s", SO, max_duration_s, 0.001, 2678400),
	I64_OPT("test_buffer_bytes", SO, test_buffer_bytes, 1, (int64_t)1 << 40),
	{ NULL, 0, 0, 0, 0, 0, 0, 0, NULL }
};
#undef SO

const char *const ql_proto_names[] = { "tcp", "udp", NULL };

const char *ql_opt_expected(const ql_opt_desc *d, int proto, char *buf, size_t len,
			    int64_t *min, int64_t *max)
{
	int64_t lo = d->imin, hi = d->imax;
	const char *tail = "";
	if ((d->flags & QL_OPT_UDP_LEN) && proto == QL_PROTO_UDP) {
		lo = QL_UDP_MIN_BYTES;
		hi = QL_UDP_MAX_BYTES;
		tail = " for UDP";
	}
	if (min)
		*min = lo;
	if (max)
		*max = hi;
	switch (d->kind) {
	case QL_OPT_INT:
	case QL_OPT_I64:
	case QL_OPT_U64:
		snprintf(buf, len, "an integer in [%" PRId64 ", %" PRId64 "]%s", lo, hi, tail);
		break;
	case QL_OPT_DBL:
		snprintf(buf, len, "a finite number in [%.15g, %.15g]", d->dmin, d->dmax);
		break;
	case QL_OPT_BOOL:
		snprintf(buf, len, "a boolean");
		break;
	case QL_OPT_PROTO:
		snprintf(buf, len, "one of \"tcp\", \"udp\"");
		break;
	case QL_OPT_TOS_LIST:
		snprintf(buf, len, "a list of 1..%d integers in [0, 255]", QL_PARALLEL_MAX);
		break;
	case QL_OPT_CPU_LIST:
		snprintf(buf, len, "a CPU number in [0, %d] or a list of 1..%d of them", QL_CPU_ID_MAX,
			 QL_PARALLEL_MAX);
		break;
	default:
		snprintf(buf, len, "%s", d->expect ? d->expect : "a string");
		break;
	}
	return buf;
}

/* ------------------------------------------------------------ ranges -- */

static const ql_opt_desc *desc_of(const ql_opt_desc *t, const char *key)
{
	for (; t->key; t++)
		if (strcmp(t->key, key) == 0)
			return t;
	return NULL;
}

static int range_fail(const ql_opt_desc *d, int proto, const char *got, ql_err *e)
{
	char exp[96];
	return ql_err_usage(e, "opts.%s: expected %s, got %s", d->key,
			    ql_opt_expected(d, proto, exp, sizeof exp, NULL, NULL), got);
}

/* A value the struct holds for "not given" passes; so does one in range. */
static int check_int(const ql_opt_desc *t, const char *key, int proto, int64_t v,
		     int64_t unset, ql_err *e)
{
	const ql_opt_desc *d = desc_of(t, key);
	int64_t lo, hi;
	char exp[96], got[32];
	ql_opt_expected(d, proto, exp, sizeof exp, &lo, &hi);
	if (v == unset || (v >= lo && v <= hi))
		return 0;
	snprintf(got, sizeof got, "%" PRId64, v);
	return range_fail(d, proto, got, e);
}

static int check_u64(const ql_opt_desc *t, const char *key, uint64_t v, ql_err *e)
{
	const ql_opt_desc *d = desc_of(t, key);
	char got[32];
	if (v == 0 || (v >= (uint64_t)d->imin && v <= (uint64_t)d->imax))
		return 0;
	snprintf(got, sizeof got, "%" PRIu64, v);
	return range_fail(d, 0, got, e);
}

static int check_dbl(const ql_opt_desc *t, const char *key, double v, double unset,
		     ql_err *e)
{
	const ql_opt_desc *d = desc_of(t, key);
	char got[40];
	if (v == unset || (isfinite(v) && v >= d->dmin && v <= d->dmax))
		return 0;
	if (isnan(v))
		snprintf(got, sizeof got, "nan");
	else
		snprintf(got, sizeof got, "%.15g", v);
	return range_fail(d, 0, got, e);
}

static int check_nonempty(const char *key, const char *v, ql_err *e)
{
	if (v && !*v)
		return ql_err_usage(e, "opts.%s: expected a non-empty string, got string \"\"", key);
	return 0;
}

static int check_cpus(const char *key, const ql_cpu_list *l, ql_err *e)
{
	if (l->n < 0 || l->n > QL_PARALLEL_MAX)
		return ql_err_usage(e, "opts.%s: expected a CPU number in [0, %d] or a list of "
				    "1..%d of them, got %d entries", key, QL_CPU_ID_MAX,
				    QL_PARALLEL_MAX, l->n);
	for (int i = 0; i < l->n; i++)
		if (l->cpu[i] > QL_CPU_ID_MAX)
			return ql_err_usage(e, "opts.%s[%d]: expected a CPU number in [0, %d], "
					    "got %u", key, i + 1, QL_CPU_ID_MAX, l->cpu[i]);
	return 0;
}

/* ------------------------------------------------------------ client -- */

#define TRY(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

static int client_ranges(const ql_client_opts *o, ql_err *e)
{
	const ql_opt_desc *t = ql_client_opt_desc;
	int p = o->proto;
	if (p != QL_PROTO_TCP && p != QL_PROTO_UDP)
		return ql_err_usage(e, "opts.proto: expected one of \"tcp\", \"udp\", got %d", p);
	TRY(check_int(t, "port", p, o->port, INT64_MIN, e));
	TRY(check_int(t, "parallel", p, o->parallel, INT64_MIN, e));
	TRY(check_dbl(t, "duration_s", o->duration_s, 0, e));
	TRY(check_u64(t, "bytes", o->bytes, e));
	TRY(check_u64(t, "packets", o->packets, e));
	TRY(check_dbl(t, "omit_s", o->omit_s, 0, e));
	TRY(check_dbl(t, "interval_s", o->interval_s, NAN, e));
	TRY(check_int(t, "window_bytes", p, o->window_bytes, 0, e));
	TRY(check_int(t, "sndbuf_bytes", p, o->sndbuf_bytes, 0, e));
	TRY(check_int(t, "rcvbuf_bytes", p, o->rcvbuf_bytes, 0, e));
	TRY(check_u64(t, "bitrate_bps", o->bitrate_bps, e));
	TRY(check_int(t, "length_bytes", p, o->length_bytes, 0, e));
	TRY(check_int(t, "mss_bytes", p, o->mss_bytes, 0, e));
	TRY(check_int(t, "tos", p, o->tos, -1, e));
	if (o->tos_per_stream.n < 0 || o->tos_per_stream.n > QL_PARALLEL_MAX)
		return ql_err_usage(e, "opts.tos_per_stream: expected a list of 1..%d integers in "
				    "[0, 255], got %d entries", QL_PARALLEL_MAX, o->tos_per_stream.n);
	TRY(check_cpus("cpu_affinity", &o->cpu_affinity, e));
	TRY(check_cpus("server_cpu_affinity", &o->server_cpu_affinity, e));
	TRY(check_u64(t, "fq_rate_bps", o->fq_rate_bps, e));
	TRY(check_dbl(t, "connect_timeout_s", o->connect_timeout_s, 0, e));
	TRY(check_int(t, "udp_batch", p, o->udp_batch, 0, e));
	/* < 0: the default rule */
	TRY(check_dbl(t, "udp_drain_s", o->udp_drain_s < 0 ? -1 : o->udp_drain_s, -1, e));
	return 0;
}

static int client_strings(const ql_client_opts *o, ql_err *e)
{
	if (!o->host || !*o->host)
		return ql_err_usage(e, "opts.host: expected a host name or address, got %s",
				    o->host ? "string \"\"" : "nil");
	if (o->congestion)
		TRY(ql_tcp_ca_check_name("opts.congestion", o->congestion, e));
	if (o->bind_device && (!*o->bind_device || strlen(o->bind_device) > 15))
		return ql_err_usage(e, "opts.bind_device: expected an interface name (1..15 "
				    "characters), got string \"%s\"", o->bind_device);
	if (o->netns)
		TRY(ql_netns_check_name("opts.netns", o->netns, e));
	TRY(check_nonempty("bind_address", o->bind_address, e));
	TRY(check_nonempty("title", o->title, e));
	return 0;
}

static int client_rules(const ql_client_opts *o, ql_err *e)
{
	int udp = o->proto == QL_PROTO_UDP;
	if (o->duration_s > 0 && (o->bytes || o->packets))
		return ql_err_usage(e, "opts.duration_s: cannot be combined with opts.bytes or "
				    "opts.packets (one end condition)");
	if (o->bytes && o->packets)
		return ql_err_usage(e, "opts.packets: cannot be combined with opts.bytes (one end "
				    "condition)");
	if (o->packets && !udp)
		return ql_err_usage(e, "opts.packets: only for proto = \"udp\" (use opts.bytes for "
				    "TCP)");
	if (o->reverse && o->bidir)
		return ql_err_usage(e, "opts.bidir: cannot be combined with opts.reverse (bidir "
				    "already runs both directions)");
	if (o->tos_per_stream.n && o->tos >= 0)
		return ql_err_usage(e, "opts.tos_per_stream: cannot be combined with opts.tos (one "
				    "TOS for every stream, or one per stream)");
	if (o->tos_per_stream.n && o->tos_per_stream.n != o->parallel)
		return ql_err_usage(e, "opts.tos_per_stream: expected one entry per stream "
				    "(opts.parallel = %d), got %d", o->parallel, o->tos_per_stream.n);
	if (o->window_bytes && (o->sndbuf_bytes || o->rcvbuf_bytes))
		return ql_err_usage(e, "opts.window_bytes: sets both buffers; use it or "
				    "opts.sndbuf_bytes/opts.rcvbuf_bytes, not both");
	if (udp && (o->mss_bytes || o->congestion || o->nodelay >= 0 || o->skip_rx_copy >= 0 ||
		    o->zerocopy >= 0))
		return ql_err_usage(e, "opts.%s: a TCP option, not valid with proto = \"udp\"",
				    o->mss_bytes ? "mss_bytes" : o->congestion ? "congestion"
				    : o->nodelay >= 0 ? "nodelay" : o->skip_rx_copy >= 0
				    ? "skip_rx_copy" : "zerocopy");
	if (!udp && (o->udp_batch || o->udp_gso >= 0 || o->udp_drain_s >= 0))
		return ql_err_usage(e, "opts.%s: a UDP option, only valid with proto = \"udp\"",
				    o->udp_batch ? "udp_batch" : o->udp_gso >= 0 ? "udp_gso"
				    : "udp_drain_s");
	return 0;
}

int ql_client_opts_validate(const ql_client_opts *o, ql_err *e)
{
	TRY(client_ranges(o, e));
	TRY(client_strings(o, e));
	return client_rules(o, e);
}

/* ------------------------------------------------------------ server -- */

int ql_server_opts_validate(const ql_server_opts *o, ql_err *e)
{
	const ql_opt_desc *t = ql_server_opt_desc;
	/* -1 = any free port (0 given from Lua), 0 = the default port */
	if (o->port != -1)
		TRY(check_int(t, "port", 0, o->port, 0, e));
	TRY(check_dbl(t, "idle_timeout_s", o->idle_timeout_s, 0, e));
	TRY(check_int(t, "keep_results", 0, o->keep_results, INT64_MIN, e));
	TRY(check_int(t, "max_tests", 0, o->max_tests, 0, e));
	TRY(check_int(t, "max_tests_per_address", 0, o->max_tests_per_address, 0, e));
	TRY(check_int(t, "max_streams_per_address", 0, o->max_streams_per_address, 0, e));
	TRY(check_int(t, "max_unidentified", 0, o->max_unidentified, 0, e));
	TRY(check_int(t, "max_unidentified_per_address", 0, o->max_unidentified_per_address, 0, e));
	TRY(check_dbl(t, "data_idle_s", o->data_idle_s, 0, e));
	TRY(check_dbl(t, "max_duration_s", o->max_duration_s, 0, e));
	TRY(check_int(t, "test_buffer_bytes", 0, o->test_buffer_bytes, 0, e));
	TRY(check_int(t, "window_bytes", 0, o->window_bytes, 0, e));
	TRY(check_int(t, "sndbuf_bytes", 0, o->sndbuf_bytes, 0, e));
	TRY(check_int(t, "rcvbuf_bytes", 0, o->rcvbuf_bytes, 0, e));
	if (o->netns)
		TRY(ql_netns_check_name("opts.netns", o->netns, e));
	return check_nonempty("bind_address", o->bind_address, e);
}
