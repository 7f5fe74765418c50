/*
 * udp_ceiling.c - the kernel's ceiling for unpaced UDP on loopback: a bare
 * loop of send() (batch 1) or sendmmsg() (batch > 1) into a local socket
 * that nobody reads (datagrams past its buffer are dropped at the enqueue,
 * after the loopback receive path ran in the sender's context). No
 * accounting, no timestamps, no sequence numbers: what any traffic tool on
 * this host can at most send per second. Used by bench/traffic.lua.
 *
 *   cc -O2 -o udp_ceiling bench/udp_ceiling.c && ./udp_ceiling BATCH LEN SECONDS
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int batch = argc > 1 ? atoi(argv[1]) : 64;
	int len = argc > 2 ? atoi(argv[2]) : 64;
	double secs = argc > 3 ? atof(argv[3]) : 2;
	if (batch < 1 || batch > 1024 || len < 1 || len > 65000 || !(secs > 0)) {
		fprintf(stderr, "usage: udp_ceiling BATCH(1..1024) LEN(1..65000) SECONDS\n");
		return 2;
	}
	int rx = socket(AF_INET, SOCK_DGRAM, 0), tx = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof a;
	if (rx < 0 || tx < 0 || bind(rx, (struct sockaddr *)&a, sizeof a) < 0 ||
	    getsockname(rx, (struct sockaddr *)&a, &al) < 0 ||
	    connect(tx, (struct sockaddr *)&a, sizeof a) < 0) {
		perror("udp_ceiling: socket set-up");
		return 1;
	}
	char *buf = calloc(1, (size_t)len);
	struct mmsghdr *mm = calloc((size_t)batch, sizeof *mm);
	struct iovec *iov = calloc((size_t)batch, sizeof *iov);
	if (!buf || !mm || !iov)
		return 1;
	for (int i = 0; i < batch; i++) {
		iov[i].iov_base = buf;
		iov[i].iov_len = (size_t)len;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	unsigned long long n = 0;
	double t0 = now_s(), t = t0;
	while (t - t0 < secs) {
		int k = batch == 1 ? (send(tx, buf, (size_t)len, 0) > 0) : sendmmsg(tx, mm, (unsigned)batch, 0);
		if (k > 0)
			n += (unsigned)k;
		t = now_s();
	}
	printf("%.0f\n", (double)n / (t - t0));
	return 0;
}
