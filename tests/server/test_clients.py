"""CLIENT LIST and CLIENT KILL across the workers of one pcached: every
worker publishes its connections in a client table in shared memory, so a
connection on any worker lists and kills the connections of all of them
(docs/pcached.md, "Connections").

A pcached with workers=3 gets many connections; the kernel spreads them
over the workers' SO_REUSEPORT listeners, and INFO server's process_id
tells which worker serves each one."""
import os
import re
import signal
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, resp_cmd  # noqa: E402
from test_hello import Conn  # noqa: E402

KILL_BOUND_S = 1.0  # a killed client sees EOF within this


def pid_of(c):
    return int(re.search(r"process_id:(\d+)", c.cmd("INFO", "server").decode()).group(1))


def id_of(c):
    return int(c.cmd("CLIENT", "ID")[1:-2])


def listing(c, *extra):
    """CLIENT LIST's lines as dicts (the field order kept in '_keys')."""
    r = c.cmd("CLIENT", "LIST", *extra)
    body = r.split(b"\r\n", 1)[1][:-2].decode()
    out = []
    for line in body.splitlines():
        kv = [f.split("=", 1) for f in line.split(" ")]
        d = dict(kv)
        d["_keys"] = [k for k, _ in kv]
        out.append(d)
    return out


def eof_within(c, bound):
    """Seconds until c's next read sees the end, or None past bound."""
    t0 = time.monotonic()
    c.s.settimeout(bound)
    try:
        data = c.s.recv(100)
    except socket.timeout:
        return None
    except ConnectionResetError:
        data = b""
    return time.monotonic() - t0 if data == b"" else None


