#!/bin/sh
# bt_compare.sh [STEPS] - does stage 1h's back-translated data help? Two
# runs from the committed models/en-de, the same steps, learning rate and
# seed, on the data this machine has (stage 1's catalogue pairs and the Ding
# dictionary): .train-bt0 without the back-translated pairs, .train-bt1 with
# them (named ten times: 54,260 of 615,197 pairs); each exported (the mean of
# its last 2 checkpoints) and scored with transformerd on the committed test
# sets (tools/train/evaluate.py --skip-hf; the first 500 lines of the two
# large ones) next to the committed model. Every stage resumes: a run goes on
# from its newest checkpoint, a finished export or score is kept.
# Writes .train-bt/scores.tsv (set, model, BLEU and chrF, greedy and beam 4).
# Needs tools/.venv (tools/setup_venv.sh), build/transformerd (or TD=PATH) and stage 1h.
set -eu
cd "$(dirname "$0")/../.."
STEPS=${1:-400}
P=tools/.venv/bin/python
EX="--exclude tests/data/en_de_test/test.en --exclude tests/data/en_de_general/test.en
    --exclude tests/data/en_de_dialogue/test.en --exclude tools/train/everyday.en"
BASE="--train .train/corpus/train --train .train/corpus/ding"
BT=""
for _ in 1 2 3 4 5 6 7 8 9 10; do BT="$BT --train .train/bt/train"; done
mkdir -p .train-bt
for run in bt0 bt1; do
    extra=""
    [ $run = bt1 ] && extra=$BT
    # shellcheck disable=SC2086
    [ -f .train-$run/corpus/train.en ] ||
        $P tools/train/pack.py layout --work .train-$run $BASE $extra --dev .train/corpus/dev \
            --spm models/en-de $EX
    [ -f .train-bt/$run/model.safetensors ] && continue
    # shellcheck disable=SC2086
    nice -n 10 $P tools/train/train.py --work .train-$run --init models/en-de --bf16 0 \
        --threads "${THREADS:-1}" --lr 2e-4 --warmup 50 --max-steps "$STEPS" --minutes 100000 \
        --ckpt-minutes 10 --keep 3 --log-every 25
    $P tools/train/export.py --work .train-$run --last 2 --out .train-bt/$run
done
score() { # NAME MODEL TEST LIMIT
    out=.train-bt/eval/$1/$(basename "$(dirname "$3")")
    [ -f "$out/scores.json" ] && return 0
    $P tools/train/evaluate.py --model "$2" --test "$3" --skip-hf --limit "$4" --out "$out" \
        --threads "${THREADS:-1}" --td "${TD:-build/transformerd}" > /dev/null
}
for m in committed:models/en-de bt0:.train-bt/bt0 bt1:.train-bt/bt1; do
    name=${m%%:*} dir=${m#*:}
    score "$name" "$dir" tests/data/en_de_test/test 500
    score "$name" "$dir" tests/data/en_de_general/test 500
    score "$name" "$dir" tests/data/en_de_dialogue/test 0
done
$P - <<'EOF'
import json, os
rows = ["set\tmodel\tgreedy BLEU\tgreedy chrF\tbeam4 BLEU\tbeam4 chrF"]
for s in ("en_de_test", "en_de_general", "en_de_dialogue"):
    for m in ("committed", "bt0", "bt1"):
        j = json.load(open(os.path.join(".train-bt/eval", m, s, "scores.json")))
        def get(mode, what):
            return "%.1f" % j["transformerd." + mode][what]
        rows.append("\t".join([s, m, get("greedy", "bleu"), get("greedy", "chrf"),
                               get("beam4", "bleu"), get("beam4", "chrf")]))
open(".train-bt/scores.tsv", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
EOF
