#!/usr/bin/env python3
# Regenerate:  tools/setup_venv.sh && tools/.venv/bin/python tools/make_m2m_fixtures.py
"""Goldens for M2M100ForConditionalGeneration (model_type m2m_100) in both
tokenizer layouts: M2M100's (vocab.json + sentencepiece.bpe.model, language
tokens __xx__) and NLLB-200's (sentencepiece.bpe.model with fairseq's id
offset, language codes such as deu_Latn after the pieces).

For each layout: a tiny SentencePiece BPE model trained here on the first
lines of tests/data/en_de_test, a tiny random M2M100 saved with
save_pretrained (safetensors), the tokenizer files as transformers' own
tokenizer classes save them, and transformers' generate on held-out lines
for several target languages (forced_bos_token_id), greedy and num_beams=4:
the input ids, output ids, scores and decoded text, in
tests/data/m2m/golden.json. tests/test_m2m.c holds the engine to them.

Scores: beam search's sequences_scores; for greedy, the sum of the
log-softmax of each step's logits at the chosen token, a forced step (the
target language) counting 0 as in beam search, divided by the number of
generated tokens (length_penalty 1), the engine's greedy score.
"""
import json
import math
import os
import random
import shutil
import sys
import tempfile

import sentencepiece as spm
import torch
from transformers import (M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer,
                          NllbTokenizer)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "m2m")
TRAIN_LINES = 600        # lines of each side that train the SentencePiece model
HELD_OUT = 6             # golden lines, after them
SPM_VOCAB = 300
MAX_LENGTH = 20          # transformers' max_length (counts the decoder start)
GREEDY_MARGIN = 1e-3     # top-1 minus top-2 log-prob at every free greedy step
NLLB_LANGS = ["deu_Latn", "eng_Latn", "fra_Latn", "ita_Latn", "spa_Latn"]
PAIRS = [("en", "de"), ("en", "fr"), ("de", "en"), ("de", "es")]
NLLB_CODE = {"en": "eng_Latn", "de": "deu_Latn", "fr": "fra_Latn", "es": "spa_Latn"}


def read_lines(name):
    with open(os.path.join(ROOT, "tests", "data", "en_de_test", name), encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f]


def train_spm(tmp, lines):
    path = os.path.join(tmp, "train.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    prefix = os.path.join(tmp, "sp")
    spm.SentencePieceTrainer.train(input=path, model_prefix=prefix, vocab_size=SPM_VOCAB,
                                   model_type="bpe", character_coverage=1.0, seed_sentencepiece_size=100000,
                                   num_threads=1, minloglevel=2)
    return prefix + ".model"


def m2m_vocab(spm_path):
    """fairseq's dictionary order: <s> <pad> </s> <unk>, then the pieces,
    here shuffled so that the ids differ from the SentencePiece ids (the
    mapping must go through vocab.json)."""
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))]
    random.Random(7).shuffle(pieces)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for p in pieces:
        vocab[p] = len(vocab)
    return vocab


def tiny_model(vocab_size, seed, eos_gain, tied):
    """Tied (M2M100's default): the decoder's input embedding dominates its
    output and the tiny model repeats tokens; untied, with a wide output
    projection, its outputs vary (both are checked)."""
    torch.manual_seed(seed)
    cfg = M2M100Config(vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                       decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.0,
                       attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
                       decoder_layerdrop=0.0, init_std=0.12, scale_embedding=True,
                       pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                       tie_word_embeddings=tied)
    model = M2M100ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        # the layer norms away from 1/0, so that a misplaced norm shows
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
        if not tied:
            model.lm_head.weight.normal_(0.0, 1.0)
        # some decodes end with </s> before max_length
        (model.model.shared if tied else model.lm_head).weight[2].mul_(eos_gain)
    return model


def greedy_margin(step_logits, forced):
    worst = math.inf
    for t, lg in enumerate(step_logits):
        if t in forced:
            continue
        top = torch.topk(torch.log_softmax(lg.float(), -1), 2).values
        worst = min(worst, float(top[0] - top[1]))
    return worst


def run_case(model, tok, ids, tgt_id, beams):
    inp = torch.tensor([ids])
    out = model.generate(inp, attention_mask=torch.ones_like(inp), num_beams=beams,
                         do_sample=False, max_length=MAX_LENGTH, forced_bos_token_id=tgt_id,
                         length_penalty=1.0, early_stopping=False, num_return_sequences=1,
                         output_scores=True, output_logits=True, return_dict_in_generate=True)
    seq = out.sequences[0].tolist()[1:]  # without the decoder start token
    while seq and seq[-1] == model.config.pad_token_id:
        seq.pop()
    if beams > 1:
        score = float(out.sequences_scores[0])
        margin = None
    else:
        steps = []  # each step's log-prob of its token, the forced one 0
        for t, tk in enumerate(seq):
            if t == 0:  # forced: ForcedBOSTokenLogitsProcessor leaves log-prob 0
                assert tk == tgt_id
                steps.append(0.0)
                continue
            steps.append(float(torch.log_softmax(out.logits[t][0].float(), -1)[tk]))
        score = sum(steps) / len(seq)
        margin = greedy_margin([l[0] for l in out.logits], {0})
    text = tok.decode(seq, skip_special_tokens=True)
    res = {"tokens": seq, "score": score, "text": text}
    if beams == 1:
        res["step_logprobs"] = steps
    return res, margin


