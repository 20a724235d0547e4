#!/usr/bin/env python3
"""Stage 1e: conversational English-German pairs from the translated dialogue of the games Debian ships.

The catalogue corpus (corpus.py) is software strings, the documentation corpus (docs_corpus.py) manual prose;
neither holds people speaking to each other ("Who goes there?", "Thank you, my friend.", "We must hurry!").
Story games translate their dialogue with gettext: the German catalogues of the packages in
tools/train/games-packages.txt (fetched by tools/train/fetch_games.sh into WORK/games-debs, never installed) are
read with corpus.py's .mo parser and cleaned like the catalogues:

  * a context prefix "word^" of the English side (Wesnoth's "female^...", "race^Human") is removed;
  * multi-line entries become line pairs when the line counts agree (corpus.explode), then sentence pairs when
    both sides have the same number of sentences (corpus.sent_pairs); accelerators and white space as corpus.py;
  * corpus.keep() with a 250-character limit; an English single word is dropped when its German side differs
    only in case or is one capitalised word too: character, unit and place names, and the nouns (German
    capitalises every noun) that the dictionary pairs already hold;
  * de-duplicated, at most three translations per source.

Held out: dev (--n-dev) and test (--n-test) drawn with --seed from real sentences (four or more words on both
sides, capital start, final . ! or ?) whose normalised source is in none of the committed test sets
(tests/data/en_de_test, tests/data/en_de_general) nor WORK/corpus/{train,dev,test,ding}.en nor
WORK/docs/{train,dev,test}.en, when those exist; no training pair shares a normalised source with a held-out
one. Writes WORK/dialogue/{train,dev,test}.{en,de}, provenance.tsv (stage 1's columns: package, origin,
catalogues, pairs kept, licence of the package's copyright file) and stats.json; with --test-out also the test
set to PATH.{en,de}.

Usage: tools/.venv/bin/python tools/train/dialogue.py [--work .train] [--test-out tests/data/en_de_dialogue/test]
"""
import argparse
import collections
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus as C  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTEXT_RE = re.compile(r"^[\w .-]{1,40}\^")
SENTENCE_RE = re.compile(r"^[\"'(]?[A-ZÄÖÜ].*[.!?][\"')]?$")


def clean_pairs(raw):
    """-> list of (src, tgt, why) where why is None for a kept pair."""
    out = []
    for s0, t0 in raw:
        s0 = CONTEXT_RE.sub("", s0)
        t0 = CONTEXT_RE.sub("", t0)
        for s1, t1 in C.explode(s0, t0):
            s1, t1 = C.strip_accel(C.norm_space(s1), C.norm_space(t1))
            for s, t in C.sent_pairs(s1, t1):
                s, t = s.strip(), t.strip()
                why = C.keep(s, t, max_len=250)
                if not why and len(s.split()) == 1 and (s.lower() == t.lower() or (s[:1].isupper() and t[:1].isupper()
                                                                                  and len(t.split()) == 1)):
                    why = "single_word"
                out.append((s, t, why))
    return out


