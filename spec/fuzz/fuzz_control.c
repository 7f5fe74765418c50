/*
 * fuzz_control.c - libFuzzer target for the control path's parsers: the
 * parameter object a client sends (PARAM_EXCHANGE) and the results object
 * each side sends (EXCHANGE_RESULTS), both hostile input for a server.
 * Invariants checked: no crash, no leak, accepted parameters are in range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/proto.h"
#include "engine/results_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ql_err e;
	ql_params p;
	if (size > QL_PARAMS_MAX_BYTES * 4)
		return 0;
	if (ql_params_from_json((const char *)data, size, &p, &e) == 0) {
		if (p.parallel < 1 || p.parallel > 128 || p.len_bytes < 0 || p.tos > 255 ||
		    p.omit_s < 0 || p.time_s < 0)
			abort();
		char *js = NULL;
		/* What we accept we can also write back and re-read. */
		if (ql_params_to_json(&p, &js, &e) == 0) {
			ql_params q;
			if (ql_params_from_json(js, strlen(js), &q, &e) != 0)
				abort();
			free(js);
		}
	}
	ql_peer_results pr;
	if (ql_results_parse((const char *)data, size, &pr, &e) == 0) {
		for (int i = 0; i < pr.nintervals; i++)
			if (pr.intervals[i].end_s < pr.intervals[i].start_s)
				abort();
		ql_peer_results_free(&pr);
	}
	/* Within a small test's caps: whatever is accepted stays inside them. */
	ql_results_caps c;
	ql_results_caps_for(2, 1.0, 0, 3, &c);
	if (ql_results_parse_capped((const char *)data, size, &c, &pr, &e) == 0) {
		size_t total = (size_t)pr.nentries;
		for (int i = 0; i < pr.nintervals; i++)
			total += (size_t)pr.intervals[i].nentries;
		if (pr.nstreams > c.streams || pr.nintervals > c.intervals ||
		    total > c.entries_total || size > c.bytes)
			abort();
		ql_peer_results_free(&pr);
	}
	return 0;
}
