#!/bin/sh
# Engine throughput against transformers' generate, side by side in one run,
# on a transformer-base-shaped random model (6+6 layers, d_model 512, 8 heads,
# ffn 2048, vocab 32000), greedy and beam 4 at batch 1 and 32, float32 CPU,
# threads = cores. Prints both JSON lines and a ratio table.
#
#   bench/engine/run.sh            (THREADS=N to override, REPEAT=N)
set -eu
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-$(nproc)}
# the same OpenMP wait as the transformerd command sets for itself (server/main.c)
[ -n "${OMP_WAIT_POLICY:-}" ] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000}
REPEAT=${REPEAT:-3}
DIR=${BENCH_MODEL_DIR:-/tmp/transformerd-bench-base}
OUT=${BENCH_OUT:-/tmp/transformerd-bench}
mkdir -p "$OUT"
make build >/dev/null
[ -f "$DIR/model.safetensors" ] || ./build/bench/engine/bench_engine --make-model "$DIR"
./build/bench/engine/bench_engine --model "$DIR" --threads "$THREADS" --repeat "$REPEAT" | tee "$OUT/transformerd.jsonl"
tools/setup_venv.sh >/dev/null
tools/.venv/bin/python bench/engine/peer_transformers.py --model "$DIR" --threads "$THREADS" \
    --repeat "$REPEAT" | tee "$OUT/transformers.jsonl"
python3 - "$OUT/transformerd.jsonl" "$OUT/transformers.jsonl" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
peer = {(r["batch"], r["beam"]): r for r in map(json.loads, open(sys.argv[2]))}
print("\n| batch | beam | transformerd tok/s | transformers tok/s | ratio |")
print("|---|---|---|---|---|")
for r in ours:
    p = peer.get((r["batch"], r["beam"]))
    if p:
        print(f"| {r['batch']} | {r['beam']} | {r['tokens_per_s']} | {p['tokens_per_s']} | "
              f"{r['tokens_per_s'] / p['tokens_per_s']:.2f}x |")
PY
