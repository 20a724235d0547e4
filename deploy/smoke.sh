#!/bin/sh
# deploy/smoke.sh URL - end-to-end smoke test of a running transformerd.
#
# Needs only a POSIX sh, curl and awk (no jq, no python): JSON answers are
# flattened by the awk parser below into "path<TAB>json-value" lines,
# e.g. `.translations[0].attention.cross[0][0][1][3]<TAB>0.0132`.
#
# Checks, in order (each failure prints FAIL with the reason; exit 1 if any):
#   readiness (waits up to SMOKE_READY_TIMEOUT s for 200 on /health/ready),
#   liveness, GET /v1/models (every serving model), one translation per
#   model (POST /v1/translate with "model"), the cross-attention of one layer
#   and head of the first model (rows = target tokens, columns = source
#   tokens, each row sums to 1 within 1e-3), LibreTranslate's POST /translate
#   (the first model's pair; same text as the native API) and GET /languages
#   (every model's pair), two error cases (400 with docs/api.md's error
#   object), and the Prometheus series on GET /metrics.
#   SMOKE_MODELS, when set, is the number of models the daemon must serve.
#
# Environment:
#   SMOKE_READY_TIMEOUT  seconds to wait for readiness (default 120: a model
#                        loads and warms up before /health/ready says 200)
#   SMOKE_TEXT           the sentence to translate (default "Hello world!")
#   SMOKE_API_KEY        sent as "Authorization: Bearer ..." when the daemon
#                        runs with --api-key / TRANSFORMERD_API_KEY
#   SMOKE_CURL_TIMEOUT   per-request limit in seconds (default 60)
#   SMOKE_MODELS         how many models GET /v1/models must list (default:
#                        any number, at least one)
#
# Usage: deploy/smoke.sh http://127.0.0.1:8080
set -u

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 URL   (e.g. $0 http://127.0.0.1:8080)" >&2
    exit 2
fi
BASE=${1%/}
READY_TIMEOUT=${SMOKE_READY_TIMEOUT:-120}
TEXT=${SMOKE_TEXT:-Hello world!}
CURL_TIMEOUT=${SMOKE_CURL_TIMEOUT:-60}

command -v curl >/dev/null 2>&1 || { echo "smoke: FAIL: curl is not installed" >&2; exit 2; }
command -v awk >/dev/null 2>&1 || { echo "smoke: FAIL: awk is not installed" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/td-smoke.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILS=0
PASSES=0

is_count() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
pass() { PASSES=$((PASSES + 1)); printf "smoke: ok   %s\n" "$*"; }
fail() { FAILS=$((FAILS + 1)); printf "smoke: FAIL %s\n" "$*" >&2; }

# req METHOD PATH [BODY [CONTENT-TYPE]]: body to $TMP/body, status to $STATUS
# ("000 (curl's message)" when no HTTP answer came).
req() {
    _p=$2
    _m=$1
    if [ $# -ge 3 ]; then
        set -- -H "Content-Type: ${4:-application/json}" --data-binary "$3"
    else
        set --
    fi
    if [ -n "${SMOKE_API_KEY:-}" ]; then
        set -- "$@" -H "Authorization: Bearer $SMOKE_API_KEY"
    fi
    STATUS=$(curl -sS -o "$TMP/body" -w '%{http_code}' --max-time "$CURL_TIMEOUT" -X "$_m" \
                  "$@" "$BASE$_p" 2>"$TMP/curl.err") ||
        STATUS="000 ($(tr '\n' ' ' <"$TMP/curl.err"))"
}
get() { req GET "$1"; }
post() { req POST "$@"; }

# The body as "path<TAB>value" lines (strings keep their quotes and escapes).
# Exits 3 on anything that is not one JSON value.
flat() {
    awk '
    function die(msg) { printf "invalid JSON at byte %d: %s\n", pos, msg > "/dev/stderr"; bad = 1; exit 3 }
    function ws() { while (pos <= n && index(" \t\r\n", substr(s, pos, 1))) pos++ }
    function str(   j, c) {
        if (substr(s, pos, 1) != "\"") die("expected a string")
        for (j = pos + 1; j <= n; j++) {
            c = substr(s, j, 1)
            if (c == "\\") j++
            else if (c == "\"") break
        }
        if (j > n) die("unterminated string")
        c = substr(s, pos, j - pos + 1); pos = j + 1
        return c
    }
    function value(path,   c, k, i, lit) {
        ws(); c = substr(s, pos, 1)
        if (c == "{") {
            pos++; ws()
            if (substr(s, pos, 1) == "}") { pos++; print path "\t{}"; return }
            for (;;) {
                ws(); k = str(); ws()
                if (substr(s, pos, 1) != ":") die("expected :")
                pos++
                value(path "." substr(k, 2, length(k) - 2))
                ws(); c = substr(s, pos++, 1)
                if (c == "}") return
                if (c != ",") die("expected , or }")
            }
        }
        if (c == "[") {
            pos++; ws()
            if (substr(s, pos, 1) == "]") { pos++; print path "\t[]"; return }
            for (i = 0;; i++) {
                value(path "[" i "]")
                ws(); c = substr(s, pos++, 1)
                if (c == "]") return
                if (c != ",") die("expected , or ]")
            }
        }
        if (c == "\"") { print path "\t" str(); return }
        lit = substr(s, pos, 64)
        if (match(lit, /^(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|true|false|null)/)) {
            print path "\t" substr(lit, 1, RLENGTH); pos += RLENGTH; return
        }
        die("unexpected character")
    }
    { s = s $0 "\n" }
    END {
        if (bad) exit 3
        n = length(s); pos = 1
        value(""); ws()
        if (pos <= n) die("trailing characters")
    }' "$TMP/body"
}

# field PATH: the JSON value at PATH in $TMP/flat (empty when absent).
field() { awk -F '\t' -v p="$1" '$1 == p { print $2; exit }' "$TMP/flat"; }
# count PREFIX: how many direct elements the array at PREFIX has.
count() {
    awk -F '\t' -v p="$1[" '
        index($1, p) == 1 { rest = substr($1, length(p) + 1); sub(/\].*/, "", rest); seen[rest] = 1 }
        END { n = 0; for (k in seen) n++; print n }' "$TMP/flat"
}

# expect_json STATUS WHAT: the status is STATUS and the body parses.
expect_json() {
    if [ "$STATUS" != "$1" ]; then
        fail "$2: HTTP $STATUS, want $1; body: $(head -c 300 "$TMP/body" 2>/dev/null)"
        return 1
    fi
    if ! flat >"$TMP/flat" 2>"$TMP/flat.err"; then
        fail "$2: body is not JSON ($(cat "$TMP/flat.err")): $(head -c 300 "$TMP/body")"
        return 1
    fi
    return 0
}

# expect_error STATUS PARAM WHAT: docs/api.md's error object, exactly
# {"error": {"code": STRING, "message": STRING, "param": STRING|null}}.
expect_error() {
    expect_json "$1" "$3" || return
    _code=$(field .error.code) _msg=$(field .error.message) _param=$(field .error.param)
    _keys=$(awk -F '\t' 'index($1, ".error.") == 1 { n++ } END { print n + 0 }' "$TMP/flat")
    case $_code in \"?*\") ;; *) fail "$3: error.code is not a string: $(cat "$TMP/body")"; return ;; esac
    case $_msg in \"?*\") ;; *) fail "$3: error.message is not a string: $(cat "$TMP/body")"; return ;; esac
    if [ "$_param" != "$2" ] || [ "$_keys" != 3 ]; then
        fail "$3: want error.param $2 and 3 fields, got $_param ($_keys fields): $(cat "$TMP/body")"
        return
    fi
    pass "$3 -> $1 $_code"
}

# A JSON string literal for the one-line text $1 (escapes \ and ").
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

echo "smoke: $BASE"

# --- readiness and liveness -------------------------------------------------
waited=0
while :; do
    get /health/ready
    [ "$STATUS" = 200 ] && break
    if [ "$waited" -ge "$READY_TIMEOUT" ]; then
        fail "/health/ready: not 200 after ${READY_TIMEOUT}s (last: HTTP $STATUS)"
        echo "smoke: giving up: the daemon never became ready" >&2
        exit 1
    fi
    sleep 1
    waited=$((waited + 1))
done
pass "/health/ready -> 200 (after ${waited}s)"
get /health/live
if [ "$STATUS" = 200 ]; then pass "/health/live -> 200"; else fail "/health/live: HTTP $STATUS"; fi

# --- model info ----------------------------------------------------------------
# Every serving model: NAMES (quoted JSON strings, one a line in $TMP/names)
# with its pair; the first one's SRC/TGT for LibreTranslate.
SRC=en TGT=de
NMODELS=0
: >"$TMP/names"
get /v1/models
if expect_json 200 "/v1/models"; then
    NMODELS=$(count .models)
    i=0
    list=""
    while [ "$i" -lt "$NMODELS" ]; do
        name=$(field ".models[$i].name")
        s=$(field ".models[$i].languages.source" | tr -d '"')
        t=$(field ".models[$i].languages.target" | tr -d '"')
        case $name in
        \"?*\") printf '%s\t%s\t%s\n' "$name" "$s" "$t" >>"$TMP/names"
                list="$list${list:+, }$name ($s -> $t)" ;;
        *) fail "/v1/models: no models[$i].name in $(head -c 300 "$TMP/body")" ;;
        esac
        i=$((i + 1))
    done
    SRC=$(awk -F '\t' 'NR == 1 { print $2 }' "$TMP/names")
    TGT=$(awk -F '\t' 'NR == 1 { print $3 }' "$TMP/names")
    heads=$(field '.models[0].architecture.decoder_attention_heads')
    if [ "$NMODELS" -lt 1 ]; then
        fail "/v1/models: no model in $(head -c 300 "$TMP/body")"
    elif [ -n "${SMOKE_MODELS:-}" ] && [ "$NMODELS" != "$SMOKE_MODELS" ]; then
        fail "/v1/models: $NMODELS models ($list), want $SMOKE_MODELS"
    else
        pass "/v1/models: $NMODELS: $list; first: $heads decoder heads, device $(field '.models[0].device')"
    fi
fi
FIRST=$(awk -F '\t' 'NR == 1 { print $1 }' "$TMP/names")
[ -n "$FIRST" ] || FIRST=null

# --- one translation per model ----------------------------------------------------
TEXT_JSON=$(json_str "$TEXT")
NATIVE=""
while IFS=$(printf '\t') read -r name s t; do
    post /v1/translate "{\"text\":$TEXT_JSON,\"model\":$name}"
    expect_json 200 "/v1/translate $name" || continue
    out=$(field '.translations[0].text')
    n=$(count .translations)
    tgt=$(field .usage.target_tokens)
    if [ "$(field .model)" != "$name" ]; then
        fail "/v1/translate $name: answered by model $(field .model)"
    elif [ "$n" != 1 ]; then
        fail "/v1/translate $name: $n translations for one text"
    elif [ -z "$out" ] || [ "$out" = '""' ]; then
        fail "/v1/translate $name: empty translation of $TEXT_JSON: $(cat "$TMP/body")"
    elif ! is_count "$tgt" || [ "$tgt" -lt 1 ]; then
        fail "/v1/translate $name: usage.target_tokens is '$tgt'"
    else
        pass "/v1/translate $name ($s -> $t): $TEXT_JSON -> $out ($tgt target tokens)"
        [ "$name" = "$FIRST" ] && NATIVE=$out
    fi
done <"$TMP/names"

# --- attention shape and row sums ------------------------------------------------------
post /v1/translate "{\"text\":$TEXT_JSON,\"model\":$FIRST,\"return_attention\":true,\"attention_layers\":[-1],\"attention_heads\":[0],\"beam_size\":1}"
if expect_json 200 "/v1/translate return_attention"; then
    T=$(count '.translations[0].tokens')
    S=$(count '.translations[0].source_tokens')
    P='.translations[0].attention.cross'
    L=$(count "$P") H=$(count "${P}[0]") R=$(count "${P}[0][0]")
    # Rows: number of columns and sum per row, checked against S and 1.
    bad=$(awk -F '\t' -v p="${P}[0][0][" -v S="$S" '
        index($1, p) == 1 {
            rest = substr($1, length(p) + 1)          # "t][s]"
            t = rest; sub(/\].*/, "", t)
            sum[t] += $2; cols[t]++; if (!(t in seen)) { seen[t] = 1; rows++ }
        }
        END {
            if (rows == 0) { print "no attention rows"; exit }
            for (t in sum) {
                d = sum[t] - 1; if (d < 0) d = -d
                if (cols[t] != S) { printf "row %s has %d columns, want %d source tokens\n", t, cols[t], S; exit }
                if (d > 1e-3) { printf "row %s sums to %.6f, want 1 within 1e-3\n", t, sum[t]; exit }
            }
        }' "$TMP/flat")
    last=$(field ".translations[0].source_tokens[$((S - 1))]")
    if [ "$L" != 1 ] || [ "$H" != 1 ]; then
        fail "attention: cross has $L layers x $H heads, want 1 x 1 (one layer, one head asked)"
    elif ! is_count "$T" || [ "$T" -lt 1 ] || [ "$R" != "$T" ]; then
        fail "attention: $R rows for $T target tokens"
    elif [ "$last" != '"</s>"' ]; then
        fail "attention: source_tokens do not end with </s> (last: $last)"
    elif [ -n "$bad" ]; then
        fail "attention: $bad"
    else
        pass "attention: 1 layer x 1 head x $T rows x $S columns, rows sum to 1"
    fi
fi

# --- LibreTranslate -------------------------------------------------------------------------
post /translate "{\"q\":$TEXT_JSON,\"source\":\"$SRC\",\"target\":\"$TGT\"}"
if expect_json 200 "POST /translate"; then
    lt=$(field .translatedText)
    if [ -z "$lt" ]; then
        fail "POST /translate: no translatedText in $(cat "$TMP/body")"
    elif [ -n "$NATIVE" ] && [ "$lt" != "$NATIVE" ]; then
        fail "POST /translate: translatedText $lt differs from /v1/translate's $NATIVE"
    else
        pass "POST /translate ($SRC -> $TGT): $lt"
    fi
fi
# every model's pair: its source is a code whose targets hold its target
get /languages
if [ ! -s "$TMP/names" ]; then
    fail "GET /languages: not checked, no model listed by /v1/models"
elif expect_json 200 "GET /languages"; then
    missing=$(awk -F '\t' '
        FNR == NR { pair[FNR] = $2 "\t" $3; np = FNR; next }
        $1 ~ /^\[[0-9]+\]\.code$/ { i = $1; sub(/\.code$/, "", i); code[i] = $2; next }
        $1 ~ /^\[[0-9]+\]\.targets\[[0-9]+\]$/ { i = $1; sub(/\.targets.*/, "", i); tg[i] = tg[i] " " $2 }
        END {
            for (k = 1; k <= np; k++) {
                split(pair[k], st, "\t"); hit = 0
                for (i in code)
                    if (code[i] == "\"" st[1] "\"" && index(tg[i] " ", " \"" st[2] "\" ")) hit = 1
                if (!hit) printf " %s->%s", st[1], st[2]
            }
        }' "$TMP/names" "$TMP/flat")
    if [ -z "$missing" ]; then
        pass "GET /languages: every model's pair ($(awk -F '\t' '{ printf "%s%s->%s", (NR > 1 ? ", " : ""), $2, $3 }' "$TMP/names"))"
    else
        fail "GET /languages: pairs missing:$missing: $(head -c 300 "$TMP/body")"
    fi
fi

# --- errors ---------------------------------------------------------------------------------------
post /v1/translate '{"text":"a","beam_size":0}'
expect_error 400 '"beam_size"' "beam_size 0"
post /v1/translate '{"text":'
expect_error 400 null "malformed JSON"

# --- metrics ------------------------------------------------------------------------------------------
get /metrics
if [ "$STATUS" != 200 ]; then
    fail "/metrics: HTTP $STATUS"
else
    missing=""
    for series in transformerd_ready transformerd_queue_depth transformerd_batches_total \
                  transformerd_tokens_in_total transformerd_tokens_out_total \
                  transformerd_requests_total transformerd_request_duration_seconds_bucket \
                  transformerd_batch_size_bucket transformerd_model_info; do
        grep -q "^${series}[ {]" "$TMP/body" || missing="$missing $series"
    done
    ready=$(awk '$1 == "transformerd_ready" { print $2 }' "$TMP/body")
    ok200=$(awk '/^transformerd_requests_total\{endpoint="\/v1\/translate",status="200"\}/ { print $2 }' "$TMP/body")
    # per model (a model label): the sum over the models
    tokens=$(awk '$1 ~ /^transformerd_tokens_out_total[{ ]/ || $1 == "transformerd_tokens_out_total" { t += $2 } END { print t + 0 }' "$TMP/body")
    if [ -n "$missing" ]; then
        fail "/metrics: missing series:$missing"
    elif [ "$ready" != 1 ]; then
        fail "/metrics: transformerd_ready is '$ready', want 1"
    elif ! is_count "$ok200" || [ "$ok200" -lt 2 ]; then
        fail "/metrics: /v1/translate 200 count is '$ok200', want >= 2 after this run"
    elif ! is_count "$tokens" || [ "$tokens" -lt 1 ]; then
        fail "/metrics: transformerd_tokens_out_total is '$tokens'"
    else
        pass "/metrics: every expected series, ready 1, $ok200 translations counted"
    fi
fi

echo "smoke: $PASSES passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
