#!/usr/bin/env python3
"""tools/make_langid_profiles.py [--work .train] [--out models/langid] [--min 3]
tools/make_langid_profiles.py --golden tests/data/langid_golden.jsonl [--out models/langid]

The word and character profiles of English and German that transformerd's
detector scores short texts with (server/service/langid.c, "profiles"),
counted from the bundled models' own training text: stage 1's catalogue
and description pairs (.train/corpus/train.{en,de}) and the Ding
dictionary's (.train/corpus/ding.{en,de}); tools/train/README.md, stages 0,
1 and 1b, makes them. Every pair one of whose sides is, normalised, a line
of a committed test set (tests/data/*/test.{en,de}) is left out, so that
bench/langid/short.py measures on held-out text.

Per language, one gzip'd text file OUT/<code>.lid.gz:
    transformerd-langid 1 <code>
    words <tokens counted>
    chars <character unigrams counted>
    w <count> <word, lower case>
    c <count> <word as written>
    g <count> <character n-gram, 1..4, of "<word>">
Words are letter runs (Python's [^\\W\\d_]+), joined by one ' ’ or -;
entries counted fewer than --min times are left out (the totals count
them). Sorted, so that the same corpus gives the same bytes.

--golden: the reference of the scoring (server/service/lidprof.h's model,
written out here once more in Python: load(), score()) over the committed
profiles, for a list of texts: one JSON line per text with its words and
each language's log-likelihood; tests/test_lidprof.c compares the C
scorer with it.
"""
import argparse
import collections
import gzip
import json
import math
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
ORDER = 4


def norm(s):
    return " ".join(s.split()).lower()


def held_out():
    out = set()
    data = os.path.join(ROOT, "tests", "data")
    for d in sorted(os.listdir(data)):
        for lang in ("en", "de"):
            p = os.path.join(data, d, "test." + lang)
            if os.path.exists(p):
                with open(p, encoding="utf-8") as f:
                    out |= {norm(x) for x in f if x.strip()}
    return out


def pairs(prefix, skip):
    with open(prefix + ".en", encoding="utf-8") as fe, open(prefix + ".de", encoding="utf-8") as fd:
        for e, d in zip(fe, fd):
            if e.strip() and d.strip() and norm(e) not in skip and norm(d) not in skip:
                yield e, d


def profile(texts):
    cased = collections.Counter()
    for t in texts:
        cased.update(WORD.findall(t))
    lower = collections.Counter()
    for w, c in cased.items():
        lower[w.lower()] += c
    grams = collections.Counter()
    for w, c in lower.items():
        x = "<" + w + ">"
        for n in range(1, ORDER + 1):
            for i in range(len(x) - n + 1):
                grams[x[i:i + n]] += c
    chars = sum(c for g, c in grams.items() if len(g) == 1)
    return sum(lower.values()), chars, lower, cased, grams


def write(path, code, prof, least):
    words, chars, lower, cased, grams = prof
    with gzip.GzipFile(path, "wb", mtime=0) as z:
        z.write(("transformerd-langid 1 %s\nwords %d\nchars %d\n" % (code, words, chars)).encode())
        for tag, table in (("w", lower), ("c", cased), ("g", grams)):
            for k in sorted(k for k, c in table.items() if c >= least):
                z.write(("%s %d %s\n" % (tag, table[k], k)).encode("utf-8"))


def load(path):
    tabs = {"w": {}, "c": {}, "g": {}}
    tot = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        next(f)
        for line in f:
            tag, rest = line.rstrip("\n").split(" ", 1)
            if tag in ("words", "chars"):
                tot[tag] = float(rest)
            else:
                count, key = rest.split(" ", 1)
                tabs[tag].setdefault(key, int(count))
    return tot, tabs


def log_add(a, b):
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    return max(a, b) + math.log1p(math.exp(-abs(a - b)))


def score(prof, text):
    tot, t = prof
    g = t["g"]
    lam = (0.05, 0.15, 0.3, 0.5)
    words = WORD.findall(text)[:256]
    s = 0.0
    for w in words:
        w = w[:64]
        lw = "".join(ch.lower() for ch in w)
        x = "<" + lw + ">"
        lc = 0.0
        for i in range(1, len(x)):
            p = 0.0
            for n in range(1, ORDER + 1):
                if i - n + 1 < 0:
                    break
                gram = x[i - n + 1:i + 1]
                if n == 1:
                    p += lam[0] * (g.get(gram, 0) + 1) / (tot["chars"] + 300)
                else:
                    hc = g.get(gram[:-1], 0)
                    p += lam[n - 1] * (g.get(gram, 0) / hc if hc else 0.0)
            lc += math.log(p)
        lo = t["w"].get(lw, 0)
        lower = log_add(math.log(lo) if lo else -math.inf, math.log(1000.0) + lc) - \
            math.log(tot["words"] + 1000)
        c = t["c"].get(w, 0)
        s += log_add(math.log(c) if c else -math.inf, math.log(100.0) + lower) - \
            math.log(tot["words"] + 100)
    return len(words), s


GOLDEN_TEXTS = [
    "Hello", "Hallo", "I am hungry.", "in", "Die Datei wurde gespeichert.",
    "Save the file before closing.", "Straße", "STRASSE", "Größe ändern",
    "don't", "l'été", "e-mail", "E-Mail-Adresse", "rock’n’roll", "well--known",
    "-leading", "trailing-", "it's", "x", "ÄÖÜ äöü ß", "naïve café", "Ελληνικά",
    "日本語のテキスト", "emoji 😀 here", "1234", "%s", "", "   ", "a1b2c3",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
    "The quick brown fox jumps over the lazy dog.", "word" * 80,
    " ".join(["Wort"] * 300), "Tab\tand\nnewline", "Ünïcödé wörds mïxed",
    "supercalifragilisticexpialidocious", "Donaudampfschifffahrtsgesellschaftskapitän",
]


def golden(out_dir, path):
    profs = {c: load(os.path.join(out_dir, c + ".lid.gz")) for c in ("en", "de")}
    with open(path, "w", encoding="utf-8") as f:
        for text in GOLDEN_TEXTS:
            row = {"text": text}
            for c, p in profs.items():
                row["words"], row[c] = score(p, text)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print("%s: %d texts" % (path, len(GOLDEN_TEXTS)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "langid"))
    ap.add_argument("--min", type=int, default=3)
    ap.add_argument("--golden", metavar="JSONL")
    a = ap.parse_args()
    if a.golden:
        golden(a.out, a.golden)
        return
    skip = held_out()
    got = []
    for part in ("train", "ding"):
        got += list(pairs(os.path.join(a.work, "corpus", part), skip))
    os.makedirs(a.out, exist_ok=True)
    for i, code in enumerate(("en", "de")):
        p = profile(x[i] for x in got)
        path = os.path.join(a.out, code + ".lid.gz")
        write(path, code, p, a.min)
        print("%s: %d pairs, %d words, %d entries kept, %d bytes" % (
            path, len(got), p[0], sum(1 for t in p[2:] for c in t.values() if c >= a.min),
            os.path.getsize(path)))


if __name__ == "__main__":
    main()
