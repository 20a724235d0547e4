/*
 * po.c - gettext catalogues through the helper process (po.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np */
#endif
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "po.h"

#define HELPER_TIMEOUT_S 120
#define HELPER_MAX_OUT (256u << 20)

extern char **environ;

typedef struct po_unit {
    int entry, plural; /* its message, and whether it is the msgid_plural */
    char *t;           /* the translation, once set */
} po_unit;

struct srv_po {
    json_t *cat; /* the helper's reading: {"header", "entries"} */
    po_unit *u;
    int n;
    char *data;  /* the upload, written again for the second run */
    size_t len;
};

static char g_helper[4096]; /* "": none (a program that is not transformerd) */

void srv_po_helper(const char *exe)
{
    snprintf(g_helper, sizeof g_helper, "%s", exe);
}

/* ---- the helper ------------------------------------------------------------ */

static int write_file(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    return close(fd) == 0 && off == len ? 0 : -1;
}

static char *read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fileno(f), &st) == 0 && (size_t)st.st_size <= max &&
        (buf = malloc((size_t)st.st_size + 1))) {
        *len = fread(buf, 1, (size_t)st.st_size, f);
        buf[*len] = 0;
    }
    fclose(f);
    return buf;
}

typedef struct workdir {
    char dir[256], in[300], set[300], out[300], err[300];
} workdir;

static int workdir_make(workdir *w)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(w->dir, sizeof w->dir, "%s/transformerd-po-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(w->dir))
        return -1;
    snprintf(w->in, sizeof w->in, "%s/in.po", w->dir);
    snprintf(w->set, sizeof w->set, "%s/set.json", w->dir);
    snprintf(w->out, sizeof w->out, "%s/out", w->dir);
    snprintf(w->err, sizeof w->err, "%s/err", w->dir);
    return 0;
}

static void workdir_free(workdir *w)
{
    unlink(w->in);
    unlink(w->set);
    unlink(w->out);
    unlink(w->err);
    rmdir(w->dir);
}

/* Runs `helper po-helper MODE in.po [set.json]` in w; its output into
 * *out. 0, -1 (err: it could not run, was killed or failed), -2 (err: it
 * refused the catalogue). */
static int run_helper(const workdir *w, const char *mode, char **out, size_t *out_len, char *err,
                      size_t errlen)
{
    char *argv[] = {(char *)"transformerd", (char *)"po-helper", (char *)mode, (char *)w->in,
                    (char *)w->set, NULL};
    if (strcmp(mode, "write") != 0)
        argv[4] = NULL;
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, w->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, w->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* none of the daemon's sockets */
    pid_t pid;
    int rc = posix_spawn(&pid, g_helper, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        snprintf(err, errlen, "the catalogue helper %s cannot run: %s", g_helper, strerror(rc));
        return -1;
    }
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 5) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (waited_ms >= HELPER_TIMEOUT_S * 1000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            snprintf(err, errlen, "the catalogue helper took longer than %d s", HELPER_TIMEOUT_S);
            return -1;
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        *out = read_file(w->out, HELPER_MAX_OUT, out_len);
        if (!*out)
            snprintf(err, errlen, "the catalogue helper's answer is unreadable or too large");
        return *out ? 0 : -1;
    }
    size_t n = 0;
    char *msg = read_file(w->err, 4096, &n);
    for (size_t i = 0; msg && i < n; i++) /* its first line */
        if (msg[i] == '\n') {
            msg[i] = 0;
            break;
        }
    int refused = WIFEXITED(status) && WEXITSTATUS(status) == 3;
    snprintf(err, errlen, "%s%s", refused ? "" : "the catalogue helper failed: ",
             msg && *msg ? msg : WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no reason");
    free(msg);
    return refused ? -2 : -1;
}

/* ---- reading ------------------------------------------------------------------ */

/* Entry e of the helper's reading, checked: every field there with its
 * type, and no msgstr_plural without a msgid_plural. 0, or -1 (err). */
static int entry_ok(const json_t *e, size_t i, char *err, size_t errlen)
{
    const json_t *pl = json_object_get(e, "msgstr_plural"), *idp = json_object_get(e, "msgid_plural");
    const char *bad = !json_is_object(e)                                     ? "not an object"
                      : !json_is_string(json_object_get(e, "msgid"))         ? "msgid"
                      : !(json_is_string(idp) || json_is_null(idp))          ? "msgid_plural"
                      : !json_is_string(json_object_get(e, "msgstr"))        ? "msgstr"
                      : !json_is_array(pl) || (json_is_null(idp) && json_array_size(pl)) ? "msgstr_plural"
                      : !json_is_boolean(json_object_get(e, "fuzzy"))        ? "fuzzy"
                      : !json_is_boolean(json_object_get(e, "obsolete"))     ? "obsolete"
                                                                             : NULL;
    for (size_t k = 0; !bad && k < json_array_size(pl); k++)
        if (!json_is_string(json_array_get(pl, k)))
            bad = "msgstr_plural";
    if (bad)
        snprintf(err, errlen, "the catalogue helper's answer is malformed: entry %zu: %s", i, bad);
    return bad ? -1 : 0;
}

