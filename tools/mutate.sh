#!/bin/sh
# tools/mutate.sh - measures how much the test suite bites: plants bugs one at
# a time in a copy of the tree, rebuilds, runs ctest, and prints whether the
# tests caught each. The bugs are ours (tools/mutations.tsv) or, with
# --generated, drawn at random from a mutant generator's (universalmutator's).
#
# Usage: tools/mutate.sh [-k] [-o TABLE.md] [ID ...]
#        tools/mutate.sh --generated N [--seed S] [--state FILE] [--all-tests]
#                        [--retry STATUS,...] [-k] [-o TABLE.md] MODULE ...
#   ID ...     only these mutations of the list (default: all)
#   -o FILE    also write the result table (markdown) to FILE
#   -k         keep the work directory (default: removed)
#   --generated N  N generated mutants of each MODULE (a source file such as
#              server/api/native.c, or a folder such as server/: its every .c, below too)
#   --seed S   the draw's seed (default 1; printed, with the generator's version)
#   --state F  a TSV of judged mutants: read to skip them, appended to as each
#              is judged, so an interrupted campaign resumes where it stopped
#   --all-tests  every module judged by the map's fallback row (see below)
#   --retry S,...  judge again the mutants F records with these statuses
#              (SURVIVED after a test was added, TIMEOUT after a loaded run)
# Environment: JOBS (build and ctest parallelism, default nproc),
#   MUTATE_CTEST_ARGS (extra ctest arguments, after ours: a -R or -E there wins),
#   MUTATE_TIMEOUT (seconds one mutant's ctest may take; default three times
#   the unmutated run of the same tests plus a minute; past it: TIMEOUT),
#   MUTATE_CUDA (TD_CUDA of the copy's build, default OFF: faster; AUTO for
#   the rows whose note says they need the CUDA backend built).
#
# tools/mutations.tsv has one mutation a line, tab-separated:
#   id  file  find  replace  [note]
# `find` is a fixed string that must occur on exactly one line of `file`
# (a mutation whose string is gone or ambiguous is reported STALE: fix the
# list after a refactor); that occurrence is replaced by `replace`. A note
# starting with "equivalent:" marks a mutation that cannot change behaviour,
# with the reason; it is reported but not counted as survived.
#
# Generated mutants (docs/testing.md, "Mutation testing") come from
# tools/mutgen.py in tools/.venv-mutate (made here by tools/setup_venv.sh
# --mutate): every mutant universalmutator's C rules make of the module, in a
# seeded order; they are taken in that order until N were judged by the tests.
# One that does not compile (BUILD) or compiles to the same object code as
# the unmutated module (NOCODE: a line this build leaves out, or a change the
# compiler sees through) is recorded and not counted: the next is drawn. Each
# is judged by the tests tools/mutate-tests.tsv names for its module; a
# survivor marked in tools/mutants-triage.tsv "equivalent: why" is reported
# EQUIVALENT. Score per module: caught (timeouts included) / (caught +
# survived), equivalent ones left out.
#
# The copy is built once without the CUDA backend (the GPU tests skip on
# this machine anyway) and with warnings not fatal, so that a mutant is
# judged by the tests and not by the compiler; a listed mutation that does
# not compile is reported BUILD (and counts as caught). Tests run with
# --stop-on-failure: one failing test is enough; a mutant whose tests time
# out is reported TIMEOUT (caught). Exit status: 0 when every mutant is
# caught (or equivalent), 1 otherwise, 2 when the unmutated tree fails.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
list="$root/tools/mutations.tsv"
testmap="$root/tools/mutate-tests.tsv"
triage="$root/tools/mutants-triage.tsv"
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
keep=0
table=""
generated=""
seed=1
state=""
alltests=0
retry=""
usage() { sed -n '7,24p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        -k) keep=1 ;;
        -o) [ $# -ge 2 ] || usage; table=$2; shift ;;
        -o?*) table=${1#-o} ;;
        --generated) [ $# -ge 2 ] || usage; generated=$2; shift ;;
        --seed) [ $# -ge 2 ] || usage; seed=$2; shift ;;
        --state) [ $# -ge 2 ] || usage; state=$2; shift ;;
        --all-tests) alltests=1 ;;
        --retry) [ $# -ge 2 ] || usage; retry=",$2,"; shift ;;
        --) shift; break ;;
        -*) usage ;;
        *) break ;;
    esac
    shift
