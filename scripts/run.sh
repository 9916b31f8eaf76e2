#!/bin/sh
# The project's run command (README "Run"): installs missing Debian packages,
# builds an optimised tree and starts pcached in the foreground: RESP on
# 127.0.0.1:6380, the LMDB store under ./pcached-data (loaded at start,
# saved at Ctrl-C / SIGTERM), JSON-RPC on the unix socket
# ./pcached-data/pcached.sock. The default collection is journaled
# (everysec: an acknowledged write is on disk within about a second) and
# snapshotted every 5 minutes. Extra arguments are pcached options, e.g.
# scripts/run.sh --port=7000 --workers=4 (see docs/pcached.md).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/.ci/deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target pcached pcachectl
data="${PCACHED_DATA:-$root/pcached-data}"
mkdir -p "$data"
exec "$root/build/src/server/pcached" --db_url="$data/store" --db_mode=2 \
    --persist_collections=default --journal=default=everysec --snapshot_period_s=300 \
    --unix_socket="$data/pcached.sock" "$@"
