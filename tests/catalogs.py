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
  - keptUnits counts the units left for a person.
"""
import re
import sys

from translate.storage import ts2, xliff

from lt_files import Daemon, check, fail


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
    for s in UNTRANSLATED:
        f.addsourceunit(s)
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
        out, ans = dm.translate_file("app.xlf", x)
        kept = ans.get("keptUnits")
        after = xliff.xlifffile.parsestring(out)
        check_units("xliff", xliff.xlifffile.parsestring(x), after, dm,
                    lambda u: u.xmlelement.find(u.namespaced("target")).get("state") ==
                    "needs-review-translation")
        check(kept == 1, "xliff: keptUnits %r (the markup unit)" % kept)
        check(b'translate="no"' in out and b"<source>ACME Inc.</source></trans-unit>" in out,
              "xliff: the translate=\"no\" unit changed")
    finally:
        dm.stop()
    print("catalogs: OK: .ts and .xlf read back by translate-toolkit, every untranslated unit "
          "translated and marked, the rest as it was")


if __name__ == "__main__":
    main()
