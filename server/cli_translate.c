/*
 * cli_translate.c - `transformerd translate`'s pipeline: stdin's lines in,
 * their translations out, each line written (in input order) as soon as
 * its sentences are done.
 *
 * Each line goes through the daemon's text pipeline (service/pipeline.h,
 * the same code as POST /v1/translate): split into sentences (a line of one
 * sentence, or --no-split, is its own unit), tokenized, the symbols the
 * model cannot write copied from the source by its attention. Its units
 * queue for one running decode (td_run_*, as a daemon worker keeps);
 * between two decoding steps queued units join it (all that fit when it is
 * idle, else in groups by the daemon's rule, srv_inflight_admit_now). The
 * oldest unwritten line is written the moment its last unit is done, and
 * with it every complete line behind it. Input is read ahead while the decode runs, never waited
 * for: with a file on stdin the queue fills to a few batches (long and
 * short sentences of nearby lines decode together), while a person typing
 * a line, or a pipe that trickles, gets each line back as soon as it is
 * translated, without waiting for more input or its end.
 *
 * What each sentence gets does not depend on its company (docs/decisions.md,
 * the running decode), so the output is the API's for the same options
 * (tests/cli_api_same.py holds them to it byte for byte), but for a line
 * over the model's positions: cut (with a warning), where the API refuses.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "batcher.h"
#include "cli_translate.h"
#include "clock.h"
#include "pipeline.h"
#include "segment.h"
#include "tokenizer.h"

/* stdin without stdio's buffer, so that poll() sees what is left to read. */
typedef struct line_reader {
    char *buf;
    size_t len, cap, scan; /* scan: bytes of buf known to hold no '\n' */
    int eof;
} line_reader;

/* Reads what stdin has: blocking, or only when poll says it is ready
 * (wait 0). Returns 1 when something came or stdin ended, 0 when nothing
 * was ready. */
static int lr_fill(line_reader *lr, int wait)
{
    if (lr->eof)
        return 1;
    if (!wait) {
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0)
            return 0;
    }
    if (lr->cap - lr->len < 65536) {
        size_t cap = lr->cap ? lr->cap * 2 : 131072;
        char *b = realloc(lr->buf, cap);
        if (!b) {
            lr->eof = 1; /* out of memory: stop reading, finish what came */
            fprintf(stderr, "transformerd: out of memory reading stdin\n");
            return 1;
        }
        lr->buf = b;
        lr->cap = cap;
    }
    ssize_t k;
    do
        k = read(STDIN_FILENO, lr->buf + lr->len, lr->cap - lr->len - 1);
    while (k < 0 && errno == EINTR);
    if (k <= 0)
        lr->eof = 1;
    else
        lr->len += (size_t)k;
    return 1;
}

/* The next whole line (without its LF or CRLF, NULs kept), malloc'd; the
 * last line without a LF once stdin ended. NULL when none is complete. */
static char *lr_next(line_reader *lr, size_t *len)
{
    char *nl = lr->scan < lr->len ? memchr(lr->buf + lr->scan, '\n', lr->len - lr->scan) : NULL;
    if (!nl && !(lr->eof && lr->len > 0)) {
        lr->scan = lr->len;
        return NULL;
    }
    size_t n = nl ? (size_t)(nl - lr->buf) : lr->len, used = nl ? n + 1 : n;
    if (n > 0 && lr->buf[n - 1] == '\r')
        n--;
    char *line = malloc(n + 1);
    if (line) {
        memcpy(line, lr->buf, n);
        line[n] = 0;
        *len = n;
    }
    memmove(lr->buf, lr->buf + used, lr->len - used);
    lr->len -= used;
    lr->scan = 0;
    return line;
}

/* An input line on its way, through the text pipeline: its units' results
 * as they come. Each line is its own allocation (its pipeline points into
 * itself). */
typedef struct cli_line {
    char *text;
    size_t len;
    srv_heap arena;    /* what the pipeline allocated for the line */
    srv_pipe p;
    int n_done;        /* jobs done of p.n_jobs */
} cli_line;

