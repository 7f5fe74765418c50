/*
 * tunlink.h - the native impairment link: two namespaces joined by a TUN
 * device in each and four threads in this process. Per direction a reader
 * takes packets from one TUN, asks the impairment model (impair.h) what
 * sch_netem would do with each, and queues them by time to send (pktq.h);
 * a sender waits for the first one's time and writes it into the other TUN
 * (it sleeps until shortly before and waits out the rest on the CPU, at a
 * real-time priority where the process may have one). A packet already due
 * when it arrives, with nothing queued before it, the reader writes itself
 * (a zero-delay direction never waits for a sender's wake-up).
 * Forward = a -> b (read from a's device, written to b's), reverse = b -> a.
 * Stands on impair.h, ippkt.h, pktq.h and tun.h; Lua-free.
 *
 * Faults are loud: a read or write that fails (other than EAGAIN/EINTR, or a
 * packet the kernel refuses to take back) stops every thread of the link
 * and marks it failed with the reason: nothing is forwarded any more, never
 * forwarded unimpaired. Memory is bounded: each direction's queue holds at
 * most memory_bytes (data and records); a packet over it is dropped with
 * reason QL_IMPAIR_DROP_MEMORY.
 */
#ifndef QL_TUNLINK_H
#define QL_TUNLINK_H

#include <stdint.h>

#include "../err.h"
#include "../netem.h"
#include "impair.h"
#include "ippkt.h"
#include "pktq.h"

enum { QL_TUNLINK_FORWARD = 0, QL_TUNLINK_REVERSE = 1 };

/* 1 Gbit/s for 5 s in 1500-byte packets, their records included:
 * 416,667 packets of QL_PKT_COST(1500) = 1540 bytes, 641.7 MB. */
#define QL_TUNLINK_MEMORY_DEFAULT (416667ull * (1500 + QL_PKT_RECORD_BYTES))
#define QL_TUNLINK_MTU_DEFAULT 1500u
/* The devices' default names (QL_TUN_PREFIX, tun.h, in front). */
#define QL_TUNLINK_A_IFNAME "qltun-a"
#define QL_TUNLINK_B_IFNAME "qltun-b"

typedef struct ql_tunlink_opts {
	const char *a_netns, *b_netns;      /* required, different */
	const char *a_ifname, *b_ifname;    /* the TUN devices' names */
	const char *a_addr, *b_addr;        /* "A.B.C.D", no prefix: the IPv4 pair
					       (IPv6 addresses go on the devices after) */
	uint32_t mtu_bytes;                 /* 68..65535 */
	uint64_t memory_bytes;              /* per direction, >= 1 */
	const ql_netem_spec *forward, *reverse;
	uint64_t seed;                      /* the models' seed unless a spec has one */
	/* 1: GSO super-packets cross the link whole (tun.h), each one packet
	 * to the model, as kernel netem sees them on a device with offloads
	 * on; 0: every packet at most mtu_bytes, as with offloads off. */
	int gso;
	/* 1: run the four threads (readers and senders) SCHED_FIFO (lowest
	 * real-time priority) where the process may (a tighter delay, at about half the zero-delay
	 * throughput on two cores); 0: ordinary threads. */
	int realtime;
} ql_tunlink_opts;

/* One transport class's share of a direction's arrivals and drops
 * (enum ql_ippkt_proto): so a test compares its own protocol's losses,
 * not those of a control connection crossing beside it. */
typedef struct ql_tunlink_proto_stats {
	uint64_t arrived_packets;
	uint64_t drops[QL_IMPAIR_DROP_NREASONS];
	/* runs of consecutive arrivals of the class that the loss model
	 * took whole (mean burst length = loss drops / loss_bursts) */
	uint64_t loss_bursts;
} ql_tunlink_proto_stats;

/* One direction's counters. */
typedef struct ql_tunlink_stats {
	uint64_t arrived_packets, arrived_bytes;      /* read from the TUN */
	uint64_t forwarded_packets, forwarded_bytes;  /* written to the other */
	uint64_t drops[QL_IMPAIR_DROP_NREASONS];      /* by enum ql_impair_drop */
	uint64_t duplicated, reordered, corrupted, ce_marked;
	uint64_t rejected_packets;   /* a corrupted packet the kernel refused */
	uint64_t backlog_packets, backlog_bytes;
	int64_t queue_delay_mean_ns, queue_delay_max_ns;  /* forwarded packets */
	/* how late the sender woke for a packet it slept for (the timer's
	 * error; packets already due when seen are not samples) */
	int64_t lateness_p99_ns, lateness_max_ns;
	uint64_t lateness_samples;
	ql_tunlink_proto_stats proto[QL_IPPKT_NPROTOS];
	uint64_t loss_bursts;        /* as the classes', over all arrivals */
	/* 1 once a packet was dropped for the memory budget, the reason in
	 * over_budget_err (code ENOBUFS) */
	int over_budget;
	ql_err over_budget_err;
	int sender_realtime;         /* all four threads got SCHED_FIFO */
} ql_tunlink_stats;

typedef struct ql_tunlink ql_tunlink;

/* Make both devices, configure them (up, MTU, point-to-point addresses:
 * a_addr on a with peer b_addr, and the reverse), build both models and
 * start the threads. Nothing is left on failure. Usage errors name the
 * opts field; world errors as tun.h / link.h. */
int ql_tunlink_open(const ql_tunlink_opts *o, ql_tunlink **out, ql_err *e);

/* Replace one direction's spec atomically (under its lock): packets queued
 * keep their times. On error the old spec stays. */
int ql_tunlink_set_spec(ql_tunlink *l, int dir, const ql_netem_spec *s, ql_err *e);

void ql_tunlink_stats_get(ql_tunlink *l, int dir, ql_tunlink_stats *st);

/* 1 and e filled (the code and reason of the first fault) once failed. */
int ql_tunlink_failed(ql_tunlink *l, ql_err *e);

/* Stop and join the threads, close the devices, free everything. NULL ok. */
void ql_tunlink_close(ql_tunlink *l);

#endif
