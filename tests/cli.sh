#!/bin/sh
# tests/cli.sh DAEMON MODEL_DIR
#
# The ctest "cli" test: every command's --help and -h (exit 0, defaults
# shown; serve: every option's), `version` / `--version` (the CMake project
# version and the git commit), the model directory's defaults (docs/api.md:
# TRANSFORMERD_MODEL, the source tree's models/en-de, the installed one)
# and serve's check of it before it listens (exit 1, the path named),
# translate's progress on stderr only when stderr is a terminal (util-linux
# `script` gives it one), translate's lines written as each is done (read
# back one by one from a pipe kept open), translate-ids against
# transformers' ids in batches.
# Exit 0 passed, 1 failed.
set -u
D=$1 MODEL=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/td-cli.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT
fail() { echo "cli: FAIL: $*"; [ -f "$T/out" ] && head -n 40 "$T/out"; exit 1; }
unset TRANSFORMERD_MODEL

for c in translate tokenize translate-ids serve; do
    for h in --help -h; do
        "$D" $c $h >"$T/out" 2>&1 || fail "$c $h: exit $?"
        grep -q "^usage: transformerd $c" "$T/out" || fail "$c $h: no usage line"
        grep -q "default" "$T/out" || fail "$c $h: no defaults"
    done
done
# serve: every option line shows its default
"$D" serve --help >"$T/out" 2>&1
n_opt=$(grep -c '^  --' "$T/out")
n_def=$(grep '^  --' "$T/out" | grep -c '(default: [^)]*)$')
[ "$n_opt" -gt 20 ] && [ "$n_opt" = "$n_def" ] || fail "serve --help: $n_def of $n_opt options show a default"
grep -q -- '--max-batch-size .*(default: 32)$' "$T/out" || fail "serve --help: --max-batch-size default"
grep -q -- '--scheduler .*(default: inflight)$' "$T/out" || fail "serve --help: --scheduler default"
echo "cli: --help ok"

# version: the CMake project version and the commit
want=$(sed -n 's/^project(transformerd .*VERSION \([0-9.]*\)).*/\1/p' "$SRC/CMakeLists.txt")
for v in version --version; do
    "$D" $v >"$T/out" 2>&1 || fail "$v: exit $?"
    grep -q "^transformerd $want (commit [0-9a-z-]*)\$" "$T/out" || fail "$v: want version $want"
done
if head=$(git -C "$SRC" rev-parse --short=12 HEAD 2>/dev/null); then
    grep -q "(commit $head" "$T/out" || fail "version: want commit $head"
fi
echo "cli: version ok ($(cat "$T/out"))"

# the default model: the environment, else the source tree's, else installed
if [ -f "$SRC/models/en-de/config.json" ]; then def="$SRC/models/en-de"; else def=/usr/share/transformerd/models/en-de; fi
(cd "$T" && "$D" translate --help) >"$T/out" 2>&1
grep -q "(default: $def)" "$T/out" || fail "translate --help: want the default model $def"
(cd "$T" && TRANSFORMERD_MODEL=/elsewhere/m "$D" serve --help) >"$T/out" 2>&1
grep -q -- "--model .*(default: /elsewhere/m)" "$T/out" || fail "serve --help: TRANSFORMERD_MODEL not the default"
echo 'Hello world' | (cd "$T" && TRANSFORMERD_MODEL=$MODEL "$D" tokenize --pieces) >"$T/out" 2>&1 ||
    fail "tokenize with TRANSFORMERD_MODEL from another directory"
grep -q '</s>' "$T/out" || fail "tokenize: $(cat "$T/out")"
echo "cli: default model ok"

# serve checks the model directory before it listens
"$D" serve --model "$T/none" --port 0 >"$T/out" 2>&1 </dev/null
rc=$?
[ $rc = 1 ] || fail "serve --model (missing): exit $rc, want 1"
grep -q "model directory '$T/none'" "$T/out" || fail "serve: the missing directory is not named"
grep -q "listening" "$T/out" && fail "serve listened with a missing model directory"
mkdir "$T/half"
ln -s "$MODEL/config.json" "$T/half/config.json"
"$D" serve --model "$T/half" --port 0 >"$T/out" 2>&1 </dev/null
rc=$?
[ $rc = 1 ] || fail "serve --model (no weights): exit $rc, want 1"
grep -q "model.safetensors" "$T/out" || fail "serve: the missing file is not named"
grep -q "listening" "$T/out" && fail "serve listened without model.safetensors"
echo "cli: model directory checks ok"

# progress: on a terminal only
printf 'Hello world\nSave the file?\nthe test.\n' >"$T/in"
OPENBLAS_NUM_THREADS=1 "$D" translate --model "$MODEL" --threads 1 <"$T/in" >"$T/o1" 2>"$T/err" ||
    fail "translate: exit $?"
[ "$(wc -l <"$T/o1")" = 3 ] || fail "translate: not 3 lines"
grep -q "lines/s" "$T/err" && fail "translate: progress written to a file"
if command -v script >/dev/null 2>&1; then
    OPENBLAS_NUM_THREADS=1 script -qec "'$D' translate --model '$MODEL' --threads 1 <'$T/in' >'$T/o2'" /dev/null >"$T/out" 2>&1 ||
        fail "translate on a terminal: exit $?"
    grep -q "3 lines in .* lines/s" "$T/out" || fail "translate on a terminal: no progress"
    cmp -s "$T/o1" "$T/o2" || fail "translate on a terminal: other output"
    echo "cli: progress ok"
else
    echo "cli: no util-linux script: progress on a terminal not checked"
fi

