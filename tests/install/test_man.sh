#!/bin/sh
# test_man: the man pages (docs/man/, cmake/PcacheMan.cmake) are man pages
# and say what the programs do. Each page renders at 80 columns with no
# troff warning (man --warnings=w: groff -ww), its NAME line is one whatis
# reads (lexgrog), it has the standard sections in order and stays short
# (at most 300 lines at 80 columns). Every option of a tool's --help is in
# its page, every key of `pcached --help-keys` is in pcached.conf(5) as
# "key = default" with the program's default, every verb of pcache-snapshot
# in pcache-snapshot(1); no page points at a "§" it does not hold, and every
# file of /usr/share/doc/pcache it names is one the doc package installs.
# usage: test_man.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
man_dir="$build/man"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v man >/dev/null 2>&1 || { echo "SKIPPED: no man(1) to render the pages"; exit 77; }
command -v lexgrog >/dev/null 2>&1 || { echo "SKIPPED: no lexgrog(1) (man-db)"; exit 77; }
[ -d "$man_dir" ] || fail "no $man_dir: the build made no man pages"
tmp=$(mktemp -d /tmp/pcache-man.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
full="NAME SYNOPSIS DESCRIPTION OPTIONS FILES ENVIRONMENT EXIT_STATUS EXAMPLES SEE_ALSO"
render() { # page, its sections in order -> $tmp/page.txt
    page=$1
    f="$man_dir/$page.gz"
    [ -s "$f" ] || fail "$page: $f missing"
    MANWIDTH=80 man --warnings=w -l "$f" 2>"$tmp/err" | col -b >"$tmp/$page.txt" ||
        fail "$page: man -l failed: $(cat "$tmp/err")"
    [ ! -s "$tmp/err" ] || fail "$page: troff warnings at 80 columns: $(head -5 "$tmp/err")"
    [ -s "$tmp/$page.txt" ] || fail "$page: renders empty"
    head -1 "$tmp/$page.txt" | grep -qi "^${page%.*}(${page##*.})" ||
        fail "$page: title: $(head -1 "$tmp/$page.txt")"
    # troff warns of no line it cannot fill; an example (no-fill) line may still overflow
    w=$(LC_ALL=C.UTF-8 wc -L <"$tmp/$page.txt")
    [ "$w" -le 80 ] || fail "$page: a line of $w columns: $(awk 'length > 80' "$tmp/$page.txt")"
    n=$(wc -l <"$tmp/$page.txt")
    [ "$n" -le 300 ] || fail "$page: $n lines at 80 columns (at most 300: the manual is in docs/)"
    lexgrog "$f" >"$tmp/whatis" 2>&1 || fail "$page: lexgrog: $(cat "$tmp/whatis")"
    grep -q "\"${page%.*} - ..*\"" "$tmp/whatis" || fail "$page: whatis: $(cat "$tmp/whatis")"
    got=$(grep -E '^[A-Z][A-Z ]+$' "$tmp/$page.txt" | tr ' ' _ | tr '\n' ' ')
    want=""
    for s in $got; do
        case " $2 " in *" $s "*) want="$want$s " ;; esac
    done
    [ "$want" = "$2 " ] || fail "$page: sections '$got', expected '$2' in this order"
    ! grep -n '§\|@[A-Z_]*@' "$tmp/$page.txt" || fail "$page: a § reference or an unfilled @VAR@"
    for d in $(grep -o '/usr/share/doc/pcache/[A-Za-z0-9_.-]*' "$tmp/$page.txt" | sort -u); do
        [ "$d" = /usr/share/doc/pcache/ ] || [ -f "$src/docs/${d#/usr/share/doc/pcache/}" ] ||
            fail "$page names $d: no such doc"
    done
}
has() { # page word
    grep -qF -- "$2" "$tmp/$1.txt" || fail "$1 does not mention '$2'"
}
render pcached.8 "$full"
render pcached.conf.5 "NAME SYNOPSIS DESCRIPTION FILES EXAMPLES SEE_ALSO"
render pcachectl.1 "$full"
render pcache-snapshot.1 "$full"

pcached="$build/src/server/pcached"
# (--KEY of --KEY=VALUE is a placeholder: the page writes it in italics, --key=value)
for o in $("$pcached" --help | grep -oE -- '--?[a-zA-Z][a-zA-Z-]*' | grep -vxE -- '--?[A-Z]{2,}' |
           sort -u); do
    has pcached.8 "$o"
done
# every key with the default the program has: "key = default" on a line of
# its own ("key =" for an empty default)
"$pcached" --help-keys | grep -v '^#' | grep ' = ' >"$tmp/keys"
[ "$(wc -l <"$tmp/keys")" -gt 40 ] || fail "pcached --help-keys lists $(wc -l <"$tmp/keys") keys"
sed 's/^ *//; s/ *$//' "$tmp/pcached.conf.5.txt" >"$tmp/conf-lines"
while IFS= read -r line; do
    l=$(printf '%s' "$line" | sed 's/ *$//')
    grep -qxF -- "$l" "$tmp/conf-lines" ||
        fail "pcached.conf(5) lacks the line '$l' (pcached --help-keys)"
done <"$tmp/keys"
for a in logfile loglevel syslog-enabled dir timeout maxmemory-policy databases appendonly; do
    has pcached.conf.5 "$a"
done
for o in $("$build/src/tools/pcachectl" --help | grep -oE -- '(^| )--?[a-zA-Z][a-zA-Z-]*' |
           sort -u); do
    has pcachectl.1 "$o"
done
for e in PCACHECTL_SOCKET PCACHECTL_PORT PCACHECTL_PASSWORD "pcachectl help"; do
    has pcachectl.1 "$e"
done
for v in $("$build/src/tools/snapshot/pcache-snapshot" --help | sed -n 's/^  \([a-z]*\) .*/\1/p'); do
    has pcache-snapshot.1 "pcache-snapshot $v"
done
has pcached.8 "Type=notify"
echo "man pages OK: $(for p in pcached.8 pcached.conf.5 pcachectl.1 pcache-snapshot.1; do
    printf '%s %s lines; ' "$p" "$(wc -l <"$tmp/$p.txt")"; done)no troff warning at 80 columns"