class TestClientsAcrossWorkers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pc = Server(workers=3).start()

    @classmethod
    def tearDownClass(cls):
        cls.pc.cleanup()

    def spread(self, n=15):
        """n named connections; skips the test when they all share a worker."""
        conns = [Conn(self.pc.port) for _ in range(n)]
        self.addCleanup(lambda: [c.close() for c in conns])
        info = []
        for i, c in enumerate(conns):
            self.assertEqual(c.cmd("CLIENT", "SETNAME", "conn-%d" % i), b"+OK\r\n")
            info.append((c, id_of(c), pid_of(c), "conn-%d" % i))
        if len({p for _, _, p, _ in info}) < 2:
            self.skipTest("the kernel put every connection on one worker")
        return info

    def pair_on_two_workers(self, info):
        a = info[0]
        b = next(x for x in info if x[2] != a[2])
        return a, b

    def test_list_shows_every_worker(self):
        info = self.spread()
        want = {i: name for _, i, _, name in info}
        fields = None
        for c, _, pid, _ in {x[2]: x for x in info}.values():  # one per worker
            c.cmd("SELECT", "0")
            rows = listing(c)
            ids = [int(r["id"]) for r in rows]
            self.assertEqual(len(ids), len(set(ids)), "ids unique: %s" % ids)
            got = {int(r["id"]): r["name"] for r in rows}
            for i, name in want.items():
                self.assertEqual(got.get(i), name, "id %d seen from worker %d" % (i, pid))
            keys = {tuple(r["_keys"]) for r in rows}
            self.assertEqual(len(keys), 1, "one line format for every worker's entries")
            fields = fields or keys
            self.assertEqual(keys, fields)
            self.assertEqual(len(listing(c, "TYPE", "normal")), len(rows))
            self.assertEqual(listing(c, "TYPE", "pubsub"), [])
        # a name set later is seen by the other workers; ID filters them
        (a, _, _, _), (b, bid, _, _) = self.pair_on_two_workers(info)
        b.cmd("CLIENT", "SETNAME", "renamed")
        b.cmd("HELLO", "3")
        rows = listing(a, "ID", str(bid))
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0]["name"], "renamed")
        self.assertEqual(rows[0]["resp"], "3")
        self.assertEqual(rows[0]["cmd"], "hello")
        self.assertEqual(rows[0]["laddr"], "127.0.0.1:%d" % self.pc.port)
        b.cmd("SELECT", "0")
        self.assertEqual(listing(a, "ID", str(bid), "99999999")[0]["db"], "0")

    def test_names_never_torn(self):
        """Names rewritten in a loop on one worker, listed from another:
        every copy is one of the names written (the seqlock), a name past
        127 bytes shows its first 127 and '...'."""
        import threading
        info = self.spread()
        (a, _, _, _), (b, bid, _, _) = self.pair_on_two_workers(info)
        names = ["a" * 100, "b" * 20, "c" * 200]
        shown = {names[0], names[1], "c" * 127 + "..."}
        self.assertEqual(b.cmd("CLIENT", "SETNAME", names[0]), b"+OK\r\n")
        stop = threading.Event()

        def writer():
            k = 0
            while not stop.is_set():
                batch = b"".join(resp_cmd("CLIENT", "SETNAME", names[(k + j) % 3])
                                 for j in range(50))
                b.s.sendall(batch)
                for _ in range(50):
                    self.assertEqual(b.f.readline(), b"+OK\r\n")
                k += 50
        t = threading.Thread(target=writer)
        t.start()
        seen = set()
        try:
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                rows = listing(a, "ID", str(bid))
                self.assertEqual(len(rows), 1)
                seen.add(rows[0]["name"])
        finally:
            stop.set()
            t.join()
        self.assertTrue(seen <= shown, seen - shown)
        self.assertGreaterEqual(len(seen), 2, "the names changed while listed")

    def test_kill_id_on_another_worker(self):
        info = self.spread()
        (a, _, _, _), (b, bid, _, _) = self.pair_on_two_workers(info)
        self.assertEqual(a.cmd("CLIENT", "KILL", "ID", str(bid)), b":1\r\n")
        took = eof_within(b, KILL_BOUND_S)
        self.assertIsNotNone(took, "the victim sees EOF within %.1f s" % KILL_BOUND_S)
        deadline = time.monotonic() + KILL_BOUND_S
        while bid in [int(r["id"]) for r in listing(a)] and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertNotIn(bid, [int(r["id"]) for r in listing(a)])
        self.assertEqual(a.cmd("CLIENT", "KILL", "ID", str(bid)), b":0\r\n")
        self.assertEqual(a.cmd("PING"), b"+PONG\r\n")

    def test_kill_addr_on_another_worker(self):
        info = self.spread()
        a = info[0][0]
        others = [x for x in info if x[2] != info[0][2]]
        (b, _, _, _), (d, _, _, _) = others[0], others[-1]
        if others[0] is others[-1]:
            self.skipTest("one connection only on the other workers")
        baddr = re.search(r"addr=(\S+)", b.cmd("CLIENT", "INFO").decode()).group(1)
        daddr = re.search(r"addr=(\S+)", d.cmd("CLIENT", "INFO").decode()).group(1)
        self.assertEqual(a.cmd("CLIENT", "KILL", baddr), b"+OK\r\n")  # the old form
        self.assertIsNotNone(eof_within(b, KILL_BOUND_S))
        self.assertEqual(a.cmd("CLIENT", "KILL", "ADDR", daddr), b":1\r\n")
        self.assertIsNotNone(eof_within(d, KILL_BOUND_S))
        # gone from the table once its worker closed it (a state, waited for)
        deadline = time.time() + 30
        while a.cmd("CLIENT", "KILL", baddr) != b"-ERR No such client\r\n" and \
                time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(a.cmd("CLIENT", "KILL", baddr), b"-ERR No such client\r\n")
        self.assertEqual(a.cmd("CLIENT", "KILL", "ADDR", daddr), b":0\r\n")

    def test_kill_skipme(self):
        info = self.spread()
        a = info[0][0]
        laddr = "127.0.0.1:%d" % self.pc.port
        # every connection of every worker but a (and any other test's)
        n = a.cmd("CLIENT", "KILL", "LADDR", laddr, "SKIPME", "yes")
        self.assertEqual(n, b":%d\r\n" % (len(info) - 1))
        for c, _, _, _ in info[1:]:
            self.assertIsNotNone(eof_within(c, KILL_BOUND_S))
        self.assertEqual(a.cmd("PING"), b"+PONG\r\n")
        deadline = time.time() + 30
        while len(listing(a)) != 1 and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(len(listing(a)), 1)
        other = Conn(self.pc.port)
        self.addCleanup(other.close)
        other.cmd("PING")
        self.assertEqual(a.cmd("CLIENT", "KILL", "LADDR", laddr, "SKIPME", "no"), b":2\r\n")
        self.assertIsNotNone(eof_within(a, KILL_BOUND_S), "SKIPME no kills the caller too")
        self.assertIsNotNone(eof_within(other, KILL_BOUND_S))

    def test_dead_worker_leaves_no_ghosts(self):
        info = self.spread()
        victim_pid = info[0][2]
        gone = {i for _, i, p, _ in info if p == victim_pid}
        observer = next(c for c, _, p, _ in info if p != victim_pid)
        os.kill(victim_pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ids = {int(r["id"]) for r in listing(observer)}
            if not ids & gone:
                break
            time.sleep(0.05)
        self.assertFalse(ids & gone, "the dead worker's entries are gone")
        # the restarted worker publishes its new connections
        deadline = time.monotonic() + 10
        new = None
        while new is None and time.monotonic() < deadline:
            c = Conn(self.pc.port)
            self.addCleanup(c.close)
            p = pid_of(c)
            if p not in {x[2] for x in info}:
                new = c
        self.assertIsNotNone(new, "a connection reaches the restarted worker")
        nid = id_of(new)
        self.assertIn(nid, {int(r["id"]) for r in listing(observer)})
        self.assertEqual(observer.cmd("CLIENT", "KILL", "ID", str(nid)), b":1\r\n")
        self.assertIsNotNone(eof_within(new, KILL_BOUND_S))


if __name__ == "__main__":
    unittest.main(verbosity=2)
