#!/bin/sh
# transformerd against CTranslate2 on the same int8 model: the bundled model
# converted by bench/peers/convert_ct2.py with CTranslate2's int8
# quantization, loaded as it is by both (transformerd keeps an int8 file's
# matrices, embeddings and output projection int8: its default for such a
# file; CTranslate2 with compute_type int8). Beam 4, batch 32 and 1 (the
# held-out lines as ids, `transformerd tokenize`), one intra thread and
# $THREADS, ROUNDS interleaved rounds (the engines in turn, the order
# reversed every other round); generated tokens/s (without </s>), best and
# median, and transformerd / CTranslate2.
#
#   bench/peers/same_int8.sh      THREADS (2), ROUNDS (3), LINES (320), LINES1 (64),
#                                 OUT (/tmp/transformerd-same-int8), PY (bench/.venv's
#                                 python with bench/peers/requirements.txt)
set -eu
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
LINES=${LINES:-320}
LINES1=${LINES1:-64}
OUT=${OUT:-/tmp/transformerd-same-int8}
# CTranslate2's libgomp: a short spin, as bench/peers/run.sh runs it
[ -n "${OMP_WAIT_POLICY:-}" ] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000}
BE=build/bench/engine/bench_engine
TD=build/transformerd
if [ -z "${PY:-}" ]; then
    [ -x bench/.venv/bin/python ] || python3 -m venv bench/.venv
    bench/.venv/bin/pip install -q -r bench/peers/requirements.txt
    PY=bench/.venv/bin/python
fi
[ -x "$BE" ] && [ -x "$TD" ] || make build >/dev/null
mkdir -p "$OUT"
M=$OUT/ct2-ende-int8
[ -f "$M/model.bin" ] || "$PY" bench/peers/convert_ct2.py models/en-de "$M" int8 >&2
head -n "$LINES" tests/data/en_de_test/test.en | "$TD" tokenize --model models/en-de > "$OUT/b32.ids"
head -n "$LINES1" "$OUT/b32.ids" > "$OUT/b1.ids"
RES=$OUT/results.jsonl
: > "$RES"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for cfg in "b32.ids 32" "b1.ids 1"; do
        set -- $cfg
        ids=$1 batch=$2
        engines="td ct2"
        [ $((r % 2)) -eq 0 ] && engines="ct2 td"
        for th in 1 "$THREADS"; do
            for e in $engines; do
                if [ "$e" = td ]; then
                    line=$("$BE" --model "$M" --ids "$OUT/$ids" --batch "$batch" --beam 4 \
                           --threads "$th" --repeat 1)
                else
                    line=$("$PY" bench/peers/peer_ct2.py --model "$M" --ids "$OUT/$ids" \
                           --batch "$batch" --beam 4 --threads "$th" --compute-type int8 \
                           --max-length 255)
                fi
                echo "{\"round\": $r, \"engine\": \"$e\", \"threads\": $th, \"batch\": $batch, \"run\": $line}" >> "$RES"
            done
        done
    done
    echo "round $r done" >&2
    r=$((r + 1))
done
"$PY" - "$RES" "$ROUNDS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
acc = {}
for r in rows:
    acc.setdefault((r["batch"], r["threads"], r["engine"]), []).append(r["run"]["tokens_per_s"])
print(f"\n{sys.argv[2]} interleaved rounds, beam 4, the same int8 model.bin; tokens/s best / median")
print("\n| batch | threads | transformerd | CTranslate2 | td / CT2 (best / median) |")
print("|---|---|---|---|---|")
for (b, th) in sorted({k[:2] for k in acc}, key=lambda k: (-k[0], k[1])):
    td, ct = acc[(b, th, "td")], acc[(b, th, "ct2")]
    print(f"| {b} | {th} | {max(td):.1f} / {statistics.median(td):.1f} | "
          f"{max(ct):.1f} / {statistics.median(ct):.1f} | "
          f"{max(td) / max(ct):.2f}x / {statistics.median(td) / statistics.median(ct):.2f}x |")
PY
