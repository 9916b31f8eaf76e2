"""CONFIG SET reaches every worker: a setting changed on a connection served
by one worker applies to connections of the other within about a second
(docs/pcached.md, CONFIG). Two workers; connections are spread over them by
SO_REUSEPORT, and CLIENT ID tells which worker serves each one."""
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import Server  # noqa: E402


def resp(*args):
    b = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        b += b"$%d\r\n%s\r\n" % (len(a), a)
    return b


def ask(sock, *args):
    sock.sendall(resp(*args))
    buf = b""
    while not buf.endswith(b"\r\n") or (buf.startswith(b"$") and buf.count(b"\r\n") < 2) \
            or (buf.startswith(b"*") and not buf.startswith(b"*0") and buf.count(b"\r\n") < 5):
        chunk = sock.recv(65536)
        if not chunk:
            return buf + b"<closed>"
        buf += chunk
    return buf


class ConfigSet(unittest.TestCase):
    def conns_on_both_workers(self, srv):
        """Opens connections until both workers serve some: {slot: [socket]}."""
        by_slot = {}
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            cid = int(ask(s, "CLIENT", "ID")[1:-2])
            by_slot.setdefault(cid // 1000000, []).append(s)
            if len(by_slot) == 2 and all(len(v) >= 2 for v in by_slot.values()):
                return by_slot
        self.skipTest("connections did not reach both workers")

    def test_settings_reach_the_other_worker(self):
        with Server(workers=2) as srv:
            by_slot = self.conns_on_both_workers(srv)
            (a, *a_rest), (b, *b_rest) = by_slot.values()
            self.assertEqual(ask(a, "CONFIG", "SET", "max_bulk", "2048", "loglevel", "debug"),
                             b"+OK\r\n")
            # the worker that ran it: at once
            self.assertEqual(ask(a, "SET", "k", b"x" * 3000),
                             b"-ERR string exceeds maximum allowed size (an argument of 3000 bytes; "
                             b"max_bulk is 2048)\r\n")
            # the other worker: at its next tick (about a second; waited for
            # with a generous deadline, the machine may be busy)
            want = (b"-ERR string exceeds maximum allowed size (an argument of 3000 bytes; "
                    b"max_bulk is 2048)\r\n")
            deadline = time.time() + 30
            while ask(b, "SET", "k", b"x" * 3000) != want and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(ask(b, "SET", "k", b"x" * 3000), want)
            self.assertEqual(ask(b, "CONFIG", "GET", "loglevel"),
                             b"*2\r\n$8\r\nloglevel\r\n$5\r\ndebug\r\n")
            self.assertEqual(ask(b, "CONFIG", "GET", "max_bulk"),
                             b"*2\r\n$8\r\nmax_bulk\r\n$4\r\n2048\r\n")
            # all or nothing: one bad pair changes none
            self.assertTrue(ask(b, "CONFIG", "SET", "max_bulk", "4096", "timeout", "x")
                            .startswith(b"-ERR CONFIG SET failed (possibly related to argument "
                                        b"'timeout')"))
            self.assertEqual(ask(b, "CONFIG", "GET", "max_bulk"),
                             b"*2\r\n$8\r\nmax_bulk\r\n$4\r\n2048\r\n")
            # an idle timeout set on one worker closes idle clients of both
            self.assertEqual(ask(b, "CONFIG", "SET", "timeout", "1"), b"+OK\r\n")
            idle = a_rest + b_rest
            deadline = time.time() + 30  # about a second; generous on a busy machine
            closed = set()
            while time.time() < deadline and len(closed) < len(idle):
                for i, s in enumerate(idle):
                    if i in closed:
                        continue
                    s.settimeout(0.05)
                    try:
                        if s.recv(100) == b"":
                            closed.add(i)
                    except socket.timeout:
                        pass
                    except ConnectionResetError:
                        closed.add(i)
                time.sleep(0.1)
            self.assertEqual(len(closed), len(idle), "idle connections of both workers closed")
            for s in [a, b] + idle:
                s.close()
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
                self.assertEqual(ask(s, "CONFIG", "SET", "timeout", "0"), b"+OK\r\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
