/*
 * proto.c - iperf3 control protocol: cookies, state bytes, framed JSON,
 * parameter encoding and the UDP data header. Stands on proto.h and the
 * core's timer.h; nothing else of the engine.
 */
#include "proto.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../timer.h"

static const char cookie_chars[] = "abcdefghijklmnopqrstuvwxyz234567";

void ql_cookie_make(char out[QL_COOKIE_SIZE])
{
	unsigned char rnd[QL_COOKIE_SIZE - 1];
	size_t got = 0;
	while (got < sizeof rnd) {
		ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
		if (n <= 0) {
			/* getrandom cannot fail for 36 bytes after boot; keep a
			 * cookie anyway (it is an identifier, not a secret). */
			for (; got < sizeof rnd; got++)
				rnd[got] = (unsigned char)(ql_now_ns() >> (got % 8));
			break;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof rnd; i++)
		out[i] = cookie_chars[rnd[i] & 31];
	out[QL_COOKIE_SIZE - 1] = 0;
}

int ql_cookie_valid(const char buf[QL_COOKIE_SIZE])
{
	if (buf[QL_COOKIE_SIZE - 1] != 0)
		return 0;
	for (int i = 0; i < QL_COOKIE_SIZE - 1; i++)
		if (!memchr(cookie_chars, buf[i], 32) || buf[i] == 0)
			return 0;
	return 1;
}

static int four_bytes_match(const void *buf, size_t len, uint32_t v)
{
	if (len != 4)
		return 0;
	uint32_t le = htole32(v), be = htonl(v);
	return memcmp(buf, &le, 4) == 0 || memcmp(buf, &be, 4) == 0;
}

int ql_udp_connect_msg_ok(const void *buf, size_t len)
{
	return four_bytes_match(buf, len, QL_UDP_CONNECT_MSG) ||
	       four_bytes_match(buf, len, QL_UDP_CONNECT_MSG_LEGACY);
}

int ql_udp_connect_reply_ok(const void *buf, size_t len)
{
	return four_bytes_match(buf, len, QL_UDP_CONNECT_REPLY) ||
	       four_bytes_match(buf, len, QL_UDP_CONNECT_REPLY_LEGACY);
}

uint64_t ql_udp_test_tag(const char cookie[QL_COOKIE_SIZE])
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < QL_COOKIE_SIZE - 1; i++) {
		h ^= (unsigned char)cookie[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

size_t ql_udp_hdr_bytes(int seq64, int tagged)
{
	return (seq64 ? QL_UDP_HDR64_BYTES : QL_UDP_HDR32_BYTES) +
	       (tagged ? QL_UDP_TAG_BYTES : 0);
}

void ql_udp_tag_put(void *buf, int seq64, uint64_t tag)
{
	unsigned char *p = (unsigned char *)buf + ql_udp_hdr_bytes(seq64, 0);
	for (int i = 0; i < QL_UDP_TAG_BYTES; i++)
		p[i] = (unsigned char)(tag >> (56 - 8 * i));
}

uint64_t ql_udp_tag_get(const void *buf, int seq64)
{
	const unsigned char *p = (const unsigned char *)buf + ql_udp_hdr_bytes(seq64, 0);
	uint64_t v = 0;
	for (int i = 0; i < QL_UDP_TAG_BYTES; i++)
		v = v << 8 | p[i];
	return v;
}

size_t ql_udp_hdr_encode(void *buf, const ql_udp_hdr *h, int seq64)
{
	unsigned char *p = buf;
	uint32_t v = htonl(h->sec);
	memcpy(p, &v, 4);
	v = htonl(h->usec);
	memcpy(p + 4, &v, 4);
	if (seq64) {
		v = htonl((uint32_t)(h->seq >> 32));
		memcpy(p + 8, &v, 4);
		v = htonl((uint32_t)h->seq);
		memcpy(p + 12, &v, 4);
		return QL_UDP_HDR64_BYTES;
	}
	v = htonl((uint32_t)h->seq);
	memcpy(p + 8, &v, 4);
	return QL_UDP_HDR32_BYTES;
}

int ql_udp_hdr_decode(const void *buf, size_t len, int seq64, ql_udp_hdr *h)
{
	const unsigned char *p = buf;
	uint32_t v;
	if (len < (seq64 ? QL_UDP_HDR64_BYTES : QL_UDP_HDR32_BYTES))
		return -EINVAL;
	memcpy(&v, p, 4);
	h->sec = ntohl(v);
	memcpy(&v, p + 4, 4);
	h->usec = ntohl(v);
	memcpy(&v, p + 8, 4);
	if (seq64) {
		uint32_t lo;
		memcpy(&lo, p + 12, 4);
		h->seq = ((uint64_t)ntohl(v) << 32) | ntohl(lo);
	} else {
		h->seq = ntohl(v);
	}
	return 0;
}

/* ------------------------------------------------------------ params --- */

void ql_params_init(ql_params *p)
{
	memset(p, 0, sizeof *p);
	p->parallel = 1;
	p->time_s = 10;
	p->tos = -1;
	p->udp_drain_s = -1;
	p->interval_s = 1;
}

int ql_params_to_json(const ql_params *p, char **out, ql_err *e)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	cJSON_AddBoolToObject(o, p->udp ? "udp" : "tcp", 1);
	cJSON_AddNumberToObject(o, "omit", p->omit_s);
	cJSON_AddNumberToObject(o, "time", p->time_s);
	cJSON_AddNumberToObject(o, "num", (double)p->num_bytes);
	cJSON_AddNumberToObject(o, "blockcount", (double)p->blockcount);
	if (p->mss_bytes)
		cJSON_AddNumberToObject(o, "MSS", p->mss_bytes);
	if (p->nodelay)
		cJSON_AddBoolToObject(o, "nodelay", 1);
	cJSON_AddNumberToObject(o, "parallel", p->parallel);
	if (p->reverse)
		cJSON_AddBoolToObject(o, "reverse", 1);
	if (p->bidir)
		cJSON_AddBoolToObject(o, "bidirectional", 1);
	if (p->window_bytes)
		cJSON_AddNumberToObject(o, "window", (double)p->window_bytes);
	cJSON_AddNumberToObject(o, "len", p->len_bytes);
	cJSON_AddNumberToObject(o, "bandwidth", (double)p->bandwidth_bps);
	if (p->fqrate_bps)
		cJSON_AddNumberToObject(o, "fqrate", (double)p->fqrate_bps);
	cJSON_AddNumberToObject(o, "pacing_timer", 1000);
	if (p->tos >= 0)
		cJSON_AddNumberToObject(o, "TOS", p->tos);
	if (p->congestion[0])
		cJSON_AddStringToObject(o, "congestion", p->congestion);
	if (p->title[0])
		cJSON_AddStringToObject(o, "title", p->title);
	if (p->udp_counters_64bit)
		cJSON_AddNumberToObject(o, "udp_counters_64bit", 1);
	if (p->nserver_cpu == 1)
		cJSON_AddNumberToObject(o, "server_affinity", p->server_cpu[0]);
	cJSON_AddStringToObject(o, "client_version", "3.12");
	if (p->qoslab[0]) {
		cJSON_AddStringToObject(o, "qoslab", p->qoslab);
		if (p->sndbuf_bytes)
			cJSON_AddNumberToObject(o, "qoslab_sndbuf", (double)p->sndbuf_bytes);
		if (p->rcvbuf_bytes)
			cJSON_AddNumberToObject(o, "qoslab_rcvbuf", (double)p->rcvbuf_bytes);
		if (p->udp_drain_s >= 0)
			cJSON_AddNumberToObject(o, "qoslab_udp_drain", p->udp_drain_s);
		cJSON_AddNumberToObject(o, "qoslab_interval", p->interval_s);
		if (p->udp_gso)
			cJSON_AddNumberToObject(o, "qoslab_udp_gso", 1);
		if (p->udp_tag)
			cJSON_AddNumberToObject(o, "qoslab_udp_tag", 1);
		if (p->skip_rx_copy)
			cJSON_AddNumberToObject(o, "qoslab_skip_rx_copy", 1);
		if (p->zerocopy)
			cJSON_AddNumberToObject(o, "qoslab_zerocopy", 1);
		if (p->nserver_cpu > 1) {
			cJSON *a = cJSON_AddArrayToObject(o, "qoslab_server_affinity");
			for (int i = 0; a && i < p->nserver_cpu; i++)
				cJSON_AddItemToArray(a, cJSON_CreateNumber(p->server_cpu[i]));
		}
		if (p->udp_limit_bytes)
			cJSON_AddNumberToObject(o, "qoslab_udp_bytes", (double)p->udp_limit_bytes);
		if (p->nstream_tos > 0) {
			cJSON *a = cJSON_AddArrayToObject(o, "qoslab_tos_per_stream");
			for (int i = 0; a && i < p->nstream_tos; i++)
				cJSON_AddItemToArray(a, cJSON_CreateNumber(p->stream_tos[i]));
		}
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		return ql_err_set(e, ENOMEM, NULL, "out of memory");
	*out = s;
	return 0;
}

static int bad(ql_err *e, const char *key, const char *what)
{
	int rc = ql_err_set(e, EPROTO, "EPROTO", "peer parameters: \"%s\": %s", key, what);
	return rc;
}

/* Numeric key in [min, max]; booleans count as 0/1 (iperf3 writes both). */
static int num_key(const cJSON *o, const char *key, double min, double max,
		   double *out, int *present, ql_err *e)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	*present = 0;
	if (!it || cJSON_IsNull(it))
		return 0;
	double v;
	if (cJSON_IsBool(it))
		v = cJSON_IsTrue(it) ? 1 : 0;
	else if (cJSON_IsNumber(it))
		v = it->valuedouble;
	else
		return bad(e, key, "expected a number");
	if (!isfinite(v) || v < min || v > max)
		return ql_err_set(e, EPROTO, "EPROTO", "peer parameters: \"%s\": expected "
				  "%.15g..%.15g, got %.15g", key, min, max, v);
	*out = v;
	*present = 1;
	return 0;
}

static int str_key(const cJSON *o, const char *key, char *dst, size_t cap,
		   ql_err *e)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!it || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsString(it) || !it->valuestring)
		return bad(e, key, "expected a string");
	size_t n = strlen(it->valuestring);
	if (n >= cap)
		return bad(e, key, "string too long");
	memcpy(dst, it->valuestring, n + 1);
	return 0;
}

