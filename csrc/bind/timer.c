/*
 * timer.c - Lua binding of csrc/core/timer.h and csrc/core/sig.h.
 *
 * core.now()                      -> seconds (float, CLOCK_MONOTONIC)
 * core.now_ns()                   -> integer nanoseconds
 * core.sleep(s)                   -> true | nil, msg, "EINTR"
 * core.sleep_until(t_s)           -> true | nil, msg, "EINTR"
 * core.realtime_ns()             -> integer nanoseconds (CLOCK_REALTIME)
 * core.wait_eof(fd, timeout_s)    -> true (fd at its end) | false (timeout) |
 *                                    nil, msg, "EINTR" | "EBADF" | ...
 * core.periodic(period_s[, start_s]) -> qoslab.Periodic
 *     :wait() -> ticks_expired (1 = on time), or nil, msg, "EINTR"
 *     :next() -> time of next tick (s);  :missed() -> integer;  :ticks()
 *     :close()
 * core.signals_hold()             SIGINT/SIGTERM/SIGHUP -> a pending stop only
 * core.signals_install()          SIGINT/SIGTERM/SIGHUP -> an interruption error
 *                                 (also for one already held)
 * core.signals_defer(fn, ...)     -> fn(...)'s results, no interruption inside
 * core.signal_pending()           -> "SIGINT" | "SIGTERM" | "SIGHUP" | nil
 * core.signal_reset()
 * core.interruption([signal])     -> a new interruption error object
 * core.interrupted_by(err)        -> "SIGINT" | ... | "signal" | nil
 *
 * An interruption error is a table { code = "EINTR", signal = "SIGINT" |
 * "SIGTERM" | "SIGHUP" (absent when unknown), message = "[where: ]interrupted
 * by SIGINT" } with the metatable qoslab.Interrupted (tostring: the message),
 * so the layers above decide on its code and signal, never on its text.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "../core/sig.h"
#include "../core/timer.h"
#include "bind.h"

#define PERIODIC "qoslab.Periodic"
#define INTERRUPTED "qoslab.Interrupted"

static int64_t seconds_to_ns(lua_State *L, int idx, const char *ctx,
			     const char *field, double min_s)
{
	double s = luaL_checknumber(L, idx);
	if (!isfinite(s) || s < min_s || s > 1e9) {
		const char *exp = lua_pushfstring(L, "a finite number of seconds in [%f, 1e9]",
						  (LUAI_UACNUMBER)min_s);
		qlb_field_error(L, ctx, field, exp, idx);
	}
	return (int64_t)llround(s * 1e9);
}

static int l_now(lua_State *L)
{
	lua_pushnumber(L, (double)ql_now_ns() / 1e9);
	return 1;
}

static int l_now_ns(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)ql_now_ns());
	return 1;
}

static int l_realtime_ns(lua_State *L)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000000 + ts.tv_nsec);
	return 1;
}

/* core.wait_eof(fd, timeout_s): in slices of at most 100 ms, as the sleeps,
 * so an interrupt of a plain lua5.4 ends it too. */
static int l_wait_eof(lua_State *L)
{
	ql_err e;
	lua_Integer fd = luaL_checkinteger(L, 1);
	if (fd < 0 || fd > 0x7fffffff)
		qlb_field_error(L, "qoslab.timer.wait_eof", "fd", "a file descriptor >= 0", 1);
	int64_t t = ql_now_ns() + seconds_to_ns(L, 2, "qoslab.timer.wait_eof", "timeout_s", 0);
	lua_Hook mark = qlb_hook_mark(L);
	for (;;) {
		int64_t now = ql_now_ns();
		int64_t until = t - now > 100000000 ? now + 100000000 : t;
		int rc = ql_fd_wait_eof((int)fd, until, &ql_sig_stop, &e);
		if (rc < 0)
			return qlb_fail(L, &e);
		if (rc == 1 || until >= t) {
			lua_pushboolean(L, rc == 1);
			return 1;
		}
		if (qlb_interrupted(L, mark)) {
			ql_err_set(&e, EINTR, "EINTR", "wait interrupted");
			return qlb_fail(L, &e);
		}
	}
}

/* Sleep until t (CLOCK_MONOTONIC ns) in slices of at most 100 ms, so an
 * interrupt of a plain lua5.4 ends it too (qlb_interrupted). */
static int sleep_until(lua_State *L, int64_t t)
{
	ql_err e;
	lua_Hook mark = qlb_hook_mark(L);
	for (;;) {
		int64_t now = ql_now_ns();
		int64_t until = t - now > 100000000 ? now + 100000000 : t;
		int rc = ql_sleep_until_ns(until, &ql_sig_stop, &e);
		if (rc < 0)
			return qlb_fail(L, &e);
		if (until >= t)
			break;
		if (qlb_interrupted(L, mark)) {
			ql_err_set(&e, EINTR, "EINTR", "sleep interrupted");
			return qlb_fail(L, &e);
		}
	}
	lua_pushboolean(L, 1);
	return 1;
}

