#!/usr/bin/env python3
"""Stage 1c: general-domain en-de pairs from documentation that Debian ships translated side by side.

Input: the .debs of tools/train/docs-packages.txt, fetched and unpacked by tools/train/fetch_docs.sh into
WORK/docs-root/PACKAGE/ (dpkg-deb -x; never installed). Nothing installed on this machine is read.

Collections (English file <-> German file, matched by path):
  * GNOME help (Mallard .page, DocBook .xml / .docbook): usr/share/help/C/APP/... <-> usr/share/help/de/APP/...,
    every package that ships both (gnome-user-docs, the applications' own help, gnucash-docs, ...)
  * KDE handbooks: usr/share/doc/HTML/en/APP/index.cache.bz2 <-> .../HTML/de/APP/index.cache.bz2 (the rendered
    HTML pages, entities resolved), page by page
  * LibreOffice help: libreoffice-help-en-us .../help/en-US/X.html <-> libreoffice-help-de .../help/de/X.html
  * GIMP help, KiCad docs, the Debian installation guide, the Debian Administrator's Handbook, Debian Reference,
    the Debian FAQ, the Developer's Reference, the Debian Edu manual, LilyPond's docs: HTML per language
  * man pages: manpages-de's usr/share/man/de/manN/X <-> the English page of the same name (package
    `manpages`, else the unpacked package that has it: coreutils, util-linux, systemd, ...)

Alignment (deterministic): each file becomes a sequence of text blocks (paragraph-like elements: p, para,
title, li, td, dt/dd, h1-h6, ...; for man pages headings, paragraphs, tagged-paragraph tags and bodies);
code (pre, screen, programlisting, .nf/.fi) is skipped. Each block has a signature: its element, its
non-generated id attribute, the digits, link targets (language parts removed) and inline element names it
contains. The English and German sequences are aligned with difflib on the signatures; only blocks in equal
runs are paired. A paired block is split into sentences (split_sentences: ., !, ?, followed by a space and a
capital, not after common abbreviations or single letters / numbers); when both sides have the same number of
sentences they pair one by one, otherwise the whole block is one pair.

Cleaning: corpus.py's keep() (identical, > --max-len characters, length ratio > 3, letterless, markup,
differing placeholders) after its norm_space(); in addition the digit sequences must agree
("digits"), and blocks whose text is mostly code-like are dropped. De-duplicated over all collections
(first kept), at most corpus.MAX_PER_SRC translations per source.

Held out: dev (--n-dev, kept in WORK/docs) and test (--n-test; WORK/docs/test.* and, with --test-out, the
committed tests/data/en_de_general/test.{en,de}) are drawn with --seed, round-robin over the collections
(each collection shuffled; so no collection dominates), from "real sentences": at least 4 words on both sides,
starting with a capital letter or digit, ending in . ! or ?, no code characters. A held-out source's
normalised form (corpus.normkey) must not occur in the stage-1 corpus (train/dev/test) or the Ding pairs
(WORK/corpus/*.en) when they exist, and no docs training pair shares a normalised source with dev, test, the
committed tests/data/en_de_general/test.en (the same set when the inputs are the same), stage 1's dev / test
(WORK/corpus/{dev,test}.en) or the committed tests/data/en_de_test/test.en.

Writes WORK/docs/{train,dev,test}.{en,de}, provenance.tsv (package, collection, files aligned, pairs kept,
licence), stats.json (per collection: files, blocks, aligned blocks, raw and kept pairs, drops) and stats.md.
Usage: tools/.venv/bin/python tools/train/docs_corpus.py [--work .train] [--test-out tests/data/en_de_general/test]
"""

import argparse
import collections
import difflib
import glob
import gzip
import html
import html.parser
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402  (cleaning functions shared with stage 1)

ROOT = corpus.ROOT

# ------------------------------------------------------------------------------------------ HTML / XML blocks

