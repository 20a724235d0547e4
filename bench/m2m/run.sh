#!/bin/sh
# CPU speed and memory of a multilingual model (M2M100, model_type m2m_100)
# against CTranslate2 (4.8.5, tools/.venv), side by side in interleaved rounds:
#   - the model: bench/m2m/make_model.py, an M2M100 with the bundled
#     model's shape (models/en-de: 6+2 layers, d_model 256, 4 heads, ffn
#     1024, 256 positions), a SentencePiece BPE vocabulary of ~8000 trained
#     on tests/data/en_de_test (the lines after the held-out ones) plus
#     M2M100's 100 language tokens, random weights (seeded, init_std
#     INIT_STD); CTranslate2 gets it through its own converter
#     (TransformersConverter), float32 and int8. Written under $OUT/model,
#     never in the tree;
#   - the sources: the first LINES held-out lines of
#     tests/data/en_de_test/test.en as "__en__ pieces </s>" ids (transformers'
#     M2M100Tokenizer), en->de: __de__ forced first in every hypothesis
#     (CTranslate2: target_prefix; transformerd: bench_engine --prefix, the
#     engine's forced target prefix as `translate --target de` uses it);
#   - the cases: beam 4 and greedy, batch 32 (LINES lines) and batch 1 (the
#     first LINES1), intra threads 1 and 2 (CTranslate2 intra_threads,
#     transformerd --threads), float32 and int8 each (transformerd's int8
#     keeps the embeddings and the output projection float32; int8-all,
#     like CTranslate2's int8, quantizes the output projection too);
#   - the length: every hypothesis up to MAXLEN tokens (the language token
#     included; transformerd --max-length MAXLEN, CTranslate2
#     max_decoding_length MAXLEN: both give the same count). A random model
#     rarely emits </s>, so nearly every sentence runs to MAXLEN: a speed
#     test, not a translation.
# Throughput: generated tokens (the language token included, </s> not) per
# second of translate time, model loading excluded (bench_engine and the
# CTranslate2 script time only the translate calls). ROUNDS rounds, each
# engine once per case per round, in turn; best and median.
# Agreement: each engine's ids of the first round, transformerd float32
# against CTranslate2 float32 and int8 against int8, per case: with random
# weights the identical lines are the check that both computed the same
# model (int8: both quantize, but not the same way, so fewer agree).
# Peak RSS (bench/peers/maxrss.py, model loading included): `transformerd
# translate --source en --target de` on the text lines (beam 4, batch 32,
# 2 threads, --no-split) against the CTranslate2 script on the same ids; the
# translate command's text is also compared with CTranslate2's ids decoded
# by transformers' tokenizer (tokenizer and engine together).
# The table goes to stdout and $OUT/table.md.
#
#   bench/m2m/run.sh      ROUNDS (3), LINES (200), LINES1 (32), MAXLEN (64),
#                         INIT_STD (0.1), OUT (/tmp/transformerd-m2m)
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
ROUNDS=${ROUNDS:-3}
LINES=${LINES:-200}
LINES1=${LINES1:-32}
MAXLEN=${MAXLEN:-64}
INIT_STD=${INIT_STD:-0.1}
OUT=${OUT:-/tmp/transformerd-m2m}
PY=${PY:-$ROOT/tools/.venv/bin/python}
# a worktree without its own tools/.venv: the main checkout's
[ -x "$PY" ] || PY=$(git rev-parse --path-format=absolute --git-common-dir)/../tools/.venv/bin/python
# CTranslate2's libgomp: a short spin, as bench/peers/run.sh measures it
[ -n "${OMP_WAIT_POLICY:-}" ] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000}
BUILD=${BUILD:-$ROOT/build}
BE=$BUILD/bench/engine/bench_engine
TD=$BUILD/transformerd
[ -x "$BE" ] && [ -x "$TD" ] || {
    echo "build first: cmake --build $BUILD --target transformerd bench_engine" >&2; exit 2; }
[ -x "$PY" ] || { echo "no $PY: tools/setup_venv.sh" >&2; exit 2; }
mkdir -p "$OUT"
M=$OUT/model
[ -f "$M/meta.json" ] || "$PY" bench/m2m/make_model.py "$M" --lines "$LINES" --init-std "$INIT_STD" \
    2>&1 | grep -v -e Warning -e 'it/s' >&2
TGT_ID=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['target_id'])" "$M/meta.json")
head -n "$LINES" "$M/src.ids" > "$OUT/src.ids"
head -n "$LINES1" "$M/src.ids" > "$OUT/src1.ids"

