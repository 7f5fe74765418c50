/*
 * err.h - the error record every csrc/core function fills.
 *
 * Core functions return 0 on success or a negative errno and, on failure,
 * fill a caller-owned ql_err: a stable uppercase code ("ENODEV", "EPERM",
 * "ENOTSUP", ...), a message that says what happened and what to do, and a
 * flag telling whether the caller made a mistake (bad input: the binding
 * raises a Lua error) or the world failed (the binding returns nil, msg, code).
 * Core code never prints, exits or aborts.
 */
#ifndef QL_ERR_H
#define QL_ERR_H

#include <stddef.h>

#define QL_ERR_CODE_MAX 24
#define QL_ERR_MSG_MAX 512

typedef struct ql_err {
	int errnum;                  /* positive errno, 0 = no error */
	int usage;                   /* 1 = caller's mistake (raise), 0 = world */
	char code[QL_ERR_CODE_MAX];  /* stable uppercase code */
	char msg[QL_ERR_MSG_MAX];    /* what happened and what to do */
} ql_err;

/* Reset to "no error". */
void ql_err_clear(ql_err *e);

/*
 * Record a failure of the world. code NULL takes the errno's name
 * (ql_errno_name). Returns -errnum so callers can `return ql_err_set(...)`.
 * e may be NULL (then only the return value carries the error).
 */
int ql_err_set(ql_err *e, int errnum, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Record a caller's mistake (bad argument): code "EINVAL", usage = 1.
 * The message must name the field, e.g. "spec.loss_pct: expected 0..100".
 * Returns -EINVAL.
 */
int ql_err_usage(ql_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Stable name of an errno value ("EPERM"); "E<number>" style never returned:
 * unknown values give "EUNKNOWN". */
const char *ql_errno_name(int errnum);

#endif
