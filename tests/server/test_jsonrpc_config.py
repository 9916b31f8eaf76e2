"""pcached's management door (JSON-RPC 2.0 over HTTP on loopback and on a
unix socket, its help method, pcachectl and its help and terminal
indentation) and its configuration (file, overrides, --check,
errors naming key and line, docs/pcached.md listing every key)."""
import base64
import http.client
import json
import os
import pty
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import PCACHECTL, PCACHED, Server, free_port  # noqa: E402

S = None
DOCS = os.environ.get("PCACHED_DOCS", os.path.join(os.path.dirname(__file__), "..", "..",
                                                   "docs", "pcached.md"))


def setUpModule():
    global S
    S = Server(workers=1, collections="default;th=6")
    S.opts.update(http_port=free_port(), unix_socket=os.path.join(S.dir, "mi.sock"),
                  db_url=os.path.join(S.dir, "store"), persist_collections="default,th")
    S.start()


def tearDownModule():
    S.cleanup()


def rpc_http(body, raw_body=False):
    c = http.client.HTTPConnection("127.0.0.1", S.opts["http_port"], timeout=10)
    data = body if raw_body else json.dumps(body)
    c.request("POST", "/mi", body=data, headers={"Content-Type": "application/json"})
    resp = c.getresponse()
    text = resp.read()
    c.close()
    return resp.status, json.loads(text) if text else None


def rpc_unix(body):
    s = socket.socket(socket.AF_UNIX)
    s.connect(S.opts["unix_socket"])
    data = json.dumps(body).encode()
    s.sendall(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf.split(b"\r\n\r\n", 1)[1])


def on_terminal(argv):
    """argv's stdout when it is a terminal (a pty), as text."""
    master, slave = pty.openpty()
    q = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = q.stderr.read()
    q.stderr.close()
    assert q.wait(10) == 0, err
    return out.decode().replace("\r\n", "\n")


def call(method, params=None, id=1):
    req = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        req["params"] = params
    status, body = rpc_http(req)
    assert status == 200
    return body


