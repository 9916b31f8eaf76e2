"""Regression "free cells stay bound to their size class" (issue 21): with a
small mem_mb, fill pcached with 1000-byte values until -OOM, FLUSHDB
(DBSIZE 0), then fill with 500-, 100- and 10-byte values in turn (FLUSHDB
between): each size must fit as many values as in a freshly started
pcached of the same mem_mb (the engine moves fully free chunks to the class
that needs them: docs/design.md §3)."""
import os
import sys
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402

MEM_MB = 8
BATCH = 500


def fill(r, vlen):
    """SETs distinct keys with vlen-byte values until the first -OOM."""
    val = b"v" * vlen
    n = 0
    while True:
        p = r.pipeline(transaction=False)
        for i in range(BATCH):
            p.set(b"k%09d" % (n + i), val)
        res = p.execute(raise_on_error=False)
        for x in res:
            if isinstance(x, redis.ResponseError):
                if not str(x).startswith("OOM"):
                    raise x
                return n
            n += 1
        if n > 10_000_000:
            raise AssertionError("never full")


def server():
    return Server(mem_mb=MEM_MB, workers=1)


class Rebalance(unittest.TestCase):
    def fresh(self, vlen):
        with server() as s:
            return fill(redis.Redis(port=s.port), vlen)

    def test_flush_then_other_sizes_fit(self):
        sizes = [1000, 500, 100, 10]
        fresh = {v: self.fresh(v) for v in sizes}
        with server() as s:
            r = redis.Redis(port=s.port)
            for v in sizes:
                got = fill(r, v)
                mem = r.info("memory")
                self.assertGreaterEqual(mem["pcache_alloc_refused"], 1)
                classes = {k: x for k, x in mem.items() if k.startswith("pcache_class_")}
                self.assertTrue(any(x["starved"] >= 1 for x in classes.values()), classes)
                self.assertLessEqual(mem["used_memory"], mem["pcache_memory_limit"])
                self.assertIn("is starved", s.log_text())
                print("%d-byte values: %d after FLUSHDB, %d fresh" % (v, got, fresh[v]))
                self.assertGreaterEqual(got, fresh[v], "%d-byte values" % v)
                r.flushdb()
                self.assertEqual(r.dbsize(), 0)


if __name__ == "__main__":
    unittest.main()
