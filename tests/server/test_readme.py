"""README.md and docs/pcached.md say what a stranger can rely on, checked
against a real pcached: the commands the README says pcached serves are the
ones it has (COMMAND LIST, both ways), the ones it says pcached refuses get
an error reply, the redis-benchmark tests both documents name run without
an error, /metrics and /health answer on 127.0.0.1:<http_port>, and every
file the README names is in the repository (no reference outside it)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import unittest
import urllib.request

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import Server, command, free_port  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
README = open(os.path.join(ROOT, "README.md")).read()
PCACHED_MD = open(os.environ.get("PCACHED_DOCS", os.path.join(ROOT, "docs", "pcached.md"))).read()

# a refused command with arguments that would be valid in Redis
REFUSED_ARGS = {"LPUSH": ["l", "a"], "RPUSH": ["l", "a"], "LPOP": ["l"], "SADD": ["s", "a"],
                "HSET": ["h", "f", "v"], "ZADD": ["z", "1", "a"], "XADD": ["x", "*", "f", "v"],
                "SETBIT": ["b", "1", "1"], "BITCOUNT": ["b"], "PFADD": ["p", "a"],
                "GEOADD": ["g", "1", "1", "a"], "SUBSCRIBE": ["c"], "PUBLISH": ["c", "m"],
                "ACL": ["WHOAMI"], "REPLICAOF": ["NO", "ONE"], "CLUSTER": ["INFO"],
                "MONITOR": [], "DEBUG": ["SLEEP", "0"], "EVAL_RO": ["return 1", "0"], "EVAL": ["return 1", "0"],
                "EVALSHA_RO": ["0" * 40, "0"], "FCALL": ["f", "0"], "FCALL_RO": ["f", "0"]}


def section(text, heading):
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def served_and_refused():
    """The command names of the README's lists: the bullets (served) and the
    **Refused** paragraph."""
    sec = section(README, "## What pcached serves, and what it refuses")
    bullets, refused = [], sec[sec.index("**Refused**"):]
    in_list = False
    for line in sec.split("\n"):
        if line.startswith("- **"):
            in_list = True
        elif not line.startswith("  "):
            in_list = False
        if in_list:
            bullets.append(line)
    names = re.compile(r"`([A-Z][A-Z_]*(?:\.[A-Z_]+)?)`")
    return names.findall("\n".join(bullets)), names.findall(refused)


def benchmark_tests(text, where):
    m = re.findall(r"`redis-benchmark -t ([a-z_,]+)`", text)
    assert len(m) == 1, "%s: one `redis-benchmark -t ...` claim expected, found %r" % (where, m)
    return m[0]


class Readme(unittest.TestCase):
    def test_commands_served_and_refused(self):
        served, refused = served_and_refused()
        self.assertGreater(len(served), 60, served)
        self.assertGreater(len(refused), 10, refused)
        s = Server(workers=1)
        s.opts["db_url"] = os.path.join(s.dir, "store")  # so PERF.SAVE has a store
        with s:
            # COMMAND LIST names subcommands too ("CLIENT|KILL"), as Redis 7.0
            # does; the README names commands
            have = {c.decode().upper() for c in command(s.port, "COMMAND", "LIST")
                    if b"|" not in c}
            plain = [c for c in served if not c.startswith("PERF.")]
            self.assertEqual(sorted(set(plain) - have), [],
                             "the README says pcached serves these; COMMAND LIST lacks them")
            self.assertEqual(sorted(have - set(plain) - set(refused)), [],
                             "pcached serves these; the README's lists do not name them")
            r = redis.Redis(port=s.port)
            for c in (c for c in served if c.startswith("PERF.")):
                args = ["*"] if c in ("PERF.KEYS", "PERF.DUMP", "PERF.DEL") else []
                self.assertIn(b"{", r.execute_command(c, *args), c)
            for c in refused:
                self.assertIn(c, REFUSED_ARGS, "add arguments for %s to REFUSED_ARGS" % c)
                with self.assertRaises(redis.ResponseError, msg=c):
                    command(s.port, c, *REFUSED_ARGS[c])
            self.assertEqual(r.ping(), True)  # and it still serves

    @unittest.skipIf(shutil.which("redis-benchmark") is None,
                     "redis-benchmark not installed (Debian package redis-tools)")
    def test_redis_benchmark_claim(self):
        tests = benchmark_tests(PCACHED_MD, "docs/pcached.md")
        self.assertEqual(benchmark_tests(README, "README.md"), tests)
        with Server(workers=2) as s:
            p = subprocess.run(["redis-benchmark", "-p", str(s.port), "-n", "5000", "-q",
                                "-t", tests], capture_output=True, text=True, timeout=300)
            out = p.stdout.replace("\r", "\n") + p.stderr
            self.assertEqual(p.returncode, 0, out)
            self.assertNotIn("rror", out)
            names = [t.upper() for t in tests.split(",")]
            if "PING" in names:  # "ping" is both of its PING tests
                names[names.index("PING"):names.index("PING") + 1] = ["PING_INLINE",
                                                                      "PING_MBULK"]
            for t in names:
                self.assertRegex(out, r"\n%s[^\n:]*: [0-9.]+ requests per second" % t, out)
            self.assertEqual(len(re.findall(r"requests per second", out)), len(names), out)

    def test_monitoring_where_it_says(self):
        sec = section(README, "## Monitoring")
        for want in ("`/metrics`", "`/health`", "`http://127.0.0.1:9380`", "`metrics_port`"):
            self.assertIn(want, sec)
        with open(os.path.join(ROOT, "scripts", "run.sh")) as f:
            self.assertIn("--metrics_port=9380", f.read())
        port = free_port()
        with Server(workers=1, metrics_port=port) as s:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as m:
                self.assertIn(b"pcache_uptime_seconds", m.read())
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=10) as h:
                self.assertEqual(h.status, 200)
            self.assertTrue(s.port)

    def test_names_only_files_of_the_repository(self):
        spec = re.search(r".{0,40}\bSPEC\b.{0,40}", README)
        self.assertIsNone(spec, "the README cites a document outside the repository")
        paths = set(re.findall(r"\]\(([^)#\s]+)", README))  # links and images
        top = ("docs/", "src/", "storage/", "odbc/", "opensips_module/", "tests/", "bench/",
               "scripts/", "cmake/", "packaging/", ".ci/")
        for tok in re.findall(r"`([^`\s]+)`", README):
            if tok.startswith(top):
                paths.add(tok.rstrip(".,;:"))
        self.assertGreater(len(paths), 20)
        missing = [p for p in sorted(paths) if not glob.glob(os.path.join(ROOT, p))]
        self.assertEqual(missing, [], "the README names files the repository lacks")


if __name__ == "__main__":
    unittest.main(verbosity=2)
