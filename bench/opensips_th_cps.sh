#!/bin/sh
# The highest topology-hiding CPS each cache backend holds for 60 s with no
# failed call (opensips_module/README.md, "Consumers"): OpenSIPS with
# topology_hiding's th_state_url (pull request 4114) pointed at perf://,
# cachedb_local (2^16 buckets, and its default 2^9), a private redis-server,
# and - given ORIG_TREE, an OpenSIPS holding the original cachedb_perf and
# th_state_url - the original; sipp calls (1 s hold, session timers, so
# every state lives in the cache) through it. Bisects each backend's rate,
# the backends' steps interleaved, each step on a fresh OpenSIPS; prints a
# JSON line per step and writes the summary to bench/results/.
#   bench/opensips_th_cps.sh OPENSIPS_TREE MODULE.so [ORIG_TREE] [BACKENDS]
# e.g. bench/opensips_th_cps.sh /opt/osips/pr4114 build/opensips_module/cachedb_perf.so
set -eu
if [ $# -lt 2 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,12s/^# \{0,1\}//p' "$0"
    [ $# -ge 1 ] && { [ "$1" = --help ] || [ "$1" = -h ]; } && exit 0
    exit 2
fi
tree=$1; module=$(realpath "$2"); orig=${3:-}; backends=${4:-}
here=$(dirname "$0")
if [ -z "$backends" ]; then
    backends=perf,local,localdef,redis
    [ -n "$orig" ] && backends=$backends,orig
fi
out="$here/results/$(date -u +%Y-%m-%dT%H%M)-opensips-th-cps.json"
exec /usr/bin/python3 "$here/../tests/opensips/opensips_consumers.py" --src "$tree" \
    --module "$module" ${orig:+--orig-src "$orig"} --only th --cps-search \
    --backends "$backends" --allocator F_MALLOC --hold-seconds "${HOLD_SECONDS:-60}" \
    --cps-start "${CPS_START:-600}" --cps-max "${CPS_MAX:-1600}" --cps-step "${CPS_STEP:-100}" \
    --recv-timeout-ms 8000 --fr-timeout 5 --verbose --out "$out"
