#!/bin/sh
# check_layout.sh [ROOT [BUILD]] - the layout rules of the source folders
# (docs/architecture.md draws them). Reads every #include line of the C,
# CUDA and header files under the folders below, resolves "..." includes to
# files of the repository (the including file's folder first, then the path
# from the root, then the unique file of that name: headers are included by
# bare name through the build's include directories) and fails, naming the
# file and the include, when:
#   - backend/ includes a file of another folder;
#   - cpu/ or gpu/ include a file outside backend/ and their own folder;
#   - model/ includes a file of cpu/, gpu/, server/ or runtime/;
#   - tokenizer/ includes a file of another folder (it depends on nothing of
#     the engine);
#   - the daemon's layers cross: server/transport/ includes anything of the
#     daemon but server/clock.h; server/service/ includes server/api/,
#     server/transport/ or the executable's files in server/; server/api/
#     includes the executable's files or server/transport/ other than
#     call.h; a file outside server/transport/ includes microhttpd.h;
#   - an include names no unique file (two headers of the same name);
#   - the files' include graph has a cycle;
#   - a C or CUDA file has more than 1,200 lines, or a function more than
#     150 (the exceptions below, each with its reason);
#   - server/service/ speaks HTTP: an HTTP status (MHD_HTTP_*, a 4xx/5xx
#     literal used as a status) or a list of the API's paths in its code
#     (tests/check_layout_self.sh plants each).
# With BUILD (the build tree, after a build), also the modules' graph: a
# module is a source file's object (X.c or X.cu, with its X.h), an edge a
# symbol one object uses and another defines (nm); fails on a circle.
# POSIX sh + awk (+ nm). Exit 0 when clean, 1 with one line per violation.
set -eu

# Known exceptions, "FILE INCLUDE" one per line: a violation being removed
# is listed here with the condition of its removal, and reported as such
# rather than as a failure. None today.
KNOWN_EXCEPTIONS='
'

