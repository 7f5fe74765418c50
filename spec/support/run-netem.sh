#!/bin/sh
# run-netem.sh - `make check-netem`: run the specs that need a kernel with
# sch_netem (spec/netem, or the dirs in $QOSLAB_NETEM_DIRS) in ONE qemu
# guest booted by lua/qoslab/vm/run-in-vm.sh, streaming its output here. The guest's busted
# writes its counts into a read-write share; they become
# $QOSLAB_BUILD/counts/netem.txt ("passed failed skipped"; the directory can
# be moved with QOSLAB_COUNTS_DIR).
#
# Skipped (counts "0 0 N", N = number of guest spec files, reason printed)
# only when this machine cannot run a guest at all: no qemu, no static
# busybox, not root, or the kernel package cannot be fetched. Everything else
# that goes wrong (the guest does not boot, times out, busted crashes) is a
# failure.
#
# Knobs: QOSLAB_NETEM_TIMEOUT (s, default 1200) bounds the whole guest run;
# the QOSLAB_VM_* variables of run-in-vm.sh apply.
set -u
cd "$(dirname "$0")/../.."
build=${QOSLAB_BUILD:-build}
vm=lua/qoslab/vm/run-in-vm.sh
cdir=${QOSLAB_COUNTS_DIR:-$build/counts}
mkdir -p "$cdir"
counts=$cdir/netem.txt
rm -f "$counts"

dirs=""
n=0
for d in ${QOSLAB_NETEM_DIRS:-spec/netem}; do
    [ -d "$d" ] || continue
    k=$(find "$d" -name '*_spec.lua' | wc -l)
    [ "$k" -gt 0 ] && { dirs="$dirs $d"; n=$((n + k)); }
done
if [ "$n" -eq 0 ]; then echo "0 0 0" > "$counts"; exit 0; fi

echo "== netem specs in a qemu guest ($dirs )"
t0=$(date +%s)
why=$(bash "$vm" --prepare 2>&1)
rc=$?
case $rc in
    0) ;;
    3)  echo "netem: SKIPPED $n spec file(s): no guest can run on this machine:"
        printf '%s\n' "$why" | sed 's/^/netem:   /'
        echo "0 0 $n" > "$counts"
        exit 0 ;;
    *)  printf '%s\n' "$why" >&2
        echo "netem: FAILED: the guest kernel could not be prepared (exit $rc)" >&2
        echo "0 1 0" > "$counts"
        exit 1 ;;
esac

# Read-write share for the counts; absolute, since the guest mounts it at the
# same path.
# Shares of runs killed with SIGKILL (no trap ran): owner pid in the name.
for d in "$build"/netem-run.*.*; do
    [ -d "$d" ] || continue
    p=${d#"$build"/netem-run.}; p=${p%%.*}
    kill -0 "$p" 2>/dev/null || rm -rf "$d"
done
case $build in /*) abuild=$build ;; *) abuild=$(pwd)/$build ;; esac
rw=$(mktemp -d "$abuild/netem-run.$$.XXXXXX")
child=
stop() { [ -n "$child" ] && kill "$child" 2>/dev/null && wait "$child"; exit "$1"; }
trap 'rm -rf "$rw"' EXIT
trap 'stop 130' INT
trap 'stop 143' TERM

# stdbuf -oL: in the guest stdout is a file, so output of the code under test
# would otherwise reach this terminal only at the end.
# In the background so that a signal here reaches the trap at once (which
# stops the harness, whose own trap stops qemu); pdeathsig covers SIGKILL.
setpriv --pdeathsig TERM -- bash "$vm" --rw "$rw" \
    --timeout "${QOSLAB_NETEM_TIMEOUT:-1200}" \
    --env QOSLAB_COUNTS="$rw/counts.txt" --env QOSLAB_BUILD="$build" \
    -- "stdbuf -oL busted --lua=${LUA:-lua5.4} -o spec/support/qoslab_output.lua$dirs" &
child=$!
wait "$child"
rc=$?
child=
t1=$(date +%s)
if [ -s "$rw/counts.txt" ]; then
    cp "$rw/counts.txt" "$counts"
else
    echo "0 1 0" > "$counts"
    case $rc in
        124) echo "netem: FAILED: the guest timed out" >&2 ;;
        125) echo "netem: FAILED: the guest did not run the specs (see above)" >&2 ;;
        *)   echo "netem: FAILED: busted in the guest wrote no counts (exit $rc)" >&2 ;;
    esac
    [ "$rc" -eq 0 ] && rc=1
fi
echo "netem: guest run took $((t1 - t0)) s (boot included), exit $rc"
exit "$rc"
