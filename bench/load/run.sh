#!/bin/sh
# The daemon under load, in one run: offline `transformerd translate` on the
# same lines, then the daemon with --scheduler inflight and the daemon with
# --scheduler batch (both --max-batch-size $BATCH), each at concurrency 1, 8
# and 64 (loopback, port 0), on a mixed input: short and long sentences,
# shuffled with a fixed seed so that they arrive interleaved. Prints one JSON
# line per run and a table per concurrency (each inflight daemon against
# the batch daemon of the same @wWtT split): sentences/s of both schedulers,
# inflight/batch and inflight/offline, p50/p99 latency of the short and the
# long sentences (thirds of the input by source words) under both, and the
# short sentences' p99 inflight/batch; then a table per run with the latency
# of all sentences and the daemon's own metrics (decode steps, step time,
# sentences admitted per step, running rows).
#
#   bench/load/run.sh                                     (the bundled model)
#   MODEL=models/en-de THREADS=2 LINES=600 ROUNDS=3 bench/load/run.sh
#
# Environment: MODEL (default models/en-de when it has a config.json, else
# tests/data/text/marian_en_de), INPUT (one sentence a line; default: the
# first $LINES lines of the bundled model's held-out test set,
# tests/data/en_de_test/test.en, repeated when $LINES is larger), LINES
# (600), ROUNDS (default 1: every level against every daemon, in turn,
# that many times, the daemons' order reversed in every other round: an
# even count gives each daemon the first place equally often; the daemons
# run side by side and the results are pooled, so a change of a shared
# machine's load hits both schedulers alike), SEED (the shuffle's seed, default 1; 0 keeps the input's order),
# SCHEDULERS (inflight,batch; add batch1 for the batch scheduler with
# --max-batch-size 1, inflight-full for inflight with --scratch full; NAME@wWtT runs that scheduler with --workers W of
# --threads T, e.g. inflight,inflight@w2t1), THREADS (engine threads of every run, default 1: on
# shared cores spinning thread pools make the numbers noisy), BATCH (32),
# DELAY (--batch-delay-ms of the daemons, default 0, the daemon's default),
# LEVELS (1,8,64), MAX_SECONDS per level and round (60), BUILD (build), DEVICE (cpu;
# cuda for the GPU backend), OUT (/tmp/transformerd-load: logs, each
# daemon's final /metrics, the generated input, the load binary). The load
# generator is $BUILD's bench_load when built, else compiled here with cc.
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
LINES=${LINES:-600}
SEED=${SEED:-1}
ROUNDS=${ROUNDS:-1}
SCHEDULERS=${SCHEDULERS:-inflight,batch}
MAX_SECONDS=${MAX_SECONDS:-60}
OUT=${OUT:-/tmp/transformerd-load}
DEVICE=${DEVICE:-cpu}
mkdir -p "$OUT"
[ -x "$BUILD/transformerd" ] || cmake --build "$BUILD" -j2 --target transformerd >/dev/null
# The load generator: two C files plus the tests' HTTP client.
if [ -x "$BUILD/bench/load/bench_load" ]; then
    cp "$BUILD/bench/load/bench_load" "$OUT/load"
else
    cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -pthread -Itests -o "$OUT/load" \
        bench/load/load.c bench/load/lines.c bench/load/prom.c tests/server/client.c $(pkg-config --cflags --libs jansson)
fi
if [ -z "${INPUT:-}" ]; then
    INPUT=$OUT/input.txt
    : >"$INPUT"
    while [ "$(wc -l <"$INPUT")" -lt "$LINES" ]; do
        cat tests/data/en_de_test/test.en >>"$INPUT"
    done
    head -n "$LINES" "$INPUT" >"$INPUT.tmp" && mv "$INPUT.tmp" "$INPUT"
fi
exec "$OUT/load" --daemon "$BUILD/transformerd" --model "$MODEL" --input "$INPUT" \
    --threads "$THREADS" --batch "$BATCH" --concurrency "$LEVELS" \
    --schedulers "$SCHEDULERS" --seed "$SEED" --rounds "$ROUNDS" \
    --batch-delay-ms "$DELAY" --max-seconds "$MAX_SECONDS" --log-dir "$OUT" --device "$DEVICE"
