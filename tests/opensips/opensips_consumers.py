#!/usr/bin/python3
"""OpenSIPS modules that take a cachedb_url, end to end on perf:// with only
the URL changed, under sipp on loopback.

Parts (--only, comma-separated):
  th        topology_hiding with th_state_url (dialog-less calls with
            session timers, so the state lives in the cache, not the
            Contact): sipp calls at a fixed rate, every ACK and BYE routed by
            the stored state; no failed call, and the states are in the
            cache. Needs a topology_hiding with th_state_url (OpenSIPS pull
            request 4114).
  dialog    dialog shared profiles (/s) over cachedb_url: counts exact across
            4 SIP workers while calls are up, after a restart with the
            module's persistence on (dialog db_mode 1 on SQLite), and new
            calls after that restart counted and uncounted exactly.
  ratelimit a cachedb-backed TAILDROP pipe ("pcache/r"): exactly `limit` of a burst
            let through across the workers, the stored counter exact.
  sqlcacher sql_cacher over SQLite: full and on-demand caching, a reload
            after the table changed.
  dnscache  dns_cache: a failed lookup cached (negative caching) and served
            from the cache on the next lookup.

--backend selects the cache under the consumers (perf, the default; local,
redis - a private redis-server - or orig, the original module of OpenSIPS
pull request 4118 given by --orig-src) so the same checks run on each.
--cps-search is the by-hand benchmark: the highest topology-hiding CPS held
for --hold-seconds with no failed call (bench/opensips_th_cps.sh runs it for
every backend).

Exit status: 0 pass, 1 fail, 77 skipped with the reason (a module, sipp or
the OpenSIPS tree missing; also when only some parts could run).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opensips_e2e import (check, default_allocator, free_port, has_module,  # noqa: E402
                          resolve_opensips, wait_for)

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SIPP_DIR = os.path.join(HERE, "sipp")
ALL_PARTS = "th,dialog,ratelimit,sqlcacher,dnscache"
SKIPPED = []
# the cachedb module each backend loads
BACKEND_MOD = {"perf": None, "orig": None, "local": "cachedb_local",
               "localdef": "cachedb_local", "redis": "cachedb_redis"}

HEAD = r'''
log_level = 2
stderror_enabled = yes
syslog_enabled = no
udp_workers = @WORKERS@
socket = udp:127.0.0.1:@SIP_PORT@
mpath = "@MPATH@"
@PROTO_UDP@
loadmodule "sl.so"
loadmodule "tm.so"
loadmodule "maxfwd.so"
loadmodule "sipmsgops.so"
loadmodule "httpd.so"
modparam("httpd", "ip", "127.0.0.1")
modparam("httpd", "port", @MI_PORT@)
loadmodule "mi_http.so"
'''


class Node:
    """One OpenSIPS: a config written from HEAD + body, started in the
    foreground, stopped by SIGTERM; any ERROR line not expected fails."""

    # the shm/pkg allocator (-a); None: the build's default
    allocator = None

    def __init__(self, binary, mpath, work, name, body, workers=4, shm_mb=256):
        self.binary, self.work, self.name = binary, work, name
        self.sip_port = free_port(socket.SOCK_DGRAM)
        self.mi_port = free_port(socket.SOCK_STREAM)
        self.cfg = os.path.join(work, name + ".cfg")
        self.log = os.path.join(work, name + ".log")
        self.shm_mb = shm_mb
        text = (HEAD + body).replace("@WORKERS@", str(workers)) \
            .replace("@SIP_PORT@", str(self.sip_port)).replace("@MI_PORT@", str(self.mi_port)) \
            .replace("@MPATH@", mpath) \
            .replace("@PROTO_UDP@", 'loadmodule "proto_udp.so"'
                     if True else "")
        with open(self.cfg, "w") as f:
            f.write(text)
        self.proc = None
        self.seq = 0
        self.expected_errors = []

    def start(self):
        logf = open(self.log, "w")
        alloc = self.allocator or default_allocator(self.binary)
        self.proc = subprocess.Popen(
            [self.binary, "-F", "-f", self.cfg, "-w", self.work,
             "-m", str(self.shm_mb), "-M", "16"]
            + (["-a", alloc] if alloc else []),
            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("%s exited with %s during startup:\n%s"
                                     % (self.name, self.proc.returncode, self.tail()))
            try:
                st = self.mi("sr_get_status", {"group": "core"}).get("result", {})
                if st.get("Status") == 1:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("%s: not running after 60 s:\n%s" % (self.name, self.tail()))

    def tail(self, n=40):
        with open(self.log, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        # in a finally: while a failure propagates, its own message is the
        # one to report, not the log lines it caused
        failing = sys.exc_info()[0] is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError("%s did not stop within 60 s of SIGTERM" % self.name)
        if failing:
            return
        with open(self.log, errors="replace") as f:
            bad = [ln.rstrip() for ln in f if ("ERROR:" in ln or "CRITICAL:" in ln)
                   and not any(e in ln for e in self.expected_errors)]
        check(not bad, "%s: unexpected ERROR/CRITICAL lines in the OpenSIPS log:\n%s"
              % (self.name, "\n".join(bad[:20])))

    def mi(self, method, params=None):
        self.seq += 1
        req = {"jsonrpc": "2.0", "method": method, "id": self.seq}
        if params is not None:
            req["params"] = params
        r = urllib.request.Request("http://127.0.0.1:%d/mi" % self.mi_port,
                                   data=json.dumps(req).encode(),
                                   headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(r, timeout=30) as resp:
            return json.loads(resp.read().decode())

    def result(self, method, params=None):
        rep = self.mi(method, params)
        check("result" in rep, "%s: MI %s %s: %s" % (self.name, method, params, rep))
        return rep["result"]

    def stat(self, name):
        res = self.result("get_statistics", {"statistics": [name]})
        return int(next(iter(res.values())))


class Backend:
    """The cache under the consumers: its loadmodule lines and a URL per
    collection. Only the URL differs between backends in the consumers'
    own parameters."""

    def __init__(self, args, work, kind, colls, persist=None):
        self.args, self.work, self.kind, self.colls = args, work, kind, colls
        self.persist = persist
        self.redis = None
        self.redis_port = None

    def url(self, coll):
        if self.kind in ("perf", "orig"):
            return "perf:///" + coll
        if self.kind in ("local", "localdef"):
            return "local:///" + coll
        return "redis://127.0.0.1:%d/" % self.redis_port

    def modules(self):
        if self.kind in ("perf", "orig"):
            mod = self.args.module if self.kind == "perf" else "cachedb_perf.so"
            decl = "; ".join(self.colls)
            s = ('loadmodule "%s"\nmodparam("cachedb_perf", "cache_collections", "%s")\n'
                 % (mod, decl))
            if self.kind == "perf":
                s += 'modparam("cachedb_perf", "cache_mem_mb", %d)\n' % self.args.cache_mb
            if self.persist and self.kind == "orig":
                # the original persists through a db_* module (db_sqlite, which
                # the dialog part loads), into its documented table
                s += ('modparam("cachedb_perf", "db_url", "sqlite://%s/perf.sqlite")\n'
                      'modparam("cachedb_perf", "db_mode", 2)\n'
                      'modparam("cachedb_perf", "persist_collections", "%s")\n'
                      % (self.persist[0], self.persist[1]))
            elif self.persist:
                s += ('modparam("cachedb_perf", "db_url", "lmdb://%s")\n'
                      'modparam("cachedb_perf", "db_mode", 2)\n'
                      'modparam("cachedb_perf", "persist_collections", "%s")\n'
                      % (self.persist[0], self.persist[1]))
            return s
        if self.kind in ("local", "localdef"):
            # localdef: the collections at cachedb_local's default size (2^9)
            colls = self.colls if self.kind == "local" else [c.split("=")[0] for c in self.colls]
            return ('loadmodule "cachedb_local.so"\n'
                    'modparam("cachedb_local", "cache_collections", "%s")\n'
                    % "; ".join(colls))
        return 'loadmodule "cachedb_redis.so"\n'

    def start(self):
        if self.kind == "orig" and self.persist:
            con = sqlite3.connect(os.path.join(self.persist[0], "perf.sqlite"))
            con.execute("CREATE TABLE IF NOT EXISTS cachedb_perf (collection TEXT, pkey TEXT, "
                        "pvalue BLOB, expires INTEGER)")
            con.commit()
            con.close()
        if self.kind != "redis":
            return
        self.redis_port = free_port(socket.SOCK_STREAM)
        d = os.path.join(self.work, "redis")
        os.makedirs(d, exist_ok=True)
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", d],
            stdout=open(os.path.join(d, "log"), "w"), stderr=subprocess.STDOUT,
            start_new_session=True)
        ok = wait_for(lambda: self.redis_cmd("PING") == "PONG", 30, 0.1)
        check(ok is not None, "redis-server did not answer PING in 30 s")

    def redis_cmd(self, *cmd):
        r = subprocess.run(["redis-cli", "-p", str(self.redis_port)] + list(cmd),
                           capture_output=True, text=True)
        return r.stdout.strip()

    def stop(self):
        if self.redis:
            self.redis.terminate()
            self.redis.wait()
            self.redis = None


def binary_for(args, kind):
    return (args.orig_opensips, args.orig_mpath) if kind == "orig" else (args.opensips, args.mpath)


def sipp_cmd(args, work, scen, port, extra):
    return ["sipp", "-sf", os.path.join(SIPP_DIR, scen), "-i", "127.0.0.1", "-p", str(port),
            "-nostdin", "-trace_err", "-error_file", os.path.join(work, scen + ".%d.err" % port),
            "-trace_stat", "-stf", os.path.join(work, scen + ".%d.csv" % port), "-fd", "1"] + extra


def sipp_stats(work, scen, port):
    """The last line of sipp's statistics file, as a dict."""
    path = os.path.join(work, scen + ".%d.csv" % port)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]
    if len(lines) < 2:
        return {}
    head = lines[0].split(";")
    return dict(zip(head, lines[-1].split(";")))


