"""The isolation checker (isolation_checker.py) in the suite, short: the
same random histories against redis-server as the control (0 anomalies
expected: a failure there is the checker's bug), against pcached with 1, 2
and 4 workers, and across kill -9 and a restart with the journal on
(`always`: every acknowledged write survives). Each target prints its
counts (operations, workers, anomalies). The long run (>= 1M operations)
is by hand: isolation_checker.py --port P --ops N --clients C.

ISOLATION_OPS (operations per client, default 400) and ISOLATION_CLIENTS
(default 6) size the run."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
import isolation_checker as ic  # noqa: E402
from pcached_harness import Server, free_port  # noqa: E402

OPS = int(os.environ.get("ISOLATION_OPS", "400"))
CLIENTS = int(os.environ.get("ISOLATION_CLIENTS", "6"))
REDIS_SERVER = "/usr/bin/redis-server"


def wait_ping(port, bound=30):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port, socket_timeout=2).ping():
                return
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            pass
        time.sleep(0.05)
    raise RuntimeError("no server on %d" % port)


class Isolation(unittest.TestCase):
    def run_target(self, name, port, workers, tmp):
        ic.setup(redis.Redis(port=port))
        hist = ic.run_workload(port, OPS, CLIENTS, seed=3, tmpdir=tmp, tag=name)
        bad, counts = ic.check(hist, final=ic.final_state(port))
        counts.update(target=name, workers=workers, clients=CLIENTS)
        print(json.dumps(counts), flush=True)
        for kind, o in bad[:10]:
            print("  %s: %s" % (kind, json.dumps(o)[:400]), flush=True)
        self.assertGreater(counts["completed"], CLIENTS * OPS // 2)
        self.assertEqual(bad, [], name)
        return counts

    def test_redis_server_control(self):
        if not os.path.exists(REDIS_SERVER):
            self.skipTest("no redis-server")
        with tempfile.TemporaryDirectory(prefix="iso-redis-") as tmp:
            port = free_port()
            p = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", tmp],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
            try:
                wait_ping(port)
                self.run_target("redis-server", port, 1, tmp)
            finally:
                p.kill()
                p.wait()

    def test_pcached_1_2_4_workers(self):
        for w in (1, 2, 4):
            with self.subTest(workers=w):
                s = Server(workers=w).start()
                try:
                    self.run_target("pcached", s.port, w, s.dir)
                finally:
                    s.cleanup()

    def test_pcached_kill9_and_restart_with_journal(self):
        port = free_port()
        s = Server(port=port, db_mode=1, persist_collections="default",
                   journal="default=always", workers=2, journal_rewrite_percent=0)
        s.opts["db_url"] = os.path.join(s.dir, "store")
        try:
            s.start()
            ic.setup(redis.Redis(port=port))
            out = {}

            def work():
                out["hist"] = ic.run_workload(port, OPS, CLIENTS, seed=5, tmpdir=s.dir,
                                              tag="kill9")
            t = threading.Thread(target=work)
            t.start()
            # kill -9 once the clients are well into their histories
            r = redis.Redis(port=port, socket_timeout=10)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and t.is_alive():
                n = int(r.info("stats")["total_commands_processed"])
                if n >= CLIENTS * OPS:
                    break
                time.sleep(0.02)
            os.killpg(s.proc.pid, signal.SIGKILL)
            s.kill_group()
            s.start()
            t.join()
            bad, counts = ic.check(out["hist"], final=ic.final_state(port))
            counts.update(target="pcached kill -9 + restart, journal always", workers=2,
                          clients=CLIENTS)
            print(json.dumps(counts), flush=True)
            for kind, o in bad[:10]:
                print("  %s: %s" % (kind, json.dumps(o)[:400]), flush=True)
            self.assertGreater(counts["indeterminate"], 0)  # the kill came mid-run
            self.assertEqual(bad, [])
        finally:
            s.cleanup()


if __name__ == "__main__":
    if shutil.which("redis-server") is None and not os.path.exists(REDIS_SERVER):
        print("SKIPPED: redis-server absent (the control)")
        sys.exit(77)
    unittest.main()
