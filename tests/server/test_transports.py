"""RESP's transports (issue 20 item 5): the unix socket `unixsocket` with
its mode `unixsocketperm`, several addresses in `bind`, IPv6, Redis 7's
optional '-address'. Real clients: redis-cli -s / -h ::1 and redis-py's
unix_socket_path. The instance rules apply to the RESP unix socket as to
the JSON-RPC one: a live socket refuses the start (naming the pid), a stale
one is replaced, a path that is not a socket is left alone, and at exit the
path is unlinked only if it is still ours. IPv6 tests print SKIPPED where
the machine has no ::1."""
import os
import socket
import stat
import subprocess
import sys
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import PCACHED, Server, free_port  # noqa: E402


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


IPV6 = has_ipv6_loopback()


def second(*args, timeout=30):
    """Starts a pcached that must refuse: returns (exit status, log)."""
    p = subprocess.run([PCACHED, "--workers=1", "--mem_mb=32"] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def cli(*args):
    p = subprocess.run(["redis-cli"] + list(args), capture_output=True, timeout=20)
    return p.stdout


def resp_on_unix(path, data):
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(5)
        c.connect(path)
        c.sendall(data)
        return c.recv(4096)


class Transports(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.cleanup()

    def start(self, **opts):
        s = Server(**opts)
        self.servers.append(s)
        return s.start()

    def sock_server(self, **opts):
        s = Server(**opts)
        self.servers.append(s)
        s.opts["unixsocket"] = os.path.join(s.dir, "resp.sock")
        s.start()
        return s, s.opts["unixsocket"]

    # ---- the unix socket ------------------------------------------------------------
    def test_unix_socket_serves_redis_cli_and_redis_py(self):
        s, path = self.sock_server()
        self.assertEqual(cli("-s", path, "SET", "k", "over unix"), b"OK\n")
        self.assertEqual(cli("-s", path, "GET", "k"), b"over unix\n")
        r = redis.Redis(unix_socket_path=path, socket_timeout=5)
        self.assertEqual(r.get("k"), b"over unix")
        self.assertTrue(r.set("k2", b"\x00bin\xff"))
        # the same cache as TCP
        self.assertEqual(redis.Redis(port=s.port).get("k2"), b"\x00bin\xff")
        p = r.pipeline(transaction=False)
        for i in range(100):
            p.incr("n")
        self.assertEqual(p.execute()[-1], 100)
        self.assertIn("unix socket " + path, s.log_text())

    def test_unixsocketperm_is_the_mode_from_birth(self):
        s, path = self.sock_server(unixsocketperm="700")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o700)
        self.assertEqual(redis.Redis(port=s.port).config_get("unixsocketperm"),
                         {"unixsocketperm": "700"})
        s.stop()
        s.opts["unixsocketperm"] = "660"
        s.start()
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o660)

    def test_unixsocketperm_must_be_octal(self):
        for bad in ("999", "8", "1000", "-1", "rw"):
            rc, log = second("--port=0", "--unixsocket=/tmp/x.sock", "--unixsocketperm=" + bad)
            self.assertEqual(rc, 2, log)
            self.assertIn("unixsocketperm: '%s' is not an octal mode (0 to 777)" % bad, log)

    def test_unix_socket_needs_auth_as_tcp_does(self):
        s, path = self.sock_server(requirepass="sesame")
        self.assertEqual(resp_on_unix(path, b"GET k\r\n"),
                         b"-NOAUTH Authentication required.\r\n")
        self.assertEqual(resp_on_unix(path, b"AUTH sesame\r\nSET k v\r\nGET k\r\n"),
                         b"+OK\r\n+OK\r\n$1\r\nv\r\n")
        r = redis.Redis(unix_socket_path=path, password="sesame", socket_timeout=5)
        self.assertEqual(r.get("k"), b"v")

    def test_every_worker_serves_the_unix_socket(self):
        """One shared listener (EPOLLEXCLUSIVE): the kernel would hand every
        connection to the first idle worker; the balance rule spreads them
        within a few of each other (process_id of INFO server)."""
        s, path = self.sock_server(workers=2)
        conns = [redis.Redis(unix_socket_path=path, socket_timeout=5) for _ in range(20)]
        per = {}
        for r in conns:
            pid = r.info("server")["process_id"]
            per[pid] = per.get(pid, 0) + 1
        self.assertEqual(len(per), 2, per)
        self.assertGreaterEqual(min(per.values()), 7, per)
        for r in conns:
            r.close()
        # a worker killed: its replacement serves the socket too, no connection is lost
        victim = s.children()[0]
        os.kill(victim, 9)
        for i in range(50):
            self.assertEqual(cli("-s", path, "PING"), b"PONG\n", "connection %d" % i)

    def test_second_instance_on_a_live_unix_socket_refuses(self):
        s, path = self.sock_server()
        redis.Redis(unix_socket_path=path).set("mine", "first")
        rc, log = second("--port=0", "--unixsocket=" + path)
        self.assertNotEqual(rc, 0, log)
        self.assertIn("unixsocket %s: another server answers on it (pid %d)"
                      % (path, s.proc.pid), log)
        for i in range(20):  # the socket is neither stolen nor deleted
            self.assertEqual(redis.Redis(unix_socket_path=path).get("mine"), b"first")
        self.assertEqual(s.stop(), 0)
        self.assertFalse(os.path.exists(path), "the socket outlived its server")

    def test_stale_socket_is_replaced(self):
        s = Server()
        self.servers.append(s)
        path = os.path.join(s.dir, "resp.sock")
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(path)
        stale.close()  # the file stays, nobody listens: a previous run's
        self.assertTrue(stat.S_ISSOCK(os.lstat(path).st_mode))
        s.opts["unixsocket"] = path
        s.start()
        self.assertEqual(cli("-s", path, "PING"), b"PONG\n")

    def test_a_file_that_is_not_a_socket_is_kept(self):
        s = Server()
        self.servers.append(s)
        path = os.path.join(s.dir, "precious")
        with open(path, "w") as f:
            f.write("data")
        rc, log = second("--port=0", "--unixsocket=" + path)
        self.assertNotEqual(rc, 0, log)
        self.assertIn("unixsocket %s exists and is not a socket; not replacing it" % path, log)
        with open(path) as f:
            self.assertEqual(f.read(), "data")

    def test_exit_unlinks_only_its_own_socket(self):
        s, path = self.sock_server()
        os.unlink(path)
        other = socket.socket(socket.AF_UNIX)
        other.bind(path)  # someone else's socket at the path now
        other.listen(1)
        self.assertEqual(s.stop(), 0)
        self.assertTrue(os.path.exists(path), "exit removed a socket that was not its own")
        other.close()

    def test_resp_and_jsonrpc_sockets_are_distinct(self):
        s = Server()
        self.servers.append(s)
        rc, log = second("--port=0", "--unixsocket=/tmp/same.sock", "--unix_socket=/tmp/same.sock")
        self.assertEqual(rc, 2, log)
        self.assertIn("unixsocket: '/tmp/same.sock' is also unix_socket (JSON-RPC)", log)
        resp = os.path.join(s.dir, "resp.sock")
        rpc = os.path.join(s.dir, "rpc.sock")
        s.opts.update(unixsocket=resp, unix_socket=rpc)
        s.start()
        self.assertEqual(resp_on_unix(resp, b"PING\r\n"), b"+PONG\r\n")
        reply = resp_on_unix(rpc, b"GET /mi/ps HTTP/1.0\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1."), reply)
        self.assertEqual(stat.S_IMODE(os.stat(rpc).st_mode), 0o600)

    def test_unix_socket_path_too_long(self):
        path = "/tmp/" + "p" * 120
        rc, log = second("--port=0", "--unixsocket=" + path)
        self.assertNotEqual(rc, 0, log)
        self.assertIn("unixsocket", log)

    # ---- bind -----------------------------------------------------------------------
    def test_bind_refuses_what_is_not_an_address(self):
        for bad, shown in (("localhost", "localhost"), ("127.0.0.1 1.2.3", "1.2.3"),
                           ("::1 ::zz", "::zz"), ("[::1", "[::1")):
            rc, log = second("--port=0", "--bind=" + bad)
            self.assertEqual(rc, 2, log)
            self.assertIn("bind: '%s' is not an IPv4 or IPv6 address" % shown, log)
        rc, log = second("--port=0", "--bind=127.0.0.1 127.0.0.1")
        self.assertIn("bind: '127.0.0.1' is given twice", log)
        rc, log = second("--port=0", "--bind= ")
        self.assertIn("bind: no address", log)

    def test_missing_address_refuses_unless_optional(self):
        # 192.0.2.1 (TEST-NET-1) is on no interface of a test machine
        rc, log = second("--port=0", "--bind=127.0.0.1 192.0.2.1")
        self.assertNotEqual(rc, 0, log)
        self.assertIn("192.0.2.1", log)
        s = self.start(bind="127.0.0.1 -192.0.2.1")
        self.assertIn("bind: optional address 192.0.2.1 skipped", s.log_text())
        self.assertEqual(redis.Redis(port=s.port).ping(), True)

    def test_ipv6_loopback(self):
        if not IPV6:
            print("SKIPPED: test_ipv6_loopback: this machine has no IPv6 loopback")
            return
        for form in ("::1", "[::1]"):
            port = free_port()
            s = Server(bind="127.0.0.1 " + form, port=port)
            self.servers.append(s)
            s.start()
            self.assertIn("[::1]:%d" % port, s.log_text())
            self.assertEqual(cli("-h", "::1", "-p", str(port), "SET", "six", "v6"), b"OK\n")
            self.assertEqual(cli("-h", "127.0.0.1", "-p", str(port), "GET", "six"), b"v6\n")
            r = redis.Redis(host="::1", port=port, socket_timeout=5)
            self.assertEqual(r.get("six"), b"v6")
            r.close()
            s.cleanup()

    def test_two_addresses_and_the_second_instance_probe(self):
        if not IPV6:
            print("SKIPPED: test_two_addresses...: this machine has no IPv6 loopback")
            return
        port = free_port()
        s = self.start(bind="127.0.0.1,::1", port=port)
        self.assertEqual(cli("-h", "::1", "-p", str(port), "SET", "a", "1"), b"OK\n")
        self.assertEqual(cli("-h", "127.0.0.1", "-p", str(port), "GET", "a"), b"1\n")
        # a second instance on either address alone is refused, naming the first
        for b in ("::1", "127.0.0.1", "-::1"):
            rc, log = second("--port=%d" % port, "--bind=" + b)
            self.assertNotEqual(rc, 0, log)
            self.assertIn("port is in use by another process (pid %d)" % s.proc.pid, log)
        for i in range(20):  # the first is unharmed on both addresses
            host = "::1" if i % 2 else "127.0.0.1"
            self.assertEqual(redis.Redis(host=host, port=port).get("a"), b"1")

    def test_ipv4_loopback_optional_ipv6(self):
        """Redis 7's default form, '127.0.0.1 -::1', starts with or without
        IPv6; port 0 gives both addresses the same kernel-chosen port."""
        s = self.start(bind="127.0.0.1 -::1")
        if IPV6:
            self.assertIn("[::1]:%d" % s.port, s.log_text())
            self.assertEqual(cli("-h", "::1", "-p", str(s.port), "PING"), b"PONG\n")
        self.assertEqual(redis.Redis(port=s.port).config_get("bind"),
                         {"bind": "127.0.0.1 -::1"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
