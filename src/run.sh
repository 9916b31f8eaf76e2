#!/bin/sh
# The project's run command (README "Run"): installs missing Debian packages,
# builds an optimised tree and starts the main program. Until pcached lands
# that is the engine demo: workers forked around one shared cache.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/.ci/deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target pcache-demo
exec "$root/build/src/pcache-demo" "$@"
