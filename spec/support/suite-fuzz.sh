#!/bin/sh
# suite-fuzz.sh - build the libFuzzer targets (spec/fuzz/fuzz_*.c) and run
# each for FUZZ_SECONDS (default 20) from its seeds; a target passes when
# libFuzzer found no crash, leak or failed invariant. Counts go to
# build/counts/fuzz.txt as "passed failed skipped"; without clang's
# libFuzzer runtime every target is skipped (with the reason).
set -u
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-20}
mkdir -p build/counts build/fuzz
counts=build/counts/fuzz.txt
p=0 f=0 s=0
targets=$(ls spec/fuzz/fuzz_*.c 2>/dev/null)
echo "== fuzz (${secs} s per target)"
if ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || \
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n){return 0;}' | \
     "${FUZZ_CC:-clang}" -x c -fsanitize=fuzzer - -o build/fuzz/.probe 2>/dev/null; then
    n=$(echo "$targets" | grep -c .)
    echo "  skip: clang with libFuzzer not available (apt-get install clang libclang-rt-14-dev)"
    echo "0 0 $n" > "$counts"
    exit 0
fi
for src in $targets; do
    name=$(basename "$src" .c)
    if ! make -s "build/fuzz/$name"; then
        echo "  $name: build failed"; f=$((f + 1)); continue
    fi
    seeds=spec/fuzz/seeds/${name#fuzz_}
    corpus=build/fuzz/corpus-$name
    mkdir -p "$corpus"
    log=build/fuzz/$name.log
    if "build/fuzz/$name" -max_total_time="$secs" -rss_limit_mb=1024 -timeout=10 \
         -print_final_stats=1 -artifact_prefix=build/fuzz/"$name"- \
         "$corpus" $( [ -d "$seeds" ] && echo "$seeds" ) > "$log" 2>&1; then
        echo "  ok - $name ($(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs)"
        p=$((p + 1))
    else
        echo "  not ok - $name (see $log; crash input in build/fuzz/$name-*)"
        tail -20 "$log" | sed 's/^/    /'
        f=$((f + 1))
    fi
done
echo "$p $f $s" > "$counts"
[ "$f" -eq 0 ]
