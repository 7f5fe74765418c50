rockspec_format = "3.0"
package = "qoslab"
version = "scm-1"
source = { url = "git+file:///dev/null" }
description = {
  summary = "Network QoS experiments on Linux: netem, a native traffic engine, sweeps",
  detailed = [[
qoslab is a Lua 5.4 extension module in C: it sets netem and rate limits over
rtnetlink, runs a multithreaded TCP/UDP traffic engine compatible with iperf3,
gives precise timers, and sweeps delay/loss/window/parallel experiments into
tables, CSV/JSON and gnuplot plots.]],
  license = "MIT",
}
dependencies = { "lua >= 5.4, < 5.5" }
external_dependencies = {
  LIBNL = { header = "libnl3/netlink/netlink.h" },
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
