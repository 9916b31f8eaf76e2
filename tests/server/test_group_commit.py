"""Group commit of the journal's always mode (docs/journal-format.md §6.3):
replies wait for a batch's fdatasync, which serves every connection of a
worker at once.

- Durability: many concurrent clients write under `always` across two
  workers; every process of pcached (master, workers, maintenance) is
  killed with SIGKILL in the middle of the load; after a restart every
  write a client got +OK for is there with its value. (A process kill
  leaves the page cache: this checks that no reply leaves before its
  record is in the segment, not the fdatasync itself.)
- Order: pipelined clients mixing INCR, SET, GET and DEL on keys of their
  own, several at once so that their replies are held and released by
  batches that interleave; every reply is the one its command must get,
  in order.
- Mixed modes: an everysec collection next to an always one in the same
  worker keeps answering, and both are restored.
"""
import os
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402


def always_server(workdir=None, **extra):
    s = Server(workdir=workdir, db_mode=1, persist_collections="default",
               journal="default=always", workers=2, journal_rewrite_percent=0, **extra)
    s.opts["db_url"] = os.path.join(s.dir, "store")
    return s


class GroupCommit(unittest.TestCase):
    def test_kill9_every_process_keeps_acknowledged_writes(self):
        s = always_server().start()
        acked, lock, errors = {}, threading.Lock(), []
        stop = threading.Event()

        def writer(t):
            r = redis.Redis(port=s.port, socket_timeout=10)
            i = 0
            try:
                while not stop.is_set():
                    k, v = "w:%d:%d" % (t, i), b"v%d-%d" % (t, i) * 10
                    if r.set(k, v):
                        with lock:
                            acked[k] = v
                    i += 1
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                pass  # the kill: a write in flight has no answer
            except Exception as e:  # noqa: B902 - reported by the test
                errors.append(repr(e))
        ths = [threading.Thread(target=writer, args=(t,)) for t in range(24)]
        for th in ths:
            th.start()
        time.sleep(2.0)
        pids = [s.proc.pid] + s.children()
        s.kill_group()  # SIGKILL to the whole group, while the writers write
        stop.set()
        for th in ths:
            th.join()
        self.assertEqual(errors, [])
        self.assertGreaterEqual(len(pids), 3, "master, workers and maintenance")
        with lock:
            snapshot = dict(acked)
        self.assertGreater(len(snapshot), 200, "too few writes to mean anything")
        s2 = always_server(workdir=s.dir)
        s2.start()
        try:
            r = redis.Redis(port=s2.port, socket_timeout=10)
            keys = list(snapshot)
            missing = []
            for at in range(0, len(keys), 500):
                part = keys[at:at + 500]
                got = r.mget(part)
                missing += [k for k, g in zip(part, got) if g != snapshot[k]]
            print("\n%d acknowledged writes, %d missing after kill -9 + restart"
                  % (len(snapshot), len(missing)), file=sys.stderr)
            self.assertEqual(missing[:5], [], "%d acknowledged writes lost" % len(missing))
        finally:
            s2.cleanup()
            s.cleanup()

    def test_pipelined_replies_stay_in_order(self):
        s = always_server().start()
        errors = []

        def client(t):
            try:
                r = redis.Redis(port=s.port, socket_timeout=20)
                n = 0
                for rnd in range(30):
                    p = r.pipeline(transaction=False)
                    want = []
                    for i in range(40):
                        k = "p:%d:%d" % (t, i % 7)
                        op = (rnd + i) % 4
                        if op == 0:
                            n += 1
                            p.incr("ctr:%d" % t)
                            want.append(n)
                        elif op == 1:
                            v = b"%d-%d-%d" % (t, rnd, i)
                            p.set(k, v)
                            want.append(True)
                            want.append(("expect", k, v))
                        elif op == 2:
                            p.get("ctr:%d" % t)
                            want.append(b"%d" % n)
                        else:
                            p.delete(k)
                            want.append(("del", k))
                    # the model: replay the expected state of this client's keys
                    got = p.execute()
                    self.check(t, rnd, want, got)
            except Exception as e:  # noqa: B902 - reported by the test
                errors.append("client %d: %r" % (t, e))
        self._state = {}
        ths = [threading.Thread(target=client, args=(t,)) for t in range(8)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        try:
            self.assertEqual(errors[:3], [])
        finally:
            s.cleanup()

    def check(self, t, rnd, want, got):
        """want holds one entry per command but SET, which adds a marker
        after its own: the marker records the key's new value for the
        DELs that follow (a DEL answers 1 when the key exists)."""
        st = self._state.setdefault(t, {})
        gi = 0
        for w in want:
            if isinstance(w, tuple) and w[0] == "expect":
                st[w[1]] = w[2]
                continue
            g = got[gi]
            gi += 1
            if isinstance(w, tuple) and w[0] == "del":
                exp = 1 if st.pop(w[1], None) is not None else 0
                if g != exp:
                    raise AssertionError("round %d reply %d: DEL %s got %r, want %r"
                                         % (rnd, gi - 1, w[1], g, exp))
            elif g != w:
                raise AssertionError("round %d reply %d: got %r, want %r" % (rnd, gi - 1, g, w))
        if gi != len(got):
            raise AssertionError("%d replies for %d commands" % (len(got), gi))

    def test_always_next_to_everysec(self):
        s = Server(db_mode=1, persist_collections="default,ev", collections="default;ev",
                   journal="default=always;ev=everysec", workers=1, journal_rewrite_percent=0)
        s.opts["db_url"] = os.path.join(s.dir, "store")
        s.start()
        try:
            r0 = redis.Redis(port=s.port, db=0, socket_timeout=10)
            r1 = redis.Redis(port=s.port, db=1, socket_timeout=10)
            for i in range(300):
                self.assertTrue(r0.set("a%d" % i, b"x%d" % i))
                self.assertTrue(r1.set("e%d" % i, b"y%d" % i))
            time.sleep(1.5)  # everysec: its drainer writes the ring out
            s.kill_group()
            s.start()
            r0 = redis.Redis(port=s.port, db=0, socket_timeout=10)
            r1 = redis.Redis(port=s.port, db=1, socket_timeout=10)
            self.assertEqual([r0.get("a%d" % i) for i in range(300)],
                             [b"x%d" % i for i in range(300)])
            self.assertEqual([r1.get("e%d" % i) for i in range(300)],
                             [b"y%d" % i for i in range(300)])
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main()
