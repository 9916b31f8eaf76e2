#!/bin/sh
# test_fresh_debian: the README's Quick start, word for word, on a fresh
# Debian 12 that has only what those commands install (issue 32: the run
# command could not build there, for want of libjansson-dev, and nothing
# ran the README on such a machine).
#   0. a minimal Debian 12 root (debootstrap --variant=minbase bookworm, from
#      the archive this machine's apt uses), the source tree copied in (the
#      files git knows, no build trees); no compiler in it;
#   1. the run command (README's "Run" row, read from README.md) in a chroot
#      of it, with free ports: redis-cli SET/GET against it, pcachectl
#      beside it, SIGTERM (the shutdown save), run again: the key is back;
#   2. the install row (README's "Install" row, as written, "y" answered to
#      apt-get): it builds no test and no benchmark; the packages install; without systemd nothing starts and
#      the postinst says how; /var/lib/pcache pcache:pcache 0750, the
#      configuration 0640 root:pcache, /var/log/pcache, copyright and
#      changelog; `service pcached start` (the init script) returns once
#      pcached serves, as the pcache user; SET, restart (the shutdown save),
#      GET; status; logrotate's file rotates the log and pcached writes to
#      the new one; the package installed again (an upgrade) restarts it;
#      a start on a busy port fails at once with the log's reason; purge:
#      stopped, files, links, the log directory and the owner override
#      gone, the store kept;
#   3. the maintainer scripts under (an emulated) systemd: install starts
#      the unit, an upgrade restarts it, remove stops it.
# The root's base is cached between runs (PCACHE_FRESH_CACHE, default
# /var/cache/pcache-tests; a tarball of the bare debootstrap result, made
# again when the archive changes), and so are the .deb files apt downloads
# (hard links into the root's apt cache: apt still installs every package);
# PCACHE_FRESH_NO_CACHE=1 uses neither; PCACHE_FRESH_KEEP=1 keeps the root
# and the logs (under /var/tmp/pcache-fresh.*). Every command in the root runs in
# a mount namespace of its own: its /proc, /sys and /dev mounts vanish with
# it, whatever way this script ends.
# usage: test_fresh_debian.sh SOURCE_DIR [sanitize]
set -eu
src=$(cd "$1" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "${2:-}" != sanitize ] || skip "runs once, from the Release tree"
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mounts)"
for t in debootstrap chroot unshare redis-cli tar; do
    command -v $t >/dev/null 2>&1 || skip "no $t"
done
py=/usr/bin/python3
t0=$(date +%s)
mark() { echo "[$(($(date +%s) - t0)) s] $*"; }

# the archive: the first one of this machine's apt sources serving bookworm
mirror=$($py - <<'EOF'
import glob, re
uris = []
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for para in open(f).read().split("\n\n"):
        kv = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", para, re.M))
        if "bookworm" in kv.get("Suites", "").split():
            uris += kv.get("URIs", "").split()
for f in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(f).read().splitlines()
    except OSError:
        continue
    for l in lines:
        m = re.match(r"deb\s+(\[[^]]*\]\s+)?(\S+)\s+bookworm\s", l)
        if m:
            uris.append(m.group(2))
print(next((u for u in uris if u.startswith("http")), ""))
EOF
)
[ -n "$mirror" ] || skip "no apt source serves bookworm"
$py -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30)" \
    "$mirror/dists/bookworm/Release" 2>/dev/null || skip "the archive $mirror is not reachable"

