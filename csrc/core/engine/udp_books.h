/*
 * udp_books.h - the UDP books of a test (udp_books.c). Stands on test.h.
 */
#ifndef QL_UDP_BOOKS_H
#define QL_UDP_BOOKS_H

#include <stdint.h>

#include "test.h"

void warn_skipped_slots(ql_test *t);
uint64_t udp_booked_packets(ql_test *t, int i);
uint64_t udp_measured_sent(ql_test *t, int i);
const ql_peer_stream *peer_stream(const ql_peer_results *pr, int id);
const ql_entry *peer_entry(const ql_peer_results *pr, int id, int role);
int64_t peer_sender_warmup(ql_test *t, const ql_peer_results *pr,
			   const ql_peer_stream *ps, int id);
void close_udp_books(ql_test *t, const ql_peer_results *pr);

#endif
