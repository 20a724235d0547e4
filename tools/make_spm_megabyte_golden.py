#!/usr/bin/env python3
# Regenerate:  tools/setup_venv.sh && tools/.venv/bin/python tools/make_spm_megabyte_golden.py
"""Goldens of the two 1 MB lines of tests/test_spm.c (test_megabyte_line) from the reference library.

The lines are too large to commit, so they are rebuilt here exactly as the C test builds them, and only
fingerprints are written to tests/data/spm/megabyte_golden.json: for each committed model and each line, the
length and FNV-1a 64 hash of sp.normalize(line) (UTF-8 bytes), of the ids of sp.encode(line) (each id as 4
little-endian bytes) and of sp.decode(ids). The C test computes the same fingerprints of its own results.

Uses the committed models (tests/data/spm/<name>.model); it never retrains them.
"""

import json
import os
import struct
import sys

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "spm")
MODELS = ["unigram_nfkc", "unigram_bytefb", "bpe", "unigram_identity"]
SIZE = 1 << 20
# Lines: 0 = one 1 MB "word" of CHUNKS, 1 = CHUNKS separated by spaces, 2 = RARE separated by spaces (pieces
# the models do not have: unknown ids, or bytes with byte fallback).
CHUNKS = ["translation", "été", "日本", "42", "мир"]
RARE = ["translation", "\U0001F600", "ᚠᛇᚻ", "42", "\u2603x"]


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def line(chunks, spaced: bool) -> str:
    """Chunks in turn while the line (plus one byte) fits SIZE bytes; with spaces between them when spaced."""
    out, n, k = [], 0, 0
    while True:
        c = chunks[k % 5].encode()
        if n + len(c) + 1 > SIZE:
            break
        out.append(c)
        n += len(c)
        if spaced:
            out.append(b" ")
            n += 1
        k += 1
    b = b"".join(out)
    if spaced:
        b = b[:-1]
    return b.decode()


def main() -> int:
    rows = {}
    for name in MODELS:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(OUT, f"{name}.model"))
        rows[name] = []
        for chunks, spaced in ((CHUNKS, False), (CHUNKS, True), (RARE, True)):
            s = line(chunks, spaced)
            norm = sp.normalize(s).encode()
            ids = sp.encode(s, out_type=int)
            dec = sp.decode(ids).encode()
            rows[name].append({
                "line_bytes": len(s.encode()),
                "norm_bytes": len(norm), "norm_fnv": fnv1a64(norm),
                "n_ids": len(ids), "n_ids_bytes": 4 * len(ids), "ids_fnv": fnv1a64(b"".join(struct.pack("<i", i) for i in ids)),
                "dec_bytes": len(dec), "dec_fnv": fnv1a64(dec),
                "n_unk": sum(1 for i in ids if i == sp.unk_id()),
            })
            print(name, len(rows[name]) - 1, rows[name][-1], flush=True)
    doc = {"sentencepiece_version": spm.__version__, "size": SIZE, "chunks": CHUNKS, "rare": RARE, "models": rows}
    with open(os.path.join(OUT, "megabyte_golden.json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
