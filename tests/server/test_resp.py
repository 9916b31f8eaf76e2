"""pcached's RESP door with real clients (python3-redis, redis-cli, raw
sockets): every command's normal reply and its error cases, pipelining,
binary values, the limits, and hostile input."""
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, command, raw, resp_cmd  # noqa: E402

S = None


def setUpModule():
    global S
    S = Server(collections="default;sessions=8;other", select_collections="default,sessions",
               max_bulk=65536, max_args=1000).start()


def tearDownModule():
    S.cleanup()


def client(**kw):
    return redis.Redis(port=S.port, **kw)


class Strings(unittest.TestCase):
    def setUp(self):
        self.r = client()
        self.r.flushdb()

    def err(self, *args):
        with self.assertRaises(redis.ResponseError) as cm:
            self.r.execute_command(*args)
        return str(cm.exception)

    def test_get_set(self):
        self.assertIsNone(self.r.get("nope"))
        self.assertTrue(self.r.set("a", "1"))
        self.assertEqual(self.r.get("a"), b"1")
        self.assertEqual(self.err("GET"), "wrong number of arguments for 'get' command")
        self.assertEqual(self.err("SET", "a"), "wrong number of arguments for 'set' command")

    def test_set_options(self):
        r = self.r
        self.assertTrue(r.set("k", "v", ex=100))
        self.assertTrue(95 <= r.ttl("k") <= 100)
        self.assertTrue(r.set("k", "v", px=5000))
        self.assertTrue(4000 < r.pttl("k") <= 5000)
        self.assertTrue(r.set("k", "v", exat=int(time.time()) + 50))
        self.assertTrue(45 <= r.ttl("k") <= 50)
        self.assertTrue(r.set("k", "v", pxat=int(time.time() * 1000) + 60000))
        self.assertTrue(55 <= r.ttl("k") <= 60)
        self.assertTrue(r.set("k", "v2", keepttl=True))
        self.assertTrue(55 <= r.ttl("k") <= 60)
        self.assertEqual(r.get("k"), b"v2")
        self.assertTrue(r.set("k", "v3"))
        self.assertEqual(r.ttl("k"), -1)  # a plain SET clears the expiry
        self.assertIsNone(r.set("k", "x", nx=True))
        self.assertTrue(r.set("new", "x", nx=True))
        self.assertIsNone(r.set("absent", "x", xx=True))
        self.assertTrue(r.set("k", "x", xx=True))
        self.assertEqual(r.set("k", "y", get=True), b"x")
        self.assertIsNone(r.set("fresh", "y", get=True))
        self.assertEqual(r.get("fresh"), b"y")
        # an absolute time in the past: the key ends up absent
        self.assertTrue(r.set("k", "z", exat=int(time.time()) - 10))
        self.assertIsNone(r.get("k"))
        self.assertEqual(self.err("SET", "k", "v", "NX", "XX"), "syntax error")
        self.assertEqual(self.err("SET", "k", "v", "EX", "10", "PX", "10"), "syntax error")
        self.assertEqual(self.err("SET", "k", "v", "EX"), "syntax error")
        self.assertEqual(self.err("SET", "k", "v", "BOGUS"), "syntax error")
        self.assertEqual(self.err("SET", "k", "v", "EX", "abc"),
                         "value is not an integer or out of range")
        self.assertEqual(self.err("SET", "k", "v", "EX", "0"),
                         "invalid expire time in 'set' command")
        self.assertEqual(self.err("SET", "k", "v", "PX", "-5"),
                         "invalid expire time in 'set' command")
        # as redis-server 7.0.15 (checked side by side): an option repeated
        # takes its last value (the only one parsed); two kinds conflict
        x = r.execute_command
        self.assertTrue(x("SET", "k", "v", "EX", "10", "EX", "20"))
        self.assertTrue(19 <= r.ttl("k") <= 20)
        self.assertTrue(x("SET", "k", "v", "KEEPTTL", "KEEPTTL"))
        self.assertTrue(19 <= r.ttl("k") <= 20)
        self.assertTrue(x("SET", "k", "v", "EX", "abc", "EX", "10"))
        self.assertTrue(9 <= r.ttl("k") <= 10)
        self.assertEqual(self.err("SET", "k", "v", "KEEPTTL", "EX", "5"), "syntax error")
        # the limits: a relative time that overflows with now added is refused,
        # an absolute one far ahead is taken
        self.assertEqual(self.err("SET", "k", "v", "PX", "9223372036854775807"),
                         "invalid expire time in 'set' command")
        self.assertTrue(x("SET", "k", "v", "EXAT", "9223372036854775"))
        self.assertGreater(r.ttl("k"), 9 * 10**15)
        self.assertEqual(self.err("PSETEX", "k", "9223372036854775807", "v"),
                         "invalid expire time in 'psetex' command")
        self.assertEqual(self.err("SETEX", "k", "9223372036854775", "v"),
                         "invalid expire time in 'setex' command")
        r.set("k", "v")
        self.assertEqual(x("GETEX", "k", "PERSIST", "PERSIST"), b"v")
        self.assertEqual(r.ttl("k"), -1)
        self.assertEqual(x("GETEX", "k", "EX", "10", "EX", "20"), b"v")
        self.assertTrue(19 <= r.ttl("k") <= 20)
        self.assertEqual(x("GETEX", "k", "EX", "abc", "EX", "5"), b"v")
        self.assertTrue(4 <= r.ttl("k") <= 5)
        self.assertEqual(self.err("GETEX", "k", "PERSIST", "EX", "10"), "syntax error")
        self.assertEqual(self.err("GETEX", "k", "KEEPTTL"), "syntax error")
        self.assertEqual(x("GETEX", "k", "PXAT", "1"), b"v")
        self.assertEqual(r.exists("k"), 0)

    def test_setex_family(self):
        r = self.r
        self.assertTrue(r.setex("a", 100, "v"))
        self.assertTrue(95 <= r.ttl("a") <= 100)
        self.assertTrue(r.psetex("b", 100000, "v"))
        self.assertTrue(95 <= r.ttl("b") <= 100)
        self.assertEqual(self.err("SETEX", "a", "0", "v"),
                         "invalid expire time in 'setex' command")
        self.assertEqual(self.err("PSETEX", "a", "x", "v"),
                         "value is not an integer or out of range")
        self.assertTrue(r.setnx("c", "1"))
        self.assertFalse(r.setnx("c", "2"))
        self.assertEqual(r.get("c"), b"1")

    def test_getdel_getex(self):
        r = self.r
        r.set("a", "v")
        self.assertEqual(r.getdel("a"), b"v")
        self.assertIsNone(r.getdel("a"))
        r.set("b", "w")
        self.assertEqual(r.getex("b", ex=100), b"w")
        self.assertTrue(95 <= r.ttl("b") <= 100)
        self.assertEqual(r.getex("b", persist=True), b"w")
        self.assertEqual(r.ttl("b"), -1)
        self.assertEqual(r.getex("b", px=50000), b"w")
        self.assertTrue(45 <= r.ttl("b") <= 50)
        self.assertIsNone(r.getex("none", ex=10))
        self.assertEqual(self.err("GETEX", "b", "EX"), "syntax error")
        self.assertEqual(self.err("GETEX", "b", "FOO", "1"), "syntax error")
        self.assertEqual(self.err("GETEX", "b", "EX", "-1"),
                         "invalid expire time in 'getex' command")

    def test_mget_mset(self):
        r = self.r
        self.assertTrue(r.mset({"a": "1", "b": "2"}))
        self.assertEqual(r.mget("a", "x", "b"), [b"1", None, b"2"])
        self.assertEqual(self.err("MSET", "a", "1", "b"),
                         "wrong number of arguments for 'mset' command")
        self.assertEqual(self.err("MGET"), "wrong number of arguments for 'mget' command")

    def test_counters(self):
        r = self.r
        self.assertEqual(r.incr("n"), 1)
        self.assertEqual(r.incrby("n", 41), 42)
        self.assertEqual(r.decr("n"), 41)
        self.assertEqual(r.decrby("n", 50), -9)
        self.assertEqual(r.get("n"), b"-9")
        self.assertEqual(r.strlen("n"), 2)
        r.set("s", "12")
        self.assertEqual(r.incr("s"), 13)
        r.set("t", "abc")
        self.assertEqual(self.err("INCR", "t"), "value is not an integer or out of range")
        self.assertEqual(self.err("INCRBY", "n", "1.5"), "value is not an integer or out of range")
        self.assertEqual(self.err("INCRBY", "n", "99999999999999999999"),
                         "value is not an integer or out of range")
        r.set("big", str(2**63 - 1))
        self.assertEqual(self.err("INCR", "big"), "increment or decrement would overflow")
        self.assertEqual(r.get("big"), str(2**63 - 1).encode())
        self.assertEqual(self.err("DECRBY", "n", str(-2**63)), "decrement would overflow")
        # only the canonical text of an int64 is a number, as redis-server
        # 7.0.15 answers (checked side by side); the stored bytes stay
        for v in (b"01", b"-0", b"1\x00", b"00000000000000000001", b"99999999999999999999",
                  b" 1", b"+1"):
            r.set("q", v)
            self.assertEqual(self.err("INCR", "q"), "value is not an integer or out of range", v)
            self.assertEqual(r.get("q"), v)
        r.set("q", "-9223372036854775808")
        self.assertEqual(r.incr("q"), -9223372036854775807)
        r.set("n", "overwritten")  # a string clears the counter
        self.assertEqual(r.get("n"), b"overwritten")

    def test_strlen_type(self):
        r = self.r
        r.set("a", "hello")
        self.assertEqual(r.strlen("a"), 5)
        self.assertEqual(r.strlen("none"), 0)
        self.assertEqual(r.type("a"), b"string")
        self.assertEqual(r.type("none"), b"none")


