/*
 * affinity.c - CPU affinity of the stream threads (affinity.h), with
 * sched_getaffinity / pthread_setaffinity_np. Stands on affinity.h only.
 */
#include "affinity.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>

int affinity_check(const ql_cpu_list *l, const char *field, ql_err *e)
{
	cpu_set_t allowed;
	CPU_ZERO(&allowed);
	if (l->n == 0)
		return 0;
	if (sched_getaffinity(0, sizeof allowed, &allowed) < 0)
		return ql_err_set(e, errno, NULL, "%s: sched_getaffinity: cannot read this "
				  "process's CPUs", field);
	for (int i = 0; i < l->n; i++)
		if (l->cpu[i] >= CPU_SETSIZE || !CPU_ISSET(l->cpu[i], &allowed))
			return ql_err_set(e, EINVAL, "EINVAL", "%s: CPU %d is not one this "
					  "process may run on (it may run on %d CPUs: see taskset "
					  "-p and nproc)", field, l->cpu[i], CPU_COUNT(&allowed));
	return 0;
}

int affinity_pin(const ql_cpu_list *l, int k)
{
	if (l->n == 0)
		return 0;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(l->cpu[k % l->n], &set);
	return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
