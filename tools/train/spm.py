#!/usr/bin/env python3
"""Stage 2: the joint SentencePiece unigram model (nmt_nfkc, 8,000 pieces) on train.en + train.de, and the
Marian vocab.json: "</s>": 0, "<unk>": 1, then the spm pieces in spm order (without <unk>, <s>, </s>),
"<pad>" last. source.spm = target.spm = the joint model.

Writes WORK/spm/{joint.spm,vocab.json}. Deterministic (seeded, one thread per the options below).
Usage: tools/.venv/bin/python tools/train/spm.py [--work .train] [--vocab 8000]
"""
import argparse
import json
import os

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def marian_vocab(sp):
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):
            continue
        p = sp.id_to_piece(i)
        if p not in vocab:
            vocab[p] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=20261129)
    a = ap.parse_args()
    c, out = os.path.join(a.work, "corpus"), os.path.join(a.work, "spm")
    os.makedirs(out, exist_ok=True)
    lines = []
    for name in ("train.en", "train.de"):
        with open(os.path.join(c, name), encoding="utf-8") as f:
            lines.extend(x.rstrip("\n") for x in f)
    spm.set_random_generator_seed(a.seed)
    with open(os.path.join(out, "joint.spm"), "wb") as f:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=f, model_type="unigram", vocab_size=a.vocab,
            normalization_rule_name="nmt_nfkc", character_coverage=0.9999, num_threads=2,
            input_sentence_size=0, shuffle_input_sentence=False, max_sentence_length=4096, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "joint.spm"))
    vocab = marian_vocab(sp)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, indent=2)
        f.write("\n")
    print(f"spm: {sp.get_piece_size()} pieces, vocab.json {len(vocab)} ids, pad {vocab['<pad>']}")


if __name__ == "__main__":
    main()
