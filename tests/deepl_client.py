"""The official DeepL client library against `transformerd serve`.

Run by ctest "deepl_client" through tests/venv_run.sh with the pinned
`deepl` (and python-docx, to make and read a .docx) of
tests/requirements-deepl.txt: every call of deepl.Translator with
server_url= pointed at the daemon parses our answers (translate_text,
get_source_languages, get_target_languages, get_usage, translate_document)
and raises what it raises against DeepL for our errors (wrong key:
AuthorizationException; quota: QuotaExceededException). The words are ours
on both sides: each expected translation is what the native API
(/v1/translate) answers for the same text, on the bundled models en-de and
de-en.

usage: deepl_client.py DAEMON MODELS_DIR
"""

import io
import json
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from html.parser import HTMLParser
from xml.etree import ElementTree

import deepl
import docx

import harness
from harness import check, finish

KEY = "deepl-test-key:fx"


class Daemon(harness.Daemon):
    """The daemon serving the bundled en-de and de-en with the API key."""

    def __init__(self, daemon, models, *args):
        super().__init__(daemon, "--model", f"{models}/en-de", "--model", f"{models}/de-en",
                         "--threads", "1", "--api-key", KEY, *args)


def raises(fn, exc):
    try:
        fn()
    except exc as e:
        return e
    except Exception as e:  # the wrong kind: reported by the check
        return f"{type(e).__name__}: {e}"
    return None


def http(url, path, body=None, headers=None, method=None):
    """(status, parsed JSON or bytes) of a raw request."""
    req = urllib.request.Request(url + path, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req) as r:
            st, data, ct = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        st, data, ct = e.code, e.read(), e.headers.get("Content-Type", "")
    return st, json.loads(data) if ct.startswith("application/json") else data


def native(url, texts, src, tgt, split=True):
    """The native API's translations of texts from src to tgt."""
    body = json.dumps({"text": texts, "source": src, "target": tgt,
                       "split_sentences": split}).encode()
    st, j = http(url, "/v1/translate", body, {"Content-Type": "application/json",
                                              "Authorization": f"Bearer {KEY}"})
    assert st == 200, (st, j)
    return [t["text"] for t in j["translations"]]


class Parts(HTMLParser):
    """The elements of an HTML fragment in order, and each top element's text."""

    def __init__(self):
        super().__init__()
        self.tags, self.text, self.top = [], {}, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.top.append(tag)

    def handle_endtag(self, tag):
        self.top.pop()

    def handle_data(self, data):
        if self.top:
            self.text[self.top[0]] = self.text.get(self.top[0], "") + data


def texts(url, tr):
    one = "The house is small."
    r = tr.translate_text(one, target_lang="DE")
    want = native(url, [one], "en", "de")[0]
    check(isinstance(r, deepl.TextResult) and r.text == want and r.detected_source_lang == "EN"
          and r.billed_characters == len(one),
          f"translate_text, source detected: {r.text!r} EN {r.billed_characters} = native {want!r}")
    several = ["I like cats.", "The café is open.", "", "Open the window."]
    rs = tr.translate_text(several, source_lang="EN", target_lang="DE")
    want = native(url, several, "en", "de")
    check([x.text for x in rs] == want and [x.detected_source_lang for x in rs] == ["EN"] * 4
          and [x.billed_characters for x in rs] == [len(t) for t in several],
          f"translate_text, several texts, source given: {[x.text for x in rs]}")
    de = "Das Wetter ist heute schön."
    for tgt in ("EN-GB", "EN-US"):
        r = tr.translate_text(de, target_lang=tgt)
        check(r.text == native(url, [de], "de", "en")[0] and r.detected_source_lang == "DE",
              f"translate_text into {tgt}: German detected, de-en's answer {r.text!r}")
    r = tr.translate_text([one, de], target_lang="DE")
    check([x.text for x in r] == [native(url, [one], "en", "de")[0], de]
          and [x.detected_source_lang for x in r] == ["EN", "DE"],
          "a text already in the target language comes back as it is, detected DE")
    two = "The house is small. I like cats."
    r = tr.translate_text(two, target_lang="DE", split_sentences="0")
    check(r.text == native(url, [two], "en", "de", split=False)[0],
          f"split_sentences 0: the text is one input ({r.text!r})")
    lines = "The house is small.\nI like cats."
    r = tr.translate_text(lines, target_lang="DE", split_sentences="1")
    check(r.text == native(url, [lines], "en", "de")[0] and "\n" in r.text,
          f"split_sentences 1: sentences and lines ({r.text!r})")
    broken = "The house\nis small."
    r = tr.translate_text(broken, target_lang="DE", split_sentences="nonewlines")
    check(r.text == native(url, ["The house is small."], "en", "de")[0],
          f"split_sentences nonewlines: one sentence over the line break ({r.text!r})")
    r = tr.translate_text(one, target_lang="DE", formality="prefer_more", preserve_formatting=True,
                          context="A real estate listing.")
    check(r.text == native(url, [one], "en", "de")[0],
          "formality prefer_more, preserve_formatting and context accepted")
    e = raises(lambda: tr.translate_text(one, target_lang="DE", formality="more"),
               deepl.DeepLException)
    check(isinstance(e, deepl.DeepLException)
          and "'formality' is not supported for given 'target_lang'" in str(e),
          f"formality more on a target without it -> 400 ({e})")
    e = raises(lambda: tr.translate_text(one, target_lang="FR"), deepl.DeepLException)
    check(isinstance(e, deepl.DeepLException) and "target_lang" in str(e)
          and e.http_status_code == 400, f"an unserved target -> 400 ({e})")
    e = raises(lambda: tr.translate_text(one, source_lang="EN", target_lang="DE",
                                         glossary="0123-4567"), deepl.DeepLException)
    check(isinstance(e, deepl.DeepLException) and e.http_status_code == 404
          and "Glossary not found" in str(e), f"an unknown glossary_id -> 404 ({e})")


