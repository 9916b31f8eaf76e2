"""Damaged LMDB stores (issue 18): nothing crashes, nothing is silently
wrong, the damaged store is never written, salvage recovers every block
that was not damaged.

A real store is made by a real pcached (db_mode 1, two SAVEs with
different data, so the free list holds the first snapshot's pages). This
script reads the store's LMDB pages itself (the layout of LMDB 0.9,
docs/snapshot-format.md §12, written independently of storage/store/
store_walk.c) to find one page of every kind: both meta pages, the
'blocks' database's branch and leaf pages, overflow pages, the free
list, the main database's leaf. Then, for each kind of damage on a copy
(bytes flipped, the page zeroed, the file truncated, cut to zero bytes
or to a few bytes):

  - `pcache-snapshot verify` exits 1 and names a problem;
  - every verb (info, ls, keys, get, dump, verify, salvage) exits without a
    signal, and a verb that cannot give the whole answer exits non-zero
    with a message on stderr;
  - pcached (db_mode 1 on the copy) refuses to start, with a message that
    says the store is damaged, without a signal, and leaves the copy's
    data.mdb as it was;
  - `salvage` writes a new store that verifies clean and holds every block
    none of whose pages was damaged, each byte for byte as in the original
    (and nothing that was not in the original);
and the original store is never modified (its hash before and after).

Exit 0 on success, 1 on a failure; SKIPPED (77) without python3-redis."""
import hashlib
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

try:
    import redis
except ImportError:
    print("SKIPPED: python3-redis is not installed")
    sys.exit(77)

PCACHED = os.environ["PCACHED"]
SNAP = os.environ["PCACHE_SNAPSHOT"]
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg, flush=True)


# ---- LMDB 0.9 pages (64-bit) ---------------------------------------------------------
P_BRANCH, P_LEAF, P_OVERFLOW, P_META = 0x01, 0x02, 0x04, 0x08
F_BIGDATA, F_SUBDATA = 0x01, 0x02
P_INVALID = 0xFFFFFFFFFFFFFFFF


def u16(b, o):
    return struct.unpack_from("<H", b, o)[0]


def u32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def u64(b, o):
    return struct.unpack_from("<Q", b, o)[0]


class Lmdb:
    """The trees of the newest meta: page kinds, and per block of the
    'blocks' database its value and the pages it lies on."""

    def __init__(self, path):
        self.data = open(path, "rb").read()
        self.psize = u32(self.data, 16 + 24)  # the free db's md_pad
        metas = []
        for i in range(2):
            off = i * self.psize + 16
            metas.append((u64(self.data, off + 128), i, off))  # txnid, index, offset
        metas.sort()
        self.newest, self.older = metas[1][1], metas[0][1]
        off = metas[1][2]
        self.free_root = u64(self.data, off + 24 + 40)
        self.main_root = u64(self.data, off + 24 + 48 + 40)
        self.kind = {}  # pgno -> "branch:<db>", "leaf:<db>", "overflow:<db>"
        self.dbs = {}  # name -> root
        self.blocks = {}  # key -> (value, set of pages)
        self.walk("main", self.main_root)
        self.walk("free", self.free_root)
        for name, root in list(self.dbs.items()):
            self.walk(name, root)

    def page(self, pg):
        return self.data[pg * self.psize:(pg + 1) * self.psize]

    def walk(self, db, pg):
        if pg == P_INVALID:
            return
        p = self.page(pg)
        flags, lower = u16(p, 10), u16(p, 12)
        n = (lower - 16) // 2
        if flags & P_BRANCH:
            self.kind[pg] = "branch:" + db
            for i in range(n):
                node = u16(p, 16 + 2 * i)
                child = u16(p, node) | u16(p, node + 2) << 16 | u16(p, node + 4) << 32
                self.walk(db, child)
            return
        self.kind[pg] = "leaf:" + db
        for i in range(n):
            node = u16(p, 16 + 2 * i)
            dsize = u16(p, node) | u16(p, node + 2) << 16
            nflags, ksize = u16(p, node + 4), u16(p, node + 6)
            key = p[node + 8:node + 8 + ksize]
            data = p[node + 8 + ksize:]
            pages = {pg}
            if nflags & F_BIGDATA:
                op = u64(data, 0)
                npg = u32(self.page(op), 12)
                for q in range(op, op + npg):
                    self.kind[q] = "overflow:" + db
                    pages.add(q)
                value = self.data[op * self.psize + 16:op * self.psize + 16 + dsize]
            else:
                value = data[:dsize]
            if db == "main" and nflags & F_SUBDATA:
                self.dbs[key.decode()] = u64(value, 40)
            elif db == "blocks":
                self.blocks[key] = (value, pages)

    def first(self, kind):
        pages = sorted(pg for pg, k in self.kind.items() if k == kind)
        return pages[0] if pages else None


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_hash(d):
    """Every file under d except lock.mdb (LMDB's reader table, not data)."""
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(d)):
        for f in sorted(files):
            if f == "lock.mdb":
                continue
            p = os.path.join(dirpath, f)
            h.update(p[len(d):].encode() + b"\0" + sha(p).encode())
    return h.hexdigest()


