#!/usr/bin/python3
"""End-to-end test of the OpenSIPS module cachedb_perf against a real OpenSIPS.

Starts OpenSIPS on 127.0.0.1 with a script that drives the cache from real
SIP requests (a small UDP SIP client below: each OPTIONS carries an X-Op
header naming the operation and the route answers 200 with an X-Res header),
calls every MI command over mi_http (JSON-RPC) and checks the replies,
checks the events (event_route counters), the statistics, the shutdown save
(db_mode 2) and the startup load after a restart, and that a bad collection
URL or a bad db_url fails startup with a clear message. Then eviction: a
collection that evicts (allkeys-s3fifo) under a small maxmemory, filled from
the script past the cap. Every OpenSIPS it starts is stopped, also on
failure.

Then the same with db_url an ODBC target (an SQLite file through the SQLite3
ODBC driver: DSN and connection-string forms, rows checked in the database),
and perf_sync over clusterer: two OpenSIPS nodes in one clusterer cluster
(proto_bin, db-less clusterer) and a third without clusterer, sharing one SQL
database (an SQLite file, then a private PostgreSQL): convergence by the push
(timed, < 1 s) and by the poll, every key and TTL compared, forged and replayed
notices sent as raw BIN packets change nothing.

Needs: an OpenSIPS 4.x binary and its modules (sl, sipmsgops, httpd,
mi_http; clusterer and proto_bin for the cluster part, and PostgreSQL for its
second run), and the module built by this project (-DOPENSIPS_SRC=...).
Exit status: 0 pass, 1 fail, 77 skipped (with the reason on stdout): also
when only a part of what was asked for could run (a missing module or
PostgreSQL), so that a partial run never reports as passed. ctest runs the
parts as two tests (tests/opensips.cmake): --only lmdb,odbc and --only sync.

usage: opensips_e2e.py --opensips BIN --mpath DIR --module cachedb_perf.so
       [--only lmdb,odbc,sync] [--keep] [--capture FILE]
       (FILE: MI invocations and replies, JSON)
"""
import argparse
import base64
import json
import os
import sqlite3
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
# How long an OpenSIPS may take to report itself running (sr_get_status):
# about 1 s when idle, several when two busy cores fork its processes.
START_DEADLINE = 60
ALL_PARTS = "lmdb,odbc,sync"
CHECKS = 0
# What this run could not do (a reason each): a run that skipped anything
# exits SKIP, not 0.
SKIPPED = []
# The admin guide's MI invocations that the cluster part (sync) makes; the
# main part (lmdb, odbc) makes all the others. Each part checks the guide's
# replies to its own invocations, so the two ctest tests together check
# every one.
SYNC_GUIDE = {("clusterer_list_cap", json.dumps(None)),
              ("cachedb_perf:perf_sync", json.dumps({"collection": "sessions"})),
              ("cachedb_perf:perf_stats", json.dumps({"collection": "sessions"})),
              ("cachedb_perf:perf_pull", json.dumps(["pk-1", "sessions"])),
              ("cachedb_perf:perf_cluster_probe", json.dumps(["sessions"]))}


def check(cond, what):
    global CHECKS
    CHECKS += 1
    if not cond:
        raise AssertionError(what)


def core_has_get_buf(src):
    """1 when the OpenSIPS tree declares get_buf (CACHEDB_HAVE_GET_BUF in
    cachedb/cachedb_cap.h: pull request 4118), 0 when it does not (4.0.1),
    None when there is no tree to look in."""
    try:
        with open(os.path.join(src, "cachedb", "cachedb_cap.h")) as f:
            return 1 if re.search(r"^#define\s+CACHEDB_HAVE_GET_BUF\b", f.read(), re.M) else 0
    except OSError:
        return None


def check_get_buf(args, a):
    """get_buf through the core's vtable (cdbbench_check_buf): on a core
    that declares it, every return case must hold; on one that does not,
    the module must build and run without it."""
    have = core_has_get_buf(args.src) if args.src else None
    # the two calls refused by contract log why: a NULL buffer, a key over 64 KiB
    a.allow_error("get_buf: NULL buffer", "get_buf of kkkk")
    r = a.sip("check_buf")
    if have == 1:
        check(r == "ok", "get_buf (the core declares CACHEDB_HAVE_GET_BUF): %s" % r)
        print("ok  get_buf: hit 0 into an exact-size buffer (NUL bytes), -3 with *needed "
              "(one byte short, zero-length buffer, needed NULL), empty value, 1 MiB and "
              "1 MiB - 1, 65535-byte key and 65536 (-1), counter as text, miss and "
              "expired -2, NULL buffer -1, *vlen/*needed zeroed")
    elif have == 0:
        check(r.startswith("absent: the core has no get_buf"),
              "get_buf on a core without CACHEDB_HAVE_GET_BUF: %s" % r)
        print("ok  get_buf: the core declares none (no CACHEDB_HAVE_GET_BUF); built without it")
    else:
        check(r == "ok" or r.startswith("absent:"), "get_buf: %s" % r)
        print("ok  get_buf: %s (no source tree to say whether the core declares it)" % r)


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


CFG = r'''
log_level = 3
stderror_enabled = yes
syslog_enabled = no
udp_workers = 2
socket = udp:127.0.0.1:@SIP_PORT@
mpath = "@MPATH@"

loadmodule "proto_udp.so"
loadmodule "sl.so"
loadmodule "sipmsgops.so"
loadmodule "httpd.so"
modparam("httpd", "ip", "127.0.0.1")
modparam("httpd", "port", @MI_PORT@)
loadmodule "mi_http.so"
@EXTRA_MODS@
loadmodule "@MODULE@"
loadmodule "@BENCH@"
modparam("cachedb_perf", "cache_collections", "default; sessions=10; th=4")
modparam("cachedb_perf", "cachedb_url", "@URL@")
modparam("cachedb_perf", "cachedb_url", "perf:th:///th")
modparam("cachedb_perf", "cache_mem_mb", 32)
modparam("cachedb_perf", "arena_hugepage_mb", 2)
modparam("cachedb_perf", "expiry_sweep_period", 1)
modparam("cachedb_perf", "growth_load_factor", 2)
modparam("cachedb_perf", "growth_budget", 64)
modparam("cachedb_perf", "arena_selftest", 1)
modparam("cachedb_perf", "htable_selftest", 1)
modparam("cachedb_perf", "event_expired_collections", "sessions")
modparam("cachedb_perf", "db_url", "@DB_URL@")
modparam("cachedb_perf", "db_mode", @DB_MODE@)
modparam("cachedb_perf", "persist_collections", "sessions,th")
@JOURNAL@
@EXTRA_PARAMS@

route {
    $var(op) = $hdr(X-Op);
    $var(k) = $hdr(X-Key);
    $var(r) = "none";
    if ($var(op) == "store") {
        $var(ttl) = $(hdr(X-Ttl){s.int});
        if (cache_store("perf", "$var(k)", "$hdr(X-Val)", $var(ttl)))
            $var(r) = "stored";
    } else if ($var(op) == "fetch") {
        if (cache_fetch("perf", "$var(k)", $var(v)))
            $var(r) = "hit:" + $var(v);
        else
            $var(r) = "miss";
    } else if ($var(op) == "remove") {
        if (cache_remove("perf", "$var(k)"))
            $var(r) = "removed";
    } else if ($var(op) == "add") {
        if (cache_add("perf", "$var(k)", $(hdr(X-Val){s.int}), 0, $var(n)))
            $var(r) = "n:" + $var(n);
    } else if ($var(op) == "sub") {
        if (cache_sub("perf", "$var(k)", $(hdr(X-Val){s.int}), 0, $var(n)))
            $var(r) = "n:" + $var(n);
    } else if ($var(op) == "check") {
        cdbbench_check("perf:///sessions", $var(r));
    } else if ($var(op) == "check_buf") {
        cdbbench_check_buf("perf://", $var(r));
    } else if ($var(op) == "fetch_buf") {
        cdbbench_get_buf("perf:///sessions", "$var(k)", $(hdr(X-Val){s.int}), $var(r));
    } else if ($var(op) == "counter") {
        if (cache_counter_fetch("perf", "$var(k)", $var(n)))
            $var(r) = "n:" + $var(n);
        else
            $var(r) = "miss";
    } else if ($var(op) == "mget_json") {
        if (perf_mget_json("$var(k)", $var(j)))
            $var(r) = $var(j);
    } else if ($var(op) == "mget") {
        perf_mget("$var(k)", $avp(mk), $avp(mv));
        $var(r) = "count:" + $rc + " " + $avp(mk) + "=" + $avp(mv);
    } else if ($var(op) == "del") {
        perf_del("$var(k)");
        $var(r) = "deleted:" + $rc;
    } else if ($var(op) == "del_coll") {
        perf_del("$var(k)", "$hdr(X-Coll)");
        $var(r) = "deleted:" + $rc;
    } else if ($var(op) == "sync") {
        if (perf_sync("sessions"))
            $var(r) = "sync-queued";
    } else if ($var(op) == "group_store") {
        if (cache_store("perf:th", "$var(k)", "$hdr(X-Val)"))
            $var(r) = "stored";
    } else if ($var(op) == "group_store2") {
        if (cache_store("perf:th", "$var(k)", "$hdr(X-Val)") &&
            cache_store("perf:th", "$var(k)-2", "$hdr(X-Val)-2"))
            $var(r) = "stored";
    } else if ($var(op) == "group_fetch") {
        if (cache_fetch("perf:th", "$var(k)", $var(v)))
            $var(r) = "hit:" + $var(v);
        else
            $var(r) = "miss";
    } else if ($var(op) == "fill_big") {
        $var(b) = "0123456789abcdef";
        $var(i) = 0;
        while ($var(i) < 16) {
            $var(b) = $var(b) + $var(b);
            $var(i) = $var(i) + 1;
        }
        $var(i) = 0;
        $var(ok) = 0;
        while ($var(i) < $(hdr(X-Val){s.int})) {
            if (cache_store("perf:th", "big-$var(i)", $var(b)))
                $var(ok) = $var(ok) + 1;
            $var(i) = $var(i) + 1;
        }
        $var(r) = "stored:" + $var(ok);
    } else if ($var(op) == "fill_evict") {
        # X-Val 1 KiB values into th, keys ev-<X-Start + i>: more than the
        # eviction node's maxmemory holds (max_while_loops caps a loop at
        # 10000 turns, so the test sends several requests)
        $var(b) = "0123456789abcdef";
        $var(i) = 0;
        while ($var(i) < 6) {
            $var(b) = $var(b) + $var(b);
            $var(i) = $var(i) + 1;
        }
        $var(i) = $(hdr(X-Start){s.int});
        $var(end) = $var(i) + $(hdr(X-Val){s.int});
        $var(ok) = 0;
        while ($var(i) < $var(end)) {
            if (cache_store("perf:th", "ev-$var(i)", $var(b)))
                $var(ok) = $var(ok) + 1;
            $var(i) = $var(i) + 1;
        }
        $var(r) = "stored:" + $var(ok);
    } else if ($var(op) == "fill") {
        $var(i) = 0;
        while ($var(i) < $(hdr(X-Val){s.int})) {
            cache_store("perf:th", "g-$var(i)", "x$var(i)");
            $var(i) = $var(i) + 1;
        }
        $var(r) = "filled:" + $var(i);
    }
    append_to_reply("X-Res: $var(r)\r\n");
    sl_send_reply(200, "OK");
    exit;
}

event_route[E_CACHEDB_PERF_EXPIRED] {
    cache_add("perf", "ev-expired", 1, 0);
    xlog("L_NOTICE", "cachedb_perf test: expired $param(key) in $param(collection)\n");
}

event_route[E_CACHEDB_PERF_NOMEM] {
    cache_add("perf", "ev-nomem", 1, 0);
    xlog("L_NOTICE", "cachedb_perf test: nomem $param(key) ($param(size) B) in $param(collection)\n");
}

event_route[E_CACHEDB_PERF_MEM_DEGRADED] {
    cache_add("perf", "ev-degraded", 1, 0);
    xlog("L_NOTICE", "cachedb_perf test: huge pages degraded: asked $param(requested_mb) MB, got tier $param(tier) ($param(backing))\n");
}

event_route[E_CACHEDB_PERF_SYNCED] {
    cache_add("perf:th", "ev-synced", 1, 0);
    xlog("L_NOTICE", "cachedb_perf test: synced $param(collection) from node $param(source_node)\n");
}

event_route[E_CACHEDB_PERF_GROWN] {
    cache_add("perf", "ev-grown", 1, 0);
    xlog("L_NOTICE", "cachedb_perf test: $param(collection) grew $param(prev_buckets) -> $param(buckets)\n");
}
'''


