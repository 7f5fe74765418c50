/*
 * core.c - luaopen_qoslab_core: the one exported symbol of qoslab/core.so.
 * Each concern registers its functions into the module table.
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
	qlb_open_traffic(L);
	qlb_open_sys(L);
	qlb_open_file(L);
	return 1;
}
