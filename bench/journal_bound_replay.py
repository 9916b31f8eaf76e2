"""Worst-case replay at the journal's bound (docs/benchmarks.md, journal):
pcached with the journal on (everysec), no periodic save and the default
bound (journal_rewrite_percent 100, journal_rewrite_min_mb 64); distinct
keys are written until the journal holds just under the bound (no snapshot
yet, so the bound is the 64 MiB floor and nothing saves), pcached is killed
(SIGKILL: no shutdown save), and the restart's warm-up is read from its log
("loaded default: ... in X s"). Prints one JSON object.

  PCACHED=build/src/server/pcached /usr/bin/python3 bench/journal_bound_replay.py [--mb 63] [--value 200]
"""
import argparse
import json
import os
import re
import signal
import sys
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "server"))
from pcached_harness import Server  # noqa: E402


def journal_bytes(store):
    d = os.path.join(store, "journal")
    return sum(os.stat(os.path.join(d, n)).st_size for n in os.listdir(d) if n.endswith(".wal"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=63.0, help="journal size to reach, MiB")
    ap.add_argument("--value", type=int, default=200, help="value bytes")
    ap.add_argument("--mem-mb", type=int, default=1024)
    a = ap.parse_args()
    s = Server(db_mode=1, persist_collections="default", journal="default=everysec",
               snapshot_period_s=0, workers=2, mem_mb=a.mem_mb)
    store = os.path.join(s.dir, "store")
    s.opts["db_url"] = store
    try:
        s.start()
        r = redis.Redis(port=s.port, socket_timeout=30)
        val = b"v" * a.value
        target = int(a.mb * 2**20)
        i = 0
        # fast up to 2 MiB below the target, then in small steps that give the
        # drainer time to write the rings out, so the bound (64 MiB) is not
        # crossed (a bound-triggered save would retire the journal)
        while True:
            near = journal_bytes(store) >= target - (2 << 20)
            p = r.pipeline(transaction=False)
            for _ in range(200 if near else 1000):
                p.set("key:%09d" % i, val)
                i += 1
            p.execute()
            if near:
                time.sleep(0.2)
                if journal_bytes(store) >= target:
                    break
        time.sleep(1.5)
        jb = journal_bytes(store)
        bound_saves = len(re.findall(r"past its bound", s.log_text()))
        r.close()
        s.stop(sig=signal.SIGKILL, timeout=10)
        t0 = time.monotonic()
        s.start(timeout=300)
        start_s = time.monotonic() - t0
        log = s.log_text()
        m = re.search(r"loaded default: (\d+) entries .* in ([0-9.]+) s", log)
        j = re.search(r"collection 'default': read (\d+) segment\(s\), (\d+) record\(s\)", log)
        r = redis.Redis(port=s.port, socket_timeout=30)
        keys = r.dbsize()
        r.close()
        out = {"journal_bytes": jb, "journal_mib": round(jb / 2**20, 1), "keys_written": i,
               "keys_after_restart": keys, "bound_saves_before_kill": bound_saves,
               "segments": int(j.group(1)) if j else None,
               "records": int(j.group(2)) if j else None,
               "warmup_s_from_log": float(m.group(2)) if m else None,
               "restart_to_serving_s": round(start_s, 3), "value_bytes": a.value}
        print(json.dumps(out))
    finally:
        s.cleanup()


if __name__ == "__main__":
    main()