def markup(url, tr):
    # with ignore_tags, each text node alone, the ignored elements as they are
    html = '<p>The house is <b>small</b>.</p><code>x = 1</code><p>I like cats.</p>'
    r = tr.translate_text(html, target_lang="DE", tag_handling="html", ignore_tags=["code"])
    units = ["The house is", "small", ".", "I like cats."]
    want = native(url, units, "en", "de", split=False)
    expect = (f'<p>{want[0]} <b>{want[1]}</b>{want[2]}</p><code>x = 1</code>'
              f'<p>{want[3]}</p>')
    check(r.text == expect, f"tag_handling html: each text node, <code> ignored ({r.text!r})")
    want = native(url, ["The house is small."], "en", "de")[0]
    for th in ("html", "xml"):
        r = tr.translate_text("<p>  The house\nis small. </p>", target_lang="DE", tag_handling=th)
        check(r.text == f"<p>  {want} </p>",
              f"tag_handling {th}, nonewlines by default: a node's lines one sentence ({r.text!r})")
    # without ignore_tags, HTML as the documents read it: a paragraph's
    # sentences whole, its inline markup on the words that translate it
    html = '<p>The house is <b>small</b> and I like <i>cats</i>.</p><code>x = 1</code>'
    r = tr.translate_text(html, target_lang="DE", tag_handling="html")
    parts = Parts()
    parts.feed(r.text)
    want = native(url, ["The house is small and I like cats."], "en", "de")[0]
    check(parts.tags == ["p", "b", "i", "code"] and parts.text["p"] == want
          and parts.text["code"] == "x = 1",
          f"tag_handling html: a paragraph translated whole, its <b> and <i> kept ({r.text!r})")
    xml = ('<doc><t>The house is small.</t><skip>The house is small.</skip>'
           '<t>I like <x id="1"/>cats.</t></doc>')
    r = tr.translate_text(xml, target_lang="DE", tag_handling="xml", ignore_tags="skip",
                          non_splitting_tags=["x"], splitting_tags=["t"], outline_detection=False)
    root = ElementTree.fromstring(r.text)
    ts = root.findall("t")
    want = native(url, ["The house is small.", "I like", "cats."], "en", "de")
    check(root.tag == "doc" and root.find("skip").text == "The house is small."
          and ts[0].text == want[0] and ts[1].text.strip() == want[1]
          and ts[1].find("x").get("id") == "1" and ts[1].find("x").tail == want[2],
          f"tag_handling xml: the elements kept, <skip> ignored ({r.text!r})")
    doc = '<?xml version="1.0" encoding="UTF-8"?>\n<doc><t>I like cats.</t></doc>'
    r = tr.translate_text(doc, target_lang="DE", tag_handling="xml")
    want = native(url, ["I like cats."], "en", "de")[0]
    check(r.text == f'<?xml version="1.0" encoding="UTF-8"?>\n<doc><t>{want}</t></doc>',
          f"tag_handling xml: a whole document, its declaration kept ({r.text!r})")
    e = raises(lambda: tr.translate_text("<a>broken", target_lang="DE", tag_handling="xml"),
               deepl.DeepLException)
    check(isinstance(e, deepl.DeepLException) and e.http_status_code == 400,
          f"tag_handling xml of no XML -> 400 ({e})")


