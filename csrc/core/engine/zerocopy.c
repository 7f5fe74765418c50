/*
 * zerocopy.c - MSG_ZEROCOPY completions of a TCP sender (zerocopy.h).
 * Stands on zerocopy.h only.
 */
#include "zerocopy.h"

#include <errno.h>
#include <time.h>   /* before linux/errqueue.h: struct timespec */
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

int zc_enable(int fd, ql_zc_counts *zc)
{
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) < 0)
		return errno;
	zc->present = 1;
	return 0;
}

void zc_drain(int fd, ql_zc_counts *zc, int wait_ms)
{
	for (;;) {
		char cb[256];
		struct msghdr mh = { .msg_control = cb, .msg_controllen = sizeof cb };
		if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno != EAGAIN || wait_ms <= 0 || zc->completed >= zc->sends)
				return;
			/* the error queue raises POLLERR, which poll reports always */
			struct pollfd pf = { .fd = fd, .events = 0 };
			if (poll(&pf, 1, wait_ms) <= 0)
				return;
			wait_ms = 0;
			continue;
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
			      (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
				continue;
			struct sock_extended_err ee;
			__builtin_memcpy(&ee, CMSG_DATA(cm), sizeof ee);
			if (ee.ee_errno != 0 || ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
				continue;
			/* sends ee_info..ee_data (32-bit counters) completed */
			uint64_t n = (uint32_t)(ee.ee_data - ee.ee_info) + 1ULL;
			zc->completed += n;
			if (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
				zc->copied += n;
		}
	}
}