/* "qoslab_tos_per_stream": absent, or an array of exactly p->parallel
 * integers in 0..255, not with "TOS" (one rule for the TOS of a stream). */
static int tos_list_key(const cJSON *o, ql_params *p, ql_err *e)
{
	static const char key[] = "qoslab_tos_per_stream";
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!it || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsArray(it))
		return bad(e, key, "expected an array of integers in 0..255");
	int n = cJSON_GetArraySize(it);
	if (n != p->parallel)
		return bad(e, key, "expected one entry per stream (\"parallel\")");
	if (p->tos >= 0)
		return bad(e, key, "cannot be combined with \"TOS\"");
	int i = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, it) {
		double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
		if (!cJSON_IsNumber(x) || !isfinite(v) || v < 0 || v > 255 || v != floor(v))
			return bad(e, key, "expected an array of integers in 0..255");
		p->stream_tos[i++] = (unsigned char)v;
	}
	p->nstream_tos = n;
	return 0;
}

/* "qoslab_server_affinity": absent, or an array of 1..QL_STREAM_TOS_MAX
 * CPU numbers in 0..1023 (it takes the place of "server_affinity"). */
static int cpu_list_key(const cJSON *o, ql_params *p, ql_err *e)
{
	static const char key[] = "qoslab_server_affinity";
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!it || cJSON_IsNull(it))
		return 0;
	int n = cJSON_IsArray(it) ? cJSON_GetArraySize(it) : 0;
	if (n < 1 || n > QL_STREAM_TOS_MAX)
		return bad(e, key, "expected an array of 1..128 integers in 0..1023");
	int i = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, it) {
		double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
		if (!cJSON_IsNumber(x) || !isfinite(v) || v < 0 || v > 1023 || v != floor(v))
			return bad(e, key, "expected an array of 1..128 integers in 0..1023");
		p->server_cpu[i++] = (unsigned short)v;
	}
	p->nserver_cpu = n;
	return 0;
}

