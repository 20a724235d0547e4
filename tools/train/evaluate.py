#!/usr/bin/env python3
"""Stage 5: score a model (models/en-de, models/de-en) on a held-out test set, with transformers and with transformerd.

  * transformers: MarianTokenizer + MarianMTModel (float32 from the F16 weights), generate() with the model's
    generation_config, greedy (num_beams 1) and beam 4, batches of --batch sentences sorted by length
  * transformerd: `transformerd translate-ids --beam N` on MarianTokenizer's source ids (token-level
    agreement with transformers' output ids) and `transformerd translate --no-split --beam N` on the text (BLEU; each line one model input, as for transformers)
  * sacrebleu BLEU (13a) and chrF of every system against the reference (TEST.TGT)

Writes OUT/{hf,td}.{greedy,beam4}.{de,ids} and OUT/scores.json; prints the scores.
Usage: tools/.venv/bin/python tools/train/evaluate.py [--model models/en-de] [--test tests/data/en_de_test/test]
       [--td build/transformerd] [--out .train/eval] [--skip-td] [--skip-hf]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(p):
    with open(p, encoding="utf-8") as f:
        return [x.rstrip("\n") for x in f]


def write(p, lines):
    with open(p, "w", encoding="utf-8") as f:
        for x in lines:
            f.write(x + "\n")


def hf_translate(model, tok, src, beam, bs):
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    ids, txt = [None] * len(src), [None] * len(src)
    pad = model.config.pad_token_id
    for b0 in range(0, len(order), bs):
        idx = order[b0:b0 + bs]
        batch = tok([src[i] for i in idx], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**batch, num_beams=beam, do_sample=False)
        dec = tok.batch_decode(out, skip_special_tokens=True)
        for j, i in enumerate(idx):
            row = [int(t) for t in out[j][1:]]  # drop the decoder start
            while row and row[-1] == pad:
                row.pop()
            ids[i], txt[i] = row, dec[j]
    return ids, txt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "en-de"))
    ap.add_argument("--test", default=os.path.join(ROOT, "tests", "data", "en_de_test", "test"))
    ap.add_argument("--td", default=os.path.join(ROOT, "build", "transformerd"))
    ap.add_argument("--out", default=os.path.join(ROOT, ".train", "eval"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--skip-td", action="store_true")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--src", help="source language code of the test files (default: the model's, from "
                    "tokenizer_config.json; TEST.SRC is translated and scored against TEST.TGT)")
    ap.add_argument("--tgt", help="target language code (default: the model's)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import sacrebleu
    from transformers import MarianMTModel, MarianTokenizer
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.model, "tokenizer_config.json")) as f:
        tc = json.load(f)
    iso2 = {"eng": "en", "deu": "de"}
    a.src = a.src or iso2.get(tc.get("source_lang"), "en")
    a.tgt = a.tgt or iso2.get(tc.get("target_lang"), "de")
    src, ref = read(f"{a.test}.{a.src}"), read(f"{a.test}.{a.tgt}")
    if a.limit:
        src, ref = src[:a.limit], ref[:a.limit]
    tok = MarianTokenizer.from_pretrained(a.model)
    scores = {"test": a.test, "lines": len(src)}
    sp_path = os.path.join(a.out, "scores.json")
    if os.path.exists(sp_path):
        with open(sp_path) as f:
            old = json.load(f)
        if old.get("lines") == len(src):
            scores.update(old)

    def score(name, hyp):
        b = sacrebleu.corpus_bleu(hyp, [ref])
        c = sacrebleu.corpus_chrf(hyp, [ref])
        scores[name] = {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bleu_sig": str(b)}
        print(f"{name}: BLEU {b.score:.2f}  chrF {c.score:.2f}   ({b})", flush=True)

    modes = (("greedy", 1), ("beam4", 4))
    if not a.skip_hf:
        model = MarianMTModel.from_pretrained(a.model, dtype=torch.float32)
        model.eval()
        for name, beam in modes:
            t0 = time.time()
            ids, txt = hf_translate(model, tok, src, beam, a.batch)
            scores[f"hf.{name}.seconds"] = round(time.time() - t0, 1)
            write(os.path.join(a.out, f"hf.{name}.{a.tgt}"), txt)
            write(os.path.join(a.out, f"hf.{name}.ids"), [" ".join(map(str, r)) for r in ids])
            score(f"transformers.{name}", txt)

    if not a.skip_td:
        src_ids = [" ".join(map(str, tok(x)["input_ids"])) for x in src]
        for name, beam in modes:
            t0 = time.time()
            r = subprocess.run([a.td, "translate-ids", "--model", a.model, "--beam", str(beam), "--threads",
                                str(a.threads)], input="\n".join(src_ids) + "\n", capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"transformerd translate-ids failed: {r.stderr[-2000:]}")
            td_ids = [line.split("\t")[0].split() for line in r.stdout.splitlines()]
            write(os.path.join(a.out, f"td.{name}.ids"), [" ".join(x) for x in td_ids])
            r = subprocess.run([a.td, "translate", "--model", a.model, "--no-split", "--beam", str(beam), "--threads",
                                str(a.threads)], input="\n".join(src) + "\n", capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"transformerd translate failed: {r.stderr[-2000:]}")
            td_txt = r.stdout.splitlines()
            scores[f"td.{name}.seconds"] = round(time.time() - t0, 1)
            write(os.path.join(a.out, f"td.{name}.{a.tgt}"), td_txt)
            score(f"transformerd.{name}", td_txt)
            hp = os.path.join(a.out, f"hf.{name}.ids")
            if os.path.exists(hp):
                hf_ids = [x.split() for x in read(hp)]
                hf_txt = read(os.path.join(a.out, f"hf.{name}.{a.tgt}"))
                # transformers' ids end with </s> (0); transformerd's may or may not print it: compare without
                strip = lambda x: x[:-1] if x and x[-1] == "0" else x  # noqa: E731
                same_ids = sum(strip(h) == strip(t) for h, t in zip(hf_ids, td_ids))
                same_txt = sum(h == t for h, t in zip(hf_txt, td_txt))
                n = len(src)
                scores[f"agreement.{name}"] = {"token_exact_lines": same_ids, "text_exact_lines": same_txt,
                                               "lines": n, "token_exact_pct": round(100 * same_ids / n, 2),
                                               "text_exact_pct": round(100 * same_txt / n, 2)}
                print(f"agreement {name}: token-exact {same_ids}/{n} ({100 * same_ids / n:.2f} %), "
                      f"text-exact {same_txt}/{n} ({100 * same_txt / n:.2f} %)", flush=True)
    # twenty samples for the model card: a fixed random draw (seed 7) of the test lines, beam-4 output
    hyp_path = os.path.join(a.out, f"hf.beam4.{a.tgt}")
    if not os.path.exists(hyp_path):
        hyp_path = os.path.join(a.out, f"td.beam4.{a.tgt}")
    if os.path.exists(hyp_path):
        import random
        hyp = read(hyp_path)
        pick = sorted(random.Random(7).sample(range(len(src)), min(20, len(src))))
        esc = lambda x: x.replace("|", "\\|")  # noqa: E731
        rows = ["| # | source | reference | beam 4 | chrF |", "| --- | --- | --- | --- | --- |"]
        for i in pick:
            c = sacrebleu.sentence_chrf(hyp[i], [ref[i]]).score
            rows.append(f"| {i + 1} | {esc(src[i])} | {esc(ref[i])} | {esc(hyp[i])} | {c:.0f} |")
        write(os.path.join(a.out, "samples.md"), rows)
    with open(sp_path, "w") as f:
        json.dump(scores, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
