"""Starts and stops pcached for the tests: a temporary directory, a free
loopback port chosen by the kernel (port = 0; the master logs the port it
got), and a stop that always happens - SIGTERM, then SIGKILL of the whole
process group - even when a test fails."""
import atexit
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

PCACHED = os.environ.get("PCACHED", "pcached")
PCACHECTL = os.environ.get("PCACHECTL", "pcachectl")
_live = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, workdir=None, nofile=None, **opts):
        self.nofile = nofile  # RLIMIT_NOFILE (soft and hard) for the server
        self.tmp = None
        if workdir is None:
            self.tmp = tempfile.TemporaryDirectory(prefix="pcached-test-")
            workdir = self.tmp.name
        self.dir = workdir
        self.opts = {"port": 0, "workers": 2, "mem_mb": 128, "drain_timeout_ms": 3000}
        self.opts.update(opts)
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.dir, "pcached.log")

    def args(self):
        return [PCACHED] + ["--%s=%s" % (k, v) for k, v in self.opts.items()]

    def start(self, timeout=30):
        self.log = open(self.log_path, "ab")
        self.log_start = self.log.tell()
        limit = self.nofile

        def preexec():
            if limit is not None:
                import resource
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        self.proc = subprocess.Popen(self.args(), stdout=self.log, stderr=self.log,
                                     start_new_session=True, preexec_fn=preexec)
        _live.append(self)
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = self.log_text()
            m = re.search(r"serving RESP on \[?[0-9a-f.:]+\]?:(\d+)", text)
            if m:
                self.port = int(m.group(1))
                if self._ping():
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError("pcached exited with %s:\n%s" % (self.proc.returncode, text))
            time.sleep(0.05)
        raise RuntimeError("pcached did not start:\n" + self.log_text())

    def _ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(b"PING\r\n")
                reply = s.recv(100)
                return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")
        except OSError:
            return False

    def log_text(self):
        path = self.opts.get("log_file", self.log_path)
        if not os.path.exists(path):
            return ""
        with open(path, "rb") as f:
            f.seek(self.log_start if path == self.log_path else 0)
            return f.read().decode("utf-8", "replace")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Graceful stop; returns the exit status. Kills the group after."""
        if self.proc is None:
            return None
        rc = None
        try:
            self.proc.send_signal(sig)
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            self.kill_group()
        return rc

    def kill_group(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        # children that outlive the master get PDEATHSIG; wait for them to go.
        # Once the master is reaped its children are no longer its, so the
        # wait is on the process group: a SIGKILLed child still exiting
        # holds the store's lock, and a restart then finds it in use.
        pgid = self.proc.pid
        for _ in range(400):
            if not self.children() and not self._group_alive(pgid):
                break
            time.sleep(0.05)
        self.proc = None
        self.log.close()
        if self in _live:
            _live.remove(self)

    @staticmethod
    def _group_alive(pgid):
        """Whether a process of group pgid still runs (a zombie has closed
        its files: it holds no lock)."""
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
        return False

    def children(self):
        if self.proc is None:
            return []
        try:
            out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                 text=True).stdout
        except OSError:
            return []
        return [int(x) for x in out.split()]

    def sanitizer_reports(self):
        """Sanitizer reports and children that died of anything but the
        SIGKILL a test sent: a worker restarted after a crash would
        otherwise let a test pass."""
        text = ""
        for path in {self.log_path, self.opts.get("log_file", self.log_path)}:
            if os.path.exists(path):
                with open(path, "rb") as f:
                    text += f.read().decode("utf-8", "replace")
        bad = [line for line in text.splitlines()
               if "Sanitizer" in line or "runtime error:" in line
               or (re.search(r"killed by signal (\d+)", line)
                   and not re.search(r"killed by signal 9\b", line))]
        return bad

    def cleanup(self):
        bad = self.sanitizer_reports()
        self.kill_group()
        if bad:
            raise AssertionError("pcached reported problems:\n" + "\n".join(bad[:20]))
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


@atexit.register
def _stop_all():
    for s in list(_live):
        s.kill_group()


def raw(port, data, timeout=5, read_until_close=False, want=None, half_close=False):
    """Sends bytes on a new connection; returns what came back (until the
    server closed the connection, or `want` bytes, or the timeout), and
    whether the server closed it. half_close: shut our side after sending."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return b"", True
        buf = b""
        end = time.time() + timeout
        while time.time() < end:
            if want is not None and len(buf) >= want:
                break
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                return buf, True
            if not chunk:
                return buf, True
            buf += chunk
        return buf, False
    finally:
        s.close()


def command(port, *args):
    """One command on a fresh connection, the reply parsed by redis-py
    without any command-specific callback."""
    import redis
    c = redis.Connection(port=port)
    try:
        c.send_command(*args)
        return c.read_response()
    finally:
        c.disconnect()


def resp_cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)
