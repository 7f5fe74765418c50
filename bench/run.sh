#!/bin/sh
# run.sh - run every benchmark bench/*.lua with the checkout's module
# (`make bench`). Each prints its own table; results and the commands that
# produced them are kept in bench/RESULTS.md.
set -u
cd "$(dirname "$0")/.."
rc=0
for b in bench/*.lua; do
    [ -f "$b" ] || continue
    echo "===== $b"
    # the native impairment link runs on this host (no netem needed; the
    # guest has no TUN device); link_vs_netem.lua starts its own guest
    where=
    case $b in bench/impair_link.lua | bench/link_vs_netem.lua) where=--host ;; esac
    "${LUA:-lua5.4}" bin/qoslab run $where "$b" || rc=1
done
exit $rc