done
tab=$(printf '\t')

# Generated mode: the modules, the generator, the state file.
modules=""
if [ -n "$generated" ]; then
    case $generated in ''|*[!0-9]*|0) echo "mutate: --generated wants a count" >&2; exit 2 ;; esac
    [ $# -gt 0 ] || usage
    for m in "$@"; do
        m=${m%/}
        if [ -d "$root/$m" ]; then
            for f in $(cd "$root" && find "$m" -name '*.c' | LC_ALL=C sort); do
                modules="$modules $f"
            done
        elif [ -f "$root/$m" ]; then
            modules="$modules $m"
        else
            echo "mutate: no such module: $m" >&2
            exit 2
        fi
    done
    sh "$root/tools/setup_venv.sh" --mutate
    py="$root/tools/.venv-mutate/bin/python"
    gen="$root/tools/mutgen.py"
    if [ -n "$state" ]; then
        case $state in /*) ;; *) state="$(pwd)/$state" ;; esac
        [ -f "$state" ] || printf '# key\tmodule\tline\tstatus\tdetail\tseconds\toriginal\tmutant\ttests\n' >"$state"
    fi
    echo "mutate: universalmutator $("$py" "$gen" version), seed $seed, $generated per module:$modules" >&2
fi

work=$(mktemp -d /tmp/td-mutate.XXXXXX)
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The tree as it is now (tracked and untracked-but-not-ignored files).
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 tar cf - 2>/dev/null) | (mkdir -p "$work/src" && cd "$work/src" && tar xf -)
src="$work/src"
bld="$work/build"
log="$work/log"
mkdir -p "$log"

echo "mutate: building the unmutated copy in $work" >&2
cmake -S "$src" -B "$bld" -DTD_CUDA="${MUTATE_CUDA:-OFF}" -DTD_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$log/configure.txt" 2>&1
build() { cmake --build "$bld" -j "$jobs" >"$1" 2>&1 </dev/null; }
build "$log/build.txt" || {
    echo "mutate: the unmutated tree does not build; see $log/build.txt" >&2
    keep=1
    exit 2
}

# run_tests LOG INCLUDE EXCLUDE: the tests ctest -R INCLUDE -E EXCLUDE selects,
# stopping at the first failure, within $limit seconds (exit 124 past it).
run_tests() {
    # shellcheck disable=SC2086
    (cd "$bld" && timeout -k 10 "$limit" ctest -j "$jobs" --timeout 300 --stop-on-failure \
        -R "$2" -E "$3" ${MUTATE_CTEST_ARGS:-} >"$1" 2>&1 </dev/null)
}

# baseline INCLUDE EXCLUDE: the first time a selection is used, it runs on the
# unmutated tree (which must pass) and its time sets $limit.
baseline() {
    sel=$(printf '%s\t%s\t%s' "$1" "$2" "${MUTATE_CTEST_ARGS:-}" | cksum | cut -d' ' -f1)
    if [ ! -f "$work/baseline.$sel" ]; then
        limit=86400
        t0=$(date +%s)
        if ! run_tests "$log/baseline.$sel.txt" "$1" "$2"; then
            echo "mutate: the unmutated tree fails its tests; see $log/baseline.$sel.txt" >&2
            keep=1
            exit 2
        fi
        echo $(($(date +%s) - t0)) >"$work/baseline.$sel"
        echo "mutate: tests -R '$1' -E '$2' ${MUTATE_CTEST_ARGS:-}: $(cat "$work/baseline.$sel") s unmutated" >&2
    fi
    limit=${MUTATE_TIMEOUT:-$((3 * $(cat "$work/baseline.$sel") + 60))}
}

# objsum FILE: checksums of FILE's objects in the build, debug info stripped
# (empty for a header).
objsum() {
    find "$bld" -path "*/$1.o" | sort | while read -r o; do
        objcopy --strip-debug "$o" "$work/stripped.o" && cksum <"$work/stripped.o"
    done
}

