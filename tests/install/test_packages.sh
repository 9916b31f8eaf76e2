#!/bin/sh
# test_packages: the Debian packages (cmake/PcachePackage.cmake) built by
# cpack from this tree and installed into a scratch root with dpkg:
#   1. every package is built; dependencies from dpkg-shlibdeps (liblmdb0,
#      libzstd1, libxxhash0, libsystemd0...) and exact ones between ours;
#      libpcache0's shlibs; /etc/pcache/pcached.conf, /etc/init.d/pcached
#      and /etc/logrotate.d/pcache-server conffiles; each package its own
#      description (synopsis and body) and /usr/share/doc/<package>/
#      copyright and changelog.gz of this version; pcache-doc the dashboard
#      and the alert rules;
#   2. `dpkg --root R --force-script-chrootless -i *.deb`: the maintainer
#      scripts run with DPKG_ROOT=R, so the unit is enabled in R the Debian
#      way (deb-systemd-helper: multi-user.target.wants) and nothing touches
#      the host; the layout under R; dpkg -l says installed;
#   3. pcached from R with R's configuration starts (its paths under R: the
#      store's directory made as the postinst would, the runtime directory
#      made by pcached itself), serves, saves at
#      SIGTERM, and a restart finds the key (the shipped db_mode 2 + journal);
#      pcachectl from R answers on the socket;
#   4. dpkg --purge pcache-server in R: files gone, the enablement gone,
#      the conffile gone.
# usage: test_packages.sh BUILD_DIR [sanitize]
set -eu
build=$1
if [ "${2:-}" = sanitize ]; then
    echo "SKIPPED: packages are built from a Release tree"
    exit 77
fi
for t in cpack dpkg dpkg-deb dpkg-shlibdeps deb-systemd-helper redis-cli; do
    command -v $t >/dev/null 2>&1 || { echo "SKIPPED: no $t"; exit 77; }
