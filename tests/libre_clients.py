"""The LibreTranslate client libraries against `transformerd serve`.

Run by tests/libre_clients.sh (ctest "libre_clients") with the pinned
libretranslatepy, libretranslate-aio and deep-translator of
tests/requirements-clients.txt: every call the libraries expose succeeds or
fails as it would against LibreTranslate 1.9 (its shapes, status codes and
messages), with the fixture
model given: ctest passes the Argos Translate package tests/data/argos (the
Marian test model tests/data/text/marian_en_de converted to CTranslate2; en
-> de; nonsense but deterministic translations, compared with the native
API's answer for the same text).

usage: libre_clients.py DAEMON MODEL_DIR
"""

import asyncio
import json
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import html

import httpx
import libretranslate_aio as lta
from bs4 import BeautifulSoup
from deep_translator import LibreTranslator
from deep_translator.exceptions import AuthorizationException
from libretranslatepy import LibreTranslateAPI

from harness import Daemon, check, finish

EN = "The weather is nice today and we are going to the beach."
DE = "Das Wetter ist heute schön und wir fahren an den Strand."
KEY = "s3cret-key"


def http_error(fn):
    """(status, JSON body) of the urllib.error.HTTPError fn raises."""
    try:
        fn()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())
    return None, None


def raises(fn, exc):
    try:
        fn()
    except exc as e:
        return e
    return None


def native(url, text):
    r = httpx.post(f"{url}/v1/translate", json={"text": text})
    r.raise_for_status()
    return [t["text"] for t in r.json()["translations"]]


def libretranslatepy_calls(url):
    lt = LibreTranslateAPI(url)
    langs = lt.languages()
    check(langs == [{"code": "en", "name": "English", "targets": ["de"]},
                    {"code": "de", "name": "German", "targets": []}],
          f"libretranslatepy languages: {langs}")
    want = native(url, "Hello world")[0]
    check(want != "" and lt.translate("Hello world", "en", "de") == want,
          "libretranslatepy translate = the native translation")
    check(lt.translate("Hello\r\nworld", "en", "de") == native(url, "Hello\nworld")[0],
          "libretranslatepy translate: form line endings become LF")
    check(lt.translate(" \t ", "en", "de") == "", "libretranslatepy translate whitespace -> ''")
    st, body = http_error(lambda: lt.translate("", "en", "de"))
    check(st == 400 and body == {"error": "Invalid request: missing q parameter"},
          f"libretranslatepy translate '' -> 400 missing q ({st} {body})")
    st, body = http_error(lambda: lt.translate("Hello", "en", "fr"))
    check(st == 400 and body == {"error": "fr is not supported"},
          f"libretranslatepy translate to fr -> 400 ({st} {body})")
    st, body = http_error(lambda: lt.translate("Hello", "de", "en"))
    check(st == 400 and "is not available as a target language" in body.get("error", ""),
          f"libretranslatepy translate de->en (no model) -> 400 ({st} {body})")
    d = lt.detect(EN)
    check(d[0]["language"] == "en" and 50 < d[0]["confidence"] <= 100
          and isinstance(d[0]["confidence"], float), f"libretranslatepy detect English: {d}")
    d = lt.detect(DE)
    check(d[0]["language"] == "de" and 50 < d[0]["confidence"] <= 100,
          f"libretranslatepy detect German: {d}")
    st, body = http_error(lambda: lt.detect(""))
    check(st == 400 and body == {"error": "Invalid request: missing q parameter"},
          "libretranslatepy detect '' -> 400")


def libretranslatepy_keys(url):
    good, bad = LibreTranslateAPI(url, api_key=KEY), LibreTranslateAPI(url, api_key="wrong")
    check(good.translate("Hello world", "en", "de") == native_key(url, "Hello world"),
          "libretranslatepy with the key translates")
    st, body = http_error(lambda: bad.translate("Hello world", "en", "de"))
    check(st == 403 and body == {"error": "Invalid API key"},
          f"libretranslatepy bad key -> 403 Invalid API key ({st} {body})")
    st, body = http_error(lambda: bad.detect(EN))
    check(st == 403, f"libretranslatepy detect with a bad key -> 403 ({st})")
    check(len(bad.languages()) == 2, "libretranslatepy languages needs no key")
    st, body = http_error(lambda: LibreTranslateAPI(url).translate("Hello", "en", "de"))
    check(st == 400 and "API key" in body.get("error", ""),
          f"libretranslatepy without a key -> 400 ({st} {body})")


def native_key(url, text):
    r = httpx.post(f"{url}/v1/translate", json={"text": text},
                   headers={"Authorization": f"Bearer {KEY}"})
    r.raise_for_status()
    return r.json()["translations"][0]["text"]