BLOCK = {"p", "para", "simpara", "title", "subtitle", "desc", "h1", "h2", "h3", "h4", "h5", "h6", "li", "td",
         "th", "dt", "dd", "caption", "figcaption", "entry", "term", "item", "blockquote", "glossterm",
         "refpurpose", "question", "answer"}
SKIP = {"script", "style", "pre", "screen", "programlisting", "synopsis", "cmdsynopsis", "funcsynopsis",
        "head", "nav", "header", "footer", "literallayout", "textarea", "select", "svg", "math", "code:block",
        "mal:credit", "credit", "revision", "othercredit", "authorgroup", "copyright", "legalnotice"}
VOID = {"br", "img", "meta", "link", "input", "hr", "col", "area", "base", "wbr", "source", "embed", "param"}
EMPTY_XREF = "\uFFFC"
SEQ = {"menuchoice": " ▸ ", "guiseq": " ▸ ", "keycombo": "+", "keyseq": "+"}
AUTO_CLOSE = {"p", "li", "dt", "dd", "td", "th"}
GENERATED_ID = re.compile(r"^(idm?\d|id-?\d|d\d+e\d+|ftn|id\d|_idp|idp\d|N\d{3,}|x\d+-\d+|[a-z]{1,3}\d{4,}$)",
                          re.I)
LANG_PART = re.compile(r"(^|/)(en-US|en|de-DE|de|C)(?=/)|\.(en|de)(?=\.html)")
DIGITS = re.compile(r"\d+")


