"""bench/figures_table.py: docs/benchmarks.md's figures table is exactly
what bench/results/ gives (--check), and the check can fail: a copy of the
results with one figure changed, or a record removed, gives another table
and --check exits 1. Every row links a record that exists and names a
command; a figure whose record lacks the key that proves it measured what
it names (the key-walk ratio without keys_scan_entries_walked) is listed as
not measured, never shown."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import json

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOOL = os.path.join(ROOT, "bench", "figures_table.py")
RESULTS = os.path.join(ROOT, "bench", "results")
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")


def run(*args):
    return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True)


def main():
    r = run("--check")
    assert r.returncode == 0, "the page's table is stale:\n" + r.stderr
    table = run().stdout
    rows = [l for l in table.splitlines() if l.startswith("| ") and not l.startswith("| figure")
            and not l.startswith("| ---")]
    assert len(rows) >= 20, rows
    for row in rows:
        links = re.findall(r"\]\(\.\./bench/results/([^)]+)\)", row)
        assert len(links) == 1 and os.path.exists(os.path.join(RESULTS, links[0])), row
        assert re.search(r"\| `[^`]+` \|$", row), "no command: " + row
        assert "(not recorded)" not in row, row
    walk = [r for r in rows if r.startswith("| engine: 95/5 during a full key walk loop |")]
    for row in walk:  # shown only from a record whose walker reported its entries
        name = re.findall(r"results/([^)]+)\)", row)[0]
        with open(os.path.join(RESULTS, name)) as f:
            assert "keys_scan_entries_walked" in f.read(), row
    if not walk:
        assert "engine: 95/5 during a full key walk loop" in table.split("Not measured")[1]

    with tempfile.TemporaryDirectory() as d:
        res = os.path.join(d, "results")
        shutil.copytree(RESULTS, res)
        page = os.path.join(d, "benchmarks.md")
        shutil.copy(PAGE, page)
        assert run("--results", res, "--page", page, "--check").returncode == 0
        # one figure changed in the newest store record: the table must change
        store = sorted(f for f in os.listdir(res) if f.endswith("-store.json"))[-1]
        with open(os.path.join(res, store)) as f:
            rec = json.load(f)
        for run_figs in rec["figures"].values():
            if "save_entries_per_s" in run_figs:
                run_figs["save_entries_per_s"] = 123.0
        with open(os.path.join(res, store), "w") as f:
            json.dump(rec, f)
        r = run("--results", res, "--page", page, "--check")
        assert r.returncode == 1 and "figures_table" in r.stderr, (r.returncode, r.stderr)
        assert run("--results", res, "--page", page, "--write").returncode == 0
        with open(page) as f:  # one run, or several (their median and range)
            assert re.search(r"\| 123( \(123-123, \d+ runs\))? \|", f.read())
        assert run("--results", res, "--page", page, "--check").returncode == 0
        # a record removed: its rows fall back to an older record or go missing
        os.remove(os.path.join(res, store))
        assert run("--results", res, "--page", page, "--check").returncode == 1
    print("ok: %d rows" % len(rows))


if __name__ == "__main__":
    main()
