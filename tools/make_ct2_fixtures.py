#!/usr/bin/env python3
"""Writes tests/data/ct2/: CTranslate2 model directories made by CTranslate2
itself, their goldens, and model.bin files to refuse (tests/test_ct2.c).

  tools/.venv/bin/python tools/make_ct2_fixtures.py [OUT]

- marian_{float32,float16,int8}: tests/data/text/marian_en_de converted by
  ctranslate2.converters.TransformersConverter (copy_files source.spm,
  target.spm; the .spm files are committed as links to the originals);
- prenorm: an OpenNMT-py-style TransformerSpec built with the spec API
  (pre-norm, ReLU, a stored position table, shared embeddings and output
  projection, seeded random weights), float32;
- prenorm_v3: the same variables written in binary version 3 (types by item
  size) by this script's own writer, to read the older layout, with the
  directory of those versions: shared_vocabulary.txt, no config.json;
- bad_*: model.bin files (and one vocabulary) to refuse;
- golden.json: ctranslate2.Translator(...).translate_batch of each model,
  greedy and beam 4 (max_decoding_length, length_penalty 1, return_scores):
  the Marian models on source lines tokenized with source.spm (pieces, then
  </s>, as transformers' MarianTokenizer does), prenorm on token lists.
"""
import json
import os
import random
import shutil
import struct
import sys

import numpy as np
import sentencepiece as spm
import ctranslate2
from ctranslate2.converters import TransformersConverter
from ctranslate2.specs import common_spec, transformer_spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARIAN = os.path.join(ROOT, "tests", "data", "text", "marian_en_de")
MAX_DECODING_LENGTH = 32

LINES = [
    "The house is small.",
    "Hello world.",
    "I would like a cup of coffee, please.",
    "Where is the train station?",
    "This file cannot be opened.",
    "The weather was nice yesterday, so we went for a walk.",
    "Numbers like 42 and 3.14 appear in text.",
    "An unknown function was called.",
    "She reads a book every week.",
    "Please restart the computer before you continue.",
    "Translation models are evaluated on held-out sentences.",
    "Why?",
]


def write_model_bin(path, version, spec, revision, variables, aliases):
    """CTranslate2's layout (model_spec.py, _serialize) for version 4 to 6;
    version 3 names the type by its item size (float32 4, int16 2, int8 1),
    as src/models/model.cc reads it."""
    def string(f, s):
        b = s.encode("utf-8")
        f.write(struct.pack("<H", len(b) + 1) + b + b"\0")

    ids = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 4, "bfloat16": 5}
    with open(path, "wb") as f:
        f.write(struct.pack("<I", version))
        if version >= 2:
            string(f, spec)
            f.write(struct.pack("<I", revision))
        f.write(struct.pack("<I", len(variables)))
        for name, arr in variables:
            string(f, name)
            f.write(struct.pack("<B", arr.ndim))
            for d in arr.shape:
                f.write(struct.pack("<I", d))
            if version >= 4:
                f.write(struct.pack("<BI", ids[arr.dtype.name], arr.nbytes))
            else:
                f.write(struct.pack("<BI", arr.dtype.itemsize, arr.size))
            f.write(arr.tobytes())
        if version >= 3:
            f.write(struct.pack("<I", len(aliases)))
            for a, t in aliases:
                string(f, a)
                string(f, t)


