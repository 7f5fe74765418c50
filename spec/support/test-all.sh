#!/bin/sh
# test-all.sh - build and run every suite, then print one summary line
# "N passed, N failed, N skipped" summing them. Exit 0 only if nothing failed.
# Each suite writes "passed failed skipped" to build/counts/<suite>.txt; a
# suite that could not run at all counts as one failure.
# QOSLAB_CHECK_FRESH=1 adds make check-fresh (suite "fresh").
set -u
cd "$(dirname "$0")/../.."
B=build
rm -rf "$B/counts"; mkdir -p "$B/counts"
status=0
step() { # name command...
    name=$1; shift
    echo "===== $name"
    if ! "$@"; then
        status=1
        [ -s "$B/counts/$name.txt" ] || echo "0 1 0" > "$B/counts/$name.txt"
    fi
}
step build make -s all
step lint make -s lint
step c make -s check-c
step unit make -s check-unit
step integration make -s check-integration
step netem make -s check-netem
# More suites (sanitizers, fuzzing) register here as they come.
for s in spec/support/suite-*.sh; do
    [ -f "$s" ] || continue
    n=$(basename "$s" .sh); n=${n#suite-}
    step "$n" sh "$s"
done
# The README's first command on a bare Debian 12 root (debootstrap, several
# minutes): CI asks for it (.ci/run sets QOSLAB_CHECK_FRESH=1).
if [ "${QOSLAB_CHECK_FRESH:-0}" = 1 ]; then
    step fresh make -s check-fresh
fi
p=0 f=0 s=0
for c in "$B"/counts/*.txt; do
    [ -f "$c" ] || continue
    read -r cp cf cs < "$c"
    printf '  %-14s %s passed, %s failed, %s skipped\n' "$(basename "$c" .txt)" "$cp" "$cf" "$cs"
    p=$((p + cp)); f=$((f + cf)); s=$((s + cs))
done
[ "$f" -gt 0 ] && status=1
echo "$p passed, $f failed, $s skipped"
exit $status
