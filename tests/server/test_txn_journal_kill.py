"""kill -9 in the middle of EXECs, with the journal on (issue 33 item 4):
after the restart's replay every key of an EXEC holds the same EXEC's
value - the last acknowledged one, or the one in flight at the kill, whole
- never a prefix of an EXEC (docs/journal-format.md §3, PC_JREC_F_GROUP;
§7). Before the group records a worker killed between two of an EXEC's
journal records left a prefix that the replay applied.

Two clients write EXECs of GROUP (400) SETs of one value each to their
own groups (and one INCR per EXEC, so the EXEC spans two key shapes) as
fast as they can (a large EXEC: its journal hook calls take long enough
for a kill to land between two of them); the whole process group is killed with SIGKILL at a random
moment, several rounds. Modes `always` (each record written and synced in
the hook: the widest window) and `everysec` (the ring outlives the
process; the drainer writes it out at the next open)."""
import os
import random
import signal
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port  # noqa: E402

GROUP = 400
ROUNDS = int(os.environ.get("TXN_KILL_ROUNDS", "6"))


def writer(port, name, stop, acked):
    r = redis.Redis(port=port, socket_timeout=10)
    n = acked.get(name, 0)
    try:
        while not stop.is_set():
            n += 1
            p = r.pipeline(transaction=True)
            for i in range(GROUP):
                p.set("%s:%d" % (name, i), "%d:%s" % (n, "x" * 200))
            p.incr("%s:count" % name)
            p.execute()
            acked[name] = n
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        pass


class KillDuringExec(unittest.TestCase):
    def run_mode(self, mode):
        port = free_port()
        s = Server(port=port, db_mode=1, persist_collections="default",
                   journal="default=%s" % mode, workers=2, journal_rewrite_percent=0)
        s.opts["db_url"] = os.path.join(s.dir, "store")
        rng = random.Random(33)
        acked = {}
        dropped = 0
        try:
            s.start()
            for rnd in range(ROUNDS):
                stop = threading.Event()
                ts = [threading.Thread(target=writer, args=(port, "g%d" % i, stop, acked))
                      for i in range(2)]
                for t in ts:
                    t.start()
                # wait until this round's EXECs are well under way
                base = dict(acked)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and \
                        sum(acked.get(k, 0) - base.get(k, 0) for k in ("g0", "g1")) < 4:
                    time.sleep(0.005)
                time.sleep(rng.uniform(0, 0.05))
                os.killpg(s.proc.pid, signal.SIGKILL)
                stop.set()
                for t in ts:
                    t.join()
                s.kill_group()
                s.start()
                r = redis.Redis(port=port, socket_timeout=10)
                for g in ("g0", "g1"):
                    vals = r.mget(["%s:%d" % (g, i) for i in range(GROUP)])
                    seen = sorted({v.split(b":")[0].decode() if v else "nil" for v in vals})
                    self.assertEqual(len(seen), 1, "round %d %s: a part of an EXEC: the %d keys "
                                     "hold EXECs %s" % (rnd, g, GROUP, seen))
                    v = int(vals[0].split(b":")[0]) if vals[0] else 0
                    a = acked.get(g, 0)
                    # the acknowledged one, or the one in flight, whole
                    self.assertIn(v, (a, a + 1), "round %d %s: %d, acked %d" % (rnd, g, v, a))
                    self.assertEqual(int(r.get("%s:count" % g) or 0), v)
                    acked[g] = v  # the next EXEC of g writes v + 1
                dropped += s.log_text().count("an incomplete transaction")
            print("%s: %d rounds, %d incomplete transaction(s) dropped at replay, last EXECs %s"
                  % (mode, ROUNDS, dropped, acked), flush=True)
        finally:
            s.cleanup()

    def test_always(self):
        self.run_mode("always")

    def test_everysec(self):
        self.run_mode("everysec")


if __name__ == "__main__":
    unittest.main()
