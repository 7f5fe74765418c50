/*
 * tcp.h - the TCP loops of a stream (tcp.c). Stands on test.h.
 */
#ifndef QL_TCP_H
#define QL_TCP_H

#include <stdint.h>

#include "test.h"

void tcp_send_loop(ql_stream *s);
void tcp_recv_loop(ql_stream *s);

#endif
