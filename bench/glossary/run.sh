#!/bin/sh
# Glossaries measured on the bundled en-de model (bench/glossary/run.py):
# the target-term rate and BLEU/chrF with and without a 50-entry glossary.
#   bench/glossary/run.sh [BEAM]        (THREADS=N, default: cores)
# sacrebleu (bench/glossary/requirements.txt) goes into build/bench-glossary-venv.
set -eu
cd "$(dirname "$0")/../.."
BEAM=${1:-4}
THREADS=${THREADS:-$(nproc)}
[ -x build/transformerd ] || make build >/dev/null
VENV=build/bench-glossary-venv
if ! { [ -x "$VENV/bin/python" ] && cmp -s bench/glossary/requirements.txt "$VENV/requirements.txt"; }; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r bench/glossary/requirements.txt
    cp bench/glossary/requirements.txt "$VENV/requirements.txt"
fi
exec "$VENV/bin/python" bench/glossary/run.py --daemon build/transformerd --threads "$THREADS" \
    --beam "$BEAM"
