#!/bin/sh
# CPU per topology-hidden call, per cache backend (opensips_module/README.md
# §15.1): the OpenSIPS processes' user + system time (and redis-server's for
# cachedb_redis) over RATE CPS for SECONDS with th_state_url on each backend,
# the backends interleaved in each of ROUNDS rounds, each run on a fresh
# OpenSIPS; medians and the per-round ratios to perf:// with their spread.
# Unlike the CPS ceiling (bench/opensips_th_cps.sh), the machine's load does
# not set this figure. Writes bench/results/<time>-opensips-th-cpu.json.
#   bench/opensips_th_cpu.sh OPENSIPS_TREE MODULE.so [ORIG_TREE] [BACKENDS]
set -eu
if [ $# -lt 2 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,9s/^# \{0,1\}//p' "$0"
    [ $# -ge 1 ] && { [ "$1" = --help ] || [ "$1" = -h ]; } && exit 0
    exit 2
fi
tree=$1; module=$(realpath "$2"); orig=${3:-}; backends=${4:-}
here=$(dirname "$0")
if [ -z "$backends" ]; then
    backends=perf,local,localdef,redis
    [ -n "$orig" ] && backends=$backends,orig
fi
out="$here/results/$(date -u +%Y-%m-%dT%H%M)-opensips-th-cpu.json"
exec /usr/bin/python3 "$here/../tests/opensips/opensips_consumers.py" --src "$tree" \
    --module "$module" ${orig:+--orig-src "$orig"} --only th --cpu-rounds "${ROUNDS:-3}" \
    --backends "$backends" --allocator F_MALLOC --rate "${RATE:-300}" \
    --seconds "${SECONDS_PER_RUN:-20}" --out "$out"
