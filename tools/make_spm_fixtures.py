#!/usr/bin/env python3
# Regenerate:  tools/setup_venv.sh && tools/.venv/bin/python tools/make_spm_fixtures.py
"""SentencePiece goldens for tokenizer/spm.h from the reference library (the `sentencepiece` Python package).

Writes tests/data/spm/:
  <name>.model                 four small models trained here (see MODELS)
  lines.jsonl                  test inputs, one JSON string per line (>= 10,000 lines)
  <name>.golden.jsonl          per input line, in order: {"ids": sp.encode(line), "norm": sp.normalize(line),
                               "dec": sp.decode(ids)}; "norm" only for the first NORM_LINES lines; after those,
                               "dec" is left out when it equals the input line exactly
  bytes.jsonl                  raw byte-string inputs (malformed UTF-8 etc.), one JSON list of ints per line
  <name>.bytes_golden.jsonl    per bytes line: {"ids": sp.encode(bytes), "norm": sp.normalize(bytes), "dec": ...};
                               "norm" is a string when the normalized bytes are valid UTF-8, else a list of ints
  <name>.decode_golden.jsonl   arbitrary id sequences (byte pieces out of order, control ids, unk, ...):
                               {"ids": [...], "dec": sp.decode(ids)}
  manifest.json                versions, model summaries, sha256 of every file

Training text comes only from this machine (gettext catalogues under /usr/share/locale, man pages, the
copyright files under /usr/share/doc); it is never written to the repository. Catalogue strings are split into
training / held-out by a hash of their msgid: held-out strings (all languages of that msgid) feed lines.jsonl.
Regenerating on another machine therefore gives other (but self-consistent) models; the committed models +
goldens are what the C tests use.

Deterministic: sorted file lists, no set iteration, num_threads=1, a fixed trainer seed, random.Random(SEED)
for the synthetic lines. Running the script twice gives byte-identical files (checked with --check).
"""

import gettext
import glob
import gzip
import hashlib
import io
import json
import os
import random
import re
import sys
import unicodedata
import zlib

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "spm")
SEED = 20240611
NORM_LINES = 2000  # "norm" and "dec" are always recorded for the first NORM_LINES lines

LANGS = ["de", "fr", "es", "it", "pt_BR", "pl", "tr", "vi", "ru", "uk", "el", "ar", "he", "hi", "th", "ja",
         "ko", "zh_CN"]
CATALOGUE_BYTES_PER_LANG = 150_000  # training text per language (msgstr) and for English (msgid) x2
MAN_BYTES = 500_000
MAN_L10N_BYTES = 40_000  # per translated man-page language
COPYRIGHT_BYTES = 300_000
HELD_OUT_MOD = 6  # crc32(msgid) % HELD_OUT_MOD == 0 -> held out

USER_SYMBOLS = ["<sep>", ">>de<<", ">>fr<<", "<mask>"]
CONTROL_SYMBOLS = ["<ctl>"]

MODELS = {
    # the default normalizer (nmt_nfkc, precompiled charsmap), add_dummy_prefix, remove_extra_whitespaces
    "unigram_nfkc": dict(model_type="unigram", vocab_size=3000),
    # byte fallback + user-defined symbols (matched in the text) + a control symbol (never produced by encode)
    "unigram_bytefb": dict(model_type="unigram", vocab_size=2500, byte_fallback=True,
                           user_defined_symbols=USER_SYMBOLS, control_symbols=CONTROL_SYMBOLS),
    "bpe": dict(model_type="bpe", vocab_size=3000),
    # no normalization at all: identity (no charsmap), no dummy prefix, extra whitespace kept
    "unigram_identity": dict(model_type="unigram", vocab_size=2000, normalization_rule_name="identity",
                             add_dummy_prefix=False, remove_extra_whitespaces=False),
}

# ----------------------------------------------------------------------------------------------------------------
# Corpus
# ----------------------------------------------------------------------------------------------------------------


