"""A failing journal's state belongs to the live server (issue 34, F1/F2).

The journal's health (failing, its cause, since when, and the hold a start
on a full disk puts on it) sits in the shared area mapped from the file
journal/rings, which outlives kill -9. A new server must never inherit a
dead one's hold or failure time: F1 was a start on a full disk (it holds
the journal failing until it records its boot generation), kill -9, space
freed, restart, disk filled again and freed: writes stayed refused forever.

The test walks F1's exact sequence, then every order of 4 (PCACHE_ORDERS_LEN)
steps of start-or-kill and fill-or-free (a de Bruijn walk, so each order is
one window of a single run), for always and everysec, on an ext4 file system
on a loop device (SKIPPED with the reason where one cannot be made). After
each step it checks the state the server must be in:
- up, disk full: writes are refused, INFO says failing, and the failure time
  is not older than this server's start (F2);
- up, disk free: writes resume within PCACHE_RESUME_LIMIT_S (default 1 s) of
  space returning or of the start; the time is printed for each;
- after every start: every acknowledged key is there."""
import os
import sys
import tempfile
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402
from test_diskfull import fill, mount_ext4, ERRORS  # noqa: E402
import subprocess  # noqa: E402

RESUME_LIMIT = float(os.environ.get("PCACHE_RESUME_LIMIT_S", "1.0"))
ORDERS_LEN = int(os.environ.get("PCACHE_ORDERS_LEN", "4"))
# F1 from a server up on a free disk: D = fill or free, S = kill or start
F1 = "DSSSDSDD"


def de_bruijn(n):
    """A binary de Bruijn sequence of order n, as a linear string whose
    windows of n are every string of n bits ('0' = S, '1' = D)."""
    a = [0] * (2 * n)
    seq = []

    def db(t, p):
        if t > n:
            if n % p == 0:
                seq.extend(a[1:p + 1])
        else:
            a[t] = a[t - p]
            db(t + 1, p)
            for j in range(a[t - p] + 1, 2):
                a[t] = j
                db(t + 1, t)
    db(1, 1)
    s = "".join("SD"[b] for b in seq)
    return s + s[:n - 1]


