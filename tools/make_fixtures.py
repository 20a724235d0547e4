#!/usr/bin/env python3
# Regenerate:  tools/setup_venv.sh && tools/.venv/bin/python tools/make_fixtures.py
"""Build tiny random Marian checkpoints and their transformers goldens.

Writes tests/data/fixtures/<variant>/{config.json, generation_config.json, model.safetensors, golden.json}.
See tools/README.md for what every variant covers and for the exact score/length semantics of golden.json.

Stock variants (marian_*) are saved by MarianMTModel.save_pretrained and their goldens come from
MarianMTModel.from_pretrained(<dir>) + generate(), i.e. plain transformers.

Extension variants (ext_*) use config keys that transformers ignores (position_encoding, normalize_before, ...).
They are produced by *patching* the modules of a stock MarianMTModel (see "Extension patching" below) so that
transformers' own generate() (beam search, logits processors, cache handling) still drives decoding; only the
position handling / self-attention / layer order inside the model is replaced.

Storage copies (<variant>_f16 for every variant, marian_tied_bf16): the same weights as the F32 variant (same seed and
weight attempt, the same calibrated eos bias), saved with every tensor in F16/BF16; goldens are computed in float32
from the rounded weights as reloaded from disk. They need their F32 variant earlier in the same run (main() adds it).

Everything is deterministic: fixed seeds, one thread, deterministic algorithms, CPU, float32.
"""

import json
import math
import os
import sys
import zlib

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import safetensors  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import GenerationConfig, MarianConfig, MarianMTModel  # noqa: E402
from transformers.cache_utils import EncoderDecoderCache  # noqa: E402
from transformers.models.marian import modeling_marian as mm  # noqa: E402

transformers.logging.set_verbosity_error()
try:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
except Exception:  # pragma: no cover
    pass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "fixtures")

EOS = 0
GREEDY_MARGIN = 1e-3  # top-1 minus top-2 processed log-prob, every greedy step
EOS_BIAS = float(os.environ.get("EOS_BIAS", 1.5))  # added to final_logits_bias[eos]
EMB_STD = float(os.environ.get("EMB_STD", 0.5))
LINEAR_STD = float(os.environ.get("LINEAR_STD", 0.3))
LN_NEG_FRACTION = float(os.environ.get("LN_NEG_FRACTION", 0.5))
BEAM_MARGIN = 1e-4  # gaps between global beam candidates / heuristic comparisons / final scores

# ----------------------------------------------------------------------------------------------------------------
# Variants
# ----------------------------------------------------------------------------------------------------------------


