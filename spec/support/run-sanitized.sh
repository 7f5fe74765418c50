#!/bin/sh
# run-sanitized.sh asan|tsan - shared body of suite-asan.sh / suite-tsan.sh.
# lua5.4 itself is not instrumented, so the sanitizer runtime is preloaded
# (it must come first); ASan's leak check is off for the interpreter, whose
# exit does not free everything. The C test binaries are fully instrumented
# and run with leak checking on.
set -u
cd "$(dirname "$0")/../.."
san=$1
B=build-$san
mkdir -p build/counts
counts=build/counts/$san.txt
cc=${CC:-cc}
case $san in
    asan) lib=$($cc -print-file-name=libasan.so) ;;
    tsan) lib=$($cc -print-file-name=libtsan.so) ;;
    *) echo "usage: run-sanitized.sh asan|tsan" >&2; exit 2 ;;
esac
echo "== $san"
if [ ! -f "$lib" ]; then
    echo "  skip: no $san runtime for $cc ($lib)"; echo "0 0 1" > "$counts"; exit 0
fi
# TSan needs the non-randomised low address layout on high-entropy ASLR
# kernels; setarch -R gives it without touching the system setting.
run() { if [ "$san" = tsan ] && command -v setarch >/dev/null; then setarch "$(uname -m)" -R "$@"; else "$@"; fi; }
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Speed checks of the C tests mean nothing under a sanitizer.
export QL_SLOW_RUN=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
rc=0
if ! make -s SAN="$san" all >/dev/null; then
    echo "  build failed"; echo "0 1 0" > "$counts"; exit 1
fi
ASAN_OPTIONS=detect_leaks=1 run make -s SAN="$san" check-c || rc=1
read -r cp cf cs < "$B/counts/c.txt" || { cp=0; cf=1; cs=0; }
bp=0 bf=0 bs=0
if [ "$san" = asan ]; then
    specs=${QOSLAB_SAN_SPECS:-spec/integration/traffic_loopback_spec.lua}
    # shellcheck disable=SC2086
    ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD=$lib QOSLAB_BUILD=$B \
        QOSLAB_COUNTS=$B/counts/busted.txt busted --lua=lua5.4 \
        -o spec/support/qoslab_output.lua $specs || rc=1
    read -r bp bf bs < "$B/counts/busted.txt" || { bp=0; bf=1; bs=0; }
else
    # busted exits silently under a preloaded TSan runtime: a plain Lua
    # driver runs the loopback cases through the binding instead.
    out=$(LD_PRELOAD=$lib QOSLAB_BUILD=$B run lua5.4 spec/support/san-loopback.lua 2>&1)
    r=$?
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep '^san-loopback: ' | tail -1)
    if [ -n "$line" ]; then
        set -- $line; bp=$2; bf=$4
    else
        bf=1
    fi
    if printf '%s\n' "$out" | grep -q 'WARNING: ThreadSanitizer'; then bf=$((bf + 1)); fi
    [ $r -ne 0 ] && rc=1
fi
echo "$((cp + bp)) $((cf + bf)) $((cs + bs))" > "$counts"
exit $rc
