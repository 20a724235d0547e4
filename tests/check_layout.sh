#!/bin/sh
# check_layout.sh [ROOT] - the include rules between the source folders
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
#   - server/service/batcher.c includes microhttpd.h (the queue does not know the
#     transport: it finishes jobs through a callback);
#   - an include names no unique file (two headers of the same name);
#   - the files' include graph has a cycle.
# POSIX sh + awk. Exit 0 when clean, 1 with one line per violation.
set -eu

# Known exceptions, "FILE INCLUDE" one per line: a violation being removed
# is listed here with the condition of its removal, and reported as such
# rather than as a failure. None today.
KNOWN_EXCEPTIONS='
'

ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT"
FOLDERS='backend cpu gpu model tokenizer server runtime'

files=$(for d in $FOLDERS; do
    [ -d "$d" ] && find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \)
done | LC_ALL=C sort)
[ -n "$files" ] || { echo "check_layout: no sources under $ROOT" >&2; exit 1; }

# shellcheck disable=SC2086
printf '%s\n' "$KNOWN_EXCEPTIONS" | awk -v files="$(echo $files)" '
function dirof(p,   i) { i = match(p, /\/[^\/]*$/); return i ? substr(p, 1, i - 1) : "." }
function folder(p,   i) { i = index(p, "/"); return i ? substr(p, 1, i - 1) : "." }
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
            if (f == "server/service/batcher.c" && base(inc) == "microhttpd.h")
                rule(f, inc, "the batcher must not know the HTTP transport (finish jobs through a callback)")
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
        }
        close(f)
    }
    for (i = 1; i <= n; i++) if (state[list[i]] == 0) dfs(list[i])
    if (bad) { print "check_layout: " bad " violation(s)"; exit 1 }
    print "check_layout: " n " files, include rules hold"
}'
