#!/bin/sh
# tools/mutate.sh - measures how much the test suite bites: plants each bug of
# tools/mutations.tsv, one at a time, in a copy of the tree, rebuilds, runs
# ctest, and prints whether the tests caught it.
#
# Usage: tools/mutate.sh [-k] [-o TABLE.md] [ID ...]
#   ID ...   only these mutations (default: all)
#   -o FILE  also write the result table (markdown) to FILE
#   -k       keep the work directory (default: removed)
# Environment: JOBS (build and ctest parallelism, default nproc),
#   MUTATE_CTEST_ARGS (extra ctest arguments).
#
# tools/mutations.tsv has one mutation a line, tab-separated:
#   id  file  find  replace  [note]
# `find` is a fixed string that must occur on exactly one line of `file`
# (a mutation whose string is gone or ambiguous is reported STALE: fix the
# list after a refactor); that occurrence is replaced by `replace`. A note
# starting with "equivalent:" marks a mutation that cannot change behaviour,
# with the reason; it is reported but not counted as survived.
#
# The copy is built once without the CUDA backend (the GPU tests skip on
# this machine anyway) and with warnings not fatal, so that a mutant is
# judged by the tests and not by the compiler; a mutant that does not
# compile is reported BUILD (and counts as caught). Tests run with
# --stop-on-failure: one failing test is enough. Exit status: 0 when every
# mutation is caught (or marked equivalent), 1 otherwise.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
list="$root/tools/mutations.tsv"
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
keep=0
table=""
while getopts "ko:" opt; do
    case $opt in
        k) keep=1 ;;
        o) table=$OPTARG ;;
        *) sed -n '2,12p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

work=$(mktemp -d /tmp/td-mutate.XXXXXX)
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT INT TERM

# The tree as it is now (tracked and untracked-but-not-ignored files).
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 tar cf - 2>/dev/null) | (mkdir -p "$work/src" && cd "$work/src" && tar xf -)
src="$work/src"
bld="$work/build"
log="$work/log"
mkdir -p "$log"

echo "mutate: building the unmutated copy in $work" >&2
cmake -S "$src" -B "$bld" -DTD_CUDA=OFF -DTD_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$log/configure.txt" 2>&1
cmake --build "$bld" -j "$jobs" >"$log/build.txt" 2>&1 || {
    echo "mutate: the unmutated tree does not build; see $log/build.txt" >&2
    keep=1
    exit 2
}
run_tests() {
    # shellcheck disable=SC2086
    (cd "$bld" && ctest -j "$jobs" --timeout 300 --stop-on-failure -E '^check_deploy$' \
        ${MUTATE_CTEST_ARGS:-} >"$1" 2>&1 </dev/null)
}
if ! run_tests "$log/baseline.txt"; then
    echo "mutate: the unmutated tree fails its tests; see $log/baseline.txt" >&2
    keep=1
    exit 2
fi

results="$work/results.tsv"
: >"$results"
caught=0
survived=0
stale=0
equivalent=0
tab=$(printf '\t')
while IFS="$tab" read -r id file find replace note; do
    case $id in ''|'#'*) continue ;; esac
    if [ $# -gt 0 ]; then
        want=0
        for a in "$@"; do [ "$a" = "$id" ] && want=1; done
        [ "$want" = 1 ] || continue
    fi
    f="$src/$file"
    n=$(grep -cF -- "$find" "$f" 2>/dev/null || true)
    if [ "${n:-0}" != 1 ]; then
        status=STALE
        stale=$((stale + 1))
        detail="'find' occurs ${n:-0} times in $file"
    else
        cp "$f" "$work/orig"
        FIND=$find REPLACE=$replace awk '
            BEGIN { f = ENVIRON["FIND"]; r = ENVIRON["REPLACE"] }
            { i = index($0, f)
              if (i) $0 = substr($0, 1, i - 1) r substr($0, i + length(f))
              print }' "$work/orig" >"$f"
        line=$(grep -nF -- "$find" "$work/orig" | cut -d: -f1)
        if ! cmake --build "$bld" -j "$jobs" >"$log/$id.build.txt" 2>&1 </dev/null; then
            status=BUILD
            caught=$((caught + 1))
            detail="does not compile"
        elif run_tests "$log/$id.txt"; then
            case $note in
                equivalent:*) status=EQUIVALENT; equivalent=$((equivalent + 1)) ;;
                *) status=SURVIVED; survived=$((survived + 1)) ;;
            esac
            detail="every test passed"
        else
            status=CAUGHT
            caught=$((caught + 1))
            detail=$(grep -E '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Failed  ' "$log/$id.txt" |
                sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | sort -u | tr '\n' ' ')
        fi
        # restore (cp keeps a new mtime, so the next build recompiles it)
        cp "$work/orig" "$f"
        file="$file:$line"
    fi
    printf '%-8s %-10s %s  %s\n' "$id" "$status" "$file" "$detail" >&2
    printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$status" "$file" "$detail" "$note" >>"$results"
done <"$list"
cmake --build "$bld" -j "$jobs" >/dev/null 2>&1 || true

total=$((caught + survived + stale + equivalent))
summary="$total mutations: $caught caught, $survived survived, $equivalent equivalent, $stale stale"
echo "mutate: $summary" >&2
if [ -n "$table" ]; then
    {
        echo "| id | result | where | caught by / note |"
        echo "|---|---|---|---|"
        while IFS="$tab" read -r id status where detail note; do
            echo "| $id | $status | \`$where\` | $detail${note:+ ($note)} |"
        done <"$results"
        echo
        echo "$summary."
    } >"$table"
fi
[ "$survived" = 0 ] && [ "$stale" = 0 ]
