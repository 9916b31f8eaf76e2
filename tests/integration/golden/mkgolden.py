#!/usr/bin/python3
"""Makes a golden store: the data.mdb a real pcached writes for a fixed
content, for test_store_golden.c to read with every later version.

Usage: PCACHED=/path/to/pcached mkgolden.py OUTDIR

OUTDIR/data.mdb gets collection "default" of pcached's store holding
  gold:000 .. gold:199   the string "value NNN " repeated NNN % 7 + 1 times,
                         the keys NNN % 20 == 0 expiring at 4102444800000
                         (2100-01-01T00:00:00Z, PEXPIREAT)
  gold:counter           a counter, -42 (DECRBY 42)
  "gold:bin\\x00\\xff"    the value bytes 00..ff
saved once (SAVE), then pcached is stopped (SIGTERM, db_mode 1: no
shutdown save). Only data.mdb is kept. The content is test_store_golden.c's
golden_expect(); keep both in step. A store of an older format version is
made by the pcached of that version (store-v1: commit 3779306)."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def command(sock, *args):
    sock.sendall(resp(*args))
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("pcached closed the connection")
        data += chunk
    if data.startswith(b"-"):
        raise RuntimeError("%r: %r" % (args, data))
    return data


def main():
    out = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="pcache-golden-")
    store = os.path.join(work, "store")
    log = open(os.path.join(work, "log"), "w+")
    p = subprocess.Popen([os.environ["PCACHED"], "--port=0", "--workers=1", "--mem_mb=64",
                          "--collections=default=10", "--db_url=" + store, "--db_mode=1",
                          "--persist_collections=default"],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        port, t0 = None, time.time()
        while port is None and time.time() - t0 < 60:
            log.seek(0)
            m = re.search(r"serving RESP on [0-9.]+:(\d+)", log.read())
            port = int(m.group(1)) if m else None
            if p.poll() is not None:
                raise RuntimeError("pcached exited")
            time.sleep(0.05)
        s = socket.create_connection(("127.0.0.1", port))
        for i in range(200):
            k = b"gold:%03d" % i
            command(s, "SET", k, (b"value %03d " % i) * (i % 7 + 1))
            if i % 20 == 0:
                command(s, "PEXPIREAT", k, "4102444800000")
        command(s, "DECRBY", "gold:counter", "42")
        command(s, "SET", b"gold:bin\x00\xff", bytes(range(256)))
        command(s, "SAVE")
        s.close()
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=60)
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(os.path.join(store, "data.mdb"), os.path.join(out, "data.mdb"))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
