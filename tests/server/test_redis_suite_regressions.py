"""Regressions found by running Redis 7.0.15's own test suite against
pcached (docs/pcached.md, "Redis's test suite"), each checked byte for byte
against a real redis-server (Debian's, started here on a private loopback
port). SKIPPED when redis-server is not installed.

- protocol.tcl "Out of range multibulk payload length": a bulk length above
  512 MiB (Redis's proto-max-bulk-len default) is a protocol error that
  closes the connection, not pcached's "argument too long" refusal;
- every external-server test starts with FUNCTION FLUSH: pcached, which has
  no functions, answers it as Redis does."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port  # noqa: E402

REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"


def exchange(port, data, timeout=2):
    """Sends data, returns every byte answered until close or silence,
    with b"<closed>" appended when the server closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    return out + b"<closed>"
                out += b
        except socket.timeout:
            return out


class SideBySide(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="redis-side-")
        cls.rport = free_port()
        cls.redis = subprocess.Popen([REDIS, "--port", str(cls.rport), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", cls.tmp.name],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", cls.rport), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        cls.pc = Server(workers=1).start()

    @classmethod
    def tearDownClass(cls):
        cls.pc.cleanup()
        cls.redis.terminate()
        cls.redis.wait(timeout=10)
        cls.tmp.cleanup()

    def same(self, data, want=None):
        theirs = exchange(self.rport, data)
        ours = exchange(self.pc.port, data)
        self.assertEqual(ours, theirs, "request %r" % data)
        if want is not None:
            self.assertEqual(ours, want)

    def test_bulk_length_above_512_mib_is_a_protocol_error(self):
        bad = b"-ERR Protocol error: invalid bulk length\r\n<closed>"
        for n in (b"536870913", b"2000000000", b"9223372036854775807"):
            self.same(b"*3\r\n$" + n + b"\r\n", bad)
            self.same(b"*1\r\n$4\r\nPING\r\n*3\r\n$" + n + b"\r\n", b"+PONG\r\n" + bad)

    def test_function_flush(self):
        self.same(b"FUNCTION FLUSH\r\nFUNCTION FLUSH async\r\nFUNCTION flush SYNC\r\n",
                  b"+OK\r\n+OK\r\n+OK\r\n")
        self.same(b"FUNCTION FLUSH foo\r\n",
                  b"-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n")
        self.same(b"FUNCTION Flush SYNC x\r\n")
        self.same(b"FUNCTION\r\n", b"-ERR wrong number of arguments for 'function' command\r\n")


if __name__ == "__main__":
    if not os.access(REDIS, os.X_OK):
        print("SKIPPED: no redis-server (Debian package redis-server)")
        sys.exit(77)
    unittest.main(verbosity=2)
