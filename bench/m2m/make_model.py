#!/usr/bin/env python3
"""An M2M100 model at the bundled model's size, for bench/m2m/run.sh, and
its CTranslate2 conversions (float32 and int8) by CTranslate2's own
converter (ctranslate2.converters.TransformersConverter).

    make_model.py OUT [--lines N] [--max-length N]

OUT/hf: M2M100ForConditionalGeneration with the shape of models/en-de
(read from its config.json: d_model, layers, heads, ffn, positions), its
vocabulary the size of the bundled one: a SentencePiece BPE model trained
here on tests/data/en_de_test (the lines after the held-out ones, both
sides), fairseq's order (<s> <pad> </s> <unk>, the pieces), then M2M100's
100 language tokens and its 8 made-up words, the tokenizer files as
transformers' M2M100Tokenizer saves them (tools/make_m2m_fixtures.py's
layout). Random weights, seeded (torch.manual_seed(1), init_std 0.02): the
translations are nonsense and most run to the length limit; they are for
speed, and their agreement between engines is the check that both compute
the same model.
OUT/ct2-float32, OUT/ct2-int8: the converter's output (quantization None
and int8). OUT/src.ids: the first N lines of tests/data/en_de_test/test.en
as "__en__ pieces </s>" ids (M2M100Tokenizer, src_lang en), cut to 254
tokens; OUT/meta.json: the target token (__de__) and its id.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import ctranslate2  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
from ctranslate2.converters import TransformersConverter  # noqa: E402
from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer  # noqa: E402

from make_m2m_fixtures import m2m_vocab, read_lines  # noqa: E402

SPM_VOCAB = 7880  # pieces + 4 specials + 100 languages + 8 made-up words ~ the bundled 8000


def train_spm(tmp, lines, size):
    path = os.path.join(tmp, "train.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    prefix = os.path.join(tmp, "sp")
    spm.SentencePieceTrainer.train(input=path, model_prefix=prefix, vocab_size=size,
                                   model_type="bpe", character_coverage=1.0, num_threads=2,
                                   minloglevel=2)
    return prefix + ".model"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--lines", type=int, default=200, help="held-out source lines")
    ap.add_argument("--init-std", type=float, default=0.02)
    ap.add_argument("--max-length", type=int, default=256,
                    help="generation_config max_length (the engine's default)")
    a = ap.parse_args()
    base = json.load(open(os.path.join(ROOT, "models", "en-de", "config.json")))
    hf = os.path.join(a.out, "hf")
    os.makedirs(hf, exist_ok=True)
    en, de = read_lines("test.en"), read_lines("test.de")
    tmp = os.path.join(a.out, "spm")
    os.makedirs(tmp, exist_ok=True)
    spm_path = train_spm(tmp, en[a.lines:] + de[a.lines:], SPM_VOCAB)
    vpath = os.path.join(tmp, "vocab.json")
    with open(vpath, "w", encoding="utf-8") as f:
        json.dump(m2m_vocab(spm_path), f, ensure_ascii=False)
    codes = M2M100Tokenizer(vocab_file=vpath, spm_file=spm_path).lang_code_to_id
    langs = [f"__{c}__" for c in sorted(codes, key=codes.get)]
    tok = M2M100Tokenizer(vocab_file=vpath, spm_file=spm_path, language_codes="m2m100",
                          additional_special_tokens=langs)
    tok.save_pretrained(hf)
    vocab_size = len(tok.encoder) + len(codes) + tok.num_madeup_words
    torch.manual_seed(1)
    cfg = M2M100Config(vocab_size=vocab_size, d_model=base["d_model"],
                       encoder_layers=base["encoder_layers"], decoder_layers=base["decoder_layers"],
                       encoder_attention_heads=base["encoder_attention_heads"],
                       decoder_attention_heads=base["decoder_attention_heads"],
                       encoder_ffn_dim=base["encoder_ffn_dim"], decoder_ffn_dim=base["decoder_ffn_dim"],
                       max_position_embeddings=base["max_position_embeddings"], dropout=0.0,
                       attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
                       decoder_layerdrop=0.0, init_std=a.init_std, scale_embedding=True,
                       pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                       tie_word_embeddings=True)
    model = M2M100ForConditionalGeneration(cfg).eval()
    model.generation_config.max_length = a.max_length
    model.save_pretrained(hf, safe_serialization=True)

    for q in ("float32", "int8"):
        d = os.path.join(a.out, f"ct2-{q}")
        TransformersConverter(hf).convert(d, quantization=None if q == "float32" else q, force=True)
    # the converter's vocabulary must be the model's ids (run.sh maps ids to tokens with it)
    ct2_vocab = json.load(open(os.path.join(a.out, "ct2-float32", "shared_vocabulary.json")))
    assert len(ct2_vocab) == vocab_size, (len(ct2_vocab), vocab_size)
    for i in range(len(tok)):
        t = tok.convert_ids_to_tokens(i)
        assert ct2_vocab[i] == t, (i, ct2_vocab[i], t)

    tok.src_lang = "en"
    with open(os.path.join(a.out, "src.ids"), "w") as f:
        for line in en[:a.lines]:
            ids = tok(line)["input_ids"]
            if len(ids) > base["max_position_embeddings"] - 2:
                ids = ids[:base["max_position_embeddings"] - 3] + [ids[-1]]
            f.write(" ".join(map(str, ids)) + "\n")
    with open(os.path.join(a.out, "src.en"), "w", encoding="utf-8") as f:
        f.write("\n".join(en[:a.lines]) + "\n")
    tgt = tok.convert_tokens_to_ids("__de__")
    json.dump({"target_token": "__de__", "target_id": tgt, "vocab_size": vocab_size,
               "ctranslate2": ctranslate2.__version__, "config": cfg.to_dict()},
              open(os.path.join(a.out, "meta.json"), "w"), indent=1, default=str)
    print(f"{a.out}: M2M100 d_model {cfg.d_model}, {cfg.encoder_layers}+{cfg.decoder_layers} layers, "
          f"vocab {vocab_size}, __de__ = {tgt}")


if __name__ == "__main__":
    main()