class Orders(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pcached-orders-")
        self.mnt = os.path.join(self.tmp.name, "mnt")
        os.mkdir(self.mnt)
        err = mount_ext4(os.path.join(self.tmp.name, "fs.img"), self.mnt, 32)
        if err is not None:
            print("SKIPPED: cannot make an ext4 file system on a loop device (%s)" % err,
                  file=sys.stderr)
            raise unittest.SkipTest("no loop-mounted ext4: " + err)
        self.store = os.path.join(self.mnt, "store")
        self.filler = os.path.join(self.mnt, "filler")
        self.workdir = os.path.join(self.tmp.name, "work")
        os.mkdir(self.workdir)
        self.servers = []
        self.srv = None
        self.full = False
        self.acked = {}
        self.n = 0
        self.resumes = []
        self.refused_starts = 0

    def tearDown(self):
        for s in self.servers:
            s.kill_group()
        if os.environ.get("ORDERS_SHOWLOG") and self.servers:
            sys.stderr.write(self.servers[-1].log_text())
        subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        self.tmp.cleanup()
        del ERRORS[:]

    def start(self, mode):
        s = Server(workdir=self.workdir, db_url=self.store, db_mode=2,
                   persist_collections="default", journal="default=" + mode, workers=2)
        self.servers.append(s)
        self.started_s = int(time.time())
        try:
            s.start(timeout=60)
        except RuntimeError as e:
            # a dead server's acknowledged records still in its ring cannot
            # be written out on a full disk: the start refuses rather than
            # lose them, and the next start with space succeeds (checked)
            if not (self.full and "acknowledged records the previous run" in str(e)
                    and "free space" in str(e)):
                raise
            self.refused_starts += 1
            print("  %s: a start on the full disk refused: a dead server's ring holds "
                  "acknowledged records" % mode, file=sys.stderr)
            return False
        self.srv = s
        self.r = redis.Redis(port=s.port, socket_timeout=10)
        for k, v in self.acked.items():
            got = self.r.get(k)
            self.assertEqual(got, v, "%s: acknowledged key %s lost across a restart" % (mode, k))
        return True

    def try_set(self):
        self.n += 1
        k, v = "k:%d" % self.n, b"v%d" % self.n
        try:
            self.r.set(k, v)
        except redis.exceptions.ResponseError as e:
            self.assertTrue(str(e).startswith("MISCONF journal writes are failing"), str(e))
            return False, str(e)
        self.acked[k] = v
        return True, None

    def wait_refused(self, what):
        deadline = time.time() + 30
        while time.time() < deadline:
            ok, err = self.try_set()
            if not ok:
                return err
            time.sleep(0.02)
        self.fail("%s: writes still acknowledged 30 s after the disk filled" % what)

    def wait_resumed(self, since, what):
        deadline = since + 20
        while time.time() < deadline:
            if self.try_set()[0]:
                took = time.time() - since
                self.resumes.append(took)
                print("  %s: writes resumed %.3f s after space returned" % (what, took),
                      file=sys.stderr)
                self.assertLessEqual(took, RESUME_LIMIT, "%s: writes resumed only %.3f s after "
                                     "space returned" % (what, took))
                return
            time.sleep(0.02)
        inf = self.r.info("persistence")
        self.fail("%s: writes still refused 20 s after space returned (journal %s, held by "
                  "%s)" % (what, inf.get("pcache_journal_status"), inf.get("pcache_journal_error")))

    def check_failing(self, what):
        inf = self.r.info("persistence")
        self.assertEqual(inf["pcache_journal_status"], "failing", what)
        since = int(inf["pcache_journal_failing_since"])
        self.assertGreaterEqual(since, self.started_s, "%s: the failure time %d is older than "
                                "this server's start %d (a dead server's)"
                                % (what, since, self.started_s))

    def step(self, mode, c, i):
        what = "%s step %d (%s)" % (mode, i, c)
        if c == "S" and self.srv is not None:
            self.srv.kill_group()
            self.srv = None
            return
        if c == "S":
            t = time.time()
            if not self.start(mode):
                return
            what += " start on a %s disk" % ("full" if self.full else "free")
            if self.full:
                self.wait_refused(what)
                self.check_failing(what)
            else:
                self.wait_resumed(t, what)
            return
        if not self.full:
            fill(self.filler)
            self.full = True
            if self.srv is not None:
                self.wait_refused(what + " fill")
                self.check_failing(what + " fill")
            return
        t = time.time()
        os.unlink(self.filler)
        self.full = False
        if self.srv is not None:
            self.wait_resumed(t, what + " free")

    def walk(self, mode, seq):
        self.start(mode)
        for i, c in enumerate(seq):
            self.step(mode, c, i)
        # end where writes must work: disk free, a server up
        if self.full:
            self.step(mode, "D", len(seq))
        if self.srv is None:
            self.step(mode, "S", len(seq) + 1)
        print("%s: %d steps, %d resumes, slowest %.3f s, %d acknowledged keys kept, %d starts "
              "on a full disk refused" % (mode, len(seq), len(self.resumes), max(self.resumes),
                                          len(self.acked), self.refused_starts),
              file=sys.stderr)

    def test_f1_always(self):
        self.walk("always", F1)

    def test_f1_everysec(self):
        self.walk("everysec", F1)

    def test_orders_always(self):
        self.walk("always", de_bruijn(ORDERS_LEN))

    def test_orders_everysec(self):
        self.walk("everysec", de_bruijn(ORDERS_LEN))


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIPPED: mounting a loop device needs root")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="pcached-orders-probe-") as d:
        os.mkdir(os.path.join(d, "mnt"))
        why = mount_ext4(os.path.join(d, "fs.img"), os.path.join(d, "mnt"), 8)
        subprocess.run(["umount", os.path.join(d, "mnt")], capture_output=True)
    if why is not None:
        print("SKIPPED: cannot make an ext4 file system on a loop device (%s)" % why)
        sys.exit(77)
    unittest.main()
