/*
 * proc.c - Lua binding of csrc/core/proc.h: the qoslab.Process userdata.
 *
 * core.process(argv[, {stdin = "pipe"|"null", stdout = "pipe"|PATH,
 *   stderr = "pipe"|PATH, cwd = DIR, new_group = bool}]) -> Process | nil, msg, code
 * p:pid()                      -> integer
 * p:send(data[, timeout_s])    -> true | nil, msg, code ("ETIMEDOUT", "EINTR")
 * p:close_stdin()
 * p:communicate([input][, timeout_s]) -> stdout, stderr
 *     | nil, msg, code, stdout so far, stderr so far
 *     writes input (then closes stdin) and reads both outputs to their end
 * p:read_line([timeout_s])     -> line without "\n" (a last one without it
 *     at the end of output) | nil, msg, "ETIMEDOUT"|"EINTR"|"EOF"
 * p:take_stderr()              -> what stderr gave so far (then forgotten)
 * p:wait([timeout_s])          -> "exit"|"signal", n | nil, msg, code
 * p:kill(sig)                  -> true | nil, msg, code
 * p:close() / __gc / __close   -> closes the pipes; a child still running
 *     gets SIGKILL and is reaped
 * Timeouts are seconds (CLOCK_MONOTONIC); nil: none.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "../core/proc.h"
#include "bind.h"

#define PROC_T "qoslab.Process"
#define ARGS_MAX 256

typedef struct lproc {
	ql_proc p;
	char name[64];
} lproc;

struct waiter {
	lua_State *L;
	lua_Hook mark;
};

static int stop_requested(void *arg)
{
	struct waiter *w = arg;
	return qlb_interrupted(w->L, w->mark);
}

static lproc *check_proc(lua_State *L)
{
	return (lproc *)luaL_checkudata(L, 1, PROC_T);
}

/* timeout_s at idx (nil: none) -> a CLOCK_MONOTONIC deadline (0: none). */
static int64_t deadline_arg(lua_State *L, int idx, const char *ctx)
{
	if (lua_isnoneornil(L, idx))
		return 0;
	int isnum;
	double t = lua_tonumberx(L, idx, &isnum);
	if (!isnum || !isfinite(t) || t < 0 || t > 1e9)
		qlb_field_error(L, ctx, "timeout_s", "a number of seconds in [0, 1e9]", idx);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t d = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (int64_t)(t * 1e9);
	return d > 0 ? d : 1;
}

static int l_process(lua_State *L)
{
	const char *ctx = "qoslab.core.process";
	qlb_check_table(L, 1, ctx, "argv");
	lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
	if (n < 1 || n > ARGS_MAX)
		qlb_field_error(L, ctx, "argv", "a list of 1..256 strings", 1);
	char *argv[ARGS_MAX + 1];
	for (lua_Integer i = 1; i <= n; i++) {
		lua_rawgeti(L, 1, i);
		size_t len;
		const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
		if (!s || strlen(s) != len || (i == 1 && len == 0)) {
			lua_pushfstring(L, "argv[%d]", (int)i);
			qlb_field_error(L, ctx, lua_tostring(L, -1), "a string without NUL bytes", lua_gettop(L) - 1);
		}
		argv[i - 1] = (char *)s;  /* kept alive by the argv table */
		lua_pop(L, 1);
	}
	argv[n] = NULL;
	ql_proc_opts o = { NULL, 0, NULL, NULL, 0 };
	if (!lua_isnoneornil(L, 2)) {
		static const char *const keys[] = { "stdin", "stdout", "stderr", "cwd", "new_group", NULL };
		static const char *const in_kinds[] = { "null", "pipe", NULL };
		qlb_check_table(L, 2, ctx, "opts");
		qlb_check_keys(L, 2, ctx, "opts", keys);
		int k;
		if (qlb_opt_enum(L, 2, ctx, "opts", "stdin", in_kinds, &k))
			o.stdin_pipe = k == 1;
		const char *s;
		if (qlb_opt_string(L, 2, ctx, "opts", "stdout", &s, NULL) && strcmp(s, "pipe") != 0)
			o.stdout_path = s;
		if (qlb_opt_string(L, 2, ctx, "opts", "stderr", &s, NULL) && strcmp(s, "pipe") != 0)
			o.stderr_path = s;
		qlb_opt_string(L, 2, ctx, "opts", "cwd", &o.cwd, NULL);
		qlb_opt_boolean(L, 2, ctx, "opts", "new_group", &o.new_group);
	}
	lproc *lp = (lproc *)lua_newuserdatauv(L, sizeof *lp, 0);
	ql_proc_init(&lp->p);
	lp->name[0] = '\0';
	luaL_setmetatable(L, PROC_T);
	ql_err e;
	if (ql_proc_start(argv, &o, &lp->p, &e) < 0)
		return qlb_fail(L, &e);
	snprintf(lp->name, sizeof lp->name, "%s", argv[0]);
	return 1;
}

static int l_pid(lua_State *L)
{
	lua_pushinteger(L, check_proc(L)->p.pid);
	return 1;
}

