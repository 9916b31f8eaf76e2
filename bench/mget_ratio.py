"""MGET of 10 keys at -P 16 (and GET/SET at -P 1 and -P 16) on two pcached
builds side by side in the same run (docs/benchmarks.md, "MGET snapshot
reads"): the snapshot check of multi-key reads (pcache.h, pc_snap_begin)
must keep MGET at >= 0.95x of the build without it. Both servers run
`workers` workers (default 2); rounds alternate the two builds (the order
swapped every other round) and each figure is the median over the rounds
of a per-round after/before ratio, with its min and max; beside the rate,
MGETs per CPU second of the server's processes (mget_per_cpu_s), which the
load of other jobs disturbs less. The keys are
written first (SET of key:__rand_int__ over 100,000 keys). The load average
before and after is recorded. Prints one JSON object; exits 1 when nothing
was measured.

  PCACHED=build/src/server/pcached PCACHED_BASE=build-before/src/server/pcached \\
      /usr/bin/python3 bench/mget_ratio.py [--rounds 7] [--requests 200000]
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

MGET = ["MGET"] + ["key:__rand_int__"] * 10


def wait_ping(port):
    for _ in range(400):
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.05)
    raise RuntimeError("server on %d did not answer" % port)


def cpu_ticks(pid):
    """utime + stime (clock ticks) of process pid and its children (the
    workers): less disturbed by other jobs' load than a rate."""
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


def bench(port, args, n, pipeline):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-d", "100", "-r",
                          "100000", "-P", str(pipeline), "-n", str(n), "--csv"] + args,
                         capture_output=True, text=True, timeout=600).stdout
    rps = {}
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if len(f) >= 2 and f[0] != "test":
            try:
                rps[f[0].split()[0]] = float(f[1])
            except ValueError:
                pass
    if not rps:
        raise RuntimeError("redis-benchmark printed no rates:\n" + out)
    return rps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--getset", action="store_true", help="also GET/SET at -P 1 and -P 16")
    a = ap.parse_args()
    new = os.environ.get("PCACHED", "build/src/server/pcached")
    base = os.environ.get("PCACHED_BASE")
    if not base or not os.path.exists(base) or shutil.which("redis-benchmark") is None:
        print("SKIPPED: needs PCACHED_BASE (a base build of pcached) and redis-benchmark")
        return 77
    procs = {}
    tmp = tempfile.TemporaryDirectory(prefix="mget-ratio-")
    try:
        for name, exe in (("after", new), ("before", base)):
            port = free_port()
            p = subprocess.Popen([os.path.abspath(exe), "--port=%d" % port, "--workers=%d" % a.workers,
                                  "--mem_mb=512", "--bind=127.0.0.1"], cwd=tmp.name,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
            procs[name] = (p, port)
            wait_ping(port)
            bench(port, ["-t", "set"], 300000, 16)
        rows = []
        load_before = loadavg()
        for r in range(a.rounds):
            row = {}
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for name in order:
                t0 = cpu_ticks(procs[name][0].pid)
                row["%s_mget_p16" % name] = bench(procs[name][1], MGET, a.requests, 16)["MGET"]
                # CPU per MGET, as a rate (MGETs per CPU second): higher is better
                ticks = max(1, cpu_ticks(procs[name][0].pid) - t0)
                row["%s_mget_per_cpu_s" % name] = a.requests * os.sysconf("SC_CLK_TCK") / ticks
                if a.getset:
                    for pl in (1, 16):
                        res = bench(procs[name][1], ["-t", "set,get"], a.requests, pl)
                        row["%s_set_p%d" % (name, pl)] = res["SET"]
                        row["%s_get_p%d" % (name, pl)] = res["GET"]
            rows.append(row)
            print("round %d: %s" % (r + 1, json.dumps(row)), file=sys.stderr)
        out = {"rounds": a.rounds, "requests": a.requests, "workers": a.workers,
               "loadavg_before": load_before, "loadavg_after": loadavg()}
        keys = sorted({k[len("after_"):] for k in rows[0] if k.startswith("after_")})
        for k in keys:
            xs = [x["after_" + k] / x["before_" + k] for x in rows]
            out["after_over_before_" + k] = round(statistics.median(xs), 3)
            out["after_over_before_%s_min" % k] = round(min(xs), 3)
            out["after_over_before_%s_max" % k] = round(max(xs), 3)
            out["after_rps_" + k] = round(statistics.median(x["after_" + k] for x in rows))
            out["before_rps_" + k] = round(statistics.median(x["before_" + k] for x in rows))
        print(json.dumps(out, indent=1))
        return 0 if keys else 1
    finally:
        for p, _ in procs.values():
            try:
                os.killpg(p.pid, 15)
                p.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, 9)
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
