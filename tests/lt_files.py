"""tests/lt_files.py: what the PyPI-backed file tests share (catalogs.py,
documents.py, documents_memory.py, real_files.py): a daemon serving one
model (tests/harness.py's, one worker), /translate and /translate_file as
LibreTranslate's clients call them."""
import http.client
import json

import harness
from harness import require


class Daemon(harness.Daemon):
    def __init__(self, exe, model, args=()):
        super().__init__(exe, "--model", model, "--threads", "1", "--workers", "1", *args)

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
        require(st == 200, "POST /translate: %d %s" % (st, data))
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
        require(st == 200, "POST /translate_file %s: %d %s" % (name, st, ans))
        url = ans["translatedFileUrl"]
        st, out = self.request("GET", url[url.index("/download_file/"):])
        require(st == 200, "the download of %s: %d" % (name, st))
        return out, ans