# ---- the store ---------------------------------------------------------------------------
def start_pcached(store, work, mode=1, wait=True):
    log = open(os.path.join(work, "pcached.log"), "w+")
    p = subprocess.Popen([PCACHED, "--port=0", "--workers=1", "--mem_mb=128",
                          "--collections=default=17", "--db_url=" + store,
                          "--db_mode=%d" % mode, "--persist_collections=default",
                          "--pidfile=" + os.path.join(work, "pid")],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return p, log


def port_of(log, proc, timeout=30):
    t0 = time.time()
    text = ""
    while time.time() - t0 < timeout:
        log.seek(0)
        text = log.read()
        m = re.search(r"serving RESP on [0-9.]+:(\d+)", text)
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            raise RuntimeError("pcached exited: " + text)
        time.sleep(0.05)
    raise RuntimeError("pcached did not start: " + text)


def make_store(work):
    store = os.path.join(work, "orig")
    p, log = start_pcached(store, work)
    try:
        port = port_of(log, p)
        r = redis.Redis(port=port)
        pipe = r.pipeline(transaction=False)
        # 16-byte keys, 200-byte values that compress about 2:1: enough
        # blocks that the 'blocks' tree needs a branch page
        for i in range(90000):
            pipe.set(b"k%015d" % i, (b"%08d" % (i * 7919 % 100000000)) * 12 + os.urandom(52).hex()[:104].encode())
            if i % 2000 == 1999:
                pipe.execute()
        pipe.execute()
        r.execute_command("SAVE")
        for i in range(0, 90000, 3):  # a second generation: the first's pages go free
            pipe.set(b"k%015d" % i, b"changed-%d" % i * 10)
        pipe.execute()
        r.execute_command("SAVE")
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=60)
    return store


