#!/usr/bin/env python3
# Regenerate:  tools/setup_venv.sh && tools/.venv/bin/python tools/make_text_fixture.py
"""End-to-end Marian fixture with real SentencePiece tokenizers: tests/data/text/marian_en_de/.

Files (the Hugging Face Marian layout, as an OPUS-MT checkpoint has it):
  source.spm, target.spm   two small unigram models (nmt_nfkc), trained here on the msgid (English) and the
                           German msgstr of the de gettext catalogues of this machine (held-out msgids excluded)
  vocab.json               joint piece -> id map as Marian writes it: "</s>": 0, "<unk>": 1, the source pieces
                           (spm order, without <unk>/<s>/</s>), the target pieces not yet present, the language
                           codes ">>de<<" and ">>nds<<", "<pad>" last. A few pieces of each spm are LEFT OUT on
                           purpose (golden.json "dropped_pieces"): MarianTokenizer maps them to <unk>.
  tokenizer_config.json    written by MarianTokenizer.save_pretrained (transformers 5.x writes no special_tokens_map)
  config.json, generation_config.json, model.safetensors   a tiny random MarianMTModel (d_model 32, 2+2 layers,
                           vocab_size = len(vocab.json), pad = id of "<pad>" = decoder_start, eos 0), weights drawn
                           with tools/make_fixtures.py's randomize(); the eos bias calibrated on the real sources
                           (calibrate_eos_on_sources), the weight seed chosen among N_ATTEMPTS
  golden.json              see tools/README.md ("Text fixture")

Also writes tests/data/text/marian_sep/ (separate vocab.json / target_vocab.json, separate embeddings; see main_sep
and tools/README.md). `make_text_fixture.py [marian_en_de] [marian_sep]` regenerates only the named ones.

Deterministic: fixed seeds, one thread, CPU float32, sentencepiece trained with num_threads=1.
"""

import json
import math
import os
import random
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_fixtures as mf  # noqa: E402  (sets torch threads / determinism)
import make_spm_fixtures as msf  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import MarianConfig, MarianMTModel, MarianTokenizer  # noqa: E402

ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests", "data", "text", "marian_en_de")
SEED = 424242
SRC_VOCAB = 400
TGT_VOCAB = 450
LANG_CODES = [">>de<<", ">>nds<<"]
MAX_LENGTH = 33  # transformers' max_length (counts the decoder start token): up to 32 generated tokens
M = MAX_LENGTH - 1
BEAM = 4
N_ATTEMPTS = 20
EXTRA_NEAR_TIES = 3
CAL_MIN_GAP = 0.05

EN_LINES = [
    "", " ", "   ", "\t", "Hello world", "Hello world!", "  Hello   world  ", "hello WORLD",
    "File not found.", "The file does not exist.", "Cannot open file %s: %s", "Print version information and exit.",
    "Error while decoding colormap", "Usage: %s [OPTION]... [FILE]...", "Try '--help' for more information.",
    "No such file or directory", "Permission denied", "Out of memory!", "Are you sure? [y/N]",
    "The quick brown fox jumps over the lazy dog.", "I am a small frog.", "Tom asked his teacher for advice.",
    "Download 3 packages (12.5 MB) from https://example.com/pkgs?id=42", "user@example.org wrote on 2024-06-11:",
    "😀 Thank you! 👍🏽", "I ❤️ Berlin 🇩🇪", "Ｆｕｌｌ-ｗｉｄｔｈ ＡＢＣ and ｶﾀｶﾅ", "ﬁle ﬂow ① ㎏",
    "naïve café façade", "nai\u0308ve cafe\u0301", "Zoë's résumé", "straße STRASSE", "Grüße aus Köln",
    "Привет, мир!", "日本語のテキスト", "中文", "Tiếng Việt", "नमस्ते", "αβγ",
    ">>de<< Hello world", ">>de<<Hello world", ">>nds<< Good morning", ">>xx<< unknown language code",
    " >>de<< leading space before the code", "Hello >>de<< in the middle", ">>de<<",
    "zero\u200bwidth space", "soft\u00adhyphen", "tab\tseparated\tvalues", "a\x01b\x7fc", "line\nbreak",
    "UPPERCASE SENTENCE WITH MANY WORDS", "1234567890", "3.14159 + 2.71828 = 5.85987",
    "Qwxzv jjjjj kkkkk zzzz", "x" * 60, "supercalifragilisticexpialidocious",
    "This is a longer sentence that has quite a few words in it, but it stays below one hundred tokens.",
    "a </s> b", "<unk> and <pad> as text", "<s> begin", "end </s>", "▁ lower one eighth block ▁",
]
# the held-out catalogue msgids (English) / msgstr (German) add 8 real lines each (chosen by seed)
N_HELD = 8