/* A unit (a job of a line's pipeline) waiting to join the decode, or
 * running in it. */
typedef struct cli_unit {
    long line;         /* its line's number, from 0 */
    int k;             /* its job in the line's pipeline */
    td_seq seq;        /* running: its handle */
} cli_unit;

typedef struct cli_run {
    td_worker *w;
    const td_tokenizer *tok;
    const td_decode_opts *o;
    const char *lang;  /* NULL: --no-split */
    int src_lang;      /* a multilingual model's source language, else -1 */
    int raw_unknown;   /* --no-copy-unknown */
    const srv_gloss_dict *gloss; /* --glossary's dictionary for the pair, or NULL */
    cli_line **lines;  /* lines[line - first] for the lines not yet written */
    long first, n_lines, cap_lines;
    cli_unit *queue;   /* waiting units, oldest first */
    int n_queue, cap_queue;
    cli_unit *live;    /* (max_batch) running units */
    const int32_t **src; /* (max_batch) admission scratch */
    int *len;
    const td_decode_opts **op;
    td_seq *seq;
    int n_live, deferred, rows_total;
    long written;
    int failed;
} cli_run;

static cli_line *line_at(cli_run *r, long line)
{
    return r->lines[line - r->first];
}

static void line_free(cli_line *l)
{
    if (!l)
        return;
    srv_pipe_free(&l->p);
    srv_heap_free(&l->arena);
    free(l->text);
    free(l);
}

/* Takes a line (text owned from here): through the pipeline, its jobs to
 * the queue (none for an empty line). Returns 0, or -1 out of memory. */
static int add_line(cli_run *r, char *text, size_t len)
{
    long no = r->first + r->n_lines;
    if (r->n_lines == r->cap_lines) {
        long cap = r->cap_lines ? r->cap_lines * 2 : 64;
        cli_line **n = realloc(r->lines, (size_t)cap * sizeof *n);
        if (!n)
            return free(text), -1;
        r->lines = n;
        r->cap_lines = cap;
    }
    cli_line *l = calloc(1, sizeof *l);
    if (!l)
        return free(text), -1;
    r->lines[r->n_lines++] = l;
    l->text = text;
    l->len = len;
    srv_pipe *p = &l->p;
    p->tok = r->tok;
    p->arena = (srv_arena){srv_heap_alloc, &l->arena};
    p->seg_lang = r->lang;
    p->src_lang = r->src_lang;
    p->max_tokens = td_worker_max_src_len(r->w);
    p->cut_long = 1; /* every line gets an output line */
    p->raw_unknown = r->raw_unknown;
    p->gloss_dict = r->gloss;
    p->opts = r->o;
    srv_pipe_fail f;
    const char *const t = text;
    srv_err e = srv_pipe_make(p, &t, &len, 1, &f);
    if (e == SRV_ERR_INTERNAL && f.text >= 0) {
        /* the segmenter's failure: the line as one unit */
        fprintf(stderr, "transformerd: line %ld: %s\n", no + 1, f.msg);
        srv_pipe_free(p);
        p->seg_lang = NULL;
        e = srv_pipe_make(p, &t, &len, 1, &f);
    }
    if (e != SRV_OK) {
        if (e == SRV_ERR_INTERNAL)
            fprintf(stderr, "transformerd: line %ld: %s\n", no + 1, f.msg);
        return -1;
    }
    if (p->n_cut)
        fprintf(stderr, "transformerd: line %ld: %d tokens, cut to %d\n", no + 1, p->cut_full,
                p->cut_to);
    if (r->n_queue + p->n_jobs > r->cap_queue) {
        int cap = (r->n_queue + p->n_jobs) * 2;
        cli_unit *q = realloc(r->queue, (size_t)cap * sizeof *q);
        if (!q)
            return -1;
        r->queue = q;
        r->cap_queue = cap;
    }
    for (int k = 0; k < p->n_jobs; k++)
        r->queue[r->n_queue++] = (cli_unit){.line = no, .k = k};
    return 0;
}