def read_catalogue(path):
    """(msgid, msgstr) pairs of a .mo file, in file order; plural forms: first msgid / first msgstr."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        cat = gettext.GNUTranslations(io.BytesIO(data))._catalog
    except Exception:
        # a catalogue without a usable charset header: decode as UTF-8 ourselves
        try:
            cat = _parse_mo_utf8(data)
        except Exception:
            return []
    out = []
    for k, v in cat.items():
        if isinstance(k, tuple):
            if k[1] != 0:
                continue
            k = k[0]
        if not k or not isinstance(v, str) or not v:
            continue
        out.append((k, v))
    return out


def _parse_mo_utf8(data):
    import struct

    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic == 0x950412DE else ">"
    _, n, o_orig, o_trans = struct.unpack(e + "4I", data[4:20])
    cat = {}
    for i in range(n):
        ol, oo = struct.unpack(e + "2I", data[o_orig + 8 * i: o_orig + 8 * i + 8])
        tl, to = struct.unpack(e + "2I", data[o_trans + 8 * i: o_trans + 8 * i + 8])
        k = data[oo: oo + ol].decode("utf-8")
        v = data[to: to + tl].decode("utf-8")
        if "\x00" in k:
            k = k.split("\x00")[0]
            v = v.split("\x00")[0]
        cat[k] = v
    return cat


def catalogues(lang):
    """Dict msgid -> msgstr over all catalogues of a language (first occurrence wins, sorted file order)."""
    d = {}
    for f in sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")):
        for k, v in read_catalogue(f):
            if k not in d and v != k:
                d[k] = v
    return d


def held_out(msgid):
    return zlib.crc32(msgid.encode("utf-8")) % HELD_OUT_MOD == 0


_TROFF_ESC = re.compile(r"\\f[BIRPC]|\\f\[[A-Z]*\]|\\\(..|\\\*\(..|\\\*.|\\\[[^\]]*\]|\\[&|^-]|\\e|\\s[-+]?\d")


def man_text(path):
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
    except Exception:
        return []
    lines = []
    for ln in text.split("\n"):
        if not ln or ln.startswith((".", "'", "\\\"")):
            continue
        ln = _TROFF_ESC.sub("", ln).replace("\\", "").strip()
        if len(ln) > 3:
            lines.append(ln)
    return lines


def clean_lines(text):
    return [ln.strip() for ln in text.split("\n") if ln.strip()]


def add_capped(dst, lines, cap):
    n = 0
    for ln in lines:
        b = len(ln.encode("utf-8"))
        if b > 2000:
            continue
        if n + b > cap:
            break
        dst.append(ln)
        n += b
    return n


def build_corpus():
    """Returns (training lines, held-out catalogue strings as (lang, text) in a fixed order, stats)."""
    train = []
    held = []
    stats = {}
    english = {}  # msgid -> None (ordered set)
    for lang in LANGS:
        cat = catalogues(lang)
        tr = []
        for k, v in cat.items():
            if held_out(k):
                held.append((lang, v))
                english.setdefault(k, None)
            else:
                tr.extend(clean_lines(v))
                english.setdefault(k, None)
        stats[f"cat_{lang}"] = add_capped(train, tr, CATALOGUE_BYTES_PER_LANG)
    en_tr = []
    for k in english:
        if held_out(k):
            held.append(("en", k))
        else:
            en_tr.extend(clean_lines(k))
    stats["cat_en"] = add_capped(train, en_tr, 2 * CATALOGUE_BYTES_PER_LANG)
    man = []
    for f in sorted(glob.glob("/usr/share/man/man1/*.gz"))[::7]:
        man.extend(man_text(f))
    stats["man"] = add_capped(train, man, MAN_BYTES)
    for lang in ["de", "fr", "es", "ru", "ja", "zh_CN", "pl", "uk"]:
        ml = []
        for f in sorted(glob.glob(f"/usr/share/man/{lang}/man1/*.gz"))[::3]:
            ml.extend(man_text(f))
        stats[f"man_{lang}"] = add_capped(train, ml, MAN_L10N_BYTES)
    cr = []
    for f in sorted(glob.glob("/usr/share/doc/*/copyright")):
        try:
            cr.extend(clean_lines(open(f, encoding="utf-8").read()))
        except Exception:
            pass
    stats["copyright"] = add_capped(train, cr, COPYRIGHT_BYTES)
    stats["total_bytes"] = sum(len(x.encode("utf-8")) + 1 for x in train)
    stats["train_lines"] = len(train)
    stats["held_out_strings"] = len(held)
    return train, held, stats


# ----------------------------------------------------------------------------------------------------------------
# Test lines
# ----------------------------------------------------------------------------------------------------------------

EMOJI = ["😀", "😂", "👍", "👍🏽", "👋🏿", "🧑‍💻", "👨‍👩‍👧‍👦", "🧑🏿‍🤝‍🧑🏻", "🏳️‍🌈", "🏴‍☠️", "❤️", "❤️‍🔥",
         "🇩🇪", "🇯🇵", "🇺🇸", "🇪🇺", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "©️", "☺", "✈️", "🦄", "🥲", "🫠", "🪿", "👩🏽‍🔬"]
NFKC_FOLDS = ["ＡＢＣ", "ａｂｃ", "０１２３", "ｶﾀｶﾅ", "ﾊﾟﾋﾟﾌﾟ", "ﬁ", "ﬂ", "ﬃ", "ﬆ", "①", "⑳", "㎏", "㎞", "㏄", "㈱",
              "™", "℡", "½", "¼", "x²", "H₂O", "Ⅻ", "ⅷ", "㍻", "㌔", "ℌ", "ℕ", "𝐀𝐁𝐂", "𝕏", "µ", "Å", "Ω",
              "…", "‥", "′″", "ſ", "ǆ", "Ǉ", "ĳ", "ŉ", "\u3000", "\u00a0", "\u2002", "\u2009", "\u202f", "！？",
              "（括弧）", "「」", "￥", "￦", "ﹰ", "ﻷ", "ﷺ", "ﷲ", "ゟ", "ヿ", "⁉", "⅓", "℃", "℉", "№", "ǅ"]
CONTROLS = ["\x01", "\x02", "\x07", "\x08", "\x0b", "\x0c", "\x0e", "\x1b", "\x1f", "\x7f", "\x80", "\x85",
            "\x9f", "\u00ad", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029", "\u2060",
            "\u2066", "\u2069", "\ufeff", "\ufff9", "\ufffc", "\ufffd", "\ue000", "\uf8ff", "\U000f0000",
            "\U0010ffff", "\ufffe", "\uffff", "\U000e0001", "\U000e0041", "\u034f", "\u180e", "\r", "\t", "\n"]
COMBINING = ["e\u0301", "a\u0300", "o\u0308", "n\u0303", "c\u0327", "u\u030a", "A\u0301\u0301",
             "\u0301", "x\u0323\u0302", "i\u0307", "Z\u0335\u0321\u0358", "ก\u0e49", "ŝ\u0323",
             "e\u0302\u0301", "o\u031b\u0300", "a\u0306\u0303", "u\u031b\u0309"]
VIETNAMESE = ["Tiếng Việt là ngôn ngữ chính thức của Việt Nam.", "Xin chào thế giới!",
              "Người đàn ông đang đọc sách ở thư viện.", "Phở bò Hà Nội rất ngon.", "Đường đi khó, không khó vì ngăn sông cách núi."]
DEVANAGARI = ["नमस्ते दुनिया", "क्षत्रिय", "हिन्दी भाषा", "श्रीमान् जी", "द्वित्व", "ज़िंदगी", "क़लम", "अँग्रेज़ी", "ॐ",
              "१२३४५", "स्त्री", "प्रत्येक"]
RARE_CJK = ["𠀀", "𠀋", "𡈽", "𢀓", "𤭢", "𪚥", "𫝆", "𬺰", "𮯠", "𰀀", "龘", "靐", "齉", "㐀", "䶵", "鿿", "〇", "〻",
            "丂", "𡘙", "𩸽", "々", "𠮷野家", "㊙", "〆", "ヶ"]
SCRIPTS_MISC = ["Ελληνικά γράμματα", "Привет, мир! Съешь же ещё этих мягких французских булок.",
                "مرحبا بالعالم", "שלום עולם", "สวัสดีชาวโลก", "안녕하세요 세계", "こんにちは世界", "你好，世界！",
                "Ἀρχιμήδης", "ᚠᚢᚦᚨᚱᚲ", "ⴰⵣⵓⵍ", "ܫܠܡܐ", "ሰላም ልዑል", "Բարեւ", "გამარჯობა", "ᏣᎳᎩ", "ꦲꦏ꧀ꦱꦫ",
                "𐌰𐌱𐌲", "𓀀𓁐", "ʃɪbəlɛθ", "ǃXóõ", "Ωμέγα ΣΊΣΥΦΟΣ ς σ", "İstanbul ıi", "straße STRASSE ß ẞ",
                "ﺍﻟﻌﺮﺑﻴﺔ", "ｋａｔａｋａｎａ ﾃｽﾄ", "Ⓐⓑⓒ", "⒈⒉⒊", "🄰🄱", "㋐㋑"]
URLS = ["https://example.com/path?q=1&r=two#frag", "http://localhost:8080/", "ftp://ftp.gnu.org/gnu/",
        "https://de.wikipedia.org/wiki/Stra%C3%9Fe", "mailto:user@example.org", "user.name+tag@sub.example.co.uk",
        "www.例え.jp", "https://xn--bcher-kva.example/", "C:\\Windows\\System32\\drivers\\etc\\hosts",
        "/usr/share/locale/de/LC_MESSAGES/", "git@github.com:owner/repo.git", "192.168.0.1:443", "[::1]:80",
        "$HOME/.config/transformerd.json", "s3://bucket/key", "https://t.co/AbC123xYz"]
SPECIAL_LITERALS = ["<s>", "</s>", "<unk>", "<pad>", "<sep>", ">>de<<", ">>fr<<", ">>es<<", "<mask>", "<ctl>",
                    "<0x41>", "<0xFF>", "▁", "▁▁", "⁇", " ⁇ ", "<", ">", ">>", "<<", "<sep", "sep>", "<<sep>>",
                    ">>de<<<sep>", "<sep><sep>"]
WORDS = ["the", "quick", "brown", "fox", "file", "directory", "error", "warning", "cannot", "open", "Datei",
         "Verzeichnis", "nicht", "gefunden", "fichier", "répertoire", "introuvable", "archivo", "no", "encontrado",
         "файл", "не", "найден", "ファイル", "見つかりません", "文件", "未找到", "ملف", "غير", "موجود", "αρχείο",
         "δεν", "βρέθηκε", "123", "3.14159", "1,000,000", "2024-06-11", "12:34:56", "v2.0.1", "x86_64", "UTF-8",
         "HTTP/1.1", "iPhone", "McDonald's", "don't", "e.g.", "U.S.A.", "naïve", "café", "Zoë", "façade",
         "jalapeño", "Ærøskøbing", "Łódź", "Dvořák", "Ñandú", "œuvre", "øl", "þorn", "ðæt"]


def nfd(s):
    return unicodedata.normalize("NFD", s)


def to_fullwidth(s):
    out = []
    for ch in s:
        o = ord(ch)
        if 0x21 <= o <= 0x7E:
            out.append(chr(o + 0xFEE0))
        elif ch == " ":
            out.append("\u3000")
        else:
            out.append(ch)
    return "".join(out)


def fixed_cases():
    """Hand-written edge cases: always at the top of lines.jsonl (so they all get "norm")."""
    c = ["", " ", "  ", "   ", "\t", "\t\t", " \t ", "\n", "\r\n", "\u3000", "\u00a0", "\u200b", "\ufeff",
         "a", "A", "ab", " a", "a ", " a ", "  a  b  ", "a  b", "a\tb", "a\t\tb", "\ta\t", "a\nb", "a\r\nb",
         "a\x00b", "\x00", "\x00\x00", "Hello world", "Hello  world", "  Hello world  ", "Hello\tworld",
         "Hello, world!", "HELLO WORLD", "hello world", "The quick brown fox jumps over the lazy dog.",
         "Die Datei wurde nicht gefunden.", "Le fichier est introuvable.", "No se encontró el archivo.",
         "Файл не найден.", "ファイルが見つかりません。", "找不到文件。", "لم يتم العثور على الملف.",
         "Το αρχείο δεν βρέθηκε.", "0", "00", "0123456789", "3.14", "-1", "+49 30 1234567", "1e-9",
         "\x01", "\x7f", "a\x01b", "a\x7fb", "\x1b[31mred\x1b[0m", "a\u200bb", "\ufeffBOM at start",
         "zero\u200dwidth\u200cjoiners", "soft\u00adhyphen", "▁", "▁▁▁", "a▁b", "▁a", "⁇", "<unk>", "<s>",
         "</s>", "<pad>", "<sep>", "a<sep>b", "<sep> a <sep>", ">>de<< Hello", ">>fr<<Bonjour", ">>de<<",
         " >>de<< ", "<mask> is <mask>", "<ctl>", "<0x41>", "x" * 1000, "ab" * 600, "日本" * 520,
         "😀" * 300, ("supercalifragilisticexpialidocious" * 40), "a" * 4500, " " * 100, "\t" * 50,
         "a" + " " * 1000 + "b", "ＡＢＣ", "ａｂｃ ＤＥＦ", "ｶﾀｶﾅ", "ﾊﾟﾋﾟﾌﾟﾍﾟﾎﾟ", "ﬁle ﬂow oﬃce", "①②③",
         "㎏ ㎞ ㏄", "㈱ ™ ℡", "½ ¼ ¾", "x² y³", "Ⅻ", "㍻", "𝐀𝐁𝐂", "e\u0301", "\u00e9", "e\u0301\u0301",
         "\u0301", "\u0301a", " \u0301", nfd("Tiếng Việt"), "Tiếng Việt", "नमस्ते", "क्षत्रिय", "👨‍👩‍👧‍👦",
         "👍🏽", "🏳️‍🌈", "🇩🇪🇯🇵", "🇩", "1️⃣", "❤️", "\U0001F3FD", "\u200d", "🧑\u200d", "\ufe0f",
         "https://example.com/path?q=1&r=two#frag", "user@example.org", "𠀀𪚥𫝆", "\U0010ffff", "\ue000",
         "\ufffd", "\ufffe", "İ", "ß", "ẞ", "ǅ", "ﷺ", "ﻷ", "\u2028", "\u2029", "a\u2028b", "\x85", "a\x85b",
         "\u180e", "\u2060", "\u3000a\u3000", "ｘ　ｙ", "Ａ\u3000Ｂ", "\u00a0a\u00a0", "(\u202f)", "!!!", "...",
         "???", "¿¡", "«»", "„“", "‘’", "—–-", "•", "©®", "€$£¥", "%", "&amp;", "<b>bold</b>", "{\"k\": 1}",
         "\\n", "\\", "\"", "'", "`", "~", "^", "|", "#", "@", "*", "_", "__init__", "snake_case_name",
         "camelCaseName", "PascalCase", "kebab-case-name", "ALLCAPS", "MiXeD CaSe", "iPhone iOS macOS",
         "\t leading tab and space", "trailing tab and space \t", "   three leading", "three trailing   ",
         "multiple   internal    spaces", "tab\tseparated\tvalues\t", " \u3000 \u00a0 mixed blanks \u2009 "]
    return c


def random_word(rng, alphabet, lo, hi):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


LATIN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
CJK_RANGE = [chr(c) for c in range(0x4E00, 0x4E00 + 3000, 7)]
HIRAGANA = [chr(c) for c in range(0x3041, 0x3097)]
CYR = [chr(c) for c in range(0x430, 0x450)]


def synth_line(rng, held_texts):
    kind = rng.randrange(20)
    if kind == 0:  # emoji mixed into a sentence
        base = rng.choice(held_texts)
        parts = base.split(" ")
        for _ in range(rng.randint(1, 3)):
            parts.insert(rng.randint(0, len(parts)), rng.choice(EMOJI))
        return " ".join(parts)
    if kind == 1:  # NFKC folds
        return " ".join(rng.choice(NFKC_FOLDS + WORDS) for _ in range(rng.randint(1, 8)))
    if kind == 2:  # control characters sprinkled in
        s = list(rng.choice(held_texts))
        for _ in range(rng.randint(1, 4)):
            s.insert(rng.randint(0, len(s)), rng.choice(CONTROLS))
        return "".join(s)
    if kind == 3:  # combining marks, decomposed
        choice = rng.randrange(3)
        if choice == 0:
            return nfd(rng.choice(VIETNAMESE + held_texts))
        if choice == 1:
            return " ".join(rng.choice(COMBINING + WORDS) for _ in range(rng.randint(1, 6)))
        return " ".join(rng.choice(DEVANAGARI) for _ in range(rng.randint(1, 5)))
    if kind == 4:  # whitespace games
        base = rng.choice(held_texts)
        ws = rng.choice([" ", "  ", "\t", " \t", "\u3000", "\u00a0", "   ", "\t\t", "\n", "\u2009"])
        lead = rng.choice(["", " ", "  ", "\t", "\u3000", " " * rng.randint(1, 20)])
        trail = rng.choice(["", " ", "  ", "\t", "\u3000", " " * rng.randint(1, 20), "\r"])
        return lead + ws.join(base.split(" ")) + trail
    if kind == 5:  # long word
        if rng.random() < 0.1:
            n = rng.choice([1000, 1100])
            alpha = rng.choice([LATIN, "aeiou", "ab", CJK_RANGE, HIRAGANA, CYR, "0123456789"])
        else:
            n = rng.choice([20, 60, 150])
            alpha = rng.choice([LATIN, "aeiou", "ab", CJK_RANGE, HIRAGANA, CYR, ["😀", "👍🏽", "🇩🇪"], "0123456789"])
        return random_word(rng, alpha, n, n + 20)
    if kind == 6:  # digits / numbers / dates
        return " ".join(rng.choice([str(rng.randint(0, 10 ** rng.randint(1, 12))),
                                    f"{rng.random() * 1000:.{rng.randint(0, 6)}f}",
                                    f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d}.{rng.randint(1900, 2100)}",
                                    f"{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}",
                                    "٠١٢٣٤٥", "一二三", "Ⅳ", rng.choice(WORDS)])
                        for _ in range(rng.randint(1, 8)))
    if kind == 7:  # URLs, paths, emails in a sentence
        base = rng.choice(held_texts)
        return f"{base} {rng.choice(URLS)}" if rng.random() < 0.5 else f"{rng.choice(URLS)} {rng.choice(URLS)}"
    if kind == 8:  # case mutations
        base = rng.choice(held_texts)
        return rng.choice([base.upper(), base.lower(), base.title(), base.swapcase()])
    if kind == 9:  # full-width conversion
        return to_fullwidth(rng.choice(held_texts))
    if kind == 10:  # rare CJK / other scripts
        return "".join(rng.choice(RARE_CJK + SCRIPTS_MISC + [" "]) for _ in range(rng.randint(1, 8)))
    if kind == 11:  # special-token literals in text
        base = rng.choice(held_texts).split(" ")
        for _ in range(rng.randint(1, 3)):
            base.insert(rng.randint(0, len(base)), rng.choice(SPECIAL_LITERALS))
        return rng.choice([" ", ""]).join(base)
    if kind == 12:  # mixture of two languages
        return rng.choice(held_texts) + rng.choice([" ", "", " / ", "\t"]) + rng.choice(held_texts)
    if kind == 13:  # random codepoints from the BMP and beyond (no surrogates)
        out = []
        for _ in range(rng.randint(1, 15)):
            while True:
                cp = rng.choice([rng.randint(0x20, 0x7F), rng.randint(0xA0, 0x2FFF), rng.randint(0x3000, 0xFFFF),
                                 rng.randint(0x10000, 0x10FFFF), rng.randint(0, 0x1F)])
                if not 0xD800 <= cp <= 0xDFFF:
                    break
            out.append(chr(cp))
        return "".join(out)
    if kind == 14:  # random word salad
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 15)))
    if kind == 15:  # only blanks / punctuation
        return "".join(rng.choice([" ", "\t", ".", ",", "!", "?", "-", "—", "…", "\u3000", "。", "、", "·"])
                       for _ in range(rng.randint(0, 12)))
    if kind == 16:  # NFD of any held-out line
        return nfd(rng.choice(held_texts))
    if kind == 17:  # substring of a held-out line (cuts words in the middle)
        base = rng.choice(held_texts)
        if len(base) < 2:
            return base
        i = rng.randrange(len(base))
        return base[i: i + rng.randint(1, 40)]
    if kind == 18:  # emoji runs
        return "".join(rng.choice(EMOJI + [" ", "a", "1"]) for _ in range(rng.randint(1, 12)))
    # a very long line of many words
    return " ".join(rng.choice(held_texts) for _ in range(rng.randint(2, 4)))


def build_lines(held):
    rng = random.Random(SEED)
    held_texts = []
    seen = {}
    for _, t in held:
        t = t.strip()
        if t and t not in seen and len(t) < 120:
            seen[t] = None
            held_texts.append(t)
    # raw held-out strings (with their original newlines / printf formats): a fixed-seed sample, round-robin
    # over languages so that every script is represented
    by_lang = {}
    for lang, t in held:
        if t.strip() and len(t) < 160:
            by_lang.setdefault(lang, []).append(t)
    raw = []
    langs = sorted(by_lang)
    for lang in langs:
        rng.shuffle(by_lang[lang])
    i = 0
    while len(raw) < 4800 and any(by_lang.values()):
        lang = langs[i % len(langs)]
        if by_lang[lang]:
            raw.append(by_lang[lang].pop())
        i += 1
    synth = [synth_line(rng, held_texts) for _ in range(5050)]
    rest = raw + synth
    rng.shuffle(rest)
    return fixed_cases() + rest


def build_bytes_cases():
    rng = random.Random(SEED + 1)
    c = [b"", b"\x00", b"a\x00b", b"\x00\x00\x00", b"abc\x00", b"\x00abc", b"Hello\x00 world",
         b"\xff", b"\xfe", b"\xff\xfe", b"\xfe\xff", b"a\xffb", b"\xff\xff\xff\xff", b"\xc0", b"\xc1", b"\xf5",
         b"\xf8", b"\xfc", b"\x80", b"\xbf", b"\x80\x80", b"a\x80b", b"\xbf\xbf\xbf",
         b"\xc3", b"a\xc3", b"\xc3a", b"\xc3 ", b"\xe2", b"\xe2\x82", b"\xe2\x82a", b"\xf0", b"\xf0\x9f",
         b"\xf0\x9f\x98", b"\xf0\x9f\x98a", b"\xf0\x9f\x98\x80", b"\xf0\x9f\x98\x80\x80",
         b"\xc0\x80", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x80\xaf", b"\xe0\x9f\xbf",
         b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",
         b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\xbd\xed\xb8\x80", b"\xed\x9f\xbf", b"\xee\x80\x80",
         b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf7\xbf\xbf\xbf", b"\xef\xbb\xbf", b"\xef\xbb\xbfabc",
         b"\xef\xbf\xbd", b"\xef\xbf\xbe", b"\xef\xbf\xbf", b"\xc2\x80", b"\xc2\xa0", b"\xc2\xad", b"\xc2",
         b"\xc3\xa9\xc3", b"caf\xc3\xa9", b"caf\xe9", b"na\xefve", b"\xe6\x97\xa5\xe6\x9c",
         b"\xe6\x97\xa5\xe6\x9c\xac", b"\xe6\x97", b"\xe6", b"\xe6\x97\x41", b"\xa5\xe6\x9c\xac",
         b"\xef\xbc\xa1\xef\xbc", b"\xef\xbc\xa1\xef\xbc\xa2", b"\xef\xac\x81", b"\xef\xac", b"\xe2\x91\xa0\xe2",
         b"\xe2\x96\x81", b"\xe2\x96", b"\xe2\x96\x81\xe2\x96", b" \xe2\x96\x81 ", b"\t\xff\t", b"  \xff  ",
         b"\xe3\x80\x80\xff", b"<sep>\xff", b"\xff<sep>", b">>de<<\xc3", b"<s>\x00</s>",
         b"\x7f\x80\x81", b"\x01\x02\x03", b"\x1b[31m\xff\x1b[0m", b"\xe2\x80\x8b\xff", b"\xcc\x81",
         b"e\xcc\x81", b"e\xcc", b"\xcc", b"\xf0\x9f\x87\xa9\xf0\x9f\x87", b"\xf0\x9f\x91\xa8\xe2\x80\x8d",
         b"\xf0\x9f\x91\xa8\xe2\x80", b"\xc3\xa4" * 3 + b"\xc3", b"\xff" * 100, b"a" * 50 + b"\xff" + b"b" * 50,
         b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xe2\x82\x28", b"\xf0\x28\x8c\xbc", b"\xf0\x90\x28\xbc",
         b"\xf0\x28\x8c\x28", b"\xf8\xa1\xa1\xa1\xa1", b"\xfc\xa1\xa1\xa1\xa1\xa1"]
    valid = ["Hello", "Grüße", "日本語", "😀", "Ελληνικά", "ｶﾀｶﾅ", "ﬁ", "①", "a b", " ", "▁", "e\u0301"]
    bad = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",
           b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\xc1\xbf", b"\xe0\x80\x80", b"\xf8\x88\x80\x80\x80"]
    while len(c) < 220:
        parts = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.5:
                parts.append(rng.choice(valid).encode("utf-8"))
            else:
                parts.append(rng.choice(bad))
        # sometimes cut a valid multi-byte string at a random byte
        if rng.random() < 0.3:
            v = rng.choice(valid).encode("utf-8")
            parts.append(v[: rng.randint(0, len(v))])
        c.append(b"".join(parts))
    return c


# ----------------------------------------------------------------------------------------------------------------
# Models and goldens
# ----------------------------------------------------------------------------------------------------------------


def train_model(name, train_lines):
    spm.set_random_generator_seed(SEED)
    opts = dict(MODELS[name])
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(train_lines), model_writer=buf, num_threads=1, minloglevel=2,
        shuffle_input_sentence=False, input_sentence_size=0, max_sentence_length=4192, **opts)
    return buf.getvalue()


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def norm_json(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return list(b)


def decode_cases(sp, rng):
    """Id sequences that encode never produces: byte pieces in odd orders, control/unk ids, bos/eos, ..."""
    n = sp.get_piece_size()
    byte_ids = [i for i in range(n) if sp.is_byte(i)]
    ctl = [i for i in range(n) if sp.is_control(i)]
    unk = [i for i in range(n) if sp.is_unknown(i)]
    udef = [i for i in range(n) if sp.IdToPiece(i) in USER_SYMBOLS]
    normal = [i for i in range(n) if not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))]
    bp = {sp.IdToPiece(i): i for i in byte_ids}

    def byte(v):
        return bp[f"<0x{v:02X}>"]

    cases = [[], unk, ctl, unk * 3, [normal[0]], normal[:5], normal[-5:]]
    if byte_ids:
        cases += [[byte(0xE2)], [byte(0xE2), byte(0x82)], [byte(0xE2), byte(0x82), byte(0xAC)],
                  [byte(0xC3)], [byte(0xC3), byte(0xA9)], [byte(0xA9), byte(0xC3)], [byte(0xFF)],
                  [byte(0x80)], [byte(0x00)], [byte(0x41), byte(0x42)], [byte(0x20)], [byte(0x20), byte(0x41)],
                  [byte(0xF0), byte(0x9F), byte(0x98), byte(0x80)], [byte(0xF0), byte(0x9F), byte(0x98)],
                  [byte(0xED), byte(0xA0), byte(0x80)], [byte(0xC0), byte(0x80)],
                  [normal[3], byte(0xC3), normal[4], byte(0xA9)], [byte(0xC3)] + ctl + [byte(0xA9)],
                  [byte(0xC3)] + unk + [byte(0xA9)], [byte(0xE2), byte(0x96), byte(0x81)],
                  [byte(0xE2), byte(0x96), byte(0x81), byte(0x41)]]
    cases += [[u] for u in udef] + [[normal[7], u, normal[8]] for u in udef]
    for i in range(len(normal)):
        if sp.IdToPiece(normal[i]).startswith("▁"):
            cases += [[normal[i]], [normal[i], normal[i]]]
            break
    pool = normal + byte_ids * 3 + ctl * 2 + unk * 2 + udef
    while len(cases) < 300:
        cases.append([rng.choice(pool) for _ in range(rng.randint(1, 20))])
    return cases


def write_jsonl(path, objs):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for o in objs:
            f.write(dumps(o))
            f.write("\n")


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    check = "--check" in sys.argv
    os.makedirs(OUT, exist_ok=True)
    before = {f: sha256(os.path.join(OUT, f)) for f in sorted(os.listdir(OUT))} if check else {}

    train, held, cstats = build_corpus()
    print("corpus:", dumps(cstats), flush=True)
    lines = build_lines(held)
    assert len(lines) >= 10000, len(lines)
    for s in lines:
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in s)
    write_jsonl(os.path.join(OUT, "lines.jsonl"), lines)
    bcases = build_bytes_cases()
    write_jsonl(os.path.join(OUT, "bytes.jsonl"), [list(b) for b in bcases])

    manifest = {"sentencepiece_version": spm.__version__, "seed": SEED, "norm_lines": NORM_LINES,
                "lines": len(lines), "bytes_cases": len(bcases), "corpus": cstats, "models": {}}
    sps = {}
    for name in MODELS:
        proto = train_model(name, train)
        path = os.path.join(OUT, f"{name}.model")
        with open(path, "wb") as f:
            f.write(proto)
        sp = spm.SentencePieceProcessor(model_file=path)
        sps[name] = sp
        manifest["models"][name] = dict(MODELS[name], pieces=sp.get_piece_size(), bytes=len(proto),
                                        unk_id=sp.unk_id(), bos_id=sp.bos_id(), eos_id=sp.eos_id(),
                                        pad_id=sp.pad_id())
        print(f"{name}: {sp.get_piece_size()} pieces, {len(proto) / 1024:.1f} KiB", flush=True)

    # goldens: "norm" and "dec" for the first NORM_LINES lines; after that "ids" always, "dec" only where it differs
    # from the input line (absent "dec" == the line itself), "norm" never
    for name, sp in sps.items():
        rows = []
        for i, s in enumerate(lines):
            ids = sp.encode(s, out_type=int)
            dec = sp.decode(ids)
            if i < NORM_LINES:
                rows.append({"ids": ids, "norm": sp.normalize(s), "dec": dec})
            elif dec != s:
                rows.append({"ids": ids, "dec": dec})
            else:
                rows.append({"ids": ids})
        write_jsonl(os.path.join(OUT, f"{name}.golden.jsonl"), rows)

    for name, sp in sps.items():
        rows = []
        for b in bcases:
            ids = sp.encode(b, out_type=int)
            rows.append({"ids": ids, "norm": norm_json(sp.normalize(b)), "dec": sp.decode(ids)})
        write_jsonl(os.path.join(OUT, f"{name}.bytes_golden.jsonl"), rows)
        rng = random.Random(SEED + 2)
        rows = [{"ids": ids, "dec": sp.decode(ids)} for ids in decode_cases(sp, rng)]
        write_jsonl(os.path.join(OUT, f"{name}.decode_golden.jsonl"), rows)

    files = sorted(f for f in os.listdir(OUT) if f != "manifest.json")
    manifest["sha256"] = {f: sha256(os.path.join(OUT, f)) for f in files}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")

    total = 0
    print("\n== files ==")
    for f in sorted(os.listdir(OUT)):
        sz = os.path.getsize(os.path.join(OUT, f))
        total += sz
        print(f"{f:40s} {sz / 1024:9.1f} KiB")
    print(f"total {total / 1024 / 1024:.2f} MiB")
    if check:
        after = {f: sha256(os.path.join(OUT, f)) for f in sorted(os.listdir(OUT))}
        diff = [f for f in sorted(set(before) | set(after)) if before.get(f) != after.get(f)]
        print("determinism check:", "identical" if not diff else f"DIFFERENT: {diff}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
