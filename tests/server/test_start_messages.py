#!/usr/bin/python3
"""Fail fast and say what to do (issue 32 item 8, docs/pcached.md §2.3),
with a real pcached:

- a start whose RESP or metrics port is busy fails before the store is
  created (the store's directory does not appear);
- a permission error names the user pcached runs as and the fix (run as
  nobody; skipped when not root);
- the memory ceiling is refused when the configuration is read, with its
  reason, and the documented range of mem_mb is the one enforced;
- a redis.conf-style line gets the pcached form or the closest key;
- a clean start (creating the store, then loading it) logs no temporary
  store path and no dead-process reader slots, and no "did not stop
  cleanly";
- a start after a kill -9 of every process says so and what it
  recovered."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import PCACHED, Server, free_port  # noqa: E402

DOCS = os.environ.get("PCACHED_DOCS", os.path.join(os.path.dirname(__file__),
                                                   "../../docs/pcached.md"))


def run(*args, conf=None, timeout=60):
    with tempfile.TemporaryDirectory() as d:
        argv = [PCACHED, "--workers=1", "--mem_mb=16"]
        if conf is not None:
            path = os.path.join(d, "pcached.conf")
            with open(path, "w") as f:
                f.write(conf)
            argv += ["-c", path]
        return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=timeout)


class FailFast(unittest.TestCase):
    def busy_port_before_store(self, key):
        with tempfile.TemporaryDirectory() as d:
            holder = socket.socket()
            holder.bind(("127.0.0.1", 0))
            holder.listen(1)
            busy = holder.getsockname()[1]
            store = os.path.join(d, "store")
            args = ["--db_url=" + store, "--port=%d" % (busy if key == "port" else 0)]
            if key != "port":
                args.append("--%s=%d" % (key, busy))
            try:
                p = subprocess.run([PCACHED, "--workers=1", "--mem_mb=16"] + args,
                                   capture_output=True, text=True, timeout=60)
            finally:
                holder.close()
            self.assertNotEqual(p.returncode, 0, p.stderr)
            self.assertIn(":%d" % busy, p.stderr)
            self.assertIn("in use", p.stderr)
            self.assertFalse(os.path.exists(store), "the store was created before the bind")
            self.assertNotIn("warm-up", p.stderr)

    def test_busy_resp_port_fails_before_the_store(self):
        self.busy_port_before_store("port")

    def test_busy_metrics_port_fails_before_the_store(self):
        self.busy_port_before_store("metrics_port")

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("runuser"),
                         "needs root and runuser to start pcached as another user")
    def test_permission_error_names_the_user_and_the_fix(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)  # root's: nobody cannot create the store in it
            store = os.path.join(d, "store")
            p = subprocess.run(["runuser", "-u", "nobody", "--", PCACHED, "--workers=1",
                                "--mem_mb=16", "--port=0", "--db_url=" + store],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("pcached runs as user nobody", p.stderr)
            self.assertIn("chown nobody %s" % d, p.stderr)
            self.assertIn("is owned by root:root with mode 0755", p.stderr)
            sock = os.path.join(d, "s.sock")
            p = subprocess.run(["runuser", "-u", "nobody", "--", PCACHED, "--workers=1",
                                "--mem_mb=16", "--port=0", "--unix_socket=" + sock],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("pcached runs as user nobody", p.stderr)
            self.assertIn("or set unix_socket to a path nobody can write", p.stderr)

    def test_memory_ceiling_at_config_time(self):
        p = run("--mem_mb=40000", "--check")
        self.assertEqual(p.returncode, 2)
        m = re.search(r"mem_mb: 40000 is out of range \[8, (\d+)\]", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        top = int(m.group(1))
        self.assertIn("32-bit offsets", p.stderr)
        # the documented range is the enforced one, and its top fits
        with open(DOCS) as f:
            doc = f.read()
        self.assertRegex(doc, r"\| `mem_mb` \| 256 \| [^|]*32 GiB[^|]*8 to %d \|" % top)
        self.assertEqual(run("--mem_mb=%d" % top, "--check").returncode, 0)
        self.assertEqual(run("--mem_mb=%d" % (top + 1), "--check").returncode, 2)
        p = run("--mem_mb=30000", "--hugepage_mb=4000", "--check")
        self.assertEqual(p.returncode, 2)
        m = re.search(r"mem_mb can be at most (\d+)", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        # the bound it names is the real one: it passes, one more does not
        most = int(m.group(1))
        self.assertEqual(run("--mem_mb=%d" % most, "--hugepage_mb=4000", "--check").returncode,
                         0)
        self.assertEqual(run("--mem_mb=%d" % (most + 1), "--hugepage_mb=4000",
                             "--check").returncode, 2)
        # the start refuses it as --check does, before mapping anything
        p = run("--port=0", "--mem_mb=30000", "--hugepage_mb=4000")
        self.assertEqual(p.returncode, 2)
        self.assertIn("can be at most", p.stderr)

    def test_redis_conf_lines_get_a_hint(self):
        p = run("--check", conf="port 6379\n")
        self.assertEqual(p.returncode, 2)
        self.assertIn("got 'port 6379' (redis.conf's form): write 'port = 6379'", p.stderr)
        p = run("--check", conf="maxmemory-polcy allkeys-lru\n")
        self.assertIn("the closest is 'maxmemory_policy': 'maxmemory_policy = allkeys-lru'",
                      p.stderr)
        p = run("--check", conf="appendonly yes\n")
        self.assertIn("journal = COLLECTION=everysec", p.stderr)
        p = run("--check", conf="prot = 6379\n")
        self.assertIn("unknown key 'prot' (the closest key is 'port')", p.stderr)
        p = run("--prot=6379", "--check")
        self.assertIn("unknown key 'prot' (the closest key is 'port')", p.stderr)


class StartLog(unittest.TestCase):
    def test_clean_starts_say_nothing_odd(self):
        s = Server(workers=2)
        s.opts["db_url"] = os.path.join(s.dir, "store")
        try:
            s.start()  # creates the store
            redis.Redis(port=s.port).set("k", "v")
            self.assertEqual(s.stop(), 0)
            log = s.log_text()
            s.start()  # loads it
            self.assertEqual(s.stop(), 0)
            log += s.log_text()
            self.assertIn("store %s: created" % s.opts["db_url"], log)
            self.assertIn("loaded default: 1 entries", log)
            for bad in (".pcache-new", "reader slots", "did not stop cleanly", " WARN "):
                self.assertNotIn(bad, log)
        finally:
            s.cleanup()

    def test_unclean_stop_is_said_with_what_was_recovered(self):
        s = Server(workers=2)
        s.opts["db_url"] = os.path.join(s.dir, "store")
        try:
            s.start()
            r = redis.Redis(port=s.port)
            for i in range(20):
                r.set("k%d" % i, "v")
            os.killpg(s.proc.pid, signal.SIGKILL)
            s.kill_group()
            s.start()
            log = s.log_text()
            m = re.search(r"the previous run of store \S+ \(boot generation (\d+)\) did not stop "
                          r"cleanly \(killed, crashed or the machine lost power\): .*this start "
                          r"restored 1 collection\(s\): (\d+) entries from snapshots and (\d+) "
                          r"journal records", log)
            self.assertIsNotNone(m, log)
            self.assertEqual(int(m.group(3)), 20)
            self.assertEqual(redis.Redis(port=s.port).dbsize(), 20)
            self.assertEqual(s.stop(), 0)
            s.start()  # that stop was clean: nothing said
            self.assertNotIn("did not stop cleanly", s.log_text())
        finally:
            s.cleanup()


if __name__ == "__main__":
    r = unittest.main(verbosity=2, exit=False).result
    sys.exit(1 if not r.wasSuccessful() else 77 if r.skipped else 0)