# Functions allowed past 150 lines, "FILE FUNCTION REASON" one per line.
LONG_FUNCTIONS='
gpu/gpu_attn_flash.cu k_attn_flash one CUDA kernel: its tile loop keeps q, the running max and sum and the output in registers across every key tile; split into device functions it spills them (nvcc does not inline across the loop-carried state)
'
MAX_FILE_LINES=1200
MAX_FUNCTION_LINES=150

ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${2:-}
case $BUILD in ''|/*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
cd "$ROOT"
FOLDERS='backend cpu gpu model tokenizer server runtime'

files=$(for d in $FOLDERS; do
    [ -d "$d" ] && find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \)
done | LC_ALL=C sort)
[ -n "$files" ] || { echo "check_layout: no sources under $ROOT" >&2; exit 1; }

# shellcheck disable=SC2086
status=0
printf '%s\n' "$KNOWN_EXCEPTIONS" | awk -v files="$(echo $files)" '
function dirof(p,   i) { i = match(p, /\/[^\/]*$/); return i ? substr(p, 1, i - 1) : "." }
# the first path component; server/X/ for the layers of the daemon
function folder(p,   i, rest, j) {
    i = index(p, "/")
    if (!i) return "."
    if (substr(p, 1, i - 1) != "server") return substr(p, 1, i - 1)
    rest = substr(p, i + 1); j = index(rest, "/")
    return j ? "server/" substr(rest, 1, j - 1) : "server"
}
function base(p,   i) { i = match(p, /\/[^\/]*$/); return i ? substr(p, i + 1) : p }
# a/./b, a/x/../b -> a/b
function norm(p,   n, parts, out, k, i, m) {
    n = split(p, parts, "/"); m = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "." || parts[i] == "") continue
        if (parts[i] == ".." && m > 0 && out[m] != "..") { m--; continue }
        out[++m] = parts[i]
    }
    p = ""
    for (k = 1; k <= m; k++) p = p (k > 1 ? "/" : "") out[k]
    return p
}
function fail(msg) { print "check_layout: " msg; bad++ }
function known(f, inc) { return ((f " " inc) in exc) }
function rule(f, inc, what) {
    if (known(f, inc)) { print "check_layout: known exception: " f " includes " inc " (" what ")"; return }
    fail(f " includes " inc ": " what)
}
# Depth-first search; an edge to a file on the stack closes a cycle.
function dfs(u,   k, v, i, path) {
    state[u] = 1; stack[++sp] = u
    for (k = 1; k <= nout[u]; k++) {
        v = out[u, k]
        if (state[v] == 1) {
            path = ""
            for (i = sp; i >= 1 && stack[i] != v; i--) ;
            for (; i <= sp; i++) path = path stack[i] " -> "
            fail("include cycle: " path v)
        } else if (state[v] == 0)
            dfs(v)
    }
    sp--; state[u] = 2
}
NF >= 2 { exc[$1 " " $2] = 1 }
END {
    n = split(files, list, " ")
    for (i = 1; i <= n; i++) { isfile[list[i]] = 1; nbase[base(list[i])]++; bypath[base(list[i])] = list[i] }
    for (i = 1; i <= n; i++) {
        f = list[i]; fd = folder(f)
        while ((getline line < f) > 0) {
            if (line !~ /^[ \t]*#[ \t]*include[ \t]*["<]/) continue
            sys = (line ~ /^[ \t]*#[ \t]*include[ \t]*</)
            inc = line; sub(/^[ \t]*#[ \t]*include[ \t]*["<]/, "", inc); sub(/[">].*$/, "", inc)
            if (base(inc) == "microhttpd.h" && fd != "server/transport")
                rule(f, inc, "only server/transport/ knows libmicrohttpd")
            if (sys) continue
            t = norm(dirof(f) "/" inc)
            if (!(t in isfile)) t = norm(inc)
            if (!(t in isfile)) {
                if (index(inc, "/") || !(inc in nbase)) continue   # not ours (system, tests/)
                if (nbase[inc] > 1) { fail(f " includes " inc ": ambiguous, " nbase[inc] " files have that name"); continue }
                t = bypath[inc]
            }
            out[f, ++nout[f]] = t
            td = folder(t)
            if (td == fd) continue
            if (fd == "backend")
                rule(f, inc, "backend/ includes nothing of another folder (it is " t ")")
            else if ((fd == "cpu" || fd == "gpu") && td != "backend")
                rule(f, inc, fd "/ may include only backend/ and " fd "/ (it is " t ")")
            else if (fd == "model" && (td == "cpu" || td == "gpu" || td == "server" || td == "runtime"))
                rule(f, inc, "model/ never includes a backend implementation, runtime/ or server/ (it is " t ")")
            else if (fd == "tokenizer")
                rule(f, inc, "tokenizer/ depends on nothing of the engine (it is " t ")")
            else if (fd == "server/transport" && t != "server/clock.h")
                rule(f, inc, "server/transport/ knows nothing of the daemon above it (it is " t ")")
            else if (fd == "server/service" && t != "server/clock.h" &&
                     (td == "server/api" || td == "server/transport" || td == "server"))
                rule(f, inc, "server/service/ knows no API, transport or executable (it is " t ")")
            else if (fd == "server/api" && t != "server/clock.h" &&
                     (td == "server" || (td == "server/transport" && t != "server/transport/call.h")))
                rule(f, inc, "server/api/ knows the transport only by its call (it is " t ")")
        }
        close(f)
    }
    for (i = 1; i <= n; i++) if (state[list[i]] == 0) dfs(list[i])
    if (bad) { print "check_layout: " bad " violation(s)"; exit 1 }
    print "check_layout: " n " files, include rules hold"
}' || status=1

# Sizes: C and CUDA files, and their functions (a body from a "{" in column
# 0 to the next "}" in column 0: the project's style, clang-format's).
# shellcheck disable=SC2086
printf '%s\n' "$LONG_FUNCTIONS" | awk -v maxf="$MAX_FILE_LINES" -v maxfn="$MAX_FUNCTION_LINES" \
    -v files="$(for f in $files; do case $f in *.c|*.cu) printf '%s ' "$f" ;; esac; done)" '
NF >= 2 { long[$1 " " $2] = 1 }
END {
    n = split(files, list, " ")
    for (i = 1; i <= n; i++) {
        f = list[i]; lines = 0; start = 0; sig = ""
        while ((getline line < f) > 0) {
            lines++
            if (line ~ /^[A-Za-z_]/ && index(line, "(")) sig = line
            if (line ~ /^\{/) { start = lines; name = sig; sub(/[ \t]*\(.*/, "", name); sub(/.*[ \t*]/, "", name) }
            else if (line ~ /^\}/ && start) {
                len = lines - start - 1
                if (len > maxfn && !((f " " name) in long)) {
                    print "check_layout: " f ": " name "() has " len " lines (at most " maxfn ")"; bad++
                }
                start = 0
            }
        }
        close(f)
        if (lines > maxf) { print "check_layout: " f " has " lines " lines (at most " maxf ")"; bad++ }
    }
    if (bad) exit 1
    print "check_layout: files within " maxf " lines, functions within " maxfn
}' || status=1

