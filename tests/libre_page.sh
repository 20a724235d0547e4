#!/bin/sh
# tests/libre_page.sh DAEMON MODEL_DIR VENV
#
# The ctest "libre_page" test (label integration): LibreTranslate's own web
# page (the templates and static files of the pinned libretranslate wheel,
# tests/requirements-libre-page.txt) rendered by tests/libre_page.py and
# driven in headless chromium against DAEMON. VENV (made once, remade when
# the pins change) holds Jinja2 and the downloaded wheel; it sees the
# system's python3-selenium. Exit: 0 passed, 1 failed, 77 skipped (PyPI
# unreachable, or no chromium / chromedriver / selenium; said so).
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 DAEMON MODEL_DIR VENV" >&2
    exit 2
fi
DAEMON=$1 MODEL=$2 VENV=$3
here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements-libre-page.txt
if ! { [ -x "$VENV/bin/python" ] && cmp -s "$req" "$VENV/requirements.txt"; }; then
    rm -rf "$VENV"
    echo "libre_page.sh: installing Jinja2 and downloading the libretranslate wheel into $VENV"
    wheel=$(grep '^libretranslate==' "$req")
    # Debian's python3: its python3-selenium is what the venv sees
    py=/usr/bin/python3
    [ -x "$py" ] || py=python3
    if "$py" -m venv --system-site-packages "$VENV" >"$VENV.log" 2>&1 &&
       grep -v -e '^#' -e '^libretranslate==' "$req" >"$VENV.pins" &&
       "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$VENV.pins" \
           >>"$VENV.log" 2>&1 &&
       "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
           -d "$VENV/wheels" "$wheel" >>"$VENV.log" 2>&1; then
        cp "$req" "$VENV/requirements.txt"
    else
        echo "libre_page.sh: SKIPPED: could not install from PyPI (offline?): $(tail -n 1 "$VENV.log")"
        rm -rf "$VENV"
        exit 77
    fi
fi
exec "$VENV/bin/python" "$here/libre_page.py" "$DAEMON" "$MODEL" "$VENV/wheels"