def aio_sync_calls(url):
    a, b = native(url, ["Hello world", "Open the window"])
    with lta.LibreTranslate(url) as c:
        t = c.translate("Hello world", "en", "de")
        check(t.translated_text == a and t.detected_language is None,
              "aio translate str")
        t = c.translate(["Hello world", "", "Open the window"], "en", "de")
        check(t.translated_text == [a, "", b], f"aio translate list (repeated form q): {t}")
        t = c.translate("Hello world", "en", "de", alternatives=2)
        check(t.translated_text == a and isinstance(t.alternatives, list)
              and len(t.alternatives) == 2, f"aio translate alternatives=2: {t.alternatives}")
        t = c.translate('<p class="c">Hello world <b>Open the window</b></p>', "en", "de",
                        format="html")
        check(t.translated_text == f'<p class="c">{a} <b>{b}</b></p>',
              f"aio translate html: {t.translated_text}")
        t = c.translate(DE, "auto", "de")
        check(t.translated_text == DE and t.detected_language.language == "de"
              and t.detected_language.confidence < 100,
              f"aio auto on German for German: copied, detected de ({t.detected_language})")
        t = c.translate(EN, "auto", "de")
        check(t.detected_language.language == "en" and t.translated_text == native(url, EN)[0],
              f"aio auto on English: {t.detected_language}")
        d = c.detect(DE)
        check(d[0].language == "de" and d[1].language == "en"
              and d[0].confidence > d[1].confidence, f"aio detect German: {d}")
        d = c.detect(EN)
        check(d[0].language == "en", f"aio detect English: {d}")
        ls = c.languages()
        check([l.code for l in ls] == ["en", "de"] and ls[0].targets == ["de"],
              f"aio languages: {ls}")
        fs = c.frontend_settings()
        check(fs.language.target.code == "de" and fs.suggestions is False
              and ".txt" in fs.supported_files_format, f"aio frontend_settings: {fs}")
        check(c.health() is True, "aio health")
        e = raises(lambda: c.suggest("Hello", "Hallo", "en", "de"), lta.ForbiddenError)
        check(e is not None and "disabled" in str(e), f"aio suggest -> ForbiddenError ({e})")
        e = raises(lambda: c.translate("", "en", "de"), lta.BadRequestError)
        check(e is not None and "missing q" in str(e), f"aio translate '' -> BadRequestError ({e})")
        e = raises(lambda: c.translate("x", "en", "de", format="pdf"), lta.BadRequestError)
        check(e is not None and "pdf format is not supported" in str(e),
              f"aio format=pdf -> BadRequestError ({e})")
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "notes.txt"
            p.write_bytes("Hello world\n\n  Open the window\r\n".encode())
            f = c.translate_file(p, "en", "de")
            r = httpx.get(f.translated_file_url)
            check(r.status_code == 200
                  and r.content.decode() == f"{a}\n\n  {b}\r\n"
                  and 'filename=notes.txt' in r.headers.get("content-disposition", ""),
                  f"aio translate_file .txt round trip ({r.status_code} {r.content!r})")
            p = Path(d) / "page.html"
            p.write_text("<html><body><h1>Hello world</h1><p title='x'>Open the window</p>"
                         "</body></html>")
            f = c.translate_file(p, "en", "de")
            r = httpx.get(f.translated_file_url)
            check(r.status_code == 200 and f"<h1>{a}</h1>" in r.text
                  and f'<p title="x">{b}</p>' in r.text,
                  f"aio translate_file .html round trip ({r.text})")
            p = Path(d) / "x.pdf"
            p.write_bytes(b"%PDF-1.4")
            e = raises(lambda: c.translate_file(p, "en", "de"), lta.BadRequestError)
            check(e is not None and "file format not supported" in str(e),
                  f"aio translate_file .pdf -> BadRequestError ({e})")
            p = Path(d) / "x.docx"
            p.write_bytes(b"PK")
            e = raises(lambda: c.translate_file(p, "en", "de"), lta.BadRequestError)
            check(e is not None and "x.docx: not a zip archive" in str(e),
                  f"aio translate_file a broken .docx -> BadRequestError ({e})")


async def aio_async_calls(url):
    a = native(url, "Hello world")[0]
    async with lta.AsyncLibreTranslate(url) as c:
        ts = await asyncio.gather(*[c.translate("Hello world", "en", "de") for _ in range(8)])
        check(all(t.translated_text == a for t in ts), "aio async: 8 concurrent translations")
        d = await c.detect(EN)
        check(d[0].language == "en", "aio async detect")
        check(await c.health(), "aio async health")


