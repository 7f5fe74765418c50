#!/bin/sh
# run.sh - run the benchmarks bench/*.lua with the checkout's module
# (`make bench`; `make bench BENCH='ceiling impair_link'`: only those).
# Each prints its own table; results and the commands that produced them are
# kept in bench/RESULTS.md. QUICK=1 in the environment: the benchmarks that
# offer one take their short pass (bench/ceiling.lua: N = 2, 1 s runs).
set -u
cd "$(dirname "$0")/.."
rc=0
if [ $# -gt 0 ]; then
    set -- $(for n in "$@"; do echo "bench/${n%.lua}.lua"; done)
else
    set -- bench/*.lua
fi
for b in "$@"; do
    if [ ! -f "$b" ]; then
        echo "run.sh: no benchmark $b" >&2
        rc=1
        continue
    fi
    echo "===== $b"
    # the native impairment link and the ceiling benchmark run on this host
    # (no netem needed, and the ceiling is the host's own);
    # link_vs_netem.lua and loss_unit.lua start their own guest
    where=
    case "$b" in
        bench/impair_link.lua|bench/ceiling.lua|bench/link_vs_netem.lua|bench/loss_unit.lua) where=--host ;;
    esac
    "${LUA:-lua5.4}" bin/qoslab run $where "$b" || rc=1
done
exit $rc
