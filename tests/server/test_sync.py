"""perf_sync between real pcached nodes sharing one private PostgreSQL
(docs/sync.md): three nodes on 127.0.0.1 - an authority A and replicas B
and C - plus a fourth, D, that A's datagrams never reach (A sends them to a
wrong port), so D learns only by its poll. Everything is real: the
PostgreSQL server the test starts (tests/support/odbc_servers.sh), the psqlODBC
driver, pcached processes, UDP datagrams.

What it asserts, in order (one cluster, the phases build on each other):
  push         B and C converge on A's collection within 1 s of PERF.SYNC,
               every key, value, counter and TTL checked; keys they held and
               the snapshot lacks are pruned; source, last_sync_in and the
               synced event are reported; the convergence time is printed
  poll         D converges within its poll period (+ one reload), measured
  no miss      a reader hammering B during a reload of a 30 000-key
               collection never misses a key present before and after
  monotonic    generations of repeated syncs strictly increase, and every
               replica's observed generation never goes down
  forged       datagrams with a huge generation change nothing and cost at
               most one database read per sync_check_ms; a replay of the
               current generation costs none; malformed datagrams are
               dropped with a log line
  degrade      PERF.SYNC with no peers (D), and with an LMDB store, is a
               save whose result says why nobody was notified
  db down      with PostgreSQL stopped, PERF.SYNC fails cleanly and every
               replica keeps serving its previous data; once it is back,
               the next sync goes through and the replicas reload
  config       pcached --check refuses bad sync_peers / node_id / ports
The database and every server are stopped even when the test fails (and by
odbc_servers.sh's watcher if the test itself is killed).
"""
import json
import http.client
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SERVERS_SH = os.path.join(HERE, "..", "support", "odbc_servers.sh")
PW = "s3cret-PW-odbc"
CHECK_MS = 200
D_POLL_MS = 1500
MAGIC = 0x50435359


def notice(coll, gen, source, magic=MAGIC, version=1, flags=0):
    c, s = coll.encode(), source.encode()
    return struct.pack(">IBBBBQ", magic, version, flags, len(c), len(s), gen) + c + s


def udp_free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Cluster:
    """The database and the four nodes; stop() always runs."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pcache-sync-")
        os.chmod(self.dir, 0o755)
        self.nodes = {}
        self.pg_up = False

    def sh(self, *args, check=True):
        return subprocess.run(["sh", SERVERS_SH] + list(args), check=check,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def start_db(self):
        p = self.sh("start", self.dir, str(free_port()), check=False)
        if p.returncode == 77:
            print("SKIPPED: " + p.stdout, flush=True)
            sys.exit(77)
        if p.returncode != 0:
            raise RuntimeError("odbc_servers.sh start failed:\n" + p.stdout)
        self.pg_up = True
        # the watcher stops PostgreSQL and removes the directory once this
        # process is gone, however it ends
        subprocess.run(["sh", "-c", 'setsid sh "$0" watch "$1" "$2" >/dev/null 2>&1 &',
                        SERVERS_SH, self.dir, str(os.getpid())], check=True)
        os.environ["ODBCSYSINI"] = self.dir
        os.environ["ODBCINI"] = os.path.join(self.dir, "odbc.ini")

    def db_url(self):
        return "odbc:DSN=pcache_pg;UID=pcache;PWD=" + PW

    def node(self, name, **opts):
        base = dict(db_url=self.db_url(), collections="default;big;solo", node_id=name,
                    sync_check_ms=CHECK_MS, workers=1, mem_mb=64, http_port=free_port(),
                    log_level="info")
        base.update(opts)
        s = Server(**base)
        s.start()
        self.nodes[name] = s
        return s

    def stop(self):
        for s in self.nodes.values():
            try:
                s.cleanup()
            except AssertionError as e:
                print(e, flush=True)
                raise
        if self.pg_up:
            self.sh("stop", self.dir, check=False)
            self.pg_up = False


def r(node, db=0):
    return redis.Redis(port=node.port, db=db, socket_timeout=30)


def perf(node, *args, db=0):
    return json.loads(r(node, db).execute_command(*args))


def coll_stats(node, coll):
    st = perf(node, "PERF.STATS", coll)
    for c in st["collections"]:
        if c["collection"] == coll:
            return c
    raise AssertionError("no collection %s in %r" % (coll, st))


def rpc(node, method, params):
    c = http.client.HTTPConnection("127.0.0.1", node.opts["http_port"], timeout=30)
    c.request("POST", "/mi", body=json.dumps({"jsonrpc": "2.0", "method": method,
                                               "params": params, "id": 1}))
    resp = c.getresponse()
    out = json.loads(resp.read())
    c.close()
    return out


def wait_gen(node, coll, gen, timeout):
    """Seconds until node reports generation >= gen for coll (polled every
    2 ms from the moment of the call), or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if coll_stats(node, coll)["generation"] >= gen:
            return time.monotonic() - t0
        time.sleep(0.002)
    return None