DE_LINES = [
    "", " ", "Hallo Welt", "Hallo Welt!", "  Hallo   Welt  ", "Die Datei wurde nicht gefunden.",
    "Datei %s kann nicht geöffnet werden: %s", "Versionsinformation anzeigen und beenden.",
    "Fehler beim Dekodieren der Farbtabelle", "Aufruf: %s [OPTION]... [DATEI]...",
    "»%s --help« gibt weitere Informationen.", "Keine Berechtigung", "Speicher erschöpft!",
    "Sind Sie sicher? [j/N]", "Grüße aus Köln", "Größenänderung", "Straße STRASSE ß ẞ", "Ärger Öl Übel äöü",
    "Gru\u0308ße", "Ich bin ein kleiner Frosch.", "Tom bat seinen Lehrer um Rat.", "Fünfundzwanzig Äpfel",
    "Donaudampfschifffahrtsgesellschaftskapitän", "😀 Danke! 👍🏽", "Ich ❤️ Berlin 🇩🇪", "„Anführungszeichen“",
    "‚einfache‘", "«Guillemets»", "Preis: 12,50 €", "am 11.06.2024 um 12:34 Uhr", "https://beispiel.de/pfad",
    "Ｖｏｌｌｂｒｅｉｔ", "ﬁ ﬂ ①", "Привет", "日本語", "Tiếng Việt", "a\tb", "zero\u200bwidth",
    ">>de<< Hallo", "<unk> als Text", "a </s> b", "GROSSBUCHSTABEN", "kleinbuchstaben", "x" * 50,
    "Dies ist ein längerer Satz mit einigen Wörtern, der aber unter hundert Token bleibt.",
]

# ----------------------------------------------------------------------------------------------------------------


def corpus():
    cat = msf.catalogues("de")
    en_tr, de_tr, held = [], [], []
    for k, v in cat.items():
        if msf.held_out(k):
            held.append((k, v))
        else:
            en_tr.extend(msf.clean_lines(k))
            de_tr.extend(msf.clean_lines(v))
    return en_tr, de_tr, held


def train(lines, vocab_size):
    spm.set_random_generator_seed(SEED)
    buf = __import__("io").BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, model_type="unigram", vocab_size=vocab_size,
        num_threads=1, minloglevel=2, shuffle_input_sentence=False, input_sentence_size=0,
        character_coverage=0.9995)
    return buf.getvalue()


def build_vocab(src, tgt):
    """Marian's joint vocab.json; returns (vocab, dropped pieces)."""
    def pieces(sp):
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                if not (sp.is_control(i) or sp.is_unknown(i))]

    def dropped_of(sp, salt):
        # a few multi-character pieces, chosen by hash: absent from vocab.json (-> <unk>)
        cands = [p for p in pieces(sp) if len(p) >= 3 and zlib.crc32((salt + p).encode()) % 40 == 0]
        return cands[:6]

    drop = {}
    for p in dropped_of(src, "src") + dropped_of(tgt, "tgt"):
        drop[p] = None
    vocab = {"</s>": 0, "<unk>": 1}
    for p in pieces(src) + pieces(tgt):
        if p not in vocab and p not in drop:
            vocab[p] = len(vocab)
    for c in LANG_CODES:
        vocab[c] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab, list(drop)


def write_json(path, obj, **kw):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, **kw)
        f.write("\n")


def write_tokenizer_files(src_proto, tgt_proto, vocab):
    for name, proto in (("source.spm", src_proto), ("target.spm", tgt_proto)):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(proto)
    vpath = os.path.join(OUT, "vocab.json")
    write_json(vpath, vocab, indent=2)  # as MarianTokenizer.save_vocabulary writes it (ensure_ascii)
    tok = MarianTokenizer(source_spm=os.path.join(OUT, "source.spm"), target_spm=os.path.join(OUT, "target.spm"),
                          vocab=vpath, source_lang="eng", target_lang="deu")
    tok.save_pretrained(OUT)
    assert json.load(open(vpath)) == vocab


