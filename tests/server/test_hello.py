"""Handshakes and introspection against a real redis-server 7, byte for byte:
HELLO 2/3 and the RESP3 reply types, AUTH with the default user, CLIENT
subcommands, OBJECT / MEMORY / RESET, the INFO sections, and real clients
(redis-cli -3, --stat, --latency, --bigkeys, --memkeys; redis-py, with
protocol=3 where the installed redis-py has it).

The same commands go to Debian's redis-server (started here on a private
loopback port) and to pcached over raw sockets; the replies are compared
byte for byte after the values that differ by nature (client ids, ports,
the server version) are normalised."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port, resp_cmd  # noqa: E402

REDIS_SERVER = "/usr/bin/redis-server"


class RedisServer:
    """A private redis-server: loopback, a kernel-free port, no persistence."""

    def __init__(self, *extra):
        self.tmp = tempfile.TemporaryDirectory(prefix="redis-ref-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.tmp.name, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.tmp.cleanup()


def read_reply(f):
    """One RESP2/RESP3 reply, as the raw bytes it came in."""
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise EOFError("connection closed: %r" % line)
    t = line[:1]
    if t in b"+-:_,#(":
        return line
    n = int(line[1:-2])
    if t in b"$=!":
        return line + (f.read(n + 2) if n >= 0 else b"")
    if t in b"*~>":
        return line + b"".join(read_reply(f) for _ in range(max(n, 0)))
    if t == b"%" or t == b"|":
        return line + b"".join(read_reply(f) for _ in range(2 * n))
    raise ValueError("unknown reply type %r" % line)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        self.s.sendall(resp_cmd(*args))
        return read_reply(self.f)

    def send(self, *args):
        self.s.sendall(resp_cmd(*args))

    def close(self):
        self.f.close()
        self.s.close()


def norm(b):
    """What differs by nature between the two servers."""
    b = re.sub(rb"\$2\r\nid\r\n:\d+\r\n", b"$2\r\nid\r\n:ID\r\n", b)
    b = re.sub(rb"\$\d+\r\n7\.0\.\d+\r\n", b"$V\r\nVERSION\r\n", b)
    return b


# Commands whose replies must be identical, in order, on one connection
# (after the connection's HELLO, if any). Keys are the test's own.
CORPUS = [
    ("SET", "hk", "v"), ("GET", "hk"), ("GET", "hk:none"), ("MGET", "hk", "hk:none"),
    ("SET", "hk", "w", "NX"), ("SET", "hk:2", "x", "GET"), ("DEL", "hk:2"),
    ("CONFIG", "GET", "maxmemory-policy"), ("CONFIG", "GET", "hk-no-such-setting"),
    ("HELLO", "4"), ("HELLO", "x"), ("HELLO", "3", "FOO"), ("HELLO", "3", "AUTH", "foo", "bar"),
    ("HELLO", "3", "SETNAME"),
    ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", "me"), ("CLIENT", "GETNAME"),
    ("CLIENT", "SETNAME", "a b"), ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", ""),
    ("CLIENT", "GETNAME"), ("CLIENT", "SETINFO", "lib-name", "x"), ("CLIENT", "FOO"),
    ("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "ID", "999999"),
    ("CLIENT", "KILL", "ID", "x"), ("CLIENT", "KILL", "ID", "0"), ("CLIENT", "KILL", "FOO", "bar"),
    ("CLIENT", "KILL", "SKIPME", "maybe"), ("CLIENT", "KILL", "ADDR", "1.2.3.4:5"),
    ("CLIENT", "KILL", "LADDR", "1.2.3.4:5", "SKIPME", "no"), ("CLIENT", "KILL", "ID"),
    ("CLIENT", "REPLY", "FOO"), ("CLIENT", "NO-EVICT", "on"), ("CLIENT", "NO-EVICT", "off"),
    ("CLIENT", "NO-EVICT", "maybe"), ("CLIENT", "SETNAME"), ("CLIENT", "HELP"),
    ("CLIENT", "GETREDIR"), ("CLIENT", "LIST", "TYPE", "master"),
    ("CLIENT", "UNBLOCK", "5"), ("CLIENT", "UNBLOCK", "x"), ("CLIENT", "UNBLOCK", "5", "ERROR"),
    ("CLIENT", "UNBLOCK", "5", "FOO"), ("CLIENT", "TRACKINGINFO"), ("CLIENT", "UNPAUSE"),
    ("CLIENT", "TRACKING", "off"), ("CLIENT", "CACHING", "yes"),
    ("CLIENT", "LIST", "TYPE", "nosuch"), ("CLIENT", "LIST", "FOO"),
    ("AUTH", "x"), ("AUTH", "default", "x"), ("AUTH", "foo", "x"), ("AUTH", "a", "b", "c"),
    ("SET", "hk:int", "123"), ("SET", "hk:big", "12345678901234567890"),
    ("SET", "hk:zero", "0123"), ("SET", "hk:raw", "x" * 45), ("SET", "hk:emb", "x" * 44),
    ("INCR", "hk:ctr"),
    ("OBJECT", "ENCODING", "hk:int"), ("OBJECT", "ENCODING", "hk:big"),
    ("OBJECT", "ENCODING", "hk:zero"), ("OBJECT", "ENCODING", "hk:raw"),
    ("OBJECT", "ENCODING", "hk:emb"), ("OBJECT", "ENCODING", "hk:ctr"),
    ("OBJECT", "ENCODING", "hk:none"), ("OBJECT", "REFCOUNT", "hk:int"),
    ("OBJECT", "REFCOUNT", "hk:raw"), ("OBJECT", "FREQ", "hk"), ("OBJECT", "FREQ", "hk:none"),
    ("OBJECT", "FOO"), ("OBJECT", "HELP"), ("OBJECT", "ENCODING"),
    ("MEMORY", "USAGE", "hk:none"), ("MEMORY", "FOO"), ("MEMORY", "USAGE", "hk", "FOO"),
    ("MEMORY", "PURGE"),
    ("INFO", "hk-no-such-section"), ("PING",), ("ECHO", "e"), ("EXISTS", "hk", "hk:none"),
    ("TTL", "hk"), ("DEL", "hk", "hk:int", "hk:big", "hk:zero", "hk:raw", "hk:emb", "hk:ctr"),
]


def session(port, proto):
    c = Conn(port)
    out = []
    try:
        if proto == 3:
            out.append(norm(c.cmd("HELLO", "3")))
        for args in CORPUS:
            out.append(norm(c.cmd(*args)))
        # RESET: back to RESP2, no name
        out.append(c.cmd("CLIENT", "SETNAME", "n"))
        out.append(c.cmd("RESET"))
        out.append(c.cmd("GET", "hk:none"))
        out.append(c.cmd("CLIENT", "GETNAME"))
        out.append(norm(c.cmd("HELLO")))
        # CLIENT REPLY OFF / SKIP: the replies of a pipeline
        c.s.sendall(resp_cmd("CLIENT", "REPLY", "OFF") + resp_cmd("SET", "hk:r", "1") +
                    resp_cmd("CLIENT", "REPLY", "ON") + resp_cmd("GET", "hk:r") +
                    resp_cmd("CLIENT", "REPLY", "SKIP") + resp_cmd("SET", "hk:r", "2") +
                    resp_cmd("GET", "hk:r") + resp_cmd("DEL", "hk:r"))
        for _ in range(4):
            out.append(read_reply(c.f))
    finally:
        c.close()
    return out


def info_fields(text):
    return [line.split(":", 1)[0] for line in text.split("\r\n") if line and ":" in line]


class TestHello(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = RedisServer()
        cls.pc = Server(workers=1).start()
        cls.pc2 = Server(workers=2).start()

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()
        cls.pc.cleanup()
        cls.pc2.cleanup()

    def compare(self, proto):
        want = session(self.redis.port, proto)
        got = session(self.pc.port, proto)
        for i, (w, g) in enumerate(zip(want, got)):
            self.assertEqual(g, w, "RESP%d reply %d differs" % (proto, i))
        self.assertEqual(len(got), len(want))

    def test_corpus_resp2(self):
        self.compare(2)

    def test_corpus_resp3(self):
        self.compare(3)

    def test_hello_map(self):
        c = Conn(self.pc.port)
        r3 = c.cmd("HELLO", "3")
        self.assertTrue(r3.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"), r3)
        cid = int(c.cmd("CLIENT", "ID")[1:-2])
        self.assertIn(b"$2\r\nid\r\n:%d\r\n" % cid, r3)
        self.assertIn(b"$5\r\nproto\r\n:3\r\n", r3)
        self.assertTrue(c.cmd("HELLO", "2").startswith(b"*14\r\n"))
        c.close()

    def test_verbatim_and_maps(self):
        """INFO, CLIENT INFO / LIST as verbatim text, CONFIG GET as a map,
        in RESP3; the same as bulk strings and arrays in RESP2."""
        for port in (self.redis.port, self.pc.port):
            c = Conn(port)
            c.cmd("HELLO", "3")
            info = c.cmd("INFO", "server")
            self.assertTrue(re.match(rb"=\d+\r\ntxt:# Server\r\n", info), info[:40])
            n = int(info[1:info.index(b"\r\n")])
            self.assertEqual(len(info), len(b"=%d\r\n" % n) + n + 2)
            ci = c.cmd("CLIENT", "INFO")
            self.assertTrue(re.match(rb"=\d+\r\ntxt:id=\d+ addr=", ci), ci)
            self.assertTrue(c.cmd("CLIENT", "LIST").startswith(b"="))
            self.assertEqual(c.cmd("CONFIG", "GET", "maxmemory-policy"),
                             b"%1\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n")
            mem = c.cmd("MEMORY", "STATS")
            self.assertTrue(mem.startswith(b"%"), mem[:20])
            self.assertIn(b"$18\r\ndataset.percentage\r\n,", mem)
            c.close()

    def test_client_info_fields(self):
        def fields(port):
            c = Conn(port)
            c.cmd("CLIENT", "SETNAME", "fld")
            line = c.cmd("CLIENT", "INFO").split(b"\r\n", 1)[1].decode()
            c.close()
            return [kv.split("=", 1) for kv in line.split()]
        want, got = fields(self.redis.port), fields(self.pc.port)
        self.assertEqual([k for k, _ in got], [k for k, _ in want])
        g = dict(got)
        self.assertEqual(g["name"], "fld")
        self.assertEqual(g["cmd"], "client|info")
        self.assertEqual(g["laddr"], "127.0.0.1:%d" % self.pc.port)

    def test_client_list_kill(self):
        a, b = Conn(self.pc.port), Conn(self.pc.port)
        a.cmd("CLIENT", "SETNAME", "alpha")
        b.cmd("CLIENT", "SETNAME", "beta")
        bid = int(b.cmd("CLIENT", "ID")[1:-2])
        listing = a.cmd("CLIENT", "LIST").decode()
        self.assertIn("name=alpha", listing)
        self.assertIn("id=%d " % bid, listing)
        only = a.cmd("CLIENT", "LIST", "ID", str(bid)).decode()
        self.assertEqual(only.count("\n"), 3, only)  # the header, one line, the end
        self.assertIn("name=beta", only)
        self.assertEqual(a.cmd("CLIENT", "KILL", "ID", str(bid)), b":1\r\n")
        b.s.settimeout(5)
        self.assertEqual(b.s.recv(100), b"", "the killed connection is closed")
        b.close()
        # the old form by address, and a connection killing itself
        c = Conn(self.pc.port)
        addr = re.search(r"addr=(\S+)", c.cmd("CLIENT", "INFO").decode()).group(1)
        self.assertEqual(a.cmd("CLIENT", "KILL", addr), b"+OK\r\n")
        c.s.settimeout(5)
        self.assertEqual(c.s.recv(100), b"")
        c.close()
        self.assertEqual(a.cmd("CLIENT", "KILL", "SKIPME", "yes", "ID", "12345678"), b":0\r\n")
        self.assertEqual(a.cmd("CLIENT", "KILL", "ADDR", addr), b":0\r\n")
        self.assertEqual(a.cmd("CLIENT", "KILL", "SKIPME", "no", "LADDR",
                               "127.0.0.1:%d" % self.pc.port), b":1\r\n")
        self.assertEqual(a.s.recv(100), b"")
        a.close()

    def test_ids_unique_across_workers(self):
        conns = [Conn(self.pc2.port) for _ in range(16)]
        ids = [int(c.cmd("CLIENT", "ID")[1:-2]) for c in conns]
        pids = {re.search(r"process_id:(\d+)", c.cmd("INFO", "server").decode()).group(1)
                for c in conns}
        for c in conns:
            c.close()
        self.assertEqual(len(set(ids)), len(ids), ids)
        if len(pids) < 2:
            self.skipTest("the kernel put every connection on one worker")

    def test_auth_with_password(self):
        with Server(workers=1, requirepass="sekret") as s:
            c = Conn(s.port)
            self.assertEqual(c.cmd("GET", "x"), b"-NOAUTH Authentication required.\r\n")
            self.assertTrue(c.cmd("HELLO", "3").startswith(
                b"-NOAUTH HELLO must be called with the client already authenticated"))
            self.assertEqual(c.cmd("HELLO", "3", "AUTH", "default", "bad"),
                             b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
            self.assertEqual(c.cmd("AUTH", "other", "sekret"),
                             b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
            self.assertTrue(c.cmd("HELLO", "3", "AUTH", "default", "sekret", "SETNAME", "n")
                            .startswith(b"%7\r\n"))
            self.assertEqual(c.cmd("GET", "x"), b"_\r\n")
            self.assertEqual(c.cmd("CLIENT", "GETNAME"), b"$1\r\nn\r\n")
            self.assertEqual(c.cmd("RESET"), b"+RESET\r\n")
            self.assertEqual(c.cmd("GET", "x"), b"-NOAUTH Authentication required.\r\n")
            self.assertEqual(c.cmd("AUTH", "default", "sekret"), b"+OK\r\n")
            self.assertEqual(c.cmd("GET", "x"), b"$-1\r\n")
            self.assertEqual(c.cmd("AUTH", "sekret"), b"+OK\r\n")
            c.close()

    def test_info_sections(self):
        c = Conn(self.pc.port)
        c.cmd("GET", "hk:stat")
        c.cmd("GET", "hk:stat")
        c.cmd("CLIENT", "NOSUCH")
        r = Conn(self.redis.port)

        def text(conn, *sec):
            b = conn.cmd("INFO", *sec)
            return b.split(b"\r\n", 1)[1][:-2].decode()

        def headers(t):
            return [line for line in t.split("\r\n") if line.startswith("#")]
        for sec in [(), ("default",), ("all",), ("everything",), ("server", "clients"),
                    ("replication",), ("cpu",), ("errorstats",), ("commandstats",),
                    ("keyspace",), ("CPU", "Memory")]:
            mine = headers(text(c, *sec))
            ref = [h for h in headers(text(r, *sec)) if h != "# Latencystats"]
            if sec in [(), ("default",), ("all",), ("everything",)]:
                # pcached's own sections follow Redis's
                self.assertEqual(mine[-2:], ["# Pcache", "# Metrics"])
                mine = mine[:-2]
            self.assertEqual(mine, ref, sec)
        t = text(c, "everything")
        fields = dict(line.split(":", 1) for line in t.split("\r\n") if ":" in line)
        self.assertEqual(fields["role"], "master")
        self.assertEqual(fields["connected_slaves"], "0")
        self.assertEqual(fields["blocked_clients"], "0")
        self.assertRegex(fields["master_replid"], r"^[0-9a-f]{40}$")
        self.assertRegex(fields["run_id"], r"^[0-9a-f]{40}$")
        for k in ("used_cpu_sys", "used_cpu_user", "used_cpu_sys_children",
                  "used_cpu_user_children"):
            self.assertRegex(fields[k], r"^\d+\.\d{6}$")
        self.assertGreater(float(fields["used_cpu_user"]) + float(fields["used_cpu_sys"]), 0)
        m = re.match(r"calls=(\d+),usec=(\d+),usec_per_call=[\d.]+,rejected_calls=0,"
                     r"failed_calls=0$", fields["cmdstat_get"])
        self.assertIsNotNone(m, fields["cmdstat_get"])
        self.assertGreaterEqual(int(m.group(1)), 2)
        self.assertRegex(fields["errorstat_ERR"], r"^count=\d+$")
        self.assertIn("aof_enabled", fields)
        self.assertIn("pcache_journal_status", fields)
        # every field Redis has in these sections, pcached has too
        for sec in ("clients", "replication", "cpu"):
            self.assertEqual(
                [k for k in info_fields(text(c, sec)) if not k.startswith("pcache")],
                [k for k in info_fields(text(r, sec)) if k != "mem_clients_normal"], sec)
        c.close()
        r.close()

    def test_commandstats_summed_across_workers(self):
        before = self.cmdstat(self.pc2.port, "echo")
        conns = [Conn(self.pc2.port) for _ in range(12)]
        for c in conns:
            for _ in range(5):
                c.cmd("ECHO", "x")
            c.close()
        self.assertEqual(self.cmdstat(self.pc2.port, "echo") - before, 60)

    def cmdstat(self, port, name):
        c = Conn(port)
        t = c.cmd("INFO", "commandstats").decode()
        c.close()
        m = re.search(r"cmdstat_%s:calls=(\d+)" % name, t)
        return int(m.group(1)) if m else 0


def have(tool):
    return shutil.which(tool) is not None


class TestClients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pc = Server(workers=2).start()
        c = Conn(cls.pc.port)
        for i in range(50):
            c.cmd("SET", "bk:%d" % i, "v" * i)
        c.cmd("SET", "bk:huge", "h" * 5000)
        c.close()

    @classmethod
    def tearDownClass(cls):
        cls.pc.cleanup()

    def cli(self, *args, timeout=20):
        p = subprocess.run(["timeout", str(timeout), "stdbuf", "-oL", "redis-cli", "-p",
                            str(self.pc.port), *args], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def test_stat(self):
        rc, out, err = self.cli("--stat", "-i", "0.3", timeout=3)
        self.assertEqual(rc, 124, (out, err))  # ran until the timeout stopped it
        rows = [line.split() for line in out.splitlines() if re.match(r"^\d+\s", line)]
        self.assertGreaterEqual(len(rows), 3, out)
        for r in rows:
            self.assertGreaterEqual(int(r[0]), 51)  # keys
            self.assertEqual(r[3], "0", out)         # blocked
        self.assertNotIn("error", (out + err).lower())

    def test_latency(self):
        rc, out, err = self.cli("--latency", "-i", "1", timeout=10)
        self.assertEqual(rc, 0, (out, err))
        self.assertRegex(out.strip(), r"^\d+ \d+ [\d.]+ \d+$")

    def test_bigkeys(self):
        rc, out, err = self.cli("--bigkeys", timeout=30)
        self.assertEqual(rc, 0, (out, err))
        self.assertIn("Biggest string found '\"bk:huge\"' has 5000 bytes", out)
        self.assertIn("51 strings with", out)

    def test_memkeys(self):
        rc, out, err = self.cli("--memkeys", timeout=30)
        self.assertEqual(rc, 0, (out, err))
        self.assertIn("Biggest string found '\"bk:huge\"'", out)
        self.assertIn("51 strings with", out)

    def test_cli_resp3(self):
        rc, out, err = self.cli("-3", "HELLO", "3")
        self.assertEqual(rc, 0, err)
        self.assertIn("role master", out.replace("\n", " ").replace("  ", " ") + " ")
        rc, out, err = self.cli("-3", "CONFIG", "GET", "maxmemory-policy")
        self.assertIn("maxmemory-policy", out)
        self.assertIn("noeviction", out)
        rc, out, err = self.cli("-3", "--no-raw", "GET", "bk:none")
        self.assertEqual(out.strip(), "(nil)")

    def test_redis_py(self):
        import redis
        r = redis.Redis(port=self.pc.port)
        self.assertTrue(r.client_setname("py"))
        self.assertEqual(r.client_getname(), "py")
        me = [c for c in r.client_list() if c["name"] == "py"]
        self.assertEqual(len(me), 1)
        self.assertEqual(r.info("replication")["role"], "master")
        self.assertEqual(r.object("encoding", "bk:1"), b"embstr")
        self.assertGreater(r.memory_usage("bk:huge"), 5000)
        self.assertIsNone(r.memory_usage("bk:none"))

    def test_redis_py_resp3(self):
        import redis
        try:
            r = redis.Redis(port=self.pc.port, protocol=3)
        except TypeError:
            print("SKIPPED: redis-py %s has no protocol=3 (RESP3 came in redis-py 5); "
                  "RESP3 is covered by the raw-socket corpus and redis-cli -3"
                  % redis.__version__)
            self.skipTest("redis-py %s lacks protocol=3" % redis.__version__)
        self.assertTrue(r.set("py3", "v"))
        self.assertEqual(r.get("py3"), b"v")
        self.assertIsNone(r.get("py3:none"))
        self.assertEqual(r.incr("py3:n"), 1)
        self.assertEqual(r.config_get("maxmemory-policy"),
                         {"maxmemory-policy": "noeviction"})
        self.assertEqual(r.info("replication")["role"], "master")
        self.assertTrue(r.client_list())
        hello = r.execute_command("HELLO", "3")
        self.assertEqual(hello.get(b"proto", hello.get("proto")), 3)


if __name__ == "__main__":
    missing = [t for t in ("redis-cli", "stdbuf", "timeout") if not have(t)]
    if not os.path.exists(REDIS_SERVER) or missing:
        print("SKIPPED: needs %s and %s" % (REDIS_SERVER, missing))
        sys.exit(77)
    try:
        import redis  # noqa: F401
    except ImportError:
        print("SKIPPED: python3-redis is not installed")
        sys.exit(77)
    unittest.main(verbosity=2)
