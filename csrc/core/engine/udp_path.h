/*
 * udp_path.h - the path statistics of the UDP receive books (Lua-free):
 * mean |D| over pairs of consecutive sequence numbers, loss bursts and the
 * gaps between them, RFC 4737 reordering extents. Stands on record.h (the
 * ql_udp_path record) only; stats.c feeds it from ql_udp_rx.
 *
 * Memory is fixed whatever the peer sends: two rings of QL_UDP_TRACK
 * slots (64 KiB each), allocated once; every update is O(1) but the
 * extent's binary search (O(log QL_UDP_TRACK)).
 *
 * Definitions:
 *   mean |D|   D = (R_s - R_(s-1)) - (S_s - S_(s-1)) for two sequence
 *              numbers s - 1 and s both received as unique datagrams (R
 *              the arrival, S the sender's timestamp), in whichever order
 *              they arrived; a pair is booked when its second datagram
 *              arrives. Unlike RFC 3550's J (arrival order) this does not
 *              grow with reordering: for independent per-datagram delays
 *              X, Y it estimates E|X - Y|. The transit of each unique
 *              datagram waits in a ring slot (seq mod QL_UDP_TRACK), so a
 *              pair is missed only when its partner arrived QL_UDP_TRACK
 *              or more sequence numbers away (then its slot held another
 *              number). Late datagrams (ruled lost) form no pair.
 *   burst      a maximal run of consecutive sequence numbers ruled lost,
 *              booked once final: when the ruling point passes it (a
 *              late datagram stays lost, so it can no longer split it).
 *              The first and the last run count too, so Σ burst lengths
 *              equals the numbers ruled lost. After a warm-up the runs
 *              start at the receiver's own boundary (the highest number
 *              received at its end, plus one), which can differ from the
 *              sender's by the datagrams in flight then.
 *   gap        a maximal run of consecutive sequence numbers received,
 *              bounded by a burst on both sides (the runs before the
 *              first and after the last burst are cut by the test's
 *              edges and are not gaps): gaps == bursts - 1 when there is
 *              a burst, Σ gap lengths <= the unique datagrams.
 *   extent     RFC 4737 section 4.2.1: a datagram is reordered when a
 *              higher sequence number arrived before it (the books'
 *              out-of-order unique datagrams); with arrival positions
 *              counted over non-duplicate datagrams (unique and late),
 *              its extent is j - i, j its own position and i the
 *              earliest position whose sequence number is higher. That
 *              earliest one always raised the highest number seen, so
 *              the books keep only those (a ring of QL_UDP_TRACK). An
 *              extent of QL_UDP_TRACK or more is capped at QL_UDP_TRACK
 *              (its datagram counts in the last histogram bucket and
 *              enters the sum and the maximum as QL_UDP_TRACK).
 */
#ifndef QL_UDP_PATH_H
#define QL_UDP_PATH_H

#include <stdint.h>

#include "record.h"

#define QL_UDP_TRACK 4096u

typedef struct ql_udp_transit {
	uint64_t seq;            /* 0 = empty (sequence numbers start at 1) */
	int64_t transit_ns;
} ql_udp_transit;

typedef struct ql_udp_record_pos {
	uint64_t seq;            /* a sequence number that raised the highest */
	uint64_t pos;            /* its arrival position */
} ql_udp_record_pos;

typedef struct ql_udp_tracker {
	ql_udp_transit *transit;     /* QL_UDP_TRACK slots, slot = seq % size */
	ql_udp_record_pos *rec;      /* ring, arrival order (seq ascending) */
	unsigned rec_head, rec_count;
	uint64_t pos;                /* non-duplicate arrivals so far */
	int run_lost;                /* kind of the open run: 1 lost, 0 received */
	uint64_t run_len;            /* 0 = no open run */
	int had_burst;               /* a burst closed before the open run */
	uint64_t runs_from;          /* runs below this sequence number are not
	                                booked (the warm-up's) */
	ql_udp_path path;            /* booked since init or the last reset */
} ql_udp_tracker;

/* @return 0 or -ENOMEM (the tracker is then zeroed). */
int ql_udp_tracker_init(ql_udp_tracker *t);

/* Free; idempotent (t zeroed afterwards). */
void ql_udp_tracker_free(ql_udp_tracker *t);

/*
 * A unique datagram's transit (arrival minus sender timestamp, ns): books
 * the pairs it completes (0, 1 or 2) into *pairs and their |D| (ns,
 * saturating) into *abs_sum_ns.
 */
void ql_udp_tracker_pair(ql_udp_tracker *t, uint64_t seq, int64_t transit_ns,
			 uint64_t *pairs, uint64_t *abs_sum_ns);

/*
 * A non-duplicate arrival (unique or late) at the next position: raised
 * says it raised the highest sequence number, reordered that it is an
 * out-of-order unique datagram (its extent is booked).
 * @return the extent booked (capped), 0 when not reordered.
 */
uint64_t ql_udp_tracker_arrival(ql_udp_tracker *t, uint64_t seq, int raised,
				int reordered);

/* The n consecutive sequence numbers from seq on became final, all lost or
 * all received (calls come in ascending, contiguous order). */
void ql_udp_tracker_runs(ql_udp_tracker *t, uint64_t seq, int lost, uint64_t n);

/* The books closed: the open run ends (a burst if lost, no gap if not). */
void ql_udp_tracker_close(ql_udp_tracker *t);

/* Start the statistics anew at the warm-up's end: runs are booked from
 * sequence number runs_from on, extents from now on; the rings stay
 * (positions and transits remain valid). */
void ql_udp_tracker_reset(ql_udp_tracker *t, uint64_t runs_from);

#endif
