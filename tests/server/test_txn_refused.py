"""A command refused while queued inside MULTI flags the transaction, for
every kind of refusal (issue 33, B1): the request limits (an argument over
max_bulk, more arguments than max_args), an unknown command, a wrong
argument count, a command not allowed inside MULTI. EXEC then answers
EXECABORT and applies nothing, as Redis 7 does for a queue-time error, and
never an array shorter than the queue.

The limits are refused by the RESP parser before the command is dispatched
(src/server/resp.c); the bug was that the worker's request loop skipped
such a command without flagging the open transaction, so EXEC applied the
others and answered one entry fewer. Checked through raw RESP and redis-py
(ioredis and node-redis: test_txn_node_clients.py)."""
import os
import sys
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402
from test_txn import Raw, read_reply  # noqa: E402

S = None
MAX_BULK = 4096
MAX_ARGS = 16
EXECABORT = b"-EXECABORT Transaction discarded because of previous errors.\r\n"


def setUpModule():
    global S
    S = Server(workers=2, max_bulk=MAX_BULK, max_args=MAX_ARGS).start()


def tearDownModule():
    S.cleanup()


def multibulk(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


# each refusal as the raw command bytes and the start of its error reply
REFUSALS = {
    "bulk over max_bulk": (multibulk("SET", "b", b"x" * (MAX_BULK + 1)), b"-ERR "),
    "more than max_args": (multibulk("MSET", *["k%d" % i for i in range(MAX_ARGS + 2)]),
                           b"-ERR "),
    "unknown command": (multibulk("NOSUCHCMD", "x"), b"-ERR unknown command"),
    "wrong arity": (multibulk("GET"), b"-ERR wrong number of arguments"),
    "not allowed in MULTI": (multibulk("KEYS", "*"), b"-ERR 'keys' is not allowed"),
}


class RawResp(unittest.TestCase):
    def test_each_refusal_aborts_exec(self):
        for what, (cmd, err) in REFUSALS.items():
            with self.subTest(what):
                r = Raw(S.port)
                try:
                    r.cmd("DEL a c")
                    self.assertEqual(r.cmd("MULTI"), b"+OK\r\n")
                    self.assertEqual(r.cmd("SET a 1"), b"+QUEUED\r\n")
                    r.s.sendall(cmd)
                    self.assertTrue(read_reply(r.f).startswith(err))
                    self.assertEqual(r.cmd("SET c 3"), b"+QUEUED\r\n")
                    self.assertEqual(r.cmd("EXEC"), EXECABORT)
                    self.assertEqual(r.cmd("EXISTS a c"), b":0\r\n")
                    # the connection is usable and out of MULTI afterwards
                    self.assertEqual(r.cmd("EXEC"), b"-ERR EXEC without MULTI\r\n")
                    self.assertEqual(r.cmd("PING"), b"+PONG\r\n")
                finally:
                    r.close()

    def test_refusal_outside_multi_changes_nothing_after(self):
        r = Raw(S.port)
        try:
            r.s.sendall(REFUSALS["bulk over max_bulk"][0])
            self.assertTrue(read_reply(r.f).startswith(b"-ERR "))
            self.assertEqual(r.cmd("MULTI"), b"+OK\r\n")
            self.assertEqual(r.cmd("SET a 1"), b"+QUEUED\r\n")
            self.assertEqual(r.cmd("EXEC"), b"*1\r\n+OK\r\n")
        finally:
            r.close()

    def test_pipelined_refusal_in_one_write(self):
        """MULTI, two SETs around an oversized one and EXEC in one write."""
        r = Raw(S.port)
        try:
            r.cmd("DEL a c")
            r.s.sendall(multibulk("MULTI") + multibulk("SET", "a", "1") +
                        REFUSALS["bulk over max_bulk"][0] + multibulk("SET", "c", "3") +
                        multibulk("EXEC"))
            got = [read_reply(r.f) for _ in range(5)]
            self.assertEqual(got[:2], [b"+OK\r\n", b"+QUEUED\r\n"])
            self.assertTrue(got[2].startswith(b"-ERR "))
            self.assertEqual(got[3:], [b"+QUEUED\r\n", EXECABORT])
            self.assertEqual(r.cmd("EXISTS a c"), b":0\r\n")
        finally:
            r.close()


class RedisPy(unittest.TestCase):
    def test_transaction_with_big_argument_raises_and_applies_nothing(self):
        r = redis.Redis(port=S.port, socket_timeout=30)
        r.delete("a", "b", "c")
        p = r.pipeline(transaction=True)
        p.set("a", "1").set("b", "x" * (MAX_BULK + 1)).set("c", "3")
        with self.assertRaises(redis.exceptions.ResponseError):
            p.execute()
        self.assertEqual(r.exists("a", "b", "c"), 0)
        p = r.pipeline(transaction=True)
        p.set("a", "1").mset({"k%d" % i: i for i in range(MAX_ARGS)}).set("c", "3")
        with self.assertRaises(redis.exceptions.ResponseError):
            p.execute()
        self.assertEqual(r.exists("a", "c"), 0)
        self.assertEqual(r.ping(), True)


if __name__ == "__main__":
    unittest.main()
