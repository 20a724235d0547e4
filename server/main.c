/*
 * main.c - the transformerd command line.
 *
 *   transformerd translate-ids --model DIR [--beam N] [--max-length N]
 *                              [--threads N] [--batch N] [--device D]
 *                              [--dtype T] [--precision P]
 *       reads one sentence of space-separated source token ids per line
 *       from stdin and prints the best hypothesis' ids, its score and a tab
 *       between them, one line per input line, in order.
 *   transformerd translate --model DIR [--beam N] [--max-length N] [--threads N]
 *                          [--batch N] [--device D] [--dtype T] [--precision P]
 *                          [--source LANG --target LANG]
 *       reads one text per line from stdin and writes its translation,
 *       one line per input line, in order; a line of several sentences is
 *       translated sentence by sentence (tokenizer/segment.h) and put back
 *       together with its own separators (--no-split: each line one
 *       unit); symbols the model cannot write are copied from the source
 *       as the API copies them (--no-copy-unknown: the model's raw
 *       output); --glossary FILE applies a glossary's entries (TSV, or CSV
 *       for a .csv) as the API's `glossary` does; each line is written as soon as it is done
 *       (cli_translate.c, through the daemon's text pipeline). A multilingual model (M2M100, NLLB-200) needs
 *       --source and --target (its language codes: en, de; eng_Latn): the
 *       source language's token first, the target's forced first.
 *   transformerd translate-file IN OUT [--format EXT] [--source LANG]
 *                               [--target LANG] [--overwrite] [serve's options]
 *       translates a file (every format of POST /translate_file: .txt,
 *       .html, subtitles, catalogues, .docx, .pptx, .odt, .odp, .epub) into
 *       OUT, exactly as the daemon's API does (cli_file.c).
 *   transformerd tokenize --model DIR [--target] [--pieces]
 *       prints each stdin line's model ids (or pieces), space-separated.
 *   transformerd serve ...      the HTTP daemon (server/serve.c)
 *   transformerd models install FILE.argosmodel [--models-dir DIR]
 *       unpacks an Argos Translate package, offline (cli_models.c).
 *   transformerd version | --version
 *       prints the version and the git commit it was built from.
 *
 * Every subcommand's --help (-h) prints its options with their defaults
 * and exits 0. Without --model the model is srv_default_model_dir()'s
 * (TRANSFORMERD_MODEL, the source tree's models/en-de, the installed one).
 * `translate` reports its progress on stderr when stderr is a terminal.
 *
 * --device cpu | cuda[:N]; --dtype auto | float32 | float16 | bfloat16 | int8 |
 * int8-all (the weights' storage; float16 needs cuda, bfloat16 cuda or a cpu
 * with AVX512-BF16 or AMX-BF16, int8 the cpu);
 * --precision full | half (cuda
 * GEMMs with half weights: float32-accurate or half-rounded activations).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buildinfo.h"
#include "cli_file.h"
#include "cli_models.h"
#include "langcodes.h"
#include "models.h"
#include "po.h"
#include "po_helper.h"
#include "cli_translate.h"
#include "serve.h"
#include "tokenizer.h"
#include "translator.h"

/* Options shared by translate and translate-ids. */
typedef struct cli_opts {
    const char *model, *device, *dtype, *precision;
    int beam, max_length, threads, batch;
    int target, pieces; /* tokenize */
    int no_split;       /* translate: each line one unit, not split into sentences */
    int raw_unknown;    /* translate: no unknown symbol copied (the API's copy_unknown false) */
    const char *src_lang, *tgt_lang; /* translate: a multilingual model's languages */
    const char *glossary; /* translate: a glossary file (DeepL's TSV or CSV entries) */
} cli_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: transformerd translate [--model DIR] [--beam N] [--max-length N]\n"
            "                              [--threads N] [--batch N] [--device cpu|cuda[:N]]\n"
            "                              [--dtype auto|float32|float16|bfloat16|int8|int8-all]\n"
            "                              [--precision full|half] [--no-split] [--no-copy-unknown]\n"
            "                              [--source LANG --target LANG] [--glossary FILE]\n"
            "       transformerd tokenize [--model DIR] [--target] [--pieces]\n"
            "       transformerd translate-ids [--model DIR] ... (the options of translate)\n"
            "       transformerd translate-file IN OUT [--format EXT] [--source L] [--target L] "
            "[--overwrite] [serve's options]\n"
            "       transformerd serve [--model DIR] ...\n"
            "       transformerd models install FILE.argosmodel [--models-dir DIR]\n"
            "       transformerd version             (or --version)\n"
            "each command's options and defaults: transformerd COMMAND --help\n");
}

