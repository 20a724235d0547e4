"""tests/browser_common.py - what the browser tests (web_browser.py,
libre_page.py) share beyond tests/harness.py (their verdicts: skip exits
77, a failed check ends the test; the daemon): headless chromium through
Debian's chromium-driver and python3-selenium, waiting on the page, and the
console's errors.
"""
import json
import os
import shutil
import urllib.error
import urllib.request

import harness
from harness import fail, require as check, skip  # noqa: F401 (the tests' verdicts)

try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as e:
    skip("python3-selenium is not installed (%s); `sh tools/bootstrap.sh --with-browser` installs it" % e)


class Daemon(harness.Daemon):
    """The daemon serving model (extra: more arguments); base is its URL."""

    def __init__(self, exe, model, extra=()):
        super().__init__(exe, "--model", model, "--threads", "1", *extra)
        self.base = self.url

    def get(self, path):
        try:
            with urllib.request.urlopen(self.base + path, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def translate(self, body, key=None):
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = "Bearer " + key
        req = urllib.request.Request(self.base + "/v1/translate", json.dumps(body).encode(), h)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)


def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
    if not chromium or not driver:
        skip("chromium or chromedriver is not installed (Debian: chromium chromium-driver; "
             "`sh tools/bootstrap.sh --with-browser` installs them)")
    o = webdriver.ChromeOptions()
    o.binary_location = chromium
    # as root chromium refuses its sandbox; --no-sandbox is what CI's root needs
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1100,900", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        from selenium.webdriver.chrome.service import Service
        return webdriver.Chrome(service=Service(driver), options=o)
    except WebDriverException as e:
        skip("chromium cannot run on this machine (headless, --no-sandbox): %s" %
             str(e).strip().splitlines()[0])


def wait(d, cond, why, timeout=60):
    try:
        return WebDriverWait(d, timeout).until(lambda _: cond())
    except Exception:
        logs = d.get_log("browser")
        fail(why + "; browser log: %s" % logs)


def console_errors(d, allowed=()):
    bad = []
    for e in d.get_log("browser"):
        if e["level"] not in ("SEVERE", "WARNING"):
            continue
        if any(a in e["message"] for a in allowed):
            continue
        bad.append(e)
    check(not bad, "console errors: %s" % bad)


