#!/usr/bin/env python3
"""tests/cli_api_same.py DAEMON

The ctest "cli_api_same" test (label integration): `transformerd translate`
and POST /v1/translate go through one text pipeline
(server/service/pipeline.c), so for the same options they answer byte for
byte the same. Checked on the first 500 lines of the bundled model's
held-out set (tests/data/en_de_test/test.en) and on a set of texts with
symbols the model has no piece for (EUR, (c), emoji), placeholders,
several sentences and blank ones, under four sets of options: the
defaults, greedy (--beam 1 / "beam_size": 1), no sentence split
(--no-split / "split_sentences": false) and the raw output
(--no-copy-unknown / "copy_unknown": false), and a glossary (--glossary
FILE / "glossary": the id of the same entries made through /v2/glossaries)
on the held-out lines with a term and the set; and an Argos Translate
package's (its language from metadata.json) on 100 lines and the set. And
documents: `transformerd
translate-file` (the documents' entry point, server/service/docrun.c) and
LibreTranslate's POST /translate_file answer the same bytes for a .txt,
.srt, .vtt, .po, .md and .html file with the same symbols. The special set must also hold
its symbols in the translation (the copy happened, not only the same
loss on both sides).

Standard library only. Exit 0 passed, 1 failed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

from harness import Daemon

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "en-de")
# an Argos Translate package: its languages from metadata.json, not its name
PACKAGE = os.path.join(ROOT, "tests", "data", "argos", "translate-en_de-1_0")
HELD_OUT = os.path.join(ROOT, "tests", "data", "en_de_test", "test.en")

# Texts with what a plain pipeline loses: symbols without a piece in the
# model's vocabulary, placeholders, several sentences, blanks.
SPECIAL = [
    "The price is 50 € per month 😀.",
    "Copyright © 2024 The Authors. All rights reserved.",
    "Save {0} files to %s? Press Ctrl+S.",
    "The file %1$s has %2$d lines.",
    "Hello ${name}, you have {count} new messages 📬.",
    "Open the menu. Then click “Save” → “Export…” ✓.",
    "Temperature: 21 °C ± 0.5 ≈ 70 °F 🌡️.",
    "Visit https://example.org/a?b=1&c=2 for details.",
    "   ",
    "",
    "The café costs 3 € — cheap! Isn't it? Yes.",
    "Use <b>bold</b> and &amp; entities ™ ®.",
    # abbreviations: where English's sentence rules do not break (the split's language)
    "Mr. Smith met Dr. Brown at 5 p.m. on Monday. They talked e.g. about the weather.",
    "The U.S. Army and Prof. Jones arrived. Approx. 20 people came, i.e. not many.",
]
# symbols the model cannot write that the copy must bring back
COPIED = ["€", "😀", "©", "📬", "🌡"]


def start(daemon, tmp, model=MODEL):
    """The daemon serving model (tests/harness.py's): one worker, beams up
    to 16, its glossaries under tmp."""
    return Daemon(daemon, "--model", model, "--threads", "1", "--workers", "1", "--max-beam", "16",
                  "--state-dir", os.path.join(tmp, "state"))


def stopped_ok(d):
    """Ends d; whether it exited 0 (said when not)."""
    rc = d.stop(wait_s=60)
    if rc != 0:
        print("cli_api_same: FAIL: daemon exit status %d after SIGTERM" % rc)
    return rc == 0


def api(port, texts, extra):
    """The API's translations of texts, 50 a request."""
    out = []
    for i in range(0, len(texts), 50):
        body = dict(extra, text=texts[i:i + 50])
        req = urllib.request.Request("http://127.0.0.1:%d/v1/translate" % port,
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            out += [t["text"] for t in json.load(r)["translations"]]
    return out


# a glossary whose targets the model does not write on its own, so that
# its placement shows (the CLI's --glossary file, the API's glossary id)
GLOSSARY = "file\tDokument\nuser\tAnwender\nfolder\tVerzeichnis\nwindow\tFensterchen\n"


def make_glossary(port):
    body = {"name": "cli-api-same", "source_lang": "en", "target_lang": "de",
            "entries": GLOSSARY, "entries_format": "tsv"}
    req = urllib.request.Request("http://127.0.0.1:%d/v2/glossaries" % port,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["glossary_id"]


def cli(daemon, texts, args, model=MODEL):
    """The command line's translations of texts, one a line."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("TRANSFORMERD_MODEL", None)
    p = subprocess.run([daemon, "translate", "--model", model, "--threads", "1"] + args,
                       input=("".join(t + "\n" for t in texts)).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=600)
    if p.returncode != 0:
        raise SystemExit("cli_api_same: FAIL: translate exit %d: %s" %
                         (p.returncode, p.stderr.decode(errors="replace")))
    out = p.stdout.decode().split("\n")
    if out[-1] != "" or len(out) != len(texts) + 1:
        raise SystemExit("cli_api_same: FAIL: translate wrote %d lines for %d" %
                         (len(out) - 1, len(texts)))
    return out[:-1]


FILES = {
    "notes.txt": "The price is 50 € per month 😀.\n  Save {0} files?  \r\n\nOpen the menu. Then click Save.\n",
    "film.srt": "1\n00:00:01,000 --> 00:00:02,000\n<i>The price is 50 €.</i>\n\n"
                "2\n00:00:03,000 --> 00:00:04,000\n- Open the window.\n- Close the door.\n",
    "film.vtt": "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n<v Anna>Hello <b>world</b> 😀.\n",
    "app.po": 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
              'msgid "Save %s files?"\nmsgstr ""\n\nmsgid "Copyright © 2024"\nmsgstr ""\n',
    "guide.md": "# The price\n\nIt costs **50 €** per month. See [the menu](https://example.org).\n",
    "page.html": "<html><body><p>The price is <b>50 €</b> per month 😀.</p></body></html>\n",
}


def api_file(port, name, data):
    """LibreTranslate's /translate_file, then the file it links to."""
    b = "cliapisame0boundary"
    body = b"".join(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" %
                     (b, k, v)).encode() for k, v in (("source", "en"), ("target", "de")))
    body += ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n" % (b, name)).encode()
    body += data + ("\r\n--%s--\r\n" % b).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/translate_file" % port, data=body,
                                 headers={"Content-Type": "multipart/form-data; boundary=" + b})
    with urllib.request.urlopen(req, timeout=300) as r:
        url = json.load(r)["translatedFileUrl"]
    path = url[url.index("/download_file/"):]
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=60) as r:
        return r.read()


