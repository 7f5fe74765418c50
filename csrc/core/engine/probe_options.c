/*
 * probe_options.c - the rules of the latency probe's options (probe.h,
 * probe_options.h): the key table the binding converts a Lua table by, and
 * ql_probe_opts_validate, in options.c's words. Stands on options.h (the
 * key table's shape), probe.h, probe_wire.h and netns.h.
 */
#include "probe_options.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../netns.h"
#include "probe_wire.h"

#define PO ql_probe_opts
#define ALONE QL_OPT_PROBE_ALONE
const ql_opt_desc ql_probe_opt_desc[] = {
	{ "host", QL_OPT_STR, ALONE, offsetof(PO, host), 0, 0, 0, 0, "a host name or address" },
	{ "port", QL_OPT_INT, 0, offsetof(PO, port), 1, 65535, 0, 0, NULL },
	{ "proto", QL_OPT_STR, 0, offsetof(PO, proto), 0, 0, 0, 0,
	  "one of \"udp\", \"icmp\", \"tcp\"" },
	{ "interval_ms", QL_OPT_DBL, 0, offsetof(PO, interval_ms), 0, 0, 1, 60000, NULL },
	{ "tos", QL_OPT_INT, 0, offsetof(PO, tos), 0, 255, 0, 0, NULL },
	{ "payload_bytes", QL_OPT_INT, 0, offsetof(PO, payload_bytes), 1, QL_PROBE_MAX_BYTES,
	  0, 0, NULL },
	{ "idle_s", QL_OPT_DBL, 0, offsetof(PO, idle_s), 0, 0, 0, 3600, NULL },
	{ "timeout_ms", QL_OPT_DBL, 0, offsetof(PO, timeout_ms), 0, 0, 1, 60000, NULL },
	{ "clock_synced", QL_OPT_BOOL, 0, offsetof(PO, clock_synced), 0, 0, 0, 0, NULL },
	{ "duration_s", QL_OPT_DBL, ALONE, offsetof(PO, duration_s), 0, 0, 0.001, 86400, NULL },
	{ "netns", QL_OPT_STR, ALONE, offsetof(PO, netns), 0, 0, 0, 0, NULL },
	{ "bind_address", QL_OPT_STR, ALONE, offsetof(PO, bind_address), 0, 0, 0, 0, NULL },
	{ NULL, 0, 0, 0, 0, 0, 0, 0, NULL }
};
#undef PO
#undef ALONE

const char *const ql_probe_proto_names[] = { "udp", "icmp", "tcp", NULL };

void ql_probe_opts_init(ql_probe_opts *o)
{
	memset(o, 0, sizeof *o);
	o->tos = -1;
	o->idle_s = -1;
	o->clock_synced = -1;
}

int ql_probe_proto_of(const char *name)
{
	if (!name)
		return QL_PROBE_UDP;
	for (int i = 0; ql_probe_proto_names[i]; i++)
		if (strcmp(name, ql_probe_proto_names[i]) == 0)
			return i;
	return -1;
}

void ql_probe_payload_range(int proto, int *min, int *max)
{
	*min = proto == QL_PROBE_ICMP ? QL_PROBE_ICMP_DATA_BYTES : QL_PROBE_HDR_BYTES;
	*max = proto == QL_PROBE_ICMP ? QL_PROBE_MAX_BYTES - 8 : QL_PROBE_MAX_BYTES;
}

static int bad_dbl(const char *prefix, const char *key, double v, double lo, double hi,
		   ql_err *e)
{
	char got[40];
	if (isnan(v))
		snprintf(got, sizeof got, "nan");
	else
		snprintf(got, sizeof got, "%.15g", v);
	return ql_err_usage(e, "%s.%s: expected a finite number in [%.15g, %.15g], got %s",
			    prefix, key, lo, hi, got);
}

static int bad_int(const char *prefix, const char *key, int64_t v, int64_t lo, int64_t hi,
		   const char *tail, ql_err *e)
{
	return ql_err_usage(e, "%s.%s: expected an integer in [%" PRId64 ", %" PRId64 "]%s, "
			    "got %" PRId64, prefix, key, lo, hi, tail, v);
}

#define TRY(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

int ql_probe_opts_validate(const ql_probe_opts *o, int standalone, const char *prefix,
			   ql_err *e)
{
	int proto = ql_probe_proto_of(o->proto);
	if (proto < 0)
		return ql_err_usage(e, "%s.proto: expected one of \"udp\", \"icmp\", \"tcp\", "
				    "got string \"%s\"", prefix, o->proto);
	if (o->port && (o->port < 1 || o->port > 65535))
		return bad_int(prefix, "port", o->port, 1, 65535, "", e);
	if (o->interval_ms != 0 && !(o->interval_ms >= 1 && o->interval_ms <= 60000))
		return bad_dbl(prefix, "interval_ms", o->interval_ms, 1, 60000, e);
	if (o->tos != -1 && (o->tos < 0 || o->tos > 255))
		return bad_int(prefix, "tos", o->tos, 0, 255, "", e);
	int pmin, pmax;
	ql_probe_payload_range(proto, &pmin, &pmax);
	if (o->payload_bytes && (o->payload_bytes < pmin || o->payload_bytes > pmax)) {
		char tail[32];
		snprintf(tail, sizeof tail, " for %s", ql_probe_proto_names[proto]);
		return bad_int(prefix, "payload_bytes", o->payload_bytes, pmin, pmax, tail, e);
	}
	if (o->idle_s != -1 && !(o->idle_s >= 0 && o->idle_s <= 3600))
		return bad_dbl(prefix, "idle_s", o->idle_s, 0, 3600, e);
	if (o->timeout_ms != 0 && !(o->timeout_ms >= 1 && o->timeout_ms <= 60000))
		return bad_dbl(prefix, "timeout_ms", o->timeout_ms, 1, 60000, e);
	if (o->duration_s != 0 && !(o->duration_s >= 0.001 && o->duration_s <= 86400))
		return bad_dbl(prefix, "duration_s", o->duration_s, 0.001, 86400, e);
	if (standalone && (!o->host || !*o->host))
		return ql_err_usage(e, "%s.host: expected a host name or address, got %s", prefix,
				    o->host ? "string \"\"" : "nil");
	if (o->netns) {
		char field[64];
		snprintf(field, sizeof field, "%s.netns", prefix);
		TRY(ql_netns_check_name(field, o->netns, e));
	}
	if (o->bind_address && !*o->bind_address)
		return ql_err_usage(e, "%s.bind_address: expected a non-empty string, got string "
				    "\"\"", prefix);
	if (o->proto && !*o->proto)
		return ql_err_usage(e, "%s.proto: expected one of \"udp\", \"icmp\", \"tcp\", got "
				    "string \"\"", prefix);
	return 0;
}
