"""Read-modify-write and several-key commands are one engine transaction
(docs/pcached.md section 3.1, "transaction"): concurrent clients on several
workers lose no update, and no reader sees half of a RENAME or an MSET.
Each check fails when the command is a read then a write: the races below
lose updates within a few hundred operations on two workers."""
import multiprocessing
import os
import sys
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402

S = None
PROCS = 4


def setUpModule():
    global S
    S = Server(workers=2).start()


def tearDownModule():
    S.cleanup()


def client():
    return redis.Redis(port=S.port)


def hammer(args):
    cmd, n = args
    r = client()
    for _ in range(n):
        r.execute_command(*cmd)
    return n


def run_parallel(cmd, n):
    with multiprocessing.Pool(PROCS) as pool:
        return sum(pool.map(hammer, [(cmd, n)] * PROCS))


def rename_pingpong(n):
    r = client()
    for _ in range(n):
        r.execute_command("RENAME", "ra", "rb")
        r.execute_command("RENAME", "rb", "ra")


def mset_writer(n):
    r = client()
    for i in range(n):
        r.execute_command("MSET", "ma", i, "mb", i, "mc", i)


class Atomic(unittest.TestCase):
    def setUp(self):
        self.r = client()
        self.r.flushdb()

    def test_append_loses_nothing(self):
        total = run_parallel(("APPEND", "log", "x"), 400)
        self.assertEqual(self.r.strlen("log"), total)

    def test_incrbyfloat_loses_nothing(self):
        total = run_parallel(("INCRBYFLOAT", "f", "1"), 300)
        self.assertEqual(float(self.r.get("f")), float(total))

    def test_getset_hands_over_once(self):
        # GETSET hands a token around: every value is seen exactly once
        self.r.set("tok", "start")
        with multiprocessing.Pool(PROCS) as pool:
            seen = pool.map(getset_chain, [(p, 200) for p in range(PROCS)])
        olds = [v for part in seen for v in part] + [self.r.get("tok").decode()]
        self.assertEqual(len(olds), len(set(olds)), "a GETSET value was seen twice")
        self.assertEqual(len(olds), PROCS * 200 + 1)

    def test_rename_is_never_half_done(self):
        self.r.set("ra", "v")
        p = multiprocessing.Process(target=rename_pingpong, args=(600,))
        p.start()
        bad = 0
        while p.is_alive():
            pipe = self.r.pipeline(transaction=True)  # a snapshot of both names
            pipe.exists("ra")
            pipe.exists("rb")
            a, b = pipe.execute()
            bad += (a + b) != 1
        p.join()
        self.assertEqual(p.exitcode, 0)
        self.assertEqual(bad, 0, "a reader saw both names or neither")
        self.assertEqual(self.r.exists("ra", "rb"), 1)

    def test_mset_is_never_half_done(self):
        self.r.mset({"ma": -1, "mb": -1, "mc": -1})
        p = multiprocessing.Process(target=mset_writer, args=(1500,))
        p.start()
        torn = 0
        reads = 0
        while p.is_alive():
            pipe = self.r.pipeline(transaction=True)
            pipe.get("ma")
            pipe.get("mb")
            pipe.get("mc")
            vals = pipe.execute()
            reads += 1
            torn += len(set(vals)) != 1
        p.join()
        self.assertGreater(reads, 0)
        self.assertEqual(torn, 0, "a reader saw the keys of two different MSETs")

    def test_set_get_hands_over_once(self):
        # SET k new GET returns each old value to exactly one writer
        self.r.set("h", "0")
        with multiprocessing.Pool(PROCS) as pool:
            seen = pool.map(setget_chain, [(p, 200) for p in range(PROCS)])
        olds = [v for part in seen for v in part] + [self.r.get("h").decode()]
        self.assertEqual(len(olds), len(set(olds)))
        self.assertEqual(len(olds), PROCS * 200 + 1)


def getset_chain(args):
    p, n = args
    r = client()
    return [r.getset("tok", "%d-%d" % (p, i)).decode() for i in range(n)]


def setget_chain(args):
    p, n = args
    r = client()
    return [r.set("h", "%d-%d" % (p, i), get=True).decode() for i in range(n)]


if __name__ == "__main__":
    unittest.main(verbosity=2)
