"""Schemathesis hooks for tests/schemathesis.sh (SCHEMATHESIS_HOOKS).

The one limit of the API that JSON Schema cannot state is a text's length
in tokens (--max-input-tokens, x-max-input-tokens in the document: 422 on
/v1/translate, 400 on /translate). A character can become several tokens
(NFKC expands U+FDFA to 18 characters), so no maxLength in characters is
both true and useful. The test keeps generated texts short enough that
no text can pass the limit: TD_ST_MAX_CHARS characters (the script sets
it from the daemon's limit). Everything else is generated as the
document allows, except the negative cases of a multipart body no server
can tell apart: a field of another type than string (a `file` of null or
of 5) goes on the wire as a part holding the text "null" or "5". DeepL's
tag_handling xml takes well-formed XML only (400 otherwise), which no schema
of a string states: its generated texts are kept to characters XML allows,
without markup.

A glossary's entries (the glossary routes' `entries`) are a string whose
lines JSON Schema cannot state either (a tab or a comma between two terms,
no source term twice in any case), nor can it state that a glossary's
source and target language differ by their base (`en`, `EN-GB`) or that
its dictionaries' pairs are distinct. A case generated as valid (positive)
gets entries made of its own generated text, in its format, and pairs made
distinct; a negative case is sent as generated. A glossary holds 32
dictionaries at most, and PATCH and PUT add the pairs they name to those
it has: a valid create keeps its first 24 dictionaries and a valid edit
names pairs of a set of 8 (en into one of 8 codes), so that no edited
glossary passes the bound and a valid edit stays a 200.
"""
import os
import re

import schemathesis

MAX_CHARS = int(os.environ.get("TD_ST_MAX_CHARS", "7"))


def _short(v):
    if isinstance(v, str):
        return len(v) <= MAX_CHARS
    if isinstance(v, list):
        return all(_short(x) for x in v)
    return True


def _xml_chars(v):
    if isinstance(v, list):
        return all(_xml_chars(x) for x in v)
    if not isinstance(v, str):
        return True
    return not any(c in "<&" or (ord(c) < 0x20 and c not in "\t\n\r")
                   or 0xD800 <= ord(c) <= 0xDFFF or ord(c) in (0xFFFE, 0xFFFF) for c in v)


@schemathesis.hook
def filter_body(context, body):
    if isinstance(body, dict):
        if "file" in body and not all(isinstance(v, str) for k, v in body.items()
                                      if k in ("file", "source", "target", "api_key", "filename",
                                               "target_lang", "source_lang", "formality")):
            return False
        if body.get("tag_handling") == "xml" and not _xml_chars(body.get("text")):
            return False
        return _short(body.get("text")) and _short(body.get("q"))
    return True


@schemathesis.hook
def filter_case(context, case):
    # the stateful phase builds its cases without filter_body
    return filter_body(context, case.body)


def _base(code):
    return re.split("[-_]", code)[0].lower() if isinstance(code, str) else code


def _entries(d):
    """d's entries remade valid: a term of the letters and digits of the
    generated entries, and its target, in d's format."""
    term = "".join(c for c in d["entries"] if c.isascii() and c.isalnum())[:16] or "term"
    sep = "," if d.get("entries_format") == "csv" else "\t"
    d["entries"] = f"{term}{sep}{term}x\n"


# the pairs an edit may name: en into one of these
POOL = ["qa" + chr(ord("a") + i) for i in range(8)]
CREATE_MAX = 24


def _dictionary(d, seen, pooled):
    if not isinstance(d, dict):
        return
    if isinstance(d.get("entries"), str):
        _entries(d)
    if pooled and isinstance(d.get("source_lang"), str) and isinstance(d.get("target_lang"), str):
        k = sum(map(ord, d["source_lang"] + d["target_lang"])) % len(POOL)
        while ("en", POOL[k]) in seen:
            k = (k + 1) % len(POOL)
        d["source_lang"], d["target_lang"] = "en", POOL[k]
    s, t = _base(d.get("source_lang")), _base(d.get("target_lang"))
    if isinstance(s, str) and isinstance(t, str):
        # a pair of its own, other than those before it
        k = 0
        while t == s or (s, t) in seen:
            t = "q" + chr(ord("a") + k % 26) + chr(ord("a") + k // 26 % 26)
            k += 1
        if t != _base(d["target_lang"]):
            d["target_lang"] = t
        seen.add((s, t))


@schemathesis.hook
def map_case(context, case):
    meta = getattr(case, "meta", None)
    if (meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, dict)
            or "glossar" not in case.path):
        return case
    seen = set()
    pooled = case.method.upper() in ("PATCH", "PUT")
    _dictionary(case.body, seen, pooled)
    ds = case.body.get("dictionaries")
    if isinstance(ds, list):
        del ds[len(POOL) if pooled else CREATE_MAX:]
        for d in ds:
            _dictionary(d, seen, pooled)
    return case