int ql_params_from_json(const char *text, size_t len, ql_params *p, ql_err *e)
{
	ql_params_init(p);
	p->time_s = 0;
	cJSON *o = cJSON_ParseWithLength(text, len);
	if (!o)
		return ql_err_set(e, EPROTO, "EPROTO", "peer parameters: malformed JSON");
	int rc = 0;
	if (!cJSON_IsObject(o)) {
		rc = bad(e, "(top)", "expected an object");
		goto out;
	}
	double v;
	int has;
#define NUM(key, lo, hi, stmt) do { \
	if ((rc = num_key(o, key, lo, hi, &v, &has, e)) < 0) goto out; \
	if (has) { stmt; } } while (0)
	NUM("udp", 0, 1, p->udp = v != 0);
	NUM("sctp", 0, 1, if (v != 0) { rc = ql_err_set(e, ENOTSUP, "ENOTSUP",
		"peer parameters: SCTP is not supported by qoslab"); goto out; });
	NUM("omit", 0, 86400, p->omit_s = v);
	NUM("time", 0, 86400 * 30.0, p->time_s = v);
	NUM("num", 0, 9.0e18, p->num_bytes = (uint64_t)v);
	NUM("blockcount", 0, 9.0e18, p->blockcount = (uint64_t)v);
	NUM("MSS", 0, 65535, p->mss_bytes = (int)v);
	NUM("nodelay", 0, 1, p->nodelay = v != 0);
	NUM("parallel", 1, 128, p->parallel = (int)v);
	NUM("reverse", 0, 1, p->reverse = v != 0);
	NUM("bidirectional", 0, 1, p->bidir = v != 0);
	NUM("window", 0, 2147483647.0, p->window_bytes = (int64_t)v);
	NUM("len", 0, 1 << 24, p->len_bytes = (int)v);
	NUM("bandwidth", 0, 1.0e15, p->bandwidth_bps = (uint64_t)v);
	NUM("fqrate", 0, 1.0e15, p->fqrate_bps = (uint64_t)v);
	NUM("TOS", 0, 255, p->tos = (int)v);
	NUM("udp_counters_64bit", 0, 1, p->udp_counters_64bit = v != 0);
	NUM("qoslab_sndbuf", 0, 2147483647.0, p->sndbuf_bytes = (int64_t)v);
	NUM("qoslab_rcvbuf", 0, 2147483647.0, p->rcvbuf_bytes = (int64_t)v);
	NUM("qoslab_udp_drain", 0, 60, p->udp_drain_s = v);
	NUM("qoslab_interval", 0.1, 3600, p->interval_s = v);
	NUM("qoslab_udp_gso", 0, 1, p->udp_gso = v != 0);
	NUM("qoslab_udp_tag", 0, 1, p->udp_tag = v != 0);
	NUM("qoslab_skip_rx_copy", 0, 1, p->skip_rx_copy = v != 0);
	NUM("qoslab_zerocopy", 0, 1, p->zerocopy = v != 0);
	NUM("server_affinity", 0, 1023, (p->server_cpu[0] = (unsigned short)v, p->nserver_cpu = 1));
	NUM("qoslab_udp_bytes", 0, 9.0e18, p->udp_limit_bytes = (uint64_t)v);
