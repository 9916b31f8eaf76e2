#!/bin/sh
# test_cli: the command-line contract of every tool (docs/pcached.md §5,
# docs/pcache-snapshot.md, the man pages):
#   --help exits 0 with the usage on stdout and nothing on stderr;
#   --version prints "<tool> <the project version>" (pcache_version());
#   pcachectl: numbers parsed strictly (a port is 1-65535 digits, never
#   atoi's "12ab" = 12), clear errors with status 2, and its default socket
#   is the unix_socket of the installed pcached.conf.
# usage: test_cli.sh BUILD_DIR SOURCE_DIR PROJECT_VERSION
set -eu
build=$1
src=$2
version=$3
tmp=$(mktemp -d /tmp/pcache-cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pcached="$build/src/server/pcached"
ctl="$build/src/tools/pcachectl"
snap="$build/src/tools/snapshot/pcache-snapshot"

for t in "$pcached" "$ctl" "$snap"; do
    name=$(basename "$t")
    for h in --help -h; do
        rc=0
        "$t" $h >"$tmp/out" 2>"$tmp/err" || rc=$?
        [ "$rc" = 0 ] || fail "$name $h: exit $rc"
        grep -q '^usage: ' "$tmp/out" || fail "$name $h: no usage on stdout"
        [ ! -s "$tmp/err" ] || fail "$name $h: wrote on stderr: $(cat "$tmp/err")"
    done
    for v in --version -V; do
        out=$("$t" $v) || fail "$name $v: exit $?"
        [ "$out" = "$name $version" ] || fail "$name $v: '$out', expected '$name $version'"
    done
done

# pcachectl: strict numbers, clear errors (status 2, on stderr, naming the fault)
expect_err() { # want-substring args...
    want=$1
    shift
    rc=0
    "$ctl" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" = 2 ] || fail "pcachectl $*: exit $rc, expected 2"
    grep -qF -- "$want" "$tmp/err" || fail "pcachectl $*: stderr '$(cat "$tmp/err")' lacks '$want'"
    [ ! -s "$tmp/out" ] || fail "pcachectl $*: wrote on stdout"
}
expect_err "'12ab' is not a port" -p 12ab perf_stats
expect_err "'0' is not a port" -p 0 perf_stats
expect_err "'65536' is not a port" -p 65536 perf_stats
expect_err "'-1' is not a port" -p -1 perf_stats
expect_err "'' is not a port" -p '' perf_stats
expect_err "-p needs a value" -p
expect_err "unknown option '-x'" -x perf_stats
expect_err "no METHOD given" -s "$tmp/none.sock"
rc=0
PCACHECTL_PORT=7x "$ctl" perf_stats 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "PCACHECTL_PORT: '7x' is not a port" "$tmp/err" ||
    fail "PCACHECTL_PORT=7x: exit $rc, $(cat "$tmp/err")"
expect_err "$tmp/none.sock: No such file or directory" -s "$tmp/none.sock" perf_stats

# the default socket is the installed configuration's unix_socket
sock=$(sed -n 's/^unix_socket *= *//p' "$src/src/server/pcached.conf")
[ -n "$sock" ] || fail "pcached.conf sets no unix_socket"
if [ ! -e "$sock" ]; then
    expect_err "$sock: No such file or directory (the default socket" perf_stats
fi
"$ctl" --help | grep -qF "(default $sock)" || fail "pcachectl --help does not name $sock"
"$ctl" --help | grep -q 'pcached\.sock' || fail "pcachectl --help: no example socket"
if "$ctl" --help | grep -q '/run/pcached/'; then fail "pcachectl --help: /run/pcached/ example"; fi
# the run command installs what pcached needs, not database servers nor
# the test framework (issue 22: it installed PostgreSQL and MariaDB)
run_pkgs=$(sed -n 's/^RUN_PKGS="\(.*\)"$/\1/p' "$src/.ci/deps.sh" | tr '\n' ' ')
[ -n "$run_pkgs" ] || fail ".ci/deps.sh has no RUN_PKGS"
for p in postgresql mariadb-server redis-server libcmocka-dev odbc-postgresql; do
    case " $run_pkgs " in *" $p "*) fail "the run set installs $p" ;; esac
done
grep -q '\.ci/deps\.sh" run' "$src/scripts/run.sh" || fail "scripts/run.sh does not use the run set"
grep -q 'pcache-snapshot' "$src/scripts/run.sh" || fail "scripts/run.sh does not build pcache-snapshot"
echo "cli OK"
