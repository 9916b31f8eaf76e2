#!/bin/sh
# odbc_servers.sh - private database servers for the ODBC exporter's tests
# and benchmark (tests/test_odbc*.c, pcache-bench odbc). Nothing global is
# touched: every file lives in DIR, the servers listen on 127.0.0.1 and on
# unix sockets inside DIR, and the ODBC drivers and DSNs are declared in
# DIR/odbcinst.ini and DIR/odbc.ini (use them with ODBCSYSINI=DIR
# ODBCINI=DIR/odbc.ini).
#
#   odbc_servers.sh start DIR PGPORT [MYPORT]   initdb + start PostgreSQL
#                                              (and MariaDB when MYPORT)
#   odbc_servers.sh pg_stop DIR | pg_start DIR  stop (immediate) / restart PG
#   odbc_servers.sh psql DIR DB SQL             run SQL as the pcache role
#   odbc_servers.sh pg_kill DIR                 kill the PG connections to pcachetest
#   odbc_servers.sh my_kill DIR                 kill the MariaDB connections to pcachetest
#   odbc_servers.sh stop DIR                    stop both, remove nothing
#   odbc_servers.sh watch DIR PID               once PID is gone: stop, rm -rf DIR
#
# PostgreSQL and MariaDB refuse to run as root: when run as root, both run
# as the system user "nobody", which then owns their data directories.
# Exit status 77 means a server's binaries are missing (the tests SKIP).
set -eu
cmd=$1
dir=$2
PW='s3cret-PW-odbc'   # the pcache role's password; the tests check it never shows in errors

as_user() {
    if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}
