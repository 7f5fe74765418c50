/*
 * traffic_result.h - the traffic engine's records as Lua tables
 * (traffic_result.c), for the traffic binding (traffic.c).
 */
#ifndef QOSLAB_BIND_TRAFFIC_RESULT_H
#define QOSLAB_BIND_TRAFFIC_RESULT_H

#include <lua.h>

#include "../core/engine/engine.h"

/* "forward" or "reverse": a data direction's name. */
const char *qlb_traffic_dir_name(int dir);
/* A socket's local and remote address and port, as a table. */
void qlb_push_traffic_sock(lua_State *L, const ql_sock_info *k);
/* cookie, tcp_mss_bytes and tcp_congestion = { client =, server = } of a
 * result or a test's setup into the table on top. */
void qlb_set_traffic_setup_fields(lua_State *L, const char *cookie, int mss,
				  const char *ca_client, const char *ca_server);
/* One interval (per stream, the sums, latency), as a table. */
void qlb_push_traffic_interval(lua_State *L, const ql_interval *iv, int data_dir, int bidir,
			       int udp);
/* A whole result, as a table (manual/results.md). */
void qlb_push_traffic_result(lua_State *L, const ql_result *r);

#endif
