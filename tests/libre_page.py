#!/usr/bin/env python3
"""tests/libre_page.py DAEMON MODEL_DIR WHEEL_DIR

LibreTranslate's own web page served against transformerd, as a user who
points LibreTranslate's front end at our daemon would run it: the
templates and static files of the pinned libretranslate wheel (in
WHEEL_DIR) rendered with Jinja2 as LibreTranslate's index() and appjs()
render them (its gettext functions returning the English text), served by
a small HTTP server that forwards every other path (/languages,
/frontend/settings, /translate, /detect, /translate_file, /download_file)
to `DAEMON serve --model MODEL_DIR` unchanged. Headless chromium then:
  - translates typed text from English to German: the page shows what
    POST /translate answers for it;
  - with "Auto Detect" as the source, the same;
  - "Translate Files" with "Auto Detect": a .txt file, its download the
    daemon's translation of each line;
  - the browser console has no error.
Exit 77 (skipped) where selenium, chromium or chromedriver is missing.
"""
import http.client
import http.server
import json
import mimetypes
import os
import sys
import tempfile
import threading
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_common import Daemon, browser, check, console_errors, fail, wait  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

import jinja2  # noqa: E402
from markupsafe import Markup  # noqa: E402


def load_wheel(wheel_dir):
    names = [n for n in os.listdir(wheel_dir) if n.startswith("libretranslate-") and
             n.endswith(".whl")]
    check(len(names) == 1, "one libretranslate wheel in %s, found %s" % (wheel_dir, names))
    z = zipfile.ZipFile(os.path.join(wheel_dir, names[0]))
    files = {}
    for n in z.namelist():
        for part in ("libretranslate/templates/", "libretranslate/static/"):
            if n.startswith(part) and not n.endswith("/"):
                files[n[len("libretranslate/"):]] = z.read(n)
    return files


def render(files):
    """index.html and js/app.js as LibreTranslate renders them (app.py's
    index() and appjs(), locales.py's _, _h and _e, with the text kept)."""
    env = jinja2.Environment(loader=jinja2.DictLoader(
        {k[len("templates/"):]: v.decode("utf-8") for k, v in files.items()
         if k.startswith("templates/")}), autoescape=True)

    def gettext(text, **kw):
        return text % kw if kw else text

    env.globals.update(
        _=gettext,
        _h=lambda text, **kw: Markup(gettext(text, **kw)),
        _e=lambda text, **kw: Markup(json.dumps(gettext(text, **kw))),
        url_for=lambda ep, filename=None: "/static/" + filename if ep == "static" else "/")
    index = env.get_template("index.html").render(
        frontendTimeout=500, api_keys=False, get_api_key_link="", web_version=False,
        version="1.9.6", swagger_url="/docs", available_locales=[{"code": "en", "name": "English"}],
        current_locale="en", alternate_locales=[], under_attack=False, hide_api=False,
        frontend_title=None)
    app = env.get_template("app.js.template").render(
        url_prefix="", get_api_key_link="", api_secret="", bogus_api_secret="", under_attack=False)
    return {"/": ("text/html; charset=utf-8", index.encode()),
            "/js/app.js": ("application/javascript; charset=utf-8", app.encode())}


