#!/usr/bin/env python3
"""CTranslate2 on token-id sentences (one a line, `transformerd tokenize`):
batches of --batch in file order, --beam, --threads intra threads; one JSON
line with generated tokens (without </s>) per second of translate_batch time,
best of --repeat; --out FILE writes the first pass's hypotheses as text
(pieces joined, U+2581 as spaces, specials dropped: SentencePiece's decode for
ordinary pieces, as transformerd's tokenizer decodes them).

    peer_ct2.py --model CT2_DIR --ids FILE --batch N --beam N --threads N
                --compute-type float32|int8 [--repeat R] [--max-length N]
                [--min-length N] [--out FILE]
"""
import json
import time

import ctranslate2

from peer_common import parser, pieces_text, read_ids, write_lines

ap = parser()
ap.add_argument("--compute-type", default="float32")
a = ap.parse_args()

tr = ctranslate2.Translator(a.model, device="cpu", compute_type=a.compute_type,
                            inter_threads=1, intra_threads=a.threads)
vocab = json.load(open(a.model + "/shared_vocabulary.json"))
src = [[vocab[t] for t in s] for s in read_ids(a.ids)]
specials = {"</s>", "<pad>", "<unk>"}
best, toks, texts = None, 0, []
for r in range(a.repeat):
    t, toks = 0.0, 0
    for i in range(0, len(src), a.batch):
        t0 = time.perf_counter()
        res = tr.translate_batch(src[i:i + a.batch], beam_size=a.beam, max_batch_size=a.batch,
                                 max_decoding_length=a.max_length,
                                 min_decoding_length=a.min_length,
                                 suppress_sequences=[["<pad>"]], return_scores=False)
        t += time.perf_counter() - t0
        for x in res:
            h = x.hypotheses[0]
            toks += len(h)
            if r == 0:
                texts.append(pieces_text(h, specials))
    best = t if best is None else min(best, t)
if a.out:
    write_lines(a.out, texts)
print(json.dumps({"engine": "ctranslate2", "version": ctranslate2.__version__,
                  "compute_type": a.compute_type, "batch": a.batch, "beam": a.beam,
                  "threads": a.threads, "sentences": len(src), "tokens": toks,
                  "seconds": round(best, 4), "tokens_per_s": round(toks / best, 1)}))
