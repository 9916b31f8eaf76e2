#!/usr/bin/python3
"""pcached under systemd without systemd (docs/pcached.md "systemd"):

- Type=notify: the test binds the NOTIFY_SOCKET datagram socket the
  manager would, and reads what pcached sends: STATUS=loading... and an
  EXTEND_TIMEOUT_USEC keepalive while the store loads, READY=1 only once
  RESP answers, STOPPING=1 and STATUS=... the shutdown save with its
  keepalive at SIGTERM;
- log priorities: with JOURNAL_STREAM naming its stderr, every line starts
  with the sd-daemon(3) prefix of its level (<3> ERR, <4> WARN, <6> INFO),
  without it (or naming another stream) no line does.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import PCACHED, free_port, command  # noqa: E402


def journal_stream(f):
    st = os.fstat(f.fileno())
    return "%d:%d" % (st.st_dev, st.st_ino)


class Notify(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.sock_path = os.path.join(self.tmp.name, "notify.sock")
        self.ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.ns.bind(self.sock_path)
        self.proc = None

    def tearDown(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.ns.close()
        self.tmp.cleanup()

    def messages_until(self, want, timeout=30):
        """Datagrams (each split into its lines) until one holds `want`."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.ns.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                d = self.ns.recv(4096).decode()
            except socket.timeout:
                break
            got.append(d)
            if want in d.split("\n"):
                return got
        self.fail("no %r from pcached within %ss; got %r" % (want, timeout, got))

    def test_ready_status_extend_and_priorities(self):
        port = free_port()
        err = open(os.path.join(self.tmp.name, "stderr"), "w+")
        env = dict(os.environ, NOTIFY_SOCKET=self.sock_path, JOURNAL_STREAM=journal_stream(err))
        args = [PCACHED, "--port=%d" % port, "--workers=1", "--mem_mb=32",
                "--db_url=lmdb://%s/store" % self.tmp.name, "--db_mode=2",
                "--persist_collections=default"]
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=err)
        got = self.messages_until("READY=1")
        # READY=1 means serving: RESP answers at once
        self.assertEqual(command(port, "PING"), b"PONG")
        flat = "\n".join(got).split("\n")
        self.assertTrue(any(m.startswith("STATUS=loading the store") for m in flat), got)
        self.assertIn("EXTEND_TIMEOUT_USEC=20000000", flat)
        self.assertLess(flat.index("EXTEND_TIMEOUT_USEC=20000000"), flat.index("READY=1"))
        self.assertTrue(any(m.startswith("STATUS=serving RESP on 127.0.0.1:%d" % port)
                            for m in flat), got)
        self.assertEqual(command(port, "SET", "k", "v"), b"OK")
        self.proc.send_signal(signal.SIGUSR1)  # a WARN line
        time.sleep(0.3)
        self.proc.send_signal(signal.SIGTERM)
        got = self.messages_until("STATUS=stopping: the shutdown save")
        flat = "\n".join(got).split("\n")
        self.assertIn("STOPPING=1", flat)
        self.messages_until("EXTEND_TIMEOUT_USEC=20000000")
        self.assertEqual(self.proc.wait(timeout=60), 0)
        err.seek(0)
        lines = err.read().splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, r"^<[3467]>\d{4}-", line)
        self.assertTrue(any(line.startswith("<6>") and " INFO " in line for line in lines))
        self.assertTrue(any(line.startswith("<4>") and " WARN " in line for line in lines))

    def test_error_priority_and_no_prefix_elsewhere(self):
        for stream in ("named", "other", None):
            err = open(os.path.join(self.tmp.name, "stderr-%s" % stream), "w+")
            env = dict(os.environ)
            env.pop("JOURNAL_STREAM", None)
            env.pop("NOTIFY_SOCKET", None)
            if stream == "named":
                env["JOURNAL_STREAM"] = journal_stream(err)
            elif stream == "other":
                env["JOURNAL_STREAM"] = journal_stream(self.ns)  # not stderr
            # an address that parses but is not this machine's: the start logs
            # the bind error (a bad address is refused before logging starts)
            p = subprocess.run([PCACHED, "--port=0", "--workers=1", "--bind=192.0.2.1"],
                               env=env, stdout=subprocess.DEVNULL, stderr=err, timeout=30)
            self.assertNotEqual(p.returncode, 0)
            err.seek(0)
            text = err.read()
            bad = [line for line in text.splitlines() if " ERR " in line]
            self.assertTrue(bad, text)
            if stream == "named":
                self.assertTrue(all(line.startswith("<3>") for line in bad), text)
            else:
                self.assertFalse(any(line.startswith("<") for line in text.splitlines()), text)

    def test_no_notify_socket_no_message(self):
        port = free_port()
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        p = subprocess.Popen([PCACHED, "--port=%d" % port, "--workers=1", "--mem_mb=16"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proc = p
        for _ in range(100):
            try:
                if command(port, "PING") == b"PONG":
                    break
            except Exception:  # redis.ConnectionError until it listens
                time.sleep(0.05)
        self.ns.settimeout(0.2)
        with self.assertRaises(socket.timeout):
            self.ns.recv(4096)
        p.terminate()
        self.assertEqual(p.wait(timeout=30), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