class Keys(unittest.TestCase):
    def setUp(self):
        self.r = client()
        self.r.flushdb()

    def err(self, *args):
        with self.assertRaises(redis.ResponseError) as cm:
            self.r.execute_command(*args)
        return str(cm.exception)

    def test_del_exists(self):
        r = self.r
        r.mset({"a": 1, "b": 2, "c": 3})
        self.assertEqual(r.exists("a", "b", "zz", "a"), 3)
        self.assertEqual(r.delete("a", "b", "zz"), 2)
        self.assertEqual(r.unlink("c", "zz"), 1)
        self.assertEqual(r.exists("a", "b", "c"), 0)

    def test_expire_family(self):
        r = self.r
        r.set("a", "v")
        self.assertEqual(r.ttl("a"), -1)
        self.assertEqual(r.ttl("zz"), -2)
        self.assertEqual(r.pttl("zz"), -2)
        self.assertTrue(r.expire("a", 100))
        self.assertTrue(95 <= r.ttl("a") <= 100)
        self.assertTrue(r.pexpire("a", 200000))
        self.assertTrue(195 <= r.ttl("a") <= 200)
        self.assertTrue(r.expireat("a", int(time.time()) + 300))
        self.assertTrue(295 <= r.ttl("a") <= 300)
        self.assertTrue(r.pexpireat("a", int(time.time() * 1000) + 400000))
        self.assertTrue(395 <= r.ttl("a") <= 400)
        self.assertFalse(r.expire("zz", 100))
        self.assertTrue(r.persist("a"))
        self.assertFalse(r.persist("a"))
        self.assertEqual(r.ttl("a"), -1)
        # NX / XX / GT / LT
        self.assertEqual(r.execute_command("EXPIRE", "a", "100", "XX"), 0)
        self.assertEqual(r.execute_command("EXPIRE", "a", "100", "NX"), 1)
        self.assertEqual(r.execute_command("EXPIRE", "a", "50", "GT"), 0)
        self.assertEqual(r.execute_command("EXPIRE", "a", "500", "GT"), 1)
        self.assertEqual(r.execute_command("EXPIRE", "a", "50", "LT"), 1)
        self.assertTrue(45 <= r.ttl("a") <= 50)
        self.assertEqual(self.err("EXPIRE", "a", "10", "NX", "XX"),
                         "NX and XX, GT or LT options at the same time are not compatible")
        self.assertEqual(self.err("EXPIRE", "a", "10", "FOO"), "Unsupported option FOO")
        self.assertEqual(self.err("EXPIRE", "a", "ten"), "value is not an integer or out of range")
        # a non-positive expiry deletes
        self.assertTrue(r.expire("a", 0))
        self.assertIsNone(r.get("a"))
        # as redis-server 7.0: a deadline far in the past deletes (no wrap to
        # a huge TTL); a relative time that overflows once now is added is an
        # error and changes nothing
        r.set("w", "v")
        self.assertEqual(r.execute_command("PEXPIREAT", "w", "-9223372036854770000"), 1)
        self.assertEqual(r.exists("w"), 0)
        r.set("w", "v")
        self.assertEqual(r.execute_command("EXPIREAT", "w", "-9223372036854775"), 1)
        self.assertEqual(r.exists("w"), 0)
        r.set("w", "v")
        for cmd, t in (("EXPIRE", "9223372036854775"), ("PEXPIRE", "9223372036854775807")):
            self.assertEqual(self.err(cmd, "w", t),
                             "invalid expire time in '%s' command" % cmd.lower())
        self.assertEqual(r.ttl("w"), -1)
        self.assertEqual(r.execute_command("EXPIRE", "w", "-9223372036854775"), 1)
        self.assertEqual(r.exists("w"), 0)
        r.set("b", "v", px=100)
        time.sleep(0.25)
        self.assertIsNone(r.get("b"))  # lapsed: absent at once
        self.assertEqual(r.ttl("b"), -2)

    def test_keys_scan(self):
        r = self.r
        for i in range(500):
            r.set("user:%d" % i, i)
        r.set("other", 1)
        self.assertEqual(len(r.keys("user:*")), 500)
        self.assertEqual(r.keys("other"), [b"other"])
        self.assertEqual(r.keys("nomatch*"), [])
        seen = set(r.scan_iter(match="user:1*", count=20))
        self.assertEqual(seen, {("user:%d" % i).encode() for i in range(500)
                                if str(i).startswith("1")})
        self.assertEqual(len(set(r.scan_iter(count=100))), 501)
        cur, keys = r.scan(0, count=5)
        self.assertIsInstance(cur, int)
        self.assertEqual(self.err("SCAN", "abc"), "invalid cursor")
        # the cursor as Redis reads it (strtoul): a sign is allowed, digits only
        self.assertEqual(command(S.port, "SCAN", "+0")[0], command(S.port, "SCAN", "0")[0])
        self.assertEqual(command(S.port, "SCAN", "-1")[0], b"0")
        for bad in ("-", " 1", "1 ", "18446744073709551616"):
            self.assertEqual(self.err("SCAN", bad), "invalid cursor", bad)
        self.assertEqual(self.err("SCAN", "0", "COUNT", "0"), "syntax error")
        self.assertEqual(self.err("SCAN", "0", "MATCH"), "syntax error")
        self.assertEqual(r.scan(0, _type="hash"), (0, []))
        self.assertEqual(r.dbsize(), 501)
        self.assertTrue(r.flushdb())
        self.assertEqual(r.dbsize(), 0)
        self.assertEqual(self.err("FLUSHDB", "NOW"), "syntax error")


