"""Every bench script in bench/ (and, when given, every pcache-bench
subcommand and pcache-store-bench) answers --help: exit 0 and a usage on
stdout, without starting anything (issue 35: mem_per_entry.py read the
flag as the pcached path and crashed).

  test_bench_help.py [PCACHE_BENCH [PCACHE_STORE_BENCH]]"""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BENCH = os.path.join(ROOT, "bench")


def check(argv):
    r = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, "%s --help: exit %d\n%s" % (argv, r.returncode, r.stderr[-2000:])
    assert "usage" in r.stdout.lower() or len(r.stdout.split()) >= 8, (argv, r.stdout[:500])


def main():
    n = 0
    for name in sorted(os.listdir(BENCH)):
        path = os.path.join(BENCH, name)
        if name.endswith(".py") or name == "plot":
            check([sys.executable, path])
        elif name.endswith(".sh"):
            check(["bash", path])
        else:
            continue
        n += 1
    for exe in sys.argv[1:2]:
        for sub in ("engine", "store", "server", "evict"):
            check([exe, sub])
            n += 1
    for exe in sys.argv[2:3]:
        check([exe])
        n += 1
    print("ok: %d commands answer --help" % n)


if __name__ == "__main__":
    main()
