#!/usr/bin/env python3
"""bench/model/copy_unknown.py --daemon PATH [--models DIR] [--batch N]

Symbols the bundled models cannot write, copied from the source
("copy_unknown", docs/api.md): BLEU and chrF of the held-out test sets
(tests/data/en_de_test, en_de_general, en_de_dialogue; English->German and
German->English) with the copy (the default) and without ("copy_unknown":
false), the lines whose translation changed, and on a set of sentences
full of such symbols (currency signs, emoji, letters the vocabulary lacks)
how many of the source's unknown symbols the translation keeps. Needs
sacrebleu (tools/requirements.txt: tools/setup_venv.sh, then run it with
tools/.venv/bin/python). Prints a markdown table and one JSON line.
"""
import argparse
import http.client
import json
import os
import sys

import sacrebleu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "load"))
import td_daemon  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETS = ["en_de_test", "en_de_general", "en_de_dialogue"]
SYMBOLS = {
    "en-de": ["5 € © 2024", "The price is 5 € per month.", "I love 😀 more than 😢.",
              "Øystein and Zoë met in Kraków.", "€, £ and ¥ are currencies.",
              "Price: 10 €, copyright ©, smile 😀.", "Press ⌘ and ⌥ together.",
              "The symbols ★ and ☆ differ.", "Copy ©, not ®.", "Move ← or →.",
              "The file ☃ was sent to Zoë.", "α and β and γ", "😀 and 😢",
              "He paid 20 £ in Łódź.", "Ask Søren about the 🚀 launch.",
              "Prices rose by 3 ‰ in ¥.", "The café in Ærøskøbing opens at 9.",
              "Send ✉ to Chloë and Zoë.", "Thanks 🙏, see you in Reykjavík.",
              "Total: 1,000 € (incl. 19 % VAT) ©"],
    "de-en": ["Der Preis ist 5 € pro Monat.", "Grüße an Zoë 😀", "Drücken Sie ⌘ und ⌥ zusammen.",
              "Die Datei ☃ wurde an Zoë gesendet.", "€, £ und ¥ sind Währungen.",
              "Øystein und Zoë trafen sich in Kraków.", "Kopieren ©, nicht ®.",
              "Ich liebe 😀 mehr als 😢.", "Bewegen Sie ← oder →.", "Danke 🙏, bis bald in Reykjavík.",
              "Er zahlte 20 £ in Łódź.", "Fragen Sie Søren nach dem 🚀-Start.",
              "Das Café in Ærøskøbing öffnet um 9.", "Schicke ✉ an Chloë.",
              "Summe: 1.000 € (inkl. 19 % MwSt.) ©"],
}


def translate(conn, model, texts, copy, batch):
    out = []
    for i in range(0, len(texts), batch):
        body = json.dumps({"text": texts[i:i + batch], "model": model, "copy_unknown": copy})
        conn.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit("POST /v1/translate: %d %s" % (r.status, data[:300]))
        out += [t["text"] for t in json.loads(data)["translations"]]
    return out


def unknown_symbols(conn, model, text):
    """The source's characters that fall into <unk> pieces, from the
    daemon's own tokens and offsets."""
    body = json.dumps({"text": text, "model": model, "return_tokens": True,
                       "split_sentences": False, "copy_unknown": False})
    conn.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
    t = json.loads(conn.getresponse().read())["translations"][0]
    return [text[a:b].strip() for tok, (a, b) in zip(t["source_tokens"], t["source_offsets"])
            if tok == "<unk>" and text[a:b].strip()]


def read(name):
    with open(os.path.join(ROOT, "tests", "data", name), encoding="utf-8") as f:
        return [ln.rstrip("\n") for ln in f]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    p, port, log = td_daemon.start(a.daemon, ["--models-dir", a.models, "--cache-bytes", "0"])
    rows, res = [], {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        for s in SETS:
            for model, src, ref in (("en-de", "en", "de"), ("de-en", "de", "en")):
                srcs = read("%s/test.%s" % (s, src))
                refs = read("%s/test.%s" % (s, ref))
                on = translate(conn, model, srcs, True, a.batch)
                off = translate(conn, model, srcs, False, a.batch)
                b_on = sacrebleu.corpus_bleu(on, [refs]).score
                b_off = sacrebleu.corpus_bleu(off, [refs]).score
                c_on = sacrebleu.corpus_chrf(on, [refs]).score
                c_off = sacrebleu.corpus_chrf(off, [refs]).score
                changed = sum(x != y for x, y in zip(on, off))
                key = "%s %s" % (s, model)
                res[key] = {"bleu": [b_off, b_on], "chrf": [c_off, c_on], "changed": changed,
                            "lines": len(srcs)}
                rows.append("| %s | %s | %.2f | %.2f | %.2f | %.2f | %d of %d |" % (
                    s, model, b_off, b_on, c_off, c_on, changed, len(srcs)))
        kept = {}
        for model, texts in SYMBOLS.items():
            n = k = 0
            lost = []
            for text in texts:
                syms = unknown_symbols(conn, model, text)
                got = translate(conn, model, [text], True, 1)[0]
                for sym in syms:
                    n += 1
                    if sym in got:
                        k += 1
                    else:
                        lost.append("%s in %r -> %r" % (sym, text, got))
            kept[model] = {"symbols": n, "kept": k, "lost": lost}
    finally:
        td_daemon.stop(p, log)
    print("| test set | model | BLEU raw | BLEU copied | chrF raw | chrF copied | lines changed |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    for model, v in kept.items():
        print("%s: %d of %d unknown symbols kept; lost: %s" % (model, v["kept"], v["symbols"],
                                                               "; ".join(v["lost"]) or "none"))
    print(json.dumps({"sets": res, "symbols": kept}, ensure_ascii=False))


if __name__ == "__main__":
    main()
