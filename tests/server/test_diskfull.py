"""A full file system under the store (issue: durability, "persistence failure
refuses writes, never pretends"). The store lives on a small tmpfs the test
mounts; a filler file takes the rest of it. While the journal cannot write,
every write must be refused with -MISCONF naming the cause before anything
is applied, reads keep working, and writes resume by themselves once the
filler is deleted. Every key a client got +OK for is there after space
returns and after a restart; every key that got the error is absent or
holds its previous value. A start on a full disk serves reads.
The same cases run again on a small ext4 file system the test makes in a
file and mounts through a loop device: there the journal's drainer writes
with O_DIRECT (docs/journal-format.md §6.2), which tmpfs refuses, so its
ENOSPC path is the one under test (the case checks that the drainer's
segment descriptors are O_DIRECT ones). Skipped (exit 77) where a tmpfs
cannot be mounted; the ext4 cases say SKIPPED where a loop device cannot be
set up."""
import errno
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server, free_port  # noqa: E402

TMPFS_SIZE = "16m"
VALUE = b"v" * 200


def fill(path):
    """Writes path until the file system is full; returns its size."""
    n = 0
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                w = f.write(chunk)
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                break
            n += w
            if w < len(chunk):
                break
        # the last bytes, so that even a small record does not fit
        while True:
            try:
                if f.write(b"\0" * 512) < 512:
                    break
            except OSError:
                break
    return n


def info_persistence(r):
    return r.info("persistence")


