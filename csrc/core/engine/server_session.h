/*
 * server_session.h - one test on the server (server_session.c).
 * Stands on server_int.h.
 */
#ifndef QL_SERVER_SESSION_H
#define QL_SERVER_SESSION_H

#include <stdint.h>

#include "server_int.h"

void kept_unref(kept_result *k);
void *server_test_main(ql_test *t);

#endif
