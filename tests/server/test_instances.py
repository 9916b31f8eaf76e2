"""One pcached per store, port, unix socket and pidfile, and the signals an
operator or a systemd unit sends (issue: durability). Each second instance
must refuse with a message that names the first one's pid, and the first
must be unharmed: it keeps serving every connection and its shutdown save
holds what it acknowledged. Every common signal either stops pcached with the
shutdown save (db_mode 2) or is ignored."""
import http.client
import json
import os
import signal
import threading
import socket
import subprocess
import sys
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import PCACHED, Server, free_port  # noqa: E402


def second(*args, timeout=30):
    """Starts a second pcached that must refuse: returns (exit status, log)."""
    p = subprocess.run([PCACHED, "--workers=1", "--mem_mb=32"] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def persisted(store, **opts):
    s = Server(db_url=store, db_mode=2, persist_collections="default", **opts)
    return s


class Instances(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.cleanup()

    def first(self, **opts):
        s = Server(**opts)
        self.servers.append(s)
        store = opts.get("db_url")
        if store is None:
            store = os.path.join(s.dir, "store")
            s.opts.update(db_url=store, db_mode=2, persist_collections="default")
        s.start()
        return s, s.opts["db_url"]

    def assert_unharmed(self, s, n=40):
        """Every new connection reaches the first instance and sees its data."""
        for i in range(n):
            r = redis.Redis(port=s.port, socket_timeout=5)
            self.assertEqual(r.get("mine"), b"first", "connection %d reached another cache" % i)
            r.close()

    def assert_saved(self, s, store):
        self.assertEqual(s.stop(), 0)
        self.assertIn("shutdown save done", s.log_text())
        again = persisted(store, workdir=s.dir)
        again.start()
        try:
            r = redis.Redis(port=again.port)
            self.assertEqual(r.get("mine"), b"first")
            self.assertEqual(r.get("late"), b"acknowledged")
        finally:
            again.cleanup()

    def test_second_on_the_same_store_refuses(self):
        s, store = self.first()
        redis.Redis(port=s.port).set("mine", "first")
        rc, log = second("--port=0", "--db_url=" + store, "--db_mode=2",
                         "--persist_collections=default")
        self.assertNotEqual(rc, 0, log)
        self.assertIn("in use by another process (pid %d)" % s.proc.pid, log)
        self.assertNotIn("serving RESP", log)
        redis.Redis(port=s.port).set("late", "acknowledged")
        self.assert_unharmed(s)
        self.assert_saved(s, store)

    def test_second_on_the_same_port_refuses(self):
        port = free_port()
        s, store = self.first(port=port)
        redis.Redis(port=port).set("mine", "first")
        other = os.path.join(s.dir, "other-store")
        rc, log = second("--port=%d" % port, "--db_url=" + other)
        self.assertNotEqual(rc, 0, log)
        self.assertIn("port is in use by another process (pid %d)" % s.proc.pid, log)
        redis.Redis(port=port).set("late", "acknowledged")
        self.assert_unharmed(s)
        self.assert_saved(s, store)

    def test_second_on_the_same_unix_socket_refuses(self):
        s, store = self.first()
        sock = os.path.join(s.dir, "rpc.sock")
        s.stop()
        s.opts.update(unix_socket=sock)
        s.start()
        redis.Redis(port=s.port).set("mine", "first")
        rc, log = second("--port=0", "--db_url=" + os.path.join(s.dir, "other"),
                         "--unix_socket=" + sock)
        self.assertNotEqual(rc, 0, log)
        self.assertIn("another server answers on it (pid %d)" % s.proc.pid, log)
        # the socket was neither stolen nor deleted by the second instance
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        c.sendall(b'POST / HTTP/1.1\r\nContent-Length: 45\r\n\r\n'
                  b'{"jsonrpc":"2.0","method":"perf_ping","id":1}')
        self.assertIn(b"HTTP/1.1", c.recv(4096))
        c.close()
        redis.Redis(port=s.port).set("late", "acknowledged")
        self.assert_saved(s, store)
        self.assertFalse(os.path.exists(sock), "the first instance removes its own socket")

    def test_stale_unix_socket_is_replaced(self):
        s = Server()
        self.servers.append(s)
        sock = os.path.join(s.dir, "rpc.sock")
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(sock)
        stale.close()  # bound, never listening: what a killed server leaves
        s.opts.update(unix_socket=sock)
        s.start()
        self.assertIn("JSON-RPC on unix socket", s.log_text())

    def test_second_with_the_same_pidfile_refuses(self):
        s, store = self.first()
        pidfile = os.path.join(s.dir, "pcached.pid")
        s.stop()
        s.opts.update(pidfile=pidfile)
        s.start()
        with open(pidfile) as f:
            self.assertEqual(f.read().strip(), str(s.proc.pid))
        rc, log = second("--port=0", "--pidfile=" + pidfile)
        self.assertNotEqual(rc, 0, log)
        self.assertIn("another pcached is running (pid %d)" % s.proc.pid, log)
        with open(pidfile) as f:
            self.assertEqual(f.read().strip(), str(s.proc.pid))
        redis.Redis(port=s.port).set("mine", "first")
        redis.Redis(port=s.port).set("late", "acknowledged")
        self.assert_saved(s, store)
        self.assertFalse(os.path.exists(pidfile))


class Signals(unittest.TestCase):
    """db_mode 2: a signal either stops pcached with the shutdown save or
    is ignored; none ends it without the save."""

    def run_signal(self, sig, stops):
        s = Server()
        store = os.path.join(s.dir, "store")
        s.opts.update(db_url=store, db_mode=2, persist_collections="default")
        try:
            s.start()
            r = redis.Redis(port=s.port)
            r.set("mine", "first")
            r.set("late", "acknowledged")
            s.proc.send_signal(sig)
            if stops:
                rc = s.proc.wait(timeout=30)
                self.assertEqual(rc, 0, s.log_text())
                self.assertIn("shutdown save done", s.log_text())
            else:
                time.sleep(0.5)
                self.assertIsNone(s.proc.poll(), "%s ended pcached" % sig.name)
                self.assertEqual(len(s.children()), 3, "a child died of %s" % sig.name)
                self.assertEqual(redis.Redis(port=s.port).get("mine"), b"first")
                self.assertEqual(s.stop(), 0)
            s.kill_group()
            again = persisted(store, workdir=s.dir)
            again.start()
            try:
                self.assertEqual(redis.Redis(port=again.port).get("late"), b"acknowledged")
            finally:
                again.kill_group()
        finally:
            s.cleanup()

    def test_term_saves(self):
        self.run_signal(signal.SIGTERM, True)

    def test_int_saves(self):
        self.run_signal(signal.SIGINT, True)

    def test_quit_saves(self):
        self.run_signal(signal.SIGQUIT, True)

    def test_hup_is_not_a_stop(self):
        self.run_signal(signal.SIGHUP, False)

    def test_usr1_is_ignored(self):
        self.run_signal(signal.SIGUSR1, False)

    def test_usr2_is_ignored(self):
        self.run_signal(signal.SIGUSR2, False)

    def test_usr1_to_every_process_is_ignored(self):
        """What `pkill -USR1 pcached` does: the signal reaches every process."""
        s = Server(workers=2)
        try:
            s.start()
            redis.Redis(port=s.port).set("mine", "first")
            kids = s.children()
            for pid in [s.proc.pid] + kids:
                os.kill(pid, signal.SIGUSR1)
                os.kill(pid, signal.SIGUSR2)
            time.sleep(0.5)
            self.assertIsNone(s.proc.poll())
            self.assertEqual(sorted(s.children()), sorted(kids), "a child was restarted")
            self.assertEqual(redis.Redis(port=s.port).get("mine"), b"first")
        finally:
            s.cleanup()


def maintenance_pid(s):
    """The master forks the maintenance process first (master.c)."""
    def started(pid):
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    return min(s.children(), key=lambda pid: (started(pid), pid))


class StartupLog(unittest.TestCase):
    def test_journal_off_is_said(self):
        s = Server()
        store = os.path.join(s.dir, "store")
        # journal = (off): with a store the default would journal default
        s.opts.update(db_url=store, db_mode=2, persist_collections="default", journal="")
        try:
            s.start()
            log = s.log_text()
            self.assertIn("collection 'default': journal off", log)
            self.assertIn("journal off, in", log)
            self.assertNotIn("segment(s)", log)
            self.assertNotIn("journal replayed", log)
            s.stop()
            s.opts.update(journal="default=everysec")
            s.start()
            log = s.log_text()
            self.assertIn("journal replayed", log)
            self.assertIn("read 0 segment(s)", log)
        finally:
            s.cleanup()


def info_field(r, name):
    return r.info("persistence")[name]


class DeadSaver(unittest.TestCase):
    def test_kill9_maintenance_during_jsonrpc_save(self):
        """The maintenance process dies in the middle of a JSON-RPC
        perf_save: its replacement clears the save-in-progress state, so
        INFO, BGSAVE and LASTSAVE tell the truth without a foreground SAVE."""
        s = Server(workers=1, mem_mb=512)
        store = os.path.join(s.dir, "store")
        s.opts.update(db_url=store, db_mode=2, persist_collections="default",
                      http_port=free_port())
        try:
            s.start()
            r = redis.Redis(port=s.port)
            p = r.pipeline(transaction=False)
            for i in range(400000):
                p.set("k:%d" % i, "v" * 100)
                if len(p) >= 10000:
                    p.execute()
            p.execute()
            before = r.lastsave()
            maint = maintenance_pid(s)

            def save():
                c = http.client.HTTPConnection("127.0.0.1", s.opts["http_port"], timeout=30)
                try:
                    c.request("POST", "/", json.dumps({"jsonrpc": "2.0", "method": "perf_save",
                                                       "params": {}, "id": 1}))
                    c.getresponse().read()
                except OSError:
                    pass  # the process that served it died
                finally:
                    c.close()
            t = threading.Thread(target=save)
            t.start()
            deadline = time.time() + 10
            while time.time() < deadline and info_field(r, "rdb_bgsave_in_progress") != 1:
                time.sleep(0.002)
            self.assertEqual(info_field(r, "rdb_bgsave_in_progress"), 1, "the save never began")
            os.kill(maint, signal.SIGKILL)
            t.join(30)
            deadline = time.time() + 10  # the master restarts it within a second
            while time.time() < deadline and info_field(r, "rdb_bgsave_in_progress") != 0:
                time.sleep(0.05)
            self.assertEqual(info_field(r, "rdb_bgsave_in_progress"), 0)
            self.assertIn("died during a save", s.log_text())
            self.assertEqual(r.info("persistence")["rdb_last_bgsave_status"], "err")
            self.assertEqual(r.bgsave(), True)  # "Background saving started"
            deadline = time.time() + 30
            while time.time() < deadline and r.lastsave() == before:
                time.sleep(0.1)
            self.assertNotEqual(r.lastsave(), before, "the BGSAVE after the kill never finished")
            self.assertEqual(info_field(r, "rdb_bgsave_in_progress"), 0)
            self.assertEqual(r.info("persistence")["rdb_last_bgsave_status"], "ok")
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
