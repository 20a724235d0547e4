#!/bin/sh
# Text in, text out on the bundled model (models/en-de) and the held-out test
# set: `transformerd translate` against transformers (MarianTokenizer +
# generate + batch_decode, the same length-sorted batches of 32), float32 CPU,
# same threads, one run. Prints sentences/s and the ratio; both sides must
# produce the same text (checked).
#   bench/model/run.sh [BEAM] [LINES]     (THREADS=N, default: cores)
set -eu
cd "$(dirname "$0")/../.."
BEAM=${1:-4}
LINES=${2:-500}
THREADS=${THREADS:-$(nproc)}
make build >/dev/null
tmp=$(mktemp -d /tmp/td-bench-model.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
head -n "$LINES" tests/data/en_de_test/test.en > "$tmp/src"
t0=$(date +%s.%N)
./build/transformerd translate --model models/en-de --beam "$BEAM" --batch 32 --no-split \
    --threads "$THREADS" < "$tmp/src" > "$tmp/td"
t1=$(date +%s.%N)
tools/setup_venv.sh >/dev/null
tools/.venv/bin/python bench/model/peer.py models/en-de "$tmp/src" "$tmp/hf" "$BEAM" "$THREADS" \
    > "$tmp/hf.time" 2>/dev/null
python3 - "$t0" "$t1" "$tmp/hf.time" "$LINES" "$BEAM" "$THREADS" "$tmp/td" "$tmp/hf" <<'PY'
import sys
t0, t1, hf_time, n, beam, threads = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
ours = t1 - t0
load, gen = map(float, open(hf_time).read().split())
same = sum(a == b for a, b in zip(open(sys.argv[7]), open(sys.argv[8])))
print(f"beam {beam}, {n} lines, {threads} threads")
print(f"transformerd translate (incl. model load): {ours:.2f} s, {n / ours:.1f} sentences/s")
print(f"transformers generate (excl. model load {load:.2f} s): {gen:.2f} s, {n / gen:.1f} sentences/s")
print(f"ratio: {gen / ours:.2f}x; identical output lines: {same}/{n}")
PY
