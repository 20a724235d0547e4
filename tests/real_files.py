#!/usr/bin/env python3
"""tests/real_files.py DAEMON MODEL_DIR

Real files nobody here wrote (tests/data/real/, their origins and licences
in tests/data/real/SOURCES.md), each sent once through POST /translate_file
of one `DAEMON serve --model MODEL_DIR` (the bundled English->German
model), the answer checked by its structure, never by its words:
  - .html/.xhtml (lxml): the multisets of element names and of attribute
    names the same (an HTML document that declared no charset: plus the
    <meta charset="utf-8"> the answer must add; every charset an HTML
    document's answer declares utf-8), the text of every pre/code/script/
    style the same;
  - .md (markdown-it-py, CommonMark with tables): the block tokens (type,
    tag, markup: headings and their levels, lists, items, quotes, tables,
    code) the same, code blocks and fences (content and info) byte for byte;
  - .srt/.vtt: the cue count, every timing line byte for byte;
  - .ts/.xlf/.po: the unit count, each unit's source unchanged, the
    placeholders of each translation (printf %s %d %1$s, {0} {name},
    Symfony's {{ limit }}, Qt's %1 %n) the multiset of its source's,
    translate="no" units untouched, the target language set to de;
    .po: `msgfmt --check` passes on the answer;
  - .docx/.pptx/.odt/.odp: the same entries in the same order, every entry
    but the text parts byte for byte, each text part's paragraph count the
    same;
  - .epub: the same entries in the same order, every entry but the XHTML
    documents byte for byte, each XHTML document checked as an .xhtml file
    (elements, attributes, pre/code text);
  - .txt: the count of blank-line separated paragraphs the same.
Every failure is printed; the test fails on any check not listed in KNOWN
(a real file that shows a bug in the daemon, in SOURCES.md too), whose
checks are skipped for that file only.
"""
import collections
import http.client
import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import zipfile

import lxml.html
import markdown_it
from lxml import etree

from lt_files import Daemon

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "data", "real")

# (file, check): the symptom. The check is skipped for that file alone.
KNOWN = {
}

failures = []
skipped = []


def check(cond, fname, what, why=""):
    if (fname, what) in KNOWN:
        skipped.append((fname, what, bool(cond)))
        return
    if not cond:
        failures.append((fname, what, why))
        print("FAIL %s [%s] %s" % (fname, what, why[:400]))


# ---------------------------------------------------------------- HTML

CODE_TAGS = ("pre", "code", "script", "style")


def parse_html(name, data):
    if name.endswith(".xhtml"):
        return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    return lxml.html.document_fromstring(data)


def local(tag):
    """An element's or attribute's name without its namespace (lxml.html
    keeps xml:lang as it is; the XML parser writes {uri}lang)."""
    if not isinstance(tag, str):
        return None
    return tag.rsplit("}", 1)[1] if tag.startswith("{") else tag


def html_shape(root):
    els, attrs, code = collections.Counter(), collections.Counter(), []
    for el in root.iter():
        name = local(el.tag)
        if name is None:  # comments, processing instructions
            continue
        els[name] += 1
        for a in el.attrib:
            attrs[local(a)] += 1
        if name in CODE_TAGS:
            code.append((name, "".join(el.itertext())))
    return els, attrs, code


META_CHARSET = re.compile(rb"<meta\b[^>]*\bcharset\s*=\s*[\"']?\s*([-\w]+)", re.I)
HTML_DOCUMENT = re.compile(rb"<html\b|<!doctype\b", re.I)