def run_goldens(en_lines, srcs, pad, out=OUT):
    """Everything from the files on disk, as a user would: from_pretrained, one padded batch, generate()."""
    tok = MarianTokenizer.from_pretrained(out)
    model = MarianMTModel.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    rec = mf.BeamRecorder(model)
    batch = tok(en_lines, return_tensors="pt", padding=True)
    got = [[int(t) for t, m in zip(r, mk) if m] for r, mk in zip(batch["input_ids"], batch["attention_mask"])]
    assert got == srcs
    results, margins = {}, {}
    for mode, beam in (("greedy", 1), ("beam4", BEAM)):
        with torch.no_grad():  # the checkpoint's generation_config (bad_words_ids [[pad]], forced eos)
            out = model.generate(**batch, num_beams=beam, max_length=MAX_LENGTH, do_sample=False)
        trans = tok.batch_decode(out, skip_special_tokens=True)
        trans_tgt = tok.batch_decode(out, skip_special_tokens=True, use_source_tokenizer=False)
        raw = tok.batch_decode(out, skip_special_tokens=False)
        ids = [mf.strip(s, pad) for s in out]
        # the same with make_fixtures' explicit config, recording scores and margins (near-tie detection)
        res, marg, _ = mf.run_generate(model, rec, srcs, pad, beam, 1, 1.0, M)
        assert [r[0][0] for r in res] == ids, f"{mode}: generate() with the checkpoint's config differs"
        results[mode] = (ids, trans, trans_tgt, raw, [r[0][1] for r in res])
        margins[mode] = marg
    return tok, results, margins


def near_ties(margins):
    return [(mode, i) for mode in margins for i, m in enumerate(margins[mode])
            if m < (mf.GREEDY_MARGIN if mode == "greedy" else mf.BEAM_MARGIN)]


def length_entropy(lens):
    bins = [0] * 6
    for n in lens:
        bins[0 if n == 1 else 5 if n >= M else min(4, n.bit_length() - 1)] += 1
    return -sum(c / len(lens) * math.log(c / len(lens)) for c in bins if c)


def calibrate_eos_on_sources(model, srcs, pad):
    """Set final_logits_bias[eos] so that greedy lengths on the real sources vary.

    Greedy with </s> disabled gives per source the gaps g_t = (best non-eos, non-pad logit) - (eos logit without
    bias) along its path; with bias b the greedy output ends at the first step t with g_t < b (length t + 1), or at
    the forced </s> (length M). b is the midpoint between two neighbouring gaps that maximises the number of sources
    entropy of the length histogram over the bins 1 | 2-3 | 4-7 | 8-15 | 16-31 | M (ties: the smaller b), among
    neighbouring gaps at least CAL_MIN_GAP apart. make_fixtures' calibration (random sources) makes most real
    sources end at once or run to max_length.
    """
    with torch.no_grad():
        model.final_logits_bias[0, mf.EOS] = -1e4
    ids, mask = mf.pad_batch(srcs, pad)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=mf.gen_config(pad, 1, 1, 1.0, M))
    gaps = []
    for i in range(len(srcs)):
        g = []
        for t in range(M - 1):
            lg = out.logits[t][i].double().clone()
            eos_nb = float(lg[mf.EOS]) + 1e4
            lg[mf.EOS] = -math.inf
            lg[pad] = -math.inf
            g.append(float(lg.max()) - eos_nb)
        gaps.append(g)
    allg = sorted({x for g in gaps for x in g})
    best = None
    for a, b in zip(allg, allg[1:]):
        if b - a < CAL_MIN_GAP:  # keep the eos decision far from a tie
            continue
        bias = 0.5 * (a + b)
        lens = []
        for g in gaps:
            t = next((t for t, x in enumerate(g) if x < bias), None)
            lens.append(M if t is None else t + 1)
        score = length_entropy(lens)
        if best is None or score > best[0]:
            best = (score, bias)
    with torch.no_grad():
        model.final_logits_bias[0, mf.EOS] = best[1]
    return best


