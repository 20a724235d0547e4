#!/usr/bin/env python3
"""tests/replicas.py DAEMON MODEL_DIR - what makes replicas one service
(deploy/README.md, "Many replicas behind a balancer"), on two daemons of the
build tree without a balancer (tests/cluster.py puts one in front):

- X-Request-Id on every answer (200, 404, 400, a transport refusal, a
  preflight): the client's own when it is 1-64 of A-Z a-z 0-9 . _ : -, else
  made up as REPLICA-N (--replica-id) or N (without), never the client's
  bad value; each made-up id distinct; the JSON access log's request_id is
  the answer's header;
- /translate_file's link names the replica (/download_file/r1/NAME): that
  replica sends the file, another answers 421 misdirected, an unknown name
  404; without --replica-id the link has no replica and a replica's link is
  an invalid name (400, as before replicas had names);
- --drain-delay-s: after SIGTERM /health/ready is 503 while a translation
  is still answered 200, then the daemon drains and exits 0;
- a bad --replica-id stops the daemon at start-up.

Python's standard library only; the daemons are tests/harness.py's (they
die with this process). Prints "N passed, N failed"."""
import http.client
import json
import re
import subprocess
import sys
import time
import urllib.parse

import harness
from harness import Daemon, check, finish

harness.print_passes = False  # each check's message says what failed


