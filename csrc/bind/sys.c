/*
 * sys.c - Lua binding of csrc/core/sys.h (what the Lua layers would
 * otherwise ask a shell for).
 *
 * core.fsync(path)                 -> true | nil, msg, code
 * core.realpath(path)              -> absolute path | nil, msg, code
 * core.uname()                     -> {sysname=, nodename=, release=, version=, machine=}
 * core.kill(pid, sig)              -> true | nil, msg, code  (sig "TERM", "INT", "KILL", "HUP", 0)
 * core.spawn(argv[, {cwd=, output=}]) -> "exit"|"signal", n | nil, msg, code
 * core.spawn_reader(argv)          -> file, pid | nil, msg, code
 * core.mkdtemp(prefix)             -> directory | nil, msg, code
 *     mkdtemp(3) of PREFIX.."XXXXXX": a new directory, mode 0700
 *     the child's stdout as a Lua file (stdin and stderr are ours); its
 *     close() waits for the child and answers as io.popen's close does
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/sys.h"
#include "bind.h"

/* A string argument without embedded NUL (C would see a shorter one). */
static const char *path_arg(lua_State *L, int idx, const char *ctx, const char *field)
{
	size_t n;
	if (lua_type(L, idx) != LUA_TSTRING)
		qlb_field_error(L, ctx, field, "a string", idx);
	const char *s = lua_tolstring(L, idx, &n);
	if (n == 0 || strlen(s) != n)
		qlb_field_error(L, ctx, field, "a non-empty string without NUL bytes", idx);
	return s;
}