RES=$OUT/results.jsonl
: > "$RES"
mkdir -p "$OUT/ids"
# ids batch beam
CASES="src.ids 32 4
src.ids 32 1
src1.ids 1 4
src1.ids 1 1"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo "$CASES" | while read -r ids batch beam; do
        for th in 2 1; do
            for eng in td:float32 ct2:float32 td:int8 td:int8-all ct2:int8; do
                e=${eng%%:*}; dt=${eng#*:}
                o=/dev/null
                [ "$r" = 1 ] && o=$OUT/ids/$e.$dt.b$batch.k$beam.t$th
                if [ "$e" = td ]; then
                    line=$("$BE" --model "$M/hf" --ids "$OUT/$ids" --batch "$batch" --beam "$beam" \
                           --threads "$th" --repeat 1 --dtype "$dt" --max-length "$MAXLEN" \
                           --prefix "$TGT_ID" --out "$o")
                else
                    line=$("$PY" bench/m2m/peer_ct2_m2m.py --model "$M/ct2-$dt" --ids "$OUT/$ids" \
                           --prefix __de__ --batch "$batch" --beam "$beam" --threads "$th" \
                           --compute-type "$dt" --max-length "$MAXLEN" --out "$o")
                fi
                echo "{\"round\": $r, \"engine\": \"$e\", \"dt\": \"$dt\", \"threads\": $th, \"run\": $line}" >> "$RES"
            done
        done
    done
    echo "round $r done" >&2
    r=$((r + 1))
done

# peak RSS: the translate command on text, the CTranslate2 script on ids
RSS=$OUT/rss.tsv
: > "$RSS"
for dt in float32 int8 int8-all; do
    "$PY" bench/peers/maxrss.py "$RSS" "td.$dt" "$TD" translate --model "$M/hf" --source en \
        --target de --beam 4 --batch 32 --threads 2 --dtype "$dt" --no-split \
        --max-length "$MAXLEN" < "$M/src.en" > "$OUT/td.$dt.de"
    [ "$dt" != int8-all ] || continue
    "$PY" bench/peers/maxrss.py "$RSS" "ct2.$dt" "$PY" bench/m2m/peer_ct2_m2m.py \
        --model "$M/ct2-$dt" --ids "$OUT/src.ids" --prefix __de__ --batch 32 --beam 4 --threads 2 \
        --compute-type "$dt" --max-length "$MAXLEN" --out "$OUT/ct2.$dt.rss.ids" >/dev/null
done

# the CTranslate2 process's floor: Python with ctranslate2 imported, no model
"$PY" bench/peers/maxrss.py "$RSS" "ct2.import" "$PY" -c "import ctranslate2, json, time"

"$PY" - "$OUT" "$ROUNDS" "$LINES" "$LINES1" "$MAXLEN" > "$OUT/table.md" <<'PY'
import json, statistics, sys
from transformers import M2M100Tokenizer
out, rounds, lines, lines1, maxlen = sys.argv[1:]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl")]
acc = {}
for r in rows:
    k = (r["run"]["batch"], r["run"]["beam"], r["threads"], r["engine"], r["dt"])
    acc.setdefault(k, []).append(r["run"]["tokens_per_s"])
cell = lambda v: f"{max(v):.0f} / {statistics.median(v):.0f}" if v else "-"
ratio = lambda a, c: (f"{max(a) / max(c):.2f}x / {statistics.median(a) / statistics.median(c):.2f}x"
                      if a and c else "-")
def same(a, b):
    try:
        x, y = open(a).read().splitlines(), open(b).read().splitlines()
    except OSError:
        return "-"
    return f"{sum(p == q for p, q in zip(x, y))}/{len(x)}"
print(f"\n{rounds} interleaved rounds; en->de, {lines} lines at batch 32, the first {lines1} at "
      f"batch 1, up to {maxlen} tokens each; tokens/s best / median\n")
print("| batch | beam | threads | td f32 | CT2 f32 | td int8 | td int8-all | CT2 int8 | td/CT2 f32 "
      "| td int8/CT2 int8 | td int8-all/CT2 int8 | identical f32 | identical int8 | identical int8-all |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (b, bm, th) in sorted({k[:3] for k in acc}, key=lambda k: (-k[0], -k[1], -k[2])):
    g = lambda e, d: acc.get((b, bm, th, e, d))
    tf, cf, ti, ci = g("td", "float32"), g("ct2", "float32"), g("td", "int8"), g("ct2", "int8")
    ta = g("td", "int8-all")
    ids = lambda e, d: f"{out}/ids/{e}.{d}.b{b}.k{bm}.t{th}"
    print(f"| {b} | {bm} | {th} | {cell(tf)} | {cell(cf)} | {cell(ti)} | {cell(ta)} | {cell(ci)} | "
          f"{ratio(tf, cf)} | {ratio(ti, ci)} | {ratio(ta, ci)} | "
          f"{same(ids('td', 'float32'), ids('ct2', 'float32'))} | "
          f"{same(ids('td', 'int8'), ids('ct2', 'int8'))} | {same(ids('td', 'int8-all'), ids('ct2', 'int8'))} |")
tok = M2M100Tokenizer.from_pretrained(f"{out}/model/hf")
rss = dict(l.rstrip("\n").split("\t") for l in open(f"{out}/rss.tsv"))
print(f"\nPeak RSS (MiB, model loading included), beam 4, batch 32, 2 threads, {lines} lines; "
      "transformerd: `translate --source en --target de` on the text; its text against "
      "CTranslate2's ids decoded by transformers' tokenizer\n")
print("| dtype | transformerd | CTranslate2 | td text = CT2 decoded |\n|---|---|---|---|")
for dt in ("float32", "int8", "int8-all"):
    cdt = "int8" if dt == "int8-all" else dt
    td = open(f"{out}/td.{dt}.de").read().splitlines()
    ct = [tok.decode([int(t) for t in l.split()], skip_special_tokens=True)
          for l in open(f"{out}/ct2.{cdt}.rss.ids").read().splitlines()]
    print(f"| {dt} | {rss.get('td.' + dt, '-')} | {rss.get('ct2.' + cdt, '-')} | "
          f"{sum(a == b for a, b in zip(td, ct))}/{len(td)} |")
print(f"\nCTranslate2's floor: Python with ctranslate2 imported and no model, {rss.get('ct2.import', '-')} MiB")
PY
cat "$OUT/table.md"
