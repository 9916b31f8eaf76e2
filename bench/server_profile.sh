#!/bin/bash
# Where a server's time goes per request (docs/benchmarks.md, "server"):
# starts pcached (1 worker) and pogocache (1 thread) pinned to CPU 0, fills
# each with 200k SETs, then for each runs redis-benchmark pinned to CPU 1
# (GET, 50 clients, -P 1, 200-byte values) while perf record samples the
# server's processes for 8 s, and prints the split by object (kernel, the
# server, libc) and the top symbols. Needs perf, redis-benchmark, redis-cli.
#   bench/server_profile.sh PCACHED POGOCACHE [PORT (default 25001; PORT+1 too)] [OUTDIR]
set -u
if [ $# -lt 2 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,9s/^# \{0,1\}//p' "$0"
    [ $# -ge 1 ] && { [ "$1" = --help ] || [ "$1" = -h ]; } && exit 0
    exit 2
fi
pcached=$1; pogo=$2; port=${3:-25001}; out=${4:-$(mktemp -d /tmp/server-profile.XXXX)}
mkdir -p "$out"
taskset -c 0 "$pcached" --port=$port --workers=1 --mem_mb=1024 --db_url= --db_mode=0 \
    --persist_collections= --journal= --log_level=warn > "$out/pcached.log" 2>&1 &
pp=$!
taskset -c 0 "$pogo" -h 127.0.0.1 -p $((port + 1)) --threads 1 > "$out/pogocache.log" 2>&1 &
gp=$!
trap 'kill $pp $gp 2>/dev/null; wait' EXIT
for p in $port $((port + 1)); do
    for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
    taskset -c 1 redis-benchmark -p $p -c 50 -d 200 -r 100000 -t set -n 200000 -P 16 -q >/dev/null
done
for who in pcached pogocache; do
    p=$port; pid=$pp
    [ $who = pogocache ] && { p=$((port + 1)); pid=$gp; }
    pids=$(echo $pid $(ps -o pid= --ppid $pid) | tr ' ' ',')
    echo "== $who (load $(cut -d' ' -f1 /proc/loadavg))"
    perf record -F 999 -g -o "$out/$who.data" -p "$pids" -- sleep 8 >/dev/null 2>&1 &
    rp=$!
    sleep 0.5
    taskset -c 1 redis-benchmark -p $p -c 50 -d 200 -r 100000 -t get -n 400000 -P 1 --csv 2>/dev/null
    wait $rp
    perf report -i "$out/$who.data" --stdio --no-children --sort dso 2>/dev/null | grep -E "^ +[0-9]" | head -5
    perf report -i "$out/$who.data" --stdio --no-children -g none --sort dso,sym 2>/dev/null |
        grep -E "^ +[0-9]" | head -15
done