/* Queued units join the decode: all that fit when it is idle, else by the
 * daemon's grouping rule. Returns 0 or -1 (the engine's message printed). */
static int admit(cli_run *r)
{
    int free_slots, free_rows, fit = 0, rows_left;
    td_run_free(r->w, &free_slots, &free_rows);
    rows_left = free_rows;
    while (fit < r->n_queue && fit < free_slots && r->o->beam_size <= rows_left) {
        rows_left -= r->o->beam_size;
        fit++;
    }
    if (fit == 0)
        return 0;
    if (r->n_live > 0 &&
        !srv_inflight_admit_now(fit, r->n_queue, free_rows, r->rows_total, r->deferred)) {
        r->deferred++;
        return 0;
    }
    r->deferred = 0;
    for (int i = 0; i < fit; i++) {
        const srv_job *j = &line_at(r, r->queue[i].line)->p.jobs[r->queue[i].k];
        r->src[i] = j->src;
        r->len[i] = j->n_src;
        r->op[i] = j->opts; /* a job that copies captures attention */
    }
    char err[512];
    if (td_run_add(r->w, r->src, r->len, fit, r->op, r->seq, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: line %ld: %s\n", r->queue[0].line + 1, err);
        return -1;
    }
    for (int i = 0; i < fit; i++) {
        r->live[r->n_live] = r->queue[i];
        r->live[r->n_live++].seq = r->seq[i];
    }
    memmove(r->queue, r->queue + fit, (size_t)(r->n_queue - fit) * sizeof *r->queue);
    r->n_queue -= fit;
    return 0;
}

/* One decoding step; the units it finished detokenized into their lines. */
static int step(cli_run *r)
{
    char err[512];
    if (td_run_step(r->w, err, sizeof err) < 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        return -1;
    }
    td_seq q;
    td_result res;
    int t;
    while ((t = td_run_take(r->w, &q, &res)) != 0) {
        int i = 0;
        while (i < r->n_live && r->live[i].seq != q)
            i++;
        if (i == r->n_live) { /* not ours: cannot happen */
            td_result_free(&res);
            continue;
        }
        cli_unit u = r->live[i];
        r->live[i] = r->live[--r->n_live];
        cli_line *l = line_at(r, u.line);
        if (t < 0) {
            td_result_free(&res);
            fprintf(stderr, "transformerd: out of memory\n");
            return -1;
        }
        l->p.jobs[u.k].res = res; /* the line's pipeline frees it */
        l->p.jobs[u.k].status = SRV_JOB_DONE;
        l->n_done++;
    }
    return 0;
}

/* Writes the complete lines at the head, in order. Returns how many. */
static int write_ready(cli_run *r)
{
    int n = 0;
    while (r->n_lines > 0 && r->lines[0]->n_done == r->lines[0]->p.n_jobs) {
        cli_line *l = r->lines[0];
        char *t = srv_pipe_text(&l->p, 0, 0);
        if (!t) {
            fprintf(stderr, "transformerd: line %ld: out of memory\n", r->first + 1);
            r->failed = 1;
        }
        puts(t ? t : "");
        free(t);
        line_free(l);
        memmove(r->lines, r->lines + 1, (size_t)(r->n_lines - 1) * sizeof *r->lines);
        r->n_lines--;
        r->first++;
        n++;
    }
    if (n > 0)
        fflush(stdout);
    r->written += n;
    return n;
}

int cli_translate_stream(td_worker *w, const td_tokenizer *tok, const td_decode_opts *o,
                         const char *lang, int src_lang, int raw_unknown,
                         const srv_gloss_dict *gloss, int batch, int progress)
{
    cli_run r = {.w = w, .tok = tok, .o = o, .lang = lang, .src_lang = src_lang,
                 .raw_unknown = raw_unknown, .gloss = gloss};
    int free_slots;
    td_run_free(w, &free_slots, &r.rows_total);
    r.live = calloc((size_t)free_slots, sizeof *r.live);
    r.src = calloc((size_t)free_slots, sizeof *r.src);
    r.len = calloc((size_t)free_slots, sizeof *r.len);
    r.op = calloc((size_t)free_slots, sizeof *r.op);
    r.seq = calloc((size_t)free_slots, sizeof *r.seq);
    line_reader lr = {0};
    /* units read ahead while the decode runs: a few batches */
    const int ahead = batch * 4;
    const double t0 = srv_now();
    double shown = 0;
    int rc = r.live && r.src && r.len && r.op && r.seq ? 0 : 1;
    while (rc == 0) {
        /* read: what is there, without waiting while there is work */
        for (;;) {
            size_t len;
            char *line;
            while (r.n_queue < ahead && (line = lr_next(&lr, &len)))
                if (add_line(&r, line, len) != 0)
                    rc = 1;
            if (rc || r.n_queue >= ahead || lr.eof)
                break;
            int busy = r.n_live > 0 || r.n_queue > 0 || r.n_lines > 0;
            if (!lr_fill(&lr, !busy))
                break;
        }
        if (rc == 0 && r.n_queue > 0 && admit(&r) != 0)
            rc = 1;
        if (rc == 0 && r.n_live > 0 && step(&r) != 0)
            rc = 1;
        if (write_ready(&r) > 0 && progress && srv_now() - shown > 0.2) {
            double dt = srv_now() - t0;
            fprintf(stderr, "\rtransformerd: %ld lines, %.1f lines/s\033[K", r.written,
                    dt > 0 ? r.written / dt : 0.0);
            shown = srv_now();
        }
        if (lr.eof && r.n_lines == 0 && lr.len == 0)
            break;
    }
    if (r.failed)
        rc = 1;
    if (progress && r.written > 0) {
        double dt = srv_now() - t0;
        fprintf(stderr, "\rtransformerd: %ld lines in %.1f s, %.1f lines/s\033[K\n", r.written,
                dt, dt > 0 ? r.written / dt : 0.0);
    }
    td_run_reset(w);
    for (long i = 0; i < r.n_lines; i++)
        line_free(r.lines[i]);
    free(r.live);
    free(r.src);
    free(r.len);
    free(r.op);
    free(r.seq);
    free(r.queue);
    free(r.lines);
    free(lr.buf);
    return rc;
}

srv_glossary *cli_glossary_load(const char *path, const char *src, const char *tgt,
                                srv_glossaries **store)
{
    enum { MAX_BYTES = 10 << 20 }; /* the daemon's --max-glossary-bytes default */
    *store = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "transformerd: --glossary %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc((size_t)MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, (size_t)MAX_BYTES + 1, f) : 0;
    const int bad = !buf || ferror(f);
    fclose(f);
    if (bad || n > MAX_BYTES) {
        fprintf(stderr, "transformerd: --glossary %s: %s\n", path,
                bad ? "cannot be read" : "more than 10 MiB of entries (a glossary's bound)");
        free(buf);
        return NULL;
    }
    const srv_gloss_limits lim = {.max_glossaries = 1, .max_bytes = MAX_BYTES,
                                  .max_entries = 100000};
    char err[256], warn[256];
    *store = srv_glossaries_open(NULL, &lim, warn, sizeof warn, err, sizeof err);
    if (!*store) {
        fprintf(stderr, "transformerd: --glossary %s: %s\n", path, err);
        free(buf);
        return NULL;
    }
    const size_t pl = strlen(path);
    const int csv = pl >= 4 && !strcasecmp(path + pl - 4, ".csv");
    const srv_gloss_input in = {.src_lang = src, .tgt_lang = tgt, .entries = buf,
                                .entries_n = n, .format = csv ? "csv" : "tsv"};
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *param = NULL;
    char msg[512];
    srv_glossary *g = NULL;
    if (srv_glossaries_create(*store, *name ? name : "glossary", &in, 1, &g, &param, msg,
                              sizeof msg) != SRV_OK) {
        fprintf(stderr, "transformerd: --glossary %s (%s->%s): %s\n", path, src, tgt, msg);
        g = NULL;
    }
    free(buf);
    return g;
}
