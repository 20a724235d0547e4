#!/usr/bin/env python3
"""tests/catalogs.py DAEMON MODEL_DIR

Software translation catalogues through LibreTranslate's /translate_file
(server/service/catalog.c), made and read back by translate-toolkit (the
library translators' tools are built on), against `DAEMON serve --model
MODEL_DIR` (the bundled English->German model):
  - a Qt .ts and an XLIFF 1.2 file with untranslated units, translated ones,
    notes, locations, a translate="no" unit and a source with inline markup;
  - read back: as many units, in the same order, with the same sources,
    notes and locations; a translated unit unchanged; each untranslated one
    now /translate's answer for its source, marked for review (TS
    unfinished, XLIFF needs-review-translation), every placeholder of the
    source in it; the markup unit and translate="no" left alone;
  - keptUnits counts the units left for a person;
  - the XLIFF 1.2 file, before and after, valid against OASIS's strict
    XLIFF 1.2 schema; an XLIFF 2.0 file (notes, a translated segment, a
    translate="no" unit, a unit of two segments with an ignorable between)
    translated and valid against the XLIFF 2.0 core schema (both schemas as
    Debian's php-symfony-translation ships them, tools/bootstrap.sh; read
    by lxml without network: xml.xsd from the same directory);
  - a gettext .po (comments, locations, c-format, a plural message, a
    translated message): read back the same way, the plural message's two
    forms, the header's Language and Plural-Forms for German, every
    machine-written message fuzzy, and `msgfmt --check` passes; a broken
    .po refused with libgettextpo's line and reason;
  - .po files whose strings the helper refuses, each answered 400 naming
    the line and the field before anything is translated, the daemon
    answering afterwards: an escape that makes bytes that are not UTF-8
    (msgstr "\\377", in a msgid, a msgctxt, a msgid_plural, a plural form),
    a catalogue without a header that is not ASCII; one without a header
    that is ASCII translated, with a header naming UTF-8 (msgfmt --check).
"""
import os
import re
import subprocess
import sys
import tempfile

from translate.misc.multistring import multistring
from lxml import etree
from translate.storage import po as pofile, ts2, xliff

from harness import fail, require as check  # a failed check ends the test
from lt_files import Daemon


PH = re.compile(r"%(?:\([^)]*\))?(?:\d+\$)?[-+#0']*\d*(?:\.\d+)?[hlLqjzt]*[diouxXeEfFgGaAcspn]"
                r"|%L?\d+|\{\w*\}")

UNTRANSLATED = ["Save the file before closing.", "Open the window.", "Hello %s, you have %d new "
                "messages.", "The disk is full.", "Where is the station?"]


def make_ts():
    f = ts2.tsfile()
    for i, s in enumerate(UNTRANSLATED):
        u = f.addsourceunit(s)
        u.addlocation("main.cpp:%d" % (10 + i))
        if i == 1:
            u.addnote("a button", origin="developer")
    u = f.addsourceunit("Close all tabs.")
    u.target = "Alle Reiter schließen"
    return f


def make_xliff():
    f = xliff.xlifffile(sourcelanguage="en", targetlanguage="de")
    for i, s in enumerate(UNTRANSLATED):
        u = f.addsourceunit(s)
        if i == 1:  # a note after the source: the target goes between them
            u.addnote("a button", origin="developer")
    u = f.addsourceunit("Close all tabs.")
    u.target = "Alle Reiter schließen"
    data = bytes(f).decode()
    # XLIFF 1.2, a translate="no" unit and one with inline markup
    data = data.replace('version="1.1"', 'version="1.2"').replace(
        "urn:oasis:names:tc:xliff:document:1.1", "urn:oasis:names:tc:xliff:document:1.2")
    data = data.replace("</body>", '<trans-unit id="no" translate="no"><source>ACME Inc.</source>'
                        '</trans-unit><trans-unit id="markup"><source>Click <g id="b">here</g>.'
                        "</source></trans-unit></body>")
    return data.encode()


SCHEMAS = "/usr/share/php/Symfony/Component/Translation/Resources/schemas"


class LocalXml(etree.Resolver):
    """The schemas import W3C's xml.xsd by URL or by a path of OASIS's
    distribution; both are the copy beside them."""

    def resolve(self, url, pubid, context):
        if url.endswith("/xml.xsd"):
            return self.resolve_filename(os.path.join(SCHEMAS, "xml.xsd"), context)
        return None


def schema(name):
    path = os.path.join(SCHEMAS, name)
    if not os.path.exists(path):
        fail("%s is missing: install Debian's php-symfony-translation (tools/bootstrap.sh)" % path)
    parser = etree.XMLParser(no_network=True)
    parser.resolvers.add(LocalXml())
    return etree.XMLSchema(etree.parse(path, parser))


def valid(name, xsd, data):
    doc = etree.fromstring(data)
    check(xsd.validate(doc), "%s: not valid against its schema: %s" % (name, xsd.error_log))


