"""An isolation checker in the spirit of Jepsen's Elle and Knossos (issue
33): several client processes run random histories against a RESP server;
every operation is recorded with its invocation and completion time
(CLOCK_MONOTONIC, shared by the processes of one machine) and its reply;
then the history is checked for anomalies that no serializable, real-time
ordered execution of the same operations can produce.

The workload is built so that each anomaly is decidable from the history:
  * groups: 10 keys (g<i>:0..9) are only ever written together, by one
    MULTI of 10 SETs, one MSET, or one MULTI of DEL, each with a value
    unique to the operation. A read of a whole group (MGET, or MGET inside
    MULTI) must show 10 equal values, or 10 nils: otherwise a FRACTURED
    read. A value no operation wrote is a read of a value NEVER WRITTEN;
    a value of a transaction that was refused (EXECABORT, or the nil array
    after a WATCH) is an ABORTED READ.
  * bank: accounts b:0..4, 1,000 each, moved by MULTI DECRBY/INCRBY EXEC;
    every MGET of all five must sum to 5,000 (a BROKEN INVARIANT).
  * rename pair: one value moves between rn:a and rn:b by RENAME; a read of
    both (MGET) must find exactly one of them.
  * counters: INCR, plain and inside MULTI: two INCRs answering the same
    number lost one (LOST UPDATE); WATCH retry loops (WATCH w; GET w; MULTI;
    SET w n+1; EXEC) likewise: two committed loops writing the same n+1 lost
    an update.
  * appends: APPEND of unique tokens, inside MULTI to two lists at once;
    every read of a list must be a prefix of the longest read of it
    (otherwise INCOMPATIBLE ORDER), a token must appear once, and a token
    appended in one EXEC to both lists must appear in both or neither of a
    read of both (FRACTURED).
  * registers r<i>: SET / GET / GETSET of unique values, checked per key
    for real time (Knossos' question, decided for unique writes by three
    sufficient conditions): a read of a write invoked after the read
    completed (FUTURE READ); a read of W when some W2 began after W ended
    and ended before the read began (STALE READ); two reads in real-time
    order seeing writes in the opposite real-time order (NON-MONOTONIC).
An operation interrupted by a crash (kill -9) has no completion: its
writes may or may not have happened, and the checks treat it so (its
completion time is +infinity, and its values may appear or not).

Library: run_workload(port, ...) returns the history; check(history,
initial=...) returns (anomalies, counts). CLI:
  /usr/bin/python3 tests/server/isolation_checker.py --port P --ops N --clients C
"""
import argparse
import bisect
import json
import multiprocessing
import os
import random
import sys
import time

import redis

NGROUPS = 1
GROUP = 10
ACCOUNTS = 5
BALANCE = 1000
NREGS = 4
NCOUNTERS = 2
NLISTS = 2
INF = float("inf")


def now():
    return time.monotonic_ns()


def gkeys(g):
    return ["g%d:%d" % (g, i) for i in range(GROUP)]


ACCTS = ["b:%d" % i for i in range(ACCOUNTS)]


def setup(r):
    """Writes the initial state (one MSET: before any client starts)."""
    kv = {a: BALANCE for a in ACCTS}
    kv["rn:a"] = "moving"
    r.delete(*[k for g in range(NGROUPS) for k in gkeys(g)], "rn:b",
             *["r%d" % i for i in range(NREGS)], *["c%d" % i for i in range(NCOUNTERS)],
             *["l%d" % i for i in range(NLISTS)], "w")
    r.mset(kv)