class BlockParser(html.parser.HTMLParser):
    """Text blocks of an HTML or XML document: list of (signature, text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks = []
        self.stack = []  # open blocks: [tag, id, buffer list, inline tags, hrefs, element name, nested same-name]
        self.skip = []   # open skipped elements
        self.inline = []  # open inline elements of the innermost block: [tag, children seen]

    def flush(self):
        if not self.stack:
            return
        top = self.stack[-1]
        text = corpus.norm_space("".join(top[2]))
        if text:
            sig = (top[0], top[1], tuple(sorted(DIGITS.findall(text))), tuple(sorted(top[3])),
                   tuple(sorted(top[4])))
            self.blocks.append((sig, text))
        top[2], top[3], top[4] = [], [], []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag == "br" and self.stack and not self.skip:
                self.stack[-1][2].append(" ")
            return
        if self.skip or tag in SKIP or (tag == "code" and any(k == "mime" for k, _ in attrs)):
            self.skip.append(tag)
            return
        a = dict(attrs)
        real = tag
        if tag == "div" and "para" in (a.get("class") or "").split():  # Publican's <div class="para">
            tag = "para"
        elif self.stack and tag == self.stack[-1][5] and tag not in BLOCK:  # a nested <div> in a div block
            self.stack[-1][6] += 1
            return
        if tag in BLOCK:
            if self.stack and self.stack[-1][0] == tag and tag in AUTO_CLOSE:
                self.flush()
                self.stack.pop()
            self.flush()
            self.inline = []
            ident = a.get("id") or ""
            if GENERATED_ID.match(ident):
                ident = ""
            self.stack.append([tag, ident, [], [], [], real, 0])
        elif self.stack:
            top = self.stack[-1]
            if self.inline and self.inline[-1][0] in SEQ:  # menu paths and key combinations
                if self.inline[-1][1]:
                    top[2].append(SEQ[self.inline[-1][0]])
                self.inline[-1][1] += 1
            self.inline.append([tag, 0])
            top[3].append(tag)
            href = a.get("href") or a.get("xref") or a.get("linkend") or ""
            if href and not href.startswith("javascript"):
                top[4].append(LANG_PART.sub(r"\1", href))

    def handle_startendtag(self, tag, attrs):
        if tag == "br" and self.stack and not self.skip:
            self.stack[-1][2].append(" ")
        elif tag in ("link", "xref") and self.stack and not self.skip and any(k in ("xref", "linkend", "href")
                                                                              for k, _ in attrs):
            self.stack[-1][2].append(EMPTY_XREF)  # an empty cross-reference: text made at display time

    def handle_endtag(self, tag):
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.pop()
            elif tag in self.skip:
                while self.skip and self.skip.pop() != tag:
                    pass
            return
        if self.inline and any(e[0] == tag for e in self.inline):
            while self.inline and self.inline.pop()[0] != tag:
                pass
        if self.stack and self.stack[-1][5] == tag and self.stack[-1][6]:
            self.stack[-1][6] -= 1
            return
        if any(e[5] == tag for e in self.stack):
            self.inline = []
            while self.stack:
                self.flush()
                if self.stack.pop()[5] == tag:
                    break

    def handle_data(self, data):
        if self.stack and not self.skip:
            self.stack[-1][2].append(data)

    def unknown_decl(self, data):
        pass


def html_blocks(path, raw=None):
    if raw is None:
        with open(path, "rb") as f:
            raw = f.read()
    m = re.search(rb'charset=["\']?([-\w]+)', raw[:2000]) or re.search(rb'encoding=["\']([-\w]+)', raw[:200])
    enc = m.group(1).decode("ascii").lower() if m else "utf-8"
    try:
        text = raw.decode(enc, "replace")
    except LookupError:
        text = raw.decode("utf-8", "replace")
    p = BlockParser()
    try:
        p.feed(text)
        p.close()
    except Exception as e:  # a malformed file: keep what was read
        print(f"docs_corpus: {path}: {e}", file=sys.stderr)
    p.flush()
    return p.blocks


def kde_pages(path):
    """KDE's rendered handbook (index.cache.bz2: the HTML pages, each after <FILENAME filename="X">) -> {X: bytes}."""
    import bz2
    with bz2.open(path, "rb") as f:
        raw = f.read()
    parts = re.split(rb'<FILENAME filename="([^"]+)">', raw)
    return {parts[i].decode("utf-8", "replace"): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


# ------------------------------------------------------------------------------------------------- man pages

ROFF_ESC = [
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\s[-+]?\d"), ""),
    (re.compile(r"\\\*(\(..|\[[^\]]*\]|.)"), ""), (re.compile(r"\\[&c%:/,)]"), ""),
    (re.compile(r"\\\((em|en)"), "—"), (re.compile(r"\\\(aq"), "'"), (re.compile(r"\\\(dq"), '"'),
    (re.compile(r"\\\(lq|\\\(Fo"), "“"), (re.compile(r"\\\(rq|\\\(Fc"), "”"), (re.compile(r"\\\(bu"), "•"),
    (re.compile(r"\\\(co"), "©"), (re.compile(r"\\\(ti|\\\(ap"), "~"), (re.compile(r"\\\(ha"), "^"),
    (re.compile(r"\\\(.."), ""),
    (re.compile(r"\\\[u00([0-9A-Fa-f]{2})\]"), lambda m: chr(int(m.group(1), 16))),
    (re.compile(r"\\\[[^\]]*\]"), ""), (re.compile(r"\\-"), "-"), (re.compile(r"\\[ ~0|^]"), " "),
    (re.compile(r"\\e"), "\\\\"), (re.compile(r"\\[a-zA-Z]"), ""),
]
FONT_MACROS = {"B", "I", "R", "SM", "SB", "BR", "RB", "IR", "RI", "BI", "IB", "UR", "MT", "OP"}


def roff_text(s):
    s = re.sub(r'\\".*', "", s)
    for pat, rep in ROFF_ESC:
        s = pat.sub(rep, s)
    return s


def roff_args(s):
    return [q.replace('""', '"') if q else w for q, w in re.findall(r'"((?:[^"]|"")*)"|(\S+)', s)]


def man_blocks(path):
    """Blocks of a roff man page: (signature, text); .SH/.SS headings, .PP/.TP/.IP paragraphs, .nf skipped."""
    try:
        with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    if re.match(r"\.so\s", text):
        return []
    blocks, cur, kind, nofill = [], [], "P", False

    def flush(nk):
        nonlocal cur, kind
        t = corpus.norm_space(" ".join(cur))
        if t:
            blocks.append(((kind, tuple(sorted(DIGITS.findall(t)))), t))
        cur, kind = [], nk

    pending_tag = False
    for line in text.split("\n"):
        if line.startswith((".\\\"", "'\\\"", '.\\"')) or line.strip() in (".", "'"):
            continue
        if line.startswith((".", "'")) and len(line) > 1:
            m = re.match(r"[.'](\S+)\s*(.*)", line)
            mac, rest = (m.group(1), m.group(2)) if m else ("", "")
            if mac in ("nf", "EX"):
                flush("P")
                nofill = True
            elif mac in ("fi", "EE"):
                nofill = False
                flush("P")
            elif nofill:
                continue
            elif mac in ("SH", "SS"):
                flush(mac)
                cur = [roff_text(" ".join(roff_args(rest)))]
                flush("P")
            elif mac in ("PP", "P", "LP", "sp", "br", "RS", "RE", "in", "ti", "HP", "ne", "bp"):
                flush("P")
            elif mac == "TP":
                flush("TAG")
                pending_tag = True
                continue
            elif mac == "IP":
                flush("IP")
                args = roff_args(rest)
                if args and not re.fullmatch(r"\\\(bu|\\\[bu\]|\*|-|\d+\.?|[a-z]\)", args[0]):
                    cur = [roff_text(args[0])]
                    flush("IP")
            elif mac in FONT_MACROS:
                args = roff_args(rest)
                joiner = "" if len(mac) == 2 and mac not in ("SM", "SB", "UR", "MT", "OP") else " "
                cur.append(roff_text(joiner.join(args)))
            elif mac in ("TH", "TS", "TE", "de", "ds", "nr", "ad", "na", "hy", "nh", "ft", "ps", "UE", "ME",
                         "PD", "so", "ie", "el", "if", "ig", "tr", "ll", "ta", "ce", "TQ", "YS", "SY", "OP"):
                if mac in ("TS",):
                    flush("P")
                    nofill = True  # tables: skipped to .TE
                continue
            else:
                continue
        else:
            if nofill:
                continue
            cur.append(roff_text(line))
        if pending_tag and cur:
            flush("TP")
            pending_tag = False
    flush("P")
    return blocks


# -------------------------------------------------------------------------------------------------- alignment

ABBREV = re.compile(r"(?:\b(?:z|B|d|h|u|a|bzw|ggf|usw|vgl|Nr|ca|bzw|evtl|inkl|sog|etc|e|g|i|vs|Dr|Mr|Mrs|No|Fig|"
                    r"Abb|Bsp|bspw|zB|resp|incl|approx|cf|Sec|Ch|Kap|Abschn|S|s|o|St|Hr|Fr|u\.a|z\.B|d\.h|"
                    r"e\.g|i\.e|v|ff|f|Tab|max|min|mind|ggü|insb|Jh|Mio|Mrd)|\b\w|\d+|\.\.)$")
SPLIT_AT = re.compile(r"(?<=[.!?])[\"'”“»«)]*\s+(?=[\"'“„»«(]?[A-ZÄÖÜ0-9])")


def split_sentences(s):
    """Deterministic sentence split: after . ! ? followed by space and a capital / digit / quote, except
    after common abbreviations, single letters and numbers ("z. B.", "e.g.", "1.")."""
    out, start = [], 0
    for m in SPLIT_AT.finditer(s):
        head = s[start:m.start()].rstrip("\"'”“»«)")
        if head.endswith(".") and ABBREV.search(head[:-1]):
            continue
        out.append(s[start:m.start()].strip())
        start = m.end()
    out.append(s[start:].strip())
    return [x for x in out if x]


def align_blocks(en, de):
    """-> list of (en_text, de_text) for blocks in runs of equal signatures."""
    sm = difflib.SequenceMatcher(None, [b[0] for b in en], [b[0] for b in de], autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out.extend((en[i1 + k][1], de[j1 + k][1]) for k in range(i2 - i1))
    return out


def block_pairs(s, t):
    ss, ts = split_sentences(s), split_sentences(t)
    if len(ss) > 1 and len(ss) == len(ts):
        return list(zip(ss, ts))
    return [(s, t)]


SECTION_NO = re.compile(r"^(\d+\.)+\d*\s+(?=\S)")
CODE_CHARS = re.compile(r"[{}<>=$|\\_;#@]")


def doc_keep(s, t, max_len):
    why = corpus.keep(s, t, max_len=max_len)
    if why:
        return why
    if EMPTY_XREF in s + t or re.search(r"\s[.,;:)]|\(\s*\)", s + " " + t):  # text left out: "See  for ..."
        return "xref"
    if DIGITS.findall(s) != DIGITS.findall(t) and sorted(DIGITS.findall(s)) != sorted(DIGITS.findall(t)):
        return "digits"
    if not 0.6 <= (len(t) + 10) / (len(s) + 10) <= 2.2:
        return "length"
    if len(CODE_CHARS.findall(s)) > 0.1 * len(s) or len(CODE_CHARS.findall(t)) > 0.1 * len(t):
        return "code"
    return None


# ---------------------------------------------------------------------------------------------------- sources

def R(work, pkg, *rel):
    return os.path.join(work, "docs-root", pkg, *rel)


def html_collection(work, name, en_pkg, en_dir, de_pkg, de_dir, pattern, de_to_en=lambda p: p):
    """(collection, packages, en_file, de_file, kind) for every German file with an English counterpart."""
    de_root = R(work, de_pkg, de_dir)
    for de in sorted(glob.glob(os.path.join(de_root, "**", pattern), recursive=True)):
        rel = os.path.relpath(de, de_root)
        en = os.path.join(R(work, en_pkg, en_dir), de_to_en(rel))
        if os.path.isfile(en) and os.path.isfile(de):
            yield name, (en_pkg, de_pkg) if en_pkg != de_pkg else (de_pkg,), en, de, "html"


def gnome_help(work):
    for de_app in sorted(glob.glob(os.path.join(work, "docs-root", "*", "usr", "share", "help", "de", "*"))):
        parts = de_app.split(os.sep)
        pkg, app = parts[-6], parts[-1]
        c_app = os.path.join(os.path.dirname(os.path.dirname(de_app)), "C", app)
        coll = {"gnucash-docs": "gnucash-docs", "gnome-devel-docs": "gnome-devel-docs",
                "mate-user-guide": "mate-user-guide", "gnome-user-docs": "gnome-user-docs"}.get(pkg, "gnome-app-help")
        for de in sorted(glob.glob(os.path.join(de_app, "**", "*"), recursive=True)):
            if not de.endswith((".page", ".xml", ".docbook")) or not os.path.isfile(de):
                continue
            en = os.path.join(c_app, os.path.relpath(de, de_app))
            if os.path.isfile(en) and os.path.getsize(en) > 0:
                yield coll, (pkg,), en, de, "html"


def kde_docs(work):
    for de in sorted(glob.glob(os.path.join(work, "docs-root", "*", "usr", "share", "doc", "HTML", "de", "**",
                                            "index.cache.bz2"), recursive=True)):
        rel = de.split(os.sep + os.path.join("HTML", "de") + os.sep, 1)
        en = os.path.join(rel[0], "HTML", "en", rel[1])
        pkg = os.path.relpath(de, os.path.join(work, "docs-root")).split(os.sep)[0]
        if os.path.isfile(en):
            yield "kde-docs", (pkg,), en, de, "kde"


def man_pages(work):
    """manpages-de's pages <-> the English page of the same name in `manpages`, else in the first (by name) other
    unpacked package that has it (coreutils, util-linux, systemd, ...: docs-packages.txt lists them)."""
    de_root = R(work, "manpages-de", "usr/share/man/de")
    base = os.path.join(work, "docs-root")
    others = sorted(os.path.relpath(d, base).split(os.sep)[0]
                    for d in glob.glob(os.path.join(base, "*", "usr", "share", "man", "man[1-8]")))
    roots = [(p, R(work, p, "usr/share/man")) for p in ["manpages"] + sorted(set(others) - {"manpages", "manpages-de"})]
    for de in sorted(glob.glob(os.path.join(de_root, "man*", "*"))):
        rel = os.path.relpath(de, de_root)
        for pkg, root in roots:
            en = os.path.join(root, rel)
            if os.path.isfile(en):
                yield "man-pages", (pkg, "manpages-de"), en, de, "man"
                break


def all_sources(work):
    def strip_lang(rel, lang):
        return rel.replace(f".{lang}.html", ".en.html")

    yield from gnome_help(work)
    yield from kde_docs(work)
    yield from html_collection(work, "libreoffice-help", "libreoffice-help-en-us",
                               "usr/share/libreoffice/help/en-US", "libreoffice-help-de",
                               "usr/share/libreoffice/help/de", "*.html")
    yield from html_collection(work, "gimp-help", "gimp-help-en", "usr/share/gimp/2.0/help/en", "gimp-help-de",
                               "usr/share/gimp/2.0/help/de", "*.html")
    yield from html_collection(work, "kicad-doc", "kicad-doc-en", "usr/share/doc/kicad/help/en", "kicad-doc-de",
                               "usr/share/doc/kicad/help/de", "*.html")
    yield from html_collection(work, "installation-guide", "installation-guide-amd64",
                               "usr/share/doc/installation-guide-amd64/en", "installation-guide-amd64",
                               "usr/share/doc/installation-guide-amd64/de", "*.html")
    yield from html_collection(work, "debian-handbook", "debian-handbook", "usr/share/doc/debian-handbook/html/en-US",
                               "debian-handbook", "usr/share/doc/debian-handbook/html/de-DE", "*.html")
    yield from html_collection(work, "debian-reference", "debian-reference-en", "usr/share/debian-reference",
                               "debian-reference-de", "usr/share/debian-reference", "*.de.html",
                               lambda p: strip_lang(p, "de"))
    yield from html_collection(work, "debian-faq", "debian-faq", "usr/share/doc/debian/FAQ", "debian-faq-de",
                               "usr/share/doc/debian/FAQ/de", "*.de.html", lambda p: strip_lang(p, "de"))
    yield from html_collection(work, "developers-reference", "developers-reference", "usr/share/developers-reference",
                               "developers-reference-de", "usr/share/developers-reference/de", "*.html")
    yield from html_collection(work, "debian-edu-doc", "debian-edu-doc-en", "usr/share/doc/debian-edu-doc-en",
                               "debian-edu-doc-de", "usr/share/doc/debian-edu-doc-de", "*.html")
    yield from html_collection(work, "lilypond-doc", "lilypond-doc-html", "usr/share/doc/lilypond/html",
                               "lilypond-doc-html-de", "usr/share/doc/lilypond/html", "*.de.html",
                               lambda p: p.replace(".de.html", ".html"))
    yield from man_pages(work)


def licence_of(work, pkg):
    paths = [R(work, pkg, "usr/share/doc", pkg, "copyright")]
    link = R(work, pkg, "usr/share/doc", pkg)
    if os.path.islink(link):  # doc directory linked to another package's (its copyright is there)
        target = os.path.basename(os.readlink(link))
        paths.append(R(work, target, "usr/share/doc", target, "copyright"))
    for p in paths:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                return corpus.licence_of_copyright(f.read())
        except OSError:
            continue
    return "unknown"


# ------------------------------------------------------------------------------------------------------- main

REAL_SENT = re.compile(r"^[\"'“„(]?[A-ZÄÖÜ0-9].*[.!?][\"'”“»)]?$")
CODE_ANY = re.compile(r"[{}<>=$|\\_#@/~*\[\]]|--|\.\w+\(|::")


def real_sentence(s, t):
    return (len(s.split()) >= 4 and len(t.split()) >= 4 and REAL_SENT.match(s) and REAL_SENT.match(t)
            and not CODE_ANY.search(s) and not CODE_ANY.search(t) and s[-1] == t[-1]
            and sum(c.isupper() for c in s) < 0.3 * len(s) and 0.8 <= len(t) / len(s) <= 1.8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--max-len", type=int, default=250, help="characters, either side")
    ap.add_argument("--n-dev", type=int, default=1000)
    ap.add_argument("--n-test", type=int, default=1500)
    ap.add_argument("--test-out", default="", help="also write the test set to PATH.{en,de}")
    ap.add_argument("--limit-files", type=int, default=0, help="debugging: at most N files per collection")
    a = ap.parse_args()
    out_dir = os.path.join(a.work, "docs")
    os.makedirs(out_dir, exist_ok=True)

    pairs = collections.OrderedDict()  # (s, t) -> collection
    coll_stats = collections.OrderedDict()
    prov = collections.OrderedDict()  # package -> [collection, files, pairs kept]
    per_coll_files = collections.Counter()
    for coll, pkgs, en, de, kind in all_sources(a.work):
        if a.limit_files and per_coll_files[coll] >= a.limit_files:
            continue
        per_coll_files[coll] += 1
        st = coll_stats.setdefault(coll, {"files": 0, "blocks_en": 0, "blocks_de": 0, "aligned_blocks": 0,
                                          "raw_pairs": 0, "kept_pairs": 0, "dropped": collections.Counter()})
        if kind == "kde":  # one handbook: its pages, paired by name
            ep, dp = kde_pages(en), kde_pages(de)
            eb, db, aligned = [], [], []
            for name in sorted(set(ep) & set(dp)):
                e1, d1 = html_blocks(name, ep[name]), html_blocks(name, dp[name])
                eb += e1
                db += d1
                aligned += align_blocks(e1, d1)
        else:
            eb, db = (man_blocks(en), man_blocks(de)) if kind == "man" else (html_blocks(en), html_blocks(de))
            aligned = align_blocks(eb, db)
        st["files"] += 1
        st["blocks_en"] += len(eb)
        st["blocks_de"] += len(db)
        st["aligned_blocks"] += len(aligned)
        for p in pkgs:
            prov.setdefault(p, [coll, 0, 0])[1] += 1
        for s0, t0 in aligned:
            for s1, t1 in block_pairs(s0, t0):
                st["raw_pairs"] += 1
                s, t = corpus.norm_space(html.unescape(s1)), corpus.norm_space(html.unescape(t1))
                if SECTION_NO.match(s) and SECTION_NO.match(t):
                    s, t = SECTION_NO.sub("", s), SECTION_NO.sub("", t)
                why = doc_keep(s, t, a.max_len)
                if why:
                    st["dropped"][why] += 1
                elif (s, t) in pairs:
                    st["dropped"]["duplicate"] += 1
                else:
                    pairs[(s, t)] = coll
                    st["kept_pairs"] += 1
                    for p in pkgs:
                        prov[p][2] += 1

    by_src = collections.OrderedDict()
    for (s, t), coll in pairs.items():
        lst = by_src.setdefault(s, [])
        if len(lst) < corpus.MAX_PER_SRC:
            lst.append((t, coll))
        else:
            coll_stats[coll]["dropped"]["per_source_cap"] += 1

    # held-out sets: round robin over the collections
    committed = corpus.read_keys([os.path.join(ROOT, "tests", "data", "en_de_general", "test.en")])
    old = corpus.read_keys(glob.glob(os.path.join(a.work, "corpus", "*.en")) +
                    [os.path.join(ROOT, "tests", "data", "en_de_test", "test.en")])
    rng = random.Random(a.seed)
    cand = collections.OrderedDict((c, []) for c in coll_stats)
    seen = set()
    for s, ts in by_src.items():
        k = corpus.normkey(s)
        t, coll = ts[0]
        if k in old or k in seen or not real_sentence(s, t):
            continue
        seen.add(k)
        cand[coll].append((s, t, k))
    for c in cand:
        rng.shuffle(cand[c])
    held, pos = [], collections.Counter()
    order = [c for c in cand if cand[c]]
    while len(held) < a.n_dev + a.n_test and order:
        for c in list(order):
            if pos[c] >= len(cand[c]):
                order.remove(c)
                continue
            held.append((cand[c][pos[c]], c))
            pos[c] += 1
            if len(held) == a.n_dev + a.n_test:
                break
    rng.shuffle(held)
    test, dev = held[:a.n_test], held[a.n_test:]
    held_keys = {h[0][2] for h in held} | committed  # and the committed test set, if drawn elsewhere
    held_keys |= corpus.read_keys([os.path.join(a.work, "corpus", "dev.en"), os.path.join(a.work, "corpus", "test.en"),
                            os.path.join(ROOT, "tests", "data", "en_de_test", "test.en")])  # stage 1's held out
    train = [(s, t) for s, ts in by_src.items() if corpus.normkey(s) not in held_keys for t, _ in ts]
    random.Random(a.seed + 1).shuffle(train)

    splits = {"train": train, "dev": [(h[0][0], h[0][1]) for h in dev], "test": [(h[0][0], h[0][1]) for h in test]}
    corpus.write_splits(out_dir, splits)
    for name, colls in (("train", [pairs[p] for p in train]), ("dev", [h[1] for h in dev]),
                        ("test", [h[1] for h in test])):
        with open(os.path.join(out_dir, f"{name}.collection"), "w", encoding="utf-8") as f:
            f.writelines(c + "\n" for c in colls)
    if a.test_out:
        os.makedirs(os.path.dirname(os.path.abspath(a.test_out)), exist_ok=True)
        for i, lang in enumerate(("en", "de")):
            with open(f"{a.test_out}.{lang}", "w", encoding="utf-8") as f:
                f.writelines(p[i] + "\n" for p in splits["test"])

    with open(os.path.join(out_dir, "provenance.tsv"), "w", encoding="utf-8") as f:
        f.write("package\tcollection\tfiles\tpairs_kept\tlicence\n")
        for pkg, (coll, nf, npairs) in sorted(prov.items()):
            f.write(f"{pkg}\t{coll}\t{nf}\t{npairs}\t{licence_of(a.work, pkg)}\n")
    train_by = collections.Counter(pairs[(s, t)] for s, t in train)
    held_by = collections.Counter(h[1] for h in test)
    dev_by = collections.Counter(h[1] for h in dev)
    for c, st in coll_stats.items():
        st["dropped"] = dict(sorted(st["dropped"].items()))
        st["train_pairs"], st["dev"], st["test"] = train_by[c], dev_by[c], held_by[c]
        st["sentence_candidates"] = len(cand[c])
    stats = {"collections": coll_stats, "unique_clean_pairs": len(pairs), "sources": len(by_src),
             "train": len(train), "dev": len(dev), "test": len(test),
             "train_en_words": sum(len(s.split()) for s, _ in train),
             "train_de_words": sum(len(t.split()) for _, t in train), "seed": a.seed, "max_len": a.max_len}
    with open(os.path.join(out_dir, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
        f.write("\n")
    rows = ["| collection | files | aligned blocks | kept pairs | train | dev | test |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c, st in sorted(coll_stats.items(), key=lambda x: -x[1]["kept_pairs"]):
        rows.append(f"| {c} | {st['files']:,} | {st['aligned_blocks']:,} | {st['kept_pairs']:,} | "
                    f"{st['train_pairs']:,} | {st['dev']} | {st['test']} |")
    rows.append(f"| **all** | {sum(s['files'] for s in coll_stats.values()):,} | "
                f"{sum(s['aligned_blocks'] for s in coll_stats.values()):,} | {len(pairs):,} | {len(train):,} | "
                f"{len(dev)} | {len(test)} |")
    with open(os.path.join(out_dir, "stats.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
