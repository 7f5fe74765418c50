/*
 * zerocopy.h - MSG_ZEROCOPY for a TCP sender (Linux >= 4.14): SO_ZEROCOPY on
 * the socket, and the completions the kernel queues on its error queue
 * (SO_EE_ORIGIN_ZEROCOPY ranges, SO_EE_CODE_ZEROCOPY_COPIED when it copied
 * after all). The sender's buffer never changes, so a send need not wait
 * for its completion: they are only counted, and drained so the socket's
 * option memory (optmem_max) never fills. Stands on record.h (ql_zc_counts).
 */
#ifndef QL_ZEROCOPY_H
#define QL_ZEROCOPY_H

#include "record.h"

/* SO_ZEROCOPY on fd: 0, or a positive errno (the kernel refused: send
 * with copies). Sets zc->present on success. */
int zc_enable(int fd, ql_zc_counts *zc);

/* Read every completion queued on fd's error queue into zc; wait_ms > 0
 * waits up to that long for the first when sends are still outstanding. */
void zc_drain(int fd, ql_zc_counts *zc, int wait_ms);

#endif
