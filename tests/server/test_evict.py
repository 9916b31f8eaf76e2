"""Eviction in pcached (issue 21, docs/pcached.md §2.2): maxmemory and
maxmemory-policy as Redis spells them, per-collection `eviction`, CONFIG
GET / SET at run time, the counters (INFO, perf_stats, /metrics), the
evicted event, and a journaled collection that evicts and restarts.

Each server has a small cap (maxmemory = 4mb in a 32 MiB arena), so a fill
is a few seconds of pipelined SETs. "What fits" is measured, not assumed:
the same server with noeviction, filled until -OOM."""
import http.client
import json
import os
import signal
import sys
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port  # noqa: E402

CAP = "4mb"
CAP_BYTES = 4 << 20
VAL = b"v" * 1000
BATCH = 500


def server(**opts):
    o = dict(workers=1, mem_mb=32, maxmemory=CAP)
    o.update(opts)
    return Server(**o)


def fill(r, prefix, n, val=VAL, ex=None, start=0):
    """SETs prefix+i for i in [start, start+n); returns (oks, ooms)."""
    ok = oom = 0
    for b in range(start, start + n, BATCH):
        p = r.pipeline(transaction=False)
        for i in range(b, min(b + BATCH, start + n)):
            p.set(b"%s%08d" % (prefix, i), val, ex=ex)
        for x in p.execute(raise_on_error=False):
            if isinstance(x, redis.ResponseError):
                if not str(x).startswith("OOM"):
                    raise x
                oom += 1
            else:
                ok += 1
    return ok, oom


def fill_until_oom(r, prefix, val=VAL, ex=None):
    """SETs prefix+0, prefix+1, ... until one gets -OOM; returns its index,
    so that prefix+i for every i below it was acknowledged. (A SET after it
    in the same pipelined batch may still fit, in room the maintenance
    process gave back meanwhile: it is not counted.)"""
    n = 0
    while True:
        p = r.pipeline(transaction=False)
        for i in range(n, n + BATCH):
            p.set(b"%s%08d" % (prefix, i), val, ex=ex)
        for x in p.execute(raise_on_error=False):
            if isinstance(x, redis.ResponseError):
                if not str(x).startswith("OOM"):
                    raise x
                return n
            n += 1
        if n > 10_000_000:
            raise AssertionError("never full")


def present(r, prefix, n):
    """How many of prefix+i, i < n, exist."""
    got = 0
    for b in range(0, n, BATCH):
        got += r.exists(*[b"%s%08d" % (prefix, i) for i in range(b, min(b + BATCH, n))])
    return got


_fits = None


def fits():
    """Values of VAL's size that fit under CAP with noeviction."""
    global _fits
    if _fits is None:
        with server() as s:
            _fits = fill_until_oom(redis.Redis(port=s.port), b"f:")
    return _fits


