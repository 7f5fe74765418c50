/* C unit tests of the impairment link's pure parts: the packet queue
 * (csrc/core/impair/pktq.c: time order, arrival order at equal times,
 * reordered packets first and newest first, byte accounting) and the IP
 * header edits (csrc/core/impair/ippkt.c: ECN read, CE set with a right
 * IPv4 header checksum, IPv6 traffic class, non-IP refused). */
#include "ctest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "impair/ippkt.h"
#include "impair/pktq.h"

static ql_pkt *mk(int64_t tts, int at_head, unsigned char tag, size_t len)
{
	unsigned char buf[64];
	memset(buf, tag, sizeof buf);
	ql_pkt *p = ql_pkt_new(buf, len);
	p->tts_ns = tts;
	p->at_head = at_head;
	return p;
}

TEST(pktq_time_order_and_ties)
{
	ql_pktq q;
	ql_pktq_init(&q);
	int first;
	/* times 30, 10, 20, 10, 10: out by time, equal times by arrival */
	int64_t t[] = { 30, 10, 20, 10, 10 };
	for (int i = 0; i < 5; i++) {
		CHECK_EQ_INT(ql_pktq_push(&q, mk(t[i], 0, (unsigned char)i, 10 + (size_t)i), &first), 0);
		/* first: the new packet is now the one to leave first */
		CHECK_EQ_INT(first, i == 0 || i == 1);
	}
	CHECK_EQ_U64(ql_pktq_len(&q), 5);
	CHECK_EQ_U64(q.bytes, 10 + 11 + 12 + 13 + 14);
	CHECK_EQ_U64(q.cost_bytes, q.bytes + 5 * sizeof(ql_pkt));
	unsigned char want[] = { 1, 3, 4, 2, 0 };
	for (int i = 0; i < 5; i++) {
		ql_pkt *p = ql_pktq_pop(&q);
		CHECK(p != NULL);
		if (!p)
			break;
		CHECK_EQ_INT(p->data[0], want[i]);
		free(p);
	}
	CHECK(ql_pktq_pop(&q) == NULL);
	CHECK_EQ_U64(q.bytes, 0);
	CHECK_EQ_U64(q.cost_bytes, 0);
	ql_pktq_free(&q);
}

TEST(pktq_head_first_newest_first)
{
	ql_pktq q;
	ql_pktq_init(&q);
	int first;
	ql_pktq_push(&q, mk(5, 0, 'a', 8), &first);
	ql_pktq_push(&q, mk(100, 1, 'h', 8), &first);
	CHECK_EQ_INT(first, 1);
	ql_pktq_push(&q, mk(1, 0, 'b', 8), &first);
	/* earlier than every timed packet, but the head list goes first */
	CHECK_EQ_INT(first, 0);
	ql_pktq_push(&q, mk(100, 1, 'i', 8), &first);
	CHECK_EQ_INT(ql_pktq_peek(&q)->data[0], 'i');
	const char *want = "ihba";
	for (int i = 0; i < 4; i++) {
		ql_pkt *p = ql_pktq_pop(&q);
		CHECK(p && p->data[0] == (unsigned char)want[i]);
		free(p);
	}
	CHECK_EQ_U64(ql_pktq_len(&q), 0);
	ql_pktq_free(&q);
}

TEST(pktq_many_random)
{
	ql_pktq q;
	ql_pktq_init(&q);
	int first;
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 5000; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		ql_pktq_push(&q, mk((int64_t)(x % 1000), 0, 0, 1), &first);
	}
	/* queued packets are freed with the queue */
	for (int i = 0; i < 2000; i++)
		free(ql_pktq_pop(&q));
	int64_t last = -1;
	uint64_t last_seq = 0;
	int ok = 1;
	ql_pkt *p;
	while ((p = ql_pktq_pop(&q))) {
		ok &= p->tts_ns > last || (p->tts_ns == last && p->seq > last_seq);
		last = p->tts_ns;
		last_seq = p->seq;
		free(p);
	}
	CHECK(ok);
	for (int i = 0; i < 100; i++)
		ql_pktq_push(&q, mk(i, i & 1, 0, 1), &first);
	ql_pktq_free(&q);
	CHECK_EQ_U64(ql_pktq_len(&q), 0);
}

