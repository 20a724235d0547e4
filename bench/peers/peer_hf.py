#!/usr/bin/env python3
"""transformers (MarianMTModel, PyTorch on the CPU, float32) on token-id
sentences (one a line, `transformerd tokenize`, ending in </s>): batches of
--batch in file order, --beam, --threads torch threads; one JSON line with
generated tokens (without </s> and <pad>) per second of generate() time, best
of --repeat; --out FILE writes the first pass's hypotheses as text (pieces of
the model's vocab.json joined, U+2581 as spaces, specials dropped), as
peer_ct2.py does. Runs in tools/.venv (torch, transformers).

    peer_hf.py --model MODEL_DIR --ids FILE --batch N --beam N --threads N
               [--repeat R] [--max-length N] [--min-length N] [--out FILE]
"""
import json
import os
import time

import torch
import transformers
from transformers import MarianMTModel

from peer_common import parser, pieces_text, read_ids, write_lines

ap = parser(max_length_help="new tokens at most")
a = ap.parse_args()

torch.set_num_threads(a.threads)
model = MarianMTModel.from_pretrained(a.model).eval()
cfg = model.config
pad, eos = cfg.pad_token_id, cfg.eos_token_id
src = read_ids(a.ids)
pieces = None
if a.out and os.path.exists(a.model + "/vocab.json"):
    pieces = {i: p for p, i in json.load(open(a.model + "/vocab.json")).items()}
best, toks, texts = None, 0, []
with torch.inference_mode():
    for r in range(a.repeat):
        t, toks = 0.0, 0
        for i in range(0, len(src), a.batch):
            chunk = src[i:i + a.batch]
            n = max(len(s) for s in chunk)
            ids = torch.tensor([s + [pad] * (n - len(s)) for s in chunk])
            mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in chunk])
            t0 = time.perf_counter()
            gen = model.generate(input_ids=ids, attention_mask=mask, num_beams=a.beam,
                                 do_sample=False, max_new_tokens=a.max_length,
                                 min_new_tokens=a.min_length, bad_words_ids=[[pad]],
                                 num_return_sequences=1)
            t += time.perf_counter() - t0
            for row in gen.tolist():
                out = [x for x in row[1:] if x not in (pad, eos)]
                toks += len(out)
                if r == 0 and pieces is not None:
                    texts.append(pieces_text((pieces[x] for x in out if x != 1), ()))
        best = t if best is None else min(best, t)
if a.out:
    write_lines(a.out, texts)
print(json.dumps({"engine": "transformers", "version": transformers.__version__,
                  "batch": a.batch, "beam": a.beam, "threads": a.threads,
                  "sentences": len(src), "tokens": toks, "seconds": round(best, 4),
                  "tokens_per_s": round(toks / best, 1)}))
