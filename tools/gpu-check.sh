#!/bin/sh
# gpu-check.sh OUTDIR - everything a machine with an NVIDIA GPU checks, in one
# run (87 s on an H200 with a prebuilt tree before steps 2's second run and
# 3b were added, which add a few minutes; SANITIZE=1 up to 13 more); logs and
# a Markdown summary go into OUTDIR.
#
#   1. configure + build with TD_CUDA=ON (Release, all cores)
#   2. the GPU tests: ctest -L gpu (tests/gpu: every op against the CPU op,
#      both attention kernels among them; every fixture model against the
#      transformers goldens on the GPU, each decoder step a CUDA graph), then
#      the goldens once more with the row attention kernel
#      (TD_GPU_ATTN=naive) and once with the steps launched op by op
#      (TD_GPU_GRAPHS=0); test_bind on cuda (one worker bound in turn to
#      several models, as the daemon's shared workers are)
#   3. benchmarks, greedy and beam 4 at batch 1 and 32: the bundled model
#      (models/en-de, when present) and a transformer-base-shaped random
#      model (6+6 layers, d_model 512, vocab 32000): transformerd on the GPU
#      with float32 weights and with float16 weights (--dtype float16) in
#      both GEMM precisions (--precision full | half), against transformers'
#      generate in fp16 on the same GPU (PyTorch + transformers from
#      $PYTHON, default python3).
#
#   3b. where a step's time goes: TD_GPU_PROFILE=1 on the random model, one
#      process per configuration (batch 1 and 32, greedy and beam 4), the
#      per-op table of each in the summary; and the two attention kernels
#      side by side (TD_GPU_ATTN=flash | naive, F32)
#   4. end to end: the bundled model's 2000 test lines through `transformerd
#      translate --device cuda` (both precisions) against transformers' text,
#      and `transformerd serve --device cuda` answering one request, then
#      under load (bench/load/run.sh, concurrency 1, 8, 64)
#   5. with SANITIZE=1: test_gpu_ops and test_gpu_attention once more under
#      compute-sanitizer (memcheck), and the attention and logprobs tests under
#      racecheck (shared-memory hazards of the tiled kernels), when it is
#      installed.
#
# Environment: PYTHON, BUILD (build dir, default build-gpu-check), DEVICE
# (default cuda), REPEAT (default 3), MODEL (default models/en-de),
# BENCH_MODEL_DIR (random model, default /tmp/transformerd-bench-base),
# PREBUILT=1 (BUILD already holds a TD_CUDA=ON build made elsewhere: skip
# step 1), BENCH=0 (skip steps 3 and 3b: a short check of the tests and the
# daemon, when device time is scarce), SANITIZE=1; step 4's load bench:
# LOAD_BATCHES (the daemons' --max-batch-size, one run each, default "32";
# e.g. "32 128": does a larger running decode, nearly free on a GPU, keep
# the short texts out of the queue?), LOAD_LINES (512), LOAD_ROUNDS (1).
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
BENCH=${BENCH:-1}
PYTHON=${PYTHON:-python3}
MODEL=${MODEL:-models/en-de}
LOAD_BATCHES=${LOAD_BATCHES:-32}
LOAD_LINES=${LOAD_LINES:-512}
LOAD_ROUNDS=${LOAD_ROUNDS:-1}
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
if [ "${PREBUILT:-0}" = 1 ]; then
    note "prebuilt: $BUILD ($(grep -s CMAKE_CUDA_ARCHITECTURES: "$BUILD/CMakeCache.txt"))"
    if [ ! -x "$BUILD/tests/gpu/test_gpu_ops" ]; then
        note "FAILED: $BUILD/tests/gpu/test_gpu_ops missing"
        exit 1
    fi
elif timeout 300 cmake -S . -B "$BUILD" -DTD_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        >"$OUT/configure.log" 2>&1 &&
   timeout 300 cmake --build "$BUILD" -j "$JOBS" >"$OUT/build.log" 2>&1; then
    note "ok in $(elapsed) s; warnings: $(grep -ci 'warning' "$OUT/build.log")"
else
    note "FAILED (see configure.log / build.log)"
    tail -30 "$OUT/build.log" 2>/dev/null
    exit 1
fi

