"""bench/plot: the charts a reader understands without the source, checked
on the drawn figures of the newest record of each bench (engine, store,
server, odbc), and on an older engine record that has throughput bars:

- the title is words: no file name, no commit, no figure key;
- the footer names the machine (the record's) and the source;
- every colour of a panel is in that panel's legend, and so is every line;
- a panel says higher or lower is better, never both;
- every "N.NNx" printed is either a ratio computed from the two bars it
  names, beside each other in one group (their heights give exactly the
  label), or the value of the ratio bar it sits on;

and on the files: one valid SVG per bench with its text kept as text,
reproducible, the committed docs/img/*.svg exactly what --latest draws
now, a raw `pcache-bench --json` object accepted (its machine from
--machine), input it cannot read refused. SKIPPED (77) without
python3-matplotlib."""
import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PLOT = os.path.join(ROOT, "bench", "plot")
RESULTS = os.path.join(ROOT, "bench", "results")


def run(*args):
    return subprocess.run([sys.executable, PLOT] + list(args), capture_output=True, text=True)


def load_plot():
    loader = importlib.machinery.SourceFileLoader("bench_plot", PLOT)
    spec = importlib.util.spec_from_loader("bench_plot", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def legend_of(ax):
    """The colours and labels of ax's legend."""
    from matplotlib.colors import to_hex
    leg = ax.get_legend()
    if leg is None:
        return set(), set()
    handles = getattr(leg, "legend_handles", None) or getattr(leg, "legendHandles", [])
    colours = {to_hex(h.get_facecolor()) for h in handles if hasattr(h, "get_facecolor")}
    return colours, {t.get_text() for t in leg.get_texts()}


def all_texts(fig):
    """Every text the figure shows, with the object that carries it."""
    out = [(t.get_text(), t) for t in fig.texts]
    if fig._suptitle is not None:
        out.append((fig._suptitle.get_text(), fig._suptitle))
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out += [(t.get_text(), t) for t in ax.texts]
        out += [(ax.get_title(), None), (ax.get_xlabel(), None), (ax.get_ylabel(), None)]
        out += [(t.get_text(), None) for t in ax.get_xticklabels() + ax.get_yticklabels()]
        _, labels = legend_of(ax)
        out += [(t, None) for t in labels]
    return out


def check_figure(plot, fig, rec, what):
    from matplotlib.colors import to_hex
    title = fig._suptitle.get_text()
    assert len(re.findall(r"[A-Za-z]+", title)) >= 6, (what, title)
    assert ".json" not in title and not re.search(r"\b[0-9a-f]{7,}\b", title), (what, title)
    keys = {k for k in rec.keys() if "_" in k}
    for text, _ in all_texts(fig):
        for k in keys:
            assert k not in text, "%s: the figure key %s is shown: %r" % (what, k, text)
    machine = rec.machine.split(";")[0].strip()
    foot = "\n".join(t.get_text() for t in fig.texts)
    assert "Machine: " + machine in foot.replace("\n", " "), (what, foot)
    assert "Source: bench/results/" + rec.source in foot, (what, foot)
    bars = {}
    for ax in fig.axes:
        for p in ax.patches:
            if (p.get_gid() or "").startswith("bar:"):
                bars[p.get_gid()] = (ax, p)
    assert bars, what
    nratios = 0
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        t = ax.get_title()
        assert ("higher is better" in t) != ("lower is better" in t), (what, t)
        colours, labels = legend_of(ax)
        mine = {to_hex(p.get_facecolor()) for g, (a, p) in bars.items() if a is ax}
        assert mine and mine <= colours, (what, t, mine - colours)
        for line in ax.lines:
            assert line.get_label() in labels, (what, t, line.get_label())
    for text, obj in all_texts(fig):
        for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)x\b", text):
            gid = obj.get_gid() if obj is not None else None
            assert gid, "%s: %r is not a ratio the chart computed or drew" % (what, text)
            if gid.startswith("ratio:"):
                a, b = gid[len("ratio:"):].split("/")
                (ax_a, pa), (ax_b, pb) = bars[a], bars[b]
                assert ax_a is ax_b, (what, gid)
                assert a.split(":")[-1] == b.split(":")[-1], "%s: %s not beside %s" % (what, a, b)
                want = plot.fmt_ratio(pa.get_height() / pb.get_height())
                assert text == want, (what, gid, text, want)
                nratios += 1
            else:
                assert gid.startswith("value:"), (what, gid)
                _, p = bars[gid[len("value:"):]]
                assert text == plot.fmt_ratio(p.get_width()), (what, gid, text)
    return nratios


def check_figures():
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    plot = load_plot()
    files = plot.latest(RESULTS)
    assert len(files) == 4, files
    extra = os.path.join(RESULTS, "2026-11-30T0845-engine.json")  # one with throughput bars
    counts = {}
    for path in files + ([extra] if os.path.exists(extra) else []):
        rec = plot.Record(path)
        fig, b = plot.draw(plt, path)
        counts[os.path.basename(path)] = check_figure(plot, fig, rec, os.path.basename(path))
        plt.close(fig)
    # the rate charts carry ratios computed from their bars
    for f, n in counts.items():
        if re.search(r"-(server|store|odbc)\.json$", f) or f.endswith("0845-engine.json"):
            assert n > 0, (f, counts)
    return counts


def svg_text(path):
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg"), (path, root.tag)
    return " ".join("".join(e.itertext()) for e in root.iter() if e.tag.endswith("text"))


def main():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("SKIPPED: bench/plot needs python3-matplotlib (apt-get install python3-matplotlib)")
        return 77
    counts = check_figures()
    with tempfile.TemporaryDirectory() as out:
        p = run("--latest", "--out", out)
        assert p.returncode == 0, p.stdout + p.stderr
        for b in ("engine", "store", "server", "odbc"):
            text = svg_text(os.path.join(out, "bench-%s.svg" % b))
            assert "Machine: " in text and "is better" in text, (b, text[:300])
        # reproducible: a second run writes the same bytes; the committed
        # charts are what the plot draws now
        first = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
        p = run("--latest", "--out", out)
        assert p.returncode == 0, p.stderr
        for f, data in first.items():
            assert open(os.path.join(out, f), "rb").read() == data, f + " is not reproducible"
            committed = os.path.join(ROOT, "docs", "img", f)
            assert open(committed, "rb").read() == data, \
                "docs/img/%s is not what bench/plot --latest draws: run it and commit" % f
        # the raw form pcache-bench --json prints, after a progress line
        raw = os.path.join(out, "raw.json")
        with open(raw, "w") as f:
            f.write("running...\n" + json.dumps({
                "ratio_set_p1": 1.1, "ratio_get_p1": 1.2,
                "pcached_set_p1": {"rate": 80000}, "redis_set_p1": {"rate": 70000}}))
        p = run("--out", os.path.join(out, "raw"), "--machine", "a test box", raw)
        assert p.returncode == 0, p.stderr
        text = svg_text(os.path.join(out, "raw", "bench-server.svg"))
        assert "Machine: a test box" in text and "1.14x" in text, text
        p = run("--out", os.path.join(out, "raw2"), raw)
        assert "Machine: not recorded" in svg_text(os.path.join(out, "raw2", "bench-server.svg"))
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
    print("ok: 4 charts (+1 older engine record) read without the source; computed ratios %s; "
          "reproducible, committed, raw --json accepted, bad input refused" % counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
