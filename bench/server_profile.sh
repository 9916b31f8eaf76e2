#!/bin/bash
# Where a server's time goes per request (docs/benchmarks.md, "server"):
# starts pcached (1 worker), pogocache (1 thread) and, with -r, redis-server
# pinned to CPU 0, fills each with 200k SETs, then for each and each of
# GET and SET runs redis-benchmark pinned to CPU 1 (50 clients, -P N,
# 200-byte values) while perf record samples the server's processes for
# 8 s; prints the server's CPU microseconds per request (its processes'
# user + system time over the requests the benchmark made), its system
# calls and context switches per request over the same requests (perf
# stat's syscall tracepoints: unlike strace, they leave the timing, and so
# the batching of epoll_wait, as it is), the split by object (kernel, the
# server, libc) and the top symbols.
# Needs perf, redis-benchmark, redis-cli.
#   bench/server_profile.sh [-P N (default 1)] [-t get,set (default get)]
#       [-r REDIS_SERVER] PCACHED POGOCACHE [PORT (default 25001; +1, +2)] [OUTDIR]
set -u
usage() { sed -n '2,15s/^# \{0,1\}//p' "$0"; }
pipe=1; tests=get; redis=
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    -P) pipe=$2; shift 2 ;;
    -t) tests=$2; shift 2 ;;
    -r) redis=$2; shift 2 ;;
    *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    usage
    exit 2
fi
pcached=$1; pogo=$2; port=${3:-25001}; out=${4:-$(mktemp -d /tmp/server-profile.XXXX)}
mkdir -p "$out"
taskset -c 0 "$pcached" --port=$port --workers=1 --mem_mb=1024 --db_url= --db_mode=0 \
    --persist_collections= --journal= --log_level=warn > "$out/pcached.log" 2>&1 &
pp=$!
taskset -c 0 "$pogo" -h 127.0.0.1 -p $((port + 1)) --threads 1 > "$out/pogocache.log" 2>&1 &
gp=$!
rp=
if [ -n "$redis" ]; then
    taskset -c 0 "$redis" --port $((port + 2)) --bind 127.0.0.1 --save "" --appendonly no \
        > "$out/redis.log" 2>&1 &
    rp=$!
fi
trap 'kill $pp $gp $rp 2>/dev/null; wait' EXIT

# user + system clock ticks of a comma-separated pid list (threads included)
ticks() {
    local t=0 p
    for p in ${1//,/ }; do
        [ -r /proc/$p/stat ] && t=$((t + $(awk '{print $14 + $15}' /proc/$p/stat)))
    done
    echo $t
}

servers="pcached pogocache"
[ -n "$rp" ] && servers="$servers redis"
for who in $servers; do
    case $who in
    pcached) p=$port ;;
    pogocache) p=$((port + 1)) ;;
    redis) p=$((port + 2)) ;;
    esac
    for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
    taskset -c 1 redis-benchmark -p $p -c 50 -d 200 -r 100000 -t set -n 200000 -P 16 -q >/dev/null
done
hz=$(getconf CLK_TCK)
scev=raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_write
scev=$scev,syscalls:sys_enter_epoll_wait,context-switches
for who in $servers; do
    case $who in
    pcached) p=$port; pid=$pp ;;
    pogocache) p=$((port + 1)); pid=$gp ;;
    redis) p=$((port + 2)); pid=$rp ;;
    esac
    pids=$(echo $pid $(ps -o pid= --ppid $pid) | tr ' ' ',')
    for t in ${tests//,/ }; do
        n=$((400000 * (pipe > 1 ? 8 : 1)))
        echo "== $who $t -P $pipe (load $(cut -d' ' -f1 /proc/loadavg))"
        perf record -F 999 -g -o "$out/$who-$t.data" -p "$pids" -- sleep 8 >/dev/null 2>&1 &
        perfp=$!
        perf stat -x, -e "$scev" -p "$pids" -o "$out/$who-$t.stat" >/dev/null 2>&1 &
        statp=$!
        sleep 0.5
        t0=$(ticks "$pids")
        taskset -c 1 redis-benchmark -p $p -c 50 -d 200 -r 100000 -t $t -n $n -P $pipe --csv \
            2>/dev/null
        t1=$(ticks "$pids")
        kill -INT $statp 2>/dev/null
        wait $statp $perfp
        awk -v d=$((t1 - t0)) -v hz="$hz" -v n=$n \
            'BEGIN { printf "server CPU: %.3f us per request (%d requests)\n", d / hz * 1e6 / n, n }'
        awk -F, -v n=$n '$1 ~ /^[0-9]+$/ { printf "  %s: %.3f per request\n", $3, $1 / n }' \
            "$out/$who-$t.stat" 2>/dev/null
        perf report -i "$out/$who-$t.data" --stdio --no-children --sort dso 2>/dev/null |
            grep -E "^ +[0-9]" | head -5
        perf report -i "$out/$who-$t.data" --stdio --no-children -g none --sort dso,sym \
            2>/dev/null | grep -E "^ +[0-9]" | head -15
    done
done
