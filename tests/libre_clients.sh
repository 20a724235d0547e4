#!/bin/sh
# tests/libre_clients.sh DAEMON MODEL_DIR VENV
#
# The ctest "libre_clients" test (label integration): the LibreTranslate
# client libraries (tests/requirements-clients.txt: libretranslatepy,
# libretranslate-aio, and deep-translator, pinned) from PyPI into VENV (made once, remade when
# the pins change), then tests/libre_clients.py against DAEMON on a
# loopback port. Exit: 0 passed, 1 failed, 77 skipped because PyPI could not
# be reached (said so on stdout).
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 DAEMON MODEL_DIR VENV" >&2
    exit 2
fi
DAEMON=$1 MODEL=$2 VENV=$3
here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements-clients.txt
if ! { [ -x "$VENV/bin/python" ] && cmp -s "$req" "$VENV/requirements.txt"; }; then
    rm -rf "$VENV"
    echo "libre_clients.sh: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $VENV"
    if python3 -m venv "$VENV" >"$VENV.log" 2>&1 &&
       "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >>"$VENV.log" 2>&1; then
        cp "$req" "$VENV/requirements.txt"
    else
        echo "libre_clients.sh: SKIPPED: could not install the client libraries from PyPI (offline?): $(tail -n 1 "$VENV.log")"
        rm -rf "$VENV"
        exit 77
    fi
fi
exec "$VENV/bin/python" "$here/libre_clients.py" "$DAEMON" "$MODEL"