class OpenSIPS:
    def __init__(self, args, work, name, url="perf:///sessions", db_url=None,
                 journal="th=everysec", extra_mods="", extra_params="", ports=None,
                 db_mode=2):
        self.args, self.work, self.name = args, work, name
        self.sip_port, self.mi_port = ports or (free_port(socket.SOCK_DGRAM),
                                                free_port(socket.SOCK_STREAM))
        self.cfg = os.path.join(work, name + ".cfg")
        self.log = os.path.join(work, name + ".log")
        db_url = db_url or "lmdb://" + os.path.join(work, "store")
        jline = ('modparam("cachedb_perf", "journal", "%s")' % journal) if journal else ""
        text = (CFG.replace("@SIP_PORT@", str(self.sip_port))
                .replace("@MI_PORT@", str(self.mi_port))
                .replace("@MPATH@", args.mpath)
                .replace("@MODULE@", args.module)
                .replace("@BENCH@", args.bench_module)
                .replace("@URL@", url)
                .replace("@DB_URL@", db_url)
                .replace("@JOURNAL@", jline)
                .replace("@DB_MODE@", str(db_mode))
                .replace("@EXTRA_MODS@", extra_mods)
                .replace("@EXTRA_PARAMS@", extra_params))
        with open(self.cfg, "w") as f:
            f.write(text)
        self.proc = None
        self.seq = 0
        # ERROR / CRITICAL lines this node's test provokes on purpose
        # (substrings); any other fails the test when the node stops
        self.expected_errors = []
        self.expect_fail = False

    def allow_error(self, *substrings):
        self.expected_errors.extend(substrings)

    def check_log(self):
        """No ERROR or CRITICAL line in this run's log but the expected ones."""
        if self.expect_fail:
            return
        bad = [ln.rstrip() for ln in self.logtext().splitlines()
               if ("ERROR:" in ln or "CRITICAL:" in ln)
               and not any(e in ln for e in self.expected_errors)]
        check(not bad, "%s: unexpected ERROR/CRITICAL lines in the OpenSIPS log:\n%s"
              % (self.name, "\n".join(bad[:20])))

    def start(self, expect_fail=False):
        self.expect_fail = expect_fail
        logf = open(self.log, "w")
        self.proc = subprocess.Popen(
            [self.args.opensips, "-F", "-f", self.cfg, "-w", self.work,
             "-P", os.path.join(self.work, self.name + ".pid"), "-m", "64", "-M", "8"]
            + (["-a", default_allocator(self.args.opensips)]
               if default_allocator(self.args.opensips) else []),
            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, ODBCINI=os.path.join(self.work, "odbc.ini")))
        deadline = time.time() + START_DEADLINE
        while time.time() < deadline:
            if self.proc.poll() is not None:
                if expect_fail:
                    return self.proc.returncode
                raise AssertionError("%s exited with %s during startup:\n%s"
                                     % (self.name, self.proc.returncode, self.tail()))
            if not expect_fail:
                # ready is the core's "running", not the first MI answer: the
                # MI and SIP processes answer while the attendant still forks
                # the rest, and until it has, OpenSIPS ignores a SIGTERM
                # (signals.c: only the attendant acts on it, and it becomes
                # the attendant last), which left a stop() waiting 30 s
                try:
                    st = self.mi("sr_get_status", {"group": "core"}).get("result", {})
                    if st.get("Status") == 1:
                        return 0
                except OSError:
                    pass
            time.sleep(0.2)
        if expect_fail:
            self.stop()
            raise AssertionError("%s started although it should have failed" % self.name)
        raise AssertionError("%s: MI did not answer in %d s:\n%s"
                             % (self.name, START_DEADLINE, self.tail()))

    def tail(self, n=40):
        with open(self.log, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def logtext(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError("%s did not stop within 30 s of SIGTERM" % self.name)
        self.check_log()

    def kill9(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.check_log()

    def mi(self, method, params=None):
        self.seq += 1
        req = {"jsonrpc": "2.0", "method": method, "id": self.seq}
        if params is not None:
            req["params"] = params
        data = json.dumps(req).encode()
        r = urllib.request.Request("http://127.0.0.1:%d/mi" % self.mi_port, data=data,
                                   headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(r, timeout=30) as resp:
            return json.loads(resp.read().decode())

    def sip(self, op, key="", val="", **extra):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.settimeout(10)
        lport = s.getsockname()[1]
        n = random.randrange(1 << 30)
        hdrs = "".join("X-%s: %s\r\n" % (k.capitalize(), v) for k, v in extra.items())
        msg = ("OPTIONS sip:cache@127.0.0.1:%d SIP/2.0\r\n"
               "Via: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-%d\r\n"
               "Max-Forwards: 70\r\n"
               "From: <sip:test@127.0.0.1>;tag=%d\r\n"
               "To: <sip:cache@127.0.0.1>\r\n"
               "Call-ID: %d@127.0.0.1\r\n"
               "CSeq: 1 OPTIONS\r\n"
               "X-Op: %s\r\nX-Key: %s\r\nX-Val: %s\r\n%s"
               "Content-Length: 0\r\n\r\n"
               % (self.sip_port, lport, n, n, n, op, key, val, hdrs))
        # surrogateescape: "\udcff" in a test string is the raw byte 0xff
        s.sendto(msg.encode("utf-8", "surrogateescape"), ("127.0.0.1", self.sip_port))
        data = s.recv(65535).decode(errors="replace")
        s.close()
        check(data.startswith("SIP/2.0 200"), "SIP %s: reply %r" % (op, data[:60]))
        for line in data.split("\r\n"):
            if line.lower().startswith("x-res:"):
                return line[6:].strip()
        raise AssertionError("SIP %s: no X-Res in the reply:\n%s" % (op, data))


class Capture:
    """Records MI invocations and replies for the admin guide."""

    def __init__(self, path):
        self.path, self.items = path, []

    def mi(self, node, method, params=None):
        rep = node.mi(method, params)
        self.items.append({"method": method, "params": params, "reply": rep})
        return rep

    def save(self):
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.items, f, indent=1)


def result(rep, what):
    check("result" in rep, "%s: expected a result, got %s" % (what, json.dumps(rep)))
    return rep["result"]


def error(rep, what):
    check("error" in rep, "%s: expected an error, got %s" % (what, json.dumps(rep)))
    return rep["error"]


def shape(v):
    """The structure of a JSON value: member names and value types."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    if isinstance(v, bool) or v is None:
        return type(v).__name__
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def check_guide(guide, items, main, sync):
    """Every MI reply shown in the admin guide has the shape of the reply the
    same invocation got in this run (the guide's outputs were captured from
    this test; a command whose reply changed makes the guide stale): the
    main part's invocations when main, the cluster part's (SYNC_GUIDE) when
    sync. Each of them must have been run."""
    with open(guide) as f:
        text = f.read()
    blocks = [b for b in text.split("```") if "curl -s" in b and "/mi" in b]
    check(len(blocks) >= 14, "the guide shows %d MI invocations" % len(blocks))
    seen = {(it["method"], json.dumps(it["params"])): it["reply"] for it in items}
    for b in blocks:
        req = json.loads(b[b.index("-d '") + 4:b.index("' \\\n", b.index("-d '"))])
        doc = json.loads(b[b.index("http://127.0.0.1:8888/mi") + len("http://127.0.0.1:8888/mi"):])
        key = (req["method"], json.dumps(req.get("params")))
        if not (sync if key in SYNC_GUIDE else main):
            continue  # the other part's
        check(key in seen, "the guide's %s %s was not run by this test" % key)
        got = seen[key]
        a, g = dict(doc), dict(got)
        a.pop("id", None)
        g.pop("id", None)
        check(shape(a) == shape(g), "the guide's reply to %s %s is stale:\nguide: %s\nnow:   %s"
              % (key[0], key[1], json.dumps(shape(a)), json.dumps(shape(g))))


def run(args):
    work = tempfile.mkdtemp(prefix="pcache-opensips-")
    cap = Capture(args.capture)
    nodes = []
    try:
        with open(os.path.join(work, "odbc.ini"), "w") as f:
            f.write("[pcache_e2e]\nDriver = SQLite3\nDatabase = %s\n"
                    % os.path.join(work, "shared.sqlite"))
        if "lmdb" in args.only:
            run_lmdb(args, work, cap, nodes)
            run_evict(args, work, cap, nodes)
        if "odbc" in args.only:
            run_odbc(args, work, cap, nodes)
        sync_ran = False
        if "sync" in args.only:
            sync_ran = run_sync(args, work, cap, nodes)
        main = "lmdb" in args.only and "odbc" in args.only
        if args.guide and (main or sync_ran):
            check_guide(args.guide, cap.items, main, sync_ran)
            print("ok  the admin guide's MI replies (%s) have the shapes of this run's"
                  % " and ".join(p for p, on in (("main part", main), ("cluster part", sync_ran))
                                 if on))
    finally:
        for n in nodes:
            try:
                n.stop()
            except Exception as ex:  # keep stopping the others
                print("warning: stopping %s: %s" % (n.name, ex))
        cap.save()
        if args.keep:
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def run_lmdb(args, work, cap, nodes):
    if True:
        # ---- 1. a bad collection URL and a bad db_url fail startup, clearly
        bad = OpenSIPS(args, work, "badurl", url="perf:///nope")
        nodes.append(bad)
        rc = bad.start(expect_fail=True)
        text = bad.logtext()
        check(rc != 0, "bad cachedb_url: exit status %s" % rc)
        check("nope" in text and "not declared" in text.lower().replace("undeclared", "not declared"),
              "bad cachedb_url: the log does not name the collection:\n" + bad.tail())
        print("ok  startup refused for cachedb_url perf:///nope:",
              [l for l in text.splitlines() if "nope" in l][0].strip())
        bad2 = OpenSIPS(args, work, "baddb", db_url="mysql://x@localhost/db")
        nodes.append(bad2)
        rc = bad2.start(expect_fail=True)
        check(rc != 0 and "unknown scheme" in bad2.logtext(),
              "bad db_url: startup did not fail clearly:\n" + bad2.tail())
        print("ok  startup refused for db_url mysql://...:",
              [l for l in bad2.logtext().splitlines() if "unknown scheme" in l][0].strip())

        # ---- 2. the first run: SIP traffic through the script
        a = OpenSIPS(args, work, "run1")
        nodes.append(a)
        a.start()
        log = a.logtext()
        check("arena selftest passed" in log and "htable selftest passed" in log,
              "selftests did not report:\n" + a.tail())
        check(a.sip("store", "user-alice", "a1", ttl=0) == "stored", "cache_store")
        check(a.sip("store", "user-bob", "b1", ttl=0) == "stored", "cache_store 2")
        check(a.sip("store", "user-carol", "c1", ttl=3600) == "stored", "cache_store ttl")
        check(a.sip("fetch", "user-alice") == "hit:a1", "cache_fetch hit")
        check(a.sip("fetch", "nobody") == "miss", "cache_fetch miss")
        # the fetch path through the core's cachedb vtable (cdbbench_check):
        # NUL bytes, the empty value, 1 MiB and one byte more, counters, a
        # miss, iter_keys (sql_cacher's sql_cache_dump uses it)
        a.allow_error("set of chk-over")  # the refused 1 MiB + 1 value, logged
        r = a.sip("check")
        check(r == "ok", "the cachedb vtable's fetch path: %s" % r)
        print("ok  cachedb vtable fetch: binary with NUL, empty, 1 MiB, 1 MiB + 1 refused, "
              "counters, miss; iter_keys visits every key with its value")
        check_get_buf(args, a)
        check(a.sip("add", "hits", "5") == "n:5", "cache_add new counter")
        check(a.sip("add", "hits", "3") == "n:8", "cache_add")
        check(a.sip("sub", "hits", "2") == "n:6", "cache_sub")
        check(a.sip("counter", "hits") == "n:6", "cache_counter_fetch")
        check(a.sip("store", "tmp-1", "x", ttl=0) == "stored", "store tmp-1")
        check(a.sip("remove", "tmp-1") == "removed", "cache_remove")
        check(a.sip("fetch", "tmp-1") == "miss", "fetch after remove")
        j = json.loads(a.sip("mget_json", "user-*"))
        check(j == {"user-alice": "a1", "user-bob": "b1", "user-carol": "c1"},
              "perf_mget_json: %r" % j)
        m = a.sip("mget", "user-a*")
        check(m == "count:1 user-alice=a1", "perf_mget: %r" % m)
        for i in range(5):
            a.sip("store", "sess-%d" % i, "s%d" % i, ttl=0)
        check(a.sip("del", "sess-[0-2]") == "deleted:3", "perf_del glob")
        check(a.sip("del", "sess-[0-2]") == "deleted:-1", "perf_del nothing left")
        check(a.sip("group_store", "th-key", "tv") == "stored", "cache_store perf:th")
        check(a.sip("group_fetch", "th-key") == "hit:tv", "cache_fetch perf:th")
        check(a.sip("fetch", "th-key") == "miss", "groups are distinct collections")
        # expiry + the expired event (opted in for sessions)
        check(a.sip("store", "short", "gone soon", ttl=1) == "stored", "store ttl 1")
        # growth + the grown event: 200 keys into the 16-bucket th
        check(a.sip("fill", "", "200") == "filled:200", "fill th")
        deadline = time.time() + 15
        while time.time() < deadline:
            if a.sip("counter", "ev-expired").startswith("n:") and \
                    a.sip("counter", "ev-grown").startswith("n:"):
                break
            time.sleep(0.5)
        check(a.sip("fetch", "short") == "miss", "expired key reads as absent")
        check(a.sip("counter", "ev-expired") == "n:1",
              "E_CACHEDB_PERF_EXPIRED raised once: %s" % a.sip("counter", "ev-expired"))
        grown = a.sip("counter", "ev-grown")
        check(grown.startswith("n:") and int(grown[2:]) >= 1, "E_CACHEDB_PERF_GROWN: " + grown)
        print("ok  SIP-driven cache_store/fetch/remove/add/sub/counter_fetch, perf_mget(_json), "
              "perf_del, groups; events expired=1 grown=%s" % grown[2:])

        # ---- 3. every MI command
        st = result(cap.mi(a, "cachedb_perf:perf_stats", ["sessions"]), "perf_stats sessions")
        s = st["collections"][0] if "collections" in st else st
        check(json.dumps(st).count('"sessions"') >= 1, "perf_stats names sessions: %s" % st)
        allst = result(cap.mi(a, "perf_stats"), "perf_stats (alias, all)")
        names = [c.get("name", c.get("collection")) for c in allst["collections"]]
        check(names == ["default", "sessions", "th"], "perf_stats collections: %s" % names)
        th = [c for c in allst["collections"] if c.get("name", c.get("collection")) == "th"][0]
        check(th["entries"] >= 201 and th["buckets"] > 16, "th grew: %s" % th)
        sess = [c for c in allst["collections"]
                if c.get("name", c.get("collection")) == "sessions"][0]
        check(sess["stores"] >= 10 and sess["hits"] >= 3 and sess["expired"] >= 1,
              "sessions counters: %s" % sess)
        g0 = result(a.mi("get_statistics", [["cachedb_perf:"]]),
                    "get_statistics before reset")
        r = result(cap.mi(a, "cachedb_perf:perf_stats_reset", ["sessions"]), "perf_stats_reset")
        st2 = result(a.mi("perf_stats", ["sessions"]), "perf_stats after reset")
        s2 = st2["collections"][0]
        check(s2["stores"] == 0 and s2["entries"] == sess["entries"],
              "reset re-baselines counters, not gauges: %s" % s2)
        g1 = result(a.mi("get_statistics", [["cachedb_perf:"]]),
                    "get_statistics after reset")
        check(g0["cachedb_perf:stores"] >= sess["stores"] and
              all(g1[k] >= g0[k] for k in ("cachedb_perf:stores", "cachedb_perf:hits")),
              "OpenSIPS statistics stay cumulative across perf_stats_reset: %s -> %s" % (g0, g1))
        k = result(cap.mi(a, "cachedb_perf:perf_keys", ["user-*"]), "perf_keys")
        keys = sorted(x["key"] for x in k["keys"])
        check(keys == ["user-alice", "user-bob", "user-carol"], "perf_keys: %s" % k)
        k = result(cap.mi(a, "cachedb_perf:perf_keys", ["g-1*", "th", 5]), "perf_keys limit")
        check(len(k["keys"]) == 5 and k["truncated"] is True, "perf_keys limit 5: %s" % k)
        k = result(cap.mi(a, "cachedb_perf:perf_keys", ["g-1*", "", 3]), "perf_keys skip coll")
        check(len(k["keys"]) == 0, "perf_keys g-1* in sessions (default) is empty: %s" % k)
        k = result(a.mi("perf_keys", {"glob": "user-b*", "collection": "sessions"}),
                   "perf_keys named")
        check([x["key"] for x in k["keys"]] == ["user-bob"], "perf_keys named: %s" % k)
        seen, cursor, calls = set(), 0, 0
        while True:
            sc = result(cap.mi(a, "cachedb_perf:perf_scan", [cursor, "g-*", 64, "th"])
                        if calls == 0 else a.mi("perf_scan", [cursor, "g-*", 64, "th"]),
                        "perf_scan")
            seen.update(x["key"] if isinstance(x, dict) else x for x in sc["keys"])
            cursor = int(sc["cursor"])
            calls += 1
            if cursor == 0 or calls > 1000:
                break
        check(seen == {"g-%d" % i for i in range(200)}, "perf_scan saw %d of 200" % len(seen))
        d = result(cap.mi(a, "cachedb_perf:perf_dump", ["user-a*"]), "perf_dump")
        check(d["count"] == 1 and d["entries"][0]["value"] == "a1", "perf_dump value: %s" % d)
        g = result(cap.mi(a, "cachedb_perf:perf_get", ["user-carol"]), "perf_get")
        check(g["value"] == "c1" and 3500 < g["ttl"] <= 3600 and g["size"] == 2, "perf_get: %s" % g)
        e = error(cap.mi(a, "cachedb_perf:perf_get", ["nobody"]), "perf_get missing")
        check(e["code"] == 404 and "nobody" in e["message"], "perf_get missing: %s" % e)
        r = result(cap.mi(a, "cachedb_perf:perf_set", ["greeting", "hello", 300]), "perf_set")
        check(a.sip("fetch", "greeting") == "hit:hello", "perf_set visible to the script")
        r = result(cap.mi(a, "cachedb_perf:perf_set", ["bin", "caf\u00e9\u00ff"]), "perf_set utf8")
        g = result(a.mi("perf_get", ["bin"]), "perf_get utf8")
        check(g["value"] == "caf\u00e9\u00ff", "UTF-8 round trip: %r" % g)
        # a value that is not UTF-8 (stored from the script): base64 under value_b64,
        # the one JSON convention (docs/management.md "Strings in JSON")
        check(a.sip("store", "raw-ff", "v\udcffz", ttl=0) == "stored", "store a non-UTF-8 value")
        g = result(a.mi("perf_get", ["raw-ff"]), "perf_get non-text")
        check("value" not in g and base64.b64decode(g.get("value_b64", "")) == b"v\xffz",
              "a non-UTF-8 value as value_b64: %r" % g)
        result(a.mi("perf_del", ["raw-ff"]), "perf_del raw-ff")
        t = result(cap.mi(a, "cachedb_perf:perf_ttl", ["user-*", 1800]), "perf_ttl")
        check(t["updated"] == 3, "perf_ttl: %s" % t)
        g = result(a.mi("perf_get", ["user-alice"]), "perf_get after ttl")
        check(1790 < g["ttl"] <= 1800, "perf_ttl re-armed: %s" % g)
        mg = result(cap.mi(a, "cachedb_perf:perf_mget", ["user-*"]), "perf_mget")
        check(sorted(mg["keys"]) == keys and len(mg["values"]) == 3, "perf_mget: %s" % mg)
        mj = result(cap.mi(a, "cachedb_perf:perf_mget_json", ["user-*"]), "perf_mget_json")
        check(json.loads(mj["json"]) == {"user-alice": "a1", "user-bob": "b1", "user-carol": "c1"},
              "perf_mget_json: %s" % mj)
        dl = result(cap.mi(a, "cachedb_perf:perf_del", ["sess-*"]), "perf_del")
        check(dl["deleted"] == 2, "perf_del: %s" % dl)
        sv = result(cap.mi(a, "cachedb_perf:perf_save", ["sessions"]), "perf_save")
        check(sv["collections"] == 1 and sv["saved"] >= 7, "perf_save: %s" % sv)
        sv_all = result(a.mi("perf_save"), "perf_save all")
        check(sv_all["collections"] == 3, "perf_save all: %s" % sv_all)
        # perf_load brings back a key deleted after the save
        a.mi("perf_del", ["greeting"])
        check(a.sip("fetch", "greeting") == "miss", "greeting deleted")
        ld = result(cap.mi(a, "cachedb_perf:perf_load", ["sessions"]), "perf_load")
        check(ld["loaded"] == sv_all_saved(sv_all, sv) and ld["collections"] == 1,
              "perf_load: %s" % ld)
        check(a.sip("fetch", "greeting") == "hit:hello", "perf_load restored greeting")
        # the store parameter, positional and named: another store for one call,
        # under the store root (the db_url store's parent), and nothing outside it
        for form, other, sv_p, ld_p in (
                ("positional", "other-p", lambda o: ["sessions", o], lambda o: ["sessions", o]),
                ("named", "other-n", lambda o: {"collection": "sessions", "store": o},
                 lambda o: {"collection": "sessions", "store": o})):
            o = os.path.join(work, other)
            sv2 = result(a.mi("perf_save", sv_p(o)), "perf_save [store] " + form)
            check(sv2["collections"] == 1 and sv2["saved"] == sv["saved"] and
                  os.path.exists(os.path.join(o, "data.mdb")),
                  "perf_save to another store (%s): %s" % (form, sv2))
            a.mi("perf_del", ["greeting"])
            ld2 = result(a.mi("perf_load", ld_p(o)), "perf_load [store] " + form)
            check(ld2["collections"] == 1 and ld2["loaded"] == sv2["saved"] and
                  a.sip("fetch", "greeting") == "hit:hello",
                  "perf_load from another store (%s): %s" % (form, ld2))
        outside = tempfile.mkdtemp(prefix="pcache-outside-")
        target = os.path.join(outside, "s")
        e = error(a.mi("perf_save", ["sessions", target]), "perf_save outside the root")
        check(e["code"] == 400 and "store root" in e["message"] and not os.path.exists(target),
              "perf_save outside the store root refused, nothing created: %s" % e)
        shutil.rmtree(outside)
        print("ok  perf_save / perf_load [collection] [store], positional and named; a store "
              "outside the root refused:", e["message"])
        sy = result(cap.mi(a, "cachedb_perf:perf_sync", ["sessions"]), "perf_sync")
        check(sy["saved"] >= 7 and sy["peers"] == 0 and "no peer notified" in sy["note"],
              "perf_sync degrades to a save and says so: %s" % sy)
        check(a.sip("sync") == "sync-queued", "perf_sync() from the script")
        # errors: clear code + message, nothing changed
        e = error(cap.mi(a, "cachedb_perf:perf_keys", ["*", "nosuch"]), "unknown collection")
        check(e["code"] == 400 and "nosuch" in e["message"], "unknown collection: %s" % e)
        e = error(a.mi("perf_keys", ["*", "sessions", 0]), "limit 0")
        check(e["code"] == 400 and "limit" in e["message"], "limit 0: %s" % e)
        e = error(a.mi("perf_set", ["k", "v", "soon"]), "bad ttl")
        check(e["code"] == 400 and "ttl" in e["message"], "bad ttl: %s" % e)
        e = error(a.mi("perf_scan", ["x"]), "bad cursor")
        check(e["code"] == 400 and "cursor" in e["message"], "bad cursor: %s" % e)
        a.allow_error("handle_mi_request: Invalid parameters")  # the core's, for this call
        e = error(a.mi("perf_get", ["a", "b", "c"]), "too many params")
        check(e["code"] == -32602, "too many params: %s" % e)
        # statistics
        stats = result(cap.mi(a, "get_statistics", [["cachedb_perf:"]]), "get_statistics")
        check(stats.get("cachedb_perf:stores", 0) >= 200 and
              stats.get("cachedb_perf:entries", 0) >= 200 and
              "cachedb_perf:splits" in stats, "statistics: %s" % stats)
        # the figures pcached's /metrics has (docs/pcached.md "Metrics and health")
        check(stats.get("cachedb_perf:memory_used", 0) > 0 and
              stats.get("cachedb_perf:reads", 0) > 0 and
              stats.get("cachedb_perf:journal_failing", -1) == 0 and
              stats.get("cachedb_perf:saves_failing", -1) == 0 and
              "cachedb_perf:last_save_age" in stats and
              "cachedb_perf:lock_fallbacks" in stats and
              "cachedb_perf:memory_free" in stats, "monitoring statistics: %s" % stats)
        print("ok  every MI command (perf_stats, perf_stats_reset, perf_keys, perf_scan, "
              "perf_dump, perf_get, perf_set, perf_ttl, perf_del, perf_mget, perf_mget_json, "
              "perf_save, perf_load, perf_sync), errors, statistics")
        # the queued script perf_sync runs in the module's timer: wait for its line
        check(logged(a, "perf_sync sessions:", 30), "script perf_sync ran in the timer")

        # ---- 4. the shutdown save (db_mode 2) and the startup load after restart
        a.mi("perf_set", ["late", "after-the-last-save"])
        a.sip("store", "late2", "via-sip", ttl=0)
        a.stop()
        log = a.logtext()
        check("shutdown save (db_mode 2) done" in log, "shutdown save logged:\n" + a.tail())
        print("ok  shutdown save:", [l for l in log.splitlines() if "shutdown save" in l][0].strip())
        b = OpenSIPS(args, work, "run2")
        nodes.append(b)
        b.start()
        check("startup load (db_mode 2)" in b.logtext(), "startup load logged:\n" + b.tail())
        check(b.sip("fetch", "late") == "hit:after-the-last-save", "MI write survived restart")
        check(b.sip("fetch", "late2") == "hit:via-sip", "SIP write survived restart")
        check(b.sip("fetch", "user-alice") == "hit:a1", "user-alice survived restart")
        check(b.sip("counter", "hits") == "n:6", "counter survived restart as a counter")
        check(b.sip("group_fetch", "g-199") == "hit:x199", "th survived restart")
        check(b.sip("fetch", "short") == "miss", "the expired key stayed gone")
        g = result(b.mi("perf_get", ["user-carol"]), "perf_get after restart")
        check(1700 < g["ttl"] <= 1800, "TTL kept across the restart: %s" % g)
        st = result(cap.mi(b, "cachedb_perf:perf_stats", ["th"]), "perf_stats after restart")
        th = st["collections"][0]
        check(th["last_load_entries"] >= 201, "perf_stats last load: %s" % th)
        print("ok  startup load after restart: keys, counter, TTLs and th (%d entries) back"
              % th["last_load_entries"])
        # the huge-page reservation (2 MB): the event fires when it landed
        # below hugetlb (tier 1), once per start, from the first timer tick;
        # the counter lives in a persisted collection: run1's 1 came back
        tier = st["memory_tier"]
        deadline = time.time() + 5
        while b.sip("counter", "ev-degraded") != "n:2" and time.time() < deadline:
            time.sleep(0.2)
        deg = b.sip("counter", "ev-degraded")
        if tier == 1:
            check(deg == "miss", "no mem_degraded event on tier 1: %s" % deg)
        else:
            check(deg == "n:2", "E_CACHEDB_PERF_MEM_DEGRADED once per start (tier %d): %s"
                  % (tier, deg))
        # fill the 32 MB region with 1 MiB values: writes are dropped with
        # the nomem event, the cache keeps serving
        # the event route counts into a counter created beforehand: a full
        # region could not create it, but updates a counter in place
        check(b.sip("add", "ev-nomem", "0") == "n:0", "counter for the nomem events")
        stored = b.sip("fill_big", "", "48")
        n_ok = int(stored.split(":")[1])
        check(0 < n_ok < 48, "some 1 MiB writes dropped: %s" % stored)
        # the event route may run after the reply (seen once: 1 of 17 counted
        # at the first look), so wait for the count, then require it exactly
        deadline = time.time() + 5
        while b.sip("counter", "ev-nomem") != "n:%d" % (48 - n_ok) and time.time() < deadline:
            time.sleep(0.2)
        ev = b.sip("counter", "ev-nomem")
        check(ev == "n:%d" % (48 - n_ok), "E_CACHEDB_PERF_NOMEM per dropped write: %s vs %s"
              % (ev, stored))
        check(b.sip("fetch", "user-alice") == "hit:a1", "reads still served when full")
        st = result(b.mi("perf_stats", ["th"]), "perf_stats nomem")
        check(st["collections"][0]["nomem"] == 48 - n_ok, "perf_stats nomem: %s" % st)
        print("ok  events mem_degraded (tier %d) and nomem (%d of 48 1 MiB writes dropped)"
              % (tier, 48 - n_ok))
        b.stop()

        # ---- 5. the journal (th=everysec): kill -9, no shutdown save, restart
        c = OpenSIPS(args, work, "run3")
        nodes.append(c)
        c.start()
        # two writes in one request, one worker: both wait in the worker's
        # journal ring in shared memory until the maintenance process's
        # drainer writes them out (journal-format.md §6); kill -9 of the
        # worker loses neither
        check(c.sip("group_store2", "jr-key", "journaled") == "stored", "store into th")
        check(c.sip("store", "nj-key", "not-journaled", ttl=0) == "stored", "store into sessions")
        time.sleep(2.5)  # the drainer's write-out + fdatasync
        c.kill9()
        d = OpenSIPS(args, work, "run4")
        nodes.append(d)
        d.start()
        check(d.sip("group_fetch", "jr-key") == "hit:journaled",
              "a write to a journaled collection survived kill -9 (journal replay)")
        check(d.sip("group_fetch", "jr-key-2") == "hit:journaled-2",
              "the second journal record of the request was written out before kill -9")
        check(d.sip("fetch", "nj-key") == "miss",
              "a write to an unjournaled collection after the last save is lost on kill -9")
        check(d.sip("group_fetch", "g-7") == "hit:x7", "the snapshot under the journal loaded")
        d.stop()
        print("ok  journal: th (everysec) write survived kill -9; sessions (no journal) did not")

EVICT_CAP = 4 * 1024 * 1024  # the eviction node's maxmemory, "4mb"
EVICT_PARAMS = ('modparam("cachedb_perf", "eviction", "th=allkeys-s3fifo; sessions=noeviction")\n'
                'modparam("cachedb_perf", "maxmemory", %s)')


def th_keys(node, glob):
    """Every key of th matching glob, through perf_scan."""
    seen, cursor = set(), 0
    for _ in range(10000):
        sc = result(node.mi("perf_scan", [cursor, glob, 1000, "th"]), "perf_scan th")
        seen.update(x["key"] if isinstance(x, dict) else x for x in sc["keys"])
        cursor = int(sc["cursor"])
        if cursor == 0:
            break
    return seen


def run_evict(args, work, cap, nodes):
    """Eviction (README "Eviction"): th evicts (allkeys-s3fifo) under a 4 MiB
    maxmemory, sessions does not; a script loop stores five times what fits.
    Every store succeeds, th counts its evictions in perf_stats and in the
    OpenSIPS statistics, sessions keeps every key (and its writes at the cap
    succeed by evicting from th), and after kill -9 the journal replay brings
    back no evicted key. The refused settings fail startup, saying why."""
    # ---- the refused settings: each fails startup with a line naming it
    for name, params, want in (
            ("evbad-lfu", 'modparam("cachedb_perf", "eviction", "th=allkeys-lfu")',
             "\"allkeys-lfu\" is a Redis policy pcache does not have: use allkeys-s3fifo"),
            ("evbad-pol", 'modparam("cachedb_perf", "eviction", "th=newest-first")',
             "\"newest-first\" is not a policy: noeviction, allkeys-lru"),
            ("evbad-coll", 'modparam("cachedb_perf", "eviction", "calls=allkeys-lru")',
             "eviction: \"calls\" is not a declared collection"),
            ("evbad-twice", 'modparam("cachedb_perf", "eviction", "th=allkeys-lru,th=noeviction")',
             "eviction: \"th\" is given twice"),
            ("evbad-mem", 'modparam("cachedb_perf", "maxmemory", "4 parsecs")',
             "maxmemory: \"4 parsecs\" is not a byte count")):
        bad = OpenSIPS(args, work, name, db_url="lmdb://" + os.path.join(work, "evbad"),
                       extra_params=params)
        nodes.append(bad)
        rc = bad.start(expect_fail=True)
        line = [ln for ln in bad.logtext().splitlines() if want in ln]
        check(rc != 0 and line, "%s: startup did not fail naming the setting:\n%s"
              % (name, bad.tail()))
        print("ok  startup refused:", line[0].strip()[line[0].find("ERROR"):])

    # ---- the eviction node: a store of its own, th journaled (everysec)
    store = "lmdb://" + os.path.join(work, "evstore")
    e = OpenSIPS(args, work, "evict1", db_url=store, extra_params=EVICT_PARAMS % '"4mb"')
    nodes.append(e)
    e.start()
    log = e.logtext()
    check("eviction: th=allkeys-s3fifo; maxmemory %d bytes" % EVICT_CAP in log,
          "the eviction settings are logged at startup:\n" + e.tail())
    check("collection th is persisted and evicts (allkeys-s3fifo)" in log,
          "the persisted, evicting th is warned about:\n" + e.tail())
    for i in range(50):
        check(e.sip("store", "keep-%d" % i, "k%d" % i, ttl=0) == "stored", "store keep-%d" % i)
    per, rounds = 5000, 4  # 20000 values of 1 KiB into a 4 MiB cap
    t0 = time.time()
    for r in range(rounds):
        got = e.sip("fill_evict", "", str(per), start=str(r * per))
        check(got == "stored:%d" % per, "every store succeeds while evicting: round %d: %s"
              % (r, got))
    secs = time.time() - t0
    time.sleep(2)  # maintenance ticks: the table grows, eviction ahead of need runs at the cap
    st = result(cap.mi(e, "cachedb_perf:perf_stats", {"collection": "th"}), "perf_stats th")
    th = st["collections"][0]
    check(th["eviction"] == "allkeys-s3fifo" and th["evicted"] > 0,
          "perf_stats th: eviction and evicted: %s" % th)
    check(th["entries"] < per * rounds and th["evicted"] + th["entries"] >= per * rounds,
          "th holds less than was stored, the rest evicted: %d entries, %d evicted"
          % (th["entries"], th["evicted"]))
    check(st["maxmemory"] == EVICT_CAP and st["evicted"] >= th["evicted"],
          "perf_stats maxmemory and evicted: %s / %s" % (st["maxmemory"], st["evicted"]))
    # the cap binds (racing carvers may pass it by a chunk each)
    chunk = st["arena_bytes"] // max(st["arena_chunks"], 1)
    check(st["arena_bytes"] <= EVICT_CAP + 4 * chunk,
          "arena_bytes %d within maxmemory %d (+ a chunk per racing process)"
          % (st["arena_bytes"], EVICT_CAP))
    check(e.sip("group_fetch", "ev-%d" % (per * rounds - 1)).startswith("hit:"),
          "the last key stored is there")
    allst = result(e.mi("perf_stats"), "perf_stats all (eviction node)")
    sess = [c for c in allst["collections"] if c["collection"] == "sessions"][0]
    check(sess["eviction"] == "noeviction" and sess["evicted"] == 0,
          "sessions does not evict: %s" % sess)
    check(all(e.sip("fetch", "keep-%d" % i) == "hit:k%d" % i for i in range(50)),
          "the noeviction collection kept every key through th's evictions")
    # at the cap, a write into the noeviction collection makes room from th
    ev0 = th["evicted"]
    for i in range(50, 150):
        check(e.sip("store", "keep-%d" % i, "x" * 900, ttl=0) == "stored",
              "a noeviction write at the cap: keep-%d" % i)
    th1 = result(e.mi("perf_stats", ["th"]), "perf_stats th again")["collections"][0]
    stats = result(e.mi("get_statistics", [["cachedb_perf:"]]), "get_statistics evicted")
    check(stats.get("cachedb_perf:evicted", 0) >= th1["evicted"] > 0,
          "the OpenSIPS statistic evicted: %s vs perf_stats %d"
          % (stats.get("cachedb_perf:evicted"), th1["evicted"]))
    result(e.mi("perf_stats_reset", ["th"]), "perf_stats_reset th")
    th2 = result(e.mi("perf_stats", ["th"]), "perf_stats th after reset")["collections"][0]
    stats2 = result(e.mi("get_statistics", [["cachedb_perf:"]]), "get_statistics after reset")
    check(th2["evicted"] < th1["evicted"] and
          stats2["cachedb_perf:evicted"] >= stats["cachedb_perf:evicted"],
          "perf_stats_reset re-baselines evicted, the statistic stays cumulative: %d -> %d, "
          "%d -> %d" % (th1["evicted"], th2["evicted"], stats["cachedb_perf:evicted"],
                        stats2["cachedb_perf:evicted"]))
    print("ok  eviction: %d x 1 KiB stores into th under maxmemory 4mb in %.2f s, all stored; "
          "th %d entries, %d evicted (allkeys-s3fifo); sessions (noeviction) kept its 50 keys and "
          "took 100 more at the cap (th evicted %d more); statistic evicted %d"
          % (per * rounds, secs, th["entries"], th["evicted"], th1["evicted"] - ev0,
             stats["cachedb_perf:evicted"]))

    # ---- kill -9, then the journal replay: evictions were journaled, so no
    # evicted key comes back (maxmemory as an int this time)
    time.sleep(2.5)  # the drainer's write-out + fdatasync
    before = th_keys(e, "ev-*")
    e.kill9()
    e2 = OpenSIPS(args, work, "evict2", db_url=store, extra_params=EVICT_PARAMS % EVICT_CAP)
    nodes.append(e2)
    e2.start()
    after = th_keys(e2, "ev-*")
    check(after and after <= before,
          "journal replay: th's keys after kill -9 are a subset of those before (%d of %d; "
          "%d evicted keys came back)" % (len(after), len(before), len(after - before)))
    st = result(e2.mi("perf_stats", ["th"]), "perf_stats th after replay")
    check(st["maxmemory"] == EVICT_CAP and st["collections"][0]["eviction"] == "allkeys-s3fifo",
          "settings after restart (maxmemory as an int): %s" % st["maxmemory"])
    got = e2.sip("fill_evict", "", str(per), start=str(rounds * per))
    th3 = result(e2.mi("perf_stats", ["th"]), "perf_stats th after refill")["collections"][0]
    check(got == "stored:%d" % per and th3["evicted"] > 0,
          "after the replay, stores at the cap still succeed by evicting: %s, %d evicted"
          % (got, th3["evicted"]))
    e2.stop()
    print("ok  eviction journaled: after kill -9 the replay holds %d of th's %d keys, none that "
          "was evicted; %d more stores evicted %d" % (len(after), len(before), per,
                                                      th3["evicted"]))


def sql_rows(db, query, params=()):
    """Reads the SQLite database the module writes through ODBC, directly."""
    con = sqlite3.connect(db, timeout=10)
    try:
        return con.execute(query, params).fetchall()
    finally:
        con.close()


def run_odbc(args, work, cap, nodes):
    """db_url odbc://DSN and a bare ODBC connection string, on an SQLite file
    through the SQLite3 ODBC driver: perf_save / perf_load through MI, the
    rows checked in the database itself, db_mode 2 across a restart."""
    db = os.path.join(work, "odbc.sqlite")
    with open(os.path.join(work, "odbc.ini"), "a") as f:
        f.write("[pcache_odbc]\nDriver = SQLite3\nDatabase = %s\n" % db)
    bad = OpenSIPS(args, work, "odbcbad", db_url="odbc://no_such_dsn", journal=None)
    nodes.append(bad)
    rc = bad.start(expect_fail=True)
    line = [l for l in bad.logtext().splitlines() if "no_such_dsn" in l]
    check(rc != 0 and line and "IM002" in bad.logtext(),
          "odbc://no_such_dsn: startup did not fail naming the DSN and SQLSTATE:\n" + bad.tail())
    print("ok  startup refused for db_url odbc://no_such_dsn:", line[0].strip())

    o = OpenSIPS(args, work, "odbc1", db_url="odbc://pcache_odbc", journal=None)
    nodes.append(o)
    o.start()
    check(o.sip("store", "user-alice", "a1", ttl=0) == "stored", "odbc: store")
    check(o.sip("store", "user-carol", "c1", ttl=3600) == "stored", "odbc: store ttl")
    check(o.sip("add", "hits", "7") == "n:7", "odbc: counter")
    r = result(o.mi("perf_set", ["bin", "caf\u00e9\u00ff\u0001"]), "odbc: perf_set utf8")
    sv = result(cap.mi(o, "cachedb_perf:perf_save", {"collection": "sessions"}), "odbc perf_save")
    # (plus the event routes' counters: ev-degraded when huge pages fell back)
    rows = dict(sql_rows(db, "SELECT pkey, pvalue FROM pcache_entries WHERE collection = ?",
                         ("sessions",)))
    rows = {bytes(k): bytes(v) for k, v in rows.items()}
    check(sv["collections"] == 1 and sv["saved"] == len(rows), "odbc perf_save: %s" % sv)
    nev = len([k for k in rows if k.startswith(b"ev-")])
    rows = {k: v for k, v in rows.items() if not k.startswith(b"ev-")}
    check(rows ==
          {b"user-alice": b"a1", b"user-carol": b"c1", b"hits": b"7",
           b"bin": "caf\u00e9\u00ff\u0001".encode()}, "odbc: the SQL rows: %s" % rows)
    exp = sql_rows(db, "SELECT expires FROM pcache_entries WHERE pkey = ?", (b"user-carol",))
    check(len(exp) == 1 and abs(exp[0][0] / 1000.0 - (time.time() + 3600)) < 30,
          "odbc: user-carol's absolute expiry: %s" % exp)
    gen1 = sql_rows(db, "SELECT generation FROM pcache_generations WHERE collection = ?",
                    ("sessions",))
    check(gen1 == [(1,)], "odbc: generation 1 after the first save: %s" % gen1)
    print("ok  odbc perf_save (SQLite through ODBC, DSN form):", json.dumps(sv))
    # perf_load brings back what was deleted after the save
    dl = result(o.mi("perf_del", ["user-*"]), "odbc perf_del")
    check(dl["deleted"] == 2 and o.sip("fetch", "user-alice") == "miss", "odbc: deleted")
    ld = result(cap.mi(o, "cachedb_perf:perf_load", {"collection": "sessions"}), "odbc perf_load")
    check(ld["loaded"] == 4 + nev and ld["collections"] == 1, "odbc perf_load: %s" % ld)
    check(o.sip("fetch", "user-alice") == "hit:a1", "odbc: perf_load restored user-alice")
    g = result(o.mi("perf_get", ["user-carol"]), "odbc perf_get")
    check(3500 < g["ttl"] <= 3600, "odbc: TTL after perf_load: %s" % g)
    print("ok  odbc perf_load:", json.dumps(ld))
    o.mi("perf_set", ["late", "after-the-last-save"])
    o.stop()
    check("shutdown save (db_mode 2) done" in o.logtext(), "odbc: shutdown save:\n" + o.tail())
    gen = sql_rows(db, "SELECT generation FROM pcache_generations WHERE collection = ?",
                   ("sessions",))
    check(gen == [(2,)], "odbc: the shutdown save is generation 2: %s" % gen)
    # the same database through a bare connection string
    o2 = OpenSIPS(args, work, "odbc2", db_url="DRIVER=SQLite3;Database=" + db, journal=None)
    nodes.append(o2)
    o2.start()
    check("startup load (db_mode 2)" in o2.logtext(), "odbc: startup load:\n" + o2.tail())
    check(o2.sip("fetch", "late") == "hit:after-the-last-save", "odbc: the shutdown save")
    check(o2.sip("fetch", "user-alice") == "hit:a1", "odbc: user-alice after restart")
    check(o2.sip("counter", "hits") == "n:7", "odbc: a counter comes back as a counter")
    g = result(o2.mi("perf_get", ["bin"]), "odbc perf_get bin")
    check(g["value"] == "caf\u00e9\u00ff\u0001", "odbc: binary-safe round trip: %r" % g)
    g = result(o2.mi("perf_get", ["user-carol"]), "odbc perf_get ttl")
    check(3400 < g["ttl"] <= 3600, "odbc: TTL across the restart: %s" % g)
    st = result(o2.mi("perf_stats", ["sessions"]), "odbc perf_stats")
    check(st["collections"][0]["last_load_entries"] == 5 + nev,
          "odbc perf_stats last load: %s" % st)
    o2.stop()
    print("ok  odbc db_mode 2 (connection-string form): shutdown save, startup load, TTL, "
          "counter, binary value")


CLUSTER_MODS = r'''
socket = bin:127.0.0.1:@BIN_PORT@
loadmodule "proto_bin.so"
loadmodule "clusterer.so"
modparam("clusterer", "db_mode", 0)
modparam("clusterer", "my_node_id", @NODE_ID@)
modparam("clusterer", "my_node_info", "cluster_id=1, url=bin:127.0.0.1:@BIN_PORT@")
@NEIGHBORS@
modparam("clusterer", "ping_interval", 1)
'''


def neighbor(node_id, bin_port):
    return ('modparam("clusterer", "neighbor_node_info", "cluster_id=1, node_id=%d, '
            'url=bin:127.0.0.1:%d")' % (node_id, bin_port))


def bin_notice(coll, gen, source, cluster_id, src_id, dst_id):
    """A cachedb-perf-sync notice as the module's push builds it (README,
    "Cluster sync"), with the clusterer's trailer: what a forger on the
    cluster's network could send."""
    def s(b):
        return struct.pack("<H", len(b)) + b
    cap = b"cachedb-perf-sync"
    body = (struct.pack("<h", 1) + s(cap) + struct.pack("<i", 1) +
            s(coll.encode()) + s(str(gen).encode()) + s(source.encode()) +
            struct.pack("<iii", cluster_id, src_id, dst_id))
    return b"P4CK" + struct.pack("<I", 8 + len(body)) + body


def send_bin(port, data):
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    c.sendall(data)
    time.sleep(0.3)
    c.close()


def coll_stats(node, coll):
    return result(node.mi("perf_stats", [coll]), "perf_stats " + coll)["collections"][0]


def entries(node, coll="sessions"):
    """Every key of a collection with its value and TTL, over MI."""
    d = result(node.mi("perf_dump", ["*", coll, 100000]), "perf_dump " + coll)
    return {e["key"]: (e["value"], e["ttl"]) for e in d["entries"]}


def same_entries(a, b, what, skip=(), slack=2):
    """a and b hold the same keys and values, and TTLs within slack seconds
    (the two dumps are taken a moment apart)."""
    ea = {k: v for k, v in a.items() if k not in skip}
    eb = {k: v for k, v in b.items() if k not in skip}
    check(set(ea) == set(eb), "%s: keys differ: only on the authority %s, only on the replica %s"
          % (what, sorted(set(ea) - set(eb))[:10], sorted(set(eb) - set(ea))[:10]))
    for k, (v, ttl) in ea.items():
        v2, ttl2 = eb[k]
        check(v == v2, "%s: %s = %r on the authority, %r on the replica" % (what, k, v, v2))
        check((ttl == -1) == (ttl2 == -1) and abs(ttl - ttl2) <= slack,
              "%s: %s TTL %s on the authority, %s on the replica" % (what, k, ttl, ttl2))


def wait_for(cond, timeout, step=0.005):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return time.time() - t0
        time.sleep(step)
    return None


def logged(node, text, timeout=5):
    """Whether node's log says text within timeout: a node's state can be
    seen (MI, the stats) before the line its process writes about it, and
    on a loaded machine that process may be descheduled in between."""
    return wait_for(lambda: text in node.logtext(), timeout, 0.02) is not None


# How long a clusterer link may take to come up: the nodes ping every
# second (ping_interval 1) and a link is Up after a ping and its reply; on
# a loaded 2-core machine a first attempt can be lost to a peer still
# starting. A state is waited for, never a time: a healthy run waits 1-3 s.
LINK_DEADLINE = 120


def links_up(node):
    """node_id -> True for every peer whose link clusterer_list reports as
    Up and enabled (MI, parsed: not a substring match)."""
    rep = node.mi("clusterer_list")
    up = {}
    for cl in rep.get("result", {}).get("Clusters", []):
        for n in cl.get("Nodes", []):
            up[n.get("node_id")] = n.get("link_state") == "Up" and n.get("state") == "enabled"
    return up


def wait_links(nodes, peers, what):
    """Waits (LINK_DEADLINE) until each node sees `peers` peers with their
    link Up; fails with every node's clusterer_list otherwise."""
    t = wait_for(lambda: all(sum(links_up(n).values()) >= peers for n in nodes),
                 LINK_DEADLINE, 0.2)
    check(t is not None, "%s: the clusterer links did not come up in %d s:\n%s"
          % (what, LINK_DEADLINE,
             "\n".join("%s: %s" % (n.name, json.dumps(n.mi("clusterer_list"))) for n in nodes)))
    return t


def start_pg(work):
    """A private PostgreSQL on 127.0.0.1 (tests/support/odbc_servers.sh, the ODBC
    tests' helper; a watcher stops it and removes its directory once this
    test is gone, however it ends). Returns (connection string, password,
    directory) or None with the reason printed."""
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "odbc_servers.sh")
    d = tempfile.mkdtemp(prefix="pcache-e2e-pg-")
    port = free_port(socket.SOCK_STREAM)
    subprocess.Popen(["setsid", "sh", helper, "watch", d, str(os.getpid())],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    r = subprocess.run(["sh", helper, "start", d, str(port)], capture_output=True, text=True)
    if r.returncode != 0:
        SKIPPED.append("cluster sync on PostgreSQL: %s"
                       % (r.stderr.strip() or "odbc_servers.sh exited %d" % r.returncode))
        print("SKIPPED: " + SKIPPED[-1])
        return None
    pw = "s3cret-PW-odbc"
    cs = ("DRIVER={PostgreSQL Unicode};Servername=127.0.0.1;Port=%d;Database=pcachetest;"
          "UID=pcache;PWD=%s" % (port, pw))
    return cs, pw, d


def run_sync(args, work, cap, nodes):
    """perf_sync over clusterer: two OpenSIPS nodes in one clusterer cluster
    (proto_bin, db-less clusterer) sharing one SQL database through ODBC (an
    SQLite file, then a private PostgreSQL); a third node without clusterer
    converges by the poll. Returns False when the part is skipped."""
    missing = [m for m in ("clusterer", "proto_bin") if not has_module(args.mpath, m)]
    if missing:
        SKIPPED.append("cluster sync part: the OpenSIPS module(s) %s are not built/installed "
                       "under %s (build them in the OpenSIPS tree: make modules=modules/<name>)"
                       % (", ".join(m + ".so" for m in missing), args.mpath))
        print("SKIPPED: " + SKIPPED[-1])
        return False
    run_pull(args, work, cap, nodes)
    run_sync_on(args, work, cap, nodes, "sqlite",
                "DRIVER=SQLite3;Database=" + os.path.join(work, "cluster.sqlite"))
    pg = start_pg(work)
    if pg is not None:
        cs, pw, d = pg
        run_sync_on(args, work, Capture(""), nodes, "postgresql", cs)
        for n in nodes:
            check(pw not in n.logtext(), "%s: the database password is in the log" % n.name)
        subprocess.run(["sh", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "..", "support", "odbc_servers.sh"), "stop", d],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)
    return True


PULL_TIMEOUT_MS = 300


def pull_stats(node):
    st = result(node.mi("get_statistics", [["cachedb_perf:"]]), node.name + " get_statistics")
    return {k.split(":", 1)[1]: v for k, v in st.items()}


def run_pull(args, work, cap, nodes):
    """Cross-node pull-on-miss over clusterer (README "Cross-node pull"):
    three nodes in one cluster, full mesh. A key stored on one node is
    served on another through a pull and then is a local hit; a key held
    nowhere is asked once and then answered by the negative cache; a third
    node pulls by MI; a value over pull_max_value is "held, too big"; with
    a peer down the pull still serves; a stopped (SIGSTOP) peer makes the
    pull time out within pull_timeout_ms, its late answer is still stored,
    and a late answer that comes after the slot was reaped is dropped;
    no slot is left in use."""
    print("--  cross-node pull")
    ids = {"A": 1, "B": 2, "C": 3}
    bins = {n: free_port(socket.SOCK_STREAM) for n in ids}

    def node(name):
        neigh = "\n".join(neighbor(ids[o], bins[o]) for o in ids if o != name)
        mods = (CLUSTER_MODS.replace("@BIN_PORT@", str(bins[name]))
                .replace("@NODE_ID@", str(ids[name])).replace("@NEIGHBORS@", neigh))
        params = "\n".join('modparam("cachedb_perf", "%s", %s)' % kv for kv in (
            ("sync_cluster_id", "1"), ("sync_poll_period", "0"),
            ("replicate_collections", '"sessions"'), ("pull_on_miss", "1"),
            ("pull_timeout_ms", str(PULL_TIMEOUT_MS)), ("pull_negative_ms", "1500"),
            ("pull_max_value", "512"), ("pull_slots", "8")))
        return OpenSIPS(args, work, "pull" + name,
                        db_url="lmdb://" + os.path.join(work, "pull-store-" + name),
                        journal=None, extra_mods=mods, extra_params=params, db_mode=0)

    a, b, c = node("A"), node("B"), node("C")
    for n in (a, b, c):
        nodes.append(n)
        n.start()
        check("cross-node pull: capability cachedb-perf-pull" in n.logtext(),
              "%s: the pull is announced at startup:\n%s" % (n.name, n.tail()))

    wait_links((a, b, c), 2, "the three-node mesh")

    # a key stored on A is served on B through a pull, then is B's own
    check(a.sip("store", "pk-1", "value-1", ttl=600) == "stored", "A: store pk-1")
    b0 = pull_stats(b)
    t0 = time.time()
    r = b.sip("fetch", "pk-1")
    took = time.time() - t0
    check(r == "hit:value-1", "B serves A's key through a pull: %s" % r)
    b1, a1 = pull_stats(b), pull_stats(a)
    check(b1["pull_requested"] == b0["pull_requested"] + 1 and b1["pulled_in_sessions"] == 1 and
          a1["served_out_sessions"] == 1 and a1["pull_served"] == 1,
          "pull counters: B %s, A %s" % (b1, a1))
    check(b.sip("fetch", "pk-1") == "hit:value-1" and
          pull_stats(b)["pull_requested"] == b1["pull_requested"],
          "the second read on B is a local hit (no new pull)")
    g = result(b.mi("perf_get", ["pk-1", "sessions"]), "B perf_get pk-1")
    check(590 <= g["ttl"] <= 600, "the pulled key kept its remaining TTL: %s" % g)
    print("ok  pull: A's key served on B in %.1f ms, stored with its TTL (%d s), then a local hit"
          % (took * 1000, g["ttl"]))

    # a key held nowhere: asked once (both peers answer "not here", so the
    # wait ends early), then the negative cache answers
    t0 = time.time()
    check(b.sip("fetch", "nowhere") == "miss", "B: a key held nowhere is a miss")
    took = time.time() - t0
    b2 = pull_stats(b)
    check(b.sip("fetch", "nowhere") == "miss", "B: again")
    b3 = pull_stats(b)
    check(b3["pull_requested"] == b2["pull_requested"] and
          b3["pull_negative_hits"] == b2["pull_negative_hits"] + 1,
          "the second miss is a negative-cache hit, no new pull: %s -> %s" % (b2, b3))
    check(took < PULL_TIMEOUT_MS / 1000.0, "every peer said not here: the wait ended early "
          "(%.1f ms, timeout %d ms)" % (took * 1000, PULL_TIMEOUT_MS))
    print("ok  pull: a key held nowhere answered by both peers in %.1f ms, then by the negative "
          "cache" % (took * 1000))

    # get_buf on a miss pulls as get() does: a buffer too small gets -3 with
    # *needed (the pulled value is stored here), then it is a local hit
    if (core_has_get_buf(args.src) if args.src else None) == 1:
        check(a.sip("store", "pk-buf", "value-buf-12", ttl=600) == "stored", "A: store pk-buf")
        s0 = pull_stats(b)
        r = b.sip("fetch_buf", "pk-buf", "4")
        check(r == "rc=-3 vlen=0 needed=12 val=", "B get_buf, 4-byte buffer, pulled: %s" % r)
        s1 = pull_stats(b)
        check(s1["pull_requested"] == s0["pull_requested"] + 1, "get_buf asked the cluster once")
        r = b.sip("fetch_buf", "pk-buf", "12")
        check(r == "rc=0 vlen=12 needed=0 val=value-buf-12", "B get_buf after the pull: %s" % r)
        check(pull_stats(b)["pull_requested"] == s1["pull_requested"],
              "get_buf after the pull is a local hit (no new pull)")
        r = b.sip("fetch_buf", "nowhere-buf", "64")
        check(r == "rc=-2 vlen=0 needed=0 val=", "B get_buf of a key held nowhere: %s" % r)
        print("ok  pull: get_buf on a miss pulled A's key (-3, needed 12), then a local hit; "
              "a key held nowhere -2")

    # three nodes: C pulls by MI (pull_on_miss is not needed for perf_pull)
    r_mi = result(cap.mi(c, "cachedb_perf:perf_pull", ["pk-1", "sessions"]), "C perf_pull")
    check(r_mi["outcome"] == "served" and r_mi["value"] == "value-1" and
          r_mi["source"] in (1, 2), "C pulls pk-1 by MI: %s" % r_mi)
    pr = result(cap.mi(c, "cachedb_perf:perf_cluster_probe", ["sessions"]), "C probe")
    check(pr["peers_reachable"] == 2 and sorted(pr["replicating"]) == [1, 2],
          "C's probe: both peers replicate sessions: %s" % pr)
    e = error(c.mi("perf_pull", ["pk-1", "default"]), "perf_pull on a local collection")
    check(e["code"] == 400 and "not active" in e["message"], "perf_pull default: %s" % e)
    # a value over pull_max_value: held, but not carried
    check(a.sip("store", "pk-big", "x" * 600, ttl=600) == "stored", "A: store pk-big")
    r = result(c.mi("perf_pull", ["pk-big", "sessions"]), "C perf_pull pk-big")
    check(r["outcome"] == "held-too-big", "a value over pull_max_value: %s" % r)
    print("ok  pull: C pulled by MI from node %d; probe %s; a 600-byte value is held-too-big"
          % (r_mi["source"], pr["replicating"]))

    # a peer down: the pull still serves from the other
    for n in (a, b):  # the core's, while C is down: its BIN port refuses
        n.allow_error("tcp_connect_blocking_timeout", "tcp_sync_connect_fd",
                      "tcp_blocking_connect")
    c.stop()
    check(a.sip("store", "pk-2", "value-2", ttl=0) == "stored", "A: store pk-2")
    check(b.sip("fetch", "pk-2") == "hit:value-2", "B pulls with C down")
    print("ok  pull: served with a peer down")

    # a stopped peer: the pull times out within the bound, the late answer
    # is still stored and frees the slot
    check(a.sip("store", "pk-slow", "value-slow", ttl=0) == "stored", "A: store pk-slow")
    wait_for(lambda: json.dumps(b.mi("clusterer_list")).count('"Down"') >= 1, 10, 0.2)
    os.killpg(a.proc.pid, signal.SIGSTOP)
    try:
        s0 = pull_stats(b)
        t0 = time.time()
        r = b.sip("fetch", "pk-slow")
        took = time.time() - t0
        s1 = pull_stats(b)
    finally:
        time.sleep(0.2)
        os.killpg(a.proc.pid, signal.SIGCONT)
    check(r == "miss" and PULL_TIMEOUT_MS / 1000.0 * 0.9 <= took <= PULL_TIMEOUT_MS / 1000.0 + 0.25,
          "a stopped peer: miss after the timeout (%s in %.0f ms)" % (r, took * 1000))
    check(s1["pull_timeouts"] == s0["pull_timeouts"] + 1 and s1["pull_slots_in_use"] == 1,
          "the timed-out slot waits for a late answer: %s" % s1)
    t = wait_for(lambda: pull_stats(b)["pull_late_stored"] == s0["pull_late_stored"] + 1, 5, 0.05)
    s2 = pull_stats(b)
    check(t is not None and s2["pull_slots_in_use"] == 0,
          "the late answer was stored and freed the slot: %s" % s2)
    check(b.sip("fetch", "pk-slow") == "hit:value-slow" and
          pull_stats(b)["pull_requested"] == s2["pull_requested"],
          "the late answer is a local hit now")
    print("ok  pull: a stopped peer timed out in %.0f ms (timeout %d); its late answer was "
          "stored and the slot freed" % (took * 1000, PULL_TIMEOUT_MS))

    # a late answer that comes after the slot was reaped: dropped, no leak
    os.killpg(a.proc.pid, signal.SIGSTOP)
    try:
        s0 = pull_stats(b)
        check(b.sip("fetch", "pk-never") == "miss", "B: a miss while A is stopped")
        t = wait_for(lambda: pull_stats(b)["pull_slots_in_use"] == 0, 5, 0.1)
        check(t is not None, "the reaper freed the orphaned slot: %s" % pull_stats(b))
    finally:
        os.killpg(a.proc.pid, signal.SIGCONT)
    t = wait_for(lambda: pull_stats(b)["pull_late_dropped"] >= s0["pull_late_dropped"] + 1, 5,
                 0.05)
    s3 = pull_stats(b)
    check(t is not None and s3["pull_slots_in_use"] == 0,
          "the answer after the reap was dropped, no slot in use: %s" % s3)
    for n in (a, b):
        check(pull_stats(n)["pull_slots_in_use"] == 0, "%s: no slot left in use" % n.name)
    print("ok  pull: an answer after the reap dropped (late_dropped %d), no slot left in use"
          % s3["pull_late_dropped"])
    for n in (a, b):
        n.stop()


def run_sync_on(args, work, cap, nodes, label, db_url):
    print("--  cluster sync on %s" % label)
    poll = 1
    ports = {n: (free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)) for n in "ABC"}
    bins = {n: free_port(socket.SOCK_STREAM) for n in "AB"}

    # replicas load at startup (db_mode 1) and never save at shutdown: only
    # the authority writes the shared database
    def cluster_node(name, nid, peer, node_poll, suffix=""):
        mods = (CLUSTER_MODS.replace("@BIN_PORT@", str(bins[name]))
                .replace("@NODE_ID@", str(nid)).replace("@NEIGHBORS@", neighbor(3 - nid, bins[peer])))
        # one sharing tag, active on node 1: moving it moves the cache (sync_shtag)
        mods += ('modparam("clusterer", "sharing_tag", "vip/1=%s")\n'
                 % ("active" if nid == 1 else "backup"))
        params = ('modparam("cachedb_perf", "sync_cluster_id", 1)\n'
                  'modparam("cachedb_perf", "sync_shtag", "vip/1")\n'
                  'modparam("cachedb_perf", "sync_poll_period", %d)' % node_poll)
        return OpenSIPS(args, work, label + name + suffix, db_url=db_url, journal=None,
                        extra_mods=mods, extra_params=params, ports=ports[name], db_mode=1)

    # the clustered nodes do not poll: what reaches node 2 came by the push
    a, b = cluster_node("A", 1, "B", 0), cluster_node("B", 2, "A", 0)
    # C: sync_cluster_id set but no clusterer loaded (the soft dependency
    # absent): it hears no notice and converges by its poll
    c = OpenSIPS(args, work, label + "C", db_url=db_url, journal=None, ports=ports["C"], db_mode=1,
                 extra_params='modparam("cachedb_perf", "sync_cluster_id", 1)\n'
                              'modparam("cachedb_perf", "sync_poll_period", %d)' % poll)
    for n in (a, b, c):
        nodes.append(n)
        n.start()
    check("clusterer module is not loaded" in c.logtext(),
          "node C warns that clusterer is absent:\n" + c.tail())

    wait_links((a, b), 1, "clusterer link A<->B")
    caps = result(cap.mi(a, "clusterer_list_cap"), "clusterer_list_cap")
    check("cachedb-perf-sync" in json.dumps(caps), "capability listed: %s" % caps)

    # the authority writes: SIP-driven cache_store and MI perf_set, TTLs
    for i in range(40):
        check(a.sip("store", "sub-%d" % i, "contact-%d" % i, ttl=(0 if i % 2 else 600 + i))
              == "stored", "A: store")
    result(a.mi("perf_set", ["profile", "gold", 3600]), "A perf_set")
    check(a.sip("add", "calls", "42") == "n:42", "A: counter")
    # the replicas hold a key the snapshot lacks: the reload prunes it
    result(b.mi("perf_set", ["stale-on-b", "x"]), "B perf_set")
    result(c.mi("perf_set", ["stale-on-c", "x"]), "C perf_set")

    # ---- perf_sync over MI: B by the push, C by the poll
    t0 = time.time()
    sy = result(cap.mi(a, "cachedb_perf:perf_sync", {"collection": "sessions"}), "perf_sync")
    t_cmd = time.time() - t0
    gen = sy["generation"]
    check(gen >= 1 and sy["peers"] == 1 and sy["saved"] >= 42 and "note" not in sy,
          "perf_sync pushed to node 2: %s" % sy)
    tb = wait_for(lambda: coll_stats(b, "sessions")["generation"] == gen, 5)
    tb = tb if tb is None else time.time() - t0
    check(tb is not None and tb < 1.0,
          "node B converged by the clusterer push in %s s (limit 1 s)" % tb)
    check(logged(b, "generation %d (from node 1, pushed)" % gen),
          "node 2 reloaded on the push:\n" + b.tail(5))
    ea = entries(a)
    same_entries(ea, entries(b), "node B after the push")
    sb = coll_stats(b, "sessions")
    check(sb["source"] == "1" and sb["last_sync_in"] != 0, "B perf_stats sync facts: %s" % sb)
    check("stale-on-b" not in entries(b), "the reload pruned B's key the snapshot lacks")
    print("ok  perf_sync (MI) on node 1: %s; node 2 converged by the push in %.0f ms "
          "(perf_sync took %.0f ms), every key and TTL equal, stale key pruned"
          % (json.dumps(sy), tb * 1000, t_cmd * 1000))
    tc = wait_for(lambda: coll_stats(c, "sessions")["generation"] == gen, poll + 3)
    tc = tc if tc is None else time.time() - t0
    check(tc is not None and tc <= poll + 1.5,
          "node C (no clusterer) converged by the %d s poll in %s s" % (poll, tc))
    same_entries(ea, entries(c), "node C after the poll")
    check(logged(c, "generation %d (from node 1, polled)" % gen),
          "node C reloaded by its poll:\n" + c.tail(5))
    print("ok  node 3 (no clusterer link) converged by the %d s poll in %.0f ms"
          % (poll, tc * 1000))
    # the synced event, on the replicas only
    t = wait_for(lambda: b.sip("group_fetch", "ev-synced") != "miss", 3, 0.1)
    check(t is not None and logged(b, "synced sessions from node 1"),
          "E_CACHEDB_PERF_SYNCED on node 2:\n" + b.tail())
    check(a.sip("group_fetch", "ev-synced") == "miss", "no synced event on the authority")
    stb = cap.mi(b, "cachedb_perf:perf_stats", {"collection": "sessions"})
    result(stb, "perf_stats B")

    # ---- perf_sync from the script (a SIP request on node 1)
    check(a.sip("store", "sub-0", "moved", ttl=0) == "stored", "A: update")
    check(a.sip("remove", "sub-1") == "removed", "A: remove")
    # a replica reads the database for notices at most once a second per
    # collection (the library's rate limit): stay clear of it to time the push
    time.sleep(1.1)
    t0 = time.time()
    check(a.sip("sync") == "sync-queued", "A: perf_sync() from the script")
    ta2 = wait_for(lambda: coll_stats(a, "sessions")["generation"] > gen, 5)
    ta2 = ta2 if ta2 is None else time.time() - t0
    tb2 = wait_for(lambda: coll_stats(b, "sessions")["generation"] > gen, 5)
    tb2 = tb2 if tb2 is None else time.time() - t0
    check(ta2 is not None, "the script's perf_sync ran on node 1")
    # from the SIP reply: the maintenance process's first save on this
    # database may have to connect (psqlODBC with SCRAM takes a while);
    # the push itself is timed from the commit on node 1
    check(tb2 is not None and tb2 - ta2 < 1.0 and tb2 < 3.0,
          "node B converged %s s after the commit of the script's perf_sync (limit 1 s), %s s "
          "after the SIP request" % (tb2 - ta2 if tb2 else None, tb2))
    gen2 = coll_stats(b, "sessions")["generation"]
    check(logged(b, "generation %d (from node 1, pushed)" % gen2),
          "the script's perf_sync reached node 2 by the push:\n" + b.tail(5))
    eb = entries(b)
    check(eb.get("sub-0", ("",))[0] == "moved" and "sub-1" not in eb,
          "B has the update and the removal: %s" % {k: eb.get(k) for k in ("sub-0", "sub-1")})
    same_entries(entries(a), eb, "node B after the script's perf_sync")
    print("ok  perf_sync() from the script on node 1 (committed by its maintenance process "
          "%.0f ms after the SIP request): node 2 converged %.0f ms after the commit was seen, %.0f ms "
          "after the request (update and removal)" % (ta2 * 1000, (tb2 - ta2) * 1000, tb2 * 1000))

    # ---- a replayed and a forged notice change nothing
    result(b.mi("perf_set", ["local-only", "kept"]), "B perf_set local-only")
    t_before = time.time()
    before = entries(b)
    st0 = coll_stats(b, "sessions")
    send_bin(bins["B"], bin_notice("sessions", gen2, "1", 1, 1, 2))       # replay
    send_bin(bins["B"], bin_notice("sessions", 10 ** 15, "1", 1, 1, 2))   # forged, huge
    send_bin(bins["B"], bin_notice("nosuch", 10 ** 15, "1", 1, 1, 2))     # unknown collection
    time.sleep(1.5)
    st1 = coll_stats(b, "sessions")
    after = entries(b)
    same_entries(before, after, "node 2 after forged/replayed notices",
                 slack=int(time.time() - t_before) + 2)
    check(st1["generation"] == gen2 and st1["sync_reloads"] == st0["sync_reloads"],
          "forged notice: generation %s -> %s, reloads %s -> %s"
          % (st0["generation"], st1["generation"], st0["sync_reloads"], st1["sync_reloads"]))
    keys = ("sync_notices", "sync_checks", "sync_polls", "sync_rejected")
    check(st1["sync_notices"] == st0["sync_notices"] + 1 and
          st1["sync_rejected"] == st0["sync_rejected"] + 1,
          "the forged notice was heard once and rejected by the database: %s -> %s"
          % ({k: st0[k] for k in keys}, {k: st1[k] for k in keys}))
    check(st1["sync_checks"] - st0["sync_checks"] <=
          1 + (st1["sync_polls"] - st0["sync_polls"]),
          "a forged notice costs at most one database read beyond the polls: %s -> %s"
          % ({k: st0[k] for k in keys}, {k: st1[k] for k in keys}))
    check(logged(b, "nosuch"), "the unknown collection's notice was logged")
    print("ok  a replayed and a forged notice (generation 10^15) changed nothing on node 2: "
          "generation %d, notices +1, rejected +1" % gen2)

    # ---- sync_shtag: the tag moved to node 2 (a graceful failover) moves the
    # cache: node 1, turned backup, saves and pushes; node 2 reloads
    check(a.sip("store", "shtag-moved", "with-the-tag", ttl=0) == "stored", "A: store")
    g0 = coll_stats(b, "sessions")["generation"]
    t0 = time.time()
    result(b.mi("clusterer_shtag_set_active", ["vip/1"]), "B clusterer_shtag_set_active vip/1")
    ts = wait_for(lambda: coll_stats(b, "sessions")["generation"] > g0, 30, 0.05)
    check(ts is not None, "node 2 reloaded after the sharing tag moved to it:\n%s\n%s"
          % (a.tail(8), b.tail(8)))
    check(logged(a, "sync_shtag vip/1 is now backup: perf_sync") and
          logged(b, "sync_shtag vip/1 is now active"),
          "the tag's callbacks ran on both nodes:\n%s\n%s" % (a.tail(5), b.tail(5)))
    eb = entries(b)
    check(eb.get("shtag-moved", ("",))[0] == "with-the-tag" and "local-only" not in eb,
          "node 2 holds node 1's key stored before the failover: %r" % (eb.get("shtag-moved"),))
    same_entries(entries(a), eb, "node 2 after the sharing tag moved")
    gen2 = coll_stats(b, "sessions")["generation"]
    print("ok  sync_shtag: the tag moved to node 2; node 1 (now backup) saved and pushed, node 2 "
          "reloaded generation %d in %.0f ms" % (gen2, ts * 1000))

    # ---- node 2, restarted with a 1 s poll, drops the cluster's packets
    # (clusterer_set_status disabled): the push is lost, the poll converges it
    for n in (a, c):  # the core's, while node 2 is down: its BIN port refuses
        n.allow_error("tcp_connect_blocking_timeout", "tcp_sync_connect_fd",
                      "tcp_blocking_connect")
    b.stop()
    b = cluster_node("B", 2, "A", poll, suffix="2")
    nodes.append(b)
    b.start()
    check(coll_stats(b, "sessions")["generation"] == gen2 and
          "local-only" not in entries(b), "node 2 restarted with the database's generation %d "
          "(db_mode 1 startup load)" % gen2)
    result(b.mi("clusterer_set_status", [1, 0]), "B clusterer_set_status")
    check(a.sip("store", "after-link-down", "polled-in", ttl=0) == "stored", "A: store")
    t0 = time.time()
    sy = result(a.mi("perf_sync", ["sessions"]), "perf_sync, B's link down")
    tb3 = wait_for(lambda: coll_stats(b, "sessions")["generation"] == sy["generation"], poll + 3)
    tb3 = tb3 if tb3 is None else time.time() - t0
    check(tb3 is not None and tb3 <= poll + 1.5,
          "node 2 with its link down converged by the %d s poll in %s s" % (poll, tb3))
    check(logged(b, "generation %d (from node 1, polled)" % sy["generation"]),
          "node 2 reloaded by its poll, not the push:\n" + b.tail(5))
    same_entries(entries(a), entries(b), "node 2 after the poll")
    print("ok  node 2 with its clusterer link disabled (perf_sync said peers=%d): converged by "
          "the %d s poll in %.0f ms" % (sy["peers"], poll, tb3 * 1000))
    for n in (a, b, c):
        n.stop()


