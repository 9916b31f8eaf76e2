#!/usr/bin/python3
"""Defaults that keep data (issue 32 item 4, docs/pcached.md §2.3), with a
real pcached and redis-py / redis-cli:

- a db_url alone persists and journals the default collection: a key
  survives a clean restart and a kill -9 of every process; a journal the
  configuration turns off (journal =) is said at the start and the kill
  then loses the key (the default was what kept it);
- Redis's dir is the data directory: the store is <dir>/store;
- every configuration that loses data at a restart is a WARN line of the
  start naming the key to set, and a configuration that keeps data has
  none;
- SHUTDOWN as Redis 7.0: refused before AUTH, the connection closed with
  the save done (redis-cli shutdown exits 0, the key is there after a
  restart), NOSAVE skips the save, SAVE saves with db_mode 0, a save that
  cannot happen keeps pcached running with Redis's error unless FORCE,
  ABORT / bad options / MULTI answered as Redis."""
import os
import signal
import subprocess
import sys
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402


def kill_all(s):
    """kill -9 of the master and every child at once (what the OOM killer
    or a crash of the machine's service manager does)."""
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.kill_group()


def warns(s):
    return [ln for ln in s.log_text().splitlines() if " WARN " in ln]


def wait_exit(s, timeout=60):
    try:
        return s.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


class StoreDefaults(unittest.TestCase):
    def test_db_url_alone_keeps_a_key_across_kill_9(self):
        s = Server(workers=2)
        s.opts["db_url"] = os.path.join(s.dir, "store")
        try:
            s.start()
            self.assertEqual(warns(s), [], "a store with the defaults loses nothing")
            r = redis.Redis(port=s.port)
            r.set("kept", "v1")
            info = r.info("persistence")
            self.assertEqual(info["pcache_db_mode"], 2)
            self.assertEqual(info["pcache_journal_status"], "ok")
            self.assertEqual(r.config_get("appendonly"), {"appendonly": "yes"})
            kill_all(s)
            s.start()
            self.assertEqual(redis.Redis(port=s.port).get("kept"), b"v1")
            self.assertEqual(s.stop(), 0)
            s.start()  # and a clean restart
            self.assertEqual(redis.Redis(port=s.port).get("kept"), b"v1")
        finally:
            s.cleanup()

    def test_journal_off_is_said_and_loses_the_key(self):
        s = Server(workers=1, journal="")
        s.opts["db_url"] = os.path.join(s.dir, "store")
        try:
            s.start()
            w = warns(s)
            self.assertTrue(any("collection 'default' has no journal" in ln and
                                "journal = default=everysec" in ln for ln in w), w)
            r = redis.Redis(port=s.port)
            r.set("lost", "v")
            kill_all(s)
            s.start()
            self.assertIsNone(redis.Redis(port=s.port).get("lost"))
        finally:
            s.cleanup()

    def test_dir_is_the_data_directory(self):
        s = Server(workers=1)
        data = os.path.join(s.dir, "data")
        os.mkdir(data)
        s.opts["dir"] = data
        try:
            s.start()
            redis.Redis(port=s.port).set("in-dir", "1")
            self.assertEqual(s.stop(), 0)
            self.assertTrue(os.path.exists(os.path.join(data, "store", "data.mdb")),
                            os.listdir(data))
            s.start()
            self.assertEqual(redis.Redis(port=s.port).get("in-dir"), b"1")
        finally:
            s.cleanup()

    def test_each_lossy_configuration_warns_at_start(self):
        cases = [  # options, a substring of the WARN line, the key it names
            ({}, "no store (db_url is empty)", "db_url"),
            ({"db_mode": 0}, "db_mode 0", "db_mode = 2"),
            ({"persist_collections": ""}, "collection 'default' is not in persist_collections",
             "persist_collections"),
            ({"db_mode": 1, "journal": ""}, "db_mode 1 saves nothing at shutdown", "db_mode = 2"),
            ({"collections": "default;other"},
             "collection 'other' is not in persist_collections", "persist_collections"),
        ]
        for opts, want, key in cases:
            s = Server(workers=1, **opts)
            if opts:
                s.opts["db_url"] = os.path.join(s.dir, "store")
            try:
                s.start()
                w = warns(s)
                self.assertTrue(any(want in ln and key in ln for ln in w), (opts, w))
            finally:
                s.cleanup()


