#!/usr/bin/env python3
"""Stage 1c: a work directory for the German->English model (models/de-en), from the same data reversed.

Reads the stage-1 corpus and the Ding pairs of FROM (corpus.py, ding.py) and writes WORK:
  * WORK/corpus/train.{de,en}: every stage-1 pair (train, dev and test of that run) and every Ding training
    pair, minus each pair whose German or English side, normalised as corpus.py does, equals a side of the
    held-out sets named by --holdout (default: the committed test set tests/data/en_de_test and the Ding test
    set), so that neither direction's model has seen its test sentences;
  * WORK/corpus/dev.{de,en}: the stage-1 dev pairs, filtered the same way;
  * WORK/corpus/provenance.tsv and stats.json (export.py copies them into the model directory);
  * WORK/spm/: the vocabulary of the bundled en->de model (its joint SentencePiece model and vocab.json), so
    that both directions share one vocabulary and a German sentence becomes the same ids in either model;
  * WORK/direction.json: {"src": "de", "tgt": "en"} (train.py, export.py and dev_average.py read it).

Usage: tools/.venv/bin/python tools/train/reverse.py [--from .train] [--work .train-de-en]
"""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from corpus import normkey  # noqa: E402


def read(p):
    with open(p, encoding="utf-8") as f:
        return [x.rstrip("\n") for x in f]


def pairs_of(prefix):
    en, de = read(prefix + ".en"), read(prefix + ".de")
    if len(en) != len(de):
        sys.exit(f"reverse: {prefix}.en has {len(en)} lines, {prefix}.de {len(de)}")
    return list(zip(de, en))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src_work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--work", default=os.path.join(ROOT, ".train-de-en"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "models", "en-de"),
                    help="model directory whose source.spm and vocab.json are shared")
    ap.add_argument("--holdout", action="append",
                    help="held-out prefix (PREFIX.en, PREFIX.de); repeatable")
    a = ap.parse_args()
    c = os.path.join(a.src_work, "corpus")
    holdout = a.holdout or [os.path.join(ROOT, "tests", "data", "en_de_test", "test"), os.path.join(c, "ding_test")]
    held = set()
    for h in holdout:
        for de, en in pairs_of(h):
            held.add(("de", normkey(de)))
            held.add(("en", normkey(en)))

    def clean(pairs):
        kept = [(de, en) for de, en in pairs if ("de", normkey(de)) not in held and ("en", normkey(en)) not in held]
        return kept, len(pairs) - len(kept)

    parts = {}
    for name in ("train", "test", "ding"):
        parts[name] = clean(pairs_of(os.path.join(c, name)))
    train = [p for name in ("train", "test", "ding") for p in parts[name][0]]
    dev, dev_dropped = clean(pairs_of(os.path.join(c, "dev")))
    seen = set()
    unique = []
    for p in train:
        if p not in seen:
            seen.add(p)
            unique.append(p)

    out = os.path.join(a.work, "corpus")
    os.makedirs(out, exist_ok=True)
    for split, ps in (("train", unique), ("dev", dev)):
        for i, lang in enumerate(("de", "en")):
            with open(os.path.join(out, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                for p in ps:
                    f.write(p[i] + "\n")
    shutil.copyfile(os.path.join(c, "provenance.tsv"), os.path.join(out, "provenance.tsv"))
    with open(os.path.join(out, "provenance.tsv"), "a", encoding="utf-8") as f:
        f.write(f"trans-de-en\tdownloaded (Ding dictionary, tools/train/ding.py)\t1\t{len(parts['ding'][0])}\tGPL-2+\n")
    stats = {"direction": "de-en", "train": len(unique), "dev": len(dev),
             "from_stage1_train": len(parts["train"][0]), "from_stage1_test": len(parts["test"][0]),
             "from_ding": len(parts["ding"][0]), "duplicates": len(train) - len(unique),
             "dropped_as_held_out": {k: v[1] for k, v in parts.items()} | {"dev": dev_dropped},
             "held_out_sets": [os.path.relpath(h, ROOT) for h in holdout],
             "train_de_words": sum(len(de.split()) for de, _ in unique),
             "train_en_words": sum(len(en.split()) for _, en in unique)}
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
        f.write("\n")
    spm_dir = os.path.join(a.work, "spm")
    os.makedirs(spm_dir, exist_ok=True)
    shutil.copyfile(os.path.join(a.vocab, "source.spm"), os.path.join(spm_dir, "joint.spm"))
    shutil.copyfile(os.path.join(a.vocab, "vocab.json"), os.path.join(spm_dir, "vocab.json"))
    with open(os.path.join(a.work, "direction.json"), "w") as f:
        json.dump({"src": "de", "tgt": "en"}, f)
        f.write("\n")
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
