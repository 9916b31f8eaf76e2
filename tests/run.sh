#!/bin/sh
# The project's test command (README "Test"): installs missing Debian
# packages, builds the whole tree twice - optimised and with ASan+UBSan -
# and runs the full ctest suite on both. PCACHE_SOAK_SECONDS lengthens the
# soak (default 30 s per build). PCACHE_OPENSIPS_SRC=<a built OpenSIPS 4.x
# tree> (and optionally PCACHE_OPENSIPS_PREFIX=<its install prefix>) builds
# the cachedb_perf module into the optimised tree and runs its end-to-end
# test against that OpenSIPS; without it that test reports SKIPPED.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/.ci/deps.sh"
# The transaction test through Node.js clients (issue 33: ioredis and
# node-redis, as applications use them) needs them from the npm registry,
# installed outside the repository; without npm it says SKIPPED.
node_dir=${PCACHE_NODE_CACHE:-/var/cache/pcache-tests/node}
if [ -z "${PCACHE_NODE_MODULES:-}" ] && command -v npm >/dev/null 2>&1; then
    if ! grep -qs '"version": "6.1.0"' "$node_dir/node_modules/ioredis/package.json" ||
        ! grep -qs '"version": "4.7.1"' "$node_dir/node_modules/redis/package.json"; then
        mkdir -p "$node_dir"
        (cd "$node_dir" && npm install --no-audit --no-fund --silent ioredis@6.1.0 redis@4.7.1) ||
            echo "npm install of ioredis and redis failed: server_test_txn_node_clients will be SKIPPED"
    fi
    [ -d "$node_dir/node_modules/ioredis" ] && export PCACHE_NODE_MODULES="$node_dir/node_modules"
fi
jobs=$(nproc)
for variant in release asan; do
    dir="$root/build-test-$variant"
    if [ "$variant" = asan ]; then
        cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DPCACHE_SANITIZE=ON >/dev/null
    else
        osips=""
        if [ -n "${PCACHE_OPENSIPS_SRC:-}" ]; then
            osips="-DOPENSIPS_SRC=$PCACHE_OPENSIPS_SRC"
        fi
        cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release $osips >/dev/null
    fi
    cmake --build "$dir" -j "$jobs"
    echo "== ctest ($variant) =="
    (cd "$dir" && ctest --output-on-failure --timeout 600)
done