# judge FILE MUTANT LOGNAME INCLUDE EXCLUDE [OBJSUMS]: plants the mutated copy
# MUTANT as FILE, rebuilds, runs the tests, restores FILE. Sets status (BUILD,
# NOCODE when OBJSUMS, a file of the unmutated objsum, is given and equal,
# CAUGHT, TIMEOUT, SURVIVED), detail (the catching tests) and secs.
judge() {
    f="$src/$1"
    t0=$(date +%s)
    cp "$f" "$work/orig"
    cp "$2" "$f"
    if ! build "$log/$3.build.txt"; then
        status=BUILD
        detail="does not compile"
    elif [ -n "${6:-}" ] && [ -s "$6" ] && objsum "$1" | cmp -s - "$6"; then
        status=NOCODE
        detail="same object code as the unmutated module"
    elif run_tests "$log/$3.txt" "$4" "$5"; then
        status=SURVIVED
        detail="every test passed"
    else
        rc=$?
        detail=$(grep -E '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Failed  ' "$log/$3.txt" |
            sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | sort -u | tr '\n' ' ')
        detail=${detail% }
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            status=TIMEOUT
            detail="ctest stopped after ${limit} s${detail:+ ($detail)}"
        elif grep -q '\*\*\*Timeout' "$log/$3.txt"; then
            status=TIMEOUT
        else
            status=CAUGHT
        fi
    fi
    # restore (cp keeps a new mtime, so the next build recompiles it)
    cp "$work/orig" "$f"
    secs=$(($(date +%s) - t0))
}

results="$work/results.tsv"
: >"$results"
caught=0
survived=0
stale=0
equivalent=0

# The list: tools/mutations.tsv.
list_mode() {
    baseline . '^check_deploy$'
    while IFS="$tab" read -r id file find replace note <&3; do
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
            FIND=$find REPLACE=$replace awk '
                BEGIN { f = ENVIRON["FIND"]; r = ENVIRON["REPLACE"] }
                { i = index($0, f)
                  if (i) $0 = substr($0, 1, i - 1) r substr($0, i + length(f))
                  print }' "$f" >"$work/mutant"
            line=$(grep -nF -- "$find" "$f" | cut -d: -f1)
            judge "$file" "$work/mutant" "$id" . '^check_deploy$'
            case $status in
                BUILD|CAUGHT|TIMEOUT) caught=$((caught + 1)) ;;
                SURVIVED)
                    case $note in
                        equivalent:*) status=EQUIVALENT; equivalent=$((equivalent + 1)) ;;
                        *) survived=$((survived + 1)) ;;
                    esac ;;
            esac
            file="$file:$line"
        fi
        printf '%-8s %-10s %s  %s\n' "$id" "$status" "$file" "$detail" >&2
        printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$status" "$file" "$detail" "$note" >>"$results"
    done 3<"$list"
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
}

# select_tests MODULE: sets inc and exc from tools/mutate-tests.tsv.
select_tests() {
    while IFS="$tab" read -r pat inc exc; do
        case $pat in ''|'#'*) continue ;; esac
        [ "$alltests" = 1 ] && [ "$pat" != '*' ] && continue
        # shellcheck disable=SC2254
        case $1 in $pat) exc=${exc:-^check_deploy\$}; return ;; esac
    done <"$testmap"
    inc=. exc='^check_deploy$'
}

# lookup KEY FILE COLUMN: that column of KEY's last row in FILE (empty if none).
lookup() {
    [ -f "$2" ] || return 0
    awk -F'\t' -v k="$1" -v c="$3" '$1 == k { r = $c } END { if (r != "") print r }' "$2"
}

