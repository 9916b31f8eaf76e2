#!/usr/bin/python3
"""Monitoring on by default, and true (issue 32 item 5, docs/pcached.md
§4.2), with a real pcached and redis-py / redis-cli:

- scripts/run.sh and the packaged pcached.conf turn the metrics-only
  listener on, on loopback, and leave the JSON-RPC TCP door off;
- the metrics listener answers GET /metrics (promtool-clean when
  promtool is installed) and /health, and refuses JSON-RPC (405, nothing
  run);
- before the first save the save timestamp is 0 and the age absent
  (INFO: -1), while LASTSAVE answers the start time as Redis; after a
  SAVE both are there;
- process CPU seconds, resident memory, network bytes in / out move with
  the traffic (the bytes exactly);
- per-command counts and the latency histogram: N GETs are N calls, the
  histogram's count and +Inf bucket equal them, LATENCY HISTOGRAM agrees;
- SLOWLOG: nothing at the default threshold for fast commands, every
  command at 0 (the newest first, Redis's entry shape, passwords
  redacted, EXEC's commands logged and not EXEC), RESET, -1 (none),
  slowlog-max-len."""
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PROMTOOL = shutil.which("promtool")


def http_req(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    out = r.status, r.read().decode()
    c.close()
    return out


def samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


class Defaults(unittest.TestCase):
    def test_run_sh_and_packaged_config_turn_metrics_on(self):
        with open(os.path.join(ROOT, "scripts", "run.sh")) as f:
            run_sh = f.read()
        m = re.search(r"--metrics_port=(\d+)", run_sh)
        self.assertIsNotNone(m, "scripts/run.sh starts pcached without metrics_port")
        self.assertNotEqual(int(m.group(1)), 0)
        self.assertNotIn("--metrics_bind", run_sh)  # the default: loopback
        with open(os.path.join(ROOT, "src", "server", "pcached.conf")) as f:
            conf = dict(ln.split(" = ", 1) for ln in f.read().splitlines()
                        if " = " in ln and not ln.startswith(("#", ";")))
        self.assertEqual(conf["metrics_bind"].strip(), "127.0.0.1")
        self.assertNotEqual(int(conf["metrics_port"]), 0)
        self.assertEqual(int(conf["http_port"]), 0, "the JSON-RPC TCP door stays off")


class Monitoring(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(workers=2, metrics_port=free_port(), requirepass="pw")
        cls.s.opts["db_url"] = os.path.join(cls.s.dir, "store")
        cls.s.start()
        cls.mport = cls.s.opts["metrics_port"]
        cls.r = redis.Redis(port=cls.s.port, password="pw")

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def metrics(self):
        st, body = http_req(self.mport, "GET", "/metrics")
        self.assertEqual(st, 200)
        return body, samples(body)

    def test_a_no_save_yet_then_a_save(self):
        # runs first (named _a_): nothing has saved in this run yet
        body, m = self.metrics()
        self.assertEqual(m["pcache_last_save_timestamp_seconds"], 0)
        self.assertNotIn("pcache_last_save_age_seconds", m)
        self.assertEqual(self.r.info("metrics")["pcache_last_save_age_seconds"], -1)
        st, health = http_req(self.mport, "GET", "/health")
        self.assertEqual(st, 200)
        self.assertIn('"last_save":0,', health)
        start = self.r.info("server")["uptime_in_seconds"]
        self.assertLessEqual(abs(self.r.lastsave().timestamp()
                                 - (time.time() - start)), 3)  # Redis: the start time
        self.r.save()
        _, m = self.metrics()
        self.assertLessEqual(abs(m["pcache_last_save_timestamp_seconds"] - time.time()), 5)
        self.assertIn("pcache_last_save_age_seconds", m)

    def test_listener_serves_metrics_only(self):
        body, _ = self.metrics()
        if PROMTOOL is None:
            print("SKIPPED part: promtool not installed (Debian package prometheus)")
        else:
            p = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                               text=True)
            self.assertEqual((p.returncode, p.stdout + p.stderr), (0, ""))
        req = '{"jsonrpc":"2.0","method":"perf_set","params":{"key":"via-metrics",' \
              '"value":"x"},"id":1}'
        st, out = http_req(self.mport, "POST", "/", req)
        self.assertEqual(st, 405, out)
        self.assertIsNone(self.r.get("via-metrics"))
        self.assertEqual(http_req(self.mport, "GET", "/health")[0], 200)
        self.assertEqual(http_req(self.mport, "GET", "/nope")[0], 404)

    def test_process_and_network_figures(self):
        _, before = self.metrics()
        # a known number of bytes each way, on one connection
        s = socket.create_connection(("127.0.0.1", self.s.port), timeout=10)
        try:
            req = b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n" + b"*3\r\n$3\r\nSET\r\n$1\r\nn\r\n$5\r\nhello\r\n"
            s.sendall(req)
            got = b""
            while len(got) < 10:
                got += s.recv(100)
        finally:
            s.close()
        self.assertEqual(got, b"+OK\r\n+OK\r\n")
        # CPU time is counted in clock ticks (10 ms): work until a tick shows,
        # so a fast machine that serves 2,000 GETs inside one tick still passes
        # and a counter that never moves still fails, at the deadline.
        deadline = time.monotonic() + 60
        while True:
            for _ in range(2000):
                self.r.get("n")
            _, after = self.metrics()
            cpu = (after["pcache_cpu_user_seconds_total"]
                   + after["pcache_cpu_sys_seconds_total"])
            if cpu > 0 or time.monotonic() > deadline:
                break
        self.assertGreaterEqual(after["pcache_net_input_bytes_total"]
                                - before["pcache_net_input_bytes_total"], len(req))
        self.assertGreaterEqual(after["pcache_net_output_bytes_total"]
                                - before["pcache_net_output_bytes_total"], len(got))
        self.assertGreater(cpu, 0)
        self.assertGreater(after["pcache_process_resident_memory_bytes"], 1 << 20)
        info = self.r.info("stats")
        self.assertGreaterEqual(info["total_net_input_bytes"],
                                after["pcache_net_input_bytes_total"])

    def test_per_command_counts_and_histogram(self):
        _, before = self.metrics()
        n = 321
        p = self.r.pipeline(transaction=False)
        for i in range(n):
            p.strlen("h%d" % i)
        p.execute()
        _, after = self.metrics()
        k = '{command="strlen"}'
        calls = after["pcache_command_calls_total" + k] - before.get(
            "pcache_command_calls_total" + k, 0)
        self.assertEqual(calls, n)
        count = after["pcache_command_duration_seconds_count" + k]
        self.assertEqual(count, after["pcache_command_calls_total" + k])
        inf = after['pcache_command_duration_seconds_bucket{command="strlen",le="+Inf"}']
        self.assertEqual(inf, count)
        buckets = sorted((float(re.search(r'le="([^"]+)"', name).group(1)), v)
                         for name, v in after.items()
                         if name.startswith('pcache_command_duration_seconds_bucket{command="strlen"'))
        self.assertEqual(len(buckets), 24)
        vals = [v for _, v in buckets]
        self.assertEqual(vals, sorted(vals))  # cumulative
        # LATENCY HISTOGRAM: the same counters, Redis 7.0's shape
        h = self.r.execute_command("LATENCY", "HISTOGRAM", "strlen")
        if isinstance(h, list):
            h = dict(zip(h[::2], h[1::2]))
        e = h[b"strlen"]
        if isinstance(e, list):
            e = dict(zip(e[::2], e[1::2]))
        self.assertEqual(e[b"calls"], count)
        hist = e[b"histogram_usec"]
        if isinstance(hist, list):
            hist = dict(zip(hist[::2], hist[1::2]))
        self.assertEqual(max(hist.values()), count)

    def test_slowlog(self):
        r = self.r
        self.assertEqual(r.config_get("slowlog-log-slower-than"),
                         {"slowlog-log-slower-than": "10000"})
        r.slowlog_reset()
        for _ in range(50):
            r.get("fast")
        self.assertEqual(r.slowlog_len(), 0, "fast commands are not slow")
        r.config_set("slowlog-log-slower-than", 0)
        try:
            r.set("slow", "x")
            r.execute_command("AUTH", "pw")
            p = r.pipeline(transaction=True)
            p.execute_command("INCR", "in-exec")
            p.execute()
            log = r.slowlog_get(10)
            cmds = [e["command"] for e in log]
            self.assertEqual(cmds[0], b"INCR in-exec")  # newest first; EXEC not logged
            self.assertNotIn(b"EXEC", cmds)
            self.assertIn(b"AUTH (redacted)", cmds)
            self.assertIn(b"SET slow x", cmds)
            ids = [e["id"] for e in log]
            self.assertEqual(ids, sorted(ids, reverse=True))
            raw = r.execute_command("SLOWLOG", "GET", "1")[0]
            self.assertEqual(len(raw), 6)  # id, time, us, args, addr, name
            self.assertRegex(raw[4].decode(), r"^127\.0\.0\.1:\d+$")
            long = "v" * 300
            r.set("long", long)
            args = r.execute_command("SLOWLOG", "GET", "1")[0][3]
            self.assertEqual(args[2], b"v" * 128 + b"... (172 more bytes)")
            r.config_set("slowlog-max-len", 3)
            for _ in range(10):
                r.ping()
            self.assertEqual(r.slowlog_len(), 3)
            r.slowlog_reset()
            self.assertLessEqual(r.slowlog_len(), 1)  # the RESET itself, as Redis
            r.config_set("slowlog-log-slower-than", -1)
            self.assertEqual(r.config_get("slowlog-log-slower-than"),
                             {"slowlog-log-slower-than": "-1"})
            r.slowlog_reset()
            for _ in range(10):
                r.ping()
            self.assertEqual(r.slowlog_len(), 0)
        finally:
            r.config_set("slowlog-log-slower-than", 10000)
            r.config_set("slowlog-max-len", 128)


if __name__ == "__main__":
    r = unittest.main(verbosity=2, exit=False).result
    sys.exit(1 if not r.wasSuccessful() else 0)
