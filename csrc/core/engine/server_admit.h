/*
 * server_admit.h - a server's limits and admission (server_admit.c).
 * Stands on server_int.h.
 */
#ifndef QL_SERVER_ADMIT_H
#define QL_SERVER_ADMIT_H

#include <stdint.h>

#include "server_int.h"

void srv_problem_logged(ql_server *s, const struct sockaddr_storage *peer, uint64_t test);
/* Log one line for a request of t's peer that its test runs without. */
void srv_ignored(ql_test *t, const char *what);
void srv_tell(int fd, int state, int ierr, const char *why);
/* Close a control connection whose peer was just told something: a FIN
 * after the message, then what the peer still sends read away for up to
 * 500 ms (or until stop), so close() does not answer its unread bytes with a
 * reset that destroys the message before the peer read it (on a lossy path
 * the message may still be waiting for a retransmission). */
void srv_close_told(int fd, _Atomic int *stop);
void srv_reject(ql_server *s, int fd, const struct sockaddr_storage *peer, int state,
		const char *why);
void unid_unlink(ql_server *s, conn_arg *c);
int unid_leave(ql_server *s, conn_arg *c);
conn_arg *unid_victim(ql_server *s, const struct sockaddr_storage *peer);
void unid_evict(ql_server *s, conn_arg *c, const char *limit, int value, int64_t now);
int srv_full(ql_server *s, const struct sockaddr_storage *peer, char *why, size_t len);
int srv_admit(ql_test *t);
int unid_allowance(ql_server *s, const struct sockaddr_storage *peer);
const struct sockaddr_storage *unid_global_victim_group(ql_server *s);

#endif
