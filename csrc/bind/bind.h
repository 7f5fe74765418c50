/*
 * bind.h - the one shared header of the Lua binding layer (csrc/bind).
 *
 * Conventions:
 *  - A caller's mistake raises a Lua error naming the function and the field:
 *      "qoslab.netem.apply: spec.loss_pct: expected a finite number in [0, 100], got 150"
 *  - A failure of the world returns nil, message, CODE (qlb_fail).
 *  - Option tables: qlb_check_keys rejects unknown keys; the qlb_opt_* readers
 *    return 1 and store the value when the key is present, 0 when it is nil,
 *    and raise on a wrong type, a value out of range, NaN or inf. Integers are
 *    range-checked as lua_Integer before any narrowing.
 *  - Results are plain tables built with qlb_set_*.
 *
 * Everything here is compiled with hidden visibility: only
 * luaopen_qoslab_core leaves the shared object.
 */
#ifndef QLB_BIND_H
#define QLB_BIND_H

#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>

#include "../core/err.h"

#define QLB_EXPORT __attribute__((visibility("default")))

/* Push nil, e->msg, e->code and return 3 (world failure). If e->usage is
 * set the error was the caller's: raise instead (never returns then). */
int qlb_fail(lua_State *L, const ql_err *e);

/*
 * Interrupts in a plain lua5.4 (REPL or script): the standalone interpreter
 * answers SIGINT by setting a hook on the main thread, which raises
 * "interrupted!" at the next Lua instruction, so a long C wait never sees
 * it. qlb_hook_mark takes the hook at the start of a wait; qlb_interrupted
 * is true once a hook was set since (or qoslab's own handler, installed by
 * bin/qoslab, saw SIGINT/SIGTERM): the wait then ends its work early and
 * returns, and the hook raises as Lua intends.
 */
lua_Hook qlb_hook_mark(lua_State *L);
int qlb_interrupted(lua_State *L, lua_Hook mark);

/* Same as qlb_fail for rc < 0; for rc >= 0 returns 0 (nothing pushed). */
int qlb_check(lua_State *L, int rc, const ql_err *e);

/* Push and return how a message shows the value at idx: a number as
 * written (a float with an integral value as an integer: 1e9 is
 * 1000000000), "nan", a boolean, string "text" (NULs as \0), else its
 * type name. Lua's qoslab.check.describe says the same. */
const char *qlb_describe(lua_State *L, int idx);

/* Raise "<ctx>: <field>: expected <expected>, got <what is at idx>". */
int qlb_field_error(lua_State *L, const char *ctx, const char *field,
		    const char *expected, int idx);

