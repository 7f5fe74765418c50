/*
 * results.h - a test's result and its results message (results.c).
 * Stands on test.h.
 */
#ifndef QL_RESULTS_H
#define QL_RESULTS_H

#include <stdint.h>

#include "test.h"

void cpu_local(ql_test *t, ql_cpu_result *c);
char *encode_local(ql_test *t, const ql_cpu_result *cpu);
void build_result(ql_test *t, const ql_cpu_result *cpu_local_r);

#endif
