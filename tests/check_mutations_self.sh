#!/bin/sh
# tests/check_mutations_self.sh - tools/check_mutations.sh bites: on a
# planted list it passes the good row and names each bad one (a line gone, a
# line matched twice, a missing file, an id used twice, a short row).
set -eu
check=${1:?usage: check_mutations_self.sh tools/check_mutations.sh}
d=$(mktemp -d /tmp/td-mutcheck.XXXXXX)
trap 'rm -rf "$d"' EXIT INT TERM
mkdir -p "$d/tools" "$d/src"
printf 'int a = 1;\nint b = 2;\nint b2 = 2;\n' >"$d/src/x.c"
T=$(printf '\t')
{
    echo "# comment"
    echo "good${T}src/x.c${T}int a = 1;${T}int a = 0;${T}fine"
    echo "gone${T}src/x.c${T}int c = 3;${T}int c = 0;${T}its line is gone"
    echo "twice${T}src/x.c${T}= 2;${T}= 0;${T}two lines match"
    echo "nofile${T}src/y.c${T}int a = 1;${T}int a = 0;${T}no such file"
    echo "good${T}src/x.c${T}int b = 2;${T}int b = 0;${T}the id again"
    echo "short${T}src/x.c"
} >"$d/tools/mutations.tsv"
if out=$(sh "$check" "$d"); then
    echo "FAIL: the planted list passed: $out"; exit 1
fi
echo "$out"
for want in "gone: 'find' is on 0 lines" "twice: 'find' is on 2 lines" "nofile: no file" \
            "good: id used twice" "short: fewer than four fields" "6 rows, 5 bad"; do
    case $out in *"$want"*) ;; *) echo "FAIL: no '$want'"; exit 1 ;; esac
done
# and the good row alone passes
head -2 "$d/tools/mutations.tsv" >"$d/t" && mv "$d/t" "$d/tools/mutations.tsv"
sh "$check" "$d" >/dev/null || { echo "FAIL: a good list refused"; exit 1; }
echo "check_mutations_self: ok"