static int ok_or_fail(lua_State *L, int rc, const ql_err *e)
{
	if (rc < 0)
		return qlb_fail(L, e);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_fsync(lua_State *L)
{
	ql_err e;
	return ok_or_fail(L, ql_sys_fsync_path(path_arg(L, 1, "qoslab.core.fsync", "path"), &e), &e);
}

static int l_realpath(lua_State *L)
{
	char out[PATH_MAX];
	ql_err e;
	if (ql_sys_realpath(path_arg(L, 1, "qoslab.core.realpath", "path"), out, sizeof out, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushstring(L, out);
	return 1;
}

static int l_uname(lua_State *L)
{
	struct utsname u;
	if (uname(&u) < 0) {
		ql_err e;
		ql_err_set(&e, errno, NULL, "uname: %s", strerror(errno));
		return qlb_fail(L, &e);
	}
	lua_createtable(L, 0, 5);
	qlb_set_string(L, "sysname", u.sysname);
	qlb_set_string(L, "nodename", u.nodename);
	qlb_set_string(L, "release", u.release);
	qlb_set_string(L, "version", u.version);
	qlb_set_string(L, "machine", u.machine);
	return 1;
}

static int l_kill(lua_State *L)
{
	const char *ctx = "qoslab.core.kill";
	lua_Integer pid = luaL_checkinteger(L, 1);
	if (pid <= 0 || pid > INT_MAX)
		qlb_field_error(L, ctx, "pid", "a process id in [1, 2^31-1]", 1);
	int sig;
	if (lua_type(L, 2) == LUA_TNUMBER && lua_tointeger(L, 2) == 0 && lua_isinteger(L, 2)) {
		sig = 0;
	} else {
		static const char *const names[] = { "TERM", "INT", "KILL", "HUP", NULL };
		static const int nums[] = { SIGTERM, SIGINT, SIGKILL, SIGHUP };
		if (lua_type(L, 2) != LUA_TSTRING)
			qlb_field_error(L, ctx, "sig", "one of \"TERM\", \"INT\", \"KILL\", \"HUP\" or 0", 2);
		sig = nums[luaL_checkoption(L, 2, NULL, names)];
	}
	ql_err e;
	return ok_or_fail(L, ql_sys_kill((pid_t)pid, sig, &e), &e);
}

struct waiter {
	lua_State *L;
	lua_Hook mark;
};

static int stop_requested(void *arg)
{
	struct waiter *w = arg;
	return qlb_interrupted(w->L, w->mark);
}

#define SPAWN_ARGS_MAX 256

/* argv table at index 1 -> argv (strings kept alive by the table). */
static void read_argv(lua_State *L, const char *ctx, char *argv[SPAWN_ARGS_MAX + 1])
{
	qlb_check_table(L, 1, ctx, "argv");
	lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
	if (n < 1 || n > SPAWN_ARGS_MAX)
		qlb_field_error(L, ctx, "argv", "a list of 1..256 strings", 1);
	for (lua_Integer i = 1; i <= n; i++) {
		lua_rawgeti(L, 1, i);
		int vi = lua_gettop(L);
		size_t len;
		const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
		if (!s || strlen(s) != len || (i == 1 && len == 0)) {
			lua_pushfstring(L, "argv[%d]", (int)i);
			qlb_field_error(L, ctx, lua_tostring(L, -1), "a string without NUL bytes", vi);
		}
		argv[i - 1] = (char *)s;  /* kept alive by the argv table */
		lua_pop(L, 1);
	}
	argv[n] = NULL;
}

static int l_spawn(lua_State *L)
{
	const char *ctx = "qoslab.core.spawn";
	char *argv[SPAWN_ARGS_MAX + 1];
	read_argv(L, ctx, argv);
	ql_spawn_opts o = { NULL, NULL, -1 };
	if (!lua_isnoneornil(L, 2)) {
		static const char *const keys[] = { "cwd", "output", NULL };
		qlb_check_table(L, 2, ctx, "opts");
		qlb_check_keys(L, 2, ctx, "opts", keys);
		lua_getfield(L, 2, "cwd");
		if (!lua_isnil(L, -1))
			o.cwd = path_arg(L, lua_gettop(L), ctx, "opts.cwd");
		lua_getfield(L, 2, "output");
		if (!lua_isnil(L, -1))
			o.output = path_arg(L, lua_gettop(L), ctx, "opts.output");
	}
	ql_err e;
	pid_t pid;
	if (ql_sys_spawn(argv, &o, &pid, &e) < 0)
		return qlb_fail(L, &e);
	struct waiter w = { L, qlb_hook_mark(L) };
	int exited, status;
	if (ql_sys_wait(pid, stop_requested, &w, &exited, &status, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushstring(L, exited ? "exit" : "signal");
	lua_pushinteger(L, status);
	return 2;
}

/* A Lua file over the read end of the child's stdout, and the child. The
 * io library sees the luaL_Stream at the start. */
typedef struct reader {
	luaL_Stream s;
	pid_t pid;
} reader;

static int reader_close(lua_State *L)
{
	reader *r = (reader *)luaL_checkudata(L, 1, LUA_FILEHANDLE);
	fclose(r->s.f);
	int st = 0;
	pid_t w;
	while ((w = waitpid(r->pid, &st, 0)) < 0 && errno == EINTR)
		;
	if (w < 0)
		return luaL_fileresult(L, 0, NULL);
	errno = 0;  /* luaL_execresult reads a non-zero errno as its own failure */
	return luaL_execresult(L, st);
}

static int l_spawn_reader(lua_State *L)
{
	const char *ctx = "qoslab.core.spawn_reader";
	char *argv[SPAWN_ARGS_MAX + 1];
	read_argv(L, ctx, argv);
	lua_settop(L, 1);
	reader *r = (reader *)lua_newuserdatauv(L, sizeof *r, 0);
	r->s.f = NULL;
	r->s.closef = NULL;  /* a closed file until the child runs */
	luaL_setmetatable(L, LUA_FILEHANDLE);
	int fds[2];
	ql_err e;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		ql_err_set(&e, errno, NULL, "cannot make a pipe for %s: %s", argv[0], strerror(errno));
		return qlb_fail(L, &e);
	}
	ql_spawn_opts o = { NULL, NULL, fds[1] };
	pid_t pid;
	int rc = ql_sys_spawn(argv, &o, &pid, &e);
	close(fds[1]);
	if (rc < 0) {
		close(fds[0]);
		return qlb_fail(L, &e);
	}
	r->s.f = fdopen(fds[0], "r");
	if (!r->s.f) {
		close(fds[0]);
		kill(pid, SIGTERM);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		ql_err_set(&e, errno ? errno : ENOMEM, NULL, "cannot read from %s", argv[0]);
		return qlb_fail(L, &e);
	}
	r->pid = pid;
	r->s.closef = reader_close;
	lua_pushinteger(L, pid);
	return 2;
}

static int l_mkdtemp(lua_State *L)
{
	const char *prefix = path_arg(L, 1, "qoslab.core.mkdtemp", "prefix");
	size_t n = strlen(prefix);
	if (n > PATH_MAX - 7)
		qlb_field_error(L, "qoslab.core.mkdtemp", "prefix", "a path shorter than PATH_MAX - 6", 1);
	char tmpl[PATH_MAX];
	memcpy(tmpl, prefix, n);
	memcpy(tmpl + n, "XXXXXX", 7);
	if (!mkdtemp(tmpl)) {
		ql_err e;
		ql_err_set(&e, errno, NULL, "cannot make a directory %sXXXXXX: %s", prefix, strerror(errno));
		return qlb_fail(L, &e);
	}
	lua_pushstring(L, tmpl);
	return 1;
}

void qlb_open_sys(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "fsync", l_fsync },
		{ "realpath", l_realpath },
		{ "uname", l_uname },
		{ "kill", l_kill },
		{ "spawn", l_spawn },
		{ "spawn_reader", l_spawn_reader },
		{ "mkdtemp", l_mkdtemp },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}
