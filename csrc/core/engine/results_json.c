/*
 * results_json.c - the results object of the iperf3 control protocol:
 * iperf3's required keys plus the "qoslab" extras (per-stream totals with
 * every counter, interval series, warnings), encoded and parsed with cJSON.
 * The parser treats the peer as hostile: every key is type- and
 * range-checked and array sizes are capped. Stands on record.h,
 * results_json.h and proto.h (the message cap), not on the engine.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"
#include "record.h"
#include "results_json.h"

#define MAX_PEER_STREAMS 1024
#define MAX_PEER_INTERVALS 100000
#define MAX_PEER_ENTRIES 2048
#define MAX_PEER_WARNINGS 64

static int bad(ql_err *e, const char *key, const char *what)
{
	return ql_err_set(e, EPROTO, "EPROTO", "peer results: \"%s\": %s", key, what);
}

/* ------------------------------------------------------------ encode --- */

static void add_u64(cJSON *o, const char *k, uint64_t v)
{
	cJSON_AddNumberToObject(o, k, (double)v);
}

static void add_hist(cJSON *o, const char *k, const uint64_t *h, int n)
{
	cJSON *a = cJSON_AddArrayToObject(o, k);
	for (int i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)h[i]));
}

/* The path statistics as the entry's "udp_path": { counts, histograms as
 * arrays }. */
static void path_to_json(cJSON *o, const ql_udp_path *p)
{
	cJSON *j = cJSON_AddObjectToObject(o, "udp_path");
	if (!j)
		return;
	add_u64(j, "bursts", p->bursts);
	add_u64(j, "burst_packets", p->burst_packets);
	add_hist(j, "burst_hist", p->burst_hist, QL_BURST_BUCKETS);
	add_u64(j, "gaps", p->gaps);
	add_u64(j, "gap_packets", p->gap_packets);
	add_hist(j, "gap_hist", p->gap_hist, QL_GAP_BUCKETS);
	add_u64(j, "extent_packets", p->extent_packets);
	add_u64(j, "extent_sum", p->extent_sum);
	add_u64(j, "extent_max", p->extent_max);
	add_hist(j, "extent_hist", p->extent_hist, QL_EXTENT_BUCKETS);
}

cJSON *ql_entry_to_json(const ql_entry *x)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "id", x->id);
	cJSON_AddNumberToObject(o, "dir", x->dir);
	cJSON_AddNumberToObject(o, "role", x->role);
	cJSON_AddNumberToObject(o, "side", x->side);
	cJSON_AddNumberToObject(o, "valid", x->valid);
	add_u64(o, "bytes", x->bytes);
	cJSON_AddNumberToObject(o, "seconds", x->seconds);
	if (x->valid & QL_E_PACKETS)
		add_u64(o, "packets", x->packets);
	if (x->valid & QL_E_WRITES)
		add_u64(o, "writes", x->writes);
	if (x->valid & QL_E_RETRANS)
		add_u64(o, "retransmits", x->retransmits);
	if (x->valid & QL_E_RTT) {
		add_u64(o, "rtt_us", x->rtt_us);
		add_u64(o, "rttvar_us", x->rttvar_us);
	}
	if (x->valid & QL_E_CWND)
		add_u64(o, "snd_cwnd_bytes", x->snd_cwnd_bytes);
	if (x->valid & QL_E_SNDWND)
		add_u64(o, "snd_wnd_bytes", x->snd_wnd_bytes);
	if (x->valid & QL_E_PMTU)
		add_u64(o, "pmtu_bytes", x->pmtu_bytes);
	if (x->valid & QL_E_PACING)
		add_u64(o, "pacing_rate_bps", x->pacing_rate_bps);
	if (x->valid & QL_E_DELIVERY)
		add_u64(o, "delivery_rate_bps", x->delivery_rate_bps);
	if (x->valid & QL_E_UDPRX) {
		add_u64(o, "unique_packets", x->unique_packets);
		add_u64(o, "lost_packets", x->lost_packets);
		add_u64(o, "duplicate_packets", x->duplicate_packets);
		add_u64(o, "out_of_order_packets", x->out_of_order_packets);
		add_u64(o, "late_packets", x->late_packets);
		add_u64(o, "invalid_packets", x->invalid_packets);
	}
	if (x->valid & QL_E_JITTER)
		cJSON_AddNumberToObject(o, "jitter_ms", x->jitter_ms);
	if (x->valid & QL_E_JITMEAN) {
		add_u64(o, "jitter_pairs", x->jitter_pairs);
		cJSON_AddNumberToObject(o, "jitter_abs_sum_ms", x->jitter_abs_sum_ms);
	}
	if (x->valid & QL_E_RTTSUM) {
		add_u64(o, "min_rtt_us", x->min_rtt_us);
		add_u64(o, "max_rtt_us", x->max_rtt_us);
		add_u64(o, "mean_rtt_us", x->mean_rtt_us);
		add_u64(o, "max_snd_cwnd_bytes", x->max_snd_cwnd_bytes);
	}
	if (x->valid & QL_E_MAXWND)
		add_u64(o, "max_snd_wnd_bytes", x->max_snd_wnd_bytes);
	if (x->buf.present) {
		cJSON *b = cJSON_AddObjectToObject(o, "buf");
		if (b) {
			cJSON_AddNumberToObject(b, "requested_bytes", (double)x->buf.requested_bytes);
			cJSON_AddNumberToObject(b, "granted_bytes", (double)x->buf.granted_bytes);
			cJSON_AddBoolToObject(b, "clamped", x->buf.clamped);
			cJSON_AddStringToObject(b, "sysctl", x->buf.sysctl);
		}
	}
	return o;
}