def make_model(vocab_size, pad, attempt, srcs, dims=(32, 4, 64), **kw):
    cfg = MarianConfig(**mf.base_cfg(vocab_size, *dims, max_position_embeddings=128, **kw))
    assert cfg.pad_token_id == pad and cfg.decoder_start_token_id == pad
    cfg._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = MarianMTModel(cfg)
    model.eval()
    wseed = SEED + 1000 * attempt
    mf.randomize(model, wseed, mf.EOS_BIAS)
    score, bias = calibrate_eos_on_sources(model, srcs, pad)
    return model, score


def golden_cases(tok, en_lines, de_lines, srcs, results, margins, bad):
    """The source cases (tokenization + greedy and beam-4 results) and the
    target-tokenization cases of a text fixture's golden.json."""
    cases = []
    for i, text in enumerate(en_lines):
        c = {"text": text, "pieces": tok.tokenize(text), "source_ids": srcs[i]}
        split = tok(text, split_special_tokens=True)["input_ids"]
        if split != srcs[i]:
            c["source_ids_split_special"] = split
        for mode in ("greedy", "beam4"):
            ids, trans, trans_tgt, raw, scores = results[mode]
            r = {"output_ids": ids[i], "translation": trans[i]}
            if trans_tgt[i] != trans[i]:
                r["translation_target_spm"] = trans_tgt[i]
            r["decoded_with_special"] = raw[i]
            if scores[i] is not None:
                r["score"] = scores[i]
            if (mode, i) in bad:
                r["near_tie"] = True
            r["min_margin"] = float(f"{margins[mode][i]:.3g}") if margins[mode][i] != float("inf") else None
            c[mode] = r
        cases.append(c)

    tcases = []
    for text in de_lines:
        ids = tok(text_target=text)["input_ids"]
        c = {"text": text, "input_ids": ids, "pieces": tok.convert_ids_to_tokens(ids)}
        split = tok(text_target=text, split_special_tokens=True)["input_ids"]
        if split != ids:
            c["input_ids_split_special"] = split
        tcases.append(c)
    return cases, tcases


def decode_goldens(tok, dec_inputs):
    """MarianTokenizer.decode of each id list: specials skipped (source and target spm) and kept."""
    return [{
        "ids": ids,
        "skip_special": tok.decode(ids, skip_special_tokens=True),
        "skip_special_target_spm": tok.decode(ids, skip_special_tokens=True, use_source_tokenizer=False),
        "with_special": tok.decode(ids, skip_special_tokens=False),
    } for ids in dec_inputs]


