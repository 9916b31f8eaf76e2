"""Replies that differed from Redis 7.0's, side by side with redis-server.

Starts Debian's redis-server (private loopback port, two databases) and
pcached (two collections) and compares the reply bytes of:
- CONFIG GET port / bind / * (each name once, RESP2 and RESP3: a name
  pcached shares with Redis was answered twice);
- LCS ... IDX in RESP3 (a map, as Redis; it was an array);
- SCAN with the cursors Redis reads with strtoul ("" is 0, a NUL ends it);
- SELECT past a C int (Redis's range error), SWAPDB's argument errors;
- unknown commands quoting non-ASCII, NUL, CR/LF and long arguments;
- SAVE inside MULTI ("Command not allowed inside a transaction");
- CONFIG SET of a Redis setting fixed at start (daemonize: immutable);
and checks that the error of a SET past the 1 MiB value limit is the one
docs/pcached.md §3.10 documents (Redis stores 512 MB: a known difference).

SKIPPED (77) without /usr/bin/redis-server.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import Server, free_port, resp_cmd  # noqa: E402
from test_command_meta import Peer  # noqa: E402

REDIS = "/usr/bin/redis-server"
DOCS = os.environ.get("PCACHED_DOCS", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", "..", "docs", "pcached.md"))


def names_of(v, proto):
    """The names of a CONFIG GET reply, in order."""
    if proto == 3:
        return [k[1].decode() for k, _ in v[1]]
    return [v[1][i][1].decode() for i in range(0, len(v[1]), 2)]


class RedisReplies(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="redis-replies-")
        cls.rport = free_port()
        cls.redis = subprocess.Popen([REDIS, "--port", str(cls.rport), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--databases", "2",
                                      "--dir", cls.tmp.name],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", cls.rport), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        cls.pc = Server(workers=1, collections="db0;db1").start()

    @classmethod
    def tearDownClass(cls):
        cls.pc.cleanup()
        cls.redis.terminate()
        cls.redis.wait(timeout=10)
        cls.tmp.cleanup()

    def setUp(self):
        self.peers = []

    def tearDown(self):
        for p in self.peers:
            p.close()

    def pair(self, proto=2):
        r, p = Peer(self.rport, proto), Peer(self.pc.port, proto)
        self.peers += [r, p]
        return r, p

    def same(self, r, p, *args):
        theirs, ours = r.ask(*args)[0], p.ask(*args)[0]
        self.assertEqual(ours, theirs, "%r" % (args,))
        return ours

    def test_config_get_names_once(self):
        for proto in (2, 3):
            r, p = self.pair(proto)
            for pattern in ("port", "bind", "PORT", "Bind"):
                theirs = names_of(r.ask("CONFIG", "GET", pattern)[1], proto)
                ours = names_of(p.ask("CONFIG", "GET", pattern)[1], proto)
                self.assertEqual(ours, theirs, "RESP%d CONFIG GET %s" % (proto, pattern))
            for args in (("*",), ("port", "bind", "p*", "*ind"), ("maxmemory", "maxmemory*")):
                raw, v = p.ask("CONFIG", "GET", *args)
                names = names_of(v, proto)
                self.assertEqual(len(names), len(set(names)), "RESP%d %r: %r" % (proto, args,
                                                                              names))
                count = int(raw[1:raw.index(b"\r\n")])
                self.assertEqual(count, len(names) if proto == 3 else 2 * len(names))
            last = p.ask("CONFIG", "GET", "port")[1][1][-1]
            self.assertEqual((last[1] if proto == 3 else last)[1], str(self.pc.port).encode())

    def test_lcs_idx_resp3(self):
        for proto in (2, 3):
            r, p = self.pair(proto)
            for peer in (r, p):
                peer.ask("MSET", "lcs1", "ohmytext", "lcs2", "mynewtext")
            for extra in ((), ("MINMATCHLEN", "4"), ("WITHMATCHLEN",),
                          ("MINMATCHLEN", "2", "WITHMATCHLEN")):
                self.same(r, p, "LCS", "lcs1", "lcs2", "IDX", *extra)
            self.same(r, p, "LCS", "lcs1", "nosuch", "IDX")
            for peer in (r, p):
                peer.ask("DEL", "lcs1", "lcs2")

    def test_scan_cursor_as_strtoul(self):
        """Errors byte for byte; a cursor Redis reads as 0 is pcached's
        cursor 0 (cursors are the engine's: compared with SCAN 0)."""
        r, p = self.pair()
        zero = p.ask("SCAN", "0")[0]
        for cur in (b"", b"00", b"+0", b"0\x00abc", b"\x00", b"-0"):
            self.assertEqual(r.ask("SCAN", cur)[0], r.ask("SCAN", "0")[0], cur)
            self.assertEqual(p.ask("SCAN", cur)[0], zero, cur)
        for cur in (b" 0", b"0 ", b"+", b"-", b"x", b"18446744073709551616", b"0x0", b"1.0"):
            self.same(r, p, "SCAN", cur)
            self.same(r, p, "SCAN", cur, "COUNT", "5")

    def test_select_and_swapdb_arguments(self):
        r, p = self.pair()
        for arg in ("2147483648", "-2147483649", "99999999999999999999", "x", "1.5", "",
                    "2147483647", "-1", "2", "1", "0"):
            self.same(r, p, "SELECT", arg)
        for a, b in (("x", "1"), ("0", "x"), ("2147483648", "0"), ("0", "-2147483649"),
                     ("0", "2"), ("-1", "0"), ("0", "0"), ("1", "1"), ("x", "y")):
            self.same(r, p, "SWAPDB", a, b)
        self.same(r, p, "SWAPDB", "0")

    def test_unknown_command_arguments(self):
        r, p = self.pair()
        cases = [
            ("NOSUCHCMD", "\u00e9t\u00e9", b"\xff\xfe", b"a\x00hidden", b"x\r\ny"),
            (b"n\xc3\xb1ame", "a"),
            (b"\xff\x00x",),
            ("nosuch", "a" * 100, "b" * 100, "c"),
            ("nosuch", "a" * 200),
            ("nosuch", *["arg%d" % i for i in range(40)]),
            ("x" * 200, "y"),
        ]
        for args in cases:
            self.same(r, p, *args)

    def test_save_inside_multi(self):
        r, p = self.pair()
        for peer in (r, p):
            peer.ask("DEL", "mfoo")
        self.same(r, p, "MULTI")
        self.same(r, p, "SET", "mfoo", "bar")
        self.same(r, p, "SAVE")
        self.same(r, p, "EXEC")
        self.same(r, p, "EXISTS", "mfoo")

    def test_config_set_fixed_redis_settings(self):
        r, p = self.pair()
        self.same(r, p, "CONFIG", "SET", "daemonize", "yes")
        self.same(r, p, "CONFIG", "SET", "DAEMONIZE", "yes")

    def test_value_past_the_limit_is_the_documented_error(self):
        with open(DOCS, encoding="utf-8") as f:
            docs = f.read()
        section = docs[docs.index("### 3.10"):docs.index("## 4.")]
        r, p = self.pair()
        for size in (2 << 20, (1 << 20) + 1):
            got = p.ask("SET", "big", b"x" * size)[0].decode()
            self.assertTrue(got.startswith("-ERR string exceeds maximum allowed size"), got)
            shape = re.sub(r"\d+ bytes;", "L bytes;", got[1:].strip())
            self.assertIn("`-%s`" % shape, section.replace("\n", " ").replace("  ", " "))
            self.assertEqual(r.ask("SET", "big", b"x" * size)[0], b"+OK\r\n")
        self.assertEqual(p.ask("EXISTS", "big")[0], b":0\r\n")
        self.same(r, p, "PING", "still in step")


if __name__ == "__main__":
    if not os.access(REDIS, os.X_OK):
        print("SKIPPED: no redis-server (Debian package redis-server)")
        sys.exit(77)
    unittest.main(verbosity=2)
