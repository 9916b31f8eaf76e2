"""bench/plot: the recorded results in bench/results become one valid SVG
per bench (engine, store, server, odbc), a raw `pcache-bench --json`
object is accepted as well, the committed charts in docs/img are the ones
docs/benchmarks.md and README.md show, and input it cannot read is an
error, not an empty chart. SKIPPED (77) without python3-matplotlib."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PLOT = os.path.join(ROOT, "bench", "plot")


def run(*args):
    return subprocess.run([sys.executable, PLOT] + list(args), capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as out:
        p = run("--latest", "--out", out)
        if p.returncode == 77:
            print(p.stdout.strip())
            return 77
        assert p.returncode == 0, p.stdout + p.stderr
        for b in ("engine", "store", "server", "odbc"):
            path = os.path.join(out, "bench-%s.svg" % b)
            root = ET.parse(path).getroot()
            assert root.tag.endswith("svg"), (path, root.tag)
            text = open(path).read()
            assert "<text" in text or "glyph" in text or "<path" in text, path
            # reproducible: a second run writes the same bytes
        first = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
        p = run("--latest", "--out", out)
        assert p.returncode == 0, p.stderr
        for f, data in first.items():
            assert open(os.path.join(out, f), "rb").read() == data, f + " is not reproducible"
        # the raw form pcache-bench --json prints, after a progress line
        raw = os.path.join(out, "raw.json")
        with open(raw, "w") as f:
            f.write("running...\n" + json.dumps({"ratio_set_p1": 1.1, "ratio_get_p1": 1.2,
                                                 "pcached_set_p1": 80000, "redis_set_p1": 70000}))
        p = run("--out", os.path.join(out, "raw"), raw)
        assert p.returncode == 0, p.stderr
        ET.parse(os.path.join(out, "raw", "bench-server.svg"))
        bad = os.path.join(out, "bad.json")
        with open(bad, "w") as f:
            f.write('{"nothing": 1}')
        p = run("--out", out, bad)
        assert p.returncode == 1 and "not engine, store, server or odbc" in p.stderr, p.stderr
    # the committed charts exist and the pages show them
    docs = open(os.path.join(ROOT, "docs", "benchmarks.md")).read()
    readme = open(os.path.join(ROOT, "README.md")).read()
    for b in ("engine", "store", "server", "odbc"):
        assert os.path.exists(os.path.join(ROOT, "docs", "img", "bench-%s.svg" % b)), b
        assert "img/bench-%s.svg" % b in docs, "docs/benchmarks.md does not show " + b
    assert "docs/img/bench-" in readme, "README.md shows no chart"
    print("ok: 4 charts, reproducible, raw --json accepted, bad input refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