class Connection(unittest.TestCase):
    def test_ping_echo_quit(self):
        r = client()
        self.assertTrue(r.ping())
        self.assertEqual(r.echo("hi\x00there"), b"hi\x00there")
        self.assertEqual(command(S.port, "PING", "x"), b"x")
        out, closed = raw(S.port, b"PING\r\nQUIT\r\nPING\r\n", read_until_close=True)
        self.assertEqual(out, b"+PONG\r\n+OK\r\n")
        self.assertTrue(closed)

    def test_unknown_command(self):
        out, _ = raw(S.port, resp_cmd("FOO", "a", "b"), want=10, timeout=2)
        self.assertEqual(out, b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n")
        out, _ = raw(S.port, resp_cmd("PERF.NOPE"), want=10, timeout=2)
        self.assertTrue(out.startswith(b"-ERR unknown command 'PERF.NOPE'"), out)
        # as redis-server 7.0.15: the arguments shown share 128 bytes
        out, _ = raw(S.port, resp_cmd("FOO", "b" * 100, "c" * 100), want=100, timeout=2)
        self.assertEqual(out, b"-ERR unknown command 'FOO', with args beginning with: '"
                         + b"b" * 100 + b"' '" + b"c" * 25 + b"' \r\n")

    def test_select_maps_collections(self):
        r0, r1 = client(db=0), client(db=1)
        r0.set("same", "in default")
        r1.set("same", "in sessions")
        self.assertEqual(r0.get("same"), b"in default")
        self.assertEqual(r1.get("same"), b"in sessions")
        with self.assertRaises(redis.ResponseError) as cm:
            client(db=2).ping()
        self.assertIn("DB index is out of range", str(cm.exception))
        for bad in ("-0", "01", "+1"):  # as redis-server 7.0.15
            with self.assertRaises(redis.ResponseError) as cm:
                r0.execute_command("SELECT", bad)
            self.assertIn("value is not an integer or out of range", str(cm.exception))
        stats = client().execute_command("PERF.STATS", "sessions")
        self.assertIn(b'"collection":"sessions"', stats)
        # PERF.* default to the selected database's collection
        self.assertIn(b'"value":"in sessions"', r1.execute_command("PERF.GET", "same"))
        self.assertIn(b'"value":"in default"', r0.execute_command("PERF.GET", "same"))

    def test_command_and_config(self):
        r = client()
        count = command(S.port, "COMMAND", "COUNT")
        self.assertGreater(count, 40)
        info = command(S.port, "COMMAND", "INFO", "get", "nosuch")
        self.assertEqual(info[0][:6], [b"get", 2, [b"readonly", b"fast"], 1, 1, 1])
        self.assertIsNone(info[1])
        self.assertEqual(len(command(S.port, "COMMAND")), count)
        self.assertIn("set", r.command())  # redis-py's own parse of COMMAND
        self.assertEqual(r.config_get("save"), {"save": ""})
        self.assertEqual(r.config_get("appendonly"), {"appendonly": "no"})
        self.assertEqual(r.config_get("databases"), {"databases": "2"})
        self.assertNotIn("requirepass", r.config_get("*"))
        self.assertEqual(r.config_get("max_bulk"), {"max_bulk": "65536"})
        with self.assertRaises(redis.ResponseError):
            r.config_set("port", "1")

    def test_info(self):
        r = client()
        r.set("x", "y")
        r.get("x")
        info = r.info("all")
        self.assertEqual(info["redis_version"], "7.0.0")
        self.assertGreater(info["total_commands_processed"], 0)
        self.assertGreaterEqual(info["keyspace_hits"], 1)
        self.assertIn("coll_default", info)
        self.assertIn("entries", info["coll_default"])
        self.assertEqual(list(r.info("keyspace").keys())[0], "db0")
        self.assertNotIn("redis_version", r.info("stats"))
        # as Redis: sections apart by a blank line, none after the last
        text = command(S.port, "INFO", "server", "stats").decode()
        self.assertTrue(text.endswith("\r\n") and not text.endswith("\r\n\r\n"), repr(text[-20:]))
        self.assertIn("\r\n\r\n# Stats\r\n", text)
        self.assertEqual(r.config_get("timeout"), {"timeout": "0"})

    def test_perf_commands(self):
        r = client()
        r.flushdb()
        r.set("p:1", "v1")
        self.assertIn(b'"value":"v1"', r.execute_command("PERF.GET", "p:1"))
        self.assertIn(b'"count":1', r.execute_command("PERF.KEYS", "p:*"))
        self.assertIn(b'"stored"', r.execute_command("PERF.SET", "p:2", "v2", "100"))
        self.assertEqual(r.get("p:2"), b"v2")
        self.assertIn(b'"deleted":2', r.execute_command("PERF.DEL", "p:*"))
        with self.assertRaises(redis.ResponseError) as cm:
            r.execute_command("PERF.KEYS", "*", "nosuchcoll")
        self.assertIn("perf_keys", str(cm.exception))
        with self.assertRaises(redis.ResponseError) as cm:
            r.execute_command("PERF.SAVE")
        self.assertIn("no store configured", str(cm.exception))
        with self.assertRaises(redis.ResponseError) as cm:
            r.execute_command("SAVE")
        self.assertIn("no store configured", str(cm.exception))


class Wire(unittest.TestCase):
    def test_binary_values(self):
        r = client()
        blob = bytes(range(256)) * 4 + b"\r\n\x00\r\n$5\r\n*1\r\n"
        key = b"bin\x00key\r\nx"
        self.assertTrue(r.set(key, blob))
        self.assertEqual(r.get(key), blob)
        self.assertEqual(r.strlen(key), len(blob))
        self.assertIn(key, r.keys(b"bin*"))
        out, _ = raw(S.port, resp_cmd(b"GET", key), want=len(blob) + 10)
        self.assertEqual(out, b"$%d\r\n%s\r\n" % (len(blob), blob))

    def test_pipeline_10k(self):
        r = client()
        p = r.pipeline(transaction=False)
        for i in range(5000):
            p.set("pl:%d" % i, "v%d" % i)
            p.get("pl:%d" % i)
        res = p.execute()
        self.assertEqual(len(res), 10000)
        for i in range(5000):
            self.assertIs(res[2 * i], True)
            self.assertEqual(res[2 * i + 1], ("v%d" % i).encode())
        # the same as one write of raw bytes, replies in order
        data = b"".join(resp_cmd("INCR", "plc") for _ in range(10000))
        expect = b"".join(b":%d\r\n" % (i + 1) for i in range(10000))
        out, _ = raw(S.port, data, want=len(expect), timeout=20)
        self.assertEqual(out, expect)

    def test_too_many_arguments_refused_cleanly(self):
        # max_args is 1000 here; the default is 65536. 100k arguments of
        # MSET: refused, its bytes skipped, the connection still serves.
        n = 100001
        parts = [b"*%d\r\n$4\r\nMSET\r\n" % n]
        parts += [b"$3\r\nk%02d\r\n" % (i % 100) for i in range(n - 1)]
        data = b"".join(parts) + resp_cmd("PING")
        want = b"-ERR too many arguments: 100001 (max_args is 1000)\r\n+PONG\r\n"
        out, closed = raw(S.port, data, want=len(want), timeout=20)
        self.assertEqual(out, want)
        self.assertIsNone(client().get("k01"))

    def test_bulk_too_long_refused_cleanly(self):
        big = b"x" * 70000
        data = resp_cmd("SET", "big", big) + resp_cmd("GET", "big") + resp_cmd("PING")
        want = (b"-ERR string exceeds maximum allowed size (an argument of 70000 bytes; "
                b"max_bulk is 65536)\r\n$-1\r\n+PONG\r\n")
        out, closed = raw(S.port, data, want=len(want), timeout=10)
        self.assertEqual(out, want)
        self.assertFalse(closed)

    def test_key_too_long(self):
        r = redis.Redis(port=S.port)
        # keys are limited by the engine (65535 bytes), below max_bulk here
        with self.assertRaises(redis.ResponseError) as cm:
            r.set(b"k" * 65536, "v")
        self.assertIn("string exceeds maximum allowed size (keys up to 65535 bytes",
                      str(cm.exception))
        # a read of a key no one could store: absent, as redis-server answers
        k = b"k" * 65536
        self.assertIsNone(r.get(k))
        self.assertIsNone(r.getdel(k))
        self.assertIsNone(r.getex(k, ex=10))
        self.assertEqual(r.strlen(k), 0)
        self.assertEqual(r.exists(k), 0)
        self.assertEqual(r.ttl(k), -2)

    def test_half_sent_command_then_disconnect(self):
        s = socket.create_connection(("127.0.0.1", S.port))
        s.sendall(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$10\r\nonly")
        time.sleep(0.1)
        s.close()
        time.sleep(0.1)
        r = client()
        self.assertTrue(r.ping())
        self.assertIsNone(r.get("half"))

    def test_garbage_closes_with_protocol_error_others_served(self):
        other = client()
        other.set("still", "here")
        cases = [
            (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
            (b"*2\r\n$3\r\nGET\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
            (b"*1\r\n+PING\r\n", b"-ERR Protocol error: expected '$', got '+'\r\n"),
            (b"*1\r\n$4\r\nPINGxx", b"-ERR Protocol error: bulk not terminated by CRLF\r\n"),
            (b"*" + b"9" * 40 + b"\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
            (b"x" * 70000, b"-ERR Protocol error: too big inline request\r\n"),
        ]
        for data, want in cases:
            out, closed = raw(S.port, data, timeout=5, read_until_close=True)
            self.assertEqual(out, want, data[:20])
            self.assertTrue(closed, data[:20])
            self.assertEqual(other.get("still"), b"here")
        # random bytes with line ends are inline commands: unknown, connection kept; the
        # name is quoted as Redis quotes it (its bytes up to the first NUL, as they are)
        want = b"-ERR unknown command '\xff\xfe', with args beginning with: \r\n+PONG\r\n"
        out, closed = raw(S.port, b"\xff\xfe\x00garbage\r\nPING\r\n", want=len(want), timeout=3)
        self.assertEqual(out, want)

    def test_concurrent_clients(self):
        errors = []

        def run(t):
            try:
                r = client()
                for i in range(300):
                    k = "cc:%d:%d" % (t, i)
                    r.set(k, k)
                    if r.get(k) != k.encode():
                        errors.append(k)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        ts = [threading.Thread(target=run, args=(t,)) for t in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])


class RedisCli(unittest.TestCase):
    def cli(self, *args, stdin=None):
        p = subprocess.run(["redis-cli", "-p", str(S.port)] + list(args), input=stdin,
                           capture_output=True, timeout=30)
        return p.stdout.decode()

    def test_cli_commands(self):
        self.assertEqual(self.cli("SET", "cli", "value"), "OK\n")
        self.assertEqual(self.cli("GET", "cli"), "value\n")
        self.assertEqual(self.cli("INCRBY", "cli:n", "5"), "5\n")
        self.assertEqual(self.cli("TTL", "cli"), "-1\n")
        self.assertIn("unknown command 'NOPE'", self.cli("NOPE"))
        self.assertEqual(self.cli("GET").strip(), "ERR wrong number of arguments for 'get' command")
        self.assertIn("cli", self.cli("--scan", "--pattern", "cli*").split())
        # -x: the value from stdin, with bytes redis-cli must send as they are
        self.assertEqual(self.cli("-x", "SET", "cli:bin", stdin=b"a\r\nb\x00c"), "OK\n")
        self.assertEqual(client().get("cli:bin"), b"a\r\nb\x00c")
        self.assertIn("# Keyspace", self.cli("INFO", "keyspace"))
        self.assertTrue(self.cli("PERF.STATS").startswith('{"memory_tier"'))


class Auth(unittest.TestCase):
    def test_requirepass(self):
        with Server(requirepass="s3cret", workers=1) as s:
            r = redis.Redis(port=s.port)
            with self.assertRaises(redis.AuthenticationError):
                r.get("a")
            out, _ = raw(s.port, resp_cmd("GET", "a") + resp_cmd("AUTH", "wrong") +
                         resp_cmd("AUTH", "default", "s3cret") + resp_cmd("GET", "a"),
                         want=108, timeout=3)
            self.assertEqual(out, b"-NOAUTH Authentication required.\r\n"
                                  b"-WRONGPASS invalid username-password pair or user is "
                                  b"disabled.\r\n+OK\r\n$-1\r\n")
            r = redis.Redis(port=s.port, password="s3cret")
            self.assertTrue(r.set("a", "b"))
            self.assertNotIn("s3cret", s.log_text())
            p = subprocess.run(["redis-cli", "-p", str(s.port), "-a", "s3cret", "--no-auth-warning",
                                "GET", "a"], capture_output=True, timeout=10)
            self.assertEqual(p.stdout, b"b\n")

    def test_auth_without_password(self):
        with self.assertRaises(redis.ResponseError) as cm:
            client().execute_command("AUTH", "x")
        self.assertIn("without any password configured", str(cm.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
