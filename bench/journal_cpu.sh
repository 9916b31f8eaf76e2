#!/bin/bash
# Where the CPU of journaled SETs goes (docs/benchmarks.md, "The journal in
# pcached"): starts one pcached (1 worker, the default collection persisted,
# journal MODE, no periodic snapshot, journal_rewrite_min_mb BOUND_MB), warms
# it with 100k SETs, then runs redis-benchmark -t set -P 16 -d 200 -c 50 -n N
# and prints the CPU seconds each of pcached's threads and the machine's
# kernel threads (kworker, jbd2, flush, ksoftirqd) spent during the run, from
# /proc/<pid>/task/*/stat.
#   bench/journal_cpu.sh PCACHED off|everysec N [BOUND_MB (default 100000)] [DIR (/var/tmp)]
set -eu
if [ $# -lt 3 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,9s/^# \{0,1\}//p' "$0"
    [ $# -ge 1 ] && { [ "$1" = --help ] || [ "$1" = -h ]; } && exit 0
    exit 2
fi
bin=$1; mode=$2; n=$3; bound=${4:-100000}; base=${5:-/var/tmp}
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
d=$(mktemp -d "$base/journal-cpu.XXXX")
j="journal = default=everysec"; [ "$mode" = off ] && j="journal ="
cat > "$d/p.conf" <<EOC
bind = 127.0.0.1
port = $port
workers = 1
db_url = lmdb://$d/store
db_mode = 2
persist_collections = default
$j
snapshot_period_s = 0
journal_rewrite_min_mb = $bound
http_bind =
EOC
"$bin" -c "$d/p.conf" > "$d/log" 2>&1 &
disown
trap 'pkill -KILL -f "$d/p.conf" 2>/dev/null; rm -rf "$d"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
sleep 1.5 # the maintenance process starts the drainer thread at its first tick
redis-benchmark -p "$port" -t set -n 100000 -P 16 -d 200 -r 100000 -q >/dev/null
snap() {
    for p in $(pgrep -f "$d/p.conf"); do
        for t in /proc/$p/task/*; do
            echo "pcached-$(basename "$t") $(awk '{print $14+$15}' "$t/stat")"
        done
    done
    k=0
    for t in /proc/[0-9]*/task/*; do
        case "$(cat "$t/comm" 2>/dev/null)" in
        kworker*|jbd2*|flush*|ksoftirq*)
            v=$(awk '{print $14+$15}' "$t/stat" 2>/dev/null); k=$((k + ${v:-0})) ;;
        esac
    done
    echo "kernel-threads $k"
}
snap | sort > "$d/s0"
redis-benchmark -p "$port" -t set -n "$n" -P 16 -d 200 -r 100000 -q -c 50 | tr '\r' '\n' | grep "requests per second" | tail -1
snap | sort > "$d/s1"
tick=$(getconf CLK_TCK)
join "$d/s0" "$d/s1" | awk -v tk="$tick" '{ s = ($3 - $2) / tk; if (s > 0) printf "%-18s %.2f s\n", $1, s }'
