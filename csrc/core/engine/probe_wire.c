/*
 * probe_wire.c - the latency probe's message codec (probe_wire.h).
 * Stands on probe_wire.h and libc.
 */
#include "probe_wire.h"

#include <endian.h>
#include <stdio.h>
#include <string.h>

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return be64toh(v);
}

void ql_probe_msg_put(const ql_probe_msg *m, void *buf)
{
	uint8_t *p = buf;
	put32(p, QL_PROBE_MAGIC);
	p[4] = m->version;
	p[5] = m->type;
	p[6] = (uint8_t)(m->flags >> 8);
	p[7] = (uint8_t)m->flags;
	put32(p + 8, m->len);
	put32(p + 12, m->session);
	put64(p + 16, m->seq);
	put64(p + 24, (uint64_t)m->client_tx_ns);
	put64(p + 32, (uint64_t)m->server_rx_ns);
	put64(p + 40, (uint64_t)m->server_tx_ns);
	memcpy(p + 48, m->boot, 8);
}

int ql_probe_is_ours(const void *buf, size_t len)
{
	return len >= 4 && get32(buf) == QL_PROBE_MAGIC;
}

int ql_probe_msg_get(ql_probe_msg *m, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	if (len < QL_PROBE_HDR_BYTES || get32(p) != QL_PROBE_MAGIC)
		return -1;
	m->version = p[4];
	m->type = p[5];
	m->flags = (uint16_t)(p[6] << 8 | p[7]);
	m->len = get32(p + 8);
	m->session = get32(p + 12);
	m->seq = get64(p + 16);
	m->client_tx_ns = (int64_t)get64(p + 24);
	m->server_rx_ns = (int64_t)get64(p + 32);
	m->server_tx_ns = (int64_t)get64(p + 40);
	memcpy(m->boot, p + 48, 8);
	if (m->version != QL_PROBE_VERSION ||
	    (m->type != QL_PROBE_REQUEST && m->type != QL_PROBE_REPLY) ||
	    m->len < QL_PROBE_HDR_BYTES || m->len > QL_PROBE_MAX_BYTES)
		return -1;
	return 0;
}

void ql_probe_icmp_put(uint32_t session, uint64_t seq, int64_t tx_ns, void *buf)
{
	uint8_t *p = buf;
	put32(p, QL_PROBE_MAGIC);
	put32(p + 4, session);
	put64(p + 8, seq);
	put64(p + 16, (uint64_t)tx_ns);
}

int ql_probe_icmp_get(const void *buf, size_t len, uint32_t *session, uint64_t *seq,
		      int64_t *tx_ns)
{
	const uint8_t *p = buf;
	if (len < QL_PROBE_ICMP_DATA_BYTES || get32(p) != QL_PROBE_MAGIC)
		return -1;
	*session = get32(p + 4);
	*seq = get64(p + 8);
	*tx_ns = (int64_t)get64(p + 16);
	return 0;
}

void ql_probe_greeting_put(void *buf)
{
	memset(buf, 0, QL_PROBE_GREETING_BYTES);
	memcpy(buf, QL_PROBE_TCP_GREETING, sizeof QL_PROBE_TCP_GREETING - 1);
}

int ql_probe_greeting_is(const void *buf)
{
	static const uint8_t zero[QL_PROBE_GREETING_BYTES];
	const size_t g = sizeof QL_PROBE_TCP_GREETING - 1;
	return memcmp(buf, QL_PROBE_TCP_GREETING, g) == 0 &&
	       memcmp((const uint8_t *)buf + g, zero, QL_PROBE_GREETING_BYTES - g) == 0;
}

void ql_probe_boot_id(uint8_t out[8])
{
	char line[64] = "";
	memset(out, 0, 8);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (fgets(line, sizeof line, f) && strlen(line) >= 8)
		memcpy(out, line, 8);
	fclose(f);
}
