"""SWAPDB: two collections exchanged at one instant for every worker.

- the replies of a scripted session, byte for byte against a real
  redis-server with two databases (values, DBSIZE, WATCH, MULTI);
- after SWAPDB, a client of the other worker reads the swapped databases
  at once, and PERF.* follows the collection its index now names;
- no half-swapped state, across two workers: while one client swaps 0 and
  1 over and over, readers in both workers run EXECs that read both
  databases and MGETs of ten keys, and must see each database whole, one
  collection each; and a writer in the other worker keeps writing database
  0 while the swapper, right after each +OK, reads the database it swapped
  away twice: nothing may arrive in it after the +OK (a write that resolved
  the old map and landed late would);
- a worker stopped inside a turn holds the swap back; the swapper killed
  while it waits leaves the map as it was (the master undoes it); left
  waiting past its deadline, SWAPDB gives up and swaps nothing;
- refused for journaled and persist_collections collections, and inside
  MULTI (EXECABORT).

SKIPPED (77) without /usr/bin/redis-server (the side-by-side part needs
it; the rest runs from the same file for simplicity).
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import Server, free_port, resp_cmd  # noqa: E402
from test_command_meta import Peer  # noqa: E402

REDIS = "/usr/bin/redis-server"


def worker_pid(peer):
    info = peer.ask("INFO", "server")[1][1].decode()
    return int(info.split("process_id:")[1].split()[0])


def peers_on_workers(port, n=2, proto=2):
    """One connection on each of n workers: {pid: Peer}."""
    got, spare = {}, []
    deadline = time.time() + 60
    while len(got) < n:
        if time.time() > deadline:
            raise RuntimeError("connections never reached %d workers" % n)
        p = Peer(port, proto)
        pid = worker_pid(p)
        if pid in got:
            spare.append(p)
        else:
            got[pid] = p
    for p in spare:
        p.close()
    return got


def val(reply):
    return reply[1][1]


class SwapSideBySide(unittest.TestCase):
    def test_session_against_redis(self):
        tmp = tempfile.TemporaryDirectory(prefix="swapdb-redis-")
        rport = free_port()
        redis = subprocess.Popen([REDIS, "--port", str(rport), "--bind", "127.0.0.1", "--save",
                                  "", "--appendonly", "no", "--databases", "2", "--dir",
                                  tmp.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", rport), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
            with Server(workers=2, collections="a;b") as pc:
                script = [
                    ("FLUSHALL",), ("SET", "x", "in0"), ("SET", "only0", "1"), ("SELECT", "1"),
                    ("SET", "x", "in1"), ("SELECT", "0"), ("SWAPDB", "0", "1"), ("GET", "x"),
                    ("GET", "only0"), ("DBSIZE",), ("SELECT", "1"), ("GET", "x"), ("GET", "only0"),
                    ("DBSIZE",), ("SWAPDB", "1", "0"), ("GET", "x"), ("SELECT", "0"),
                    ("GET", "x"),
                    # a watched key that exists in one of the two databases
                    ("WATCH", "x"), ("SWAPDB", "0", "1"), ("MULTI",), ("PING",), ("EXEC",),
                    ("WATCH", "only0"), ("SWAPDB", "0", "1"), ("MULTI",), ("GET", "x"),
                    ("EXEC",),
                    # a watch in another database is not touched
                    ("SELECT", "1"), ("WATCH", "zz"), ("SELECT", "0"), ("SWAPDB", "0", "0"),
                    ("MULTI",), ("PING",), ("EXEC",),
                    ("SWAPDB", "0", "2"), ("SWAPDB", "x", "0"), ("SWAPDB", "0", "-1"),
                    ("SWAPDB", "0"), ("GET", "x"), ("SELECT", "1"), ("GET", "x"),
                ]
                r, p = Peer(rport, 2), Peer(pc.port, 2)
                for args in script:
                    self.assertEqual(p.ask(*args)[0], r.ask(*args)[0], "%r" % (args,))
                r.close()
                p.close()
        finally:
            redis.terminate()
            redis.wait(timeout=10)
            tmp.cleanup()


class Swap(unittest.TestCase):
    def test_other_worker_and_perf(self):
        with Server(workers=2, collections="a;b") as pc:
            (pa, a), (pb, b) = peers_on_workers(pc.port).items()
            a.ask("SET", "k", "from-a")
            a.ask("SELECT", "1")
            a.ask("SET", "k", "from-b")
            b.ask("SELECT", "1")  # b stays on db 1 across the swap
            self.assertEqual(val(b.ask("GET", "k")), b"from-b")
            self.assertEqual(a.ask("SWAPDB", "0", "1")[0], b"+OK\r\n")
            self.assertEqual(val(b.ask("GET", "k")), b"from-a")  # the other worker, at once
            b.ask("SELECT", "0")
            self.assertEqual(val(b.ask("GET", "k")), b"from-b")
            # PERF.* takes the collection its index names now; by name, the same data
            self.assertIn(b'"collection":"b"', val(b.ask("PERF.STATS")))
            self.assertEqual(b.ask("PERF.GET", "k", "a")[0][:1], b"$")
            self.assertIn(b"from-a", val(b.ask("PERF.GET", "k", "a")))
            self.assertIn(b"db0:keys=1", val(b.ask("INFO", "keyspace")))
            a.close()
            b.close()

    def test_never_half_swapped(self):
        with Server(workers=2, collections="a;b") as pc:
            peers = peers_on_workers(pc.port)
            (spid, s), (opid, other) = peers.items()
            keys = ["m%d" % i for i in range(10)]
            s.ask("MSET", *[x for k in keys for x in (k, "A")])
            s.ask("SELECT", "1")
            s.ask("MSET", *[x for k in keys for x in (k, "B")])
            s.ask("SET", "tag", "none")
            s.ask("SELECT", "0")
            stop = threading.Event()
            bad, counts = [], {"exec": 0, "mget": 0, "writes": 0}

            def reader(port):
                ps = peers_on_workers(port)
                while not stop.is_set():
                    for p in ps.values():
                        raw, v = p.ask("MULTI")
                        for args in (("GET", "m0"), ("SELECT", "1"), ("GET", "m0"),
                                     ("SELECT", "0")):
                            p.ask(*args)
                        got = [x[1] for x in p.ask("EXEC")[1][1]]
                        if sorted([got[0], got[2]]) != [b"A", b"B"]:
                            bad.append(("exec", got))
                        counts["exec"] += 1
                        vals = set(x[1] for x in p.ask("MGET", *keys)[1][1])
                        if vals not in ({b"A"}, {b"B"}):
                            bad.append(("mget", vals))
                        counts["mget"] += 1
                for p in ps.values():
                    p.close()

            def writer():
                i = 0
                while not stop.is_set():
                    i += 1
                    other.ask("SET", "tag", str(i))
                    counts["writes"] += 1

            threads = [threading.Thread(target=reader, args=(pc.port,)) for _ in range(2)]
            threads.append(threading.Thread(target=writer))
            for t in threads:
                t.start()
            late = 0
            try:
                for n in range(400):
                    self.assertEqual(s.ask("SWAPDB", "0", "1")[0], b"+OK\r\n")
                    s.ask("SELECT", "1")  # where the writer's database 0 went
                    first = val(s.ask("GET", "tag"))
                    time.sleep(0.002)
                    if val(s.ask("GET", "tag")) != first:
                        late += 1
                    s.ask("SELECT", "0")
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=60)
            print("400 swaps; %d EXECs, %d MGETs, %d writes" % (counts["exec"], counts["mget"],
                                                              counts["writes"]))
            self.assertEqual(bad[:5], [])
            self.assertEqual(late, 0, "writes arrived in a swapped-away database after +OK")
            self.assertGreater(counts["exec"], 50)
            self.assertGreater(counts["writes"], 400)
            s.close()
            other.close()

    def stopped_worker(self, pc, attempts=30):
        """Stops the other worker inside a turn (it is fed a long pipeline)
        and sends SWAPDB from this one; returns (swapper peer, its worker
        pid, stopped pid) once SWAPDB is seen waiting, or None."""
        for _ in range(attempts):
            peers = peers_on_workers(pc.port)
            (spid, s), (bpid, b) = peers.items()
            burst = resp_cmd("GET", "nosuchkey") * 20000
            stop = threading.Event()
            b.s.settimeout(5)  # a paused reader never blocks the feeder for good

            def feed():
                try:
                    while not stop.is_set():
                        b.s.sendall(burst)
                except OSError:
                    pass
            t = threading.Thread(target=feed)
            t.start()
            time.sleep(0.2)
            os.kill(bpid, signal.SIGSTOP)
            s.s.sendall(resp_cmd("SWAPDB", "0", "1"))
            s.s.settimeout(0.5)
            try:
                answered = s.s.recv(100)
            except socket.timeout:
                answered = b""
            s.s.settimeout(30)
            stop.set()
            if answered == b"":
                return s, spid, bpid, b, t
            self.assertEqual(answered, b"+OK\r\n")  # the stopped worker was between turns
            os.kill(bpid, signal.SIGCONT)
            t.join(timeout=60)
            s.s.settimeout(30)
            self.assertEqual(s.ask("SWAPDB", "0", "1")[0], b"+OK\r\n")  # back as it was
            s.close()
            b.close()
        return None

    def test_stopped_worker_and_killed_swapper(self):
        with Server(workers=2, collections="a;b") as pc:
            first = Peer(pc.port, 2)
            first.ask("SET", "where", "in-a")
            got = self.stopped_worker(pc)
            self.assertIsNotNone(got, "never caught the other worker inside a turn")
            s, spid, bpid, b, feeder = got
            os.kill(spid, signal.SIGKILL)  # the swapper dies while it waits
            deadline = time.time() + 30
            while "died during SWAPDB" not in pc.log_text():
                self.assertLess(time.time(), deadline, pc.log_text())
                time.sleep(0.05)
            os.kill(bpid, signal.SIGCONT)
            feeder.join(timeout=60)
            fresh = Peer(pc.port, 2)
            # the other worker goes on, with the map as it was before the swap
            for _ in range(20):
                self.assertEqual(val(fresh.ask("GET", "where")), b"in-a")
                fresh.close()
                fresh = Peer(pc.port, 2)
            self.assertEqual(fresh.ask("SWAPDB", "0", "1")[0], b"+OK\r\n")  # nothing wedged
            self.assertEqual(fresh.ask("GET", "where")[0], b"$-1\r\n")
            fresh.close()
            b.close()
            first.close()

    def test_stuck_worker_swapper_gives_up(self):
        with Server(workers=2, collections="a;b") as pc:
            Peer(pc.port, 2).ask("SET", "where", "in-a")
            got = self.stopped_worker(pc)
            self.assertIsNotNone(got, "never caught the other worker inside a turn")
            s, spid, bpid, b, feeder = got
            try:
                s.s.settimeout(60)
                buf = b""
                while not buf.endswith(b"\r\n"):
                    chunk = s.s.recv(1000)
                    if not chunk:
                        break
                    buf += chunk
                self.assertTrue(buf.startswith(b"-ERR SWAPDB gave up: worker "), buf)
                self.assertIn(b"nothing was swapped", buf)
            finally:
                os.kill(bpid, signal.SIGCONT)
                feeder.join(timeout=60)
            fresh = Peer(pc.port, 2)
            self.assertEqual(val(fresh.ask("GET", "where")), b"in-a")
            fresh.close()
            s.close()
            b.close()

    def test_refused(self):
        with tempfile.TemporaryDirectory(prefix="swapdb-store-") as d:
            with Server(workers=1, collections="a;b;c", db_url=os.path.join(d, "store"),
                        persist_collections="a", journal="b=everysec") as pc:
                p = Peer(pc.port, 2)
                for x, y, name, why in (("0", "2", "a", "in persist_collections"),
                                        ("2", "1", "b", "journaled")):
                    self.assertEqual(
                        p.ask("SWAPDB", x, y)[0],
                        ("-ERR SWAPDB is refused for persisted collections: '%s' (db %s) is %s, "
                         "and a restart loads each collection under its configured index\r\n"
                         % (name, "0" if name == "a" else "1", why)).encode())
                p.ask("MULTI")
                self.assertIn(b"not allowed inside MULTI", p.ask("SWAPDB", "2", "2")[0])
                self.assertTrue(p.ask("EXEC")[0].startswith(b"-EXECABORT"))
                p.close()


if __name__ == "__main__":
    if not os.access(REDIS, os.X_OK):
        print("SKIPPED: no redis-server (Debian package redis-server)")
        sys.exit(77)
    unittest.main(verbosity=2)