def aio_keys(url):
    with lta.LibreTranslate(url, api_key="wrong") as c:
        e = raises(lambda: c.translate("Hello", "en", "de"), lta.ForbiddenError)
        check(e is not None and e.status_code == 403 and str(e) == "Invalid API key",
              f"aio bad key -> ForbiddenError ({e})")
        e = raises(lambda: c.detect("Hello"), lta.ForbiddenError)
        check(e is not None, "aio detect with a bad key -> ForbiddenError")
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "a.txt"
            p.write_text("Hello")
            e = raises(lambda: c.translate_file(p, "en", "de"), lta.ForbiddenError)
            check(e is not None, "aio translate_file with a bad key -> ForbiddenError")
    with lta.LibreTranslate(url, api_key=KEY) as c:
        check(c.translate("Hello world", "en", "de").translated_text == native_key(url, "Hello world"),
              "aio with the key translates")
        check(c.frontend_settings().key_required is True, "aio frontend_settings: keyRequired")


def deep_translator_calls(url):
    """deep-translator's LibreTranslator: q, source, target and api_key in
    the query string of a POST with an empty body (it wants a key even for a
    server without one, which ignores it)."""
    t = LibreTranslator(source="en", target="de", custom_url=f"{url}/", api_key="unused")
    a, b = native(url, ["Hello world", "Save the file?"])
    check(t.translate("Hello world") == a, "deep-translator translate = the native translation")
    check(t.translate_batch(["Hello world", "Save the file?"]) == [a, b],
          "deep-translator translate_batch")
    auto = LibreTranslator(source="auto", target="de", custom_url=f"{url}/", api_key="unused")
    check(auto.translate(EN) == native(url, EN)[0], "deep-translator source auto")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "a.txt"
        p.write_text("Save the file?")
        check(t.translate_file(str(p)) == b, "deep-translator translate_file")


def deep_translator_keys(url):
    good = LibreTranslator(source="en", target="de", custom_url=f"{url}/", api_key=KEY)
    check(good.translate("Hello world") == native_key(url, "Hello world"),
          "deep-translator with the key translates")
    bad = LibreTranslator(source="en", target="de", custom_url=f"{url}/", api_key="wrong")
    check(raises(lambda: bad.translate("Hello world"), AuthorizationException) is not None,
          "deep-translator bad key -> AuthorizationException (403)")


def html_answer(url, unescaped, key=None):
    """format=html: LibreTranslate answers through Python's html.unescape
    after BeautifulSoup serialises the translated tree, which makes the
    escaped text of a page live markup; the daemon answers the serialised
    tree with its escapes, and LibreTranslate's answer with
    --libre-html-answer unescaped. A script, which is not translated,
    comes back as the one pipeline or the other makes it."""
    script = "<script>if (a &lt; b &amp;&amp; c) { t = '&copy;'; }</script>"
    body = {"q": script + "<p>Hello world</p>", "source": "en", "target": "de",
            "format": "html"}
    if key:
        body["api_key"] = key
    r = httpx.post(f"{url}/translate", json=body)
    tree = str(BeautifulSoup(script, "html.parser"))
    want = html.unescape(tree) if unescaped else tree
    got = r.json().get("translatedText", "")
    check(r.status_code == 200 and got.startswith(want),
          f"html (unescaped={unescaped}): the untranslated script ({got!r}, want {want!r})")


def raw_inputs(url):
    """What the libraries cannot send: invalid UTF-8, empty native texts."""
    r = httpx.post(f"{url}/translate", content=b"q=%ff&source=en&target=de",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    check(r.status_code == 400 and r.json() == {"error": "Invalid request: q is not valid UTF-8"},
          f"form q not UTF-8 -> 400 naming q ({r.status_code} {r.text})")
    r = httpx.post(f"{url}/translate", data={"source": "en", "target": "de"},
                   files={"q": (None, b"caf\xe9")})
    check(r.status_code == 400 and "q is not valid UTF-8" in r.json().get("error", ""),
          f"multipart q not UTF-8 -> 400 ({r.status_code} {r.text})")
    r = httpx.post(f"{url}/v1/translate", json={"text": ["", " \n", "Hello world"]})
    tr = r.json()["translations"]
    check(r.status_code == 200 and [t["text"] for t in tr[:2]] == ["", ""]
          and [t["score"] for t in tr[:2]] == [0, 0] and tr[2]["text"] == native(url, "Hello world")[0],
          "native empty and whitespace texts -> '' with score 0")


def main():
    daemon, model = sys.argv[1], sys.argv[2]
    with Daemon(daemon, "--model", model, "--threads", "1", "--max-beam", "4") as d:
        libretranslatepy_calls(d.url)
        aio_sync_calls(d.url)
        asyncio.run(aio_async_calls(d.url))
        deep_translator_calls(d.url)
        html_answer(d.url, unescaped=False)
        raw_inputs(d.url)
    with Daemon(daemon, "--model", model, "--threads", "1", "--api-key", KEY,
                "--libre-html-answer", "unescaped") as d:
        html_answer(d.url, unescaped=True, key=KEY)
        libretranslatepy_keys(d.url)
        aio_keys(d.url)
        deep_translator_keys(d.url)
    return finish()

if __name__ == "__main__":
    sys.exit(main())