static cJSON *interval_to_json(const ql_interval *iv)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "start_s", iv->start_s);
	cJSON_AddNumberToObject(o, "end_s", iv->end_s);
	cJSON_AddBoolToObject(o, "omitted", iv->omitted);
	cJSON *a = cJSON_AddArrayToObject(o, "entries");
	for (int i = 0; a && i < iv->nentries; i++)
		cJSON_AddItemToArray(a, ql_entry_to_json(&iv->entries[i]));
	return o;
}

char *ql_results_encode(const ql_peer_results *r, int extras)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "cpu_util_total", r->cpu_total_pct);
	cJSON_AddNumberToObject(o, "cpu_util_user", r->cpu_user_pct);
	cJSON_AddNumberToObject(o, "cpu_util_system", r->cpu_system_pct);
	cJSON_AddNumberToObject(o, "sender_has_retransmits", r->sender_has_retransmits);
	if (r->congestion_used[0])
		cJSON_AddStringToObject(o, "congestion_used", r->congestion_used);
	cJSON *a = cJSON_AddArrayToObject(o, "streams");
	for (int i = 0; a && i < r->nstreams; i++) {
		const ql_peer_stream *s = &r->streams[i];
		cJSON *j = cJSON_CreateObject();
		if (!j)
			break;
		cJSON_AddNumberToObject(j, "id", s->id);
		add_u64(j, "bytes", s->bytes);
		cJSON_AddNumberToObject(j, "retransmits", (double)s->retransmits);
		cJSON_AddNumberToObject(j, "jitter", s->jitter_s);
		cJSON_AddNumberToObject(j, "errors", (double)s->errors);
		cJSON_AddNumberToObject(j, "omitted_errors", (double)s->omitted_errors);
		add_u64(j, "packets", s->packets);
		add_u64(j, "omitted_packets", s->omitted_packets);
		cJSON_AddNumberToObject(j, "start_time", s->start_time_s);
		cJSON_AddNumberToObject(j, "end_time", s->end_time_s);
		cJSON_AddItemToArray(a, j);
	}
	if (extras) {
		cJSON *q = cJSON_AddObjectToObject(o, "qoslab");
		if (q) {
			cJSON_AddStringToObject(q, "version", QL_ENGINE_VERSION);
			cJSON_AddNumberToObject(q, "duration_s", r->duration_s);
			if (r->has_busiest)
				cJSON_AddNumberToObject(q, "busiest_thread_pct", r->busiest_thread_pct);
			if (r->cpus > 0)
				cJSON_AddNumberToObject(q, "cpus", r->cpus);
			if (r->boot_id[0])
				cJSON_AddStringToObject(q, "boot_id", r->boot_id);
			cJSON *t = cJSON_AddArrayToObject(q, "totals");
			for (int i = 0; t && i < r->nentries; i++) {
				cJSON *x = ql_entry_to_json(&r->entries[i]);
				if (x && r->paths && (r->entries[i].valid & QL_E_UDPPATH))
					path_to_json(x, &r->paths[i]);
				cJSON_AddItemToArray(t, x);
			}
			cJSON *iv = cJSON_AddArrayToObject(q, "intervals");
			for (int i = 0; iv && i < r->nintervals; i++)
				cJSON_AddItemToArray(iv, interval_to_json(&r->intervals[i]));
			cJSON *w = cJSON_AddArrayToObject(q, "warnings");
			for (int i = 0; w && i < r->nwarnings; i++)
				cJSON_AddItemToArray(w, cJSON_CreateString(r->warnings[i]));
		}
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/* ------------------------------------------------------------- parse --- */

/* Fetch an optional number in [lo, hi]; 1 if present, 0 absent, <0 error. */
static int getnum(const cJSON *o, const char *k, double lo, double hi,
		  double *v, ql_err *e)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!it || cJSON_IsNull(it))
		return 0;
	if (cJSON_IsBool(it)) {
		*v = cJSON_IsTrue(it);
	} else if (cJSON_IsNumber(it)) {
		*v = it->valuedouble;
	} else {
		return bad(e, k, "expected a number");
	}
	if (!isfinite(*v) || *v < lo || *v > hi)
		return ql_err_set(e, EPROTO, "EPROTO", "peer results: \"%s\": expected "
				  "%.15g..%.15g, got %.15g", k, lo, hi, *v);
	return 1;
}

