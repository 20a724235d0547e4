#!/usr/bin/env python3
"""The peer of bench/model/run.sh: MarianTokenizer + MarianMTModel.generate +
batch_decode in float32 on the CPU, length-sorted batches of 32 (as
`transformerd translate` does), writing one translation per line and printing
"load_seconds generate_seconds".

    peer.py MODEL_DIR SRC OUT BEAM THREADS
"""
import sys
import time

import torch
from transformers import MarianMTModel, MarianTokenizer


def main():
    model_dir, src, out, beam, threads = sys.argv[1:6]
    torch.set_num_threads(int(threads))
    t0 = time.perf_counter()
    tok = MarianTokenizer.from_pretrained(model_dir)
    model = MarianMTModel.from_pretrained(model_dir, dtype=torch.float32).eval()
    t1 = time.perf_counter()
    lines = [x.rstrip("\n") for x in open(src, encoding="utf-8")]
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    res = [None] * len(lines)
    for b0 in range(0, len(order), 32):
        idx = order[b0:b0 + 32]
        batch = tok([lines[i] for i in idx], return_tensors="pt", padding=True)
        with torch.inference_mode():
            gen = model.generate(**batch, num_beams=int(beam), do_sample=False)
        for j, t in zip(idx, tok.batch_decode(gen, skip_special_tokens=True)):
            res[j] = t
    t2 = time.perf_counter()
    with open(out, "w", encoding="utf-8") as f:
        for t in res:
            f.write(t + "\n")
    print(f"{t1 - t0:.3f} {t2 - t1:.3f}")


if __name__ == "__main__":
    main()
