#!/usr/bin/python3
"""Writes src/server/cmd_meta.c: what Redis 7.0 answers to COMMAND INFO and
COMMAND DOCS for every command pcached has, taken from a real redis-server.

    scripts/gen-command-meta.py [--redis-server PATH] [--out FILE]

pcached answers COMMAND, COMMAND INFO/DOCS/LIST/COUNT/GETKEYS/
GETKEYSANDFLAGS as Redis 7.0 does (docs/pcached.md §3.1). The metadata
those replies carry (arity, flags, ACL categories, tips, key specs,
subcommands, summaries, arguments, history) is Redis's description of its
commands: this script starts Debian's redis-server 7.0 on a private
loopback port, asks it with HELLO 3 for each top-level command of pcached's
command tables (the {"NAME", arity, ...} rows of src/server/*.c) and
writes the replies as data, plus the fields COMMAND GETKEYS and COMMAND
LIST FILTERBY read (key specs, ACL categories). Run it again when a command
is added to a table; tests/server/test_command_meta.py compares pcached's
replies with redis-server's and fails on a command the file lacks.

Nothing of Redis's source is read: only what redis-server answers on the
wire. That text is Redis's (BSD 3-Clause): the output carries its notice.
"""
import argparse
import glob
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Redis 7.0's ACL categories, in its order (acl.c, ACLCommandCategories):
# bit i of a command's mask is category i.
ACL_CATEGORIES = ["keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
                  "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
                  "blocking", "dangerous", "connection", "transaction", "scripting"]
# Key-spec flags, bit i = name i (Redis's CMD_KEY_* order).
KEY_FLAGS = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key",
             "incomplete", "variable_flags"]


class Node:
    """One RESP3 value: its type byte and its value (children for aggregates)."""

    def __init__(self, t, v):
        self.t, self.v = t, v


def parse(buf, i=0):
    """(Node, next offset) of the RESP3 value at buf[i:]."""
    t = buf[i:i + 1]
    e = buf.index(b"\r\n", i)
    head = buf[i + 1:e]
    i = e + 2
    if t in (b"+", b"-", b":", b",", b"#", b"_"):
        return Node(t, head), i
    if t in (b"$", b"="):
        n = int(head)
        return Node(t, buf[i:i + n]), i + n + 2
    if t in (b"*", b"~", b"%"):
        n = int(head) * (2 if t == b"%" else 1)
        kids = []
        for _ in range(n):
            k, i = parse(buf, i)
            kids.append(k)
        return Node(t, kids), i
    raise ValueError("unexpected RESP3 type %r" % t)


def ser(n):
    """The RESP3 bytes of a Node (the inverse of parse)."""
    if n.t in (b"+", b"-", b":", b",", b"#", b"_"):
        return n.t + n.v + b"\r\n"
    if n.t in (b"$", b"="):
        return b"%s%d\r\n%s\r\n" % (n.t, len(n.v), n.v)
    count = len(n.v) // 2 if n.t == b"%" else len(n.v)
    return b"%s%d\r\n" % (n.t, count) + b"".join(ser(k) for k in n.v)


def pairs(n):
    assert n.t == b"%"
    return [(n.v[i].v, n.v[i + 1]) for i in range(0, len(n.v), 2)]


class Redis:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def ask(self, *args):
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(req)
        while True:
            try:
                node, end = parse(self.buf)
                raw, self.buf = self.buf[:end], self.buf[end:]
                assert ser(node) == raw, "RESP3 round trip differs"
                return node
            except (ValueError, IndexError):
                chunk = self.s.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("redis-server closed the connection")
                self.buf += chunk


def pcached_commands():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "src", "server", "*.c")):
        with open(path, encoding="utf-8") as f:
            names.update(m.group(1).lower()
                         for m in re.finditer(r'\{"([A-Z_]+)",\s*-?\d+,', f.read()))
    return sorted(names)


def c_bytes(b, indent="    "):
    """b as C string literal lines (octal escapes: no trigraph, no hex run-on)."""
    out, line = [], ""
    for ch in b:
        c = chr(ch)
        piece = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}.get(c)
        if piece is None:
            piece = c if 32 <= ch < 127 and c not in '"\\?' else "\\%03o" % ch
        line += piece
        if len(line) >= 86 or (c == "\n" and len(line) >= 48):
            out.append('%s"%s"' % (indent, line))
            line = ""
    if line or not out:
        out.append('%s"%s"' % (indent, line))
    return "\n".join(out)


def keyspec(n):
    """The C initializer of one key spec (a RESP3 map of COMMAND INFO)."""
    f = dict(pairs(n))
    flags = 0
    for fl in f[b"flags"].v:
        flags |= 1 << KEY_FLAGS.index(fl.v.decode())
    bs, fk = dict(pairs(f[b"begin_search"])), dict(pairs(f[b"find_keys"]))
    bspec, fspec = dict(pairs(bs[b"spec"])), dict(pairs(fk[b"spec"]))
    kw, pos = "NULL", 0
    if bs[b"type"].v == b"index":
        btype, pos = "CMD_BS_INDEX", int(bspec[b"index"].v)
    elif bs[b"type"].v == b"keyword":
        btype, pos = "CMD_BS_KEYWORD", int(bspec[b"startfrom"].v)
        kw = '"%s"' % bspec[b"keyword"].v.decode()
    else:
        btype = "CMD_BS_UNKNOWN"
    if fk[b"type"].v == b"range":
        ftype = "CMD_FK_RANGE"
        a, b, c = (int(fspec[k].v) for k in (b"lastkey", b"keystep", b"limit"))
    elif fk[b"type"].v == b"keynum":
        ftype = "CMD_FK_KEYNUM"
        a, b, c = (int(fspec[k].v) for k in (b"keynumidx", b"firstkey", b"keystep"))
    else:
        ftype, a, b, c = "CMD_FK_UNKNOWN", 0, 0, 0
    return "{0x%x, %s, %s, %d, %s, %d, %d, %d}" % (flags, btype, ftype, pos, kw, a, b, c)