/* iperf3 writes an unsigned -1 (2^64 - 1): as a double, exactly 2^64. */
#define U64_MINUS_ONE 18446744073709551616.0
#define COUNT_MAX ((double)QL_COUNT_MAX)

/* An optional counter: an integer in [lo, hi] (hi <= QL_COUNT_MAX), or
 * iperf3's -1 (2^64 - 1) where minus_one allows it. */
static int getcount(const cJSON *o, const char *k, double lo, double hi, int minus_one,
		    double *v, ql_err *e)
{
	int rc = getnum(o, k, -1e300, 1e300, v, e);
	if (rc <= 0)
		return rc;
	if (minus_one && *v == U64_MINUS_ONE)
		return 1;
	if (*v < 0 && lo >= 0)
		return bad(e, k, "expected an integer count, got a negative number");
	if (*v < lo || *v > hi || *v != floor(*v))
		return bad(e, k, hi >= COUNT_MAX ? "expected an integer count, at most 2^53"
						 : "expected a small integer");
	return 1;
}

/* A histogram: an array of exactly n integer counts. */
static int gethist(const cJSON *o, const char *k, uint64_t *h, int n, ql_err *e)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
		return bad(e, k, n == QL_BURST_BUCKETS ? "expected an array of 17 counts"
				 : n == QL_GAP_BUCKETS ? "expected an array of 16 counts"
				 : "expected an array of 13 counts");
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, a) {
		double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
		if (cJSON_IsNumber(it) && v < 0)
			return bad(e, k, "expected integer counts, got a negative number");
		if (!(v >= 0 && v <= COUNT_MAX) || v != floor(v))
			return bad(e, k, "expected integer counts, at most 2^53");
		h[i++] = (uint64_t)v;
	}
	return 0;
}

/* "udp_path" (all keys required once the object is there). */
static int path_from_json(const cJSON *j, ql_udp_path *p, ql_err *e)
{
	static const char *const keys[] = { "bursts", "burst_packets", "gaps", "gap_packets",
					     "extent_packets", "extent_sum", "extent_max" };
	uint64_t *dst[] = { &p->bursts, &p->burst_packets, &p->gaps, &p->gap_packets,
			    &p->extent_packets, &p->extent_sum, &p->extent_max };
	if (!cJSON_IsObject(j))
		return bad(e, "udp_path", "expected an object");
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		double v;
		int rc = getcount(j, keys[i], 0, COUNT_MAX, 0, &v, e);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return bad(e, keys[i], "missing in udp_path");
		*dst[i] = (uint64_t)v;
	}
	int rc;
	if ((rc = gethist(j, "burst_hist", p->burst_hist, QL_BURST_BUCKETS, e)) < 0 ||
	    (rc = gethist(j, "gap_hist", p->gap_hist, QL_GAP_BUCKETS, e)) < 0 ||
	    (rc = gethist(j, "extent_hist", p->extent_hist, QL_EXTENT_BUCKETS, e)) < 0)
		return rc;
	return 0;
}

