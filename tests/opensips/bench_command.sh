#!/bin/sh
# The admin guide's benchmark command (opensips_module/README.md §11), run as
# a user runs it: from the build directory, module paths relative to it, one
# small round. It checks that the command starts OpenSIPS, loads every module
# and measures (the script exits non-zero otherwise); it times nothing.
# usage: bench_command.sh OPENSIPS_SRC REPO_DIR   (run in the build directory)
set -eu
src=$1
repo=$2
# (proto_udp is part of the OpenSIPS 4 core: it has no .so of its own.)
for f in "$src/opensips" "$src/modules/cachedb_local/cachedb_local.so" \
         "$src/modules/sl/sl.so" "$src/modules/sipmsgops/sipmsgops.so"; do
    if [ ! -e "$f" ]; then
        echo "SKIPPED: $f is not built in the OpenSIPS tree"
        exit 77
    fi
done
out=$(/usr/bin/python3 "$repo/opensips_module/bench/opensips_cdb_bench.py" \
    --opensips "$src/opensips" --mpath "$src/modules/" \
    --module opensips_module/cachedb_perf.so --bench-module opensips_module/cdbbench.so \
    --rounds 1 --ops 2000 --sizes 1000 --workers 1 --mixes 95 --orders spread 2>&1) || {
    echo "$out"
    echo "FAIL: the admin guide's benchmark command did not run"
    exit 1
}
echo "$out"
# One row of figures: 1000 keys, spread, three backends' ns and two ratios.
echo "$out" | grep -Eq '^ +1000 spread +95 +1 \| +[0-9.]+ +[0-9.]+ +[0-9.]+ \| +[0-9.]+x +[0-9.]+x$' || {
    echo "FAIL: no row of figures in the output"
    exit 1
}
if echo "$out" | grep -q "OpenSIPS logged errors"; then
    echo "FAIL: OpenSIPS logged errors during the run"
    exit 1
fi
echo "PASS: the admin guide's benchmark command"
