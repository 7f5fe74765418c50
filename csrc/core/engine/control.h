/*
 * control.h - the control channel around the run (control.c).
 * Stands on test.h.
 */
#ifndef QL_CONTROL_H
#define QL_CONTROL_H

#include <stdint.h>

#include "test.h"

int ship_live(ql_test *t);
int receivers_eof(ql_test *t);
void wait_senders(ql_test *t);
void drain_receivers(ql_test *t);
void peer_interval_take(ql_test *t, char *js, size_t jl);
int exchange_results(ql_test *t, int client_first, ql_cpu_result *cpu);

#endif
