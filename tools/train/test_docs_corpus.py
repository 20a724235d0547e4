#!/usr/bin/env python3
"""Unit tests of stage 1c (docs_corpus.py) and of the committed general-domain test set; standard library only.
Usage: python3 tools/train/test_docs_corpus.py"""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import docs_corpus as dc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))

EN_PAGE = """<?xml version="1.0" encoding="utf-8"?>
<page xmlns="http://projectmallard.org/1.0/" id="x">
  <info><credit type="author"><name>GNOME Documentation Project</name></credit>
    <desc>Connect to the internet wirelessly.</desc></info>
  <title>Connect to a wireless network</title>
  <p>If you have a wireless-enabled computer, you can connect to a network. See <link xref="net-wireless"/>.</p>
  <steps><item><p>Open the <gui xref="shell-introduction#systemmenu">system menu</gui> from the right side.</p></item>
    <item><p>Select <guiseq><gui>Wi-Fi</gui><gui>Select Network</gui></guiseq>. Click <gui>Connect</gui>.</p></item>
  </steps>
  <code mime="text/x-shellscript">nmcli device wifi</code>
  <p>Press <keyseq><key>Ctrl</key><key>Q</key></keyseq> to quit. It takes 5 seconds.</p>
</page>"""

DE_PAGE = """<?xml version="1.0" encoding="utf-8"?>
<page xmlns="http://projectmallard.org/1.0/" id="x">
  <info><credit type="author"><name>GNOME-Dokumentationsprojekt</name></credit>
    <desc>Gehen Sie ins Internet – drahtlos.</desc>
    <mal:credit xmlns:mal="http://projectmallard.org/1.0/" type="translator copyright">
      <mal:name>Jemand</mal:name><mal:years>2011.</mal:years></mal:credit></info>
  <title>Verbinden mit einem Funknetzwerk</title>
  <p>Wenn Ihr Rechner Funknetzwerke unterstützt, können Sie sich verbinden. Siehe <link xref="net-wireless"/>.</p>
  <steps><item><p>Öffnen Sie das <gui xref="shell-introduction#systemmenu">Systemmenü</gui> auf der rechten Seite.</p></item>
    <item><p>Wählen Sie <guiseq><gui>WLAN</gui><gui>Netzwerk wählen</gui></guiseq>. Klicken Sie auf <gui>Verbinden</gui>.</p></item>
  </steps>
  <code mime="text/x-shellscript">nmcli device wifi</code>
  <p>Drücken Sie <keyseq><key>Strg</key><key>Q</key></keyseq> zum Beenden. Es dauert 5 Sekunden.</p>
</page>"""

EN_MAN = r""".TH LS 1 "September 2022" "GNU coreutils 9.1" "User Commands"
.SH NAME
ls \- list directory contents
.SH DESCRIPTION
.PP
List information about the FILEs (the current directory by default).
Sort entries alphabetically if none of
\fB\-cftuvSUX\fR nor \fB\-\-sort\fR is specified.
.nf
ls -l /tmp
.fi
.TP
\fB\-a\fR, \fB\-\-all\fR
do not ignore entries starting with .
"""

DE_MAN = r""".\" -*- coding: UTF-8 -*-
.TH LS 1 "September 2022" "GNU coreutils 9.1" "Dienstprogramme für Benutzer"
.SH BEZEICHNUNG
ls \- Verzeichnisinhalte auflisten
.SH BESCHREIBUNG
.\" Add any additional description here
.PP
Auflistung von Informationen über die DATEIen (Standardvorgabe ist das
aktuelle Verzeichnis). Die Einträge werden alphabetisch sortiert, falls
weder \fB\-cftuvSUX\fP noch \fB\-\-sort\fP angegeben wurden.
.nf
ls -l /tmp
.fi
.TP
\fB\-a\fP, \fB\-\-all\fP
Einträge nicht ignorieren, die mit ».« beginnen
"""


def write(d, name, text):
    p = os.path.join(d, name)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return p


class Sentences(unittest.TestCase):
    def test_split(self):
        self.assertEqual(dc.split_sentences("Open it. Then close it! Done?"), ["Open it.", "Then close it!", "Done?"])

    def test_abbreviations_and_numbers(self):
        self.assertEqual(dc.split_sentences("Use z. B. Dateien aus Kapitel 3. Danach weiter."),
                         ["Use z. B. Dateien aus Kapitel 3. Danach weiter."])
        self.assertEqual(dc.split_sentences("See e.g. Files here. Next one."), ["See e.g. Files here.", "Next one."])
        self.assertEqual(dc.split_sentences("Am 1. Januar. Dann."), ["Am 1. Januar.", "Dann."])

    def test_pairs_only_when_counts_agree(self):
        self.assertEqual(dc.block_pairs("Open it. Close it.", "Offen. Zu."),
                         [("Open it.", "Offen."), ("Close it.", "Zu.")])
        self.assertEqual(dc.block_pairs("Open it. Close it.", "Offen, zu."), [("Open it. Close it.", "Offen, zu.")])