def main_en_de():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    en_tr, de_tr, held = corpus()
    src_proto = train(en_tr, SRC_VOCAB)
    tgt_proto = train(de_tr, TGT_VOCAB)
    src = spm.SentencePieceProcessor(model_proto=src_proto)
    tgt = spm.SentencePieceProcessor(model_proto=tgt_proto)
    vocab, dropped = build_vocab(src, tgt)
    write_tokenizer_files(src_proto, tgt_proto, vocab)
    tok = MarianTokenizer.from_pretrained(OUT)
    pad = vocab["<pad>"]
    assert tok.pad_token_id == pad and tok.eos_token_id == 0 and tok.unk_token_id == 1

    rng = random.Random(SEED)
    held_en = [k for k, _ in held if "\n" not in k and 5 <= len(k) <= 80]
    held_de = [v for _, v in held if "\n" not in v and 5 <= len(v) <= 80]
    en_lines = EN_LINES + rng.sample(held_en, N_HELD)
    de_lines = DE_LINES + rng.sample(held_de, N_HELD) + rng.sample(held_de, 8)

    enc = tok(en_lines)["input_ids"]
    assert max(len(x) for x in enc) < 100
    srcs = [list(x) for x in enc]

    # weights: the real sources cannot be redrawn, so try N_ATTEMPTS weight seeds and keep the one with the most
    # varied greedy lengths (entropy of the length histogram, see calibrate_eos_on_sources) among those with the
    # with at most EXTRA_NEAR_TIES more near-ties than the best attempt (a near-tie: a greedy step whose top-2 gap
    # < GREEDY_MARGIN, or a beam candidate gap < BEAM_MARGIN); the remaining near-tie cases are flagged
    # "near_tie": true in golden.json
    tried = []
    for attempt in range(N_ATTEMPTS):
        model, score = make_model(len(vocab), pad, attempt, srcs)
        mf.save_fixture(model, OUT, dict(ext=None), pad)
        write_tokenizer_files(src_proto, tgt_proto, vocab)
        tok, results, margins = run_goldens(en_lines, srcs, pad)
        bad = near_ties(margins)
        lens = sorted(len(x) for x in results["greedy"][0])
        print(f"weight attempt {attempt}: length entropy {score:.3f}, {len(bad)} near-ties {bad}, greedy lengths "
              f"{lens}", flush=True)
        tried.append((len(bad), -score, attempt))
    fewest = min(t[0] for t in tried)
    attempt = min((t[1], t[2]) for t in tried if t[0] <= fewest + EXTRA_NEAR_TIES)[1]
    model, _ = make_model(len(vocab), pad, attempt, srcs)
    mf.save_fixture(model, OUT, dict(ext=None), pad)  # wipes the directory: rewrite the tokenizer files
    write_tokenizer_files(src_proto, tgt_proto, vocab)
    gen = json.load(open(os.path.join(OUT, "generation_config.json")))
    gen.update(num_beams=BEAM, max_length=MAX_LENGTH)
    write_json(os.path.join(OUT, "generation_config.json"), gen, indent=2)
    tok, results, margins = run_goldens(en_lines, srcs, pad)
    bad = near_ties(margins)
    print(f"using weight attempt {attempt}: near-ties {bad}", flush=True)

    cases, tcases = golden_cases(tok, en_lines, de_lines, srcs, results, margins, bad)

    # decode cases: hand-made id sequences
    v = vocab
    some = [v[p] for p in list(v)[2:12]]
    dec_inputs = [[], [0], [1], [pad], [1, 1], some, some + [0], [1] + some + [1], some[:3] + [0] + some[3:],
                  [v[">>de<<"]] + some, some + [v[">>nds<<"]], [pad] + some + [0, pad, pad],
                  [v[p] for p in list(v) if p.startswith("▁")][:5]]
    dec_rng = random.Random(SEED + 5)
    for _ in range(20):
        dec_inputs.append([dec_rng.randrange(len(v)) for _ in range(dec_rng.randint(1, 15))])
    decode_cases = decode_goldens(tok, dec_inputs)

    n_early = sum(len(x) < M for x in results["greedy"][0])
    golden = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "sentencepiece_version": spm.__version__,
        "max_length": MAX_LENGTH,
        "num_beams": BEAM,
        "pad_id": pad, "eos_id": 0, "unk_id": 1, "vocab_size": len(vocab),
        "dropped_pieces": dropped,
        "weight_attempt": attempt,
        "cases": cases,
        "target_tokenize": tcases,
        "decode": decode_cases,
    }
    write_json(os.path.join(OUT, "golden.json"), golden, ensure_ascii=False, indent=1)

    print("transformers", transformers.__version__, "torch", torch.__version__, "sentencepiece", spm.__version__)
    print(f"vocab {len(vocab)} (source spm {src.get_piece_size()}, target spm {tgt.get_piece_size()}), "
          f"dropped {dropped}")
    print(f"greedy outputs ending before {M} tokens: {n_early}/{len(cases)}")
    for mode in ("greedy", "beam4"):
        bad = [i for i, m in enumerate(margins[mode]) if m < (mf.GREEDY_MARGIN if mode == "greedy" else mf.BEAM_MARGIN)]
        print(f"{mode}: min margin {min(margins[mode]):.2e}; cases under the margin: {bad}")
    unk_src = sum(1 in c["source_ids"] for c in cases)
    print(f"sources containing <unk>: {unk_src}/{len(cases)}; "
          f"splits differ from transformers for {sum('source_ids_split_special' in c for c in cases)} sources")
    tot = 0
    for f in sorted(os.listdir(OUT)):
        sz = os.path.getsize(os.path.join(OUT, f))
        tot += sz
        print(f"  {f:28s} {sz / 1024:8.1f} KiB")
    print(f"total {tot / 1024:.1f} KiB")
    return 0


# ----------------------------------------------------------------------------------------------------------------
# tests/data/text/marian_sep/: separate source / target vocabularies (MarianTokenizer(separate_vocabs=True))
# ----------------------------------------------------------------------------------------------------------------

