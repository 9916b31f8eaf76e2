#!/usr/bin/python3
"""Miss ratio at equal memory: pcached's eviction policies against
redis-server's allkeys-lru and allkeys-lfu and exact LRU computed offline,
on synthetic traces replayed by a cache-aside client (issue 21,
"Benchmarks"; docs/benchmarks.md, "Eviction: miss ratio at equal memory").

Traces (seeded, so every run and every system sees the same requests):
  zipf0.7, zipf0.9, zipf1.1  Zipf over --keys keys, ranks scrambled so the
                             hot keys spread over the hash space
  ohw                        a Zipf 0.9 core; --ohw-frac of the requests
                             are one-hit wonders (a fresh key each, never
                             requested again)
  loop                       a scan looping over --loop-frac of the key
                             space, larger than every cache size
Cache sizes are fractions of --keys, in items. Equal memory: each system
gets the maxmemory in bytes that holds that many items of the trace's key
and value sizes, calibrated per system (see calibrate_*), and the items it
held at the end (DBSIZE) are reported beside the miss ratio.

The client replays the trace in batches of --batch requests: the batch's
GETs pipelined, then a SET of every key that missed (in request order,
duplicates included), pipelined. The offline LRU applies the same batches
in the same order, so every system answers the same request stream.

  nice /usr/bin/python3 bench/evict_hitratio.py --pcached build/src/server/pcached
      [--quick] [--keys N] [--requests N] [--traces a,b] [--systems a,b] [--out FILE]
"""
import argparse
import collections
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evict_servers as es  # noqa: E402

TRACES = ("zipf0.7", "zipf0.9", "zipf1.1", "ohw", "loop")
OHW_TRACES = ("ohw",)
REDIS_POLICIES = ("allkeys-lru", "allkeys-lfu")
PC_POLICIES = ("allkeys-lru", "allkeys-s3fifo", "allkeys-random")
SYSTEMS = (("lru-exact", "s3fifo-offline") + tuple("redis:" + p for p in REDIS_POLICIES) +
           tuple("pcached:" + p for p in PC_POLICIES))
KEY_BYTES = 16  # b"k%015d": every key of every trace has this length
PC_CHUNK = 64 * 1024  # pcached carves record cells in chunks of this size
SAMPLES = 200  # DBSIZE reads per replay, for the resident items over its second half


def key(i):
    return b"k%015d" % i


def zipf_ranks(rng, n, keys, alpha):
    """n ranks in [0, keys) drawn with P(r) proportional to (r+1)^-alpha."""
    w = np.arange(1, keys + 1, dtype=np.float64) ** -alpha
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    r = np.searchsorted(cdf, rng.random(n), side="right")
    return np.minimum(r, keys - 1)


def gen_trace(name, a):
    """The key ids of trace name: deterministic in (a.seed, name, a.keys,
    a.requests, a.ohw_frac, a.loop_frac)."""
    rng = np.random.default_rng([a.seed, TRACES.index(name)])
    perm = rng.permutation(a.keys)  # rank -> key id: hot keys spread over the hash space
    n = a.requests
    if name.startswith("zipf"):
        return perm[zipf_ranks(rng, n, a.keys, float(name[4:]))]
    if name == "ohw":
        ids = perm[zipf_ranks(rng, n, a.keys, 0.9)]
        wonder = rng.random(n) < a.ohw_frac
        ids[wonder] = a.keys + np.arange(int(wonder.sum()))  # ids past the core: each used once
        return ids
    if name == "loop":
        span = max(1, int(round(a.keys * a.loop_frac)))
        return perm[np.arange(n) % span]
    raise ValueError(name)


def trace_stats(ids, a):
    u = np.unique(ids)
    return {"requests": int(len(ids)), "distinct_keys": int(len(u)),
            "compulsory_miss_ratio": len(u) / len(ids)}


# ---- the replays ----------------------------------------------------------

def replay_lru(ids, batch, cap):
    """Exact LRU of cap items, with the client's batching."""
    od = collections.OrderedDict()
    misses = 0
    ids = ids.tolist()
    for s in range(0, len(ids), batch):
        miss = []
        for k in ids[s:s + batch]:
            if k in od:
                od.move_to_end(k)
            else:
                miss.append(k)
        for k in miss:
            if k in od:
                od.move_to_end(k)  # a duplicate miss of this batch: an overwrite
            else:
                od[k] = None
                if len(od) > cap:
                    od.popitem(last=False)
        misses += len(miss)
    return {"misses": misses, "resident": len(od)}


