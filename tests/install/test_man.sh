#!/bin/sh
# test_man: the man pages (cmake/PcacheMan.cmake) render and say what the
# programs do: every option of a tool's --help is in its page, every key of
# `pcached --help-keys` and every Redis name in pcached.conf(5), every verb
# of pcache-snapshot in pcache-snapshot(1). The pages are generated from
# docs/ at build time; this is the check that the docs cover the programs.
# usage: test_man.sh BUILD_DIR
set -eu
build=$1
man_dir="$build/man"
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -d "$man_dir" ]; then
    echo "SKIPPED: no man pages in this build (pandoc missing at configure time)"
    exit 77
fi
command -v man >/dev/null 2>&1 || { echo "SKIPPED: no man(1) to render the pages"; exit 77; }
tmp=$(mktemp -d /tmp/pcache-man.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
render() { # page -> text
    MANWIDTH=200 man -l "$man_dir/$1.gz" 2>"$tmp/err" | col -b >"$tmp/$1.txt" ||
        fail "$1: man -l failed: $(cat "$tmp/err")"
    [ -s "$tmp/$1.txt" ] || fail "$1: renders empty"
    head -1 "$tmp/$1.txt" | grep -qi "^${1%.*}(${1##*.})" || fail "$1: title: $(head -1 "$tmp/$1.txt")"
}
has() { # page word
    grep -qF -- "$2" "$tmp/$1.txt" || fail "$1 does not mention '$2'"
}
for p in pcached.8 pcached.conf.5 pcachectl.1 pcache-snapshot.1; do
    render $p
    has $p "NAME"
done
pcached="$build/src/server/pcached"
# every option pcached --help names
for o in $("$pcached" --help | grep -oE -- '--?[a-zA-Z][a-zA-Z-]*' | sort -u); do
    has pcached.8 "$o"
done
for k in $("$pcached" --help-keys | sed -n 's/^\([a-z_]*\) = .*/\1/p'); do
    has pcached.conf.5 "$k"
done
for a in logfile loglevel syslog-enabled dir timeout; do has pcached.conf.5 "$a"; done
for o in $("$build/src/tools/pcachectl" --help | grep -oE -- '(^| )--?[a-zA-Z][a-zA-Z-]*' | sort -u); do
    has pcachectl.1 "$o"
done
for v in $("$build/src/tools/snapshot/pcache-snapshot" --help | sed -n 's/^  \([a-z]*\) .*/\1/p'); do
    has pcache-snapshot.1 "pcache-snapshot $v"
done
has pcached.8 "Type=notify"
echo "man pages OK"