static int untranslated(const json_t *e)
{
    if (*json_string_value(json_object_get(e, "msgstr")))
        return 0;
    const json_t *pl = json_object_get(e, "msgstr_plural");
    for (size_t k = 0; k < json_array_size(pl); k++)
        if (*json_string_value(json_array_get(pl, k)))
            return 0;
    return 1;
}

/* p's units from the helper's reading (ans); 0 or -1 (err). */
static int read_reply(srv_po *p, const char *ans, size_t an, int overwrite, char *err,
                      size_t errlen)
{
    json_error_t je;
    if (!(p->cat = json_loadb(ans, an, 0, &je))) {
        snprintf(err, errlen, "the catalogue helper's answer is not JSON: %s", je.text);
        return -1;
    }
    json_t *entries = json_object_get(p->cat, "entries");
    if (!json_is_object(p->cat) || !json_is_string(json_object_get(p->cat, "header")) ||
        !json_is_array(entries)) {
        snprintf(err, errlen, "the catalogue helper's answer is malformed: no header or entries");
        return -1;
    }
    size_t ne = json_array_size(entries);
    if (ne > (size_t)INT_MAX / 2 - 1) {
        snprintf(err, errlen, "too many messages (%zu)", ne);
        return -1;
    }
    for (size_t i = 0; i < ne; i++)
        if (entry_ok(json_array_get(entries, i), i, err, errlen) != 0)
            return -1;
    if (!(p->u = calloc(2 * ne + 1, sizeof *p->u))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < ne; i++) {
        const json_t *e = json_array_get(entries, i);
        if (json_is_true(json_object_get(e, "obsolete")) || (!overwrite && !untranslated(e)))
            continue;
        p->u[p->n++] = (po_unit){(int)i, 0, NULL};
        if (json_is_string(json_object_get(e, "msgid_plural")))
            p->u[p->n++] = (po_unit){(int)i, 1, NULL};
    }
    return 0;
}