def cases(model, tok, lang_id, srcs, pairs):
    res = []
    dropped = 0
    pad = model.config.pad_token_id
    for i, (en, de) in enumerate(srcs):
        for (sl, tl) in pairs:
            text = en if sl == "en" else de
            tok.src_lang = lang_id(sl, True)
            ids = tok(text)["input_ids"]
            tgt = tok.convert_tokens_to_ids(lang_id(tl, False))
            greedy, margin = run_case(model, tok, ids, tgt, 1)
            beam, _ = run_case(model, tok, ids, tgt, 4)
            if margin < GREEDY_MARGIN or pad in greedy["tokens"] or pad in beam["tokens"]:
                dropped += 1  # a near tie, or a generated pad (see docs/decisions.md)
                continue
            res.append({"line": i, "src_lang": lang_id(sl, True), "tgt_lang": lang_id(tl, True),
                        "text": text, "input_ids": ids,
                        "tgt_lang_id": tgt, "greedy": greedy, "beam4": beam})
    return res, dropped


def pad_case(model, tok, first):
    """A source with a pad token inside it (attention on every token, as the
    engine attends): the encoder's positions skip the pad, which reads the
    zero row (create_position_ids_from_input_ids)."""
    pad = model.config.pad_token_id
    ids = list(first["input_ids"])
    ids.insert(3, pad)
    greedy, margin = run_case(model, tok, ids, first["tgt_lang_id"], 1)
    beam, _ = run_case(model, tok, ids, first["tgt_lang_id"], 4)
    assert margin >= GREEDY_MARGIN and pad not in greedy["tokens"] + beam["tokens"]
    return {"input_ids": ids, "tgt_lang_id": first["tgt_lang_id"], "greedy": greedy, "beam4": beam}


def save_model(model, d):
    model.save_pretrained(d, safe_serialization=True)


def main():
    en, de = read_lines("test.en"), read_lines("test.de")
    train = en[:TRAIN_LINES] + de[:TRAIN_LINES]
    held = [(en[k], de[k]) for k in range(TRAIN_LINES, TRAIN_LINES + 40)
            if 20 <= len(en[k]) <= 90][:HELD_OUT]
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    golden = {"max_length": MAX_LENGTH, "layouts": {}}
    with tempfile.TemporaryDirectory() as tmp:
        spm_path = train_spm(tmp, train)

        # M2M100: vocab.json + sentencepiece.bpe.model, __xx__ tokens after the vocabulary
        vpath = os.path.join(tmp, "vocab.json")
        with open(vpath, "w", encoding="utf-8") as f:
            json.dump(m2m_vocab(spm_path), f, ensure_ascii=False)
        # the language tokens listed in fairseq's order, as the published
        # checkpoints' tokenizer_config.json lists them
        codes = M2M100Tokenizer(vocab_file=vpath, spm_file=spm_path).lang_code_to_id
        langs = [f"__{c}__" for c in sorted(codes, key=codes.get)]
        tok = M2M100Tokenizer(vocab_file=vpath, spm_file=spm_path, language_codes="m2m100",
                              additional_special_tokens=langs)
        d = os.path.join(OUT, "m2m100")
        tok.save_pretrained(d)
        # the model's vocabulary: the pieces, the languages and the made-up
        # words (facebook/m2m100_418M: 128000 + 100 + 8 + 4)
        model = tiny_model(len(tok.encoder) + len(codes) + tok.num_madeup_words, 11, 6.0, True)
        save_model(model, d)
        res, dropped = cases(model, tok, lambda l, src: l if src else f"__{l}__", held, PAIRS)
        golden["layouts"]["m2m100"] = {"dir": "m2m100", "cases": res, "dropped": dropped,
                                       "pad_case": pad_case(model, tok, res[0]),
                                       "n_langs": len(tok.lang_code_to_id)}

        # NLLB: sentencepiece.bpe.model, fairseq offset, codes after the pieces, then <mask>
        # (converted from the SentencePiece model by transformers, as for a
        # checkpoint that has only sentencepiece.bpe.model; it needs protobuf)
        src = os.path.join(tmp, "nllb_src")
        os.makedirs(src)
        shutil.copy(spm_path, os.path.join(src, "sentencepiece.bpe.model"))
        tok = NllbTokenizer.from_pretrained(src, extra_special_tokens=NLLB_LANGS,
                                            legacy_behaviour=False)
        d = os.path.join(OUT, "nllb")
        tok.save_pretrained(d)
        if not os.path.exists(os.path.join(d, "sentencepiece.bpe.model")):
            shutil.copy(spm_path, os.path.join(d, "sentencepiece.bpe.model"))
        model = tiny_model(len(tok), 12, 1.4, False)
        save_model(model, d)
        res, dropped = cases(model, tok, lambda l, src: NLLB_CODE[l], held, PAIRS)
        golden["layouts"]["nllb"] = {"dir": "nllb", "cases": res, "dropped": dropped,
                                     "pad_case": pad_case(model, tok, res[0]),
                                     "n_langs": len(NLLB_LANGS)}
    with open(os.path.join(OUT, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
    for k, v in golden["layouts"].items():
        n_eos = sum(1 for c in v["cases"] for m in ("greedy", "beam4") if c[m]["tokens"][-1] == 2)
        print(f"{k}: {len(v['cases'])} cases ({v['dropped']} dropped), {n_eos} hypotheses end with </s>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