# 2. GPU tests --------------------------------------------------------------
# gpu_tests TITLE LOG [VAR=VALUE] CTEST-ARGS...: ctest in $BUILD, its result
# lines and verdict in the summary; a skip (no device) is a failure here.
gpu_tests() {
    title=$1
    log=$2
    shift 2
    note ""
    note "## $title"
    (cd "$BUILD" && env "$@") >"$OUT/$log" 2>&1
    rc=$?
    grep -E "tests passed|Skipped|Failed|token-exact|Passed" "$OUT/$log" | sed 's/^/    /' |
        tee -a "$SUM"
    if [ $rc -ne 0 ]; then
        note "FAILED (see $log)"
        status=1
    elif grep -q "Skipped" "$OUT/$log"; then
        note "SKIPPED: no usable CUDA device (this is a failure for a GPU check)"
        status=1
    else
        note "passed"
    fi
}
gpu_tests "GPU tests (ctest -L gpu)" tests.log timeout 300 ctest -L gpu -V
# the fixtures through the row attention kernel too (test_gpu_attention runs
# both kernels itself)
gpu_tests "GPU goldens with TD_GPU_ATTN=naive" tests_naive.log TD_GPU_ATTN=naive \
    timeout 180 ctest -R '^test_gpu_golden$' -V
# the decoder steps launched op by op: the run above captured each step as a
# CUDA graph (TD_GPU_GRAPHS, default on; gpu/gpu_graph.cu), this one does
# not; both token-exact
gpu_tests "GPU goldens with TD_GPU_GRAPHS=0" tests_nographs.log TD_GPU_GRAPHS=0 \
    timeout 180 ctest -R '^test_gpu_golden$' -V
# one worker bound in turn to models of the same and of other shapes (the
# daemon's shared workers, td_worker_bind), each answer its own worker's
gpu_tests "One worker for several models (test_bind on cuda)" tests_bind.log \
    TD_TEST_DEVICE=cuda CK_FORK=no timeout 180 ./tests/test_bind

# 3. benchmarks -------------------------------------------------------------
BENCH_BIN="$BUILD/bench/engine/bench_engine"
PEER_OK=0
if "$PYTHON" -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >"$OUT/peer_check.log" 2>&1; then
    PEER_OK=1
else
    note ""
    note "transformers peer unavailable ($PYTHON: torch/transformers/CUDA missing, see peer_check.log)"
fi