tmp=$(mktemp -d /var/tmp/pcache-fresh.XXXXXX)
R=$tmp/root
cache=${PCACHE_FRESH_CACHE:-/var/cache/pcache-tests}
[ "${PCACHE_FRESH_NO_CACHE:-0}" = 0 ] || cache=$tmp/cache
mkdir -p "$R" "$cache/archives"
# Every process whose root is R is this test's (the chroots, the daemons
# they started): killed before the tree goes. The mounts are in their own
# namespaces, never in this one, so rm -rf cannot reach the host's /dev.
in_root_pids() {
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && echo "${p#/proc/}"
    done
    return 0
}
cleanup() {
    pids=$(in_root_pids)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    if [ -d "$R/var/cache/apt/archives" ]; then # keep the downloads for the next run
        cp -nl "$R"/var/cache/apt/archives/*.deb "$cache/archives/" 2>/dev/null ||
            cp -n "$R"/var/cache/apt/archives/*.deb "$cache/archives/" 2>/dev/null || true
    fi
    if grep -q " $tmp" /proc/self/mountinfo; then
        echo "cleanup: mounts under $tmp in this namespace; not removing it" >&2
    elif [ "${PCACHE_FRESH_KEEP:-0}" != 0 ]; then
        echo "kept: $tmp (the root and the logs)"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# runs the shell command $1 in the root, as root, in a mount namespace of
# its own (proc, sys, dev), with a clean environment; stdin passes through.
# Every step execs the next, so `in_root_exec CMD &` leaves in $! the pid
# of what CMD finally execs.
in_root() {
    (in_root_exec "$1")
}
in_root_exec() {
    exec unshare --mount --propagation private -- /bin/sh -c '
        r=$1
        mount -t proc proc "$r/proc" && mount -t sysfs sysfs "$r/sys" &&
            mount --rbind /dev "$r/dev" || exit 99
        exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            DEBIAN_FRONTEND=noninteractive /bin/sh -c "$2"' in_root "$R" "$1"
}
free_port() {
    $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# waits until redis-cli -p $1 answers PONG, while process $2 lives ($3 s at most)
wait_pong() {
    i=0
    until [ "$(redis-cli -p "$1" PING 2>/dev/null)" = PONG ]; do
        if [ -n "$2" ] && ! kill -0 "$2" 2>/dev/null; then return 1; fi
        i=$((i + 1))
        [ $i -lt $(($3 * 2)) ] || return 1
        sleep 0.5
    done
}
# the command cell of the README's Quick start row whose first word is $1
readme_cmd() {
    $py - "$src/README.md" "$1" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
if "\n## Quick start" not in text:
    sys.exit("README.md has no '## Quick start' section")
sec = text.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
for line in sec.splitlines():
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
    if len(cells) >= 2 and cells[0].split()[:1] == [sys.argv[2]]:
        m = re.fullmatch(r"`([^`]+)`", cells[-1])
        if not m:
            sys.exit("README.md Quick start, row %s: the command cell is not one `...`" % sys.argv[2])
        print(m.group(1).replace("\\|", "|"))
        sys.exit(0)
sys.exit("README.md Quick start: no row whose first word is '%s'" % sys.argv[2])
EOF
}
run_cmd=$(readme_cmd Run) || fail "the run command"
install_cmd=$(readme_cmd Install) || fail "the install row"
echo "run command: $run_cmd"
echo "install row: $install_cmd"

# ---- 0. the root ----------------------------------------------------------
base="$cache/debian12-minbase.tar"
id="bookworm minbase $mirror"
if [ ! -f "$base" ] || [ "$(cat "$base.id" 2>/dev/null)" != "$id" ]; then
    mark "debootstrap --variant=minbase bookworm ($mirror)"
    debootstrap --variant=minbase bookworm "$tmp/base" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
        { tail -20 "$tmp/debootstrap.log"; fail "debootstrap"; }
    tar -C "$tmp/base" --numeric-owner --exclude="./var/cache/apt/archives/*.deb" \
        -cf "$base.$$" . && mv "$base.$$" "$base"
    echo "$id" >"$base.id"
    rm -rf "$tmp/base"
fi
tar -C "$R" --numeric-owner -xpf "$base"
cp /etc/resolv.conf "$R/etc/resolv.conf"
find "$cache/archives" -name '*.deb' -exec cp -l {} "$R/var/cache/apt/archives/" \; 2>/dev/null ||
    find "$cache/archives" -name '*.deb' -exec cp {} "$R/var/cache/apt/archives/" \;
mkdir -p "$R/root/pcache"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" ls-files -z --cached --others --exclude-standard |
        (cd "$src" && xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
        tar -C "$src" --null -T - -cf - | tar -C "$R/root/pcache" -xf -
else
    tar -C "$src" --exclude='./build*' --exclude=./pcached-data -cf - . | tar -C "$R/root/pcache" -xf -
fi
[ -x "$R/root/pcache/scripts/run.sh" ] || fail "the source tree was not copied into the root"
if in_root 'command -v cc || command -v cmake || command -v redis-cli'; then
    fail "the fresh root already has a compiler, cmake or redis-cli"
fi
mark "root ready"

# ---- 1. the run command ---------------------------------------------------
# free ports (the chroot shares this machine's loopback): the README says
# extra arguments of the run command are pcached options. The metrics port
# (9380 in the run command and the packaged configuration) is moved too: a
# second run of this test on the same host holds it meanwhile.
port=$(free_port)
hport=$(free_port)
mport=$(free_port)
run_once() { # $1: log file
    in_root_exec "cd /root/pcache && exec $run_cmd --port=$port --http_port=$hport --metrics_port=$mport" >"$1" 2>&1 &
    runpid=$!
    wait_pong "$port" "$runpid" 1500 ||
        { tail -40 "$1"; fail "the run command did not serve on port $port"; }
}
run_stop() { # $1: log file
    kill -TERM "$runpid"
    rc=0
    wait "$runpid" || rc=$?
    [ "$rc" = 0 ] || { tail -20 "$1"; fail "the run command's pcached exit status $rc"; }
    grep -q "shutdown save done" "$1" || { tail -20 "$1"; fail "no shutdown save"; }
}
run_once "$tmp/run1.log"
mark "the run command serves"
[ "$(redis-cli -p "$port" SET fresh:run hello)" = OK ] || fail "SET through the run command"
[ "$(redis-cli -p "$port" GET fresh:run)" = hello ] || fail "GET through the run command"
in_root 'cd /root/pcache && build-run/src/tools/pcachectl -s pcached-data/pcached.sock perf_stats default' \
    >"$tmp/stats" 2>&1 || { cat "$tmp/stats"; fail "pcachectl beside the run command"; }
grep -q entries "$tmp/stats" || fail "pcachectl perf_stats: $(cat "$tmp/stats")"
run_stop "$tmp/run1.log"
run_once "$tmp/run2.log"
[ "$(redis-cli -p "$port" GET fresh:run)" = hello ] || fail "the run command lost the key at a restart"
run_stop "$tmp/run2.log"
mark "run command OK: SET, GET, pcachectl, restart"

# ---- 2. the install row ---------------------------------------------------
in_root "cd /root/pcache && yes | { $install_cmd; }" >"$tmp/install.log" 2>&1 ||
    { tail -40 "$tmp/install.log"; fail "the install row"; }
mark "the install row installed the packages"
# it built what the packages hold, no test and no benchmark
[ -z "$(find "$R/root/pcache/build-pkg" -name CTestTestfile.cmake -o -name 'pcache-bench' \
    -o -name 'test_*' -type f -perm -u+x)" ] || fail "the install row built tests or benchmarks"
grep -q "pcached is not running.*service pcached start" "$tmp/install.log" ||
    fail "the postinst did not say how to start pcached without systemd: $(tail -5 "$tmp/install.log")"
owner() { in_root "stat -c '%U:%G %a' $1"; }
[ "$(owner /var/lib/pcache)" = "pcache:pcache 750" ] || fail "/var/lib/pcache: $(owner /var/lib/pcache)"
[ "$(owner /var/log/pcache)" = "pcache:adm 2750" ] || fail "/var/log/pcache: $(owner /var/log/pcache)"
[ "$(owner /etc/pcache/pcached.conf)" = "root:pcache 640" ] ||
    fail "/etc/pcache/pcached.conf: $(owner /etc/pcache/pcached.conf)"
for f in usr/share/doc/pcache-server/copyright usr/share/doc/pcache-server/changelog.gz \
         usr/share/doc/pcache-tools/copyright etc/logrotate.d/pcache-server \
         usr/share/man/man8/pcached.8.gz; do
    [ -s "$R/$f" ] || fail "/$f not installed"
done
[ -x "$R/etc/init.d/pcached" ] || fail "no /etc/init.d/pcached"
ls "$R"/etc/rc2.d/S*pcached >/dev/null 2>&1 || fail "the init script is not in runlevel 2"
[ -z "$(in_root_pids)" ] || fail "something runs in the root after the install"

port=$(free_port)
hport=$(free_port)
mport=$(free_port)
echo "DAEMON_ARGS=\"--port=$port --http_port=$hport --metrics_port=$mport\"" >"$R/etc/default/pcached"
svc() { in_root "service pcached $1" >"$tmp/svc-$1.log" 2>&1; }
svc start || { cat "$tmp/svc-start.log"; fail "service pcached start"; }
[ "$(redis-cli -p "$port" PING)" = PONG ] || fail "service pcached start returned before pcached served"
mark "the init script started pcached"
pid=$(cat "$R/run/pcache/pcached.pid")
[ "$(stat -c %U "/proc/$pid")" = "$(stat -c %U "$R/var/lib/pcache")" ] || fail "pcached does not run as pcache"
svc status || fail "service pcached status: $(cat "$tmp/svc-status.log")"
[ "$(redis-cli -p "$port" SET fresh:pkg installed)" = OK ] || fail "SET to the installed server"
in_root 'pcachectl perf_stats default' >"$tmp/stats" 2>&1 || fail "pcachectl: $(cat "$tmp/stats")"
in_root 'setpriv --reuid=pcache --regid=pcache --init-groups pcached -c /etc/pcache/pcached.conf --check' \
    >"$tmp/check" 2>&1 || fail "pcached --check as pcache: $(cat "$tmp/check")"
svc restart || { cat "$tmp/svc-restart.log"; fail "service pcached restart"; }
log="$R/var/log/pcache/pcached.log"
grep -q "shutdown save done" "$log" || fail "no shutdown save at the restart: $(tail -5 "$log")"
[ "$(redis-cli -p "$port" GET fresh:pkg)" = installed ] || fail "the key did not survive the restart"
mark "SET, restart, GET through the init script"

# logrotate's file: the log is rotated and pcached writes to the new one
in_root 'apt-get install -y --no-install-recommends logrotate' >"$tmp/logrotate-apt.log" 2>&1 ||
    fail "apt-get install logrotate: $(tail -5 "$tmp/logrotate-apt.log")"
in_root 'logrotate -f /etc/logrotate.d/pcache-server' >"$tmp/logrotate.log" 2>&1 ||
    fail "logrotate: $(cat "$tmp/logrotate.log")"
[ -s "$log.1" ] || fail "logrotate did not rotate $log"
i=0
until grep -q "logs reopened" "$log" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 120 ] || fail "pcached did not reopen its log after logrotate"
    sleep 0.5
done

# an upgrade (the same package again: configure with the old version)
# restarts a running pcached onto the new binary, without systemd too
pid=$(cat "$R/run/pcache/pcached.pid")
in_root "dpkg -i /root/pcache/$(cd "$R/root/pcache" && ls build-pkg/pcache-server_*.deb)" \
    >"$tmp/upgrade.log" 2>&1 || { cat "$tmp/upgrade.log"; fail "dpkg -i over the installed package"; }
pid2=$(cat "$R/run/pcache/pcached.pid")
[ "$pid2" != "$pid" ] && kill -0 "$pid2" || fail "the upgrade did not restart pcached: $(cat "$tmp/upgrade.log")"
[ "$(redis-cli -p "$port" GET fresh:pkg)" = installed ] || fail "the key did not survive the upgrade"

# a start that cannot work fails at once, with the reason
svc stop || fail "service pcached stop: $(cat "$tmp/svc-stop.log")"
! svc status || fail "status says running after stop"
$py -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(120)' \
    "$port" &
blocker=$!
sleep 0.5
s0=$(date +%s)
! svc start || fail "service pcached start on a busy port succeeded"
kill "$blocker"
[ $(($(date +%s) - s0)) -lt 60 ] || fail "a failed start took $(($(date +%s) - s0)) s"
grep -q "$port" "$tmp/svc-start.log" ||
    fail "a failed start does not show why: $(cat "$tmp/svc-start.log")"
svc start || { cat "$tmp/svc-start.log"; fail "service pcached start after the failed one"; }

in_root 'apt-get purge -y pcache-server pcache-tools' >"$tmp/purge.log" 2>&1 ||
    { tail -20 "$tmp/purge.log"; fail "apt-get purge"; }
[ -z "$(in_root_pids)" ] || fail "pcached still runs after the purge"
for f in usr/bin/pcached etc/init.d/pcached etc/pcache/pcached.conf etc/logrotate.d/pcache-server \
         var/log/pcache; do
    [ ! -e "$R/$f" ] || fail "/$f left after the purge"
done
! ls "$R"/etc/rc2.d/S*pcached >/dev/null 2>&1 || fail "runlevel links left after the purge"
! in_root 'dpkg-statoverride --list /etc/pcache/pcached.conf' || fail "the owner override left after the purge"
[ -d "$R/var/lib/pcache/store" ] || fail "the purge removed the store"
mark "install row OK: init script start, restart, status, logrotate, failed start, purge"

# ---- 3. the maintainer scripts under systemd (emulated) -------------------
mkdir -p "$R/run/systemd/system"
for t in systemctl deb-systemd-invoke; do
    printf '#!/bin/sh\necho "%s $*" >>/tmp/systemd-calls\n' "$t" >"$R/usr/local/sbin/$t"
    chmod +x "$R/usr/local/sbin/$t"
done
deb=$(cd "$R/root/pcache" && ls build-pkg/pcache-server_*.deb)
in_root "dpkg -i /root/pcache/$deb && dpkg -i /root/pcache/$deb && dpkg --purge pcache-server" \
    >"$tmp/systemd.log" 2>&1 || { cat "$tmp/systemd.log"; fail "dpkg under emulated systemd"; }
calls=$(grep deb-systemd-invoke "$R/tmp/systemd-calls" | tr '\n' ';')
[ "$calls" = "deb-systemd-invoke start pcached.service;deb-systemd-invoke restart pcached.service;deb-systemd-invoke stop pcached.service;" ] ||
    fail "under systemd: install/upgrade/remove called: $calls"
[ -z "$(in_root_pids)" ] || fail "the init script ran under systemd"
rm -rf "$R/run/systemd" "$R/usr/local/sbin/systemctl" "$R/usr/local/sbin/deb-systemd-invoke"
mark "under systemd: start on install, restart on upgrade, stop on remove"
echo "fresh Debian 12 OK in $(($(date +%s) - t0)) s"
