"""A kill -9 of every pcached process at once, under write load, with the
journal in everysec (docs/journal-format.md §6.1, issue: durability).

A write is acknowledged once its record is in its worker's ring; the rings
live in a shared mapping of <store>/journal/rings, so when the master, the
workers and the maintenance process all die together the records stay in
the page cache and the next start writes them out before the replay. Each
round: writers on several connections (pipelined SETs of per-writer keys,
INCRs of per-writer counters) record what was acknowledged; the whole
process group gets SIGKILL at a random moment; pcached starts again on the
same store. Then every key holds its last acknowledged value or the value of
a write that was in flight (sent, never answered), never anything older, and
every counter is at least its last acknowledged value. Over the rounds the
restarts must have written out records from the rings (the log says how
many), or the test did not exercise what it is about."""
import os
import random
import re
import signal
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402

ROUNDS = int(os.environ.get("PCJ_CRASH_ROUNDS", "30"))
WRITERS = 4
KEYS = 200   # per writer
BATCH = 25   # SETs per pipeline


class Writer(threading.Thread):
    def __init__(self, port, wid, rnd, acked):
        super().__init__(daemon=True)
        self.port, self.wid, self.rnd = port, wid, rnd
        self.acked = acked           # key -> last acknowledged value (shared across rounds)
        self.inflight = {}           # key -> value sent in the batch that got no answer
        self.counter_acked = acked.setdefault("c%d" % wid, 0)
        self.counter_inflight = False
        self.seq = 0
        self.writes = 0

    def run(self):
        r = redis.Redis(port=self.port, socket_timeout=10)
        try:
            while True:
                keys = random.sample(range(KEYS), BATCH)
                batch = {}
                p = r.pipeline(transaction=False)
                for k in keys:
                    self.seq += 1
                    key = "w%d:%d" % (self.wid, k)
                    val = "r%d:%d" % (self.rnd, self.seq)
                    batch[key] = val
                    p.set(key, val)
                p.incr("c%d" % self.wid)
                self.inflight = batch
                self.counter_inflight = True
                res = p.execute()
                if not all(x is True for x in res[:-1]):
                    raise AssertionError("a SET was refused: %r" % (res,))
                self.acked.update(batch)
                self.acked["c%d" % self.wid] = int(res[-1])
                self.inflight = {}
                self.counter_inflight = False
                self.writes += len(batch) + 1
        except (redis.ConnectionError, redis.TimeoutError, ConnectionError, OSError):
            return  # the kill: what was sent and not answered stays in flight


class CrashAll(unittest.TestCase):
    def test_kill_every_process_everysec(self):
        s = Server(db_mode=1, persist_collections="default", journal="default=everysec",
                   snapshot_period_s=0, workers=2)
        store = os.path.join(s.dir, "store")
        s.opts["db_url"] = store
        acked = {}
        recovered = 0
        writes = 0
        try:
            s.start()
            for rnd in range(ROUNDS):
                writers = [Writer(s.port, w, rnd, acked) for w in range(WRITERS)]
                for w in writers:
                    w.start()
                time.sleep(random.uniform(0.2, 1.8))  # the drainer starts after ~1 s
                if rnd % 5 == 4:
                    # a snapshot now and then, so rings hold records of
                    # more than one save epoch at the kill
                    redis.Redis(port=s.port, socket_timeout=10).bgsave()
                    time.sleep(random.uniform(0.0, 0.1))
                os.killpg(s.proc.pid, signal.SIGKILL)
                for w in writers:
                    w.join(15)
                    self.assertFalse(w.is_alive(), "a writer hung after the kill")
                    writes += w.writes
                inflight = {}
                counters_inflight = set()
                for w in writers:
                    inflight.update(w.inflight)
                    if w.counter_inflight:
                        counters_inflight.add("c%d" % w.wid)
                s.kill_group()
                s.start()
                log = s.log_text()
                m = re.search(r"wrote out (\d+) acknowledged records", log)
                if m:
                    recovered += int(m.group(1))
                self.check(s.port, acked, inflight, counters_inflight, rnd, log)
                # what was in flight and is there now is the key's value from here on
                for key in inflight:
                    acked.pop(key, None)
                self.refresh(s.port, acked, inflight)
            print("%d rounds, %d acknowledged writes, %d records written out from the rings "
                  "at restarts" % (ROUNDS, writes, recovered))
            self.assertGreater(recovered, 0,
                               "no restart found records in the rings: the kill never caught "
                               "an undrained write, so this run proves nothing")
        finally:
            s.cleanup()

    def check(self, port, acked, inflight, counters_inflight, rnd, log):
        r = redis.Redis(port=port, socket_timeout=10)
        keys = sorted(set(acked) | set(inflight))
        got = dict(zip(keys, r.mget(keys))) if keys else {}
        missing = []
        for key in keys:
            have = got[key].decode() if got[key] is not None else None
            if key.startswith("c"):
                want = acked.get(key, 0)
                n = int(have) if have is not None else 0
                ok = n == want or (key in counters_inflight and n == want + 1)
                if not ok:
                    missing.append("%s: %s, acknowledged %d" % (key, have, want))
                continue
            allowed = {acked.get(key), inflight.get(key)}
            if key in acked:  # else never acknowledged: absent is allowed (its
                allowed.discard(None)  # first write was in flight at the kill)
            if have not in allowed:
                missing.append("%s: %s, acknowledged %s (in flight %s)" %
                               (key, have, acked.get(key), inflight.get(key)))
        r.close()
        if missing:
            self.fail("round %d: %d keys lost their last acknowledged write, e.g. %s\nlog:\n%s" %
                      (rnd, len(missing), missing[:5], log[-3000:]))

    def refresh(self, port, acked, inflight):
        """Keys whose in-flight write reached the table, and the counters:
        their value now."""
        r = redis.Redis(port=port, socket_timeout=10)
        keys = list(inflight) + ["c%d" % w for w in range(WRITERS)]
        for key, v in zip(keys, r.mget(keys)):
            if v is not None:
                acked[key] = int(v) if key.startswith("c") else v.decode()
        r.close()


if __name__ == "__main__":
    unittest.main()
