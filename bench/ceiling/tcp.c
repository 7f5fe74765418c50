/*
 * tcp.c - the kernel's ceiling for TCP bulk transfer: S streams, each a
 * sending thread doing blocking send() of BLOCK bytes and a receiving thread
 * doing blocking recv() of BLOCK bytes (with -T: recv(MSG_TRUNC), which
 * discards the data without copying it out). No accounting beyond one byte
 * counter per thread, no clock read in the receive loop.
 *
 *   tcp -a ADDR [-t SECONDS] [-P STREAMS] [-l BLOCK] [-T] [-s NETNS] [-r NETNS]
 *
 * -s / -r: namespaces of the sending / receiving threads (the receiver
 * listens on ADDR, port chosen by the kernel). Prints one "ceiling path=tcp"
 * line (see common.h); bytes are those received, seconds from the common
 * start to the last stream's end of file.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>

#define MAX_STREAMS 256

struct stream {
	int fd_tx, fd_rx;
	size_t block;
	int trunc;
	double end_s, deadline_s;
	unsigned long long bytes;
	double tx_cpu_s, rx_cpu_s;
	pthread_t th_tx, th_rx;
};

static const char *tx_ns, *rx_ns;
static pthread_barrier_t start;
static double t0;

static void *sender(void *p)
{
	struct stream *s = p;
	char *buf = calloc(1, s->block);
	if (!buf)
		exit(1);
	pthread_barrier_wait(&start);
	double c0 = thread_cpu_s();
	while (now_s() < s->deadline_s) {
		if (send(s->fd_tx, buf, s->block, 0) < 0 && errno != EINTR)
			break;
	}
	shutdown(s->fd_tx, SHUT_WR);
	s->tx_cpu_s = thread_cpu_s() - c0;
	free(buf);
	return NULL;
}

static void *receiver(void *p)
{
	struct stream *s = p;
	char *buf = malloc(s->block);
	if (!buf)
		exit(1);
	pthread_barrier_wait(&start);
	double c0 = thread_cpu_s();
	for (;;) {
		ssize_t n = recv(s->fd_rx, buf, s->block, s->trunc ? MSG_TRUNC : 0);
		if (n > 0)
			s->bytes += (unsigned long long)n;
		else if (n == 0 || errno != EINTR)
			break;
	}
	s->end_s = now_s();
	s->rx_cpu_s = thread_cpu_s() - c0;
	free(buf);
	return NULL;
}

static struct stream streams[MAX_STREAMS];

int main(int argc, char **argv)
{
	const char *addr = NULL;
	double secs = 2;
	int n = 1, trunc = 0, c;
	size_t block = 128 * 1024;
	while ((c = getopt(argc, argv, "a:t:P:l:Ts:r:")) != -1) {
		switch (c) {
		case 'a': addr = optarg; break;
		case 't': secs = arg_num(optarg, "-t seconds", 0.1, 3600); break;
		case 'P': n = (int)arg_num(optarg, "-P streams", 1, MAX_STREAMS); break;
		case 'l': block = (size_t)arg_num(optarg, "-l block bytes", 1, 1 << 24); break;
		case 'T': trunc = 1; break;
		case 's': tx_ns = optarg; break;
		case 'r': rx_ns = optarg; break;
		default:
			fprintf(stderr, "usage: tcp -a ADDR [-t S] [-P N] [-l BYTES] [-T] [-s NS] [-r NS]\n");
			return 2;
		}
	}
	struct sockaddr_in a = { .sin_family = AF_INET };
	if (!addr || inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
		fprintf(stderr, "ceiling: -a: expected an IPv4 address\n");
		return 2;
	}
	/* the main thread makes the listener in the receiver's namespace and
	 * the connections from the sender's (sockets keep the namespace of the
	 * thread that made them) */
	enter_netns(rx_ns);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, MAX_STREAMS) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		perror("ceiling: tcp listener");
		return 1;
	}
	enter_netns(tx_ns);
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
			perror("ceiling: tcp connect");
			return 1;
		}
		streams[i].fd_tx = fd;
		streams[i].fd_rx = accept(l, NULL, NULL);
		if (streams[i].fd_rx < 0) {
			perror("ceiling: tcp accept");
			return 1;
		}
		streams[i].block = block;
		streams[i].trunc = trunc;
	}
	pthread_barrier_init(&start, NULL, (unsigned)(2 * n + 1));
	for (int i = 0; i < n; i++) {
		pthread_create(&streams[i].th_rx, NULL, receiver, &streams[i]);
		pthread_create(&streams[i].th_tx, NULL, sender, &streams[i]);
	}
	t0 = now_s();
	for (int i = 0; i < n; i++)
		streams[i].deadline_s = t0 + secs;
	pthread_barrier_wait(&start);
	unsigned long long bytes = 0;
	double end = t0, tx_cpu = 0, rx_cpu = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(streams[i].th_tx, NULL);
		pthread_join(streams[i].th_rx, NULL);
		tx_cpu += streams[i].tx_cpu_s;
		rx_cpu += streams[i].rx_cpu_s;
		bytes += streams[i].bytes;
		if (streams[i].end_s > end)
			end = streams[i].end_s;
	}
	printf("ceiling path=tcp streams=%d block_bytes=%zu trunc=%d bytes=%llu datagrams=0 "
	       "seconds=%.6f tx_cpu_s=%.6f rx_cpu_s=%.6f\n",
	       n, block, trunc, bytes, end - t0, tx_cpu, rx_cpu);
	return 0;
}
