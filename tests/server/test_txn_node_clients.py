"""B1 through the two Node.js clients the issue tried (ioredis, node-redis):
a MULTI with one argument over max_bulk fails as a whole, nothing applied
(before the fix ioredis resolved with 2 results and no error, after 2 of
the 3 writes were applied). The clients are not Debian packages: they are
installed with npm into a folder outside the repository, named by
PCACHE_NODE_MODULES (a node_modules folder holding ioredis and redis; tests/run.sh installs
ioredis 6.1.0 and redis 4.7.1 into /var/cache/pcache-tests/node with npm);
without it, or without node, the test is SKIPPED (exit 77)."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from pcached_harness import Server  # noqa: E402

MAX_BULK = 4096


def main():
    mods = os.environ.get("PCACHE_NODE_MODULES", "")
    node = shutil.which("node")
    if node is None or not all(os.path.isdir(os.path.join(mods, m)) for m in ("ioredis", "redis")):
        print("SKIPPED: node or PCACHE_NODE_MODULES (ioredis, redis) absent")
        return 77
    s = Server(workers=2, max_bulk=MAX_BULK).start()
    try:
        script = os.path.join(os.path.dirname(__file__), "node", "txn_refused.js")
        out = subprocess.run([node, script, str(s.port), str(MAX_BULK)], check=True,
                             capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, NODE_PATH=mods)).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        bad = [r for r in rows if r["error"] is None or r["exists"] != 0]
        for r in rows:
            print(r)
        if len(rows) != 2 or bad:
            print("FAIL: a client saw a partial transaction: %s" % bad)
            return 1
        print("OK: both clients saw the transaction fail, nothing applied")
        return 0
    finally:
        s.cleanup()


if __name__ == "__main__":
    sys.exit(main())