XLIFF2 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" trgLang="de">
  <file id="f1" original="app.json">
    <notes><note id="n1">The main window</note></notes>
    <unit id="save" name="menu.save">
      <notes><note category="location">main.c:12</note></notes>
      <segment><source>Save the file before closing.</source></segment>
    </unit>
    <unit id="close"><segment state="final"><source>Close all tabs.</source><target>Alle Reiter schließen</target></segment></unit>
    <unit id="brand" translate="no"><segment><source>ACME Inc.</source></segment></unit>
    <unit id="two">
      <segment><source>The disk is full.</source></segment>
      <ignorable><source> </source></ignorable>
      <segment><source>Where is the station?</source></segment>
    </unit>
  </file>
</xliff>
"""


def check_xliff2(dm):
    """An XLIFF 2.0 file: its segments translated, marked translated, the
    rest as it was, valid before and after."""
    xsd = schema("xliff-core-2.0.xsd")
    valid("xliff 2.0 (the test's file)", xsd, XLIFF2.encode())
    out, ans = dm.translate_file("app2.xlf", XLIFF2.encode())
    valid("xliff 2.0", xsd, out)
    ns = {"x": "urn:oasis:names:tc:xliff:document:2.0"}
    x = etree.fromstring(out)
    segs = {}
    for u in x.iterfind(".//x:unit", ns):
        segs[u.get("id")] = [(s.get("state"), s.findtext("x:target", None, ns))
                             for s in u.iterfind("x:segment", ns)]
    want = {"save": [("translated", dm.translate("Save the file before closing."))],
            "close": [("final", "Alle Reiter schließen")],
            "brand": [(None, None)],
            "two": [("translated", dm.translate("The disk is full.")),
                    ("translated", dm.translate("Where is the station?"))]}
    check(segs == want, "xliff 2.0: %r, wanted %r" % (segs, want))
    check(x.findtext(".//x:file/x:notes/x:note", None, ns) == "The main window" and
          x.find(".//x:unit[@id='save']", ns).get("name") == "menu.save" and
          x.findtext(".//x:unit[@id='save']/x:notes/x:note", None, ns) == "main.c:12",
          "xliff 2.0: notes or names changed: %r" % out)
    check(ans.get("keptUnits") == 0, "xliff 2.0: keptUnits %r" % ans.get("keptUnits"))


def make_po():
    f = pofile.pofile()
    f.updateheader(add=True, Project_Id_Version="app 1.0",
                   Content_Type="text/plain; charset=UTF-8")
    for i, s in enumerate(UNTRANSLATED):
        u = f.addsourceunit(s)
        u.addlocation("src/main.c:%d" % (10 + i))
        if i == 1:
            u.addnote("a button", origin="developer")
        if "%" in s:
            u.settypecomment("c-format")
    u = f.addsourceunit(multistring(["%d file was deleted.", "%d files were deleted."]))
    u.settypecomment("c-format")
    u.target = multistring(["", ""])
    u = f.addsourceunit("Close all tabs.")
    u.target = "Alle Reiter schließen"
    return f


def check_po(dm):
    """A .po: read back by translate-toolkit, msgfmt --check passes."""
    f = make_po()
    out, ans = dm.translate_file("app.po", bytes(f))
    after = pofile.pofile.parsestring(out)
    check_units("po", f, after, dm, lambda u: u.isfuzzy())
    check(ans.get("keptUnits") == 0, "po: keptUnits %r" % ans.get("keptUnits"))
    pl = [u for u in after.units if u.hasplural()]
    want = [dm.translate("%d file was deleted."), dm.translate("%d files were deleted.")]
    check(len(pl) == 1 and pl[0].target.strings == want and pl[0].isfuzzy(),
          "po: the plural message %r, wanted %r" % (pl and pl[0].target.strings, want))
    hdr = after.parseheader()
    check(hdr.get("Language") == "de" and hdr.get("Plural-Forms") ==
          "nplurals=2; plural=(n != 1);", "po: the header %r" % hdr)
    with tempfile.NamedTemporaryFile(suffix=".po") as t:
        t.write(out)
        t.flush()
        r = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", t.name], capture_output=True)
        check(r.returncode == 0, "po: msgfmt --check: %s" % r.stderr.decode())
    st, ans = dm.post_file("bad.po", b'msgid "x"\nmsgstr "y\nbroken\n')
    check(st == 400 and "bad.po: line " in ans.get("error", "") and "within string" in
          ans.get("error", ""), "po: a broken file: %d %r" % (st, ans))


HDR = b'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
REFUSED = [  # (name, the file, what the error starts with after "NAME: ")
    ("msgstr", HDR + b'#: a.c:1\nmsgid "Open"\nmsgstr "\\377"\n', "line 6: msgstr "),
    ("msgid", HDR + b'msgid "Op\\300\\200en"\nmsgstr ""\n', "line 4: msgid "),
    ("msgctxt", HDR + b'msgctxt "\\355\\240\\200"\nmsgid "Open"\nmsgstr ""\n', "line 4: msgctxt "),
    ("msgid_plural", HDR + b'msgid "file"\nmsgid_plural "fi\\377les"\nmsgstr[0] ""\n'
     b'msgstr[1] ""\n', "line 5: msgid_plural "),
    ("msgstr_plural", HDR + b'msgid "file"\nmsgid_plural "files"\nmsgstr[0] ""\nmsgstr[1] "\\377"\n',
     "line 7: msgstr[1] "),
    ("noheader", "# no header\nmsgid \"The café is open.\"\nmsgstr \"\"\n".encode(),
     "line 2: msgid is not ASCII"),
]


def check_po_refused(dm, exe, model):
    """Strings the helper refuses: 400 with the line, the daemon alive; and
    `transformerd translate-file` refusing the first the same way."""
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "msgstr.po"), os.path.join(d, "out.po")
        with open(src, "wb") as f:
            f.write(REFUSED[0][1])
        r = subprocess.run([exe, "translate-file", src, dst, "--source", "en", "--target", "de",
                            "--model", model, "--threads", "1"], capture_output=True,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        err = r.stderr.decode(errors="replace")
        check(r.returncode == 1 and "msgstr.po: line 6: msgstr is not valid UTF-8" in err and
              not os.path.exists(dst), "translate-file msgstr.po: exit %d: %s" % (r.returncode, err))
    for name, data, want in REFUSED:
        st, ans = dm.post_file("%s.po" % name, data)
        err = ans.get("error", "")
        check(st == 400 and ("%s.po: %s" % (name, want)) in err,
              "po: %s: %d %r, wanted 400 and %r" % (name, st, ans, want))
        dm.translate("Open the window.")  # still answering
    out, ans = dm.translate_file("plain.po", b'msgid "Open the window."\nmsgstr ""\n')
    after = pofile.pofile.parsestring(out)
    hdr = after.parseheader()
    check(hdr.get("Content-Type") == "text/plain; charset=UTF-8" and hdr.get("Language") == "de",
          "po: no header before: the header %r" % hdr)
    u = [u for u in after.units if not u.isheader()]
    check(len(u) == 1 and u[0].target == dm.translate("Open the window.") and u[0].isfuzzy(),
          "po: no header before: %r" % out)
    with tempfile.NamedTemporaryFile(suffix=".po") as t:
        t.write(out)
        t.flush()
        r = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", t.name], capture_output=True)
        check(r.returncode == 0, "po: no header before: msgfmt --check: %s" % r.stderr.decode())


def check_units(name, before, after, dm, marked):
    bu = [u for u in before.units if not u.isheader()]
    au = [u for u in after.units if not u.isheader()]
    check(len(bu) == len(au), "%s: %d units, %d before" % (name, len(au), len(bu)))
    for b, a in zip(bu, au):
        check(a.source == b.source, "%s: source %r became %r" % (name, b.source, a.source))
        check(a.getlocations() == b.getlocations(), "%s: locations of %r" % (name, b.source))
        check(a.getnotes() == b.getnotes(), "%s: notes of %r" % (name, b.source))
        if b.target or b.source in ("ACME Inc.",) or "<g" in str(b.source):
            check(a.target == b.target, "%s: %r changed to %r" % (name, b.target, a.target))
            continue
        if b.source not in UNTRANSLATED:
            continue
        want = dm.translate(b.source)
        check(sorted(PH.findall(want)) == sorted(PH.findall(b.source)),
              "%s: the model lost a placeholder of %r: %r (the test needs one that keeps them)"
              % (name, b.source, want))
        check(a.target == want, "%s: %r -> %r, /translate says %r" % (name, b.source, a.target,
                                                                   want))
        check(marked(a), "%s: %r is not marked for review" % (name, b.source))


def main():
    exe, model = sys.argv[1], sys.argv[2]
    dm = Daemon(exe, model)
    try:
        t = make_ts()
        out, ans = dm.translate_file("app_de.ts", bytes(t))
        kept = ans.get("keptUnits")
        after = ts2.tsfile.parsestring(out)
        check_units("ts", t, after, dm, lambda u: u.isfuzzy())
        check(kept == 0, "ts: keptUnits %r" % kept)
        x = make_xliff()
        xsd = schema("xliff-core-1.2-strict.xsd")
        valid("xliff 1.2 (the test's file)", xsd, x)
        out, ans = dm.translate_file("app.xlf", x)
        valid("xliff 1.2", xsd, out)
        kept = ans.get("keptUnits")
        after = xliff.xlifffile.parsestring(out)
        check_units("xliff", xliff.xlifffile.parsestring(x), after, dm,
                    lambda u: u.xmlelement.find(u.namespaced("target")).get("state") ==
                    "needs-review-translation")
        check(kept == 1, "xliff: keptUnits %r (the markup unit)" % kept)
        check(b'translate="no"' in out and b"<source>ACME Inc.</source></trans-unit>" in out,
              "xliff: the translate=\"no\" unit changed")
        check_xliff2(dm)
        check_po(dm)
        check_po_refused(dm, exe, model)
    finally:
        dm.stop()
    print("catalogs: OK: .ts, .xlf and .po read back by translate-toolkit, every untranslated "
          "unit translated and marked, the rest as it was; XLIFF 1.2 and 2.0 valid against "
          "their schemas; msgfmt --check; .po strings that are not UTF-8 (or not ASCII without a "
          "charset) refused by line and field, the daemon alive")


if __name__ == "__main__":
    main()