int srv_po_from_reply(const char *reply, size_t len, int overwrite, srv_po **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    srv_po *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (read_reply(p, reply, len, overwrite, err, errlen) != 0) {
        srv_po_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

int srv_po_parse(const char *data, size_t len, int overwrite, srv_po **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    if (!g_helper[0]) {
        snprintf(err, errlen, "gettext catalogues need transformerd's po-helper");
        return -2;
    }
    if (memchr(data, 0, len)) {
        snprintf(err, errlen, "a NUL byte: not a catalogue");
        return -2;
    }
    workdir w;
    if (workdir_make(&w) != 0) {
        snprintf(err, errlen, "no temporary directory: %s", strerror(errno));
        return -1;
    }
    char *ans = NULL;
    size_t an = 0;
    int rc = write_file(w.in, data, len) == 0 ? run_helper(&w, "read", &ans, &an, err, errlen)
                                              : (snprintf(err, errlen, "cannot write %s", w.in), -1);
    workdir_free(&w);
    srv_po *p = NULL;
    if (rc == 0)
        rc = srv_po_from_reply(ans, an, overwrite, &p, err, errlen);
    free(ans);
    if (rc == 0 && !(p->data = malloc(len + 1))) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc != 0) {
        srv_po_free(p);
        return rc;
    }
    memcpy(p->data, data, len);
    p->len = len;
    *out = p;
    return 0;
}

int srv_po_n(const srv_po *p)
{
    return p->n;
}

const char *srv_po_source(const srv_po *p, int i)
{
    const json_t *e = json_array_get(json_object_get(p->cat, "entries"), (size_t)p->u[i].entry);
    return json_string_value(json_object_get(e, p->u[i].plural ? "msgid_plural" : "msgid"));
}

int srv_po_set(srv_po *p, int i, const char *t)
{
    free(p->u[i].t);
    p->u[i].t = strdup(t);
    return p->u[i].t ? 0 : -1;
}

/* ---- writing ---------------------------------------------------------------------- */

/* gettext's manual, "Plural forms" */
static const struct {
    const char *langs, *forms;
} k_plurals[] = {
    {" en de nl sv da nb nn no fi et el hu it es ca eo bg af eu gl fo he is ",
     "nplurals=2; plural=(n != 1);"},
    {" fr pt_BR oc ", "nplurals=2; plural=(n > 1);"},
    {" ja ko zh vi th id ms lo ", "nplurals=1; plural=0;"},
    {" ru uk be sr hr bs ",
     "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || "
     "n%100>=20) ? 1 : 2);"},
    {" pl ", "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"},
    {" cs sk ", "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;"},
    {" pt ", "nplurals=2; plural=(n != 1);"},
};

const char *srv_po_plural_forms(const char *lang)
{
    char key[24];
    snprintf(key, sizeof key, " %s ", lang);
    for (size_t i = 0; i < sizeof k_plurals / sizeof k_plurals[0]; i++)
        if (strstr(k_plurals[i].langs, key))
            return k_plurals[i].forms;
    return NULL;
}

/* nplurals of a Plural-Forms value (2 when it says none). */
static int nplurals(const char *forms)
{
    const char *p = forms ? strstr(forms, "nplurals=") : NULL;
    int n = p ? atoi(p + 9) : 0;
    return n >= 1 && n <= 16 ? n : 2;
}

/* What the second run sets: {"set": [...], "header": {...}}. */
static json_t *set_json(const srv_po *p, const char *target, const char *forms)
{
    json_t *root = json_object(), *set = json_array(), *hdr = json_object();
    json_object_set_new(hdr, "Language", json_string(target));
    json_object_set_new(hdr, "Content-Type", json_string("text/plain; charset=UTF-8"));
    json_object_set_new(hdr, "Content-Transfer-Encoding", json_string("8bit"));
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(now, sizeof now, "%Y-%m-%d %H:%M+0000", gmtime_r(&t, &tm));
    json_object_set_new(hdr, "PO-Revision-Date", json_string(now));
    if (forms)
        json_object_set_new(hdr, "Plural-Forms", json_string(forms));
    const int np = nplurals(forms);
    for (int i = 0; i < p->n;) {
        int k = i + 1;
        while (k < p->n && p->u[k].entry == p->u[i].entry)
            k++;
        /* a message whose every unit has its translation */
        int whole = 1;
        for (int j = i; j < k; j++)
            whole &= p->u[j].t != NULL;
        if (whole) {
            json_t *s = json_pack("{s:i}", "i", p->u[i].entry);
            if (k - i == 2) {
                json_t *pl = json_array();
                for (int f = 0; f < np; f++) /* [0] the singular, the rest the plural */
                    json_array_append_new(pl, json_string(p->u[f == 0 && np > 1 ? i : i + 1].t));
                json_object_set_new(s, "msgstr_plural", pl);
            } else {
                json_object_set_new(s, "msgstr", json_string(p->u[i].t));
            }
            json_array_append_new(set, s);
        }
        i = k;
    }
    json_object_set_new(root, "set", set);
    json_object_set_new(root, "header", hdr);
    return root;
}

/* The second run's SET for target: the target's plural forms; for a
 * language we do not know, the file's own. */
static json_t *render_set(const srv_po *p, const char *target)
{
    const char *forms = srv_po_plural_forms(target);
    char own[512] = "";
    const char *h = json_string_value(json_object_get(p->cat, "header"));
    const char *f = h ? strstr(h, "Plural-Forms:") : NULL;
    if (!forms && f) {
        f += strlen("Plural-Forms:");
        while (*f == ' ')
            f++;
        snprintf(own, sizeof own, "%.*s", (int)strcspn(f, "\n"), f);
        forms = own;
    }
    return set_json(p, target, forms);
}

char *srv_po_set_text(const srv_po *p, const char *target)
{
    json_t *set = render_set(p, target);
    char *s = set ? json_dumps(set, JSON_COMPACT) : NULL;
    json_decref(set);
    return s;
}

char *srv_po_render(srv_po *p, const char *target, size_t *len, char *err, size_t errlen)
{
    if (!p->data) {
        snprintf(err, errlen, "no catalogue to write (a reading alone)");
        return NULL;
    }
    json_t *set = render_set(p, target);
    workdir w;
    char *out = NULL;
    if (!set || workdir_make(&w) != 0) {
        snprintf(err, errlen, "out of memory or no temporary directory");
        json_decref(set);
        return NULL;
    }
    if (write_file(w.in, p->data, p->len) != 0 || json_dump_file(set, w.set, JSON_COMPACT) != 0) {
        snprintf(err, errlen, "cannot write the helper's files in %s", w.dir);
    } else if (run_helper(&w, "write", &out, len, err, errlen) == -2) {
        /* the helper read this catalogue before: its refusal now is ours */
        char why[256];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "the catalogue helper could not write the catalogue: %s", why);
    }
    workdir_free(&w);
    json_decref(set);
    return out;
}

void srv_po_free(srv_po *p)
{
    if (!p)
        return;
    for (int i = 0; p->u && i < p->n; i++)
        free(p->u[i].t);
    free(p->u);
    json_decref(p->cat);
    free(p->data);
    free(p);
}