class Shutdown(unittest.TestCase):
    def server(self, **opts):
        s = Server(workers=2, **opts)
        if "db_url" not in opts:
            s.opts["db_url"] = os.path.join(s.dir, "store")
        return s

    def test_needs_auth_then_saves_and_stops(self):
        s = self.server(requirepass="pw", journal="")
        try:
            s.start()
            r = redis.Redis(port=s.port, password="pw")
            r.set("k", "v")
            p = subprocess.run(["redis-cli", "-p", str(s.port), "SHUTDOWN"], capture_output=True,
                               text=True, timeout=60)
            self.assertIn("NOAUTH Authentication required.", p.stdout + p.stderr)
            self.assertIsNone(s.proc.poll())
            self.assertEqual(r.get("k"), b"v")  # still serving
            # redis-cli's SHUTDOWN: no reply, the connection closes, exit 0
            p = subprocess.run(["redis-cli", "-p", str(s.port), "-a", "pw", "--no-auth-warning",
                                "SHUTDOWN"], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertNotIn("unknown command", p.stdout + p.stderr)
            self.assertEqual(wait_exit(s), 0)
            log = s.log_text()
            self.assertIn("SHUTDOWN: stopping", log)
            self.assertIn("shutdown save done", log)
            s.kill_group()
            s.start()  # no journal: only the save kept it
            self.assertEqual(redis.Redis(port=s.port, password="pw").get("k"), b"v")
        finally:
            s.cleanup()

    def test_nosave_skips_the_save(self):
        s = self.server(journal="")
        try:
            s.start()
            r = redis.Redis(port=s.port)
            r.set("saved", "1")
            r.save()
            r.set("unsaved", "1")
            r.shutdown(nosave=True)  # redis-py: a closed connection is success
            self.assertEqual(wait_exit(s), 0)
            self.assertNotIn("shutdown save done", s.log_text())
            s.kill_group()
            s.start()
            r = redis.Redis(port=s.port)
            self.assertEqual(r.get("saved"), b"1")
            self.assertIsNone(r.get("unsaved"))
        finally:
            s.cleanup()

    def test_save_with_db_mode_0(self):
        s = self.server(db_mode=0, journal="")
        try:
            s.start()
            redis.Redis(port=s.port).set("k", "v")
            redis.Redis(port=s.port).shutdown(save=True)
            self.assertEqual(wait_exit(s), 0)
            s.kill_group()
            s.opts["db_mode"] = 1  # load it back
            s.start()
            self.assertEqual(redis.Redis(port=s.port).get("k"), b"v")
        finally:
            s.cleanup()

    def test_failed_save_keeps_serving_unless_force(self):
        s = Server(workers=1)  # no store: SHUTDOWN SAVE cannot save
        try:
            s.start()
            r = redis.Redis(port=s.port)
            r.set("k", "v")
            with self.assertRaises(redis.exceptions.ResponseError) as e:
                r.execute_command("SHUTDOWN", "SAVE")
            self.assertEqual(str(e.exception), "Errors trying to SHUTDOWN. Check logs.")
            self.assertIsNone(s.proc.poll())
            self.assertEqual(r.get("k"), b"v")
            self.assertIn("no store configured", s.log_text())
            r.shutdown(save=True, force=True)
            self.assertEqual(wait_exit(s), 0)
        finally:
            s.cleanup()

    def test_redis_replies(self):
        s = Server(workers=1)
        try:
            s.start()
            r = redis.Redis(port=s.port)
            for args, err in ((["ABORT"], "No shutdown in progress."),
                              (["SAVE", "NOSAVE"], "syntax error"),
                              (["NOW", "ABORT"], "syntax error"),
                              (["LATER"], "syntax error")):
                with self.assertRaises(redis.exceptions.ResponseError) as e:
                    r.execute_command("SHUTDOWN", *args)
                self.assertEqual(str(e.exception), err, args)
            p = r.pipeline(transaction=True)
            p.execute_command("SHUTDOWN")
            with self.assertRaisesRegex(redis.exceptions.ResponseError,
                                        "Command not allowed inside a transaction"):
                p.execute()
            self.assertIsNone(s.proc.poll())
            self.assertEqual(r.ping(), True)
            r.shutdown(now=True)
            self.assertEqual(wait_exit(s), 0)
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
