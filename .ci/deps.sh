#!/bin/sh
# Installs the Debian packages the build and the test suite need, only when
# one is missing (idempotent; needs root for apt-get).
#   .ci/deps.sh       everything: the build, the tests, their database servers
#   .ci/deps.sh run   only what scripts/run.sh needs: the compilers and the
#                     libraries pcached, pcachectl and pcache-snapshot are
#                     built from (no test framework, no database server)
#   .ci/deps.sh package  what scripts/package.sh needs: the run list and file
#                     (cpack's dpkg-shlibdeps step); the man pages need only gzip
# tests/install/test_fresh_debian.sh runs the first two on a minimal Debian 12
# with nothing else installed: a library missing here fails it.
set -eu
RUN_PKGS="build-essential cmake pkg-config libxxhash-dev liblmdb-dev libzstd-dev libsystemd-dev"
RUN_PKGS="$RUN_PKGS unixodbc-dev libjansson-dev"
PACKAGE_PKGS="$RUN_PKGS file"
PKGS="build-essential cmake pkg-config libxxhash-dev libcmocka-dev liblmdb-dev libzstd-dev libsqlite3-dev libjansson-dev"
# pcached's systemd readiness (sd_notify), the man pages' test (man and
# lexgrog, in man-db), the packages' dependencies (dpkg-shlibdeps, in
# dpkg-dev, and file), the unit's checks (systemd-analyze, in systemd)
PKGS="$PKGS libsystemd-dev man-db dpkg-dev fakeroot systemd file"
# the fresh-machine test (tests/install/test_fresh_debian.sh): a minimal
# Debian 12 root to run the README's commands in
PKGS="$PKGS debootstrap"
# The ODBC exporter (odbc/): unixODBC, the three drivers its tests use, and
# the servers they start privately (tests/support/odbc_servers.sh; no service is
# enabled or started by these packages' use here).
PKGS="$PKGS unixodbc unixodbc-dev libsqliteodbc odbc-postgresql odbc-mariadb"
PKGS="$PKGS postgresql postgresql-client mariadb-server mariadb-client"
# pcached's tests: redis-cli and python3-redis as real clients; redis-server as
# the anchor of the comparison benchmarks and tests (started on a private port).
PKGS="$PKGS redis-tools redis-server python3-redis"
# memcached: an anchor of bench/mem_per_entry.py (started privately, one thread).
PKGS="$PKGS memcached"
# GET /metrics (tests/server/test_metrics.py): promtool (in Debian's
# prometheus package, ~95 MB with the server, which the tests never start)
# and prometheus_client's strict OpenMetrics parser.
PKGS="$PKGS prometheus python3-prometheus-client"
# bench/plot's charts (tests/tools/test_bench_plot.py).
PKGS="$PKGS python3-matplotlib"
# A CI run with fuzzing (.ci/run, PCACHE_CI_FUZZ_SECONDS): clang and its
# runtime libraries (libFuzzer, the sanitizers).
if [ "${PCACHE_CI_FUZZ_SECONDS:-0}" != 0 ]; then
    PKGS="$PKGS clang libclang-rt-14-dev"
fi
if [ "${1:-}" = run ]; then
    PKGS=$RUN_PKGS
elif [ "${1:-}" = package ]; then
    PKGS=$PACKAGE_PKGS
fi
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    echo "deps: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y $missing
fi
