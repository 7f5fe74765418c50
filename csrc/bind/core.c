/*
 * core.c - luaopen_qoslab_core: the one exported symbol of qoslab/core.so.
 * Each concern registers its functions into the module table.
 */

/***
 * The C binding under the Lua modules: `require "qoslab.core"`.
 *
 * Not an API of its own: scripts use the Lua modules, which check their
 * arguments, keep the records `qoslab cleanup` needs and document every
 * function. Each C function reaches scripts through one of them, documented
 * there: `now`, `now_ns`, `sleep`, `sleep_until`, `periodic` as
 * `qoslab.timer`; `netns_*` as `qoslab.netns`; `link_*` as `qoslab.link`;
 * `shape_*`, `qdisc_stats` as `qoslab.shape`; `netem_*`, `ifb_*` as
 * `qoslab.netem`; `traffic_client`, `traffic_server` (the `qoslab.Test` and
 * `qoslab.Server` userdata) as `qoslab.traffic`; `probe_check`, `probe_start`
 * (the `qoslab.Probe` userdata) as `qoslab.latency`; `fsync`, `realpath`,
 * `uname`, `kill`, `spawn`, `process` (the `qoslab.Process` userdata) as
 * `qoslab.fs`. The rest serve the Lua layers
 * and the `qoslab` command (`read_regular_file`; `signals_hold`,
 * `signals_install`, `signals_defer`, `signal_pending`, `signal_reset` turn
 * SIGINT, SIGTERM and SIGHUP into a clean stop). Their names and arguments may change with the Lua modules.
 *
 * `_VERSION` is the rockspec's version (`scm-1`), also `qoslab._VERSION`.
 * @module qoslab.core
 */
#include "bind.h"

#ifndef QOSLAB_VERSION
#error "QOSLAB_VERSION must be defined by the Makefile"
#endif

QLB_EXPORT int luaopen_qoslab_core(lua_State *L);

int luaopen_qoslab_core(lua_State *L)
{
	luaL_checkversion(L);
	lua_newtable(L);
	lua_pushstring(L, QOSLAB_VERSION);
	lua_setfield(L, -2, "_VERSION");
	qlb_open_timer(L);
	qlb_open_link(L);
	qlb_open_netem(L);
	qlb_open_impair_link(L);
	qlb_open_schedule(L);
	qlb_open_traffic(L);
	qlb_open_probe(L);
	qlb_open_sys(L);
	qlb_open_proc(L);
	qlb_open_file(L);
	return 1;
}
