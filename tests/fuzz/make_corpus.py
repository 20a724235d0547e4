#!/usr/bin/env python3
"""Regenerates the seed corpora in tests/fuzz/corpus/ (stdlib only).

    python3 tests/fuzz/make_corpus.py

safetensors/: the smallest fixture model.safetensors (if < 100 KB) plus a
few hand-made files that each reach a different valid path of td_st_open.
config/: each fixture's config.json, a NUL, then its generation_config.json,
plus one config.json alone (gen_json = NULL) and a few hand-made variants.
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "data", "fixtures")
ST_DIR = os.path.join(HERE, "corpus", "safetensors")
CFG_DIR = os.path.join(HERE, "corpus", "config")


def st_file(tensors, meta=None, pad_to=1):
    """tensors: list of (name, dtype, shape, raw bytes), laid out in order."""
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % pad_to)  # the reference pads the header to 8 bytes
    return struct.pack("<Q", len(h)) + h + data


def write(path, blob):
    with open(path, "wb") as f:
        f.write(blob)


def main():
    os.makedirs(ST_DIR, exist_ok=True)
    os.makedirs(CFG_DIR, exist_ok=True)

    fixtures = sorted(d for d in os.listdir(FIXTURES)
                      if os.path.isfile(os.path.join(FIXTURES, d, "config.json")))

    models = [os.path.join(FIXTURES, d, "model.safetensors") for d in fixtures]
    models = [m for m in models if os.path.isfile(m)]
    smallest = min(models, key=os.path.getsize)
    if os.path.getsize(smallest) < 100 * 1024:
        shutil.copyfile(smallest, os.path.join(ST_DIR, "fixture_smallest.safetensors"))

    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    write(os.path.join(ST_DIR, "empty.safetensors"), st_file([]))
    write(os.path.join(ST_DIR, "scalar_meta.safetensors"),
          st_file([("s", "F32", [], struct.pack("<f", 7.0))], meta={"format": "pt"}, pad_to=8))
    # F16: 1.0, -0, subnormal, inf, nan, 65504; BF16: 1.0, -2.0, nan; a zero-size tensor
    f16 = struct.pack("<6H", 0x3C00, 0x8000, 0x0001, 0x7C00, 0x7E01, 0x7BFF)
    bf16 = struct.pack("<3H", 0x3F80, 0xC000, 0x7FC1)
    write(os.path.join(ST_DIR, "mixed_dtypes.safetensors"),
          st_file([("b.half", "F16", [2, 3], f16), ("a.empty", "F32", [0, 5], b""),
                   ("c.bf", "BF16", [3], bf16)], pad_to=8))
    # data order differs from name order; rank 4
    write(os.path.join(ST_DIR, "reordered.safetensors"),
          st_file([("z.weight", "F32", [2, 2], f32), ("m.bias", "F32", [1, 1, 1, 2], f32[:8]),
                   ("a.weight", "BF16", [2], b"\x80\x3f\x00\x40")],
                  meta={"k": "v", "empty": ""}))

    for d in fixtures:
        with open(os.path.join(FIXTURES, d, "config.json"), "rb") as f:
            cfg = f.read()
        gen_path = os.path.join(FIXTURES, d, "generation_config.json")
        gen = open(gen_path, "rb").read() if os.path.isfile(gen_path) else b""
        write(os.path.join(CFG_DIR, d + ".bin"), cfg + b"\0" + gen)
    with open(os.path.join(FIXTURES, fixtures[0], "config.json"), "rb") as f:
        base = json.load(f)
    write(os.path.join(CFG_DIR, "config_only.bin"), json.dumps(base).encode())

    # Keys the fixtures never use, so the fuzzer starts from them.
    v = dict(base, position_encoding="relative", relative_attention_max_distance=16,
             share_encoder_decoder_embeddings=False, decoder_vocab_size=base["vocab_size"] + 3,
             eos_token_id=[0, 1], activation_function="swish", normalize_before=True,
             layer_norm_eps=1e-6, num_beams=5, max_length=32, bad_words_ids=[[3], [4]])
    gen = {"num_beams": None, "num_return_sequences": 2, "early_stopping": "never",
           "length_penalty": -0.5, "bos_token_id": None, "forced_eos_token_id": None,
           "bad_words_ids": []}
    write(os.path.join(CFG_DIR, "variant_relative.bin"),
          json.dumps(v).encode() + b"\0" + json.dumps(gen).encode())
    v = {k: base[k] for k in ("d_model", "encoder_layers", "decoder_layers",
                              "encoder_attention_heads", "decoder_attention_heads",
                              "encoder_ffn_dim", "decoder_ffn_dim",
                              "max_position_embeddings", "vocab_size")}
    v.update(position_encoding="rope", rope_theta=500000, pad_token_id=0,
             decoder_start_token_id=0, forced_eos_token_id=None, early_stopping=True,
             activation_function="gelu_new", model_type="x" * 40)
    write(os.path.join(CFG_DIR, "variant_minimal_rope.bin"), json.dumps(v).encode())


if __name__ == "__main__":
    main()
