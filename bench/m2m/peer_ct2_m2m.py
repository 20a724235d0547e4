#!/usr/bin/env python3
"""CTranslate2 on a multilingual model: token-id sources (make_model.py's
src.ids, "__en__ pieces </s>"), the target language token as target_prefix
of every sentence, batches of --batch in file order, --beam, --threads intra
threads; one JSON line with generated tokens (the language token included,
</s> not) per second of translate_batch time, best of --repeat; --out FILE
writes the first pass's best hypotheses as model ids (the converter's
vocabulary is the model's ids: make_model.py checks it), as bench_engine
--out does.

    peer_ct2_m2m.py --model CT2_DIR --ids FILE --prefix TOKEN --batch N --beam N
                    --threads N --compute-type float32|int8 [--repeat R]
                    [--max-length N] [--out FILE]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))

import ctranslate2  # noqa: E402

from peer_common import parser, read_ids, write_lines  # noqa: E402

ap = parser()
ap.add_argument("--compute-type", default="float32")
ap.add_argument("--prefix", required=True, help="the target language token, e.g. __de__")
a = ap.parse_args()

tr = ctranslate2.Translator(a.model, device="cpu", compute_type=a.compute_type,
                            inter_threads=1, intra_threads=a.threads)
vocab = json.load(open(a.model + "/shared_vocabulary.json"))
index = {t: i for i, t in enumerate(vocab)}
src = [[vocab[t] for t in s] for s in read_ids(a.ids)]
best, toks, out = None, 0, []
for r in range(a.repeat):
    t, toks = 0.0, 0
    for i in range(0, len(src), a.batch):
        b = src[i:i + a.batch]
        t0 = time.perf_counter()
        res = tr.translate_batch(b, target_prefix=[[a.prefix]] * len(b), beam_size=a.beam,
                                 max_batch_size=a.batch, max_decoding_length=a.max_length,
                                 min_decoding_length=a.min_length, return_scores=False)
        t += time.perf_counter() - t0
        for x in res:
            h = x.hypotheses[0]
            toks += len(h)
            if r == 0:
                out.append(" ".join(str(index[p]) for p in h))
    best = t if best is None else min(best, t)
if a.out:
    write_lines(a.out, out)
print(json.dumps({"engine": "ctranslate2", "version": ctranslate2.__version__,
                  "compute_type": a.compute_type, "batch": a.batch, "beam": a.beam,
                  "threads": a.threads, "sentences": len(src), "tokens": toks,
                  "seconds": round(best, 4), "tokens_per_s": round(toks / best, 1)}))
