#!/usr/bin/python3
"""Server throughput and CPU cost per request, round by round, beside peers.

Starts pcached (one worker), and pogocache (one thread) and redis-server
when their paths are given, each pinned to CPU 0 with persistence off; fills
each with --keys SETs; then for --rounds rounds runs redis-benchmark pinned
to CPU 1 (--clients connections, -P --pipeline, --value-byte values, keys
at random over --keys) against each server in turn, the order reversed
every other round. Each run reports the rate, the server's CPU time per
request (user + system of all its processes and threads), the generator's
CPU time per request and how busy the generator's core was (its CPU
seconds over the run's wall seconds: near 1.0 means the generator, not the
server, set the rate).

Summaries, per test and peer: the median of the per-round ratios of rate
(pcached / peer) and of CPU cost (peer's CPU per request / pcached's), with
their spread, and per server the correlation between the generator's cost
and the server's cost over the rounds (a cost that moves in both at once is
the machine's, not the server's).

  /usr/bin/python3 bench/server_rounds.py --pcached build/src/server/pcached \\
      [--pogocache PATH] [--redis PATH] [--rounds 10] [--requests 2000000] \\
      [--tests set,get] [--pipeline 16] [--json FILE]

Exits 1 when a run measured nothing (no rate parsed, or no CPU time).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--pcached", required=True, help="pcached binary")
    ap.add_argument("--pogocache", help="pogocache binary (built by the user)")
    ap.add_argument("--redis", help="redis-server binary")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=2000000, help="requests per run")
    ap.add_argument("--tests", default="set,get")
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--value", type=int, default=200)
    ap.add_argument("--keys", type=int, default=1000000)
    ap.add_argument("--port", type=int, default=26100, help="first of three ports")
    ap.add_argument("--json", help="write the record here")
    return ap.parse_args()


def start_servers(a):
    cmds = {"pcached": [a.pcached, "--port=%d" % a.port, "--workers=1", "--mem_mb=1024",
                        "--db_url=", "--db_mode=0", "--persist_collections=", "--journal=",
                        "--log_level=warn", "--metrics_port=0"]}
    if a.pogocache:
        cmds["pogocache"] = [a.pogocache, "-h", "127.0.0.1", "-p", str(a.port + 1),
                             "--threads", "1"]
    if a.redis:
        cmds["redis"] = [a.redis, "--port", str(a.port + 2), "--bind", "127.0.0.1",
                         "--save", "", "--appendonly", "no"]
    ports = {"pcached": a.port, "pogocache": a.port + 1, "redis": a.port + 2}
    procs = {k: subprocess.Popen(["taskset", "-c", "0"] + v, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for k, v in cmds.items()}
    for k in procs:
        deadline = time.time() + 10
        while subprocess.run(["redis-cli", "-p", str(ports[k]), "ping"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            if procs[k].poll() is not None or time.time() > deadline:
                sys.exit("%s did not answer PING on port %d" % (k, ports[k]))
            time.sleep(0.1)
    return procs, ports


def tree(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def cpu_s(pid):
    """User + system seconds of pid's tree, every thread."""
    ticks = 0
    for p in tree(pid):
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return ticks / os.sysconf("SC_CLK_TCK")


def bench(a, port, test, n, pipeline):
    g0 = os.times()
    t0 = time.monotonic()
    out = subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-t", test,
                          "-n", str(n), "-r", str(a.keys), "-d", str(a.value), "-P", str(pipeline),
                          "-c", str(a.clients), "-q", "--csv"], capture_output=True, text=True)
    wall = time.monotonic() - t0
    g1 = os.times()
    m = re.search(r'"%s","([0-9.]+)"' % test.upper(), out.stdout)
    gen = g1.children_user + g1.children_system - g0.children_user - g0.children_system
    return (float(m.group(1)) if m else 0.0), gen, wall


