#!/bin/sh
# The project's test command (README "Test"): installs missing Debian
# packages, builds the whole tree twice - optimised and with ASan+UBSan -
# and runs the full ctest suite on both. PCACHE_SOAK_SECONDS lengthens the
# soak (default 30 s per build).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/.ci/deps.sh"
jobs=$(nproc)
for variant in release asan; do
    dir="$root/build-test-$variant"
    if [ "$variant" = asan ]; then
        cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DPCACHE_SANITIZE=ON >/dev/null
    else
        cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
    fi
    cmake --build "$dir" -j "$jobs"
    echo "== ctest ($variant) =="
    (cd "$dir" && ctest --output-on-failure --timeout 600)
done
