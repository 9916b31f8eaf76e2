#!/usr/bin/python3
"""Redis's names for pcached's keys (docs/pcached.md §2.1,
src/server/config_alias.c): each alias sets its key from the file and the
command line, loglevel's and syslog-enabled's words are mapped, an alias
and its key together are "given twice", a Redis key of another shape is
refused with a hint, and the docs' table lists exactly the aliases."""
import os
import re
import subprocess
import tempfile
import unittest

PCACHED = os.environ.get("PCACHED", "pcached")
DOCS = os.environ.get("PCACHED_DOCS", os.path.join(os.path.dirname(__file__),
                                                   "../../docs/pcached.md"))


def check(*args, conf=None):
    with tempfile.TemporaryDirectory() as d:
        argv = [PCACHED, "--port=0", "--workers=1"]
        if conf is not None:
            path = os.path.join(d, "pcached.conf")
            with open(path, "w") as f:
                f.write(conf)
            argv += ["-c", path]
        p = subprocess.run(argv + list(args) + ["--check"], capture_output=True, text=True,
                           timeout=30)
    values = dict(line.split(" = ", 1) for line in p.stdout.splitlines()
                  if " = " in line and not line.startswith("#"))
    return p, values


class Alias(unittest.TestCase):
    CASES = [  # alias, value given, key, value expected
        ("logfile", "/tmp/pcached-alias.log", "log_file", "/tmp/pcached-alias.log"),
        ("loglevel", "warning", "log_level", "warn"),
        ("loglevel", "notice", "log_level", "info"),
        ("loglevel", "verbose", "log_level", "info"),
        ("loglevel", "debug", "log_level", "debug"),
        ("loglevel", "err", "log_level", "err"),
        ("syslog-enabled", "yes", "syslog", "1"),
        ("syslog-enabled", "no", "syslog", "0"),
        # Redis's dir is the data directory: the store is a directory in it
        ("dir", "/tmp", "db_url", "/tmp/store"),
        ("dir", "/tmp/", "db_url", "/tmp/store"),
        ("timeout", "300", "idle_timeout_s", "300"),
        ("maxmemory-policy", "allkeys-lru", "maxmemory_policy", "allkeys-lru"),
        ("maxmemory-policy", "Volatile-S3FIFO", "maxmemory_policy", "volatile-s3fifo"),
        ("slowlog-log-slower-than", "2500", "slowlog_log_slower_than", "2500"),
        ("slowlog-log-slower-than", "-1", "slowlog_log_slower_than", "-1"),
        ("slowlog-max-len", "64", "slowlog_max_len", "64"),
    ]

    def test_command_line_and_file(self):
        for alias, given, key, want in self.CASES:
            p, v = check("--%s=%s" % (alias, given))
            self.assertEqual(p.returncode, 0, (alias, p.stderr))
            self.assertEqual(v.get(key), want, alias)
            p, v = check(conf="%s = %s\n" % (alias, given))
            self.assertEqual(p.returncode, 0, (alias, p.stderr))
            self.assertEqual(v.get(key), want, alias)

    def test_bad_values_named_by_key(self):
        p, _ = check("--loglevel=chatty")
        self.assertEqual(p.returncode, 2)
        self.assertIn("log_level: 'chatty' is not one of", p.stderr)
        p, _ = check("--timeout=soon")
        self.assertEqual(p.returncode, 2)
        self.assertIn("idle_timeout_s: 'soon' is not a non-negative integer", p.stderr)

    def test_alias_and_key_given_twice(self):
        p, _ = check(conf="log_file = /tmp/a\nlogfile = /tmp/b\n")
        self.assertEqual(p.returncode, 2)
        self.assertIn(":2: logfile (log_file): given twice", p.stderr)

    def test_redis_keys_of_another_shape_refused(self):
        for key, hint in (("databases", "select_collections"), ("save", "snapshot_period_s"),
                          ("appendonly", "journal ="), ("appendfsync", "journal ="),
                          ("dbfilename", "db_url"), ("daemonize", "foreground"),
                          ("maxmemory-samples", "sample nothing"),
                          ("maxmemory-eviction-tenacity", "bounded")):
            p, _ = check(conf="%s = 1\n" % key)
            self.assertEqual(p.returncode, 2, key)
            self.assertIn("'%s' is Redis's key, not pcached's" % key, p.stderr)
            self.assertIn(hint, p.stderr)

    def test_maxmemory_takes_redis_units(self):
        # Redis's memtoll: k/m/g are powers of 1000, kb/mb/gb of 1024, any case
        for given, want in (("0", "0"), ("4096", "4096"), ("512k", "512000"), ("512kb", "524288"),
                            ("100mb", "104857600"), ("100M", "100000000"), ("2GB", "2147483648"),
                            ("1g", "1000000000"), ("7b", "7")):
            p, v = check("--maxmemory=%s" % given)
            self.assertEqual(p.returncode, 0, (given, p.stderr))
            self.assertEqual(v.get("maxmemory"), want, given)
        for bad in ("", "-1", "1.5gb", "12 mb", "1tb", "mb", "99999999999999999999"):
            p, _ = check("--maxmemory=%s" % bad)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn("maxmemory: '%s' is not a byte count" % bad, p.stderr)

    def test_unknown_is_still_unknown(self):
        p, _ = check("--maxmemoryish=1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown key 'maxmemoryish'", p.stderr)

    def test_docs_table_is_the_alias_table(self):
        doc = open(DOCS).read()
        sect = doc[doc.index("### 2.1 Redis names"):doc.index("## 3. The RESP door")]
        rows = re.findall(r"^\| `([a-z-]+)` \| `([a-z_]+)` \|", sect, re.M)
        documented = set(rows)
        tested = {(a, k) for a, _, k, _ in self.CASES}
        self.assertEqual(documented, tested)
        src = open(os.path.join(os.path.dirname(__file__),
                                "../../src/server/config_alias.c")).read()
        table = src[src.index("srv_aliases[] = {"):src.index("};", src.index("srv_aliases[] = {"))]
        code = set(re.findall(r'\{"([a-z-]+)", "([a-z_]+)"', table))
        self.assertEqual(code, documented)


if __name__ == "__main__":
    unittest.main(verbosity=2)