def check_html(name, src, out):
    try:
        a, b = html_shape(parse_html(name, src)), html_shape(parse_html(name, out))
    except Exception as e:  # noqa: BLE001 - the answer must parse
        check(False, name, "parse", "the answer does not parse: %s" % e)
        return
    ea, aa = collections.Counter(a[0]), collections.Counter(a[1])
    if name.endswith((".html", ".htm")) and HTML_DOCUMENT.search(src[:1024]):
        # an HTML document is answered in UTF-8 and says so: a <meta
        # charset="utf-8"> added to one that declared no charset (the
        # only elements added), one that had a declaration set to utf-8
        declared = META_CHARSET.findall(out)
        check(declared and all(d.lower() == b"utf-8" for d in declared), name, "charset",
              "the answer's charset declarations: %r" % declared)
        if not META_CHARSET.search(src):
            ea["meta"] += 1
            aa["charset"] += 1
    check(ea == b[0], name, "elements", "elements differ: lost %s, gained %s"
          % (dict(ea - b[0]), dict(b[0] - ea)))
    check(aa == b[1], name, "attributes", "attribute names differ: lost %s, gained %s"
          % (dict(aa - b[1]), dict(b[1] - aa)))
    diff = [(x, y) for x, y in zip(a[2], b[2]) if x != y]
    check(len(a[2]) == len(b[2]) and not diff, name, "code",
          "pre/code/script/style text changed: %r" % (diff[:2],))


# ---------------------------------------------------------------- Markdown

MD = markdown_it.MarkdownIt("commonmark").enable("table")


def md_blocks(text):
    blocks, code = [], []
    for t in MD.parse(text):
        if t.type == "inline":
            continue
        blocks.append((t.type, t.tag, t.markup))
        if t.type in ("fence", "code_block"):
            code.append((t.info, t.content))
    return blocks, code


def check_md(name, src, out):
    try:
        out_text = out.decode("utf-8")
    except UnicodeDecodeError as e:
        check(False, name, "utf8", str(e))
        return
    (ba, ca), (bb, cb) = md_blocks(src.decode("utf-8")), md_blocks(out_text)
    first = next((i for i, (x, y) in enumerate(zip(ba, bb)) if x != y), min(len(ba), len(bb)))
    check(ba == bb, name, "blocks", "block structure differs (%d against %d tokens) at token %d: %r against %r"
          % (len(ba), len(bb), first, ba[first:first + 3], bb[first:first + 3]))
    diff = [(x, y) for x, y in zip(ca, cb) if x != y]
    check(len(ca) == len(cb) and not diff, name, "code",
          "code blocks changed (%d against %d): %r" % (len(ca), len(cb), diff[:1]))


# ---------------------------------------------------------------- subtitles

def sub_shape(data):
    text = data.decode("utf-8-sig").replace("\r\n", "\n")
    timings = [l for l in text.split("\n") if "-->" in l]
    cues = [b for b in re.split(r"\n\s*\n", text) if "-->" in b]
    return timings, len(cues)


def check_subs(name, src, out):
    try:
        (ta, na), (tb, nb) = sub_shape(src), sub_shape(out)
    except UnicodeDecodeError as e:
        check(False, name, "utf8", str(e))
        return
    check(na == nb, name, "cues", "%d cues, %d in the answer" % (na, nb))
    diff = [(x, y) for x, y in zip(ta, tb) if x != y]
    check(ta == tb, name, "timings", "timing lines differ (%d against %d): %r" % (len(ta), len(tb), diff[:2]))


# ---------------------------------------------------------------- catalogues

PLACEHOLDER = re.compile(r"%(?:\d+\$)?[-+ #0']*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[sdiuoxXfFeEgGcp]"
                         r"|%L?\d+|%n|\{\{\s*\w+\s*\}\}|\{\w*\}")


def placeholders(text):
    return collections.Counter(PLACEHOLDER.findall(text or ""))


def xml_text(el):
    return "" if el is None else "".join(el.itertext())


