#!/bin/sh
# suite-asan.sh - the engine under AddressSanitizer + UBSan: build with
# `make SAN=asan` (objects in build-asan), run the C tests and the loopback
# traffic specs with the sanitizer runtime preloaded into lua5.4, and
# write "passed failed skipped" to build/counts/asan.txt.
exec sh "$(dirname "$0")/run-sanitized.sh" asan
