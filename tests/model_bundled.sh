#!/bin/sh
# A bundled model (models/en-de, models/de-en) end to end: `transformerd
# translate` turns the first N lines of its held-out test set into exactly
# the text transformers produced (MarianMTModel.generate + MarianTokenizer,
# written by tools/train/evaluate.py next to the test set), greedy and beam 4.
# Each line is one model input (--no-split), as it was for transformers, and
# the model's raw output is compared (--no-copy-unknown: no symbol copied).
#   tests/model_bundled.sh BIN ROOT PAIR [N [TRANSLATE-OPTIONS...]]
# PAIR: en-de (tests/data/en_de_test: test.en -> transformers.*.de) or de-en
# (the same pairs reversed: en_de_test/test.de -> de_en_test/transformers.*.en).
# (tools/gpu-check.sh passes --device cuda and a --precision.)
set -eu
BIN=$1
ROOT=$2
PAIR=$3
N=${4:-300}
shift 3
[ $# -gt 0 ] && shift
M=$ROOT/models/$PAIR
case $PAIR in
en-de) SRC=$ROOT/tests/data/en_de_test/test.en; GOLD=$ROOT/tests/data/en_de_test/transformers; TGT=de ;;
de-en) SRC=$ROOT/tests/data/en_de_test/test.de; GOLD=$ROOT/tests/data/de_en_test/transformers; TGT=en ;;
*) echo "model_bundled: unknown pair $PAIR" >&2; exit 2 ;;
esac
tag="model_$(echo "$PAIR" | tr - _)"
[ -f "$M/config.json" ] || { echo "$tag: no bundled model in $M"; exit 77; }
tmp=$(mktemp -d /tmp/td-model-bundled.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
head -n "$N" "$SRC" > "$tmp/src"
status=0
for mode in greedy:1 beam4:4; do
    name=${mode%%:*}
    beam=${mode#*:}
    "$BIN" translate --model "$M" --beam "$beam" --threads 2 --no-split --no-copy-unknown "$@" < "$tmp/src" > "$tmp/$name"
    head -n "$N" "$GOLD.$name.$TGT" > "$tmp/want"
    if cmp -s "$tmp/want" "$tmp/$name"; then
        echo "$tag: $name: $N/$N lines identical to transformers"
    else
        bad=$(diff "$tmp/want" "$tmp/$name" | grep -c '^<' || true)
        echo "$tag: $name: $bad of $N lines differ from transformers:" >&2
        diff "$tmp/want" "$tmp/$name" | head -20 >&2
        status=1
    fi
done
exit $status
