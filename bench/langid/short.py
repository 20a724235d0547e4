#!/usr/bin/env python3
"""bench/langid/short.py --daemon PATH [--models DIR] [--n N] [--seed S]

Language detection on short texts: N texts of 1 to 5 words per language,
cut at random from the held-out test sets' sides (tests/data/en_de_test,
en_de_general, en_de_dialogue: test.en, test.de; never in the bundled
models' training data), asked of LibreTranslate's POST /detect of a daemon
serving the bundled models (--models-dir). Also the test sets' whole
sentences. Prints the accuracy per language and per word count as a
markdown table, and one JSON line. Standard library only.
"""
import argparse
import http.client
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "load"))
import td_daemon  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETS = ["en_de_test", "en_de_general", "en_de_dialogue"]
LANGS = ["en", "de"]


def lines(lang):
    out = []
    for s in SETS:
        with open(os.path.join(ROOT, "tests", "data", s, "test." + lang), encoding="utf-8") as f:
            out += [ln.strip() for ln in f if ln.strip()]
    return out


def spans(lang, n, rng):
    """n texts of 1..5 consecutive words (as many of each length), each with
    a letter; cut from a random line at a random place."""
    src = lines(lang)
    out = []
    while len(out) < n:
        k = len(out) % 5 + 1
        words = rng.choice(src).split()
        if len(words) < k:
            continue
        i = rng.randrange(len(words) - k + 1)
        text = " ".join(words[i:i + k])
        if re.search(r"[^\W\d_]", text):
            out.append((k, text))
    return out


def detect(conn, text):
    body = json.dumps({"q": text})
    conn.request("POST", "/detect", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        sys.exit("POST /detect %r: %d %s" % (text, r.status, data[:200]))
    got = json.loads(data)
    return got[0]["language"] if got else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sentences", type=int, default=1000,
                    help="whole test-set lines per language also asked (0: none)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    p, port, log = td_daemon.start(a.daemon, ["--models-dir", a.models, "--cache-bytes", "0"])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        res = {}
        wrong = []
        for lang in LANGS:
            per = {}
            for k, text in spans(lang, a.n, rng):
                got = detect(conn, text)
                ok = got == lang
                c = per.setdefault(k, [0, 0])
                c[0] += ok
                c[1] += 1
                if not ok and len(wrong) < 40:
                    wrong.append((lang, got, text))
            sent = [0, 0]
            for text in lines(lang)[:a.sentences]:
                sent[0] += detect(conn, text) == lang
                sent[1] += 1
            res[lang] = {"by_words": {str(k): v[0] / v[1] for k, v in sorted(per.items())},
                         "short": sum(v[0] for v in per.values()) / sum(v[1] for v in per.values()),
                         "sentences": sent[0] / sent[1] if sent[1] else None}
    finally:
        td_daemon.stop(p, log)
    print("| language | 1 word | 2 | 3 | 4 | 5 | all short | sentences |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lang in LANGS:
        r = res[lang]
        cells = ["%.1f %%" % (100 * r["by_words"][str(k)]) for k in range(1, 6)]
        print("| %s | %s | **%.1f %%** | %s |" % (
            lang, " | ".join(cells), 100 * r["short"],
            "%.1f %%" % (100 * r["sentences"]) if r["sentences"] is not None else "-"))
    print("wrong (first %d): %s" % (len(wrong), "; ".join("%s->%s %r" % w for w in wrong[:20])))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