class S3Fifo:
    """S3-FIFO as published (Yang et al., SOSP 2023): a small FIFO of a
    tenth of the items, a main FIFO with 2-bit frequencies (reinserted
    while > 0, decremented), a ghost FIFO of the main's size remembering
    keys the small queue evicted; a key leaving the small queue read more
    than once goes to main, and a key in the ghost is inserted into main.
    A reference for what the algorithm gives, next to pcached's
    implementation on its buckets' access bits."""

    def __init__(self, cap):
        self.cap = cap
        self.s_cap = max(1, cap // 10)
        self.small, self.main = collections.OrderedDict(), collections.OrderedDict()
        self.ghost = collections.OrderedDict()
        self.freq = {}

    def __contains__(self, k):
        return k in self.freq

    def __len__(self):
        return len(self.freq)

    def access(self, k):
        self.freq[k] = min(self.freq[k] + 1, 3)

    def insert(self, k):
        while len(self.freq) >= self.cap:
            self.evict()
        if k in self.ghost:
            del self.ghost[k]
            self.main[k] = None
        else:
            self.small[k] = None
        self.freq[k] = 0

    def evict(self):
        if len(self.small) >= self.s_cap or not self.main:
            while self.small:
                k, _ = self.small.popitem(last=False)
                if self.freq[k] > 1:
                    self.main[k] = None
                    if len(self.main) > self.cap - self.s_cap:
                        self.evict_main()
                        return
                else:
                    del self.freq[k]
                    self.ghost[k] = None
                    if len(self.ghost) > self.cap - self.s_cap:
                        self.ghost.popitem(last=False)
                    return
        self.evict_main()

    def evict_main(self):
        while self.main:
            k, _ = self.main.popitem(last=False)
            if self.freq[k] > 0:
                self.freq[k] -= 1
                self.main[k] = None
            else:
                del self.freq[k]
                return


def replay_s3fifo(ids, batch, cap):
    """The published S3-FIFO of cap items, with the client's batching."""
    c = S3Fifo(cap)
    misses = 0
    ids = ids.tolist()
    for s in range(0, len(ids), batch):
        miss = []
        for k in ids[s:s + batch]:
            if k in c:
                c.access(k)
            else:
                miss.append(k)
        for k in miss:
            if k in c:
                c.access(k)  # a duplicate miss of this batch: an overwrite, an access
            else:
                c.insert(k)
        misses += len(miss)
    return {"misses": misses, "resident": len(c)}


def replay_server(conn, ids, batch, value, samples=0):
    """Cache-aside against a server: GETs of a batch, then SETs of its
    misses. With samples > 0, DBSIZE is read about that many times, evenly
    over the replay (between batches), for the resident items it held."""
    get = b"*2\r\n$3\r\nGET\r\n$%d\r\n" % KEY_BYTES
    set_ = b"*3\r\n$3\r\nSET\r\n$%d\r\n" % KEY_BYTES
    tail = b"\r\n$%d\r\n%s\r\n" % (len(value), value)
    misses = set_errors = wrong = 0
    first_error = None
    ids = ids.tolist()
    nb = (len(ids) + batch - 1) // batch
    every = max(1, nb // samples) if samples else 0
    sampled = []
    for b, s in enumerate(range(0, len(ids), batch)):
        if every and b % every == every - 1:
            sampled.append(conn.call("DBSIZE"))
        ks = [key(i) for i in ids[s:s + batch]]
        conn.send(b"".join([get + k + b"\r\n" for k in ks]))
        miss = []
        for k, r in zip(ks, conn.replies(len(ks))):
            if r is None:
                miss.append(k)
            elif r != value:
                wrong += 1  # an error or another value: the cache is broken, not cold
        if miss:
            conn.send(b"".join([set_ + k + tail for k in miss]))
            for r in conn.replies(len(miss)):
                if isinstance(r, es.RespError):
                    set_errors += 1
                    first_error = first_error or str(r)
        misses += len(miss)
    r = {"misses": misses, "set_errors": set_errors, "wrong_replies": wrong,
         "first_error": first_error}
    if sampled:
        half = sampled[len(sampled) // 2:]  # the second half: the cache is full by then
        r.update({"resident_mean": sum(half) / len(half), "resident_min": min(half),
                  "resident_max": max(half)})
    return r


def fill(conn, n, value, batch, prefix=b"c"):
    """SETs n keys of the trace's shape (another prefix, same length),
    pipelined batch at a time as the replay does."""
    for s in range(0, n, batch):
        e = min(n, s + batch)
        conn.send(b"".join(es.encode(b"SET", prefix + b"%015d" % i, value) for i in range(s, e)))
        for r in conn.replies(e - s):
            if isinstance(r, es.RespError):
                raise RuntimeError("calibration SET failed: %s" % r)


# ---- calibration: the maxmemory in bytes that holds `items` items ---------

def calibrate_redis(conn, items, value, batch, ids):
    """redis-server counts all of used_memory against maxmemory: the
    baseline (the server, this client) plus per-item bytes (dictEntry, key
    sds, robj, value, and the dict's bucket array at this size).

    Step 1, as an operator would: with no maxmemory, insert `items` keys of
    the trace's shape into the empty server; per_item = used_memory growth /
    items; FLUSHALL; maxmemory = used_memory + items x per_item.
    Step 2: the client's query and reply buffers count too, and Redis 7
    resizes them with the traffic (a batch of hits fills the reply buffer
    with values, a batch of misses the query buffer with SETs): tens of KB,
    hundreds of items at 1 %. So maxmemory is searched (secant steps kept
    inside the bracket found so far, at most 8 probes) until a cache-aside
    replay of the trace's first 10 x items requests holds, over its second
    half, a mean DBSIZE within 1 % of items; the closest probe is kept.
    CONFIG RESETSTAT frees about 100 KB (its per-command and per-error
    tables), so it precedes every measurement and the replay. Then
    FLUSHALL: the replay starts empty."""
    conn.call("CONFIG", "RESETSTAT")
    base = int(conn.info("memory")["used_memory"])
    fill(conn, items, value, batch)
    per_item = (int(conn.info("memory")["used_memory"]) - base) / items
    conn.call("FLUSHALL", "SYNC")
    conn.call("CONFIG", "RESETSTAT")
    base2 = int(conn.info("memory")["used_memory"])
    first = mm = base2 + int(round(items * per_item))
    probe = ids[:min(len(ids), 10 * items)]
    lo, hi = None, None  # (maxmemory, resident) with resident below / above items
    tried = []
    for steps in range(1, 9):
        conn.call("CONFIG", "SET", "maxmemory", mm)
        conn.call("FLUSHALL", "SYNC")
        conn.call("CONFIG", "RESETSTAT")
        resident = replay_server(conn, probe, batch, value, samples=40).get("resident_mean", 0)
        tried.append((abs(resident - items), mm, resident))
        if os.environ.get("EVICT_DEBUG"):
            print("calibrate %d: maxmemory %d resident %.1f" % (items, mm, resident),
                  file=sys.stderr)
        if abs(resident - items) <= max(1, items / 100):
            break
        if resident < items:
            lo = (mm, resident)
        else:
            hi = (mm, resident)
        nxt = mm + int(round((items - resident) * per_item))
        if lo and hi:
            if hi[1] > lo[1]:  # secant through the bracket
                nxt = lo[0] + int((hi[0] - lo[0]) * (items - lo[1]) / (hi[1] - lo[1]))
            if not lo[0] < nxt < hi[0]:
                nxt = (lo[0] + hi[0]) // 2
            if hi[0] - lo[0] <= 8:
                break
        mm = nxt
    _, mm, resident = min(tried)
    conn.call("CONFIG", "SET", "maxmemory", mm)
    conn.call("FLUSHALL", "SYNC")
    conn.call("CONFIG", "RESETSTAT")
    return {"maxmemory": mm, "maxmemory_step1": first, "baseline": base2,
            "per_item": per_item, "calibration_probes": steps,
            "calibration_resident_mean": resident}


def calibrate_pcached(pcached, workdir, n, value, mem_mb):
    """pcached's maxmemory caps record cell bytes (its table is outside the
    cap): the cell bytes one item takes, from INFO memory's
    pcache_used_cell_bytes before and after n inserts into a pcached with
    no maxmemory."""
    with es.start_pcached(pcached, workdir, {"mem_mb": mem_mb}) as s:
        conn = es.Resp(s.port)
        before = conn.info("memory")
        fill(conn, n, value, 1000)
        after = conn.info("memory")
        conn.close()
    cell = (int(after["pcache_used_cell_bytes"]) - int(before["pcache_used_cell_bytes"])) / n
    data = (int(after["used_memory_dataset"]) - int(before["used_memory_dataset"])) / n
    return {"per_item_cell_bytes": cell, "per_item_dataset_bytes": data, "items": n}


def calibrate_pcached_chunks(a, policy, ids, items, value, workdir, cell):
    """The cap in whole 64 KiB chunks (the arena carves, and the cap
    counts, a chunk at a time) whose resident items come nearest `items`:
    the two chunk counts around items x cell bytes, each probed in a fresh
    pcached (a cap never returns a chunk carved) with the same replay of the
    trace's first 10 x items requests as redis-server's search; the nearer
    mean DBSIZE wins. The maintenance process evicts ahead of need to a
    low-water mark, so a cap holds a little less than its cells."""
    n0 = max(1, int(items * cell // PC_CHUNK))
    probe = ids[:min(len(ids), 10 * items)]
    tried = []
    for n in (n0, n0 + 1):
        keys = {"maxmemory": n * PC_CHUNK, "maxmemory_policy": policy,
                "mem_mb": a.pcached_mem_mb}
        with es.start_pcached(a.pcached, workdir, keys) as s:
            conn = es.Resp(s.port)
            res = replay_server(conn, probe, a.batch, value, samples=40).get("resident_mean", 0)
            conn.close()
        tried.append((abs(res - items), n * PC_CHUNK, res))
        if os.environ.get("EVICT_DEBUG"):
            print("calibrate pcached %d: %d chunks resident %.1f" % (items, n, res),
                  file=sys.stderr)
    _, mm, res = min(tried)
    return {"maxmemory": mm, "calibration_resident_mean": res,
            "calibration_tried": [[t[1], t[2]] for t in tried]}


# ---- one run ----------------------------------------------------------------

def run_redis(a, policy, ids, items, value, workdir):
    with es.start_redis(a.redis_server, workdir, ["--maxmemory-policy", policy]) as s:
        conn = es.Resp(s.port)
        cal = calibrate_redis(conn, items, value, a.batch, ids)
        t = time.time()
        r = replay_server(conn, ids, a.batch, value, samples=SAMPLES)
        r["seconds"] = time.time() - t
        r["resident"] = conn.call("DBSIZE")
        r["evicted_keys"] = int(conn.info("stats")["evicted_keys"])
        r["used_memory"] = int(conn.info("memory")["used_memory"])
        conn.close()
    r.update(cal)
    return r


def run_pcached(a, policy, ids, items, value, workdir, cal):
    chunks = calibrate_pcached_chunks(a, policy, ids, items, value, workdir,
                                      cal["per_item_cell_bytes"])
    mm = chunks["maxmemory"]
    keys = {"maxmemory": mm, "maxmemory_policy": policy, "mem_mb": a.pcached_mem_mb}
    with es.start_pcached(a.pcached, workdir, keys) as s:
        conn = es.Resp(s.port)
        t = time.time()
        r = replay_server(conn, ids, a.batch, value, samples=SAMPLES)
        r["seconds"] = time.time() - t
        r["resident"] = conn.call("DBSIZE")
        r["evicted_keys"] = int(conn.info("stats").get("evicted_keys", -1))
        m = conn.info("memory")
        r["used_cell_bytes"] = int(m["pcache_used_cell_bytes"])
        conn.close()
    r.update(chunks)
    r["per_item"] = cal["per_item_cell_bytes"]
    return r


# ---- the report -------------------------------------------------------------

def best_ours(cell):
    ours = [(v["miss_ratio"], s) for s, v in cell.items() if s.startswith("pcached:")]
    return min(ours) if ours else None


def verdicts(results, traces, sizes):
    """Per (trace, size): our best policy's miss ratio over redis
    allkeys-lru's, against the issue's target (<= 1.0, <= 0.9 on the
    one-hit-wonder traces)."""
    out = {}
    for t in traces:
        for sz in sizes:
            cell = results.get(t, {}).get(sz, {})
            b = best_ours(cell)
            ref = cell.get("redis:allkeys-lru")
            if b is None or ref is None or ref["miss_ratio"] == 0:
                continue
            target = 0.9 if t in OHW_TRACES else 1.0
            ratio = b[0] / ref["miss_ratio"]
            v = {"best": b[1], "ratio": ratio, "target": target, "pass": ratio <= target}
            if cell.get("lru-exact", {}).get("miss_ratio"):
                v["ratio_vs_exact_lru"] = b[0] / cell["lru-exact"]["miss_ratio"]
            out["%s/%s" % (t, sz)] = v
    return out


def table(w, results, traces, sizes, systems, fmt):
    w("| trace | size (items) | " + " | ".join(systems) + " |\n")
    w("|" + " --- |" * (len(systems) + 2) + "\n")
    for t in traces:
        for sz in sizes:
            cell = results.get(t, {}).get(sz, {})
            w("| %s | %s | %s |\n" % (t, sz, " | ".join(
                fmt(cell[s]) if s in cell else "-" for s in systems)))


def print_tables(results, traces, sizes, systems, verdict, batch):
    w = sys.stdout.write
    w("\nmiss ratio (misses / requests), cache-aside, batch of %d\n\n" % batch)
    w("| trace | size (items) | " + " | ".join(systems) +
      " | best ours / redis lru | target | verdict | best ours / exact LRU |\n")
    w("|" + " --- |" * (len(systems) + 6) + "\n")
    for t in traces:
        for sz in sizes:
            cell = results.get(t, {}).get(sz, {})
            row = ["%.4f" % cell[s]["miss_ratio"] if s in cell else "-" for s in systems]
            v = verdict.get("%s/%s" % (t, sz))
            tail = (["%.3f (%s)" % (v["ratio"], v["best"].split(":")[1]), "<= %.1f" % v["target"],
                     "PASS" if v["pass"] else "FAIL",
                     "%.3f" % v["ratio_vs_exact_lru"] if "ratio_vs_exact_lru" in v else "-"]
                    if v else ["-"] * 4)
            w("| %s | %s | %s | %s |\n" % (t, sz, " | ".join(row), " | ".join(tail)))
    w("\nitems resident over the replay's second half: mean [min-max] of %d DBSIZE reads"
      " (the offline LRU: its capacity)\n\n" % SAMPLES)
    table(w, results, traces, sizes, systems, lambda c: (
        "%.0f [%d-%d]" % (c["resident_mean"], c["resident_min"], c["resident_max"])
        if "resident_mean" in c else "%d" % c["resident"]))
    w("\nmaxmemory given, bytes\n\n")
    table(w, results, traces, sizes, systems,
          lambda c: "%d" % c["maxmemory"] if "maxmemory" in c else "-")
    bad = [(t, sz, s, c) for t in traces for sz in sizes
           for s, c in results.get(t, {}).get(sz, {}).items()
           if c.get("set_errors") or c.get("wrong_replies")]
    for t, sz, s, c in bad:
        w("WARNING %s %s %s: %d SET errors (%s), %d wrong GET replies\n" %
          (t, sz, s, c["set_errors"], c["first_error"], c["wrong_replies"]))


def report(results, traces, sizes, systems, batch):
    """Prints the tables and the verdicts; returns the verdicts."""
    verdict = verdicts(results, traces, sizes)
    print_tables(results, traces, sizes, systems, verdict, batch)
    print("\nmaxmemory: redis-server = used_memory after FLUSHALL + items x (used_memory growth"
          " per item inserted into the empty server), then searched until a cache-aside"
          " replay of the trace's first 10 x items requests holds a mean DBSIZE within 1 % of"
          " items (the client's buffers count in used_memory, and vary with hits and misses);"
          " pcached = whole 64 KiB chunks of record cells (its table is outside the cap), the"
          " count around items x cell bytes whose replay of the same prefix holds a mean DBSIZE"
          " nearer items")
    if not verdict:
        print("targets: not judged (needs pcached and redis-server allkeys-lru)")
        return verdict
    ok = all(v["pass"] for v in verdict.values())
    print("targets (best of ours <= redis allkeys-lru everywhere, <= 0.9x on %s): %s"
          % ("/".join(OHW_TRACES), "PASS" if ok else "FAIL (%d of %d cells)" %
             (sum(not v["pass"] for v in verdict.values()), len(verdict))))
    for k, v in verdict.items():
        if not v["pass"]:
            t, sz = k.split("/")
            cell = results[t][int(sz)]
            print("  FAIL %s: %s %d misses, redis allkeys-lru %d (ratio %.6f > %.1f)" % (
                k, v["best"], cell[v["best"]]["misses"], cell["redis:allkeys-lru"]["misses"],
                v["ratio"], v["target"]))
    for p in PC_POLICIES:
        s = "pcached:" + p
        if any(s in results[t][sz] for t in traces for sz in sizes):
            alone = verdicts({t: {sz: {k: v for k, v in results[t][sz].items()
                                       if k == s or not k.startswith("pcached:")}
                                  for sz in sizes} for t in traces}, traces, sizes)
            fails = [k for k, v in alone.items() if not v["pass"]]
            print("  %s alone: %s" % (p, "PASS" if not fails else "FAIL (%s)" % ", ".join(fails)))
    return verdict


def from_record(path):
    """--report: the tables of a JSON record this bench wrote."""
    with open(path) as f:
        rec = json.load(f)
    par = rec["runs"]["params"]
    results = {t: {int(sz): c for sz, c in cells.items()} for t, cells in rec["raw"].items()}
    traces = [t for t in TRACES if t in results]
    sizes = par["sizes"]
    systems = [s for s in SYSTEMS if any(s in results[t][sz] for t in traces for sz in sizes)]
    print("%s, commit %s: %s" % (path, rec["commit"], rec["command"]))
    report(results, traces, sizes, systems, par["batch"])


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pcached", help="pcached binary (without it pcached is SKIPPED)")
    p.add_argument("--pcached-mem-mb", type=int, default=64,
                   help="pcached's arena (mem_mb); maxmemory caps the records inside it")
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--keys", type=int, default=100000)
    p.add_argument("--requests", type=int, default=1000000)
    p.add_argument("--sizes", default="0.01,0.05,0.10", help="fractions of --keys, in items")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--seed", type=int, default=21)
    p.add_argument("--ohw-frac", type=float, default=0.5)
    p.add_argument("--loop-frac", type=float, default=0.2)
    p.add_argument("--traces", default=",".join(TRACES))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 20,000 keys, 50,000 requests, no JSON unless --out")
    p.add_argument("--report", metavar="JSON", help="print the tables of a record, run nothing")
    p.add_argument("--out",
                   help="JSON record (default bench/results/<date>T<HHMM>-evict-hitratio.json)")
    a = p.parse_args()
    if a.quick:
        a.keys, a.requests = 20000, 50000
    return a


def main():
    a = parse_args()
    if a.report:
        return from_record(a.report)
    traces = [t for t in a.traces.split(",") if t]
    systems = [s for s in a.systems.split(",") if s]
    for t in traces:
        if t not in TRACES:
            sys.exit("unknown trace %s (%s)" % (t, ", ".join(TRACES)))
    for s in systems:
        if s not in SYSTEMS:
            sys.exit("unknown system %s (%s)" % (s, ", ".join(SYSTEMS)))
    fracs = [float(x) for x in a.sizes.split(",")]
    sizes = [max(1, int(round(f * a.keys))) for f in fracs]
    value = (b"%d" % a.seed * a.value_size)[:a.value_size]
    started = datetime.datetime.now(datetime.timezone.utc)
    skipped = {}

    a.redis_server = es.which_redis(a.redis_server)
    if not a.redis_server:
        for s in systems:
            if s.startswith("redis:"):
                skipped[s] = "redis-server not found (apt-get install redis-server)"
    pc_cal = None
    tmp = tempfile.TemporaryDirectory(prefix="evict-hitratio-")
    if any(s.startswith("pcached:") for s in systems):
        why = None
        if not a.pcached:
            why = "no --pcached PATH"
        else:
            a.pcached = os.path.abspath(a.pcached)
            why = es.pcached_check(a.pcached, tmp.name,
                                   {"maxmemory": 1 << 20, "maxmemory_policy": PC_POLICIES[1]})
        if why:
            for s in systems:
                if s.startswith("pcached:"):
                    skipped[s] = "pcached: %s" % why
        else:
            pc_cal = calibrate_pcached(a.pcached, tmp.name, max(sizes), value, a.pcached_mem_mb)
            print("pcached calibration: %.1f cell bytes per item (%.1f dataset bytes), %d items"
                  % (pc_cal["per_item_cell_bytes"], pc_cal["per_item_dataset_bytes"],
                     pc_cal["items"]), file=sys.stderr)
    for s, why in skipped.items():
        print("SKIPPED %s: %s" % (s, why), file=sys.stderr)
    run_systems = [s for s in systems if s not in skipped]

    results, tstats = {}, {}
    for t in traces:
        ids = gen_trace(t, a)
        tstats[t] = trace_stats(ids, a)
        for sz in sizes:
            cell = results.setdefault(t, {}).setdefault(sz, {})
            for s in run_systems:
                t0 = time.time()
                if s == "lru-exact":
                    r = replay_lru(ids, a.batch, sz)
                elif s == "s3fifo-offline":
                    r = replay_s3fifo(ids, a.batch, sz)
                elif s.startswith("redis:"):
                    r = run_redis(a, s.split(":", 1)[1], ids, sz, value, tmp.name)
                else:
                    r = run_pcached(a, s.split(":", 1)[1], ids, sz, value, tmp.name, pc_cal)
                r["miss_ratio"] = r["misses"] / len(ids)
                if "seconds" in r:
                    r["requests_per_s"] = len(ids) / r["seconds"]
                cell[s] = r
                print("%-8s %6d %-22s miss %.4f resident %6.0f  %.1fs  %s" %
                      (t, sz, s, r["miss_ratio"], r.get("resident_mean", r["resident"]),
                       time.time() - t0, "%.0f req/s" % r["requests_per_s"]
                       if "requests_per_s" in r else ""), file=sys.stderr)

    verdict = report(results, traces, sizes, systems, a.batch)
    out = a.out
    if out is None and not a.quick:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
        out = os.path.join(root, started.strftime("%Y-%m-%dT%H%M") + "-evict-hitratio.json")
    if out:
        write_record(out, a, started, traces, sizes, results, tstats, verdict, skipped, pc_cal)
        print("wrote %s" % out)
    tmp.cleanup()


def git_commit():
    d = os.path.dirname(os.path.abspath(__file__))
    try:
        c = subprocess.run(["git", "-C", d, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", d, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return c + ("-dirty" if dirty else "") if c else None
    except OSError:
        return None


def write_record(path, a, started, traces, sizes, results, tstats, verdict, skipped, pc_cal):
    """bench/results/README.md's schema: figures keyed by run label."""
    redis_v = None
    if a.redis_server:
        redis_v = subprocess.run([a.redis_server, "--version"], capture_output=True,
                                 text=True).stdout.strip()
    def snake(*parts):
        return "_".join(str(p) for p in parts).replace(".", "").replace(":", "_") \
            .replace("-", "_").replace("/", "_")
    figures = {}
    for t in traces:
        for sz in sizes:
            for s, r in results.get(t, {}).get(sz, {}).items():
                figures[snake("miss_ratio", t, sz, s)] = r["miss_ratio"]
                if "resident_mean" in r:
                    figures[snake("resident_mean", t, sz, s)] = r["resident_mean"]
    for k, v in verdict.items():
        figures[snake("ratio_best_vs_redis_lru", k)] = v["ratio"]
        figures[snake("pass_best_vs_redis_lru", k)] = v["pass"]
    rec = {
        "date": started.strftime("%Y-%m-%d"),
        "time_utc": started.strftime("%H:%M"),
        "commit": git_commit(),
        "build": "pcached: %s; %s" % (a.pcached, redis_v),
        "command": " ".join(["/usr/bin/python3", "bench/evict_hitratio.py"] + sys.argv[1:]),
        "machine": "%s, %d CPUs, load average %.1f at the end" % (
            platform.node(), os.cpu_count(), os.getloadavg()[0]),
        "runs": {"params": {"keys": a.keys, "requests": a.requests, "batch": a.batch,
                            "key_bytes": KEY_BYTES, "value_bytes": a.value_size, "seed": a.seed,
                            "ohw_frac": a.ohw_frac, "loop_frac": a.loop_frac, "sizes": sizes,
                            "pcached_mem_mb": a.pcached_mem_mb},
                 "traces": tstats, "skipped": skipped, "pcached_calibration": pc_cal},
        "figures": {"run": figures},
        "raw": results,
        "notes": [],
    }
    with open(path, "w") as f:
        json.dump(rec, f, indent=1, sort_keys=False, default=str)
        f.write("\n")


if __name__ == "__main__":
    main()