def base_cfg(vocab, d, heads, ffn, enc=2, dec=2, **kw):
    cfg = dict(
        vocab_size=vocab,
        d_model=d,
        encoder_layers=enc,
        decoder_layers=dec,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=64,
        pad_token_id=vocab - 1,
        decoder_start_token_id=vocab - 1,
        eos_token_id=EOS,
        forced_eos_token_id=EOS,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        activation_function="swish",
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    cfg.update(kw)
    return cfg


# ext: dict of extension config keys (written into config.json); None for stock Marian.
VARIANTS = {
    "marian_tied": dict(cfg=base_cfg(64, 24, 4, 48), ext=None, sweep=True),
    # the original F16 copy: all COMMON_CASES (the reduced-precision copies added below use REDUCED_CASES)
    "marian_tied_f16": dict(cfg=None, ext=None, same_as="marian_tied", storage="F16", cases=None),
    "marian_separate": dict(
        cfg=base_cfg(
            61, 36, 4, 32, decoder_vocab_size=83, share_encoder_decoder_embeddings=False,
            activation_function="gelu", scale_embedding=False,
        ),
        ext=None,
    ),
    "marian_untied": dict(
        cfg=base_cfg(48, 24, 2, 40, enc=3, dec=1, tie_word_embeddings=False, activation_function="relu"),
        ext=None,
    ),
    "ext_learned": dict(
        cfg=base_cfg(40, 20, 2, 32, activation_function="gelu_new", scale_embedding=False),
        ext={"position_encoding": "learned"},
    ),
    "ext_interleaved": dict(
        cfg=base_cfg(53, 28, 2, 56), ext={"position_encoding": "sinusoidal_interleaved"},
    ),
    "ext_relative": dict(
        cfg=base_cfg(45, 24, 4, 48, activation_function="gelu"),
        ext={"position_encoding": "relative", "relative_attention_max_distance": 3},
    ),
    "ext_relative_keys": dict(
        cfg=base_cfg(41, 16, 2, 32, activation_function="relu"),
        ext={"position_encoding": "relative", "relative_attention_max_distance": 2},
        rel_values=False,
    ),
    "ext_rope": dict(
        cfg=base_cfg(57, 24, 2, 40, activation_function="gelu"),
        ext={"position_encoding": "rope", "rope_theta": 10000.0},
    ),
    "ext_prenorm": dict(
        cfg=base_cfg(97, 28, 4, 32, activation_function="swish"),
        ext={"position_encoding": "sinusoidal", "normalize_before": True},
    ),
}

# Reduced-precision storage copies: "<base>_f16" for every F32 variant (marian_tied_f16 is defined above and keeps
# all cases) and "marian_tied_bf16". Same weights (same seed, same attempt, same calibrated eos bias), every tensor
# rounded to the storage dtype on save; goldens are transformers in float32 from the rounded weights.
STORAGE_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
REDUCED_CASES = ("greedy_b16", "beam4_h2_attn", "beam16_h3")
for _base in [n for n, v in VARIANTS.items() if not v.get("same_as")]:
    if f"{_base}_f16" not in VARIANTS:
        VARIANTS[f"{_base}_f16"] = dict(cfg=None, ext=None, same_as=_base, storage="F16", cases=REDUCED_CASES)
VARIANTS["marian_tied_bf16"] = dict(cfg=None, ext=None, same_as="marian_tied", storage="BF16", cases=REDUCED_CASES)
del _base

# Cases: (name, beam, num_hyp, length_penalty, M, source lengths, attention)
# M is OUR max_length: generated tokens including </s>  (transformers max_length = M + 1).
COMMON_CASES = [
    ("greedy_b16", 1, 1, 1.0, 16, [1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 17, 20, 23, 26, 28, 30], False),
    ("beam4_h2_attn", 4, 2, 1.0, 12, [7, 1, 15, 3, 22, 10, 30], True),
    ("beam4_lp0.6", 4, 1, 0.6, 14, [5, 12, 2, 19, 27], False),
    ("beam4_lp1.5_h4", 4, 4, 1.5, 14, [9, 4, 16, 25, 1], False),
    ("beam16_h3", 16, 3, 1.0, 10, [6, 13, 21], False),
    ("greedy_b1_attn", 1, 1, 1.0, 20, [11], True),
]
SWEEP_POOL_LENGTHS = [9, 1, 4, 17, 2, 29, 12, 6, 23, 3, 14, 8, 19, 5, 26, 11]
SWEEP_BATCHES = [2, 5, 9, 16]

# early_stopping variants (marian_tied_es_true / marian_tied_es_never): marian_tied's weights stored F32 (same seed,
# weight attempt and eos bias), generation_config.json "early_stopping": true / "never", beam cases only (greedy does
# not use early_stopping). Short sources in the attention case keep the directory small.
ES_CASES = [
    ("beam4_h2_attn", 4, 2, 1.0, 10, [3, 1, 5, 2, 4], True),
    ("beam4_lp0.6_h2", 4, 2, 0.6, 14, [5, 12, 2, 9, 17, 7], False),
    ("beam4_lp1.5", 4, 1, 1.5, 14, [9, 4, 14, 3, 6, 11, 2], False),
    ("beam4_lp0.0_h2", 4, 2, 0.0, 14, [7, 13, 3, 10, 5], False),
    ("beam16_h3", 16, 3, 1.0, 10, [6, 13, 2, 9, 4], False),
]
# "never" with length_penalty > 0 runs every sentence to max_length: a shorter attention case keeps the size down
ES_NEVER_CASES = [("beam4_h2_attn", 4, 2, 1.0, 7, [2, 1, 3, 2, 3], True), ES_CASES[1],
                  ("beam4_lp1.5", 4, 1, 1.5, 14, [9, 4, 3, 6, 2], False)] + ES_CASES[3:] + [
    ("beam4_lp-0.5_h2", 4, 2, -0.5, 14, [8, 3, 12, 6, 15], False)]
VARIANTS["marian_tied_es_true"] = dict(cfg=None, ext=None, same_as="marian_tied", storage="F32", cases=None,
                                       case_defs=ES_CASES, early_stopping=True)
VARIANTS["marian_tied_es_never"] = dict(cfg=None, ext=None, same_as="marian_tied", storage="F32", cases=None,
                                        case_defs=ES_NEVER_CASES, early_stopping="never")


# ----------------------------------------------------------------------------------------------------------------
# Extension patching
#
# All patches keep the stock MarianMTModel object, its state-dict names and transformers' generate():
#   * PositionTable / LearnedPositions / NoPositions replace model.{encoder,decoder}.embed_positions
#     (same call signature as MarianSinusoidalPositionalEmbedding: (input_shape, cache_length, position_ids)).
#   * ExtSelfAttention (a MarianAttention subclass, so q_proj/k_proj/v_proj/out_proj names are unchanged)
#     replaces every encoder self_attn and decoder self_attn; cross-attention (encoder_attn) stays stock.
#     It adds relative_key / relative_value (nn.Embedding (2K+1, head_dim)) or applies RoPE.
#   * PreNormEncoderLayer / PreNormDecoderLayer swap the layer forward to pre-norm; PreNormEncoder /
#     PreNormDecoder apply the final model.{encoder,decoder}.layer_norm to last_hidden_state.
# ----------------------------------------------------------------------------------------------------------------


def marian_sinusoidal_table(n_pos, dim):
    """Marian layout (sin in the first half, cos in the second) exactly like transformers' create_weight."""
    return MarianSinCopy(n_pos, dim).table


class MarianSinCopy:
    def __init__(self, n_pos, dim):
        m = mm.MarianSinusoidalPositionalEmbedding(n_pos, dim)
        self.table = m.create_weight().float()


def interleaved_table(n_pos, dim):
    """Vaswani layout: pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(same); float64 then cast."""
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    i2 = np.arange(0, dim, 2, dtype=np.float64)[None, :]
    ang = pos / np.power(10000.0, i2 / dim)
    pe = np.zeros((n_pos, dim), dtype=np.float64)
    pe[:, 0::2] = np.sin(ang)
    pe[:, 1::2] = np.cos(ang)[:, : dim // 2]
    return torch.from_numpy(pe.astype(np.float32))


def _positions(module_device, input_ids_shape, cache_length, position_ids):
    if position_ids is None:
        seq_len = input_ids_shape[1]
        position_ids = torch.arange(cache_length, cache_length + seq_len, dtype=torch.long, device=module_device)
    return position_ids


class PositionTable(nn.Module):
    """Fixed (computed, not saved) absolute table: non-persistent buffer."""

    def __init__(self, table):
        super().__init__()
        self.register_buffer("table", table, persistent=False)

    def forward(self, input_ids_shape, cache_length=0, position_ids=None):
        return self.table[_positions(self.table.device, input_ids_shape, cache_length, position_ids)]


class LearnedPositions(nn.Embedding):
    """Learned absolute table saved as model.{encoder,decoder}.embed_positions.weight."""

    def forward(self, input_ids_shape, cache_length=0, position_ids=None):
        return super().forward(_positions(self.weight.device, input_ids_shape, cache_length, position_ids))


class NoPositions(nn.Module):
    """No absolute position term (relative / rope): adds an exact 0."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, input_ids_shape, cache_length=0, position_ids=None):
        return torch.zeros(input_ids_shape[1], self.dim)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope_cos_sin(positions, head_dim, theta):
    """HF Llama layout: inv_freq = 1/theta^(arange(0,hd,2)/hd), emb = cat(freqs, freqs); float64 then cast."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().float(), emb.sin().float()


class ExtSelfAttention(mm.MarianAttention):
    """Self-attention with mode 'absolute' (plain, used for the sanity check), 'relative' (Shaw) or 'rope'.

    q = q_proj(x) * head_dim**-0.5, k = k_proj(x), v = v_proj(x)  (per head).
    relative: logit[h,i,j] = q[h,i].k[h,j] + q[h,i].Rk[clip(j-i,-K,K)+K];
              out[h,i] = sum_j p[h,i,j] (v[h,j] + Rv[clip(j-i,-K,K)+K])  (Rv optional).
    rope:     q and k rotated at their absolute positions (keys cached after rotation).
    i, j are absolute positions: in the decoder with a cache, i = past_len + local index, keys j = 0..past_len+T-1.
    """

    def ext_setup(self, mode, max_distance=None, rel_values=True, theta=10000.0):
        self.ext_mode = mode
        self.ext_k = max_distance
        self.ext_theta = theta
        if mode == "relative":
            self.relative_key = nn.Embedding(2 * max_distance + 1, self.head_dim)
            if rel_values:
                self.relative_value = nn.Embedding(2 * max_distance + 1, self.head_dim)
        if mode == "rope":
            assert self.head_dim % 2 == 0, "rope needs an even head_dim"

    def forward(self, hidden_states, key_value_states=None, cache=None, attention_mask=None, **kwargs):
        assert key_value_states is None, "ExtSelfAttention is only used for self-attention"
        bsz, tlen, _ = hidden_states.shape
        shape = (bsz, tlen, -1, self.head_dim)
        q = (self.q_proj(hidden_states) * self.scaling).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)

        past = 0
        sa_cache = None
        if cache is not None:
            sa_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
            past = sa_cache.get_seq_length(self.layer_idx)
        pos_q = torch.arange(past, past + tlen)
        if self.ext_mode == "rope":
            cos, sin = rope_cos_sin(pos_q, self.head_dim, self.ext_theta)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        if sa_cache is not None:
            k, v = sa_cache.update(k, v, self.layer_idx)
        slen = k.shape[2]
        pos_k = torch.arange(slen)

        logits = torch.matmul(q, k.transpose(2, 3))
        if self.ext_mode == "relative":
            idx = (pos_k[None, :] - pos_q[:, None]).clamp(-self.ext_k, self.ext_k) + self.ext_k  # (T, S)
            rk = self.relative_key.weight[idx]  # (T, S, hd)
            logits = logits + torch.einsum("bhtd,tsd->bhts", q, rk)
        if attention_mask is not None:
            if attention_mask.dtype == torch.bool:
                attention_mask = torch.where(
                    attention_mask, torch.zeros((), dtype=logits.dtype), torch.finfo(logits.dtype).min
                )
            logits = logits + attention_mask[:, :, :, :slen]
        elif self.is_causal and tlen > 1:
            logits = logits.masked_fill(pos_k[None, :] > pos_q[:, None], torch.finfo(logits.dtype).min)
        p = nn.functional.softmax(logits, dim=-1)
        out = torch.matmul(p, v)
        if self.ext_mode == "relative" and hasattr(self, "relative_value"):
            rv = self.relative_value.weight[idx]
            out = out + torch.einsum("bhts,tsd->bhtd", p, rv)
        out = out.transpose(1, 2).reshape(bsz, tlen, -1).contiguous()
        return self.out_proj(out), p


class PreNormEncoderLayer(mm.MarianEncoderLayer):
    def forward(self, hidden_states, attention_mask, **kwargs):
        residual = hidden_states
        h, _ = self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask=attention_mask, **kwargs)
        hidden_states = residual + h
        residual = hidden_states
        h = self.fc2(self.activation_fn(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + h


class PreNormDecoderLayer(mm.MarianDecoderLayer):
    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                cache=None, use_cache=True, **kwargs):
        residual = hidden_states
        h, _ = self.self_attn(self.self_attn_layer_norm(hidden_states), cache=cache,
                              attention_mask=attention_mask, **kwargs)
        hidden_states = residual + h
        if encoder_hidden_states is not None:
            residual = hidden_states
            h, _ = self.encoder_attn(self.encoder_attn_layer_norm(hidden_states),
                                     key_value_states=encoder_hidden_states,
                                     attention_mask=encoder_attention_mask, cache=cache, **kwargs)
            hidden_states = residual + h
        residual = hidden_states
        h = self.fc2(self.activation_fn(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + h


class PreNormEncoder(mm.MarianEncoder):
    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.last_hidden_state = self.layer_norm(out.last_hidden_state)
        out["last_hidden_state"] = out.last_hidden_state
        return out


class PreNormDecoder(mm.MarianDecoder):
    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.last_hidden_state = self.layer_norm(out.last_hidden_state)
        out["last_hidden_state"] = out.last_hidden_state
        return out


def patch_model(model, ext, rel_values=True, abs_table=None):
    """Apply the extension described by `ext` (config keys) to a stock MarianMTModel, in place.

    abs_table: for the sanity check only, force an absolute table + ExtSelfAttention('absolute').
    """
    cfg = model.config
    d = cfg.d_model
    npos = cfg.max_position_embeddings
    enc, dec = model.model.encoder, model.model.decoder
    pe = ext.get("position_encoding", "sinusoidal")
    if abs_table is not None:
        mode = "absolute"
        enc.embed_positions = PositionTable(abs_table.clone())
        dec.embed_positions = PositionTable(abs_table.clone())
    elif pe == "sinusoidal":
        mode = None  # stock positions and attention
    elif pe == "sinusoidal_interleaved":
        mode = None
        enc.embed_positions = PositionTable(interleaved_table(npos, d))
        dec.embed_positions = PositionTable(interleaved_table(npos, d))
    elif pe == "learned":
        mode = None
        enc.embed_positions = LearnedPositions(npos, d)
        dec.embed_positions = LearnedPositions(npos, d)
        model._keys_to_ignore_on_save = set()  # MarianMTModel drops embed_positions on save by default
    elif pe in ("relative", "rope"):
        mode = pe
        enc.embed_positions = NoPositions(d)
        dec.embed_positions = NoPositions(d)
    else:
        raise ValueError(pe)

    if mode is not None:
        for layer in list(enc.layers) + list(dec.layers):
            layer.self_attn.__class__ = ExtSelfAttention
            layer.self_attn.ext_setup(mode, ext.get("relative_attention_max_distance"), rel_values,
                                      float(ext.get("rope_theta", 10000.0)))

    if ext.get("normalize_before", False):
        for layer in enc.layers:
            layer.__class__ = PreNormEncoderLayer
        for layer in dec.layers:
            layer.__class__ = PreNormDecoderLayer
        enc.__class__ = PreNormEncoder
        dec.__class__ = PreNormDecoder
        enc.layer_norm = nn.LayerNorm(d)
        dec.layer_norm = nn.LayerNorm(d)
        # transformers keys its output-recording registry (output_attentions=True) on the class name
        from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY

        _CAN_RECORD_REGISTRY[enc] = enc._can_record_outputs
        _CAN_RECORD_REGISTRY[dec] = dec._can_record_outputs
    return model


# ----------------------------------------------------------------------------------------------------------------
# Model construction / loading
# ----------------------------------------------------------------------------------------------------------------


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def make_config(vdef):
    cfg = MarianConfig(**vdef["cfg"])
    for k, v in (vdef["ext"] or {}).items():
        setattr(cfg, k, v)
    cfg._attn_implementation = "eager"
    return cfg


def build_model(cfg, ext, rel_values):
    model = MarianMTModel(cfg)
    if ext:
        patch_model(model, ext, rel_values)
    model.eval()
    return model


def randomize(model, seed, eos_bias):
    """Large random weights so that next-token distributions are peaked (no near-ties)."""
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if not p.requires_grad:  # frozen computed tables (stock sinusoidal embed_positions)
                continue
            if "layer_norm" in name and name.endswith(".weight"):
                # |gamma| in [0.8, 1.2]; random signs (LN_SIGNS) break the tied-embedding self-prediction
                # (otherwise every hypothesis repeats its input token and never emits </s> early)
                mag = 0.8 + 0.4 * torch.rand(p.shape, generator=g)
                sign = torch.where(torch.rand(p.shape, generator=g) < LN_NEG_FRACTION, -1.0, 1.0)
                p.copy_(mag * sign)
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name or "shared" in name or "lm_head" in name:
                p.copy_(EMB_STD * torch.randn(p.shape, generator=g))
            elif "relative_" in name or "embed_positions" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(LINEAR_STD * torch.randn(p.shape, generator=g))
        # transformers 5.x does not tie encoder/decoder embed_tokens to model.shared when
        # tie_word_embeddings is false: keep them equal (as in any real shared-vocabulary checkpoint).
        if cfg.share_encoder_decoder_embeddings and not cfg.tie_word_embeddings:
            model.model.encoder.embed_tokens.weight.copy_(model.model.shared.weight)
            model.model.decoder.embed_tokens.weight.copy_(model.model.shared.weight)
        flb = torch.randn(model.final_logits_bias.shape, generator=g)
        flb[0, EOS] += eos_bias
        model.final_logits_bias.copy_(flb)


EOS_CAL = {}


def calibrate_eos_bias(model, seed, quantile=0.5, M=16):
    """Set final_logits_bias[eos] so that about half of greedy decodes end before max_length.

    Random tiny decoders fall into fixed points/cycles quickly, so a constant eos bias gives either
    no early </s> at all or </s> at step 1 everywhere. Instead: decode greedily with </s> disabled,
    record per source m = min over steps of (best non-eos logit - eos logit without bias), and put
    the bias halfway between two neighbouring m values around the median. Greedy paths with the
    final bias are those paths cut at the first step whose gap falls below the bias.
    """
    pad = model.config.pad_token_id
    with torch.no_grad():
        model.final_logits_bias[0, EOS] = -1e4
    rng = np.random.default_rng(seed + 7)
    lengths = [int(x) for x in rng.integers(2, 31, size=40)]
    srcs = [draw_source(rng, L, model.config.vocab_size) for L in lengths]
    ids, mask = pad_batch(srcs, pad)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_config(pad, 1, 1, 1.0, M))
    mins = []
    for i in range(len(srcs)):
        m = math.inf
        for t in range(M - 1):
            lg = out.logits[t][i].double().clone()
            eos_nb = float(lg[EOS]) + 1e4
            lg[EOS] = -math.inf
            lg[pad] = -math.inf
            m = min(m, float(lg.max()) - eos_nb)
        mins.append(m)
    mins.sort()
    k = int(len(mins) * quantile)
    bias = 0.5 * (mins[k - 1] + mins[k])
    with torch.no_grad():
        model.final_logits_bias[0, EOS] = bias
    EOS_CAL[seed] = bias
    return bias


def load_fixture_model(d, vdef):
    """Load the saved checkpoint the way the goldens are computed (float32 compute)."""
    if not vdef.get("ext"):
        model = MarianMTModel.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        return model
    cfg = MarianConfig.from_pretrained(d)
    for k, v in vdef["ext"].items():
        assert getattr(cfg, k, None) == v, f"extension key {k} not kept in config.json"
    cfg._attn_implementation = "eager"
    model = build_model(cfg, vdef["ext"], vdef.get("rel_values", True))
    sd = {k: v.float() for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    tied = set(model.get_expanded_tied_weights_keys(all_submodels=True).keys())
    computed = {k for k in missing if k.endswith("embed_positions.weight")
                and vdef["ext"].get("position_encoding", "sinusoidal") == "sinusoidal"}
    assert set(missing) <= tied | computed, f"missing in checkpoint: {set(missing) - tied - computed}"
    for k in computed:  # stock Marian table, computed at init
        t = marian_sinusoidal_table(cfg.max_position_embeddings, cfg.d_model)
        assert torch.equal(model.get_parameter(k), t), k
    return model


def save_fixture(model, d, vdef, pad):
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    model.save_pretrained(d, safe_serialization=True)
    # config.json: make sure the extension keys are there (transformers keeps unknown keys; enforce anyway)
    cpath = os.path.join(d, "config.json")
    cj = json.load(open(cpath))
    for k, v in (vdef.get("ext") or {}).items():
        cj[k] = v
    cj.pop("_attn_implementation", None)
    with open(cpath, "w") as f:
        json.dump(cj, f, indent=2, sort_keys=True)
        f.write("\n")
    gen = {"bad_words_ids": [[pad]], "decoder_start_token_id": pad, "eos_token_id": EOS, "forced_eos_token_id": EOS,
           "pad_token_id": pad, "num_beams": 4, "max_length": 64}
    if vdef.get("early_stopping", False) is not False:  # absent (= false) in every other variant
        gen["early_stopping"] = vdef["early_stopping"]
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")


# ----------------------------------------------------------------------------------------------------------------
# Generation with margin recording
# ----------------------------------------------------------------------------------------------------------------


class BeamRecorder:
    """Wraps the beam-search helpers of one model instance to record what the margin checks need."""

    def __init__(self, model):
        self.model = model
        self.reset()
        orig_topk = model._get_top_k_continuations
        orig_heur = model._check_early_stop_heuristic
        orig_fin = model._update_finished_beams

        def topk(*a, **kw):
            acc = kw["accumulated_log_probs"]
            self.topk.append(acc.detach().clone())
            return orig_topk(*a, **kw)

        def heur(**kw):
            lp = kw["length_penalty"]
            hyp_len = kw["cur_len"] - kw["decoder_prompt_len"]
            if kw["early_stopping"] == "never" and lp > 0.0:
                hyp_len = kw["max_length"] - kw["decoder_prompt_len"]
            best = kw["running_beam_scores"][:, 0] / (hyp_len ** lp)
            worst = torch.where(kw["is_sent_finished"].all(dim=1), kw["beam_scores"].min(dim=1)[0],
                                torch.full_like(best, -1e9))
            state = kw["is_early_stop_heuristic_unsatisfied"][:, 0].clone()
            if kw["early_stopping"] is True:
                # early_stopping True: a sentence whose B finished slots were all filled before this step is done
                # (nothing can be added any more), whatever the heuristic says
                if self.prev_all_fin is not None:
                    state &= ~self.prev_all_fin
                self.prev_all_fin = kw["is_sent_finished"].all(dim=1).clone()
            self.heur.append((state, best.clone(), worst.clone()))
            return orig_heur(**kw)

        def fin(*a, **kw):
            res = orig_fin(*a, **kw)
            self.final_scores = res[1].detach().clone()
            return res

        model._get_top_k_continuations = topk
        model._check_early_stop_heuristic = heur
        model._update_finished_beams = fin

    def reset(self):
        self.topk, self.heur, self.final_scores = [], [], None
        self.prev_all_fin = None

    def violations(self, num_beams, batch):
        """Per batch item: smallest relevant gap (inf if none).

        self.heur[s] is recorded at the stopping check after step s and holds the state *during* step s
        (is_early_stop_heuristic_unsatisfied before the check): step s matters for an item iff that is True.
        """
        worst = [math.inf] * batch
        for s, acc in enumerate(self.topk):
            state, best, wf = self.heur[s] if s < len(self.heur) else (None, None, None)
            for b in range(batch):
                if state is not None and not bool(state[b]):
                    continue
                top = torch.sort(acc[b], descending=True).values[: 2 * num_beams + 1].double()
                top = top[torch.isfinite(top) & (top > -1e8)]
                if len(top) > 1:
                    worst[b] = min(worst[b], float((top[:-1] - top[1:]).min()))
                if state is not None and float(wf[b]) > -1e8 and math.isfinite(float(best[b])):
                    worst[b] = min(worst[b], abs(float(best[b]) - float(wf[b])))
        fs = self.final_scores
        for b in range(batch):
            v = torch.sort(fs[b], descending=True).values.double()
            v = v[torch.isfinite(v) & (v > -1e8)]
            if len(v) > 1:
                worst[b] = min(worst[b], float((v[:-1] - v[1:]).min()))
        return worst


def gen_config(pad, beam, nhyp, lp, M, early_stopping=False):
    return GenerationConfig(
        bad_words_ids=[[pad]], decoder_start_token_id=pad, eos_token_id=EOS, forced_eos_token_id=EOS,
        pad_token_id=pad, num_beams=beam, num_return_sequences=nhyp, length_penalty=lp, max_length=M + 1,
        early_stopping=early_stopping, do_sample=False, output_scores=True, output_logits=True,
        return_dict_in_generate=True, use_cache=True,
    )


def pad_batch(sources, pad):
    L = max(len(s) for s in sources)
    ids = torch.full((len(sources), L), pad, dtype=torch.long)
    mask = torch.zeros((len(sources), L), dtype=torch.long)
    for i, s in enumerate(sources):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids, mask


def strip(seq, pad):
    toks = seq.tolist()[1:]  # drop decoder start
    assert EOS in toks, f"no eos in generated sequence {toks}"
    toks = toks[: toks.index(EOS) + 1]
    assert pad not in toks
    return toks


def run_generate(model, rec, sources, pad, beam, nhyp, lp, M, early_stopping=False):
    """Generate a padded batch; return per-source list of (tokens, score_or_None) and per-source min margin."""
    ids, mask = pad_batch(sources, pad)
    rec.reset()
    with torch.no_grad():
        gc = gen_config(pad, beam, nhyp, lp, M, early_stopping)
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)
    n = len(sources)
    res = []
    for i in range(n):
        hyps = []
        for h in range(nhyp):
            r = i * nhyp + h
            toks = strip(out.sequences[r], pad)
            score = float(out.sequences_scores[r]) if beam > 1 else None
            hyps.append((toks, score))
        res.append(hyps)
    if beam == 1:
        margins = [math.inf] * n
        for s, sc in enumerate(out.scores):
            for i in range(n):
                if s < len(res[i][0][0]):
                    top2 = torch.topk(sc[i].double(), 2).values
                    margins[i] = min(margins[i], float(top2[0] - top2[1]))
        # consistency: raw logits from the cached incremental decode vs teacher forcing (checked by caller)
        raw = [torch.stack([out.logits[s][i] for s in range(len(res[i][0][0]))]) for i in range(n)]
    else:
        margins = rec.violations(beam, n)
        raw = None
    return res, margins, raw


def teacher_forced(model, src, toks, pad, attentions=False):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([[pad] + toks[:-1]]),
                    output_attentions=attentions, return_dict=True)
    return out


def greedy_score(model, src, toks, pad, M, lp):
    logits = teacher_forced(model, src, toks, pad).logits[0].float()
    lps = torch.log_softmax(logits, dim=-1)
    lps[:, pad] = -math.inf
    total = 0.0
    for t, tok in enumerate(toks):
        if t == M - 1:  # forced eos step: contributes 0
            assert tok == EOS
            continue
        total += float(lps[t, tok])
    return total / (len(toks) ** lp), logits


def round7(x):
    return float(f"{x:.7g}")


# ----------------------------------------------------------------------------------------------------------------
# Fixture generation
# ----------------------------------------------------------------------------------------------------------------

STATS = {"redrawn": {}, "sanity": {}, "alone_mismatch": [], "cache_vs_tf": {}, "score_alone_diff": {},
         "eos_early": {}}


def draw_source(rng, length, vocab):
    return [int(x) for x in rng.integers(1, vocab - 1, size=length - 1)] + [EOS]


class EosOnlySourceViolation(Exception):
    """The [eos]-only source cannot be redrawn: the caller draws new weights (next weight seed) instead."""


WEIGHT_ATTEMPT = {}  # variant -> weight seed attempt that was used


def solve_group(model, rec, name, pool, cases, vocab, pad, rng):
    """Run all cases of a group (cases index into pool); redraw pool sources that violate margins."""
    redrawn = 0
    for it in range(50):
        bad = set()
        results = []
        for case in cases:
            srcs = [pool[j] for j in case["idx"]]
            res, margins, raw = run_generate(model, rec, srcs, pad, case["beam"], case["nhyp"], case["lp"], case["M"],
                                             case["es"])
            need = GREEDY_MARGIN if case["beam"] == 1 else BEAM_MARGIN
            for k, m in enumerate(margins):
                if m < need:
                    bad.add(case["idx"][k])
            results.append((res, raw))
        if not bad:
            return results, redrawn
        for j in sorted(bad):
            if len(pool[j]) == 1:
                raise EosOnlySourceViolation(name)
            pool[j] = draw_source(rng, len(pool[j]), vocab)
            redrawn += 1
    raise RuntimeError(f"{name}: could not satisfy margins")


def make_variant(vname):
    vdef = VARIANTS[vname]
    if vdef.get("same_as"):
        attempts = [WEIGHT_ATTEMPT[vdef["same_as"]]]
    else:
        attempts = range(20)
    for attempt in attempts:
        try:
            return make_variant_attempt(vname, attempt)
        except EosOnlySourceViolation:
            print(f"{vname}: weight attempt {attempt}: the [eos]-only source violates a margin, new weights",
                  flush=True)
    raise RuntimeError(f"{vname}: no weight seed satisfies the margins of the [eos]-only source")


def make_variant_attempt(vname, attempt):
    vdef = VARIANTS[vname]
    weight_seed = seed_of(vdef.get("same_as") or vname) + 1000 * attempt
    if vdef.get("same_as"):  # same model, other storage: take the base definition, without its sweep
        base = VARIANTS[vdef["same_as"]]
        vdef = dict(base, sweep=False, storage=vdef["storage"], cases=vdef.get("cases"),
                    case_defs=vdef.get("case_defs"), early_stopping=vdef.get("early_stopping", False))
    storage = vdef.get("storage", "F32")
    d = os.path.join(OUT, vname)
    cfg = make_config(vdef)
    pad = cfg.pad_token_id
    src_vocab = cfg.vocab_size
    assert pad == src_vocab - 1 and cfg.decoder_start_token_id == pad
    torch.manual_seed(seed_of(vname))
    model = build_model(cfg, vdef["ext"], vdef.get("rel_values", True))
    randomize(model, weight_seed, vdef.get("eos_bias", EOS_BIAS))
    if weight_seed in EOS_CAL:  # a storage copy: the eos bias of its F32 original (rounded on save)
        with torch.no_grad():
            model.final_logits_bias[0, EOS] = EOS_CAL[weight_seed]
    else:
        calibrate_eos_bias(model, weight_seed)
    if storage != "F32":
        model = model.to(STORAGE_DTYPES[storage])
    save_fixture(model, d, vdef, pad)

    # reload from disk: goldens describe exactly what is on disk
    model = load_fixture_model(d, vdef)
    assert next(model.parameters()).dtype == torch.float32
    # the reloaded weights are the F32 originals, rounded to the storage dtype (F32: unchanged)
    ref = build_model(make_config(vdef), vdef["ext"], vdef.get("rel_values", True))
    randomize(ref, weight_seed, vdef.get("eos_bias", EOS_BIAS))
    with torch.no_grad():
        ref.final_logits_bias[0, EOS] = EOS_CAL[weight_seed]
    a = dict(model.state_dict())
    b = dict(ref.state_dict())
    computed_pos = isinstance(model.model.encoder.embed_positions, mm.MarianSinusoidalPositionalEmbedding)
    for k in b:
        if k in a:
            want = b[k]
            if not (computed_pos and k.endswith("embed_positions.weight")):  # computed table, not stored
                want = want.to(STORAGE_DTYPES[storage]).float()
            assert torch.equal(a[k], want), f"reloaded {k} differs"
    st_dtypes = {str(t.dtype) for t in load_file(os.path.join(d, "model.safetensors")).values()}
    assert st_dtypes == {str(STORAGE_DTYPES[storage])}, st_dtypes
    rec = BeamRecorder(model)

    rng = np.random.default_rng(seed_of(vname) + 1)
    cases_out = []
    groups = []
    es = vdef.get("early_stopping", False)
    for (cname, beam, nhyp, lp, M, lengths, attn) in (vdef.get("case_defs") or COMMON_CASES):
        if vdef.get("cases") is not None and cname not in vdef["cases"]:
            continue
        pool = [draw_source(rng, L, src_vocab) for L in lengths]
        groups.append((pool, [dict(name=cname, beam=beam, nhyp=nhyp, lp=lp, M=M, idx=list(range(len(pool))),
                                   attn=attn, es=es)]))
    if vdef.get("sweep"):
        pool = [draw_source(rng, L, src_vocab) for L in SWEEP_POOL_LENGTHS]
        srng = np.random.default_rng(seed_of(vname) + 2)
        sweep_cases = []
        for beam, M in ((1, 16), (2, 12)):
            for bs in SWEEP_BATCHES:
                idx = [0] + [int(x) + 1 for x in srng.permutation(len(pool) - 1)[: bs - 1]]
                idx = [idx[i] for i in srng.permutation(bs)]
                kind = "greedy" if beam == 1 else "beam2"
                sweep_cases.append(dict(name=f"sweep_{kind}_bs{bs}", beam=beam, nhyp=1, lp=1.0, M=M, idx=idx,
                                        attn=False, es=es))
        groups.append((pool, sweep_cases))

    total_redrawn = 0
    max_tf_diff = 0.0
    max_alone_score_diff = 0.0
    n_early = n_total = 0
    for pool, cases in groups:
        results, redrawn = solve_group(model, rec, vname, pool, cases, src_vocab, pad, rng)
        total_redrawn += redrawn
        for case, (res, raw) in zip(cases, results):
            srcs = [pool[j] for j in case["idx"]]
            case_json = dict(name=case["name"], beam_size=case["beam"], num_hypotheses=case["nhyp"],
                             length_penalty=case["lp"], max_length=case["M"], attention=case["attn"],
                             sources=srcs, results=[])
            for i, src in enumerate(srcs):
                hyps = res[i]
                # consistency: the same source alone
                alone, _, _ = run_generate(model, rec, [src], pad, case["beam"], case["nhyp"], case["lp"], case["M"],
                                           case["es"])
                for h in range(case["nhyp"]):
                    if alone[0][h][0] != hyps[h][0]:
                        STATS["alone_mismatch"].append((vname, case["name"], i, h, hyps[h][0], alone[0][h][0]))
                    elif hyps[h][1] is not None:
                        max_alone_score_diff = max(max_alone_score_diff, abs(alone[0][h][1] - hyps[h][1]))
                hyp_json = []
                for h, (toks, score) in enumerate(hyps):
                    n_total += 1
                    n_early += int(len(toks) < case["M"])
                    if case["beam"] == 1:
                        score, tf_logits = greedy_score(model, src, toks, pad, case["M"], case["lp"])
                        max_tf_diff = max(max_tf_diff, float((tf_logits - raw[i]).abs().max()))
                    hyp_json.append({"tokens": toks, "score": score})
                r = {"hypotheses": hyp_json}
                if case["attn"]:
                    best = hyps[0][0]
                    out = teacher_forced(model, src, best, pad, attentions=True)
                    ca = out.cross_attentions
                    assert ca is not None and len(ca) == model.config.decoder_layers
                    W = [[[[round7(x) for x in row] for row in head] for head in layer[0].tolist()] for layer in ca]
                    assert len(W[0][0]) == len(best) and len(W[0][0][0]) == len(src)
                    r["attention"] = W
                case_json["results"].append(r)
            cases_out.append(case_json)

    golden = {
        "variant": vname,
        "dtype": storage,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "cases": cases_out,
    }
    if es is not False:  # only the early_stopping variants (the other goldens stay byte-identical)
        golden = dict(list(golden.items())[:2] + [("early_stopping", es)] + list(golden.items())[2:])
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    WEIGHT_ATTEMPT[vname] = attempt
    STATS["redrawn"][vname] = total_redrawn
    STATS["cache_vs_tf"][vname] = max_tf_diff
    STATS["score_alone_diff"][vname] = max_alone_score_diff
    STATS["eos_early"][vname] = (n_early, n_total)
    STATS.setdefault("eos_bias", {})[vname] = float(model.final_logits_bias[0, EOS])  # as stored (rounded)
    return model


def sanity_check_patching():
    """Variant (a) through the patched code path (Marian sinusoidal table as a PositionTable +
    ExtSelfAttention('absolute')) must reproduce unpatched transformers."""
    vdef = VARIANTS["marian_tied"]
    d = os.path.join(OUT, "marian_tied")
    stock = load_fixture_model(d, vdef)
    cfg = MarianConfig.from_pretrained(d)
    cfg._attn_implementation = "eager"
    patched = MarianMTModel(cfg)
    table = marian_sinusoidal_table(cfg.max_position_embeddings, cfg.d_model)
    patch_model(patched, {}, abs_table=table)
    missing, unexpected = patched.load_state_dict(load_file(os.path.join(d, "model.safetensors")), strict=False)
    assert not unexpected
    patched.eval()
    g = json.load(open(os.path.join(d, "golden.json")))
    pad = cfg.pad_token_id
    max_logit = 0.0
    tok_mismatch = 0
    max_score = 0.0
    rec_p, rec_s = BeamRecorder(patched), BeamRecorder(stock)
    for case in g["cases"]:
        if not case["name"].startswith(("greedy_b16", "beam4_h2", "beam16")):
            continue
        srcs = case["sources"]
        for src, r in zip(srcs, case["results"]):
            toks = r["hypotheses"][0]["tokens"]
            a = teacher_forced(stock, src, toks, pad).logits
            b = teacher_forced(patched, src, toks, pad).logits
            max_logit = max(max_logit, float((a - b).abs().max()))
        args = (pad, case["beam_size"], case["num_hypotheses"], case["length_penalty"], case["max_length"])
        rs, _, _ = run_generate(stock, rec_s, srcs, *args)
        rp, _, _ = run_generate(patched, rec_p, srcs, *args)
        for hs, hp in zip(rs, rp):
            for (ts, ss), (tp, sp) in zip(hs, hp):
                tok_mismatch += int(ts != tp)
                if ss is not None and ts == tp:
                    max_score = max(max_score, abs(ss - sp))
    # the computed tables themselves
    pos_diff = float((stock.model.encoder.embed_positions.weight.detach() - table).abs().max())
    STATS["sanity"] = dict(max_logit_diff=max_logit, token_mismatches=tok_mismatch, max_beam_score_diff=max_score,
                           sinusoidal_table_diff=pos_diff)


def dir_size(p):
    return sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p))


