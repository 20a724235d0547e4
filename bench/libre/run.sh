#!/bin/sh
# LibreTranslate 1.9.6 itself (from PyPI into bench/libre/.venv, started
# offline) against transformerd on the same Argos Translate packages of the
# bundled models (bench/libre/make_packages.py into $OUT/packages-$QUANT), the same
# cores, the same clients: see bench/libre/run.py for what is measured.
#
#   bench/libre/run.sh                LEVELS (1,8,32), LINES (240), ROUNDS (1),
#                                     THREADS (nproc), QUANT (int8, as argospm's
#                                     packages; none: float32), BUILD (build), OUT
#                                     (/tmp/transformerd-libre), TD_ARGS (default
#                                     --models-dir $OUT/packages-$QUANT)
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/transformerd-libre}
VENV=bench/libre/.venv
req=bench/libre/requirements.txt
if ! { [ -x "$VENV/bin/python" ] && cmp -s "$req" "$VENV/requirements.txt"; }; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$VENV/requirements.txt"
fi
QUANT=${QUANT:-int8}
PKGS=$OUT/packages-$QUANT
mkdir -p "$OUT"
[ -d "$PKGS/translate-en_de-1_0" ] || "$VENV/bin/python" bench/libre/make_packages.py --quantization "$QUANT" "$PKGS"
exec "$VENV/bin/python" bench/libre/run.py --daemon "$BUILD/transformerd" \
    --packages "$PKGS" --lt "$VENV/bin/libretranslate" \
    --levels "${LEVELS:-1,8,32}" --lines "${LINES:-240}" --rounds "${ROUNDS:-1}" \
    --threads "${THREADS:-$(nproc)}" ${TD_ARGS:+--td-args "$TD_ARGS"} --out "$OUT/results-$QUANT.jsonl"
