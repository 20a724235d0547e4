#!/bin/sh
# CPU throughput against CTranslate2 (pinned 4.8.5 from PyPI, in bench/.venv)
# and transformers (float32, PyTorch, tools/.venv: bench/peers/peer_hf.py),
# transformerd float32, int8, int8-all (the output projection int8 too) and,
# on a CPU with AVX512-BF16 or AMX-BF16, bfloat16, side by side in interleaved rounds:
#   - the bundled model (models/en-de, 6+2 layers, d_model 256, vocab 8000):
#     the first LINES held-out test sentences (tokenized by transformerd),
#     beam 4 batch 32 and greedy batch 1 (the first LINES1 of them), up to
#     the model's max_length; plus each engine's beam-4 text of the same
#     lines (transformerd with --no-split, as the others get whole lines):
#     identical lines against transformerd float32, BLEU and chrF against
#     the reference translations (sacrebleu), peak RSS of the process
#     (bench/peers/maxrss.py; model loading included);
#   - the transformer-base shape (bench_engine --make-model: 6+6 layers,
#     d_model 512, vocab 32000, random weights that never emit </s>): 32
#     sources of 24 ids (bench_engine's), 31 generated tokens each (ours: 32
#     steps, the last a forced </s>, not counted), beam 4 batch 32 and greedy
#     batch 1 (the first 8 sources).
# Throughput: generated tokens (without </s>) per second of translate time
# (model loading excluded for every engine). ROUNDS rounds, each engine once
# per configuration per round, in turn; the table gives the best and the
# median (the machines are shared: the best is the least disturbed run).
# CTranslate2 gets the model through bench/peers/convert_ct2.py, which keeps
# the learned <pad> start embedding (see there). In every configuration
# CTranslate2 also runs at intra_threads=1 ("CT2 1t" columns: its best
# setting for one sentence on few cores, and on a VM whose idle vCPUs wake
# slowly often for batch 32 too), and so does transformerd ("td 1t": one
# thread per sentence is what the daemon's default split gives a request
# on 2+ cores, two workers of half the cores each); the "best td / best CT2"
# columns take each engine's faster thread setting.
# BEFORE=DIR adds another checkout's build (DIR/build, e.g. a worktree of
# main) as "td before", interleaved with the others in every round.
# The table goes to stdout and $OUT/table.md; $OUT/peers.png plots the best
# tokens/s per engine and case (bench/peers/plot.py), with the runs named in
# PLOT_WITH ("label=results.jsonl ...", e.g. an idle run beside a busy one).
#
#   bench/peers/run.sh                 THREADS (nproc), ROUNDS (3), LINES (320),
#                                      LINES1 (64), BUSY=1 (a CPU-burning
#                                      neighbour runs throughout), OUT dir,
#                                      BEFORE dir, PLOT_WITH
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
THREADS=${THREADS:-$(nproc)}
ROUNDS=${ROUNDS:-3}
LINES=${LINES:-320}
LINES1=${LINES1:-64}
OUT=${OUT:-/tmp/transformerd-peers}
BASE=${BENCH_MODEL_DIR:-/tmp/transformerd-bench-base}
# CTranslate2's libgomp: a short spin, as it was measured before (the
# transformerd backend has its own threads and does not read it).
[ -n "${OMP_WAIT_POLICY:-}" ] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000}
BEFORE=${BEFORE:-}
[ -z "$BEFORE" ] || [ -x "$BEFORE/build/bench/engine/bench_engine" ] || {
    echo "BEFORE=$BEFORE: no build/bench/engine/bench_engine there" >&2; exit 2; }
mkdir -p "$OUT"
make build >/dev/null
BE=$ROOT/build/bench/engine/bench_engine
TD=$ROOT/build/transformerd
VENV=$ROOT/bench/.venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -r bench/peers/requirements.txt
PY=$VENV/bin/python
tools/setup_venv.sh
HFPY=$ROOT/tools/.venv/bin/python

