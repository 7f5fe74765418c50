/*
 * sig.h - the process-wide "stop" request set by SIGINT/SIGTERM/SIGHUP.
 *
 * Signals are process-global, so this is the one piece of global state in
 * the core. Long blocking calls (sleeps, traffic runs) poll ql_sig_stop and
 * return -EINTR when it is set, so the Lua layer can unwind and remove every
 * impairment it made.
 */
#ifndef QL_SIG_H
#define QL_SIG_H

#include <signal.h>

/* Non-zero once SIGINT, SIGTERM or SIGHUP arrived after ql_sig_install(). */
extern volatile int ql_sig_stop;
/* The signal number that set ql_sig_stop (0 if none). */
extern volatile sig_atomic_t ql_sig_signo;

/* Install handlers for SIGINT, SIGTERM and SIGHUP that set ql_sig_stop, then call
 * hook(signo) if non-NULL (hook must be async-signal-safe). Returns 0 or a
 * negative errno. */
int ql_sig_install(void (*hook)(int signo));

/* Clear the stop request (after it has been handled). */
void ql_sig_reset(void);

#endif
