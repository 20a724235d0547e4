#!/usr/bin/env python3
"""The peer for bench/tokenizer: the sentencepiece Python library encoding and
decoding the same lines, one call per line (as a server tokenizes requests)
and, for reference, one batched call. Prints one JSON line.

    tools/.venv/bin/python bench/tokenizer/peer_sentencepiece.py MODEL LINES.jsonl [--repeat N]
"""
import json
import sys
import time

import sentencepiece as spm


def main():
    model, path = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--repeat" else 5
    sp = spm.SentencePieceProcessor(model_file=model)
    lines = [json.loads(l) for l in open(path, encoding="utf-8")]
    nbytes = sum(len(l.encode("utf-8", "surrogatepass")) for l in lines)
    best_enc = best_dec = best_batch = 1e30
    for _ in range(repeat):
        t0 = time.perf_counter()
        ids = [sp.encode(l) for l in lines]
        t1 = time.perf_counter()
        for x in ids:
            sp.decode(x)
        t2 = time.perf_counter()
        sp.encode(lines, num_threads=1)
        t3 = time.perf_counter()
        best_enc, best_dec, best_batch = min(best_enc, t1 - t0), min(best_dec, t2 - t1), min(best_batch, t3 - t2)
    print(json.dumps({"impl": "sentencepiece-python " + spm.__version__, "lines": len(lines), "bytes": nbytes,
                      "pieces": sum(map(len, ids)),
                      "encode_lines_per_s": round(len(lines) / best_enc),
                      "encode_mb_per_s": round(nbytes / best_enc / 1e6, 2),
                      "decode_lines_per_s": round(len(lines) / best_dec),
                      "batched_encode_lines_per_s": round(len(lines) / best_batch)}))


if __name__ == "__main__":
    main()
