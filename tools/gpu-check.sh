#!/bin/sh
# gpu-check.sh OUTDIR - everything a machine with an NVIDIA GPU checks, in one
# run of under 8 minutes; logs and a Markdown summary go into OUTDIR.
#
#   1. configure + build with TD_CUDA=ON (Release, all cores)
#   2. the GPU tests: ctest -L gpu (tests/gpu: every op against the CPU op,
#      every fixture model against the transformers goldens on the GPU)
#   3. benchmarks, greedy and beam 4 at batch 1 and 32: the bundled model
#      (models/en-de, when present) and a transformer-base-shaped random
#      model (6+6 layers, d_model 512, vocab 32000): transformerd on the GPU
#      with the checkpoint's float32 weights and with F16 weights
#      (TRANSFORMERD_DTYPE=f16), against transformers' generate in fp16 on
#      the same GPU (PyTorch + transformers from $PYTHON, default python3).
#
# Environment: PYTHON, BUILD (build dir, default build-gpu-check), DEVICE
# (default cuda), REPEAT (default 3), MODEL (default models/en-de),
# BENCH_MODEL_DIR (random model, default /tmp/transformerd-bench-base).
# Exit status: 0 when the build and the GPU tests passed (benchmark failures
# are reported in the summary, not in the status).
set -u
if [ $# -ne 1 ]; then
    echo "usage: tools/gpu-check.sh OUTDIR" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
OUT=$1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${BUILD:-build-gpu-check}
DEVICE=${DEVICE:-cuda}
REPEAT=${REPEAT:-3}
PYTHON=${PYTHON:-python3}
MODEL=${MODEL:-models/en-de}
RND=${BENCH_MODEL_DIR:-/tmp/transformerd-bench-base}
JOBS=$(nproc 2>/dev/null || echo 4)
SUM="$OUT/summary.md"
T0=$(date +%s)
status=0

elapsed() { echo $(( $(date +%s) - T0 )); }
note() { echo "$*" | tee -a "$SUM"; }

: >"$SUM"
note "# transformerd GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
note ""
{
    echo '```'
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -5
    nvcc --version 2>&1 | tail -2
    echo '```'
} | tee -a "$SUM"

# 1. build ------------------------------------------------------------------
note ""
note "## Build (TD_CUDA=ON)"
if timeout 300 cmake -S . -B "$BUILD" -DTD_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        >"$OUT/configure.log" 2>&1 &&
   timeout 300 cmake --build "$BUILD" -j "$JOBS" >"$OUT/build.log" 2>&1; then
    note "ok in $(elapsed) s; warnings: $(grep -ci 'warning' "$OUT/build.log")"
else
    note "FAILED (see configure.log / build.log)"
    tail -30 "$OUT/build.log" 2>/dev/null
    exit 1
fi

# 2. GPU tests --------------------------------------------------------------
note ""
note "## GPU tests (ctest -L gpu)"
(cd "$BUILD" && timeout 240 ctest -L gpu --output-on-failure) >"$OUT/tests.log" 2>&1
rc=$?
grep -E "tests passed|Skipped|Failed|token-exact|Passed" "$OUT/tests.log" | sed 's/^/    /' |
    tee -a "$SUM"
if [ $rc -ne 0 ]; then
    note "FAILED (see tests.log)"
    status=1
elif grep -q "Skipped" "$OUT/tests.log"; then
    note "SKIPPED: no usable CUDA device (this is a failure for a GPU check)"
    status=1
else
    note "passed"
fi

# 3. benchmarks -------------------------------------------------------------
BENCH="$BUILD/bench/engine/bench_engine"
PEER_OK=0
if "$PYTHON" -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >"$OUT/peer_check.log" 2>&1; then
    PEER_OK=1
else
    note ""
    note "transformers peer unavailable ($PYTHON: torch/transformers/CUDA missing, see peer_check.log)"
fi

# bench NAME DIR: engine F32 weights, engine F16 weights, transformers fp16.
bench() {
    name=$1
    dir=$2
    note ""
    note "## Benchmark: $name ($dir; src_len 24, max_length 32, best of $REPEAT)"
    timeout 150 "$BENCH" --model "$dir" --device "$DEVICE" --repeat "$REPEAT" \
        >"$OUT/$name.engine_f32.jsonl" 2>"$OUT/$name.engine_f32.log" ||
        note "engine (f32 weights) failed: $(tail -1 "$OUT/$name.engine_f32.log")"
    TRANSFORMERD_DTYPE=f16 timeout 150 "$BENCH" --model "$dir" --device "$DEVICE" \
        --repeat "$REPEAT" >"$OUT/$name.engine_f16.jsonl" 2>"$OUT/$name.engine_f16.log" ||
        note "engine (f16 weights) failed: $(tail -1 "$OUT/$name.engine_f16.log")"
    : >"$OUT/$name.transformers_fp16.jsonl"
    if [ "$PEER_OK" = 1 ]; then
        timeout 200 "$PYTHON" bench/engine/peer_transformers.py --model "$dir" --device "$DEVICE" \
            --dtype float16 --repeat "$REPEAT" >"$OUT/$name.transformers_fp16.jsonl" \
            2>"$OUT/$name.transformers_fp16.log" ||
            note "transformers fp16 failed: $(tail -1 "$OUT/$name.transformers_fp16.log")"
    fi
    "$PYTHON" - "$OUT/$name.engine_f32.jsonl" "$OUT/$name.engine_f16.jsonl" \
        "$OUT/$name.transformers_fp16.jsonl" <<'PY' | tee -a "$SUM"
import json, sys
def load(p):
    try:
        return {(r["batch"], r["beam"]): r for r in (json.loads(l) for l in open(p) if l.strip())}
    except (OSError, ValueError):
        return {}
f32, f16, peer = (load(p) for p in sys.argv[1:4])
print("| batch | beam | transformerd F32 tok/s | transformerd F16 tok/s | transformers fp16 tok/s | F16 / transformers |")
print("|---|---|---|---|---|---|")
for key in sorted(set(f32) | set(f16) | set(peer)):
    a, b, p = (d.get(key, {}).get("tokens_per_s") for d in (f32, f16, peer))
    ratio = f"{b / p:.2f}x" if a is not None and b and p else "-"
    print(f"| {key[0]} | {key[1]} | {a or '-'} | {b or '-'} | {p or '-'} | {ratio} |")
PY
}

if [ -f "$MODEL/model.safetensors" ]; then
    bench bundled "$MODEL"
else
    note ""
    note "bundled model: $MODEL/model.safetensors not present, skipped"
fi
if [ ! -f "$RND/model.safetensors" ]; then
    timeout 120 "$BENCH" --make-model "$RND" >"$OUT/make_model.log" 2>&1 ||
        note "making the random model failed (make_model.log)"
fi
[ -f "$RND/model.safetensors" ] && bench transformer_base "$RND"

note ""
note "total $(elapsed) s; status $status"
exit $status