/* The totals entries' "udp_path" objects (interval entries have none: a
 * peer's there are not read), after entries_from_json parsed them. */
static int paths_from_json(const cJSON *tots, ql_peer_results *pr, ql_err *e)
{
	int i = 0, rc;
	const cJSON *it;
	if (pr->nentries == 0)
		return 0;
	cJSON_ArrayForEach(it, tots) {
		const cJSON *up = cJSON_GetObjectItemCaseSensitive(it, "udp_path");
		if (up && !cJSON_IsNull(up)) {
			if (!pr->paths) {
				pr->paths = calloc((size_t)pr->nentries, sizeof *pr->paths);
				if (!pr->paths)
					return ql_err_set(e, ENOMEM, NULL, "out of memory");
			}
			if ((rc = path_from_json(up, &pr->paths[i], e)) < 0)
				return rc;
			pr->entries[i].valid |= QL_E_UDPPATH;
		}
		i++;
	}
	return 0;
}

/* A congestion control name as the kernel spells them (letters, digits,
 * '_', '-'): a peer's other text is not shown to anyone. */
static int ca_name_ok(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return 0;
	return 1;
}

/* max_s bounds an entry's seconds: the time the test ran. */
static int entry_from_json(const cJSON *o, ql_entry *x, double max_s, ql_err *e)
{
	memset(x, 0, sizeof *x);
	if (!cJSON_IsObject(o))
		return bad(e, "entries", "expected objects");
	double v;
	int rc;
#define G(key, lo, hi, stmt) do { \
		rc = getnum(o, key, lo, hi, &v, e); \
		if (rc < 0) \
			return rc; \
		if (rc) { \
			stmt; \
		} \
	} while (0)
