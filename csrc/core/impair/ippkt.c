/* ippkt.c - see ippkt.h. */
#include "ippkt.h"

#include <stdint.h>

int ql_ippkt_ecn(const unsigned char *p, size_t len)
{
	if (len >= 20 && (p[0] >> 4) == 4)
		return p[1] & 3;
	if (len >= 40 && (p[0] >> 4) == 6)
		return (p[1] >> 4) & 3;
	return -1;
}

int ql_ippkt_ecn_capable(const unsigned char *p, size_t len)
{
	int ecn = ql_ippkt_ecn(p, len);
	return ecn == 1 || ecn == 2;
}

int ql_ippkt_proto(const unsigned char *p, size_t len)
{
	int proto;
	if (len >= 20 && (p[0] >> 4) == 4)
		proto = p[9];
	else if (len >= 40 && (p[0] >> 4) == 6)
		proto = p[6];
	else
		return QL_IPPKT_OTHER;
	switch (proto) {
	case 6:
		return QL_IPPKT_TCP;
	case 17:
		return QL_IPPKT_UDP;
	case 1:
	case 58:
		return QL_IPPKT_ICMP;
	default:
		return QL_IPPKT_OTHER;
	}
}

size_t ql_ippkt_headers_bytes(const unsigned char *p, size_t len)
{
	size_t ip;
	int proto;
	if (len >= 20 && (p[0] >> 4) == 4) {
		ip = (size_t)(p[0] & 15) * 4;
		proto = p[9];
		if (ip < 20)
			return 0;
	} else if (len >= 40 && (p[0] >> 4) == 6) {
		ip = 40;
		proto = p[6];
	} else {
		return 0;
	}
	if (proto == 17)
		return len >= ip + 8 ? ip + 8 : 0;
	if (proto != 6 || len < ip + 20)
		return 0;
	size_t tcp = (size_t)(p[ip + 12] >> 4) * 4;
	return tcp >= 20 && len >= ip + tcp ? ip + tcp : 0;
}

int ql_ippkt_set_ce(unsigned char *p, size_t len)
{
	int ecn = ql_ippkt_ecn(p, len);
	if (ecn < 0)
		return -1;
	if ((p[0] >> 4) == 6) {
		p[1] |= 0x30;
		return 0;
	}
	/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m = the 16-bit word of
	 * version/IHL and TOS */
	uint16_t old = (uint16_t)(p[0] << 8 | p[1]);
	p[1] |= 3;
	uint16_t now = (uint16_t)(p[0] << 8 | p[1]);
	uint32_t sum = (uint16_t)~(p[10] << 8 | p[11]);
	sum += (uint16_t)~old;
	sum += now;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	uint16_t hc = (uint16_t)~sum;
	p[10] = (unsigned char)(hc >> 8);
	p[11] = (unsigned char)hc;
	return 0;
}

void ql_ippkt_flip(unsigned char *p, size_t len, size_t byte, int bit)
{
	if (byte < len && bit >= 0 && bit < 8)
		p[byte] ^= (unsigned char)(1u << bit);
}
