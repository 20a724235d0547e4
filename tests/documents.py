#!/usr/bin/env python3
"""tests/documents.py DAEMON MODEL_DIR

Documents through LibreTranslate's /translate_file (server/service/office.c,
spans.c), made and read back by the libraries their users' tools use
(python-docx, python-pptx, odfpy; an EPUB by zipfile and lxml), against
`DAEMON serve --model MODEL_DIR` (the bundled English->German model):
  - .docx: a heading, "Save the **file** before closing." (the bold run on
    "Datei" alone), an italic word, a line break (each side translated
    alone, the break kept), a table, a header, a picture: every paragraph's
    text is /translate's answer for its text, styles and the picture kept;
  - .pptx: a title, a body with a bold word, speaker notes;
  - .odt: a heading, a paragraph with a bold span (its style kept); .odp:
    a page with a text box of two paragraphs, one with a bold span;
  - .epub: an XHTML chapter with <b>, a link, <br/>, a list; mimetype first
    and stored; "the <b>file</b> <i>manager</i>" translated as one word
    (italic) and the bold counted in lostSpans;
  - .md (markdown-it-py reads the answer): front matter, a code block, a
    GFM table, a setext underline, list and quote markers kept; heading,
    paragraph, list items and quote translated; **bold** and *italic* on
    their words, the link's URL and title, a code span verbatim;
  - .md with lines ended by CR, LF, CRLF and mixed, and a NUL: each
    paragraph's translation in its own place, the line endings kept, and
    the same bytes from `transformerd translate-file`;
  - .xhtml: the EPUB's chapter alone, the bold word and the link;
  - .html (lxml.html reads the answer): a document's doctype, <style> and
    <script> byte for byte, its title, text straight in <body>, a <div>
    with a picture, a list item translated as /translate does, the bold
    word on "Datei", attributes kept; a fragment stays a fragment;
  - every entry that holds no text comes back byte for byte, in order,
    compressed as it was (a stored picture stays stored);
  - refused with 400 naming the file: not a zip, a docx without its
    document, XML that is not well-formed, a part that inflates past the
    bound (a zip bomb: 100 MB of spaces in 100 kB), a part that inflates
    past the size its headers declare, more than 10,000 entries, a Markdown
    file that is not UTF-8;
  - `transformerd translate-file IN OUT`: the .docx's translation is the
    API's, byte for byte; a broken file exits 1 with the reason and writes
    nothing.
"""
import io
import os
import re
import struct
import subprocess
import sys
import tempfile
import zipfile

import docx
import lxml.html
import markdown_it
import pptx
from lxml import etree
from odf import teletype
from odf.draw import Frame, Page, TextBox
from odf.opendocument import OpenDocumentPresentation, OpenDocumentText, load
from odf.style import MasterPage, PageLayout, PageLayoutProperties, Style, TextProperties
from odf.text import H, P, Span
from PIL import Image

from harness import fail, require as check  # a failed check ends the test
from lt_files import Daemon

SAVE = "Save the file before closing."
DOCX = []  # check_docx's document and its translation, for the command line's


def same_entries(name, before, after, translated):
    """Entries in the same order; those not translated byte for byte."""
    a, b = zipfile.ZipFile(io.BytesIO(before)), zipfile.ZipFile(io.BytesIO(after))
    check([i.filename for i in a.infolist()] == [i.filename for i in b.infolist()],
          "%s: the entries changed: %s" % (name, [i.filename for i in b.infolist()]))
    for i in a.infolist():
        j = b.getinfo(i.filename)
        if i.filename not in translated:
            check(a.read(i) == b.read(j) and (i.compress_type, i.compress_size, i.CRC) ==
                  (j.compress_type, j.compress_size, j.CRC),
                  "%s: %s changed (its bytes, or how it is compressed)" % (name, i.filename))
    return b


