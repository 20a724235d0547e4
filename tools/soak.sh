#!/bin/sh
# tools/soak.sh - `make test` several times in a row beside a CPU-burning
# neighbour, on a clean clone of the current commit (as CI builds it): the
# proof that no test is flaky under load.
#
# Usage: tools/soak.sh [RUNS] [BURNERS]
#   RUNS     how many `make test` in a row (default 5); stops at the first
#            failure, whose log it keeps
#   BURNERS  busy loops beside it (default 1: one of two cores taken)
# Environment: SOAK_DIR (default: a new directory under /tmp).
# Prints one line a run (status, minutes) and exits 0 only when every run
# passed.
set -eu

runs=${1:-5}
burners=${2:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${SOAK_DIR:-$(mktemp -d /tmp/td-soak.XXXXXX)}
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

rev=$(git -C "$root" rev-parse HEAD)
rm -rf "$dir/src"
git clone -q "$root" "$dir/src"
git -C "$dir/src" checkout -q "$rev"
echo "soak: $runs x make test of $rev in $dir/src beside $burners busy loop(s)" >&2

i=0
while [ "$i" -lt "$burners" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done

n=1
while [ "$n" -le "$runs" ]; do
    t0=$(date +%s)
    if make -C "$dir/src" test >"$dir/run$n.log" 2>&1; then
        st=passed
    else
        st=FAILED
    fi
    t1=$(date +%s)
    printf 'soak: run %d of %d %s in %.1f min\n' "$n" "$runs" "$st" "$(echo "($t1 - $t0) / 60" | bc -l)"
    if [ "$st" = FAILED ]; then
        echo "soak: the log is $dir/run$n.log" >&2
        exit 1
    fi
    rm -f "$dir/run$n.log"
    n=$((n + 1))
done
echo "soak: $runs runs passed" >&2
