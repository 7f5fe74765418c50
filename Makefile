# qoslab - build, test, demo, bench.
#
#   make            build build/qoslab/core.so
#   make deps       install what the project needs (apt-get, idempotent; root)
#   make test       deps + build + every test suite (lint included) + one
#                   summary line
#   make lint       luacheck on lua/, bin/qoslab, examples/ and spec/
#   make demo       deps + build + the demo experiment (QUICK=1: its short
#                   form; DEMO_ARGS='--out DIR ...': more bin/qoslab demo options)
#   make check-fresh  the two commands' first step on a bare Debian 12 root
#                   (debootstrap; cache in /var/tmp; see spec/support/check-fresh.sh)
#   make bench      benchmarks against tc / iperf3 (results: bench/RESULTS.md;
#                   BENCH=ceiling: only bench/ceiling.lua, ~10 min; QUICK=1:
#                   its short pass, ~4 min)
#   make doc        the reference (LDoc: config.ld, manual/) in doc/index.html
#
# This Makefile is the one source list: the rockspec calls it (build.type
# "make") with LUA_INCDIR/INST_* set by LuaRocks.
#
# The pkg-config flags below are computed when make reads this file, so on a
# machine without the packages they are empty until `make deps` has run: the
# targets that start with deps (demo, test, bench) build through a second make
# that reads the file again after the install.

VERSION      := scm-1
LUA          ?= lua5.4
LUA_INCDIR   ?= /usr/include/lua5.4
PKG_CONFIG   ?= pkg-config
CC           ?= cc
BUILD        ?= build

NL_CFLAGS    := $(shell $(PKG_CONFIG) --cflags libnl-route-3.0 2>/dev/null)
NL_LIBS      := $(shell $(PKG_CONFIG) --libs libnl-route-3.0 2>/dev/null)
CJSON_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcjson 2>/dev/null)
CJSON_LIBS   := $(shell $(PKG_CONFIG) --libs libcjson 2>/dev/null || echo -lcjson)
# Expanded in the compile recipes only (make deps, clean work without libnl).
NEED_NL = $(if $(NL_CFLAGS),,$(error libnl-route-3.0 not found by $(PKG_CONFIG): run `make deps` as root, or install libnl-route-3-dev and pkg-config))

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wformat=2 -Wundef -Wno-unused-parameter
OPT     ?= -O2 -g
CFLAGS  ?= $(OPT)
QL_CFLAGS := -std=gnu11 -fPIC -fvisibility=hidden $(WARN) \
             -DQOSLAB_VERSION='"$(VERSION)"' -D_GNU_SOURCE \
             $(NL_CFLAGS) $(CJSON_CFLAGS)
LIBS    := $(NL_LIBS) $(CJSON_LIBS) -lpthread -lm

# Sanitizer builds: make SAN=asan (ASan+UBSan) or SAN=tsan; objects go to
# build-asan / build-tsan so they never mix with the normal build.
ifeq ($(SAN),asan)
  BUILD   := build-asan
  CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SAN),tsan)
  BUILD   := build-tsan
  CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=thread
  LDFLAGS += -fsanitize=thread
endif

