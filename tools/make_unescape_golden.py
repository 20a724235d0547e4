#!/usr/bin/env python3
"""tools/make_unescape_golden.py: tests/data/html_unescape.jsonl, the golden
of srv_html_unescape (server/service/html.c), from Python's html.unescape,
which LibreTranslate applies to every translation it answers. One JSON
array [input, expected] a line. The cases keep to what the daemon's table
covers (HTML 4's entity names, &apos;, numeric references): names only
HTML 5 has (&NewLine;, &bigstar;) are left as written by the daemon and are
not in the golden. Standard library only.

usage: python3 tools/make_unescape_golden.py
"""
import html
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [
    "Tom &amp; Jerry", "a &lt; b &gt; c", "&quot;q&quot; &apos;a&apos;", "&nbsp;x",
    "5&nbsp;&euro; &copy; 2024", "&#169; &#xA9; &#XA9; &#169 &#xa9", "&#0;",
    "&#128;&#x80;&#x9F;&#150;", "&#1;a&#x0B;b&#x7f;c", "&#xD800;", "&#1114112;",
    "&#65536;", "&#x1F600; &#128512;", "&amp &lt &gt &quot", "&ampfoo", "&copyright",
    "&AMP; &LT; &GT; &QUOT; &COPY; &REG;", "&bogus; & ; &; &#; &#x;", "&notit;",
    "&notin;", "&eacute;t&eacute;", "&Eacute", "&hellip; &mdash; &rsquo;",
    "&alpha;&Omega;", "a&#59;b", "&&amp;", "&#38;amp;", "no references at all",
    "&#x110000; &#99999999999;", "&#13;&#x0D;", "&#xFDD0;&#xFFFE;&#x1FFFF;",
    "<p>Tom &amp; Jerry &lt;3</p>", "&lt;script&gt;x&lt;/script&gt;", "&euro", "&sup2;&frac12",
]


def main():
    path = os.path.join(ROOT, "tests", "data", "html_unescape.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for c in CASES:
            f.write(json.dumps([c, html.unescape(c)], ensure_ascii=True) + "\n")
    print("wrote", path, len(CASES), "cases")


if __name__ == "__main__":
    main()
