"""Glossaries against `transformerd serve`: the store through the official
DeepL client (tests/requirements-deepl.txt: deepl, pinned) and raw HTTP,
and a glossary applied by /v1/translate and LibreTranslate's /translate.

Run by ctest "glossary_clients" (tests/venv_run.sh) with the bundled en-de
model:
  - create_glossary, create_glossary_from_csv, list_glossaries,
    get_glossary, get_glossary_entries, delete_glossary, the language
    pairs, and the v3 calls (create/get/list/entries/delete of a
    multilingual glossary, and its edits: a dictionary merged, replaced,
    added and deleted, a new name) answer as the client expects, with the daemon's
    API key sent as DeepL-Auth-Key;
  - a bad TSV line is refused (400) naming its line; the bounds
    (--max-glossaries: QuotaExceededException, --max-glossary-bytes and
    --max-glossary-entries: 413); a deleted or unknown id:
    GlossaryNotFoundException;
  - the glossaries and their entries survive a restart on the same
    --state-dir; a deleted one does not come back;
  - a translation with a glossary has the target term where the source
    term is, takes no other source word's translation, and a text without
    a term is translated exactly as without the glossary; a glossary of another language pair, or an unknown id,
    is a 400 naming the field;
  - a document with a glossary (LibreTranslate's /translate_file, DeepL's
    /v2/document through the official client's translate_document) is
    translated as its texts are by /v1/translate with it; one of another
    pair is refused (400, the document's status error).

usage: glossary_clients.py DAEMON MODEL_DIR
"""

import io
import json
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request

import deepl
import deepl.http_client
import deepl.util
from deepl.api_data import MultilingualGlossaryDictionaryEntries

import harness
from harness import check, finish

deepl.http_client.max_network_retries = 0
KEY = "gl0ssary-key"


class Daemon(harness.Daemon):
    """The daemon serving model with the API key."""

    def __init__(self, daemon, model, *args):
        super().__init__(daemon, "--model", model, "--threads", "1", "--api-key", KEY, *args)