CORE_SRC := $(sort $(wildcard csrc/core/*.c csrc/core/engine/*.c csrc/core/impair/*.c))
CORE_HDR := $(wildcard csrc/core/*.h csrc/core/engine/*.h csrc/core/impair/*.h)
BIND_SRC := $(sort $(wildcard csrc/bind/*.c))
CORE_OBJ := $(CORE_SRC:csrc/%.c=$(BUILD)/obj/%.o)
BIND_OBJ := $(BIND_SRC:csrc/%.c=$(BUILD)/obj/%.o)
SO       := $(BUILD)/qoslab/core.so

CTEST_SRC := $(sort $(wildcard spec/c/test_*.c))
CTEST_BIN := $(CTEST_SRC:spec/c/%.c=$(BUILD)/ctest/%)

.PHONY: all deps test demo bench check check-c check-unit check-integration \
        check-netem lint check-asan check-tsan san-lua fuzz fuzz-bin install clean ci \
        check-fresh doc

all: $(SO)

$(BUILD)/obj/core/%.o: csrc/core/%.c $(CORE_HDR)
	@mkdir -p $(dir $@)$(NEED_NL)
	$(CC) $(QL_CFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/bind/%.o: csrc/bind/%.c $(CORE_HDR) $(wildcard csrc/bind/*.h)
	@mkdir -p $(dir $@)$(NEED_NL)
	$(CC) $(QL_CFLAGS) -I$(LUA_INCDIR) $(CFLAGS) -c $< -o $@

$(SO): $(CORE_OBJ) $(BIND_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LIBS)

# C unit tests of csrc/core (no Lua): one binary per spec/c/test_*.c.
$(BUILD)/ctest/%: spec/c/%.c spec/c/ctest.h $(CORE_HDR) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(QL_CFLAGS) $(CFLAGS) -Icsrc/core $(LDFLAGS) -o $@ $< $(CORE_OBJ) $(LIBS)

# The Lua host of the sanitizer suites (make SAN=tsan san-lua): the runtime
# linked into the executable instead of preloaded into lua5.4, see the file.
LUA_PC_CFLAGS := $(shell $(PKG_CONFIG) --cflags lua5.4 2>/dev/null || echo -I$(LUA_INCDIR))
LUA_PC_LIBS   := $(shell $(PKG_CONFIG) --libs lua5.4 2>/dev/null || echo -llua5.4)
san-lua: $(BUILD)/san-lua
$(BUILD)/san-lua: spec/support/san-lua.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(LUA_PC_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LUA_PC_LIBS)

# ---------------------------------------------------------------- deps ----
# Debian/Ubuntu packages. Idempotent: only missing packages are installed.
DEB_PKGS := lua5.4 liblua5.4-dev libnl-3-dev libnl-route-3-dev libcjson-dev \
            pkg-config gcc make lua-busted lua-cjson lua-dkjson lua-argparse lua-filesystem \
            luarocks iproute2 ethtool iputils-ping iperf3 iperf gnuplot-nox \
            qemu-system-x86 busybox-static clang libclang-rt-14-dev xz-utils \
            util-linux procps python3 lua-check chromium openssh-server
deps:
	@sh spec/support/deps.sh $(DEB_PKGS)

# ---------------------------------------------------------------- tests ---
BUSTED := busted --lua=$(LUA)

check-c: $(CTEST_BIN)
	@sh spec/support/run-ctests.sh $(BUILD)/ctest $(CTEST_BIN)

check-unit: $(SO)
	@QOSLAB_BUILD=$(BUILD) sh spec/support/run-busted.sh unit spec/unit spec/regress

check-integration: $(SO)
	@QOSLAB_BUILD=$(BUILD) sh spec/support/run-busted.sh integration spec/integration

check-netem: $(SO)
	@QOSLAB_BUILD=$(BUILD) sh spec/support/run-netem.sh

# luacheck (.luacheckrc) on lua/, bin/qoslab, examples/ and spec/.
lint:
	@QOSLAB_BUILD=$(BUILD) sh spec/support/run-lint.sh

check: check-c check-unit check-integration

# The README's test command: everything, then one summary line.
# The reference's own check (spec/unit/doc_spec.lua) needs ldoc: installed
# here too, so it runs rather than waits.
test: deps
	@sh spec/support/deps.sh $(DOC_PKGS) >/dev/null
	@sh spec/support/test-all.sh

ci: test

# ------------------------------------------------- sanitizers, fuzzing ---
# make check-asan / check-tsan: the engine built with ASan+UBSan / TSan,
# C tests plus the loopback traffic specs (spec/support/suite-*.sh).
check-asan:
	@sh spec/support/suite-asan.sh

check-tsan:
	@sh spec/support/suite-tsan.sh

# libFuzzer targets (clang): spec/fuzz/fuzz_*.c against csrc/core.
# make fuzz runs each for FUZZ_SECONDS from the seeds in spec/fuzz/seeds.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_SRC     := $(sort $(wildcard spec/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:spec/fuzz/%.c=build/fuzz/%)

build/fuzz/%: spec/fuzz/%.c $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	  $(NL_CFLAGS) $(CJSON_CFLAGS) -Icsrc/core -o $@ $< $(CORE_SRC) $(LIBS)

fuzz-bin: $(FUZZ_BIN)

fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh spec/support/suite-fuzz.sh

# ---------------------------------------------------------------- demo ----
# deps first, then a second make for the build (see the top of this file).
DEMO_ARGS ?=
demo: deps
	@$(MAKE) --no-print-directory all
	@$(LUA) bin/qoslab demo $(if $(QUICK),--quick) $(DEMO_ARGS)

bench: deps
	@$(MAKE) --no-print-directory all
	@sh bench/run.sh $(BENCH)

# A bare Debian 12 root (debootstrap minbase, cached under /var/tmp) with
# only make added: `make demo QUICK=1`, then `make check-c check-unit` inside
# it. Counts to $(BUILD)/counts/fresh.txt; skipped where the mirror is down.
# (The script installs debootstrap itself, after checking the mirror.)
check-fresh:
	@QOSLAB_BUILD=$(BUILD) bash spec/support/check-fresh.sh

# ----------------------------------------------------------------- doc ----
# The reference from the modules' LDoc blocks and manual/*.md. Its packages
# are not in DEB_PKGS: no required command needs them. --fatalwarnings: a
# malformed tag fails the build.
DOC_PKGS := lua-ldoc lua-discount
doc:
	@sh spec/support/deps.sh $(DOC_PKGS) >/dev/null
	@rm -rf doc
	@ldoc --fatalwarnings -q .
	@echo "doc: doc/index.html"

# ------------------------------------------------------------- install ----
# LuaRocks passes INST_LIBDIR / INST_LUADIR / INST_BINDIR.
INST_LIBDIR ?= /usr/local/lib/lua/5.4
INST_LUADIR ?= /usr/local/share/lua/5.4
INST_BINDIR ?= /usr/local/bin
# Every Lua module, sub-folders (qoslab/cli/...) included.
LUA_MOD := $(sort $(wildcard lua/qoslab/*.lua lua/qoslab/*/*.lua))
install: $(SO)
	install -d $(INST_LIBDIR)/qoslab $(INST_LUADIR)/qoslab $(INST_BINDIR)
	install -m 755 $(SO) $(INST_LIBDIR)/qoslab/core.so
	for f in $(LUA_MOD:lua/%=%); do install -D -m 644 lua/$$f $(INST_LUADIR)/$$f || exit 1; done
	install -D -m 755 lua/qoslab/vm/run-in-vm.sh $(INST_LUADIR)/qoslab/vm/run-in-vm.sh
	install -m 755 bin/qoslab $(INST_BINDIR)/qoslab

clean:
	rm -rf build build-asan build-tsan doc