#define GV(key, field, bit, hi) G(key, 0, hi, x->field = (typeof(x->field))v; x->valid |= (bit))
#define GC(key, field, bit) do { \
		rc = getcount(o, key, 0, COUNT_MAX, 0, &v, e); \
		if (rc < 0) \
			return rc; \
		if (rc) { \
			x->field = (uint64_t)v; \
			x->valid |= (bit); \
		} \
	} while (0)
	G("id", 0, 1e6, x->id = (int)v);
	G("dir", 0, 1, x->dir = (int)v);
	G("role", 0, 1, x->role = (int)v);
	G("side", 0, 1, x->side = (int)v);
	rc = getcount(o, "bytes", 0, COUNT_MAX, 0, &v, e);
	if (rc < 0)
		return rc;
	if (rc)
		x->bytes = (uint64_t)v;
	G("seconds", 0, max_s, x->seconds = v);
	GC("packets", packets, QL_E_PACKETS);
	GC("writes", writes, QL_E_WRITES);
	GC("retransmits", retransmits, QL_E_RETRANS);
	GV("rtt_us", rtt_us, QL_E_RTT, 4294967295.0);
	GV("rttvar_us", rttvar_us, QL_E_RTT, 4294967295.0);
	GC("snd_cwnd_bytes", snd_cwnd_bytes, QL_E_CWND);
	GV("snd_wnd_bytes", snd_wnd_bytes, QL_E_SNDWND, 4294967295.0);
	GV("pmtu_bytes", pmtu_bytes, QL_E_PMTU, 4294967295.0);
	/* rates from TCP_INFO: the kernel's "unlimited" (~0) leaves them out */
	G("pacing_rate_bps", 0, U64_MINUS_ONE, if (v <= COUNT_MAX) {
		x->pacing_rate_bps = (uint64_t)v;
		x->valid |= QL_E_PACING;
	});
	G("delivery_rate_bps", 0, U64_MINUS_ONE, if (v <= COUNT_MAX) {
		x->delivery_rate_bps = (uint64_t)v;
		x->valid |= QL_E_DELIVERY;
	});
	GC("unique_packets", unique_packets, QL_E_UDPRX);
	GC("lost_packets", lost_packets, QL_E_UDPRX);
	GC("duplicate_packets", duplicate_packets, QL_E_UDPRX);
	GC("out_of_order_packets", out_of_order_packets, QL_E_UDPRX);
	GC("late_packets", late_packets, QL_E_UDPRX);
	GC("invalid_packets", invalid_packets, QL_E_UDPRX);
	GV("jitter_ms", jitter_ms, QL_E_JITTER, 1e9);
	{
		/* the mean |D| needs both its parts */
		double pairs, sum;
		int rp = getcount(o, "jitter_pairs", 0, COUNT_MAX, 0, &pairs, e);
		if (rp < 0)
			return rp;
		/* at most 2^53 pairs of |D| < 2^63 ns: below 1e29 ms */
		int rs = getnum(o, "jitter_abs_sum_ms", 0, 1e30, &sum, e);
		if (rs < 0)
			return rs;
		if (rp != rs)
			return bad(e, rp ? "jitter_abs_sum_ms" : "jitter_pairs",
				   "missing (jitter_pairs and jitter_abs_sum_ms come together)");
		if (rp) {
			x->jitter_pairs = (uint64_t)pairs;
			x->jitter_abs_sum_ms = sum;
			x->valid |= QL_E_JITMEAN;
		}
	}
	GV("min_rtt_us", min_rtt_us, QL_E_RTTSUM, 4294967295.0);
	GV("max_rtt_us", max_rtt_us, QL_E_RTTSUM, 4294967295.0);
	GV("mean_rtt_us", mean_rtt_us, QL_E_RTTSUM, 4294967295.0);
	GC("max_snd_cwnd_bytes", max_snd_cwnd_bytes, QL_E_RTTSUM);
	GV("max_snd_wnd_bytes", max_snd_wnd_bytes, QL_E_MAXWND, 4294967295.0);
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "buf");
	if (b && cJSON_IsObject(b)) {
		const cJSON *save = o;
		o = b;
		G("requested_bytes", 0, 1e15, x->buf.requested_bytes = (int64_t)v);
		G("granted_bytes", 0, 1e15, x->buf.granted_bytes = (int64_t)v);
		G("clamped", 0, 1, x->buf.clamped = v != 0);
		const cJSON *sy = cJSON_GetObjectItemCaseSensitive(b, "sysctl");
		if (cJSON_IsString(sy) && sy->valuestring &&
		    strlen(sy->valuestring) < sizeof x->buf.sysctl)
			strcpy(x->buf.sysctl, sy->valuestring);
		x->buf.present = 1;
		o = save;
	}
#undef GV
#undef G
	ql_entry_finish(x);
	return 0;
}

static int entries_from_json(const cJSON *a, const char *key, int cap, double max_s,
			     ql_entry **out, int *n, ql_err *e)
{
	*out = NULL;
	*n = 0;
	if (!a)
		return 0;
	if (!cJSON_IsArray(a))
		return bad(e, key, "expected an array");
	int cnt = cJSON_GetArraySize(a);
	if (cnt > cap)
		return bad(e, key, "too many elements");
	if (cnt == 0)
		return 0;
	ql_entry *v = calloc((size_t)cnt, sizeof *v);
	if (!v)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	int i = 0, rc;
	const cJSON *it;
	cJSON_ArrayForEach(it, a) {
		if ((rc = entry_from_json(it, &v[i], max_s, e)) < 0) {
			free(v);
			return rc;
		}
		i++;
	}
	*out = v;
	*n = cnt;
	return 0;
}

void ql_peer_results_free(ql_peer_results *pr)
{
	if (!pr)
		return;
	free(pr->streams);
	free(pr->entries);
	free(pr->paths);
	for (int i = 0; i < pr->nintervals; i++)
		ql_interval_clear(&pr->intervals[i]);
	free(pr->intervals);
	for (int i = 0; i < pr->nwarnings; i++)
		free(pr->warnings[i]);
	free(pr->warnings);
	memset(pr, 0, sizeof *pr);
}

