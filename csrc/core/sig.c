/* sig.c - see sig.h. */
#include "sig.h"

#include <errno.h>
#include <string.h>

volatile int ql_sig_stop;
volatile sig_atomic_t ql_sig_signo;
static void (*sig_hook)(int);

static void on_signal(int signo)
{
	ql_sig_signo = signo;
	ql_sig_stop = 1;
	if (sig_hook)
		sig_hook(signo);
}

int ql_sig_install(void (*hook)(int signo))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: blocking calls return EINTR and look at the flag. */
	sig_hook = hook;
	/* SIGHUP too: a closed terminal or SSH session must unwind like
	 * SIGTERM, so what the run made is removed. */
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGHUP, &sa, NULL) < 0)
		return -errno;
	return 0;
}

void ql_sig_reset(void)
{
	ql_sig_stop = 0;
	ql_sig_signo = 0;
}
