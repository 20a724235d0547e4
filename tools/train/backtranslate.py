#!/usr/bin/env python3
"""tools/train/backtranslate.py STAGE [--work .train/bt]

Synthetic English->German pairs from German text that has no English twin
(back-translation), in resumable stages; every stage can be stopped and run
again, and goes on where its output ends:

  fetch      `apt-get download` of the German packages below (never installed)
             into WORK/debs, unpacked with `dpkg-deb -x` into WORK/root
  extract    WORK/mono.de: their German sentences (fortunes-de's fortunes:
             proverbs, anecdotes, jokes, quotes, poems; everyday German), one a
             line: entries split at '%', attributions ("-- ...") and ASCII art
             dropped, wrapped lines joined, split into sentences; 3 to 40 words
             with a letter, no URL, no line of the committed test sets, each
             once
  translate  WORK/bt.en: mono.de translated by models/de-en (`transformerd
             translate --beam 4`), WORK/rt.de: bt.en translated back by
             models/en-de; in chunks of --chunk lines appended as they finish
  filter     WORK/train.{en,de}: the pairs (bt.en, mono.de) whose round trip
             keeps the German (sentence chrF of rt.de against mono.de at least
             --min-chrf), and WORK/stats.json (counts, the chrF's quartiles)

The pairs are synthetic on the English side only: the German target is
human text. Training reads them as any other layout source (pack.py layout
--train WORK/train); docs/model-card.md says what was done with them.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ["fortunes-de"]
SKIP = {"asciiart"}  # pictures, not sentences


def fetch(w):
    debs = os.path.join(w, "debs")
    os.makedirs(debs, exist_ok=True)
    for p in PACKAGES:
        if not glob.glob(os.path.join(debs, p + "_*.deb")):
            subprocess.run(["apt-get", "download", p], cwd=debs, check=True)
    for deb in glob.glob(os.path.join(debs, "*.deb")):
        subprocess.run(["dpkg-deb", "-x", deb, os.path.join(w, "root")], check=True)


SENT = re.compile(r"(?<=[.!?])[\"»«“”']?\s+(?=[A-ZÄÖÜ\"»„])")


def sentences(entry):
    lines = [ln.strip() for ln in entry.split("\n")]
    lines = [ln for ln in lines if ln and not ln.startswith("--") and not ln.startswith("―")]
    text = re.sub(r"\s+", " ", " ".join(lines)).strip()
    return [s.strip() for s in SENT.split(text) if s.strip()]


def extract(w):
    held = set()
    for f in glob.glob(os.path.join(ROOT, "tests", "data", "*", "test.de")):
        held |= {ln.strip() for ln in open(f, encoding="utf-8")}
    seen, out = set(), []
    for f in sorted(glob.glob(os.path.join(w, "root", "usr", "share", "games", "fortunes", "de",
                                           "*"))):
        name = os.path.basename(f)
        if os.path.islink(f) or "." in name or name in SKIP:
            continue
        text = open(f, encoding="utf-8", errors="replace").read()
        for entry in re.split(r"^%\s*$", text, flags=re.M):
            for s in sentences(entry):
                n = len(s.split())
                if not 3 <= n <= 40 or not re.search(r"[A-Za-zÄÖÜäöüß]", s) or "://" in s:
                    continue
                if s in seen or s in held:
                    continue
                seen.add(s)
                out.append(s)
    with open(os.path.join(w, "mono.de"), "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in out)
    print("extract: %d German sentences" % len(out))


def count(path):
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def translate_file(src, dst, model, chunk, daemon):
    lines = open(src, encoding="utf-8").read().split("\n")[:-1]
    done = count(dst)
    while done < len(lines):
        part = lines[done:done + chunk]
        r = subprocess.run([daemon, "translate", "--model", model, "--beam", "4"],
                           input="\n".join(part) + "\n", capture_output=True, text=True,
                           check=True)
        got = r.stdout.split("\n")[:len(part)]
        if len(got) != len(part):
            sys.exit("translate: %d lines back for %d" % (len(got), len(part)))
        with open(dst, "a", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in got)
        done += len(part)
        print("%s: %d of %d" % (os.path.basename(dst), done, len(lines)), flush=True)


def translate(w, a):
    translate_file(os.path.join(w, "mono.de"), os.path.join(w, "bt.en"),
                   os.path.join(ROOT, "models", "de-en"), a.chunk, a.daemon)
    translate_file(os.path.join(w, "bt.en"), os.path.join(w, "rt.de"),
                   os.path.join(ROOT, "models", "en-de"), a.chunk, a.daemon)


def filt(w, a):
    import sacrebleu
    de = open(os.path.join(w, "mono.de"), encoding="utf-8").read().split("\n")[:-1]
    en = open(os.path.join(w, "bt.en"), encoding="utf-8").read().split("\n")[:-1]
    rt = open(os.path.join(w, "rt.de"), encoding="utf-8").read().split("\n")[:-1]
    n = min(len(de), len(en), len(rt))
    scores = [sacrebleu.sentence_chrf(rt[i], [de[i]]).score for i in range(n)]
    keep = [i for i in range(n) if scores[i] >= a.min_chrf]
    with open(os.path.join(w, "train.en"), "w", encoding="utf-8") as fe, \
            open(os.path.join(w, "train.de"), "w", encoding="utf-8") as fd:
        for i in keep:
            fe.write(en[i] + "\n")
            fd.write(de[i] + "\n")
    q = sorted(scores)
    stats = {"sentences": len(de), "translated": n, "kept": len(keep), "min_chrf": a.min_chrf,
             "chrf_quartiles": [round(q[int(k * (n - 1) / 4)], 1) for k in range(5)] if n else []}
    json.dump(stats, open(os.path.join(w, "stats.json"), "w"), indent=1)
    print(json.dumps(stats))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stage", choices=["fetch", "extract", "translate", "filter"])
    ap.add_argument("--work", default=os.path.join(ROOT, ".train", "bt"))
    ap.add_argument("--daemon", default=os.path.join(ROOT, "build", "transformerd"))
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--min-chrf", type=float, default=55.0)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    {"fetch": lambda: fetch(a.work), "extract": lambda: extract(a.work),
     "translate": lambda: translate(a.work, a), "filter": lambda: filt(a.work, a)}[a.stage]()


if __name__ == "__main__":
    main()
