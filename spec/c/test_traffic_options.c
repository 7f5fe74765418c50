/*
 * C unit tests of the traffic options' one check (engine/options.c):
 * ql_client_opts_validate and ql_server_opts_validate name the field and
 * what was expected, hold the cross-field rules, let the "not given"
 * defaults of *_opts_init pass, and ql_client_start / ql_server_start run
 * them before anything starts. No sockets, no threads.
 */
#include "ctest.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/options.h"

static ql_client_opts client(void)
{
	ql_client_opts o;
	ql_client_opts_init(&o);
	o.host = "127.0.0.1";
	return o;
}

static void expect_client(const ql_client_opts *o, const char *msg)
{
	ql_err e;
	CHECK_EQ_INT(ql_client_opts_validate(o, &e), -EINVAL);
	CHECK(e.usage);
	CHECK_STR(e.msg, msg);
}

static void expect_server(const ql_server_opts *o, const char *msg)
{
	ql_err e;
	CHECK_EQ_INT(ql_server_opts_validate(o, &e), -EINVAL);
	CHECK(e.usage);
	CHECK_STR(e.msg, msg);
}

TEST(client_defaults_pass)
{
	ql_err e;
	ql_client_opts o = client();
	CHECK_EQ_INT(ql_client_opts_validate(&o, &e), 0);
	o.proto = QL_PROTO_UDP;
	o.packets = 10;
	o.udp_batch = QL_UDP_BATCH_MAX;
	o.udp_gso = 1;
	o.udp_drain_s = 0;
	o.length_bytes = QL_UDP_MIN_BYTES;
	CHECK_EQ_INT(ql_client_opts_validate(&o, &e), 0);
	/* the table the binding converts by has every key once */
	int n = 0;
	for (const ql_opt_desc *d = ql_client_opt_desc; d->key; d++, n++)
		for (const ql_opt_desc *d2 = d + 1; d2->key; d2++)
			CHECK(strcmp(d->key, d2->key) != 0);
	CHECK_EQ_INT(n, 34);
}

TEST(client_ranges_name_the_field)
{
	ql_client_opts o = client();
	o.cpu_affinity.n = 1;
	o.cpu_affinity.cpu[0] = 1024;
	expect_client(&o, "opts.cpu_affinity[1]: expected a CPU number in [0, 1023], got 1024");
	o = client();
	o.server_cpu_affinity.n = 129;
	expect_client(&o, "opts.server_cpu_affinity: expected a CPU number in [0, 1023] or a list "
		      "of 1..128 of them, got 129 entries");
	o = client();
	o.proto = QL_PROTO_UDP;
	o.skip_rx_copy = 1;
	expect_client(&o, "opts.skip_rx_copy: a TCP option, not valid with proto = \"udp\"");
	o = client();
	o.parallel = 129;
	expect_client(&o, "opts.parallel: expected an integer in [1, 128], got 129");
	o = client();
	o.interval_s = 0.05;
	expect_client(&o, "opts.interval_s: expected a finite number in [0.1, 3600], got 0.05");
	o = client();
	o.duration_s = NAN;
	expect_client(&o, "opts.duration_s: expected a finite number in [0.001, 86400], got nan");
	o = client();
	o.length_bytes = (1 << 24) + 1;
	expect_client(&o, "opts.length_bytes: expected an integer in [1, 16777216], got 16777217");
	o.proto = QL_PROTO_UDP;
	o.length_bytes = 15;
	expect_client(&o, "opts.length_bytes: expected an integer in [16, 65507] for UDP, got 15");
	o = client();
	o.bitrate_bps = ((uint64_t)1 << 50) + 1;
	expect_client(&o, "opts.bitrate_bps: expected an integer in [0, 1125899906842624], "
		      "got 1125899906842625");
	o = client();
	o.tos = 256;
	expect_client(&o, "opts.tos: expected an integer in [0, 255], got 256");
	o = client();
	o.proto = 7;
	expect_client(&o, "opts.proto: expected one of \"tcp\", \"udp\", got 7");
	o = client();
	o.host = "";
	expect_client(&o, "opts.host: expected a host name or address, got string \"\"");
	o = client();
	o.host = NULL;
	expect_client(&o, "opts.host: expected a host name or address, got nil");
	o = client();
	o.congestion = "BBR";
	expect_client(&o, "opts.congestion: expected a congestion control name (1..15 of a-z, "
		      "0-9, _; e.g. \"cubic\", \"bbr\"), got string \"BBR\"");
	o = client();
	o.bind_device = "an-interface-name";
	expect_client(&o, "opts.bind_device: expected an interface name (1..15 characters), "
		      "got string \"an-interface-name\"");
	o = client();
	o.title = "";
	expect_client(&o, "opts.title: expected a non-empty string, got string \"\"");
}

