/*
 * file.c - Lua binding of csrc/core/textfile.h, for the Lua layers that
 * read files a user names (plan files, results files):
 *
 *   core.read_regular_file(path, max_bytes[, what]) -> string | nil, msg, code
 *
 * path must be a string without NUL bytes; max_bytes an integer in
 * [0, 2^40]; what names the file in messages (default "file").
 */
#include <stdlib.h>

#include "../core/textfile.h"
#include "bind.h"

#define CTX "qoslab.core.read_regular_file"

static int l_read_regular_file(lua_State *L)
{
	const char *path = qlb_check_string(L, 1, CTX, "path", NULL);
	int isint = 0;
	lua_Integer max = lua_tointegerx(L, 2, &isint);
	if (!isint || lua_type(L, 2) != LUA_TNUMBER || max < 0 || max > ((lua_Integer)1 << 40))
		return qlb_field_error(L, CTX, "max_bytes", "an integer in [0, 2^40]", 2);
	const char *what = qlb_opt_arg_string(L, 3, CTX, "what", NULL);
	char *buf;
	size_t len;
	ql_err e;
	if (ql_textfile_read(path, what ? what : "file", (size_t)max, &buf, &len, &e) < 0)
		return qlb_fail(L, &e);
	lua_pushlstring(L, buf, len);
	free(buf);
	return 1;
}

void qlb_open_file(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "read_regular_file", l_read_regular_file },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}
