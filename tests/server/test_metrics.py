"""GET /metrics and GET /health on pcached's HTTP listener, and the same
figures in INFO's "metrics" section (docs/pcached.md, "Metrics and health").

- /metrics in the Prometheus text format passes `promtool check metrics`
  (Debian's prometheus package) with no lint finding; with an OpenMetrics
  Accept it is OpenMetrics 1.0 (ends with # EOF) and parses with
  prometheus_client's strict OpenMetrics parser (python3-prometheus-client).
- the figures move with traffic (hits, misses, stores per collection) and
  agree with INFO metrics;
- /health is 200 with "ok" while serving, and 503 naming the journal while
  the disk under the journal is full (a small tmpfs; that part is skipped
  where a tmpfs cannot be mounted);
- no password for GET unless metrics_auth = 1; JSON-RPC still needs it."""
import base64
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port  # noqa: E402

PROMTOOL = shutil.which("promtool")


def get(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, r.getheader("Content-Type"), body


def samples(text):
    """{'name{labels}': value} of a text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(workers=2, collections="default;th=6", http_port=free_port(),
                       persist_collections="default", journal="default=everysec")
        cls.s.opts["db_url"] = os.path.join(cls.s.dir, "store")
        cls.s.start()
        cls.port = cls.s.opts["http_port"]

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def test_prometheus_text_passes_promtool(self):
        r = redis.Redis(port=self.s.port)
        for i in range(10):
            r.set("m:%d" % i, "v")
        st, ct, body = get(self.port, "/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(ct.startswith("text/plain; version=0.0.4"), ct)
        if PROMTOOL is None:
            print("SKIPPED part: promtool not installed (Debian package prometheus)")
        else:
            p = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                               text=True)
            self.assertEqual((p.returncode, p.stdout + p.stderr), (0, ""))
        m = samples(body)
        self.assertGreaterEqual(m['pcache_collection_stores_total{collection="default"}'], 10)
        self.assertEqual(m["pcache_journal_enabled"], 1)
        self.assertEqual(m["pcache_journal_failing"], 0)
        self.assertEqual(m["pcache_workers"], 2)
        for name in ("pcache_collection_nomem_total", "pcache_collection_overflow_entries",
                     "pcache_collection_seqlock_retries_total", "pcache_collection_hits_total",
                     "pcache_collection_misses_total", "pcache_collection_entries"):
            self.assertIn(name + '{collection="th"}', m)
        self.assertIn("pcache_memory_used_bytes", m)
        self.assertIn("pcache_last_save_ok", m)
        # per persisted collection: its own last save
        self.assertEqual(m['pcache_collection_last_save_ok{collection="default"}'], 1)
        self.assertIn('pcache_collection_last_save_timestamp_seconds{collection="default"}', m)
        self.assertNotIn('pcache_collection_last_save_ok{collection="th"}', m)
        self.assertNotIn("# EOF", body)

    def test_figures_move_and_agree_with_info(self):
        r = redis.Redis(port=self.s.port)
        r.select(1)  # th
        before = samples(get(self.port, "/metrics")[2])
        r.set("hit", "1")
        for _ in range(5):
            r.get("hit")
        for _ in range(3):
            r.get("no-such-key")
        after = samples(get(self.port, "/metrics")[2])
        k = '{collection="th"}'
        self.assertEqual(after["pcache_collection_hits_total" + k]
                         - before["pcache_collection_hits_total" + k], 5)
        self.assertEqual(after["pcache_collection_misses_total" + k]
                         - before["pcache_collection_misses_total" + k], 3)
        self.assertGreater(after["pcache_commands_total"], before["pcache_commands_total"])
        info = r.info("metrics")
        self.assertEqual(info["pcache_coll_th_hits"], after["pcache_collection_hits_total" + k])
        self.assertEqual(info["pcache_coll_th_misses"],
                         after["pcache_collection_misses_total" + k])
        self.assertEqual(info["pcache_journal_enabled"], 1)
        self.assertIn("pcache_last_save_age_seconds", info)
        # every line of the section is flat key:value (what redis_exporter reads)
        raw = subprocess.run(["redis-cli", "-p", str(self.s.port), "INFO", "metrics"],
                             capture_output=True, text=True, check=True).stdout
        raw = raw.replace("\r\n", "\n").replace("\n", "\r\n")
        lines = [ln for ln in raw.split("\r\n") if ln and not ln.startswith("#")]
        self.assertTrue(all(re.fullmatch(r"[a-z0-9_]+:-?[0-9.e+]+", ln) for ln in lines), lines)
        # not in the default INFO? it is: "default" lists every section
        self.assertIn("pcache_commands", r.info())

    def test_openmetrics(self):
        st, ct, body = get(self.port, "/metrics",
                           {"Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"})
        self.assertEqual(st, 200)
        self.assertTrue(ct.startswith("application/openmetrics-text; version=1.0.0"), ct)
        self.assertTrue(body.endswith("# EOF\n"))
        self.assertIn("# TYPE pcache_commands counter\n", body)
        try:
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
        except ImportError:
            print("SKIPPED part: python3-prometheus-client not installed")
            return
        fams = {f.name: f for f in text_string_to_metric_families(body)}
        self.assertEqual(fams["pcache_commands"].type, "counter")
        self.assertEqual(fams["pcache_collection_entries"].type, "gauge")
        self.assertEqual(len(fams["pcache_collection_hits"].samples), 2)

    def test_health_and_paths(self):
        st, ct, body = get(self.port, "/health")
        self.assertEqual(st, 200, body)
        self.assertIn('"status":"ok"', body)
        self.assertIn('"journal":"ok"', body)
        st, _, _ = get(self.port, "/health?verbose=1")  # a query string is ignored
        self.assertEqual(st, 200)
        self.assertEqual(get(self.port, "/nope")[0], 404)


DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs")


class Dashboards(unittest.TestCase):
    """docs/grafana/pcache.json and docs/prometheus/pcache-alerts.yml name
    only metrics /metrics serves, and their expressions are valid PromQL."""

    def test_names_exist_and_rules_parse(self):
        s = Server(workers=1, http_port=free_port(), persist_collections="default")
        s.opts["db_url"] = os.path.join(s.dir, "store")
        try:
            s.start()
            text = get(s.opts["http_port"], "/metrics")[2]
            served = {k.split("{")[0] for k in samples(text)}
            served |= set(re.findall(r"^# TYPE (\S+)", text, re.M))  # families without samples
        finally:
            s.cleanup()
        import json
        with open(os.path.join(DOCS, "grafana", "pcache.json")) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
        exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
        with open(os.path.join(DOCS, "prometheus", "pcache-alerts.yml")) as f:
            rules = f.read()
        used = set(re.findall(r"pcache_[a-z_]+", " ".join(exprs) + rules))
        self.assertGreater(len(used), 15)
        self.assertEqual(sorted(used - served), [])
        if PROMTOOL is None:
            print("SKIPPED part: promtool not installed")
            return
        p = subprocess.run([PROMTOOL, "check", "rules",
                            os.path.join(DOCS, "prometheus", "pcache-alerts.yml")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # the dashboard's queries, as recording rules promtool parses
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            f.write("groups:\n  - name: dash\n    rules:\n")
            for i, e in enumerate(exprs):
                e = (e.replace("$__rate_interval", "5m").replace("$instance", ".*")
                     .replace("$collection", ".*"))
                if e.startswith("label_values("):
                    e = e[len("label_values("):].rsplit(",", 1)[0]
                f.write("      - record: pcache:dash%d\n        expr: %s\n" % (i, json.dumps(e)))
            path = f.name
        try:
            p = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        finally:
            os.unlink(path)


class Auth(unittest.TestCase):
    def test_metrics_auth(self):
        for auth in (0, 1):
            s = Server(workers=1, http_port=free_port(), requirepass="sekret",
                       metrics_auth=auth)
            try:
                s.start()
                port = s.opts["http_port"]
                st = get(port, "/metrics")[0]
                self.assertEqual(st, 401 if auth else 200)
                self.assertEqual(get(port, "/health")[0], 401 if auth else 200)
                ok = get(port, "/metrics", {"Authorization": "Bearer sekret"})[0]
                self.assertEqual(ok, 200)
                basic = "Basic " + base64.b64encode(b"prom:sekret").decode()
                self.assertEqual(get(port, "/health", {"Authorization": basic})[0], 200)
                # JSON-RPC needs the password either way
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("POST", "/", body='{"jsonrpc":"2.0","method":"perf_stats","id":1}')
                self.assertEqual(c.getresponse().status, 401)
            finally:
                s.cleanup()


class PersistenceFailing(unittest.TestCase):
    """/health goes 503 while the journal cannot write, and back to 200."""

    def test_full_disk(self):
        tmp = tempfile.mkdtemp(prefix="pcached-metrics-")
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt],
                           capture_output=True, text=True)
        if p.returncode != 0:
            shutil.rmtree(tmp)
            self.skipTest("cannot mount a tmpfs: " + p.stderr.strip())
        s = Server(workers=1, http_port=free_port(), db_url=os.path.join(mnt, "store"),
                   persist_collections="default", journal="default=always")
        try:
            s.start()
            port = s.opts["http_port"]
            r = redis.Redis(port=s.port, socket_timeout=10)
            self.assertTrue(r.set("a", "1"))
            self.assertEqual(get(port, "/health")[0], 200)
            filler = os.path.join(mnt, "filler")
            with open(filler, "wb", buffering=0) as f:
                try:
                    while f.write(b"\0" * 65536):
                        pass
                except OSError:
                    pass
                try:
                    while f.write(b"\0" * 512):
                        pass
                except OSError:
                    pass
            refused = False
            for i in range(200):
                try:
                    r.set("k%d" % i, "x" * 200)
                except redis.ResponseError as e:
                    refused = "MISCONF" in str(e)
                    break
            self.assertTrue(refused, "no write was refused on the full disk")
            st, _, body = get(port, "/health")
            self.assertEqual(st, 503, body)
            self.assertIn("journal failing", body)
            self.assertIn("No space left", body)
            m = samples(get(port, "/metrics")[2])
            self.assertEqual(m["pcache_journal_failing"], 1)
            self.assertGreaterEqual(m["pcache_journal_failures_total"], 1)
            os.unlink(filler)
            deadline = time.time() + 10
            while time.time() < deadline and get(port, "/health")[0] != 200:
                try:
                    r.set("probe", "1")
                except redis.ResponseError:
                    pass
                time.sleep(0.2)
            self.assertEqual(get(port, "/health")[0], 200)
        finally:
            s.cleanup()
            subprocess.run(["umount", "-l", mnt], capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
