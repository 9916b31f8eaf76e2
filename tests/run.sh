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