def request(port, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def multipart(fields, file_name, content):
    b = "----td-replicas-boundary"
    parts = []
    for k, v in fields.items():
        parts.append('--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (b, k, v))
    parts.append('--%s\r\nContent-Disposition: form-data; name="file"; filename="%s"\r\n'
                 'Content-Type: text/plain\r\n\r\n%s\r\n--%s--\r\n' % (b, file_name, content, b))
    return "".join(parts).encode(), {"Content-Type": "multipart/form-data; boundary=" + b}


def check_ids(port, prefix):
    """X-Request-Id on the answers of one daemon whose made-up ids look like
    PREFIX + N."""
    tr = json.dumps({"text": ["Hello world."]}).encode()
    jh = {"Content-Type": "application/json"}
    asks = [("GET", "/health/live", None, {}), ("GET", "/nothing-here", None, {}),
            ("POST", "/v1/translate", tr, jh), ("POST", "/v1/translate", b"{", jh),
            ("OPTIONS", "/v1/translate", None, {"Origin": "http://x", "Access-Control-Request-Method": "POST"}),
            ("POST", "/v1/translate", b"x" * 2048, dict(jh, **{"Content-Length": "2048"}))]
    made = []
    for method, path, body, h in asks:
        st, hd, _ = request(port, method, path, body, h)
        rid = hd.get("x-request-id", "")
        check(re.fullmatch(re.escape(prefix) + r"\d+", rid), "%s %s (%d): made-up id %r, want %sN"
              % (method, path, st, rid, prefix))
        made.append(rid)
        for given in ("retry-7f3a.b_c:9", "A" * 64, "1"):
            st2, hd2, _ = request(port, method, path, body, dict(h, **{"X-Request-Id": given}))
            check(hd2.get("x-request-id") == given and st2 == st, "%s %s: id %r came back as %r (status %d, %d)"
                  % (method, path, given, hd2.get("x-request-id"), st2, st))
        for bad in ("has space", 'q"uote', "A" * 65, "", "caf\u00e9".encode().decode("latin-1"), "a/b", "a,b"):
            st2, hd2, _ = request(port, method, path, body, dict(h, **{"X-Request-Id": bad}))
            got = hd2.get("x-request-id", "")
            check(re.fullmatch(re.escape(prefix) + r"\d+", got), "%s %s: bad id %r answered with %r, want %sN"
                  % (method, path, bad, got, prefix))
            made.append(got)
    check(len(set(made)) == len(made), "made-up ids repeat: %s" % made)
    return made


def poll_status(port, path, want, tries=100):
    """The status of GET path once it is want (at most tries polls)."""
    st = None
    for _ in range(tries):
        try:
            st = request(port, "GET", path)[0]
        except OSError:
            st = None
        if st == want:
            break
        time.sleep(0.01)
    return st


def upload(port):
    body, h = multipart({"source": "en", "target": "de"}, "greeting.txt", "Hello world.\n")
    st, _, data = request(port, "POST", "/translate_file", body, h)
    check(st == 200, "/translate_file: %d %r" % (st, data[:200]))
    return json.loads(data).get("translatedFileUrl", "") if st == 200 else ""


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    daemon, model = sys.argv[1], sys.argv[2]
    common = ["--model", model, "--log-format", "json", "--max-body-bytes", "1024", "--workers", "1",
              "--cors-origins", "*"]
    d1 = Daemon(daemon, *common, "--replica-id", "r1")
    d2 = Daemon(daemon, *common, "--replica-id", "r2")
    d0 = Daemon(daemon, *common)
    p1, p2, p0 = d1.port, d2.port, d0.port
    try:
        made = check_ids(p1, "r1-")
        check_ids(p0, "")
        # the JSON access log's request_id is the header
        st, hd, _ = request(p1, "GET", "/health/ready", None, {"X-Request-Id": "trace-me-42"})
        time.sleep(0.2)
        logged = [json.loads(ln) for ln in open(d1.log.name, errors="replace") if ln.startswith("{")]
        ids = {j.get("request_id") for j in logged}
        check("trace-me-42" in ids and made[0] in ids, "request_id missing from the JSON log (%d lines)" % len(logged))
        check(all(isinstance(j.get("id"), int) for j in logged), "the JSON log's id is no longer the number")

        # download links name the replica
        url = upload(p1)
        u = urllib.parse.urlsplit(url)
        m = re.fullmatch(r"/download_file/r1/([0-9a-f]{32}\.greeting\.txt)", u.path)
        if check(m, "the link does not name replica r1: %r" % url):
            st, hd, data = request(p1, "GET", u.path)
            check(st == 200 and hd.get("content-disposition") == "attachment; filename=greeting.txt" and data,
                  "r1's own link: %d %r" % (st, hd))
            st, _, data = request(p2, "GET", u.path)
            check(st == 421 and b"r1" in data and b"r2" in data, "r1's link on r2: %d %r, want 421 naming both" % (st, data))
            st, _, data = request(p0, "GET", u.path)
            check(st == 400, "r1's link on a daemon without --replica-id: %d, want 400 (an invalid name)" % st)
            st, _, _ = request(p1, "GET", "/download_file/r1/" + "0" * 32 + ".greeting.txt")
            check(st == 404, "an unknown file on its replica: %d, want 404" % st)
            for bad in ("/download_file/..%2fetc", "/download_file/r1/..%2fetc", "/download_file/.r1/x.txt"):
                st, _, _ = request(p1, "GET", bad)
                check(st == 400, "%s: %d, want 400 (an invalid name)" % (bad, st))
            st, _, _ = request(p1, "GET", "/download_file/" + m.group(1))
            check(st == 200, "r1's file without the replica segment, on r1: %d, want 200" % st)
        url0 = upload(p0)
        p = urllib.parse.urlsplit(url0).path
        check(re.fullmatch(r"/download_file/[0-9a-f]{32}\.greeting\.txt", p), "without --replica-id: %r" % url0)
        st, _, _ = request(p0, "GET", p)
        check(st == 200, "the link of a daemon without --replica-id: %d" % st)
    finally:
        for d in (d1, d2, d0):
            d.stop()

    # --drain-delay-s: after SIGTERM unready (503) but still serving, then
    # the drain and exit 0. 5 s is a bound a broken daemon cannot meet (it
    # answers the next request with 503 at once), not a measurement.
    dd = Daemon(daemon, *common, "--drain-delay-s", "5")
    pd = dd.port
    try:
        dd.proc.send_signal(15)
        st_ready = poll_status(pd, "/health/ready", 503)
        check(st_ready == 503, "/health/ready after SIGTERM with --drain-delay-s: %s, want 503" % st_ready)
        st, _, data = request(pd, "POST", "/v1/translate", json.dumps({"text": ["Hello."]}).encode(),
                              {"Content-Type": "application/json"})
        check(st == 200, "a translation during --drain-delay-s: %d %r, want 200" % (st, data[:200]))
        check(dd.proc.wait(120) == 0, "exit status after the drain")
    finally:
        dd.stop()

    for bad in ("a/b", "x" * 41, ".hidden", "sp ace"):
        r = subprocess.run(["setpriv", "--pdeathsig", "KILL", daemon, "serve", "--host", "127.0.0.1", "--port", "0",
                            "--model", model, "--replica-id", bad], capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and "--replica-id" in r.stderr, "--replica-id %r: exit %d, %s"
              % (bad, r.returncode, r.stderr[-200:]))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