pgbin() {
    for d in /usr/lib/postgresql/*/bin; do
        if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
    done
    return 1
}

case "$cmd" in
watch)
    # stops the servers and removes DIR once process $3 (the test) is gone,
    # however it ended (ctest's timeout kills with SIGKILL)
    while kill -0 "$3" 2>/dev/null; do sleep 1; done
    sh "$0" stop "$dir"
    rm -rf "$dir"
    ;;
start)
    pgport=$3
    myport=${4:-}
    bin=$(pgbin) || { echo "odbc_servers: PostgreSQL binaries (initdb) not found" >&2; exit 77; }
    for so in psqlodbca.so libsqlite3odbc.so; do
        [ -e "/usr/lib/x86_64-linux-gnu/odbc/$so" ] ||
            { echo "odbc_servers: ODBC driver $so not installed" >&2; exit 77; }
    done
    mkdir -p "$dir/sock"
    [ "$(id -u)" = 0 ] && chown nobody "$dir" "$dir/sock"
    chmod 0755 "$dir"
    printf '%s\n' "$PW" >"$dir/pw"
    [ "$(id -u)" = 0 ] && chown nobody "$dir/pw"
    as_user "$bin/initdb" -D "$dir/pg" -U pcache --auth=scram-sha-256 --pwfile="$dir/pw" \
        -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    echo "$pgport" >"$dir/pgport"
    as_user "$bin/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $pgport -k $dir/sock -c max_connections=20 -c shared_buffers=32MB" \
        start >/dev/null || { cat "$dir/pg.log" >&2; exit 1; }
    PGPASSWORD=$PW "$bin/psql" -X -q -h 127.0.0.1 -p "$pgport" -U pcache -d postgres \
        -c 'CREATE DATABASE pcachetest' -c 'CREATE DATABASE pcachero' >/dev/null
    cat >"$dir/odbcinst.ini" <<EOF
[pcache PostgreSQL]
Driver=/usr/lib/x86_64-linux-gnu/odbc/psqlodbca.so
DontDLClose=1
[pcache SQLite3]
Driver=/usr/lib/x86_64-linux-gnu/odbc/libsqlite3odbc.so
DontDLClose=1
[pcache MariaDB]
Driver=/usr/lib/x86_64-linux-gnu/odbc/libmaodbc.so
DontDLClose=1
EOF
    cat >"$dir/odbc.ini" <<EOF
[pcache_sqlite]
Driver=pcache SQLite3
Database=$dir/test.sqlite
Timeout=5000
[pcache_pg]
Driver=pcache PostgreSQL
Servername=127.0.0.1
Port=$pgport
Database=pcachetest
[pcache_pg_ro]
Driver=pcache PostgreSQL
Servername=127.0.0.1
Port=$pgport
Database=pcachero
EOF
    if [ -n "$myport" ]; then
        if ! command -v mariadb-install-db >/dev/null || [ ! -x /usr/sbin/mariadbd ] ||
            [ ! -e /usr/lib/x86_64-linux-gnu/odbc/libmaodbc.so ]; then
            echo "odbc_servers: MariaDB server or driver not installed" >&2
            exit 0   # PostgreSQL is up; the MariaDB tests skip on the missing myport file
        fi
        # a tmpdir of its own: a starting mariadbd removes the "#sql*"
        # temporary-table files it finds in its tmpdir (left by a crash, it
        # assumes), so two instances sharing /tmp - two test runs at once -
        # removed each other's, and mariadb-install-db failed with "Unknown
        # table 'mysql.tmp_proxies_priv'"
        mkdir -p "$dir/my" "$dir/mytmp"
        [ "$(id -u)" = 0 ] && chown nobody "$dir/my" "$dir/mytmp"
        as_user mariadb-install-db --no-defaults --datadir="$dir/my" --user=nobody \
            --tmpdir="$dir/mytmp" --auth-root-authentication-method=normal --skip-test-db \
            >"$dir/my-install.log" 2>&1 || { cat "$dir/my-install.log" >&2; exit 1; }
        as_user /usr/sbin/mariadbd --no-defaults --datadir="$dir/my" --tmpdir="$dir/mytmp" \
            --socket="$dir/sock/my.sock" \
            --port="$myport" --bind-address=127.0.0.1 --pid-file="$dir/my.pid" \
            --log-error="$dir/my.err" --innodb-buffer-pool-size=64M --innodb-log-file-size=64M \
            --max-allowed-packet=64M --skip-name-resolve >/dev/null 2>&1 &
        i=0
        until mariadb-admin --no-defaults -S "$dir/sock/my.sock" -u root ping >/dev/null 2>&1; do
            i=$((i + 1))
            if [ $i -gt 300 ]; then cat "$dir/my.err" >&2; exit 1; fi
            sleep 0.1
        done
        mariadb --no-defaults -S "$dir/sock/my.sock" -u root -e 'CREATE DATABASE pcachetest'
        echo "$myport" >"$dir/myport"
        cat >>"$dir/odbc.ini" <<EOF
[pcache_my]
Driver=pcache MariaDB
Server=localhost
Socket=$dir/sock/my.sock
Database=pcachetest
User=root
EOF
    fi
    ;;
pg_stop)
    bin=$(pgbin)
    as_user "$bin/pg_ctl" -D "$dir/pg" -m immediate -w stop >/dev/null 2>&1 || true
    ;;
pg_start)
    bin=$(pgbin)
    pgport=$(cat "$dir/pgport")
    as_user "$bin/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $pgport -k $dir/sock -c max_connections=20 -c shared_buffers=32MB" \
        start >/dev/null
    ;;
psql)
    bin=$(pgbin)
    PGPASSWORD=$PW "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cat "$dir/pgport")" \
        -U pcache -d "$3" -c "$4"
    ;;
pg_kill)
    # terminates every other backend connected to the pcachetest database
    PGPASSWORD=$PW "$(pgbin)/psql" -X -q -h 127.0.0.1 -p "$(cat "$dir/pgport")" -U pcache -d postgres \
        -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'pcachetest'" >/dev/null
    ;;
my_kill)
    # kills every other connection to the pcachetest database
    for id in $(mariadb --no-defaults -S "$dir/sock/my.sock" -u root -N -e \
        "SELECT id FROM information_schema.processlist WHERE db = 'pcachetest' AND id <> CONNECTION_ID()"); do
        mariadb --no-defaults -S "$dir/sock/my.sock" -u root -e "KILL $id" || true
    done
    ;;
stop)
    if [ -d "$dir/pg" ] && bin=$(pgbin); then
        as_user "$bin/pg_ctl" -D "$dir/pg" -m fast -w stop >/dev/null 2>&1 ||
            as_user "$bin/pg_ctl" -D "$dir/pg" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [ -f "$dir/my.pid" ]; then
        pid=$(cat "$dir/my.pid")
        kill "$pid" 2>/dev/null || true
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do i=$((i + 1)); sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    ;;
*)
    echo "usage: $0 start|stop|pg_stop|pg_start|psql DIR ..." >&2
    exit 2
    ;;
esac
