#!/usr/bin/python3
"""Memory per entry of pcached, measured (docs/operations.md, "Sizing").

For each (key bytes, value bytes) it starts a fresh pcached (one worker,
its /metrics on loopback), writes N keys of that shape with redis-py
pipelines, and reads pcache_memory_used_bytes (carved slab chunks plus the
table) before and after: the growth over N is the shared memory one entry
costs, table share included. Usage:

    bench/mem_per_entry.py build/src/server/pcached [N]
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import redis


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def used(hport):
    t = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hport).read().decode()
    for line in t.splitlines():
        if line.startswith("pcache_memory_used_bytes "):
            return float(line.split()[1])
    raise RuntimeError("no pcache_memory_used_bytes")


def one(pcached, klen, vlen, n):
    port, hport = free_port(), free_port()
    with tempfile.TemporaryDirectory() as d:
        log = open(os.path.join(d, "log"), "w")
        p = subprocess.Popen([pcached, "--port=%d" % port, "--http_port=%d" % hport,
                              "--workers=1", "--mem_mb=2048"], stdout=log, stderr=log)
        try:
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            before = used(hport)
            pipe = r.pipeline(transaction=False)
            for i in range(n):
                pipe.set(b"%0*d" % (klen, i), b"v" * vlen)
                if i % 1000 == 999:
                    pipe.execute()
            pipe.execute()
            assert r.dbsize() == n
            return (used(hport) - before) / n
        finally:
            p.terminate()
            p.wait(30)


def main():
    pcached = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
    print("| key B | value B | entries | shared bytes per entry | over key+value |")
    print("| --- | --- | --- | --- | --- |")
    for klen, vlen in ((16, 8), (24, 64), (32, 200), (40, 500), (40, 1500)):
        b = one(pcached, klen, vlen, n)
        print("| %d | %d | %d | %.1f | %.2f x |" % (klen, vlen, n, b, b / (klen + vlen)))


if __name__ == "__main__":
    main()
