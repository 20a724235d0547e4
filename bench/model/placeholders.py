#!/usr/bin/env python3
"""bench/model/placeholders.py --daemon build/transformerd

Placeholders in catalogue strings: kept by the model as they are, or
protected before tokenization and restored after? Every held-out line of
tests/data/en_de_test and en_de_general with a printf, Python, Qt or brace
placeholder (the patterns of server/service/catalog.c), translated by the
bundled en-de model two ways:
  - as it is (what /translate_file does: the translation is checked to keep
    the same multiset of placeholders, else the unit is kept);
  - protected: each placeholder replaced by a character of Unicode's
    private use area (U+E000 + k: no piece of the vocabulary, so an unknown
    piece the model writes as <unk> and copy_unknown copies back by its
    attention), restored after (each character found once).
Prints how many lines keep their placeholders either way.
"""
import argparse
import http.client
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "load"))
import td_daemon  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PH = re.compile(r"%(?:\([^)]*\))?(?:\d+\$)?[-+#0']*\d*(?:\.\d+)?[hlLqjzt]*[diouxXeEfFgGaAcspn]"
                r"|%L?\d+|\{\w*\}")
PUA = [chr(0xE000 + k) for k in range(32)]


def translate(port, texts):
    out = []
    for i in range(0, len(texts), 32):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("POST", "/v1/translate", json.dumps({"text": texts[i:i + 32]}),
                  {"Content-Type": "application/json"})
        out += [t["text"] for t in json.loads(c.getresponse().read())["translations"]]
    return out


def protect(s):
    ph = []

    def sub(m):
        ph.append(m.group(0))
        return PUA[len(ph) - 1] if len(ph) <= len(PUA) else m.group(0)
    return PH.sub(sub, s), ph


def restore(t, ph):
    for k, v in enumerate(ph[:len(PUA)]):
        if t.count(PUA[k]) == 1:
            t = t.replace(PUA[k], v)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "en-de"))
    a = ap.parse_args()
    lines = []
    for name in ("en_de_test", "en_de_general"):
        with open(os.path.join(ROOT, "tests", "data", name, "test.en"), encoding="utf-8") as f:
            lines += [ln.rstrip("\n") for ln in f if PH.search(ln.replace("%%", ""))]
    p, port, log = td_daemon.start(a.daemon, ["--model", a.model, "--cache-bytes", "0"],
                                   prefix="td-ph-")
    try:
        plain = translate(port, lines)
        prot = [protect(ln) for ln in lines]
        guarded = [restore(t, ph) for t, (_, ph) in zip(translate(port, [s for s, _ in prot]), prot)]
    finally:
        td_daemon.stop(p, log)
    same = lambda src, out: sorted(PH.findall(out)) == sorted(PH.findall(src))
    print("| %d held-out lines with placeholders | placeholders kept |" % len(lines))
    print("| --- | --- |")
    print("| as they are (checked after) | %d |" % sum(same(s, o) for s, o in zip(lines, plain)))
    print("| protected (private-use characters, copied back) | %d |"
          % sum(same(s, o) for s, o in zip(lines, guarded)))


if __name__ == "__main__":
    main()