SEP_OUT = os.path.join(ROOT, "tests", "data", "text", "marian_sep")
SEP_SRC_VOCAB = 300
SEP_TGT_VOCAB = 360
SEP_LANG_CODES = [">>deu<<", ">>nds<<"]  # in the SOURCE vocab only (a multilingual-target model)
SEP_DIMS = (16, 2, 32)  # d_model, heads, ffn: keeps the directory under 400 KB
SEP_N_HELD = 4
SEP_N_ATTEMPTS = 40
SEP_N_HELD_DE = 6

# the source spm's normalizer: a small user-defined rule table (a real precompiled charsmap, but ~1 KB instead of
# nmt_nfkc's ~240 KB); the target spm uses "identity" (no charsmap at all)
SEP_RULES = ([(chr(c), chr(c - 0xFEE0)) for c in range(0xFF01, 0xFF5F)]  # full-width ASCII
             + [("\u3000", " "), ("\u00a0", " "), ("\t", " "), ("\ufb01", "fi"), ("\ufb02", "fl"), ("\u338f", "kg")]
             + [(chr(0x2460 + i), str(i + 1)) for i in range(9)]  # circled digits 1-9
             + [("e\u0301", "\u00e9"), ("i\u0308", "\u00ef"), ("u\u0308", "\u00fc"), ("a\u0308", "\u00e4")])

SEP_EN_LINES = [
    "", " ", "Hello world", "Hello world!", "  Hello   world  ", "hello WORLD", "File not found.",
    "Cannot open file %s: %s", "Print version information and exit.", "Usage: %s [OPTION]... [FILE]...",
    "No such file or directory", "Permission denied", "Are you sure? [y/N]",
    "The quick brown fox jumps over the lazy dog.", "Tom asked his teacher for advice.",
    "Download 3 packages (12.5 MB) from https://example.com/pkgs?id=42", "😀 Thank you! 👍🏽",
    "Ｆｕｌｌ-ｗｉｄｔｈ ＡＢＣ and ｶﾀｶﾅ", "ﬁle ﬂow ① ㎏ ⑩", "naïve café façade", "nai\u0308ve cafe\u0301",
    "straße STRASSE", "Привет, мир!", "日本語のテキスト",
    ">>deu<< Hello world", ">>deu<<Hello world", ">>nds<< Good morning", ">>de<< a code of the other fixture",
    " >>deu<< leading space before the code", "Hello >>deu<< in the middle", ">>deu<<",
    "tab\tseparated\tvalues", "no\u00a0break\u3000space", "UPPERCASE SENTENCE WITH MANY WORDS", "1234567890",
    "x" * 40, "This is a longer sentence that has quite a few words in it, but it stays below one hundred tokens.",
    "a </s> b", "<unk> and <pad> as text", "end </s>", "▁ lower one eighth block ▁",
]

SEP_DE_LINES = [
    "", " ", "Hallo Welt", "Hallo Welt!", "  Hallo   Welt  ", "Die Datei wurde nicht gefunden.",
    "Datei %s kann nicht geöffnet werden: %s", "»%s --help« gibt weitere Informationen.", "Speicher erschöpft!",
    "Grüße aus Köln", "Straße STRASSE ß ẞ", "Ärger Öl Übel äöü", "Gru\u0308ße", "Ｖｏｌｌｂｒｅｉｔ", "ﬁ ﬂ ①",
    "a\tb", "😀 Danke! 👍🏽", "„Anführungszeichen“", "Preis: 12,50 €", ">>deu<< Hallo", ">>de<< Hallo",
    "<unk> als Text", "a </s> b", "mit <pad> darin", "x" * 30,
    "Dies ist ein längerer Satz mit einigen Wörtern, der aber unter hundert Token bleibt.",
]


def train_sep(lines, vocab_size, rules):
    kw = dict(normalization_rule_name="identity")
    tsv = None
    if rules:
        # a fixed path: the trainer records it in the model, and the
        # fixture must come out byte-identical on every run
        tsv = "/tmp/td_make_text_fixture_rules.tsv"
        with open(tsv, "w") as f:
            for a, b in rules:
                f.write(" ".join(f"{ord(c):X}" for c in a) + "\t" + " ".join(f"{ord(c):X}" for c in b) + "\n")
        kw = dict(normalization_rule_tsv=tsv)
    spm.set_random_generator_seed(SEED)
    buf = __import__("io").BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=buf, model_type="unigram", vocab_size=vocab_size,
            num_threads=1, minloglevel=2, shuffle_input_sentence=False, input_sentence_size=0,
            character_coverage=0.9995, **kw)
    finally:
        if tsv:
            os.remove(tsv)
    return buf.getvalue()


