/*
 * pace.c - a bare observer of a paced UDP flow: a packet socket on one
 * interface that takes, through a socket filter, only the UDP datagrams
 * arriving (not leaving) for one destination port, and sums their payload
 * bytes into windows of W ms by the kernel's receive timestamp
 * (SO_TIMESTAMPNS), from the first datagram on. It neither receives for
 * the tool nor slows it: whichever tool's server receives the flow, the
 * windows are the same measurement.
 *
 *   pace -i IFNAME -p PORT [-t SECONDS] [-w WINDOW_MS] [-n NETNS] [-f READY_FILE]
 *
 * Stops SECONDS after the first datagram or 1 s after the last one. Writes
 * "ready" to READY_FILE once the filter is attached. Prints one
 * "ceiling path=pace" line (see common.h) with drops (the packet socket's
 * own, from PACKET_STATISTICS: non-zero means the windows undercount) and
 * windows=B1,B2,... (payload bytes per window).
 */
#include "common.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>

#define MAX_WINDOWS 100000
#define BATCH 64

static unsigned long long windows[MAX_WINDOWS];

int main(int argc, char **argv)
{
	const char *ifname = NULL, *ns = NULL, *ready = NULL;
	double secs = 10, window_ms = 10;
	int port = 0, c;
	while ((c = getopt(argc, argv, "i:p:t:w:n:f:")) != -1) {
		switch (c) {
		case 'i': ifname = optarg; break;
		case 'p': port = (int)arg_num(optarg, "-p port", 1, 65535); break;
		case 't': secs = arg_num(optarg, "-t seconds", 0.1, 3600); break;
		case 'w': window_ms = arg_num(optarg, "-w window ms", 0.1, 10000); break;
		case 'n': ns = optarg; break;
		case 'f': ready = optarg; break;
		default:
			fprintf(stderr, "usage: pace -i IF -p PORT [-t S] [-w MS] [-n NS] [-f FILE]\n");
			return 2;
		}
	}
	if (!ifname || !port) {
		fprintf(stderr, "ceiling: pace needs -i IFNAME and -p PORT\n");
		return 2;
	}
	enter_netns(ns);
	int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP) };
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	/* cooked packets start at the IP header: not outgoing, UDP, not a
	 * later fragment, destination port */
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (unsigned)(SKF_AD_OFF + SKF_AD_PKTTYPE)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 8, 0),
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, 6),
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, 4, 0),
		BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0),
		BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)port, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 64),
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog fprog = { .len = sizeof prog / sizeof prog[0], .filter = prog };
	int one = 1, rcvbuf = 32 << 20;
	struct timeval tmo = { .tv_sec = 0, .tv_usec = 100000 };
	if (fd < 0 || !sll.sll_ifindex ||
	    setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof tmo) < 0 ||
	    bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
		perror("ceiling: pace packet socket");
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
	/* packets queued before the filter was attached are not filtered */
	char drain[64];
	while (recv(fd, drain, sizeof drain, MSG_DONTWAIT) > 0)
		;
	struct tpacket_stats st;
	socklen_t stl = sizeof st;
	getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &stl);
	if (ready) {
		FILE *f = fopen(ready, "w");
		if (f) {
			fputs("ready\n", f);
			fclose(f);
		}
	}
	static char buf[BATCH][64];
	static char ctl[BATCH][64];
	struct mmsghdr mm[BATCH];
	struct iovec iov[BATCH];
	double first = -1, last_wall = now_s(), t_end = 0;
	unsigned long long bytes = 0, dgrams = 0;
	size_t nw = 0;
	double w_s = window_ms / 1e3;
	for (;;) {
		for (int i = 0; i < BATCH; i++) {
			iov[i].iov_base = buf[i];
			iov[i].iov_len = sizeof buf[i];
			memset(&mm[i].msg_hdr, 0, sizeof mm[i].msg_hdr);
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
			mm[i].msg_hdr.msg_control = ctl[i];
			mm[i].msg_hdr.msg_controllen = sizeof ctl[i];
		}
		int k = recvmmsg(fd, mm, BATCH, 0, NULL);
		double wall = now_s();
		if (k <= 0) {
			if (first >= 0 && wall - last_wall > 1.0)
				break;
			if (first < 0 && wall - last_wall > secs + 30)
				break;
			continue;
		}
		last_wall = wall;
		for (int i = 0; i < k; i++) {
			double ts = -1;
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mm[i].msg_hdr); cm;
			     cm = CMSG_NXTHDR(&mm[i].msg_hdr, cm)) {
				if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
					struct timespec t;
					memcpy(&t, CMSG_DATA(cm), sizeof t);
					ts = (double)t.tv_sec + (double)t.tv_nsec / 1e9;
				}
			}
			/* the filter keeps 64 bytes: the length is the IP header's */
			unsigned ihl = (unsigned)(buf[i][0] & 0x0f) * 4;
			unsigned tot = ((unsigned)(unsigned char)buf[i][2] << 8) | (unsigned char)buf[i][3];
			if (ts < 0 || mm[i].msg_len < 20 || tot < ihl + 8)
				continue;
			if (first < 0)
				first = ts;
			size_t w = (size_t)((ts - first) / w_s);
			if (w >= MAX_WINDOWS)
				continue;
			windows[w] += tot - ihl - 8;
			if (w + 1 > nw)
				nw = w + 1;
			bytes += tot - ihl - 8;
			dgrams++;
			t_end = ts;
		}
		if (first >= 0 && t_end - first > secs)
			break;
	}
	stl = sizeof st;
	getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &stl);
	printf("ceiling path=pace bytes=%llu datagrams=%llu seconds=%.6f tx_cpu_s=0 rx_cpu_s=%.6f "
	       "drops=%u window_ms=%g windows=",
	       bytes, dgrams, first >= 0 ? t_end - first : 0.0, thread_cpu_s(), st.tp_drops, window_ms);
	for (size_t w = 0; w < nw; w++)
		printf("%s%llu", w ? "," : "", windows[w]);
	printf("\n");
	return 0;
}
