/*
 * server_int.h - a server's state (ql_server), its connections while
 * unidentified (conn_arg) and its kept results, shared by the server's files.
 * Stands on test.h.
 */
#ifndef QL_SERVER_INT_H
#define QL_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "engine.h"
#include "test.h"

struct ql_server {
	ql_server_opts o;
	char netns[128], bind_address[128];
	int lfd, ufd, port, family;
	pthread_t th;
	int th_started;
	_Atomic int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ql_test *tests;
	int running, threads;
	/* The last keep finished results, a ring: kept[(head + i) % keep] is
	 * the i-th oldest of nkept. A finished test's other state (streams,
	 * UDP books, live queue) is freed as soon as its result is kept. */
	struct kept_result **kept;
	int keep, nkept, head;
	uint64_t nfinished;               /* tests published since the start */
	uint64_t rejected;
	uint64_t failed;                  /* tests that started and did not finish */
	char problem[QL_ERR_MSG_MAX + 320]; /* the last rejection or failure, for logs */
	ql_srv_problem *plog;             /* ring of the last QL_SRV_PROBLEMS_KEPT */
	uint64_t nproblems;
	uint64_t nstarted;                /* tests whose parameters were accepted */
	char started[640];                /* the last of them, for logs (holds
	                                     the longest server_note_start writes) */
	uint64_t accept_seq;
	int done;
	/* unidentified connections, oldest first (see ql_server_opts) */
	struct conn_arg *unid_head, *unid_tail;
	int nunid;
	struct ql_probe_srv *probe;       /* the latency probe responder */
};

/* A finished server test's result, shared by the server's ring and the
 * copies handed out by ql_server_results (refs counts both). */
typedef struct kept_result {
	ql_result res;               /* first: a ql_result * is a kept_result * */
	_Atomic int refs;
} kept_result;

/* A connection from its accept on; while unidentified (no cookie of a
 * test, no accepted parameters) it is in the server's unid list, oldest
 * first, and its fd stays open until it leaves the list (so the listener
 * may shut it down under s->mu to evict it). */
typedef struct conn_arg {
	ql_server *s;
	int fd;
	uint64_t seq;
	struct sockaddr_storage peer;
	socklen_t plen;
	struct conn_arg *prev, *next;
	int listed, evicted, past_cookie;
	int64_t since_ns;
} conn_arg;

#endif