def build_sep_vocabs(src, tgt):
    """vocab.json (source) and target_vocab.json (target); returns (src_vocab, tgt_vocab, dropped pieces).

    Both as Marian writes a vocabulary ("</s>" 0, "<unk>" 1, the spm pieces in spm order without <unk>/<s>/</s>),
    with "<pad>" at the SAME id P in both: P is the last id of the (smaller) source vocabulary and sits between the
    target pieces P-1 and P+1 of the (larger) target vocabulary. MarianTokenizer resolves the special tokens
    (</s>, <unk>, <pad>) once, through the SOURCE vocab, and uses those ids on the target side too (the
    special-token split of text_target, skip_special_tokens, convert_ids_to_tokens), and the model needs pad
    (= decoder_start) valid in both embeddings, so </s>, <unk> and <pad> must have the same ids in both files.
    """
    def pieces(sp):
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                if not (sp.is_control(i) or sp.is_unknown(i))]

    def dropped_of(sp, salt):
        cands = [p for p in pieces(sp) if len(p) >= 3 and zlib.crc32((salt + p).encode()) % 40 == 0]
        return cands[:4]

    d_src, d_tgt = dropped_of(src, "src"), dropped_of(tgt, "tgt")
    sv = {"</s>": 0, "<unk>": 1}
    for p in pieces(src):
        if p not in sv and p not in d_src:
            sv[p] = len(sv)
    for c in SEP_LANG_CODES:
        sv[c] = len(sv)
    pad = len(sv)
    sv["<pad>"] = pad
    tv = {"</s>": 0, "<unk>": 1}
    for p in pieces(tgt):
        if len(tv) == pad:
            tv["<pad>"] = pad
        if p not in tv and p not in d_tgt:
            tv[p] = len(tv)
    assert tv.get("<pad>") == pad and len(tv) > len(sv), (len(sv), len(tv))
    return sv, tv, d_src + d_tgt


