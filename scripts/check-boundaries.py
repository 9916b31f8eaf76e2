#!/usr/bin/python3
"""Checks the component boundaries of docs/architecture.md.

Usage: check-boundaries.py [SOURCE_ROOT]

Fails (exit 1, one line per violation) when
  - a file includes the header of a component that is not below its own,
  - a file includes another component's private header (anything outside
    that component's include/ folder), except the declared white-box test
    interfaces (a component's testing/ folder, and the server headers listed
    in TEST_INTERFACES) included from tests/ or bench/, and the private
    headers of FRIEND_INTERFACES included by the one component named there,
  - a CMakeLists.txt links a component library into a target of a component
    that may not depend on it, or a FRIEND_TARGETS interface into a target
    of a component other than the one named there,
  - two headers of the project share a name (an include would be ambiguous),
  - product code calls a libc service outside its one home (LIBC_HOMES:
    clock_gettime outside src/util).
Exit 0 and a summary line otherwise.
"""
import os
import re
import sys

# Components bottom to top: (name, folders, components it may depend on).
# The table of docs/architecture.md; keep the two in step.
COMPONENTS = [
    ("util", ["src/util"], []),
    ("engine", ["src/engine"], ["util"]),
    ("mgmt", ["src/mgmt"], ["engine", "util"]),
    ("store", ["storage/store"], ["mgmt", "engine", "util"]),
    ("storecheck", ["storage/storecheck"], ["store", "mgmt", "engine", "util"]),
    ("journal", ["storage/journal"], ["store", "mgmt", "engine", "util"]),
    ("persist", ["storage/persist"], ["journal", "storecheck", "store", "mgmt", "engine", "util"]),
    ("odbc", ["odbc"], ["persist", "journal", "storecheck", "store", "mgmt", "engine", "util"]),
    ("server", ["src/server"],
     ["odbc", "persist", "journal", "storecheck", "store", "mgmt", "engine", "util"]),
    ("tools", ["src/tools"],
     ["odbc", "persist", "journal", "storecheck", "store", "mgmt", "engine", "util"]),
    ("opensips", ["opensips_module"],
     ["odbc", "persist", "journal", "storecheck", "store", "mgmt", "engine", "util"]),
    ("testsupport", ["tests/support"],
     ["server", "odbc", "persist", "journal", "storecheck", "store", "mgmt", "engine", "util"]),
    ("tests", ["tests"],
     ["testsupport", "server", "tools", "odbc", "persist", "journal", "storecheck", "store", "mgmt",
      "engine", "util"]),
    ("bench", ["bench"],
     ["testsupport", "odbc", "persist", "journal", "storecheck", "store", "mgmt", "engine",
      "util"]),
]
# Library targets and the component that builds them.
TARGETS = {
    "pcache_util": "util",
    "pcache": "engine",
    "pcache_testhooks": "engine",
    "pcache_mgmt": "mgmt",
    "pcache_store": "store",
    "pcache_store_testing": "store",
    "pcache_store_raw": "store",
    "pcache_storecheck": "storecheck",
    "pcache_journal": "journal",
    "pcache_journal_testing": "journal",
    "pcache_persist": "persist",
    "pcache_odbc": "odbc",
    "pcache_odbc_testing": "odbc",
    "pcached_resp": "server",
    "pcached_testing": "server",
    "pcache_sipgen": "testsupport",
}
# Targets that are white-box test interfaces: only tests/ and bench/ link them.
TESTING_TARGETS = {"pcache_testhooks", "pcache_store_testing", "pcache_journal_testing",
                   "pcache_odbc_testing", "pcached_testing"}
# Private headers that are declared white-box test interfaces outside a
# testing/ folder: the server's parsers (pcached_testing), the snapshot
# format codec (pcache_store_testing) and the ODBC batch writer
# (pcache_odbc_testing).
TEST_INTERFACES = {"src/server/resp.h", "src/server/sync_wire.h", "storage/store/store_format.h",
                   "odbc/odbc_writer.h"}
# Private headers and interface targets of a component that one named
# component above it may use, and no other: the store core's interface for
# the structural check (store_raw.h, target pcache_store_raw), which reads
# LMDB's pages and the format itself.
FRIEND_INTERFACES = {"storage/store/store_raw.h": {"storecheck"}}
FRIEND_TARGETS = {"pcache_store_raw": {"storecheck"}}
TOP = {"tests", "bench"}
# Components whose every header is public (no include/ folder): the test
# support headers, for the tests and the benchmarks.
FLAT = {"testsupport"}


def component_of(path):
    best = None
    for name, folders, _ in COMPONENTS:
        for f in folders:
            if path == f or path.startswith(f + "/"):
                if best is None or len(f) > len(best[1]):
                    best = (name, f)
    return best


