"""The management door against hostile local clients (issue: hostile input;
docs/pcached.md §4, §4.1): with a password every TCP request must carry it,
whatever the method; a [store] parameter outside the store root is refused
and creates nothing; idle connections never delay a management call or a
RESP SAVE; the HTTP framing and the JSON are strict."""
import base64
import http.client
import json
import os
import socket
import sys
import tempfile
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import PCACHECTL, Server, free_port  # noqa: E402

import subprocess  # noqa: E402

PASSWORD = "s3cret-door"
METHODS = ["perf_stats", "perf_stats_reset", "perf_keys", "perf_scan", "perf_dump", "perf_get",
           "perf_set", "perf_ttl", "perf_del", "perf_save", "perf_load", "perf_sync"]


def read_all(s):
    """What the server sends until it closes the connection (or a timeout)."""
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        pass
    return buf


class Door(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(workers=1, requirepass=PASSWORD)
        root = os.path.join(cls.s.dir, "data")
        os.makedirs(root)
        cls.root = root
        cls.s.opts.update(http_port=free_port(), unix_socket=os.path.join(cls.s.dir, "mi.sock"),
                          db_url=os.path.join(root, "store"), persist_collections="default")
        cls.s.start()
        cls.port = cls.s.opts["http_port"]

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def rpc(self, method, params=None, auth=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}, "id": 7})
        headers = {"Content-Type": "application/json"}
        if auth is not None:
            headers["Authorization"] = auth
        c.request("POST", "/mi", body=body, headers=headers)
        r = c.getresponse()
        text = r.read()
        c.close()
        return r.status, dict(r.getheaders()), json.loads(text) if text else None

    def raw(self, data, timeout=5):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        buf = read_all(s)
        s.close()
        return buf

    def bearer(self):
        return "Bearer " + PASSWORD

    def test_every_method_needs_the_password(self):
        r = redis.Redis(port=self.s.port, password=PASSWORD, socket_timeout=10)
        r.delete("door-k")
        for m in METHODS:
            params = {"key": "door-k", "value": "v"} if m == "perf_set" else {}
            for auth in (None, "Bearer wrong", "Basic " + base64.b64encode(b"u:wrong").decode(),
                         "Basic !!notbase64", "Token " + PASSWORD):
                st, hdr, body = self.rpc(m, params, auth)
                self.assertEqual(st, 401, (m, auth))
                self.assertIn("Basic", hdr.get("WWW-Authenticate", ""))
                self.assertEqual(body["error"]["code"], -32001, (m, auth))
        self.assertIsNone(r.get("door-k"), "perf_set ran without credentials")
        # with the password, as Bearer and as Basic with any user
        st, _, body = self.rpc("perf_set", {"key": "door-k", "value": "v"}, self.bearer())
        self.assertEqual(st, 200, body)
        basic = "Basic " + base64.b64encode(("anyone:" + PASSWORD).encode()).decode()
        st, _, body = self.rpc("perf_get", {"key": "door-k"}, basic)
        self.assertEqual(st, 200, body)
        self.assertEqual(r.get("door-k"), b"v")
        # the unix socket: guarded by its mode, no password
        u = socket.socket(socket.AF_UNIX)
        u.connect(self.s.opts["unix_socket"])
        data = json.dumps({"jsonrpc": "2.0", "method": "perf_stats", "id": 1}).encode()
        u.sendall(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        reply = read_all(u)
        u.close()
        self.assertIn(b"200 OK", reply.split(b"\r\n", 1)[0])
        self.assertEqual(oct(os.stat(self.s.opts["unix_socket"]).st_mode & 0o777), "0o600")
        # pcachectl sends PCACHECTL_PASSWORD
        env = dict(os.environ, PCACHECTL_PASSWORD=PASSWORD)
        p = subprocess.run([PCACHECTL, "-p", str(self.port), "perf_stats", "default"],
                           capture_output=True, text=True, env=env, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        env.pop("PCACHECTL_PASSWORD")
        p = subprocess.run([PCACHECTL, "-p", str(self.port), "perf_stats", "default"],
                           capture_output=True, text=True, env=env, timeout=10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("authentication required", p.stderr)

    def test_store_outside_the_root_is_refused(self):
        outside = tempfile.mkdtemp(prefix="pcache-outside-")
        link = os.path.join(self.root, "escape")
        if not os.path.islink(link):
            os.symlink(outside, link)
        for store in (os.path.join(outside, "x"), "lmdb://" + os.path.join(outside, "y"),
                      os.path.join(self.root, "..", "z"), os.path.join(link, "w"), "relative/q",
                      self.root, "/etc/pcache-door-test",
                      "odbc:DRIVER=SQLite3;Database=" + os.path.join(outside, "s.db")):
            for m in ("perf_save", "perf_load"):
                st, _, body = self.rpc(m, {"collection": "default", "store": store},
                                       self.bearer())
                self.assertEqual(st, 200)
                self.assertIn("error", body, (m, store))
                self.assertEqual(body["error"]["code"], -32602, (m, store, body))
        self.assertEqual(os.listdir(outside), [], "a refused call created something")
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(self.root), "z")))
        self.assertFalse(os.path.exists("/etc/pcache-door-test"))
        # under the root: a backup beside the store works, and loads back
        st, _, body = self.rpc("perf_save", {"collection": "default",
                                             "store": os.path.join(self.root, "backup")},
                               self.bearer())
        self.assertIn("result", body, body)
        st, _, body = self.rpc("perf_load", {"collection": "default",
                                             "store": os.path.join(self.root, "backup")},
                               self.bearer())
        self.assertIn("result", body, body)
        os.rmdir(outside)

    def test_idle_connections_do_not_delay(self):
        idle = []
        for i in range(60):
            c = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            c.sendall(b"POST /mi HTTP/1.1\r\n")  # a request line, then nothing
            idle.append(c)
        time.sleep(0.2)
        worst = 0.0
        for _ in range(5):
            t0 = time.monotonic()
            st, _, body = self.rpc("perf_stats", {}, self.bearer())
            worst = max(worst, time.monotonic() - t0)
            self.assertEqual(st, 200, body)
        self.assertLess(worst, 0.1, "a management call waited behind idle connections")
        r = redis.Redis(port=self.s.port, password=PASSWORD, socket_timeout=10)
        t0 = time.monotonic()
        self.assertTrue(r.save())
        save_s = time.monotonic() - t0
        self.assertLess(save_s, 1.0, "a RESP SAVE waited behind idle management connections")
        # the idle ones are closed at their deadline (2 s from accept):
        # each waited for, with a generous deadline
        closed = 0
        for c in idle:
            try:
                c.settimeout(30)
                if c.recv(10) == b"":
                    closed += 1
            except OSError:
                closed += 1
            c.close()
        self.assertEqual(closed, len(idle))

    def test_cap_answers_503(self):
        """Past 256 open connections the door answers 503 and closes; the
        ones it holds are closed at their deadline; then it serves again."""
        conns = [socket.create_connection(("127.0.0.1", self.port), timeout=5)
                 for _ in range(320)]
        busy = 0
        for c in conns:
            c.settimeout(4)
            try:
                got = read_all(c)
            except OSError:
                got = b""
            if got.startswith(b"HTTP/1.1 503"):
                busy += 1
            else:
                self.assertEqual(got, b"", got[:80])  # held, then closed at the deadline
            c.close()
        self.assertGreater(busy, 0, "no connection past the cap was told 503")
        self.assertLessEqual(busy, 320 - 256 + 8)
        st, _, _ = self.rpc("perf_stats", {}, self.bearer())
        self.assertEqual(st, 200)

    def test_strict_framing_and_json(self):
        body = b'{"jsonrpc":"2.0","method":"perf_stats","id":1}'
        auth = b"Authorization: Bearer " + PASSWORD.encode() + b"\r\n"
        n = b"%d" % len(body)

        def req(headers, payload=body):
            return self.raw(b"POST /mi HTTP/1.1\r\n" + auth + headers + b"\r\n" + payload)
        cases = [
            (b"Content-Length: " + n + b"\r\nContent-Length: " + n + b"\r\n", b"400"),
            (b"Content-Length: " + n + b"\r\nContent-Length: 5\r\n", b"400"),
            (b"Content-Length: +" + n + b"\r\n", b"400"),
            (b"Content-Length: " + n + b"\r\nTransfer-Encoding: chunked\r\n", b"501"),
            (b"Transfer-Encoding: chunked\r\n", b"501"),
            (b"", b"411"),
            (b"Content-Length: 9999999\r\n", b"413"),
            (b"Content-Length: " + n + b"\r\n X-Folded: yes\r\n", b"400"),
        ]
        for headers, status in cases:
            got = req(headers)
            self.assertTrue(got.startswith(b"HTTP/1.1 " + status), (headers, got[:100]))
        # bytes after the body
        got = req(b"Content-Length: " + n + b"\r\n", body + b"GET / HTTP/1.1\r\n\r\n")
        self.assertTrue(got.startswith(b"HTTP/1.1 400"), got[:100])
        # a bad request line, another method
        got = self.raw(b"POST /mi HTTP/2.0\r\nContent-Length: 2\r\n\r\n{}")
        self.assertTrue(got.startswith(b"HTTP/1.1 400"), got[:100])
        got = self.raw(b"GET /mi HTTP/1.1\r\n\r\n")  # GET: /metrics and /health only
        self.assertTrue(got.startswith(b"HTTP/1.1 404"), got[:100])
        got = self.raw(b"DELETE /mi HTTP/1.1\r\n\r\n")
        self.assertTrue(got.startswith(b"HTTP/1.1 405"), got[:100])
        got = self.raw(b"GET /health HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        self.assertTrue(got.startswith(b"HTTP/1.1 400"), got[:100])
        # the body arriving in pieces is fine
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.sendall(b"POST /mi HTTP/1.1\r\n" + auth + b"Content-Length: " + n + b"\r\n\r\n")
        time.sleep(0.1)
        s.sendall(body[:10])
        time.sleep(0.1)
        s.sendall(body[10:])
        got = read_all(s)
        s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:100])
        # duplicate JSON members: in the request and in params
        for dup in (b'{"jsonrpc":"2.0","method":"perf_get","method":"perf_stats","id":1}',
                    b'{"jsonrpc":"2.0","method":"perf_get","params":{"key":"a","key":"b"},"id":1}'):
            got = self.raw(b"POST /mi HTTP/1.1\r\n" + auth + b"Content-Length: %d\r\n\r\n%s"
                           % (len(dup), dup))
            reply = json.loads(got.split(b"\r\n\r\n", 1)[1])
            self.assertEqual(reply["error"]["code"], -32600, reply)


if __name__ == "__main__":
    unittest.main()