# translate writes each line as soon as it is done, without waiting for
# more input or its end: a line at a time into a pipe that stays open, each
# answer read before the next line is written (the same lines as from a
# file; 30 s without an answer fails)
printf 'Hello world\n\nSave the file? Then close it.\nthe test.\n' >"$T/in2"
OPENBLAS_NUM_THREADS=1 "$D" translate --model "$MODEL" --threads 1 <"$T/in2" >"$T/o3" 2>/dev/null ||
    fail "translate: exit $?"
python3 - "$D" "$MODEL" "$T/in2" "$T/o3" >"$T/out" 2>&1 <<'PY' || fail "translate line by line"
import select, subprocess, sys
d, model, src, want = sys.argv[1:]
lines = open(src, "rb").read().splitlines()
want = open(want, "rb").read().splitlines()
p = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", d, "translate", "--model", model,
                      "--threads", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, env={"OPENBLAS_NUM_THREADS": "1"})
try:
    for i, line in enumerate(lines):
        p.stdin.write(line + b"\n")
        p.stdin.flush()
        ready, _, _ = select.select([p.stdout], [], [], 30)
        if not ready:
            sys.exit("line %d: no answer while the input stays open" % (i + 1))
        got = p.stdout.readline().rstrip(b"\n")
        if got != want[i]:
            sys.exit("line %d: %r, from a file %r" % (i + 1, got, want[i]))
    p.stdin.close()
    rest = p.stdout.read()
    if p.wait(60) != 0 or rest:
        sys.exit("exit %s, more output %r" % (p.returncode, rest))
finally:
    p.kill()
PY
echo "cli: translate line by line ok"

# translate-ids: the golden's source ids of every case, a batch of them at
# once, give transformers' beam-4 ids (golden.json, make_text_fixture.py)
python3 - "$MODEL/golden.json" "$T/ids" "$T/want" <<'PY' || fail "translate-ids: cannot read the golden"
import json, sys
g = json.load(open(sys.argv[1]))
cases = [c for c in g["cases"] if len(c["source_ids"]) > 1][:40]
open(sys.argv[2], "w").write("".join(" ".join(map(str, c["source_ids"])) + "\n" for c in cases))
open(sys.argv[3], "w").write("".join(" ".join(map(str, c["beam4"]["output_ids"])) + "\n" for c in cases))
PY
OPENBLAS_NUM_THREADS=1 "$D" translate-ids --model "$MODEL" --threads 1 --beam 4 --batch 16 \
    <"$T/ids" >"$T/got" 2>"$T/out" || fail "translate-ids: exit $?"
cut -f1 "$T/got" >"$T/got_ids"
[ "$(wc -l <"$T/want")" -ge 20 ] || fail "translate-ids: too few golden cases"
cmp -s "$T/got_ids" "$T/want" || { diff "$T/got_ids" "$T/want" | head -n 6 >"$T/out"; fail "translate-ids: ids differ from the golden"; }
echo "cli: translate-ids ok ($(wc -l <"$T/want") golden lines, batches of 16)"
# translate --source --target: a multilingual model (tests/data/m2m, both
# layouts) gives transformers' text of every golden case, greedy and beam 4,
# each language pair a run; both flags required there, refused for a model
# without languages, an unknown code named
G=$SRC/tests/data/m2m
python3 - "$D" "$G" <<'PY' >"$T/out" 2>&1 || fail "translate --source --target"
import json, subprocess, sys
d, g = sys.argv[1:]
gold = json.load(open(g + "/golden.json"))
n = 0
for name, lay in gold["layouts"].items():
    pairs = {}
    for c in lay["cases"]:
        pairs.setdefault((c["src_lang"], c["tgt_lang"]), []).append(c)
    for (sl, tl), cs in pairs.items():
        for mode, beam in (("greedy", "1"), ("beam4", "4")):
            src = "".join(c["text"] + "\n" for c in cs).encode()
            got = subprocess.run([d, "translate", "--model", f"{g}/{lay['dir']}", "--source", sl,
                                  "--target", tl, "--beam", beam, "--no-split", "--threads", "1",
                                  "--max-length", str(gold["max_length"] - 1)],
                                 input=src, capture_output=True, check=True).stdout
            want = [c[mode]["text"] for c in cs]
            if got.decode().splitlines() != want:
                sys.exit(f"{name} {sl}->{tl} {mode}: {got.decode().splitlines()} != {want}")
            n += len(cs)
print(n)
PY
n_m2m=$(tail -n 1 "$T/out")
[ "$n_m2m" -ge 20 ] || fail "translate --source --target: $n_m2m golden cases"
echo hi | "$D" translate --model "$G/m2m100" >"$T/o" 2>"$T/out" && fail "m2m100 without --source: exit 0"
grep -q -- "--source LANG --target LANG" "$T/out" || fail "m2m100 without --source: no hint"
echo hi | "$D" translate --model "$G/m2m100" --source en --target xx >"$T/o" 2>"$T/out" &&
    fail "--target xx: exit 0"
grep -q "no language 'xx'" "$T/out" || fail "--target xx: not named"
echo hi | "$D" translate --model "$MODEL" --source en --target de >"$T/o" 2>"$T/out" &&
    fail "--source on a model without languages: exit 0"
grep -q "no language tokens" "$T/out" || fail "--source on a model without languages: no message"
printf '\n' | "$D" translate --model "$G/m2m100" --source en --target de >"$T/o" 2>"$T/out" ||
    fail "m2m100 empty line: exit $?"
[ "$(cat "$T/o")" = "" ] && [ "$(wc -l <"$T/o")" = 1 ] || fail "m2m100 empty line: not one empty line"
echo "cli: translate --source --target ok ($n_m2m golden cases of M2M100 and NLLB)"
exit 0
