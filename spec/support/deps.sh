#!/bin/sh
# deps.sh PKG... - install the Debian packages qoslab needs (idempotent).
# As root on Debian/Ubuntu: apt-get installs only what is missing.
# Otherwise: print what to install and fail.
set -eu
missing=""
for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && { echo "deps: all packages present"; exit 0; }
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null || apt-get update
    # openssh-server is there for the ssh client's specs, which start their
    # own sshd inside namespaces: no system sshd may start (or listen on this
    # machine's addresses), so the package's service start is denied while
    # apt-get runs (invoke-rc.d asks /usr/sbin/policy-rc.d; 101 = denied).
    made_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    # shellcheck disable=SC2086
    if ! apt-get install -y -q --no-install-recommends $missing >/dev/null; then
        [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
        exit 1
    fi
    [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
    echo "deps: done"
else
    echo "deps: missing packages:$missing" >&2
    echo "deps: install them with: sudo apt-get install$missing" >&2
    exit 1
fi