def check_ts(name, src, out):
    a = etree.fromstring(src, etree.XMLParser(resolve_entities=False, no_network=True))
    try:
        b = etree.fromstring(out, etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as e:
        check(False, name, "parse", str(e))
        return
    ma, mb = a.findall(".//message"), b.findall(".//message")
    check(len(ma) == len(mb), name, "units", "%d messages, %d in the answer" % (len(ma), len(mb)))
    check(b.get("language", "").split("_")[0] == "de", name, "language", "TS language=%r" % b.get("language"))
    bad = []
    for x, y in zip(ma, mb):
        s = xml_text(x.find("source"))
        if s != xml_text(y.find("source")):
            bad.append(("source changed", s))
            continue
        t = y.find("translation")
        forms = t.findall("numerusform") if t is not None else []
        for text in ([xml_text(f) for f in forms] if forms else [xml_text(t)]):
            if text and placeholders(text) != placeholders(s):
                bad.append((s, text))
    check(not bad, name, "placeholders", "%d units: %r" % (len(bad), bad[:2]))


XLF12 = "{urn:oasis:names:tc:xliff:document:1.2}"


def check_xlf(name, src, out):
    a = etree.fromstring(src, etree.XMLParser(resolve_entities=False, no_network=True))
    try:
        b = etree.fromstring(out, etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as e:
        check(False, name, "parse", str(e))
        return
    ua, ub = a.findall(".//%strans-unit" % XLF12), b.findall(".//%strans-unit" % XLF12)
    check(len(ua) == len(ub), name, "units", "%d units, %d in the answer" % (len(ua), len(ub)))
    langs = [f.get("target-language") for f in b.findall(".//%sfile" % XLF12)]
    check(langs and all(l and l.split("-")[0].split("_")[0] == "de" for l in langs),
          name, "language", "target-language %r" % langs)
    bad, touched = [], []
    for x, y in zip(ua, ub):
        s = xml_text(x.find(XLF12 + "source"))
        if s != xml_text(y.find(XLF12 + "source")):
            bad.append(("source changed", s))
            continue
        if x.get("translate") == "no":
            if etree.tostring(x) != etree.tostring(y):
                touched.append(x.get("id"))
            continue
        t = xml_text(y.find(XLF12 + "target"))
        if t and placeholders(t) != placeholders(s):
            bad.append((s, t))
    check(not bad, name, "placeholders", "%d units: %r" % (len(bad), bad[:2]))
    check(not touched, name, "translate-no", "translate=\"no\" units changed: %r" % touched)


def po_unquote(s):
    s = s.strip()
    assert s.startswith('"') and s.endswith('"'), s
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), s[1:-1])


def po_entries(text):
    """(msgctxt, msgid, msgid_plural, [msgstr...], is_header) for each live entry."""
    entries = []
    for block in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")):
        fields, key = {}, None
        for line in block.split("\n"):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r'(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(".*")$', line)
            if m:
                key = m.group(1)
                fields[key] = po_unquote(m.group(2))
            elif line.startswith('"') and key:
                fields[key] += po_unquote(line)
        if "msgid" not in fields:
            continue
        strs = [v for k, v in sorted(fields.items()) if k.startswith("msgstr")]
        entries.append((fields.get("msgctxt"), fields["msgid"], fields.get("msgid_plural"), strs,
                        fields["msgid"] == "" and fields.get("msgctxt") is None))
    return entries


def po_charset(data):
    m = re.search(rb"charset=([-\w]+)", data)
    cs = m.group(1).decode() if m else "utf-8"
    return "utf-8" if cs.upper() == "CHARSET" else cs


