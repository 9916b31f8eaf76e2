"""The journal's bound (docs/journal-format.md §7, issue: durability): with
no periodic save (snapshot_period_s = 0) and sustained writes, the
maintenance process saves the collection whenever its journal passes
journal_rewrite_min_mb (the snapshot of a small key space is smaller), and
the save retires the segments it covers. The journal folder never holds
more than the bound plus the writes of one maintenance tick (a second) and
of the save that follows (allowed: half a second); without the bound it
grows with every write (over a hundred MiB here: PCJ_BOUND_PERCENT=0 runs
the test with the bound off, which is the behaviour before it, and fails)."""
import os
import re
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402

KEYS = 2000
VALUE = b"v" * 200
RECORD = 40 + len("k0000") + len(VALUE)  # bytes of one SET record (docs/journal-format.md §3)
BOUND = 1 << 20                          # journal_rewrite_min_mb = 1
SECONDS = 10


def journal_bytes(store):
    d = os.path.join(store, "journal")
    total = 0
    for name in os.listdir(d):
        if name.endswith(".wal"):
            try:
                total += os.stat(os.path.join(d, name)).st_size
            except FileNotFoundError:  # retired meanwhile
                pass
    return total


class JournalBound(unittest.TestCase):
    def test_journal_stays_bounded(self):
        s = Server(db_mode=1, persist_collections="default", journal="default=everysec",
                   snapshot_period_s=0, journal_rewrite_min_mb=1,
                   journal_rewrite_percent=int(os.environ.get("PCJ_BOUND_PERCENT", "100")),
                   workers=2)
        store = os.path.join(s.dir, "store")
        s.opts["db_url"] = store
        try:
            s.start()
            stop = threading.Event()
            ops = []  # (monotonic time, SETs acknowledged so far)
            done = [0]

            def writer():
                r = redis.Redis(port=s.port, socket_timeout=10)
                i = 0
                while not stop.is_set():
                    p = r.pipeline(transaction=False)
                    for _ in range(500):
                        p.set("k%04d" % (i % KEYS), VALUE)
                        i += 1
                    p.execute()
                    done[0] = i
                    ops.append((time.monotonic(), i))
                r.close()

            t = threading.Thread(target=writer)
            t.start()
            def most_per_s():
                """The most journal bytes written in any one second so far."""
                per_s, j, snap = 0, 0, list(ops)
                for k in range(len(snap)):
                    while snap[k][0] - snap[j][0] > 1.0:
                        j += 1
                    per_s = max(per_s, (snap[k][1] - snap[j][1]) * RECORD)
                return per_s

            peak, samples = 0, []
            t0 = time.monotonic()
            # SECONDS, then on until enough was written to tell a bounded
            # journal from an unbounded one (a state: a busy machine writes
            # less, in bursts), with a generous deadline
            while time.monotonic() - t0 < SECONDS or (
                    time.monotonic() - t0 < 120
                    and done[0] * RECORD <= 2.5 * (BOUND + 1.5 * most_per_s())):
                b = journal_bytes(store)
                samples.append(b)
                peak = max(peak, b)
                time.sleep(0.05)
            stop.set()
            t.join()
            per_s = most_per_s()
            written = done[0] * RECORD
            print("wrote %d SETs (%.1f MiB of records, at most %.1f MiB/s); journal peak %.2f MiB,"
                  " bound %.2f MiB" % (done[0], written / 2**20, per_s / 2**20, peak / 2**20,
                                        BOUND / 2**20))
            allowed = BOUND + 1.5 * per_s
            # an unbounded journal ends at about `written`
            self.assertGreater(written, 2 * allowed,
                               "too few writes to tell a bounded journal from an unbounded one")
            self.assertLessEqual(peak, allowed,
                                 "journal grew past its bound + 1.5 s of writes")
            log = s.log_text()
            saves = re.findall(r"journal of default is (\d+) bytes .*past its bound", log)
            self.assertGreater(len(saves), 1, log[-3000:])
            for n in saves:
                self.assertGreaterEqual(int(n), BOUND)
            # what the journal and the bound-triggered snapshots hold survives a restart
            self.assertEqual(s.stop(), 0)
            s.start()
            r = redis.Redis(port=s.port, socket_timeout=10)
            self.assertEqual(r.dbsize(), KEYS)
            self.assertEqual(r.get("k0000"), VALUE)
            r.close()
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
