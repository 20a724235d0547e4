#!/bin/sh
# tests/smoke_daemon.sh DAEMON MODEL_DIR SMOKE_SCRIPT
#
# The ctest "smoke_daemon" test (label integration): starts DAEMON serve on a
# free loopback port (--port 0; the port is read from its "listening on"
# line), runs deploy/smoke.sh against it, then sends SIGTERM and requires the
# drain to end with exit status 0 and "stopped" in the log within 40 s; on
# Linux it also checks that the model workers' threads, and only they, run
# at nice 5 (--worker-nice).
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 DAEMON MODEL_DIR SMOKE_SCRIPT" >&2
    exit 2
fi
DAEMON=$1 MODEL=$2 SMOKE=$3
LOG=$(mktemp "${TMPDIR:-/tmp}/td-smoke-daemon.XXXXXX") || exit 2
PID=""

cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -KILL "$PID" 2>/dev/null
    fi
    rm -f "$LOG"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() {
    echo "smoke_daemon: FAIL: $*" >&2
    echo "--- daemon log ---" >&2
    cat "$LOG" >&2
    exit 1
}

# Environment variables that would change the daemon's options are cleared:
# the test gives its own flags, and flags win, but e.g. an API key would not.
unset TRANSFORMERD_API_KEY TRANSFORMERD_DEVICE TRANSFORMERD_MODEL TRANSFORMERD_WORKER_NICE
# setpriv: the daemon dies with this script, also when ctest kills it;
# started one nice step below this script, so that its workers' nice is
# seen to be relative to the process's
OPENBLAS_NUM_THREADS=1 nice -n 1 setpriv --pdeathsig KILL "$DAEMON" serve --model "$MODEL" --host 127.0.0.1 --port 0 \
    --threads 1 --drain-timeout-s 20 2>"$LOG" &
PID=$!

port=""
i=0
while [ -z "$port" ]; do
    kill -0 "$PID" 2>/dev/null || die "the daemon exited during start-up"
    port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$LOG" | head -n 1)
    [ -n "$port" ] && break
    i=$((i + 1))
    [ "$i" -gt 600 ] && die "no 'listening on' line within 60 s"
    sleep 0.1
done
echo "smoke_daemon: daemon pid $PID on port $port"

SMOKE_READY_TIMEOUT=60 sh "$SMOKE" "http://127.0.0.1:$port"
rc=$?
[ "$rc" -eq 0 ] || die "deploy/smoke.sh exited $rc"

# --worker-nice (default 5): the workers' threads run 5 above the process's
# nice (this script's + 1; at most 19), the rest (the main thread, the HTTP
# threads) as the process was started
base=$(( $(nice) + 1 > 19 ? 19 : $(nice) + 1 ))
want=$((base + 5 > 19 ? 19 : base + 5))
if [ -d "/proc/$PID/task" ]; then
    niced=0
    for t in /proc/"$PID"/task/*; do
        ni=$(sed 's/.*) //' "$t/stat" | awk '{print $17}')
        if [ "${t##*/}" = "$PID" ]; then
            [ "$ni" = "$base" ] || die "the main thread runs at nice $ni, want $base"
        fi
        [ "$ni" = "$want" ] && niced=$((niced + 1))
    done
    [ "$niced" -ge 1 ] || die "no thread at nice $want (--worker-nice)"
    echo "smoke_daemon: $niced worker thread(s) at nice $want"
fi

kill -TERM "$PID"
i=0
while kill -0 "$PID" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt 400 ] && die "still running 40 s after SIGTERM"
    sleep 0.1
done
wait "$PID"
rc=$?
PID=""
[ "$rc" -eq 0 ] || die "exit status $rc after SIGTERM, want 0"
grep -q "transformerd: stopped" "$LOG" || die "no 'stopped' line after SIGTERM"
echo "smoke_daemon: SIGTERM drained, exit 0"