def languages(tr):
    src = tr.get_source_languages()
    check(sorted((x.code, x.name) for x in src) == [("DE", "German"), ("EN", "English")],
          f"get_source_languages: {[(x.code, x.name) for x in src]}")
    tgt = tr.get_target_languages()
    check(sorted(x.code for x in tgt) == ["DE", "EN-GB", "EN-US"]
          and all(x.supports_formality is False for x in tgt),
          f"get_target_languages: {[(x.code, x.name, x.supports_formality) for x in tgt]}")


def documents(url, tr, tmp):
    lines = ["The house is small.", "", "  I like cats.", "Open the window."]
    src = tmp / "notes.txt"
    src.write_text("\n".join(lines) + "\n")
    out = tmp / "notes.de.txt"
    st = tr.translate_document_from_filepath(src, out, target_lang="DE")
    want = native(url, ["The house is small.", "I like cats.", "Open the window."], "en", "de")
    got = out.read_text().split("\n")
    check(got == [want[0], "", "  " + want[1], want[2], ""],
          f".txt round trip: each line the native translation ({got})")
    check(st.done and st.billed_characters == sum(len(x.strip()) for x in lines),
          f".txt status: done, billed {st.billed_characters}")
    d = docx.Document()
    d.add_paragraph("The weather is nice today.")
    p = d.add_paragraph("Open the window.")
    d.add_paragraph("I like cats.")
    buf = io.BytesIO()
    d.save(buf)
    res = io.BytesIO()
    tr.translate_document(buf.getvalue(), res, target_lang="DE", filename="letter.docx")
    paras = [x.text for x in docx.Document(io.BytesIO(res.getvalue())).paragraphs]
    want = native(url, ["The weather is nice today.", "Open the window.", "I like cats."],
                  "en", "de")
    check(paras == want, f".docx round trip: each paragraph translated ({paras})")
    # the steps one by one: upload, status, result once
    h = tr.translate_document_upload("The house is small.", target_lang="DE",
                                     filename="a.txt")
    check(re.fullmatch(r"[0-9a-f]{32}", h.document_id) and re.fullmatch(r"[0-9a-f]{64}",
                                                                        h.document_key),
          f"upload: id and key ({h.document_id})")
    s = tr.translate_document_get_status(h)
    check(s.status.value in ("queued", "translating", "done"), f"status right after: {s.status}")
    s = tr.translate_document_wait_until_done(h)
    check(s.done and s.billed_characters == len("The house is small."),
          f"waited: done, billed {s.billed_characters}")
    body = io.BytesIO()
    tr.translate_document_download(h, body)
    check(body.getvalue().decode() == native(url, ["The house is small."], "en", "de")[0],
          "result: the translated file")
    e = raises(lambda: tr.translate_document_download(h, io.BytesIO()), deepl.DeepLException)
    check(isinstance(e, deepl.DeepLException) and e.http_status_code == 404,
          f"a second download -> 404: the document is gone ({e})")
    h2 = tr.translate_document_upload("I like cats.", target_lang="DE", filename="b.txt")
    wrong = deepl.DocumentHandle(h2.document_id, "0" * 64)
    e = raises(lambda: tr.translate_document_get_status(wrong), deepl.AuthorizationException)
    check(isinstance(e, deepl.AuthorizationException) and "document_key" in str(e),
          f"status with a wrong document_key -> 403 ({e})")
    e = raises(lambda: tr.translate_document_download(wrong, io.BytesIO()),
               deepl.AuthorizationException)
    check(isinstance(e, deepl.AuthorizationException), f"result with a wrong key -> 403 ({e})")
    check(tr.translate_document_wait_until_done(h2).done, "the right key still works")
    e = raises(lambda: tr.translate_document_upload(b"%PDF-1.4", target_lang="DE",
                                                    filename="x.pdf"), deepl.DeepLException)
    check(isinstance(e, deepl.DeepLException) and e.http_status_code == 400,
          f"an unsupported format -> 400 ({e})")
    h3 = tr.translate_document_upload(b"PK\x03\x04 not a zip", target_lang="DE",
                                      filename="bad.docx")
    s = tr.translate_document_wait_until_done(h3)
    check(s.status.value == "error" and s.error_message, f"a broken .docx: status error "
          f"({s.error_message})")