def write_sep_tokenizer_files(src_proto, tgt_proto, sv, tv):
    out = SEP_OUT
    for name, proto in (("source.spm", src_proto), ("target.spm", tgt_proto)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(proto)
    vpath, tpath = os.path.join(out, "vocab.json"), os.path.join(out, "target_vocab.json")
    write_json(vpath, sv, indent=2)
    write_json(tpath, tv, indent=2)
    tok = MarianTokenizer(source_spm=os.path.join(out, "source.spm"), target_spm=os.path.join(out, "target.spm"),
                          vocab=vpath, target_vocab_file=tpath, separate_vocabs=True, source_lang="eng",
                          target_lang="deu")
    tok.save_pretrained(out)
    assert json.load(open(vpath)) == sv and json.load(open(tpath)) == tv
    assert json.load(open(os.path.join(out, "tokenizer_config.json")))["separate_vocabs"] is True


def main_sep():
    out = SEP_OUT
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    en_tr, de_tr, held = corpus()
    src_proto = train_sep(en_tr, SEP_SRC_VOCAB, SEP_RULES)
    tgt_proto = train_sep(de_tr, SEP_TGT_VOCAB, None)
    src = spm.SentencePieceProcessor(model_proto=src_proto)
    tgt = spm.SentencePieceProcessor(model_proto=tgt_proto)
    sv, tv, dropped = build_sep_vocabs(src, tgt)
    pad = sv["<pad>"]
    write_sep_tokenizer_files(src_proto, tgt_proto, sv, tv)
    tok = MarianTokenizer.from_pretrained(out)
    assert tok.separate_vocabs and tok.pad_token_id == pad and tok.eos_token_id == 0 and tok.unk_token_id == 1

    rng = random.Random(SEED + 7)
    held_en = [k for k, _ in held if "\n" not in k and 5 <= len(k) <= 80]
    held_de = [v for _, v in held if "\n" not in v and 5 <= len(v) <= 80]
    en_lines = SEP_EN_LINES + rng.sample(held_en, SEP_N_HELD)
    de_lines = SEP_DE_LINES + rng.sample(held_de, SEP_N_HELD_DE)
    srcs = [list(x) for x in tok(en_lines)["input_ids"]]
    assert max(len(x) for x in srcs) < 100

    kw = dict(dims=SEP_DIMS, decoder_vocab_size=len(tv), share_encoder_decoder_embeddings=False)
    tried = []
    for attempt in range(SEP_N_ATTEMPTS):
        model, score = make_model(len(sv), pad, attempt, srcs, **kw)
        mf.save_fixture(model, out, dict(ext=None), pad)
        write_sep_tokenizer_files(src_proto, tgt_proto, sv, tv)
        tok, results, margins = run_goldens(en_lines, srcs, pad, out)
        bad = near_ties(margins)
        lens = sorted(len(x) for x in results["greedy"][0])
        print(f"sep weight attempt {attempt}: length entropy {score:.3f}, {len(bad)} near-ties {bad}, greedy "
              f"lengths {lens}", flush=True)
        tried.append((len(bad), -score, attempt))
    fewest = min(t[0] for t in tried)
    attempt = min((t[1], t[2]) for t in tried if t[0] <= fewest + EXTRA_NEAR_TIES)[1]
    model, _ = make_model(len(sv), pad, attempt, srcs, **kw)
    mf.save_fixture(model, out, dict(ext=None), pad)
    write_sep_tokenizer_files(src_proto, tgt_proto, sv, tv)
    cfg = json.load(open(os.path.join(out, "config.json")))
    assert cfg["vocab_size"] == len(sv) and cfg["decoder_vocab_size"] == len(tv)
    assert cfg["share_encoder_decoder_embeddings"] is False and cfg["pad_token_id"] == pad
    gen = json.load(open(os.path.join(out, "generation_config.json")))
    gen.update(num_beams=BEAM, max_length=MAX_LENGTH)
    write_json(os.path.join(out, "generation_config.json"), gen, indent=2)
    tok, results, margins = run_goldens(en_lines, srcs, pad, out)
    bad = near_ties(margins)
    print(f"sep: using weight attempt {attempt}: near-ties {bad}", flush=True)

    cases, tcases = golden_cases(tok, en_lines, de_lines, srcs, results, margins, bad)

    # decode cases: target-side ids (target_vocab.json + target spm), including ids above the pad
    some = [tv[p] for p in list(tv)[2:12]]
    high = list(range(pad + 1, min(pad + 8, len(tv))))
    dec_inputs = [[], [0], [1], [pad], some, some + [0], [1] + some + [1], [pad] + some + [0, pad, pad],
                  high, [pad] + high + [0], [tv[p] for p in list(tv) if p.startswith("▁")][:5]]
    dec_rng = random.Random(SEED + 9)
    for _ in range(12):
        dec_inputs.append([dec_rng.randrange(len(tv)) for _ in range(dec_rng.randint(1, 15))])
    decode_cases = decode_goldens(tok, dec_inputs)

    golden = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "sentencepiece_version": spm.__version__,
        "max_length": MAX_LENGTH,
        "num_beams": BEAM,
        "pad_id": pad, "eos_id": 0, "unk_id": 1, "vocab_size": len(sv), "decoder_vocab_size": len(tv),
        "separate_vocabs": True,
        "dropped_pieces": dropped,
        "weight_attempt": attempt,
        "cases": cases,
        "target_tokenize": tcases,
        "decode": decode_cases,
    }
    write_json(os.path.join(out, "golden.json"), golden, ensure_ascii=False, indent=1)
    n_early = sum(len(x) < M for x in results["greedy"][0])
    print(f"sep: source vocab {len(sv)}, target vocab {len(tv)}, pad {pad}, dropped {dropped}")
    print(f"sep: greedy outputs ending before {M} tokens: {n_early}/{len(cases)}")
    for mode in ("greedy", "beam4"):
        print(f"sep {mode}: min margin {min(margins[mode]):.2e}")
    tot = 0
    for f in sorted(os.listdir(out)):
        sz = os.path.getsize(os.path.join(out, f))
        tot += sz
        print(f"  {f:28s} {sz / 1024:8.1f} KiB")
    print(f"total {tot / 1024:.1f} KiB")
    return 0


def main():
    which = sys.argv[1:] or ["marian_en_de", "marian_sep"]
    for w in which:
        {"marian_en_de": main_en_de, "marian_sep": main_sep}[w]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
