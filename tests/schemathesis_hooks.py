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
of 5) goes on the wire as a part holding the text "null" or "5".
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


@schemathesis.hook
def filter_body(context, body):
    if isinstance(body, dict):
        if "file" in body and not all(isinstance(v, str) for k, v in body.items()
                                      if k in ("file", "source", "target", "api_key")):
            return False
        return _short(body.get("text")) and _short(body.get("q"))
    return True


@schemathesis.hook
def filter_case(context, case):
    # the stateful phase builds its cases without filter_body
    return filter_body(context, case.body)
