#!/bin/sh
# suite-tsan.sh - the engine under ThreadSanitizer (make SAN=tsan, objects
# in build-tsan): C tests, loopback traffic and regression specs; counts to
# build/counts/tsan.txt.
exec sh "$(dirname "$0")/run-sanitized.sh" tsan
