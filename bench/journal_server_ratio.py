"""SET throughput of pcached with the journal on against the journal off, one
worker (docs/benchmarks.md, journal): two pcached side by side in the same
run, the same persisted collection, one with `journal = default=everysec`
(or --mode always), one without; redis-benchmark drives them alternately,
round after round, and the figure is the median of the per-round ratios
(journal / off). With --redis, redis-server runs as a third side with
`appendonly yes` and the matching `appendfsync`, for the anchor's own
ratio. Prints one JSON object.

  PCACHED=build/src/server/pcached /usr/bin/python3 bench/journal_server_ratio.py \
      [--rounds 7] [--clients 50] [--pipeline 16] [--requests 400000] [--mode everysec]
      [--bound-mb MB]
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
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "server"))
from pcached_harness import Server, free_port  # noqa: E402


def bench(port, a):
    cmd = ["redis-benchmark", "-p", str(port), "-t", "set", "-c", str(a.clients),
           "-P", str(a.pipeline), "-d", str(a.value), "-n", str(a.requests),
           "-r", str(a.keys), "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    m = re.findall(r"SET: ([0-9.]+) requests per second", out.replace("\r", "\n"))
    if not m:
        raise RuntimeError("redis-benchmark printed no rate:\n" + out)
    return float(m[-1])


def start_redis(mode, workdir):
    port = free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "yes", "--appendfsync", mode,
                          "--dir", workdir, "--daemonize", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                           text=True)
        if r.stdout.strip() == "PONG":
            return p, port
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("redis-server did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--value", type=int, default=200)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--mode", default="everysec", choices=["everysec", "always"])
    ap.add_argument("--redis", action="store_true", help="also redis-server, appendonly")
    ap.add_argument("--dir", default=None, help="where the stores go (a real disk)")
    ap.add_argument("--bound-mb", type=int, default=None,
                    help="journal_rewrite_min_mb (default: pcached's, 64): a large one keeps "
                         "the bound's saves out of the rounds, to time the journal alone")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="pcj-ratio-", dir=a.dir)
    sides = {}
    common = dict(db_mode=1, persist_collections="default", snapshot_period_s=0,
                  workers=a.workers, mem_mb=512)
    if a.bound_mb is not None:
        common["journal_rewrite_min_mb"] = a.bound_mb
    for name, extra in (("off", {}), (a.mode, {"journal": "default=" + a.mode})):
        d = os.path.join(base, name)
        os.makedirs(d)
        s = Server(workdir=d, db_url=os.path.join(d, "store"), **common, **extra)
        s.start()
        sides[name] = s
    rproc = None
    if a.redis:
        rd = os.path.join(base, "redis")
        os.makedirs(rd)
        rproc, rport = start_redis(a.mode, rd)
    rates = {k: [] for k in list(sides) + (["redis"] if a.redis else [])}
    try:
        for name, s in sides.items():  # warm: every key once
            bench(s.port, argparse.Namespace(**{**vars(a), "requests": a.keys}))
        for rnd in range(a.rounds):
            order = list(rates) if rnd % 2 == 0 else list(reversed(list(rates)))
            for name in order:
                port = rport if name == "redis" else sides[name].port
                rates[name].append(bench(port, a))
    finally:
        for s in sides.values():
            s.cleanup()
        if rproc is not None:
            rproc.kill()
            rproc.wait()
        shutil.rmtree(base, ignore_errors=True)
    ratios = [j / o for j, o in zip(rates[a.mode], rates["off"])]
    out = {
        "command": " ".join(sys.argv),
        "mode": a.mode,
        "workers": a.workers,
        "clients": a.clients,
        "pipeline": a.pipeline,
        "value": a.value,
        "rounds": a.rounds,
        "requests": a.requests,
        "journal_rewrite_min_mb": a.bound_mb if a.bound_mb is not None else "default (64)",
        "sets_per_s": rates,
        "median_sets_per_s": {k: statistics.median(v) for k, v in rates.items()},
        "ratio_journal_vs_off_per_round": [round(x, 4) for x in ratios],
        "ratio_journal_vs_off_median": round(statistics.median(ratios), 4),
        "ratio_journal_vs_off_median_min": round(min(ratios), 4),
        "ratio_journal_vs_off_median_max": round(max(ratios), 4),
    }
    if a.redis:
        rr = [j / r for j, r in zip(rates[a.mode], rates["redis"])]
        out["ratio_vs_redis_per_round"] = [round(x, 4) for x in rr]
        out["ratio_vs_redis_median"] = round(statistics.median(rr), 4)
        out["ratio_vs_redis_median_min"] = round(min(rr), 4)
        out["ratio_vs_redis_median_max"] = round(max(rr), 4)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