#undef NUM
	if ((rc = str_key(o, "congestion", p->congestion, sizeof p->congestion, e)) < 0)
		goto out;
	if ((rc = str_key(o, "title", p->title, sizeof p->title, e)) < 0)
		goto out;
	if ((rc = str_key(o, "qoslab", p->qoslab, sizeof p->qoslab, e)) < 0)
		goto out;
	if ((rc = tos_list_key(o, p, e)) < 0)
		goto out;
	if ((rc = cpu_list_key(o, p, e)) < 0)
		goto out;
	if (p->len_bytes && p->udp &&
	    (p->len_bytes < QL_UDP_MIN_BYTES || p->len_bytes > QL_UDP_MAX_BYTES)) {
		rc = bad(e, "len", "UDP datagram length must be 16..65507");
		goto out;
	}
	for (const char *k = p->congestion; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_')) {
			rc = bad(e, "congestion", "unexpected characters");
			goto out;
		}
out:
	cJSON_Delete(o);
	return rc;
}

/* ---------------------------------------------------------- framed io --- */

int ql_io_wait_fd(int fd, short ev, int64_t deadline_ns, const volatile int *stop)
{
	for (;;) {
		if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
			return -EINTR;
		int64_t slice = 50000000;
		if (deadline_ns > 0) {
			int64_t left = deadline_ns - ql_now_ns();
			if (left <= 0)
				return -ETIMEDOUT;
			if (left < slice)
				slice = left;
		}
		struct pollfd pf = { .fd = fd, .events = ev };
		int n = poll(&pf, 1, (int)((slice + 999999) / 1000000));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n > 0)
			return 0;
	}
}

