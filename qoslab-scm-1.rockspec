rockspec_format = "3.0"
package = "qoslab"
version = "scm-1"
-- There is no public repository. The source is a local clone, fetched by
-- `luarocks build` / `luarocks pack` from the path below (clone or link the
-- repository there, e.g. `git clone /path/of/qoslab /usr/local/src/qoslab`);
-- in a checkout `luarocks make` builds the working tree and fetches nothing.
source = {
  url = "git+file:///usr/local/src/qoslab",
  branch = "main",
}
description = {
  summary = "Network QoS experiments on Linux: netem, a native traffic engine, sweeps",
  detailed = [[
qoslab is a Lua 5.4 extension module in C: it sets netem and rate limits over
rtnetlink, runs a multithreaded TCP/UDP traffic engine compatible with iperf3,
gives precise timers, and sweeps delay/loss/window/parallel experiments into
tables, CSV/JSON and gnuplot plots.]],
  license = "MIT",
  labels = { "network", "netem", "iperf3", "linux" },
}
supported_platforms = { "linux" }
-- argparse: the CLI; lua-cjson: results, state files, plans; dkjson: the
-- indented `-J` output in iperf3's layout (empty lists as []); luafilesystem:
-- directories (qoslab.fs).
dependencies = {
  "lua >= 5.4, < 5.5",
  "argparse >= 0.6",
  "lua-cjson >= 2.1",
  "dkjson >= 2.5",
  "luafilesystem >= 1.7",
}
-- The C libraries of qoslab.core (Debian: libnl-3-dev, libnl-route-3-dev,
-- libcjson-dev); the Makefile takes their flags from pkg-config.
external_dependencies = {
  LIBNL = { header = "libnl3/netlink/netlink.h", library = "nl-3" },
  LIBNL_ROUTE = { header = "libnl3/netlink/route/qdisc.h", library = "nl-route-3" },
  LIBCJSON = { header = "cjson/cJSON.h", library = "cjson" },
}
build = {
  type = "make",
  makefile = "Makefile",
  build_target = "all",
  install_target = "install",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LUA = "$(LUA)",
    LUA_INCDIR = "$(LUA_INCDIR)",
  },
  install_variables = {
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
    INST_BINDIR = "$(BINDIR)",
  },
}
-- `luarocks test` in a checkout: the unit suite (needs busted, Debian
-- lua-busted; no root).
test = {
  type = "command",
  command = "make check-unit",
}
