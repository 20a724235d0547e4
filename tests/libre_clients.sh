#!/bin/sh
# tests/libre_clients.sh DAEMON MODEL_DIR VENV
#
# The ctest "libre_clients" test (label integration): the LibreTranslate
# client libraries (tests/requirements-clients.txt: libretranslatepy,
# libretranslate-aio, and deep-translator, pinned) from PyPI into VENV
# (tests/venv_run.sh), then tests/libre_clients.py against DAEMON on a
# loopback port. Exit: 0 passed, 1 failed, 77 skipped because PyPI could not
# be reached (said so on stdout).
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 DAEMON MODEL_DIR VENV" >&2
    exit 2
fi
exec sh "$(dirname "$0")/venv_run.sh" libre_clients.sh requirements-clients.txt "$3" \
    libre_clients.py "$1" "$2"
