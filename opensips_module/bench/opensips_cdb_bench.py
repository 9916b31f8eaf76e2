#!/usr/bin/python3
"""cachedb_perf against cachedb_local inside a real OpenSIPS
(docs/benchmarks.md, "Inside OpenSIPS"; the admin guide's performance section).

One OpenSIPS on 127.0.0.1 loads both backends: perf:// (collection b, 2^16
buckets to start; it grows by itself) and cachedb_local at its default (512
buckets) and tuned (2^16) sizes, plus the benchmark module cdbbench (built
next to cachedb_perf), which drives a backend through the core's
cachedb_funcs vtable in C. A SIP request makes a worker fill the backends or
run a loop of --ops operations over the resident keys: 15-byte keys,
200-byte values, a get paying the pkg copy and pkg_free every cachedb caller
pays. The matrix: --sizes resident keys (each size filled in turn, so a
store holds exactly that many), keys walked in order and picked at random
(spread), 95% get / 5% set and 100% get, 1 and 2 SIP workers running the
loop at once (the mean of their ns/op). Every round runs the backends one
after the other (interleaved), plus the loop alone (url "none"), whose time
is subtracted; each figure is the median of --rounds rounds. cachedb_local's
512-bucket default runs fewer operations where its chains are long (the
figure is per operation all the same).

Prints a table of ns/op and the ratios cachedb_local / perf, and with --json
FILE writes every round. Not a timed test.

usage: opensips_cdb_bench.py --opensips BIN --mpath DIR --module cachedb_perf.so
       --bench-module cdbbench.so [--ops 500000] [--rounds 5]
       [--sizes 1000,50000,1000000] [--workers 1,2] [--json FILE]
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CFG = r'''
log_level = 2
stderror_enabled = yes
syslog_enabled = no
udp_workers = @WORKERS@
socket = udp:127.0.0.1:@PORT@
mpath = "@MPATH@"
loadmodule "proto_udp.so"
loadmodule "sl.so"
loadmodule "sipmsgops.so"
loadmodule "cachedb_local.so"
modparam("cachedb_local", "cache_collections", "default; tuned=16")
loadmodule "@MODULE@"
modparam("cachedb_perf", "cache_collections", "b=16")
modparam("cachedb_perf", "cache_mem_mb", 1024)
loadmodule "@BENCH@"

route {
    $var(url) = $hdr(X-Url);
    $var(ops) = $(hdr(X-Ops){s.int});
    $var(seed) = $(hdr(X-Seed){s.int});
    $var(pct) = $(hdr(X-Get){s.int});
    $var(spread) = $(hdr(X-Spread){s.int});
    $var(keys) = $(hdr(X-Keys){s.int});
    if ($hdr(X-Op) == "fill") {
        if (!cdbbench_fill("$var(url)", $var(ops))) {
            sl_send_reply(500, "fill failed");
            exit;
        }
        $var(ns) = "filled";
    } else {
        cdbbench_run("$var(url)", $var(ops), $var(seed), $var(pct), $var(spread), $var(keys),
                     $var(ns));
    }
    append_to_reply("X-Res: $var(ns)\r\n");
    sl_send_reply(200, "OK");
    exit;
}
'''


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def sip(port, op, url, ops=0, seed=1, get_pct=95, spread=1, keys=0, timeout=900):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(timeout)
    n = random.randrange(1 << 30)
    msg = ("OPTIONS sip:b@127.0.0.1:%d SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-%d\r\n"
           "Max-Forwards: 70\r\nFrom: <sip:t@127.0.0.1>;tag=%d\r\nTo: <sip:b@127.0.0.1>\r\n"
           "Call-ID: %d@b\r\nCSeq: 1 OPTIONS\r\nX-Op: %s\r\nX-Url: %s\r\nX-Ops: %d\r\n"
           "X-Seed: %d\r\nX-Get: %d\r\nX-Spread: %d\r\nX-Keys: %d\r\nContent-Length: 0\r\n\r\n"
           % (port, s.getsockname()[1], n, n, n, op, url, ops, seed, get_pct, spread, keys))
    s.sendto(msg.encode(), ("127.0.0.1", port))
    data = s.recv(4096).decode(errors="replace")
    s.close()
    for line in data.split("\r\n"):
        if line.startswith("X-Res:"):
            return line[6:].strip()
    raise RuntimeError("bad reply: " + data[:200])


def wait_ready(proc, port, log_path, limit_s=60):
    """Wait until a SIP worker answers (a "none" loop of 1 operation), or
    fail with the end of OpenSIPS's log if it exited or never answered."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            sip(port, "run", "none", 1, keys=1, timeout=1)
            return
        except (OSError, RuntimeError):
            time.sleep(0.2)
    with open(log_path) as f:
        tail = f.read()[-2000:]
    raise RuntimeError("opensips did not answer on port %d:\n%s" % (port, tail))


