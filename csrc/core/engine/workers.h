/*
 * workers.h - the stream threads of a test (workers.c). Stands on test.h.
 */
#ifndef QL_WORKERS_H
#define QL_WORKERS_H

#include <stdint.h>

#include "test.h"

int start_workers(ql_test *t, int receivers_only, ql_err *e);

#endif