/* The IPv4 header checksum over hdr (20 bytes): 0 when right. */
static uint16_t ip_sum(const unsigned char *h)
{
	uint32_t s = 0;
	for (int i = 0; i < 20; i += 2)
		s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void ipv4(unsigned char *h, unsigned char tos)
{
	static const unsigned char base[20] = {
		0x45, 0, 0x00, 0x54, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0,
		10, 1, 2, 3, 10, 1, 2, 4,
	};
	memcpy(h, base, 20);
	h[1] = tos;
	uint16_t c = ip_sum(h);
	h[10] = (unsigned char)(c >> 8);
	h[11] = (unsigned char)c;
}

TEST(ippkt_ecn_ipv4)
{
	unsigned char h[20];
	for (int tos = 0; tos < 256; tos++) {
		ipv4(h, (unsigned char)tos);
		CHECK_EQ_INT(ip_sum(h), 0);
		CHECK_EQ_INT(ql_ippkt_ecn(h, 20), tos & 3);
		CHECK_EQ_INT(ql_ippkt_ecn_capable(h, 20), (tos & 3) == 1 || (tos & 3) == 2);
		CHECK_EQ_INT(ql_ippkt_set_ce(h, 20), 0);
		CHECK_EQ_INT(h[1], tos | 3);
		CHECK_EQ_INT(ip_sum(h), 0);
	}
	CHECK_EQ_INT(ql_ippkt_ecn(h, 19), -1);
}

/* The headers every segment of a GSO packet carries: IPv4 with options
 * and TCP with timestamps (24 + 32), IPv6 and UDP (40 + 8); 0 for another
 * protocol, an IPv6 extension header, a bad IHL or data offset, or a
 * packet too short for its headers. */
TEST(ippkt_headers_bytes)
{
	unsigned char p[80];
	memset(p, 0, sizeof p);
	p[0] = 0x46;                      /* IPv4, IHL 6 */
	p[9] = 6;                         /* TCP */
	p[24 + 12] = 8 << 4;              /* data offset 8: 32 bytes */
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 56);
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 56), 56);
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 55), 0);
	p[24 + 12] = 4 << 4;              /* data offset 4: too small */
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 0);
	p[0] = 0x44;                      /* IHL 4: too small */
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 0);
	p[0] = 0x45;
	p[9] = 17;                        /* UDP */
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 28);
	p[9] = 1;                         /* ICMP */
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 0);
	memset(p, 0, sizeof p);
	p[0] = 0x60;
	p[6] = 17;
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 48);
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 47), 0);
	p[6] = 0;                         /* hop-by-hop options first */
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 0);
	p[6] = 6;
	p[40 + 12] = 5 << 4;
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 60);
	p[0] = 0x50;                      /* version 5 */
	CHECK_EQ_INT(ql_ippkt_headers_bytes(p, 80), 0);
}

TEST(ippkt_ecn_ipv6_and_other)
{
	unsigned char h[40];
	memset(h, 0, sizeof h);
	h[0] = 0x6b;  /* version 6, traffic class 0xb1: DSCP 0x2c, ECT(1) */
	h[1] = 0x10;
	CHECK_EQ_INT(ql_ippkt_ecn(h, 40), 1);
	CHECK_EQ_INT(ql_ippkt_ecn_capable(h, 40), 1);
	CHECK_EQ_INT(ql_ippkt_set_ce(h, 40), 0);
	CHECK_EQ_INT(h[0], 0x6b);
	CHECK_EQ_INT(h[1], 0x30);
	CHECK_EQ_INT(ql_ippkt_ecn(h, 40), 3);
	CHECK_EQ_INT(ql_ippkt_ecn(h, 39), -1);
	unsigned char junk[40];
	memset(junk, 0x51, sizeof junk);
	CHECK_EQ_INT(ql_ippkt_ecn(junk, 40), -1);
	CHECK_EQ_INT(ql_ippkt_set_ce(junk, 40), -1);
	CHECK_EQ_INT(junk[1], 0x51);
	ql_ippkt_flip(junk, 40, 3, 7);
	CHECK_EQ_INT(junk[3], 0xd1);
	ql_ippkt_flip(junk, 40, 40, 0);  /* out of range: nothing */
	ql_ippkt_flip(junk, 40, 0, 8);
	CHECK_EQ_INT(junk[0], 0x51);
}

TEST(ippkt_proto_classes)
{
	unsigned char h[40];
	ipv4(h, 0);  /* protocol 17 */
	CHECK_EQ_INT(ql_ippkt_proto(h, 20), QL_IPPKT_UDP);
	h[9] = 6;
	CHECK_EQ_INT(ql_ippkt_proto(h, 20), QL_IPPKT_TCP);
	h[9] = 1;
	CHECK_EQ_INT(ql_ippkt_proto(h, 20), QL_IPPKT_ICMP);
	h[9] = 47;
	CHECK_EQ_INT(ql_ippkt_proto(h, 20), QL_IPPKT_OTHER);
	CHECK_EQ_INT(ql_ippkt_proto(h, 19), QL_IPPKT_OTHER);
	memset(h, 0, sizeof h);
	h[0] = 0x60;
	h[6] = 17;
	CHECK_EQ_INT(ql_ippkt_proto(h, 40), QL_IPPKT_UDP);
	h[6] = 58;
	CHECK_EQ_INT(ql_ippkt_proto(h, 40), QL_IPPKT_ICMP);
	h[6] = 0;  /* hop-by-hop options: not looked behind */
	CHECK_EQ_INT(ql_ippkt_proto(h, 40), QL_IPPKT_OTHER);
	CHECK_EQ_INT(ql_ippkt_proto(h, 39), QL_IPPKT_OTHER);
}

int main(void)
{
	RUN(pktq_time_order_and_ties);
	RUN(pktq_head_first_newest_first);
	RUN(pktq_many_random);
	RUN(ippkt_ecn_ipv4);
	RUN(ippkt_headers_bytes);
	RUN(ippkt_ecn_ipv6_and_other);
	RUN(ippkt_proto_classes);
	return ctest_done();
}
