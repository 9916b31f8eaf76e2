"""Private servers and a raw RESP client for the eviction benches
(bench/evict_hitratio.py, bench/evict_set_throughput.py; docs/benchmarks.md,
"Eviction").

A server is one redis-server or one pcached started on a random loopback
port in 27000-27999 with persistence off, in its own process group, and
stopped (SIGTERM, then SIGKILL of the group) by whoever started it, also
when the bench fails. The client speaks RESP over a plain socket: redis-py
costs several microseconds per command, which would make the trace replay
the bottleneck of the run.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import time


def pick_port():
    """A port in 27000-27999 nothing listens on now (the project's private
    range; random so that concurrent benches rarely collide)."""
    for _ in range(200):
        port = random.randint(27000, 27999)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port in 27000-27999")


class Resp:
    """One RESP2 connection. send() writes a batch of encoded commands;
    replies(n) reads n replies: bytes for a bulk or a status, None for a
    null, int for an integer, RespError for an error; arrays are read as
    lists (INFO, CONFIG GET)."""

    def __init__(self, port, timeout=60):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = self.buf[self.pos:end]
                self.pos = end + 2
                return line
            self._fill()

    def _one(self):
        line = self._line()
        t = line[:1]
        if t == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                self._fill()
            v = self.buf[self.pos:self.pos + n]
            self.pos += n + 2
            return v
        if t == b"+":
            return line[1:]
        if t == b":":
            return int(line[1:])
        if t == b"-":
            return RespError(line[1:].decode("utf-8", "replace"))
        if t == b"*":
            n = int(line[1:])
            return None if n < 0 else [self._one() for _ in range(n)]
        raise ValueError("unexpected RESP reply %r" % line[:40])

    def replies(self, n):
        return [self._one() for _ in range(n)]

    def call(self, *args):
        self.send(encode(*args))
        r = self._one()
        if isinstance(r, RespError):
            raise r
        return r

    def info(self, section=""):
        text = self.call("INFO", section) if section else self.call("INFO")
        out = {}
        for line in text.decode().splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out


class RespError(Exception):
    pass


def encode(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class Server:
    """A started server: .port, .name, .stop(). Use as a context manager."""

    def __init__(self, name, argv, workdir, log_path):
        self.name = name
        self.workdir = workdir
        self.log_path = log_path
        self.port = None
        self.proc = None
        self.argv = argv

    def start(self, port, timeout=30):
        self.port = port
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log,
                                     start_new_session=True, cwd=self.workdir)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s:\n%s" %
                                   (self.name, self.proc.returncode, self.log_text()))
            try:
                c = Resp(port, timeout=2)
                try:
                    if c.call("PING") == b"PONG":
                        return self
                finally:
                    c.close()
            except (OSError, RespError):
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("%s did not start:\n%s" % (self.name, self.log_text()))

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc is None:
            return
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
            self.proc = None
            self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_redis(redis_server, workdir, extra=()):
    """redis-server on a private port, no RDB, no AOF, extra config args
    (--maxmemory-policy ...)."""
    for attempt in range(5):
        port = pick_port()
        argv = [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", workdir, "--daemonize", "no",
                "--protected-mode", "yes"] + list(extra)
        s = Server("redis-server", argv, workdir, os.path.join(workdir, "redis.log"))
        try:
            return s.start(port)
        except RuntimeError:
            if attempt == 4:
                raise


def pcached_conf(workdir, port, keys):
    """A pcached configuration with persistence, the journal and every
    management door off, logging to stderr (the server's log file in
    workdir); keys: more key = value pairs."""
    conf = {"bind": "127.0.0.1", "port": port, "workers": 2, "mem_mb": 64,
            "db_url": "", "persist_collections": "", "journal": "",
            "snapshot_period_s": 0, "http_port": 0, "unix_socket": "", "log_level": "warn"}
    conf.update(keys)
    path = os.path.join(workdir, "pcached.conf")
    with open(path, "w") as f:
        for k, v in conf.items():
            f.write("%s = %s\n" % (k, v))
    return path


def pcached_check(pcached, workdir, keys):
    """None when this pcached accepts the keys (pcached --check), else the
    reason it gave."""
    path = pcached_conf(workdir, 27000, keys)
    r = subprocess.run([pcached, "-c", path, "--check"], capture_output=True, text=True)
    if r.returncode == 0:
        return None
    return (r.stderr or r.stdout).strip().splitlines()[-1:] or ["exit %d" % r.returncode]


def start_pcached(pcached, workdir, keys):
    for attempt in range(5):
        port = pick_port()
        path = pcached_conf(workdir, port, keys)
        s = Server("pcached", [os.path.abspath(pcached), "-c", path], workdir,
                   os.path.join(workdir, "pcached.log"))
        try:
            return s.start(port)
        except RuntimeError:
            if attempt == 4:
                raise


def which_redis(path):
    return path if os.path.isabs(path) and os.access(path, os.X_OK) else shutil.which(path)


if __name__ == "__main__":  # a module of the eviction benches, not a bench
    import sys
    print(__doc__)
    sys.exit(0 if sys.argv[1:] in ([], ["--help"], ["-h"]) else 2)
