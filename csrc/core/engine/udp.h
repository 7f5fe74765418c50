/*
 * udp.h - the UDP loops of a stream (udp.c). Stands on test.h.
 */
#ifndef QL_UDP_H
#define QL_UDP_H

#include <stdint.h>

#include "test.h"

void udp_send_loop(ql_stream *s);
void udp_recv_loop(ql_stream *s);

#endif