def start_uas(args, work, port):
    p = subprocess.Popen(sipp_cmd(args, work, "uas.xml", port, []),
                         stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                         start_new_session=True)
    return p


def stop_proc(p):
    if p and p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


# ---- topology_hiding --------------------------------------------------------

TH_BODY = r'''
loadmodule "topology_hiding.so"
@BACKEND@
modparam("topology_hiding", "th_state_url", "@URL@")
modparam("tm", "fr_timeout", @FR_TIMEOUT@)

route {
    if (!mf_process_maxfwd_header(10)) {
        sl_send_reply(483, "Too Many Hops");
        exit;
    }
    if (has_totag()) {
        # ACK and BYE: routed only by the state th_state_url holds
        if (topology_hiding_match()) {
            t_relay();
            exit;
        }
        if (is_method("ACK")) {
            if (t_check_trans())
                t_relay();
            exit;
        }
        # declined: no state (th_store_get logs "failed to fetch"), or a
        # request th does not route (a BYE resent after its 408)
        xlog("L_ERR", "th consumer test: topology_hiding_match() declined $rm $ci\n");
        sl_send_reply(481, "No Topology Hiding State");
        exit;
    }
    if (is_method("INVITE"))
        topology_hiding();
    $du = "sip:127.0.0.1:@UAS_PORT@";
    t_relay();
}
'''


def th_node(args, work, kind, backend, uas_port, name):
    binary, mpath = binary_for(args, kind)
    body = (TH_BODY.replace("@BACKEND@", backend.modules())
            .replace("@URL@", backend.url("th")).replace("@UAS_PORT@", str(uas_port))
            .replace("@FR_TIMEOUT@", str(args.fr_timeout)))
    return Node(binary, mpath, work, name, body, workers=args.workers, shm_mb=args.shm_mb)


def perf_coll(node, coll):
    """This module's perf_stats of one collection."""
    res = node.result("cachedb_perf:perf_stats", {"collection": coll})
    # this module names a collection's member "collection", the original "name"
    c = next(c for c in res["collections"] if coll in (c.get("collection"), c.get("name")))
    if "entries" not in c:
        c["entries"] = c.get("items", c.get("keys", c.get("count")))
    return c


def perf_keys_count(keys):
    """How many keys a perf_keys reply lists (this module: count; the
    original: returned)."""
    return keys.get("count", keys.get("returned"))


