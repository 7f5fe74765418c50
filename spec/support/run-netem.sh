#!/bin/sh
# run-netem.sh - placeholder until the VM harness lands: counts nothing.
mkdir -p "${QOSLAB_BUILD:-build}/counts"
echo "0 0 0" > "${QOSLAB_BUILD:-build}/counts/netem.txt"
