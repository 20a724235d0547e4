#!/usr/bin/env python3
"""bench/model/alignment.py --daemon build/transformerd [--pairs 200]

How well the attention places inline formatting (server/service/spans.c),
measured against an independent aligner (eflomal, a Bayesian word aligner
from PyPI, trained here on the bundled model's training pairs):

1. AER: the first PAIRS held-out English sentences of tests/data/en_de_test
   (4 to 40 words) translated by the daemon (the bundled en-de model,
   greedy as the daemon's default beam gives), each with the last decoder
   layer's attention averaged over heads; words are runs of non-space
   characters (as spans.c has them). Our links: each target word's source
   word (one way, as spans.c's first fallback) and the words linked both
   ways (its first choice). eflomal aligns the same (source, translation)
   pairs, trained on them and on 60,000 training pairs; its
   intersection of both directions is the sure set S, its union the
   possible set P. AER = 1 - (|A & S| + |A & P|) / (|A| + |S|).
2. Span placement: the same sentences with one word made bold (a word of
   three letters or more, chosen with seed 1), sent as one EPUB through
   /translate_file; the bold words of each translated paragraph read back
   and compared with the target words eflomal links (P) with the bold
   source word: exact (the same set), hit (the bold words are among them,
   at least one), lost (no bold word). The same for a placement by
   position only (the target words at the bold word's relative place), for
   comparison.
"""
import argparse
import http.client
import html
import io
import json
import os
import random
import re
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile

import eflomal

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "load"))
import td_daemon  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XH = "{http://www.w3.org/1999/xhtml}"


def words(t):
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", t)]


def word_at(ws, pos):
    for i, (a, b) in enumerate(ws):
        if a <= pos < b:
            return i
    return -1


def token_word(text, ws, a, b):
    b = min(b, len(text))
    while b > a and text[b - 1].isspace():
        b -= 1
    return word_at(ws, b - 1) if b > a else -1


def post(port, path, body, ctype):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, body, {"Content-Type": ctype})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        sys.exit("POST %s: %d %s" % (path, r.status, data[:300]))
    return data


def attention_links(port, src):
    """(translation, one-way links, both-way links) of the daemon's answer."""
    body = json.dumps({"text": src, "split_sentences": False, "return_attention": True,
                       "attention_layers": [-1]})
    t = json.loads(post(port, "/v1/translate", body, "application/json"))["translations"][0]
    tgt, A = t["text"], t["attention"]["cross"][0]
    sw, tw = words(src), words(tgt)
    sk = [token_word(src, sw, a, b) for a, b in t["source_offsets"]]
    tk = [token_word(tgt, tw, a, b) for a, b in t["offsets"]]
    m = [[0.0] * len(sw) for _ in tw]
    nh = len(A)
    for ti, twi in enumerate(tk):
        for si, swi in enumerate(sk):
            if twi >= 0 and swi >= 0:
                m[twi][swi] += sum(A[h][ti][si] for h in range(nh)) / nh
    t_best = [max(range(len(sw)), key=lambda j: r[j]) if sw and max(r) > 0 else -1 for r in m]
    s_best = [max(range(len(tw)), key=lambda i: m[i][j]) if tw else -1 for j in range(len(sw))]
    one = {(j, i) for i, j in enumerate(t_best) if j >= 0}
    both = {(j, i) for (j, i) in one if s_best[j] == i}
    return tgt, one, both


def eflomal_links(src, tgt, train_src, train_tgt):
    """Sure (intersection) and possible (union) links of each pair."""
    al = eflomal.Aligner()
    with tempfile.TemporaryDirectory() as d:
        fwd, rev = os.path.join(d, "fwd"), os.path.join(d, "rev")
        al.align(train_src + src, train_tgt + tgt, links_filename_fwd=fwd,
                 links_filename_rev=rev, quiet=True)
        F = open(fwd).read().split("\n")[len(train_src):len(train_src) + len(src)]
        R = open(rev).read().split("\n")[len(train_src):len(train_src) + len(src)]

    def parse(line):
        return {tuple(int(x) for x in p.split("-")) for p in line.split()}
    return [(parse(f) & parse(r), parse(f) | parse(r)) for f, r in zip(F, R)]


def aer(A, S, P):
    a = sum(len(x) for x in A)
    s = sum(len(x) for x in S)
    good = sum(len(x & y) for x, y in zip(A, S)) + sum(len(x & y) for x, y in zip(A, P))
    return 1 - good / (a + s)


def epub(paras):
    body = "".join("<p>%s<b>%s</b>%s</p>" % tuple(html.escape(x) for x in p) for p in paras)
    x = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
         "<head><title>x</title></head><body>%s</body></html>" % body)
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as f:
        f.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        f.writestr("ch.xhtml", x, zipfile.ZIP_DEFLATED)
    return z.getvalue()