def th_run(args, work, node, uas_port, rate, seconds, tag):
    """Calls at `rate` CPS for `seconds`; returns (ok, stats, elapsed)."""
    uac_port = free_port(socket.SOCK_DGRAM)
    total = int(rate * seconds)
    cmd = sipp_cmd(args, work, "uac_th.xml", uac_port,
                   ["127.0.0.1:%d" % node.sip_port, "-s", "th", "-r", str(rate),
                    "-rp", "1000", "-m", str(total), "-l", str(max(100, rate * 4)),
                    "-d", str(args.hold_ms), "-recv_timeout", str(args.recv_timeout_ms),
                    "-timeout", "%ds" % (seconds * 3 + 60), "-timeout_error",
                    "-max_recv_loops", "10000", "-max_sched_loops", "10000"])
    t0 = time.time()
    if args.drop_states:
        # shows the test failing when the consumer loses its state: the
        # states are deleted while the calls are up (their BYE then finds none)
        import threading

        def drop():
            time.sleep(seconds / 2)
            node.result("cachedb_perf:perf_del", {"glob": "*", "collection": "th"})
        threading.Thread(target=drop, daemon=True).start()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.time() - t0
    st = sipp_stats(work, "uac_th.xml", uac_port)
    ok_calls = int(st.get("SuccessfulCall(C)", 0))
    failed = int(st.get("FailedCall(C)", 0))
    ok = r.returncode == 0 and failed == 0 and ok_calls == total
    if args.verbose:
        print("  %s rate %d x %ds: rc %d, %d ok, %d failed, %.1f s wall, load %s"
              % (tag, rate, seconds, r.returncode, ok_calls, failed, elapsed,
                 open("/proc/loadavg").read().split()[0]), flush=True)
    return ok, {"rc": r.returncode, "ok": ok_calls, "failed": failed, "total": total,
                "elapsed": elapsed, "stderr": r.stderr[-400:]}


def th_states(node, backend):
    """How many states the backend holds (perf and redis can count them)."""
    if backend.kind == "perf":
        return perf_coll(node, "th")["entries"]
    if backend.kind == "redis":
        return int(backend.redis_cmd("DBSIZE") or -1)
    return None


def run_th(args, work):
    if args.cps_search or args.cpu_rounds:
        uas_port = free_port(socket.SOCK_DGRAM)
        uas = start_uas(args, work, uas_port)
        try:
            (th_cpu if args.cpu_rounds else th_search)(args, work, uas_port)
        finally:
            stop_proc(uas)
        return
    missing = [m for m in ("topology_hiding", "tm", "maxfwd", BACKEND_MOD[args.backend])
               if m and not has_module(binary_for(args, args.backend)[1], m)]
    if missing:
        SKIPPED.append("th: OpenSIPS module(s) %s not built" % ", ".join(missing))
        return
    mp = binary_for(args, args.backend)[1]
    so = [os.path.join(mp, "topology_hiding", "topology_hiding.so"),
          os.path.join(mp, "topology_hiding.so")]
    so = next(p for p in so if os.path.exists(p))
    with open(so, "rb") as f:
        if b"th_state_url" not in f.read():
            SKIPPED.append("th: this topology_hiding has no th_state_url (OpenSIPS pull "
                           "request 4114)")
            return
    backend = Backend(args, work, args.backend, ["th=%d" % args.th_log2])
    backend.start()
    uas_port = free_port(socket.SOCK_DGRAM)
    uas = start_uas(args, work, uas_port)
    node = th_node(args, work, args.backend, backend, uas_port, "th-" + args.backend)
    try:
        node.start()
        ok, st = th_run(args, work, node, uas_port, args.rate, args.seconds, "th")
        if not ok and backend.kind == "perf":
            st["perf_stats"] = perf_coll(node, "th")
        check(ok, "topology_hiding over %s: %d CPS for %d s: %s"
              % (backend.url("th"), args.rate, args.seconds, st))
        n = th_states(node, backend)
        # two legs stored per call (the INVITE's and the 200 OK's), none
        # left in the Contact
        check(n is None or n >= st["total"],
              "topology_hiding over %s: %s states stored for %d calls (the state is not "
              "in the cache)" % (backend.url("th"), n, st["total"]))
        print("th over %s: %d calls at %d CPS, no failed call, %s states in the cache"
              % (backend.url("th"), st["total"], args.rate, n))
    finally:
        stop_proc(uas)
        node.stop()
        backend.stop()


