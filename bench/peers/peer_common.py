"""What the peer scripts (peer_ct2.py, peer_hf.py) share: their command line
(--model, --ids, --batch, --beam, --threads, --repeat, --max-length,
--min-length, --out, plus each one's own), reading token-id sentences, and
turning pieces into text (joined, U+2581 as spaces, specials dropped:
SentencePiece's decode for ordinary pieces, as transformerd's tokenizer
decodes them). Plain Python: it imports in either venv."""
import argparse


def parser(max_length_help=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--max-length", type=int, default=255, help=max_length_help)
    ap.add_argument("--min-length", type=int, default=0)
    ap.add_argument("--out")
    return ap


def read_ids(path):
    return [[int(t) for t in line.split()] for line in open(path) if line.strip()]


def pieces_text(pieces, specials):
    return "".join(p for p in pieces if p not in specials).replace("\u2581", " ").strip()


def write_lines(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