def check_po(name, src, out):
    with tempfile.NamedTemporaryFile(suffix=".po") as t:
        t.write(out)
        t.flush()
        r = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", t.name], capture_output=True)
    check(r.returncode == 0, name, "msgfmt", "msgfmt --check: %s" % r.stderr.decode(errors="replace")[:400])
    ea = po_entries(src.decode(po_charset(src), errors="replace"))
    eb = po_entries(out.decode(po_charset(out), errors="replace"))
    ua, ub = [e for e in ea if not e[4]], [e for e in eb if not e[4]]
    check(len(ua) == len(ub), name, "units", "%d entries, %d in the answer" % (len(ua), len(ub)))
    header = [e for e in eb if e[4]]
    lang = re.search(r"^Language:\s*(\S*)", header[0][3][0] if header and header[0][3] else "", re.M)
    check(lang and lang.group(1).split("_")[0] == "de", name, "language",
          "the header's Language: %r" % (lang.group(1) if lang else None))
    bad = []
    for x, y in zip(ua, ub):
        if (x[0], x[1], x[2]) != (y[0], y[1], y[2]):
            bad.append(("msgid changed", x[1], y[1]))
            continue
        for i, s in enumerate(y[3]):
            want = x[1] if i == 0 or x[2] is None else x[2]
            if s and placeholders(s) != placeholders(want):
                bad.append((want, s))
    check(not bad, name, "placeholders", "%d entries: %r" % (len(bad), bad[:2]))


# ---------------------------------------------------------------- office

TEXT_PARTS = {
    ".docx": (re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments\w*)\.xml$"), b"<w:p[ >/]"),
    ".pptx": (re.compile(r"ppt/(slides|notesSlides|slideLayouts|slideMasters|notesMasters|handoutMasters)/[^/]+\.xml$"),
              b"<a:p[ >/]"),
    ".odt": (re.compile(r"(content|styles)\.xml$"), b"<text:[ph][ >/]"),
    ".odp": (re.compile(r"(content|styles)\.xml$"), b"<text:[ph][ >/]"),
}


def check_office(name, src, out, ext):
    try:
        a, b = zipfile.ZipFile(io.BytesIO(src)), zipfile.ZipFile(io.BytesIO(out))
    except zipfile.BadZipFile as e:
        check(False, name, "zip", str(e))
        return
    na, nb = [i.filename for i in a.infolist()], [i.filename for i in b.infolist()]
    check(na == nb, name, "entries", "entries differ: lost %s, gained %s"
          % (sorted(set(na) - set(nb)), sorted(set(nb) - set(na))))
    parts, para = TEXT_PARTS[ext]
    changed, counts = [], []
    for n in na:
        if n not in nb:
            continue
        x, y = a.read(n), b.read(n)
        if parts.match(n):
            cx, cy = len(re.findall(para, x)), len(re.findall(para, y))
            if cx != cy:
                counts.append((n, cx, cy))
        elif x != y:
            changed.append(n)
    check(not changed, name, "verbatim", "entries other than the text parts changed: %s" % changed)
    check(not counts, name, "paragraphs", "paragraph counts differ (part, before, after): %s" % counts)


def check_epub(name, src, out):
    try:
        a, b = zipfile.ZipFile(io.BytesIO(src)), zipfile.ZipFile(io.BytesIO(out))
    except zipfile.BadZipFile as e:
        check(False, name, "zip", str(e))
        return
    na, nb = [i.filename for i in a.infolist()], [i.filename for i in b.infolist()]
    check(na == nb, name, "entries", "entries differ: lost %s, gained %s"
          % (sorted(set(na) - set(nb)), sorted(set(nb) - set(na))))
    changed, documents = [], 0
    for n in na:
        if n not in nb:
            continue
        x, y = a.read(n), b.read(n)
        if re.search(r"\.x?html?$", n, re.I):
            documents += 1
            # read as XHTML whatever the entry's extension says
            check_html("%s:%s%s" % (name, n, "" if n.endswith(".xhtml") else " .xhtml"), x, y)
        elif x != y:
            changed.append(n)
    check(documents > 0, name, "documents", "no XHTML document in the book")
    check(not changed, name, "verbatim", "entries other than the XHTML documents changed: %s" % changed)


# ---------------------------------------------------------------- .txt

def check_txt(name, src, out):
    def paras(d):
        return len([p for p in re.split(r"\n[ \t]*\n", d.decode("utf-8").replace("\r\n", "\n")) if p.strip()])
    try:
        pa, pb = paras(src), paras(out)
    except UnicodeDecodeError as e:
        check(False, name, "utf8", str(e))
        return
    check(pa == pb, name, "paragraphs", "%d paragraphs, %d in the answer" % (pa, pb))