class Fill(unittest.TestCase):
    def test_lru_serves_every_write_and_stays_bounded(self):
        n = 20 * fits()
        with server(maxmemory_policy="allkeys-lru") as s:
            r = redis.Redis(port=s.port)
            ok, oom = fill(r, b"k:", n)
            self.assertEqual((ok, oom), (n, 0))
            # the maintenance process may still evict ahead of need (to its
            # low-water mark) while we read: a key it took out between the
            # two reads is in neither. So read until a read of DBSIZE
            # between two equal counts adds up; a key lost for good never
            # does, and fails below.
            deadline = time.time() + 30
            while True:
                before = r.info("stats")["evicted_keys"]
                size = r.dbsize()
                evicted = r.info("stats")["evicted_keys"]
                if (before == evicted and size + evicted == n) or time.time() > deadline:
                    break
                time.sleep(0.05)
            print("fits %d, wrote %d, dbsize %d, evicted_keys %d"
                  % (fits(), n, size, evicted))
            self.assertGreater(evicted, 0)
            self.assertLessEqual(size, fits() * 1.05)
            self.assertGreater(size, fits() // 2)
            # no TTLs: every key written is either present or evicted
            self.assertEqual(size + evicted, n)
            mem = r.info("memory")
            self.assertEqual(mem["maxmemory"], CAP_BYTES)
            self.assertEqual(mem["maxmemory_policy"], "allkeys-lru")
            self.assertEqual(mem["pcache_memory_limit"], CAP_BYTES)
            self.assertEqual(mem["pcache_memory_limit_by"], "maxmemory")
            self.assertLessEqual(mem["used_memory_dataset"], CAP_BYTES)

    def test_noeviction_answers_oom_and_reads_still_work(self):
        with server() as s:  # maxmemory_policy's default
            r = redis.Redis(port=s.port)
            self.assertEqual(r.config_get("maxmemory-policy"), {"maxmemory-policy": "noeviction"})
            n = fill_until_oom(r, b"k:")
            with self.assertRaises(redis.ResponseError) as e:
                r.set(b"one-more", VAL)
            self.assertTrue(str(e.exception).startswith("OOM command not allowed"), e.exception)
            self.assertEqual(r.get(b"k:%08d" % 0), VAL)
            self.assertEqual(r.get(b"k:%08d" % (n - 1)), VAL)
            self.assertEqual(r.dbsize(), n)
            self.assertEqual(r.info("stats")["evicted_keys"], 0)
            # a delete makes room again
            r.delete(b"k:%08d" % 0)
            self.assertTrue(r.set(b"one-more", VAL))

    def test_volatile_lru_keeps_keys_without_ttl(self):
        f = fits()
        with server(maxmemory_policy="volatile-lru") as s:
            r = redis.Redis(port=s.port)
            keep = f // 3
            self.assertEqual(fill(r, b"p:", keep), (keep, 0))
            # TTL keys past the cap: they evict one another
            ok, oom = fill(r, b"t:", 3 * f, ex=3600)
            self.assertEqual((ok, oom), (3 * f, 0))
            self.assertGreater(r.info("stats")["evicted_keys"], 0)
            self.assertEqual(present(r, b"p:", keep), keep)
            # keys without TTL now take the TTL keys' room, then -OOM: the
            # policy never takes a key without TTL
            more = fill_until_oom(r, b"q:")
            self.assertGreater(more, 0)
            self.assertEqual(present(r, b"p:", keep), keep)
            self.assertEqual(present(r, b"q:", more), more)
            self.assertLess(present(r, b"t:", 3 * f), f // 10)


class Recency(unittest.TestCase):
    """Keys read often survive a stream of keys never read."""

    def survival(self, policy):
        f = fits()
        hot = f // 5
        with server(maxmemory_policy=policy) as s:
            r = redis.Redis(port=s.port)
            fill(r, b"h:", hot)
            cold = 0
            for _ in range(8):  # 8 x half the cache of cold keys, hot keys read between
                fill(r, b"c:", f // 2, start=cold)
                cold += f // 2
                p = r.pipeline(transaction=False)
                for i in range(hot):
                    p.get(b"h:%08d" % i)
                p.execute()
            h = present(r, b"h:", hot) / hot
            c = present(r, b"c:", cold) / cold
            print("%s: hot keys present %.3f, cold keys present %.3f" % (policy, h, c))
            return h, c

    def test_lru(self):
        # CLOCK approximates LRU: exact LRU would keep every hot key here (hot
        # keys and the cold keys between two reads are 70% of the cache);
        # CLOCK kept 74.5% when this was written, 93% with reads every 1/8
        h, c = self.survival("allkeys-lru")
        self.assertGreater(h, 0.6)
        self.assertGreater(h, c + 0.4)

    def test_s3fifo(self):
        h, c = self.survival("allkeys-s3fifo")
        self.assertGreater(h, 0.9)
        self.assertGreater(h, c + 0.4)


class Runtime(unittest.TestCase):
    def test_config_set_policy_and_maxmemory(self):
        # no cap at first: mem_mb is the limit
        with server(workers=2, maxmemory=0) as s:
            r = redis.Redis(port=s.port)
            self.assertEqual(r.config_get("maxmemory"), {"maxmemory": "0"})
            self.assertEqual(r.info("memory")["pcache_memory_limit_by"], "arena")
            # Redis's LFU: refused, with the names to use, and nothing changes
            for name in ("maxmemory-policy", "maxmemory_policy"):
                with self.assertRaises(redis.ResponseError) as e:
                    r.config_set(name, "allkeys-lfu")
                self.assertIn("CONFIG SET failed", str(e.exception))
                self.assertIn("allkeys-s3fifo", str(e.exception))
            with self.assertRaises(redis.ResponseError):
                r.config_set("maxmemory-policy", "volatile-ttl")
            with self.assertRaises(redis.ResponseError):
                r.config_set("maxmemory", "4zb")
            self.assertEqual(r.config_get("maxmemory-policy"), {"maxmemory-policy": "noeviction"})
            self.assertEqual(r.info("memory")["maxmemory_policy"], "noeviction")
            self.assertEqual(r.config_get("maxmemory"), {"maxmemory": "0"})
            # the cap at run time: noeviction answers -OOM at it
            self.assertTrue(r.config_set("maxmemory", CAP))
            self.assertEqual(r.config_get("maxmemory"), {"maxmemory": str(CAP_BYTES)})
            n = fill_until_oom(r, b"k:")
            self.assertLessEqual(n, fits() * 1.05)
            # the policy at run time: the next fill evicts, every write answered
            self.assertTrue(r.config_set("maxmemory-policy", "ALLKEYS-LRU"))
            self.assertEqual(fill(r, b"m:", 3 * fits()), (3 * fits(), 0))
            self.assertGreater(r.info("stats")["evicted_keys"], 0)
            # every worker sees it: new connections land on either one
            seen = set()
            for _ in range(12):
                c = redis.Redis(port=s.port)
                seen.add(c.info("server")["worker_slot"])
                self.assertEqual(c.config_get("maxmemory-policy"),
                                 {"maxmemory-policy": "allkeys-lru"})
                self.assertEqual(c.config_get("maxmemory_policy"),
                                 {"maxmemory_policy": "allkeys-lru"})
                self.assertEqual(c.info("memory")["maxmemory"], CAP_BYTES)
                c.close()
            print("workers answering: %s" % sorted(seen))

    def test_override_is_not_the_global_setting(self):
        with server(collections="a;b", maxmemory_policy="allkeys-lru",
                    eviction="b=noeviction") as s:
            r = redis.Redis(port=s.port)
            r1 = redis.Redis(port=s.port, db=1)
            self.assertEqual(r.info("memory")["maxmemory_policy"], "allkeys-lru")
            self.assertEqual(r1.info("memory")["maxmemory_policy"], "noeviction")
            self.assertEqual(r1.config_get("maxmemory-policy"), {"maxmemory-policy": "noeviction"})
            self.assertTrue(r.config_set("maxmemory-policy", "allkeys-s3fifo"))
            self.assertEqual(r.config_get("maxmemory-policy"),
                             {"maxmemory-policy": "allkeys-s3fifo"})
            self.assertEqual(r1.config_get("maxmemory-policy"), {"maxmemory-policy": "noeviction"})
            pc = r.info("pcache")
            self.assertEqual(pc["coll_a"]["eviction"], "allkeys-s3fifo")
            self.assertEqual(pc["coll_b"]["eviction"], "noeviction")

    def test_bad_configuration_refused_at_start(self):
        for opts, want in (({"maxmemory_policy": "allkeys-lfu"}, "use allkeys-s3fifo"),
                           ({"maxmemory-policy": "volatile-lfu"}, "use volatile-s3fifo"),
                           ({"eviction": "nosuch=allkeys-lru"}, "'nosuch' is not a declared"),
                           ({"eviction": "default=lru"}, "'lru' is not a policy"),
                           ({"maxmemory": "12 mb"}, "is not a byte count")):
            s = server(**opts)
            with self.assertRaises(RuntimeError) as e:
                s.start(timeout=10)
            s.cleanup()
            self.assertIn(want, str(e.exception), opts)


def rpc(port, method, params=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = {"jsonrpc": "2.0", "method": method, "id": 1}
    if params is not None:
        body["params"] = params
    c.request("POST", "/mi", body=json.dumps(body))
    out = json.loads(c.getresponse().read())
    c.close()
    return out["result"]


class Reporting(unittest.TestCase):
    def test_perf_stats_metrics_and_event(self):
        with server(collections="default;other", maxmemory_policy="allkeys-lru",
                    eviction="other=noeviction", http_port=free_port(),
                    event_evicted_collections="default",
                    event_expired_collections="other") as s:
            r = redis.Redis(port=s.port)
            # before the fill, so that its size class has a chunk: a first
            # write of a class the fill left without one can be refused
            # (-OOM) while the chunk drained for it is not re-classed yet
            r1 = redis.Redis(port=s.port, db=1)
            r1.set(b"gone\x01", b"x", px=300)
            fill(r, b"k:", 3 * fits())
            # the maintenance process may still evict ahead of need (to its
            # low-water mark) for a moment: wait for the count to settle
            # (a state, with a generous deadline) before comparing the views
            deadline, last = time.time() + 30, None
            while time.time() < deadline:
                n = r.info("metrics")["pcache_coll_default_evicted"]
                if n == last:
                    break
                last = n
                time.sleep(0.3)
            st = rpc(s.opts["http_port"], "perf_stats")
            self.assertEqual(st["maxmemory"], CAP_BYTES)
            self.assertGreater(st["evicted"], 0)
            colls = {c["collection"]: c for c in st["collections"]}
            self.assertGreater(colls["default"]["evicted"], 0)
            self.assertEqual(colls["default"]["eviction"], "allkeys-lru")
            self.assertEqual(colls["other"]["evicted"], 0)
            self.assertEqual(colls["other"]["eviction"], "noeviction")
            c = http.client.HTTPConnection("127.0.0.1", s.opts["http_port"], timeout=10)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            c.close()
            m = {}
            for line in text.splitlines():
                if line and not line.startswith("#"):
                    k, v = line.rsplit(" ", 1)
                    m[k] = float(v)
            self.assertEqual(m['pcache_collection_evicted_total{collection="default"}'],
                             colls["default"]["evicted"])
            self.assertEqual(m['pcache_collection_evicted_total{collection="other"}'], 0)
            self.assertIn('pcache_collection_eviction_info{collection="default",'
                          'policy="allkeys-lru"}', m)
            self.assertEqual(m["pcache_memory_maxmemory_bytes"], CAP_BYTES)
            self.assertGreater(m["pcache_evicted_keys_total"], 0)
            self.assertEqual(r.info("metrics")["pcache_coll_default_evicted"],
                             colls["default"]["evicted"])
            log = s.log_text()
            self.assertIn("event evicted: collection default key k:", log)
            # thousands evicted, at most 100 lines a second logged
            lines = log.count("event evicted:")
            self.assertGreater(lines, 0)
            self.assertLess(lines, colls["default"]["evicted"])
            self.assertNotIn("event evicted: collection other", log)
            # the expired event, opted in the same way: the sweep logs it
            deadline = time.time() + 10
            while "event expired: collection other key gone\\x01" not in s.log_text():
                self.assertLess(time.time(), deadline, "no expired event logged")
                time.sleep(0.1)
            self.assertNotIn("event expired: collection default", s.log_text())


class Journal(unittest.TestCase):
    def test_restart_replays_the_evictions(self):
        s = server(maxmemory_policy="allkeys-lru", db_mode=1, persist_collections="default",
                   journal="default=everysec", snapshot_period_s=0)
        s.opts["db_url"] = os.path.join(s.dir, "store")
        try:
            s.start()
            r = redis.Redis(port=s.port)
            n = 5 * fits()
            self.assertEqual(fill(r, b"k:", n), (n, 0))
            evicted = r.info("stats")["evicted_keys"]
            self.assertGreater(evicted, 0)
            before = set(r.scan_iter(count=1000))
            # the eviction ahead of need may take keys during the scan
            self.assertLessEqual(len(before) - r.dbsize(), 128)
            r.close()
            self.assertEqual(s.stop(signal.SIGTERM), 0)
            s.start()
            r = redis.Redis(port=s.port)
            after = set(r.scan_iter(count=1000))
            print("before the restart %d keys (%d evicted), after %d" % (len(before), evicted,
                                                                       len(after)))
            # the maintenance process evicts ahead of need to a low-water
            # mark on its own clock, before or after either scan (a slow
            # build reaches it only after the restart): every key it takes
            # after the restart is counted, so nothing may come back and
            # nothing may go uncounted
            self.assertTrue(after <= before, "an evicted key came back")
            # at most the low-water mark (a 64th of the cap: 64 KiB, about
            # 62 such values) and a chunk more went to the eviction ahead
            self.assertLessEqual(len(before) - len(after), 128)
            self.assertEqual(r.get(sorted(after)[0]), VAL)
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
