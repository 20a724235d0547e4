"""tests/browser_common.py - what the browser tests (web_browser.py,
libre_page.py) share: their verdicts (skip: exit 77, fail), the daemon on a
free loopback port that dies with the test, headless chromium through
Debian's chromium-driver and python3-selenium, waiting on the page, and the
console's errors. Messages carry the test's name (its script's).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SKIP = 77
TEST = os.path.splitext(os.path.basename(sys.argv[0]))[0]  # the test's name


def skip(why):
    print(TEST + ": SKIPPED: " + why, file=sys.stderr)
    sys.exit(SKIP)


def fail(why):
    print(TEST + ": FAIL: " + why, file=sys.stderr)
    raise SystemExit(1)


def check(cond, why):
    if not cond:
        fail(why)



try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as e:
    skip("python3-selenium is not installed (%s); `sh tools/bootstrap.sh --with-browser` installs it" % e)


class Daemon:
    def __init__(self, exe, model, extra=()):
        self.log = tempfile.NamedTemporaryFile(prefix="td-web-", suffix=".log", delete=False)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        for k in ("TRANSFORMERD_API_KEY", "TRANSFORMERD_DEVICE", "TRANSFORMERD_MODEL"):
            env.pop(k, None)
        # setpriv: the daemon dies with this test, however it ends
        self.p = subprocess.Popen(["setpriv", "--pdeathsig", "KILL",
                                   exe, "serve", "--model", model, "--host", "127.0.0.1",
                                   "--port", "0", "--threads", "1"] + list(extra),
                                  stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        self.port = None
        for _ in range(600):
            if self.p.poll() is not None:
                fail("the daemon exited during start-up:\n" + self.text())
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.1)
        check(self.port, "no 'listening on' line within 60 s")
        self.base = "http://127.0.0.1:%d" % self.port
        for _ in range(600):
            try:
                if self.get("/health/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        fail("the daemon was not ready within 60 s")

    def text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

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

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
        os.unlink(self.log.name)


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