static int interval_from_json(const cJSON *it, ql_interval *iv, int cap, double max_s,
			      ql_err *e)
{
	double v;
	int rc;
	if (!cJSON_IsObject(it))
		return bad(e, "intervals", "expected objects");
	if ((rc = getnum(it, "start_s", 0, max_s, &v, e)) < 0)
		return rc;
	iv->start_s = rc ? v : 0;
	if ((rc = getnum(it, "end_s", 0, max_s, &v, e)) < 0)
		return rc;
	iv->end_s = rc ? v : iv->start_s;
	if (iv->end_s < iv->start_s)
		return bad(e, "intervals", "end_s before start_s");
	iv->seconds = iv->end_s - iv->start_s;
	if ((rc = getnum(it, "omitted", 0, 1, &v, e)) < 0)
		return rc;
	iv->omitted = rc ? v != 0 : 0;
	return entries_from_json(cJSON_GetObjectItemCaseSensitive(it, "entries"), "entries",
				 cap, max_s, &iv->entries, &iv->nentries, e);
}

char *ql_interval_encode(const ql_interval *iv)
{
	cJSON *o = interval_to_json(iv);
	if (!o)
		return NULL;
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

int ql_interval_parse(const char *text, size_t len, ql_interval *iv, ql_err *e)
{
	memset(iv, 0, sizeof *iv);
	cJSON *o = cJSON_ParseWithLength(text, len);
	if (!o)
		return ql_err_set(e, EPROTO, "EPROTO", "peer interval: malformed JSON");
	int rc = interval_from_json(o, iv, MAX_PEER_ENTRIES, 1e9, e);
	cJSON_Delete(o);
	if (rc < 0)
		ql_interval_clear(iv);
	return rc;
}

static int parse_extras(const cJSON *q, const ql_results_caps *c, ql_peer_results *pr,
			ql_err *e)
{
	double v;
	int rc;
	if (!cJSON_IsObject(q))
		return bad(e, "qoslab", "expected an object");
	pr->qoslab = 1;
	if ((rc = getnum(q, "duration_s", 0, c->time_s, &v, e)) < 0)
		return rc;
	if (rc)
		pr->duration_s = v;
	if ((rc = getnum(q, "busiest_thread_pct", 0, 1e6, &v, e)) < 0)
		return rc;
	if (rc) {
		pr->has_busiest = 1;
		pr->busiest_thread_pct = v;
	}
	if ((rc = getnum(q, "cpus", 1, 1 << 20, &v, e)) < 0)
		return rc;
	if (rc)
		pr->cpus = (int)v;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(q, "boot_id");
	if (cJSON_IsString(b) && strlen(b->valuestring) < sizeof pr->boot_id)
		snprintf(pr->boot_id, sizeof pr->boot_id, "%s", b->valuestring);
	const cJSON *tots = cJSON_GetObjectItemCaseSensitive(q, "totals");
	rc = entries_from_json(tots, "totals", c->entries, c->time_s, &pr->entries,
			       &pr->nentries, e);
	if (rc < 0)
		return rc;
	if ((rc = paths_from_json(tots, pr, e)) < 0)
		return rc;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(q, "intervals");
	if (a) {
		if (!cJSON_IsArray(a))
			return bad(e, "intervals", "expected an array");
		int cnt = cJSON_GetArraySize(a);
		if (cnt > c->intervals)
			return bad(e, "intervals", "more than the test's duration and interval allow");
		if (cnt > 0) {
			pr->intervals = calloc((size_t)cnt, sizeof *pr->intervals);
			if (!pr->intervals)
				return ql_err_set(e, ENOMEM, NULL, "out of memory");
		}
		const cJSON *it;
		size_t total = (size_t)pr->nentries;
		cJSON_ArrayForEach(it, a) {
			ql_interval *iv = &pr->intervals[pr->nintervals];
			pr->nintervals++;
			if ((rc = interval_from_json(it, iv, c->entries, c->time_s, e)) < 0)
				return rc;
			total += (size_t)iv->nentries;
			if (total > c->entries_total)
				return bad(e, "entries", "more in all than the test's streams and "
					   "intervals allow");
		}
	}
	a = cJSON_GetObjectItemCaseSensitive(q, "warnings");
	if (cJSON_IsArray(a)) {
		int cnt = cJSON_GetArraySize(a);
		if (cnt > MAX_PEER_WARNINGS)
			cnt = MAX_PEER_WARNINGS;
		pr->warnings = calloc((size_t)cnt + 1, sizeof *pr->warnings);
		if (!pr->warnings)
			return ql_err_set(e, ENOMEM, NULL, "out of memory");
		const cJSON *it;
		cJSON_ArrayForEach(it, a) {
			if (pr->nwarnings >= cnt)
				break;
			if (cJSON_IsString(it) && it->valuestring &&
			    strlen(it->valuestring) < 512)
				pr->warnings[pr->nwarnings++] = strdup(it->valuestring);
		}
	}
	return 0;
}

void ql_results_caps_for(int nstreams, double period_s, double omit_s, double span_s,
			 ql_results_caps *c)
{
	size_t n = nstreams > 0 ? (size_t)nstreams : 1;
	if (!(period_s >= 0.001))
		period_s = 1;
	double iv = ceil((omit_s > 0 ? omit_s : 0) / period_s) +
		    ceil((span_s > 0 ? span_s : 0) / period_s) + 4;
	if (iv > MAX_PEER_INTERVALS)
		iv = MAX_PEER_INTERVALS;
	size_t ni = (size_t)iv;
	c->streams = n < MAX_PEER_STREAMS ? (int)n : MAX_PEER_STREAMS;
	c->entries = 2 * n < MAX_PEER_ENTRIES ? (int)(2 * n) : MAX_PEER_ENTRIES;
	c->intervals = (int)ni;
	size_t b = 48 * 1024 + 512 * n + (ni + 1) * (128 + 2 * n * 1024);
	c->bytes = b < QL_RESULTS_MAX_BYTES ? b : QL_RESULTS_MAX_BYTES;
	/* an honest message has 25+ bytes per value (an entry: 40 values in
	 * at most 1 KiB); values, not bytes, are what cJSON allocates */
	size_t nv = 64 + 16 * n + MAX_PEER_WARNINGS + (ni + 1) * (8 + 2 * n * 40);
	c->nodes = nv < c->bytes / 16 + 1024 ? nv : c->bytes / 16 + 1024;
	size_t ne = (ni + 2) * 2 * n;
	c->entries_total = ne < c->bytes / 64 ? ne : c->bytes / 64;
	c->time_s = (omit_s > 0 ? omit_s : 0) + (span_s > 0 ? span_s : 0) + QL_RESULTS_TIME_SLACK_S;
}

/* An upper bound of the values cJSON would allocate for text: every value
 * is the root, the first element after '[' or '{', or follows a ','. */
static size_t json_values(const char *p, size_t len)
{
	size_t n = 1;
	int in_str = 0;
	for (size_t i = 0; i < len; i++) {
		char ch = p[i];
		if (in_str) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_str = 0;
		} else if (ch == '"') {
			in_str = 1;
		} else if (ch == ',' || ch == '[' || ch == '{') {
			n++;
		}
	}
	return n;
}

