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
"""
import os

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