def page_server(files, pages, daemon_port):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def answer(self, status, ctype, body, extra=()):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def forward(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            c = http.client.HTTPConnection("127.0.0.1", daemon_port, timeout=120)
            h = {k: v for k, v in self.headers.items()
                 if k.lower() in ("content-type", "accept", "content-length")}
            c.request(self.command, self.path, body, h)
            r = c.getresponse()
            data = r.read()
            extra = [(k, v) for k, v in r.getheaders()
                     if k.lower() in ("content-disposition",)]
            self.answer(r.status, r.getheader("Content-Type") or "text/plain", data, extra)
            c.close()

        def do_GET(self):
            path = self.path.split("?")[0]
            if path in pages:
                self.answer(200, *pages[path])
            elif path.startswith("/static/") and path[1:] in files:
                ctype = mimetypes.guess_type(path)[0] or "application/octet-stream"
                self.answer(200, ctype, files[path[1:]])
            else:
                self.forward()

        def do_POST(self):
            self.forward()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def libre_translate(dm, q, source):
    body = json.dumps({"q": q, "source": source, "target": "de"}).encode()
    c = http.client.HTTPConnection("127.0.0.1", dm.port, timeout=120)
    c.request("POST", "/translate", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    check(r.status == 200, "POST /translate: %d %s" % (r.status, data))
    return data["translatedText"]


def text_case(d, dm, base, source, text):
    d.get(base + "/")
    wait(d, lambda: len(Select(d.find_element(
        By.CSS_SELECTOR, "select[aria-labelledby=sourceLangLabel]")).options) >= 2,
        "the page's languages never loaded")
    Select(d.find_element(By.CSS_SELECTOR, "select[aria-labelledby=sourceLangLabel]")) \
        .select_by_value(source)
    Select(d.find_element(By.CSS_SELECTOR, "select[aria-labelledby=targetLangLabel]")) \
        .select_by_value("de")
    want = libre_translate(dm, text, source)
    d.find_element(By.ID, "textarea1").send_keys(text)
    wait(d, lambda: d.find_element(By.ID, "textarea2").get_attribute("value") == want,
         "source %s: the page never showed %r (it shows %r)" % (
             source, want, d.find_element(By.ID, "textarea2").get_attribute("value")))


def file_case(d, dm, base, tmp):
    lines = ["The cat sat on the mat.", "Hello world"]
    path = os.path.join(tmp, "note.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    want = "\n".join(libre_translate(dm, ln, "en") for ln in lines) + "\n"
    d.get(base + "/")
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#translation-type-btns button"),
         "no 'Translate Files' button (the daemon's /frontend/settings has no file formats?)")
    d.find_elements(By.CSS_SELECTOR, "#translation-type-btns button")[1].click()
    wait(d, lambda: len(Select(d.find_element(
        By.CSS_SELECTOR, "select[aria-labelledby=sourceLangLabel]")).options) >= 2,
        "the page's languages never loaded")
    Select(d.find_element(By.CSS_SELECTOR, "select[aria-labelledby=sourceLangLabel]")) \
        .select_by_value("auto")
    Select(d.find_element(By.CSS_SELECTOR, "select[aria-labelledby=targetLangLabel]")) \
        .select_by_value("de")
    d.find_element(By.CSS_SELECTOR, "input[type=file]").send_keys(path)
    buttons = [b for b in d.find_elements(By.CSS_SELECTOR, "button.btn")
               if b.text.strip().lower() == "translate"]
    check(buttons, "no Translate button for the file")
    buttons[0].click()
    link = wait(d, lambda: [a for a in d.find_elements(By.CSS_SELECTOR, "a.btn")
                            if a.text.strip().lower() == "download"],
                "the file was never translated: no Download link")
    url = link[0].get_attribute("href")
    check("/download_file/" in url, "the Download link is %r" % url)
    c = http.client.HTTPConnection("127.0.0.1", dm.port, timeout=60)
    c.request("GET", url[url.index("/download_file/"):])
    r = c.getresponse()
    got = r.read().decode("utf-8")
    check(r.status == 200 and got == want, "the downloaded file: %d %r, want %r" % (
        r.status, got, want))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: libre_page.py DAEMON MODEL_DIR WHEEL_DIR")
    exe, model, wheels = sys.argv[1:]
    files = load_wheel(wheels)
    pages = render(files)
    dm = Daemon(exe, model)
    srv = page_server(files, pages, dm.port)
    base = "http://127.0.0.1:%d" % srv.server_address[1]
    d = browser()
    try:
        with tempfile.TemporaryDirectory(prefix="td-libre-page-") as tmp:
            text_case(d, dm, base, "en", "The cat sat on the mat.")
            text_case(d, dm, base, "auto", "Hello world, the weather is nice today.")
            file_case(d, dm, base, tmp)
        console_errors(d)
    except SystemExit:
        raise
    except Exception as e:  # a selenium error is a failure, said as one
        fail("%s: %s" % (type(e).__name__, e))
    finally:
        d.quit()
        srv.shutdown()
        dm.stop()
    print("libre_page: OK: LibreTranslate 1.9.6's page translated text (en, auto) and a .txt "
          "file (auto) through the daemon")


if __name__ == "__main__":
    main()