def run_round(a, procs, ports, test, order, rows):
    for k in order:
        s0 = cpu_s(procs[k].pid)
        rate, gen, wall = bench(a, ports[k], test, a.requests, a.pipeline)
        srv = cpu_s(procs[k].pid) - s0
        if rate <= 0 or srv <= 0 or gen <= 0:
            sys.exit("%s %s measured nothing (rate %.0f, server CPU %.2f s, generator %.2f s)"
                     % (k, test, rate, srv, gen))
        row = {"server": k, "test": test, "rate": round(rate),
               "server_cpu_us_per_req": round(srv / a.requests * 1e6, 3),
               "generator_cpu_us_per_req": round(gen / a.requests * 1e6, 3),
               "generator_busy": round(gen / wall, 3), "server_busy": round(srv / wall, 3)}
        rows.append(row)
        print("  %-9s %-3s %9d req/s  server %.3f us/req, busy %.2f  generator %.3f us/req, busy %.2f"
              % (k, test, row["rate"], row["server_cpu_us_per_req"], row["server_busy"],
                 row["generator_cpu_us_per_req"], row["generator_busy"]), flush=True)


def put(out, key, values):
    """key: the median of values, with key_min and key_max."""
    out[key] = round(statistics.median(values), 3)
    out[key + "_min"] = round(min(values), 3)
    out[key + "_max"] = round(max(values), 3)


def summarize(rows, servers, tests, pipeline):
    """Flat figures, keys ending in _<test>_p<pipeline>: per server its rate,
    CPU per request, how busy it and the generator were, and the correlation
    of the two costs; per peer the per-round ratios against pcached."""
    out = {}
    for t in tests:
        sfx = "%s_p%d" % (t, pipeline)
        mine = [r for r in rows if r["test"] == t and r["server"] == "pcached"]
        for k in servers:
            theirs = [r for r in rows if r["test"] == t and r["server"] == k]
            for f in ("rate", "server_cpu_us_per_req", "server_busy", "generator_busy"):
                put(out, "%s_%s_%s" % (k, f, sfx), [r[f] for r in theirs])
            if len(theirs) > 2:
                out["%s_corr_generator_server_cost_%s" % (k, sfx)] = round(statistics.correlation(
                    [r["generator_cpu_us_per_req"] for r in theirs],
                    [r["server_cpu_us_per_req"] for r in theirs]), 2)
            if k != "pcached":
                put(out, "rate_ratio_vs_%s_%s" % (k, sfx),
                    [m["rate"] / o["rate"] for m, o in zip(mine, theirs)])
                put(out, "cost_ratio_vs_%s_%s" % (k, sfx),
                    [o["server_cpu_us_per_req"] / m["server_cpu_us_per_req"]
                     for m, o in zip(mine, theirs)])
    return out


def report(fig, servers, tests, pipeline):
    for t in tests:
        sfx = "%s_p%d" % (t, pipeline)
        for k in servers:
            line = "%-9s %s: %9.0f req/s  server %.3f us/req, busy %.2f  generator busy %.2f " \
                   "(max %.2f)  cost correlation %s" % (
                       k, sfx, fig["%s_rate_%s" % (k, sfx)],
                       fig["%s_server_cpu_us_per_req_%s" % (k, sfx)],
                       fig["%s_server_busy_%s" % (k, sfx)],
                       fig["%s_generator_busy_%s" % (k, sfx)],
                       fig["%s_generator_busy_%s_max" % (k, sfx)],
                       fig.get("%s_corr_generator_server_cost_%s" % (k, sfx)))
            if k != "pcached":
                r, c = "rate_ratio_vs_%s_%s" % (k, sfx), "cost_ratio_vs_%s_%s" % (k, sfx)
                line += "\n          pcached / %s: rate %.3f (%.3f-%.3f), cost %.3f (%.3f-%.3f)" % (
                    k, fig[r], fig[r + "_min"], fig[r + "_max"], fig[c], fig[c + "_min"],
                    fig[c + "_max"])
            print(line)


def main():
    a = parse_args()
    tests = a.tests.split(",")
    procs, ports = start_servers(a)
    try:
        for k in procs:  # every key present before timing
            bench(a, ports[k], "set", a.keys, 16)
        servers = list(procs)
        rows = []
        for r in range(a.rounds):
            print("round %d" % (r + 1), flush=True)
            order = servers if r % 2 == 0 else servers[::-1]
            for t in tests:
                run_round(a, procs, ports, t, order, rows)
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait()
    fig = summarize(rows, servers, tests, a.pipeline)
    report(fig, servers, tests, a.pipeline)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bench": "server_rounds", "rounds": a.rounds, "requests": a.requests,
                       "pipeline": a.pipeline, "clients": a.clients, "value": a.value,
                       "keys": a.keys, "figures": fig, "runs": rows}, f, indent=1)

if __name__ == "__main__":
    main()
