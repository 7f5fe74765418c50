#!/usr/bin/env bash
# run-in-vm.sh - run one shell command inside a throwaway QEMU guest whose
# kernel has sch_netem (Debian bookworm's stock linux-image-amd64), with the
# host's whole filesystem visible read-only (a copy-on-write tmpfs overlay in
# guest RAM on top), so the checkout, build/ and /usr are used as they are.
# Measured under TCG: bench/RESULTS.md ("qdisc change latency (netem,
# guest)"); the boot, the shares and the knobs are described below.
#
#   usage: run-in-vm.sh [OPTIONS] [--] 'command string'
#          run-in-vm.sh --check      can a guest run here? (nothing booted)
#          run-in-vm.sh --prepare    --check, then fetch/unpack the kernel and
#                                    build the initramfs into the cache
#   options:
#     --rw DIR          mount host DIR read-write at the same path in the guest
#     --env NAME=VALUE  set NAME in the guest's environment (repeatable)
#     --cwd DIR         run the command in DIR (default: the current directory)
#     --timeout S       kill the guest after S seconds (default 900)
#
#   prints: the command's stdout on stdout and its stderr on stderr, streamed
#   exit:   the command's status; 124 = timed out; 125 = the guest itself
#           failed (the tail of its console log is printed on stderr);
#           3 = (--check/--prepare only) a guest cannot run on this machine;
#           then, and for a run that cannot start (125), one line
#           "run-in-vm: unavailable: CODE: why" is on stderr, CODE one of
#           ENOENT (a program or the kernel package is missing), EPERM (not
#           root), ENODEV (KVM asked for, unusable), ENOTSUP (busybox not
#           static, or qemu without TCG); 2 = bad usage
#
# The command runs as root via `bash -c`, stdin /dev/null, loopback up, no
# other network device. sch_netem, sch_tbf, sch_htb, sch_ingress, cls_u32,
# act_mirred, veth, ifb and tun are loaded at boot; any other module of the guest
# kernel loads on demand (the kernel's modprobe is busybox's). Writes go to the
# overlay and vanish with the guest; the host is only written in the run dir
# (removed at exit), the cache, and the --rw directory. /proc, /sys, /dev and
# /run are the guest's own (so host files under /run are not visible there).
#
# Host packages (Debian 12): qemu-system-x86, busybox-static, and the first
# time a working `apt-get update` so `apt-get download` can fetch the kernel
# .deb (only unpacked into the cache, never installed). Also coreutils,
# util-linux (flock, setpriv), dpkg, xz-utils, grep -P. Runs as root (the 9p
# export of / must read every file as its owner sees it).
#
# Environment knobs (all optional):
#   QOSLAB_VM_CACHE   kernel/initramfs cache        (default /tmp/qoslab-vm-cache)
#   QOSLAB_VM_KERNEL_DEB  use this linux-image-*.deb instead of downloading
#   QOSLAB_VM_ACCEL   auto | tcg | kvm              (default auto, see below)
#   QOSLAB_VM_CPU     qemu -cpu model  (default max,-erms,-fsrm; host for kvm)
#   QOSLAB_VM_MEM     guest RAM                     (default 1024M)
#   QOSLAB_VM_CPUS    guest vCPUs                   (default: host nproc)
#   QOSLAB_VM_TIMEOUT as --timeout
#   QOSLAB_VM_RW      as --rw
#   QOSLAB_VM_ENV     space-separated names of host variables to pass in
#   QOSLAB_VM_MODULES extra kernel modules to load at boot
#   QOSLAB_VM_APPEND  extra kernel command-line arguments
#   QOSLAB_VM_DEBUG=1 print the guest console and qemu's log at the end
#   QOSLAB_VM_KEEP=1  keep the run dir (its path is printed on stderr)
set -euo pipefail

