#!/bin/sh
# run-lint.sh - `make lint`: luacheck (configured by .luacheckrc) on lua/,
# bin/qoslab, examples/ and spec/. Counts to $QOSLAB_BUILD/counts/lint.txt as
# "passed failed skipped": files without a warning, files with one, 0. A
# missing luacheck (Debian: lua-check, installed by make deps) is one failure.
set -u
cd "$(dirname "$0")/../.."
build=${QOSLAB_BUILD:-build}
mkdir -p "$build/counts"
counts=$build/counts/lint.txt
rm -f "$counts"
echo "== luacheck: lua bin/qoslab examples spec"
if ! command -v luacheck >/dev/null 2>&1; then
    echo "lint: luacheck not found: make deps installs lua-check" >&2
    echo "0 1 0" > "$counts"
    exit 1
fi
tap=$(mktemp)
trap 'rm -f "$tap"' EXIT
luacheck --formatter TAP --no-color lua bin/qoslab examples spec > "$tap"
rc=$?
# TAP: "ok N FILE" per clean file, "not ok N FILE:LINE:COL: warning" per warning.
passed=$(grep -c '^ok ' "$tap")
failed=$(grep '^not ok ' "$tap" | sed 's/^not ok [0-9]* \([^:]*\):.*/\1/' | sort -u | wc -l)
grep '^not ok ' "$tap" | sed 's/^not ok [0-9]* //'
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "lint: luacheck failed (exit $rc) without a warning" >&2
    failed=1
fi
echo "lint: $passed files clean, $failed with warnings"
echo "$passed $failed 0" > "$counts"
[ "$failed" -eq 0 ]
