/*
 * fuzz_udp_header.c - libFuzzer target for the UDP data path: arbitrary
 * datagrams go through the header parser (32- and 64-bit sequence forms)
 * into the receive books, as a hostile or broken sender would deliver
 * them. Invariants checked after every datagram and at the end:
 *   packets == unique + duplicate + late,  out_of_order <= unique,
 *   after finish(sent): lost + unique == sent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/proto.h"
#include "engine/stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const ql_udp_rx *rx)
{
	const ql_udp_counts *c = &rx->total;
	if (c->packets != c->unique_packets + c->duplicate_packets + c->late_packets)
		abort();
	if (c->out_of_order_packets > c->unique_packets)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int seq64 = data[0] & 1;
	size_t dg = 12 + (data[1] % 24);   /* datagram length incl. runts */
	data += 2;
	size -= 2;
	ql_err e;
	ql_udp_rx rx;
	ql_udp_rx_opts o = { .window_packets = 64, .loss_horizon_ns = 1000 };
	if (ql_udp_rx_init(&rx, &o, &e) < 0)
		return 0;
	int64_t now = 0;
	for (size_t off = 0; off < size; off += dg) {
		size_t n = size - off < dg ? size - off : dg;
		ql_udp_hdr h;
		if (ql_udp_hdr_decode(data + off, n, seq64, &h) < 0)
			continue;
		uint64_t seq = seq64 ? h.seq : ql_seq_extend32(rx.highest, (uint32_t)h.seq);
		if (seq == 0 || seq > ((uint64_t)1 << 40))
			continue;
		now += h.usec % 2000;
		ql_udp_rx_packet(&rx, seq, n, (int64_t)h.sec * 1000000000LL, now);
		check(&rx);
	}
	uint64_t sent = rx.highest;
	if (ql_udp_rx_finish(&rx, sent, &e) == 0) {
		if (rx.total.lost_packets + rx.total.unique_packets != sent)
			abort();
	}
	check(&rx);
	ql_udp_rx_free(&rx);
	return 0;
}
