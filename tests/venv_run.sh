#!/bin/sh
# tests/venv_run.sh NAME REQUIREMENTS VENV SCRIPT [ARGS...]
#
# What the PyPI-backed tests share (libre_clients, catalogs): the pinned
# REQUIREMENTS (a file in tests/) installed from PyPI into VENV (made once,
# remade when the pins change), then tests/SCRIPT ARGS run with its python.
# Exit: the script's, or 77 (skipped, said so on stdout) when PyPI cannot
# be reached.
set -u
if [ $# -lt 4 ]; then
    echo "usage: $0 NAME REQUIREMENTS VENV SCRIPT [ARGS...]" >&2
    exit 2
fi
NAME=$1 VENV=$3
here=$(cd "$(dirname "$0")" && pwd)
req=$here/$2
script=$here/$4
shift 4
if ! { [ -x "$VENV/bin/python" ] && cmp -s "$req" "$VENV/requirements.txt"; }; then
    rm -rf "$VENV"
    echo "$NAME: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $VENV"
    if python3 -m venv "$VENV" >"$VENV.log" 2>&1 &&
       "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >>"$VENV.log" 2>&1; then
        cp "$req" "$VENV/requirements.txt"
    else
        echo "$NAME: SKIPPED: could not install from PyPI (offline?): $(tail -n 1 "$VENV.log")"
        rm -rf "$VENV"
        exit 77
    fi
fi
exec "$VENV/bin/python" "$script" "$@"