def read_model_bin(path):
    """(version, spec, revision, [(name, array)], [(alias, target)])."""
    d = open(path, "rb").read()
    o = [0]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, d, o[0])
        o[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = take("H")
        s = d[o[0]:o[0] + n - 1].decode()
        o[0] += n
        return s

    types = ["float32", "int8", "int16", "int32", "float16", "bfloat16"]
    version = take("I")
    spec, rev = string(), take("I")
    variables = []
    for _ in range(take("I")):
        name = string()
        shape = [take("I") for _ in range(take("B"))]
        t, nb = take("B"), take("I")
        dt = np.dtype(types[t]) if types[t] != "bfloat16" else np.dtype("uint16")
        variables.append((name, np.frombuffer(d, dt, nb // dt.itemsize, o[0]).reshape(shape)))
        o[0] += nb
    aliases = [(string(), string()) for _ in range(take("I"))]
    return version, spec, rev, variables, aliases


def convert_marian(out):
    dirs = {}
    for q in ("float32", "float16", "int8"):
        d = os.path.join(out, "marian_" + q)
        shutil.rmtree(d, ignore_errors=True)
        TransformersConverter(MARIAN).convert(d, quantization=q, force=True)
        for f in ("source.spm", "target.spm"):
            os.symlink(os.path.join("..", "..", "text", "marian_en_de", f), os.path.join(d, f))
        dirs["marian_" + q] = d
    return dirs


def build_prenorm(out, name="prenorm", d=32, ffn=64, heads=4, vocab=40, positions=64,
                  quantization="float32", stored_positions=True):
    """A pre-norm Transformer as OpenNMT-py's converter makes it, with
    seeded random weights."""
    rng = np.random.default_rng(1234)
    spec = transformer_spec.TransformerSpec.from_config(
        (2, 2), heads, pre_norm=True, activation=common_spec.Activation.RELU)

    def mat(*shape, s=0.2):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    def ln(x):
        x.gamma = (1.0 + mat(d, s=0.1))
        x.beta = mat(d, s=0.1)

    def lin(x, rows, cols):
        x.weight = mat(rows, cols)
        x.bias = mat(rows, s=0.1)

    emb = mat(vocab, d, s=0.5)
    pos = mat(positions, d, s=0.3)
    for side in (spec.encoder, spec.decoder):
        side.scale_embeddings = True
        if stored_positions:
            side.position_encodings.encodings = pos
        ln(side.layer_norm)
        for layer in side.layer:
            ln(layer.self_attention.layer_norm)
            if hasattr(layer, "attention"):
                lin(layer.self_attention.linear[0], 3 * d, d)
                lin(layer.self_attention.linear[1], d, d)
                ln(layer.attention.layer_norm)
                lin(layer.attention.linear[0], d, d)
                lin(layer.attention.linear[1], 2 * d, d)
                lin(layer.attention.linear[2], d, d)
            else:
                lin(layer.self_attention.linear[0], 3 * d, d)
                lin(layer.self_attention.linear[1], d, d)
            ln(layer.ffn.layer_norm)
            lin(layer.ffn.linear_0, ffn, d)
            lin(layer.ffn.linear_1, d, ffn)
    spec.encoder.embeddings[0].weight = emb
    spec.decoder.embeddings.weight = emb
    spec.decoder.projection.weight = emb
    spec.decoder.projection.bias = mat(vocab, s=0.1)
    tokens = ["<blank>", "<unk>", "<s>", "</s>"] + ["w%02d" % i for i in range(vocab - 4)]
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.config.decoder_start_token = "<s>"
    spec.validate()
    spec.optimize(quantization=quantization)
    path = os.path.join(out, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    spec.save(path)
    return path, tokens


def bad_files(out, prenorm):
    version, spec, rev, variables, aliases = read_model_bin(os.path.join(prenorm, "model.bin"))

    def write(name, **kw):
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        write_model_bin(os.path.join(d, "model.bin"), kw.get("version", version), spec, rev,
                        kw.get("variables", variables), kw.get("aliases", aliases))
        return os.path.join(d, "model.bin")

    # the older layout, same model: its goldens are prenorm's
    v3 = os.path.join(out, "prenorm_v3")
    write("prenorm_v3", version=3)
    # as CTranslate2 before binary version 6 left a directory: no config.json
    # (its defaults: <s>, </s>, <unk>), the vocabulary one token a line
    toks = json.load(open(os.path.join(prenorm, "shared_vocabulary.json")))
    with open(os.path.join(v3, "shared_vocabulary.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in toks))

    write("bad_version", version=7)
    write("bad_alias", aliases=aliases[:-1] + [(aliases[-1][0], "decoder/nothing/weight")])
    p = write("bad_truncated")
    data = open(p, "rb").read()
    open(p, "wb").write(data[: len(data) // 2])

    # byte patches on the first variable's header: name "decoder/activation"
    p = write("bad_size")
    data = bytearray(open(p, "rb").read())
    first = data.index(b"decoder/activation\0") + len(b"decoder/activation\0")
    # rank 0, type id, byte count: claim 1000 bytes for one int8
    struct.pack_into("<I", data, first + 2, 1000)
    open(p, "wb").write(bytes(data))
    p = write("bad_dtype")
    data = bytearray(open(p, "rb").read())
    data[first + 1] = 9
    open(p, "wb").write(bytes(data))
    p = write("bad_rank")
    data = bytearray(open(p, "rb").read())
    data[first] = 200
    open(p, "wb").write(bytes(data))
    # separate vocabularies: the target's end token at another id
    d = os.path.join(out, "prenorm_sep")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.symlink(os.path.join("..", "prenorm", "model.bin"), os.path.join(d, "model.bin"))
    shutil.copy(os.path.join(prenorm, "config.json"), os.path.join(d, "config.json"))
    tokens = json.load(open(os.path.join(prenorm, "shared_vocabulary.json")))
    target = list(tokens)
    target[3], target[5] = target[5], target[3]
    json.dump(tokens, open(os.path.join(d, "source_vocabulary.json"), "w"), indent=0)
    json.dump(target, open(os.path.join(d, "target_vocabulary.json"), "w"), indent=0)
    # a vocabulary one token short of the embeddings
    d = os.path.join(out, "bad_vocab")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.symlink(os.path.join("..", "prenorm", "model.bin"), os.path.join(d, "model.bin"))
    tokens = json.load(open(os.path.join(prenorm, "shared_vocabulary.json")))
    json.dump(tokens[:-1], open(os.path.join(d, "shared_vocabulary.json"), "w"), indent=0)


def fuzz_seeds(out):
    """Small model.bin seeds for tests/fuzz/fuzz_ct2: a tiny spec model in
    float32 and int8 (scales, aliases) and the older layouts."""
    tmp = os.path.join(out, ".seeds")
    os.makedirs(os.path.join(ROOT, "tests", "fuzz", "corpus", "ct2"), exist_ok=True)
    for q in ("float32", "int8"):
        build_prenorm(tmp, "tiny_" + q, d=4, ffn=8, heads=2, vocab=6, positions=4, quantization=q)
    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", "ct2")
    for q in ("float32", "int8"):
        shutil.copy(os.path.join(tmp, "tiny_" + q, "model.bin"), os.path.join(corpus, "v6_" + q))
    version, spec, rev, variables, aliases = read_model_bin(os.path.join(tmp, "tiny_float32", "model.bin"))
    for v in (1, 2, 3):
        write_model_bin(os.path.join(corpus, "v%d" % v), v, spec, rev,
                        [x for x in variables if x[1].dtype.itemsize != 2], aliases if v >= 3 else [])
    shutil.rmtree(tmp)


def translate(model_dir, sources):
    tr = ctranslate2.Translator(model_dir, device="cpu", compute_type="default")
    out = {}
    for name, beam in (("greedy", 1), ("beam4", 4)):
        res = tr.translate_batch(sources, beam_size=beam, max_decoding_length=MAX_DECODING_LENGTH,
                                 length_penalty=1.0, min_decoding_length=0, return_scores=True)
        out[name] = [{"tokens": r.hypotheses[0], "score": float(r.scores[0])} for r in res]
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "ct2")
    os.makedirs(out, exist_ok=True)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(MARIAN, "source.spm"))
    marian_sources = [sp.encode(line, out_type=str) + ["</s>"] for line in LINES]
    golden = {"ctranslate2_version": ctranslate2.__version__,
              "max_decoding_length": MAX_DECODING_LENGTH, "length_penalty": 1.0, "models": {}}
    for name, d in convert_marian(out).items():
        vocab = json.load(open(os.path.join(d, "shared_vocabulary.json")))
        g = translate(d, marian_sources)
        golden["models"][name] = {
            "lines": [{"text": t, "source": s,
                       "source_ids": [vocab.index(x if x in vocab else "<unk>") for x in s]}
                      for t, s in zip(LINES, marian_sources)], **g}
    prenorm, tokens = build_prenorm(out)
    rnd = random.Random(7)
    sources = [[tokens[rnd.randrange(4, len(tokens))] for _ in range(rnd.randrange(1, 12))] + ["</s>"]
               for _ in range(10)]
    golden["models"]["prenorm"] = {
        "lines": [{"source": s, "source_ids": [tokens.index(x) for x in s]} for s in sources],
        **translate(prenorm, sources)}
    sinus, _ = build_prenorm(out, "prenorm_sinus", stored_positions=False)
    golden["models"]["prenorm_sinus"] = {"lines": golden["models"]["prenorm"]["lines"],
                                         **translate(sinus, sources)}
    bad_files(out, prenorm)
    fuzz_seeds(out)
    # ids of the outputs, by each model's target vocabulary
    for name, m in golden["models"].items():
        vocab = json.load(open(os.path.join(out, name, "shared_vocabulary.json")))
        for kind in ("greedy", "beam4"):
            for h in m[kind]:
                h["ids"] = [vocab.index(x) for x in h["tokens"]]
    with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
