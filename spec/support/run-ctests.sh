#!/bin/sh
# run-ctests.sh BUILD_CTEST_DIR BIN... - run the C unit tests of csrc/core,
# sum their "ctest: N passed, N failed, N skipped" lines into counts/c.txt.
set -u
dir=$1; shift
counts="$(dirname "$dir")/counts/c.txt"
mkdir -p "$(dirname "$counts")"
p=0 f=0 s=0 rc=0
echo "== C unit tests"
for bin in "$@"; do
    out=$("$bin" 2>&1); r=$?
    printf '%s\n' "$out" | sed "s|^|  $(basename "$bin"): |"
    line=$(printf '%s\n' "$out" | grep '^ctest: ' | tail -1)
    if [ -z "$line" ]; then f=$((f + 1)); rc=1; continue; fi
    set -- $line
    p=$((p + $2)); f=$((f + $4)); s=$((s + $6))
    [ $r -ne 0 ] && rc=1
done
echo "$p $f $s" > "$counts"
exit $rc
