#!/usr/bin/env python3
"""Stage 3g: move training to a GPU machine that lacks our Debian packages, and bring the checkpoint back.

The GPU machine runs a command in a copy of the repository; ignored paths travel only when named, at most
64 MiB in all, and at most 8 files of 16 MiB (64 MiB together) come back from its $OUT per command.

  pack    WORK/corpus + spm -> PACK/: train.{en,de}.xz, dev.{en,de}.xz, joint.spm, vocab.json, manifest.json
          (the training text of one or more --train PREFIX, concatenated in order, less the pairs whose normalised
          English or German side is a line of an --exclude FILE.en or FILE.de (the committed test sets); xz:
          13.9 MiB for 701 k pairs; --direction de-en for a German->English model)
  unpack  PACK/ -> WORK/corpus/{train,dev}.{en,de} and WORK/spm/ (checks the sha256 of the manifest): the
          layout train.py --work WORK reads
  layout  pack + unpack on this machine, without xz: the same --train / --dev / --exclude / --spm straight into
          WORK/corpus/ and WORK/spm/ (+ WORK/corpus/layout.json, the lines per source, and provenance.tsv /
          stats.json merged from the sources' directories, which export.py copies into the model)
  out     the newest checkpoint of WORK (or --ckpt, or with --last N the mean of the newest N) as weights only (model state in float16 plus step, epoch,
          args) cut into parts of at most 15 MiB: OUT/ckpt-STEP.pt.partNN, parts --first .. --first+3 per call
          (4 parts + the parts.json fit the 64 MiB that come back from one command)
  in      the parts (from one or more calls) -> WORK/ckpt/ckpt-STEP.pt, loadable by export.py and
          dev_average.py (not resumable: no optimizer state)

Usage (commands in tools/train/README.md, stage "3g"):
  tools/.venv/bin/python tools/train/pack.py pack --out .train-pack --train .train/corpus/train \\
      --train .train/corpus/ding --train .train/docs/train --dev .train/corpus/dev --dev .train/docs/dev \\
      --spm .train/spm --exclude tests/data/en_de_test/test.en --exclude tests/data/en_de_general/test.en
  python3 tools/train/pack.py unpack --pack .train-pack --work .train-gpu
  python3 tools/train/pack.py out --work .train-gpu --out "$OUT" [--first 0]
  tools/.venv/bin/python tools/train/pack.py in --parts DIR [--parts DIR2] --work .train-gpu
"""
import argparse
import glob
import hashlib
import io
import json
import lzma
import os
import shutil
import sys

