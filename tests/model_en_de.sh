#!/bin/sh
# The bundled model (models/en-de) end to end: `transformerd translate`
# turns the first N lines of the held-out test set into exactly the text
# transformers produced (MarianMTModel.generate + MarianTokenizer, written by
# tools/train/evaluate.py into tests/data/en_de_test/transformers.*.de),
# greedy and beam 4. Each line is one model input (--no-split), as it was
# for transformers.
#   tests/model_en_de.sh BIN ROOT [N [TRANSLATE-OPTIONS...]]
# (tools/gpu-check.sh passes --device cuda and a --precision.)
set -eu
BIN=$1
ROOT=$2
N=${3:-300}
shift 2
[ $# -gt 0 ] && shift
M=$ROOT/models/en-de
D=$ROOT/tests/data/en_de_test
[ -f "$M/config.json" ] || { echo "model_en_de: no bundled model in $M"; exit 77; }
tmp=$(mktemp -d /tmp/td-model-en-de.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
head -n "$N" "$D/test.en" > "$tmp/src"
status=0
for mode in greedy:1 beam4:4; do
    name=${mode%%:*}
    beam=${mode#*:}
    "$BIN" translate --model "$M" --beam "$beam" --threads 2 --no-split "$@" < "$tmp/src" > "$tmp/$name"
    head -n "$N" "$D/transformers.$name.de" > "$tmp/want"
    if cmp -s "$tmp/want" "$tmp/$name"; then
        echo "model_en_de: $name: $N/$N lines identical to transformers"
    else
        bad=$(diff "$tmp/want" "$tmp/$name" | grep -c '^<' || true)
        echo "model_en_de: $name: $bad of $N lines differ from transformers:" >&2
        diff "$tmp/want" "$tmp/$name" | head -20 >&2
        status=1
    fi
done
exit $status
