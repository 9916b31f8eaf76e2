#!/usr/bin/python3
"""cachedb_perf side by side with the original module, cachedb_local and
cachedb_redis inside one OpenSIPS build (docs/benchmarks.md, "Side by side in
OpenSIPS"; the admin guide's benchmark section).

The original cachedb_perf (OpenSIPS pull request 4118) answers perf:// too,
so it runs in a second OpenSIPS instance of the same binary: instance A loads
this module, cachedb_local (default 512 buckets and "tuned" 2^16) and
cachedb_redis (against a private redis-server); instance B loads the
original. Both load the benchmark module cdbbench, which drives a backend
through the core's cachedb_funcs vtable in C: 15-byte keys, 200-byte values,
a get paying the backend's pkg copy and pkg_free (api "get"), or, where the
tree and the backend offer it, get_buf into the caller's buffer (api "buf").

The matrix: --sizes resident keys; keys walked in order and picked at random
(spread); 95% get / 5% set and 100% get; 1 and 2 SIP workers running the loop
at once; the pkg heap "fresh" (instances just started), "warm" (instances
that first carried --warm-calls sipp calls through tm and dialog; F_MALLOC
frees and joins all a call allocated, so this heap is back to 2-3
fragments) and "holes" (each process allocated --shape-blocks blocks of
16-2015 bytes at start and freed every second one: free fragments of every
small size class pinned between live blocks, the heap of a process that
keeps long-lived allocations; cdbbench's shape_heap). A cell records the
pkg fragment count of each instance's workers. Every round runs
every backend once, in a rotating order, and the loop alone (url "none", per
instance), whose time is subtracted; a cell's figure is the median over
--rounds rounds of the per-round ratio other / ours, with the lowest and
highest round. The load average is recorded with every cell.

Exits non-zero when no cell was measured. Writes every round to --json
(default bench/results/<UTC time>-opensips-side-by-side.json).

usage: side_by_side.py --markdown RECORD.json [KEYS]   (a record's tables)
       side_by_side.py --opensips-src TREE --module OURS.so --original ORIG.so
       --bench-module cdbbench.so [--quick] [--rounds 5] [--ops 200000]
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

CFG = r'''
log_level = 2
stderror_enabled = yes
syslog_enabled = no
udp_workers = @WORKERS@
socket = udp:127.0.0.1:@PORT@
mpath = "@MPATH@"
loadmodule "proto_udp.so"
loadmodule "sl.so"
loadmodule "tm.so"
loadmodule "rr.so"
loadmodule "dialog.so"
loadmodule "sipmsgops.so"
@MODULES@
loadmodule "@BENCH@"
modparam("cdbbench", "shape_heap", @SHAPE@)

route {
    if ($hdr(X-Op) == null) {
        # sipp's warm-up calls: stateful, with a dialog, to the sipp UAS
        if (is_method("INVITE"))
            create_dialog();
        $du = "sip:127.0.0.1:@UAS@";
        if (!t_relay())
            sl_reply_error();
        exit;
    }
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
    } else if ($hdr(X-Op) == "runbuf") {
        cdbbench_run_buf("$var(url)", $var(ops), $var(seed), $var(pct), $var(spread),
                         $var(keys), $var(ns));
    } else {
        cdbbench_run("$var(url)", $var(ops), $var(seed), $var(pct), $var(spread), $var(keys),
                     $var(ns));
    }
    append_to_reply("X-Res: $var(ns)\r\n");
    sl_send_reply(200, "OK");
    exit;
}
'''

MODS_A = '''loadmodule "cachedb_local.so"
modparam("cachedb_local", "cache_collections", "default; tuned=16")
loadmodule "cachedb_redis.so"
loadmodule "@OURS@"
modparam("cachedb_perf", "cache_collections", "b=16")
modparam("cachedb_perf", "cache_mem_mb", 1024)'''
MODS_B = '''loadmodule "@ORIG@"
modparam("cachedb_perf", "cache_collections", "b=16")'''

# name, instance, url, api ("get" or "buf")
BACKENDS = [("ours", "A", "perf:///b", "get"), ("ours_buf", "A", "perf:///b", "buf"),
            ("orig", "B", "perf:///b", "get"), ("orig_buf", "B", "perf:///b", "buf"),
            ("local_tuned", "A", "local:///tuned", "get"), ("local_default", "A", "local://", "get"),
            ("redis", "A", "@REDIS@", "get")]


def free_port(kind=socket.SOCK_DGRAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def sip(port, op, url, ops=0, seed=1, get_pct=95, spread=1, keys=0, timeout=1800):
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


def timed(port, op, url, ops, workers, get_pct, spread, keys):
    """Mean wall and CPU ns/op of `workers` concurrent loops (one per SIP
    worker: a worker is busy for its whole loop, so the second request lands
    on another)."""
    out = [None] * workers
    errs = []

    def one(i):
        # a loop is seconds at most: a reply not back in 180 s was lost (UDP
        # on a machine at load 20 lost one), and a loop is safe to run again
        for attempt in range(3):
            try:
                out[i] = sip(port, op, url, ops, seed=1 + 7919 * i, get_pct=get_pct,
                             spread=spread, keys=keys, timeout=180)
                return
            except socket.timeout as e:
                if attempt == 2:
                    errs.append(e)
            except Exception as e:  # noqa: BLE001 - re-raised below
                errs.append(e)
                return
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
            raise RuntimeError("%s %s: too few hits %s: the keys are not resident" % (op, url, hits))
    wall = sum(float(o.split()[0]) for o in out) / workers
    cpu = sum(float(o.split("cpu=")[1].split()[0]) for o in out) / workers
    frags = [int(o.split("frags=")[1]) for o in out if "frags=" in o]
    return wall, cpu, frags


class Instance:
    """One OpenSIPS process tree on a private port, killed by its group."""

    def __init__(self, name, a, work, modules, uas_port, workers, shape=0):
        self.name, self.port = name, free_port()
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        cfg = (CFG.replace("@MODULES@", modules).replace("@PORT@", str(self.port))
               .replace("@MPATH@", os.path.join(a.opensips_src, "modules"))
               .replace("@BENCH@", a.bench_module).replace("@UAS@", str(uas_port))
               .replace("@WORKERS@", str(workers)).replace("@SHAPE@", str(shape)))
        with open(os.path.join(self.dir, "o.cfg"), "w") as f:
            f.write(cfg)
        self.log = os.path.join(self.dir, "o.log")
        self.p = subprocess.Popen(
            [os.path.join(a.opensips_src, "opensips"), "-F", "-f", os.path.join(self.dir, "o.cfg"),
             "-w", self.dir, "-m", str(a.shm_mb), "-M", str(a.pkg_mb), "-a", a.alloc],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 60
        while True:  # up when it answers a run of the loop alone
            if self.p.poll() is not None:
                raise RuntimeError("%s exited:\n%s" % (name, self.tail()))
            try:
                sip(self.port, "run", "none", 10, keys=1, timeout=1)
                break
            except (OSError, RuntimeError):
                if time.time() > deadline:
                    raise RuntimeError("%s did not answer:\n%s" % (name, self.tail()))

    def tail(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-3000:]

    def errors(self):
        with open(self.log, errors="replace") as f:
            return [ln for ln in f if "ERROR" in ln or "CRITICAL" in ln]

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


def start_redis(a, work):
    port = free_port(socket.SOCK_STREAM)
    p = subprocess.Popen([a.redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", work],
                         stdout=open(os.path.join(work, "redis.log"), "w"),
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            if p.poll() is not None or time.time() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.1)


def redis_fill(port, n):
    """Keys 0 .. n-1 as cdbbench_fill writes them (cachedb_redis stores the
    key as given), pipelined: a million round trips through the module
    take minutes on a loaded machine, and the fill is not what is timed."""
    s = socket.create_connection(("127.0.0.1", port))
    val = b"v" * 200
    for lo in range(0, n, 10000):
        buf = b"".join(b"*3\r\n$3\r\nSET\r\n$15\r\nthid-%010d\r\n$200\r\n%s\r\n" % (i, val)
                       for i in range(lo, min(n, lo + 10000)))
        s.sendall(buf)
        want, got = min(n, lo + 10000) - lo, b""
        while got.count(b"\r\n") < want:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("redis closed the connection during the fill")
            got += chunk
        if b"-" in got:
            raise RuntimeError("redis refused a SET: " + got[:200].decode(errors="replace"))
    s.close()


def uas_scenario(a, work):
    """sipp's own uas scenario without its 180 Ringing: the proxy's two UDP
    workers can forward the 180 after the 200 that followed it, and sipp's
    uac aborts a call on a provisional reply during its pause (one warm-up
    in three failed so)."""
    path = os.path.join(work, "uas-no-180.xml")
    # sipp -sd prints the scenario and exits 99; the text is what counts
    xml = subprocess.run([a.sipp, "-sd", "uas"], stdout=subprocess.PIPE,
                         timeout=30).stdout.decode()
    patched, n = re.subn(r"<send>(?:(?!</send>).)*SIP/2\.0 180 Ringing.*?</send>", "", xml,
                         flags=re.S)
    if n != 1:
        raise RuntimeError("sipp -sd uas: no single 180 Ringing to leave out")
    with open(path, "w") as f:
        f.write(patched)
    return path


def sipp_warm(a, inst, uas_port, calls):
    """`calls` INVITE/200/ACK/BYE calls through the instance's tm and dialog;
    every call must complete (sipp exits 0 only when none failed)."""
    cmd = [a.sipp, "-sn", "uac", "127.0.0.1:%d" % inst.port, "-i", "127.0.0.1",
           "-p", str(free_port()), "-m", str(calls), "-r", str(a.warm_rate), "-l", "200",
           "-d", "20", "-nostdin", "-timeout", "300s", "-timeout_error", "-trace_err",
           "-error_file", os.path.join(inst.dir, "sipp.err")]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=inst.dir,
                       timeout=600)
    if r.returncode != 0:
        try:  # the first errors say why; the instance's folder goes with it
            with open(os.path.join(inst.dir, "sipp.err"), errors="replace") as f:
                first = f.read(3000)
        except OSError:
            first = ""
        raise RuntimeError("sipp warm-up through %s failed (rc %d): %s\nsipp.err begins:\n%s"
                           % (inst.name, r.returncode, r.stderr.decode(errors="replace")[-500:],
                              first))


def ops_for(name, url, n, ops):
    """Fewer operations where one costs far more (the figure is per
    operation all the same): a network round trip to redis, and
    cachedb_local's default 512 buckets walking chains of n/512 entries."""
    if name == "redis":
        return max(2000, ops // 40)
    if url == "local://" and n > 512 * 16:
        return max(min(ops, 20000), ops * 512 * 16 // n)
    return ops


def offered(insts, backends):
    """The backends whose api the tree and the module offer (get_buf)."""
    out = []
    for b in backends:
        name, inst, url, api = b
        if api == "buf" and sip(insts[inst].port, "runbuf", url, 10, keys=1) == "nobuf":
            print("%s: get_buf not offered, skipped" % name)
            continue
        out.append(b)
    return out


def sched_ns(pid):
    """CPU time a process (its main thread) has run, in ns."""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def run_cell(insts, backends, a, cell, rnd):
    """One round of one cell: the loop alone on each instance, then every
    backend, in an order rotated by the round. ns/op with the loop's own
    time subtracted: the worker's CPU time (on this loaded machine a loop's
    wall time is mostly time spent descheduled); for redis the worker's CPU
    time plus redis-server's own over the loop (the worker sleeps on the
    round trip). The wall times of all go to the record too."""
    n, order, mix, w = cell["keys"], cell["order"], cell["get_pct"], cell["workers"]
    sp = 1 if order == "spread" else 0
    base = {i: timed(inst.port, "run", "none", a.ops, w, mix, sp, n) for i, inst in insts.items()}
    cell.setdefault("pkg_frags", []).append({i: b[2] for i, b in base.items()})
    res, wall = {}, {}
    k = rnd % len(backends)
    for name, inst, url, api in backends[k:] + backends[:k]:
        op = "runbuf" if api == "buf" else "run"
        ops = ops_for(name, url, n, a.ops)
        r0 = sched_ns(a.redis_pid) if name == "redis" else 0
        ns = timed(insts[inst].port, op, url, ops, w, mix, sp, n)
        server = (sched_ns(a.redis_pid) - r0) / (ops * w) if name == "redis" else 0.0
        wall[name] = max(ns[0] - base[inst][0], 0.1)
        res[name] = max(ns[1] - base[inst][1] + server, 0.1)
    return res, base, wall


RATIOS = [("orig", "ours"), ("orig_buf", "ours_buf"), ("orig_buf", "ours"),
          ("local_tuned", "ours"), ("local_default", "ours"), ("redis", "ours")]


def summarize(rounds):
    """Per-round ratios other/ours (>1: ours faster): median, low, high."""
    out = {}
    for other, ours in RATIOS:
        rs = [r[other] / r[ours] for r in rounds if other in r and ours in r]
        if rs:
            out["%s/%s" % (other, ours)] = [statistics.median(rs), min(rs), max(rs)]
    return out


def targets(cells):
    """The issue's targets, each "pass"/"MISS" with the figures it read."""
    def med(c, key):
        return c["ratios"].get(key, [None])[0]
    orig = [(c, med(c, k)) for c in cells for k in ("orig/ours", "orig_buf/ours_buf")
            if med(c, k) is not None]
    t = []
    worst = min((r for _, r in orig), default=None)
    t.append(("every cell >= 1.0x the original (same api)", worst, worst is not None and worst >= 1.0))
    allr = [r for _, r in orig]
    m = statistics.median(allr) if allr else None
    t.append(("matrix median >= 1.2x the original", m, m is not None and m >= 1.2))
    for label, keys, w, key, goal in [("1k keys, 1 worker >= 1.1x local tuned", 1000, 1, "local_tuned/ours", 1.1),
                                      ("50k keys >= 1.5x local tuned", 50000, None, "local_tuned/ours", 1.5),
                                      ("50k keys >= 5x local default", 50000, None, "local_default/ours", 5.0)]:
        rs = [med(c, key) for c in cells if c["keys"] == keys and (w is None or c["workers"] == w)
              and med(c, key) is not None]
        lo = min(rs) if rs else None
        t.append((label, lo, lo is not None and lo >= goal))
    return [{"target": a, "worst_or_median": v, "pass": ok} for a, v, ok in t]


def tree_info(src):
    info = {}
    try:
        info["commit"] = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()
        with open(os.path.join(src, "Makefile.conf")) as f:
            info["defs"] = [ln.split()[1] for ln in f if ln.startswith("DEFS+=")]
    except OSError:
        pass
    return info


COLS = ["ours", "orig", "ours_buf", "orig_buf", "local_tuned", "local_default", "redis"]
RCOLS = ["orig/ours", "orig_buf/ours_buf", "orig_buf/ours", "local_tuned/ours", "local_default/ours", "redis/ours"]


def print_row(c):
    ns = " ".join("%8.1f" % c["ns_per_op"][k] if k in c["ns_per_op"] else "%8s" % "-" for k in COLS)
    rs = " ".join("%5.2fx(%4.2f-%4.2f)" % tuple(c["ratios"][k]) if k in c["ratios"] else "%17s" % "-"
                  for k in RCOLS)
    print("%5s %7d %6s %3d %d | %s | %s | %.1f" % (c["heap"], c["keys"], c["order"], c["get_pct"],
                                                   c["workers"], ns, rs, c["load"][0]), flush=True)


def run_heap(a, work, heap, cells_out, saved):
    """Start both instances (and redis), warm them with sipp when heap is
    "warm", then fill each size and run its cells."""
    rp, rport = start_redis(a, work)
    a.redis_pid = rp.pid
    uas = free_port()
    uas_p = subprocess.Popen([a.sipp, "-sf", uas_scenario(a, work), "-i", "127.0.0.1", "-p",
                              str(uas), "-nostdin"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
                             start_new_session=True)
    insts = {}
    try:
        ours = MODS_A.replace("@OURS@", a.module)
        shape = a.shape_blocks if heap == "holes" else 0
        insts["A"] = Instance("A-" + heap, a, work, ours, uas, max(a.workers), shape)
        insts["B"] = Instance("B-" + heap, a, work, MODS_B.replace("@ORIG@", a.original), uas,
                              max(a.workers), shape)
        if heap == "warm":
            for inst in insts.values():
                sipp_warm(a, inst, uas, a.warm_calls)
        redis_url = "redis://127.0.0.1:%d/" % rport
        backends = offered(insts, [(n, i, u.replace("@REDIS@", redis_url), api)
                                   for n, i, u, api in BACKENDS if n in a.backends])
        for n in a.sizes:
            # cachedb_local's 512 buckets hold chains of n/512: a million keys
            # take it most of an hour to fill here (and ~200x ours per get)
            sized = [b for b in backends
                     if not (b[0] == "local_default" and n > a.default_max_keys)]
            for name, inst, url, api in sized:
                if name == "redis":
                    redis_fill(rport, n)
                elif api == "get" and sip(insts[inst].port, "fill", url, n) != "filled":
                    raise RuntimeError("fill of %s failed" % name)
            # both perf:// modules grow toward their load factor in a timer
            time.sleep(a.settle)
            for order in a.orders:
                for mix in a.mixes:
                    for w in a.workers:
                        c = {"heap": heap, "keys": n, "order": order, "get_pct": mix, "workers": w,
                             "load": loadavg()}
                        rounds, bases, walls = [], [], []
                        for r in range(a.rounds):
                            res, base, wall = run_cell(insts, sized, a, c, r)
                            rounds.append(res)
                            bases.append(base)
                            walls.append(wall)
                        c["rounds"], c["loop_ns"], c["wall_rounds"] = rounds, bases, walls
                        c["ns_per_op"] = {k: statistics.median(r[k] for r in rounds)
                                          for k in rounds[0]}
                        c["ratios"] = summarize(rounds)
                        cells_out.append(c)
                        print_row(c)
                        saved()
        for inst in insts.values():
            errs = inst.errors()
            if errs:
                print("%s logged errors:\n%s" % (inst.name, "".join(errs[:10])))
    finally:
        for inst in insts.values():
            inst.stop()
        for p in (uas_p, rp):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def markdown(path, keys=None):
    """The tables of docs/benchmarks.md and the admin guide from a recorded
    run: per heap state, one row per cell, median ratio other/ours (low-high
    over the rounds), and our CPU ns/op; with keys, only the cells of that
    many keys (and no target lines: they judge the whole run)."""
    with open(path) as f:
        d = json.load(f)
    if keys is not None:
        d["cells"] = [c for c in d["cells"] if c["keys"] == keys]
        d["targets"] = []
    cols = [("orig/ours", "original get"), ("orig_buf/ours_buf", "original get_buf"),
            ("local_tuned/ours", "local tuned"), ("local_default/ours", "local default"),
            ("redis/ours", "redis")]
    for heap in dict.fromkeys(c["heap"] for c in d["cells"]):
        print("\nheap %s:\n" % heap)
        print("| keys | order | get % | workers | ours ns (get / get_buf) | " +
              " | ".join(h for _, h in cols) + " | load |")
        print("|" + " --- |" * (6 + len(cols)))
        for c in (c for c in d["cells"] if c["heap"] == heap):
            ns = c["ns_per_op"]
            r = ["%.2fx (%.2f-%.2f)" % tuple(c["ratios"][k]) if k in c["ratios"] else "-"
                 for k, _ in cols]
            print("| {:,} | {} | {} | {} | {:.0f} / {} | {} | {:.1f} |".format(
                c["keys"], c["order"], c["get_pct"], c["workers"], ns["ours"],
                "%.0f" % ns["ours_buf"] if "ours_buf" in ns else "-", " | ".join(r), c["load"][0]))
    print()
    for t in d["targets"]:
        v = t["worst_or_median"]
        print("- %s %s: %s" % ("pass" if t["pass"] else "**MISS**", t["target"],
                                "-" if v is None else "%.2fx" % v))
    return 0


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opensips-src", required=True, help="a built OpenSIPS tree (pull request 4118)")
    ap.add_argument("--module", required=True, help="this project's cachedb_perf.so")
    ap.add_argument("--original", required=True, help="the original cachedb_perf.so, same tree")
    ap.add_argument("--bench-module", required=True, help="cdbbench.so, same tree")
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--sipp", default=shutil.which("sipp") or "sipp")
    ap.add_argument("--quick", action="store_true", help="a smoke test: a few cells, 3 rounds")
    ap.add_argument("--ops", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1000,50000,1000000")
    ap.add_argument("--settle", type=float, default=3,
                    help="seconds between a size's fill and its first loop (tables grow meanwhile)")
    ap.add_argument("--orders", default="order,spread")
    ap.add_argument("--mixes", default="95,100", help="percentages of get")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--heaps", default="fresh,warm,holes")
    ap.add_argument("--shape-blocks", type=int, default=4000,
                    help='heap "holes": pkg blocks each process allocates, half freed')
    ap.add_argument("--backends", default=",".join(b[0] for b in BACKENDS))
    ap.add_argument("--warm-calls", type=int, default=3000)
    ap.add_argument("--default-max-keys", type=int, default=100000,
                    help="cachedb_local default (512 buckets) only up to this many keys")
    ap.add_argument("--warm-rate", type=int, default=300, help="sipp calls per second")
    ap.add_argument("--alloc", default="F_MALLOC", help="the pkg/shm allocator (opensips -a)")
    ap.add_argument("--shm-mb", type=int, default=3072)
    ap.add_argument("--pkg-mb", type=int, default=16)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.orders, a.mixes, a.workers = "1000,50000", "spread", "95", "1"
        a.rounds, a.ops, a.warm_calls = min(a.rounds, 3), min(a.ops, 50000), min(a.warm_calls, 300)
    a.sizes = [int(x) for x in a.sizes.split(",")]
    a.workers = [int(x) for x in a.workers.split(",")]
    a.mixes = [int(x) for x in a.mixes.split(",")]
    a.orders, a.heaps, a.backends = a.orders.split(","), a.heaps.split(","), a.backends.split(",")
    for p in ("module", "original", "bench_module"):
        setattr(a, p, os.path.abspath(getattr(a, p)))
    if not a.json:
        a.json = os.path.join(REPO, "bench", "results", time.strftime(
            "%Y-%m-%dT%H%M-opensips-side-by-side.json", time.gmtime()))
    return a


def main():
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--markdown":
        return markdown(sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else None)
    a = parse()
    work = tempfile.mkdtemp(prefix="pcache-sbs-")
    cells, load0 = [], loadavg()
    print("side by side in OpenSIPS %s: 15 B keys, 200 B values, %d ops per loop (redis fewer), "
          "allocator %s, median of %d interleaved rounds of other/ours (low-high), the loop alone "
          "subtracted; CPU ns/op (redis: the worker's plus redis-server's); load average %s" % (a.opensips_src, a.ops, a.alloc, a.rounds, load0))
    print("%5s %7s %6s %3s %s | %s | %s | load" % ("heap", "keys", "order", "get", "w", " ".join(
        "%8s" % k[:8] for k in COLS), " ".join("%17s" % k[:17] for k in RCOLS)))
    tree = tree_info(a.opensips_src)
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    meta = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
            "time_utc": time.strftime("%H:%M", time.gmtime()), "commit": head or None,
            "build": "OpenSIPS %s at %s, DEFS %s; the modules built against it" % (
                a.opensips_src, tree.get("commit", "?")[:10], " ".join(tree.get("defs", []))),
            "machine": "%d CPUs, load average %s at the start (other jobs running)" % (
                os.cpu_count(), " ".join("%.2f" % x for x in load0)),
            "command": " ".join(sys.argv), "tree": tree, "ops": a.ops,
            "rounds": a.rounds, "alloc": a.alloc, "warm_calls": a.warm_calls,
            "shape_blocks": a.shape_blocks, "nproc": os.cpu_count(), "load_before": load0}
    try:
        for heap in a.heaps:
            run_heap(a, work, heap, cells, lambda: save(a.json, meta, cells, False))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not cells:
        print("nothing was measured", file=sys.stderr)
        return 1
    for t in save(a.json, meta, cells, True):
        v = t["worst_or_median"]
        print("%-4s %s: %s" % ("pass" if t["pass"] else "MISS", t["target"],
                               "-" if v is None else "%.2fx" % v))
    print("written %s" % a.json)
    return 0


def save(path, meta, cells, complete):
    """The record so far, rewritten after every cell: a run cut short still
    leaves the cells it measured ("complete": false)."""
    tg = targets(cells)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(dict(meta, complete=complete, load_after=loadavg(), targets=tg, cells=cells), f,
                  indent=1)
    os.replace(path + ".tmp", path)
    return tg


if __name__ == "__main__":
    sys.exit(main())