# The generated mutants: for each module, the candidates in drawing order
# until N were judged by the tests.
generated_mode() {
    for m in $modules; do
        build "$log/restore.txt" # the last module's restored file
        select_tests "$m"
        objsum "$m" >"$work/objsum"
        case $m in
            *.c) if [ ! -s "$work/objsum" ]; then
                     echo "mutate: $m: no object of it in this build; skipped" >&2
                     continue
                 fi ;;
        esac
        "$py" "$gen" list "$src/$m" "$m" "$seed" >"$work/cands" 2>"$log/gen.txt" </dev/null
        echo "mutate: $m: $(wc -l <"$work/cands") candidates, tests -R '$inc' -E '$exc'" >&2
        judged=0
        tries=0
        while IFS="$tab" read -r key line orig mut <&3; do
            [ "$judged" -lt "$generated" ] || break
            tries=$((tries + 1))
            if [ "$tries" -gt $((20 * generated + 20)) ]; then
                echo "mutate: $m: $tries candidates drawn, $judged judged by the tests; giving up" >&2
                break
            fi
            status=$(lookup "$key" "$state" 4)
            case $retry in *",$status,"*) status="" ;; esac
            if [ -n "$status" ]; then
                detail=$(lookup "$key" "$state" 5)
                secs=$(lookup "$key" "$state" 6)
                from=state
            else
                baseline "$inc" "$exc" # once a selection, when a mutant needs it
                "$py" "$gen" apply "$src/$m" "$line" "$mut" >"$work/mutant" </dev/null
                judge "$m" "$work/mutant" "$(echo "$key" | tr '/@' '__')" "$inc" "$exc" "$work/objsum"
                from=run
                [ -z "$state" ] || printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
                    "$key" "$m" "$line" "$status" "$detail" "$secs" "$orig" "$mut" \
                    "-R $inc -E $exc${MUTATE_CTEST_ARGS:+ $MUTATE_CTEST_ARGS}" >>"$state"
            fi
            verdict=$(lookup "$key" "$triage" 2)
            case $status in
                SURVIVED)
                    case $verdict in
                        equivalent:*) status=EQUIVALENT; detail=$verdict ;;
                        sanitizer:*) status=CAUGHT; detail="make test's sanitizer stage (triaged $verdict)" ;;
                        test:*) detail="$detail (triaged $verdict: still missed)" ;;
                    esac ;;
            esac
            case $status in
                CAUGHT|TIMEOUT|SURVIVED|EQUIVALENT) judged=$((judged + 1)) ;;
            esac
            printf '%-10s %s:%s  %s  [%s s%s]\n' "$status" "$m" "$line" "$detail" "$secs" \
                "$([ "$from" = state ] && echo ', from the state file')" >&2
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
                "$m" "$key" "$line" "$status" "$detail" "$secs" "$orig" "$mut" >>"$results"
        done 3<"$work/cands"
        [ "$judged" -ge "$generated" ] ||
            echo "mutate: $m: only $judged mutants judged by the tests" >&2
    done
    # Per module: counts and the score; survived counts the triage's equivalents out.
    awk -F'\t' -v seed="$seed" -v n="$generated" '
        { c[$1, $4]++; c["all", $4]++; if (!($1 in order)) order[$1] = ++nm }
        function row(k, name,   caught, s) {
            caught = c[k, "CAUGHT"] + c[k, "TIMEOUT"]
            s = caught + c[k, "SURVIVED"] ? sprintf("%.0f%%", 100 * caught / (caught + c[k, "SURVIVED"])) : "-"
            printf "| %s | %d | %d | %d | %d | %d | %d | %d | %s |\n", name, c[k, "CAUGHT"], c[k, "TIMEOUT"],
                c[k, "SURVIVED"], c[k, "EQUIVALENT"], c[k, "BUILD"], c[k, "NOCODE"],
                caught + c[k, "SURVIVED"] + c[k, "EQUIVALENT"], s
        }
        END {
            print "| module | caught | timeout | survived | equivalent | build | nocode | judged | score |"
            print "|---|---|---|---|---|---|---|---|---|"
            for (i = 1; i <= nm; i++) for (m in order) if (order[m] == i) row(m, "`" m "`")
            if (nm > 1) row("all", "all")
            printf "\n%d per module, seed %s; score = caught (timeouts included) / (caught + survived).\n", n, seed
        }' "$results" >"$work/summary.md"
    cat "$work/summary.md" >&2
    survived=$(awk -F'\t' '$4 == "SURVIVED" { n++ } END { print n + 0 }' "$results")
    if [ -n "$table" ]; then
        {
            echo "| module:line | key | result | original -> mutant | caught by / note | s |"
            echo "|---|---|---|---|---|---|"
            awk -F'\t' '
                function cell(s) { gsub(/\\t/, " ", s); gsub(/\\n/, " / ", s); gsub(/\|/, "\\|", s)
                                   gsub(/`/, "", s); sub(/^ +/, "", s); return "`" s "`" }
                { printf "| `%s:%s` | %s | %s | %s -> %s | %s | %s |\n", $1, $3, $2, $4, cell($7), cell($8), $5, $6 }
            ' "$results"
            echo
            cat "$work/summary.md"
        } >"$table"
    fi
}

if [ -n "$generated" ]; then
    generated_mode
else
    list_mode "$@"
fi
build /dev/null || true
[ "$survived" = 0 ] && [ "$stale" = 0 ]
