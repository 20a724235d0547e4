#!/usr/bin/env python3
"""Unit tests of stage 1e (dialogue.py) and of the committed dialogue test set; standard library and dpkg-deb only.
Usage: python3 tools/train/test_dialogue.py"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import dialogue as dl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def mo_bytes(pairs):
    """A gettext .mo file (little endian, revision 0) holding PAIRS [(msgid, msgstr), ...] and the header entry."""
    pairs = sorted([("", "Content-Type: text/plain; charset=UTF-8\n")] + list(pairs))
    ids = [p[0].encode() for p in pairs]
    strs = [p[1].encode() for p in pairs]
    n = len(pairs)
    o_ids, o_strs = 28, 28 + 8 * n
    data_at = 28 + 16 * n
    table_ids, table_strs, blob = [], [], b""
    for s in ids:
        table_ids.append((len(s), data_at + len(blob)))
        blob += s + b"\0"
    for s in strs:
        table_strs.append((len(s), data_at + len(blob)))
        blob += s + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, n, o_ids, o_strs, 0, 0)
    return head + b"".join(struct.pack("<2I", *e) for e in table_ids + table_strs) + blob


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


class CleanPairs(unittest.TestCase):
    def kept(self, s, t):
        return [(a, b) for a, b, why in dl.clean_pairs([(s, t)]) if why is None]

    def test_context_prefix_removed(self):
        self.assertEqual(self.kept("female^Who goes there?", "Wer da?"), [("Who goes there?", "Wer da?")])

    def test_sentences_split_when_counts_agree(self):
        self.assertEqual(self.kept("Halt! Who goes there? We come in peace.", "Halt! Wer da? Wir kommen in Frieden."),
                         [("Who goes there?", "Wer da?"),  # "Halt!" is the same on both sides
                          ("We come in peace.", "Wir kommen in Frieden.")])
        self.assertEqual(self.kept("Go now. Hurry!", "Geht jetzt, schnell!"), [("Go now. Hurry!", "Geht jetzt, schnell!")])

    def test_names_and_mismatches_dropped(self):
        whys = [w for _, _, w in dl.clean_pairs([("Delfador", "Delfador"), ("Iliah-Malal", "iliah-malal"),
                                                 ("Orcs", "Orks"), ("You have %d gold.", "Ihr habt Gold."),
                                                 ("Hello", "hallo"), ("Konrad", "Konrad II"), ("Thank you", "Danke")])]
        self.assertEqual(whys, ["identical", "single_word", "single_word", "format", None, None, None])

    def test_is_sentence(self):
        self.assertTrue(dl.is_sentence("Where can I find him?", "Wo finde ich ihn nur?"))
        self.assertFalse(dl.is_sentence("Defeat all enemy leaders", "Besiegt alle gegnerischen Anführer"))
        self.assertFalse(dl.is_sentence("You see $name over there.", "Ihr seht $name dort drüben."))
        self.assertFalse(dl.is_sentence("I promise!", "Ich verspreche es!"))


class Readers(unittest.TestCase):
    PO = ('# German translation\nmsgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
          '#: a.c:1\nmsgid "Hello"\nmsgstr "Hallo"\n'           # no blank line before the next entry
          '#, fuzzy\nmsgid "Bye"\nmsgstr "Tschau"\n\n'          # fuzzy: left out
          'msgctxt "greeting"\nmsgid "Say \\"hi\\""\n"\\n to him"\nmsgstr "Sag \\"hallo\\""\n'
          'msgid "one apple"\nmsgid_plural "%d apples"\nmsgstr[0] "ein Apfel"\nmsgstr[1] "%d Äpfel"\n'
          '#~ msgid "old"\n#~ msgstr "alt"\n\nmsgid "untranslated"\nmsgstr ""\n')

    def test_po(self):
        self.assertEqual(corpus.read_po(self.PO), [("Hello", "Hallo"), ('Say "hi"\n to him', 'Sag "hallo"'),
                                                   ("one apple", "ein Apfel")])

    def test_lua_locale(self):
        text = ('locale = {\n  ["Hello"] = "Hallo",\n--  ["Not yet"] = "",\n'
                '  ["It\'s \\"me\\""] = "Ich bin\\\'s", -- a comment\n}\n')
        self.assertEqual(corpus.read_lua_locale(text), [("Hello", "Hallo"), ('It\'s "me"', "Ich bin's")])

    def test_catalogue_names(self):
        names = {"usr/share/locale/de/LC_MESSAGES/g.mo": True, "usr/share/g/l10n/de/LC_MESSAGES/g.mo": True,
                 "usr/share/g/po/de.po": True, "usr/share/g/languages/data.de.po": True,
                 "usr/share/g/Data/Locale/de.lua": True, "usr/share/locale/fr/LC_MESSAGES/g.mo": False,
                 "usr/share/g/po/fr.po": False, "usr/share/g/po/deu.po": False, "usr/share/g/Locale/de.txt": False}
        for n, want in names.items():
            self.assertEqual(bool(corpus.GERMAN_CATALOGUE_RE.search("./" + n)), want, n)
        self.assertFalse(corpus.MO_CATALOGUE_RE.search("./usr/share/g/po/de.po"))
        self.assertEqual(corpus.read_catalogue("de.po", self.PO.encode())[0], ("Hello", "Hallo"))


def qm_bytes(messages):
    """A compiled Qt catalogue holding MESSAGES [(source, [translations], context), ...]: the magic, a hashes
    block that readers skip, then the messages block; an obsolete field on the first message."""
    def field(tag, b):
        return bytes([tag]) + struct.pack(">I", len(b)) + b
    body = b""
    for k, (src, trs, ctx) in enumerate(messages):
        body += b"\x05" + b"\0\0\0\0" if k == 0 else b""
        for tr in trs:
            body += field(3, tr.encode("utf-16-be")) if tr is not None else b"\x03\xff\xff\xff\xff"
        if src is not None:
            body += field(6, src.encode())
        body += field(7, ctx.encode()) + field(8, b"") + b"\x01"
    return corpus.QM_MAGIC + field(0x42, b"\0" * 8) + field(0x69, body)


class EduReaders(unittest.TestCase):
    def test_qm(self):
        data = qm_bytes([("Can you help her?", ["Kannst du ihr helfen?"], "ActivityInfo"),
                         ("%n apples", ["%n Apfel", "%n Äpfel"], "Count"),  # plural: the first form
                         ("Untranslated", [None], "X"), (None, ["Ohne Quelle"], "Y"),
                         ("Grüße", ["Grüße"], "Z")])
        self.assertEqual(corpus.read_qm(data), [("Can you help her?", "Kannst du ihr helfen?"),
                                                ("%n apples", "%n Apfel"), ("Grüße", "Grüße")])
        self.assertEqual(corpus.read_qm(b"not a qm file"), [])
        self.assertEqual(corpus.read_catalogue("gcompris_de.qm", data)[0][1], "Kannst du ihr helfen?")

    def test_stamp_description(self):
        text = "A pair of blue jeans.\nda.utf8=Et par blå jeans.\nde.utf8=Eine blaue Jeans. \nde_CH.utf8=x\n"
        self.assertEqual(corpus.read_stamp_description(text), [("A pair of blue jeans.", "Eine blaue Jeans.")])
        self.assertEqual(corpus.read_stamp_description("A cat.\nfr.utf8=Un chat.\n"), [])
        self.assertEqual(corpus.read_catalogue("jeans.txt", text.encode()), [("A pair of blue jeans.",
                                                                              "Eine blaue Jeans.")])

    def test_catalogue_names(self):
        names = {"usr/share/gcompris-qt/translations/gcompris_de.qm": True,
                 "usr/share/gcompris-qt/translations/gcompris_fr.qm": False,
                 "usr/share/tuxpaint/stamps/clothes/jeans.txt": True, "usr/share/doc/tuxpaint/README.txt": False,
                 "usr/share/locale/de/LC_MESSAGES/tuxpaint.mo": True, "usr/share/g/po/de.po": True}
        for n, want in names.items():
            self.assertEqual(bool(corpus.EDU_CATALOGUE_RE.search("./" + n)), want, n)
        self.assertFalse(corpus.GERMAN_CATALOGUE_RE.search("./usr/share/g/translations/g_de.qm"))


class Licence(unittest.TestCase):
    def test_prose_copyright_file(self):
        text = ("Upstream Author: A\n\nLicense:\n        Copyright (C) 2003 by A\n\n        it under the terms of the "
                "GNU General Public License version 2\n        or at your option any later version.\n\n"
                "        modify it under the terms of the GNU Library General Public\n        License as published by "
                "the Free Software Foundation; either\n        version 2 of the License, or (at your option) any "
                "later version.\n")
        self.assertEqual(corpus.licence_of_copyright(text), "GPL-2+; LGPL-2+")
        self.assertEqual(corpus.licence_of_copyright("Files: *\nLicense: GPL-3+\n\nFiles: a\nLicense: MIT\n"),
                         "GPL-3+; MIT")
        self.assertEqual(corpus.licence_of_copyright("This package was debianized by C.\n\nLicense:\n  This software "
                                                     "is provided 'as-is'.\n  1. The origin of this software must "
                                                     "not be\n     misrepresented; you must not\n"), "Zlib")
        self.assertEqual(corpus.licence_of_copyright("Copyright 2001 B\nAll rights reserved.\n"),
                         "Copyright 2001 B / All rights reserved.")


class EndToEnd(unittest.TestCase):
    @staticmethod
    def build_deb(t, debdir, name, files):
        """WORK dir t/w: a package NAME in t/w/DEBDIR holding FILES {path: bytes} and a GPL-2+ copyright file."""
        pkg = os.path.join(t, name)
        os.makedirs(os.path.join(pkg, "DEBIAN"))
        files = dict(files)
        files[f"usr/share/doc/{name}/copyright"] = b"Files: *\nLicense: GPL-2+\n"
        for path, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(pkg, path)), exist_ok=True)
            with open(os.path.join(pkg, path), "wb") as f:
                f.write(data)
        with open(os.path.join(pkg, "DEBIAN/control"), "w") as f:
            f.write(f"Package: {name}\nVersion: 1\nArchitecture: all\nMaintainer: t <t@example.org>\n"
                    "Description: test\n")
        os.makedirs(os.path.join(t, "w", debdir), exist_ok=True)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", pkg, os.path.join(t, "w", debdir, f"{name}_1_all.deb")],
                       check=True, capture_output=True)

    @unittest.skipUnless(shutil.which("dpkg-deb"), "no dpkg-deb")
    def test_second_corpus_of_po_and_lua(self):
        po = "".join(f'msgid "Where is the inn, stranger number {i}?"\nmsgstr "Wo ist das Gasthaus, Fremder Nummer {i}?"\n\n'
                     for i in range(6)).encode()
        lua = b'locale = {\n  ["Thank you very much, my dear friend!"] = "Vielen Dank, mein lieber Freund!",\n}\n'
        mo = mo_bytes([("Where is the inn, stranger number 0?", "Wo ist das Gasthaus, Fremder Nummer 0?")])
        with tempfile.TemporaryDirectory() as t:
            self.build_deb(t, "games2-debs", "h-data", {"usr/share/h/po/de.po": po, "usr/share/h/Locale/de.lua": lua,
                                                        "usr/share/h/po/fr.po": b'msgid "x"\nmsgstr "y"\n'})
            held = os.path.join(t, "held.en")
            with open(held, "w") as f:
                f.write("Where is the inn, stranger number 5?\n")
            run = [sys.executable, os.path.join(HERE, "dialogue.py"), "--work", os.path.join(t, "w"), "--debs",
                   "games2-debs", "--out", "dialogue2", "--n-dev", "1", "--n-test", "0", "--exclude", held]
            subprocess.run(run + ["--all-formats"], check=True, capture_output=True)
            out = os.path.join(t, "w/dialogue2")
            dev, test, train = read(f"{out}/dev.en"), read(f"{out}/test.en"), read(f"{out}/train.en")
            self.assertEqual((len(dev), len(test), len(train)), (1, 0, 5))  # 7 pairs, one held out elsewhere
            self.assertIn("Thank you very much, my dear friend!", dev + train)
            self.assertNotIn("Where is the inn, stranger number 5?", dev + train)
            self.assertEqual(read(f"{out}/provenance.tsv")[1].split("\t")[2:], ["2", "7", "GPL-2+"])
            # without --all-formats only .mo catalogues are read: this package has none
            r = subprocess.run(run, capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("no pairs", r.stderr)
            self.build_deb(t, "games2-debs", "m-data", {"usr/share/locale/de/LC_MESSAGES/m.mo": mo})
            r = subprocess.run(run + ["--n-dev", "0"], capture_output=True, text=True)
            self.assertEqual(read(f"{out}/train.en"), ["Where is the inn, stranger number 0?"], r.stderr)
            r = subprocess.run(run + ["--exclude", os.path.join(t, "missing.en")], capture_output=True, text=True)
            self.assertIn("--exclude", r.stderr)

    @unittest.skipUnless(shutil.which("dpkg-deb"), "no dpkg-deb")
    def test_main_on_a_built_package(self):
        lines = [(f"We must reach the river before night falls, friend number {i}.",
                  f"Wir müssen den Fluss vor Einbruch der Nacht erreichen, Freund Nummer {i}.") for i in range(12)]
        lines += [("race^Elf", "Elf"), ("Thank you, my friend. Go now.", "Danke, mein Freund. Geht jetzt.")]
        with tempfile.TemporaryDirectory() as t:
            pkg = os.path.join(t, "pkg")
            os.makedirs(os.path.join(pkg, "DEBIAN"))
            mo = os.path.join(pkg, "usr/share/games/g/locale/de/LC_MESSAGES")
            os.makedirs(mo)
            with open(os.path.join(mo, "g.mo"), "wb") as f:
                f.write(mo_bytes(lines))
            os.makedirs(os.path.join(pkg, "usr/share/doc/g-data"))
            with open(os.path.join(pkg, "usr/share/doc/g-data/copyright"), "w") as f:
                f.write("Files: *\nLicense: GPL-2+\n")
            with open(os.path.join(pkg, "DEBIAN/control"), "w") as f:
                f.write("Package: g-data\nVersion: 1\nArchitecture: all\nMaintainer: t <t@example.org>\n"
                        "Description: test\n")
            os.makedirs(os.path.join(t, "w/games-debs"))
            subprocess.run(["dpkg-deb", "--root-owner-group", "-b", pkg, os.path.join(t, "w/games-debs/g-data_1_all.deb")],
                           check=True, capture_output=True)
            subprocess.run([sys.executable, os.path.join(HERE, "dialogue.py"), "--work", os.path.join(t, "w"),
                            "--n-dev", "2", "--n-test", "3", "--test-out", os.path.join(t, "out/test")],
                           check=True, capture_output=True)
            out = os.path.join(t, "w/dialogue")
            dev, test, train = read(f"{out}/dev.en"), read(f"{out}/test.en"), read(f"{out}/train.en")
            self.assertEqual((len(dev), len(test)), (2, 3))
            self.assertEqual(read(os.path.join(t, "out/test.en")), test)
            self.assertEqual(len(train), 12 - 5 + 2)  # the two sentences of the last entry, the name dropped
            self.assertIn("Thank you, my friend.", train)
            self.assertFalse({corpus.normkey(x) for x in train} & {corpus.normkey(x) for x in dev + test})
            prov = read(f"{out}/provenance.tsv")
            self.assertEqual(prov[1].split("\t"), ["g-data", "downloaded (game dialogue, tools/train/dialogue.py)",
                                                  "1", "14", "GPL-2+"])


class CommittedTestSet(unittest.TestCase):
    def test_dialogue_test_set(self):
        d = os.path.join(ROOT, "tests", "data", "en_de_dialogue")
        en, de = read(os.path.join(d, "test.en")), read(os.path.join(d, "test.de"))
        self.assertEqual((len(en), len(de)), (500, 500))
        self.assertTrue(all(dl.is_sentence(s, t) for s, t in zip(en, de)))
        keys = {corpus.normkey(s) for s in en}
        self.assertEqual(len(keys), 500)
        for other in ("en_de_test", "en_de_general"):
            with open(os.path.join(ROOT, "tests", "data", other, "test.en"), encoding="utf-8") as f:
                self.assertFalse(keys & {corpus.normkey(x.rstrip("\n")) for x in f}, other)


if __name__ == "__main__":
    unittest.main()