def cli_file(daemon, tmp, name, data):
    src, out = os.path.join(tmp, name), os.path.join(tmp, "out-" + name)
    with open(src, "wb") as f:
        f.write(data)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("TRANSFORMERD_MODEL", None)
    p = subprocess.run(["setpriv", "--pdeathsig", "KILL", daemon, "translate-file", src, out,
                        "--source", "en", "--target", "de", "--model", MODEL, "--threads", "1",
                        "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=600)
    if p.returncode != 0:
        print("cli_api_same: translate-file %s: exit %d: %s" %
              (name, p.returncode, p.stderr.decode(errors="replace")))
        return None
    with open(out, "rb") as f:
        return f.read()


def revision_free(data):
    """A catalogue's bytes less its PO-Revision-Date's value: the time of the
    translation, which two runs a minute apart write differently."""
    return re.sub(rb'("PO-Revision-Date: )[^"\\]*', rb"\1", data or b"")


def compare(name, texts, a, c):
    bad = [i for i in range(len(texts)) if a[i] != c[i]]
    for i in bad[:5]:
        print("cli_api_same: %s: line %d: %r\n  api: %r\n  cli: %r" % (name, i + 1, texts[i],
                                                                       a[i], c[i]))
    print("cli_api_same: %s: %d of %d the same" % (name, len(texts) - len(bad), len(texts)))
    return not bad


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    daemon = sys.argv[1]
    with open(HELD_OUT, encoding="utf-8") as f:
        held = [l.rstrip("\n") for l in f][:500]
    tmp = tempfile.mkdtemp(prefix="td-cli-api.")
    d = None
    ok = True
    try:
        d = start(daemon, tmp)
        port = d.port
        gpath = os.path.join(tmp, "terms.tsv")
        with open(gpath, "w", encoding="utf-8") as f:
            f.write(GLOSSARY)
        termed = [t for t in held if re.search(r"\b(file|user|folder|window)\b", t, re.I)]
        gl = {"glossary": make_glossary(port)}
        runs = [("held-out, defaults", held, {}, []),
                ("special, defaults", SPECIAL, {}, []),
                ("special, greedy", SPECIAL, {"beam_size": 1}, ["--beam", "1"]),
                ("special, no split", SPECIAL, {"split_sentences": False}, ["--no-split"]),
                ("special, raw", SPECIAL, {"copy_unknown": False}, ["--no-copy-unknown"]),
                ("held-out with terms, glossary", termed, gl, ["--glossary", gpath]),
                ("special, glossary", SPECIAL, gl, ["--glossary", gpath])]
        for name, texts, extra, args in runs:
            a = api(port, texts, extra)
            c = cli(daemon, texts, args)
            ok &= compare(name, texts, a, c)
            if "glossary" in extra and texts is termed:
                # applied, not only the same on both sides
                placed = sum(any(w in t for w in ("Dokument", "Anwender", "Verzeichnis",
                                                  "Fensterchen")) for t in c)
                print("cli_api_same: %s: %d of %d lines hold a glossary term" %
                      (name, placed, len(c)))
                if len(termed) < 10 or placed < 5:
                    ok = False
            if texts is SPECIAL and "copy_unknown" not in extra:
                lost = [s for s in COPIED if s not in "".join(c)]
                if lost:
                    print("cli_api_same: %s: symbols not copied: %s" % (name, " ".join(lost)))
                    ok = False
        same = 0
        for name, text in FILES.items():
            data = text.encode()
            a, c = api_file(port, name, data), cli_file(daemon, tmp, name, data)
            if c is None or b"Preis" not in c and b"Fenster" not in c and b"Hallo" not in c \
                    and b"speichern" not in c:
                print("cli_api_same: %s: not translated: %r" % (name, c))
                ok = False
            elif revision_free(a) != revision_free(c):
                print("cli_api_same: %s: translate-file and /translate_file differ:\n  api: %r\n"
                      "  cli: %r" % (name, a, c))
                ok = False
            else:
                same += 1
        print("cli_api_same: files: %d of %d the same" % (same, len(FILES)))
        ok &= stopped_ok(d)
        # the package: the sentence split in the language its metadata names
        d = start(daemon, tmp, PACKAGE)
        texts = held[:100] + SPECIAL
        ok &= compare("package, defaults", texts, api(d.port, texts, {}),
                      cli(daemon, texts, [], PACKAGE))
        ok &= stopped_ok(d)
    finally:
        if d is not None:
            d.kill()  # nothing when it was stopped
        shutil.rmtree(tmp, ignore_errors=True)
    print("cli_api_same: %s" % ("ok" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
