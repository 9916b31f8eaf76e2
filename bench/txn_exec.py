"""EXEC's cost: the same commands inside MULTI/EXEC and outside, in pcached
and in redis-server, side by side in one run (docs/benchmarks.md, "MULTI/EXEC").

A unit of work is SET k v + INCR c. Mode "plain" sends the two commands;
mode "exec" sends MULTI, SET k v, INCR c, EXEC. Each of --clients client
processes keeps --depth units in flight on one raw socket (pipelined) for
--seconds, and counts the units answered. Keys: "own" gives every client
its own counter and 1,000 keys of its own (no two EXECs touch one key);
"shared" makes every client INCR one counter (every EXEC conflicts with
every other one: pcached retries, redis-server serializes). For --rounds
rounds, each (server, keys) runs plain then exec back to back (so a ratio
compares runs a second apart on a shared machine), the server order
alternating; the figures are the medians of units/s, and the medians of the
per-round ratios exec / plain (per server) and pcached / redis (per mode),
printed as one JSON object with the load average before and after.

  PCACHED=build/src/server/pcached /usr/bin/python3 bench/txn_exec.py \
      [--rounds 5] [--clients 4] [--depth 32] [--seconds 1.5] [--workers 2]
"""
import argparse
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "server"))
from pcached_harness import Server, free_port  # noqa: E402


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def client(port, mode, keys, cid, depth, seconds, q):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ctr = b"ctr" if keys == "shared" else b"ctr:%d" % cid
    batch = []
    for i in range(depth):
        k = b"k:%d:%d" % (cid, i % 1000)
        if mode == "plain":
            batch.append(resp(b"SET", k, b"v" * 32) + resp(b"INCR", ctr))
        else:
            batch.append(resp(b"MULTI") + resp(b"SET", k, b"v" * 32) + resp(b"INCR", ctr) +
                         resp(b"EXEC"))
    batch = b"".join(batch)
    lines = depth * (2 if mode == "plain" else 6)
    units = errors = 0
    end = time.time() + seconds
    while time.time() < end:
        s.sendall(batch)
        got, buf = 0, b""
        while got < lines:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("server closed the connection")
            got += chunk.count(b"\r\n")
            errors += chunk.count(b"\r\n-")
            buf = chunk
        units += depth
    s.close()
    del buf
    q.put((units, errors))


def run(port, mode, keys, a):
    q = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=client,
                                     args=(port, mode, keys, c, a.depth, a.seconds, q))
             for c in range(a.clients)]
    t0 = time.time()
    for p in procs:
        p.start()
    res = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    dt = time.time() - t0
    units = sum(r[0] for r in res)
    errors = sum(r[1] for r in res)
    if errors:
        raise RuntimeError("%d error replies (%s %s)" % (errors, mode, keys))
    return units / dt


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--depth", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    s = Server(workers=a.workers, mem_mb=256)
    rdir = tempfile.mkdtemp(prefix="pcache-txn-bench-")
    rport = free_port()
    rp = None
    cases = [(m, k) for k in ("own", "shared") for m in ("plain", "exec")]
    rates = {"%s_%s_%s" % (srv, m, k): [] for srv in ("pcached", "redis") for m, k in cases}
    load0 = os.getloadavg()
    try:
        s.start()
        rp = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", rdir],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(rport)
        for rnd in range(a.rounds):
            order = [("pcached", s.port), ("redis", rport)]
            if rnd % 2:
                order.reverse()
            for k in ("own", "shared"):
                for name, port in order:
                    for m in ("plain", "exec"):
                        rates["%s_%s_%s" % (name, m, k)].append(round(run(port, m, k, a)))
            print("round %d: %s" % (rnd + 1, {x: v[-1] for x, v in rates.items()}),
                  file=sys.stderr)
        med = {x: statistics.median(v) for x, v in rates.items()}
        out = {"clients": a.clients, "depth": a.depth, "seconds": a.seconds,
               "workers": a.workers, "rounds": a.rounds, "loadavg_before": load0,
               "loadavg_after": os.getloadavg(), "units_per_s": rates,
               "median_units_per_s": med}

        def ratio(key, x, y):
            """The median of per-round ratios x / y, with key_min / key_max."""
            per = [p / q for p, q in zip(rates[x], rates[y]) if q > 0]
            out[key] = round(statistics.median(per), 3)
            out[key + "_min"], out[key + "_max"] = round(min(per), 3), round(max(per), 3)
        for k in ("own", "shared"):
            for srv in ("pcached", "redis"):
                ratio("%s_exec_vs_plain_%s" % (srv, k),
                      "%s_exec_%s" % (srv, k), "%s_plain_%s" % (srv, k))
            for m in ("plain", "exec"):
                ratio("pcached_vs_redis_%s_%s" % (m, k),
                      "pcached_%s_%s" % (m, k), "redis_%s_%s" % (m, k))
        print(json.dumps(out))
    finally:
        if rp is not None:
            rp.terminate()
            rp.wait(timeout=30)
        s.cleanup()


if __name__ == "__main__":
    main()