def th_search(args, work, uas_port):
    """Bisects, per backend of --backends, the highest rate held for
    --hold-seconds with no failed call. Each step runs on a fresh OpenSIPS
    and backend (states accumulate over a run: a long run's table is what
    cachedb_local's fixed hash outgrows), and the backends' steps are
    interleaved (A's step, B's step, ...) so that the machine's load changes
    fall on all of them. Prints one JSON line per step and a summary."""
    kinds = args.backends.split(",")
    lo = {k: 0 for k in kinds}
    hi = {k: args.cps_max for k in kinds}
    rate = {k: args.cps_start for k in kinds}
    steps = []
    while any(hi[k] - lo[k] > args.cps_step for k in kinds):
        for k in kinds:
            if hi[k] - lo[k] <= args.cps_step:
                continue
            st = th_step(args, work, k, uas_port, rate[k])
            steps.append(st)
            print(json.dumps(st), flush=True)
            if st["ok"]:
                lo[k] = rate[k]
            else:
                hi[k] = rate[k]
            rate[k] = (lo[k] + hi[k]) // 2
    out = {"held_cps": lo, "failed_at": hi, "hold_seconds": args.hold_seconds,
           "hold_ms": args.hold_ms, "workers": args.workers, "th_log2": args.th_log2,
           "steps": steps}
    print(json.dumps(out), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


def session_cpu(sid, per_pid=None):
    """CPU seconds (user + system) of the live processes of session sid;
    per_pid, when given, gets each process's own."""
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(st[3]) == sid:  # field 6, the session id
            ticks = int(st[11]) + int(st[12])
            total += ticks
            if per_pid is not None:
                per_pid[int(d)] = ticks / os.sysconf("SC_CLK_TCK")
    return total / os.sysconf("SC_CLK_TCK")


def stack_cpu(node, backend, per_pid=None):
    """CPU seconds of the OpenSIPS processes, plus redis-server's."""
    cpu = session_cpu(node.proc.pid, per_pid)
    if backend.redis:
        cpu += session_cpu(backend.redis.pid)
    return cpu


def heap_fragments(node):
    """The free-fragment count of every OpenSIPS process's pkg heap and of
    shm after a run (pkmem:N-fragments, shmem:fragments): how cut up each
    heap is, which sets what an F_MALLOC allocation costs (it walks the
    free buckets from its size up to the first non-empty one)."""
    try:
        res = node.result("get_statistics", {"statistics": ["pkmem:", "shmem:fragments"]})
    except Exception as e:  # a figure beside the run, not a check of it
        return {"error": str(e)}
    return {k: int(v) for k, v in sorted(res.items()) if k.endswith("fragments")}


def cpu_by_process(node, before, after):
    """Each OpenSIPS process's CPU seconds over a run, named by its type in
    MI ps ("pid:type"): which processes the CPU per call went to."""
    try:
        names = {int(p["PID"]): p["Type"] for p in node.result("ps")["Processes"]}
    except Exception:  # a figure beside the run, not a check of it
        names = {}
    out = {}
    for pid, cpu in sorted(after.items()):
        d = cpu - before.get(pid, 0.0)
        if d > 0:
            out["%d:%s" % (pid, names.get(pid, "?"))] = round(d, 2)
    return out


def th_cpu(args, work, uas_port):
    """CPU per call of the OpenSIPS processes (and of redis-server for
    redis) at a fixed rate, per backend, the backends interleaved in each
    of --cpu-rounds rounds: a figure the machine's load does not set, as
    it sets the CPS ceiling. Prints each run and the medians, per-round
    ratios to perf:// with their spread."""
    kinds = args.backends.split(",")
    runs = []
    for rnd in range(args.cpu_rounds):
        # the order rotates each round: no backend always runs first (a
        # fixed order put perf:// right after the previous round's redis)
        for k in kinds[rnd % len(kinds):] + kinds[:rnd % len(kinds)]:
            backend = Backend(args, work, k, ["th=%d" % args.th_log2])
            backend.start()
            n = th_node(args, work, k, backend, uas_port, "cpu-%s-%d" % (k, rnd))
            try:
                n.start()
                p0, p1 = {}, {}
                c0 = stack_cpu(n, backend, p0)
                ok, st = th_run(args, work, n, uas_port, args.rate, args.seconds, k)
                c1 = stack_cpu(n, backend, p1)
                heap = heap_fragments(n)
                by_proc = cpu_by_process(n, p0, p1)
            finally:
                n.expected_errors.append("")
                n.stop()
                backend.stop()
            r = {"round": rnd, "backend": k, "ok": ok, "calls": st["ok"], "failed": st["failed"],
                 "cpu_s": round(c1 - c0, 3),
                 "cpu_us_per_call": round((c1 - c0) * 1e6 / max(1, st["ok"]), 1),
                 "load1": os.getloadavg()[0], "cpu_s_by_process": by_proc,
                 "heap_fragments": heap}
            runs.append(r)
            print(json.dumps(r), flush=True)
    summary = {}
    for k in kinds:
        mine = sorted(r["cpu_us_per_call"] for r in runs if r["backend"] == k)
        ratios = sorted(r["cpu_us_per_call"] / p["cpu_us_per_call"]
                        for r in runs if r["backend"] == k
                        for p in runs if p["backend"] == "perf" and p["round"] == r["round"])
        summary[k] = {"median_us_per_call": round(statistics.median(mine), 1),
                      "ratio_to_perf_median": round(statistics.median(ratios), 2) if ratios else None,
                      "ratio_to_perf_range": [round(ratios[0], 2), round(ratios[-1], 2)]
                      if ratios else None}
    out = {"rate": args.rate, "seconds": args.seconds, "hold_ms": args.hold_ms,
           "workers": args.workers, "rounds": args.cpu_rounds, "summary": summary, "runs": runs}
    print(json.dumps(summary), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


def th_step(args, work, kind, uas_port, rate):
    backend = Backend(args, work, kind, ["th=%d" % args.th_log2])
    backend.start()
    n = th_node(args, work, kind, backend, uas_port, "th-%s-%d" % (kind, rate))
    n.expected_errors.append("")  # a step past the limit logs errors: they are its result
    load0 = os.getloadavg()[0]
    try:
        n.start()
        ok, st = th_run(args, work, n, uas_port, rate, args.hold_seconds, kind)
        states = th_states(n, backend)
    finally:
        n.stop()
        backend.stop()
    # what the failures were: a sequential request the state could not route
    # (the consumer's failure), or sipp's timeouts (the rig's)
    with open(n.log, errors="replace") as f:
        text = f.read()
    return {"backend": kind, "url": backend.url("th"), "rate": rate, "ok": ok,
            "calls": st["total"], "done": st["ok"], "failed": st["failed"],
            "declined": text.count("topology_hiding_match() declined"),
            "fetch_failed": text.count("failed to fetch the topology hiding state"),
            "sipp_rc": st["rc"], "elapsed": round(st["elapsed"], 1), "states": states,
            "load1_before": load0, "load1_after": os.getloadavg()[0]}


# ---- dialog -----------------------------------------------------------------

DLG_BODY = r'''
loadmodule "rr.so"
loadmodule "db_sqlite.so"
loadmodule "dialog.so"
@BACKEND@
modparam("dialog", "cachedb_url", "@URL@")
modparam("dialog", "profiles_with_value", "caller/s")
modparam("dialog", "profiles_no_value", "calls/s")
modparam("dialog", "db_mode", 1)
# the workers write the dialogs concurrently: wait out SQLite's lock
modparam("db_sqlite", "busy_timeout", 10000)
modparam("dialog", "db_url", "sqlite://@DB@")

route {
    if (has_totag()) {
        if (loose_route()) {
            t_relay();
            exit;
        }
        if (is_method("ACK") && t_check_trans())
            t_relay();
        exit;
    }
    if (is_method("INVITE")) {
        record_route();
        create_dialog();
        # a shared profile is named with its /s wherever it is used
        set_dlg_profile("caller/s", "$hdr(X-Caller)");
        set_dlg_profile("calls/s");
    }
    $du = "sip:127.0.0.1:@UAS_PORT@";
    t_relay();
}
'''

CALLERS = ["alice", "alice", "alice", "bob", "bob", "carol"]


def profile_size(node, profile, value=None):
    p = {"profile": profile}
    if value is not None:
        p["value"] = value
    res = node.result("profile_get_size", p)
    prof = res.get("Profile", res.get("profile", res))
    check(isinstance(prof, dict) and "count" in prof, "profile_get_size %s: %s" % (p, res))
    return int(prof["count"])


def profile_counts(node):
    return {"calls": profile_size(node, "calls/s"),
            **{c: profile_size(node, "caller/s", c) for c in sorted(set(CALLERS))}}


def expected_counts(n):
    exp = {c: 0 for c in set(CALLERS)}
    for i in range(n):
        exp[CALLERS[i % len(CALLERS)]] += 1
    exp["calls"] = n
    return exp


def dlg_calls(args, work, node, n):
    """n calls held up (the caller waits for the proxy's BYE)."""
    inf = os.path.join(work, "callers.csv")
    with open(inf, "w") as f:
        f.write("SEQUENTIAL\n" + "\n".join(CALLERS) + "\n")
    port = free_port(socket.SOCK_DGRAM)
    p = subprocess.Popen(sipp_cmd(args, work, "uac_hold.xml", port,
                                  ["127.0.0.1:%d" % node.sip_port, "-s", "dlg", "-inf", inf,
                                   "-r", "50", "-m", str(n), "-l", str(n),
                                   "-recv_timeout", "600000"]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                         start_new_session=True)
    return p


def end_all(node):
    dl = node.result("dlg_list")
    ids = [d["ID"] for d in dl.get("Dialogs", [])]
    for i in ids:
        node.result("dlg_end_dlg", {"dialog_id": i})
    return len(ids)


def run_dialog(args, work):
    mpath = binary_for(args, args.backend)[1]
    missing = [m for m in ("dialog", "rr", "db_sqlite", BACKEND_MOD[args.backend])
               if m and not has_module(mpath, m)]
    schema = os.path.join(args.src or args.prefix, "scripts", "sqlite", "dialog-create.sql")
    if not os.path.exists(schema) and args.prefix:
        schema = os.path.join(args.prefix, "share", "opensips", "sqlite", "dialog-create.sql")
    if missing or not os.path.exists(schema):
        SKIPPED.append("dialog: %s" % ("OpenSIPS module(s) %s not built" % ", ".join(missing)
                                       if missing else "no dialog schema at " + schema))
        return
    # The dialog module re-counts the dialogs it restores from its database
    # into the shared profiles at startup. Counts stay exact across a restart
    # when the counters do not survive it: perf:// with the profiles'
    # collection left out of persist_collections, cachedb_local. Counters
    # that survive (perf:// persisting that collection; redis, which
    # outlives OpenSIPS) are counted twice: checked too, as the guide says.
    if args.backend != "redis":
        dialog_phase(args, work, schema, "exact", persist_profiles=False, n1=60, n2=18)
    if args.backend in ("perf", "orig", "redis"):
        dialog_phase(args, work, schema, "persisted", persist_profiles=True, n1=12, n2=6)


def dialog_phase(args, work, schema, tag, persist_profiles, n1, n2):
    """n1 calls up, a restart, n2 calls more, every call ended; the shared
    profiles' counts checked at each step. The module's persistence is on
    (db_mode 2); persist_profiles says whether the profiles' collection is
    among persist_collections."""
    mpath = binary_for(args, args.backend)[1]
    d = os.path.join(work, "dialog-" + tag)
    os.makedirs(os.path.join(d, "store"))
    db = os.path.join(d, "dialog.sqlite")
    con = sqlite3.connect(db)
    # standard-create.sql: the version table the dialog schema registers in
    for f in (os.path.join(os.path.dirname(schema), "standard-create.sql"), schema):
        with open(f) as sql:
            con.executescript(sql.read())
    con.close()
    backend = Backend(args, d, args.backend, ["dlg", "keep"],
                      persist=(os.path.join(d, "store"), "dlg,keep" if persist_profiles else "keep"))
    backend.start()
    uas_port = free_port(socket.SOCK_DGRAM)
    uas = start_uas(args, d, uas_port)
    body = (DLG_BODY.replace("@BACKEND@", backend.modules()).replace("@URL@", backend.url("dlg"))
            .replace("@DB@", db).replace("@UAS_PORT@", str(uas_port)))
    node = Node(binary_for(args, args.backend)[0], mpath, d, "dialog-" + args.backend, body,
                workers=4)
    url = backend.url("dlg")
    uacs = []
    try:
        node.start()
        uacs.append(dlg_calls(args, d, node, n1))
        up = wait_for(lambda: node.stat("active_dialogs") == n1, 120, 0.2)
        check(up is not None, "dialog: %d calls not all up in 120 s (active %d)"
              % (n1, node.stat("active_dialogs")))
        got = profile_counts(node)
        check(got == expected_counts(n1), "dialog over %s: profile counts across the workers "
              "%s, expected %s" % (url, got, expected_counts(n1)))
        # a restart: the dialogs come back from SQLite (dialog db_mode 1)
        node.stop()
        node.start()
        restored = node.stat("active_dialogs")
        check(restored == n1, "dialog: %d dialogs restored from the database, expected %d"
              % (restored, n1))
        got = profile_counts(node)
        factor = 2 if persist_profiles else 1
        want = {k: v * factor for k, v in expected_counts(n1).items()}
        check(got == want, "dialog over %s after a restart (profiles %spersisted): profile "
              "counts %s, expected %s" % (url, "" if persist_profiles else "not ", got, want))
        if persist_profiles:
            print("dialog over %s, the counters surviving the restart: %d calls count %d "
                  "after it (the survivors + the dialog module's re-count)"
                  % (url, n1, got["calls"]))
        if n2:
            # new calls after the restart count on top, and uncount exactly
            uacs.append(dlg_calls(args, d, node, n2))
            up = wait_for(lambda: node.stat("active_dialogs") == n1 + n2, 120, 0.2)
            check(up is not None, "dialog: new calls not up after the restart")
            for c, v in expected_counts(n2).items():
                want[c] += v
            got = profile_counts(node)
            check(got == want, "dialog over %s, %d + %d calls: profile counts %s, expected %s"
                  % (url, n1, n2, got, want))
        end_all(node)
        gone = wait_for(lambda: node.stat("active_dialogs") == 0, 120, 0.2)
        check(gone is not None, "dialog: the calls did not end")
        after = profile_counts(node)
        left = {k: v * (factor - 1) for k, v in expected_counts(n1).items()}
        check(after == left, "dialog over %s: every call ended, counts %s, expected %s"
              % (url, after, left))
        for p in uacs:
            p.wait(timeout=60)
            check(p.returncode == 0, "dialog: a sipp caller exited %s" % p.returncode)
        if not persist_profiles:
            print("dialog over %s: %s exact across 4 workers, after a restart, with %d new "
                  "calls, and 0 once all ended" % (url, expected_counts(n1), n2))
    finally:
        for p in uacs:
            stop_proc(p)
        stop_proc(uas)
        node.stop()
        backend.stop()


# ---- ratelimit --------------------------------------------------------------

RL_BODY = r'''
loadmodule "ratelimit.so"
@BACKEND@
modparam("ratelimit", "cachedb_url", "@URL@")
modparam("ratelimit", "timer_interval", 3600)
modparam("ratelimit", "limit_per_interval", 1)

route {
    if (rl_check("pcache/r", @LIMIT@, "TAILDROP")) {
        sl_send_reply(200, "OK");
    } else {
        sl_send_reply(503, "Limited");
    }
    exit;
}
'''


def options_burst(port, n, window=64):
    """n OPTIONS, window of them in flight; returns the reply codes."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(10)
    lport = s.getsockname()[1]
    codes, sent = {}, 0
    while len(codes) < n:
        while sent < n and sent - len(codes) < window:
            msg = ("OPTIONS sip:rl@127.0.0.1:%d SIP/2.0\r\n"
                   "Via: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-rl-%d\r\n"
                   "Max-Forwards: 70\r\nFrom: <sip:t@127.0.0.1>;tag=%d\r\n"
                   "To: <sip:rl@127.0.0.1>\r\nCall-ID: rl-%d@127.0.0.1\r\n"
                   "CSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
                   % (port, lport, sent, sent, sent))
            s.sendto(msg.encode(), ("127.0.0.1", port))
            sent += 1
        data = s.recv(65535).decode(errors="replace")
        cid = [ln for ln in data.split("\r\n") if ln.lower().startswith("call-id:")]
        codes[cid[0]] = int(data.split(" ", 2)[1])
    s.close()
    return list(codes.values())


def run_ratelimit(args, work):
    mpath = binary_for(args, args.backend)[1]
    missing = [m for m in ("ratelimit", BACKEND_MOD[args.backend]) if m and not has_module(mpath, m)]
    if missing:
        SKIPPED.append("ratelimit: OpenSIPS module(s) %s not built" % ", ".join(missing))
        return
    limit, n = 300, 1000
    backend = Backend(args, work, args.backend, ["rl"])
    backend.start()
    body = (RL_BODY.replace("@BACKEND@", backend.modules()).replace("@URL@", backend.url("rl"))
            .replace("@LIMIT@", str(limit)))
    node = Node(binary_for(args, args.backend)[0], mpath, work, "rl-" + args.backend, body,
                workers=4)
    try:
        node.start()
        codes = options_burst(node.sip_port, n)
        passed = codes.count(200)
        check(passed == limit and codes.count(503) == n - limit,
              "ratelimit over %s: %d of %d let through by a pipe of %d (%d limited)"
              % (backend.url("rl"), passed, n, limit, codes.count(503)))
        # the pipe's counter is the backend's: every request counted there
        if backend.kind in ("perf", "orig"):
            keys = node.result("cachedb_perf:perf_keys", {"glob": "*pcache*", "collection": "rl"})
            check(perf_keys_count(keys) == 1, "ratelimit: the pipe's counter is not in %s: %s"
                  % (backend.url("rl"), keys))
            key = keys["keys"][0]
            key = key if isinstance(key, str) else key.get("key")
            v = node.result("cachedb_perf:perf_get", {"key": key, "collection": "rl"})
            check(str(n) in json.dumps(v), "ratelimit: the pipe's counter %s = %s, expected %d"
                  % (key, v, n))
        elif backend.kind == "redis":
            keys = backend.redis_cmd("KEYS", "*pcache*").split()
            check(len(keys) == 1 and backend.redis_cmd("GET", keys[0]) == str(n),
                  "ratelimit: the pipe's counter in redis: %s" % keys)
        print("ratelimit over %s: %d of %d requests let through by a %d pipe across 4 workers"
              % (backend.url("rl"), passed, n, limit))
    finally:
        node.stop()
        backend.stop()


# ---- sql_cacher ---------------------------------------------------------------

SQL_BODY = r'''
loadmodule "db_sqlite.so"
loadmodule "sql_cacher.so"
@BACKEND@
modparam("sql_cacher", "cache_table",
"id=full
db_url=sqlite://@DB@
cachedb_url=@URL@
table=subscribers
key=username
columns=name credit")
modparam("sql_cacher", "cache_table",
"id=ondemand
db_url=sqlite://@DB@
cachedb_url=@URL@
table=subscribers
key=username
columns=name credit
on_demand=1
expire=3600")

route {
    # one $sql_cached_value per id and column: sql_cacher keeps the first
    # caching id a variable name resolved to (pv_name->c_entry)
    if ($hdr(X-Id) == "full") {
        if ($hdr(X-Col) == "name")
            $var(r) = $sql_cached_value(full:name:$hdr(X-Key));
        else
            $var(r) = $sql_cached_value(full:credit:$hdr(X-Key));
    } else {
        if ($hdr(X-Col) == "name")
            $var(r) = $sql_cached_value(ondemand:name:$hdr(X-Key));
        else
            $var(r) = $sql_cached_value(ondemand:credit:$hdr(X-Key));
    }
    if ($var(r) == NULL)
        $var(r) = "<null>";
    append_to_reply("X-Res: $var(r)\r\n");
    sl_send_reply(200, "OK");
    exit;
}
'''


def sip_query(port, **hdrs):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(10)
    lport = s.getsockname()[1]
    h = "".join("X-%s: %s\r\n" % (k.capitalize(), v) for k, v in hdrs.items())
    msg = ("OPTIONS sip:q@127.0.0.1:%d SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-q%d\r\n"
           "Max-Forwards: 70\r\nFrom: <sip:t@127.0.0.1>;tag=%d\r\nTo: <sip:q@127.0.0.1>\r\n"
           "Call-ID: q%d@127.0.0.1\r\nCSeq: 1 OPTIONS\r\n%sContent-Length: 0\r\n\r\n"
           % (port, lport, lport, lport, time.time_ns(), h))
    s.sendto(msg.encode(), ("127.0.0.1", port))
    data = s.recv(65535).decode(errors="replace")
    s.close()
    for ln in data.split("\r\n"):
        if ln.lower().startswith("x-res:"):
            return ln[6:].strip()
    raise AssertionError("no X-Res in %r" % data[:200])


def run_sqlcacher(args, work):
    mpath = binary_for(args, args.backend)[1]
    missing = [m for m in ("sql_cacher", "db_sqlite", BACKEND_MOD[args.backend])
               if m and not has_module(mpath, m)]
    if missing:
        SKIPPED.append("sqlcacher: OpenSIPS module(s) %s not built" % ", ".join(missing))
        return
    db = os.path.join(work, "subs.sqlite")
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE subscribers (username TEXT PRIMARY KEY, name TEXT, credit INTEGER)")
    rows = [("u%03d" % i, "Name %d" % i, i * 10) for i in range(200)]
    con.executemany("INSERT INTO subscribers VALUES (?, ?, ?)", rows)
    con.commit()
    backend = Backend(args, work, args.backend, ["sql"])
    backend.start()
    body = (SQL_BODY.replace("@BACKEND@", backend.modules()).replace("@URL@", backend.url("sql"))
            .replace("@DB@", db))
    node = Node(binary_for(args, args.backend)[0], mpath, work, "sql-" + args.backend, body,
                workers=2)
    try:
        node.start()
        for cid in ("full", "ondemand"):
            for u, name, credit in (rows[0], rows[57], rows[199]):
                got = sip_query(node.sip_port, id=cid, key=u, col="name")
                check(got == name, "sql_cacher %s over %s: %s name %r, expected %r"
                      % (cid, backend.url("sql"), u, got, name))
                got = sip_query(node.sip_port, id=cid, key=u, col="credit")
                check(got == str(credit), "sql_cacher %s: %s credit %r, expected %d"
                      % (cid, u, got, credit))
            got = sip_query(node.sip_port, id=cid, key="nobody", col="name")
            check(got == "<null>", "sql_cacher %s: an absent key gave %r" % (cid, got))
        if backend.kind in ("perf", "orig"):
            n = perf_coll(node, "sql")["entries"]
            check(n >= len(rows), "sql_cacher: %d entries in %s for the %d rows fully cached"
                  % (n, backend.url("sql"), len(rows)))
        # the table changes; the cache serves the old row until a reload
        con.execute("UPDATE subscribers SET credit = 4242 WHERE username = 'u057'")
        con.commit()
        got = sip_query(node.sip_port, id="full", key="u057", col="credit")
        check(got == "570", "sql_cacher full: before the reload u057 credit %r, expected "
              "the cached 570" % got)
        node.result("sql_cacher:reload", {"id": "full"})
        node.result("sql_cacher:reload", {"id": "ondemand", "key": "u057"})
        for cid in ("full", "ondemand"):
            got = wait_for(lambda: sip_query(node.sip_port, id=cid, key="u057",
                                             col="credit") == "4242", 30, 0.2)
            check(got is not None, "sql_cacher %s over %s: u057 not 4242 after the reload"
                  % (cid, backend.url("sql")))
        con.close()
        print("sql_cacher over %s: full (200 rows) and on-demand caching, a reload" %
              backend.url("sql"))
    finally:
        node.stop()
        backend.stop()


# ---- dns_cache --------------------------------------------------------------

DNS_BODY = r"""
loadmodule "dns_cache.so"
@BACKEND@
modparam("dns_cache", "cachedb_url", "@URL@")
dns_try_ipv6 = no
dns_retr_time = 1
dns_retr_no = 1

route {
    $var(ip) = $(hdr(X-Key){ip.resolve});
    if ($var(ip) == NULL)
        $var(ip) = "<unresolved>";
    append_to_reply("X-Res: $var(ip)\r\n");
    sl_send_reply(200, "OK");
    exit;
}
"""

DNS_NAMES = {"sip1.pcache.test": "127.0.0.1", "sip2.pcache.test": "10.0.0.0"}


class DnsServer:
    """A DNS responder on 127.0.0.1:53 of the private network namespace the
    dnscache part runs in: A records of DNS_NAMES (addresses with zero bytes:
    the cached hostent is binary), NXDOMAIN otherwise. Counts the queries
    per name, which is how the test knows the cache answered."""

    def __init__(self):
        import threading
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        self.queries = {}
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        import struct
        while True:
            data, peer = self.sock.recvfrom(4096)
            qid, flags, qd = struct.unpack("!HHH", data[:6])
            i, labels = 12, []
            while data[i]:
                labels.append(data[i + 1:i + 1 + data[i]].decode())
                i += 1 + data[i]
            qtype = struct.unpack("!H", data[i + 1:i + 3])[0]
            question = data[12:i + 5]
            name = ".".join(labels).lower()
            self.queries[name] = self.queries.get(name, 0) + 1
            ip = DNS_NAMES.get(name)
            if ip and qtype == 1:
                ans = (b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4)
                       + socket.inet_aton(ip))
                hdr = struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0)
            else:
                ans = b""
                rcode = 0 if ip else 3
                hdr = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, 0, 0, 0)
            self.sock.sendto(hdr + question + ans, peer)


def run_dnscache(args, work):
    mpath = binary_for(args, args.backend)[1]
    missing = [m for m in ("dns_cache", BACKEND_MOD[args.backend])
               if m and not has_module(mpath, m)]
    if missing:
        SKIPPED.append("dnscache: OpenSIPS module(s) %s not built" % ", ".join(missing))
        return
    if not args.in_netns:
        # a private network and mount namespace: its own loopback, where the
        # test's DNS responder takes port 53, and its own resolv.conf
        if not shutil.which("unshare") or not shutil.which("ip"):
            SKIPPED.append("dnscache: no unshare(1) or ip(8) for a private network namespace")
            return
        probe = subprocess.run(["unshare", "-rnm", "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            SKIPPED.append("dnscache: no private namespaces here (unshare -rnm: %s)"
                           % probe.stderr.strip()[:200])
            return
        cmd = ["unshare", "-rnm", sys.executable, os.path.abspath(__file__),
               "--in-netns", "--only", "dnscache", "--backend", args.backend,
               "--opensips", args.opensips, "--mpath", args.mpath, "--module", args.module,
               "--orig-src", args.orig_src]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sys.stdout.write(r.stdout)
        if r.returncode == SKIP:
            SKIPPED.append("dnscache: " + r.stdout.strip().splitlines()[-1])
            return
        check(r.returncode == 0, "dnscache (in a private namespace) failed:\n%s%s"
              % (r.stdout[-2000:], r.stderr[-2000:]))
        return
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    conf = os.path.join(work, "resolv.conf")
    with open(conf, "w") as f:
        f.write("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    subprocess.run(["mount", "--bind", conf, "/etc/resolv.conf"], check=True)
    dns = DnsServer()
    backend = Backend(args, work, args.backend, ["dns"])
    backend.start()
    body = DNS_BODY.replace("@BACKEND@", backend.modules()).replace("@URL@", backend.url("dns"))
    node = Node(binary_for(args, args.backend)[0], mpath, work, "dns-" + args.backend, body,
                workers=2)
    try:
        node.start()
        names = list(DNS_NAMES) + ["nxdomain.pcache.test"]
        first = {n: sip_query(node.sip_port, key=n) for n in names}
        asked = dict(dns.queries)
        second = {n: sip_query(node.sip_port, key=n) for n in names}
        for n in names:
            want = DNS_NAMES.get(n, "<unresolved>")
            check(first[n] == want and second[n] == want,
                  "dns_cache over %s: %s resolved to %r then %r, expected %r"
                  % (backend.url("dns"), n, first[n], second[n], want))
            check(asked.get(n, 0) >= 1, "dns_cache: %s never reached the DNS server" % n)
            check(dns.queries.get(n, 0) == asked.get(n, 0),
                  "dns_cache over %s: the second lookup of %s went to the DNS server "
                  "(%d queries, %d after the first): not served from the cache"
                  % (backend.url("dns"), n, dns.queries.get(n, 0), asked.get(n, 0)))
        if backend.kind == "perf":
            n = perf_coll(node, "dns")["entries"]
            check(n >= len(names), "dns_cache: %d entries in perf:///dns for %d names"
                  % (n, len(names)))
        print("dns_cache over %s: %d names (one failed) resolved once, then served from "
              "the cache" % (backend.url("dns"), len(names)))
    finally:
        node.stop()
        backend.stop()


# ---- main -------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opensips", default="")
    ap.add_argument("--mpath", default="")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--src", default="")
    ap.add_argument("--module", default="")
    ap.add_argument("--skip-reason", default="")
    ap.add_argument("--orig-src", default="", help="a built OpenSIPS tree holding the original "
                    "cachedb_perf (pull request 4118) for --backend orig")
    ap.add_argument("--backend", default="perf", choices=sorted(BACKEND_MOD))
    ap.add_argument("--only", default=ALL_PARTS)
    ap.add_argument("--rate", type=int, default=100, help="th: CPS of the fixed-rate run")
    ap.add_argument("--seconds", type=int, default=10, help="th: length of the fixed-rate run")
    ap.add_argument("--hold-ms", type=int, default=1000, help="th: call hold time")
    ap.add_argument("--workers", type=int, default=4, help="th: udp_workers")
    # the test checks routing, not latency: a machine that stalls its
    # processes for seconds must not fail it (the benchmark sets 8 s and 5 s)
    ap.add_argument("--recv-timeout-ms", type=int, default=30000,
                    help="th: sipp's wait for each expected message")
    ap.add_argument("--fr-timeout", type=int, default=30, help="th: tm's fr_timeout (s)")
    ap.add_argument("--th-log2", type=int, default=16, help="th collection's log2 size "
                    "(perf, orig, local)")
    ap.add_argument("--cache-mb", type=int, default=256)
    ap.add_argument("--shm-mb", type=int, default=512)
    ap.add_argument("--cps-search", action="store_true")
    ap.add_argument("--cps-start", type=int, default=1000)
    ap.add_argument("--cps-max", type=int, default=8000)
    ap.add_argument("--cps-step", type=int, default=100)
    ap.add_argument("--hold-seconds", type=int, default=60)
    ap.add_argument("--cpu-rounds", type=int, default=0,
                    help="th: CPU per call at --rate for --seconds, this many interleaved "
                         "rounds of --backends")
    ap.add_argument("--backends", default="perf,local,redis",
                    help="--cps-search: the backends, interleaved")
    ap.add_argument("--out", default="", help="--cps-search: the JSON summary's file")
    ap.add_argument("--allocator", default="", help="OpenSIPS -a (e.g. F_MALLOC)")
    ap.add_argument("--drop-states", action="store_true",
                    help="th on perf: delete the states mid-run (the test must fail)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    resolve_opensips(args)
    Node.allocator = args.allocator or None
    if args.orig_src:
        args.orig_opensips = os.path.join(args.orig_src, "opensips")
        args.orig_mpath = os.path.join(args.orig_src, "modules") + "/"
    why = args.skip_reason or None
    if not why and args.backend == "perf" and not (args.module and os.path.exists(args.module)):
        why = ("the cachedb_perf module is not built: configure with "
               "-DOPENSIPS_SRC=/path/to/a/built/opensips-4.x/tree")
    if not why and args.backend == "orig" and not (args.orig_src and os.access(
            args.orig_opensips, os.X_OK) and has_module(args.orig_mpath, "cachedb_perf")):
        why = "--backend orig needs --orig-src, a built tree with the original cachedb_perf"
    if not why and (not args.opensips or not os.access(args.opensips, os.X_OK)):
        why = "no OpenSIPS binary (set PCACHE_OPENSIPS_PREFIX or build the OPENSIPS_SRC tree)"
    if not why and not shutil.which("sipp"):
        why = "sipp is not installed (Debian: sip-tester)"
    if not why and args.backend == "redis" and not shutil.which("redis-server"):
        why = "redis-server is not installed"
    if not why:
        for m in ("sl", "tm", "sipmsgops", "httpd", "mi_http"):
            if not has_module(binary_for(args, args.backend)[1], m):
                why = "OpenSIPS module %s.so not found under %s" % (m, binary_for(args, args.backend)[1])
                break
    if why:
        print("SKIPPED: opensips_consumers: " + why)
        return SKIP
    work = tempfile.mkdtemp(prefix="pcache-consumers-")
    parts = {"th": run_th, "dialog": run_dialog, "ratelimit": run_ratelimit,
             "sqlcacher": run_sqlcacher, "dnscache": run_dnscache}
    try:
        for p in args.only.split(","):
            parts[p](args, work)
    except AssertionError as ex:
        print("FAIL: %s (logs in %s)" % (ex, work))
        return 1
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if SKIPPED:
        print("SKIPPED: opensips_consumers --only %s: not run: %s" % (args.only, "; ".join(SKIPPED)))
        return SKIP
    print("PASS: opensips_consumers --only %s --backend %s" % (args.only, args.backend))
    return 0


if __name__ == "__main__":
    sys.exit(main())