def check_docx(dm):
    d = docx.Document()
    d.add_heading("Installing the package", level=1)
    # the bold run holds the space before its word: the plain run's copy
    # must say xml:space="preserve" for the space it ends with now
    p = d.add_paragraph("Save the")
    p.add_run(" file").bold = True
    p.add_run(" before closing.")
    p = d.add_paragraph("Click the ")
    p.add_run("Open").italic = True
    p.add_run(" button to open a new window.")
    p = d.add_paragraph()
    r = p.add_run("Good morning")
    r.add_break()
    r.add_text("Where is the station?")
    t = d.add_table(rows=1, cols=2)
    t.cell(0, 0).text = "Hello world"
    t.cell(0, 1).text = "The disk is full."
    png = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 30, 30)).save(png, "PNG")
    d.add_paragraph().add_run().add_picture(io.BytesIO(png.getvalue()))
    d.sections[0].header.paragraphs[0].text = "The user guide"
    src = io.BytesIO()
    d.save(src)
    out, ans = dm.translate_file("guide.docx", src.getvalue())
    check(ans.get("lostSpans") == 0, "docx: lostSpans %r" % ans.get("lostSpans"))
    same_entries("docx", src.getvalue(), out, {"word/document.xml", "word/header1.xml"})
    e = docx.Document(io.BytesIO(out))
    before = docx.Document(io.BytesIO(src.getvalue()))
    check([p.style.name for p in e.paragraphs] == [p.style.name for p in before.paragraphs],
          "docx: paragraph styles %s" % [p.style.name for p in e.paragraphs])
    texts = [p.text for p in e.paragraphs]
    check(texts[0] == dm.translate("Installing the package"), "docx: heading %r" % texts[0])
    check(texts[1] == dm.translate(SAVE), "docx: %r is not /translate's" % texts[1])
    bold = [r.text.strip() for r in e.paragraphs[1].runs if r.bold]
    check(bold == ["Datei"], "docx: the bold runs are %r, not ['Datei']" % bold)
    check(not e.paragraphs[1].runs[0].bold, "docx: the paragraph starts bold")
    ital = [r.text for r in e.paragraphs[2].runs if r.italic]
    check(len(ital) == 1 and "Öffnen" in ital[0] and len(ital[0].split()) <= 2,
          "docx: the italic runs are %r" % ital)
    check(texts[2] == dm.translate("Click the Open button to open a new window."),
          "docx: %r" % texts[2])
    halves = texts[3].split("\n")
    check(halves == [dm.translate("Good morning"), dm.translate("Where is the station?")],
          "docx: the line break's sides %r" % halves)
    cells = [c.text for c in e.tables[0].rows[0].cells]
    check(cells == [dm.translate("Hello world"), dm.translate("The disk is full.")],
          "docx: the table %r" % cells)
    head = e.sections[0].header.paragraphs[0].text
    check(head == dm.translate("The user guide"), "docx: the header %r" % head)
    check(len(e.inline_shapes) == 1, "docx: the picture is gone")
    DOCX[:] = [src.getvalue(), out]
    # Word drops a w:t's edge spaces unless it says to keep them
    W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}t"
    body = etree.fromstring(zipfile.ZipFile(io.BytesIO(out)).read("word/document.xml"))
    edged = [t for t in body.iter(W) if t.text and t.text != t.text.strip()]
    check(edged and all(t.get("{http://www.w3.org/XML/1998/namespace}space") == "preserve"
                        for t in edged), "docx: a w:t with edge spaces lacks xml:space")


def check_pptx(dm):
    prs = pptx.Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Installing the package"
    p = s.placeholders[1].text_frame.paragraphs[0]
    for text, bold in (("Save the ", False), ("file", True), (" before closing.", False)):
        r = p.add_run()
        r.text = text
        r.font.bold = bold or None
    s.notes_slide.notes_text_frame.text = "Please read the manual."
    src = io.BytesIO()
    prs.save(src)
    out, ans = dm.translate_file("talk.pptx", src.getvalue())
    same_entries("pptx", src.getvalue(), out,
                 {"ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml"})
    e = pptx.Presentation(io.BytesIO(out))
    sl = e.slides[0]
    check(len(sl.shapes) == len(prs.slides[0].shapes), "pptx: shapes lost")
    check(sl.shapes.title.text == dm.translate("Installing the package"),
          "pptx: title %r" % sl.shapes.title.text)
    body = sl.placeholders[1].text_frame.paragraphs[0]
    check(body.text == dm.translate(SAVE), "pptx: body %r" % body.text)
    bold = [r.text for r in body.runs if r.font.bold]
    check(bold == ["Datei"], "pptx: the bold runs are %r" % bold)
    notes = sl.notes_slide.notes_text_frame.text
    check(notes == dm.translate("Please read the manual."), "pptx: notes %r" % notes)


