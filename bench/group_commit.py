"""Journal `always` against redis-server `appendfsync always`, side by side
(docs/benchmarks.md, "group commit"). One run starts both servers with their
data on the real disk (a temporary directory under --dir, /var/tmp by
default: never a tmpfs, whose fdatasync costs nothing) and runs, for each
client count, redis-benchmark against one server then the other, alternated
for --rounds rounds; it prints the median SET/s of each and, the figure,
the median of the per-round ratios pcached / redis with their spread
(min, max), and the load average before and after, as one JSON object. A
round that measured nothing (no SET line, a rate of 0) fails the run.

  pcached:      journal=default=always, a persisted collection (db_mode 1),
                no periodic or bound-triggered snapshot (they would fork a
                save in the middle of a round)
  redis-server: --appendonly yes --appendfsync always --save "" and no AOF
                rewrite (auto-aof-rewrite-percentage 0), for the same reason
  client:       redis-benchmark -t set -c C -d 200 -n N -P 1 -r 100000

  PCACHED=build/src/server/pcached /usr/bin/python3 bench/group_commit.py \
      [--rounds 5] [--clients 50,1] [--workers 2] [--dir /var/tmp]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "server"))
from pcached_harness import Server, free_port  # noqa: E402

REQUESTS = {50: 40000, 1: 3000}  # per round: a few seconds each at the slowest


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("redis-server did not start on port %d" % port)


def bench(port, clients, n):
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set", "-c",
           str(clients), "-d", "200", "-n", str(n), "-P", "1", "-r", "100000", "--csv"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("redis-benchmark failed: " + p.stderr)
    for line in p.stdout.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if f and f[0] == "SET":
            rate = float(f[1])
        if rate <= 0:
            raise RuntimeError("redis-benchmark measured no SET: " + p.stdout)
        return rate
    raise RuntimeError("no SET line in: " + p.stdout)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", default="50,1")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", default="/var/tmp", help="parent of the data directories")
    ap.add_argument("--requests", type=int, default=0, help="per round (0: by client count)")
    a = ap.parse_args()
    clients = [int(x) for x in a.clients.split(",")]
    load0 = loadavg()
    top = tempfile.mkdtemp(prefix="pcache-gc-bench-", dir=a.dir)
    pdir, rdir = os.path.join(top, "pcached"), os.path.join(top, "redis")
    os.mkdir(pdir)
    os.mkdir(rdir)
    s = Server(workdir=pdir, db_url=os.path.join(pdir, "store"), db_mode=1,
               persist_collections="default", journal="default=always", snapshot_period_s=0,
               journal_rewrite_percent=0, workers=a.workers, mem_mb=512)
    rport = free_port()
    rlog = open(os.path.join(rdir, "redis.log"), "wb")
    redis_proc = None
    try:
        s.start()
        redis_proc = subprocess.Popen(
            ["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--dir", rdir,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--auto-aof-rewrite-percentage", "0"], stdout=rlog, stderr=rlog)
        wait_port(rport)
        rates = {c: {"pcached": [], "redis": []} for c in clients}
        for rnd in range(a.rounds):
            for c in clients:
                n = a.requests or REQUESTS.get(c, 20000)
                # alternate which goes first, so a drift of the machine
                # does not always favour the same server
                order = [("pcached", s.port), ("redis", rport)]
                if rnd % 2 == 1:
                    order.reverse()
                for name, port in order:
                    rates[c][name].append(bench(port, c, n))
                print("round %d c=%d: pcached %.0f redis %.0f" % (
                    rnd + 1, c, rates[c]["pcached"][-1], rates[c]["redis"][-1]),
                    file=sys.stderr)
        out = {"bench": "group_commit", "workers": a.workers, "rounds": a.rounds,
               "data_dir": top, "loadavg_start": load0, "loadavg_end": loadavg()}
        for c in clients:
            pm = statistics.median(rates[c]["pcached"])
            rm = statistics.median(rates[c]["redis"])
            per = [x / y for x, y in zip(rates[c]["pcached"], rates[c]["redis"])]
            out["c%d" % c] = {"pcached_set_per_s": rates[c]["pcached"],
                              "redis_set_per_s": rates[c]["redis"],
                              "pcached_median": pm, "redis_median": rm,
                              "ratio_per_round": [round(x, 3) for x in per],
                              "ratio_pcached_vs_redis": round(statistics.median(per), 3),
                              "ratio_min": round(min(per), 3), "ratio_max": round(max(per), 3)}
        print(json.dumps(out))
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=30)
        s.cleanup()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
