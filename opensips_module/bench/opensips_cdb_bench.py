#!/usr/bin/python3
"""cachedb_perf against cachedb_local inside a real OpenSIPS
(docs/benchmarks.md, "OpenSIPS process model").

One OpenSIPS on 127.0.0.1 loads both backends: perf:// (collection b, 2^16
buckets to start; it grows) and cachedb_local at its default (512 buckets)
and tuned (2^16) sizes, plus the benchmark module cdbbench (built next to
cachedb_perf), which drives a backend through the core's cachedb_funcs
vtable in C. Each SIP request makes a worker fill 50 000 resident keys or
run a loop of M operations over them: 16-byte keys, 200-byte values, 95% get
(with the pkg copy and free every cachedb caller pays) / 5% set, timed with
CLOCK_MONOTONIC around the loop. With --workers N, N requests run the loop at
the same time in N SIP workers (mean of their ns/op).

Prints ns/op per backend (median of the rounds) and the ratios. Not a timed
test.

usage: opensips_cdb_bench.py --opensips BIN --mpath DIR --module cachedb_perf.so
       --bench-module cdbbench.so [--ops 1000000] [--workers 1] [--rounds 3]
       [--alloc F_MALLOC]
"""
import argparse
import os
import random
import shutil
import signal
import socket
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
modparam("cachedb_perf", "cache_mem_mb", 128)
loadmodule "@BENCH@"

route {
    $var(url) = $hdr(X-Url);
    $var(ops) = $(hdr(X-Ops){s.int});
    $var(seed) = $(hdr(X-Seed){s.int});
    if ($hdr(X-Op) == "fill") {
        cdbbench_fill("$var(url)", 50000);
        $var(ns) = "filled";
    } else {
        cdbbench_run("$var(url)", $var(ops), $var(seed), $var(ns));
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


def sip(port, op, url, ops=0, seed=1, timeout=600):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(timeout)
    n = random.randrange(1 << 30)
    msg = ("OPTIONS sip:b@127.0.0.1:%d SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-%d\r\n"
           "Max-Forwards: 70\r\nFrom: <sip:t@127.0.0.1>;tag=%d\r\nTo: <sip:b@127.0.0.1>\r\n"
           "Call-ID: %d@b\r\nCSeq: 1 OPTIONS\r\nX-Op: %s\r\nX-Url: %s\r\nX-Ops: %d\r\n"
           "X-Seed: %d\r\nContent-Length: 0\r\n\r\n"
           % (port, s.getsockname()[1], n, n, n, op, url, ops, seed))
    s.sendto(msg.encode(), ("127.0.0.1", port))
    data = s.recv(4096).decode(errors="replace")
    s.close()
    for line in data.split("\r\n"):
        if line.startswith("X-Res:"):
            return line[6:].strip()
    raise RuntimeError("bad reply: " + data[:200])


def timed(port, url, ops, workers):
    """Mean ns/op of `workers` concurrent loops of `ops` operations."""
    out = [None] * workers
    def one(i):
        out[i] = sip(port, "run", url, ops, seed=1 + 7919 * i)
    th = [threading.Thread(target=one, args=(i,)) for i in range(workers)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    hits = [int(o.split("hits=")[1]) for o in out]
    if min(hits) < ops * 0.9:
        raise RuntimeError("%s: too few hits %s: the keys are not resident" % (url, hits))
    return sum(float(o.split()[0]) for o in out) / workers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opensips", required=True)
    ap.add_argument("--mpath", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--bench-module", required=True)
    ap.add_argument("--ops", type=int, default=1000000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--alloc", default="F_MALLOC")
    ap.add_argument("--only", default="", help="run one backend URL only (for profiling)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="pcache-osbench-")
    port = free_port()
    cfg = (CFG.replace("@PORT@", str(port)).replace("@MPATH@", a.mpath)
           .replace("@MODULE@", a.module).replace("@BENCH@", a.bench_module)
           .replace("@WORKERS@", str(max(2, a.workers))))
    with open(os.path.join(work, "b.cfg"), "w") as f:
        f.write(cfg)
    log = open(os.path.join(work, "b.log"), "w")
    p = subprocess.Popen([a.opensips, "-F", "-f", os.path.join(work, "b.cfg"), "-w", work,
                          "-m", "512", "-M", "16", "-a", a.alloc],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        time.sleep(2)
        if p.poll() is not None:
            raise RuntimeError("opensips exited:\n" + open(os.path.join(work, "b.log")).read()[-2000:])
        backends = [("perf:///b", "perf:// (65536 buckets, grows)"),
                    ("local:///tuned", "cachedb_local tuned (65536 buckets)"),
                    ("local://", "cachedb_local default (512 buckets)")]
        if a.only:
            backends = [b for b in backends if b[0] == a.only]
        for url, _ in backends:
            sip(port, "fill", url)
        time.sleep(3)  # perf:// grows toward its load factor in the timer
        res = {}
        for r in range(a.rounds):
            for url, _ in backends:
                res.setdefault(url, []).append(timed(port, url, a.ops, a.workers))
        med = {k: sorted(v)[len(v) // 2] for k, v in res.items()}
        perf = med.get("perf:///b", 1.0)
        print("cdbbench in OpenSIPS: 50000 resident, 16 B keys, 200 B values, 95%% get / 5%% set, "
              "%d ops x %d worker(s), allocator %s, median of %d rounds"
              % (a.ops, a.workers, a.alloc, a.rounds))
        for url, name in backends:
            print("  %-38s %7.0f ns/op  %5.2fx perf://   (rounds: %s)"
                  % (name, med[url], med[url] / perf, ", ".join("%.0f" % x for x in res[url])))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
