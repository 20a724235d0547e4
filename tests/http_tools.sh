#!/bin/sh
# tests/http_tools.sh DAEMON MODEL_DIR
#
# The ctest "http_tools" test (label integration): the daemon on a loopback
# port, checked with independent tools: a browser-style CORS preflight and
# request with curl (LibreTranslate's /translate from another origin), and
# promtool (Debian's prometheus package) linting /metrics. Exit: 0 passed,
# 1 failed, 77 skipped when curl or promtool is missing (said so).
set -u
DAEMON=$1 MODEL=$2
for t in curl promtool; do
    command -v $t >/dev/null 2>&1 || { echo "http_tools: SKIPPED: no $t (tools/bootstrap.sh installs it)"; exit 77; }
done
LOG=$(mktemp "${TMPDIR:-/tmp}/td-http-tools.XXXXXX") || exit 2
PID=""
cleanup() {
    [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null && kill -KILL "$PID" 2>/dev/null
    rm -f "$LOG" "$LOG.h" "$LOG.m"
}
trap cleanup EXIT
fail() { echo "http_tools: FAIL: $*"; cat "$LOG"; exit 1; }
unset TRANSFORMERD_API_KEY TRANSFORMERD_CORS_ORIGINS
# setpriv: the daemon dies with this script, also when ctest kills it
OPENBLAS_NUM_THREADS=1 setpriv --pdeathsig KILL "$DAEMON" serve --model "$MODEL" --host 127.0.0.1 --port 0 --threads 1 2>"$LOG" &
PID=$!
i=0
while ! grep -q "ready:" "$LOG"; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "not ready"; sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG" | head -n 1)
B=http://127.0.0.1:$port

# the preflight a browser sends before a JSON POST from another origin
curl -sS -o /dev/null -D "$LOG.h" -X OPTIONS "$B/translate" -H 'Origin: https://app.example' \
    -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type' \
    -w '%{http_code}' >"$LOG.m" || fail "curl preflight"
[ "$(cat "$LOG.m")" = 204 ] || fail "preflight status $(cat "$LOG.m")"
grep -qi '^access-control-allow-origin: \*' "$LOG.h" || fail "preflight: no Allow-Origin"
grep -qi '^access-control-allow-methods: .*POST' "$LOG.h" || fail "preflight: no POST"
grep -qi '^access-control-allow-headers: .*content-type' "$LOG.h" || fail "preflight: no Content-Type"
# the request itself
curl -sS -D "$LOG.h" -o "$LOG.m" "$B/translate" -H 'Origin: https://app.example' \
    -H 'Content-Type: application/json' -d '{"q":"Hello world","source":"en","target":"de"}' ||
    fail "curl translate"
grep -qi '^access-control-allow-origin: \*' "$LOG.h" || fail "translate: no Allow-Origin"
grep -q '"translatedText"' "$LOG.m" || fail "translate: $(cat "$LOG.m")"
echo "http_tools: CORS preflight and request ok"

# promtool lints the exposition (after some traffic)
curl -sS "$B/metrics" -o "$LOG.m" || fail "curl metrics"
promtool check metrics <"$LOG.m" || fail "promtool check metrics"
echo "http_tools: promtool check metrics ok"
kill -TERM "$PID"
wait "$PID" || fail "exit status after SIGTERM"
PID=""
exit 0