class Blocks(unittest.TestCase):
    def test_mallard_alignment(self):
        with tempfile.TemporaryDirectory() as d:
            en = dc.html_blocks(write(d, "en.page", EN_PAGE))
            de = dc.html_blocks(write(d, "de.page", DE_PAGE))
        pairs = dc.align_blocks(en, de)
        self.assertEqual(len(en), len(de))  # translator credits and code are not blocks
        self.assertIn(("Connect to a wireless network", "Verbinden mit einem Funknetzwerk"), pairs)
        self.assertIn(("Select Wi-Fi ▸ Select Network. Click Connect.",
                       "Wählen Sie WLAN ▸ Netzwerk wählen. Klicken Sie auf Verbinden."), pairs)
        self.assertIn(("Press Ctrl+Q to quit. It takes 5 seconds.",
                       "Drücken Sie Strg+Q zum Beenden. Es dauert 5 Sekunden."), pairs)
        self.assertFalse(any("nmcli" in s for s, _ in pairs))
        # an empty cross-reference makes the sentence incomplete: dropped
        xref = [(s, t) for s0, t0 in pairs for s, t in dc.block_pairs(s0, t0) if dc.EMPTY_XREF in s]
        self.assertEqual(len(xref), 1)
        self.assertEqual(dc.doc_keep(xref[0][0], xref[0][1], 250), "xref")

    def test_insertion_is_skipped(self):
        en = [(("p", "", (), (), ()), "One."), (("p", "", ("2",), (), ()), "Two 2."), (("p", "", (), (), ()), "Three.")]
        de = [en[0][:1] + ("Eins.",), (("p", "", (), ("a",), ("x",)), "Extra."), en[1][:1] + ("Zwei 2.",),
              en[2][:1] + ("Drei.",)]
        self.assertEqual(dc.align_blocks(en, de), [("One.", "Eins."), ("Two 2.", "Zwei 2."), ("Three.", "Drei.")])

    def test_man_page(self):
        with tempfile.TemporaryDirectory() as d:
            en = dc.man_blocks(write(d, "ls.1", EN_MAN))
            de = dc.man_blocks(write(d, "ls.de.1", DE_MAN))
        pairs = dc.align_blocks(en, de)
        self.assertIn(("ls - list directory contents", "ls - Verzeichnisinhalte auflisten"), pairs)
        self.assertIn(("-a, --all", "-a, --all"), pairs)
        self.assertFalse(any("/tmp" in s for s, _ in pairs))
        body = [p for p in pairs if p[0].startswith("List information")]
        self.assertEqual(len(body), 1)
        self.assertTrue(body[0][0].endswith("nor --sort is specified."))


class Filters(unittest.TestCase):
    def test_keep(self):
        self.assertIsNone(dc.doc_keep("Open the file.", "Öffnen Sie die Datei.", 250))
        self.assertEqual(dc.doc_keep("Wait 5 seconds.", "Warten Sie 6 Sekunden.", 250), "digits")
        self.assertEqual(dc.doc_keep("Open the file.", "Öffnen Sie bitte zuerst die gewünschte Datei hier.", 250),
                         "length")
        self.assertEqual(dc.doc_keep("a" * 251, "b" * 251, 250), "long")

    def test_real_sentence(self):
        self.assertTrue(dc.real_sentence("Open the file in the editor.", "Öffnen Sie die Datei im Editor."))
        self.assertFalse(dc.real_sentence("Open the file.", "Öffnen Sie die Datei."))  # 3 words
        self.assertFalse(dc.real_sentence("Run ls -l --all in it.", "Führen Sie ls -l --all darin aus."))


class CommittedTestSet(unittest.TestCase):
    def test_general_test_set(self):
        base = os.path.join(ROOT, "tests", "data", "en_de_general", "test")
        with open(base + ".en", encoding="utf-8") as f:
            en = f.read().split("\n")[:-1]
        with open(base + ".de", encoding="utf-8") as f:
            de = f.read().split("\n")[:-1]
        self.assertEqual(len(en), len(de))
        self.assertGreaterEqual(len(en), 1000)
        keys = [corpus.normkey(s) for s in en]
        self.assertEqual(len(set(keys)), len(keys))
        for s, t in zip(en, de):
            self.assertTrue(dc.real_sentence(s, t), (s, t))
        with open(os.path.join(ROOT, "tests", "data", "en_de_test", "test.en"), encoding="utf-8") as f:
            self.assertFalse(set(keys) & {corpus.normkey(x.rstrip("\n")) for x in f})


if __name__ == "__main__":
    unittest.main()
