"""tests/lt_files.py: what the PyPI-backed file tests share (catalogs.py,
documents.py): a daemon serving one model on a free port (ended with the
test: setpriv's parent-death signal), /translate and /translate_file as
LibreTranslate's clients call them, and the test's failure message (its
name from the script's)."""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

NAME = os.path.splitext(os.path.basename(sys.argv[0]))[0]


def fail(why):
    print("%s: FAIL: %s" % (NAME, why), file=sys.stderr)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)


class Daemon:
    def __init__(self, exe, model, args=()):
        self.log = tempfile.NamedTemporaryFile(prefix="td-%s-" % NAME, suffix=".log", delete=False)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        self.p = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", exe, "serve", "--model", model,
                                   "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                                   "--workers", "1", *args],
                                  stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        for _ in range(600):
            text = open(self.log.name, errors="replace").read()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m and "ready:" in text:
                self.port = int(m.group(1))
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        fail("the daemon did not start:\n" + open(self.log.name, errors="replace").read())

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        c.request(method, path, body, headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def translate(self, q):
        st, data = self.request("POST", "/translate",
                                json.dumps({"q": q, "source": "en", "target": "de"}),
                                {"Content-Type": "application/json"})
        check(st == 200, "POST /translate: %d %s" % (st, data))
        return json.loads(data)["translatedText"]

    def post_file(self, name, data):
        """POST /translate_file: (status, the answer's JSON)."""
        b = "XyZzYfile"
        body = ("--%s\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
                "--%s\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nde\r\n"
                "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n\r\n"
                % (b, b, b, name)).encode() + data + ("\r\n--%s--\r\n" % b).encode()
        st, ans = self.request("POST", "/translate_file", body,
                               {"Content-Type": "multipart/form-data; boundary=" + b})
        return st, json.loads(ans)

    def translate_file(self, name, data):
        """The translated file's bytes and the answer's JSON."""
        st, ans = self.post_file(name, data)
        check(st == 200, "POST /translate_file %s: %d %s" % (name, st, ans))
        url = ans["translatedFileUrl"]
        st, out = self.request("GET", url[url.index("/download_file/"):])
        check(st == 200, "the download of %s: %d" % (name, st))
        return out, ans

    def stop(self):
        self.p.terminate()
        self.p.wait(30)
        os.unlink(self.log.name)
