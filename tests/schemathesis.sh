#!/bin/sh
# tests/schemathesis.sh DAEMON MODEL_DIR VENV [MAX_EXAMPLES [EXTRA_ST_ARGS...]]
#
# The ctest "schemathesis" test (label integration): schemathesis
# (tests/requirements-schemathesis.txt, pinned) from PyPI into VENV (made
# once, remade when the pins change), then `st run` against the daemon's own
# GET /openapi.json on a loopback port with every check (--checks all):
# responses, statuses, content types and headers as documented, schema-valid
# requests accepted, invalid ones rejected, undeclared methods 405 with
# Allow. MAX_EXAMPLES (default 8) bounds the cases per operation; a fixed
# seed makes the bounded run repeatable. EXTRA_ST_ARGS go to `st run` (a
# longer run: `tests/schemathesis.sh D M V 200 --max-time 600 --seed 7`).
# Exit: 0 passed, 1 failed, 77 skipped because PyPI could not be reached
# (said so on stdout).
set -u
if [ $# -lt 3 ]; then
    echo "usage: $0 DAEMON MODEL_DIR VENV [MAX_EXAMPLES [ST_ARGS...]]" >&2
    exit 2
fi
DAEMON=$1 MODEL=$2 VENV=$3
shift 3
MAX=${1:-8}
[ $# -gt 0 ] && shift
here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements-schemathesis.txt
if ! { [ -x "$VENV/bin/st" ] && cmp -s "$req" "$VENV/requirements.txt"; }; then
    rm -rf "$VENV"
    echo "schemathesis.sh: installing schemathesis ($(grep '^schemathesis==' "$req")) into $VENV"
    if python3 -m venv "$VENV" >"$VENV.log" 2>&1 &&
       "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >>"$VENV.log" 2>&1; then
        cp "$req" "$VENV/requirements.txt"
    else
        echo "schemathesis.sh: SKIPPED: could not install schemathesis from PyPI (offline?): $(tail -n 1 "$VENV.log")"
        rm -rf "$VENV"
        exit 77
    fi
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/td-schemathesis.XXXXXX") || exit 2
PID=""
cleanup() {
    [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null && kill -KILL "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "schemathesis.sh: FAIL: $*"; tail -n 20 "$WORK/daemon.log"; exit 1; }
unset TRANSFORMERD_API_KEY TRANSFORMERD_CORS_ORIGINS
# Small limits, so that the document's limits are reached: 8 texts a
# request, beam 4 (alternatives 0..3), 128 tokens a text.
MAX_TOKENS=128
# The glossaries the run makes go to a state directory of its own (removed
# with $WORK), never the user's; the bound on their number is raised past
# what a run makes, so that a valid create is never the quota's 456 (the
# ctest run, 50 cases an operation, makes about 120; a longer run, with
# --max-time, may pass the default 1,000).
# setpriv: the daemon dies with this script, also when ctest kills it
OPENBLAS_NUM_THREADS=1 setpriv --pdeathsig KILL "$DAEMON" serve --model "$MODEL" --host 127.0.0.1 --port 0 --threads 1 \
    --max-batch-texts 8 --max-beam 4 --max-input-tokens $MAX_TOKENS \
    --state-dir "$WORK/state" --max-glossaries 1000000 2>"$WORK/daemon.log" &
PID=$!
i=0
while ! grep -q "ready:" "$WORK/daemon.log"; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "the daemon is not ready"
    kill -0 "$PID" 2>/dev/null || fail "the daemon exited"
    sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/daemon.log" | head -n 1)
# texts no longer than this cannot pass 128 tokens (tests/schemathesis_hooks.py)
export TD_ST_MAX_CHARS=$(( (MAX_TOKENS - 1) / 18 ))
export SCHEMATHESIS_HOOKS=schemathesis_hooks PYTHONPATH="$here"
# One worker: schemathesis' own generation is not always thread-safe (its
# internal errors, below, came with two).
set -- --checks all --max-examples "$MAX" --workers 1 --request-timeout 30 \
    --generation-database none --no-color "$@"
case " $* " in *" --seed "*) ;; *) set -- "$@" --seed 20240601 ;; esac
echo "schemathesis.sh: st run http://127.0.0.1:$port/openapi.json $*"
(cd "$WORK" && "$VENV/bin/st" --config-file "$here/schemathesis.toml" run "http://127.0.0.1:$port/openapi.json" "$@") >"$WORK/st.out" 2>&1
rc=$?
cat "$WORK/st.out"
# An error inside schemathesis itself (its summary counts errors, no failed
# check) says nothing about the daemon: run once more. A failed check is
# never retried.
if [ $rc -ne 0 ] && ! grep -q "failed" "$WORK/st.out" && grep -q " error" "$WORK/st.out"; then
    echo "schemathesis.sh: schemathesis reported an internal error and no failed check: once more"
    (cd "$WORK" && "$VENV/bin/st" --config-file "$here/schemathesis.toml" run "http://127.0.0.1:$port/openapi.json" "$@") >"$WORK/st.out" 2>&1
    rc=$?
    cat "$WORK/st.out"
fi
[ $rc -eq 0 ] || fail "st run exited with $rc"
kill -0 "$PID" 2>/dev/null || fail "the daemon died during the run"
kill -TERM "$PID"
wait "$PID" || fail "exit status after SIGTERM"
PID=""
echo "schemathesis.sh: passed"
exit 0