done
tmp=$(mktemp -d /tmp/pcache-packages.XXXXXX)
pid=""
cleanup() {
    [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. build
(cd "$build" && cpack -G DEB -B "$tmp/pk" >"$tmp/cpack.log" 2>&1) ||
    { tail -30 "$tmp/cpack.log"; fail "cpack -G DEB"; }
v=$("$build/src/server/pcached" --version | awk '{print $2}')
for p in pcache-server pcache-tools libpcache0 libpcache-storage0 libpcache-dev pcache-doc; do
    ls "$tmp/pk/${p}_${v}_"*.deb >/dev/null 2>&1 || fail "package $p not built"
done
deb() { ls "$tmp/pk/$1_${v}_"*.deb; }
depends() { dpkg-deb -f "$(deb "$1")" Depends; }
for d in adduser init-system-helpers libsystemd0 liblmdb0 libzstd1 libxxhash0 libc6; do
    depends pcache-server | grep -q "$d" || fail "pcache-server does not depend on $d: $(depends pcache-server)"
done
depends libpcache-storage0 | grep -qF "libpcache0 (= $v)" || fail "libpcache-storage0 -> libpcache0"
depends libpcache-dev | grep -qF "libpcache0 (= $v)" || fail "libpcache-dev -> libpcache0"
dpkg-deb -e "$(deb libpcache0)" "$tmp/ctl-lib"
grep -q "^libpcache 0 libpcache0" "$tmp/ctl-lib/shlibs" || fail "libpcache0: no shlibs"
dpkg-deb -e "$(deb pcache-server)" "$tmp/ctl-server"
grep -qx /etc/pcache/pcached.conf "$tmp/ctl-server/conffiles" || fail "pcached.conf not a conffile"
for s in postinst prerm postrm; do
    [ -x "$tmp/ctl-server/$s" ] || fail "pcache-server: no executable $s"
done
grep -q "adduser --system" "$tmp/ctl-server/postinst" || fail "postinst creates no pcache user"
for f in /etc/init.d/pcached /etc/logrotate.d/pcache-server; do
    grep -qx "$f" "$tmp/ctl-server/conffiles" || fail "$f not a conffile"
done
# descriptions: a synopsis of its own per package, then a body
synopses=""
for f in "$tmp/pk/"*.deb; do
    p=$(dpkg-deb -f "$f" Package)
    desc=$(dpkg-deb -f "$f" Description)
    syn=$(printf '%s\n' "$desc" | head -n 1)
    [ "$(printf '%s\n' "$desc" | wc -l)" -ge 2 ] || fail "$p: no description body: $desc"
    case "$synopses" in *"|$syn|"*) fail "$p: synopsis '$syn' shared with another package" ;; esac
    synopses="$synopses|$syn|"
    # copyright and this version's changelog in /usr/share/doc/<package>
    dpkg-deb -x "$f" "$tmp/x-$p"
    [ -s "$tmp/x-$p/usr/share/doc/$p/copyright" ] || fail "$p: no /usr/share/doc/$p/copyright"
    gzip -dc "$tmp/x-$p/usr/share/doc/$p/changelog.gz" >"$tmp/changelog-$p" ||
        fail "$p: no /usr/share/doc/$p/changelog.gz"
    cv=$(dpkg-parsechangelog -l "$tmp/changelog-$p" -S Version)
    [ "$cv" = "$v" ] || fail "$p: changelog's version $cv, package's $v"
done
for f in usr/share/pcache/grafana/pcache.json usr/share/pcache/prometheus/pcache-alerts.yml; do
    cmp -s "$tmp/x-pcache-doc/$f" "$(dirname "$0")/../../docs/${f#usr/share/pcache/}" ||
        fail "pcache-doc: /$f is not docs/${f#usr/share/pcache/}"
done

# 2. install into a scratch root
r="$tmp/root"
mkdir -p "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/info"
: >"$r/var/lib/dpkg/status"
dpkg --root="$r" --force-script-chrootless --force-depends --log=/dev/null \
    -i "$tmp/pk/"*.deb >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i into $r"; }
for f in usr/bin/pcached usr/bin/pcachectl usr/bin/pcache-snapshot etc/pcache/pcached.conf \
         usr/lib/systemd/system/pcached.service usr/lib/sysusers.d/pcache.conf \
         etc/init.d/pcached etc/logrotate.d/pcache-server \
         usr/include/pcache.h usr/share/doc/pcache/pcached.md; do
    [ -e "$r/$f" ] || fail "$f not installed in the scratch root"
done
find "$r/usr/lib" -name 'libpcache.so.0' | grep -q . || fail "no libpcache.so.0"
[ ! -e "$r/usr/etc" ] || fail "something under /usr/etc"
wants="$r/etc/systemd/system/multi-user.target.wants/pcached.service"
[ -L "$wants" ] || fail "the unit is not enabled (no $wants)"
for p in pcache-server pcache-tools libpcache0 libpcache-storage0 libpcache-dev; do
    dpkg --root="$r" -l "$p" | grep -q "^ii  $p" || fail "dpkg -l: $p not installed"
done
grep -q "^ExecStart=/usr/bin/pcached -c /etc/pcache/pcached.conf$" \
    "$r/usr/lib/systemd/system/pcached.service" || fail "unit paths"

# 3. run the installed server with the installed configuration
mkdir -p "$r/var/lib/pcache" "$r/run" # the postinst's (StateDirectory=); /run/pcache: pcached's
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# the packaged metrics_port (9380) is moved too: parallel runs share the host
mport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
run() {
    "$r/usr/bin/pcached" -c "$r/etc/pcache/pcached.conf" --port="$port" --metrics_port="$mport" \
        --db_url="lmdb://$r/var/lib/pcache/store" --unix_socket="$r/run/pcache/pcached.sock" \
        >>"$tmp/pcached.log" 2>&1 &
    pid=$!
    i=0
    until redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; do
        i=$((i + 1))
        [ $i -lt 100 ] || { cat "$tmp/pcached.log"; fail "pcached from the scratch root did not start"; }
        sleep 0.1
    done
}
"$r/usr/bin/pcached" -c "$r/etc/pcache/pcached.conf" --db_url="lmdb://$r/var/lib/pcache/store" \
    --check >/dev/null || fail "installed --check"
run
[ -d "$r/run/pcache" ] || fail "pcached did not make its runtime directory $r/run/pcache"
[ "$(redis-cli -p "$port" SET pkg-key installed)" = OK ] || fail "SET"
/usr/bin/python3 -c "import sys, urllib.request as u; sys.exit(0 if b'pcache_build_info' in u.urlopen('http://127.0.0.1:$mport/metrics', timeout=10).read() else 1)" ||
    fail "GET /metrics on the packaged configuration's metrics listener"
"$r/usr/bin/pcachectl" -s "$r/run/pcache/pcached.sock" perf_stats default >"$tmp/stats" ||
    fail "pcachectl from the scratch root"
grep -q entries "$tmp/stats" || fail "perf_stats: $(cat "$tmp/stats")"
kill -TERM "$pid"
wait "$pid" || fail "pcached exit status $?"
pid=""
run
[ "$(redis-cli -p "$port" GET pkg-key)" = installed ] || fail "the key did not survive a restart"
kill -TERM "$pid"
wait "$pid" || true
pid=""
"$r/usr/bin/pcache-snapshot" verify "$r/var/lib/pcache/store" >/dev/null || fail "snapshot verify"

# 4. purge
dpkg --root="$r" --force-script-chrootless --force-depends --log=/dev/null \
    --purge pcache-server >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "dpkg --purge"; }
[ ! -e "$r/usr/bin/pcached" ] || fail "pcached left after purge"
[ ! -e "$r/etc/pcache/pcached.conf" ] || fail "conffile left after purge"
[ ! -L "$wants" ] || fail "enablement left after purge"
echo "packages OK: $(ls "$tmp/pk" | grep -c '\.deb$') packages"