class Client:
    def __init__(self, cid, port, seed):
        self.cid = cid
        self.port = port
        self.rng = random.Random(seed)
        self.n = 0
        self.r = None
        self.hist = []

    def conn(self):
        if self.r is None:
            self.r = redis.Redis(port=self.port, socket_timeout=20, socket_connect_timeout=5)
        return self.r

    def uid(self):
        self.n += 1
        return "%d-%d" % (self.cid, self.n)

    def record(self, op, fn):
        """Runs fn, recording op's invocation, completion and reply. A
        connection error leaves the completion unknown (None)."""
        op["c"] = self.cid
        op["i"] = now()
        try:
            op["r"] = fn()
            op["ok"] = True
            op["e"] = now()
        except redis.exceptions.ConnectionError as e:
            op["ok"] = None  # indeterminate: it may or may not have happened
            op["e"] = None
            op["r"] = str(e)
            self.r = None
        except redis.exceptions.TimeoutError as e:
            op["ok"] = None
            op["e"] = None
            op["r"] = str(e)
            self.r = None
        except redis.exceptions.ResponseError as e:
            op["ok"] = False
            op["e"] = now()
            op["r"] = str(e)
        self.hist.append(op)

    # ---- the operations -------------------------------------------------
    def group_write(self):
        g = self.rng.randrange(NGROUPS)
        v = self.uid()
        kind = self.rng.choice(["multi", "mset", "multi", "del", "abort", "watch"])
        ks = gkeys(g)
        r = self.conn()

        def multi():
            p = r.pipeline(transaction=True)
            for k in ks:
                p.set(k, v)
            return p.execute()

        def mset():
            return r.mset({k: v for k in ks})

        def delete():
            p = r.pipeline(transaction=True)
            p.delete(*ks)
            return p.execute()

        def abort():
            # a queue-time error: EXEC answers EXECABORT, nothing applied
            p = r.pipeline(transaction=True)
            for k in ks[:5]:
                p.set(k, v)
            p.execute_command("NOSUCHCOMMAND")
            for k in ks[5:]:
                p.set(k, v)
            try:
                p.execute()
            except redis.exceptions.ResponseError as e:
                return "aborted: %s" % str(e)[:40]
            return "applied"

        def watch():
            # WATCH a key of this client's own, write it from another
            # connection, then EXEC: the nil array, nothing applied
            p = r.pipeline(transaction=True)
            wk = "wa:%d" % self.cid
            p.watch(wk)
            r.set(wk, v)  # the pool gives this another connection than p's
            p.multi()
            for k in ks:
                p.set(k, v)
            try:
                p.execute()
            except redis.exceptions.WatchError:
                return "aborted: watch"
            finally:
                p.reset()
            return "applied"

        fn = {"multi": multi, "mset": mset, "del": delete, "abort": abort, "watch": watch}[kind]
        self.record({"t": "gw", "g": g, "v": None if kind == "del" else v, "k": kind}, fn)

    def group_read(self):
        g = self.rng.randrange(NGROUPS)
        r = self.conn()
        if self.rng.random() < 0.2:
            def fn():
                p = r.pipeline(transaction=True)
                p.mget(gkeys(g))
                return [dec(x) for x in p.execute()[0]]
        else:
            def fn():
                return [dec(x) for x in r.mget(gkeys(g))]
        self.record({"t": "gr", "g": g}, fn)

    def transfer(self):
        a, b = self.rng.sample(range(ACCOUNTS), 2)
        amt = self.rng.randrange(1, 50)
        r = self.conn()

        def fn():
            p = r.pipeline(transaction=True)
            p.decrby(ACCTS[a], amt)
            p.incrby(ACCTS[b], amt)
            return p.execute()
        self.record({"t": "xfer"}, fn)

    def bank_read(self):
        r = self.conn()
        self.record({"t": "br"}, lambda: [dec(x) for x in r.mget(ACCTS)])

    def rename(self):
        r = self.conn()
        src, dst = ("rn:a", "rn:b") if self.rng.random() < 0.5 else ("rn:b", "rn:a")
        self.record({"t": "rn"}, lambda: r.rename(src, dst))

    def rename_read(self):
        r = self.conn()
        self.record({"t": "rnr"}, lambda: [dec(x) for x in r.mget(["rn:a", "rn:b"])])

    def incr(self):
        k = "c%d" % self.rng.randrange(NCOUNTERS)
        r = self.conn()
        if self.rng.random() < 0.5:
            self.record({"t": "incr", "k": k}, lambda: r.incr(k))
        else:
            def fn():
                p = r.pipeline(transaction=True)
                p.incr(k)
                p.get("r0")
                return p.execute()[0]
            self.record({"t": "incr", "k": k}, fn)

    def watch_loop(self):
        r = self.conn()

        def fn():
            for _ in range(1000):
                with r.pipeline(transaction=True) as p:
                    try:
                        p.watch("w")
                        cur = int(p.get("w") or 0)
                        p.multi()
                        p.set("w", cur + 1)
                        p.execute()
                        return cur + 1
                    except redis.exceptions.WatchError:
                        continue
            raise redis.exceptions.ResponseError("watch loop gave up")
        self.record({"t": "wl"}, fn)

    def append(self):
        tok = "%s," % self.uid()
        r = self.conn()
        if self.rng.random() < 0.5:
            def fn():
                p = r.pipeline(transaction=True)
                for i in range(NLISTS):
                    p.append("l%d" % i, tok)
                return p.execute()
            self.record({"t": "app", "v": tok, "both": True}, fn)
        else:
            self.record({"t": "app", "v": tok, "both": False}, lambda: r.append("l0", tok))

    def list_read(self):
        r = self.conn()
        self.record({"t": "lr"}, lambda: [dec(x) for x in r.mget(["l%d" % i
                                                                   for i in range(NLISTS)])])

    def reg(self):
        k = "r%d" % self.rng.randrange(NREGS)
        r = self.conn()
        x = self.rng.random()
        if x < 0.4:
            v = self.uid()
            self.record({"t": "rw", "k": k, "v": v}, lambda: r.set(k, v))
        elif x < 0.6:
            v = self.uid()
            self.record({"t": "rgs", "k": k, "v": v}, lambda: dec(r.getset(k, v)))
        else:
            self.record({"t": "rr", "k": k}, lambda: dec(r.get(k)))

    def step(self):
        x = self.rng.random()
        for p, f in ((0.16, self.group_write), (0.36, self.group_read), (0.44, self.transfer),
                     (0.54, self.bank_read), (0.57, self.rename), (0.62, self.rename_read),
                     (0.68, self.incr), (0.70, self.watch_loop), (0.76, self.append),
                     (0.82, self.list_read), (1.01, self.reg)):
            if x < p:
                f()
                return