static int l_sleep(lua_State *L)
{
	int64_t d = seconds_to_ns(L, 1, "qoslab.timer.sleep", "seconds", 0);
	return sleep_until(L, ql_now_ns() + d);
}

static int l_sleep_until(lua_State *L)
{
	int64_t t = seconds_to_ns(L, 1, "qoslab.timer.sleep_until", "deadline_s", 0);
	return sleep_until(L, t);
}

static int l_periodic(lua_State *L)
{
	ql_err e;
	int64_t period = seconds_to_ns(L, 1, "qoslab.timer.periodic", "period_s", 1e-6);
	int64_t start = 0;
	if (!lua_isnoneornil(L, 2))
		start = seconds_to_ns(L, 2, "qoslab.timer.periodic", "start_s", 0);
	ql_periodic *p = lua_newuserdatauv(L, sizeof *p, 0);
	p->fd = -1;
	luaL_setmetatable(L, PERIODIC);
	if (ql_periodic_open(p, start, period, &e) < 0)
		return qlb_fail(L, &e);
	return 1;
}

static ql_periodic *checkperiodic(lua_State *L)
{
	ql_periodic *p = luaL_checkudata(L, 1, PERIODIC);
	if (p->fd < 0)
		luaL_error(L, "qoslab.Periodic: timer is closed");
	return p;
}