/* COMMAND --help: the options of translate, translate-ids or tokenize
 * with their defaults. */
static void cmd_usage(FILE *f, const char *cmd, int tokenize)
{
    if (tokenize) {
        fprintf(f, "usage: transformerd tokenize [--model DIR] [--target] [--pieces]\n"
                   "prints each stdin line's model ids (or pieces), space-separated\n");
    } else if (!strcmp(cmd, "translate")) {
        fprintf(f, "usage: transformerd translate [options] <in.txt >out.txt\n"
                   "translates stdin, one sentence a line, in order (progress on stderr when it "
                   "is a terminal)\n");
    } else {
        fprintf(f, "usage: transformerd translate-ids [options] <ids.txt\n"
                   "reads space-separated source token ids a line; prints the best hypothesis' "
                   "ids, a tab and its score\n");
    }
    fprintf(f, "  %-16s %s\n  %-16s (default: %s)\n", "--model DIR",
            "model directory (Hugging Face Marian layout)", "",
            srv_default_model_dir());
    if (tokenize) {
        fprintf(f, "  %-16s %s\n  %-16s %s\n", "--target",
                "the target side's tokenizer (default: the source's)", "--pieces",
                "print pieces, not ids (default: ids)");
        return;
    }
    fprintf(f,
            "  %-16s %s\n  %-16s %s\n  %-16s %s\n  %-16s %s\n  %-16s %s\n  %-16s %s\n"
            "  %-16s %s\n",
            "--beam N", "beam size 1..16, 1 greedy (default: the model's num_beams)",
            "--max-length N", "target tokens incl. </s> (default: the model's max_length - 1)",
            "--threads N", "engine CPU threads (default: 0, all cores)", "--batch N",
            "sentences per batch 1..256 (default: 32)", "--device D",
            "cpu | cuda | cuda:N (default: cpu)", "--dtype T",
            "auto | float32 | float16 (cuda) | bfloat16 (cuda, cpu with AVX512-BF16 or AMX) | "
            "int8 | int8-all (cpu) (default: auto, the checkpoint's)",
            "--precision P", "full | half, cuda GEMMs with half weights (default: full)");
    if (!strcmp(cmd, "translate")) {
        fprintf(f, "  %-16s %s\n", "--no-split",
                "each line one input (default: a line's sentences are translated one by one "
                "and put back between its separators)");
        fprintf(f, "  %-16s %s\n", "--no-copy-unknown",
                "the model's raw output: symbols it cannot write (<unk>) left out (default: "
                "copied from the source by the attention, as the API's copy_unknown)");
        fprintf(f, "  %-16s %s\n  %-16s %s\n", "--source LANG",
                "a multilingual model's source language code: en, eng_Latn (default: none; "
                "required by M2M100 and NLLB models)",
                "--target LANG", "its target language code (default: none; required with --source)");
        fprintf(f, "  %-16s %s\n", "--glossary FILE",
                "a glossary's entries, source<TAB>target a line (comma-separated in a .csv), "
                "applied as the API's glossary (default: none)");
    }
}

static void print_version(void)
{
    printf("transformerd %s (commit %s)\n", srv_version, srv_commit);
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "transformerd: %s: expected an integer in %d..%d, got '%s'\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Parses one line of ids; returns the count or -1 on a malformed id. */
static int parse_ids(char *line, int32_t **ids, int *cap)
{
    int n = 0;
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        char *end;
        errno = 0;
        long v = strtol(tok, &end, 10);
        if (errno || *end || v < 0 || v > INT32_MAX)
            return -1;
        if (n == *cap) {
            int nc = *cap ? 2 * *cap : 64;
            int32_t *p = realloc(*ids, (size_t)nc * sizeof(int32_t));
            if (!p)
                return -1;
            *ids = p;
            *cap = nc;
        }
        (*ids)[n++] = (int32_t)v;
    }
    return n;
}

typedef struct pending {
    int32_t *ids;
    int len;
} pending;