int ql_results_parse(const char *text, size_t len, ql_peer_results *pr,
		     ql_err *e)
{
	return ql_results_parse_capped(text, len, NULL, pr, e);
}

int ql_results_parse_capped(const char *text, size_t len, const ql_results_caps *caps,
			    ql_peer_results *pr, ql_err *e)
{
	static const ql_results_caps fixed = { MAX_PEER_STREAMS, MAX_PEER_ENTRIES,
					       MAX_PEER_INTERVALS, (size_t)-1, (size_t)-1,
					       (size_t)-1, 1e9 };
	const ql_results_caps *c = caps ? caps : &fixed;
	memset(pr, 0, sizeof *pr);
	if (len > c->bytes)
		return ql_err_set(e, EMSGSIZE, "EPROTO",
				  "peer results: %zu bytes, more than the %zu this test can need",
				  len, c->bytes);
	size_t vals = caps ? json_values(text, len) : 0;
	if (caps && vals > c->nodes)
		return ql_err_set(e, EPROTO, "EPROTO",
				  "peer results: %zu JSON values, more than the %zu this test can "
				  "report (%d streams, %d intervals)", vals, c->nodes, c->streams,
				  c->intervals);
	cJSON *o = cJSON_ParseWithLength(text, len);
	if (!o)
		return ql_err_set(e, EPROTO, "EPROTO", "peer results: malformed JSON");
	int rc = 0;
	double v;
	if (!cJSON_IsObject(o)) {
		rc = bad(e, "(top)", "expected an object");
		goto out;
	}
	static const char *const req[] = { "cpu_util_total", "cpu_util_user",
		"cpu_util_system", "sender_has_retransmits" };
	double *dst[] = { &pr->cpu_total_pct, &pr->cpu_user_pct, &pr->cpu_system_pct, NULL };
	for (int i = 0; i < 4; i++) {
		rc = i == 3 ? getcount(o, req[i], 0, 1, 1, &v, e) : getnum(o, req[i], -1, 1e6, &v, e);
		if (rc < 0)
			goto out;
		if (rc == 0) {
			rc = bad(e, req[i], "missing");
			goto out;
		}
		if (dst[i])
			*dst[i] = v;
		else
			pr->sender_has_retransmits = v > 9.2e18 ? -1 : (int)v;
	}
	rc = 0;
	const cJSON *cu = cJSON_GetObjectItemCaseSensitive(o, "congestion_used");
	if (cJSON_IsString(cu) && cu->valuestring &&
	    strlen(cu->valuestring) < sizeof pr->congestion_used &&
	    ca_name_ok(cu->valuestring))
		strcpy(pr->congestion_used, cu->valuestring);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "streams");
	if (!cJSON_IsArray(a)) {
		rc = bad(e, "streams", "missing or not an array");
		goto out;
	}
	int cnt = cJSON_GetArraySize(a);
	if (cnt > c->streams) {
		rc = bad(e, "streams", "more elements than the test has streams");
		goto out;
	}
	if (cnt > 0 && !(pr->streams = calloc((size_t)cnt, sizeof *pr->streams))) {
		rc = ql_err_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, a) {
		ql_peer_stream *s = &pr->streams[pr->nstreams];
		if (!cJSON_IsObject(it)) {
			rc = bad(e, "streams", "expected objects");
			goto out;
		}
		static const char *const sk[] = { "id", "bytes", "retransmits", "jitter",
						  "errors", "packets" };
		/* counters: integers up to 2^53; retransmits and errors may be
		 * iperf3's -1 (written as 2^64 - 1) */
		static const double lo[] = { 0, 0, -1, 0, -1e18, 0 };
		static const double hi[] = { 1e6, COUNT_MAX, COUNT_MAX, 1e9, COUNT_MAX, COUNT_MAX };
		static const int counter[] = { 1, 1, 1, 0, 1, 1 };
		double val[6];
		for (int k = 0; k < 6; k++) {
			rc = counter[k] ? getcount(it, sk[k], lo[k], hi[k], k == 2 || k == 4, &val[k], e)
					: getnum(it, sk[k], lo[k], hi[k], &val[k], e);
			if (rc < 0)
				goto out;
			if (rc == 0) {
				rc = bad(e, sk[k], "missing in a stream");
				goto out;
			}
		}
		rc = 0;
		s->id = (int)val[0];
		s->bytes = (uint64_t)val[1];
		/* iperf3 writes -1 as an unsigned 64-bit number. */
		s->retransmits = val[2] > 9.2e18 ? -1 : (int64_t)val[2];
		s->jitter_s = val[3];
		s->errors = val[4] > 9.2e18 ? -1 : (int64_t)val[4];
		s->packets = (uint64_t)val[5];
		if ((rc = getcount(it, "omitted_packets", 0, COUNT_MAX, 0, &v, e)) < 0)
			goto out;
		if (rc) {
			s->omitted_packets = (uint64_t)v;
			s->has_omitted = 1;
		}
		if ((rc = getcount(it, "omitted_errors", 0, COUNT_MAX, 1, &v, e)) < 0)
			goto out;
		if (rc)
			s->omitted_errors = v > COUNT_MAX ? 0 : (int64_t)v;
		/* a stream's times lie inside the time the test ran */
		if ((rc = getnum(it, "start_time", 0, c->time_s, &v, e)) < 0)
			goto out;
		if (rc)
			s->start_time_s = v;
		if ((rc = getnum(it, "end_time", 0, c->time_s, &v, e)) < 0)
			goto out;
		if (rc)
			s->end_time_s = v;
		if (s->end_time_s < s->start_time_s) {
			rc = bad(e, "end_time", "before start_time");
			goto out;
		}
		rc = 0;
		pr->nstreams++;
	}
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "qoslab");
	if (q)
		rc = parse_extras(q, c, pr, e);
out:
	cJSON_Delete(o);
	if (rc < 0)
		ql_peer_results_free(pr);
	return rc;
}