class JsonRpc(unittest.TestCase):
    def test_each_command(self):
        r = redis.Redis(port=S.port)
        r.set("j:1", "one")
        self.assertEqual(call("perf_set", {"key": "j:2", "value": "two", "ttl": 100})["result"]
                         ["stored"], True)
        self.assertEqual(r.get("j:2"), b"two")
        res = call("perf_get", ["j:1"])
        self.assertEqual(res["id"], 1)
        self.assertEqual(res["jsonrpc"], "2.0")
        self.assertEqual(res["result"]["value"], "one")
        self.assertEqual(call("perf_keys", {"glob": "j:*"})["result"]["count"], 2)
        self.assertEqual(call("perf_dump", {"glob": "j:*"})["result"]["count"], 2)
        self.assertIn("cursor", call("perf_scan", {"cursor": "0"})["result"])
        self.assertEqual(call("perf_ttl", {"glob": "j:1", "ttl": 50})["result"]["updated"], 1)
        self.assertTrue(45 <= r.ttl("j:1") <= 50)
        st = call("perf_stats", {"collection": "th"})["result"]
        self.assertEqual(st["collections"][0]["collection"], "th")
        self.assertIn("last_save", st["collections"][0])
        self.assertIn("result", call("perf_stats_reset"))
        sv = call("perf_save", {"collection": "default"})["result"]
        self.assertEqual(sv["collections"], 1)
        self.assertGreaterEqual(sv["saved"], 2)
        self.assertEqual(call("perf_load", ["default"])["result"]["loaded"], sv["saved"])
        self.assertEqual(call("perf_del", {"glob": "j:*"})["result"]["deleted"], 2)
        self.assertEqual(call("perf_get", ["j:1"], id="abc")["error"]["code"], -32001)
        self.assertEqual(call("perf_get", ["j:1"], id="abc")["id"], "abc")

    def test_binary_key_round_trip(self):
        # bytes that are not text travel as base64: "key_b64" in, "value_b64" out
        key = b"b\x00\xff\r\n"
        redis.Redis(port=S.port).set(key, b"\x00\x01\xfe")
        k64 = base64.b64encode(key).decode()
        res = call("perf_get", {"key_b64": k64})["result"]
        self.assertEqual(res["key_b64"], k64)
        self.assertNotIn("key", res)
        self.assertEqual(base64.b64decode(res["value_b64"]), b"\x00\x01\xfe")
        res = call("perf_get", [{"b64": k64}])["result"]  # positional
        self.assertEqual(base64.b64decode(res["value_b64"]), b"\x00\x01\xfe")
        keys = call("perf_mget", {"glob": "b*"})["result"]["keys"]
        self.assertIn({"b64": k64}, keys)
        # the old byte mapping is gone: "b\u0000\u00ff\r\n" is the UTF-8 of U+00FF
        self.assertEqual(call("perf_get", [key.decode("latin-1")])["error"]["code"], -32001)
        bad = call("perf_get", {"key_b64": "not base64!"})["error"]
        self.assertEqual(bad["code"], -32602)
        self.assertIn("base64", bad["message"])
        both = call("perf_get", {"key": "a", "key_b64": "YQ=="})["error"]
        self.assertEqual(both["code"], -32600)

    def test_standard_json_finds_utf8_key(self):
        # Python's json.dumps("naïve") sends "na\u00efve" (ensure_ascii): the key is found
        redis.Redis(port=S.port).set("naïve".encode(), "café".encode())
        body = json.dumps({"jsonrpc": "2.0", "method": "perf_get", "params": ["naïve"], "id": 9})
        self.assertIn("na\\u00efve", body)
        st, rep = rpc_http(body, raw_body=True)
        self.assertEqual(rep["result"]["key"], "naïve")
        self.assertEqual(rep["result"]["value"], "café")
        # and as raw UTF-8 (ensure_ascii=False)
        body = json.dumps({"jsonrpc": "2.0", "method": "perf_get", "params": {"key": "naïve"},
                           "id": 10}, ensure_ascii=False).encode()
        st, rep = rpc_http(body, raw_body=True)
        self.assertEqual(rep["result"]["value"], "café")
        # a body that is not UTF-8 is not JSON
        st, rep = rpc_http(b'{"jsonrpc":"2.0","method":"perf_get","params":["\xff"],"id":1}',
                           raw_body=True)
        self.assertEqual(rep["error"]["code"], -32700)

    def test_errors(self):
        st, body = rpc_http("{not json", raw_body=True)
        self.assertEqual(body["error"]["code"], -32700)
        self.assertIsNone(body["id"])
        st, body = rpc_http("[]", raw_body=True)
        self.assertEqual(body["error"]["code"], -32600)
        self.assertEqual(call("no_such_method")["error"]["code"], -32601)
        self.assertIn("no_such_method", call("no_such_method")["error"]["message"])
        self.assertEqual(rpc_http({"method": "perf_stats", "id": 3})[1]["error"]["code"], -32600)
        bad = call("perf_keys", {"glob": "*", "limit": 0})["error"]
        self.assertEqual(bad["code"], -32602)
        self.assertIn("limit", bad["message"])
        self.assertEqual(call("perf_keys", {"nope": 1})["error"]["code"], -32602)
        self.assertEqual(call("perf_stats", ["nosuchcoll"])["error"]["code"], -32602)
        self.assertEqual(call("perf_get", [{"nested": 1}])["error"]["code"], -32602)
        self.assertEqual(call("perf_get", [])["error"]["code"], -32602)
        # a notification (no id) gets no body
        st, body = rpc_http({"jsonrpc": "2.0", "method": "perf_stats"})
        self.assertEqual(st, 204)
        c = http.client.HTTPConnection("127.0.0.1", S.opts["http_port"], timeout=5)
        c.request("GET", "/")  # GET serves /metrics and /health only
        self.assertEqual(c.getresponse().status, 404)
        c = http.client.HTTPConnection("127.0.0.1", S.opts["http_port"], timeout=5)
        c.request("PUT", "/", body="{}")
        self.assertEqual(c.getresponse().status, 405)
        # the server is still fine
        self.assertEqual(call("perf_get", ["nothing"])["error"]["code"], -32001)

    def test_unix_socket(self):
        mode = stat.S_IMODE(os.stat(S.opts["unix_socket"]).st_mode)
        self.assertEqual(mode, 0o600)
        res = rpc_unix({"jsonrpc": "2.0", "method": "perf_stats", "params": [], "id": 7})
        self.assertEqual(res["id"], 7)
        self.assertIn("collections", res["result"])

    def test_pcachectl(self):
        redis.Redis(port=S.port).set("ctl", "v")
        p = subprocess.run([PCACHECTL, "-s", S.opts["unix_socket"], "perf_get", "ctl"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["value"], "v")
        p = subprocess.run([PCACHECTL, "-p", str(S.opts["http_port"]), "perf_keys", "glob=ct*",
                            "limit=5"], capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["count"], 1)
        p = subprocess.run([PCACHECTL, "-p", str(S.opts["http_port"]), "perf_nope"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(json.loads(p.stderr)["error"]["code"], -32601)
        p = subprocess.run([PCACHECTL, "-p", "1", "perf_stats"], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 2)

    def test_help_lists_the_tables(self):
        """help answers from the registered tables: the management layer's
        built-ins, the storage layer's perf_save / perf_load / perf_sync and
        the door's own help, each with its parameters in positional order."""
        res = call("help")["result"]["methods"]
        names = [m["method"] for m in res]
        for want in ("perf_stats", "perf_keys", "perf_scan", "perf_set", "perf_del", "perf_save",
                     "perf_load", "perf_sync", "help"):
            self.assertIn(want, names)
        self.assertEqual(len(names), len(set(names)))
        keys = next(m for m in res if m["method"] == "perf_keys")
        self.assertEqual([p["name"] for p in keys["params"]], ["glob", "collection", "limit"])
        limit = keys["params"][2]
        self.assertEqual((limit["type"], limit["required"], limit["default"], limit["min"],
                          limit["max"]), ("integer", False, "1000", 1, 100000))
        for m in res:  # every listed method is served: a bogus name is -32602, not -32601
            if m["method"] == "help":
                continue
            err = call(m["method"], {"zz_no_such_param": "1"})["error"]
            self.assertEqual(err["code"], -32602, (m["method"], err))
            self.assertIn(m["method"], err["message"])
        one = call("help", {"method": "perf_scan"})["result"]["methods"]
        self.assertEqual([m["method"] for m in one], ["perf_scan"])
        self.assertEqual(call("help", ["perf_scan"])["result"]["methods"], one)
        self.assertEqual(call("help", ["perf_nope"])["error"]["code"], -32602)
        self.assertEqual(call("help", {"verb": "x"})["error"]["code"], -32602)

    def test_pcachectl_help_and_indent(self):
        ctl = [PCACHECTL, "-s", S.opts["unix_socket"]]
        p = subprocess.run(ctl + ["help"], capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        for m in call("help")["result"]["methods"]:
            usage = m["method"] + "".join(
                (" %s" if q["required"] else " [%s]") % q["name"] for q in m["params"])
            self.assertIn("\n" + usage + "\n    " + m["summary"] + "\n", "\n" + p.stdout)
        p = subprocess.run(ctl + ["help", "perf_keys"], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"\n    limit +integer 1-100000, default 1000: most keys")
        self.assertRegex(p.stdout, r"\n    glob +glob, required: ")
        self.assertNotIn("perf_dump", p.stdout)
        p = subprocess.run(ctl + ["help", "perf_nope"], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(json.loads(p.stderr)["error"]["code"], -32602)
        # a pipe gets the server's one line; a terminal the same JSON indented
        p = subprocess.run(ctl + ["perf_stats", "th"], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("\n"), 1)
        text = on_terminal(ctl + ["perf_stats", "th"])
        self.assertIn('{\n  "', text)
        self.assertIn('\n    {\n      "collection": "th"', text)
        self.assertEqual(json.loads(text), json.loads(p.stdout))
        # tokens are copied verbatim: brackets, commas, colons and escapes in a string
        redis.Redis(port=S.port).set("ind", 'a"b,{c}:[d]\\ {}')
        text = on_terminal(ctl + ["perf_get", "ind"])
        self.assertEqual(json.loads(text)["value"], 'a"b,{c}:[d]\\ {}')
        self.assertIn('\n  "value": "a\\"b,{c}:[d]\\\\ {}",\n', text)


class Config(unittest.TestCase):
    def run_pcached(self, *args):
        return subprocess.run([PCACHED] + list(args), capture_output=True, text=True, timeout=30)

    def conf(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_check_prints_effective_config(self):
        path = self.conf("# a comment\nport = 7001\nworkers=3\ncollections = a;b=10\n"
                         "select_collections = b,a\nrequirepass = hidden\n")
        p = self.run_pcached("-c", path, "--check", "--port=7002")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("configuration OK", p.stdout)
        self.assertIn("3 worker(s)", p.stdout)
        self.assertIn("0=b, 1=a", p.stdout)
        self.assertIn("\nport = 7002\n", p.stdout)  # the override wins
        self.assertNotIn("hidden", p.stdout)

    def test_errors_name_key_and_line(self):
        cases = [
            ("port = 1\nbogus = 2\n", "%s:2: unknown key 'bogus'"),
            ("\n\nworkers = 0\n", "%s:3: workers: 0 is out of range [1, 64]"),
            ("port = seven\n", "%s:1: port: 'seven' is not a non-negative integer"),
            ("[server]\n", "%s:1: sections are not used"),
            ("port 7000\n", "%s:1: expected 'key = value'"),
            ("port = 1\nport = 2\n", "%s:2: port: given twice"),
            ("log_level = loud\n", "%s:1: log_level: 'loud' is not one of"),
            ("collections = a\nselect_collections = a,zz\n", "select_collections: 'zz'"),
            ("db_mode = 2\n", "db_mode: 2 needs a db_url"),
        ]
        for text, want in cases:
            path = self.conf(text)
            p = self.run_pcached("-c", path, "--check")
            self.assertEqual(p.returncode, 2, text)
            self.assertIn(want.replace("%s", path) if "%s" in want else want, p.stderr, text)
        p = self.run_pcached("--check", "--nope=1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("command line --nope: unknown key 'nope'", p.stderr)
        p = self.run_pcached("--check", "--port=99999")
        self.assertIn("command line --port: port: 99999 is out of range", p.stderr)
        p = self.run_pcached("-c", "/nonexistent/pcached.conf", "--check")
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot open", p.stderr)

    @unittest.skipUnless(os.environ.get("PCACHE_BUILD_DIR"), "needs PCACHE_BUILD_DIR")
    def test_cmake_install(self):
        with tempfile.TemporaryDirectory() as prefix:
            for component in ("server", "tools"):
                p = subprocess.run(["cmake", "--install", os.environ["PCACHE_BUILD_DIR"],
                                    "--prefix", prefix, "--component", component],
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(p.returncode, 0, p.stderr)
            for f in ("bin/pcached", "bin/pcachectl", "etc/pcache/pcached.conf",
                      "lib/systemd/system/pcached.service"):
                self.assertTrue(os.path.exists(os.path.join(prefix, f)), f)
            unit = open(os.path.join(prefix, "lib/systemd/system/pcached.service")).read()
            self.assertIn("ExecStart=", unit)
            self.assertNotIn("@CMAKE", unit)
            # the store's parent (/var/lib/pcache) is the unit's StateDirectory:
            # --check wants it to exist, so the check points db_url elsewhere
            p = subprocess.run([os.path.join(prefix, "bin/pcached"), "-c",
                                os.path.join(prefix, "etc/pcache/pcached.conf"),
                                "--db_url=lmdb://%s/store" % prefix, "--check"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)

    def test_docs_list_every_resp_command(self):
        from pcached_harness import command
        doc = open(DOCS).read()
        # every command; LIST names the subcommands too ("client|list"), which
        # the docs group under their command
        names = [n for n in command(S.port, "COMMAND", "LIST") if b"|" not in n]
        self.assertGreater(len(names), 40)
        for n in names:
            self.assertIn("`%s" % n.decode().upper(), doc, n)

    def test_docs_and_example_list_every_key(self):
        p = self.run_pcached("--help-keys")
        keys = [line.split(" = ")[0] for line in p.stdout.splitlines()
                if " = " in line and not line.startswith("#")]
        self.assertGreater(len(keys), 20)
        doc = open(DOCS).read()
        example = open(os.path.join(os.path.dirname(DOCS), "..", "src", "server",
                                    "pcached.conf")).read()
        for k in keys:
            self.assertIn("`%s`" % k, doc, k)
            self.assertIn(k, example, k)
        p = self.run_pcached("-c", os.path.join(os.path.dirname(DOCS), "..", "src", "server",
                                                "pcached.conf"), "--check", "--db_url=/tmp/x")
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    # a skipped case (test_cmake_install without PCACHE_BUILD_DIR, which
    # ctest sets) makes the run SKIPPED - exit 77 - rather than passed
    r = unittest.main(verbosity=2, exit=False).result
    sys.exit(1 if not r.wasSuccessful() else 77 if r.skipped else 0)