# No HTTP in the service: server/service/ is the daemon's library without a
# protocol (its failures are error kinds, errors.h; each dialect makes its
# status of them). In its code -- comments, string and character literals
# left out -- fails on MHD_HTTP_*, on a 4xx/5xx literal used as a status
# (on a line that names a status, returned, a case, compared with == or
# !=, an operand of ?:, an argument of an error or reply call), and on a
# list of the API's paths (a string literal that is a route's path or
# metrics label in server/api/, "/" aside, or any "/v<digit>/..."): a route
# row carries its own label.
# shellcheck disable=SC2086
awk -v files="$(for f in $files; do case $f in server/service/*) printf '%s ' "$f" ;; esac; done)" \
    -v api="$(for f in $files; do case $f in server/api/*.c) printf '%s ' "$f" ;; esac; done)" '
# the line without comments (state: inside /* */) and literals
function code_of(line,   out, i, c, q) {
    out = ""
    for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (incomment) {
            if (c == "*" && substr(line, i + 1, 1) == "/") { incomment = 0; i++ }
            continue
        }
        if (c == "/" && substr(line, i + 1, 1) == "*") { incomment = 1; i++; continue }
        if (c == "/" && substr(line, i + 1, 1) == "/") break
        if (c == "\"" || c == "\047") {
            q = c; lit = ""
            for (i++; i <= length(line) && substr(line, i, 1) != q; i++) {
                if (substr(line, i, 1) == "\\") { lit = lit substr(line, i, 2); i++ }
                else lit = lit substr(line, i, 1)
            }
            if (q == "\"") lits[++nlits] = lit
            out = out q q
            continue
        }
        out = out c
    }
    return out
}
function fail(f, no, msg) { print "check_layout: " f ":" no ": " msg; bad++ }
BEGIN {
    # the API'"'"'s paths and labels: the string literals of its route rows
    na = split(api, al, " ")
    for (k = 1; k <= na; k++) {
        while ((getline line < al[k]) > 0)
            while (match(line, /\{"(GET|POST|DELETE|PUT|PATCH)", "[^"]*"/)) {
                row = substr(line, RSTART, RLENGTH); sub(/.*, "/, "", row); sub(/"$/, "", row)
                if (row != "/") path[row] = 1
                rest = substr(line, RSTART + RLENGTH)
                if (match(rest, /"\/[^"]*"\}/)) { lab = substr(rest, RSTART + 1, RLENGTH - 3); if (lab != "/") path[lab] = 1 }
                line = rest
            }
        close(al[k])
    }
    n = split(files, list, " ")
    for (k = 1; k <= n; k++) {
        f = list[k]; no = 0; incomment = 0
        while ((getline line < f) > 0) {
            no++; nlits = 0
            c = code_of(line)
            if (c ~ /MHD_HTTP_/) fail(f, no, "an HTTP status (MHD_HTTP_*) in the service")
            s = c; lc = tolower(c)
            while (match(s, /(^|[^A-Za-z0-9_.])[45][0-9][0-9]([^A-Za-z0-9_.]|$)/)) {
                num = substr(s, RSTART, RLENGTH); gsub(/[^0-9]/, "", num)
                if (lc ~ /status/ ||
                    c ~ ("(return|case)[ \t(]+" num "([^0-9]|$)") ||
                    c ~ ("(==|!=)[ \t]*" num "([^0-9]|$)") || c ~ ("(^|[^0-9])" num "[ \t]*(==|!=)") ||
                    c ~ ("[?:][ \t]*" num "([^0-9]|$)") ||
                    lc ~ ("(error|reply|answer|respond)[a-z_]*[ \t]*\\(.*(^|[^0-9])" num "([^0-9]|$)")) {
                    fail(f, no, "an HTTP status (" num ") in the service: answer an error kind (errors.h)")
                    break
                }
                s = substr(s, RSTART + RLENGTH - 1)
            }
            for (i = 1; i <= nlits; i++)
                if ((lits[i] in path) || lits[i] ~ /^\/v[0-9]+\//)
                    fail(f, no, "an API path (\"" lits[i] "\") in the service: a route row carries its label")
        }
        close(f)
    }
    if (bad) exit 1
    print "check_layout: " n " service files, no HTTP status or API path"
}' || status=1

# The modules' graph from the objects' symbols (nm -P: name, type).
if [ -n "$BUILD" ]; then
    # shellcheck disable=SC2086
    flat=$(echo $files)
    objs=$(find "$BUILD" -path "$BUILD/tests" -prune -o -path "$BUILD/bench" -prune -o \
        -path '*/CMakeFiles/*.dir/*' -name '*.o' -print 2>/dev/null | LC_ALL=C sort)
    for o in $objs; do
        rel=${o#"$BUILD"/}
        src=${rel#*.dir/}; src=${src%.o}
        case $src in */*) ;; *) src=${rel%%CMakeFiles/*}$src ;; esac
        [ -f "$src" ] || continue
        case " $flat " in *" $src "*) ;; *) continue ;; esac
        nm -P "$o" 2>/dev/null | awk -v m="${src%.*}" '{ print m, $1, $2 }'
    done | awk -v objs="$(echo $objs | wc -w)" '
    { mods[$1] = 1 }
    $3 ~ /^[TDBRVWC]$/ { def[$2] = $1; next }
    $3 == "U" { use[$1, ++nuse[$1]] = $2 }
    function dfs(u,   k, v, i, path) {
        state[u] = 1; stack[++sp] = u
        for (v in mods) if (edge[u, v] && v != u) {
            if (state[v] == 1) {
                path = ""
                for (i = sp; i >= 1 && stack[i] != v; i--) ;
                for (; i <= sp; i++) path = path stack[i] " -> "
                print "check_layout: module circle: " path v " (" why[u, v] ")"; bad++
            } else if (state[v] == 0)
                dfs(v)
        }
        sp--; state[u] = 2
    }
    END {
        n = 0
        for (m in mods) {
            n++
            for (k = 1; k <= nuse[m]; k++) {
                s = use[m, k]
                if ((s in def) && def[s] != m && !edge[m, def[s]]) { edge[m, def[s]] = 1; why[m, def[s]] = s }
            }
        }
        if (n == 0) { print "check_layout: no objects under the build tree (build first)"; exit 1 }
        for (m in mods) if (state[m] == 0) dfs(m)
        if (bad) exit 1
        print "check_layout: " n " modules, no circle"
    }' || status=1
fi
exit $status
