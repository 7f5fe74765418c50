#!/usr/bin/env bash
# check-fresh.sh - the README's first command on a bare Debian 12 machine.
#
# Builds (once; cached) a Debian 12 root with `debootstrap --variant=minbase`,
# unpacks a copy of it, puts `git archive HEAD` of this checkout in
# /root/qoslab, adds only `make` (apt-get inside the root), and runs there,
# each once, under chroot:
#   make demo QUICK=1   installs the packages (make deps), builds, runs the
#                       quick demo (inside the qemu guest where the kernel has
#                       no sch_netem); results.jsonl, CSV and PNG must exist
#   make -s check-c     the C unit tests               (these two:
#   make -s check-unit  the unit and regression specs   QOSLAB_FRESH_TESTS)
#   qoslab cleanup      must find nothing left behind, and /run/netns empty
# The root is bind-mounted on itself (so / is a mount point, as `ip netns`
# needs) and gets /proc, /sys, /dev (bind), /dev/pts, /dev/shm, a tmpfs /run
# (ip netns keeps its namespaces in /run/netns) and the cache's .deb folder at
# /var/cache/apt/archives. On exit, also on SIGINT, SIGTERM or SIGHUP, every
# process still running in the root is killed, every mount under it is
# unmounted in reverse order (lazily if busy) and the working root is
# deleted; the cache stays. A run killed with SIGKILL leaves
# its working root; the next run removes it.
#
# Counts: each step passes or fails, written as "passed failed skipped" to
# $QOSLAB_BUILD/counts/fresh.txt (default build/). Where the package mirror
# cannot be reached the whole check is skipped (one skip, reason printed).
# Exit 0 when nothing failed.
#
# The mirror is the one this machine's apt uses (the first bookworm source in
# /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list, else
# debootstrap's default); the root gets this machine's apt source files.
#
# Environment knobs (all optional):
#   QOSLAB_FRESH_CACHE   cache dir (default /var/tmp/qoslab-fresh): the pristine
#                        root as a tarball, and the .debs apt fetched in the root
#   QOSLAB_FRESH_WORK    where working roots are made (default /var/tmp)
#   QOSLAB_FRESH_MIRROR  mirror URL instead of the one apt uses
#   QOSLAB_FRESH_TIMEOUT time limit of the demo step in seconds (default 2700)
#   QOSLAB_FRESH_TESTS   make targets run after the demo, each a step, 60 min
#                        limit each (default "check-c check-unit"; "test" is
#                        the README's second command, about 20 minutes)
#   QOSLAB_FRESH_KEEP=1  keep the working root after the run (unmounted)
set -uo pipefail

