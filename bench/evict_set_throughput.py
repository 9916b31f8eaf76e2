#!/usr/bin/python3
"""SET throughput while evicting against SET throughput with free memory,
pcached and (the anchor) redis-server in the same run (issue 21,
"Benchmarks"; docs/benchmarks.md, "Eviction: SET throughput").

Two servers of each kind run side by side with the same policy: "evict",
whose maxmemory is small (--cap-mb), filled to its cap before each timed
run so that every SET of a new key evicts one; and "free", whose maxmemory
holds every key the run writes, emptied (FLUSHALL) before each timed run.
The timed run is the same for all: redis-benchmark -t set of --requests
random keys out of --keyspace (so nearly every SET inserts a new key),
--clients connections, pipeline --pipeline, --value bytes. A warm-up round
first (not counted: pcached's free server carves its chunks then, so the
counted rounds compare evicting with writing into free cells); then
--rounds rounds, each running the four in turn. Figures: the median rate of
each, and the median over rounds of evict / free per server. Checks: the
evicting run evicted at least 90 % of its SETs, the free one none.

  nice /usr/bin/python3 bench/evict_set_throughput.py --pcached build/src/server/pcached
      [--rounds 5] [--requests 500000] [--policy allkeys-lru] [--no-redis] [--json]
--json prints one JSON object on stdout, the table and progress on stderr.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evict_servers as es  # noqa: E402

REDIS_POLICIES = ("allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru",
                  "volatile-lfu", "volatile-random", "volatile-ttl")


def bench_set(port, a):
    cmd = [a.redis_benchmark, "-h", "127.0.0.1", "-p", str(port), "-t", "set", "-q",
           "-c", str(a.clients), "-P", str(a.pipeline), "-d", str(a.value),
           "-n", str(a.requests), "-r", str(a.keyspace)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    m = re.findall(r"SET: ([0-9.]+) requests per second", out.replace("\r", "\n"))
    if not m:
        raise RuntimeError("redis-benchmark printed no SET rate:\n" + out)
    return float(m[-1])


def prefill(conn, items, value):
    """SETs items keys of redis-benchmark's key shape ("key:" + 12 digits),
    outside its random range, until the cap evicts."""
    for s in range(0, items, 1000):
        e = min(items, s + 1000)
        conn.send(b"".join(es.encode(b"SET", b"key:9%011d" % i, value) for i in range(s, e)))
        for r in conn.replies(e - s):
            if isinstance(r, es.RespError):
                raise RuntimeError("prefill SET failed: %s" % r)


def evicted(conn):
    return int(conn.info("stats").get("evicted_keys", 0))


def one(srv, kind, a, value):
    """One timed run; returns (SET/s, keys evicted during it)."""
    conn = es.Resp(srv.port)
    try:
        conn.call("FLUSHALL")
        if kind == "evict":
            prefill(conn, a.prefill, value)
        before = evicted(conn)
        rate = bench_set(srv.port, a)
        ev = evicted(conn) - before
    finally:
        conn.close()
    return rate, ev


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pcached")
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--redis-benchmark", default="redis-benchmark")
    p.add_argument("--no-redis", action="store_true")
    p.add_argument("--policy", default="allkeys-lru")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=500000)
    p.add_argument("--keyspace", type=int, default=100000000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--pipeline", type=int, default=16)
    p.add_argument("--value", type=int, default=100)
    p.add_argument("--cap-mb", type=int, default=8, help="maxmemory of the evicting servers")
    p.add_argument("--free-mb", type=int, default=256, help="maxmemory of the free servers")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    # the evicting server gets twice what its cap can hold: full whatever the per-item cost
    a.prefill = (a.cap_mb << 20) // (a.value + 16) * 2
    a.redis_benchmark = shutil.which(a.redis_benchmark)
    if not a.redis_benchmark:
        print("SKIPPED: redis-benchmark not found (apt-get install redis-tools)")
        return 77
    value = b"x" * a.value
    tmp = tempfile.TemporaryDirectory(prefix="evict-setrate-")
    servers, skipped = {}, {}
    policy = {"pcached": a.policy,
              "redis": a.policy if a.policy in REDIS_POLICIES else "allkeys-lru"}
    try:
        if a.pcached:
            why = es.pcached_check(a.pcached, tmp.name,
                                   {"maxmemory": 1 << 20, "maxmemory_policy": a.policy})
            if why:
                skipped["pcached"] = str(why)
            else:
                for kind, mb in (("evict", a.cap_mb), ("free", a.free_mb)):
                    d = os.path.join(tmp.name, "pcached-" + kind)
                    os.mkdir(d)
                    servers["pcached", kind] = es.start_pcached(a.pcached, d, {
                        "maxmemory": mb << 20, "maxmemory_policy": a.policy,
                        "mem_mb": a.free_mb + 64})
        else:
            skipped["pcached"] = "no --pcached PATH"
        redis = None if a.no_redis else es.which_redis(a.redis_server)
        if redis:
            for kind, mb in (("evict", a.cap_mb), ("free", a.free_mb)):
                d = os.path.join(tmp.name, "redis-" + kind)
                os.mkdir(d)
                servers["redis", kind] = es.start_redis(redis, d, [
                    "--maxmemory", "%dmb" % mb, "--maxmemory-policy", policy["redis"]])
        elif not a.no_redis:
            skipped["redis"] = "redis-server not found"
        for k, why in skipped.items():
            print("SKIPPED %s: %s" % (k, why), file=sys.stderr)
        if not servers:
            return 77

        rates = {k: [] for k in servers}
        failures = []
        for rnd in range(a.rounds + 1):
            for k, srv in servers.items():
                rate, ev = one(srv, k[1], a, value)
                if k[1] == "evict" and ev < 0.9 * a.requests:
                    failures.append("%s %s round %d evicted %d of %d SETs" %
                                    (k[0], k[1], rnd, ev, a.requests))
                if k[1] == "free" and ev != 0:
                    failures.append("%s free round %d evicted %d" % (k[0], rnd, ev))
                print("round %d %-7s %-5s %10.0f SET/s  evicted %d" % (rnd, k[0], k[1], rate, ev),
                      file=sys.stderr)
                if rnd > 0:
                    rates[k].append(rate)
    finally:
        for srv in servers.values():
            srv.stop()
        tmp.cleanup()

    out = {"params": {k: v for k, v in vars(a).items() if k not in ("redis_benchmark",)},
           "policy": policy, "skipped": skipped, "failures": failures}
    for name in sorted({k[0] for k in rates}):
        ev, fr = rates.get((name, "evict")), rates.get((name, "free"))
        if not ev or not fr:
            continue
        out["%s_set_evict_per_s" % name] = statistics.median(ev)
        out["%s_set_free_per_s" % name] = statistics.median(fr)
        per_round = [e / f for e, f in zip(ev, fr)]
        out["%s_set_evict_over_free" % name] = statistics.median(per_round)
        out["%s_set_evict_over_free_min" % name] = min(per_round)
        out["%s_set_evict_over_free_max" % name] = max(per_round)
        out["%s_rounds" % name] = {"evict": ev, "free": fr}
    tab = sys.stderr if a.json else sys.stdout  # --json: stdout holds the JSON object only
    print("| server | SET/s evicting | SET/s free memory | evicting / free (median of rounds, "
          "lowest-highest) |", file=tab)
    print("| --- | --- | --- | --- |", file=tab)
    for name in ("pcached", "redis"):
        if "%s_set_evict_over_free" % name in out:
            print("| %s %s | %.0f | %.0f | %.3f (%.3f-%.3f) |" % (
                name, policy[name], out["%s_set_evict_per_s" % name],
                out["%s_set_free_per_s" % name], out["%s_set_evict_over_free" % name],
                out["%s_set_evict_over_free_min" % name],
                out["%s_set_evict_over_free_max" % name]), file=tab)
    for f in failures:
        print("FAIL: " + f, file=tab)
    if a.json:
        print(json.dumps(out, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