static int flush(td_worker *w, pending *p, int n, const td_decode_opts *o)
{
    const int32_t *src[256] = {0};
    int len[256] = {0};
    td_result res[256];
    char err[512];
    for (int i = 0; i < n; i++) {
        src[i] = p[i].ids;
        len[i] = p[i].len;
    }
    if (td_translate_batch(w, src, len, n, o, res, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const td_hypothesis *h = &res[i].hyps[0];
        for (int t = 0; t < h->n_tokens; t++)
            printf(t ? " %d" : "%d", h->tokens[t]);
        printf("\t%.6f\n", (double)h->score);
        td_result_free(&res[i]);
    }
    return 0;
}

static int parse_cli(int argc, char **argv, struct cli_opts *o, int tokenize, const char *cmd);

static int cmd_translate_ids(int argc, char **argv)
{
    struct cli_opts c;
    int prc = parse_cli(argc, argv, &c, 0, "translate-ids");
    if (prc)
        return prc > 0 ? 0 : 2;
    const char *model = c.model, *device = c.device;
    int beam = c.beam, max_length = c.max_length, threads = c.threads, batch = c.batch;
    char err[1024];
    td_model *m = NULL;
    td_load_opts lo = {.device = device, .n_threads = threads, .dtype = c.dtype,
                       .precision = c.precision};
    if (td_model_load(&m, model, &lo, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", model, err);
        return 1;
    }
    td_decode_opts o;
    td_decode_opts_default(m, &o);
    if (beam)
        o.beam_size = beam;
    if (max_length)
        o.max_length = max_length;
    td_worker_opts wo = {.max_batch = batch, .max_length = o.max_length,
                         .max_beam = o.beam_size, .n_threads = threads};
    td_worker *w = NULL;
    if (td_worker_init(&w, m, &wo, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        td_model_free(m);
        return 1;
    }
    pending *p = calloc((size_t)batch, sizeof(pending));
    int np = 0, rc = 0, lineno = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (p && getline(&line, &lcap, stdin) > 0) {
        lineno++;
        int cap = 0;
        p[np].ids = NULL;
        p[np].len = parse_ids(line, &p[np].ids, &cap);
        if (p[np].len <= 0) {
            fprintf(stderr, "transformerd: line %d: expected space-separated token ids\n", lineno);
            free(p[np].ids);
            rc = 1;
            break;
        }
        if (++np == batch) {
            if (flush(w, p, np, &o)) {
                rc = 1;
                break;
            }
            for (int i = 0; i < np; i++)
                free(p[i].ids);
            np = 0;
        }
    }
    if (rc == 0 && np > 0 && flush(w, p, np, &o))
        rc = 1;
    for (int i = 0; p && i < np; i++)
        free(p[i].ids);
    free(p);
    free(line);
    td_worker_free(w);
    td_model_free(m);
    return rc;
}


/* 0: parsed; 1: --help was printed (exit 0); -1: an error was printed. */
static int parse_cli(int argc, char **argv, cli_opts *o, int tokenize, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->device = "cpu";
    o->batch = 32;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cmd_usage(stdout, cmd, tokenize);
            return 1;
        }
        if (tokenize && !strcmp(a, "--target")) {
            o->target = 1;
            continue;
        }
        if (tokenize && !strcmp(a, "--pieces")) {
            o->pieces = 1;
            continue;
        }
        if (!tokenize && !strcmp(a, "--no-split")) {
            o->no_split = 1;
            continue;
        }
        if (!tokenize && !strcmp(a, "--no-copy-unknown")) {
            o->raw_unknown = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "transformerd: %s needs a value\n", a);
            return -1;
        }
        if (!strcmp(a, "--model"))
            o->model = v;
        else if (!tokenize && !strcmp(a, "--device"))
            o->device = v;
        else if (!tokenize && !strcmp(a, "--dtype"))
            o->dtype = v;
        else if (!tokenize && !strcmp(a, "--precision"))
            o->precision = v;
        else if (!strcmp(cmd, "translate") && !strcmp(a, "--source"))
            o->src_lang = v;
        else if (!strcmp(cmd, "translate") && !strcmp(a, "--target"))
            o->tgt_lang = v;
        else if (!strcmp(cmd, "translate") && !strcmp(a, "--glossary"))
            o->glossary = v;
        else if (!tokenize && !strcmp(a, "--beam")) {
            if (parse_int(a, v, 1, TD_MAX_BEAM, &o->beam))
                return -1;
        } else if (!tokenize && !strcmp(a, "--max-length")) {
            if (parse_int(a, v, 1, 1 << 20, &o->max_length))
                return -1;
        } else if (!tokenize && !strcmp(a, "--threads")) {
            if (parse_int(a, v, 0, 1024, &o->threads))
                return -1;
        } else if (!tokenize && !strcmp(a, "--batch")) {
            if (parse_int(a, v, 1, 256, &o->batch))
                return -1;
        } else {
            fprintf(stderr, "transformerd: %s: unknown option '%s'\n", cmd, a);
            cmd_usage(stderr, cmd, tokenize);
            return -1;
        }
        i++;
    }
    if (!o->model)
        o->model = srv_default_model_dir();
    char err[256];
    const td_load_opts lo = {.dtype = o->dtype, .precision = o->precision};
    if (td_load_opts_check(&lo, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        return -1;
    }
    return 0;
}

/* Reads one line (without its newline) of any bytes, NULs included. */
static ssize_t read_line(char **line, size_t *cap, FILE *f)
{
    ssize_t n = getline(line, cap, f);
    if (n > 0 && (*line)[n - 1] == '\n')
        (*line)[--n] = 0;
    if (n > 0 && (*line)[n - 1] == '\r')
        (*line)[--n] = 0;
    return n;
}

/* The languages of a bilingual model: the daemon's of the directory
 * (srv_model_dir_langs, its name as serve names it), canonical as the API
 * splits in the source and matches a glossary's pair. */
static void model_langs(const char *dir, char *out, size_t outn, char *tgt_out, size_t tgt_n)
{
    char tmp[4096], name[128], src[16], tgt[16];
    snprintf(tmp, sizeof tmp, "%s", dir);
    size_t k = strlen(tmp);
    while (k > 1 && tmp[k - 1] == '/')
        tmp[--k] = 0;
    const char *base = strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp;
    snprintf(name, sizeof name, "%.127s", base);
    for (char *p = name; *p; p++)
        if (!srv_model_name_char(*p))
            *p = '_';
    srv_model_dir_langs(dir, name, "", src, tgt);
    srv_lang_canon(src, out, outn);
    srv_lang_canon(tgt, tgt_out, tgt_n);
}

/* translate's --source / --target against the model's languages: both
 * for a multilingual model (*src its number, *tgt_token its target's
 * token), neither for one without. Returns 0 or -1 (a message printed). */
static int cli_languages(const td_tokenizer *tok, const cli_opts *c, int *src, int32_t *tgt_token)
{
    const int n = td_tok_n_langs(tok);
    if (n == 0) {
        if (c->src_lang || c->tgt_lang) {
            fprintf(stderr, "transformerd: %s: this model has no language tokens: translate "
                            "without --source or --target\n", c->model);
            return -1;
        }
        return 0;
    }
    if (!c->src_lang || !c->tgt_lang) {
        fprintf(stderr, "transformerd: %s: a multilingual model (%d languages, e.g. %s): name "
                        "them with --source LANG --target LANG\n", c->model, n, td_tok_lang(tok, 0));
        return -1;
    }
    const int s = td_tok_lang_find(tok, c->src_lang), t = td_tok_lang_find(tok, c->tgt_lang);
    if (s < 0 || t < 0) {
        fprintf(stderr, "transformerd: %s: no language '%s' in this model (its codes: %s, %s, "
                        "...)\n", c->model, s < 0 ? c->src_lang : c->tgt_lang, td_tok_lang(tok, 0),
                n > 1 ? td_tok_lang(tok, 1) : "");
        return -1;
    }
    *src = s;
    *tgt_token = td_tok_lang_token(tok, t);
    return 0;
}

static int cmd_translate(int argc, char **argv)
{
    cli_opts c;
    int prc = parse_cli(argc, argv, &c, 0, "translate");
    if (prc)
        return prc > 0 ? 0 : 2;
    /* progress for people: only when stderr is a terminal, never in a pipe
     * or a log */
    const int progress = isatty(STDERR_FILENO);
    char err[1024];
    td_model *m = NULL;
    td_load_opts lo = {.device = c.device, .n_threads = c.threads, .dtype = c.dtype,
                       .precision = c.precision};
    if (td_model_load(&m, c.model, &lo, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", c.model, err);
        return 1;
    }
    td_tokenizer *tok = NULL;
    if (td_model_tokenizer_load(m, c.model, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", c.model, err);
        td_model_free(m);
        return 1;
    }
    /* the model's defaults as the daemon's (an Argos package's as
     * argos-translate decodes) */
    td_decode_opts o;
    srv_model_defaults(m, td_tok_argos_package(c.model), &o);
    /* an Argos package's target_prefix, forced as the daemon forces it */
    int32_t pkg_prefix = td_tok_target_prefix(tok);
    if (pkg_prefix >= 0) {
        o.prefix = &pkg_prefix;
        o.n_prefix = 1;
    }
    if (c.beam)
        o.beam_size = c.beam;
    if (c.max_length)
        o.max_length = c.max_length;
    /* a multilingual model: the source language's token first in every
     * source, the target's forced first in every hypothesis */
    int src_lang = -1;
    int32_t tgt_token = -1;
    if (cli_languages(tok, &c, &src_lang, &tgt_token) != 0) {
        td_tok_free(tok);
        td_model_free(m);
        return 2;
    }
    if (src_lang >= 0) {
        o.prefix = &tgt_token;
        o.n_prefix = 1;
    }
    /* memory as the lines need it (td_worker_opts.grow), not for the
     * largest batch at once */
    td_worker_opts wo = {.max_batch = c.batch, .max_length = o.max_length,
                         .max_beam = o.beam_size, .n_threads = c.threads, .grow = 1};
    td_worker *w = NULL;
    if (td_worker_init(&w, m, &wo, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        td_tok_free(tok);
        td_model_free(m);
        return 1;
    }
    /* Each line written as soon as its sentences are done, in order; a
     * line longer than the model's positions is cut (with a warning)
     * rather than failing the whole run: every line gets an output line. */
    char lang[16], tgt[16];
    if (src_lang >= 0) { /* the sentence split's language, as the API's: canonical */
        srv_lang_canon(c.src_lang, lang, sizeof lang);
        srv_lang_canon(c.tgt_lang, tgt, sizeof tgt);
    } else {
        model_langs(c.model, lang, sizeof lang, tgt, sizeof tgt);
    }
    /* --glossary: its dictionary for the pair, applied as the API's */
    srv_glossaries *gstore = NULL;
    srv_glossary *g = c.glossary ? cli_glossary_load(c.glossary, lang, tgt, &gstore) : NULL;
    int rc = c.glossary && !g ? 2
                              : cli_translate_stream(w, tok, &o, c.no_split ? NULL : lang,
                                                     src_lang, c.raw_unknown,
                                                     g ? srv_glossary_dict(g, lang, tgt) : NULL,
                                                     c.batch, progress);
    srv_glossary_put(g);
    srv_glossaries_close(gstore);
    td_worker_free(w);
    td_tok_free(tok);
    td_model_free(m);
    return rc;
}

static int cmd_tokenize(int argc, char **argv)
{
    cli_opts c;
    int prc = parse_cli(argc, argv, &c, 1, "tokenize");
    if (prc)
        return prc > 0 ? 0 : 2;
    char err[1024];
    td_tokenizer *tok = NULL;
    /* The tokenizer alone: no weights are loaded. */
    if (td_tok_load(&tok, c.model, 0, 0, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", c.model, err);
        return 1;
    }
    td_tok_side side = c.target ? TD_TOK_TARGET : TD_TOK_SOURCE;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = read_line(&line, &cap, stdin)) >= 0) {
        int32_t *ids = NULL;
        int n = 0;
        const char **pieces = NULL;
        if (td_tok_encode(tok, side, line, (size_t)len, &ids, &n) != 0 ||
            (c.pieces && td_tok_pieces(tok, side, ids, n, &pieces) != 0)) {
            fprintf(stderr, "transformerd: out of memory\n");
            rc = 1;
        } else {
            for (int i = 0; i < n; i++) {
                if (c.pieces)
                    printf(i ? " %s" : "%s", pieces[i]);
                else
                    printf(i ? " %d" : "%d", ids[i]);
            }
            putchar('\n');
        }
        free(pieces);
        free(ids);
    }
    free(line);
    td_tok_free(tok);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    srv_po_helper("/proc/self/exe"); /* gettext catalogues: our own po-helper */
    if (!strcmp(argv[1], "translate"))
        return cmd_translate(argc - 2, argv + 2);
    if (!strcmp(argv[1], "tokenize"))
        return cmd_tokenize(argc - 2, argv + 2);
    if (!strcmp(argv[1], "po-helper")) /* the daemon's own (po_helper.c) */
        return cli_po_helper(argc - 2, argv + 2);
    if (!strcmp(argv[1], "translate-file"))
        return cli_translate_file(argc - 2, argv + 2);
    if (!strcmp(argv[1], "translate-ids"))
        return cmd_translate_ids(argc - 2, argv + 2);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version") ||
        !strcmp(argv[1], "-V")) {
        print_version();
        return 0;
    }
    if (!strcmp(argv[1], "serve"))
        return srv_main(argc - 2, argv + 2);
    if (!strcmp(argv[1], "models"))
        return cli_models(argc - 2, argv + 2);
    fprintf(stderr, "transformerd: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