TEST(client_cross_field_rules)
{
	ql_client_opts o = client();
	o.duration_s = 1;
	o.bytes = 10;
	expect_client(&o, "opts.duration_s: cannot be combined with opts.bytes or opts.packets "
		      "(one end condition)");
	o = client();
	o.proto = QL_PROTO_UDP;
	o.bytes = 10;
	o.packets = 10;
	expect_client(&o, "opts.packets: cannot be combined with opts.bytes (one end condition)");
	o = client();
	o.packets = 10;
	expect_client(&o, "opts.packets: only for proto = \"udp\" (use opts.bytes for TCP)");
	o = client();
	o.reverse = o.bidir = 1;
	expect_client(&o, "opts.bidir: cannot be combined with opts.reverse (bidir already runs "
		      "both directions)");
	o = client();
	o.window_bytes = 1000;
	o.sndbuf_bytes = 1000;
	expect_client(&o, "opts.window_bytes: sets both buffers; use it or "
		      "opts.sndbuf_bytes/opts.rcvbuf_bytes, not both");
	o = client();
	o.proto = QL_PROTO_UDP;
	o.nodelay = 0;   /* given, even false */
	expect_client(&o, "opts.nodelay: a TCP option, not valid with proto = \"udp\"");
	o.nodelay = -1;
	o.congestion = "cubic";
	expect_client(&o, "opts.congestion: a TCP option, not valid with proto = \"udp\"");
	o = client();
	o.udp_gso = 0;
	expect_client(&o, "opts.udp_gso: a UDP option, only valid with proto = \"udp\"");
	o = client();
	o.udp_drain_s = 0;
	expect_client(&o, "opts.udp_drain_s: a UDP option, only valid with proto = \"udp\"");
}

/* opts.tos_per_stream: one TOS byte per stream of a direction, exactly
 * parallel entries, never with the single opts.tos. */
TEST(client_tos_per_stream_rules)
{
	ql_err e;
	ql_client_opts o = client();
	o.parallel = 4;
	o.bidir = 1;
	static const unsigned char tos[4] = { 0x00, 0x20, 0xa0, 0xb8 };
	memcpy(o.tos_per_stream.tos, tos, sizeof tos);
	o.tos_per_stream.n = 4;
	CHECK_EQ_INT(ql_client_opts_validate(&o, &e), 0);
	o.proto = QL_PROTO_UDP;
	CHECK_EQ_INT(ql_client_opts_validate(&o, &e), 0);
	o.proto = QL_PROTO_TCP;
	o.tos = 0x20;
	expect_client(&o, "opts.tos_per_stream: cannot be combined with opts.tos (one TOS for "
		      "every stream, or one per stream)");
	o.tos = -1;
	o.tos_per_stream.n = 3;
	expect_client(&o, "opts.tos_per_stream: expected one entry per stream (opts.parallel = "
		      "4), got 3");
	o.parallel = 2;
	o.tos_per_stream.n = 4;
	expect_client(&o, "opts.tos_per_stream: expected one entry per stream (opts.parallel = "
		      "2), got 4");
	o.tos_per_stream.n = QL_PARALLEL_MAX + 1;
	expect_client(&o, "opts.tos_per_stream: expected a list of 1..128 integers in [0, 255], "
		      "got 129 entries");
	o.tos_per_stream.n = -1;
	expect_client(&o, "opts.tos_per_stream: expected a list of 1..128 integers in [0, 255], "
		      "got -1 entries");
	/* its table entry words what the binding expects */
	const ql_opt_desc *d = ql_client_opt_desc;
	while (d->key && strcmp(d->key, "tos_per_stream") != 0)
		d++;
	CHECK(d->key != NULL);
	char exp[96];
	CHECK_STR(ql_opt_expected(d, QL_PROTO_TCP, exp, sizeof exp, NULL, NULL),
		  "a list of 1..128 integers in [0, 255]");
}

TEST(client_start_runs_the_check)
{
	ql_client_opts o = client();
	o.proto = QL_PROTO_UDP;
	o.mss_bytes = 1000;
	ql_test *t = NULL;
	ql_err e;
	CHECK_EQ_INT(ql_client_start(&o, &t, &e), -EINVAL);
	CHECK(t == NULL);
	CHECK(e.usage);
	CHECK_STR(e.msg, "opts.mss_bytes: a TCP option, not valid with proto = \"udp\"");
}

TEST(server_rules)
{
	ql_err e;
	ql_server_opts o;
	ql_server_opts_init(&o);
	CHECK_EQ_INT(ql_server_opts_validate(&o, &e), 0);
	o.port = -1;   /* any free port */
	CHECK_EQ_INT(ql_server_opts_validate(&o, &e), 0);
	o.port = 65536;
	expect_server(&o, "opts.port: expected an integer in [0, 65535], got 65536");
	ql_server_opts_init(&o);
	o.max_unidentified = 65537;
	expect_server(&o, "opts.max_unidentified: expected an integer in [1, 65536], got 65537");
	ql_server_opts_init(&o);
	o.data_idle_s = NAN;
	expect_server(&o, "opts.data_idle_s: expected a finite number in [0.001, 86400], got nan");
	ql_server_opts_init(&o);
	o.test_buffer_bytes = ((int64_t)1 << 40) + 1;
	expect_server(&o, "opts.test_buffer_bytes: expected an integer in [1, 1099511627776], "
		      "got 1099511627777");
	ql_server_opts_init(&o);
	o.keep_results = -1;
	expect_server(&o, "opts.keep_results: expected an integer in [0, 100000], got -1");
	ql_server_opts_init(&o);
	o.netns = "a/b";
	expect_server(&o, "opts.netns: expected a namespace name (1..200 bytes, no '/', not . "
		      "or ..), got string \"a/b\"");
	/* ql_server_start runs the same check before it listens */
	ql_server *s = NULL;
	CHECK_EQ_INT(ql_server_start(&o, &s, &e), -EINVAL);
	CHECK(s == NULL);
	CHECK(strstr(e.msg, "opts.netns: expected a namespace name") == e.msg);
}

int main(void)
{
	RUN(client_defaults_pass);
	RUN(client_ranges_name_the_field);
	RUN(client_cross_field_rules);
	RUN(client_tos_per_stream_rules);
	RUN(client_start_runs_the_check);
	RUN(server_rules);
	return ctest_done();
}
