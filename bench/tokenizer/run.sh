#!/bin/sh
# Tokenizer throughput: tokenizer/spm.c against the sentencepiece Python library
# on the same lines and the same model, in one run.
#   bench/tokenizer/run.sh [MODEL] [LINES.jsonl]
set -eu
cd "$(dirname "$0")/../.."
MODEL=${1:-tests/data/spm/unigram_nfkc.model}
LINES=${2:-tests/data/spm/lines.jsonl}
make build >/dev/null
./build/bench/tokenizer/bench_tokenizer "$MODEL" "$LINES" | tee /tmp/td-bench-tok-c.json
tools/setup_venv.sh >/dev/null
tools/.venv/bin/python bench/tokenizer/peer_sentencepiece.py "$MODEL" "$LINES" | tee /tmp/td-bench-tok-py.json
python3 - /tmp/td-bench-tok-c.json /tmp/td-bench-tok-py.json <<'PY'
import json, sys
c, p = (json.load(open(f)) for f in sys.argv[1:3])
print(f"encode: {c['encode_lines_per_s']:.0f} vs {p['encode_lines_per_s']} lines/s "
      f"({c['encode_lines_per_s'] / p['encode_lines_per_s']:.2f}x per-line calls, "
      f"{c['encode_lines_per_s'] / p['batched_encode_lines_per_s']:.2f}x the batched call)")
print(f"decode: {c['decode_lines_per_s']:.0f} vs {p['decode_lines_per_s']} lines/s "
      f"({c['decode_lines_per_s'] / p['decode_lines_per_s']:.2f}x)")
PY