[ -f "$BASE/model.safetensors" ] || "$BE" --make-model "$BASE" >/dev/null
# transformerd bfloat16 where the CPU has AVX512-BF16 or AMX-BF16 (elsewhere the CPU
# backend refuses --dtype bfloat16)
BF16=
echo Hello | "$TD" translate --model models/en-de --dtype bfloat16 >/dev/null 2>&1 && BF16=td:bfloat16
for m in ende:models/en-de base:$BASE; do
    name=${m%%:*}; dir=${m#*:}
    [ -f "$OUT/ct2-$name/model.bin" ] || "$PY" bench/peers/convert_ct2.py "$dir" "$OUT/ct2-$name"
done
# sources as ids: the test sentences; the base model's are bench_engine's
head -n "$LINES" tests/data/en_de_test/test.en > "$OUT/ende.en"
"$TD" tokenize --model models/en-de < "$OUT/ende.en" > "$OUT/ende.ids"
head -n "$LINES1" "$OUT/ende.ids" > "$OUT/ende1.ids"
"$PY" - "$OUT" <<'PY'
import sys
out = sys.argv[1]
with open(f"{out}/base.ids", "w") as f:
    for i in range(32):
        f.write(" ".join(str(1 + (i * 7919 + j * 104729) % 31998) for j in range(23)) + " 0\n")
with open(f"{out}/base1.ids", "w") as f:
    f.write("".join(open(f"{out}/base.ids").readlines()[:8]))
PY

BUSY_PID=
cleanup() { [ -z "$BUSY_PID" ] || kill "$BUSY_PID" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
if [ "${BUSY:-0}" = 1 ]; then
    sh -c 'while :; do :; done' &
    BUSY_PID=$!
    echo "busy neighbour: pid $BUSY_PID burns one core throughout"
fi

RES=$OUT/results.jsonl
: > "$RES"
# model ids batch beam td-max-length ct2-max-length ct2-min-length
CONFIGS="ende ende.ids 32 4 0 255 0
ende ende1.ids 1 1 0 255 0
base base.ids 32 4 32 31 31
base base1.ids 1 1 32 31 31"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo "$CONFIGS" | while read -r model ids batch beam tdlen ctlen ctmin; do
        dir=models/en-de; [ "$model" = base ] && dir=$BASE
        ml=; [ "$tdlen" -gt 0 ] && ml="--max-length $tdlen"
        engines="td:float32 ct2:float32 td:int8 td:int8-all ct2:int8 hf:float32 $BF16"
        [ -z "$BEFORE" ] || engines="$engines tdb:float32 tdb:int8"
        [ "$THREADS" = 1 ] || engines="$engines ct21:float32 ct21:int8 td1:float32 td1:int8 td1:int8-all"
        for eng in $engines; do
            e=${eng%%:*}; dt=${eng#*:}
            if [ "$e" = td ] || [ "$e" = tdb ] || [ "$e" = td1 ]; then
                be=$BE; [ "$e" = tdb ] && be=$BEFORE/build/bench/engine/bench_engine
                th=$THREADS; [ "$e" = td1 ] && th=1
                # shellcheck disable=SC2086
                line=$("$be" --model "$dir" --ids "$OUT/$ids" --batch "$batch" --beam "$beam" \
                       --threads "$th" --repeat 1 --dtype "$dt" $ml)
            elif [ "$e" = hf ]; then
                # max_new_tokens counts the </s> that forced_eos puts last
                line=$("$HFPY" bench/peers/peer_hf.py --model "$dir" --ids "$OUT/$ids" \
                       --batch "$batch" --beam "$beam" --threads "$THREADS" \
                       --max-length $((ctlen + 1)) --min-length "$ctmin" 2>/dev/null)
            else
                th=$THREADS; [ "$e" = ct21 ] && th=1
                line=$("$PY" bench/peers/peer_ct2.py --model "$OUT/ct2-$model" --ids "$OUT/$ids" \
                       --batch "$batch" --beam "$beam" --threads "$th" --compute-type "$dt" \
                       --max-length "$ctlen" --min-length "$ctmin")
            fi
            echo "{\"round\": $r, \"model\": \"$model\", \"engine\": \"$e\", \"dt\": \"$dt\", \"run\": $line}" >> "$RES"
        done
    done
    echo "round $r done" >&2
    r=$((r + 1))
done

# text out on the bundled model, beam 4, batch 32: identical lines, BLEU,
# chrF, peak RSS
RSS=$OUT/rss.tsv
: > "$RSS"
head -n "$LINES" tests/data/en_de_test/test.de > "$OUT/ende.ref.de"
for dt in float32 int8 int8-all ${BF16#td:}; do
    "$PY" bench/peers/maxrss.py "$RSS" "td.$dt" "$TD" translate --model models/en-de --beam 4 \
        --batch 32 --threads "$THREADS" --dtype "$dt" --no-split < "$OUT/ende.en" > "$OUT/td.$dt.de"
done
for dt in float32 int8; do
    "$PY" bench/peers/maxrss.py "$RSS" "ct2.$dt" "$PY" bench/peers/peer_ct2.py \
        --model "$OUT/ct2-ende" --ids "$OUT/ende.ids" --batch 32 --beam 4 \
        --threads "$THREADS" --compute-type "$dt" --out "$OUT/ct2.$dt.de" >/dev/null
done
"$PY" bench/peers/maxrss.py "$RSS" "hf.float32" "$HFPY" bench/peers/peer_hf.py \
    --model models/en-de --ids "$OUT/ende.ids" --batch 32 --beam 4 --threads "$THREADS" \
    --max-length 256 --out "$OUT/hf.float32.de" >/dev/null 2>&1

"$PY" - "$OUT" "$ROUNDS" "$THREADS" "${BUSY:-0}" > "$OUT/table.md" <<'PY'
import json, statistics, sys
out, rounds, threads, busy = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl")]
acc = {}
for r in rows:
    k = (r["model"], r["run"]["batch"], r["run"]["beam"], r["engine"], r["dt"])
    acc.setdefault(k, []).append(r["run"]["tokens_per_s"])
before = any(k[3] == "tdb" for k in acc)
bf16 = any(k[3] == "td" and k[4] == "bfloat16" for k in acc)
one = any(k[3] == "ct21" for k in acc)
print(f"\n{rounds} interleaved rounds, {threads} threads{', busy neighbour' if busy == '1' else ''}; "
      "tokens/s best / median")
cols = ["transformerd f32", "CT2 f32", "transformerd int8", "td int8-all", "CT2 int8", "transformers f32"]
cols += ["td before f32", "td before int8"] if before else []
cols += ["td bf16"] if bf16 else []
cols += ["CT2 1t f32", "CT2 1t int8", "td 1t f32", "td 1t int8", "td 1t int8-all"] if one else []
cols += ["td f32 / CT2 f32", "td int8 / CT2 int8", "td int8-all / CT2 int8", "td f32 / CT2 int8",
         "td f32 / transformers"]
cols += ["td f32 / before", "td int8 / before"] if before else []
cols += ["td bf16 / CT2 f32", "td bf16 / best CT2 int8"] if bf16 else []
cols += ["td f32 / CT2 1t f32", "td int8 / CT2 1t int8", "td 1t f32 / CT2 1t f32", "td 1t int8 / CT2 1t int8",
         "td 1t int8-all / CT2 1t int8", "best td / best CT2 f32", "best td / best CT2 int8",
         "best td int8-all / best CT2 int8"] if one else []
print("\n| model | batch | beam | " + " | ".join(cols) + " |")
print("|---|---|---|" + "---|" * len(cols))
for (model, b, bm) in sorted({k[:3] for k in acc}, key=lambda k: (k[0] != "ende", -k[1])):
    get = lambda e, d: acc.get((model, b, bm, e, d))
    cell = lambda v: f"{max(v):.1f} / {statistics.median(v):.1f}" if v else "-"
    ratio = lambda a, c: (f"{max(a) / max(c):.2f}x / {statistics.median(a) / statistics.median(c):.2f}x"
                          if a and c else "-")
    tf, cf, ti, ci = get("td", "float32"), get("ct2", "float32"), get("td", "int8"), get("ct2", "int8")
    ta = get("td", "int8-all")
    hf = get("hf", "float32")
    cells = [cell(tf), cell(cf), cell(ti), cell(ta), cell(ci), cell(hf)]
    if before:
        cells += [cell(get("tdb", "float32")), cell(get("tdb", "int8"))]
    if bf16:
        cells += [cell(get("td", "bfloat16"))]
    if one:
        cells += [cell(get("ct21", "float32")), cell(get("ct21", "int8")),
                  cell(get("td1", "float32")), cell(get("td1", "int8")), cell(get("td1", "int8-all"))]
    cells += [ratio(tf, cf), ratio(ti, ci), ratio(ta, ci), ratio(tf, ci), ratio(tf, hf)]
    if before:
        cells += [ratio(tf, get("tdb", "float32")), ratio(ti, get("tdb", "int8"))]
    if bf16:
        bestci = [max((ci or [0]) + (get("ct21", "int8") or [0]))]
        cells += [ratio(get("td", "bfloat16"), cf), ratio([max(get("td", "bfloat16"))], bestci)]
    if one:
        cells += [ratio(tf, get("ct21", "float32")), ratio(ti, get("ct21", "int8")),
                  ratio(get("td1", "float32"), get("ct21", "float32")), ratio(get("td1", "int8"), get("ct21", "int8")),
                  ratio(get("td1", "int8-all"), get("ct21", "int8"))]
        # each engine at its better thread count (best of either setting against best of either)
        both = lambda a, c: [max((a or [0]) + (c or [0]))] if (a or c) else None
        cells += [ratio(both(tf, get("td1", "float32")), both(cf, get("ct21", "float32"))),
                  ratio(both(ti, get("td1", "int8")), both(ci, get("ct21", "int8"))),
                  ratio(both(ta, get("td1", "int8-all")), both(ci, get("ct21", "int8")))]
    name = "bundled en-de" if model == "ende" else "transformer-base shape"
    print(f"| {name} | {b} | {bm} | " + " | ".join(cells) + " |")
import sacrebleu
ref = open(f"{out}/td.float32.de").read().splitlines()
gold = open(f"{out}/ende.ref.de").read().splitlines()
rss = dict(l.rstrip("\n").split("\t") for l in open(f"{out}/rss.tsv"))
print(f"\nText out, bundled model, beam 4, batch 32, {len(ref)} held-out lines: identical to "
      "transformerd float32, BLEU / chrF against the references, peak RSS (MiB)\n")
print("| engine | identical | BLEU | chrF | peak RSS MiB |\n|---|---|---|---|---|")
names = ["td.float32", "td.int8", "td.int8-all"] + (["td.bfloat16"] if bf16 else [])
for name in names + ["ct2.float32", "ct2.int8", "hf.float32"]:
    got = open(f"{out}/{name}.de").read().splitlines()
    bleu = sacrebleu.corpus_bleu(got, [gold]).score
    chrf = sacrebleu.corpus_chrf(got, [gold]).score
    print(f"| {name} | {sum(a == b for a, b in zip(ref, got))}/{len(ref)} | {bleu:.2f} | {chrf:.2f} | "
          f"{rss.get(name, '-')} |")
PY
cat "$OUT/table.md"
label=idle; [ "${BUSY:-0}" = 1 ] && label="busy neighbour"
# shellcheck disable=SC2086
"$PY" bench/peers/plot.py --out "$OUT/peers.png" ${PLOT_WITH:-} "$label=$RES"
echo "plot: $OUT/peers.png"