ME=check-fresh
SUITE=bookworm
TOP=$(cd "$(dirname "$0")/../.." && pwd -P)
BUILD=${QOSLAB_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
COUNTS=$BUILD/counts/fresh.txt
CACHE=${QOSLAB_FRESH_CACHE:-/var/tmp/qoslab-fresh}
WORKBASE=${QOSLAB_FRESH_WORK:-/var/tmp}
mkdir -p "$WORKBASE" && WORKBASE=$(cd "$WORKBASE" && pwd -P)
DEMO_TIMEOUT=${QOSLAB_FRESH_TIMEOUT:-2700}
TESTS=${QOSLAB_FRESH_TESTS:-check-c check-unit}
[[ $TESTS =~ ^[a-z0-9\ -]*$ ]] || { echo "$ME: QOSLAB_FRESH_TESTS: expected make target names, got $TESTS" >&2; exit 2; }
TARBALL=$CACHE/$SUITE-minbase.tar
P=0 F=0 S=0

say() { echo "$ME: $*"; }
counts() { mkdir -p "$(dirname "$COUNTS")"; echo "$P $F $S" > "$COUNTS"; }
skip_all() { say "SKIPPED: $*"; P=0 F=0 S=1; counts; exit 0; }
fail_all() { say "FAILED: $*"; F=$((F + 1)); counts; exit 1; }
now() { date +%s; }
took() { local s=$(($(now) - $1)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

[ "$(id -u)" = 0 ] || fail_all "must run as root (debootstrap, chroot, mounts)"
command -v git >/dev/null || fail_all "git not found (git archive HEAD is what goes into the root)"
git -C "$TOP" rev-parse --verify -q HEAD >/dev/null || fail_all "$TOP is not a git checkout with a HEAD"

# ------------------------------------------------------------- the mirror ----
mirror_from_apt() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        # deb822 stanzas: the first URI of a "deb" stanza whose Suites has $SUITE.
        awk -v suite="$SUITE" '
            function flush() { if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uri != "") { print uri; found = 1; exit } types = suites = uri = "" }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "types:"  { $1 = ""; types = $0 }
            tolower($1) == "suites:" { $1 = ""; suites = $0 }
            tolower($1) == "uris:"   { uri = $2 }
            END { if (!found) flush() }' "$f" | head -1 | grep . && return 0
    done
    if [ -r /etc/apt/sources.list ]; then
        awk -v suite="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                                             if ($(i + 1) == suite) { print $i; exit } }' \
            /etc/apt/sources.list | grep . && return 0
    fi
    return 1
}
MIRROR=${QOSLAB_FRESH_MIRROR:-$(mirror_from_apt || true)}
if [ -z "$MIRROR" ] && [ -r /usr/sbin/debootstrap ]; then
    MIRROR=$(sed -n 's/^DEF_MIRROR="\(.*\)"$/\1/p' /usr/sbin/debootstrap | head -1)
fi
[ -n "$MIRROR" ] || fail_all "no Debian mirror in the apt sources and no debootstrap default"
MIRROR=${MIRROR%/}

# Reachable? Its Release file, within 20 s.
probe() {
    local url=$MIRROR/dists/$SUITE/Release
    if command -v wget >/dev/null; then
        wget -q --spider -T 20 -t 2 "$url"
    elif command -v curl >/dev/null; then
        curl -sfI -m 20 -o /dev/null "$url"
    elif [[ $url =~ ^http://([^/:]+)(:([0-9]+))?(/.*)$ ]]; then
        timeout 20 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "HEAD %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$3" "$1" >&3 &&
            head -1 <&3 | grep -q " 200 "' _ "${BASH_REMATCH[1]}" "${BASH_REMATCH[3]:-80}" "${BASH_REMATCH[4]}"
    else
        return 1
    fi
}
probe || skip_all "the package mirror $MIRROR cannot be reached (its dists/$SUITE/Release): a bare root cannot be set up here"
say "mirror $MIRROR (reachable)"

# debootstrap on the host (itself a package: installed like make deps does).
command -v debootstrap >/dev/null || sh "$TOP/spec/support/deps.sh" debootstrap ||
    fail_all "debootstrap is missing and could not be installed"

mkdir -p "$CACHE/apt-archives/partial" "$WORKBASE" || fail_all "cannot create $CACHE"
# One run at a time: the cached .debs are shared, and apt locks them.
exec 8>"$CACHE/.run.lock"
flock -w 3600 8 || fail_all "another check-fresh holds $CACHE/.run.lock for an hour"

# --------------------------------------------------------- tear-down -------
# Mount points under $1, deepest-last-mounted first (mountinfo order reversed).
mounts_under() {
    awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | tac
}
# Kill every process whose root is $1 (they were started in it by this script
# or a dead run of it), TERM then KILL after 10 s.
kill_in_root() {
    local root=$1 sig pids p r
    for sig in TERM KILL; do
        pids=()
        for p in /proc/[0-9]*; do
            r=$(readlink "$p/root" 2>/dev/null) || continue
            [ "$r" = "$root" ] && pids+=("${p#/proc/}")
        done
        [ ${#pids[@]} -eq 0 ] && return 0
        say "stopping ${#pids[@]} process(es) left in the root ($sig)"
        kill -s "$sig" "${pids[@]}" 2>/dev/null
        for _ in $(seq 1 20); do
            sleep 0.5
            for p in "${pids[@]}"; do [ -e "/proc/$p" ] && continue 2; done
            return 0
        done
    done
}
# Unmount everything under $1, then delete it (never across a file system
# boundary: a bind of /dev that would not go away must not be emptied).
teardown() {
    local dir=$1 root=$1/root m left
    kill_in_root "$root"
    for m in $(mounts_under "$dir"); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
    done
    left=$(mounts_under "$dir")
    if [ -n "$left" ]; then
        say "still mounted, $dir NOT deleted: $left"
        return 1
    fi
    if [ -n "${QOSLAB_FRESH_KEEP:-}" ]; then
        say "working root kept: $root"
    else
        rm -rf --one-file-system "$dir"
    fi
}
# Working roots of runs killed with SIGKILL (pid in the name, owner gone).
for d in "$WORKBASE"/qoslab-fresh-run.*.*; do
    [ -d "$d" ] || continue
    p=${d#"$WORKBASE"/qoslab-fresh-run.}; p=${p%%.*}
    if [[ $p =~ ^[0-9]+$ ]] && ! kill -0 "$p" 2>/dev/null; then
        say "removing the working root of a killed run: $d"
        teardown "$d"
    fi
done

RUN=$(mktemp -d "$WORKBASE/qoslab-fresh-run.$$.XXXXXX") || fail_all "mktemp in $WORKBASE"
ROOT=$RUN/root
cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    set +e
    kill_in_root "$ROOT"
    wait    # the step's timeout and sed end once the root is empty
    teardown "$RUN" || rc=1
    exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; F=$((F + 1)); counts; exit 130' INT
trap 'say "terminated"; F=$((F + 1)); counts; exit 143' TERM
trap 'F=$((F + 1)); counts; exit 129' HUP

T0=$(now)
counts

# ------------------------------------------------------ the pristine root ----
# Cached as a tarball: a second run unpacks it instead of downloading.
exec 9>"$CACHE/.lock"
flock -w 1800 9 || fail_all "cache lock $CACHE/.lock busy"
if [ ! -s "$TARBALL" ]; then
    say "debootstrap --variant=minbase $SUITE (once; cached in $TARBALL)"
    t=$(now)
    mkdir -p "$RUN/boot"
    if ! debootstrap --variant=minbase "$SUITE" "$RUN/boot" "$MIRROR" > "$RUN/debootstrap.log" 2>&1; then
        tail -n 20 "$RUN/debootstrap.log"
        grep -Eq 'Failed getting release file|Temporary failure resolving|Could not resolve|Connection refused|Network is unreachable' \
            "$RUN/debootstrap.log" && skip_all "debootstrap could not fetch from $MIRROR"
        fail_all "debootstrap failed (log above)"
    fi
    tar -C "$RUN/boot" --numeric-owner -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL" ||
        { rm -f "$TARBALL.tmp"; fail_all "cannot write $TARBALL"; }
    rm -rf --one-file-system "${RUN:?}/boot"
    say "debootstrap took $(took "$t") ($(du -m "$TARBALL" | cut -f1) MB tarball)"
fi
exec 9>&-
mkdir -p "$ROOT"
tar -C "$ROOT" --numeric-owner -xpf "$TARBALL" || fail_all "cannot unpack $TARBALL"

# ----------------------------------------------- network, apt, the tree ----
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
# The machine's own apt sources (main, updates, security as it has them).
if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1 || [ -s /etc/apt/sources.list ]; then
    rm -f "$ROOT/etc/apt/sources.list"
    [ -s /etc/apt/sources.list ] && cp /etc/apt/sources.list "$ROOT/etc/apt/"
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] && cp "$f" "$ROOT/etc/apt/sources.list.d/"
    done
fi
mkdir -p "$ROOT/root/qoslab"
git -C "$TOP" archive --format=tar HEAD | tar -C "$ROOT/root/qoslab" -xf - ||
    fail_all "git archive HEAD | tar failed"
say "root ready: $(git -C "$TOP" log -1 --format='%h %s' | cut -c1-70)"

# ---------------------------------------------------------------- mounts ----
mnt() { mount "$@" || fail_all "mount $*"; }
# The root a mount point of its own, as / is on a machine: `ip -n NS ...` and
# `ip netns exec` run `mount --make-rslave /`, which fails on a plain directory.
mnt --bind "$ROOT" "$ROOT"
mnt -t proc proc "$ROOT/proc"
mnt -t sysfs sysfs "$ROOT/sys"
mnt --bind /dev "$ROOT/dev"
mnt -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$ROOT/dev/pts"
mnt -t tmpfs -o nosuid,nodev tmpfs "$ROOT/dev/shm"
mnt -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$ROOT/run"
# The .debs apt fetches (make, then make deps) stay in the cache.
mnt --bind "$CACHE/apt-archives" "$ROOT/var/cache/apt/archives"
# apt downloads as its _apt user (uid from the root's own passwd).
apt_uid=$(awk -F: '$1 == "_apt" { print $3 }' "$ROOT/etc/passwd")
[ -n "$apt_uid" ] && chown "$apt_uid" "$ROOT/var/cache/apt/archives/partial"

# ----------------------------------------------------------------- steps ----
ENV=(HOME=/root TERM=dumb LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive
     PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && ENV+=("$v=${!v}")
done
# in_root SECONDS 'command': bash -c in /root/qoslab inside the root.
in_root() {
    timeout -k 10 "$1" chroot "$ROOT" /usr/bin/env -i "${ENV[@]}" \
        /bin/bash -c "set -o pipefail; cd /root/qoslab && $2" < /dev/null
}
# step NAME SECONDS 'command': one counted step, output indented.
step() {
    local name=$1 t rc
    t=$(now)
    say "---- $name"
    rm -f "$RUN/rc"
    # In the background: a signal to this script runs its trap at once
    # instead of after the step (bash defers traps until a foreground job ends).
    # Without the run lock's fd: processes a SIGKILL of this script leaves in
    # the root must not hold it (the next run kills them and removes the root).
    ( exec 8>&-
      { in_root "$2" "$3"; echo $? > "$RUN/rc"; } 2>&1 | sed -u 's/^/  | /' ) &
    wait $!
    rc=$(cat "$RUN/rc" 2>/dev/null || echo 125)
    if [ "$rc" -eq 0 ]; then
        P=$((P + 1)); say "ok - $name ($(took "$t"))"
    else
        F=$((F + 1)); say "not ok - $name: exit $rc$([ "$rc" -eq 124 ] && echo ' (timed out)') ($(took "$t"))"
    fi
    counts
    return "$rc"
}

step 'apt-get install make' 600 \
    'apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends make >/dev/null && make --version | sed -n 1p' ||
    { say "make could not be installed in the root"; exit 1; }
# The README's first command, quick form, results where we can check them.
step 'make demo QUICK=1 (the first command on a bare machine)' "$DEMO_TIMEOUT" \
    'make demo QUICK=1 "DEMO_ARGS=--out results/fresh" &&
     for f in results.jsonl delay.csv delay.json delay.png matrix.csv window.csv window.png; do
         [ -s "results/fresh/$f" ] || { echo "results/fresh/$f missing or empty" >&2; exit 1; }
     done && ls results/fresh | tr "\n" " " && echo'
for t in $TESTS; do
    step "make -s $t" 3600 "make -s $t 2>&1 | tail -n 15"
done
step 'nothing left behind (qoslab cleanup, /run/netns)' 120 \
    'out=$(lua5.4 bin/qoslab cleanup 2>&1); echo "$out";
     left=$(ls -A /run/netns 2>/dev/null); [ -z "$left" ] || { echo "namespaces left in /run/netns: $left" >&2; exit 1; };
     [[ $out == *"nothing left behind"* ]]'

say "$P passed, $F failed, $S skipped (took $(took "$T0"))"
[ "$F" -eq 0 ]