/* Raise "<ctx>: <fmt...>". */
int qlb_error(lua_State *L, const char *ctx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Require a table at idx (raises "<ctx>: <name>: expected a table, got x"). */
void qlb_check_table(lua_State *L, int idx, const char *ctx, const char *name);

/* Raise for any key of the table at idx that is not in allowed (NULL-ended).
 * prefix names the table in messages ("spec", "opts"). */
void qlb_check_keys(lua_State *L, int idx, const char *ctx, const char *prefix,
		    const char *const *allowed);

/*
 * The options table at idx -> the struct st, by the core key table t
 * (csrc/core/engine/options.h; csrc/bind/opts.c). prefix names the table in
 * messages ("opts", "opts.probe"); keys whose flags meet skip are unknown
 * here. Read raw; a key that is no string is an unknown key; a wrong type
 * or a given value out of range raises "<ctx>: <prefix>.<key>: expected
 * ..., got ...". proto (may be NULL) receives a QL_OPT_PROTO value and
 * picks the ranges that depend on it. Strings in st point into the table.
 */
struct ql_opt_desc;
void qlb_read_opts(lua_State *L, int idx, const char *ctx, const char *prefix,
		   const struct ql_opt_desc *t, unsigned skip, void *st, int *proto);

/* Optional field readers. ctx = function name, prefix = table name. */
int qlb_opt_integer(lua_State *L, int idx, const char *ctx, const char *prefix,
		    const char *key, lua_Integer min, lua_Integer max,
		    lua_Integer *out);
int qlb_opt_number(lua_State *L, int idx, const char *ctx, const char *prefix,
		   const char *key, double min, double max, double *out);
int qlb_opt_boolean(lua_State *L, int idx, const char *ctx, const char *prefix,
		    const char *key, int *out);
/*
 * Every string handed to C goes through these: a Lua string may hold NUL
 * bytes, and C would see only the part before the first one. A non-string
 * raises "<ctx>: <field>: expected a string, got x", an embedded NUL
 * "<ctx>: <field>: expected a string without NUL bytes, got string "a\0b"".
 * len (may be NULL) receives the length.
 */
const char *qlb_check_string(lua_State *L, int idx, const char *ctx,
			     const char *field, size_t *len);
/* Same, but none or nil gives NULL. */
const char *qlb_opt_arg_string(lua_State *L, int idx, const char *ctx,
			       const char *field, size_t *len);
/* The string stays valid while the table stays on the stack (NULs refused
 * as above). */
int qlb_opt_string(lua_State *L, int idx, const char *ctx, const char *prefix,
		   const char *key, const char **out, size_t *len);
/* names is NULL-ended; *out is the index of the match. */
int qlb_opt_enum(lua_State *L, int idx, const char *ctx, const char *prefix,
		 const char *key, const char *const *names, int *out);

/* Setters on the table at the top of the stack. */
void qlb_set_integer(lua_State *L, const char *key, lua_Integer v);
void qlb_set_number(lua_State *L, const char *key, double v);
void qlb_set_string(lua_State *L, const char *key, const char *v);
void qlb_set_boolean(lua_State *L, const char *key, int v);

/*
 * Register a userdata class: metatable named tname (also __name), methods in
 * an __index table, __gc and __close both = gc (must be idempotent),
 * __tostring = tostring. Leaves nothing on the stack.
 */
void qlb_newclass(lua_State *L, const char *tname, const luaL_Reg *methods,
		  lua_CFunction gc, lua_CFunction tostring);

/* Module registration: each concern adds its functions to the module table
 * at the top of the stack. Defined in the concern's own .c file. */
/*
 * qoslab.netem's reading of a spec table (csrc/bind/netem.c), for every
 * other user of netem's specs: keys, types, ranges and the rules between
 * fields, raising "<ctx>: spec.<field>: expected ..." exactly as
 * qoslab.netem.apply (limit_packets "auto" is refused). Distribution tables
 * are copied into buffers pushed onto the stack: s borrows them, so they
 * must stay there while s is used.
 */
struct ql_netem_spec;
void qlb_netem_read_spec(lua_State *L, int idx, const char *ctx, struct ql_netem_spec *s);

/*
 * The open qoslab.ImpairLink at idx for a schedule of direction dir (0
 * forward, 1 reverse; csrc/bind/schedule.c). While hooked, the link's close
 * first calls release(ctx); so does the next hook of that direction when
 * busy(ctx) is 0 (the schedule holding it finished: one left open, as a
 * REPL leaves it, never blocks the next). *hook is what
 * qlb_impair_link_unhook takes. Raises when the link is closed or a
 * schedule still running (busy) holds the direction.
 */
struct ql_tunlink;
struct ql_tunlink *qlb_impair_link_hook(lua_State *L, int idx, int dir, void (*release)(void *),
					int (*busy)(void *), void *ctx, void **hook);
void qlb_impair_link_unhook(void *hook);

void qlb_open_timer(lua_State *L);
void qlb_open_netem(lua_State *L);
void qlb_open_impair_link(lua_State *L);
void qlb_open_schedule(lua_State *L);
void qlb_open_link(lua_State *L);
void qlb_open_traffic(lua_State *L);
void qlb_open_probe(lua_State *L);
void qlb_open_sys(lua_State *L);
void qlb_open_proc(lua_State *L);
void qlb_open_file(lua_State *L);

#endif
