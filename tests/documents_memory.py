#!/usr/bin/env python3
"""tests/documents_memory.py DAEMON MODEL_DIR

The XML readers' bounds in work (server/service/xmllimits.h) as the daemon's
memory shows them (python3's standard library alone: the documents are made
with zipfile). The daemon serves the bundled model with --max-body-bytes of 4 MiB;
before each upload its peak RSS (VmHWM) is reset (/proc/PID/clear_refs) and
after the answer read again, against the RSS before:
  - a 353 KB .docx of two 60 MB parts of digit-only paragraphs (a ratio of
    ~340): 400 naming the ratio limit, peak under +64 MiB (it took the
    daemon from 0.12 to 5.4 GB, and kept 5.3 GB);
  - the same parts with a random number every 20th paragraph (a ratio of
    ~90, 1.3 MB): 400 naming the node limit, peak under +160 MiB (the one
    part inflated, scanned and freed);
  - a document at the limits (140,000 paragraphs of three runs, ~1.96 M of
    the 2 M nodes, 11 MB of XML in 200 KB, one sentence to translate):
    translated, peak under +384 MiB (docs/decisions.md: ~205 MiB here),
    and the RSS back within +48 MiB of where it was once answered (the
    heap handed back: malloc_trim after a document of 1 MB or more).
RSS is the process's, so the bounds are loose against the daemon's other
allocations; the point is an order of magnitude, not a figure. Skipped
(77) when /proc/PID/clear_refs cannot be written.
"""
import io
import random
import sys
import time
import zipfile

from harness import fail, require as check  # a failed check ends the test
from lt_files import Daemon

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
CT = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://schemas.'
      'openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType='
      '"application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" '
      'ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="'
      'application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
      '</Types>')
MIB = 1 << 20


def document(inner):
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="%s">'
            '<w:body>%s</w:body></w:document>' % (W, inner)).encode()


def digits(rng, n_paras, runs=1, every=0):
    """n_paras paragraphs of runs runs of "1", a random number every
    every-th paragraph (0: never)."""
    out = []
    for i in range(n_paras):
        t = "%d" % rng.randrange(10**6) if every and i % every == 0 else "1"
        out.append("<w:p>" + "<w:r><w:t>%s</w:t></w:r>" % t * runs + "</w:p>")
    return "".join(out)


def docx(parts):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", CT)
        for name, data in parts:
            z.writestr(name, data)
    return b.getvalue()


def status_kib(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    fail("no %s in /proc/%d/status" % (key, pid))


def peak_of(d, name, data):
    """Uploads data; (status, answer, RSS before, peak during, RSS after) in bytes."""
    pid = d.proc.pid
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = status_kib(pid, "VmRSS") * 1024
    st, ans = d.post_file(name, data)
    time.sleep(0.5)  # the request freed after its answer (complete())
    return st, ans, before, status_kib(pid, "VmHWM") * 1024, status_kib(pid, "VmRSS") * 1024


def main():
    if len(sys.argv) != 3:
        fail("usage: documents_memory.py DAEMON MODEL_DIR")
    d = Daemon(sys.argv[1], sys.argv[2], ("--max-body-bytes", str(4 << 20)))
    try:
        try:
            with open("/proc/%d/clear_refs" % d.proc.pid, "w") as f:
                f.write("5")
        except OSError as e:
            print("documents_memory: SKIPPED: cannot reset the peak RSS (%s)" % e)
            sys.exit(77)
        rng = random.Random(1)
        hello = document('<w:p><w:r><w:t>Hello.</w:t></w:r></w:p>')
        d.translate_file("warm.docx", docx([("word/document.xml", hello)]))

        bomb = document(digits(rng, 60_000_000 // 35))
        data = docx([("word/document.xml", bomb), ("word/header1.xml", bomb)])
        check(len(data) < 400_000, "the digit-only .docx is %d bytes" % len(data))
        st, ans, before, peak, _ = peak_of(d, "digits.docx", data)
        print("digits.docx (%d KB, 2 x 60 MB parts): %d, peak +%.1f MiB"
              % (len(data) // 1000, st, (peak - before) / MIB))
        check(st == 400 and "the limit on an entry's ratio" in ans.get("error", ""),
              "digits.docx: %d %s" % (st, ans))
        check(peak - before < 64 * MIB, "digits.docx: peak RSS +%d MiB" % ((peak - before) // MIB))

        part = document(digits(rng, 60_000_000 // 35, every=20))
        data = docx([("word/document.xml", part), ("word/header1.xml", part)])
        st, ans, before, peak, _ = peak_of(d, "nodes.docx", data)
        print("nodes.docx (%d KB, 2 x 60 MB parts): %d, peak +%.1f MiB"
              % (len(data) // 1000, st, (peak - before) / MIB))
        check(st == 400 and "the limit on nodes per document" in ans.get("error", ""),
              "nodes.docx: %d %s" % (st, ans))
        check(peak - before < 160 * MIB, "nodes.docx: peak RSS +%d MiB" % ((peak - before) // MIB))

        part = document(digits(rng, 140_000, runs=3, every=8) +
                        '<w:p><w:r><w:t>Save the file.</w:t></w:r></w:p>')
        data = docx([("word/document.xml", part)])
        st, ans, before, peak, after = peak_of(d, "limits.docx", data)
        print("limits.docx (%d KB, %.1f MB of XML): %d, peak +%.1f MiB, after +%.1f MiB"
              % (len(data) // 1000, len(part) / 1e6, st, (peak - before) / MIB,
                 (after - before) / MIB))
        check(st == 200, "limits.docx: %d %s" % (st, ans))
        check(peak - before < 384 * MIB, "limits.docx: peak RSS +%d MiB" % ((peak - before) // MIB))
        check(after - before < 48 * MIB,
              "limits.docx: RSS +%d MiB after the answer (the heap not given back)"
              % ((after - before) // MIB))
    finally:
        d.stop()
    print("documents_memory: OK")


if __name__ == "__main__":
    main()
