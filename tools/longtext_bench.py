#!/usr/bin/env python3
"""Long texts, measured (docs/benchmarks.md, "Long texts").

Usage: tools/longtext_bench.sh [--port N]   (makes tools/.venv-bleu with sacrebleu,
starts its own daemon on the bundled model and runs this)

against a running daemon (http://127.0.0.1:PORT):

1. segmentation: the held-out test set (tests/data/en_de_test/test.en)
   joined into paragraphs of 3..6 lines (seeded), each paragraph's sentence
   boundaries (the daemon's source_range) against the line junctions:
   junctions found, boundaries inside a line (printed for reading);
2. quality: the paragraphs translated split (default) and unsplit
   (split_sentences false), BLEU (sacrebleu 2.6.0, 13a, corpus) of each
   against test.de joined the same way; sentences lost or merged: per
   paragraph, the source's sentence ends (. ! ? at the end of a line) minus
   those of the translation, summed where positive; unsplit paragraphs over
   the model's positions (422) count as translated to "";
3. throughput: a 10,000-word document (the test set's lines, in order,
   paragraphs of 5 lines, as one text) in one request, against the same
   sentences sent as one list (split_sentences false), sentences/s.
"""
import argparse
import json
import random
import re
import sys
import time
import urllib.error
import urllib.request

import sacrebleu

ROOT = __file__.rsplit("/tools/", 1)[0]


def post(port, body, timeout=900):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/translate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def paragraphs(src, ref, seed=1):
    rnd = random.Random(seed)
    out, i = [], 0
    while i < len(src):
        k = rnd.randint(3, 6)
        out.append((src[i:i + k], ref[i:i + k]))
        i += k
    return out


ENDS = re.compile(r"[.!?](?=[\"')\]]*(\s|$))")


def sentence_ends(lines):
    return sum(1 for l in lines if ENDS.search(l.rstrip()[-3:] + " "))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--show", type=int, default=15, help="in-line boundaries to print")
    ap.add_argument("--document-only", action="store_true", help="only the throughput (3)")
    a = ap.parse_args()
    src = open(f"{ROOT}/tests/data/en_de_test/test.en", encoding="utf-8").read().splitlines()
    ref = open(f"{ROOT}/tests/data/en_de_test/test.de", encoding="utf-8").read().splitlines()
    paras = paragraphs(src, ref)
    texts = [" ".join(s) for s, _ in paras]
    refs = [" ".join(r) for _, r in paras]

    if a.document_only:
        return document(a, src)
    # 1 + 2: split, in requests of 32 paragraphs
    split, junctions, found, inside, shown = [], 0, 0, 0, 0
    pj, pfound = 0, 0  # junctions after a line that ends with . ! ?
    for b in range(0, len(texts), 32):
        st, r = post(a.port, {"text": texts[b:b + 32], "beam_size": a.beam,
                              "return_tokens": True})
        assert st == 200, r
        for (lines, _), text, t in zip(paras[b:b + 32], texts[b:b + 32], r["translations"]):
            split.append(t["text"])
            # line junctions in code points: the start of each line after the first
            starts, pstarts, pos = set(), set(), 0
            for l in lines[:-1]:
                pos += len(l) + 1
                starts.add(pos)
                if sentence_ends([l]):
                    pstarts.add(pos)
            bounds = {s["source_range"][0] for s in t.get("sentences", [])[1:]}
            pj += len(pstarts)
            pfound += len(pstarts & bounds)
            junctions += len(starts)
            found += len(starts & bounds)
            for p in sorted(bounds - starts):
                inside += 1
                if shown < a.show:
                    shown += 1
                    print(f"  in-line boundary: ...{text[max(0, p - 40):p]!r} | {text[p:p + 30]!r}...")
    unsplit, too_long = [], 0
    for b in range(0, len(texts), 32):
        st, r = post(a.port, {"text": texts[b:b + 32], "beam_size": a.beam,
                              "split_sentences": False})
        if st == 422:  # one paragraph over the positions: one by one
            for t in texts[b:b + 32]:
                st1, r1 = post(a.port, {"text": t, "beam_size": a.beam, "split_sentences": False})
                too_long += st1 == 422
                unsplit.append(r1["translations"][0]["text"] if st1 == 200 else "")
            continue
        assert st == 200, r
        unsplit += [t["text"] for t in r["translations"]]

    def lost(hyps):
        n = 0
        for (lines, _), h in zip(paras, hyps):
            want = sentence_ends(lines)
            got = len(ENDS.findall(h))
            n += max(0, want - got)
        return n

    src_ends = sum(sentence_ends(l) for l, _ in paras)
    print(f"paragraphs: {len(paras)} of 3..6 lines ({len(src)} lines, {src_ends} ending with . ! ?)")
    print(f"segmentation: {found}/{junctions} line junctions are boundaries "
          f"({100.0 * found / max(1, junctions):.1f}%; after a line ending with . ! ?: "
          f"{pfound}/{pj}, {100.0 * pfound / max(1, pj):.1f}%), {inside} boundaries inside a line")
    for name, hyps in (("split", split), ("unsplit", unsplit)):
        bleu = sacrebleu.corpus_bleu(hyps, [refs])
        chrf = sacrebleu.corpus_chrf(hyps, [refs])
        print(f"{name:8s} BLEU {bleu.score:5.2f}  chrF {chrf.score:5.2f}  "
              f"sentence ends lost {lost(hyps)} of {src_ends}"
              + (f"  (422 over the positions: {too_long} paragraphs)" if name == "unsplit" else ""))

    return document(a, src)


def document(a, src):
    """3: a 10,000-word document."""
    words, lines = 0, []
    for l in src:
        if words >= 10000:
            break
        lines.append(l)
        words += len(l.split())
    doc = "\n\n".join(" ".join(lines[i:i + 5]) for i in range(0, len(lines), 5))
    t0 = time.time()
    st, r = post(a.port, {"text": doc, "beam_size": a.beam, "return_tokens": True})
    t_doc = time.time() - t0
    assert st == 200, r
    t = r["translations"][0]
    sents = [doc[s["source_range"][0]:s["source_range"][1]] for s in t["sentences"]]
    t0 = time.time()
    st, r2 = post(a.port, {"text": sents, "beam_size": a.beam, "split_sentences": False})
    t_list = time.time() - t0
    assert st == 200, r2
    differ = sum(a["text"] != b["text"] for a, b in zip(t["sentences"], r2["translations"]))
    print(f"document: {words} words, {len(doc.encode())} bytes, {len(sents)} sentences, "
          f"{r['usage']['source_tokens']} source tokens")
    print(f"  one text (split by the daemon): {t_doc:6.2f} s  {len(sents) / t_doc:7.1f} sentences/s")
    print(f"  the sentences as one list:      {t_list:6.2f} s  {len(sents) / t_list:7.1f} sentences/s")
    print(f"  sentences translated differently in the two: {differ}")


if __name__ == "__main__":
    sys.exit(main())
