#!/usr/bin/env python3
"""The peer for bench/engine: transformers' MarianMTModel.generate on the same
model directory, the same sources and the same settings as bench_engine.c: float32 on the CPU with the same number of
threads (default), or on a GPU with --device cuda [--dtype float16]. Prints
one JSON line per configuration in bench_engine's format.

    tools/.venv/bin/python bench/engine/peer_transformers.py --model DIR [--threads N]
    python3 bench/engine/peer_transformers.py --model DIR --device cuda --dtype float16
"""
import argparse
import json
import time

import torch
from transformers import MarianMTModel

VOCAB = 32000


def sources(n, src_len, vocab=VOCAB, eos=0):
    # the same deterministic ids as bench_engine.c
    return [[1 + (i * 7919 + j * 104729) % (vocab - 2) for j in range(src_len - 1)] + [eos]
            for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--src-len", type=int, default=24)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    model = MarianMTModel.from_pretrained(a.model, dtype=getattr(torch, a.dtype)).to(dev).eval()
    vocab, eos = model.config.vocab_size, model.config.eos_token_id
    for batch in (1, 32):
        ids = torch.tensor(sources(batch, a.src_len, vocab, eos), device=dev)
        mask = torch.ones_like(ids)
        for beam in (1, 4):
            best, toks = 1e30, 0
            if cuda:  # one untimed run: CUDA context, kernels and allocator warm-up
                with torch.inference_mode():
                    model.generate(input_ids=ids, attention_mask=mask, num_beams=beam,
                                   max_length=a.max_length + 1, do_sample=False)
            for _ in range(a.repeat):
                sync()
                t0 = time.perf_counter()
                with torch.inference_mode():
                    out = model.generate(input_ids=ids, attention_mask=mask, num_beams=beam,
                                         max_length=a.max_length + 1, do_sample=False)
                sync()
                dt = time.perf_counter() - t0
                best = min(best, dt)
                # generated tokens without the decoder start token and pad fill
                toks = int(((out[:, 1:] != model.config.pad_token_id)).sum())
            print(json.dumps({"engine": "transformers", "device": a.device, "dtype": a.dtype,
                              "batch": batch, "beam": beam,
                              "threads": torch.get_num_threads(), "src_len": a.src_len,
                              "tokens": toks, "seconds": round(best, 4),
                              "tokens_per_s": round(toks / best, 1)}), flush=True)


if __name__ == "__main__":
    main()
