/*
 * udp.c - the kernel's ceiling for unpaced UDP: one sending thread doing
 * sendmmsg() of BATCH datagrams of LEN bytes into a connected socket, one
 * receiving thread doing recvmmsg() of BATCH. With -G the sender hands the
 * kernel buffers of up to 64 segments (UDP_SEGMENT, generic segmentation
 * offload) and the receiver asks for coalesced buffers (UDP_GRO) and counts
 * their segments from the gso_size control message. No timestamps, no
 * sequence numbers.
 *
 *   udp -a ADDR [-t SECONDS] [-l LEN] [-b BATCH] [-G] [-s NETNS] [-r NETNS]
 *
 * Prints one "ceiling path=udp" line (see common.h): bytes and datagrams
 * received (payload), sent_datagrams, seconds from the start to the last
 * datagram received.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define MAX_BATCH 1024
#define GSO_MAX_SEGS 64

static size_t len = 1400;
static unsigned batch = 32;
static int gso;
static int fd_tx, fd_rx;
static double deadline_s, last_rx_s, tx_cpu_s, rx_cpu_s;
static unsigned long long sent, rx_bytes, rx_dgrams;
static atomic_int tx_done;
static pthread_barrier_t start;

static void *sender(void *p)
{
	(void)p;
	size_t segs = gso ? (65000 / len < GSO_MAX_SEGS ? 65000 / len : GSO_MAX_SEGS) : 1;
	if (segs < 1)
		segs = 1;
	size_t blen = segs * len;
	char *buf = calloc(1, blen);
	struct mmsghdr *mm = calloc(batch, sizeof *mm);
	struct iovec *iov = calloc(batch, sizeof *iov);
	if (!buf || !mm || !iov)
		exit(1);
	for (unsigned i = 0; i < batch; i++) {
		iov[i].iov_base = buf;
		iov[i].iov_len = blen;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	if (gso) {
		int sz = (int)len;
		if (setsockopt(fd_tx, IPPROTO_UDP, UDP_SEGMENT, &sz, sizeof sz) < 0) {
			perror("ceiling: UDP_SEGMENT");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	double c0 = thread_cpu_s();
	while (now_s() < deadline_s) {
		int k = sendmmsg(fd_tx, mm, batch, 0);
		if (k > 0)
			sent += (unsigned long long)k * segs;
	}
	tx_cpu_s = thread_cpu_s() - c0;
	atomic_store(&tx_done, 1);
	free(buf);
	free(mm);
	free(iov);
	return NULL;
}

static void *receiver(void *p)
{
	(void)p;
	size_t blen = gso ? 65536 : len;
	char *buf = malloc((size_t)batch * blen);
	struct mmsghdr *mm = calloc(batch, sizeof *mm);
	struct iovec *iov = calloc(batch, sizeof *iov);
	char (*ctl)[64] = calloc(batch, 64);
	if (!buf || !mm || !iov || !ctl)
		exit(1);
	pthread_barrier_wait(&start);
	double c0 = thread_cpu_s();
	for (;;) {
		for (unsigned i = 0; i < batch; i++) {
			iov[i].iov_base = buf + i * blen;
			iov[i].iov_len = blen;
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
			mm[i].msg_hdr.msg_control = gso ? ctl[i] : NULL;
			mm[i].msg_hdr.msg_controllen = gso ? 64 : 0;
		}
		int k = recvmmsg(fd_rx, mm, batch, MSG_WAITFORONE, NULL);
		if (k < 0) {
			/* the receive timeout: the sender has stopped and the
			 * queue is empty */
			if ((errno == EAGAIN || errno == EWOULDBLOCK) && atomic_load(&tx_done))
				break;
			continue;
		}
		for (int i = 0; i < k; i++) {
			unsigned long long dg = 1;
			rx_bytes += mm[i].msg_len;
			if (gso) {
				for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mm[i].msg_hdr); cm;
				     cm = CMSG_NXTHDR(&mm[i].msg_hdr, cm)) {
					if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO) {
						int seg;
						memcpy(&seg, CMSG_DATA(cm), sizeof seg);
						if (seg > 0)
							dg = (mm[i].msg_len + (unsigned)seg - 1) / (unsigned)seg;
					}
				}
			}
			rx_dgrams += dg;
		}
		last_rx_s = now_s();
	}
	rx_cpu_s = thread_cpu_s() - c0;
	free(buf);
	free(mm);
	free(iov);
	free(ctl);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *tx_ns = NULL, *rx_ns = NULL;
	double secs = 2;
	int c;
	while ((c = getopt(argc, argv, "a:t:l:b:Gs:r:")) != -1) {
		switch (c) {
		case 'a': addr = optarg; break;
		case 't': secs = arg_num(optarg, "-t seconds", 0.1, 3600); break;
		case 'l': len = (size_t)arg_num(optarg, "-l datagram bytes", 1, 65000); break;
		case 'b': batch = (unsigned)arg_num(optarg, "-b batch", 1, MAX_BATCH); break;
		case 'G': gso = 1; break;
		case 's': tx_ns = optarg; break;
		case 'r': rx_ns = optarg; break;
		default:
			fprintf(stderr, "usage: udp -a ADDR [-t S] [-l BYTES] [-b N] [-G] [-s NS] [-r NS]\n");
			return 2;
		}
	}
	struct sockaddr_in a = { .sin_family = AF_INET };
	if (!addr || inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
		fprintf(stderr, "ceiling: -a: expected an IPv4 address\n");
		return 2;
	}
	enter_netns(rx_ns);
	fd_rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t al = sizeof a;
	int rcvbuf = 8 << 20, one = 1;
	struct timeval tmo = { .tv_sec = 0, .tv_usec = 300000 };
	if (fd_rx < 0 || bind(fd_rx, (struct sockaddr *)&a, sizeof a) < 0 ||
	    getsockname(fd_rx, (struct sockaddr *)&a, &al) < 0 ||
	    setsockopt(fd_rx, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof tmo) < 0) {
		perror("ceiling: udp receiver");
		return 1;
	}
	/* a large queue as root, the capped one otherwise */
	if (setsockopt(fd_rx, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
		setsockopt(fd_rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	if (gso && setsockopt(fd_rx, IPPROTO_UDP, UDP_GRO, &one, sizeof one) < 0) {
		perror("ceiling: UDP_GRO");
		return 1;
	}
	enter_netns(tx_ns);
	fd_tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd_tx < 0 || connect(fd_tx, (struct sockaddr *)&a, sizeof a) < 0) {
		perror("ceiling: udp sender");
		return 1;
	}
	pthread_t th_tx, th_rx;
	pthread_barrier_init(&start, NULL, 3);
	double t0 = now_s();
	deadline_s = t0 + secs;
	last_rx_s = t0;
	pthread_create(&th_rx, NULL, receiver, NULL);
	pthread_create(&th_tx, NULL, sender, NULL);
	pthread_barrier_wait(&start);
	pthread_join(th_tx, NULL);
	pthread_join(th_rx, NULL);
	printf("ceiling path=udp length_bytes=%zu batch=%u gso=%d bytes=%llu datagrams=%llu "
	       "sent_datagrams=%llu seconds=%.6f tx_cpu_s=%.6f rx_cpu_s=%.6f\n",
	       len, batch, gso, rx_bytes, rx_dgrams, sent, last_rx_s - t0, tx_cpu_s, rx_cpu_s);
	return 0;
}