def entries(r, name):
    """[(fullname, info Node, docs Node)] of a command, then its subcommands."""
    info = r.ask("COMMAND", "INFO", name).v[0]
    docs = pairs(r.ask("COMMAND", "DOCS", name))[0][1]
    if info.t == b"_":
        raise SystemExit("redis-server has no command '%s'" % name)
    out = [(name, info, docs)]
    subdocs = dict(pairs(docs)).get(b"subcommands")
    subdocs = dict(pairs(subdocs)) if subdocs is not None else {}
    for sub in sorted(info.v[9].v, key=lambda n: n.v[0].v):
        full = sub.v[0].v
        out.append((full.decode(), sub, subdocs[full]))
    return out


def emit(r, names, out):
    rows, specs = [], []
    for name in names:
        ents = entries(r, name)
        for k, (full, info, docs) in enumerate(ents):
            fields = info.v[:9]  # name .. key specs; subcommands are composed
            acl = 0
            for cat in fields[6].v:
                acl |= 1 << ACL_CATEGORIES.index(cat.v.decode().lstrip("@"))
            flags = [f.v.decode() for f in fields[2].v]
            ks = "NULL"
            if fields[8].v:
                ks = "ks_%d" % len(specs)
                specs.append("static const cmd_keyspec %s[] = {\n%s,\n};" % (
                    ks, ",\n".join("    " + keyspec(s) for s in fields[8].v)))
            dp = [(key, val) for key, val in pairs(docs) if key != b"subcommands"]
            docs_bytes = b"".join(ser(Node(b"$", key)) + ser(val) for key, val in dp)
            info_bytes = b"".join(ser(f) for f in fields)
            rows.append("    {\"%s\", %d, 0x%x, %s, %d, %d, %s,\n%s,\n     %d,\n%s,\n     %d, %d}" % (
                full, int(fields[1].v), acl,
                "CMD_META_NO_MANDATORY_KEYS" if "no_mandatory_keys" in flags else "0",
                len(ents) - 1 if k == 0 else 0, len(fields[8].v), ks,
                c_bytes(info_bytes, "     "), len(info_bytes), c_bytes(docs_bytes, "     "),
                len(docs_bytes), len(dp)))
    version = dict(pairs(r.ask("HELLO", "3")))[b"version"].v.decode()
    with open(out, "w", encoding="utf-8") as f:
        f.write("""/*
 * cmd_meta.c - GENERATED by scripts/gen-command-meta.py from what
 * redis-server %s answers to COMMAND INFO and COMMAND DOCS (HELLO 3) for
 * the commands of pcached's tables. Do not edit: run the script again.
 *
 * The text is Redis's description of its commands, under Redis 7.0's
 * license:
 *
 * Copyright (c) 2006-2020, Salvatore Sanfilippo
 * All rights reserved.
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions are met:
 *
 *   * Redistributions of source code must retain the above copyright notice,
 *     this list of conditions and the following disclaimer.
 *   * Redistributions in binary form must reproduce the above copyright
 *     notice, this list of conditions and the following disclaimer in the
 *     documentation and/or other materials provided with the distribution.
 *   * Neither the name of Redis nor the names of its contributors may be used
 *     to endorse or promote products derived from this software without
 *     specific prior written permission.
 *
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
 * AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
 * ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT OWNER OR CONTRIBUTORS BE
 * LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR
 * CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF
 * SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS
 * INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN
 * CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE)
 * ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE
 * POSSIBILITY OF SUCH DAMAGE.
 */
#include "cmd_meta.h"

#include <stddef.h>

const char *const cmd_acl_names[] = {%s};
const unsigned cmd_acl_count = %d;

%s

const cmd_meta cmd_meta_table[] = {
%s,
};
const unsigned cmd_meta_count = sizeof cmd_meta_table / sizeof cmd_meta_table[0];
""" % (version, ", ".join('"%s"' % c for c in ACL_CATEGORIES), len(ACL_CATEGORIES),
            "\n".join(specs), ",\n".join(rows)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis-server", default="/usr/bin/redis-server")
    ap.add_argument("--out", default=os.path.join(ROOT, "src", "server", "cmd_meta.c"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gen-meta-") as tmp:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        proc = subprocess.Popen([a.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no", "--dir", tmp],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = None
            for _ in range(200):
                try:
                    r = Redis(port)
                    break
                except OSError:
                    time.sleep(0.05)
            if r is None:
                raise SystemExit("redis-server did not start")
            r.ask("HELLO", "3")
            emit(r, pcached_commands(), a.out)
            if subprocess.call(["clang-format", "-i", a.out]) != 0:
                print("clang-format failed (or is missing): the file is not formatted")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
