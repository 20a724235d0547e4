#!/usr/bin/env python3
"""bench/glossary/run.py --daemon PATH [--model DIR] [--threads N] [--beam N]

Glossaries measured (docs/benchmarks.md, "Glossaries"): a 50-entry en->de
glossary on the bundled model's held-out set (tests/data/en_de_test,
2,000 lines the model never saw), the daemon run with and without it.

The glossary, by a rule written here rather than picked by hand after the
fact: CANDIDATES is a hand-written list of software-localisation terms
(the held-out set is Debian's catalogues and package descriptions) with a
German translation of each as a Debian translator would write it; the 50
whose source term occurs in the most held-out lines (case-insensitive,
whole words: the daemon's own rule) make the glossary, ties by the term.
The sentences: the held-out lines with at least one of them, the first 300
in file order (or all of them, said, when there are fewer).

Reported without a glossary, with it (terms placed verbatim, the default)
and with the same glossary's targets written "~Term" (the model's own
form of a term kept):
  - term rate: of those sentences, the share whose translation has the
    target term of every glossary source term it contains, and the same
    per term occurrence; "anywhere": case-insensitive, inside a word too
    (German compounds: "Dateiname" has "Datei"), "whole word": as written;
  - BLEU and chrF (sacrebleu, bench/glossary/requirements.txt) against the
    references on those sentences and on the whole held-out set.
Prints a markdown table and one JSON line.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import sys
import tempfile

import sacrebleu

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "load"))
import td_daemon  # noqa: E402

CANDIDATES = """
file Datei | files Dateien | package Paket | packages Pakete | data Daten | type Typ |
library Bibliothek | libraries Bibliotheken | name Name | error Fehler | image Bild |
images Bilder | value Wert | values Werte | list Liste | line Zeile | lines Zeilen |
format Format | color Farbe | text Text | default Standard | function Funktion |
object Objekt | objects Objekte | size Größe | output Ausgabe | system System |
user Benutzer | users Benutzer | database Datenbank | argument Argument |
arguments Argumente | table Tabelle | mode Modus | path Pfad | option Option |
options Optionen | version Version | information Informationen | document Dokument |
tool Werkzeug | tools Werkzeuge | module Modul | command Befehl | field Feld |
font Schrift | fonts Schriften | group Gruppe | extension Erweiterung |
applications Anwendungen | application Anwendung | software Software | view Ansicht |
directory Verzeichnis | character Zeichen | input Eingabe | attribute Attribut |
column Spalte | columns Spalten | server Server | connection Verbindung |
source Quelle | message Nachricht | messages Nachrichten | language Sprache |
documentation Dokumentation | game Spiel | interface Schnittstelle |
desktop Arbeitsfläche | program Programm | device Gerät | selection Auswahl |
string Zeichenkette | video Video | position Position | code Code | warning Warnung |
window Fenster | windows Fenster | audio Audio | label Beschriftung |
environment Umgebung | template Vorlage | expression Ausdruck | width Breite |
page Seite | channel Kanal | header Kopfzeile | authentication Authentifizierung |
variable Variable | cache Zwischenspeicher | reference Referenz | mouse Maus |
pointer Zeiger | archive Archiv | screen Bildschirm | entry Eintrag | layer Ebene |
account Konto | node Knoten | task Aufgabe | date Datum | password Passwort |
keyboard Tastatur | printer Drucker | folder Ordner | network Netzwerk |
button Knopf | menu Menü | settings Einstellungen | setting Einstellung |
graphics Grafik | sound Klang | plugin Plugin | plugins Plugins | kernel Kernel
"""


def candidates():
    out = []
    for item in CANDIDATES.split("|"):
        src, tgt = item.split()
        out.append((src, tgt))
    return out


def term_re(term):
    """A term as the daemon matches it: case-insensitive, no letter or
    digit right before or after it."""
    return re.compile(r"(?<!\w)" + re.escape(term) + r"(?!\w)", re.IGNORECASE)


def terms_in(line, entries):
    """The entries whose source term the line has, longest first without
    overlaps (the daemon's rule)."""
    taken, found = [], []
    for src, tgt in sorted(entries, key=lambda e: -len(e[0])):
        for m in term_re(src).finditer(line):
            if all(m.end() <= a or m.start() >= b for a, b in taken):
                taken.append((m.start(), m.end()))
                found.append((src, tgt))
    return found


def has_target(out, tgt, word):
    """Whether out has tgt: as a whole word, case-sensitive (word), or
    anywhere, case-insensitive (a compound's part: "Dateiname")."""
    if word:
        return re.search(r"(?<!\w)" + re.escape(tgt) + r"(?!\w)", out) is not None
    return tgt.lower() in out.lower()


def translate(port, texts, glossary, beam, batch=32):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    out = []
    for i in range(0, len(texts), batch):
        body = {"text": texts[i:i + batch], "beam_size": beam}
        if glossary:
            body["glossary"] = glossary
        conn.request("POST", "/v1/translate", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit("POST /v1/translate: %d %s" % (r.status, data[:300]))
        out += [t["text"] for t in json.loads(data)["translations"]]
    return out


def rates(src, out, entries, word):
    sent_ok = occ = occ_ok = 0
    for s, o in zip(src, out):
        found = terms_in(s, entries)
        ok = [has_target(o, t, word) for _, t in found]
        occ += len(ok)
        occ_ok += sum(ok)
        sent_ok += all(ok)
    return round(100.0 * sent_ok / len(src), 2), round(100.0 * occ_ok / max(occ, 1), 2), occ


def make_glossary(port, name, entries, inflect):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    tsv = "".join(f"{s}\t{'~' if inflect else ''}{t}\n" for s, t in entries)
    conn.request("POST", "/v2/glossaries", json.dumps(
        {"name": name, "source_lang": "en", "target_lang": "de", "entries": tsv,
         "entries_format": "tsv"}), {"Content-Type": "application/json"})
    r = conn.getresponse()
    g = json.loads(r.read())
    if r.status != 201:
        sys.exit(f"POST /v2/glossaries: {r.status} {g}")
    return g["glossary_id"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "en-de"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--sentences", type=int, default=300)
    a = ap.parse_args()
    data = os.path.join(ROOT, "tests", "data", "en_de_test")
    src_all = open(os.path.join(data, "test.en"), encoding="utf-8").read().splitlines()
    ref_all = open(os.path.join(data, "test.de"), encoding="utf-8").read().splitlines()
    counts = []
    for src, tgt in candidates():
        r = term_re(src)
        counts.append((-sum(1 for l in src_all if r.search(l)), src, tgt))
    entries = [(s, t) for _, s, t in sorted(counts)[:50]]
    picked = [i for i, l in enumerate(src_all) if terms_in(l, entries)]
    n_with = len(picked)
    picked = picked[:a.sentences]
    src = [src_all[i] for i in picked]
    ref = [ref_all[i] for i in picked]
    state = tempfile.mkdtemp(prefix="td-bench-gloss-")
    p, port, log = td_daemon.start(a.daemon, ["--model", a.model, "--threads", str(a.threads),
                                              "--state-dir", state], prefix="td-bench-gloss-")
    runs = {}
    try:
        runs["without"] = translate(port, src_all, None, a.beam)
        runs["verbatim"] = translate(port, src_all, make_glossary(port, "verbatim", entries, 0),
                                     a.beam)
        runs["inflectable"] = translate(port, src_all, make_glossary(port, "~", entries, 1), a.beam)
    finally:
        td_daemon.stop(p, log)
        shutil.rmtree(state, ignore_errors=True)
    res = {"entries": len(entries), "held_out_lines": len(src_all),
           "lines_with_a_term": n_with, "sentences": len(src), "beam": a.beam}
    for name, out_all in runs.items():
        out = [out_all[i] for i in picked]
        r = {}
        r["word_sentences"], r["word_occurrences"], occ = rates(src, out, entries, True)
        r["contained_sentences"], r["contained_occurrences"], _ = rates(src, out, entries, False)
        r["bleu"] = round(sacrebleu.corpus_bleu(out, [ref]).score, 2)
        r["chrf"] = round(sacrebleu.corpus_chrf(out, [ref]).score, 2)
        r["bleu_held_out"] = round(sacrebleu.corpus_bleu(out_all, [ref_all]).score, 2)
        r["chrf_held_out"] = round(sacrebleu.corpus_chrf(out_all, [ref_all]).score, 2)
        r["changed_lines"] = sum(x != y for x, y in zip(runs["without"], out_all))
        r["unchanged_without_term"] = all(
            runs["without"][i] == out_all[i] for i in range(len(src_all))
            if not terms_in(src_all[i], entries))
        res[name] = r
    res["occurrences"] = occ
    print(f"glossary: {len(entries)} entries; {n_with} of {len(src_all)} held-out lines have a "
          f"term, {len(src)} measured ({occ} term occurrences); beam {a.beam}\n")
    cols = list(runs)
    print("| | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    rows = [("target term in the output, anywhere (sentences)", "contained_sentences", " %"),
            ("target term in the output, anywhere (occurrences)", "contained_occurrences", " %"),
            ("target term as a whole word (sentences)", "word_sentences", " %"),
            ("target term as a whole word (occurrences)", "word_occurrences", " %"),
            (f"BLEU, the {len(src)} sentences", "bleu", ""),
            (f"chrF, the {len(src)} sentences", "chrf", ""),
            (f"BLEU, all {len(src_all)} held-out lines", "bleu_held_out", ""),
            (f"chrF, all {len(src_all)} held-out lines", "chrf_held_out", ""),
            ("held-out lines changed", "changed_lines", "")]
    for label, key, unit in rows:
        print(f"| {label} | " + " | ".join(f"{res[c][key]}{unit}" for c in cols) + " |")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
