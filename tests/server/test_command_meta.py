"""COMMAND and its subcommands, pcached against a real redis-server 7.0.

Starts Debian's redis-server (private loopback port) and pcached, and for
every command pcached lists (COMMAND LIST), in RESP2 and in RESP3, compares
COMMAND INFO and COMMAND DOCS of the command and of each of its
subcommands byte for byte with redis-server's. Redis orders a command's
subcommands by its hash table, which changes from one start to the next,
so a reply that holds subcommands is compared parsed, with them sorted; a
reply without any is compared as bytes. Then COMMAND (all entries), COMMAND
LIST with each FILTERBY (pcached's answer is Redis's, less the commands
pcached does not have), COMMAND GETKEYS and GETKEYSANDFLAGS over a corpus
of full commands, COMMAND COUNT, COMMAND HELP and the error shapes.

A failure naming a command the table lacks means src/server/cmd_meta.c is
older than the command tables: run scripts/gen-command-meta.py.
SKIPPED (77) without /usr/bin/redis-server.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcached_harness import Server, free_port, resp_cmd  # noqa: E402

REDIS = "/usr/bin/redis-server"


def parse(buf, i=0):
    """(value, next offset) of the RESP2/3 reply at buf[i:]; raises
    IndexError when incomplete. A value is (type byte, payload); aggregates
    hold a list, a map a list of (key, value) pairs."""
    if i >= len(buf):
        raise IndexError
    t = buf[i:i + 1]
    e = buf.index(b"\r\n", i)
    head = buf[i + 1:e]
    i = e + 2
    if t in (b"$", b"="):
        n = int(head)
        if n < 0:
            return (t, None), i
        if len(buf) < i + n + 2:
            raise IndexError
        return (t, buf[i:i + n]), i + n + 2
    if t in (b"*", b"~", b"%"):
        n = int(head)
        if n < 0:
            return (t, None), i
        items = []
        for _ in range(n * 2 if t == b"%" else n):
            v, i = parse(buf, i)
            items.append(v)
        if t == b"%":
            items = [(items[k], items[k + 1]) for k in range(0, len(items), 2)]
        return (t, items), i
    return (t, head), i


class Peer:
    def __init__(self, port, proto):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        if proto == 3:
            self.ask("HELLO", "3")

    def ask(self, *args):
        """(raw bytes, parsed value) of one command's reply."""
        self.s.sendall(resp_cmd(*args))
        while True:
            try:
                v, end = parse(self.buf)
                raw, self.buf = self.buf[:end], self.buf[end:]
                return raw, v
            except (IndexError, ValueError):
                chunk = self.s.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("connection closed")
                self.buf += chunk

    def close(self):
        self.s.close()


def text(v):
    return v[1].decode() if v[1] is not None else None


def norm(v):
    """A parsed reply with every list of subcommands sorted (their order is
    Redis's hash order). An INFO entry is a 10-element array whose last
    element lists its subcommands' entries; a doc map has "subcommands"."""
    t, p = v
    if t == b"%":
        return (t, [(norm(k), norm(x)) for k, x in p])
    if t in (b"*", b"~") and p is not None:
        items = [norm(x) for x in p]
        if len(items) == 10 and items[0][0] == b"$" and items[9][0] in (b"*", b"~"):
            subs = sorted(items[9][1], key=repr)
            items[9] = (items[9][0], subs)
        return (t, items)
    return v


def docs_norm(v, proto):
    """COMMAND DOCS: name -> doc map, as a dict, subcommands likewise."""
    if proto == 3:
        pairs = v[1]
    else:
        pairs = [(v[1][k], v[1][k + 1]) for k in range(0, len(v[1]), 2)]
    out = {}
    for k, d in pairs:
        if proto == 3:
            fields = d[1]
        else:
            fields = [(d[1][k2], d[1][k2 + 1]) for k2 in range(0, len(d[1]), 2)]
        fd = {}
        for fk, fv in fields:
            if text(fk) == "subcommands":
                fv = docs_norm(fv, proto)
            fd[text(fk)] = fv
        out[text(k)] = (d[0], len(fields), fd)
    return out