def sv_all_saved(sv_all, sv):
    return sv["saved"]


def has_module(mpath, m):
    """OpenSIPS loads <mpath>/<m>.so (an install) or <mpath>/<m>/<m>.so (a
    source tree), as its loadmodule does."""
    return (os.path.exists(os.path.join(mpath, m + ".so")) or
            os.path.exists(os.path.join(mpath, m, m + ".so")))


_ALLOC_CACHE = {}


def default_allocator(binary):
    """The -a a tree's binary needs to start at all: a tree built without
    DBG_MALLOC (a release build: Makefile.conf's DBG_MALLOC line commented
    out) still picks Q_MALLOC_DBG by default and exits at once ("current
    build does not include support for selected allocator"), even for -V.
    Returns None when the binary starts with its default, else "F_MALLOC"
    (OpenSIPS's production allocator), probed once per binary."""
    if binary in _ALLOC_CACHE:
        return _ALLOC_CACHE[binary]
    alloc = None
    try:
        r = subprocess.run([binary, "-V"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0 and "does not include support for selected allocator" in (
                r.stdout + r.stderr):
            alloc = "F_MALLOC"
            print("-- %s: built without DBG_MALLOC, started with -a F_MALLOC" % binary,
                  flush=True)
    except (OSError, subprocess.SubprocessError):
        pass
    _ALLOC_CACHE[binary] = alloc
    return alloc


def resolve_opensips(args):
    """The binary and module path, looked up now (not when the build was
    configured, so an OpenSIPS installed or built after that is found):
    explicit --opensips / --mpath first, then --prefix (an install:
    sbin/opensips, lib*/opensips/modules), then --src (a built tree:
    ./opensips, modules/)."""
    binary, mpath = args.opensips, args.mpath
    if args.prefix:
        binary = binary or os.path.join(args.prefix, "sbin", "opensips")
        if not mpath:
            for d in ("lib64", "lib", "lib/x86_64-linux-gnu"):
                cand = os.path.join(args.prefix, d, "opensips", "modules")
                if os.path.isdir(cand):
                    mpath = cand + "/"
                    break
    if args.src:
        binary = binary or os.path.join(args.src, "opensips")
        mpath = mpath or os.path.join(args.src, "modules") + "/"
    args.opensips, args.mpath = binary, mpath


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opensips", default="")
    ap.add_argument("--mpath", default="")
    ap.add_argument("--prefix", default="", help="an installed OpenSIPS 4.x (its prefix)")
    ap.add_argument("--src", default="", help="a built OpenSIPS 4.x source tree")
    ap.add_argument("--module", default="")
    ap.add_argument("--bench-module", default="",
                    help="cdbbench.so, built next to the module (drives the cachedb vtable)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--capture", default="")
    ap.add_argument("--skip-reason", default="")
    ap.add_argument("--guide", default="", help="admin guide whose MI replies to check")
    ap.add_argument("--only", default=ALL_PARTS,
                    help="comma-separated parts to run: lmdb,odbc (the main part), sync "
                         "(the cluster part)")
    args = ap.parse_args()
    resolve_opensips(args)
    if not args.bench_module and args.module:
        args.bench_module = os.path.join(os.path.dirname(args.module), "cdbbench.so")
    why = None
    if args.skip_reason:
        why = args.skip_reason
    elif not args.module or not os.path.exists(args.module):
        why = ("the cachedb_perf module is not built: configure with "
               "-DOPENSIPS_SRC=/path/to/a/built/opensips-4.x/tree")
    elif not os.path.exists(args.bench_module):
        why = "cdbbench.so is not built next to the module (%s)" % args.bench_module
    elif not args.opensips or not os.access(args.opensips, os.X_OK):
        why = "no OpenSIPS binary (set PCACHE_OPENSIPS_PREFIX or build the OPENSIPS_SRC tree)"
    else:
        for m in ("sl", "sipmsgops", "httpd", "mi_http"):
            if not has_module(args.mpath, m):
                why = "OpenSIPS module %s.so not found under %s" % (m, args.mpath)
                break
    if why:
        print("SKIPPED: opensips_e2e: " + why)
        return SKIP
    try:
        run(args)
    except AssertionError as ex:
        print("FAIL: %s" % ex)
        return 1
    if SKIPPED:
        print("SKIPPED: opensips_e2e --only %s: %d checks passed, but not run: %s"
              % (args.only, CHECKS, "; ".join(SKIPPED)))
        return SKIP
    print("PASS: opensips_e2e --only %s: %d checks" % (args.only, CHECKS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
