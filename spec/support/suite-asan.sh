#!/bin/sh
# suite-asan.sh - the engine under AddressSanitizer + UBSan: build with
# `make SAN=asan` (objects in build-asan), run the C tests and the loopback
# traffic and regression specs in spec/support/san-lua (runtime linked in), and
# write "passed failed skipped" to build/counts/asan.txt.
exec sh "$(dirname "$0")/run-sanitized.sh" asan
