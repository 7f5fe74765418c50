/*
 * report.h - the reporter and the live queue (report.c). Stands on test.h.
 */
#ifndef QL_REPORT_H
#define QL_REPORT_H

#include <stdint.h>

#include "test.h"

/* Close the interval [last snapshot, now] (nominal: its grid tick) from
 * every stream's counters and append it; publish: hand it to the live
 * queue. Called on the grid by the reporter; needs no socket. */
void take_snapshot_at(ql_test *t, int publish, int64_t now, int64_t nominal);
void iv_slots(const ql_test *t, const ql_interval *iv, int64_t *s0, int64_t *s1);
void live_release(ql_test *t, int64_t now);
void final_snapshot(ql_test *t, int64_t send_end_ns);
void maybe_tick(ql_test *t);
int64_t next_tick(ql_test *t);
int64_t wake_at(ql_test *t);
int64_t grid_slot(const ql_test *t, double start_s);
int rlive_push(ql_test *t, ql_interval *iv);
void test_finish(ql_test *t, int rc);

#endif