def check_odt(dm):
    doc = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    doc.text.addElement(H(outlinelevel=1, text="Installing the package"))
    p = P(text="Save the ")
    p.addElement(Span(stylename=bold, text="file"))
    p.addText(" before closing.")
    doc.text.addElement(p)
    src = io.BytesIO()
    doc.write(src)
    out, ans = dm.translate_file("notes.odt", src.getvalue())
    b = same_entries("odt", src.getvalue(), out, {"content.xml"})
    first = b.infolist()[0]
    check(first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED,
          "odt: mimetype is not first and stored")
    e = load(io.BytesIO(out))
    hs = [teletype.extractText(h) for h in e.getElementsByType(H)]
    ps = [teletype.extractText(x) for x in e.getElementsByType(P)]
    check(hs == [dm.translate("Installing the package")], "odt: heading %r" % hs)
    check(ps == [dm.translate(SAVE)], "odt: paragraph %r" % ps)
    spans = [(s.getAttribute("stylename"), teletype.extractText(s))
             for s in e.getElementsByType(Span)]
    check(spans == [("Bold", "Datei")], "odt: spans %r" % spans)


def check_odp(dm):
    doc = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    layout.addElement(PageLayoutProperties(pagewidth="800pt", pageheight="600pt"))
    doc.automaticstyles.addElement(layout)
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    master = MasterPage(name="Master", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    page = Page(masterpagename=master, name="one")
    doc.presentation.addElement(page)
    frame = Frame(width="600pt", height="100pt", x="50pt", y="50pt")
    page.addElement(frame)
    box = TextBox()
    frame.addElement(box)
    p = P(text="Save the ")
    p.addElement(Span(stylename=bold, text="file"))
    p.addText(" before closing.")
    box.addElement(p)
    box.addElement(P(text="Please read the manual."))
    src = io.BytesIO()
    doc.write(src)
    out, ans = dm.translate_file("slides.odp", src.getvalue())
    same_entries("odp", src.getvalue(), out, {"content.xml"})
    e = load(io.BytesIO(out))
    ps = [teletype.extractText(x) for x in e.getElementsByType(P)]
    check(ps == [dm.translate(SAVE), dm.translate("Please read the manual.")], "odp: %r" % ps)
    spans = [(s.getAttribute("stylename"), teletype.extractText(s))
             for s in e.getElementsByType(Span)]
    check(spans == [("Bold", "Datei")], "odp: spans %r" % spans)
    check(len(e.getElementsByType(Frame)) == 1 and len(e.getElementsByType(Page)) == 1,
          "odp: the page or its frame is gone")


XHTML = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" lang="en">
<head><title>The user guide</title></head>
<body><h1>Installing the package</h1><p>Save the <b>file</b> before closing.</p>
<p>Please read the <a href="#manual">manual</a>.<br/>Hello world</p>
<ul><li>Good morning</li></ul><img src="a.png" alt=""/>
<p>Open the <b>file</b> <i>manager</i> now.</p></body></html>"""

CSS = "".join("p.c%d { margin: %dpx %dpx; color: #%06x; }\n" % (i, i % 7, i % 5, i * 2654435 % 16777216)
              for i in range(300))


def make_epub():
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as f:
        f.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        f.writestr("META-INF/container.xml",
                   '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                   'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/'
                   'content.opf" media-type="application/oebps-package+xml"/></rootfiles>'
                   '</container>', zipfile.ZIP_DEFLATED)
        f.writestr("OEBPS/content.opf", "<package/>", zipfile.ZIP_DEFLATED)
        f.writestr("OEBPS/ch1.xhtml", XHTML, zipfile.ZIP_DEFLATED)
        png = io.BytesIO()
        Image.new("RGB", (8, 8), (0, 90, 200)).save(png, "PNG")
        f.writestr("OEBPS/a.png", png.getvalue(), zipfile.ZIP_STORED)
        # deflated at level 1: compressed again (at libzip's level) it
        # would differ
        f.writestr("OEBPS/style.css", CSS, zipfile.ZIP_DEFLATED, 1)
    return z.getvalue()


def check_epub(dm):
    src = make_epub()
    out, ans = dm.translate_file("book.epub", src)
    b = same_entries("epub", src, out, {"OEBPS/ch1.xhtml"})
    first = b.infolist()[0]
    check(first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED,
          "epub: mimetype is not first and stored")
    ns = {"h": "http://www.w3.org/1999/xhtml"}
    x = etree.fromstring(b.read("OEBPS/ch1.xhtml"))
    text = lambda e: "".join(e.itertext())
    check(text(x.find(".//h:title", ns)) == dm.translate("The user guide"), "epub: title")
    ps = x.findall(".//h:p", ns)
    check(text(ps[0]) == dm.translate(SAVE), "epub: %r" % text(ps[0]))
    check([text(e) for e in ps[0].findall("h:b", ns)] == ["Datei"],
          "epub: <b> holds %r" % [text(e) for e in ps[0].findall("h:b", ns)])
    a = ps[1].find("h:a", ns)
    check(a is not None and a.get("href") == "#manual" and "Handbuch" in text(a),
          "epub: the link %r" % (None if a is None else etree.tostring(a)))
    check(ps[1].find("h:br", ns) is not None and text(ps[1]).endswith(dm.translate("Hello world")),
          "epub: the line break's side %r" % text(ps[1]))
    li = x.find(".//h:li", ns)
    check(text(li) == dm.translate("Good morning"), "epub: list item %r" % text(li))
    check(x.find(".//h:img", ns) is not None, "epub: the image is gone")
    # "file manager" becomes one word, "Dateiverwaltung": italic takes it
    # (linked both ways with "manager"), bold finds no word and is counted
    last = ps[-1]
    ital = [text(e) for e in last.findall("h:i", ns)]
    check(len(ital) == 1 and "Dateiverwaltung" in ital[0] and not last.findall("h:b", ns),
          "epub: %r" % etree.tostring(last))
    check(ans.get("lostSpans") == 1, "epub: lostSpans %r, not 1" % ans.get("lostSpans"))


MD = """---
title: The user guide
---

# Installing the package

Save the **file** before closing.
Click the *Open* button to open a new window.

> Please read the [manual](https://example.org/manual "The manual").

- Run `make install` to install the program.
- Hello world

Press <kbd>Enter</kbd> to see ![the logo](logo.png) here.

```sh
make install
```

Good morning
============

| a | b |
|---|---|
| Hello | world |
"""


def check_markdown(dm):
    out, ans = dm.translate_file("guide.md", MD.encode())
    text = out.decode()
    kept = ["---\ntitle: The user guide\n---\n", "```sh\nmake install\n```\n",
            "\n============\n", "| a | b |\n|---|---|\n| Hello | world |\n", "\n> ", "\n- "]
    for k in kept:
        check(k in text, "md: %r is not kept in %r" % (k, text))
    html = markdown_it.MarkdownIt().render(text)
    x = etree.fromstring("<r>" + html + "</r>")
    h1 = "".join(x.find("h1").itertext())
    check(h1 == dm.translate("Installing the package"), "md: heading %r" % h1)
    p = x.find("p")
    plain = "".join(p.itertext()).replace("\n", " ")
    want = dm.translate("Save the file before closing. Click the Open button to open a new window.")
    check(plain == want, "md: %r, /translate says %r" % (plain, want))
    check([e.text for e in p.findall("strong")] == ["Datei"] and
          [e.text for e in p.findall("em")] == ["Öffnen"], "md: %r" % etree.tostring(p))
    a = x.find("blockquote/p/a")
    check(a is not None and a.get("href") == "https://example.org/manual" and
          a.get("title") == "The manual", "md: the link %r" % html)
    li = x.findall("ul/li")
    check(len(li) == 2 and li[0].find("code").text == "make install" and
          "".join(li[1].itertext()) == dm.translate("Hello world"), "md: the list %r" % html)
    # each tag of inline HTML is an object of its own, placed by its word
    check(re.search(r"<kbd>[^<]+</kbd>", text) and "![the logo](logo.png)" in text,
          "md: inline HTML or an image changed: %r" % text)
    check(x.find("h1") is not None and len(x.findall("h1")) == 2 and
          "".join(x.findall("h1")[1].itertext()) == dm.translate("Good morning"),
          "md: the setext heading %r" % html)


# Lines ended by CR, LF, CRLF, mixed, and a NUL (cmark reads U+FFFD): the
# positions cmark gives are its lines' (a file of this kind crashed the
# daemon: a copy of a negative length).
MD_LINES = [b"# Installing the package\r\n\rSave the file before closing.\r\r"
            b"Hello world\n\r\nGood morning\r\r\nThe \x00 sign\r", None]


def check_markdown_lines(dm):
    out, _ = dm.translate_file("lines.md", MD_LINES[0])
    MD_LINES[1] = out
    t = dm.translate
    want = ("# %s\r\n\r%s\r\r%s\n\r\n%s\r\r\n" % (
        t("Installing the package"), t("Save the file before closing."), t("Hello world"),
        t("Good morning"))).encode()
    rest = out[len(want):]
    check(out.startswith(want) and rest.endswith(b"\r") and b"\n" not in rest and
          rest.count(b"\r") == 1, "md lines: %r, want %r then one paragraph" % (out, want))


def check_xhtml(dm):
    """An XHTML file alone: the EPUB's chapter, paragraphs and inline markup."""
    out, ans = dm.translate_file("page.xhtml", XHTML.encode())
    ns = {"h": "http://www.w3.org/1999/xhtml"}
    x = etree.fromstring(out)
    p = x.find(".//h:p", ns)
    check("".join(p.itertext()) == dm.translate(SAVE) and
          ["".join(e.itertext()) for e in p.findall("h:b", ns)] == ["Datei"],
          "xhtml: %r" % etree.tostring(p))
    check(x.find(".//h:a", ns).get("href") == "#manual", "xhtml: the link")


HTML = ('<!DOCTYPE html>\n<html lang="en"><head><title>Hello world</title>'
        '<style>p { color: red }</style><script>var s = "Hello world";</script></head>\n'
        '<body>Good morning\n<p class="note">Save the <b>file</b> before closing.</p>\n'
        '<div>Open the window. <img src="logo.png" alt="the logo"> Close the door.</div>\n'
        '<ul><li>Hello world</li></ul></body></html>\n')


def check_html(dm):
    """An .html file through the same paragraphs as XHTML: whole sentences
    with their inline markup, text outside any <p> too, script and style
    untouched."""
    out, ans = dm.translate_file("page.html", HTML.encode())
    text = out.decode()
    check(text.startswith("<!DOCTYPE html>") and
          '<style>p { color: red }</style><script>var s = "Hello world";</script>' in text,
          "html: the doctype, style or script changed: %r" % text)
    x = lxml.html.document_fromstring(text)
    check(x.findtext("head/title") == dm.translate("Hello world"), "html: the title %r" % text)
    body = x.find("body")
    check(body.text.strip() == dm.translate("Good morning"), "html: the body's own text %r" % text)
    p = body.find("p")
    check(p.get("class") == "note" and p.text_content() == dm.translate(SAVE) and
          [b.text_content() for b in p.findall("b")] == ["Datei"], "html: %r" % text)
    div = body.find("div")
    img = div.find("img")
    words = " ".join(div.text_content().split())
    check(img is not None and img.get("src") == "logo.png" and img.get("alt") == "the logo" and
          words == dm.translate("Open the window. Close the door."), "html: the div %r" % text)
    check(body.find("ul/li").text_content() == dm.translate("Hello world"),
          "html: the list %r" % text)
    check(ans.get("lostSpans") == 0, "html: %r" % ans)
    out, _ = dm.translate_file("frag.htm", b"Save the <b>file</b> before closing.")
    frag = out.decode()
    b = lxml.html.fragment_fromstring(frag, create_parent="div")
    check(not frag.lstrip().startswith("<") and b.text_content() == dm.translate(SAVE) and
          [e.text for e in b.findall("b")] == ["Datei"], "htm fragment: %r" % frag)


def refused(dm, name, data, words):
    st, ans = dm.post_file(name, data)
    msg = ans.get("error", "")
    check(st == 400 and name in msg and all(w in msg for w in words),
          "%s: %d %r (wanted 400 naming the file and %r)" % (name, st, ans, words))


def zipped(entries):
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as f:
        for name, data in entries:
            f.writestr(name, data)
    return z.getvalue()


def liar():
    """A .docx whose document inflates past the size its headers declare."""
    doc = (b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
           b'<w:body><w:p><w:r><w:t>' + b"Hello world. " * 200 +
           b"</w:t></w:r></w:p></w:body></w:document>")
    b = bytearray(zipped([("word/document.xml", doc)]))
    lh, cd = b.index(b"PK\x03\x04"), b.index(b"PK\x01\x02")
    for at in (lh + 22, cd + 24):  # the uncompressed size, local and central
        check(struct.unpack_from("<I", b, at)[0] == len(doc), "liar: no size at %d" % at)
        struct.pack_into("<I", b, at, 100)
    return bytes(b)


def check_refused(dm):
    refused(dm, "junk.docx", b"this is no zip archive" * 10, ["not a zip archive"])
    refused(dm, "empty.docx", zipped([("[Content_Types].xml", "<Types/>")]),
            ["no word/document.xml"])
    refused(dm, "broken.odt", zipped([("mimetype", "application/vnd.oasis.opendocument.text"),
                                      ("content.xml", "<office:document-content><text:p>")]),
            ["content.xml", "not well-formed"])
    bomb = zipped([("word/document.xml", b" " * (100 << 20))])
    check(len(bomb) < 200 << 10, "the bomb is %d bytes" % len(bomb))
    refused(dm, "bomb.docx", bomb, ["word/document.xml", "expands to"])
    refused(dm, "liar.docx", liar(), ["word/document.xml", "does not match its declared size"])
    st, ans = dm.post_file("latin1.md", "Grüße aus Köln".encode("latin-1"))
    check(st == 400 and "file is not valid UTF-8" in ans.get("error", ""),
          "latin1.md: %d %r" % (st, ans))
    many = zipped([("e%d" % i, b"") for i in range(10001)])
    refused(dm, "many.docx", many, ["10001 entries", "the limit is 10000"])


def check_cli(exe, model):
    """transformerd translate-file: the API's bytes, and a refusal that
    writes nothing."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "guide.docx"), os.path.join(d, "guide.de.docx")
        with open(src, "wb") as f:
            f.write(DOCX[0])
        args = ["--model", model, "--source", "en", "--target", "de", "--threads", "1",
                "--workers", "1"]
        r = subprocess.run(["setpriv", "--pdeathsig", "KILL", exe, "translate-file", src, out] +
                           args, capture_output=True, timeout=300)
        check(r.returncode == 0, "translate-file: exit %d: %s" % (r.returncode, r.stderr))
        with open(out, "rb") as f:
            check(f.read() == DOCX[1], "translate-file: not the API's bytes")
        with open(src, "wb") as f:
            f.write(liar())
        bad = os.path.join(d, "bad.docx")
        r = subprocess.run(["setpriv", "--pdeathsig", "KILL", exe, "translate-file", src, bad] +
                           args, capture_output=True, timeout=300)
        check(r.returncode == 1 and b"does not match its declared size" in r.stderr and
              not os.listdir(d) == [] and not os.path.exists(bad),
              "translate-file of a broken file: exit %d, %s" % (r.returncode, r.stderr))
        check(sorted(os.listdir(d)) == ["guide.de.docx", "guide.docx"],
              "translate-file left %s" % os.listdir(d))
        src, out = os.path.join(d, "lines.md"), os.path.join(d, "lines.de.md")
        with open(src, "wb") as f:
            f.write(MD_LINES[0])
        r = subprocess.run(["setpriv", "--pdeathsig", "KILL", exe, "translate-file", src, out] +
                           args, capture_output=True, timeout=300)
        check(r.returncode == 0, "translate-file lines.md: exit %d: %s" % (r.returncode, r.stderr))
        with open(out, "rb") as f:
            check(f.read() == MD_LINES[1], "translate-file lines.md: not the API's bytes")


def main():
    exe, model = sys.argv[1], sys.argv[2]
    dm = Daemon(exe, model)
    try:
        check_docx(dm)
        check_pptx(dm)
        check_odt(dm)
        check_odp(dm)
        check_epub(dm)
        check_markdown(dm)
        check_markdown_lines(dm)
        check_xhtml(dm)
        check_html(dm)
        check_refused(dm)
        check_cli(exe, model)
        st, _ = dm.request("GET", "/health")
        check(st == 200, "the daemon is not healthy after the refusals")
    finally:
        dm.stop()
    print("documents: ok (docx, pptx, odt, odp, epub, md, xhtml, html; 7 refusals; "
          "translate-file)")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # a library's error is the test's failure
        fail("%s: %s" % (type(e).__name__, e))
