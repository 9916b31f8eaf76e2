"""The backup and restore drill of docs/operations.md, run as written:

1. back up a live pcached: perf_save to another store under store_root
   (JSON-RPC over the unix socket, as pcachectl does), while writes go on;
2. check the copy offline: `pcache-snapshot verify` exits 0, `info --json`
   counts the entries, `get` reads a key;
3. restore online: perf_load from the backup brings back deleted keys;
4. restore offline: stop pcached, move the store directory aside, copy the
   backup in its place, start: every backed-up key is there (a binary key,
   a counter that still counts, a TTL that still runs), and nothing written
   after the backup (the old journal went aside with the old store).
Real pcached, real redis-py, real pcache-snapshot."""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402

SNAPSHOT = os.environ.get("PCACHE_SNAPSHOT", "")


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(self.path)


def rpc(sock, method, params):
    c = UnixHTTP(sock)
    c.request("POST", "/", body=json.dumps({"jsonrpc": "2.0", "method": method,
                                            "params": params, "id": 1}))
    rep = json.loads(c.getresponse().read())
    c.close()
    if "error" in rep:
        raise AssertionError("%s: %s" % (method, rep["error"]))
    return rep["result"]


def snap(*args):
    return subprocess.run([SNAPSHOT] + list(args), capture_output=True, text=True, timeout=120)


class Drill(unittest.TestCase):
    def setUp(self):
        if not SNAPSHOT or not os.access(SNAPSHOT, os.X_OK):
            self.skipTest("pcache-snapshot not built (PCACHE_SNAPSHOT)")

    def server(self, workdir=None):
        s = Server(workdir=workdir, workers=2, db_mode=2, persist_collections="default",
                   journal="default=everysec")
        s.opts.update(db_url=os.path.join(s.dir, "data", "store"),
                      unix_socket=os.path.join(s.dir, "mgmt.sock"))
        os.makedirs(os.path.join(s.dir, "data"), exist_ok=True)
        return s

    def test_drill(self):
        s = self.server()
        try:
            s.start()
            r = redis.Redis(port=s.port)
            p = r.pipeline(transaction=False)
            for i in range(5000):
                p.set("user:%d" % i, "v%d" % i)
            p.execute()
            r.set(b"bin\x00\xff", b"\x01\x02")
            r.incrby("hits", 41)
            r.set("ttl-key", "x", ex=3600)
            sock = s.opts["unix_socket"]
            backup = os.path.join(s.dir, "data", "backup-1")
            # 1. the backup, from the live server
            res = rpc(sock, "perf_save", {"collection": "default", "store": backup})
            self.assertEqual(res["collections"], 1)
            self.assertEqual(res["saved"], 5003)
            r.set("after-backup", "1")  # not in the backup
            # 2. the offline check of the copy
            v = snap("verify", backup)
            self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
            info = snap("info", backup, "--json")
            self.assertEqual(info.returncode, 0, info.stderr)
            doc = json.loads(info.stdout)
            counts = {c["name"]: c for c in doc["collections"]}
            self.assertEqual(counts["default"]["count"], 5003, doc)
            self.assertTrue(counts["default"]["ok"])
            g = snap("get", backup, "default", "user:42")
            self.assertEqual(g.returncode, 0, g.stderr)
            self.assertIn("v42", g.stdout)
            # 3. online restore of deleted keys
            self.assertEqual(rpc(sock, "perf_del", {"glob": "user:1*"})["deleted"], 1111)
            self.assertIsNone(r.get("user:123"))
            ld = rpc(sock, "perf_load", {"collection": "default", "store": backup})
            self.assertEqual(ld["loaded"], 5003)
            self.assertEqual(r.get("user:123"), b"v123")
            # 4. offline restore: stop, move the store aside, copy the backup in
            s.stop()
            store = s.opts["db_url"]
            shutil.move(store, store + ".before-restore")
            shutil.copytree(backup, store)
            s2 = Server(workdir=s.dir, **s.opts)
            s2.opts["port"] = 0
            try:
                s2.start()
                r2 = redis.Redis(port=s2.port)
                self.assertEqual(r2.dbsize(), 5003)
                self.assertEqual(r2.get("user:4999"), b"v4999")
                self.assertEqual(r2.get(b"bin\x00\xff"), b"\x01\x02")
                self.assertEqual(r2.incr("hits"), 42)  # still a counter
                self.assertTrue(3500 < r2.ttl("ttl-key") <= 3600)
                self.assertIsNone(r2.get("after-backup"))
            finally:
                s2.cleanup()
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
