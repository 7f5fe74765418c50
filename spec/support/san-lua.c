/*
 * san-lua.c - a minimal Lua 5.4 host for the sanitizer suites:
 *   san-lua SCRIPT [ARG...]
 * runs SCRIPT (busted's runner, spec/support/busted-main.lua) with the
 * global `arg` set as a stand-alone interpreter would, and exits with its
 * status.
 *
 * Why not lua5.4 with LD_PRELOAD=libtsan.so: a preloaded TSan runtime starts
 * lazily, on its first intercepted call, and its setjmp interceptors jump
 * through pointers that are only filled in then. dash calls _setjmp before
 * any other intercepted function, so it jumps to address 0 and dies of
 * SIGSEGV at once (gdb: real__setjmp == 0, is_initialized false; bash dies
 * the same way). busted re-executes itself under --lua (and .busted's
 * lua = 'lua5.4') with os.execute, that is through /bin/sh, which inherits
 * the preload: busted ended at once, printing nothing. The specs that run
 * make, kill or a C test through the shell would die the same way.
 * Built with -fsanitize=thread (or address) this host has the runtime
 * linked in and started before main; nothing is preloaded, so children
 * (shells, iperf3, instrumented C tests) start as they normally would.
 *
 * Under TSan every report also calls __tsan_on_report, which counts it;
 * require 'san_host'.reports() returns the count so the busted output
 * handler can charge each report to the test during which it appeared.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_long reports;

#if defined(__SANITIZE_THREAD__)
#define SAN_TSAN 1
/* The runtime's weak hook, called once per printed report, from whichever
 * thread raced; only counts, never touches Lua. */
void __tsan_on_report(const void *rep);
void __tsan_on_report(const void *rep)
{
    (void)rep;
    atomic_fetch_add(&reports, 1);
}
#else
#define SAN_TSAN 0
#endif

static int san_reports(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)atomic_load(&reports));
    return 1;
}

static int open_san_host(lua_State *L)
{
    lua_newtable(L);
    lua_pushcfunction(L, san_reports);
    lua_setfield(L, -2, "reports");
    lua_pushboolean(L, SAN_TSAN);
    lua_setfield(L, -2, "tsan");
    return 1;
}

static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    luaL_traceback(L, L, msg ? msg : luaL_tolstring(L, 1, NULL), 1);
    return 1;
}

/* Loads and runs argv[1] with argv[2..] as `...`; returns the exit status. */
static int run(lua_State *L, int argc, char **argv)
{
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, open_san_host);
    lua_setfield(L, -2, "san_host");
    lua_pop(L, 1);

    /* arg[-1] is the host, arg[0] the script, arg[1..] its arguments. */
    lua_createtable(L, argc, 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - 1);
    }
    lua_setglobal(L, "arg");

    lua_pushcfunction(L, traceback);
    if (luaL_loadfile(L, argv[1]) != LUA_OK) {
        fprintf(stderr, "san-lua: %s\n", lua_tostring(L, -1));
        return 1;
    }
    for (int i = 2; i < argc; i++)
        lua_pushstring(L, argv[i]);
    if (lua_pcall(L, argc - 2, 0, 1) != LUA_OK) {
        fprintf(stderr, "san-lua: %s\n", lua_tostring(L, -1));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: san-lua SCRIPT [ARG...]\n");
        return 2;
    }
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "san-lua: cannot create a Lua state\n");
        return 1;
    }
    int status = run(L, argc, argv);
    lua_close(L);
    return status;
}
