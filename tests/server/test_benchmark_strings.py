"""redis-benchmark (hiredis) over the string commands: its default run, which
stops at its first list command (LPUSH: lists are out of scope) after every
string-typed test before it has run, and the newer string commands as its
custom commands, pipelined and not. Each must run without a server error.
Speed is not judged here (bench/ measures it)."""
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import Server  # noqa: E402

CUSTOM = [
    ["APPEND", "k:__rand_int__", "xy"],
    ["GETRANGE", "k:__rand_int__", "0", "-1"],
    ["SETRANGE", "k:__rand_int__", "4", "abc"],
    ["GETSET", "g:__rand_int__", "v"],
    ["MSETNX", "n:__rand_int__", "a", "n2:__rand_int__", "b"],
    ["INCRBYFLOAT", "f:__rand_int__", "1.5"],
    ["STRLEN", "k:__rand_int__"],
    ["COPY", "g:__rand_int__", "c:__rand_int__", "REPLACE"],
    ["RENAMENX", "g:1", "g:1"],
    ["TOUCH", "k:__rand_int__"],
    ["EXPIRETIME", "k:__rand_int__"],
    ["LCS", "k:__rand_int__", "r:__rand_int__"],
]


def bench(port, *args):
    p = subprocess.run(["redis-benchmark", "-p", str(port), "-q"] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p, p.stdout.replace("\r", "\n") + p.stderr


class Benchmark(unittest.TestCase):
    def test_default_run_stops_at_lpush_only(self):
        with Server(workers=2) as s:
            p, out = bench(s.port, "-n", "2000")
            for t in ("PING_INLINE", "PING_MBULK", "SET", "GET", "INCR"):
                self.assertRegex(out, r"\n%s: [0-9.]+ requests per second" % t, out)
            errors = re.findall(r"Error from server: (.*)", out)
            self.assertTrue(errors, out)
            for e in errors:
                self.assertIn("unknown command 'LPUSH'", e)

    def test_string_commands(self):
        with Server(workers=2) as s:
            p, out = bench(s.port, "-n", "3000", "-t", "set,get,incr,mset")
            bench(s.port, "-n", "1", "SET", "g:1", "v")
            self.assertEqual(len(re.findall(r"requests per second", out)), 4, out)
            for pipeline in ("1", "16"):
                for cmd in CUSTOM:
                    # redis-benchmark stops at an error reply: every command here
                    # succeeds on any key (RENAMENX of a key onto itself: :0)
                    p, out = bench(s.port, "-n", "2000", "-r", "200", "-P", pipeline, *cmd)
                    self.assertEqual(p.returncode, 0, out)
                    self.assertRegex(out, r"requests per second", out)
                    self.assertNotIn("Error", out, cmd)


if __name__ == "__main__":
    if shutil.which("redis-benchmark") is None:
        print("SKIPPED: redis-benchmark not installed (Debian package redis-tools)")
        sys.exit(77)
    unittest.main(verbosity=2)
