#!/usr/bin/env python3
"""Stage 4: average the last N checkpoints and export the Marian layout to models/SRC-TGT/ (models/en-de/, or
models/de-en/ for a work directory of reverse.py).

Writes config.json, model.safetensors (F16), source.spm = target.spm (the joint model), vocab.json,
tokenizer_config.json (MarianTokenizer.save_pretrained), generation_config.json (num_beams 4, max_length 256,
bad_words_ids [[pad]], forced_eos 0, decoder_start pad), then reloads the directory with MarianMTModel /
MarianTokenizer and checks that the tokenizer gives the training ids and the model translates.

Usage: tools/.venv/bin/python tools/train/export.py [--work .train] [--last 2] [--out models/SRC-TGT]
"""
import argparse
import glob
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


ISO3 = {"en": "eng", "de": "deu"}
SAMPLES = {"en": ["Print version information and exit.", "File not found.", "The file could not be opened."],
           "de": ["Versionsinformationen ausgeben und beenden.", "Datei nicht gefunden.",
                  "Die Datei konnte nicht geöffnet werden."]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--last", type=int, default=2)
    ap.add_argument("--out", help="default: models/SRC-TGT of the work directory's direction")
    a = ap.parse_args()
    torch.set_num_threads(2)
    import train as T
    src_lang, tgt_lang = T.direction(a.work)
    a.out = a.out or os.path.join(ROOT, "models", f"{src_lang}-{tgt_lang}")
    from transformers import GenerationConfig, MarianMTModel, MarianTokenizer

    cks = sorted(glob.glob(os.path.join(a.work, "ckpt", "ckpt-*.pt")), key=lambda p: int(p.split("-")[-1][:-3]))
    cks = cks[-a.last:]
    if not cks:
        sys.exit("export: no checkpoint")
    avg, meta = None, []
    for p in cks:
        ck = torch.load(p, weights_only=False, map_location="cpu")
        sd = ck["model"]
        meta.append({"ckpt": os.path.basename(p), "step": ck["step"], "epoch": ck["epoch"],
                     "pos": ck["pos"], "trained_min": round(ck.get("elapsed", 0) / 60, 1)})
        if avg is None:
            avg = {k: v.detach().clone().double() if v.is_floating_point() else v.clone() for k, v in sd.items()}
        else:
            for k, v in sd.items():
                if v.is_floating_point():
                    avg[k] += v.double()
        args = argparse.Namespace(**ck["args"])
    for k, v in avg.items():
        if v.is_floating_point():
            avg[k] = (v / len(cks)).float()
    print("export: averaged", json.dumps(meta), flush=True)

    with open(os.path.join(a.work, "spm", "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    pad = vocab["<pad>"]
    cfg = T.model_config(len(vocab), pad, args)
    model = MarianMTModel(cfg)
    model.load_state_dict(avg)
    model = model.half()
    os.makedirs(a.out, exist_ok=True)
    for f in glob.glob(os.path.join(a.out, "*")):
        if os.path.isfile(f):
            os.remove(f)
    gen = GenerationConfig(num_beams=4, max_length=256, bad_words_ids=[[pad]], forced_eos_token_id=0,
                           decoder_start_token_id=pad, pad_token_id=pad, eos_token_id=0)
    model.generation_config = gen
    model.save_pretrained(a.out, safe_serialization=True)
    # config.json: the extension key of docs/architecture.md (transformers ignores it) and the run's metadata
    cpath = os.path.join(a.out, "config.json")
    with open(cpath) as f:
        c = json.load(f)
    c["position_encoding"] = "sinusoidal"
    c["normalize_before"] = False
    c["torch_dtype"] = "float16"
    with open(cpath, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    spm_path = os.path.join(a.work, "spm", "joint.spm")
    shutil.copyfile(spm_path, os.path.join(a.out, "source.spm"))
    shutil.copyfile(spm_path, os.path.join(a.out, "target.spm"))
    vpath = os.path.join(a.out, "vocab.json")
    shutil.copyfile(os.path.join(a.work, "spm", "vocab.json"), vpath)
    tok = MarianTokenizer(source_spm=os.path.join(a.out, "source.spm"), target_spm=os.path.join(a.out, "target.spm"),
                          vocab=vpath, source_lang=ISO3[src_lang], target_lang=ISO3[tgt_lang],
                          model_max_length=256)
    tok.save_pretrained(a.out)
    with open(vpath, encoding="utf-8") as f:
        assert json.load(f) == vocab, "vocab.json rewritten differently"
    for name, dst in (("provenance.tsv", "data-provenance.tsv"), ("stats.json", "corpus-stats.json")):
        shutil.copyfile(os.path.join(a.work, "corpus", name), os.path.join(a.out, dst))
    with open(os.path.join(a.out, "averaged.json"), "w") as f:
        json.dump({"averaged_checkpoints": meta,
                   "train_args": {k: vars(args)[k] for k in ("lr", "warmup", "seed", "batch_tokens")}}, f, indent=2)
        f.write("\n")

    # verification: reload as a user would
    tok = MarianTokenizer.from_pretrained(a.out)
    m = MarianMTModel.from_pretrained(a.out, dtype=torch.float32)
    m.eval()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    with open(os.path.join(a.work, "corpus", f"dev.{src_lang}"), encoding="utf-8") as f:
        dev = [x.rstrip("\n") for x in f][:200]
    want = [[vocab.get(p, 1) for p in ps][:255] + [0] for ps in sp.encode(dev, out_type=str)]
    got = [tok(x)["input_ids"] for x in dev]
    assert got == want, "MarianTokenizer ids differ from the training ids"
    batch = tok(SAMPLES[src_lang], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = m.generate(**batch)
    for s in tok.batch_decode(out, skip_special_tokens=True):
        print("export: sample:", s)
    total = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    print(f"export: {a.out} {total / 1e6:.1f} MB", flush=True)


if __name__ == "__main__":
    main()