# bench NAME DIR: the engine with float32 weights, with float16 weights in
# both GEMM precisions (full: the default; half), and transformers fp16.
bench() {
    name=$1
    dir=$2
    note ""
    note "## Benchmark: $name ($dir; src_len 24, max_length 32, best of $REPEAT)"
    for v in f32:float32:full f16:float16:full f16half:float16:half; do
        tag=${v%%:*}
        rest=${v#*:}
        timeout 150 "$BENCH_BIN" --model "$dir" --device "$DEVICE" --repeat "$REPEAT" \
            --dtype "${rest%%:*}" --precision "${rest#*:}" \
            >"$OUT/$name.engine_$tag.jsonl" 2>"$OUT/$name.engine_$tag.log" ||
            note "engine ($v) failed: $(tail -1 "$OUT/$name.engine_$tag.log")"
    done
    : >"$OUT/$name.transformers_fp16.jsonl"
    if [ "$PEER_OK" = 1 ]; then
        timeout 200 "$PYTHON" bench/engine/peer_transformers.py --model "$dir" --device "$DEVICE" \
            --dtype float16 --repeat "$REPEAT" >"$OUT/$name.transformers_fp16.jsonl" \
            2>"$OUT/$name.transformers_fp16.log" ||
            note "transformers fp16 failed: $(tail -1 "$OUT/$name.transformers_fp16.log")"
    fi
    "$PYTHON" - "$OUT/$name.engine_f32.jsonl" "$OUT/$name.engine_f16.jsonl" \
        "$OUT/$name.engine_f16half.jsonl" "$OUT/$name.transformers_fp16.jsonl" <<'PY' | tee -a "$SUM"
import json, sys
def load(p):
    try:
        return {(r["batch"], r["beam"]): r for r in (json.loads(l) for l in open(p) if l.strip())}
    except (OSError, ValueError):
        return {}
f32, f16, half, peer = (load(p) for p in sys.argv[1:5])
print("| batch | beam | transformerd F32 tok/s | transformerd F16 (full) tok/s | "
      "transformerd F16 (half) tok/s | transformers fp16 tok/s | F16 full / transformers | "
      "F16 half / transformers |")
print("|---|---|---|---|---|---|---|---|")
def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"
for key in sorted(set(f32) | set(f16) | set(half) | set(peer)):
    a, b, h, p = (d.get(key, {}).get("tokens_per_s") for d in (f32, f16, half, peer))
    print(f"| {key[0]} | {key[1]} | {a or '-'} | {b or '-'} | {h or '-'} | {p or '-'} | "
          f"{ratio(b, p)} | {ratio(h, p)} |")
PY
}

if [ "$BENCH" = 0 ]; then
    note ""
    note "benchmarks (steps 3 and 3b) skipped: BENCH=0"
elif [ -f "$MODEL/model.safetensors" ]; then
    bench bundled "$MODEL"
else
    note ""
    note "bundled model: $MODEL/model.safetensors not present, skipped"
fi
if [ "$BENCH" != 0 ] && [ ! -f "$RND/model.safetensors" ]; then
    timeout 120 "$BENCH_BIN" --make-model "$RND" >"$OUT/make_model.log" 2>&1 ||
        note "making the random model failed (make_model.log)"
fi
[ "$BENCH" != 0 ] && [ -f "$RND/model.safetensors" ] && bench transformer_base "$RND"

# 3b. where a step's time goes, and the attention kernels side by side -----
if [ "$BENCH" != 0 ] && [ -f "$RND/model.safetensors" ] && [ -x "$BENCH_BIN" ]; then
    note ""
    note "## Where a step's time goes (TD_GPU_PROFILE=1; random base model, F32, src_len 24, 32 tokens, 2 passes)"
    for cfg in 1:1 1:4 32:1 32:4; do
        b=${cfg%%:*}
        k=${cfg#*:}
        # the sources bench_engine makes itself, as token ids (eos 0 last)
        "$PYTHON" - "$b" >"$OUT/ids_$b.txt" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(" ".join(str(1 + (i * 7919 + j * 104729) % 31998) for j in range(23)) + " 0")
PY
        TD_GPU_PROFILE=1 timeout 120 "$BENCH_BIN" --model "$RND" --device "$DEVICE" \
            --ids "$OUT/ids_$b.txt" --batch "$b" --beam "$k" --max-length 32 --repeat 2 \
            >"$OUT/profile_${b}x$k.jsonl" 2>"$OUT/profile_${b}x$k.log"
        rc=$?
        note ""
        note "batch $b, beam $k (exit $rc): $(head -c 300 "$OUT/profile_${b}x$k.jsonl")"
        {
            echo '```'
            sed -n '/cuda profile/,$p' "$OUT/profile_${b}x$k.log" | head -24
            echo '```'
        } | tee -a "$SUM"
    done
    note ""
    note "## Attention kernels: flash (default) against TD_GPU_ATTN=naive (random base model, F32, best of $REPEAT)"
    for kern in flash naive; do
        TD_GPU_ATTN=$kern timeout 150 "$BENCH_BIN" --model "$RND" --device "$DEVICE" \
            --repeat "$REPEAT" --dtype float32 >"$OUT/attn_$kern.jsonl" 2>"$OUT/attn_$kern.log" ||
            note "$kern failed: $(tail -1 "$OUT/attn_$kern.log")"
    done
    "$PYTHON" - "$OUT/attn_flash.jsonl" "$OUT/attn_naive.jsonl" <<'PY' | tee -a "$SUM"
import json, sys
def load(p):
    try:
        return {(r["batch"], r["beam"]): r for r in (json.loads(l) for l in open(p) if l.strip())}
    except (OSError, ValueError):
        return {}
fl, nv = load(sys.argv[1]), load(sys.argv[2])
print("| batch | beam | flash tok/s | naive tok/s | flash / naive |")
print("|---|---|---|---|---|")
for key in sorted(set(fl) | set(nv)):
    a, b = (d.get(key, {}).get("tokens_per_s") for d in (fl, nv))
    print(f"| {key[0]} | {key[1]} | {a or '-'} | {b or '-'} | "
          f"{f'{a / b:.2f}x' if a and b else '-'} |")
PY
fi

# 4. end to end: the bundled model's held-out test set through
# `transformerd translate --device cuda` against transformers' text, and the
# daemon on the GPU answering one request ----------------------------------
TD="$BUILD/transformerd"
if [ -x "$TD" ] && [ -f "$MODEL/model.safetensors" ]; then
    note ""
    note "## End to end: bundled model, 2000 test lines, transformerd translate --device $DEVICE vs transformers (float32)"
    for prec in full half; do
        timeout 120 sh tests/model_bundled.sh "$TD" . en-de 2000 --device "$DEVICE" --precision "$prec" \
            >"$OUT/e2e_$prec.log" 2>&1
        note "precision $prec: exit $?: $(grep -h '^model_en_de:' "$OUT/e2e_$prec.log" | tr '\n' ' ')"
    done
    note ""
    note "## Daemon on $DEVICE (transformerd serve, one POST /v1/translate with attention)"
    timeout 90 "$PYTHON" - "$TD" "$MODEL" "$DEVICE" >"$OUT/daemon.log" 2>&1 <<'PY'
import json, re, signal, subprocess, sys, time, urllib.request
td, model, dev = sys.argv[1:4]
p = subprocess.Popen([td, "serve", "--model", model, "--device", dev, "--host", "127.0.0.1",
                      "--port", "0"], stderr=subprocess.PIPE, text=True)
port = None
t0 = time.time()
log = []
while time.time() - t0 < 60:
    line = p.stderr.readline()
    if not line:
        break
    log.append(line)
    m = re.search(r"listening on [^ ]*:(\d+)", line)
    if m:
        port = int(m.group(1))
        break
if port is None:
    print("no port:", "".join(log))
    p.kill()
    sys.exit(1)
base = f"http://127.0.0.1:{port}"
for _ in range(600):
    try:
        if urllib.request.urlopen(base + "/health/ready", timeout=5).status == 200:
            break
    except Exception:
        time.sleep(0.1)
body = json.dumps({"text": ["Open the file.", "The printer is not connected."],
                   "return_attention": True}).encode()
req = urllib.request.Request(base + "/v1/translate", body, {"Content-Type": "application/json"})
r = json.load(urllib.request.urlopen(req, timeout=30))
print(json.dumps({"texts": [t["text"] for t in r["translations"]],
                  "models": json.load(urllib.request.urlopen(base + "/v1/models"))}))
p.send_signal(signal.SIGTERM)
rc = p.wait(timeout=30)
print("daemon exit", rc)
sys.exit(0 if rc == 0 else 1)
PY
    note "exit $?: $(head -c 600 "$OUT/daemon.log" | tr '\n' ' ')"
    note ""
    head -n "$LOAD_LINES" tests/data/en_de_test/test.en >"$OUT/load_input.txt"
    for lb in $LOAD_BATCHES; do
        note ""
        note "## Daemon under load on $DEVICE (bench/load/run.sh: bundled model, $LOAD_LINES test lines, BATCH=$lb, ROUNDS=$LOAD_ROUNDS)"
        MODEL="$MODEL" INPUT="$OUT/load_input.txt" DEVICE="$DEVICE" BUILD="$BUILD" THREADS=4 \
            BATCH="$lb" ROUNDS="$LOAD_ROUNDS" MAX_SECONDS=20 OUT="$OUT/load-b$lb" \
            timeout $((200 * LOAD_ROUNDS)) sh bench/load/run.sh >"$OUT/load-b$lb.log" 2>&1
        note "exit $?"
        grep -E '^\||^offline' "$OUT/load-b$lb.log" | tee -a "$SUM"
    done
fi

# 5. memcheck ---------------------------------------------------------------
if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    note ""
    note "## compute-sanitizer memcheck"
    # test_gpu_golden takes over 2 minutes under memcheck: the ops only
    # (API errors not reported: the tests provoke out-of-memory on purpose)
    for t in test_gpu_ops test_gpu_attention; do
        CK_FORK=no OPENBLAS_NUM_THREADS=1 timeout 300 compute-sanitizer --tool memcheck \
            --report-api-errors no --error-exitcode 9 "$BUILD/tests/gpu/$t" \
            >"$OUT/memcheck_$t.log" 2>&1
        note "$t: exit $? ($(grep -c '=========.*Invalid\|========= ERROR' "$OUT/memcheck_$t.log") reports)"
    done
    # the tiled kernels' shared memory (warp-private tiles, block merges):
    # the attention program, and the logprobs case of the op program
    for t in test_gpu_attention test_gpu_ops; do
        if [ $t = test_gpu_ops ]; then set -- CK_RUN_CASE=logprobs; else set --; fi
        env "$@" CK_FORK=no OPENBLAS_NUM_THREADS=1 timeout 240 compute-sanitizer \
            --tool racecheck --error-exitcode 9 "$BUILD/tests/gpu/$t" \
            >"$OUT/racecheck_$t.log" 2>&1
        note "racecheck $t $*: exit $? ($(grep -c '========= .*[Hh]azard\|========= ERROR' "$OUT/racecheck_$t.log") reports)"
    done
fi

note ""
note "total $(elapsed) s; status $status"
exit $status
