"""The RESP2 GET/SET path of two pcached builds side by side, with
redis-server as the anchor, in the same run (docs/benchmarks.md, "RESP path
against a base build"): a change to the request path (per-command counters,
reply writers) must not slow it. Each server runs one worker (redis-server:
its one thread) pinned to core 0, redis-benchmark pinned to core 1; rounds
alternate between the three servers, and each figure is the median over the
rounds of a per-round ratio. Prints one JSON object.

  PCACHED=build/src/server/pcached PCACHED_BASE=build-before/src/server/pcached \\
      /usr/bin/python3 bench/resp_path_ratio.py [--rounds 5] [--requests 300000]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "server"))
from pcached_harness import free_port  # noqa: E402


def wait_ping(port):
    for _ in range(200):
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.05)
    raise RuntimeError("server on %d did not answer" % port)


def start(argv, pin):
    port = free_port()
    argv = [a.replace("PORT", str(port)) for a in argv]
    pre = ["taskset", "-c", "0"] if pin else []
    p = subprocess.Popen(pre + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    wait_ping(port)
    return p, port


def bench(port, pipeline, n, pin):
    pre = ["taskset", "-c", "1"] if pin else []
    out = subprocess.run(pre + ["redis-benchmark", "-p", str(port), "-c", "50", "-d", "200",
                                "-r", "100000", "-t", "set,get", "-P", str(pipeline), "-n",
                                str(n), "--csv"], capture_output=True, text=True,
                         timeout=600).stdout
    rps = {}
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if len(f) >= 2 and f[0] in ("SET", "GET"):
            rps[f[0]] = float(f[1])
    if len(rps) != 2:
        raise RuntimeError("redis-benchmark printed no rates:\n" + out)
    return rps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=300000)
    a = ap.parse_args()
    new = os.environ.get("PCACHED", "build/src/server/pcached")
    base = os.environ.get("PCACHED_BASE")
    if not base or not os.path.exists(base) or shutil.which("redis-server") is None:
        print("SKIPPED: needs PCACHED_BASE (a base build of pcached) and redis-server")
        return 77
    pin = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    tmp = tempfile.TemporaryDirectory(prefix="resp-path-")
    procs = {}
    try:
        for name, exe in (("after", new), ("before", base)):
            procs[name] = start([exe, "--port=PORT", "--workers=1", "--mem_mb=512",
                                 "--bind=127.0.0.1"], pin)
        procs["redis"] = start(["redis-server", "--port", "PORT", "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--dir", tmp.name], pin)
        rows = []
        for r in range(a.rounds):
            row = {}
            for p in (1, 16):
                for name in ("before", "after", "redis"):
                    res = bench(procs[name][1], p, a.requests, pin)
                    for op, v in res.items():
                        row["%s_%s_p%d" % (name, op.lower(), p)] = v
            rows.append(row)
            print("round %d: %s" % (r + 1, json.dumps(row)), file=sys.stderr)
        out = {"rounds": a.rounds, "requests": a.requests, "pinned": pin}
        for op in ("set", "get"):
            for p in (1, 16):
                k = "%s_p%d" % (op, p)
                ratios = [x["after_" + k] / x["before_" + k] for x in rows]
                out["after_over_before_" + k] = round(statistics.median(ratios), 3)
                out["after_over_before_spread_" + k] = [round(min(ratios), 3),
                                                        round(max(ratios), 3)]
                out["after_over_redis_" + k] = round(statistics.median(
                    x["after_" + k] / x["redis_" + k] for x in rows), 3)
                out["before_over_redis_" + k] = round(statistics.median(
                    x["before_" + k] / x["redis_" + k] for x in rows), 3)
                out["after_rps_" + k] = round(statistics.median(x["after_" + k] for x in rows))
        print(json.dumps(out, indent=1))
    finally:
        for p, _ in procs.values():
            try:
                os.killpg(p.pid, 15)
                p.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, 9)
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
