"""The RESP2 GET/SET path of two pcached builds side by side, with
redis-server as the anchor, in the same run (docs/benchmarks.md, "RESP path
against a base build"): a change to the request path (per-command counters,
reply writers) must not slow it. Each server runs one worker (redis-server:
its one thread) pinned to core 0, redis-benchmark pinned to core 1; rounds
alternate between the three servers (the two builds' order swapped every
other round, so a drift of a shared machine does not always favour one),
and each figure is the median over the rounds of a per-round ratio, with
its min and max (`_min`, `_max`). Beside the rates it compares the CPU time
the two builds' processes spent per request (utime + stime of the server
and its children from /proc over each redis-benchmark run,
`cpu_after_over_before_*`), which another job's load disturbs less than a
rate. The load average before and after is recorded. Prints one JSON
object.

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


def cpu_ticks(pid):
    """utime + stime (clock ticks) of process pid and its children."""
    pids = [pid]
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    pids += [int(x) for x in kids.split()]
    total = 0
    for q in pids:
        try:
            with open("/proc/%d/stat" % q) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


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
        load_before = loadavg()
        for r in range(a.rounds):
            row = {}
            order = ("before", "after", "redis") if r % 2 == 0 else ("after", "before", "redis")
            for p in (1, 16):
                for name in order:
                    t0 = cpu_ticks(procs[name][0].pid)
                    res = bench(procs[name][1], p, a.requests, pin)
                    ticks = cpu_ticks(procs[name][0].pid) - t0
                    for op, v in res.items():
                        row["%s_%s_p%d" % (name, op.lower(), p)] = v
                    # set and get: 2 x requests
                    row["%s_cpu_us_p%d" % (name, p)] = (
                        ticks * 1e6 / os.sysconf("SC_CLK_TCK") / (2 * a.requests))
            rows.append(row)
            print("round %d: %s" % (r + 1, json.dumps(row)), file=sys.stderr)
        out = {"rounds": a.rounds, "requests": a.requests, "pinned": pin,
               "loadavg_before": load_before, "loadavg_after": loadavg()}

        def med(key, xs):
            xs = list(xs)
            out[key] = round(statistics.median(xs), 3)
            out[key + "_min"], out[key + "_max"] = round(min(xs), 3), round(max(xs), 3)
        for op in ("set", "get"):
            for p in (1, 16):
                k = "%s_p%d" % (op, p)
                med("after_over_before_" + k, (x["after_" + k] / x["before_" + k] for x in rows))
                med("after_over_redis_" + k, (x["after_" + k] / x["redis_" + k] for x in rows))
                med("before_over_redis_" + k, (x["before_" + k] / x["redis_" + k] for x in rows))
                out["after_rps_" + k] = round(statistics.median(x["after_" + k] for x in rows))
        for p in (1, 16):
            k = "cpu_us_p%d" % p
            med("cpu_after_over_before_p%d" % p,
                (x["after_" + k] / x["before_" + k] for x in rows if x["before_" + k] > 0))
            out["after_" + k] = round(statistics.median(x["after_" + k] for x in rows), 3)
            out["before_" + k] = round(statistics.median(x["before_" + k] for x in rows), 3)
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
