/*
 * probe_options.h - the latency probe's option keys, in the shape of the
 * traffic options' table (options.h), for the binding to convert a Lua
 * table by; the rules themselves are ql_probe_opts_validate (probe.h).
 * Stands on options.h and probe.h.
 */
#ifndef QL_PROBE_OPTIONS_H
#define QL_PROBE_OPTIONS_H

#include "options.h"
#include "probe.h"

/* A key only a standalone probe takes (host, duration_s, netns,
 * bind_address): beside a test they come from the test. */
#define QL_OPT_PROBE_ALONE 0x100u

/* The keys of ql_probe_opts, ended by key == NULL. */
extern const ql_opt_desc ql_probe_opt_desc[];

#endif
