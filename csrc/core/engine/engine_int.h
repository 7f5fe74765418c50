/*
 * engine_int.h - declarations shared by engine.c and results_json.c only.
 */
#ifndef QL_ENGINE_INT_H
#define QL_ENGINE_INT_H

#include "engine.h"

#define QL_ENGINE_VERSION "qoslab-1"

struct cJSON;
struct cJSON *ql_entry_to_json(const ql_entry *x);
/* Results object of one side; extras = add the "qoslab" key. malloc'd. */
char *ql_results_encode(const ql_peer_results *r, int extras);

/* One interval record as JSON (the live QL_ST_QL_INTERVAL message). */
char *ql_interval_encode(const ql_interval *iv);
int ql_interval_parse(const char *text, size_t len, ql_interval *iv, ql_err *e);

#endif
