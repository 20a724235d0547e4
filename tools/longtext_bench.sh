#!/bin/sh
# tools/longtext_bench.sh [--threads N] [--beam N] [--document-only] - long texts measured
# (docs/benchmarks.md, "Long texts"): makes tools/.venv-bleu (sacrebleu
# 2.6.0 only), starts build/transformerd on the bundled model (models/en-de)
# on a free port, runs tools/longtext_bench.py against it, stops it.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
threads=0
beam=4
extra=""
while [ $# -gt 0 ]; do
    case $1 in
        --threads) threads=$2; shift 2 ;;
        --beam) beam=$2; shift 2 ;;
        --document-only) extra=--document-only; shift ;;
        *) echo "usage: $0 [--threads N] [--beam N]" >&2; exit 2 ;;
    esac
done
venv="$root/tools/.venv-bleu"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import sacrebleu' 2>/dev/null || "$venv/bin/pip" install -q sacrebleu==2.6.0
log=$(mktemp)
"$root/build/transformerd" serve --model "$root/models/en-de" --port 0 --threads "$threads" \
    --request-timeout-s 900 --max-batch-texts 1024 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    grep -q "ready:" "$log" && [ -n "$port" ] && break
    sleep 0.2
done
[ -n "$port" ] || { cat "$log" >&2; exit 1; }
"$venv/bin/python" "$root/tools/longtext_bench.py" --port "$port" --beam "$beam" $extra
