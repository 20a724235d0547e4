#!/bin/sh
# tests/check_layout_self.sh - tests/check_layout.sh bites on the service's
# HTTP rule: in a planted tree (an API file with route rows, a clean service
# file) it passes; then each planted violation in server/service/ -- a
# status returned, assigned, compared, a case, an operand of ?:, an error
# call's argument, MHD_HTTP_*, a list of the API's paths, a "/v2/..." path
# -- fails, naming the file and line; statuses in comments and strings, a
# buffer of 512 bytes and a file-system path do not.
set -eu
check=${1:?usage: check_layout_self.sh tests/check_layout.sh}
d=$(mktemp -d /tmp/td-layoutcheck.XXXXXX)
trap 'rm -rf "$d"' EXIT INT TERM
mkdir -p "$d/server/api" "$d/server/service"
cat >"$d/server/api/rows.c" <<'C'
static const srv_route k_rows[] = {
    {"POST", "/v1/translate", 0, 0, NULL, NULL, NULL, "/v1/translate"},
    {"GET", "/x/*", 0, 0, NULL, NULL, NULL, "/x/{name}"},
    {"GET", "/detect", 0, 0, NULL, NULL, NULL, "/detect"},
};
int f(int s) { return s == 404 ? 1 : 0; } /* the API may */
C
cat >"$d/server/service/ok.c" <<'C'
/* a 404 in a comment, or a status of 503 here: words */
static char buf[512];
#define LIMIT 400
int ok(int n)
{
    const char *p = "/proc/self/stat", *m = "answered 503 (draining)"; // return 404;
    char c = '4';
    return n < 512 && p && m && c ? 0 : 1;
}
C
if ! out=$(sh "$check" "$d" 2>&1); then
    echo "FAIL: the clean planted tree failed:"; echo "$out"; exit 1
fi
n=0
plant() { # plant NAME LINE WANT: the line in a service file fails, naming WANT
    n=$((n + 1))
    printf 'int g%d(int s, int *st)\n{\n    %s\n    return 0;\n}\n' "$n" "$2" >"$d/server/service/bad.c"
    if out=$(sh "$check" "$d" 2>&1); then
        echo "FAIL: $1 passed: $2"; exit 1
    fi
    case $out in *"server/service/bad.c:3: $3"*) ;; *)
        echo "FAIL: $1: no 'server/service/bad.c:3: $3' in:"; echo "$out"; exit 1 ;;
    esac
    echo "check_layout_self: $1 caught"
}
plant return 'if (s) return 404;' 'an HTTP status (404)'
plant assigned 'long status_code = 503; *st = (int)status_code + s;' 'an HTTP status (503)'
plant status-field 'op->status = s ? 422 : 0;' 'an HTTP status (422)'
plant compared 'if (s == 409) *st = 1;' 'an HTTP status (409)'
plant case 'switch (s) { case 507: *st = 1; }' 'an HTTP status (507)'
plant ternary '*st = s > 1 ? 500 : 0;' 'an HTTP status (500)'
plant error-call 'op_error(st, 404, "model_not_found");' 'an HTTP status (404)'
plant mhd 'int k = MHD_HTTP_NOT_FOUND;' 'an HTTP status (MHD_HTTP_*)'
plant path-list 'static const char *k[] = {"/v1/translate", "/detect"};' 'an API path ("/v1/translate")'
plant path-label 'const char *l = "/x/{name}";' 'an API path ("/x/{name}")'
plant new-dialect 'const char *l = "/v2/translate";' 'an API path ("/v2/translate")'
rm "$d/server/service/bad.c"
sh "$check" "$d" >/dev/null || { echo "FAIL: the clean tree fails again"; exit 1; }
echo "check_layout_self: ok ($n violations caught)"
