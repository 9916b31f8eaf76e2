#!/usr/bin/python3
"""Memory per key of pcached, redis-server and memcached, side by side
(docs/benchmarks.md, "Memory per key"; docs/operations.md, "Sizing").

For each shape (key bytes + value bytes; 16+8, 19+200 and 40+1500 by
default) and each server, in a rotating order, it starts a fresh server
with persistence off (pcached: one worker, its /metrics on loopback;
redis-server: save "" and no AOF; memcached: one thread, its text
protocol), writes N keys of that shape through pipelined raw requests, and
reads two figures before and after, each divided by N. "After" is once
the server has settled: a table that grows in the background (pcached's
maintenance splits buckets and drains its overflow chains for seconds after
a fast fill; redis-server rehashes incrementally) is read only when its own
accounting and PSS have held still for SETTLE_POLLS polls in a row:

  own  - the server's own accounting: pcached pcache_memory_used_bytes
         (carved slab chunks and tables), redis-server INFO used_memory,
         memcached `stats` bytes (item bytes) and `stats slabs`
         total_malloced (slab pages handed out);
  pss  - the proportional set size of all its processes (/proc/PID/
         smaps_rollup, summed; pcached's master and worker share one
         mapping, which RSS would count twice), with rss (RSS summed) beside.

The whole-server figure is pss per key; "over payload" subtracts the key
and value bytes. Prints a table on stderr and one JSON object on stdout;
fails (exit 1) when a server stored fewer keys than written or did not
start, and skips (named in the JSON) a server that is not installed.

  /usr/bin/python3 bench/mem_per_entry.py --pcached build/src/server/pcached \\
      [--keys 1000000] [--shapes 16+8,19+200,40+1500] [--quick] \\
      [--pcached-opt growth_load_factor=6 ...]
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BATCH = 5000  # requests per pipelined write
SETTLE_POLL_S = 0.5  # between two readings of a server's memory after its fill
SETTLE_POLLS = 4  # equal readings in a row that make it settled
SETTLE_MAX_S = 120  # a server still changing after this fails the bench


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def tree_pids(pid):
    """pid and its children (pcached's workers are its master's)."""
    out = [pid]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(d))
    return out


def mem_of(pid):
    """(pss, rss) in bytes summed over pid and its children."""
    pss = rss = 0
    for p in tree_pids(pid):
        try:
            with open("/proc/%d/smaps_rollup" % p) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
        except OSError:
            pass
    return pss, rss


def connect(port, deadline=30):
    end = time.time() + deadline
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=60)
        except OSError:
            if time.time() > end:
                raise RuntimeError("nothing listens on port %d" % port)
            time.sleep(0.05)


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    return bytes(buf)


def request(s, cmd, end):
    """One request; the reply up to and including the line `end` ends it."""
    s.sendall(cmd)
    buf = b""
    while not buf.endswith(end):
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    return buf.decode(errors="replace")


def fill(s, proto, klen, vlen, n):
    """Writes keys 0..n-1 of klen bytes with vlen-byte values, pipelined."""
    value = b"v" * vlen
    if proto == "resp":
        head = b"*3\r\n$3\r\nSET\r\n$%d\r\n" % klen
        tail = b"\r\n$%d\r\n" % vlen + value + b"\r\n"
        reply = b"+OK\r\n"
    else:
        head, tail = b"set ", b" 0 0 %d\r\n" % vlen + value + b"\r\n"
        reply = b"STORED\r\n"
    for lo in range(0, n, BATCH):
        hi = min(n, lo + BATCH)
        s.sendall(b"".join(head + b"%0*d" % (klen, i) + tail for i in range(lo, hi)))
        got = recv_exact(s, len(reply) * (hi - lo))
        if got != reply * (hi - lo):
            raise RuntimeError("a write was refused: %r" % got[:200])


class Server:
    """One server process of a kind, its own accounting and its key count."""

    def __init__(self, kind, binary, workdir, extra=()):
        self.kind, self.port, self.hport = kind, free_port(), free_port()
        log = open(os.path.join(workdir, kind + ".log"), "w")
        if kind == "pcached":
            argv = [binary, "--port=%d" % self.port, "--http_port=%d" % self.hport,
                    "--workers=1", "--mem_mb=4096", "--db_url=", "--db_mode=0",
                    "--persist_collections=", "--journal=", "--log_level=warn"] + list(extra)
        elif kind == "redis-server":
            argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", workdir]
        else:
            argv = [binary, "-p", str(self.port), "-l", "127.0.0.1", "-U", "0", "-t", "1",
                    "-m", "4096", "-u", "root"]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, cwd=workdir,
                                     start_new_session=True)
        self.sock = connect(self.port)
        self.proto = "memcache" if kind == "memcached" else "resp"

    def own(self):
        """The server's own figure of the memory it uses, in bytes."""
        if self.kind == "pcached":
            t = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.hport).read()
            for line in t.decode().splitlines():
                if line.startswith("pcache_memory_used_bytes "):
                    return float(line.split()[1])
            raise RuntimeError("no pcache_memory_used_bytes in /metrics")
        if self.kind == "redis-server":
            info = self._bulk(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
            return float(info.split("used_memory:")[1].split()[0])
        st = request(self.sock, b"stats\r\n", b"END\r\n")
        return float(st.split("STAT bytes ")[1].split()[0])

    def malloced(self):
        """memcached's slab pages handed out (its own total), else None."""
        if self.kind != "memcached":
            return None
        st = request(self.sock, b"stats slabs\r\n", b"END\r\n")
        return float(st.split("STAT total_malloced ")[1].split()[0])

    def _bulk(self, cmd):
        self.sock.sendall(cmd)
        head = b""
        while not head.endswith(b"\r\n"):
            head += recv_exact(self.sock, 1)
        n = int(head[1:-2])
        return recv_exact(self.sock, n + 2).decode()

    def count(self):
        if self.proto == "resp":
            return int(request(self.sock, b"DBSIZE\r\n", b"\r\n")[1:])
        st = request(self.sock, b"stats\r\n", b"END\r\n")
        return int(st.split("STAT curr_items ")[1].split()[0])

    def stop(self):
        self.sock.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def settled(s):
    """Waits until s's own accounting and PSS hold still (SETTLE_POLLS
    equal readings SETTLE_POLL_S apart); returns own, pss, rss, malloced
    and the seconds it took. A few pages of
    the server's own stacks and buffers may move between readings, so
    it is compared in 64 KiB units."""
    t0, last, same = time.time(), None, 0
    while True:
        own, (pss, rss), mal = s.own(), mem_of(s.proc.pid), s.malloced()
        now = (own, pss // (64 * 1024))
        same = same + 1 if now == last else 0
        last = now
        if same + 1 >= SETTLE_POLLS:
            return own, pss, rss, mal, round(time.time() - t0, 1)
        if time.time() - t0 > SETTLE_MAX_S:
            raise RuntimeError("%s's memory still changed after %d s" % (s.kind, SETTLE_MAX_S))
        time.sleep(SETTLE_POLL_S)


def one(kind, binary, klen, vlen, n, extra=()):
    with tempfile.TemporaryDirectory(prefix="pcache-mem-") as d:
        s = Server(kind, binary, d, extra if kind == "pcached" else ())
        try:
            own0, (pss0, rss0), mal0 = s.own(), mem_of(s.proc.pid), s.malloced()
            t0 = time.time()
            fill(s.sock, s.proto, klen, vlen, n)
            secs = time.time() - t0
            stored = s.count()
            if stored != n:
                raise RuntimeError("%s holds %d keys of %d written" % (kind, stored, n))
            own_f, (pss_f, _), _ = s.own(), mem_of(s.proc.pid), s.malloced()
            own1, pss1, rss1, mal1, settle = settled(s)
        finally:
            s.stop()
    row = {"own_per_key": (own1 - own0) / n, "pss_per_key": (pss1 - pss0) / n,
           "rss_per_key": (rss1 - rss0) / n, "pss_total_bytes": pss1,
           "fill_s": round(secs, 2), "settle_s": settle,
           "pss_per_key_at_fill_end": round((pss_f - pss0) / n, 1),
           "own_per_key_at_fill_end": round((own_f - own0) / n, 1)}
    if mal0 is not None:
        row["malloced_per_key"] = (mal1 - mal0) / n
    for k in ("own", "pss", "rss", "malloced"):
        if k + "_per_key" in row:
            row[k + "_over_payload"] = round(row[k + "_per_key"] - klen - vlen, 1)
            row[k + "_per_key"] = round(row[k + "_per_key"], 1)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--pcached", default=os.environ.get("PCACHED", "build/src/server/pcached"))
    ap.add_argument("pcached_path", nargs="?", help="the same as --pcached (the old form)")
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--memcached", default=shutil.which("memcached"))
    ap.add_argument("--keys", type=int, default=1000000)
    ap.add_argument("--shapes", default="16+8,19+200,40+1500", help="KEY+VALUE bytes, ...")
    ap.add_argument("--quick", action="store_true", help="100k keys (not the 1M of the figures)")
    ap.add_argument("--pcached-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="a pcached option for every run, e.g. growth_load_factor=6 (repeatable)")
    a = ap.parse_args()
    if a.pcached_path:
        a.pcached = a.pcached_path
    if a.quick:
        a.keys = 100000
    a.pcached = os.path.abspath(a.pcached)
    shapes = [tuple(int(x) for x in sh.split("+")) for sh in a.shapes.split(",")]
    servers = [("pcached", a.pcached), ("redis-server", a.redis_server),
               ("memcached", a.memcached)]
    extra = ["--" + o for o in a.pcached_opt]
    out = {"bench": "mem_per_entry", "quick": a.quick, "keys": a.keys, "pcached_opts": extra,
           "date": time.strftime("%Y-%m-%dT%H:%M", time.gmtime()),
           "loadavg_start": loadavg(), "skipped": {}, "shapes": {}}
    if not a.pcached or not os.access(a.pcached, os.X_OK):
        sys.exit("mem_per_entry: no pcached at %r (--pcached PATH)" % a.pcached)
    for name, binary in servers:
        if not binary or not os.access(binary, os.X_OK):
            out["skipped"][name] = "not installed"
    run = [(k, b) for k, b in servers if k not in out["skipped"]]
    print("%s%d keys; per key: own accounting / PSS of all processes (RSS summed), "
          "bytes over key+value in brackets" % ("QUICK: " if a.quick else "", a.keys),
          file=sys.stderr)
    for i, (klen, vlen) in enumerate(shapes):
        rows = {}
        for j in range(len(run)):  # rotate the order, shape by shape
            kind, binary = run[(i + j) % len(run)]
            rows[kind] = one(kind, binary, klen, vlen, a.keys, extra)
            r = rows[kind]
            print("  %d+%d %-13s own %7.1f [%6.1f]  pss %7.1f [%6.1f]  rss %7.1f" % (
                klen, vlen, kind, r["own_per_key"], r["own_over_payload"], r["pss_per_key"],
                r["pss_over_payload"], r["rss_per_key"]), file=sys.stderr)
        for kind in list(rows):
            if kind != "pcached":
                rows["pcached_pss_over_" + kind.replace("-server", "")] = round(
                    rows["pcached"]["pss_per_key"] / rows[kind]["pss_per_key"], 3)
        out["shapes"]["%d+%d" % (klen, vlen)] = rows
    out["loadavg_end"] = loadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