# ---- running things ---------------------------------------------------------------------
def run(args, timeout=120):
    p = subprocess.run(args, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def snap(*args):
    return run([SNAP] + list(args))


def no_signal(what, rc, out, err):
    if rc < 0 or rc >= 128:
        fail("%s: died of a signal (status %d); stderr: %s" % (what, rc, err[-500:]))
        return False
    return True


def check_copy(case, orig, copy, work, structural, lost_pages, any_gen=False):
    """The assertions on one damaged copy (see the module's comment)."""
    before = tree_hash(copy)
    rc, out, err = snap("verify", copy)
    if no_signal(case + ": verify", rc, out, err) and rc != 1:
        fail("%s: verify exit %d, want 1 (problems found); out: %s err: %s"
             % (case, rc, out[-400:], err[-400:]))
    some_key = None
    for key in orig.blocks:  # a key of the collection, for get
        some_key = key
        break
    verbs = [["info", copy], ["ls", copy], ["ls", copy, "default"], ["keys", copy, "default"],
             ["get", copy, "default", "k000000000000001"], ["dump", copy],
             ["verify", copy, "default"]]
    for v in verbs:
        rc, out, err = snap(*v)
        if not no_signal("%s: %s" % (case, v[0]), rc, out, err):
            continue
        if structural and rc == 0:
            fail("%s: %s exit 0 on a store with damaged LMDB pages" % (case, " ".join(v[:1])))
        if rc != 0 and err.strip() == "" and v[0] != "verify":
            fail("%s: %s exit %d without a message" % (case, v[0], rc))
    rc, out, err = snap("dump", copy)
    if rc == 0:
        fail("%s: dump exit 0 on a damaged store" % case)
    # pcached refuses, says why, leaves the store as it was
    p, log = start_pcached(copy, work)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        rc = None
    log.seek(0)
    text = log.read()
    if rc is None:
        fail("%s: pcached started on a damaged store: %s" % (case, text[-600:]))
    elif rc < 0:
        fail("%s: pcached died of signal %d: %s" % (case, -rc, text[-600:]))
    elif rc == 0:
        fail("%s: pcached exit 0" % case)
    elif "damaged" not in text and "newer" not in text:
        fail("%s: pcached's message does not say the store is damaged: %s" % (case, text[-600:]))
    if tree_hash(copy) != before:
        fail("%s: the damaged store was modified by the tools or pcached" % case)
    # salvage
    dst = copy + ".salvaged"
    rc, out, err = snap("salvage", copy, dst)
    if not no_signal(case + ": salvage", rc, out, err):
        return
    if rc not in (0, 1):
        fail("%s: salvage exit %d: %s %s" % (case, rc, out[-400:], err[-400:]))
        return
    if tree_hash(copy) != before:
        fail("%s: salvage modified its source" % case)
    rc2, out2, err2 = snap("verify", dst)
    if rc2 != 0:
        fail("%s: the salvaged store does not verify clean (%d): %s %s"
             % (case, rc2, out2[-600:], err2[-300:]))
    got = Lmdb(os.path.join(dst, "data.mdb")).blocks if os.path.exists(
        os.path.join(dst, "data.mdb")) else {}
    for key, (val, _) in got.items():
        if any_gen:
            continue
        if key not in orig.blocks or orig.blocks[key][0] != val:
            fail("%s: salvage produced a block that is not in the original" % case)
            break
    if not any_gen:
        want = {k for k, (v, pages) in orig.blocks.items() if not (pages & lost_pages)}
        missing = want - set(got)
        if missing:
            fail("%s: salvage lost %d of %d undamaged blocks; output: %s"
                 % (case, len(missing), len(want), out[-600:]))
        print("%s: salvage recovered %d blocks (%d undamaged of %d)"
              % (case, len(got), len(want), len(orig.blocks)), flush=True)
    else:
        print("%s: salvage recovered %d blocks" % (case, len(got)), flush=True)


def main():
    work = tempfile.mkdtemp(prefix="pcache-damage-")
    try:
        store = make_store(work)
        dpath = os.path.join(store, "data.mdb")
        orig = Lmdb(dpath)
        ps = orig.psize
        orig_hash = tree_hash(store)
        rc, out, err = snap("verify", store)
        if rc != 0:
            fail("the healthy store does not verify clean: %s %s" % (out, err))
        kinds = {
            "newest meta": orig.newest, "older meta": orig.older,
            "blocks branch": orig.first("branch:blocks"),
            "blocks leaf": orig.first("leaf:blocks"),
            "blocks overflow": orig.first("overflow:blocks"),
            "free list": orig.first("leaf:free"),
            "main leaf": orig.first("leaf:main"),
            "meta-db leaf": orig.first("leaf:meta"),
        }
        for k, pg in kinds.items():
            if pg is None:
                fail("the test store has no %s page: the test would prove nothing" % k)
        if FAILURES:
            return 1
        print("store: %d pages of %d bytes, %d blocks; pages: %s"
              % (len(orig.data) // ps, ps, len(orig.blocks), kinds), flush=True)
        free_leaf = kinds["free list"]
        # the free list's first page number pointed at a live page: the case in
        # which pcached's first write destroyed the whole store
        fl = orig.page(free_leaf)
        node = u16(fl, 16)
        ksize = u16(fl, node + 6)
        nflags = u16(fl, node + 4)
        idl_off = free_leaf * ps + node + 8 + ksize
        if nflags & F_BIGDATA:
            op = u64(orig.data, idl_off)
            idl_off = op * ps + 16
        live = kinds["blocks leaf"]
        over = kinds["blocks overflow"]
        cases = [
            # name, damage, structural, pages whose blocks may be lost, any generation
            ("flip newest meta root", ("flip", orig.newest * ps + 16 + 24 + 48 + 40, 3), True,
             set(), True),
            ("zero older meta", ("zero", orig.older), True, set(), False),
            ("flip blocks branch child", ("flip", kinds["blocks branch"] * ps + 16 + 2, 1), True,
             set(), False),
            ("zero blocks branch", ("zero", kinds["blocks branch"]), True, set(), False),
            # a key byte: LMDB's structure still holds (the key is in order), the
            # block key names no collection: pcache's layer finds it
            ("flip blocks leaf key", ("flipnode", live, 8), False, {live}, False),
            ("flip blocks leaf node offset", ("flip", live * ps + 17, 1), True, {live}, False),
            ("zero blocks leaf", ("zero", live), True, {live}, False),
            ("flip overflow header", ("flip", over * ps + 0, 2), True, {over}, False),
            ("flip overflow payload", ("flip", over * ps + 2000, 4), False, {over}, False),
            ("zero overflow first page", ("zero", over), True, {over}, False),
            ("free list names a live page", ("put64", idl_off + 8, live), True, set(), False),
            ("flip free list page header", ("flip", free_leaf * ps + 12, 1), True, set(), False),
            ("zero free list page", ("zero", free_leaf), True, set(), False),
            ("flip main leaf (named db record)", ("flipnode", kinds["main leaf"], 8 + 6 + 40),
             True, set(), False),
            ("zero meta-db leaf", ("zero", kinds["meta-db leaf"]), True, set(), False),
            ("truncate to half", ("truncate", len(orig.data) // 2), True,
             {pg for pg in range(len(orig.data) // 2 // ps, len(orig.data) // ps + 1)}, False),
            ("truncate to one page", ("truncate", ps), True, None, True),
            ("truncate to 100 bytes", ("truncate", 100), True, None, True),
            ("zero-length data.mdb", ("truncate", 0), True, None, True),
        ]
        for name, dmg, structural, lost, any_gen in cases:
            copy = os.path.join(work, "copy")
            for d in (copy, copy + ".salvaged"):
                shutil.rmtree(d, ignore_errors=True)
            os.mkdir(copy)
            shutil.copyfile(dpath, os.path.join(copy, "data.mdb"))
            with open(os.path.join(copy, "data.mdb"), "r+b") as f:
                op = dmg[0]
                if op == "flip":
                    f.seek(dmg[1])
                    b = f.read(dmg[2])
                    f.seek(dmg[1])
                    f.write(bytes(x ^ 0x5a for x in b))
                elif op == "flipnode":  # a byte inside the page's first node
                    page = orig.page(dmg[1])
                    at = dmg[1] * ps + u16(page, 16) + dmg[2]
                    f.seek(at)
                    b = f.read(1)
                    f.seek(at)
                    f.write(bytes([b[0] ^ 0x41]))
                elif op == "zero":
                    f.seek(dmg[1] * ps)
                    f.write(b"\0" * ps)
                elif op == "put64":
                    f.seek(dmg[1])
                    f.write(struct.pack("<Q", dmg[2]))
                elif op == "truncate":
                    f.truncate(dmg[1])
            print("--", name, flush=True)
            check_copy(name, orig, copy, work, structural, lost or set(), any_gen)
        if tree_hash(store) != orig_hash:
            fail("the original store was modified")
        # a store directory without data.mdb is still a new store
        fresh = os.path.join(work, "fresh")
        os.mkdir(fresh)
        p, log = start_pcached(fresh, work)
        try:
            port_of(log, p)
        except RuntimeError as e:
            fail("pcached does not start on a directory without data.mdb: %s" % e)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=60)
    finally:
        if not FAILURES:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