def check_file(name, src, out):
    ext = os.path.splitext(name)[1].lower()
    if ext in (".html", ".xhtml", ".htm"):
        check_html(name, src, out)
    elif ext == ".md":
        check_md(name, src, out)
    elif ext in (".srt", ".vtt"):
        check_subs(name, src, out)
    elif ext == ".ts":
        check_ts(name, src, out)
    elif ext in (".xlf", ".xliff"):
        check_xlf(name, src, out)
    elif ext == ".po":
        check_po(name, src, out)
    elif ext == ".epub":
        check_epub(name, src, out)
    elif ext in TEXT_PARTS:
        check_office(name, src, out, ext)
    elif ext == ".txt":
        check_txt(name, src, out)
    else:
        check(False, name, "format", "no check for %s" % ext)


ANSWER_S = 60  # the largest file here (the EPUB) takes about 12 s on 2 shared cores


def request(dm, method, path, body=None, headers=None):
    """(status, body), or (None, None) when no answer comes in ANSWER_S."""
    c = http.client.HTTPConnection("127.0.0.1", dm.port, timeout=ANSWER_S)
    try:
        c.request(method, path, body, headers or {})
        r = c.getresponse()
        return r.status, r.read()
    except (TimeoutError, socket.timeout):
        return None, None
    finally:
        c.close()


def translate(dm, name, data):
    b = "XyZzYreal"
    body = ("--%s\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nde\r\n"
            "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n\r\n"
            % (b, b, b, os.path.basename(name))).encode() + data + ("\r\n--%s--\r\n" % b).encode()
    st, ans = request(dm, "POST", "/translate_file", body, {"Content-Type": "multipart/form-data; boundary=" + b})
    if st is None:
        return None, "no answer in %d s" % ANSWER_S
    if st != 200:
        return None, "POST /translate_file: %d %s" % (st, ans[:300])
    url = json.loads(ans)["translatedFileUrl"]
    st, out = request(dm, "GET", url[url.index("/download_file/"):])
    if st != 200:
        return None, "the download: %d" % st
    return out, None


def main():
    exe, model = sys.argv[1], sys.argv[2]
    files = sorted(os.path.join(d, f) for d in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, d))
                   for f in os.listdir(os.path.join(CORPUS, d)))
    check(len(files) >= 60, "corpus", "size", "only %d files" % len(files))
    started = time.time()
    dm = Daemon(exe, model)
    try:
        per_format = collections.Counter()
        for rel in files:
            data = open(os.path.join(CORPUS, rel), "rb").read()
            t0 = time.time()
            out, why = translate(dm, rel, data)
            if out is None and why.startswith("no answer"):
                # a daemon that hangs: the file again on a fresh one (its
                # cache empty), the rest of the corpus on that one
                check(False, rel, "answer", why + " from the daemon that translated the files before it")
                dm.kill()
                dm = Daemon(exe, model)
                out, why = translate(dm, rel, data)
            check(out is not None, rel, "translate", why or "")
            if out is not None:
                check_file(rel, data, out)
            per_format[os.path.splitext(rel)[1]] += 1
            print("     %-60s %6d bytes %5.1f s" % (rel, len(data), time.time() - t0))
    finally:
        dm.stop()
    print("%d files (%s) in %.1f s" % (len(files), ", ".join("%s %d" % kv for kv in sorted(per_format.items())),
                                       time.time() - started))
    for f, what, ok in skipped:
        print("known %s [%s]%s: %s" % (f, what, " (passes now: take it out of KNOWN)" if ok else "",
                                       KNOWN[(f, what)]))
    stale = [k for k in KNOWN if k[0] not in files]
    check(not stale, "KNOWN", "stale", "KNOWN names files not in the corpus: %s" % stale)
    if failures:
        print("real_files: FAIL: %d checks failed" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("real_files: ok")


if __name__ == "__main__":
    main()
