#!/bin/sh
# test_check: `pcached --check` fails exactly where the start fails on its
# configuration (the unit's ExecStartPre, docs/pcached.md "--check"). Each
# case is a configuration the start refuses: --check must exit 2 with a
# message naming the fault, and the start must fail too (so the case is a
# real one, not an invented rule). Regression for issue 22: --check said
# "configuration OK" for bind=localhost, a relative lmdb:// path (whose
# start error then said perf://), persist_collections naming an undeclared
# collection, an unknown journal mode, a store under a regular file.
# A good configuration passes and creates nothing. The directories pcached
# writes in are checked for the user it runs as, and the start makes a
# missing runtime directory when it can. The memory ceiling and a
# redis.conf-style line are refused with the reason and the pcached form;
# a configuration that loses data at a restart passes with a WARN line
# naming the key to set, and the store defaults have none (issue 32).
# usage: test_check.sh PCACHED
set -eu
pcached=$1
tmp=$(mktemp -d /tmp/pcache-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
: >"$tmp/afile"
mkdir "$tmp/data"
base="--port=0 --workers=1 --mem_mb=16"
run_as="" # a command prefix: the user pcached runs as

case_bad() { # "want-substring[|start's substring]" pcached-args...
    want=${1%%|*}
    swant=${1#*|}
    shift
    rc=0
    # shellcheck disable=SC2086
    $run_as "$pcached" $base "$@" --check >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" = 2 ] || fail "--check $*: exit $rc, expected 2 ($(cat "$tmp/err"))"
    grep -qF -- "$want" "$tmp/err" || fail "--check $*: '$(cat "$tmp/err")' lacks '$want'"
    if grep -q 'perf://' "$tmp/err"; then fail "--check $*: names perf:// ($(cat "$tmp/err"))"; fi
    rc=0
    # shellcheck disable=SC2086
    timeout 20 $run_as "$pcached" $base "$@" >"$tmp/start" 2>&1 || rc=$?
    [ "$rc" != 0 ] && [ "$rc" != 124 ] ||
        fail "start with $*: exit $rc, but --check refused it ($want)"
    grep -qF -- "$swant" "$tmp/start" ||
        fail "start with $*: log lacks '$swant': $(cat "$tmp/start")"
    if grep -q 'perf://' "$tmp/start"; then fail "start with $*: names perf://"; fi
    echo "ok: $want"
}

store="lmdb://$tmp/data/store"
case_bad "bind: 'localhost' is not an IPv4 or IPv6 address" --bind=localhost
case_bad "bind: more than 16 addresses" --bind='1.1.1.1 1.1.1.2 1.1.1.3 1.1.1.4 1.1.1.5 1.1.1.6 1.1.1.7 1.1.1.8 1.1.1.9 1.1.1.10 1.1.1.11 1.1.1.12 1.1.1.13 1.1.1.14 1.1.1.15 1.1.1.16 1.1.1.17'
case_bad "http_bind: 'localhost' is not an IPv4 address" --http_bind=localhost --http_port=1
case_bad "sync_bind: 'localhost' is not an IPv4 address" --sync_bind=localhost --sync_port=1
case_bad "expected lmdb:///absolute/path" --db_url=lmdb://rel/store --db_mode=1
case_bad "persist_collections names 'nope', which is not a declared collection" \
    --db_url="$store" --persist_collections=nope
case_bad "journal: 'default=sometimes': the mode must be off, everysec or always" \
    --db_url="$store" --persist_collections=default --journal=default=sometimes
case_bad "journal names 'nope', which is not a declared collection" \
    --db_url="$store" --journal=nope=everysec
case_bad "$tmp/afile is not a directory" --db_url="lmdb://$tmp/afile/store" --db_mode=1
case_bad "$tmp/afile is not a directory" --db_url="$tmp/afile" --db_mode=1
case_bad "$tmp/missing: No such file or directory" --db_url="$tmp/missing/store" --db_mode=1
case_bad "store_root 'relative-nowhere': No such file or directory" \
    --db_url="$store" --store_root=relative-nowhere
case_bad "unix_socket: $tmp/afile/s.sock: $tmp/afile is not a directory" \
    --unix_socket="$tmp/afile/s.sock"
case_bad "pidfile: $tmp/afile/p.pid: $tmp/afile is not a directory" \
    --pidfile="$tmp/afile/p.pid"
case_bad "select_collections: 'nope' (db 0) is not a declared collection" \
    --select_collections=nope

# the memory ceiling is refused when the configuration is read, with why
case_bad "mem_mb: 40000 is out of range [8, 32702] (one cache maps at most 32 GiB" --mem_mb=40000
case_bad "with these collections and hugepage_mb, mem_mb can be at most" \
    --mem_mb=30000 --hugepage_mb=4000
# a redis.conf line: the pcached form
printf 'port 6379\n' >"$tmp/redis-style.conf"
case_bad "got 'port 6379' (redis.conf's form): write 'port = 6379'" -c "$tmp/redis-style.conf"

# Defaults that keep data (issue 32 item 4): a configuration that loses
# data at a restart passes, with a WARN line naming the key to set; the
# store defaults (db_url alone, Redis's dir) have none.
case_warn() { # "want-substring" pcached-args...
    want=$1
    shift
    # shellcheck disable=SC2086
    "$pcached" $base "$@" --check >"$tmp/out" 2>"$tmp/err" ||
        fail "--check $*: exit $?, expected 0 ($(cat "$tmp/err"))"
    grep -F -- "pcached: WARN " "$tmp/err" | grep -qF -- "$want" ||
        fail "--check $*: no WARN line with '$want': $(cat "$tmp/err")"
    echo "ok: WARN $want"
}
case_warn "no store (db_url is empty): every key is lost when pcached stops; set db_url"
case_warn "db_mode 0: the store is neither loaded at start nor saved at shutdown" \
    --db_url="$store" --db_mode=0
case_warn "collection 'default' is not in persist_collections" \
    --db_url="$store" --persist_collections=
case_warn "collection 'default' has no journal: a crash (kill -9, OOM, power loss) loses its writes since the last save; set journal = default=everysec" \
    --db_url="$store" --journal=
case_warn "collection 'default' has no journal and db_mode 1 saves nothing at shutdown" \
    --db_url="$store" --db_mode=1 --journal=
case_warn "collection 'b' is not in persist_collections" \
    --db_url="$store" --collections='a;b'
for keep in "--db_url=$store" "--dir=$tmp/data" "--db_url=$store --db_mode=1"; do
    # shellcheck disable=SC2086
    "$pcached" $base $keep --check >"$tmp/out" 2>"$tmp/err" || fail "--check $keep: $(cat "$tmp/err")"
    if grep -q WARN "$tmp/err"; then fail "--check $keep warns: $(cat "$tmp/err")"; fi
    grep -q "^# store: .*db_mode [12], persisted: default, journal: default=everysec" "$tmp/out" ||
        fail "--check $keep: $(grep '^# store' "$tmp/out")"
    echo "ok: no WARN with $keep"
done
"$pcached" $base --dir="$tmp/data" --check | grep -q "^db_url = $tmp/data/store\$" ||
    fail "dir: the store is not <dir>/store"
# the journal's default follows persist_collections
"$pcached" $base --db_url="$store" --collections='a;b' --persist_collections=b --check \
    >"$tmp/out" 2>"$tmp/err" || fail "persist b: $(cat "$tmp/err")"
grep -q "^# store: .*persisted: b, journal: b=everysec\$" "$tmp/out" ||
    fail "persist b: $(grep '^# store' "$tmp/out")"
if grep -q "'b' has no journal" "$tmp/err"; then fail "persist b: $(cat "$tmp/err")"; fi

# a good configuration: OK, and the store is not created by --check
# shellcheck disable=SC2086
"$pcached" $base --db_url="$store" --db_mode=2 --persist_collections=default \
    --journal=default=everysec --unix_socket="$tmp/data/p.sock" --check >"$tmp/out" 2>&1 ||
    fail "good configuration: $(cat "$tmp/out")"
grep -q "configuration OK" "$tmp/out" || fail "good configuration: no 'configuration OK'"
[ ! -e "$tmp/data/store" ] || fail "--check created the store"

# Issue 32: the directories pcached writes in, for the user it runs as
# (nobody here, as the service's pcache user would be): a runtime directory
# it cannot create, a store directory it cannot write in. Both refused by
# --check and by the start, naming the directory, the user and the fix,
# and the start refuses before it creates the store.
[ "$(id -u)" = 0 ] || { echo "SKIPPED: the directory checks for another user need root"; exit 77; }
chmod 755 "$tmp"
mkdir "$tmp/rootonly" "$tmp/nob"
chown nobody "$tmp/nob"
run_as="setpriv --reuid=nobody --regid=nogroup --clear-groups"
case_bad "directory $tmp/rootonly/run does not exist and user nobody, whom pcached runs as, cannot create it ($tmp/rootonly: Permission denied): create it as root: install -d -o nobody -m 0750 $tmp/rootonly/run" \
    --unix_socket="$tmp/rootonly/run/p.sock" --db_url="$tmp/nob/store"
[ ! -e "$tmp/nob/store" ] || fail "a start refused for its runtime directory created the store first"
case_bad "pidfile: $tmp/rootonly/p.pid: directory $tmp/rootonly is not writable: pcached runs as user nobody (uid 65534), and $tmp/rootonly is owned by root:root with mode 0755; give it to that user (chown nobody $tmp/rootonly), run pcached as root, or set pidfile to a path nobody can write" \
    --pidfile="$tmp/rootonly/p.pid"
case_bad "db_url: $tmp/rootonly/store: directory $tmp/rootonly is not writable: pcached runs as user nobody (uid 65534), and $tmp/rootonly is owned by root:root with mode 0755|$tmp/rootonly/store" \
    --db_url="$tmp/rootonly/store" --db_mode=1
run_as=""
# log_file: the start logs to stderr instead, --check says it
rc=0
"$pcached" $base --log_file="$tmp/nolog/x.log" --check >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -qF "log_file: $tmp/nolog/x.log: directory $tmp/nolog does not exist" "$tmp/err" ||
    fail "--check with log_file in a missing directory: exit $rc, $(cat "$tmp/err")"
echo "ok: log_file's directory"

# a runtime directory the user can create: --check says the start makes it,
# and the start does (mode 0750), where systemd's RuntimeDirectory= would
"$pcached" $base --unix_socket="$tmp/nob/run/p.sock" --check >"$tmp/out" 2>&1 ||
    fail "--check with a creatable runtime directory: $(cat "$tmp/out")"
grep -qF "# unix_socket: $tmp/nob/run (created at start, mode 0750, owner root)" "$tmp/out" ||
    fail "--check does not say the start makes $tmp/nob/run: $(cat "$tmp/out")"
[ ! -e "$tmp/nob/run" ] || fail "--check created the runtime directory"
"$pcached" $base --unix_socket="$tmp/nob/run/p.sock" >"$tmp/start" 2>&1 &
spid=$!
i=0
until [ -S "$tmp/nob/run/p.sock" ]; do
    i=$((i + 1))
    kill -0 "$spid" 2>/dev/null && [ $i -lt 600 ] || fail "the start with a missing runtime directory: $(cat "$tmp/start")"
    sleep 0.1
done
kill -TERM "$spid"
wait "$spid" || fail "pcached exit status $?"
[ "$(stat -c %a "$tmp/nob/run")" = 750 ] || fail "runtime directory mode $(stat -c %a "$tmp/nob/run")"
grep -qF "unix_socket: created directory $tmp/nob/run (mode 0750, owner root)" "$tmp/start" ||
    fail "the start does not log the directory it made: $(cat "$tmp/start")"
echo "ok: the runtime directory made by the start"
echo "check OK"