def wait_all(nodes, coll, gen, timeout, t_ref):
    """For each (node, name): seconds from t_ref until it reports generation
    >= gen for coll (all polled in one loop), None for one that did not."""
    out = {name: None for _, name in nodes}
    while time.monotonic() - t_ref < timeout and None in out.values():
        for n, name in nodes:
            if out[name] is None and coll_stats(n, coll)["generation"] >= gen:
                out[name] = time.monotonic() - t_ref
        time.sleep(0.002)
    return out


def snapshot(node, db):
    """Every key of a collection with its value (or counter) and PTTL."""
    c = r(node, db)
    keys = sorted(c.keys("*"))
    p = c.pipeline(transaction=False)
    for k in keys:
        p.get(k)
        p.pttl(k)
    res = p.execute()
    return {k: (res[2 * i], res[2 * i + 1]) for i, k in enumerate(keys)}


class Sync(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.C = Cluster()
        try:
            cls.C.start_db()
            ports = {n: udp_free_port() for n in "ABCD"}
            wrong = udp_free_port()  # nobody listens: A's datagrams for D are lost
            peers = lambda *ns: ",".join("127.0.0.1:%d" % ports[n] for n in ns)  # noqa: E731
            cls.A = cls.C.node("A", sync_port=ports["A"],
                               sync_peers=peers("B", "C") + ",127.0.0.1:%d" % wrong,
                               sync_poll_ms=0)
            # B and C poll rarely: their convergence below is the push's
            cls.B = cls.C.node("B", sync_port=ports["B"], sync_peers=peers("A", "C"),
                               sync_poll_ms=60000)
            cls.Cn = cls.C.node("C", sync_port=ports["C"], sync_peers=peers("A", "B"),
                                sync_poll_ms=60000)
            cls.D = cls.C.node("D", sync_port=ports["D"], sync_peers="",
                               sync_poll_ms=D_POLL_MS)
            cls.ports = ports
        except BaseException:
            cls.C.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.C.stop()

    def fill_authority(self, n, version):
        a = r(self.A)
        a.flushdb()
        p = a.pipeline(transaction=False)
        for i in range(n):
            k = "k:%d" % i
            v = b"v%d-%d-\x00\xff" % (version, i)
            if i % 3 == 0:
                p.set(k, v)  # no TTL
            elif i % 3 == 1:
                p.set(k, v, px=300000 + i)
            else:
                p.set(k, v, ex=100 + i % 50)
        p.set("ctr", 0)
        p.incrby("ctr", 1000 + version)
        p.set("lapsing", "x", px=1)  # expired by the sync: skipped on save and load
        p.execute()

    def assert_same(self, src, dst, db, what):
        a, b = snapshot(src, db), snapshot(dst, db)
        self.assertEqual(sorted(a), sorted(b), "%s: key sets differ" % what)
        for k, (va, ta) in a.items():
            vb, tb = b[k]
            self.assertEqual(va, vb, "%s: value of %r" % (what, k))
            if ta == -1:
                self.assertEqual(tb, -1, "%s: %r must not expire" % (what, k))
            else:
                # the same absolute expiry, read a few ms apart
                self.assertGreater(tb, 0, "%s: %r lost its TTL" % (what, k))
                self.assertLess(abs(ta - tb), 1500, "%s: TTL of %r: %d vs %d" % (what, k, ta, tb))

    def test_1_push_and_poll(self):
        self.fill_authority(3000, 1)
        # keys the replicas hold and the snapshot lacks: pruned by the reload
        for n in (self.B, self.Cn, self.D):
            r(n).set("stale:only-here", "x")
        t0 = time.monotonic()
        res = perf(self.A, "PERF.SYNC", "default")
        sync_s = time.monotonic() - t0
        self.assertEqual(res["collections"], 1)
        self.assertEqual(res["saved"], 3001)
        self.assertEqual(res["peers"], 3)  # B, C and the wrong port: UDP cannot tell
        self.assertEqual(res["source"], "A")
        self.assertNotIn("note", res)
        gen = res["generation"]
        self.assertGreaterEqual(gen, 1)
        # measured from the moment PERF.SYNC was sent: save + push + check + reload
        times = wait_all(((self.B, "B"), (self.Cn, "C"), (self.D, "D")), "default", gen,
                         D_POLL_MS / 1000.0 + 5.0, t0)
        # the bounds count from the commit (PERF.SYNC's reply): the save's
        # own duration depends on the collection and the build, not on sync
        for name in "BC":
            t = times[name]
            self.assertIsNotNone(t, "%s did not converge in 5 s" % name)
            print("convergence by push, node %s: %.1f ms from PERF.SYNC sent, %.1f ms after "
                  "its reply (the save took %.1f ms), 3001 keys"
                  % (name, t * 1000, (t - sync_s) * 1000, sync_s * 1000), flush=True)
            self.assertLess(t - sync_s, 1.0, "node %s converged by push in %.3f s" % (name, t))
        td = times["D"]
        self.assertIsNotNone(td, "D did not converge by its poll")
        print("convergence by poll (datagrams lost), node D: %.1f ms from PERF.SYNC sent, "
              "%.1f ms after its reply (poll period %d ms)"
              % (td * 1000, (td - sync_s) * 1000, D_POLL_MS), flush=True)
        self.assertGreater(td, times["B"])  # not by a push: D's datagram went astray
        self.assertLess(td - sync_s, D_POLL_MS / 1000.0 + 0.5)
        for n, name in ((self.B, "B"), (self.Cn, "C"), (self.D, "D")):
            self.assert_same(self.A, n, 0, "node " + name)
            self.assertIsNone(r(n).get("stale:only-here"))
            self.assertIsNone(r(n).get("lapsing"))
            self.assertEqual(r(n).type("ctr"), b"string")
            self.assertEqual(r(n).incrby("ctr", 0), 1001)
            st = coll_stats(n, "default")
            self.assertEqual(st["source"], "A")
            self.assertGreater(st["last_sync_in"], 0)
            self.assertGreaterEqual(st["sync_reloads"], 1)
            self.assertGreaterEqual(st["sync_pruned"], 1)
            self.assertIn("event synced: collection default from node A", n.log_text())
        st = coll_stats(self.A, "default")
        self.assertGreater(st["last_sync_out"], 0)
        self.assertEqual(st["generation"], gen)
        self.assertEqual(st["source"], "A")
        self.assertEqual(coll_stats(self.D, "default")["sync_checks"], 0)  # no notice reached D
        self.assertGreaterEqual(coll_stats(self.D, "default")["sync_polls"], 1)

    def test_2_reader_never_misses(self):
        big = r(self.A, 1)
        n = 30000
        p = big.pipeline(transaction=False)
        for i in range(n):
            p.set("keep:%d" % i, b"old-%d" % i + b"." * 150)
            if i % 2 == 0:
                p.set("gone:%d" % i, "to be pruned")
        p.execute()
        gen = perf(self.A, "PERF.SYNC", "big")["generation"]
        self.assertIsNotNone(wait_gen(self.B, "big", gen, 10.0))
        self.assertEqual(r(self.B, 1).dbsize(), n + n // 2)
        # next generation: every kept key changes, the gone:* keys go
        p = big.pipeline(transaction=False)
        for i in range(n):
            p.set("keep:%d" % i, b"new-%d" % i + b"," * 150)
            if i % 2 == 0:
                p.delete("gone:%d" % i)
        p.execute()
        stop = threading.Event()
        stats = {"reads": 0, "misses": [], "bad": [], "during": 0}
        reloading = threading.Event()

        def reader():
            c = r(self.B, 1)
            rnd = random.Random(7)
            while not stop.is_set():
                ks = ["keep:%d" % rnd.randrange(n) for _ in range(200)]
                vals = c.mget(ks)
                for k, v in zip(ks, vals):
                    i = k.split(":")[1].encode()
                    if v is None:
                        stats["misses"].append(k)
                    elif v not in (b"old-" + i + b"." * 150, b"new-" + i + b"," * 150):
                        stats["bad"].append((k, v[:40]))
                stats["reads"] += len(ks)
                if reloading.is_set():
                    stats["during"] += len(ks)

        th = threading.Thread(target=reader)
        th.start()
        try:
            time.sleep(0.2)
            before = coll_stats(self.B, "big")["sync_reloads"]
            reloading.set()
            gen2 = perf(self.A, "PERF.SYNC", "big")["generation"]
            t = wait_gen(self.B, "big", gen2, 10.0)
            reloading.clear()
            time.sleep(0.1)
        finally:
            stop.set()
            th.join()
        self.assertIsNotNone(t)
        print("reader on B: %d reads, %d while the sync and reload of %d keys ran "
              "(%.0f ms), %d misses" % (stats["reads"], stats["during"], n, t * 1000,
                                        len(stats["misses"])), flush=True)
        self.assertEqual(stats["misses"], [])
        self.assertEqual(stats["bad"], [])
        self.assertGreater(stats["during"], 1000)  # the reader did run during the reload
        self.assertEqual(coll_stats(self.B, "big")["sync_reloads"], before + 1)
        self.assertEqual(r(self.B, 1).dbsize(), n)  # the gone:* keys were pruned
        self.assertEqual(r(self.B, 1).get("keep:123"), b"new-123" + b"," * 150)

    def test_3_generations_monotonic(self):
        gens, seen = [], {"B": [], "C": []}
        for i in range(6):
            r(self.A).set("mono", i)
            gens.append(perf(self.A, "PERF.SYNC", "default")["generation"])
            for n, name in ((self.B, "B"), (self.Cn, "C")):
                seen[name].append(coll_stats(n, "default")["generation"])
            time.sleep(0.05)
        self.assertEqual(gens, sorted(set(gens)), "generations %r" % gens)
        self.assertEqual(gens[-1] - gens[0], 5)
        for n, name in ((self.B, "B"), (self.Cn, "C")):
            self.assertIsNotNone(wait_gen(n, "default", gens[-1], 5.0))
            seen[name].append(coll_stats(n, "default")["generation"])
            self.assertEqual(seen[name], sorted(seen[name]), "%s went down: %r" % (name, seen[name]))
            self.assertEqual(seen[name][-1], gens[-1])
            self.assertEqual(r(n).get("mono"), b"5")
        # the generation row in the database names the authority
        q = self.C.sh("psql", self.C.dir, "pcachetest",
                      "SELECT generation, source FROM pcache_generations "
                      "WHERE collection = 'default'")
        self.assertIn("%d | A" % gens[-1], q.stdout)

    def test_4_forged_datagrams(self):
        B = self.B
        time.sleep(CHECK_MS / 1000.0 * 2)  # past any rate-limit window of earlier phases
        before = snapshot(B, 0)
        st0 = coll_stats(B, "default")
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        dst = ("127.0.0.1", self.ports["B"])
        # one forged notice: exactly one database read, rejected, nothing changes
        u.sendto(notice("default", 1 << 62, "A"), dst)
        time.sleep(CHECK_MS / 1000.0 * 2)
        st1 = coll_stats(B, "default")
        self.assertEqual(st1["sync_checks"] - st0["sync_checks"], 1)
        self.assertEqual(st1["sync_rejected"] - st0["sync_rejected"], 1)
        self.assertEqual(st1["generation"], st0["generation"])
        # a flood of 200 within one interval: at most one read per interval
        t0 = time.monotonic()
        for i in range(200):
            u.sendto(notice("default", (1 << 62) + i, "evil"), dst)
        flood_s = time.monotonic() - t0
        time.sleep(CHECK_MS / 1000.0 * 3)
        st2 = coll_stats(B, "default")
        allowed = int((flood_s * 1000) // CHECK_MS) + 2
        self.assertLessEqual(st2["sync_checks"] - st1["sync_checks"], allowed)
        self.assertGreaterEqual(st2["sync_rejected"] - st1["sync_rejected"], 1)
        # a replay of the current generation is free
        u.sendto(notice("default", st2["generation"], "A"), dst)
        # hostile bytes: dropped, logged, nothing else
        for d in (b"", b"x" * 15, b"\x00" * 16, notice("default", 5, "A", magic=0x12345678),
                  notice("default", 5, "A", version=9), notice("default", 5, "A", flags=1),
                  notice("default", 0, "A"), notice("default", 5, "A") + b"tail",
                  notice("default", 5, "A")[:-1], notice("nosuch", 1 << 62, "A"),
                  notice("def ult", 5, "A"), b"\xff" * 4000):
            u.sendto(d, dst)
        time.sleep(CHECK_MS / 1000.0 * 2)
        st3 = coll_stats(B, "default")
        self.assertEqual(st3["sync_checks"], st2["sync_checks"])
        self.assertEqual(st3["generation"], st0["generation"])
        self.assertEqual(st3["sync_reloads"], st0["sync_reloads"])
        self.assertEqual(snapshot(B, 0).keys(), before.keys())
        after = snapshot(B, 0)
        self.assertEqual({k: v for k, (v, _) in before.items()},
                         {k: v for k, (v, _) in after.items()})
        log = B.log_text()
        self.assertIn("not confirmed by the database", log)
        self.assertIn("dropped a datagram", log)
        self.assertIn("bad magic", log)
        print("forged: 1 datagram -> 1 database read; a flood of 200 in %.1f ms -> %d reads "
              "(sync_check_ms %d)" % (flood_s * 1000, st2["sync_checks"] - st1["sync_checks"],
                                      CHECK_MS), flush=True)
        u.close()

    def test_5_degraded(self):
        # D has no peers: a save of "solo" to the database, with a note
        r(self.D, 2).set("solo-key", "1")
        res = perf(self.D, "PERF.SYNC", "solo", db=2)
        self.assertEqual(res["saved"], 1)
        self.assertEqual(res["peers"], 0)
        self.assertGreaterEqual(res["generation"], 1)
        self.assertIn("no peers configured", res["note"])
        # the same over JSON-RPC
        out = rpc(self.D, "perf_sync", {"collection": "solo"})
        self.assertIn("result", out, out)
        self.assertEqual(out["result"]["generation"], res["generation"] + 1)
        # an LMDB store: a local save, said so
        lm = Server(collections="default", node_id="L")
        lm.opts["db_url"] = os.path.join(lm.dir, "store")
        try:
            lm.start()
            r(lm).set("a", "b")
            res = perf(lm, "PERF.SYNC")
            self.assertEqual(res["saved"], 1)
            self.assertEqual(res["peers"], 0)
            self.assertIn("no shared SQL database", res["note"])
            self.assertEqual(json.loads(r(lm).execute_command("PERF.LOAD"))["loaded"], 1)
        finally:
            lm.cleanup()

    def test_6_database_down(self):
        self.fill_authority(500, 2)
        gen = perf(self.A, "PERF.SYNC", "default")["generation"]
        for n in (self.B, self.Cn):
            self.assertIsNotNone(wait_gen(n, "default", gen, 5.0))
        before = {name: snapshot(n, 0) for n, name in ((self.B, "B"), (self.Cn, "C"))}
        self.C.sh("pg_stop", self.C.dir)
        try:
            r(self.A).set("k:1", "changed while the database is down")
            t0 = time.monotonic()
            with self.assertRaises(redis.ResponseError) as cm:
                r(self.A).execute_command("PERF.SYNC", "default")
            self.assertLess(time.monotonic() - t0, 20)
            msg = str(cm.exception)
            self.assertIn("perf_sync", msg)
            self.assertIn("failed", msg)
            self.assertNotIn(PW, msg)
            # a forged notice now makes the replicas look, fail, and keep their data
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for name in "BC":
                u.sendto(notice("default", gen + 1, "A"), ("127.0.0.1", self.ports[name]))
            u.close()
            time.sleep(CHECK_MS / 1000.0 * 3)
            for n, name in ((self.B, "B"), (self.Cn, "C")):
                after = snapshot(n, 0)
                self.assertEqual({k: v for k, (v, _) in before[name].items()},
                                 {k: v for k, (v, _) in after.items()}, name)
                self.assertEqual(coll_stats(n, "default")["generation"], gen)
                self.assertEqual(r(n).get("k:1"), r(self.B).get("k:1"))
        finally:
            self.C.sh("pg_start", self.C.dir, check=False)
        # the database is back: the next sync reconnects and goes through,
        # and the replicas (whose connections died too) reconnect and reload
        time.sleep(CHECK_MS / 1000.0 * 2)
        res = perf(self.A, "PERF.SYNC", "default")
        self.assertEqual(res["generation"], gen + 1)
        for n, name in ((self.B, "B"), (self.Cn, "C")):
            self.assertIsNotNone(wait_gen(n, "default", gen + 1, 5.0), name)
            self.assertEqual(r(n).get("k:1"), b"changed while the database is down")
            self.assertIn("reconnected to the database", n.log_text())


class SyncConfig(unittest.TestCase):
    """pcached --check refuses bad sync settings with the key named."""

    def check(self, *args):
        return subprocess.run([os.environ.get("PCACHED", "pcached"), "--check"] + list(args),
                              capture_output=True, text=True)

    def test_bad_values(self):
        for arg, msg in (("--sync_peers=127.0.0.1", "sync_peers: '127.0.0.1'"),
                         ("--sync_peers=127.0.0.1:0", "port 1..65535"),
                         ("--sync_peers=127.0.0.1:70000", "port 1..65535"),
                         ("--sync_peers=host.example:7000", "expected IPv4:port"),
                         ("--sync_peers=1.2.3.4:7x", "expected IPv4:port"),
                         ("--node_id=a b", "node_id: 'a b'"),
                         ("--sync_port=65536", "sync_port"),
                         ("--sync_check_ms=1", "sync_check_ms")):
            p = self.check(arg)
            self.assertNotEqual(p.returncode, 0, arg)
            self.assertIn(msg, p.stderr, arg)
        p = self.check("--sync_peers= 127.0.0.1:7000 , 10.0.0.2:7400", "--node_id=n-1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("sync_poll_ms = 5000", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
