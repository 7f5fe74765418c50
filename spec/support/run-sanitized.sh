#!/bin/sh
# run-sanitized.sh asan|tsan - shared body of suite-asan.sh / suite-tsan.sh.
# The C test binaries are fully instrumented and run with leak checking on
# and TSan halting at its first report; the loopback and regression specs
# run under busted in spec/support/san-lua (liblua5.4 itself is not
# instrumented; ASan's leak check is off there, the interpreter's exit does
# not free everything).
set -u
cd "$(dirname "$0")/../.." || exit 1
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
# The busted specs run in spec/support/san-lua.c, a Lua host with the
# runtime linked in (why not a preloaded lua5.4: see that file); busted's
# runner is started directly, --ignore-lua keeps it from re-executing
# itself under lua5.4 through the shell.
if ! make -s SAN="$san" san-lua >/dev/null; then
    echo "  cannot build $B/san-lua"; bf=1; rc=1
else
    specs=${QOSLAB_SAN_SPECS:-spec/integration/traffic_loopback_spec.lua spec/regress}
    rm -f "$B/counts/busted.txt"
    # Under TSan the run goes on after a report so that every report is
    # counted (the output handler charges each to its test) and the
    # process still exits non-zero at the end (TSan's exitcode).
    # shellcheck disable=SC2086
    ASAN_OPTIONS=detect_leaks=0 TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1" \
        QOSLAB_BUILD=$B QOSLAB_COUNTS=$B/counts/busted.txt \
        run "$B/san-lua" spec/support/busted-main.lua --ignore-lua \
        -o spec/support/qoslab_output.lua $specs
    r=$?
    if ! read -r bp bf bs 2>/dev/null < "$B/counts/busted.txt"; then
        echo "  busted ended before writing its counts (a sanitizer halted it)"
        bp=0 bf=1 bs=0
    fi
    # A report after the last test (at exit) shows only in the status.
    if [ $r -ne 0 ] && [ "$bf" -eq 0 ]; then
        echo "  busted exited $r with every test passed: counted as a failure"
        bf=1
    fi
    [ "$bf" -ne 0 ] && rc=1
fi
echo "$((cp + bp)) $((cf + bf)) $((cs + bs))" > "$counts"
exit $rc