def raw(url):
    auth = {"Authorization": f"DeepL-Auth-Key {KEY}"}
    form = b"text=The%20house%20is%20small.&text=I%20like%20cats.&target_lang=de"
    st, j = http(url, "/v2/translate", form,
                 dict(auth, **{"Content-Type": "application/x-www-form-urlencoded"}))
    want = native(url, ["The house is small.", "I like cats."], "en", "de")
    check(st == 200 and [t["text"] for t in j["translations"]] == want
          and "billed_characters" not in j["translations"][0],
          f"form body, text repeated, lower-case target: {st} {j}")
    st, j = http(url, "/v2/translate", form, {"Content-Type":
                                              "application/x-www-form-urlencoded"})
    check(st == 403 and set(j) == {"message"}, f"no Authorization -> 403 ({st} {j})")
    st, j = http(url, "/v2/translate", form, {
        "Authorization": f"Bearer {KEY}", "Content-Type": "application/x-www-form-urlencoded"})
    check(st == 403, f"the key as Bearer is not DeepL's header -> 403 ({st})")
    body = json.dumps({"text": ["a"] * 51, "target_lang": "DE"}).encode()
    st, j = http(url, "/v2/translate", body, dict(auth, **{"Content-Type": "application/json"}))
    check(st == 400 and "'text'" in j["message"], f"51 texts -> 400 naming text ({st} {j})")
    body = json.dumps({"target_lang": "DE"}).encode()
    st, j = http(url, "/v2/translate", body, dict(auth, **{"Content-Type": "application/json"}))
    check(st == 400 and "text" in j["message"], f"no text -> 400 naming it ({st} {j})")
    body = json.dumps({"text": "x", "target_lang": "DE", "split_sentences": "2"}).encode()
    st, j = http(url, "/v2/translate", body, dict(auth, **{"Content-Type": "application/json"}))
    check(st == 400 and "split_sentences" in j["message"], f"split_sentences 2 -> 400 ({st} {j})")
    st, j = http(url, "/v2/languages?type=target", None, auth)
    check(st == 200 and {x["language"] for x in j} == {"DE", "EN-GB", "EN-US"},
          f"GET /v2/languages?type=target ({st})")
    st, j = http(url, "/v2/document/" + "0" * 32, b"document_key=" + b"0" * 64,
                 dict(auth, **{"Content-Type": "application/x-www-form-urlencoded"}))
    check(st == 404 and set(j) == {"message"}, f"an unknown document -> 404 ({st} {j})")


def quota(daemon, models):
    with Daemon(daemon, models, "--deepl-character-limit", "40") as d:
        tr = deepl.Translator(KEY, server_url=d.url)
        tr.translate_text("The house is small.", target_lang="DE")  # 19
        e = raises(lambda: tr.translate_text("The weather is nice today.", target_lang="DE"),
                   deepl.QuotaExceededException)
        check(isinstance(e, deepl.QuotaExceededException),
              f"past --deepl-character-limit -> QuotaExceededException ({e})")
        u = tr.get_usage()
        check(u.character.count == 19 and u.character.limit == 40 and not u.any_limit_reached,
              f"get_usage: the refused text is not counted ({u.character.count}/"
              f"{u.character.limit})")
        tr.translate_text("I like cats, a lot.", target_lang="DE")  # 19 more: 38
        h = tr.translate_document_upload("The house is small.", target_lang="DE",
                                         filename="a.txt")
        s = tr.translate_document_wait_until_done(h)
        check(s.status.value == "error" and "Quota" in (s.error_message or ""),
              f"a document past the limit: status error, quota ({s.error_message})")
        tr.translate_text("Hi", target_lang="DE")  # 40: spent
        e = raises(lambda: tr.translate_document_upload("Hello.", target_lang="DE",
                                                        filename="a.txt"),
                   deepl.QuotaExceededException)
        check(isinstance(e, deepl.QuotaExceededException),
              f"an upload once the quota is spent -> QuotaExceededException ({e})")
        u = tr.get_usage()
        check(u.character.count == 40 and u.any_limit_reached,
              f"get_usage: the limit reached ({u.character.count}/{u.character.limit})")


