"""Argos Translate packages end to end, as a LibreTranslate user has them
(ctest "argos_packages"; python3's standard library only):

  - the fixture package tests/data/argos/translate-en_de-1_0 (metadata.json,
    model/ = the CTranslate2 conversion of the Marian test model,
    sentencepiece.model) zipped into an .argosmodel as argospm's packages
    are, installed by `transformerd models install FILE --models-dir DIR`
    (a second time refused, nothing overwritten);
  - beside it in that folder: a package whose model.bin is cut short and one
    without a model: `serve --models-dir` serves the good one named by its
    metadata (/languages en -> de, /v1/models) and says why each other one
    is not served, the daemon up;
  - the daemon's answers equal `transformerd translate --model PACKAGE`
    (CLI = API) on the held-out lines, decoded as argos-translate asks
    CTranslate2 (beam 4, length penalty 0.2: the model's defaults);
  - without add_source_eos in model/config.json the source gets no </s>
    (argos-translate gives CTranslate2 the pieces alone);
  - metadata.json's target_prefix forced first and left out of the text
    (CLI = API), one the vocabulary lacks refused.

usage: argos_packages.py DAEMON TEST_DATA_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile

import harness
from harness import check, finish

def zip_package(src, dest):
    """src's directory as argospm's archives hold it: one top-level folder
    (symbolic links followed: the fixture links the shared test files)."""
    top = os.path.basename(src.rstrip("/"))
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for root, dirs, files in os.walk(src, followlinks=True):
            rel = os.path.relpath(root, src)
            arc = top if rel == "." else top + "/" + rel
            z.writestr(arc + "/", "")
            for f in sorted(files):
                z.write(os.path.join(root, f), arc + "/" + f)


def run(cmd, inp=None):
    p = subprocess.run(cmd, input=inp, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


class Daemon(harness.Daemon):
    """The daemon with ARGS (no cache: each answer decoded), its JSON calls."""

    def __init__(self, daemon, *args):
        super().__init__(daemon, "--threads", "1", "--cache-bytes", "0", *args)

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=120) as r:
            return json.loads(r.read())

    def post(self, path, obj):
        req = urllib.request.Request(self.url + path, data=json.dumps(obj).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())


def main():
    daemon, data = sys.argv[1], sys.argv[2]
    fixture = os.path.join(data, "argos", "translate-en_de-1_0")
    lines = [l.strip() for l in open(os.path.join(data, "en_de_test", "test.en"), encoding="utf-8")
             if l.strip()][:12]
    tmp = tempfile.mkdtemp(prefix="td-argos-")
    daemon_proc = None
    try:
        pkgs = os.path.join(tmp, "packages")
        os.makedirs(pkgs)
        archive = os.path.join(tmp, "translate-en_de-1_0.argosmodel")
        zip_package(fixture, archive)
        rc, out, err = run([daemon, "models", "install", archive, "--models-dir", pkgs])
        check(rc == 0 and "installed en -> de" in out, "models install: %s%s" % (out, err))
        pkg = os.path.join(pkgs, "translate-en_de-1_0")
        check(open(os.path.join(pkg, "model", "model.bin"), "rb").read() ==
              open(os.path.join(fixture, "model", "model.bin"), "rb").read(),
              "the installed model.bin is the package's, byte for byte")
        rc, out, err = run([daemon, "models", "install", archive, "--models-dir", pkgs])
        check(rc == 1 and "already installed" in err, "a second install refused: " + err.strip())

        # two packages the daemon must not serve, beside the good one
        bad = os.path.join(pkgs, "translate-en_fr-1_0")
        shutil.copytree(pkg, bad)
        meta = json.load(open(os.path.join(bad, "metadata.json")))
        meta["to_code"] = "fr"
        json.dump(meta, open(os.path.join(bad, "metadata.json"), "w"))
        mb = os.path.join(bad, "model", "model.bin")
        data_bin = open(mb, "rb").read()
        open(mb, "wb").write(data_bin[: len(data_bin) // 2])
        empty = os.path.join(pkgs, "translate-en_es-1_0")
        os.makedirs(empty)
        json.dump({"from_code": "en", "to_code": "es"}, open(os.path.join(empty, "metadata.json"), "w"))

        # the command line's translations of the package
        rc, cli_out, err = run([daemon, "translate", "--model", pkg], "\n".join(lines) + "\n")
        check(rc == 0, "transformerd translate --model PACKAGE: " + err[-300:])

        d = daemon_proc = Daemon(daemon, "--models-dir", pkgs)
        langs = d.get("/languages")
        check(langs == [{"code": "en", "name": "English", "targets": ["de"]},
                        {"code": "de", "name": "German", "targets": []}],
              "/languages: the package's pair only (no fr, no es): %s" % langs)
        models = d.get("/v1/models")["models"]
        check([m["name"] for m in models] == ["translate-en_de-1_0"] and
              models[0]["languages"] == {"source": "en", "target": "de"} and
              models[0]["defaults"]["beam_size"] == 4 and
              abs(models[0]["defaults"]["length_penalty"] - 0.2) < 1e-6,
              "/v1/models: the package, argos-translate's beam 4 and length penalty 0.2")
        log = d.text()
        check(re.search(r"model translate-en_fr-1_0: not served: .*model\.bin: truncated", log),
              "the package with a cut model.bin is left out, its file and reason said")
        check(re.search(r"translate-en_es-1_0: not served: .* missing", log),
              "the package without a model is left out, what it lacks said")
        got = [d.post("/translate", {"q": l, "source": "en", "target": "de"})["translatedText"]
               for l in lines]
        # the command line decodes a package as the daemon does (its defaults:
        # argos-translate's beam 4 and length penalty 0.2)
        native_text = [d.post("/v1/translate", {"text": l, "source": "en", "target": "de"})
                       ["translations"][0]["text"] for l in lines]
        check(native_text == cli_out.split("\n")[:-1],
              "CLI = API on the package (their defaults: beam 4, length penalty 0.2)")
        check(all(isinstance(g, str) for g in got) and len(got) == len(lines),
              "/translate answers every line with the package's defaults")
    finally:
        if daemon_proc:
            daemon_proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    # no add_source_eos: the pieces alone (as argos-translate gives them)
    tmp = tempfile.mkdtemp(prefix="td-argos-")
    try:
        pkg = os.path.join(tmp, "p")
        shutil.copytree(fixture, pkg)
        cfg_path = os.path.join(pkg, "model", "config.json")
        cfg = json.load(open(cfg_path))
        rc, with_eos, _ = run([daemon, "tokenize", "--model", pkg, "--pieces"], "Hello world\n")
        cfg.pop("add_source_eos")
        os.unlink(cfg_path)
        json.dump(cfg, open(cfg_path, "w"))
        rc2, without, _ = run([daemon, "tokenize", "--model", pkg, "--pieces"], "Hello world\n")
        check(rc == 0 and rc2 == 0 and with_eos.split()[-1] == "</s>" and
              with_eos.split()[:-1] == without.split(),
              "add_source_eos decides the source's </s>: %r / %r" % (with_eos, without))
        # target_prefix: forced first, left out of the text, CLI = API
        cfg["add_source_eos"] = True
        os.unlink(cfg_path)
        json.dump(cfg, open(cfg_path, "w"))
        meta_path = os.path.join(pkg, "metadata.json")
        meta = json.load(open(meta_path))
        meta["target_prefix"] = "\u2581invalid"
        os.unlink(meta_path)
        json.dump(meta, open(meta_path, "w"))
        rc, cli_out, err = run([daemon, "translate", "--model", pkg, "--beam", "4"],
                               "\n".join(lines) + "\n")
        with Daemon(daemon, "--model", pkg) as d:
            res = [d.post("/v1/translate", {"text": l, "beam_size": 4, "return_tokens": True})
                   ["translations"][0]
                   for l in lines]
        check(rc == 0 and all(r["tokens"][0] == "\u2581invalid" for r in res) and
              not any("invalid" in r["text"] for r in res) and
              [r["text"] for r in res] == cli_out.split("\n")[:-1],
              "target_prefix forced first and left out of the text, CLI = API")
        meta["target_prefix"] = "__xx__"
        os.unlink(meta_path)
        json.dump(meta, open(meta_path, "w"))
        rc, _, err = run([daemon, "translate", "--model", pkg], "Hello\n")
        check(rc != 0 and "target_prefix '__xx__' is not a token" in err,
              "a target_prefix the vocabulary lacks refused: " + err.strip()[-200:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
