/*
 * affinity.h - CPU affinity of a test's stream threads: a list of CPUs,
 * stream thread k of an end pinned to list[k % n] (cpu_affinity on the
 * client, server_affinity over the wire for the server's). Stands on
 * engine.h (ql_cpu_list) and err.h.
 */
#ifndef QL_AFFINITY_H
#define QL_AFFINITY_H

#include "../err.h"
#include "engine.h"

/* Whether this process may run on every CPU of l: 0, or -EINVAL with code
 * "EINVAL" naming field, the CPU and the allowed set's size. */
int affinity_check(const ql_cpu_list *l, const char *field, ql_err *e);

/* Pin the calling thread to l->cpu[k % l->n] (nothing when l->n == 0):
 * 0 or a positive errno. */
int affinity_pin(const ql_cpu_list *l, int k);

#endif