def is_sentence(s, t):
    return (len(s.split()) >= 4 and len(t.split()) >= 4 and SENTENCE_RE.match(s) and SENTENCE_RE.match(t)
            and not re.search(r"[<>{}$@\\|_=]", s + t))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--n-dev", type=int, default=500)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--test-out", default="")
    ap.add_argument("--debs", default="games-debs", help="the packages' directory under WORK")
    ap.add_argument("--out", default="dialogue", help="the output directory under WORK")
    ap.add_argument("--all-formats", action="store_true",
                    help="read .po catalogues and Lua locale tables too, not only gettext .mo files")
    ap.add_argument("--edu-formats", action="store_true",
                    help="as --all-formats, and compiled Qt catalogues (NAME_de.qm) and Tux Paint's stamp "
                    "descriptions too (stage 1g: the children's programs of tools/train/everyday-packages.txt)")
    ap.add_argument("--exclude", action="append", default=[],
                    help="a file of English lines (another corpus's held-out sets): no pair of this corpus, train "
                    "or held out, has one of their normalised sources (repeatable)")
    a = ap.parse_args()
    debdir = os.path.join(a.work, a.debs)
    out_dir = os.path.join(a.work, a.out)
    os.makedirs(out_dir, exist_ok=True)

    drops = collections.Counter()
    pairs = collections.OrderedDict()  # (src, tgt) -> package
    prov = collections.OrderedDict()  # package -> [licence, catalogues, pairs]
    raw_total = 0
    catalogues = (C.EDU_CATALOGUE_RE if a.edu_formats else C.GERMAN_CATALOGUE_RE if a.all_formats
                  else C.MO_CATALOGUE_RE)
    for pkg, _origin, lic, name, data in C.deb_sources(debdir, catalogues):
        rec = prov.setdefault(pkg, [lic, 0, 0])
        rec[1] += 1
        for s, t, why in clean_pairs(C.read_catalogue(name, data)):
            raw_total += 1
            if why:
                drops[why] += 1
            elif (s, t) in pairs:
                drops["duplicate"] += 1
            else:
                pairs[(s, t)] = pkg
                rec[2] += 1
    if not pairs:
        sys.exit(f"dialogue: no pairs (run tools/train/fetch_games.sh first; looked in {debdir})")
    for p in a.exclude:
        if not os.path.exists(p):
            sys.exit(f"dialogue: --exclude {p}: no such file")
    excluded = C.read_keys(a.exclude)

    by_src = collections.OrderedDict()
    for (s, t) in pairs:
        lst = by_src.setdefault(s, [])
        if len(lst) < 3:
            lst.append(t)
        else:
            drops["per_source_cap"] += 1

    seen = C.read_keys([os.path.join(ROOT, "tests", "data", "en_de_test", "test.en"),
                      os.path.join(ROOT, "tests", "data", "en_de_general", "test.en")] +
                     [os.path.join(a.work, "corpus", f"{n}.en") for n in ("train", "dev", "test", "ding")] +
                     [os.path.join(a.work, "docs", f"{n}.en") for n in ("train", "dev", "test")])
    groups = collections.OrderedDict()
    for s in by_src:
        if C.normkey(s) in excluded:
            drops["held_out_elsewhere"] += len(by_src[s])
            continue
        groups.setdefault(C.normkey(s), []).append(s)
    eligible = sorted(k for k, ss in groups.items()
                      if k and k not in seen and any(is_sentence(s, by_src[s][0]) for s in ss))
    rng = random.Random(a.seed)
    rng.shuffle(eligible)
    held = eligible[:a.n_dev + a.n_test]

    def pick(k):
        s = next(s for s in groups[k] if is_sentence(s, by_src[s][0]))
        return s, by_src[s][0]

    splits = {"dev": [pick(k) for k in held[:a.n_dev]], "test": [pick(k) for k in held[a.n_dev:]]}
    held = set(held)
    train = [(s, t) for s, ts in by_src.items() if C.normkey(s) not in held and C.normkey(s) not in excluded
             for t in ts]
    random.Random(a.seed + 1).shuffle(train)
    splits["train"] = train
    C.write_splits(out_dir, splits)
    if a.test_out:
        os.makedirs(os.path.dirname(a.test_out), exist_ok=True)
        for i, lang in enumerate(("en", "de")):
            with open(f"{a.test_out}.{lang}", "w", encoding="utf-8") as f:
                f.writelines(p[i] + "\n" for p in splits["test"])
    with open(os.path.join(out_dir, "provenance.tsv"), "w", encoding="utf-8") as f:
        f.write("package\torigin\tcatalogues\tpairs_kept\tlicence\n")
        for pkg, (lic, ncat, npairs) in prov.items():
            kind = "children's programs" if a.edu_formats else "game dialogue"
            f.write(f"{pkg}\tdownloaded ({kind}, tools/train/dialogue.py)\t{ncat}\t{npairs}\t{lic}\n")
    stats = {"raw_pairs": raw_total, "unique_clean_pairs": len(pairs), "sources": len(by_src),
             "dropped": dict(drops), "train": len(train), "dev": len(splits["dev"]), "test": len(splits["test"]),
             "train_en_words": sum(len(s.split()) for s, _ in train),
             "train_de_words": sum(len(t.split()) for _, t in train), "seed": a.seed,
             "pairs_per_package": {p: r[2] for p, r in prov.items()}, "excluded_files": a.exclude}
    with open(os.path.join(out_dir, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
        f.write("\n")
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
