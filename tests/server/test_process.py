"""pcached's process model with real clients: the restart warmth (100k
keys survive a SIGTERM with their TTLs counted down, not reset), a worker
killed with SIGKILL under load, saves requested over RESP running in the
maintenance process, SIGHUP reopening the log, the drain on SIGTERM, and
redis-benchmark unmodified."""
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, raw, resp_cmd  # noqa: E402


def read(path):
    with open(path) as f:
        return f.read()


def load_keys(r, n, ttl):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set("warm:%d" % i, "value-%d" % i, ex=ttl)
        if len(p) >= 5000:
            p.execute()
    p.execute()


class Persistence(unittest.TestCase):
    def test_restart_warmth_100k(self):
        s = Server(db_url="", workers=2)
        store = os.path.join(s.dir, "store")
        s.opts.update(db_url=store, db_mode=2, persist_collections="default")
        try:
            s.start()
            r = redis.Redis(port=s.port)
            load_keys(r, 100000, 1000)
            r.set("counter", 0)
            r.incrby("counter", 41)
            r.set("forever", "x")
            self.assertEqual(r.dbsize(), 100002)
            time.sleep(2.2)  # so that a reset TTL (1000) and a kept one differ
            self.assertEqual(s.stop(), 0)
            self.assertIn("shutdown save done", s.log_text())
            s.start()
            r = redis.Redis(port=s.port)
            self.assertEqual(r.dbsize(), 100002)
            p = r.pipeline(transaction=False)
            for i in range(0, 100000, 97):
                p.get("warm:%d" % i)
                p.ttl("warm:%d" % i)
            res = p.execute()
            for j, i in enumerate(range(0, 100000, 97)):
                self.assertEqual(res[2 * j], ("value-%d" % i).encode())
                self.assertTrue(900 <= res[2 * j + 1] <= 998, res[2 * j + 1])  # counted down, not reset
            self.assertEqual(r.incr("counter"), 42)  # still a counter
            self.assertEqual(r.ttl("forever"), -1)
            self.assertEqual(s.stop(), 0)
        finally:
            s.cleanup()

    def test_journal_always_survives_kill9_of_everything(self):
        s = Server(workers=2)
        s.opts.update(db_url=os.path.join(s.dir, "store"), db_mode=1,
                      persist_collections="default", journal="default=always")
        try:
            s.start()
            clients = [redis.Redis(port=s.port) for _ in range(4)]  # spread over the workers
            for i in range(500):  # each acknowledged before the next
                clients[i % 4].set("j:%d" % i, "v%d" % i)
            r = clients[0]
            r.incrby("j:n", 7)
            r.delete("j:0")
            os.killpg(s.proc.pid, signal.SIGKILL)  # no drain, no shutdown save
            s.kill_group()
            s.start()
            r = redis.Redis(port=s.port)
            self.assertIsNone(r.get("j:0"))
            self.assertEqual(r.mget(["j:%d" % i for i in range(1, 500)]),
                             [("v%d" % i).encode() for i in range(1, 500)])
            self.assertEqual(r.incr("j:n"), 8)
            self.assertEqual(s.stop(), 0)
        finally:
            s.cleanup()

    def test_periodic_snapshots_in_maintenance(self):
        s = Server(workers=1)
        s.opts.update(db_url=os.path.join(s.dir, "store"), persist_collections="default",
                      snapshot_period_s=1)
        try:
            s.start()
            r = redis.Redis(port=s.port)
            start = r.lastsave()
            r.set("periodic", "yes")
            for _ in range(100):
                if r.info("persistence")["pcache_saves"] >= 2:
                    break
                time.sleep(0.1)
            self.assertGreaterEqual(r.info("persistence")["pcache_saves"], 2)
            self.assertGreater(r.lastsave(), start)
            saved = re.findall(r"(\w+)\[\d+\] INFO pcache: saved default: (\d+) entries",
                               s.log_text())
            self.assertGreaterEqual(len(saved), 2)
            self.assertEqual({who for who, _ in saved}, {"maint"})
            self.assertIn("1", {n for _, n in saved})
            self.assertEqual(s.stop(), 0)
        finally:
            s.cleanup()

    def test_save_commands_run_in_maintenance(self):
        s = Server(workers=2)
        store = os.path.join(s.dir, "store")
        s.opts.update(db_url=store, db_mode=1, persist_collections="default",
                      unix_socket=os.path.join(s.dir, "mi.sock"))
        try:
            s.start()
            r = redis.Redis(port=s.port)
            before = r.lastsave()
            r.mset({"s:%d" % i: i for i in range(1000)})
            time.sleep(1.1)
            self.assertTrue(r.save())
            after = r.lastsave()
            self.assertGreater(after, before)
            out = r.execute_command("PERF.SAVE")
            self.assertIn(b'"saved":1000', out)
            self.assertEqual(r.bgsave(), True)
            for _ in range(100):
                if r.info("persistence")["rdb_bgsave_in_progress"] == 0:
                    break
                time.sleep(0.05)
            self.assertEqual(r.info("persistence")["rdb_last_bgsave_status"], "ok")
            self.assertGreaterEqual(r.info("persistence")["pcache_saves"], 3)
            self.assertIn(b'"loaded":1000', r.execute_command("PERF.LOAD", "default"))
            with self.assertRaises(redis.ResponseError) as cm:
                r.execute_command("PERF.LOAD", "nosuch")
            self.assertIn("nosuch", str(cm.exception))
            # the saves ran in the maintenance process, never in a worker
            log = s.log_text()
            savers = set(re.findall(r"(\w+)\[\d+\] INFO pcache: saved default", log))
            self.assertEqual(savers, {"maint"}, log)
            # many clients asking at once queue behind each other and all get answers
            errs = []

            def saver():
                try:
                    if redis.Redis(port=s.port).save() is not True:
                        errs.append("not True")
                except Exception as e:  # noqa: BLE001
                    errs.append(repr(e))
            ts = [threading.Thread(target=saver) for _ in range(6)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
            self.assertEqual(errs, [])
            self.assertEqual(s.stop(), 0)
        finally:
            s.cleanup()


class Processes(unittest.TestCase):
    def test_kill9_worker_under_load(self):
        with Server(workers=2) as s:
            r = redis.Redis(port=s.port)
            load_keys(r, 20000, 0 or None)
            stop = threading.Event()
            stats = {"ok": 0, "reconnects": 0, "bad": []}
            lock = threading.Lock()

            def hammer(t):
                c = redis.Redis(port=s.port, socket_timeout=5)
                i = 0
                while not stop.is_set():
                    k = "warm:%d" % ((t * 7919 + i) % 20000)
                    i += 1
                    try:
                        v = c.get(k)
                        with lock:
                            if v != ("value-%s" % k.split(":")[1]).encode():
                                stats["bad"].append((k, v))
                            stats["ok"] += 1
                    except (redis.ConnectionError, redis.TimeoutError):
                        with lock:
                            stats["reconnects"] += 1
                        c = redis.Redis(port=s.port, socket_timeout=5)
            ts = [threading.Thread(target=hammer, args=(t,)) for t in range(6)]
            for t in ts:
                t.start()
            time.sleep(0.5)
            pids_before = set(s.children())
            self.assertEqual(len(pids_before), 3)  # two workers and the maintenance process
            victim = redis.Redis(port=s.port).info("server")["process_id"]
            self.assertIn(victim, pids_before)
            before_ok = stats["ok"]
            os.kill(victim, signal.SIGKILL)
            # the state: a replacement runs and the clients were served
            # meanwhile (a generous deadline: the machine may be busy)
            deadline = time.time() + 60
            while time.time() < deadline and not (
                    len(set(s.children()) - {victim}) == 3 and stats["ok"] - before_ok > 100):
                time.sleep(0.05)
            after_ok = stats["ok"]
            stop.set()
            for t in ts:
                t.join(10)
            pids_after = set(s.children())
            self.assertEqual(len(pids_after), 3)
            self.assertNotIn(victim, pids_after)
            self.assertGreater(after_ok - before_ok, 100)  # served throughout
            self.assertEqual(stats["bad"], [])
            # the table is intact: every key still there with its value
            p = r.pipeline(transaction=False)
            for i in range(20000):
                p.get("warm:%d" % i)
            res = p.execute()
            self.assertEqual(res, [("value-%d" % i).encode() for i in range(20000)])
            self.assertIn("killed by signal 9: restarting", s.log_text())
            self.assertEqual(s.stop(), 0)

    def test_sighup_reopens_log_and_sigterm_drains(self):
        s = Server(workers=1)
        logf = os.path.join(s.dir, "file.log")
        s.opts.update(log_file=logf)
        try:
            s.start()
            self.assertIn("serving RESP", read(logf))
            os.rename(logf, logf + ".1")
            s.proc.send_signal(signal.SIGHUP)
            for _ in range(100):
                if os.path.exists(logf) and "logs reopened" in read(logf):
                    break
                time.sleep(0.05)
            self.assertIn("logs reopened", read(logf))
            # a client with a pipeline in flight at SIGTERM gets every reply
            import socket
            c = socket.create_connection(("127.0.0.1", s.port))
            c.sendall(b"".join(resp_cmd("INCR", "d") for _ in range(2000)))
            time.sleep(0.2)
            s.proc.send_signal(signal.SIGTERM)
            buf = b""
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                buf += chunk
            self.assertEqual(buf.count(b"\r\n"), 2000)
            self.assertTrue(buf.endswith(b":2000\r\n"))
            c.close()
            self.assertEqual(s.proc.wait(20), 0)
            self.assertIn("stopped", read(logf))
        finally:
            s.cleanup()


class Benchmark(unittest.TestCase):
    def test_redis_benchmark_unmodified(self):
        with Server(workers=2) as s:
            p = subprocess.run(["redis-benchmark", "-p", str(s.port), "-n", "20000", "-c", "20",
                                "-r", "10000", "-d", "200", "-q", "-t",
                                "ping,set,get,incr,mset"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            out = p.stdout.replace("\r", "\n")
            for t in ("PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET"):
                self.assertRegex(out, r"%s[^\n]*: [0-9.]+ requests per second" % t)
            self.assertNotIn("ERR", p.stdout + p.stderr)
            self.assertNotIn("WARNING", p.stderr)  # it could read CONFIG GET
            p = subprocess.run(["redis-benchmark", "-p", str(s.port), "-n", "20000", "-P", "16",
                                "-q", "-t", "set,get"], capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(len(re.findall(r"requests per second", p.stdout)), 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
