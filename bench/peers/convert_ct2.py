#!/usr/bin/env python3
"""Converts a transformerd model directory (Hugging Face Marian layout) to a
CTranslate2 model, without torch or transformers (numpy + ctranslate2 only).

    convert_ct2.py MODEL_DIR OUT_DIR [QUANTIZATION]   (int8, float16, ...: CTranslate2's own)

Why not CTranslate2's own Marian converter: it sets start_from_zero_embedding
(OPUS-MT's <pad> embedding is all zeros, so the decoder may start from a zero
vector) and drops <pad> from the vocabulary and the embeddings. The bundled
model (models/en-de) was trained with a learned <pad> start embedding; with it
dropped, CTranslate2 translates a different model. Here the full vocabulary
is kept, start_from_zero_embedding stays False and the decoder starts from
the real <pad> token (decoder_start_token_id), exactly as transformers does;
the generation of <pad> is suppressed at translation time
(suppress_sequences=[["<pad>"]], the bad_words_ids of the checkpoint).

Scope: post-norm Marian (sinusoidal positions, Marian layout: sin in the first
half of the columns, cos in the second), tied or untied output projection,
final_logits_bias. A model without vocab.json (bench_engine --make-model)
gets tokens named by id: <pad>, </s>, <unk> at their ids, "t<ID>" otherwise.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import ctranslate2
from ctranslate2.specs import common_spec, transformer_spec


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[b:e]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{name}: dtype {t['dtype']} not supported")
        out[name] = a.reshape(t["shape"]).astype(np.float32)
    return out


def marian_sinusoids(n_pos, dim):
    # transformers' MarianSinusoidalPositionalEmbedding: sin | cos halves
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    j = np.arange(dim, dtype=np.float64)[None, :]
    enc = pos / np.power(10000, 2 * (j // 2) / dim)
    out = np.zeros((n_pos, dim), dtype=np.float64)
    half = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out[:, :half] = np.sin(enc[:, 0::2])
    out[:, half:] = np.cos(enc[:, 1::2])
    return out.astype(np.float32)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(src, "config.json")))
    gen = {}
    if os.path.exists(os.path.join(src, "generation_config.json")):
        gen = json.load(open(os.path.join(src, "generation_config.json")))
    if cfg.get("normalize_before") or cfg.get("position_encoding", "sinusoidal") != "sinusoidal":
        raise SystemExit("only post-norm Marian with sinusoidal positions")
    W = read_safetensors(os.path.join(src, "model.safetensors"))
    act = {"swish": "SWISH", "silu": "SWISH", "gelu": "GELU", "gelu_new": "GELUTanh",
           "relu": "RELU"}[cfg.get("activation_function", "gelu")]
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg["encoder_layers"], cfg["decoder_layers"]), cfg["encoder_attention_heads"],
        pre_norm=False, activation=getattr(common_spec.Activation, act),
        layernorm_embedding=False)
    d = cfg["d_model"]
    scale = math.sqrt(d) if cfg.get("scale_embedding", False) else 1.0
    shared = W.get("model.shared.weight")
    enc_emb = W.get("model.encoder.embed_tokens.weight", shared)
    dec_emb = W.get("model.decoder.embed_tokens.weight", shared)
    pe = marian_sinusoids(cfg["max_position_embeddings"], d)

    def lin(s, p):
        s.weight = W[p + ".weight"]
        s.bias = W[p + ".bias"]

    def ln(s, p):
        s.gamma = W[p + ".weight"]
        s.beta = W[p + ".bias"]

    def attn(s, p, self_attn):
        q, k, v = (W[f"{p}.{n}_proj.weight"] for n in "qkv")
        qb, kb, vb = (W[f"{p}.{n}_proj.bias"] for n in "qkv")
        if self_attn:
            s.linear[0].weight = np.concatenate([q, k, v])
            s.linear[0].bias = np.concatenate([qb, kb, vb])
        else:
            s.linear[0].weight, s.linear[0].bias = q, qb
            s.linear[1].weight = np.concatenate([k, v])
            s.linear[1].bias = np.concatenate([kb, vb])
        lin(s.linear[-1], p + ".out_proj")

    for side, emb in (("encoder", enc_emb), ("decoder", dec_emb)):
        ss = getattr(spec, side)
        ss.scale_embeddings = scale
        ss.position_encodings.encodings = pe
        (ss.embeddings[0] if isinstance(ss.embeddings, list) else ss.embeddings).weight = emb
        for i, ls in enumerate(ss.layer):
            p = f"model.{side}.layers.{i}"
            attn(ls.self_attention, p + ".self_attn", True)
            ln(ls.self_attention.layer_norm, p + ".self_attn_layer_norm")
            if side == "decoder":
                attn(ls.attention, p + ".encoder_attn", False)
                ln(ls.attention.layer_norm, p + ".encoder_attn_layer_norm")
            lin(ls.ffn.linear_0, p + ".fc1")
            lin(ls.ffn.linear_1, p + ".fc2")
            ln(ls.ffn.layer_norm, p + ".final_layer_norm")
    spec.decoder.start_from_zero_embedding = False  # keep the learned <pad> start
    spec.decoder.projection.weight = W.get("lm_head.weight", dec_emb)
    if "final_logits_bias" in W and np.any(W["final_logits_bias"]):
        spec.decoder.projection.bias = W["final_logits_bias"].reshape(-1)

    V = cfg.get("decoder_vocab_size", cfg["vocab_size"])
    pad = gen.get("pad_token_id", cfg.get("pad_token_id"))
    eos = gen.get("eos_token_id", cfg.get("eos_token_id"))
    start = gen.get("decoder_start_token_id", cfg.get("decoder_start_token_id", pad))
    vpath = os.path.join(src, "vocab.json")
    if os.path.exists(vpath):
        v = json.load(open(vpath))
        tokens = [None] * V
        for t, i in v.items():
            if i < V:
                tokens[i] = t
        tokens = [t if t is not None else f"<unused{i}>" for i, t in enumerate(tokens)]
    else:
        tokens = [f"t{i}" for i in range(V)]
        tokens[eos], tokens[pad] = "</s>", "<pad>"
        if 1 != eos and 1 != pad:
            tokens[1] = "<unk>"
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.config.bos_token = tokens[start]
    spec.config.eos_token = tokens[eos]
    spec.config.unk_token = "<unk>" if "<unk>" in tokens else tokens[1]
    spec.config.decoder_start_token = tokens[start]
    spec.validate()
    spec.optimize(quantization=sys.argv[3] if len(sys.argv) > 3 else None)
    os.makedirs(dst, exist_ok=True)
    spec.save(dst)
    print(f"wrote {dst} (ctranslate2 {ctranslate2.__version__}, start token {tokens[start]!r})")


if __name__ == "__main__":
    main()
