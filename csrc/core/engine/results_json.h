/*
 * results_json.h - the results object of the control protocol (iperf3 keys
 * plus the "qoslab" extras) and the live interval message: encode, and parse
 * hostile input within caps. Stands on record.h.
 */
#ifndef QL_RESULTS_JSON_H
#define QL_RESULTS_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "record.h"

/* A peer's results JSON (iperf3 keys + optional "qoslab" extras). */
typedef struct ql_peer_stream {
	int id;
	uint64_t bytes;
	int64_t retransmits;          /* -1 = not reported */
	double jitter_s;
	int64_t errors;
	uint64_t packets;
	/* iperf3's convention for UDP: packets counts the whole test (the
	 * warm-up included; a receiver: every sequence number ruled); the
	 * warm-up's share is omitted_packets (iperf3 3.12 sends none: its
	 * sender's bytes are the measured ones instead) */
	uint64_t omitted_packets;
	int64_t omitted_errors;
	int has_omitted;              /* omitted_packets was present */
	double start_time_s, end_time_s;
} ql_peer_stream;

typedef struct ql_peer_results {
	double cpu_total_pct, cpu_user_pct, cpu_system_pct;
	int sender_has_retransmits;
	char congestion_used[32];
	int nstreams;
	ql_peer_stream *streams;
	int qoslab;                   /* extras present */
	double duration_s;
	int has_busiest;
	double busiest_thread_pct;
	int cpus;                     /* that host's online CPUs (0 = unknown) */
	char boot_id[40];             /* that host's boot id ("" = unknown):
	                                 equal ids = both ends share the CPUs */
	int nentries;                 /* per-stream totals of that side */
	ql_entry *entries;
	/* NULL, or nentries: paths[i] is entries[i]'s when it has QL_E_UDPPATH
	 * (sent as the totals entry's "udp_path") */
	ql_udp_path *paths;
	int nintervals;
	ql_interval *intervals;
	int nwarnings;
	char **warnings;
} ql_peer_results;

/* Parse a results object; hostile input gives -EPROTO (code "EPROTO")
 * naming the key, never a crash. Caps: 1024 streams, 100000 intervals. */
int ql_results_parse(const char *text, size_t len, ql_peer_results *pr,
		     ql_err *e);

/* What one test's results may hold: derived from its own parameters by
 * the engine (ql_results_caps_for), so a peer cannot make the parser
 * allocate more than the test could honestly report. */
typedef struct ql_results_caps {
	int streams;                  /* "streams" elements */
	int entries;                  /* "totals" and per-interval "entries" */
	int intervals;                /* "intervals" elements */
	size_t entries_total;         /* entries in all intervals and totals */
	size_t nodes;                 /* JSON values in the message */
	size_t bytes;                 /* message length */
	double time_s;                /* a stream's start/end_time at most */
} ql_results_caps;

/* A peer's counters are at most QL_COUNT_MAX (record.h). A peer's stream
 * times lie within omit + span + this slack (the two ends start their
 * clocks one trip apart, and a path may delay by seconds). */
#define QL_RESULTS_TIME_SLACK_S 5.0

/* Streams n (parallel x (bidir ? 2 : 1)), the interval period and the
 * time the test ran (span, omit included) give: streams <= n, entries <=
 * 2 n, intervals <= ceil(omit / period) + ceil(span / period) + 4, bytes
 * <= min(4 MiB, 48 KiB + 512 n + (intervals + 1) x (128 + 2 n x 1 KiB)),
 * nodes (JSON values) <= min(64 + 16 n + 64 + (intervals + 1) x (8 + 2 n x
 * 40), bytes / 16 + 1024), entries in all <= min((intervals + 2) x 2 n,
 * bytes / 64) (an encoded entry has 7 keys at least), stream times <=
 * omit + span + QL_RESULTS_TIME_SLACK_S. Parsing a peer's
 * results then takes at most bytes (the text) + nodes x 112 B (cJSON: 64 B
 * + malloc overhead + key) + entries x sizeof(ql_entry) (272 B) + one
 * ql_udp_path (424 B) per totals entry (at most 2048): for any test under
 * 4 + 28.1 + 17.0 + 0.8 = 49.9 MiB (the 4 MiB cap), for a 1 s single-stream
 * test (63.4 KiB of text, 760 values, 16 entries, 2 totals) under 152
 * KiB. */
void ql_results_caps_for(int nstreams, double period_s, double omit_s, double span_s,
			 ql_results_caps *c);

/* ql_results_parse within caps (NULL = the fixed caps only): a message with
 * more values than caps->nodes is refused before cJSON builds a tree. */
int ql_results_parse_capped(const char *text, size_t len, const ql_results_caps *caps,
			    ql_peer_results *pr, ql_err *e);
void ql_peer_results_free(ql_peer_results *pr);

#define QL_ENGINE_VERSION "qoslab-1"

struct cJSON;
struct cJSON *ql_entry_to_json(const ql_entry *x);
/* Results object of one side; extras = add the "qoslab" key. malloc'd. */
char *ql_results_encode(const ql_peer_results *r, int extras);

/* One interval record as JSON (the live QL_ST_QL_INTERVAL message). */
char *ql_interval_encode(const ql_interval *iv);
int ql_interval_parse(const char *text, size_t len, ql_interval *iv, ql_err *e);

#endif
