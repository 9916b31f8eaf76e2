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
    data.mdb as it was; `verify` and `info` say the same sentence
    (issue 34, F5);
  - `salvage` writes a new store that verifies clean and holds every block
    none of whose value bytes was damaged, each byte for byte as in the
    original (and nothing that was not in the original): a flipped byte
    anywhere in the blocks tree's leaf loses no block whose value is on
    overflow pages, a truncation none before the cut (issue 34, F6); the
    records recovered over the records of intact blocks is printed per
    copy, and must be at least 99%;
and the original store is never modified (its hash before and after).
The damage is one flipped byte at a structural offset (page headers, node
offsets, sizes, flags, overflow page numbers, keys, the store header, a
collection meta), a zeroed page, or a truncation.

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
RESULTS = []  # (case, records recovered, records in intact blocks, records)


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
        self.blocks = {}  # key -> (value, the pages its bytes lie on)
        self.metas = {}  # key of the 'meta' database -> file offset of its (inline) value
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
            vpages = {pg}  # the pages the value's bytes lie on
            if nflags & F_BIGDATA:
                op = u64(data, 0)
                npg = u32(self.page(op), 12)
                vpages = set(range(op, op + npg))
                for q in vpages:
                    self.kind[q] = "overflow:" + db
                value = self.data[op * self.psize + 16:op * self.psize + 16 + dsize]
            else:
                value = data[:dsize]
            if db == "main" and nflags & F_SUBDATA:
                self.dbs[key.decode()] = u64(value, 40)
            elif db == "blocks":
                self.blocks[key] = (value, vpages)
            elif db == "meta" and not nflags & F_BIGDATA:
                self.metas[key] = pg * self.psize + node + 8 + ksize

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
    else:
        same_words(case, copy, text)
    if tree_hash(copy) != before:
        fail("%s: the damaged store was modified by the tools or pcached" % case)
    # salvage
    dst = copy + ".salvaged"
    rc, out, err = snap("salvage", "--json", copy, dst)
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
    # the blocks of the snapshot none of whose value bytes were damaged
    want = {k for k, (v, vpages) in orig.blocks.items() if not (vpages & lost_pages)}
    if not want:
        any_gen = True  # nothing of the last snapshot is left: an older one may be all there is
    for key, (val, _) in got.items():
        if any_gen:
            continue
        if key not in orig.blocks or orig.blocks[key][0] != val:
            fail("%s: salvage produced a block that is not in the original" % case)
            break
    total = sum(records_of(v) for v, _ in orig.blocks.values())
    intact = sum(records_of(orig.blocks[k][0]) for k in want)
    recovered = sum(records_of(v) for v, _ in got.values())
    frac = 100.0 * recovered / intact if intact else 100.0
    print("%s: salvage recovered %d records in %d blocks; %d records in %d intact blocks, "
          "%d in the snapshot" % (case, recovered, len(got), intact, len(want), total),
          flush=True)
    RESULTS.append((case, recovered, intact, total))
    if any_gen:
        return
    missing = want - set(got)
    if missing:
        fail("%s: salvage lost %d of %d undamaged blocks (%.2f%% of their records recovered); "
             "output: %s" % (case, len(missing), len(want), frac, out[-600:]))
    if frac < 99.0:
        fail("%s: salvage recovered %.2f%% of the records of intact blocks, want >= 99%%"
             % (case, frac))


def nodes_of(page):
    """The entries of a branch or leaf page (from its lower bound)."""
    return (u16(page, 12) - 16) // 2


VERDICT = re.compile(r"(store \S+ (?:is damaged|was written by a newer format version|"
                     r"is not a pcache store): .*?)(?:\. Nothing was read or written|\n|$)")


def same_words(case, copy, pcached_log):
    """verify and info classify the store as pcached does, in its words
    (issue 34, F5): the verdict sentence of pcached's refusal is in both."""
    m = VERDICT.search(pcached_log)
    if m is None:
        fail("%s: no verdict sentence in pcached's refusal: %s" % (case, pcached_log[-600:]))
        return
    words = m.group(1)
    for verb in ("verify", "info"):
        rc, out, err = snap(verb, copy)
        if words not in out + err:
            fail("%s: %s does not say what pcached says (%r); it says: %s %s"
                 % (case, verb, words, out[-500:], err[-500:]))


