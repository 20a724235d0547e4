#!/usr/bin/env python3
"""Argos Translate packages of the bundled models, as LibreTranslate installs
them (bench/libre/run.sh, also a user's first package):

    make_packages.py [--quantization int8|none] OUT_DIR [MODEL_DIR ...]
                                  (default: int8; models/en-de models/de-en)

Each model becomes OUT_DIR/translate-SRC_TGT-1_0/ with
  - model/: the CTranslate2 conversion of bench/peers/convert_ct2.py (the
    learned <pad> start embedding kept), quantized to int8 as the packages
    argospm installs are (--quantization none keeps float32), add_source_eos true: argos-translate
    gives CTranslate2 the source pieces without </s>, as OPUS-MT packages get
    them, and the converter's config.json adds it;
  - sentencepiece.model: the model's source.spm (argos-translate encodes with
    it and decodes target pieces by joining them);
  - metadata.json: from_code, to_code and names as argospm writes them;
  - spacy/: a blank multilingual spaCy pipeline (the rule-based sentencizer
    argos-translate adds), so that LibreTranslate splits sentences offline.
Run with bench/libre/.venv's python (ctranslate2, numpy, spacy)."""
import json
import os
import shutil
import subprocess
import sys

NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish"}


def main():
    args = sys.argv[1:]
    quant = "int8"
    if args[:1] == ["--quantization"] and len(args) > 1:
        quant = args[1]
        args = args[2:]
    if not args or quant not in ("int8", "none"):
        sys.exit(__doc__)
    out = args[0]
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    models = args[1:] or [os.path.join(root, "models", "en-de"),
                              os.path.join(root, "models", "de-en")]
    os.makedirs(out, exist_ok=True)
    import spacy
    for model in models:
        src, tgt = os.path.basename(os.path.normpath(model)).split("-")
        pkg = os.path.join(out, "translate-%s_%s-1_0" % (src, tgt))
        shutil.rmtree(pkg, ignore_errors=True)
        os.makedirs(pkg)
        subprocess.run([sys.executable, os.path.join(root, "bench", "peers", "convert_ct2.py"),
                        model, os.path.join(pkg, "model")] + ([quant] if quant != "none" else []),
                       check=True)
        cfg_path = os.path.join(pkg, "model", "config.json")
        cfg = json.load(open(cfg_path))
        cfg["add_source_eos"] = True
        json.dump(cfg, open(cfg_path, "w"), indent=2)
        shutil.copy(os.path.join(model, "source.spm"), os.path.join(pkg, "sentencepiece.model"))
        meta = {"package_version": "1.0", "argos_version": "1.9.0", "from_code": src,
                "from_name": NAMES.get(src, src), "to_code": tgt, "to_name": NAMES.get(tgt, tgt),
                "type": "translate", "links": []}
        json.dump(meta, open(os.path.join(pkg, "metadata.json"), "w"), indent=2)
        spacy.blank("xx").to_disk(os.path.join(pkg, "spacy"))
        print("wrote", pkg)


if __name__ == "__main__":
    main()