static int l_send(lua_State *L)
{
	lproc *lp = check_proc(L);
	size_t n;
	const char *s = luaL_checklstring(L, 2, &n);
	int64_t dl = deadline_arg(L, 3, "qoslab.Process:send");
	if (lp->p.fd[0] < 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s: its stdin is closed", lp->name);
		lua_pushstring(L, "EPIPE");
		return 3;
	}
	size_t off = 0;
	struct waiter w = { L, qlb_hook_mark(L) };
	ql_err e;
	if (ql_proc_pump(&lp->p, s, n, &off, 0, QL_PROC_UNTIL_WRITTEN, dl, stop_requested, &w, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_close_stdin(lua_State *L)
{
	ql_proc_close_stdin(&check_proc(L)->p);
	return 0;
}

/* Push buf[i] and forget it. */
static void push_take(lua_State *L, ql_proc *p, int i)
{
	lua_pushlstring(L, p->buf[i] ? p->buf[i] : "", p->len[i]);
	p->len[i] = 0;
}

static int l_communicate(lua_State *L)
{
	lproc *lp = check_proc(L);
	size_t n = 0;
	const char *in = lua_isnoneornil(L, 2) ? NULL : luaL_checklstring(L, 2, &n);
	int64_t dl = deadline_arg(L, 3, "qoslab.Process:communicate");
	if (!in)
		ql_proc_close_stdin(&lp->p);
	size_t off = 0;
	struct waiter w = { L, qlb_hook_mark(L) };
	ql_err e;
	if (ql_proc_pump(&lp->p, in, n, &off, 1, QL_PROC_UNTIL_EOF, dl, stop_requested, &w, &e) < 0) {
		ql_proc_close_stdin(&lp->p);
		qlb_fail(L, &e);
		push_take(L, &lp->p, 1);
		push_take(L, &lp->p, 2);
		return 5;
	}
	push_take(L, &lp->p, 1);
	push_take(L, &lp->p, 2);
	return 2;
}

static int l_read_line(lua_State *L)
{
	lproc *lp = check_proc(L);
	ql_proc *p = &lp->p;
	int64_t dl = deadline_arg(L, 2, "qoslab.Process:read_line");
	struct waiter w = { L, qlb_hook_mark(L) };
	ql_err e;
	size_t off = 0;
	if (ql_proc_pump(p, NULL, 0, &off, 0, QL_PROC_UNTIL_LINE, dl, stop_requested, &w, &e) < 0)
		return qlb_fail(L, &e);
	char *nl = p->len[1] ? memchr(p->buf[1], '\n', p->len[1]) : NULL;
	size_t take = nl ? (size_t)(nl - p->buf[1]) + 1 : p->len[1];
	if (take == 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s: end of its output", lp->name);
		lua_pushstring(L, "EOF");
		return 3;
	}
	lua_pushlstring(L, p->buf[1], nl ? take - 1 : take);
	memmove(p->buf[1], p->buf[1] + take, p->len[1] - take);
	p->len[1] -= take;
	return 1;
}

static int l_take_stderr(lua_State *L)
{
	push_take(L, &check_proc(L)->p, 2);
	return 1;
}

static int l_wait(lua_State *L)
{
	lproc *lp = check_proc(L);
	int64_t dl = deadline_arg(L, 2, "qoslab.Process:wait");
	struct waiter w = { L, qlb_hook_mark(L) };
	ql_err e;
	if (lp->p.pid <= 0) {
		lua_pushnil(L);
		lua_pushstring(L, "no process was started");
		lua_pushstring(L, "ECHILD");
		return 3;
	}
	if (ql_proc_wait(&lp->p, dl, stop_requested, &w, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushstring(L, lp->p.exited ? "exit" : "signal");
	lua_pushinteger(L, lp->p.status);
	return 2;
}

static int l_kill(lua_State *L)
{
	lproc *lp = check_proc(L);
	static const char *const names[] = { "TERM", "INT", "KILL", "HUP", NULL };
	static const int nums[] = { SIGTERM, SIGINT, SIGKILL, SIGHUP };
	int sig = nums[luaL_checkoption(L, 2, "TERM", names)];
	ql_err e;
	if (ql_proc_kill(&lp->p, sig, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_gc(lua_State *L)
{
	ql_proc_release(&check_proc(L)->p);
	return 0;
}

static int l_tostring(lua_State *L)
{
	lproc *lp = check_proc(L);
	lua_pushfstring(L, PROC_T " (%s, pid %d%s)", lp->name, (int)lp->p.pid,
			lp->p.reaped ? ", ended" : "");
	return 1;
}

void qlb_open_proc(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "pid", l_pid },
		{ "send", l_send },
		{ "close_stdin", l_close_stdin },
		{ "communicate", l_communicate },
		{ "read_line", l_read_line },
		{ "take_stderr", l_take_stderr },
		{ "wait", l_wait },
		{ "kill", l_kill },
		{ "close", l_gc },
		{ NULL, NULL },
	};
	qlb_newclass(L, PROC_T, methods, l_gc, l_tostring);
	static const luaL_Reg fns[] = {
		{ "process", l_process },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}