class CommandMeta(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="command-meta-")
        cls.rport = free_port()
        cls.redis = subprocess.Popen([REDIS, "--port", str(cls.rport), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", cls.tmp.name],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", cls.rport), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        cls.pc = Server(workers=1).start()
        p = Peer(cls.pc.port, 2)
        names = [text(x) for x in p.ask("COMMAND", "LIST")[1][1]]
        p.close()
        cls.names = names
        cls.top = [n for n in names if "|" not in n]

    @classmethod
    def tearDownClass(cls):
        cls.pc.cleanup()
        cls.redis.terminate()
        cls.redis.wait(timeout=10)
        cls.tmp.cleanup()

    def peers(self, proto):
        return Peer(self.rport, proto), Peer(self.pc.port, proto)

    def same_bytes(self, r, p, *args):
        theirs, ours = r.ask(*args)[0], p.ask(*args)[0]
        self.assertEqual(ours, theirs, "%r" % (args,))
        return ours

    def test_info_of_every_command(self):
        self.assertGreater(len(self.top), 70)
        for proto in (2, 3):
            r, p = self.peers(proto)
            for name in self.names:
                theirs, ours = r.ask("COMMAND", "INFO", name), p.ask("COMMAND", "INFO", name)
                if "|" in name or theirs[0].count(b"|") == 0:
                    self.assertEqual(ours[0], theirs[0], "RESP%d COMMAND INFO %s" % (proto, name))
                else:
                    self.assertEqual(norm(ours[1]), norm(theirs[1]),
                                     "RESP%d COMMAND INFO %s" % (proto, name))
            r.close()
            p.close()

    def test_docs_of_every_command(self):
        for proto in (2, 3):
            r, p = self.peers(proto)
            for name in self.names:
                theirs, ours = r.ask("COMMAND", "DOCS", name), p.ask("COMMAND", "DOCS", name)
                if b"subcommands" not in theirs[0]:
                    self.assertEqual(ours[0], theirs[0], "RESP%d COMMAND DOCS %s" % (proto, name))
                else:
                    self.assertEqual(docs_norm(ours[1], proto), docs_norm(theirs[1], proto),
                                     "RESP%d COMMAND DOCS %s" % (proto, name))
            r.close()
            p.close()

    def test_all_entries(self):
        """COMMAND, COMMAND INFO and COMMAND DOCS without names: every
        command pcached has, each as Redis describes it."""
        for proto in (2, 3):
            r, p = self.peers(proto)
            for args in (("COMMAND",), ("COMMAND", "INFO")):
                ours = [norm(e) for e in p.ask(*args)[1][1]]
                theirs = {text(e[1][0]): e for e in (norm(x) for x in r.ask(*args)[1][1])}
                self.assertEqual(sorted(text(e[1][0]) for e in ours), sorted(self.top))
                for e in ours:
                    self.assertEqual(e, theirs[text(e[1][0])], "%r %s" % (args, text(e[1][0])))
            ours = docs_norm(p.ask("COMMAND", "DOCS")[1], proto)
            theirs = docs_norm(r.ask("COMMAND", "DOCS")[1], proto)
            self.assertEqual(sorted(ours), sorted(self.top))
            for name, d in ours.items():
                self.assertEqual(d, theirs[name], "COMMAND DOCS: %s" % name)
            r.close()
            p.close()

    def test_info_and_docs_edge_names(self):
        for proto in (2, 3):
            r, p = self.peers(proto)
            for name in ("nosuchcommand", "get|key", "config|get|key", "client|", "|list",
                         "CLIENT|LIST", "Get", "client|nosuch", ""):
                self.same_bytes(r, p, "COMMAND", "INFO", name)
                self.same_bytes(r, p, "COMMAND", "DOCS", name)
            self.same_bytes(r, p, "COMMAND", "INFO", "get", "nosuch", "set")
            self.same_bytes(r, p, "COMMAND", "DOCS", "get", "nosuch", "incr")
            r.close()
            p.close()

    def test_list_filters(self):
        r, p = self.peers(2)
        theirs = set(text(x) for x in r.ask("COMMAND", "LIST")[1][1])
        self.assertTrue(set(self.names) <= theirs, set(self.names) - theirs)
        self.assertIn("client|list", self.names)
        filters = [("PATTERN", "set"), ("pattern", "config*"), ("PATTERN", "config|*re*"),
                   ("PATTERN", "cl*help"), ("PATTERN", "non_exists*"), ("PATTERN", "*"),
                   ("PATTERN", "G?T"), ("ACLCAT", "scripting"), ("aclcat", "STRING"),
                   ("ACLCAT", "keyspace"), ("ACLCAT", "connection"), ("ACLCAT", "fast"),
                   ("ACLCAT", "non_existing_category"), ("MODULE", "non_existing_module")]
        for kind, arg in filters:
            want = set(text(x) for x in r.ask("COMMAND", "LIST", "FILTERBY", kind, arg)[1][1])
            got = [text(x) for x in p.ask("COMMAND", "LIST", "FILTERBY", kind, arg)[1][1]]
            self.assertEqual(len(got), len(set(got)), "duplicates for %s %s" % (kind, arg))
            self.assertEqual(set(got), want & set(self.names), "FILTERBY %s %s" % (kind, arg))
        self.assertEqual(set(text(x) for x in p.ask("COMMAND", "LIST", "FILTERBY", "PATTERN",
                                                    "set")[1][1]), {"set"})
        for bad in (("bad_arg",), ("filterby", "bad_arg"), ("filterby", "bad_arg", "bad_arg2"),
                    ("FILTERBY", "PATTERN"), ("FILTERBY", "PATTERN", "a", "b"),
                    ("FILTERBY", "PATTERN", "a", "FILTERBY", "ACLCAT", "read")):
            self.same_bytes(r, p, "COMMAND", "LIST", *bad)
        r.close()
        p.close()

    def test_getkeys(self):
        corpus = [
            ("get", "key"), ("set", "k1", "v1"), ("set", "k1", "v1", "GET"),
            ("set", "k1", "v1", "EX", "10", "get"), ("mset", "k1", "v1", "k2", "v2"),
            ("mget", "a", "b", "c"), ("del", "a", "b"), ("exists", "a"),
            ("memory", "usage", "key"), ("memory", "usage", "key", "SAMPLES", "5"),
            ("object", "encoding", "k"), ("lcs", "key1", "key2"), ("lcs", "a", "b", "LEN"),
            ("rename", "a", "b"), ("renamenx", "a", "b"), ("copy", "a", "b"),
            ("copy", "a", "b", "DB", "1", "REPLACE"), ("move", "a", "1"),
            ("eval", "return 1", "1", "key"), ("eval", "return 1", "0"),
            ("eval", "return 1", "2", "a", "b", "c"), ("eval", "return 1", "3", "a"),
            ("eval", "return 1", "x", "a"), ("eval", "return 1", "-1"),
            ("eval", "return 1", "1abc", "a"), ("evalsha", "abc", "1", "k"),
            ("eval_ro", "s", "1", "k"), ("fcall", "f", "2", "a", "b"), ("fcall_ro", "f", "0"),
            ("getex", "k", "PERSIST"), ("getdel", "k"), ("append", "k", "v"),
            ("expire", "k", "10"), ("touch", "a", "b"), ("unlink", "x"), ("watch", "a", "b"),
            ("msetnx", "a", "1", "b", "2"), ("incrbyfloat", "k", "1.5"), ("strlen", "k"),
            ("getrange", "k", "0", "1"), ("setrange", "k", "0", "x"), ("substr", "k", "0", "1"),
            ("pexpiretime", "k"), ("type", "k"), ("ttl", "k"), ("persist", "k"),
            # no key arguments, an unknown command, wrong arity, invalid arguments
            ("ping",), ("client", "list"), ("client",), ("memory",), ("memory", "nosuch", "k"),
            ("nosuchcommand", "a"), ("get",), ("get", "a", "b"), ("mset", "k1"),
            ("mset", "k1", "v1", "k2"), ("client|list",), ("config", "get", "x"), ("keys", "*"),
            ("scan", "0"), ("swapdb", "0", "1"), ("flushdb",), ("select", "1"), ("GET", "KEY"),
        ]
        for proto in (2, 3):
            r, p = self.peers(proto)
            for full in corpus:
                for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
                    self.same_bytes(r, p, "COMMAND", sub, *full)
            big = ["key%d" % i for i in range(1, 261)]
            self.same_bytes(r, p, "COMMAND", "GETKEYS", "mget", *big)
            self.same_bytes(r, p, "COMMAND", "GETKEYS", "eval", "s", "260", *big)
            r.close()
            p.close()

    def test_count_help_errors(self):
        r, p = self.peers(2)
        self.assertEqual(p.ask("COMMAND", "COUNT")[1], (b":", str(len(self.top)).encode()))
        for args in (("COMMAND", "HELP"), ("COMMAND", "help"), ("COMMAND", "NOSUCH"),
                     ("COMMAND", "COUNT", "x"), ("COMMAND", "GETKEYS"),
                     ("COMMAND", "GETKEYSANDFLAGS"), ("COMMAND", "HELP", "x"),
                     ("COMMAND", "LIST", "FILTERBY"), ("command", "getkeys", "get")):
            self.same_bytes(r, p, *args)
        r.close()
        p.close()


if __name__ == "__main__":
    if not os.access(REDIS, os.X_OK):
        print("SKIPPED: no redis-server (Debian package redis-server)")
        sys.exit(77)
    unittest.main(verbosity=2)