def bold_words(port, paras):
    """Each paragraph's translation and the indexes of its bold words."""
    b = "XyZbench"
    body = ("--%s\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nde\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.epub\"\r\n\r\n"
            % (b, b, b)).encode() + epub(paras) + ("\r\n--%s--\r\n" % b).encode()
    ans = json.loads(post(port, "/translate_file", body, "multipart/form-data; boundary=" + b))
    url = ans["translatedFileUrl"]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("GET", url[url.index("/download_file/"):])
    z = zipfile.ZipFile(io.BytesIO(c.getresponse().read()))
    root = ET.fromstring(z.read("ch.xhtml"))
    out = []
    for p in root.iter(XH + "p"):
        text, bold, at = "", [], 0
        for node_text, is_bold in [(p.text or "", False)] + [
                x for e in p for x in ((e.text or "", e.tag == XH + "b"), (e.tail or "", False))]:
            if is_bold:
                bold.append((at, at + len(node_text)))
            text += node_text
            at += len(node_text)
        ws = words(text)
        idx = {i for i, (a, b2) in enumerate(ws) for (x, y) in bold if a < y and x < b2}
        out.append((text, idx))
    return out, ans.get("lostSpans")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "en-de"))
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--train", type=int, default=60000)
    a = ap.parse_args()
    lines = [ln.rstrip("\n") for ln in open(os.path.join(ROOT, "tests/data/en_de_test/test.en"),
                                              encoding="utf-8")]
    src = [s for s in lines if 4 <= len(s.split()) <= 40][:a.pairs]
    tr = os.path.join(ROOT, ".train", "corpus")
    with open(os.path.join(tr, "train.en"), encoding="utf-8") as f:
        train_src = [next(f).rstrip("\n") for _ in range(a.train)]
    with open(os.path.join(tr, "train.de"), encoding="utf-8") as f:
        train_tgt = [next(f).rstrip("\n") for _ in range(a.train)]
    p, port, log = td_daemon.start(a.daemon, ["--model", a.model, "--cache-bytes", "0"],
                                   prefix="td-align-")
    try:
        res = [attention_links(port, s) for s in src]
        tgt = [r[0] for r in res]
        ref = eflomal_links(src, tgt, train_src, train_tgt)
        S, P = [r[0] for r in ref], [r[1] for r in ref]
        print("| links | AER against eflomal | links per pair |")
        print("| --- | --- | --- |")
        for name, A in (("target to source (one way)", [r[1] for r in res]),
                        ("both ways", [r[2] for r in res])):
            print("| %s | %.3f | %.1f |" % (name, aer(A, S, P), sum(map(len, A)) / len(A)))
        print("| eflomal sure / possible | - | %.1f / %.1f |"
              % (sum(map(len, S)) / len(S), sum(map(len, P)) / len(P)))
        rnd = random.Random(1)
        paras, chosen = [], []
        for s in src:
            ws = words(s)
            cand = [i for i, (x, y) in enumerate(ws) if sum(ch.isalpha() for ch in s[x:y]) >= 3]
            k = rnd.choice(cand)
            chosen.append(k)
            paras.append((s[:ws[k][0]], s[ws[k][0]:ws[k][1]], s[ws[k][1]:]))
        got, lost_spans = bold_words(port, paras)
        counts = {"ours": [0, 0, 0], "by position": [0, 0, 0]}
        scored = 0
        for (text, idx), k, s, pp in zip(got, chosen, src, P):
            refw = {i for (j, i) in pp if j == k}
            if not refw:
                continue  # eflomal leaves the word unaligned: no reference
            scored += 1
            nsw, ntw = len(words(s)), len(words(text))
            lo = int(k * ntw / nsw)
            pos = set(range(lo, max(lo + 1, int((k + 1) * ntw / nsw))))
            for name, w in (("ours", idx), ("by position", pos)):
                c = counts[name]
                c[0] += w == refw
                c[1] += bool(w) and w <= refw
                c[2] += not w
        print()
        print("| placement of one bold word (%d of %d sentences with an eflomal reference)"
              " | exact | hit | lost |" % (scored, len(src)))
        print("| --- | --- | --- | --- |")
        for name, c in counts.items():
            print("| %s | %.1f %% | %.1f %% | %.1f %% |"
                  % (name, 100 * c[0] / scored, 100 * c[1] / scored, 100 * c[2] / scored))
        print("\nlostSpans answered: %s" % lost_spans)
    finally:
        td_daemon.stop(p, log)


if __name__ == "__main__":
    main()