def main():
    names = sys.argv[1:] or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    # a storage copy needs its F32 original generated earlier in the same run (weight attempt, eos bias)
    for n in list(names):
        base = VARIANTS[n].get("same_as")
        if base and base not in names[: names.index(n)]:
            print(f"{n}: generating its F32 original {base} first", flush=True)
            if base in names:
                names.remove(base)
            names.insert(names.index(n), base)
    os.makedirs(OUT, exist_ok=True)
    for n in names:
        make_variant(n)
        print(f"{n}: done, {dir_size(os.path.join(OUT, n)) / 1024:.1f} KiB", flush=True)
    if "marian_tied" in names:
        sanity_check_patching()
    print("\n== summary ==")
    print("transformers", transformers.__version__, "torch", torch.__version__, "safetensors", safetensors.__version__)
    for n in names:
        d = os.path.join(OUT, n)
        ms = os.path.getsize(os.path.join(d, "model.safetensors"))
        print(f"{n:20s} total {dir_size(d) / 1024:7.1f} KiB  model {ms / 1024:6.1f} KiB  "
              f"redrawn {STATS['redrawn'][n]:2d}  eos_bias {STATS['eos_bias'][n]:6.2f}  eos<M {STATS['eos_early'][n][0]}/{STATS['eos_early'][n][1]}  "
              f"cache-vs-teacher-forced logits {STATS['cache_vs_tf'][n]:.2e}  "
              f"batch-vs-alone beam score {STATS['score_alone_diff'][n]:.2e}")
    total = sum(dir_size(os.path.join(OUT, n)) for n in os.listdir(OUT) if os.path.isdir(os.path.join(OUT, n)))
    print(f"fixtures total {total / 1024:.1f} KiB")
    if STATS["sanity"]:
        print("sanity (patched path vs stock, marian_tied):", STATS["sanity"])
    print("batch-vs-alone token mismatches:", len(STATS["alone_mismatch"]))
    for m in STATS["alone_mismatch"]:
        print("  MISMATCH", m)
    return 1 if STATS["alone_mismatch"] else 0


if __name__ == "__main__":
    sys.exit(main())
