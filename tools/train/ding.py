#!/usr/bin/env python3
"""Stage 1b (optional): general-domain pairs from Debian's `trans-de-en` package, the Ding German-English
dictionary (Frank Richter, TU Chemnitz; GPL-2+): 206,000 entries, from single words to example sentences.

The Debian catalogues of stage 1 teach software strings ("The file could not be opened."); this adds the
everyday words and sentences they lack ("Das Wetter ist sehr drückend. :: The weather is very close.").

Format of /usr/share/trans/de-en (one entry a line, "#" comments):
    German senses :: English senses
senses are separated by " | " (the same count on both sides, aligned), synonyms inside a sense by "; ".
We take each aligned sense once, its first synonym on each side, and remove the annotations: {f} {pl} {vt}
(grammar), [comp.] [Br.] (domain, region), (...) glosses, /ZOB/ abbreviations, and the placeholders
etw. jdm. jdn. jds. jd. / sth. sb. sb.'s. Pairs are dropped when a side is empty, has no letter, is over
150 characters, or when a side still holds markup. De-duplicated by the English side (first kept).

Held out: WORK/corpus/ding_test.{en,de} (500 pairs of at least four words on both sides: a general-domain
test set, seed 20261129), and no training pair shares a normalised source with it or with the stage-1
dev/test sets.

Writes WORK/corpus/ding.{en,de} (training pairs), ding_phrases.{en,de} (the training pairs of 3+ words a
side) and ding_test.{en,de}; the .deb is fetched with `apt-get download trans-de-en` into WORK/debs when
missing (never installed).

Usage: tools/.venv/bin/python tools/train/ding.py [--work .train]
"""

import argparse
import glob
import os
import random
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PLACEHOLDERS = re.compile(r"(?<!\w)(etw\.|jdm\.|jdn\.|jds\.|jd\.|sth\.|sb\.'s|sb\.|so\.|s\.o\.)(?!\w)")
ANNOT = [re.compile(r"\{[^{}]*\}"), re.compile(r"\[[^\[\]]*\]"), re.compile(r"\([^()]*\)"),
         re.compile(r"/[^/ ][^/]*/")]


def clean(s):
    for r in ANNOT:
        s = r.sub(" ", s)
    s = PLACEHOLDERS.sub(" ", s)
    s = re.sub(r"\s+", " ", s).strip(" ,;")
    return s


def normkey(s):
    return "".join(ch for ch in s.lower() if ch.isalnum())


def entries(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#") or "::" not in line:
                continue
            de, en = line.rstrip("\n").split("::", 1)
            de_s, en_s = de.split(" | "), en.split(" | ")
            if len(de_s) != len(en_s):
                continue
            for d, e in zip(de_s, en_s):
                d, e = clean(d.split("; ")[0]), clean(e.split("; ")[0])
                if not d or not e or len(d) > 150 or len(e) > 150:
                    continue
                if not any(ch.isalpha() for ch in e) or not any(ch.isalpha() for ch in d):
                    continue
                if any(ch in d + e for ch in "{}[]<>|"):
                    continue
                yield e, d


def fetch(work):
    debs = glob.glob(os.path.join(work, "debs", "trans-de-en_*.deb"))
    if not debs:
        os.makedirs(os.path.join(work, "debs"), exist_ok=True)
        subprocess.run(["apt-get", "download", "trans-de-en"], cwd=os.path.join(work, "debs"), check=True)
        debs = glob.glob(os.path.join(work, "debs", "trans-de-en_*.deb"))
    tmp = tempfile.mkdtemp(prefix="ding-")
    subprocess.run(["dpkg-deb", "-x", debs[0], tmp], check=True)
    return os.path.join(tmp, "usr", "share", "trans", "de-en")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--test", type=int, default=500)
    a = ap.parse_args()
    c = os.path.join(a.work, "corpus")
    held = set()
    for split in ("dev", "test"):
        with open(os.path.join(c, f"{split}.en"), encoding="utf-8") as f:
            held.update(normkey(l) for l in f)
    pairs, seen = [], set()
    for e, d in entries(fetch(a.work)):
        k = normkey(e)
        if k in seen or k in held:
            continue
        seen.add(k)
        pairs.append((e, d))
    rng = random.Random(a.seed)
    sentence_like = [i for i, (e, d) in enumerate(pairs) if len(e.split()) >= 4 and len(d.split()) >= 4]
    test = set(rng.sample(sentence_like, a.test))
    with open(os.path.join(c, "ding.en"), "w", encoding="utf-8") as fe, \
            open(os.path.join(c, "ding.de"), "w", encoding="utf-8") as fd, \
            open(os.path.join(c, "ding_test.en"), "w", encoding="utf-8") as te, \
            open(os.path.join(c, "ding_test.de"), "w", encoding="utf-8") as td:
        for i, (e, d) in enumerate(pairs):
            (te if i in test else fe).write(e + "\n")
            (td if i in test else fd).write(d + "\n")
    # the phrase-like training pairs (3+ words a side: "Thank you very much!", "How are you?"), for a mixture
    # that gives everyday phrases more weight than single words (docs/model-card.md, "The 6+2 model")
    phrases = 0
    with open(os.path.join(c, "ding_phrases.en"), "w", encoding="utf-8") as fe, \
            open(os.path.join(c, "ding_phrases.de"), "w", encoding="utf-8") as fd:
        for i, (e, d) in enumerate(pairs):
            if i not in test and len(e.split()) >= 3 and len(d.split()) >= 3:
                fe.write(e + "\n")
                fd.write(d + "\n")
                phrases += 1
    words = sum(len(d.split()) for i, (e, d) in enumerate(pairs) if i not in test)
    print(f"ding: {len(pairs) - len(test)} training pairs ({words} German words), {len(test)} held out; "
          f"{len(sentence_like)} sentence-like; {phrases} phrase-like training pairs in ding_phrases.*")


if __name__ == "__main__":
    main()