ME=run-in-vm
die() { echo "$ME: $*" >&2; exit 125; }
# Exit 3 only where it cannot be a command's own status (--check, --prepare);
# a run that cannot start is a guest failure (125).
unavailable() {
    echo "$ME: unavailable: $1: $2" >&2
    if [ "$MODE" = run ]; then exit 125; else exit 3; fi
}
usage() { sed -n '9,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

MODE=run
RW=${QOSLAB_VM_RW:-}
CWD=$(pwd)
TIMEOUT=${QOSLAB_VM_TIMEOUT:-900}
ENV_SET=()
while [ $# -gt 0 ]; do
    case $1 in
        --check)   MODE=check; shift ;;
        --prepare) MODE=prepare; shift ;;
        --rw)      [ $# -ge 2 ] || usage; RW=$2; shift 2 ;;
        --env)     [ $# -ge 2 ] || usage; ENV_SET+=("$2"); shift 2 ;;
        --cwd)     [ $# -ge 2 ] || usage; CWD=$2; shift 2 ;;
        --timeout) [ $# -ge 2 ] || usage; TIMEOUT=$2; shift 2 ;;
        --)        shift; break ;;
        -*)        usage ;;
        *)         break ;;
    esac
done
if [ "$MODE" = run ]; then
    [ $# -eq 1 ] || usage
    CMD=$1
else
    [ $# -eq 0 ] || usage
fi
[[ $TIMEOUT =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "$ME: --timeout: not a number: $TIMEOUT" >&2; exit 2; }
for kv in "${ENV_SET[@]}"; do
    [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || { echo "$ME: --env: expected NAME=VALUE, got $kv" >&2; exit 2; }
done
[ -d "$CWD" ] || { echo "$ME: --cwd: no such directory: $CWD" >&2; exit 2; }
CWD=$(cd "$CWD" && pwd -P)
if [ -n "$RW" ]; then
    [ -d "$RW" ] || { echo "$ME: --rw: no such directory: $RW" >&2; exit 2; }
    RW=$(cd "$RW" && pwd -P)
fi

CACHE=${QOSLAB_VM_CACHE:-/tmp/qoslab-vm-cache}
MEM=${QOSLAB_VM_MEM:-1024M}
CPUS=${QOSLAB_VM_CPUS:-$(nproc)}
# 9p message size: the 6.1 virtio transport caps it near 512 KiB; bigger
# messages mean fewer round trips when the guest reads binaries.
MSIZE=262144
# Loaded at boot with their dependencies (from modules.dep). The first four
# mount the root; the rest are what qoslab's specs and experiments use, loaded
# up front so a failure shows at boot and not as a puzzling tc error later.
MODULES="virtio_pci 9pnet_virtio 9p overlay sch_netem sch_tbf sch_htb
         sch_ingress cls_u32 act_mirred veth ifb tun ${QOSLAB_VM_MODULES:-}"

# ------------------------------------------------------------ can we run? ----
# Accelerator. This project's machines have a /dev/kvm served by kvm_pvm
# (nested "PVM" without VT-x/SVM) that only runs PVM-enlightened kernels: a
# stock Debian kernel stalls or dies with "KVM internal error" there. So
# auto = TCG whenever kvm_pvm is loaded or /dev/kvm is not
# writable, real KVM otherwise.
ACCEL=${QOSLAB_VM_ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
    if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then ACCEL=kvm; else ACCEL=tcg; fi
fi
case $ACCEL in
    # thread=multi: one host thread per vCPU. -erms,-fsrm: without "fast rep
    # movsb" the guest kernel copies with instructions TCG runs faster (TCP
    # over lo 1.0-1.5 -> 2.1-4.6 Gbit/s measured). TCG has no AVX-512: host
    # programs built with -march=native may SIGILL in the guest.
    tcg) ACCEL_ARGS=(-accel tcg,thread=multi -cpu "${QOSLAB_VM_CPU:-max,-erms,-fsrm}") ;;
    kvm) [ -w /dev/kvm ] || unavailable ENODEV "QOSLAB_VM_ACCEL=kvm but /dev/kvm is not usable; use QOSLAB_VM_ACCEL=tcg"
         ACCEL_ARGS=(-accel kvm -cpu "${QOSLAB_VM_CPU:-host}") ;;
    *)   echo "$ME: QOSLAB_VM_ACCEL must be auto, tcg or kvm, got $ACCEL" >&2; exit 2 ;;
esac

[ "$(id -u)" = 0 ] || unavailable EPERM "must run as root (the guest reads the host's / over 9p as its owners)"
command -v qemu-system-x86_64 >/dev/null ||
    unavailable ENOENT "qemu-system-x86_64 not found; install qemu-system-x86 (make deps)"
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || unavailable ENOENT "busybox not found; install busybox-static (make deps)"
# The initramfs has no libc: busybox must be the static build.
if ldd "$BUSYBOX" >/dev/null 2>&1; then
    unavailable ENOTSUP "$BUSYBOX is dynamically linked; install busybox-static"
fi
# (captured first: grep -q would close the pipe early under pipefail)
accels=$(qemu-system-x86_64 -accel help 2>/dev/null || true)
if [ "$ACCEL" = tcg ] && ! printf '%s\n' "$accels" | grep -qx tcg; then
    unavailable ENOTSUP "this qemu-system-x86_64 has no TCG accelerator"
fi
for t in setpriv flock dpkg-deb xz timeout tail stdbuf; do
    command -v "$t" >/dev/null || unavailable ENOENT "$t not found (util-linux, dpkg, xz-utils, coreutils)"
done

# The newest kernel already unpacked in the cache, if any.
cached_pkg() {
    local d
    for d in $(ls -1d "$CACHE"/linux-image-*/ 2>/dev/null | sort -V -r); do
        [ -e "$d/ready" ] && { basename "$d"; return 0; }
    done
    return 0
}
# linux-image-amd64 is a metapackage whose Depends names the current ABI
# (e.g. linux-image-6.1.0-57-amd64); old ABIs leave the archive after
# security updates, so it is resolved when needed, not hard-coded.
resolve_pkg() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
# The same, fetching the package lists once if they are absent (a fresh or
# cleaned image), as `make deps` would.
resolve_pkg_updating() {
    local p
    p=$(resolve_pkg)
    if [ -z "$p" ]; then
        echo "$ME: apt cannot resolve linux-image-amd64; running apt-get update" >&2
        apt-get update -q >/dev/null 2>&1 || true
        p=$(resolve_pkg)
    fi
    printf '%s' "$p"
}

if [ "$MODE" = check ]; then
    if [ -z "${QOSLAB_VM_KERNEL_DEB:-}" ] && [ -z "$(cached_pkg)" ]; then
        p=$(resolve_pkg_updating)
        [ -n "$p" ] || unavailable ENOENT "no kernel in $CACHE and apt cannot resolve linux-image-amd64 (run apt-get update, or make deps)"
        # (captured first: grep -q would close the pipe early under pipefail)
        pol=$(apt-cache policy "$p" 2>/dev/null || true)
        [[ $pol == *"Candidate: "[0-9]* ]] ||
            unavailable ENOENT "apt has no candidate for $p (run apt-get update)"
    elif [ -n "${QOSLAB_VM_KERNEL_DEB:-}" ] && [ ! -r "$QOSLAB_VM_KERNEL_DEB" ]; then
        unavailable ENOENT "QOSLAB_VM_KERNEL_DEB=$QOSLAB_VM_KERNEL_DEB is not readable"
    fi
    echo "$ME: available (accel $ACCEL, cache $CACHE)"
    exit 0
fi

mkdir -p "$CACHE"

# ---------------------------------------------------------------- kernel ----
# Unpack a Debian kernel with its modules into $CACHE/<pkg>/root, once
# (70 MB download, ~435 MB unpacked, ~10 s). flock: concurrent runs must not
# unpack at the same time.
prepare_kernel() {
    exec 9>"$CACHE/.lock"
    flock -w 600 9 || die "cache lock $CACHE/.lock busy for 600 s"
    local deb pkg
    if [ -n "${QOSLAB_VM_KERNEL_DEB:-}" ]; then
        deb=$QOSLAB_VM_KERNEL_DEB
        [ -r "$deb" ] || unavailable ENOENT "QOSLAB_VM_KERNEL_DEB=$deb is not readable"
        pkg=$(basename "$deb" .deb)
    else
        pkg=$(cached_pkg)
        if [ -z "$pkg" ]; then
            pkg=$(resolve_pkg_updating)
            [ -n "$pkg" ] || unavailable ENOENT "cannot resolve linux-image-amd64 (run apt-get update, or make deps)"
        fi
    fi
    KROOT=$CACHE/$pkg/root
    if [ ! -e "$CACHE/$pkg/ready" ]; then
        echo "$ME: preparing kernel $pkg in $CACHE (once)" >&2
        rm -rf "${CACHE:?}/$pkg"
        mkdir -p "$CACHE/$pkg"
        if [ -z "${QOSLAB_VM_KERNEL_DEB:-}" ]; then
            # apt-get download writes into the cwd; as root it warns that it
            # runs unsandboxed (_apt cannot write there): harmless.
            local log
            if ! log=$(cd "$CACHE/$pkg" && apt-get download -q "$pkg" 2>&1); then
                rm -rf "${CACHE:?}/$pkg"
                printf '%s\n' "$log" | tail -n 5 >&2
                unavailable ENOENT "apt-get download $pkg failed (network or apt sources)"
            fi
            deb=$(ls "$CACHE/$pkg"/*.deb)
        fi
        # Unpack only: no maintainer scripts, nothing written outside $CACHE.
        dpkg-deb -x "$deb" "$KROOT" || die "dpkg-deb -x $deb failed"
        rm -f "$CACHE/$pkg"/*.deb
        local kv
        kv=$(ls "$KROOT/lib/modules")
        # The .deb ships no modules.dep (depmod runs in postinst); busybox
        # depmod writes the format busybox modprobe reads.
        "$BUSYBOX" depmod -b "$KROOT" "$kv" || die "depmod failed"
        # Boot the uncompressed ELF vmlinux through its PVH entry point: this
        # skips real-mode setup and the xz decompressor, which take seconds
        # under TCG. The bzImage is a boot stub followed by one xz stream;
        # --single-stream stops at its end, ignoring the trailing bytes.
        local off
        off=$(LC_ALL=C grep -obUaP '\xFD7zXZ\x00' "$KROOT/boot/vmlinuz-$kv" | head -1 | cut -d: -f1)
        [ -n "$off" ] || die "no xz stream in vmlinuz-$kv"
        # tail gets SIGPIPE when xz stops early: ignore its status.
        { tail -c +$((off + 1)) "$KROOT/boot/vmlinuz-$kv" || true; } |
            xz -dc --single-stream > "$KROOT/boot/vmlinux-$kv" ||
            die "cannot extract vmlinux"
        [ "$(head -c 4 "$KROOT/boot/vmlinux-$kv" | od -An -c | tr -d ' ')" = '177ELF' ] ||
            die "extracted vmlinux is not an ELF file"
        touch "$CACHE/$pkg/ready"
    fi
    KVER=$(ls "$KROOT/lib/modules")
    VMLINUX=$KROOT/boot/vmlinux-$KVER
    MODDIR=$KROOT/lib/modules/$KVER
    [ -r "$VMLINUX" ] || die "no $VMLINUX"
    grep -q '^CONFIG_NET_SCH_NETEM=[ym]' "$KROOT/boot/config-$KVER" ||
        die "kernel $KVER has no sch_netem"
}

# ------------------------------------------------------------- initramfs ----
# Stage 1 (/init, PID 1 in the initramfs): load the modules, mount the host /
# read-only over 9p with a tmpfs overlay on top, mount the run dir, and
# switch_root into the overlay running stage 2.
read -r -d '' INIT_SCRIPT <<'EOF' || true
#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /lower /rw /newroot
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
fail() { echo "qoslab-vm stage1: $*"; poweroff -f; sleep 60; }
MSIZE=262144 CACHE=loose
for a in $(cat /proc/cmdline); do
    case $a in
        qvm.msize=*) MSIZE=${a#qvm.msize=} ;;
        qvm.cache=*) CACHE=${a#qvm.cache=} ;;
    esac
done
# insmod, not modprobe: /modules.load is already in dependency order.
for m in $(cat /modules.load); do
    insmod /mod/$m.ko || fail "insmod $m failed"
done
# Host / (qemu enforces readonly=on too). cache=loose keeps pages and dentries
# in the guest: the host tree is not expected to change under a short run.
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=$MSIZE,cache=$CACHE \
      hostroot /lower || fail "mount 9p hostroot failed"
mount -t tmpfs -o mode=0755 qvmrw /rw || fail "tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work \
      overlay /newroot || fail "mount overlay failed"
# A fresh /run: the host's holds pid files and /run/netns entries.
mount -t tmpfs -o mode=0755,nosuid,nodev run /newroot/run
mkdir -p /newroot/run/qvm /newroot/run/qvm-bin
# The per-run dir (cmd, cwd, env in; stdout, stderr, status out).
# cache=none: a write() that returned has reached the host file, so nothing
# is lost at the immediate power-off.
mount -t 9p -o trans=virtio,version=9p2000.L,msize=$MSIZE,cache=none \
      qvmrun /newroot/run/qvm || fail "mount 9p qvmrun failed"
# switch_root empties the initramfs: keep busybox and stage 2 in /run.
cp /bin/busybox /stage2 /newroot/run/qvm-bin/
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /run/qvm-bin/busybox sh /run/qvm-bin/stage2
EOF

# Stage 2 (PID 1 in the overlay root): the usual mounts, lo up, module
# auto-loading, the command, its status, power-off.
read -r -d '' STAGE2_SCRIPT <<'EOF' || true
BB=/run/qvm-bin/busybox
R=/run/qvm
fail() { echo "qoslab-vm stage2: $*"; $BB poweroff -f; }
$BB mkdir -p /dev/pts /dev/shm
$BB mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts
$BB ln -sf pts/ptmx /dev/ptmx
$BB mount -t tmpfs -o nosuid,nodev tmpfs /dev/shm
$BB mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
$BB ln -sf /proc/self/fd /dev/fd
$BB ln -sf /proc/self/fd/0 /dev/stdin
$BB ln -sf /proc/self/fd/1 /dev/stdout
$BB ln -sf /proc/self/fd/2 /dev/stderr
$BB hostname qoslab-vm
# A fresh kernel has lo down.
$BB ip link set lo up || fail "lo up"
# The cached module tree (on the host, seen through the 9p root) at the usual
# place, and busybox as the kernel's modprobe: the host may have no kmod, and
# `tc qdisc add ... fq_codel` etc. then auto-load their module.
KV=$($BB uname -r)
$BB mkdir -p /lib/modules/$KV
$BB mount --bind "$($BB cat $R/moddir)" /lib/modules/$KV || fail "bind modules"
$BB ln -s busybox /run/qvm-bin/modprobe
echo /run/qvm-bin/modprobe > /proc/sys/kernel/modprobe
# The optional read-write host dir, at the same path as on the host.
if [ -s $R/rwdir ]; then
    $BB mkdir -p "$($BB cat $R/rwdir)"
    $BB mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none \
        qvmrwdir "$($BB cat $R/rwdir)" || fail "mount rw dir"
fi
export HOME=/root TERM=dumb LANG=C.UTF-8 QOSLAB_IN_VM=1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
[ -s $R/env ] && . $R/env
cd "$($BB cat $R/cwd)" 2>/dev/null || cd /
# Append, never truncate: the host is already tailing these files. Started in
# the background and waited for, so that ash's "Killed" notice for a command
# that dies of a signal goes to the console, not into the command's stderr.
/bin/bash -c "$($BB cat $R/cmd)" </dev/null >>$R/stdout 2>>$R/stderr &
wait $!
echo $? > $R/status.tmp
$BB mv $R/status.tmp $R/status
$BB sync
$BB poweroff -f
EOF

build_initramfs() {
    # Dependencies from modules.dep ("path.ko: dep.ko ..."), depth-first,
    # dependencies before their users.
    local -A seen=()
    local order=()
    visit() {
        local name=$1 line path deps d
        [ -n "${seen[$name]:-}" ] && return 0
        seen[$name]=1
        line=$(grep -E "(^|/)${name}\.ko:" "$MODDIR/modules.dep" | head -1 || true)
        if [ -z "$line" ]; then
            grep -qE "/${name}\.ko$" "$MODDIR/modules.builtin" && return 0
            die "module $name not found in $MODDIR"
        fi
        path=${line%%:*}
        deps=${line#*:}
        for d in $deps; do visit "$(basename "$d" .ko)"; done
        order+=("$path")
    }
    local m
    for m in $MODULES; do visit "${m//-/_}"; done

    # Cache key: everything that goes into the image.
    local key
    key=$( { printf '%s\n' "$INIT_SCRIPT" "$STAGE2_SCRIPT" "${order[@]}";
             sha256sum "$BUSYBOX"; } | sha256sum | cut -c1-16)
    INITRD=$KROOT/../initrd-$key.cpio.gz
    [ -s "$INITRD" ] && return 0

    local st
    st=$(mktemp -d "$CACHE/initrd.XXXXXX")
    mkdir -p "$st/bin" "$st/mod" "$st/dev" "$st/proc" "$st/sys"
    cp "$BUSYBOX" "$st/bin/busybox"
    printf '%s\n' "$INIT_SCRIPT" > "$st/init"
    printf '%s\n' "$STAGE2_SCRIPT" > "$st/stage2"
    chmod 755 "$st/init" "$st/bin/busybox"
    : > "$st/modules.load"
    local p
    for p in "${order[@]}"; do
        cp "$MODDIR/$p" "$st/mod/"
        basename "$p" .ko >> "$st/modules.load"
    done
    (cd "$st" && find . | "$BUSYBOX" cpio -o -H newc -R 0:0 2>/dev/null) |
        gzip -1 > "$INITRD.tmp"
    mv "$INITRD.tmp" "$INITRD"
    rm -rf "$st"
}

prepare_kernel
build_initramfs
exec 9>&-   # release the cache lock; qemu must not inherit it
if [ "$MODE" = prepare ]; then
    echo "$ME: ready: $VMLINUX (accel $ACCEL)"
    exit 0
fi

# --------------------------------------------------------------- the run ----
RUNBASE=${TMPDIR:-/tmp}
# Run dirs of runs that were killed with SIGKILL (no trap ran): the owner's
# pid is in the name; remove those whose owner is gone.
for d in "$RUNBASE"/qoslab-vm-run.*.*; do
    [ -d "$d" ] || continue
    p=${d#"$RUNBASE"/qoslab-vm-run.}; p=${p%%.*}
    [[ $p =~ ^[0-9]+$ ]] && ! kill -0 "$p" 2>/dev/null && rm -rf "$d"
done
RUN=$(mktemp -d "$RUNBASE/qoslab-vm-run.$$.XXXXXX")
QPID= TPIDS=()
cleanup() {
    local rc=$?
    set +e
    # Stop only what this script started, by pid.
    [ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
    local t
    for t in "${TPIDS[@]}"; do kill "$t" 2>/dev/null; wait "$t" 2>/dev/null; done
    if [ -n "${QOSLAB_VM_KEEP:-}" ]; then
        echo "$ME: run dir kept: $RUN" >&2
    else
        rm -rf "$RUN"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Single-quote for the guest's sh: ' becomes '\''.
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

printf '%s' "$CMD" > "$RUN/cmd"
printf '%s' "$CWD" > "$RUN/cwd"
printf '%s' "$MODDIR" > "$RUN/moddir"
: > "$RUN/env"
for v in ${QOSLAB_VM_ENV:-}; do
    [[ $v =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
    [ -n "${!v+set}" ] && printf 'export %s=%s\n' "$v" "$(sq "${!v}")" >> "$RUN/env"
done
for kv in "${ENV_SET[@]}"; do
    printf 'export %s=%s\n' "${kv%%=*}" "$(sq "${kv#*=}")" >> "$RUN/env"
done
: > "$RUN/stdout"
: > "$RUN/stderr"

RWARGS=()
if [ -n "$RW" ]; then
    printf '%s' "$RW" > "$RUN/rwdir"
    RWARGS=(-fsdev "local,id=qvmrwdir,path=$RW,security_model=none"
            -device "virtio-9p-pci,fsdev=qvmrwdir,mount_tag=qvmrwdir")
fi

# Stream the guest's output files as they grow. --pid: tail exits by itself
# once qemu is gone and the file is drained. exec: the job's pid is tail's.
tail_out() { exec tail -q -n +1 -s 0.1 -f --pid="$1" "$2"; }

# qemu:
#  -nodefaults -display none : no NIC, VGA, monitor; not hooked to our tty
#  -serial file:             : guest console to a log, shown only on failure
#  -no-reboot, panic=-1      : a guest panic ends qemu instead of rebooting
#  readonly=on               : the host / is read-only at the qemu level too;
#                              multidevs=remap avoids inode clashes between
#                              the host's filesystems
#  security_model=none       : qemu (root) reads files as itself and shows
#                              the real owners and modes to the guest
# setpriv --pdeathsig KILL (twice): if this script or `timeout` dies of
# SIGKILL (no trap runs), the kernel kills the child too: no qemu left behind.
setpriv --pdeathsig KILL -- timeout -k 5 "$TIMEOUT" \
  setpriv --pdeathsig KILL -- qemu-system-x86_64 \
    "${ACCEL_ARGS[@]}" -smp "$CPUS" -m "$MEM" \
    -nodefaults -no-user-config -display none -no-reboot \
    -serial "file:$RUN/console.log" \
    -kernel "$VMLINUX" -initrd "$INITRD" \
    -append "console=ttyS0 quiet panic=-1 qvm.msize=$MSIZE qvm.cache=loose ${QOSLAB_VM_APPEND:-}" \
    -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
    -device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot" \
    -fsdev "local,id=qvmrun,path=$RUN,security_model=none" \
    -device "virtio-9p-pci,fsdev=qvmrun,mount_tag=qvmrun" \
    "${RWARGS[@]}" \
    </dev/null >"$RUN/qemu.log" 2>&1 &
QPID=$!
tail_out "$QPID" "$RUN/stdout" &
TPIDS+=($!)
tail_out "$QPID" "$RUN/stderr" >&2 &
TPIDS+=($!)

set +e
wait "$QPID"
QRC=$?
QPID=
for t in "${TPIDS[@]}"; do wait "$t"; done
TPIDS=()
set -e

if [ -n "${QOSLAB_VM_DEBUG:-}" ]; then
    echo "---- $ME: guest console ----" >&2
    cat "$RUN/console.log" >&2 || true
    echo "---- $ME: qemu (exit $QRC) ----" >&2
    cat "$RUN/qemu.log" >&2 || true
fi

if [ -s "$RUN/status" ]; then
    exit "$(cat "$RUN/status")"
fi
if [ "$QRC" -eq 124 ] || [ "$QRC" -eq 137 ]; then
    echo "$ME: timed out after ${TIMEOUT}s" >&2
    exit 124
fi
echo "$ME: guest ended without a status (qemu exit $QRC); last console lines:" >&2
tail -n 30 "$RUN/console.log" >&2 || true
cat "$RUN/qemu.log" >&2 || true
exit 125
