#!/usr/bin/python3
"""Writes the hand-made seed corpora of the fuzz targets (docs/fuzzing.md).

Usage: seeds.py [TARGET...]   (default: every target)

Each corpus/<target>/ gets small valid inputs and edge cases, named
seed-<what>. Checksummed formats (store, journal) are built with the
system's libxxhash and libzstd through ctypes, so the valid seeds really
are valid. Inputs the fuzzer found are added by scripts/fuzz.sh --merge;
this script leaves files not named seed-* alone.
"""
import ctypes
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_xx = ctypes.CDLL("libxxhash.so.0")
_xx.XXH3_64bits.restype = ctypes.c_uint64
_xx.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_zs = ctypes.CDLL("libzstd.so.1")
_zs.ZSTD_compress.restype = ctypes.c_size_t
_zs.ZSTD_compress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                              ctypes.c_int]


def xxh3(b):
    return _xx.XXH3_64bits(bytes(b), len(b))


def zstd(b):
    out = ctypes.create_string_buffer(len(b) + 1024)
    n = _zs.ZSTD_compress(out, len(out), bytes(b), len(b), 3)
    return out.raw[:n]


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- resp -------------------------------------------------------------------
def mb(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def resp():
    w = lambda n, d: write("resp", n, d)
    w("ping-mb", mb("PING"))
    w("set-get", mb("SET", "key", "value") + mb("GET", "key"))
    w("set-ex", mb("SET", "k", "v", "EX", "100"))
    w("inline", "PING\r\nECHO hello world\r\n")
    w("inline-lf", "PING\nGET  k\n\n")
    w("inline-quotes", 'SET "a b" \'c\\x41\'\r\n')
    w("empty-mb", "*0\r\n*-1\r\n*1\r\n$0\r\n\r\n")
    w("too-many-args", b"*9\r\n" + b"$1\r\na\r\n" * 9 + mb("PING"))
    w("bulk-too-long", mb("SET", "x" * 65) + mb("PING"))
    w("request-too-big", mb("SET", "x" * 60, "y" * 60) * 2 + mb("SET", *(["z" * 60] * 8)))
    w("bad-mb-len", "*abc\r\n")
    w("neg-bulk", "*1\r\n$-2\r\n")
    w("not-dollar", "*1\r\n:5\r\n")
    w("no-crlf", "*1\r\n$2\r\nabX\r\n")
    w("huge-mb", "*99999999999999999999999999999999999\r\n")
    w("mb-2m", "*2000000\r\n")
    w("inline-long", "a" * 300)
    w("partial-bulk", "*2\r\n$3\r\nGET\r\n$10\r\nabc")
    w("partial-header", "*2\r\n$3\r")
    w("nul-in-bulk", b"*2\r\n$4\r\nECHO\r\n$3\r\na\x00b\r\n")
    w("mixed", mb("MSET", "a", "1", "b", "2") + b"INFO\r\n" + mb("DEL", "a", "b"))
    w("bare-cr", "PING\rPING\r\n")
    w("plus-sign", "*+1\r\n$+4\r\nPING\r\n")
    w("leading-zero", "*01\r\n$04\r\nPING\r\n")
    w("star-only", "*\r\n")
    w("dollar-empty", "*1\r\n$\r\n")


# ---- glob: byte 0 is the pattern length ---------------------------------------
def glob():
    cases = [("*", "anything"), ("a*b", "axxb"), ("?", "x"), ("[abc]", "b"), ("[!abc]", "d"),
             ("[^a-z]", "Q"), ("[z-a]", "m"), ("[]]", "]"), ("[]-]", "-"), ("\\*", "*"),
             ("a\\", "a\\"), ("[abc", "[abc"), ("[a-", "[a-"), ("*[", "x["), ("[\\]]", "]"),
             ("[a\\-z]", "-"), ("h?llo*w[oa]rld", "hello big world"), ("**a**", "bab"),
             ("*a*a*a*a*b", "a" * 40), ("user:*:session", "user:42:session"),
             ("", ""), ("", "x"), ("[!]", "!"), ("[a-\\]]", "]"), ("\\", ""),
             ("sip:*@example.com", "sip:alice@example.com")]
    for i, (p, s) in enumerate(cases):
        write("glob", "%02d" % i, bytes([len(p)]) + p.encode() + s.encode())
    write("glob", "nul-bytes", bytes([3]) + b"a\x00*" + b"a\x00bc")


# ---- redis_glob: byte 0 is the pattern length, Redis's lenient globs -----------
def redis_glob():
    cases = [("[", "["), ("[^]", "x"), ("a\\", "a\\"), ("[!x]", "x"), ("[^x", "["),
             ("[abc", "b"), ("[z-a]", "m"), ("[x-]", "-"), ("\\[", "["), ("**x", "x"),
             ("*", ""), ("x*", "x"), ("a*b*c", "aXbYc"), ("*a*a*a*a*b", "a" * 40),
             ("[\\]]", "]"), ("[\xff-\x01]", "\x80"), ("TIME*", "timeout")]
    for i, (p, s) in enumerate(cases):
        pb, sb = p.encode("latin-1"), s.encode("latin-1")
        write("redis_glob", "%02d" % i, bytes([len(pb)]) + pb + sb)


# ---- store ------------------------------------------------------------------
def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def rec(key, val, flags=0, stamp=1, expires=0, klen_raw=None):
    body = bytes([flags]) + struct.pack("<IQ", stamp, expires)
    body += (klen_raw if klen_raw is not None else varint(len(key))) + varint(len(val)) + key + val
    return struct.pack("<I", xxh3(body) & 0xFFFFFFFF) + body


def order(key):
    h = xxh3(key)
    return int("{:064b}".format(h)[::-1], 2)


def block(recs, codec, keys, count=None, version=1, gen=1, name=b"default"):
    """A block value (docs/snapshot-format.md §5.1); version 2 appends the
    generation and the collection name."""
    raw = b"".join(recs)
    payload = zstd(raw) if codec == 1 else raw
    first, last = order(keys[0]), order(keys[-1])
    if first > last:
        first, last = last, first
    h = b"PCBK" + struct.pack("<HBBIIII", version, codec, 0, count or len(recs), len(raw),
                              len(payload), 0)
    h += struct.pack("<QQQQ", first, last, xxh3(payload), xxh3(raw))
    h += struct.pack("<Q", xxh3(h))
    if version >= 2:
        h += struct.pack("<Q", gen) + name.ljust(64, b"\x00")
        h += struct.pack("<Q", xxh3(h))
    return h + payload


def store():
    w = lambda n, d: write("store", n, d)
    hdr = b"PCSTORE\x00" + struct.pack("<IIqQQ", 1, 0, 1764489600000, 3, 0)
    w("store-header", hdr + struct.pack("<Q", xxh3(hdr)))
    v2 = b"PCSTORE\x00" + struct.pack("<IIqQQ", 2, 0, 1764489600000, 3, 0)
    w("store-header-v2", v2 + struct.pack("<Q", xxh3(v2)))
    newer = b"PCSTORE\x00" + struct.pack("<IIqQQ", 3, 0, 0, 0, 0)
    w("store-header-v3", newer + struct.pack("<Q", xxh3(newer)))
    meta = b"PCCM" + struct.pack("<IQQQQQQQQqQQQI", 1, 1, 2, 1, 54, 118, 9, 11, xxh3(b""),
                                 1764489600000, 3, 5, 1200, 0) + b"\x00" * 12
    w("meta", meta + struct.pack("<Q", xxh3(meta)))
    meta2 = bytearray(meta)
    meta2[104:108] = struct.pack("<I", 7)  # a dictionary: a newer format
    w("meta-dict", bytes(meta2) + struct.pack("<Q", xxh3(bytes(meta2))))
    r1 = rec(b"alpha", b"one", stamp=6, expires=1764489600000)
    r2 = rec(b"hits", struct.pack("<q", -42), flags=1, stamp=2)
    r3 = rec(b"", b"")
    w("rec-alpha", r1)
    w("rec-counter", r2)
    w("recs", r1 + r2 + r3)
    w("rec-nonminimal-varint", rec(b"k", b"v", klen_raw=b"\x81\x00"))
    w("rec-bad-flags", rec(b"k", b"v", flags=2))
    w("rec-counter-short", rec(b"c", b"1234", flags=1))
    w("rec-varint-6", bytes(17) + b"\xff\xff\xff\xff\xff\x01\x00")
    keys = [b"alpha", b"hits", b""]
    w("block-stored", block([r1, r2, r3], 0, keys))
    w("block-zstd", block([r1, r2, r3], 1, keys))
    big = [rec(b"key%03d" % i, b"value" * 20) for i in range(20)]
    w("block-zstd-20", block(big, 1, [b"key000", b"key019"]))
    w("block-count-too-big", block([r1], 0, [b"alpha"], count=5))
    b2 = bytearray(block([r1, r2], 0, [b"alpha", b"hits"]))
    b2[70] ^= 0xFF  # a payload byte: payload and raw checksums fail
    w("block-payload-flip", bytes(b2))
    w("block-header-only", b"PCBK" + bytes(60))
    # format version 2: the generation and the collection name in the header
    w("block-v2-stored", block([r1, r2, r3], 0, keys, version=2, gen=7))
    w("block-v2-zstd", block(big, 1, [b"key000", b"key019"], version=2, gen=2, name=b"sip.reg-1"))
    b3 = bytearray(block([r1], 0, [b"alpha"], version=2))
    b3[72] = ord("!")  # a name that is no collection name (the extension's sum repaired)
    b3[136:144] = struct.pack("<Q", xxh3(bytes(b3[:136])))
    w("block-v2-bad-name", bytes(b3))


# ---- journal ----------------------------------------------------------------
def jhdr(coll=b"default", pid=4242, epoch=0x0000000300000001, boot=3, created=1700000000123,
         version=1):
    h = bytes([0x89]) + b"PCJNL\r\n" + struct.pack("<HHIQQqB", version, 128, pid, epoch, boot,
                                                   created, len(coll)) + coll
    h += bytes(120 - len(h))
    return h + struct.pack("<Q", xxh3(h))


def jrec(op, key, val=b"", flags=0, stamp=1, expires=0):
    size = 40 + len(key) + len(val)
    b = bytes([0x93]) + b"JRN" + struct.pack("<IBBHIIIq", size, op, flags, len(key), len(val),
                                             stamp, 0, expires) + key + val
    return b + struct.pack("<Q", xxh3(b))


def journal():
    w = lambda n, d: write("journal", n, d)
    h = jhdr()
    s = jrec(1, b"alpha", b"one", expires=1764489600000)
    c = jrec(2, b"hits", struct.pack("<q", 7))
    d = jrec(3, b"alpha")
    e = jrec(4, b"hits", expires=5)
    st = jrec(1, b"k", b"v", flags=1)
    w("header", h)
    w("header-v2", jhdr(version=2))
    w("header-short", h[:100])
    w("segment", h + s + c + d + e + st)
    w("torn-tail", h + s + c[:30])
    corrupt = bytearray(h + s + c + d)
    corrupt[128 + len(s) + 35] ^= 1
    w("corrupt-middle", bytes(corrupt))
    w("garbage-then-record", h + b"\x93JRN" + b"\x00" * 20 + s)
    w("record", s)
    w("record-counter", c)
    w("record-bad-op", jrec(9, b"k"))
    w("record-del-expiry", jrec(3, b"k", expires=1))
    w("record-size-lie", bytes([0x93]) + b"JRN" + struct.pack("<I", 0xFFFFFFFF) + bytes(32))
    w("segment-name", "default.0000000300000001.4242.wal")
    w("segment-name-dash", "th.00000000000000ff.77-2.wal")
    w("segment-name-bad", "x..wal")


# ---- sync_wire ----------------------------------------------------------------
def notice(coll, src, gen, magic=0x50435359, ver=1, flags=0, clen=None, slen=None):
    return struct.pack(">IBBBBQ", magic, ver, flags, len(coll) if clen is None else clen,
                       len(src) if slen is None else slen, gen) + coll + src


def sync_wire():
    w = lambda n, d: write("sync_wire", n, d)
    w("ok", notice(b"default", b"node-a", 42))
    w("no-source", notice(b"th", b"", 1))
    w("max-names", notice(b"c" * 63, b"s" * 63, 2**64 - 1))
    w("gen-0", notice(b"x", b"", 0))
    w("bad-magic", notice(b"x", b"", 1, magic=0))
    w("version-2", notice(b"x", b"", 1, ver=2))
    w("flags", notice(b"x", b"", 1, flags=1))
    w("len-64", notice(b"c" * 64, b"", 1))
    w("len-mismatch", notice(b"abc", b"", 1, clen=2))
    w("trailing", notice(b"abc", b"", 1) + b"!")
    w("space-in-name", notice(b"a b", b"", 1))
    w("short", notice(b"x", b"", 1)[:10])
    w("empty-coll", notice(b"", b"src", 1))


# ---- jsonrpc: an HTTP request, or a bare body ---------------------------------
def http(body, headers=None, method="POST"):
    b = body.encode() if isinstance(body, str) else body
    hs = headers if headers is not None else ["Host: x", "Content-Length: %d" % len(b)]
    return ("%s / HTTP/1.1\r\n" % method + "".join(h + "\r\n" for h in hs) + "\r\n").encode() + b


def jsonrpc():
    w = lambda n, d: write("jsonrpc", n, d)
    stats = '{"jsonrpc":"2.0","method":"perf_stats","params":{"collection":"th"},"id":1}'
    w("stats", http(stats))
    w("positional", http('{"jsonrpc":"2.0","method":"perf_get","params":["default","k"],"id":"a"}'))
    w("notification", http('{"jsonrpc":"2.0","method":"perf_list"}'))
    w("escapes", http('{"jsonrpc":"2.0","method":"perf_set","params":{"key":"a\\u0000b\\n\\ud83d\\ude00",'
                      '"value":"\\u00ff\\"\\\\\\/"},"id":null}'))
    w("scalars", http('{"jsonrpc":"2.0","method":"m","params":[1,-2.5e3,true,false,null],"id":7}'))
    w("batch", http('[{"jsonrpc":"2.0","method":"perf_list","id":1}]'))
    w("nested-id", http('{"jsonrpc":"2.0","method":"m","id":{"a":[1,2,{"b":null}]}}'))
    w("deep", http('{"x":' + "[" * 40 + "]" * 40 + "}"))
    w("many-params", http('{"jsonrpc":"2.0","method":"m","params":[' + ",".join(["1"] * 40) + "],\"id\":1}"))
    w("dup-length", http(stats, ["Content-Length: 5", "Content-Length: %d" % len(stats)]))
    w("no-length", http(stats, ["Host: x"]))
    w("bad-length", http(stats, ["Content-Length: 12x"]))
    w("neg-length", http(stats, ["Content-Length: -1"]))
    w("huge-length", http(stats, ["content-length: 99999999999"]))
    w("get", http("", method="GET"))
    w("short-body", http(stats, ["Content-Length: %d" % (len(stats) + 10)]))
    w("head-only", b"POST / HTTP/1.1\r\nContent-Length: 0\r\n")
    w("empty-object", http("{}"))
    w("trailing", http(stats + " x"))
    w("bare-body", stats)
    w("bare-bad-surrogate", '{"method":"\\udc00"}')
    w("bare-unterminated", '{"method":"perf')
    w("bare-version", '{"jsonrpc":2.0,"method":"m"}')
    w("bare-long-method", '{"jsonrpc":"2.0","method":"' + "m" * 80 + '"}')
    w("nul-in-head", b"POST / HTTP/1.1\r\n\x00Content-Length: 2\r\n\r\n{}")


# ---- config: a file, or a command line ("--" first, NUL-separated) -------------
def config():
    w = lambda n, d: write("config", n, d)
    w("shipped", open(os.path.join(HERE, "..", "..", "src", "server", "pcached.conf"), "rb").read())
    w("basic", "# a comment\n; another\n\nport = 6390\nworkers = 4\nbind = 127.0.0.1\n")
    w("collections", "collections = default;th=16;grp=4\nselect_collections = th,default\n")
    w("persist", "db_url = lmdb:///var/lib/pcache\ndb_mode = 2\njournal = th=always;default=everysec\n"
                 "snapshot_period_s = 60\npersist_collections = th\n")
    w("sync", "db_url = odbc://pcache\nnode_id = node-a\nsync_peers = 10.0.0.2:7000, 10.0.0.3:7000\n"
              "sync_port = 7000\n")
    w("bad-peer", "sync_peers = 10.0.0.2\n")
    w("peer-port-0", "sync_peers = 10.0.0.2:0\n")
    w("crlf", "port = 1\r\nmaxclients = 10\r\n")
    w("blanks", "  \t port\t=\t  7  \t\n")
    w("unknown", "no_such_key = 1\n")
    w("twice", "port = 1\nport = 2\n")
    w("section", "[server]\nport = 1\n")
    w("no-equals", "port 6380\n")
    w("range", "workers = 65\n")
    w("not-number", "port = 12ab\n")
    w("huge-number", "port = 99999999999999999999999\n")
    w("negative", "port = -1\n")
    w("log-level", "log_level = debug\nlog_level2 = x\n")
    w("bad-log-level", "log_level = loud\n")
    w("too-long", "requirepass = " + "p" * 300 + "\n")
    w("long-line", "# " + "x" * 4100 + "\n")
    w("nul-byte", b"port = 1\x00garbage\nworkers = 2\n")
    w("empty-value", "requirepass =\nbind = \n")
    w("equals-in-value", "requirepass = a=b=c\n")
    w("http-same-port", "port = 7000\nhttp_port = 7000\n")
    w("node-id-space", "node_id = a b\n")
    w("no-newline", "port = 5")
    w("cmd-basic", b"--port=6390\x00--workers\x004\x00--bind=0.0.0.0")
    w("cmd-missing-value", b"--port")
    w("cmd-unknown", b"--nope=1")
    w("cmd-long-name", b"--" + b"k" * 200 + b"=1")
    w("cmd-empty-key", b"--=5")
    w("cmd-peers", b"--sync_peers=1.2.3.4:5,6.7.8.9:10\x00--db_url\x00/tmp/x\x00--db_mode=1")


# ---- url ------------------------------------------------------------------------
def url():
    w = lambda n, d: write("url", n, d)
    for i, u in enumerate(["perf://", "perf:///th", "perf://th", "perf:g1:///th", "perf:g1://th",
                           "perf:g1://", "perf:///grp", "perf:th:///grp", "perf:///default",
                           "perf:///nosuch", "perf:///th/r", "perf:" + "g" * 64 + ":///th",
                           "perf:///" + "c" * 70, "perf:////th", "perf:a:b:///th", "perf:///a.b-c_d",
                           "perf:/th", "PERF:///th", "perf:///th?x", "perf:///t h"]):
        w("perf-%02d" % i, u)
    for i, u in enumerate(["lmdb:///tmp/pcache-fuzz-none", "lmdb://host/path", "lmdb:relative",
                           "lmdb:///", "lmdb:////", "lmdb:///" + "d" * 4100, "lmdb://",
                           "lmdb:///tmp/x/../y/"]):
        w("lmdb-%02d" % i, u)
    for i, u in enumerate(["odbc://pcache", "odbc:DSN=pc;UID=u;PWD=secret", "DSN=pc;PASSWORD=s3cr3t;",
                           "DRIVER={MariaDB};SERVER=h;PWD={a;b}}c};UID=x", "odbc:", "dsn=x;pwd =p",
                           "odbc:;;; PWD=x;;", "DRIVER=x;PWD", "odbc://a;b", "x://y"]):
        w("odbc-%02d" % i, u)


TARGETS = {"resp": resp, "jsonrpc": jsonrpc, "config": config, "url": url, "glob": glob, "redis_glob": redis_glob, "store": store, "journal": journal,
           "sync_wire": sync_wire}

if __name__ == "__main__":
    for t in sys.argv[1:] or sorted(TARGETS):
        TARGETS[t]()
