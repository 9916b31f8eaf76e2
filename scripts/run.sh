#!/bin/sh
# The project's run command (README "Quick start"): installs the Debian
# packages the build needs when missing (.ci/deps.sh run: compilers and
# libraries only - no test framework, no database server), builds pcached,
# pcachectl and pcache-snapshot in an optimised tree of their own
# (build-run/, so the test trees' options are left alone), and starts
# pcached in the foreground: RESP on 127.0.0.1:6380, the LMDB store under
# ./pcached-data/store (loaded at start, saved at Ctrl-C / SIGTERM),
# JSON-RPC on the unix socket ./pcached-data/pcached.sock, GET /metrics and
# /health on http://127.0.0.1:9380 (a metrics-only listener: no JSON-RPC
# there). The default collection is journaled (everysec: an acknowledged
# write is on disk within about a second) and snapshotted every 5
# minutes. Extra arguments
# are pcached options, e.g. scripts/run.sh --port=7000 --workers=4
# (docs/pcached.md). PCACHED_DATA=DIR moves the data directory.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/.ci/deps.sh" run
build="$root/build-run"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPCACHE_TESTS=OFF \
    -DPCACHE_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target pcached pcachectl pcache-snapshot
data="${PCACHED_DATA:-$root/pcached-data}"
mkdir -p "$data"
echo "run: pcached, and beside it $build/src/tools/pcachectl -s $data/pcached.sock perf_stats default"
echo "     and $build/src/tools/snapshot/pcache-snapshot info $data/store"
echo "     monitoring: curl http://127.0.0.1:9380/metrics (and /health)"
exec "$build/src/server/pcached" --db_url="$data/store" --db_mode=2 \
    --persist_collections=default --journal=default=everysec --snapshot_period_s=300 \
    --unix_socket="$data/pcached.sock" --metrics_port=9380 "$@"
