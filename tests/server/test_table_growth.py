"""growth_load_factor (docs/pcached.md, "Configuration"): the tables grow
toward that many keys a bucket. The same 400,000 keys in a pcached with
the default (4) and with 6: once the maintenance process has grown the
table (a state waited for, not a time), the first has 400000 / 4 buckets
and the second 400000 / 6, rounded up, and every key reads back in both.
A value out of range is refused at start with the range in the
message."""
import os
import subprocess
import sys
import time
import unittest
import urllib.request

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import PCACHED, Server, free_port  # noqa: E402

KEYS = 400_000
BATCH = 5_000
BUCKETS = 'pcache_collection_buckets{collection="default"}'


def fill(r):
    for lo in range(0, KEYS, BATCH):
        p = r.pipeline(transaction=False)
        for i in range(lo, min(KEYS, lo + BATCH)):
            p.set(b"key:%012d" % i, b"%08d" % i)
        if not all(p.execute()):
            raise AssertionError("a SET was refused")


def metrics(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
    out = {}
    for line in text.decode().splitlines():
        name, _, value = line.rpartition(" ")
        if name == BUCKETS:
            out[name] = int(float(value))
    return out


def grown(port, want, timeout=120):
    """Waits until the default collection has want buckets; its metrics."""
    deadline = time.time() + timeout
    m = {}
    while time.time() < deadline:
        m = metrics(port)
        if m.get(BUCKETS) == want:
            return m
        time.sleep(0.2)
    raise AssertionError("the table did not reach %d buckets: %r" % (want, m))


class TableGrowth(unittest.TestCase):
    def run_with(self, lf):
        mport = free_port()
        opts = {"workers": 1, "metrics_port": mport}
        if lf is not None:
            opts["growth_load_factor"] = lf
        with Server(**opts) as s:
            r = redis.Redis(port=s.port)
            fill(r)
            m = grown(mport, -(-KEYS // (lf or 4)))
            self.assertEqual(r.dbsize(), KEYS)
            for i in range(0, KEYS, 997):
                self.assertEqual(r.get(b"key:%012d" % i), b"%08d" % i)
            return m

    def test_fewer_buckets(self):
        self.assertEqual(self.run_with(None)[BUCKETS], 100_000)
        self.assertEqual(self.run_with(6)[BUCKETS], 66_667)

    def test_out_of_range_refused(self):
        for bad in ("0", "7"):
            p = subprocess.run([PCACHED, "--growth_load_factor=" + bad, "--check"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("growth_load_factor: %s is out of range [1, 6]" % bad, p.stderr)


if __name__ == "__main__":
    unittest.main()