int ql_io_read_full(int fd, void *buf, size_t n, int64_t deadline_ns,
		    const volatile int *stop)
{
	size_t got = 0;
	while (got < n) {
		int rc = ql_io_wait_fd(fd, POLLIN, deadline_ns, stop);
		if (rc < 0)
			return rc;
		ssize_t r = recv(fd, (char *)buf + got, n - got, MSG_DONTWAIT);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	return 0;
}

int ql_io_write_full(int fd, const void *buf, size_t n, int64_t deadline_ns,
		     const volatile int *stop)
{
	size_t put = 0;
	while (put < n) {
		int rc = ql_io_wait_fd(fd, POLLOUT, deadline_ns, stop);
		if (rc < 0)
			return rc;
		ssize_t r = send(fd, (const char *)buf + put, n - put,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return errno == EPIPE ? -ECONNRESET : -errno;
		}
		put += (size_t)r;
	}
	return 0;
}

int ql_io_write_state(int fd, int state, int64_t deadline_ns,
		      const volatile int *stop)
{
	signed char b = (signed char)state;
	return ql_io_write_full(fd, &b, 1, deadline_ns, stop);
}

int ql_io_read_state(int fd, int *state, int64_t deadline_ns,
		     const volatile int *stop)
{
	signed char b;
	int rc = ql_io_read_full(fd, &b, 1, deadline_ns, stop);
	if (rc == 0)
		*state = b;
	return rc;
}

int ql_io_read_json(int fd, size_t max_len, char **out, size_t *outlen,
		    int64_t deadline_ns, const volatile int *stop)
{
	uint32_t be;
	int rc = ql_io_read_full(fd, &be, 4, deadline_ns, stop);
	if (rc < 0)
		return rc;
	uint32_t n = ntohl(be);
	if (n == 0)
		return -ENODATA;
	if (n > max_len)
		return -EMSGSIZE;
	char *s = malloc((size_t)n + 1);
	if (!s)
		return -ENOMEM;
	rc = ql_io_read_full(fd, s, n, deadline_ns, stop);
	if (rc < 0) {
		free(s);
		return rc;
	}
	s[n] = 0;
	*out = s;
	if (outlen)
		*outlen = n;
	return 0;
}

int ql_io_write_prefixed_json(int fd, const void *prefix, size_t prefix_len, const char *text,
			      int64_t deadline_ns, const volatile int *stop)
{
	size_t n = strlen(text);
	if (n > UINT32_MAX || prefix_len > SIZE_MAX - 4 - n)
		return -EMSGSIZE;
	char *buf = malloc(prefix_len + 4 + n);
	if (!buf)
		return -ENOMEM;
	uint32_t be = htonl((uint32_t)n);
	if (prefix_len)
		memcpy(buf, prefix, prefix_len);
	memcpy(buf + prefix_len, &be, 4);
	memcpy(buf + prefix_len + 4, text, n);
	int rc = ql_io_write_full(fd, buf, prefix_len + 4 + n, deadline_ns, stop);
	free(buf);
	return rc;
}

int ql_io_write_json(int fd, const char *text, int64_t deadline_ns,
		     const volatile int *stop)
{
	return ql_io_write_prefixed_json(fd, NULL, 0, text, deadline_ns, stop);
}