PART = 15 * 1024 * 1024


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def write_text(a, open_out, cmd):
    """The training text of a.train (PREFIX.en / PREFIX.de, concatenated in order, less the pairs whose
    normalised source is in an a.exclude file) and the dev text of a.dev, written to open_out("train.en") ...
    open_out("dev.de"). Returns the manifest's "train" and "dev" entries."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from corpus import normkey
    held = {"en": set(), "de": set()}
    for path in a.exclude:  # held-out sentences: no training pair with the same normalised side
        lang = path.rsplit(".", 1)[-1]
        if lang not in held:
            sys.exit(f"{cmd}: --exclude {path}: the name must end in .en or .de (the side it is compared with)")
        with open(path, encoding="utf-8") as f:
            held[lang].update(normkey(x.rstrip("\n")) for x in f)
        held[lang].discard("")
    man = {"train": [], "exclude": [os.path.relpath(x) for x in a.exclude]}
    n = 0
    with open_out("train.en") as we, open_out("train.de") as wd:
        for prefix in a.train:
            k = dropped = 0
            with open(f"{prefix}.en", encoding="utf-8") as fe, open(f"{prefix}.de", encoding="utf-8") as fd:
                for le, ld in zip(fe, fd):
                    if (held["en"] and normkey(le.rstrip("\n")) in held["en"]) or \
                            (held["de"] and normkey(ld.rstrip("\n")) in held["de"]):
                        dropped += 1
                        continue
                    we.write(le)
                    wd.write(ld)
                    k += 1
                if fe.readline() or fd.readline():
                    sys.exit(f"{cmd}: {prefix}.en and {prefix}.de differ in line count")
            man["train"].append({"prefix": os.path.relpath(prefix), "lines": k, "excluded": dropped})
            n += k
    man["train_lines_en"] = man["train_lines_de"] = n
    for lang in ("en", "de"):
        with open_out(f"dev.{lang}") as w:
            for prefix in a.dev:
                with open(f"{prefix}.{lang}", encoding="utf-8") as f:
                    shutil.copyfileobj(f, w)
    man["dev"] = [os.path.relpath(d) for d in a.dev]
    return man


def copy_spm(src, dst):
    """joint.spm and vocab.json of src (a spm work directory, or an exported model directory, whose
    source.spm = target.spm is the joint model) into dst."""
    spm = os.path.join(src, "joint.spm")
    if not os.path.exists(spm):  # an exported model directory: source.spm = target.spm
        spm = os.path.join(src, "source.spm")
    shutil.copy(spm, os.path.join(dst, "joint.spm"))
    shutil.copy(os.path.join(src, "vocab.json"), os.path.join(dst, "vocab.json"))


def write_direction(work, direction):
    """WORK/direction.json for a German->English work directory (train.py and export.py read the source side
    from it); none for English->German, the default."""
    d = os.path.join(work, "direction.json")
    if direction == "de-en":
        with open(d, "w") as f:
            json.dump({"src": "de", "tgt": "en"}, f)
            f.write("\n")
    elif os.path.exists(d):
        os.remove(d)


def pack(a):
    os.makedirs(a.out, exist_ok=True)
    man = write_text(a, lambda name: lzma.open(os.path.join(a.out, name + ".xz"), "wt", encoding="utf-8",
                                               preset=6), "pack")
    man["direction"] = a.direction
    man["files"] = {}
    copy_spm(a.spm, a.out)
    for name in sorted(os.listdir(a.out)):
        if name != "manifest.json":
            man["files"][name] = {"sha256": sha256(os.path.join(a.out, name)),
                                  "bytes": os.path.getsize(os.path.join(a.out, name))}
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=2)
        f.write("\n")
    total = sum(x["bytes"] for x in man["files"].values())
    print(f"pack: {man['train_lines_en']} training pairs, {total / 2**20:.1f} MiB in {a.out}")


def unpack(a):
    with open(os.path.join(a.pack, "manifest.json")) as f:
        man = json.load(f)
    for name, meta in man["files"].items():
        if sha256(os.path.join(a.pack, name)) != meta["sha256"]:
            sys.exit(f"unpack: {name}: sha256 differs from the manifest")
    c, s = os.path.join(a.work, "corpus"), os.path.join(a.work, "spm")
    os.makedirs(c, exist_ok=True)
    os.makedirs(s, exist_ok=True)
    for split in ("train", "dev"):
        for lang in ("en", "de"):
            with lzma.open(os.path.join(a.pack, f"{split}.{lang}.xz"), "rb") as r, \
                    open(os.path.join(c, f"{split}.{lang}"), "wb") as w:
                shutil.copyfileobj(r, w)
    for name in ("joint.spm", "vocab.json"):
        shutil.copy(os.path.join(a.pack, name), os.path.join(s, name))
    write_direction(a.work, man.get("direction", "en-de"))
    cache = os.path.join(a.work, "ckpt", "data.pt")
    if os.path.exists(cache):  # encoded ids of an older corpus
        os.remove(cache)
    print(f"unpack: {man['train_lines_en']} training pairs into {c}, spm into {s}")


def layout(a):
    """pack + unpack in one step, without xz: WORK/corpus/{train,dev}.{en,de} and WORK/spm/ for train.py --work
    WORK on this machine (e.g. a mixture trained with the vocabulary of models/en-de)."""
    c, s = os.path.join(a.work, "corpus"), os.path.join(a.work, "spm")
    os.makedirs(c, exist_ok=True)
    os.makedirs(s, exist_ok=True)
    man = write_text(a, lambda name: open(os.path.join(c, name), "w", encoding="utf-8"), "layout")
    copy_spm(a.spm, s)
    man["spm"] = os.path.relpath(a.spm)
    man["direction"] = a.direction
    write_provenance(a.train, man, c)
    write_direction(a.work, a.direction)
    with open(os.path.join(c, "layout.json"), "w") as f:
        json.dump(man, f, indent=2)
        f.write("\n")
    cache = os.path.join(a.work, "ckpt", "data.pt")
    if os.path.exists(cache):  # encoded ids of an older corpus
        os.remove(cache)
    print(f"layout: {man['train_lines_en']} training pairs into {c}, spm of {a.spm} into {s}")


def write_provenance(prefixes, man, c):
    """WORK/corpus/provenance.tsv and stats.json for export.py (which copies them into the model directory as
    data-provenance.tsv and corpus-stats.json): the provenance.tsv of every --train prefix's directory, once each
    (stage 1's columns; a docs_corpus.py row becomes origin "documentation: COLLECTION" with its files in the
    catalogues column), a trans-de-en row for the Ding pairs (prefixes named ding*; the pairs of ding.*, which
    ding_phrases.* repeats), and the stats.json of each directory with the layout's lines per source."""
    rows, stats, dirs, ding = [], {"layout": man["train"], "sources": {}}, [], 0
    for prefix, entry in zip(prefixes, man["train"]):
        d = os.path.dirname(prefix)
        if os.path.basename(prefix) == "ding":
            ding = entry["lines"] + entry["excluded"]
        if d in dirs:
            continue
        dirs.append(d)
        if os.path.exists(os.path.join(d, "stats.json")):
            with open(os.path.join(d, "stats.json")) as f:
                stats["sources"][os.path.relpath(d)] = json.load(f)
        if not os.path.exists(os.path.join(d, "provenance.tsv")):
            continue
        with open(os.path.join(d, "provenance.tsv"), encoding="utf-8") as f:
            head = f.readline().rstrip("\n").split("\t")
            for line in f:
                r = dict(zip(head, line.rstrip("\n").split("\t")))
                if "collection" in r:
                    r = {"package": r["package"], "origin": f"downloaded (documentation: {r['collection']})",
                         "catalogues": r["files"], "pairs_kept": r["pairs_kept"], "licence": r["licence"]}
                rows.append(r)
    if ding:
        rows.append({"package": "trans-de-en", "origin": "downloaded (Ding dictionary, tools/train/ding.py)",
                     "catalogues": "1", "pairs_kept": str(ding), "licence": "GPL-2+"})
    cols = ("package", "origin", "catalogues", "pairs_kept", "licence")
    with open(os.path.join(c, "provenance.tsv"), "w", encoding="utf-8") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join(r.get(k, "") for k in cols) + "\n")
    with open(os.path.join(c, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
        f.write("\n")


def checkpoints(work):
    return sorted(glob.glob(os.path.join(work, "ckpt", "ckpt-*.pt")), key=lambda p: int(p.split("-")[-1][:-3]))


def latest(work):
    cks = checkpoints(work)
    return cks[-1] if cks else None


def out(a):
    import torch
    path = a.ckpt or latest(a.work)
    if not path:
        sys.exit(f"out: no checkpoint in {a.work}/ckpt")
    ck = torch.load(path, weights_only=False, map_location="cpu")
    small = {k: ck[k] for k in ("step", "epoch", "pos", "elapsed", "args") if k in ck}
    sd = ck["model"]
    if a.last > 1:  # the mean of the newest N checkpoints (the newest's step, position and arguments)
        if a.ckpt:
            sys.exit("out: --last and --ckpt exclude each other")
        paths = checkpoints(a.work)[-a.last:]
        sds = [torch.load(p, weights_only=False, map_location="cpu")["model"] for p in paths]
        sd = {k: (sum(s[k].double() for s in sds) / len(sds)).float() if v.is_floating_point() else v
              for k, v in sd.items()}
        small["averaged"] = [os.path.basename(p) for p in paths]
        print(f"out: the mean of {', '.join(small['averaged'])}")
    small["model"] = {k: v.half() if v.is_floating_point() else v for k, v in sd.items()}
    buf = io.BytesIO()
    torch.save(small, buf)
    data = buf.getvalue()
    name = os.path.basename(path)
    nparts = (len(data) + PART - 1) // PART
    os.makedirs(a.out, exist_ok=True)
    for i in range(a.first, min(nparts, a.first + a.count)):
        with open(os.path.join(a.out, f"{name}.part{i:02d}"), "wb") as f:
            f.write(data[i * PART:(i + 1) * PART])
    with open(os.path.join(a.out, f"{name}.parts.json"), "w") as f:
        json.dump({"ckpt": name, "parts": nparts, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, f)
    last = min(nparts, a.first + a.count) - 1
    print(f"out: {name} (step {ck['step']}), {len(data) / 2**20:.1f} MiB in {nparts} parts; wrote parts "
          f"{a.first}..{last}" + (f"; run again with --first {last + 1}" if last + 1 < nparts else ""))


def join(a):
    meta, parts = None, {}
    for d in a.parts:
        for p in glob.glob(os.path.join(d, "*.parts.json")):
            with open(p) as f:
                meta = json.load(f)
        for p in glob.glob(os.path.join(d, "*.part[0-9][0-9]")):
            parts[int(p[-2:])] = p
    if not meta:
        sys.exit("in: no *.parts.json found")
    missing = [i for i in range(meta["parts"]) if i not in parts]
    if missing:
        sys.exit(f"in: parts {missing} missing")
    data = b"".join(open(parts[i], "rb").read() for i in range(meta["parts"]))
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        sys.exit("in: sha256 differs")
    os.makedirs(os.path.join(a.work, "ckpt"), exist_ok=True)
    dst = os.path.join(a.work, "ckpt", meta["ckpt"])
    with open(dst, "wb") as f:
        f.write(data)
    print(f"in: {dst} ({len(data) / 2**20:.1f} MiB)")


def corpus_args(p):
    """The options saying what goes into a pack or a layout: training and dev prefixes, exclusions, vocabulary."""
    p.add_argument("--train", action="append", required=True, help="PREFIX of PREFIX.en / PREFIX.de (repeatable)")
    p.add_argument("--dev", action="append", required=True, help="PREFIX of the dev set (repeatable)")
    p.add_argument("--exclude", action="append", default=[],
                   help="held-out FILE.en or FILE.de: training pairs whose English (German) side, normalised, "
                        "equals a line of it are left out (repeatable)")
    p.add_argument("--direction", choices=("en-de", "de-en"), default="en-de",
                   help="de-en: WORK/direction.json makes German the source (train.py, export.py)")
    p.add_argument("--spm", required=True, help="directory with joint.spm (or an exported model's source.spm) and "
                                                "vocab.json")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--out", required=True)
    corpus_args(p)
    p = sub.add_parser("layout")
    p.add_argument("--work", required=True)
    corpus_args(p)
    p = sub.add_parser("unpack")
    p.add_argument("--pack", required=True)
    p.add_argument("--work", required=True)
    p = sub.add_parser("out")
    p.add_argument("--work", default=".train-gpu")
    p.add_argument("--ckpt", default="")
    p.add_argument("--out", required=True)
    p.add_argument("--last", type=int, default=1,
                   help="the mean of the newest N checkpoints instead of the newest (N from dev_average.py)")
    p.add_argument("--first", type=int, default=0, help="first part written")
    p.add_argument("--count", type=int, default=4, help="parts written (4 x 15 MiB fit the 64 MiB that come back)")
    p = sub.add_parser("in")
    p.add_argument("--parts", action="append", required=True)
    p.add_argument("--work", required=True)
    a = ap.parse_args()
    {"pack": pack, "layout": layout, "unpack": unpack, "out": out, "in": join}[a.cmd](a)


if __name__ == "__main__":
    main()
