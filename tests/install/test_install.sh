#!/bin/sh
# test_install: the install layout (docs/operations.md "Install").
#   1. `cmake --install BUILD --prefix /usr` into a staging DESTDIR: the
#      binaries, the versioned shared libraries, the static archives, the
#      headers, pkg-config files, the CMake package, the docs, the
#      configuration in /etc/pcache (not /usr/etc) and a unit that names
#      /usr/bin/pcached and /etc/pcache/pcached.conf;
#   2. another prefix (/opt/pcache): the configuration under it, the unit
#      naming it;
#   3. a project outside the tree (tests/install/consumer) configured with
#      find_package(pcache) against the staged install, built and run; the
#      same program built with pkg-config's flags;
#   4. the installed pcached --check reads the installed configuration.
# usage: test_install.sh SOURCE_DIR BUILD_DIR [sanitize]
set -eu
src=$1
build=$2
if [ "${3:-}" = sanitize ]; then
    echo "SKIPPED: a sanitizer tree's libraries need the ASan runtime loaded first"
    exit 77
fi
tmp=$(mktemp -d /tmp/pcache-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

DESTDIR="$tmp/root" cmake --install "$build" --prefix /usr >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "cmake --install"; }
r="$tmp/root"
for f in usr/bin/pcached usr/bin/pcachectl usr/bin/pcache-snapshot etc/pcache/pcached.conf \
         usr/lib/systemd/system/pcached.service usr/include/pcache.h usr/include/pcache_util.h \
         usr/include/pcache_store.h usr/include/pcache_persist.h usr/share/doc/pcache/pcached.md \
         usr/share/doc/pcache/README.md; do
    [ -e "$r/$f" ] || fail "$f not installed"
done
if [ -d "$build/man" ]; then # the man pages (cmake/PcacheMan.cmake)
    for f in man8/pcached.8.gz man5/pcached.conf.5.gz man1/pcachectl.1.gz \
             man1/pcache-snapshot.1.gz; do
        [ -e "$r/usr/share/man/$f" ] || fail "man page $f not installed"
    done
fi
[ ! -e "$r/usr/etc" ] || fail "prefix /usr installed something under /usr/etc"
libdir=$(dirname "$(find "$r/usr/lib" -name 'libpcache.so.0' | head -1)")
[ -n "$libdir" ] || fail "no libpcache.so.0"
for l in libpcache libpcache_storage; do
    [ -L "$libdir/$l.so" ] || fail "$l.so (the dev link) missing"
    soname=$(objdump -p "$libdir/$l.so" | awk '$1 == "SONAME" {print $2}')
    [ "$soname" = "$l.so.0" ] || fail "$l: soname '$soname', expected $l.so.0"
done
for a in libpcache.a libpcache_util.a libpcache_storage.a; do
    [ -f "$libdir/$a" ] || fail "$a missing"
done
[ -f "$libdir/pkgconfig/pcache.pc" ] || fail "pcache.pc missing"
[ -f "$libdir/cmake/pcache/pcacheConfig.cmake" ] || fail "pcacheConfig.cmake missing"
grep -q "^prefix=/usr$" "$libdir/pkgconfig/pcache.pc" || fail "pcache.pc: prefix is not /usr"
unit="$r/usr/lib/systemd/system/pcached.service"
grep -q '^ExecStart=/usr/bin/pcached -c /etc/pcache/pcached.conf$' "$unit" ||
    fail "unit: ExecStart does not name the installed paths: $(grep ExecStart= "$unit")"
if grep -q '@[A-Z_]*@' "$unit"; then fail "unit: an unreplaced @VAR@"; fi
if command -v systemd-analyze >/dev/null 2>&1; then
    # verify resolves ExecStart= on the host: point it at the staged binary
    sed "s|/usr/bin/pcached|$r/usr/bin/pcached|g; s|/etc/pcache|$r/etc/pcache|g" "$unit" \
        >"$tmp/pcached.service"
    # (its Documentation=man: pages are the staged ones)
    MANPATH="$r/usr/share/man" systemd-analyze verify "$tmp/pcached.service" \
        >"$tmp/verify.log" 2>&1 ||
        { cat "$tmp/verify.log"; fail "systemd-analyze verify"; }
    # the hardening: exposure 3.0 or lower (Debian's redis unit: about 4)
    score=$(systemd-analyze security --offline=yes "$unit" 2>/dev/null |
        sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
    [ -n "$score" ] || fail "systemd-analyze security gave no exposure level"
    awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "unit exposure $score > 3.0"
    echo "systemd-analyze security --offline=yes: exposure $score"
fi
for k in Type=notify Restart=on-failure NotifyAccess=main; do
    grep -q "^$k\$" "$unit" || fail "unit: no $k"
done

# 2. another prefix
DESTDIR="$tmp/opt" cmake --install "$build" --prefix /opt/pcache --component server \
    >"$tmp/install2.log" 2>&1 || { cat "$tmp/install2.log"; fail "install --prefix /opt/pcache"; }
[ -f "$tmp/opt/opt/pcache/etc/pcache/pcached.conf" ] || fail "prefix /opt/pcache: no etc/pcache"
grep -q '^ExecStart=/opt/pcache/bin/pcached -c /opt/pcache/etc/pcache/pcached.conf$' \
    "$(find "$tmp/opt" -name pcached.service)" || fail "prefix /opt/pcache: unit paths"

# 3. find_package(pcache) from another project, then pkg-config
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$r/usr" \
    >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "consumer: configure"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 ||
    { cat "$tmp/consumer.log"; fail "consumer: build"; }
out=$(LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer") || fail "consumer: run: $out"
want="pcache $("$r/usr/bin/pcached" --version | awk '{print $2}') ok"
case "$out" in "$want"*) ;; *) fail "consumer said '$out', expected '$want...'" ;; esac
export PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$r"
flags=$(pkg-config --cflags --libs pcache-storage) || fail "pkg-config pcache-storage"
# shellcheck disable=SC2086
cc -o "$tmp/consumer-pc" "$src/tests/install/consumer/consumer.c" $flags ||
    fail "consumer: build with pkg-config ($flags)"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer-pc" >/dev/null || fail "consumer (pkg-config): run"
# static: pkg-config --static names everything; our archives taken static
sflags=$(pkg-config --static --cflags --libs pcache-storage) || fail "pkg-config --static"
sflags=$(echo "$sflags" | sed 's/\(-lpcache[a-z_]*\)/-Wl,-Bstatic \1 -Wl,-Bdynamic/g')
# shellcheck disable=SC2086
cc -o "$tmp/consumer-static" "$src/tests/install/consumer/consumer.c" $sflags ||
    fail "consumer: static build with pkg-config --static ($sflags)"
if ldd "$tmp/consumer-static" | grep -q libpcache; then fail "static consumer needs libpcache*.so"; fi
"$tmp/consumer-static" >/dev/null || fail "consumer (static): run"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# 4. the installed server reads the installed configuration
"$r/usr/bin/pcached" -c "$r/etc/pcache/pcached.conf" --db_url="lmdb://$tmp/store" \
    --unix_socket="$tmp/pcached.sock" --check >"$tmp/check.log" 2>&1 ||
    { cat "$tmp/check.log"; fail "installed pcached --check on the installed configuration"; }
echo "install layout OK ($libdir)"