def records_of(block):
    """The record count of a block value (offset 8 in every format version)."""
    return u32(block, 8)


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
        last_leaf = max(pg for pg, k in orig.kind.items() if k == "leaf:blocks")

        def cut(num, den):  # a file size num/den of the original, in whole pages
            return len(orig.data) * num // den // ps * ps

        def after(size):  # the pages a truncation to size bytes loses
            return set(range(size // ps, len(orig.data) // ps + 1))

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
            # one flipped byte at each structural offset of the blocks tree's leaf
            # (issue 34, F6): every block whose value is on overflow pages is intact
            ("flip blocks leaf page number", ("flip", live * ps + 0, 1), True, {live}, False),
            ("flip blocks leaf flags", ("flip", live * ps + 10, 1), True, {live}, False),
            ("flip blocks leaf lower", ("flip", live * ps + 12, 1), True, {live}, False),
            ("flip blocks leaf upper", ("flip", live * ps + 15, 1), True, {live}, False),
            ("flip blocks leaf middle node offset",
             ("flip", live * ps + 16 + 2 * (nodes_of(orig.page(live)) // 2) + 1, 1), True,
             {live}, False),
            ("flip blocks leaf node size", ("flipnode", live, 2), True, {live}, False),
            ("flip blocks leaf node flags", ("flipnode", live, 4), True, {live}, False),
            ("flip blocks leaf key size", ("flipnode", live, 6), True, {live}, False),
            ("flip blocks leaf overflow page number", ("flipnodeval", live, 1), True, {live},
             False),
            ("flip last blocks leaf node offset", ("flip", last_leaf * ps + 17, 1), True,
             {last_leaf}, False),
            ("flip overflow header", ("flip", over * ps + 0, 2), True, {over}, False),
            ("flip overflow payload", ("flip", over * ps + 2000, 4), False, {over}, False),
            ("zero overflow first page", ("zero", over), True, {over}, False),
            # the store header and the collection meta (F5: every tool and pcached
            # call the store damaged, in the same words)
            ("flip store header magic", ("flipat", orig.metas[b"\0store"] + 1), True, set(),
             False),
            ("flip store header version", ("flipat", orig.metas[b"\0store"] + 8), True, set(),
             False),
            ("flip store header boot generation", ("flipat", orig.metas[b"\0store"] + 24), True,
             set(), False),
            ("flip collection meta count", ("flipat", orig.metas[b"c:default"] + 16), False,
             set(), False),
            ("free list names a live page", ("put64", idl_off + 8, live), True, set(), False),
            ("flip free list page header", ("flip", free_leaf * ps + 12, 1), True, set(), False),
            ("zero free list page", ("zero", free_leaf), True, set(), False),
            ("flip main leaf (named db record)", ("flipnode", kinds["main leaf"], 8 + 6 + 40),
             True, set(), False),
            ("zero meta-db leaf", ("zero", kinds["meta-db leaf"]), True, set(), False),
            # a truncation: every block before the cut is intact (F6)
            ("truncate to 75%", ("truncate", cut(3, 4)), True, after(cut(3, 4)), False),
            ("truncate to half", ("truncate", cut(1, 2)), True, after(cut(1, 2)), False),
            ("truncate to one page", ("truncate", ps), True, after(ps), True),
            ("truncate to 100 bytes", ("truncate", 100), True, after(100), True),
            ("zero-length data.mdb", ("truncate", 0), True, after(0), True),
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
                elif op == "flipnodeval":  # a byte of the first node's value (its overflow page)
                    page = orig.page(dmg[1])
                    node = u16(page, 16)
                    at = dmg[1] * ps + node + 8 + u16(page, node + 6) + dmg[2]
                    f.seek(at)
                    b = f.read(1)
                    f.seek(at)
                    f.write(bytes([b[0] ^ 0x41]))
                elif op == "flipat":  # one byte at a file offset
                    f.seek(dmg[1])
                    b = f.read(1)
                    f.seek(dmg[1])
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
        print("salvage, per damaged copy: records recovered / records in intact blocks "
              "(records in the snapshot)")
        for case, got, intact, total in RESULTS:
            if intact:
                print("  %-40s %6d / %6d = %7.2f%%  (%d)"
                      % (case, got, intact, 100.0 * got / intact, total))
            else:
                print("  %-40s %6d / %6d   (%d; no block of the last snapshot is left%s)"
                      % (case, got, intact, total,
                         ": what was recovered is older" if got else ""))
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