def timed(port, url, ops, workers, get_pct, spread, keys):
    """Mean ns/op of `workers` concurrent loops of `ops` operations over
    `keys` keys (sent with each run: the SIP worker that runs it need not be
    the one that filled)."""
    out = [None] * workers
    errs = []

    def one(i):
        try:
            out[i] = sip(port, "run", url, ops, seed=1 + 7919 * i, get_pct=get_pct,
                         spread=spread, keys=keys)
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)
    th = [threading.Thread(target=one, args=(i,)) for i in range(workers)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if errs:
        raise errs[0]
    if url != "none":
        hits = [int(o.split("hits=")[1].split()[0]) for o in out]
        if min(hits) < ops * get_pct / 100 * 0.9:
            raise RuntimeError("%s: too few hits %s: the keys are not resident" % (url, hits))
    return sum(float(o.split()[0]) for o in out) / workers


BACKENDS = [("perf:///b", "perf"), ("local:///tuned", "local tuned 2^16"),
            ("local://", "local default 512")]


def ops_for(url, n, ops):
    """cachedb_local's default walks chains of n/512 entries: fewer operations."""
    if url == "local://" and n > 512 * 16:
        return max(min(ops, 20000), ops * 512 * 16 // n)
    return ops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opensips", required=True)
    ap.add_argument("--mpath", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--bench-module", required=True)
    ap.add_argument("--ops", type=int, default=500000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1000,50000,1000000")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--mixes", default="95,100", help="percentages of get")
    ap.add_argument("--orders", default="spread,order")
    ap.add_argument("--alloc", default="F_MALLOC")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    # OpenSIPS prefixes mpath to every loadmodule path that does not start
    # with "/": a path relative to the caller's directory must be made whole.
    a.opensips, a.module, a.bench_module = (os.path.abspath(x) for x in
                                            (a.opensips, a.module, a.bench_module))
    a.mpath = os.path.abspath(a.mpath) + "/"
    sizes = [int(x) for x in a.sizes.split(",")]
    workers = [int(x) for x in a.workers.split(",")]
    mixes = [int(x) for x in a.mixes.split(",")]
    orders = a.orders.split(",")
    work = tempfile.mkdtemp(prefix="pcache-osbench-")
    port = free_port()
    cfg = (CFG.replace("@PORT@", str(port)).replace("@MPATH@", a.mpath)
           .replace("@MODULE@", a.module).replace("@BENCH@", a.bench_module)
           .replace("@WORKERS@", str(max(2, max(workers)))))
    with open(os.path.join(work, "b.cfg"), "w") as f:
        f.write(cfg)
    log = open(os.path.join(work, "b.log"), "w")
    p = subprocess.Popen([a.opensips, "-F", "-f", os.path.join(work, "b.cfg"), "-w", work,
                          "-m", "4096", "-M", "16", "-a", a.alloc],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    results = []
    try:
        wait_ready(p, port, os.path.join(work, "b.log"))
        print("cdbbench in OpenSIPS: 15 B keys, 200 B values, %d ops per loop, allocator %s, "
              "median of %d interleaved rounds, the loop alone subtracted"
              % (a.ops, a.alloc, a.rounds))
        print("%8s %6s %4s %2s | %9s %9s %9s | %7s %7s" % (
            "keys", "order", "get%", "w", "perf ns", "tuned ns", "512 ns", "tuned/p", "512/p"))
        for n in sizes:
            for url, _ in BACKENDS:
                if sip(port, "fill", url, n) != "filled":
                    raise RuntimeError("fill of %s failed" % url)
            time.sleep(3)  # perf:// grows toward its load factor in the timer
            for order in orders:
                for mix in mixes:
                    for w in workers:
                        sp = 1 if order == "spread" else 0
                        raw = {}
                        for _ in range(a.rounds):
                            base = timed(port, "none", a.ops, w, mix, sp, n)
                            raw.setdefault("none", []).append(base)
                            for url, _ in BACKENDS:
                                ns = timed(port, url, ops_for(url, n, a.ops), w, mix, sp, n)
                                raw.setdefault(url, []).append(ns - base)
                        med = {k: statistics.median(v) for k, v in raw.items()}
                        row = {"keys": n, "order": order, "get_pct": mix, "workers": w,
                               "ns_per_op": med, "rounds": raw,
                               "ratio_tuned": med["local:///tuned"] / med["perf:///b"],
                               "ratio_default": med["local://"] / med["perf:///b"]}
                        results.append(row)
                        print("%8d %6s %4d %2d | %9.1f %9.1f %9.1f | %6.2fx %6.2fx" % (
                            n, order, mix, w, med["perf:///b"], med["local:///tuned"],
                            med["local://"], row["ratio_tuned"], row["ratio_default"]),
                            flush=True)
        errs = [ln for ln in open(os.path.join(work, "b.log"))
                if "ERROR" in ln or "CRITICAL" in ln]
        if errs:
            print("OpenSIPS logged errors:\n" + "".join(errs[:10]))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"command": " ".join(sys.argv), "ops": a.ops, "rounds": a.rounds,
                           "alloc": a.alloc, "results": results}, f, indent=1)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