def dec(x):
    return None if x is None else (x.decode() if isinstance(x, bytes) else x)


def _client_main(cid, port, seed, nops, deadline_ns, stop_file, out):
    c = Client(cid, port, seed)
    while len(c.hist) < nops and now() < deadline_ns:
        if stop_file and os.path.exists(stop_file):
            break
        c.step()
        if c.hist[-1]["ok"] is None:  # the server went away: wait for it
            for _ in range(400):
                try:
                    c.conn().ping()
                    break
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                    c.r = None
                    time.sleep(0.05)
    with open(out, "w") as f:
        for op in c.hist:
            f.write(json.dumps(op) + "\n")


def run_workload(port, nops, clients, seed=1, seconds=600, tmpdir="/tmp", stop_file=None,
                 tag="h"):
    """Runs `clients` processes of nops operations each (or until seconds
    pass); returns the history (a list of operations)."""
    deadline = now() + int(seconds * 1e9)
    outs = [os.path.join(tmpdir, "%s-%d-%d.jsonl" % (tag, os.getpid(), i)) for i in range(clients)]
    ps = [multiprocessing.Process(target=_client_main,
                                  args=(i + 1000 * seed, port, seed * 7919 + i, nops, deadline,
                                        stop_file, outs[i]))
          for i in range(clients)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    hist = []
    for o in outs:
        if os.path.exists(o):
            with open(o) as f:
                hist += [json.loads(line) for line in f]
            os.unlink(o)
    return hist


# ---- the checks ---------------------------------------------------------------
def end(op):
    return INF if op["e"] is None else op["e"]


def check(hist, initial_moving=True, final=None):
    """Returns (anomalies: list of (kind, detail), counts: dict)."""
    bad = []
    ops = hist
    done = [o for o in ops if o["ok"] is True]
    counts = {"operations": len(ops), "completed": len(done),
              "indeterminate": sum(1 for o in ops if o["ok"] is None),
              "errors": sum(1 for o in ops if o["ok"] is False)}

    # groups
    written, aborted = {}, set()
    for o in ops:
        if o["t"] != "gw" or o["v"] is None:
            continue
        if o["ok"] is not False and not (isinstance(o["r"], str) and o["r"].startswith("abort")):
            written[o["v"]] = o
        else:
            aborted.add(o["v"])
    for o in done:
        if o["t"] == "gw" and o["k"] in ("abort", "watch") and o["r"] == "applied":
            bad.append(("refused transaction applied", o))
        if o["t"] != "gr":
            continue
        vals = o["r"]
        if len(set(vals)) != 1:
            bad.append(("fractured group read", o))
            continue
        v = vals[0]
        if v is None:
            continue
        if v in aborted:
            bad.append(("aborted read", o))
        elif v not in written:
            bad.append(("read of a value never written", o))
        elif written[v]["i"] > o["e"]:
            bad.append(("future read", o))

    # bank
    for o in done:
        if o["t"] == "br" and (None in o["r"] or sum(int(x) for x in o["r"]) != ACCOUNTS * BALANCE):
            bad.append(("bank invariant broken", o))
    # rename pair
    for o in done:
        if o["t"] == "rnr" and sum(x is not None for x in o["r"]) != 1:
            bad.append(("rename seen half-done", o))

    # counters: no two INCRs / watch loops answer the same number
    seen = {}
    for o in done:
        if o["t"] == "incr":
            key = (o["k"], o["r"])
        elif o["t"] == "wl":
            key = ("w", o["r"])
        else:
            continue
        if key in seen:
            bad.append(("lost update", (seen[key], o)))
        seen[key] = o
    if final is not None:
        for k, v in final.get("counters", {}).items():
            t = "wl" if k == "w" else "incr"
            acked = sum(1 for o in done if o["t"] == t and o.get("k", "w") == k)
            maybe = sum(1 for o in ops if o["t"] == t and o.get("k", "w") == k and o["ok"] is None)
            if not acked <= v <= acked + maybe:
                bad.append(("lost update", {"counter": k, "final": v, "acked": acked,
                                            "indeterminate": maybe}))

    # appends
    app = {o["v"]: o for o in ops if o["t"] == "app"}
    longest = [""] * NLISTS
    for o in done:
        if o["t"] != "lr":
            continue
        lists = [x or "" for x in o["r"]]
        for i, s in enumerate(lists):
            toks = [t + "," for t in s.split(",")[:-1]]
            if len(set(toks)) != len(toks):
                bad.append(("duplicate append", o))
            for t in toks:
                a = app.get(t)
                if a is None or a["ok"] is False:
                    bad.append(("read of a value never written" if a is None else "aborted read",
                                o))
                elif a["i"] > o["e"]:
                    bad.append(("future read", o))
            if not (s.startswith(longest[i]) or longest[i].startswith(s)):
                bad.append(("incompatible order", (i, o)))
            if len(s) > len(longest[i]):
                longest[i] = s
        both = [set(t + "," for t in s.split(",")[:-1] if app.get(t + ",", {}).get("both"))
                for s in lists]
        if both[0] != both[1]:
            bad.append(("fractured append read", o))

    # registers: per key, unique writes
    for k in {o["k"] for o in ops if o["t"] in ("rw", "rgs", "rr")}:
        ws = {o["v"]: o for o in ops if o["t"] in ("rw", "rgs") and o["k"] == k
              and o["ok"] is not False}
        reads = [o for o in done if o["t"] in ("rr", "rgs") and o["k"] == k
                 and o["r"] is not None]
        # the writes by completion, with the latest invocation among those
        # completed so far: W2 that began after w ended and ended before the
        # read began exists iff that maximum, over writes ended before the
        # read's invocation, is after w's end
        byend = sorted((end(w), w["i"]) for w in ws.values())
        ends = [e for e, _ in byend]
        pmax, m = [], -1
        for _, i in byend:
            m = max(m, i)
            pmax.append(m)
        ok_reads = []
        for o in reads:
            w = ws.get(o["r"])
            if w is None:
                bad.append(("read of a value never written", o))
                continue
            if w["i"] > o["e"]:
                bad.append(("future read", o))
                continue
            j = bisect.bisect_left(ends, o["i"])
            if j > 0 and pmax[j - 1] > end(w):
                bad.append(("stale read", o))
                continue
            ok_reads.append(o)
        # non-monotonic: read b began after read a ended, yet b's write
        # ended before a's write began
        rs_end = sorted(ok_reads, key=lambda o: o["e"])
        rs_inv = sorted(ok_reads, key=lambda o: o["i"])
        j, latest = 0, -1
        for b in rs_inv:
            while j < len(rs_end) and rs_end[j]["e"] < b["i"]:
                latest = max(latest, ws[rs_end[j]["r"]]["i"])
                j += 1
            if end(ws[b["r"]]) < latest:
                bad.append(("non-monotonic reads", b))
    counts["anomalies"] = len(bad)
    kinds = {}
    for kind, _ in bad:
        kinds[kind] = kinds.get(kind, 0) + 1
    counts["by_kind"] = kinds
    return bad, counts


def final_state(port):
    r = redis.Redis(port=port, socket_timeout=20)
    cs = {"c%d" % i: int(r.get("c%d" % i) or 0) for i in range(NCOUNTERS)}
    cs["w"] = int(r.get("w") or 0)
    return {"counters": cs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ops", type=int, default=10000, help="operations per client")
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-setup", action="store_true")
    a = ap.parse_args()
    if not a.no_setup:
        setup(redis.Redis(port=a.port))
    hist = run_workload(a.port, a.ops, a.clients, seed=a.seed)
    bad, counts = check(hist, final=final_state(a.port))
    for kind, o in bad[:20]:
        print(kind, json.dumps(o)[:300])
    print(json.dumps(counts))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