static int p_wait(lua_State *L)
{
	ql_err e;
	uint64_t n = 0;
	ql_periodic *p = checkperiodic(L);
	if (ql_periodic_wait(p, &n, &ql_sig_stop, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushinteger(L, (lua_Integer)n);
	return 1;
}

static int p_next(lua_State *L)
{
	ql_periodic *p = checkperiodic(L);
	lua_pushnumber(L, (double)ql_periodic_next_ns(p) / 1e9);
	return 1;
}

static int p_missed(lua_State *L)
{
	ql_periodic *p = luaL_checkudata(L, 1, PERIODIC);
	lua_pushinteger(L, (lua_Integer)p->missed);
	return 1;
}

static int p_ticks(lua_State *L)
{
	ql_periodic *p = luaL_checkudata(L, 1, PERIODIC);
	lua_pushinteger(L, (lua_Integer)p->ticks);
	return 1;
}

static int p_gc(lua_State *L)
{
	ql_periodic *p = luaL_checkudata(L, 1, PERIODIC);
	ql_periodic_close(p);
	return 0;
}

static int p_tostring(lua_State *L)
{
	ql_periodic *p = luaL_checkudata(L, 1, PERIODIC);
	if (p->fd < 0)
		lua_pushstring(L, "qoslab.Periodic (closed)");
	else
		lua_pushfstring(L, "qoslab.Periodic (period %f s, %I ticks, %I missed)",
				(LUAI_UACNUMBER)((double)p->period_ns / 1e9),
				(LUAI_UACINT)p->ticks, (LUAI_UACINT)p->missed);
	return 1;
}

/* Signals: the handler also sets a Lua hook (lua_sethook is async-signal
 * safe) so that pure Lua loops stop too, as the standalone interpreter does.
 * Held (signals_hold, before the command has its error handling in place)
 * or inside signals_defer (a creation and its record for `qoslab cleanup`
 * must not be split by an error), a signal is owed (sig_owed); the hook is
 * set for it when arming or when the deferred call returns. A signal is
 * raised once: ql_sig_stop stays set after it (for the blocking calls that
 * poll it), so it cannot tell whether one is still owed. */
static lua_State *sig_L;
static volatile sig_atomic_t sig_armed;
static volatile sig_atomic_t sig_defer_depth;
static volatile sig_atomic_t sig_owed;

static const char *sig_name(int signo)
{
	return signo == SIGTERM ? "SIGTERM" : signo == SIGHUP ? "SIGHUP" : "SIGINT";
}

/* Push an interruption error: where (a position or "") + "interrupted by
 * <signal>"; signal NULL when not known ("interrupted by signal"). */
static void push_interruption(lua_State *L, const char *where, const char *signal)
{
	lua_createtable(L, 0, 3);
	lua_pushliteral(L, "EINTR");
	lua_setfield(L, -2, "code");
	if (signal) {
		lua_pushstring(L, signal);
		lua_setfield(L, -2, "signal");
	}
	lua_pushfstring(L, "%sinterrupted by %s", where, signal ? signal : "signal");
	lua_setfield(L, -2, "message");
	luaL_setmetatable(L, INTERRUPTED);
}

static void sig_luahook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	lua_sethook(L, NULL, 0, 0);
	/* The position luaL_error would give, then the error object. */
	luaL_where(L, 1);
	push_interruption(L, lua_tostring(L, -1), sig_name(ql_sig_signo));
	lua_error(L);
}

static void sig_sethook(void)
{
	if (sig_L)
		lua_sethook(sig_L, sig_luahook,
			    LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static void sig_hook(int signo)
{
	(void)signo;
	if (sig_armed && !sig_defer_depth)
		sig_sethook();
	else
		sig_owed = 1;
}

static int signals_setup(lua_State *L, int armed)
{
	lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
	sig_L = lua_tothread(L, -1);
	lua_pop(L, 1);
	if (armed)
		sig_armed = 1;
	int rc = ql_sig_install(sig_hook);
	if (rc < 0) {
		ql_err e;
		ql_err_set(&e, -rc, NULL, "sigaction failed");
		return qlb_fail(L, &e);
	}
	/* A signal that came while held is acted on now: the next call or
	 * return raises its interruption. */
	if (armed && sig_owed && !sig_defer_depth) {
		sig_owed = 0;
		sig_sethook();
	}
	lua_pushboolean(L, 1);
	return 1;
}

static int l_signals_install(lua_State *L)
{
	return signals_setup(L, 1);
}

/* The first thing bin/qoslab does: from here on a signal is never lost nor
 * kills the process (nor raises the interpreter's "interrupted!"); it waits
 * in ql_sig_stop until signals_install arms the interruption. A no-op once
 * armed. */
static int l_signals_hold(lua_State *L)
{
	if (sig_armed) {
		lua_pushboolean(L, 1);
		return 1;
	}
	return signals_setup(L, 0);
}

/* core.signals_defer(fn, ...): fn(...) with no interruption raised inside
 * it (a signal arriving meanwhile is raised right after it returns, when
 * armed); fn's errors pass through. */
static int l_signals_defer(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TFUNCTION);
	sig_defer_depth++;
	/* A hook the handler set just before: taken off, set again below. */
	if (sig_L && lua_gethook(sig_L) == sig_luahook) {
		lua_sethook(sig_L, NULL, 0, 0);
		sig_owed = 1;
	}
	int rc = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
	sig_defer_depth--;
	if (!sig_defer_depth && sig_armed && sig_owed) {
		sig_owed = 0;
		sig_sethook();
	}
	if (rc != LUA_OK)
		return lua_error(L);
	return lua_gettop(L);
}

static int l_signal_pending(lua_State *L)
{
	if (!ql_sig_stop)
		lua_pushnil(L);
	else
		lua_pushstring(L, sig_name(ql_sig_signo));
	return 1;
}

static int l_signal_reset(lua_State *L)
{
	(void)L;
	ql_sig_reset();
	sig_owed = 0;
	return 0;
}

/* core.interruption([signal]): the error object for `signal` (one of the
 * three names), else for the pending signal, else for an unknown one. */
static int l_interruption(lua_State *L)
{
	static const char *const names[] = { "SIGINT", "SIGTERM", "SIGHUP", NULL };
	const char *signal = NULL;
	if (!lua_isnoneornil(L, 1))
		signal = names[luaL_checkoption(L, 1, NULL, names)];
	else if (ql_sig_stop)
		signal = sig_name(ql_sig_signo);
	push_interruption(L, "", signal);
	return 1;
}

/* core.interrupted_by(err): the signal an interruption error names ("signal"
 * when it names none), nil for any other value. */
static int l_interrupted_by(lua_State *L)
{
	if (!lua_getmetatable(L, 1)) {
		lua_pushnil(L);
		return 1;
	}
	luaL_getmetatable(L, INTERRUPTED);
	if (!lua_rawequal(L, -1, -2)) {
		lua_pushnil(L);
		return 1;
	}
	if (lua_getfield(L, 1, "signal") != LUA_TSTRING) {
		lua_pop(L, 1);
		lua_pushliteral(L, "signal");
	}
	return 1;
}

static int interrupted_tostring(lua_State *L)
{
	lua_getfield(L, 1, "message");
	if (!lua_isstring(L, -1)) {
		lua_pop(L, 1);
		lua_pushliteral(L, "interrupted");
	}
	return 1;
}

void qlb_open_timer(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "wait", p_wait },     { "next", p_next },
		{ "missed", p_missed }, { "ticks", p_ticks },
		{ "close", p_gc },      { NULL, NULL },
	};
	qlb_newclass(L, PERIODIC, methods, p_gc, p_tostring);
	luaL_newmetatable(L, INTERRUPTED);
	lua_pushcfunction(L, interrupted_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pop(L, 1);
	static const luaL_Reg fns[] = {
		{ "now", l_now },
		{ "now_ns", l_now_ns },
		{ "realtime_ns", l_realtime_ns },
		{ "wait_eof", l_wait_eof },
		{ "sleep", l_sleep },
		{ "sleep_until", l_sleep_until },
		{ "periodic", l_periodic },
		{ "signals_install", l_signals_install },
		{ "signals_hold", l_signals_hold },
		{ "signals_defer", l_signals_defer },
		{ "signal_pending", l_signal_pending },
		{ "signal_reset", l_signal_reset },
		{ "interruption", l_interruption },
		{ "interrupted_by", l_interrupted_by },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}