def http(url, method="GET", body=None, ctype="application/json", key=KEY):
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", ctype)
    if key:
        req.add_header("Authorization", f"DeepL-Auth-Key {key}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def translate(d, texts, **extra):
    st, body = http(d.url + "/v1/translate", "POST", json.dumps({"text": texts, **extra}))
    return st, json.loads(body)


def counted(d, status):
    """transformerd_requests_total of the glossary routes with status (a
    number or "other") in /metrics, 0 when there is no such series."""
    st, text = http(d.url + "/metrics", key=None)
    assert st == 200, st
    series = f'transformerd_requests_total{{endpoint="/v2/glossaries",status="{status}"}} '
    return next((float(ln[len(series):]) for ln in text.split("\n") if ln.startswith(series)), 0)


def counted_once(d, status, before):
    """Whether the series of status reached before + 1 (a request is counted
    once its answer is sent, maybe just after the client read it: a bounded
    count of polls) and stays there."""
    for _ in range(200):
        if counted(d, status) >= before + 1:
            break
        time.sleep(0.05)
    return counted(d, status) == before + 1


def store_calls(d, tr, cl):
    entries = {"engine": "Triebwerk", "weather": "Witterung", "beach": "Strandbad"}
    made, other = counted(d, 201), counted(d, "other")
    g = tr.create_glossary("cars", "EN", "DE", entries)
    check(counted_once(d, 201, made) and counted(d, "other") == other,
          "/metrics: the create counted with status 201, not \"other\"")
    check(g.ready and g.name == "cars" and g.source_lang == "EN" and g.target_lang == "DE"
          and g.entry_count == 3 and len(g.glossary_id) == 36, "create_glossary: its information")
    check(tr.get_glossary(g.glossary_id).creation_time == g.creation_time, "get_glossary")
    check([x.glossary_id for x in tr.list_glossaries()] == [g.glossary_id], "list_glossaries")
    check(tr.get_glossary_entries(g) == entries, "get_glossary_entries: the entries as given")
    c = tr.create_glossary_from_csv("csv", "en", "de", 'tyre,Reifen\n"wheel, front",Vorderrad\n')
    check(tr.get_glossary_entries(c.glossary_id) == {"tyre": "Reifen", "wheel, front": "Vorderrad"},
          "create_glossary_from_csv: quoted fields")
    pairs = [(p.source_lang, p.target_lang) for p in tr.get_glossary_languages()]
    check(("en", "de") in pairs, f"glossary-language-pairs: {pairs}")
    tr.delete_glossary(c)
    try:
        tr.get_glossary(c.glossary_id)
        check(False, "a deleted glossary is gone")
    except deepl.GlossaryNotFoundException:
        check(True, "a deleted glossary is gone (GlossaryNotFoundException)")
    m = cl.create_multilingual_glossary("multi", [
        MultilingualGlossaryDictionaryEntries("EN", "DE", {"car": "Wagen"}),
        MultilingualGlossaryDictionaryEntries("DE", "EN", {"Wagen": "car"})])
    check(len(m.dictionaries) == 2 and m.dictionaries[0].entry_count == 1,
          "v3 create_multilingual_glossary: two dictionaries")
    check(cl.get_multilingual_glossary(m.glossary_id).name == "multi", "v3 get_multilingual_glossary")
    check(sorted(x.glossary_id for x in cl.list_multilingual_glossaries())
          == sorted([g.glossary_id, m.glossary_id]), "v3 list_multilingual_glossaries")
    e = cl.get_multilingual_glossary_entries(m, "DE", "EN")
    check(deepl.util.convert_tsv_to_dict(e.dictionaries[0].entries) == {"Wagen": "car"},
          "v3 get_multilingual_glossary_entries (TSV, as the client passes it on)")
    return g, m


def store_faults(d, tr):
    bad = json.dumps({"name": "bad", "source_lang": "en", "target_lang": "de",
                      "entries": "a\tb\nno tab\n", "entries_format": "tsv"})
    st, body = http(d.url + "/v2/glossaries", "POST", bad)
    check(st == 400 and "entries line 2" in body, f"a bad TSV line: 400 naming it ({st} {body})")
    st, body = http(d.url + "/v2/glossaries", "POST",
                    "name=form&source_lang=en&target_lang=de&entries_format=tsv&entries=x%09%0A",
                    "application/x-www-form-urlencoded")
    check(st == 400 and "entries line 1: the target term is empty" in body,
          f"a form body is read, its empty term refused ({st} {body})")
    st, body = http(d.url + "/v2/glossaries", "POST", json.dumps(
        {"name": "x", "source_lang": "en", "target_lang": "de",
         "entries": "".join(f"w{i}\tx\n" for i in range(60))}))
    check(st == 413 and "--max-glossary-entries" in body, f"--max-glossary-entries: 413 ({st})")
    st, body = http(d.url + "/v2/glossaries", "POST", json.dumps(
        {"name": "x", "source_lang": "en", "target_lang": "de", "entries": "a\t" + "b" * 3000}))
    check(st == 413 and "--max-glossary-bytes" in body, f"--max-glossary-bytes: 413 ({st})")
    st, _ = http(d.url + "/v2/glossaries", "GET", key="wrong")
    check(st == 401, f"a wrong key is refused ({st})")
    quota = counted(d, 456)
    try:
        tr.create_glossary("third", "EN", "DE", {"x": "y"})
        tr.create_glossary("fourth", "EN", "DE", {"x": "y"})
        check(False, "--max-glossaries")
    except deepl.QuotaExceededException:
        check(True, "--max-glossaries: QuotaExceededException (456)")
    check(counted_once(d, 456, quota), "/metrics: the refusal counted with status 456")
    for g in tr.list_glossaries():
        if g.name == "third":
            tr.delete_glossary(g)


def application(d, g, m):
    text = ["The engine of the car is broken.", "I like the weather today.",
            "Nothing here is in it.", "The weather is nice today and we are going to the beach."]
    st, plain = translate(d, text)
    st2, glossed = translate(d, text, glossary=g.glossary_id)
    check(st == 200 and st2 == 200, "translations with and without the glossary")
    p = [t["text"] for t in plain["translations"]]
    o = [t["text"] for t in glossed["translations"]]
    print("     without:", p, "\n     with:   ", o)
    check("Triebwerk" in o[0] and "Triebwerk" not in p[0], "the term placed: engine -> Triebwerk")
    check("Witterung" in o[1] and "Wetter" not in o[1], "weather -> Witterung, not also Wetter")
    check(o[2] == p[2], "a text without a term: the same translation")
    # "beach" has no word of its own in this translation ("wir gehen"): the
    # term does not take the word of "going"
    check("Witterung" in o[3] and "gehen" in o[3] and "Strandbad" not in o[3],
          "a term whose translation the model left out takes no other word")
    # the same texts split into sentences by another door: LibreTranslate's
    st, body = http(d.url + "/translate", "POST", json.dumps(
        {"q": text[0], "source": "en", "target": "de", "glossary": g.glossary_id}))
    check(st == 200 and json.loads(body)["translatedText"] == o[0], "LibreTranslate's /translate")
    # DeepL's own door, through the official client: glossary_id
    tr = deepl.Translator(KEY, server_url=d.url)
    res = tr.translate_text(text[:2], source_lang="EN", target_lang="DE", glossary=g.glossary_id)
    check([x.text for x in res] == o[:2], f"DeepL's /v2/translate with glossary_id ({res})")
    try:
        tr.translate_text(text[0], source_lang="EN", target_lang="DE",
                          glossary="00000000-0000-4000-8000-000000000000")
        check(False, "DeepL's /v2/translate with an unknown glossary_id: refused")
    except deepl.DeepLException as e:
        check("not found" in str(e).lower(), f"DeepL's /v2/translate, an unknown glossary: {e}")
    st, body = translate(d, text[:1], glossary=m.glossary_id)
    check(st == 200, "a v3 glossary: its en->de dictionary")
    only_de_en = json.dumps({"name": "de-en", "source_lang": "de", "target_lang": "en",
                             "entries": "Motor\tengine\n"})
    st, body = http(d.url + "/v2/glossaries", "POST", only_de_en)
    gid = json.loads(body)["glossary_id"]
    st, body = translate(d, text[:1], glossary=gid)
    check(st == 400 and body["error"]["param"] == "glossary"
          and "de->en" in body["error"]["message"], f"another language pair: 400 ({body})")
    http(d.url + f"/v2/glossaries/{gid}", "DELETE")
    st, body = translate(d, text[:1], glossary="00000000-0000-4000-8000-000000000000")
    check(st == 404 and body["error"]["param"] == "glossary"
          and body["error"]["code"] == "glossary_not_found", "an unknown glossary: 404")
    st, body = http(d.url + "/translate", "POST", json.dumps(
        {"q": text[0], "source": "en", "target": "de", "glossary": "no-such-glossary"}))
    check(st == 404, f"LibreTranslate's /translate, an unknown glossary: 404 ({st})")
    return o


def entries_of(cl, m, s, t):
    e = cl.get_multilingual_glossary_entries(m, s, t)
    return deepl.util.convert_tsv_to_dict(e.dictionaries[0].entries)


def edits(d, cl, m):
    """v3's edits through the client: PATCH (merge, rename, a new pair),
    PUT (a dictionary replaced), DELETE of a dictionary; refused edits
    change nothing; the edited glossary applies."""
    M = MultilingualGlossaryDictionaryEntries
    info = cl.update_multilingual_glossary_dictionary(m, M("EN", "DE", {"CAR": "Kraftwagen", "wheel": "Rad"}))
    check(entries_of(cl, m, "EN", "DE") == {"CAR": "Kraftwagen", "wheel": "Rad"}
          and [x.entry_count for x in info.dictionaries] == [2, 1],
          "v3 update_multilingual_glossary_dictionary: merged (a term given again, in another "
          "case, replaced; a new one added)")
    check(cl.update_multilingual_glossary_name(m, "multi2").name == "multi2"
          and cl.get_multilingual_glossary(m.glossary_id).name == "multi2",
          "v3 update_multilingual_glossary_name")
    di = cl.replace_multilingual_glossary_dictionary(m, M("DE", "EN", {"Rad": "wheel"}))
    check(di.entry_count == 1 and entries_of(cl, m, "DE", "EN") == {"Rad": "wheel"},
          "v3 replace_multilingual_glossary_dictionary: the old entries gone")
    info = cl.update_multilingual_glossary_dictionary(m, M("EN", "FR", {"car": "voiture"}))
    check(len(info.dictionaries) == 3, "v3 update: a new pair added")
    cl.delete_multilingual_glossary_dictionary(m, source_lang="EN", target_lang="FR")
    check(len(cl.get_multilingual_glossary(m.glossary_id).dictionaries) == 2,
          "v3 delete_multilingual_glossary_dictionary")
    try:
        cl.delete_multilingual_glossary_dictionary(m, source_lang="EN", target_lang="FR")
        check(False, "a missing dictionary")
    except deepl.GlossaryNotFoundException:
        check(True, "a missing dictionary: GlossaryNotFoundException")
    url = d.url + f"/v3/glossaries/{m.glossary_id}"
    st, body = http(url, "PATCH", json.dumps({"dictionaries": [
        {"source_lang": "en", "target_lang": "de", "entries": "ok\tgut\nno tab\n"}]}))
    check(st == 400 and "entries line 2" in body, f"PATCH with a bad line: 400 naming it ({st})")
    st, body = http(url + "/dictionaries", "PUT", json.dumps(
        {"source_lang": "en", "target_lang": "de",
         "entries": "".join(f"w{i}\tx\n" for i in range(60))}))
    check(st == 413 and "--max-glossary-entries" in body, f"PUT over the bounds: 413 ({st})")
    st, body = http(url, "PATCH", json.dumps({}))
    check(st == 400, f"PATCH with nothing to edit: 400 ({st})")
    check(entries_of(cl, m, "EN", "DE") == {"CAR": "Kraftwagen", "wheel": "Rad"},
          "refused edits changed nothing")
    st, body = translate(d, ["The car is red."], glossary=m.glossary_id)
    out = body["translations"][0]["text"] if st == 200 else ""
    check("Kraftwagen" in out, f"the edited glossary applies: {out!r}")


def lt_file(d, name, data, **fields):
    """POST /translate_file (multipart, as LibreTranslate's clients send it):
    (status, the answer's JSON)."""
    b = "gl0ssb0undary"
    body = b"".join(('--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
                     % (b, k, v)).encode() for k, v in fields.items())
    body += ('--%s\r\nContent-Disposition: form-data; name="file"; filename="%s"\r\n'
             'Content-Type: text/plain\r\n\r\n' % (b, name)).encode() + data + b"\r\n"
    body += ("--%s--\r\n" % b).encode()
    st, txt = http(d.url + "/translate_file", "POST", body,
                   ctype="multipart/form-data; boundary=" + b)
    return st, json.loads(txt)


def documents(d, g, o):
    """A document with a glossary: its lines as /v1/translate's texts with it."""
    lines = "The engine of the car is broken.\nI like the weather today.\n"
    st, body = lt_file(d, "car.txt", lines.encode(), source="en", target="de",
                       glossary=g.glossary_id)
    check(st == 200, f"/translate_file with a glossary: 200 ({st} {body})")
    if st == 200:
        with urllib.request.urlopen(body["translatedFileUrl"], timeout=60) as r:
            got = r.read().decode()
        check(got.split("\n")[:2] == o[:2], f"/translate_file with a glossary: {got!r}")
    tr = deepl.Translator(KEY, server_url=d.url)
    out = io.BytesIO()
    tr.translate_document(lines.encode(), out, source_lang="EN", target_lang="DE",
                          filename="car.txt", glossary=g.glossary_id)
    got = out.getvalue().decode()
    check(got.split("\n")[:2] == o[:2], f"DeepL's /v2/document with glossary_id: {got!r}")
    only_de_en = json.dumps({"name": "de-en doc", "source_lang": "de", "target_lang": "en",
                             "entries": "Motor\tengine\n"})
    st, gl = http(d.url + "/v2/glossaries", "POST", only_de_en)
    gid = json.loads(gl)["glossary_id"]
    st, body = lt_file(d, "car.txt", lines.encode(), source="en", target="de", glossary=gid)
    check(st == 400 and "de->en" in body.get("error", ""),
          f"/translate_file, a glossary of another pair: 400 ({st} {body})")
    h = tr.translate_document_upload(lines.encode(), source_lang="EN", target_lang="DE",
                                     filename="car.txt", glossary=gid)
    s = tr.translate_document_wait_until_done(h)
    check(s.status.value == "error" and "de->en" in (s.error_message or ""),
          f"/v2/document, a glossary of another pair: its status error ({s.status} {s.error_message})")
    http(d.url + f"/v2/glossaries/{gid}", "DELETE")


def main():
    daemon, model = sys.argv[1], sys.argv[2]
    state = tempfile.mkdtemp(prefix="td-gloss-state-")
    args = ["--state-dir", state, "--max-glossaries", "3", "--max-glossary-bytes", "2K",
            "--max-glossary-entries", "50"]
    with Daemon(daemon, model, *args) as d:
        tr = deepl.Translator(KEY, server_url=d.url)
        cl = deepl.DeepLClient(KEY, server_url=d.url)
        g, m = store_calls(d, tr, cl)
        store_faults(d, tr)
        before = application(d, g, m)
        edits(d, cl, m)
        documents(d, g, before)
        listed = sorted((x.glossary_id, x.name, x.entry_count) for x in tr.list_glossaries())
    with Daemon(daemon, model, *args) as d:
        tr = deepl.Translator(KEY, server_url=d.url)
        after = sorted((x.glossary_id, x.name, x.entry_count) for x in tr.list_glossaries())
        check(after == listed, f"after a restart: the same glossaries ({after})")
        check(tr.get_glossary_entries(g.glossary_id)["engine"] == "Triebwerk",
              "after a restart: the entries")
        st, body = translate(d, ["The engine of the car is broken."], glossary=g.glossary_id)
        check(body["translations"][0]["text"] == before[0], "after a restart: the same translation")
        cl = deepl.DeepLClient(KEY, server_url=d.url)
        check(cl.get_multilingual_glossary(m.glossary_id).name == "multi2"
              and entries_of(cl, m, "EN", "DE") == {"CAR": "Kraftwagen", "wheel": "Rad"},
              "after a restart: the edits kept")
        tr.delete_glossary(g)
        deepl.DeepLClient(KEY, server_url=d.url).delete_multilingual_glossary(m)
        check(tr.list_glossaries() == [], "every glossary deleted")
    with Daemon(daemon, model, *args) as d:
        check(deepl.Translator(KEY, server_url=d.url).list_glossaries() == [],
              "deleted ones stay deleted across a restart")
    shutil.rmtree(state, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
