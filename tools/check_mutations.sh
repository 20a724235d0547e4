#!/bin/sh
# tools/check_mutations.sh - the fast check of tools/mutations.tsv that every
# `make test` runs (ctest check_mutations): each row has an id, a file, a
# find and a replace; ids are unique; the file exists; and `find` occurs on
# exactly one line of the file, as tools/mutate.sh needs to plant it. A row
# whose line is gone (or now matches several lines) tests nothing: re-point
# it at the line that now holds the behaviour.
#
# Usage: tools/check_mutations.sh [ROOT]   (default: this checkout)
# Prints one line a bad row and exits 1 when there is one.
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
list="$root/tools/mutations.tsv"
tab=$(printf '\t')
bad=0
rows=0
seen=""
while IFS="$tab" read -r id file find replace note; do
    case $id in ''|'#'*) continue ;; esac
    rows=$((rows + 1))
    if [ -z "$file" ] || [ -z "$find" ] || [ -z "${replace+x}" ]; then
        echo "mutations.tsv: $id: fewer than four fields"; bad=$((bad + 1)); continue
    fi
    case " $seen " in *" $id "*) echo "mutations.tsv: $id: id used twice"; bad=$((bad + 1)) ;; esac
    seen="$seen $id"
    if [ "$find" = "$replace" ]; then
        echo "mutations.tsv: $id: replace equals find"; bad=$((bad + 1))
    fi
    if [ ! -f "$root/$file" ]; then
        echo "mutations.tsv: $id: no file $file"; bad=$((bad + 1)); continue
    fi
    n=$(grep -cF -- "$find" "$root/$file" || true)
    if [ "$n" != 1 ]; then
        echo "mutations.tsv: $id: 'find' is on $n lines of $file (must be exactly one)"
        bad=$((bad + 1))
    fi
done <"$list"
echo "mutations.tsv: $rows rows, $bad bad"
[ "$bad" = 0 ]