def allowed(name):
    for n, _, deps in COMPONENTS:
        if n == name:
            return set(deps)
    return set()


# libc services with one home: product code outside that folder reaches them
# through the home's functions (pcache_util.h: pc_mono_ms, pc_wall_ms,
# pc_mono_us, pc_wall_ts, ...), so a clock is read one way everywhere.
# Benchmarks (bench/, a component's bench/ folder) and tests time with
# their own clocks and are not held to it.
LIBC_HOMES = [("clock_gettime", "src/util")]
CALL = re.compile(r"\b(%s)\s*\(" % "|".join(n for n, _ in LIBC_HOMES))


def libc_homes(root, files):
    found = []
    home = dict(LIBC_HOMES)
    for f in files:
        me = component_of(f)
        if not f.endswith((".c", ".h")) or me is None or me[0] in TOP or me[0] in FLAT:
            continue
        if "bench" in f.split(os.sep)[:-1]:
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        # strings and comments may name the call ("POSIX clock_gettime")
        code = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                      text, flags=re.S)
        for m in CALL.finditer(code):
            where = home[m.group(1)]
            if f == where or f.startswith(where + "/"):
                continue
            lineno = code.count("\n", 0, m.start()) + 1
            found.append("%s:%d: calls %s, whose home is %s (use its functions)"
                         % (f, lineno, m.group(1), where))
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames
                       if not d.startswith(".") and not d.startswith("build")]
        for fn in filenames:
            files.append(os.path.normpath(os.path.join(rel, fn)))
    headers = {}
    problems = []
    for f in files:
        if f.endswith(".h") and component_of(f):
            headers.setdefault(os.path.basename(f), []).append(f)
    for base, where in headers.items():
        if len(where) > 1:
            problems.append("header name %s is not unique: %s" % (base, ", ".join(where)))

    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    checked = 0
    for f in files:
        if not f.endswith((".c", ".h")):
            continue
        me = component_of(f)
        if me is None:
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
        for lineno, line in enumerate(lines, 1):
            m = inc.match(line)
            if not m:
                continue
            target = m.group(1)
            cand = os.path.normpath(os.path.join(os.path.dirname(f), target))
            if cand not in headers.get(os.path.basename(cand), []):
                where = headers.get(os.path.basename(target), [])
                if not where:
                    continue  # not a project header (OpenSIPS, system)
                cand = where[0]
            checked += 1
            them = component_of(cand)
            if them is None or them[0] == me[0]:
                continue
            sub = os.path.relpath(cand, them[1]).split(os.sep)[0]
            where = "%s:%d" % (f, lineno)
            if me[0] in TOP and (sub == "testing" or cand in TEST_INTERFACES):
                pass
            elif me[0] in FRIEND_INTERFACES.get(cand, ()):
                pass
            elif them[0] not in allowed(me[0]):
                problems.append("%s: %s (%s) includes %s of %s, which is not below it"
                                % (where, me[0], f, cand, them[0]))
                continue
            elif sub != "include" and them[0] not in FLAT:
                problems.append("%s: includes %s, a private header of %s"
                                % (where, cand, them[0]))

    link = re.compile(r"target_link_libraries\s*\(\s*([\w$<>:{}-]+)([^)]*)\)", re.S)
    for f in files:
        if os.path.basename(f) != "CMakeLists.txt" and not f.endswith(".cmake"):
            continue
        me = component_of(f)
        if me is None:
            continue
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            text = fh.read()
        for m in link.finditer(text):
            owner = TARGETS.get(m.group(1))
            # a library's owner is its component; an executable is its folder's
            mine = owner or me[0]
            for lib in re.findall(r"[\w-]+", m.group(2)):
                if lib not in TARGETS or TARGETS[lib] == mine:
                    continue
                if lib in TESTING_TARGETS and mine not in TOP:
                    problems.append("%s: %s links %s, a test interface" % (f, m.group(1), lib))
                elif lib in FRIEND_TARGETS and mine not in FRIEND_TARGETS[lib]:
                    problems.append("%s: %s (%s) links %s, an interface for %s only"
                                    % (f, m.group(1), mine, lib,
                                       ", ".join(sorted(FRIEND_TARGETS[lib]))))
                elif TARGETS[lib] not in allowed(mine):
                    problems.append("%s: %s (%s) links %s of %s, which is not below it"
                                    % (f, m.group(1), mine, lib, TARGETS[lib]))
    problems += libc_homes(root, files)
    for p in problems:
        print("boundary violation: " + p)
    print("check-boundaries: %d project includes checked, %d violations" % (checked, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