def progress(daemon, models):
    """A document seen while it translates: its status and seconds_remaining
    (each decoding step slowed, one sentence a batch)."""
    with Daemon(daemon, models, "--test-step-delay-ms", "30", "--max-batch-size", "1") as d:
        tr = deepl.Translator(KEY, server_url=d.url)
        lines = ["The house is small.", "I like cats.", "Open the window.",
                 "The weather is nice today.", "The cat is in the house.",
                 "We are going to the beach.", "The window is open.", "I like the house."]
        h = tr.translate_document_upload("\n".join(lines), target_lang="DE", filename="p.txt")
        seen, remaining = [], []
        while True:
            s = tr.translate_document_get_status(h)
            seen.append(s.status.value)
            if s.status.value == "translating" and s.seconds_remaining is not None:
                remaining.append(s.seconds_remaining)
            if s.status.value in ("done", "error"):
                break
            time.sleep(0.02)
        check(seen[-1] == "done" and "translating" in seen
              and set(seen) <= {"queued", "translating", "done"},
              f"a document's statuses while it translates: {sorted(set(seen))}")
        check(remaining and all(isinstance(x, int) and x >= 1 for x in remaining),
              f"translating: seconds_remaining given once a sentence is done ({remaining[:5]})")
        out = io.BytesIO()
        tr.translate_document_download(h, out)
        check(out.getvalue().decode().split("\n") == native(d.url, lines, "en", "de"),
              "the slowed document's result")


def full_queue(daemon, models, tmp):
    """Uploads past --document-queue while the one document thread is held
    (--test-document-gate): 429 with Retry-After, and the accepted ones
    translated once the gate opens."""
    gate = tmp / "gate"
    with Daemon(daemon, models, "--document-threads", "1", "--document-queue", "1",
                "--test-document-gate", str(gate)) as d:
        tr = deepl.Translator(KEY, server_url=d.url)
        auth = {"Authorization": f"DeepL-Auth-Key {KEY}"}
        accepted, refused = [], None
        for i in range(6):
            body = (b"--b\r\nContent-Disposition: form-data; name=\"target_lang\"\r\n\r\nDE\r\n"
                    b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"q.txt\"\r\n"
                    b"Content-Type: text/plain\r\n\r\nI like cats.\r\n--b--\r\n")
            req = urllib.request.Request(d.url + "/v2/document", data=body, headers=dict(
                auth, **{"Content-Type": "multipart/form-data; boundary=b"}))
            try:
                with urllib.request.urlopen(req) as r:
                    j = json.loads(r.read())
                    accepted.append(deepl.DocumentHandle(j["document_id"], j["document_key"]))
            except urllib.error.HTTPError as e:
                refused = (e.code, e.headers.get("Retry-After"), json.loads(e.read()))
                break
        check(refused and refused[0] == 429 and refused[1] == "1" and set(refused[2]) == {"message"},
              f"an upload past --document-queue -> 429, Retry-After ({refused})")
        gate.write_text("")
        want = native(d.url, ["I like cats."], "en", "de")[0]
        got = []
        for h in accepted:
            tr.translate_document_wait_until_done(h)
            out = io.BytesIO()
            tr.translate_document_download(h, out)
            got.append(out.getvalue().decode())
        check(accepted and got == [want] * len(accepted),
              f"the {len(accepted)} accepted uploads translated once the thread is free")


def main():
    daemon, models = sys.argv[1], sys.argv[2]
    with Daemon(daemon, models) as d:
        tr = deepl.Translator(KEY, server_url=d.url)
        texts(d.url, tr)
        markup(d.url, tr)
        languages(tr)
        with tempfile.TemporaryDirectory() as tmp:
            documents(d.url, tr, Path(tmp))
        raw(d.url)
        u = tr.get_usage()
        check(u.character.valid and u.character.count > 0
              and u.character.limit == 1000000000000 and not u.any_limit_reached,
              f"get_usage: characters counted, no limit ({u.character.count})")
        e = raises(lambda: deepl.Translator("wrong", server_url=d.url).get_usage(),
                   deepl.AuthorizationException)
        check(isinstance(e, deepl.AuthorizationException),
              f"a wrong key -> AuthorizationException ({e})")
    quota(daemon, models)
    progress(daemon, models)
    with tempfile.TemporaryDirectory() as tmp:
        full_queue(daemon, models, Path(tmp))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
