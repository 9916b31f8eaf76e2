"""pcached against a real redis-server, byte for byte.

Starts Debian's redis-server (private loopback port, no persistence, two
databases) and pcached (two collections, so SELECT/MOVE/COPY DB map the
same way), sends every line of redis_compat_corpus.txt to both on one
connection each, in order, and fails on any difference in the reply bytes.
The corpus file says how to read it; its lines marked `~` or `!` are the
documented known differences (docs/pcached.md, "Differences from Redis").

Exit 77 (SKIPPED) without /usr/bin/redis-server.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import Server, free_port  # noqa: E402

REDIS = "/usr/bin/redis-server"
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "redis_compat_corpus.txt")
SENTINEL = b"compat-sentinel-7f3a9c"
ECHO = b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (len(SENTINEL), SENTINEL)
END = b"$%d\r\n%s\r\n" % (len(SENTINEL), SENTINEL)

ESCAPES = {"\\": b"\\", '"': b'"', "r": b"\r", "n": b"\n", "t": b"\t", "0": b"\0",
           "a": b"\a", "b": b"\b"}


def tokens(text, lineno):
    """Splits a corpus line into byte strings (see the corpus header)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] in " \t":
            i += 1
            continue
        if text[i] == '"':
            i += 1
            tok = b""
            while True:
                if i >= n:
                    raise ValueError("line %d: unterminated quote" % lineno)
                ch = text[i]
                if ch == '"':
                    i += 1
                    break
                if ch == "\\":
                    nx = text[i + 1] if i + 1 < n else ""
                    if nx == "x":
                        tok += bytes([int(text[i + 2:i + 4], 16)])
                        i += 4
                        continue
                    if nx not in ESCAPES:
                        raise ValueError("line %d: bad escape \\%s" % (lineno, nx))
                    tok += ESCAPES[nx]
                    i += 2
                    continue
                tok += ch.encode("utf-8")
                i += 1
            out.append(tok)
            continue
        j = i
        while j < n and text[j] not in " \t":
            j += 1
        word = text[i:j]
        m = re.fullmatch(r"\{(.)\*(\d+)\}", word)
        out.append(m.group(1).encode() * int(m.group(2)) if m else word.encode("utf-8"))
        i = j
    return out


def resp(args):
    b = b"*%d\r\n" % len(args)
    for a in args:
        b += b"$%d\r\n%s\r\n" % (len(a), a)
    return b


def load_corpus():
    """[(lineno, kind, payload bytes, expected pcached bytes or None, text)]"""
    cases = []
    with open(CORPUS, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            text = line.rstrip("\n")
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            kind, expect = "=", None
            if text.startswith("~ "):
                kind, text = "~", text[2:]
                args = tokens(text, lineno)
            elif text.startswith("!"):  # !"<pcached's reply>" command...
                kind, toks = "!", tokens(text[1:], lineno)
                expect, args = toks[0], toks[1:]
            else:
                args = tokens(text, lineno)
            if args and args[0] == b"raw":
                if len(args) != 2 or not args[1].endswith(b"\n"):
                    raise ValueError("line %d: raw takes one quoted string ending in \\n" % lineno)
                payload = args[1]
            else:
                payload = resp(args)
            cases.append((lineno, kind, payload, expect, text))
    return cases


class Peer:
    """One connection to a server; reconnects after the server closed it."""

    def __init__(self, port):
        self.port = port
        self.sock = None

    def ask(self, payload, timeout=5.0):
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        self.sock.sendall(payload + ECHO)
        buf, deadline = b"", time.time() + timeout
        while not buf.endswith(END):
            if time.time() > deadline:
                return buf + b"<timeout>"
            try:
                chunk = self.sock.recv(1 << 20)
            except (ConnectionResetError, socket.timeout):
                chunk = b""
            if not chunk:
                self.sock.close()
                self.sock = None
                return buf + b"<closed>"
            buf += chunk
        return buf[:-len(END)]


def wait_redis(port, proc, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("redis-server exited with %s" % proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def main():
    if not os.access(REDIS, os.X_OK):
        print("SKIPPED: %s not installed (Debian package redis-server)" % REDIS)
        return 77
    cases = load_corpus()
    tmp = tempfile.TemporaryDirectory(prefix="redis-compat-")
    rport = free_port()
    redis = subprocess.Popen([REDIS, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--databases", "2", "--dir", tmp.name,
                              "--daemonize", "no", "--logfile", os.path.join(tmp.name, "log")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    failures = []
    try:
        wait_redis(rport, redis)
        with Server(collections="db0=4;db1=4", workers=1) as pc:
            r, p = Peer(rport), Peer(pc.port)
            t0 = time.time()
            for lineno, kind, payload, expect, text in cases:
                a, b = r.ask(payload), p.ask(payload)
                if kind == "=":
                    ok = a == b
                elif kind == "~":  # same reply type only
                    ok = a[:1] == b[:1] and a[:1] != b"" and not b.endswith(b"<closed>")
                else:  # "!": pcached's own documented reply
                    ok = b == expect
                if not ok:
                    failures.append("line %d: %s\n  redis:   %r\n  pcached: %r%s" % (
                        lineno, text, a, b, "\n  expected: %r" % expect if kind == "!" else ""))
            took = time.time() - t0
            print("%d corpus lines in %.2f s, %d differences" % (len(cases), took,
                                                                  len(failures)))
    finally:
        redis.terminate()
        try:
            redis.wait(timeout=10)
        except subprocess.TimeoutExpired:
            redis.kill()
        tmp.cleanup()
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
