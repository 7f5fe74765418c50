#!/bin/sh
# run-busted.sh SUITE DIR... - run busted specs with the checkout's module,
# writing counts to $QOSLAB_BUILD/counts/SUITE.txt.
set -u
suite=$1; shift
build=${QOSLAB_BUILD:-build}
mkdir -p "$build/counts"
counts="$build/counts/$suite.txt"
rm -f "$counts"
dirs=""
for d in "$@"; do
    [ -d "$d" ] && [ -n "$(find "$d" -name '*_spec.lua' | head -1)" ] && dirs="$dirs $d"
done
if [ -z "$dirs" ]; then echo "0 0 0" > "$counts"; exit 0; fi
echo "== busted: $suite ($dirs )"
# shellcheck disable=SC2086
QOSLAB_COUNTS=$counts QOSLAB_BUILD=$build busted --lua="${LUA:-lua5.4}" \
    -o spec/support/qoslab_output.lua $dirs
rc=$?
[ -s "$counts" ] || { echo "1 1 0" > "$counts"; echo "busted $suite: no counts (crashed?)" >&2; rc=1; }
exit $rc
