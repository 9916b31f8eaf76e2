#!/bin/sh
# scripts/fuzz.sh [--merge] SECONDS [TARGET...] - runs the libFuzzer
# targets of tests/fuzz/ (docs/fuzzing.md) one after the other, SECONDS
# each, in one process each (the machine is shared: never two at once).
#
# Builds build-fuzz/ (clang, -DPCACHE_FUZZ=ON; PCACHE_FUZZ_BUILD overrides
# the folder). Each target fuzzes a work corpus in build-fuzz/fuzz-work/
# seeded from tests/fuzz/corpus/<t> and tests/fuzz/regress/<t>; a crash, a
# leak or a timeout (an input over 10 s) leaves its input in
# build-fuzz/fuzz-artifacts/<t>/ and makes the script exit 1 once every
# target ran. It prints one line per target: seconds, executions, corpus
# (inputs/bytes as libFuzzer counts it at the end), result. --merge then
# adds to tests/fuzz/corpus/<t> the work inputs that bring new coverage
# (libFuzzer -merge=1: a minimal set).
#
# CI runs it through .ci/run with PCACHE_CI_FUZZ_SECONDS set.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PCACHE_FUZZ_BUILD:-$root/build-fuzz}
merge=0
if [ "${1:-}" = --merge ]; then
    merge=1
    shift
fi
secs=${1:?usage: scripts/fuzz.sh [--merge] SECONDS [TARGET...]}
shift
targets=${*:-resp jsonrpc config url glob store journal sync_wire}

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DPCACHE_FUZZ=ON \
    -DPCACHE_TESTS=OFF -DPCACHE_BENCH=OFF >/dev/null
# shellcheck disable=SC2046
cmake --build "$build" -j2 --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) \
    >/dev/null

failed=""
summary=""
for t in $targets; do
    work="$build/fuzz-work/$t"
    art="$build/fuzz-artifacts/$t"
    log="$build/fuzz-logs/$t.log"
    mkdir -p "$work" "$art" "$(dirname "$log")"
    start=$(date +%s)
    rc=0
    "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$art/" "$work" "$root/tests/fuzz/corpus/$t" \
        "$root/tests/fuzz/regress/$t" >"$log" 2>&1 || rc=$?
    took=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    # libFuzzer's own count of its corpus at the end (inputs, bytes)
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[kKMG]*b\).*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        result=ok
    else
        result="FAILED (exit $rc; input in $art, log $log)"
        failed="$failed $t"
        grep -E "ERROR|invariant failed|SUMMARY" "$log" | head -n 5 >&2 || true
    fi
    line=$(printf '%-10s %6ss %12s execs  corpus %-12s %s' "$t" "$took" "${execs:-?}" \
        "${corp:-?}" "$result")
    echo "$line"
    summary="$summary$line
"
    if [ "$merge" -eq 1 ] && [ "$rc" -eq 0 ]; then
        "$build/tests/fuzz/fuzz_$t" -merge=1 "$root/tests/fuzz/corpus/$t" "$work" \
            >"$build/fuzz-logs/$t.merge.log" 2>&1
    fi
done
printf '\n%s' "$summary"
if [ -n "$failed" ]; then
    echo "fuzz: crashes in:$failed" >&2
    exit 1
fi
