"""GET/SET throughput over a unix socket against TCP loopback, pcached and
redis-server side by side in the same run (docs/benchmarks.md, transports).
One pcached (`unixsocket` set, its default 2 workers or --workers) and one
redis-server (port and unixsocket, no persistence) run at once;
redis-benchmark drives the four doors (pcached tcp, pcached unix, redis
tcp, redis unix) one after another, round after round, at each pipeline
depth. Figures are medians over the rounds of the rates and of the
per-round ratios (unix / tcp for each server, pcached / redis for each
door). Prints one JSON object.

  PCACHED=build/src/server/pcached /usr/bin/python3 bench/unix_socket_ratio.py \
      [--rounds 5] [--clients 50] [--requests 200000] [--pipelines 1,16] [--workers 2]
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

TESTS = ("SET", "GET")


def bench(door, a, pipeline):
    cmd = ["redis-benchmark"] + door + ["-t", "set,get", "-c", str(a.clients),
                                        "-P", str(pipeline), "-d", str(a.value),
                                        "-n", str(a.requests), "-r", str(a.keys), "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    out = out.replace("\r", "\n")
    rates = {}
    for t in TESTS:
        m = re.findall(r"%s: ([0-9.]+) requests per second" % t, out)
        if not m:
            raise RuntimeError("redis-benchmark printed no %s rate:\n%s" % (t, out))
        rates[t] = float(m[-1])
    return rates


def start_redis(workdir):
    port = free_port()
    sock = os.path.join(workdir, "redis.sock")
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--unixsocket", sock, "--unixsocketperm", "700", "--save", "",
                          "--appendonly", "no", "--dir", workdir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    return p, port, sock


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--value", type=int, default=64)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    if shutil.which("redis-server") is None or shutil.which("redis-benchmark") is None:
        print("SKIPPED: redis-server and redis-benchmark are needed")
        return 0
    pipelines = [int(x) for x in a.pipelines.split(",")]
    work = tempfile.mkdtemp(prefix="unix-bench-")
    s = Server(workers=a.workers, mem_mb=512, unixsocket=os.path.join(work, "pcached.sock"))
    rp = None
    try:
        s.start()
        rp, rport, rsock = start_redis(work)
        doors = {
            "pcached_tcp": ["-h", "127.0.0.1", "-p", str(s.port)],
            "pcached_unix": ["-s", s.opts["unixsocket"]],
            "redis_tcp": ["-h", "127.0.0.1", "-p", str(rport)],
            "redis_unix": ["-s", rsock],
        }
        runs = []
        for r in range(a.rounds):
            for p in pipelines:
                for name, door in doors.items():
                    rates = bench(door, a, p)
                    runs.append({"round": r, "pipeline": p, "door": name, **rates})
        summary = {}
        for p in pipelines:
            for t in TESTS:
                row = {}
                per = {d: [x[t] for x in runs if x["pipeline"] == p and x["door"] == d]
                       for d in doors}
                for d, v in per.items():
                    row[d] = statistics.median(v)

                def ratio(key, num, den):
                    """The median of per-round ratios, with key_min / key_max."""
                    xs = [x / y for x, y in zip(per[num], per[den])]
                    row[key] = round(statistics.median(xs), 3)
                    row[key + "_min"], row[key + "_max"] = round(min(xs), 3), round(max(xs), 3)
                ratio("pcached_unix_over_tcp", "pcached_unix", "pcached_tcp")
                ratio("redis_unix_over_tcp", "redis_unix", "redis_tcp")
                ratio("pcached_over_redis_tcp", "pcached_tcp", "redis_tcp")
                ratio("pcached_over_redis_unix", "pcached_unix", "redis_unix")
                summary["%s_P%d" % (t, p)] = row
        ver = subprocess.run(["redis-server", "--version"], capture_output=True,
                             text=True).stdout.strip()
        print(json.dumps({"bench": "unix_socket_ratio", "date": time.strftime("%Y-%m-%dT%H:%M"),
                          "params": vars(a), "redis": ver, "nproc": os.cpu_count(),
                          "summary": summary, "runs": runs}, indent=1))
    finally:
        s.cleanup()
        if rp is not None:
            rp.terminate()
            rp.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