def perf_stats(port):
    """The default collection's perf_stats over JSON-RPC (HTTP)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = {"jsonrpc": "2.0", "method": "perf_stats", "params": {"collection": "default"},
            "id": 1}
    c.request("POST", "/mi", body=json.dumps(body), headers={"Content-Type": "application/json"})
    res = json.loads(c.getresponse().read())
    c.close()
    return res["result"]["collections"][0]


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


ERRORS = []  # error replies seen, checked by check_refusals


def set_ok(r, key, value):
    """True on +OK, False on an error reply (kept for check_refusals)."""
    try:
        r.set(key, value)
        return True
    except redis.exceptions.ResponseError as e:
        ERRORS.append(str(e))
        return False


def check_refusals(test):
    """Every error reply was the refusal naming the cause."""
    bad = [m for m in ERRORS if not (m.startswith("MISCONF journal writes are failing")
                                     and "No space left on device" in m
                                     and "writes are refused until it recovers" in m)]
    del ERRORS[:]
    test.assertEqual(bad[:3], [], "%d error replies are not the refusal" % len(bad))


O_DIRECT = 0o40000  # Linux x86-64 and arm64 open flag, as /proc/<pid>/fdinfo shows it


def direct_segment_fds(store):
    """How many open descriptors of any process name a segment of store's
    journal with O_DIRECT set, and how many name one at all."""
    jdir = os.path.realpath(os.path.join(store, "journal"))
    direct = total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = "/proc/%s/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
                if not (target.startswith(jdir + "/") and target.endswith(".wal")):
                    continue
                with open("/proc/%s/fdinfo/%s" % (pid, fd)) as f:
                    flags = int(f.read().split("flags:")[1].split()[0], 8)
            except (OSError, IndexError, ValueError):
                continue
            total += 1
            if flags & O_DIRECT:
                direct += 1
    return direct, total


class DiskFull(unittest.TestCase):
    fs = "tmpfs"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pcached-diskfull-")
        cls.mnt = os.path.join(cls.tmp.name, "mnt")
        os.mkdir(cls.mnt)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def mount(self):
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + TMPFS_SIZE, "tmpfs", self.mnt],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise unittest.SkipTest("cannot mount a tmpfs: " + p.stderr.strip())

    def setUp(self):
        self.mount()
        self.servers = []
        self.filler = os.path.join(self.mnt, "filler")
        self.store = os.path.join(self.mnt, "store")

    def tearDown(self):
        if os.environ.get("DISKFULL_SHOWLOG"):
            for s in self.servers:
                sys.stderr.write(s.log_text())
        for s in self.servers:
            s.cleanup()
        subprocess.run(["umount", "-l", self.mnt], capture_output=True)

    def server(self, mode, workdir=None):
        s = Server(workdir=workdir, db_url=self.store, db_mode=2, persist_collections="default",
                   journal="default=" + mode, workers=2)
        self.servers.append(s)
        return s

    def check_keys(self, r, acked, refused, prev, when):
        missing = [k for k, v in acked.items() if r.get(k) != v]
        self.assertEqual(missing[:5], [], "%s: %d acknowledged keys missing or wrong"
                         % (when, len(missing)))
        bad = []
        for k in refused:
            got = r.get(k)
            if got != prev.get(k):
                bad.append((k, got))
        self.assertEqual(bad[:5], [], "%s: %d refused writes were applied" % (when, len(bad)))

    def load(self, port, prev, seconds):
        """Writes from 4 threads: new keys and overwrites of the prev keys.
        Returns (acked {key: value}, refused set)."""
        acked, refused, lock = {}, set(), threading.Lock()
        errors = []
        stop = time.time() + seconds

        def run(t):
            try:
                run1(t)
            except BaseException as e:  # noqa: B902 - reported by the test
                errors.append(repr(e))

        def run1(t):
            r = redis.Redis(port=port, socket_timeout=10)
            i = 0
            while time.time() < stop:
                if i % 4 == 0 and prev:
                    # each thread its own pre keys: one writer per key
                    key = "pre:%d" % ((t + 4 * (i // 4)) % len(prev))
                    val = b"new-%d-%d" % (t, i)
                else:
                    key = "k:%d:%d" % (t, i)
                    val = VALUE + b"%d" % i
                ok = set_ok(r, key, val)
                with lock:
                    if ok:
                        acked[key] = val
                        refused.discard(key)
                    elif key not in acked:
                        refused.add(key)
                    else:
                        # an overwrite of an acknowledged value was refused:
                        # that key keeps the acknowledged one
                        pass
                i += 1
        ths = [threading.Thread(target=run, args=(t,)) for t in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        self.assertEqual(errors, [], "a writer failed")
        return acked, refused

    def full_under_load(self, mode, kill):
        s = self.server(mode).start()
        r = redis.Redis(port=s.port, socket_timeout=10)
        prev = {}
        for i in range(200):
            k = "pre:%d" % i
            self.assertTrue(r.set(k, b"old-%d" % i))
            prev[k] = b"old-%d" % i
        if self.fs == "ext4":
            # the drainer holds its segments open with O_DIRECT while it writes
            for i in range(2000):
                r.set("warm:%d" % i, VALUE)
            wait_for(lambda: direct_segment_fds(self.store)[0] > 0, 5,
                     "an O_DIRECT segment descriptor (%d of %d)"
                     % direct_segment_fds(self.store))
        fill(self.filler)
        acked, refused = self.load(s.port, prev, 3.0)
        print("\n%s: %d writes acknowledged, %d refused on the full disk"
              % (mode, len(acked), len(refused)), file=sys.stderr)
        self.assertGreater(len(refused), 0, "no write was refused on a full disk")
        # refusal is prompt: a second later every write is refused
        time.sleep(1.2)
        later = [set_ok(r, "after:%d" % i, VALUE) for i in range(50)]
        self.assertFalse(any(later), "writes acknowledged a second after the disk filled")
        refused.update("after:%d" % i for i in range(50))
        # reads keep working, and nothing refused was applied
        expect = dict(prev)
        expect.update(acked)
        self.check_keys(r, expect, [k for k in refused if k not in expect], prev,
                        "while full")
        check_refusals(self)
        inf = info_persistence(r)
        self.assertEqual(inf.get("pcache_journal_status"), "failing")
        self.assertIn("No space left", str(inf["pcache_journal_error"]))
        self.assertGreater(int(inf["pcache_journal_failing_since"]), 0)
        # space returns: writes resume by themselves
        os.unlink(self.filler)
        wait_for(lambda: set_ok(r, "resumed", b"1"), 10, "writes to resume")
        expect["resumed"] = b"1"
        self.assertEqual(info_persistence(r)["pcache_journal_status"], "ok")
        self.check_keys(r, expect, [k for k in refused if k not in expect], prev,
                        "after space returned")
        # a restart: kill -9 (always: the journal alone) or a clean stop
        if kill:
            s.kill_group()
        else:
            s.stop()
        s2 = self.server(mode, workdir=s.dir)
        s2.start()
        r2 = redis.Redis(port=s2.port, socket_timeout=10)
        self.check_keys(r2, expect, [k for k in refused if k not in expect], prev,
                        "after the restart")
        s2.stop()

    def test_always_full_under_load(self):
        self.full_under_load("always", kill=True)

    def test_everysec_full_under_load(self):
        self.full_under_load("everysec", kill=False)

    def test_start_on_full_disk(self):
        s = self.server("everysec").start()
        r = redis.Redis(port=s.port, socket_timeout=10)
        data = {"s:%d" % i: b"x%d" % i for i in range(300)}
        for k, v in data.items():
            self.assertTrue(r.set(k, v))
        s.stop()
        fill(self.filler)
        s2 = self.server("everysec", workdir=s.dir)
        s2.opts.update(http_port=free_port())
        s2.start()
        r2 = redis.Redis(port=s2.port, socket_timeout=10)
        self.check_keys(r2, data, [], {}, "started on a full disk")
        self.assertFalse(set_ok(r2, "w", b"1"), "a write was acknowledged on a full disk")
        self.assertIsNone(r2.get("w"))
        check_refusals(self)
        self.assertEqual(info_persistence(r2)["pcache_journal_status"], "failing")
        st = perf_stats(s2.opts["http_port"])
        self.assertEqual(st["journal_status"], "failing")
        self.assertEqual(st["journal_error"], "No space left on device")
        self.assertGreater(st["journal_failing_since"], 0)
        os.unlink(self.filler)
        wait_for(lambda: set_ok(r2, "w", b"1"), 10, "writes to resume")
        data["w"] = b"1"
        self.assertEqual(perf_stats(s2.opts["http_port"])["journal_status"], "ok")
        s2.stop()
        s3 = self.server("everysec", workdir=s.dir)
        s3.start()
        r3 = redis.Redis(port=s3.port, socket_timeout=10)
        self.check_keys(r3, data, [], {}, "after the restart")
        s3.stop()


class DiskFullExt4(DiskFull):
    """The everysec cases on ext4, where the drainer writes with O_DIRECT.
    (always writes through the page cache on any file system.)"""
    fs = "ext4"
    test_always_full_under_load = None

    def mount(self):
        img = os.path.join(self.tmp.name, "ext4-%s.img" % self._testMethodName)
        err = mount_ext4(img, self.mnt, 32)
        if err is not None:
            print("SKIPPED: cannot make an ext4 file system on a loop device (%s)" % err,
                  file=sys.stderr)
            raise unittest.SkipTest("no loop-mounted ext4: " + err)


def mount_ext4(img, mnt, mb):
    """Makes an ext4 file system of mb MiB in the file img and mounts it on
    mnt through a loop device; returns None, or why it could not."""
    with open(img, "wb") as f:
        f.truncate(mb << 20)
    steps = (["mkfs.ext4", "-q", "-F", "-m", "0", img],
             ["mount", "-t", "ext4", "-o", "loop", img, mnt])
    for cmd in steps:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True)
            err = p.stderr.strip() if p.returncode != 0 else None
        except OSError as e:
            err = str(e)
        if err is not None:
            return "%s: %s" % (cmd[0], err)
    return None

if __name__ == "__main__":
    probe = tempfile.mkdtemp(prefix="pcached-diskfull-probe-")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("SKIPPED: cannot mount a tmpfs (%s)" % p.stderr.strip())
        os.rmdir(probe)
        sys.exit(77)
    subprocess.run(["umount", probe])
    os.rmdir(probe)
    unittest.main()
