#!/usr/bin/env python3
"""tests/api_record.py DAEMON [--record]

The ctest "api_record" test (label integration): a recorded set of requests
-- every endpoint, the errors of each, both dialects (native and
LibreTranslate), the model administration, the HTTP framing errors -- sent
one after another as raw bytes to one daemon serving the bundled models, and
the answers (status line, headers, body) compared with
tests/data/api_record.txt, which was written by this script against the
daemon before the server was restructured into layers. It holds the
daemon's answers byte for byte across the restructuring and after it.

What is not compared byte for byte, because it is not the daemon's to fix:
the Date header; the build's commit and version; the random name of a
translated file; the test's temporary folder and the checkout's; the
workers' scratch_bytes and workers_bytes (what they grew to depends on which
took which request), a model's resident_bytes and the process's memory
parts (measured); a number with a fraction is
compared to 3 decimals (a score or an attention weight differs in its last
digits between CPUs); and the Content-Length of a body with any of these; a body over 4 KiB is compared by its SHA-256
(after those replacements); /metrics by its series' names (their values are
latencies).

--record writes the file instead (after a deliberate change of an answer:
review the diff). Standard library only. Exit 0 passed, 1 failed.
"""
import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile

from harness import Daemon

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "data", "api_record.txt")
KEY = "k3y-record"
JSON = {"Content-Type": "application/json"}
AUTH = {"X-API-Key": KEY}
AJ = dict(AUTH, **JSON)
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def multipart(fields, files):
    """A multipart/form-data body: fields {name: value}, files [(name,
    filename, type, bytes)]."""
    b = "rec0rdb0undary"
    out = b""
    for k, v in fields.items():
        out += ('--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (b, k, v)).encode()
    for name, fn, ctype, data in files:
        out += ('--%s\r\nContent-Disposition: form-data; name="%s"; filename="%s"\r\n'
                'Content-Type: %s\r\n\r\n' % (b, name, fn, ctype)).encode() + data + b"\r\n"
    out += ("--%s--\r\n" % b).encode()
    return {"Content-Type": "multipart/form-data; boundary=" + b}, out


def j(s):
    return s.encode()


# (name, method, target, headers, body) or (name, RAW, bytes) for framing.
RAW = "RAW"
MP_TXT = multipart({"source": "en", "target": "de", "api_key": KEY},
                   [("file", "note.txt", "text/plain", b"Hello world.\n  Good morning.\r\n")])
MP_HTML = multipart({"source": "auto", "target": "de", "api_key": KEY},
                    [("file", "page.html", "text/html", b"<p>The house is <b>green</b>.</p>\n")])
MP_BAD = multipart({"source": "en", "target": "de", "api_key": KEY},
                   [("file", "data.bin", "application/octet-stream", b"\x00\x01")])
MP_NOFILE = multipart({"source": "en", "target": "de", "api_key": KEY}, [])
REQUESTS = [
    # health, version, metrics, openapi, the web page
    ("live", "GET", "/health/live", {}, None),
    ("live_v2", "GET", "/v2/health/live", {}, None),
    ("ready", "GET", "/health/ready", {}, None),
    ("ready_v2", "GET", "/v2/health/ready", {}, None),
    ("ready_head", "HEAD", "/health/ready", {}, None),
    ("version", "GET", "/version", {}, None),
    ("openapi", "GET", "/openapi.json", {}, None),
    ("spec", "GET", "/spec", {}, None),
    ("openapi_post", "POST", "/openapi.json", JSON, j("{}")),
    ("page", "GET", "/", {}, None),
    ("page_js", "GET", "/web/app.js", {}, None),
    ("page_css", "GET", "/web/app.css", {}, None),
    ("page_icon", "GET", "/web/icon.svg", {}, None),
    ("page_etag", "GET", "/web/icon.svg", {"If-None-Match": '"x", W/"y"'}, None),
    ("page_etag_match", "GET", "/web/icon.svg", {"If-None-Match": '"3669a465110dc0a0"'}, None),
    ("docs", "GET", "/docs", {}, None),
    ("docs_js", "GET", "/web/docs.js", {}, None),
    ("unknown_path", "GET", "/nope", {}, None),
    ("unknown_web", "GET", "/web/nope.js", {}, None),
    # the native API
    ("tr_one", "POST", "/v1/translate", AJ, j('{"text":"Hello world.","model":"en-de"}')),
    ("tr_list", "POST", "/v1/translate", AJ,
     j('{"text":["Good morning.","The house is green."],"source":"en","target":"de"}')),
    ("tr_pair_de", "POST", "/v1/translate", AJ, j('{"text":"Guten Morgen.","source":"de","target":"en"}')),
    ("tr_auto", "POST", "/v1/translate", AJ, j('{"text":"Das Haus ist gr\\u00fcn und sehr alt.","source":"auto"}')),
    ("tr_routed_by_text", "POST", "/v1/translate", AJ, j('{"text":"The weather is nice today."}')),
    ("tr_greedy_tokens", "POST", "/v1/translate", AJ,
     j('{"text":"Hello world.","model":"en-de","beam_size":1,"return_tokens":true}')),
    ("tr_attention", "POST", "/v1/translate", AJ,
     j('{"text":"Hello.","model":"en-de","return_attention":true,"attention_layers":[-1],"attention_heads":[0]}')),
    ("tr_hypotheses", "POST", "/v1/translate", AJ,
     j('{"text":"Thank you.","model":"en-de","num_hypotheses":3,"length_penalty":0.5,"max_length":20}')),
    ("tr_long_text", "POST", "/v1/translate", AJ,
     j('{"text":"First sentence here.  Second one follows!\\n\\nA new paragraph?","model":"en-de"}')),
    ("tr_no_split", "POST", "/v1/translate", AJ,
     j('{"text":"One. Two.","model":"en-de","split_sentences":false}')),
    ("tr_empty_texts", "POST", "/v1/translate", AJ, j('{"text":["", "  ", "Yes."],"model":"en-de"}')),
    ("tr_nul", "POST", "/v1/translate", AJ, j('{"text":"a\\u0000b","model":"en-de"}')),
    ("tr_bad_json", "POST", "/v1/translate", AJ, j('{"text":')),
    ("tr_not_object", "POST", "/v1/translate", AJ, j('["x"]')),
    ("tr_unknown_field", "POST", "/v1/translate", AJ, j('{"text":"x","colour":1}')),
    ("tr_duplicate_key", "POST", "/v1/translate", AJ, j('{"text":"x","text":"y"}')),
    ("tr_missing_text", "POST", "/v1/translate", AJ, j('{"model":"en-de"}')),
    ("tr_bad_type", "POST", "/v1/translate", AJ, j('{"text":"x","beam_size":"4"}')),
    ("tr_out_of_range", "POST", "/v1/translate", AJ, j('{"text":"x","beam_size":99}')),
    ("tr_too_many_hyp", "POST", "/v1/translate", AJ, j('{"text":"x","beam_size":2,"num_hypotheses":3}')),
    ("tr_no_texts", "POST", "/v1/translate", AJ, j('{"text":[]}')),
    ("tr_model_unknown", "POST", "/v1/translate", AJ, j('{"text":"x","model":"zz"}')),
    ("tr_pair_unknown", "POST", "/v1/translate", AJ, j('{"text":"x","source":"en","target":"fr"}')),
    ("tr_model_pair_mismatch", "POST", "/v1/translate", AJ, j('{"text":"x","model":"en-de","source":"de"}')),
    ("tr_attention_layer_bad", "POST", "/v1/translate", AJ,
     j('{"text":"x","model":"en-de","return_attention":true,"attention_layers":[99]}')),
    ("tr_too_long", "POST", "/v1/translate", AJ, j('{"text":"%s","model":"en-de"}' % ("word " * 600))),
    ("tr_response_too_large", "POST", "/v1/translate", AJ,
     j('{"text":[%s],"model":"en-de","return_attention":true,"max_length":250,"beam_size":4,"num_hypotheses":4}'
       % ",".join(['"%s"' % ("long text " * 40)] * 64))),
    ("tr_no_key", "POST", "/v1/translate", JSON, j('{"text":"x"}')),
    ("tr_wrong_key", "POST", "/v1/translate", {"Authorization": "Bearer nope", "Content-Type": "application/json"},
     j('{"text":"x"}')),
    ("tr_bearer", "POST", "/v1/translate", {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"},
     j('{"text":"Yes.","model":"en-de"}')),
    ("tr_media_type", "POST", "/v1/translate", dict(AUTH, **{"Content-Type": "text/plain"}), j('{"text":"x"}')),
    ("tr_get", "GET", "/v1/translate", AUTH, None),
    ("tr_options", "OPTIONS", "/v1/translate",
     {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "content-type, x-api-key"}, None),
    ("tr_cors", "POST", "/v1/translate", dict(AJ, Origin="https://app.example"), j('{"text":"Yes.","model":"en-de"}')),
    ("tr_absolute_form", "POST", "http://example.test:9/v1/translate", AJ, j('{"text":"No.","model":"en-de"}')),
    # the models
    ("models", "GET", "/v1/models", {}, None),
    ("models_put", "PUT", "/v1/models", AJ, j("{}")),
    ("model_reload", "POST", "/v1/models/en-de/reload", AUTH, None),
    ("model_reload_unknown", "POST", "/v1/models/zz/reload", AUTH, None),
    ("model_reload_no_key", "POST", "/v1/models/en-de/reload", {}, None),
    ("model_reload_get", "GET", "/v1/models/en-de/reload", AUTH, None),
    ("model_unload_no_key", "DELETE", "/v1/models/extra", {}, None),
    ("model_load_no_key", "POST", "/v1/models", JSON, j('{"path":"extra"}')),
    ("model_unload", "DELETE", "/v1/models/extra", AUTH, None),
    ("model_unload_unknown", "DELETE", "/v1/models/extra", AUTH, None),
    ("model_admin_get", "GET", "/v1/models/en-de", AUTH, None),
    ("model_load", "POST", "/v1/models", AJ, j('{"path":"extra","name":"extra","source":"de","target":"en"}')),
    ("model_load_exists", "POST", "/v1/models", AJ, j('{"path":"extra","name":"extra"}')),
    ("model_load_missing", "POST", "/v1/models", AJ, j('{"path":"nowhere"}')),
    ("model_load_escape", "POST", "/v1/models", AJ, j('{"path":"../.."}')),
    ("model_load_bad", "POST", "/v1/models", AJ, j('{"path":"broken"}')),
    ("model_load_bad_field", "POST", "/v1/models", AJ, j('{"path":1}')),
    ("models_after", "GET", "/v1/models", {}, None),
    # LibreTranslate
    ("lt_translate", "POST", "/translate", JSON,
     j('{"q":"Hello world.","source":"en","target":"de","api_key":"%s"}' % KEY)),
    ("lt_translate_list", "POST", "/translate", JSON,
     j('{"q":["Good morning.","Thank you."],"source":"en","target":"de","api_key":"%s"}' % KEY)),
    ("lt_translate_auto", "POST", "/translate", JSON,
     j('{"q":"Ich habe heute keine Zeit, aber morgen gerne.","source":"auto","target":"en","api_key":"%s"}' % KEY)),
    ("lt_translate_alternatives", "POST", "/translate", JSON,
     j('{"q":"Thank you.","source":"en","target":"de","alternatives":2,"api_key":"%s"}' % KEY)),
    ("lt_translate_html", "POST", "/translate", JSON,
     j('{"q":"<p>The <b>house</b> is green.</p>","source":"en","target":"de","format":"html","api_key":"%s"}' % KEY)),
    ("lt_translate_form", "POST", "/translate", FORM,
     j("q=Good+night.&source=en&target=de&api_key=" + KEY)),
    ("lt_translate_query", "POST", "/translate?q=Yes.&source=en&target=de&api_key=" + KEY, {}, None),
    ("lt_translate_header_key", "POST", "/translate", AJ, j('{"q":"No.","source":"en","target":"de"}')),
    ("lt_missing_q", "POST", "/translate", JSON, j('{"source":"en","target":"de","api_key":"%s"}' % KEY)),
    ("lt_missing_target", "POST", "/translate", JSON, j('{"q":"x","source":"en","api_key":"%s"}' % KEY)),
    ("lt_bad_language", "POST", "/translate", JSON, j('{"q":"x","source":"en","target":"xx","api_key":"%s"}' % KEY)),
    ("lt_no_pair", "POST", "/translate", JSON, j('{"q":"x","source":"de","target":"de2","api_key":"%s"}' % KEY)),
    ("lt_bad_format", "POST", "/translate", JSON,
     j('{"q":"x","source":"en","target":"de","format":"pdf","api_key":"%s"}' % KEY)),
    ("lt_bad_alternatives", "POST", "/translate", JSON,
     j('{"q":"x","source":"en","target":"de","alternatives":[1],"api_key":"%s"}' % KEY)),
    ("lt_bad_json", "POST", "/translate", JSON, j('{"q":')),
    ("lt_no_key", "POST", "/translate", JSON, j('{"q":"x","source":"en","target":"de"}')),
    ("lt_wrong_key", "POST", "/translate", JSON, j('{"q":"x","source":"en","target":"de","api_key":"nope"}')),
    ("lt_too_many", "POST", "/translate", JSON,
     j('{"q":[%s],"source":"en","target":"de","api_key":"%s"}' % (",".join(['"a"'] * 65), KEY))),
    ("lt_html_deep", "POST", "/translate", JSON,
     j('{"q":"%s","source":"en","target":"de","format":"html","api_key":"%s"}' % ("<b>" * 300 + "x", KEY))),
    ("lt_bad_utf8_form", "POST", "/translate", FORM, b"q=%FF&source=en&target=de&api_key=" + KEY.encode()),
    ("lt_options", "OPTIONS", "/translate",
     {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}, None),
    ("lt_detect", "POST", "/detect", JSON,
     j('{"q":"Das ist ein Haus, und es ist sehr gro\\u00df.","api_key":"%s"}' % KEY)),
    ("lt_detect_missing", "POST", "/detect", JSON, j('{"api_key":"%s"}' % KEY)),
    ("lt_languages", "GET", "/languages", {}, None),
    ("lt_languages_post", "POST", "/languages", {}, None),
    ("lt_languages_delete", "DELETE", "/languages", {}, None),
    ("lt_settings", "GET", "/frontend/settings", {}, None),
    ("lt_health", "GET", "/health", {}, None),
    ("lt_suggest", "POST", "/suggest", JSON, j('{"q":"x","s":"y","source":"en","target":"de"}')),
    ("lt_file_txt", "POST", "/translate_file", MP_TXT[0], MP_TXT[1]),
    ("lt_file_html", "POST", "/translate_file", MP_HTML[0], MP_HTML[1]),
    ("lt_file_bad_type", "POST", "/translate_file", MP_BAD[0], MP_BAD[1]),
    ("lt_file_missing", "POST", "/translate_file", MP_NOFILE[0], MP_NOFILE[1]),
    ("lt_download_empty", "GET", "/download_file/", {}, None),
    ("lt_download_unknown", "GET", "/download_file/0123456789abcdef0123456789abcdef.x.txt", {}, None),
    # HTTP framing, sent as written
    (RAW, "raw_two_lengths", b"POST /v1/translate HTTP/1.1\r\nHost: h\r\nX-API-Key: " + KEY.encode() +
     b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"),
    (RAW, "raw_length_and_chunked", b"POST /v1/translate HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n{}"),
    (RAW, "raw_te_gzip", b"POST /v1/translate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"),
    (RAW, "raw_no_host", b"GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n"),
    (RAW, "raw_two_hosts", b"GET /health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n"),
    (RAW, "raw_control_byte", b"GET /health/live HTTP/1.1\r\nHost: a\r\nX-A: b\x1bc\r\nConnection: close\r\n\r\n"),
    (RAW, "raw_nul_path", b"GET /health%00/live HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
    (RAW, "raw_body_too_large", b"POST /v1/translate HTTP/1.1\r\nHost: h\r\nX-API-Key: " + KEY.encode() +
     b"\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\nConnection: close\r\n\r\n"),
    (RAW, "raw_chunked", b"POST /v1/translate HTTP/1.1\r\nHost: h\r\nX-API-Key: " + KEY.encode() +
     b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
     b"f\r\n{\"text\":\"Yes.\"\r\n10\r\n,\"model\":\"en-de\"\r\n1\r\n}\r\n0\r\n\r\n"),
    (RAW, "raw_chunked_malformed", b"POST /v1/translate HTTP/1.1\r\nHost: h\r\nX-API-Key: " + KEY.encode() +
     b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
     b"e\r\n{\"text\":\"Yes.\"\r\n0\r\n\r\n"),
    (RAW, "raw_http10", b"GET /health/live HTTP/1.0\r\n\r\n"),
    # after every other request: the series the traffic made
    ("metrics", "GET", "/metrics", {}, None),
]


def send(port, raw):
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    try:
        s.sendall(raw)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    finally:
        s.close()
    return out


def build(method, target, headers, body):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: 127.0.0.1:8080", "Connection: close"]
    lines += ["%s: %s" % kv for kv in headers.items()]
    if body is not None:
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


FLOAT = re.compile(rb"(?<![\d.])-?\d+\.\d+(?:[eE][-+]?\d+)?(?![\d.])")


def normalize(name, resp, tmp):
    """The answer as text, with the replacements the module doc lists."""
    head, sep, body = resp.partition(b"\r\n\r\n")
    if not sep:
        return "(no complete header block: %r)\n" % resp
    raw = body
    body = re.sub(rb'"commit": ?"[^"]*"', b'"commit":"<commit>"', body)
    body = re.sub(rb'"version": ?"[^"]*"', b'"version":"<version>"', body)
    body = re.sub(rb'(commit|version)="[^"]*"', rb'\1="<\1>"', body)
    body = re.sub(rb"[0-9a-f]{32}\.", b"<id>.", body)
    # what the workers hold now depends on which grew for which request
    body = re.sub(rb'"(scratch_bytes|resident_bytes|workers_bytes)": ?\d+', rb'"\1":"<bytes>"', body)
    # the process's memory, measured (memstat.h): its keys, not its values
    body = re.sub(rb'"(rss|file|heap|heap_free|models|langid|cache|other_heap)_bytes": ?\d+',
                  rb'"\1_bytes":"<bytes>"', body)
    body = body.replace(tmp.encode(), b"<tmp>").replace(ROOT.encode(), b"<root>")
    body = FLOAT.sub(lambda m: b"%.3f" % float(m.group(0)), body)
    changed = body != raw
    if name == "metrics":
        names = sorted({ln.split(b" ")[0] for ln in body.split(b"\n") if ln and not ln.startswith(b"#")})
        body = b"\n".join(n for n in names if not n.startswith(b"process_")) + b"\n"
    out = []
    for ln in head.split(b"\r\n"):
        low = ln.lower()
        if low.startswith(b"date:"):
            continue
        if low.startswith(b"content-length:") and (changed or name == "metrics"):
            ln = b"Content-Length: <n>"
        out.append(ln.decode("latin-1"))
    if len(body) > 4096 and name != "metrics":
        body = ("<%d bytes, sha256 %s>\n" % (len(body), hashlib.sha256(body).hexdigest())).encode()
    text = body.decode("utf-8", "backslashreplace")
    return "\n".join(out) + "\n\n" + text + ("" if text.endswith("\n") else "\n(no newline at the end)\n")


def start(daemon, tmp):
    mdir = os.path.join(tmp, "models")
    extra = os.path.join(mdir, "extra")
    os.makedirs(extra)
    for f in os.listdir(os.path.join(ROOT, "models", "de-en")):
        os.symlink(os.path.join(ROOT, "models", "de-en", f), os.path.join(extra, f))
    broken = os.path.join(mdir, "broken")
    os.makedirs(broken)
    with open(os.path.join(broken, "config.json"), "w") as f:
        f.write("{}")
    return Daemon(daemon, "--model", "en-de=" + os.path.join(ROOT, "models", "en-de"),
                  "--model", "de-en=" + os.path.join(ROOT, "models", "de-en"),
                  "--models-dir", mdir, "--model-languages", "extra=de-en",
                  "--threads", "1", "--workers", "1", "--api-key", KEY, "--cors-origins", "*")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    daemon, record = sys.argv[1], "--record" in sys.argv[2:]
    tmp = tempfile.mkdtemp(prefix="td-api-record.")
    d = None
    try:
        d = start(daemon, tmp)
        port = d.port
        blocks = []
        download = None
        for req in REQUESTS:
            if req[0] == RAW:
                name, raw = req[1], req[2]
            else:
                name, method, target, headers, body = req
                raw = build(method, target, headers, body)
            resp = send(port, raw)
            if name == "lt_file_txt":
                m = re.search(rb"/download_file/([0-9a-f]{32}\.[^\"]*)", resp)
                download = m and m.group(1).decode()
            blocks.append("=== %s\n%s" % (name, normalize(name, resp, tmp)))
            if name == "lt_file_txt" and download:
                resp = send(port, build("GET", "/download_file/" + download, {}, None))
                blocks.append("=== lt_download\n%s" % normalize("lt_download", resp, tmp))
        rc = d.stop(wait_s=60)
        if rc != 0:
            sys.stdout.write(d.tail)
            raise SystemExit("api_record: FAIL: exit status %d after SIGTERM" % rc)
        got = "".join(blocks)
        if record:
            with open(GOLDEN, "w", newline="") as f:
                f.write(got)
            print("api_record: wrote %s (%d answers)" % (GOLDEN, len(blocks)))
            return 0
        with open(GOLDEN, newline="") as f:
            want = f.read()
        if got == want:
            print("api_record: %d answers as recorded" % len(blocks))
            return 0
        import difflib
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                   "recorded", "now", n=3))
        print("api_record: FAIL: the answers differ from %s (above)" % GOLDEN)
        return 1
    finally:
        if d is not None:
            d.kill()  # nothing when it was stopped
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
