#!/bin/sh
# The daemon under load, in one run: offline `transformerd translate` on the
# same lines, the daemon with --max-batch-size $BATCH and the same daemon with
# --max-batch-size 1, at concurrency 1, 8 and 64 (loopback, port 0). Prints
# one JSON line per run and a table of sentences/s, p50/p99 latency and the
# ratios daemon/offline and batched/batch-1.
#
#   bench/load/run.sh                      (the fixture model)
#   MODEL=models/en-de bench/load/run.sh   (any model directory)
#
# Environment: MODEL (default models/en-de when it has a config.json, else
# tests/data/text/marian_en_de), INPUT (one sentence a line; default: the
# fixture's golden texts, repeated to $LINES lines), LINES (512), THREADS
# (engine threads of all three runs, default 1: the fixture is tiny, and on
# shared cores spinning thread pools make the numbers noisy), BATCH (32),
# DELAY (--batch-delay-ms of both daemons, default 0, the daemon's default),
# LEVELS (1,8,64), MAX_SECONDS per level (60), BUILD (build), DEVICE (cpu;
# cuda for the GPU backend), OUT (/tmp/transformerd-load: logs, the
# generated input, the load binary). The load generator is $BUILD's
# bench_load when built, else compiled here with cc.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if [ -z "${MODEL:-}" ]; then
    if [ -f models/en-de/config.json ]; then MODEL=models/en-de; else MODEL=tests/data/text/marian_en_de; fi
fi
THREADS=${THREADS:-1}
BATCH=${BATCH:-32}
LEVELS=${LEVELS:-1,8,64}
DELAY=${DELAY:-0}
LINES=${LINES:-512}
MAX_SECONDS=${MAX_SECONDS:-60}
OUT=${OUT:-/tmp/transformerd-load}
DEVICE=${DEVICE:-cpu}
mkdir -p "$OUT"
[ -x "$BUILD/transformerd" ] || cmake --build "$BUILD" -j2 --target transformerd >/dev/null
# The load generator: one C file plus the tests' HTTP client.
if [ -x "$BUILD/bench/load/bench_load" ]; then
    cp "$BUILD/bench/load/bench_load" "$OUT/load"
else
    cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -pthread -Itests -o "$OUT/load" \
        bench/load/load.c tests/server/client.c $(pkg-config --cflags --libs jansson)
fi
if [ -z "${INPUT:-}" ]; then
    INPUT=$OUT/input.txt
    python3 - tests/data/text/marian_en_de/golden.json "$LINES" > "$INPUT" <<'PY'
import json, sys
texts = [c["text"] for c in json.load(open(sys.argv[1]))["cases"]]
texts = [t.strip() for t in texts if t.strip() and "\n" not in t and "\r" not in t]
n = int(sys.argv[2])
for i in range(n):
    print(texts[i % len(texts)])
PY
fi
exec "$OUT/load" --daemon "$BUILD/transformerd" --model "$MODEL" --input "$INPUT" \
    --threads "$THREADS" --batch "$BATCH" --concurrency "$LEVELS" \
    --batch-delay-ms "$DELAY" --max-seconds "$MAX_SECONDS" --log-dir "$OUT" --device "$DEVICE"
