/*
 * languages.c - the languages of the serving models, their names, and the
 * detector of a text's language among them (languages.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "languages.h"
#include "models.h"

/* Adds c to L's languages unless it is there. */
static void add_code(srv_langs *L, const char *c)
{
    for (int k = 0; k < L->n; k++)
        if (!strcmp(L->codes[k], c))
            return;
    if (L->n < SRV_LANGS_MAX)
        L->codes[L->n++] = c;
}

void srv_langs_now(const srv_server *s, srv_langs *L)
{
    srv_model *sm[64];
    int n = srv_models_snapshot(s->models, sm, 64);
    L->np = n;
    L->nml = 0;
    for (int i = 0; i < n; i++) {
        srv_pair *p = &L->p[i];
        snprintf(p->name, sizeof p->name, "%s", sm[i]->name);
        srv_lang_canon(sm[i]->src_lang, p->src, sizeof p->src);
        srv_lang_canon(sm[i]->tgt_lang, p->tgt, sizeof p->tgt);
        p->n_langs = sm[i]->n_langs;
        p->max_beam = sm[i]->max_beam;
        L->ml0[i] = L->nml;
        for (int k = 0; k < sm[i]->n_langs && L->nml < 512; k++)
            srv_lang_canon(td_tok_lang(sm[i]->tok, k), L->ml[L->nml++], sizeof L->ml[0]);
        L->mln[i] = L->nml - L->ml0[i];
        srv_model_put(sm[i]);
    }
    L->n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < L->np; i++) {
            if (L->p[i].n_langs == 0)
                add_code(L, pass ? L->p[i].tgt : L->p[i].src);
            else if (pass == 0)
                for (int k = 0; k < L->mln[i]; k++)
                    add_code(L, L->ml[L->ml0[i] + k]);
        }
}

/* Whether model i of L has language c (canonical). */
static int model_has(const srv_langs *L, int i, const char *c)
{
    for (int k = 0; k < L->mln[i]; k++)
        if (!strcmp(L->ml[L->ml0[i] + k], c))
            return 1;
    return 0;
}

int srv_langs_has(const srv_langs *L, const char *code)
{
    char c[32];
    srv_lang_canon(code, c, sizeof c);
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->codes[i], c))
            return 1;
    return 0;
}

int srv_langs_pair(const srv_langs *L, int i, const char *src, const char *tgt)
{
    char cs[32], ct[32];
    srv_lang_canon(src, cs, sizeof cs);
    srv_lang_canon(tgt, ct, sizeof ct);
    if (L->p[i].n_langs == 0)
        return !strcmp(L->p[i].src, cs) && !strcmp(L->p[i].tgt, ct);
    return strcmp(cs, ct) != 0 && model_has(L, i, cs) && model_has(L, i, ct);
}

int srv_langs_sources(const srv_langs *L, const char *tgt, const char **codes)
{
    int n = 0;
    for (int i = 0; i < L->n; i++) {
        int from = 0;
        for (int m = 0; m < L->np && !from; m++)
            from = tgt ? srv_langs_pair(L, m, L->codes[i], tgt)
                       : (L->p[m].n_langs ? model_has(L, m, L->codes[i])
                                          : !strcmp(L->p[m].src, L->codes[i]));
        if (from)
            codes[n++] = L->codes[i];
    }
    return n;
}

int srv_langs_targets(const srv_langs *L, const char *src, const char **codes)
{
    int n = 0;
    for (int i = 0; i < L->n; i++) {
        int into = 0;
        for (int m = 0; m < L->np && !into; m++)
            into = srv_langs_pair(L, m, src, L->codes[i]);
        if (into)
            codes[n++] = L->codes[i];
    }
    /* sorted, as LibreTranslate sorts them */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && strcmp(codes[b - 1], codes[b]) > 0; b--) {
            const char *x = codes[b];
            codes[b] = codes[b - 1];
            codes[b - 1] = x;
        }
    return n;
}

int srv_detect_source(const srv_server *s, const char *text, size_t n, const char *tgt,
                            char *out, size_t outlen)
{
    srv_langs L;
    srv_langs_now(s, &L);
    const char *codes[SRV_LANGS_MAX];
    int nc = srv_langs_sources(&L, tgt, codes);
    srv_lang_score sc[SRV_LANGS_MAX];
    int k = nc > 0 ? srv_langid_detect_among(s->langid, text, n, codes, nc, sc) : 0;
    if (k > 0) {
        snprintf(out, outlen, "%s", sc[0].lang);
        return 0;
    }
    /* none of the sources has a fingerprint: the first model's */
    if (nc > 0) {
        snprintf(out, outlen, "%s", codes[0]);
        return 0;
    }
    return -1;
}

srv_langid *srv_detector_new(const srv_server *s, char *err, size_t errlen)
{
    srv_langid *li;
    /* the serving models' languages, then every language lang_name knows
     * (a model loaded at run time may bring one of them) */
    srv_langs L;
    srv_langs_now(s, &L);
    const char *codes[SRV_LANGS_MAX + 80];
    int n = 0;
    for (int i = 0; i < L.n; i++) {
        /* a multilingual model's language without a fingerprint is not
         * detected, quietly (NLLB has 200); a bilingual model's is named */
        int own = 0;
        for (int m = 0; m < L.np && !own; m++)
            own = !L.p[m].n_langs &&
                  (!strcmp(L.p[m].src, L.codes[i]) || !strcmp(L.p[m].tgt, L.codes[i]));
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.lm", s->o.textcat_dir, L.codes[i]);
        if (own || access(path, R_OK) == 0)
            codes[n++] = L.codes[i];
    }
    char lerr[512];
    li = srv_langid_new(s->o.textcat_dir, codes, n, lerr, sizeof lerr);
    if (li && srv_langid_count(li) > 0) {
        /* the warning names the models' languages only; the table's
         * languages without a fingerprint are simply not detected */
        char quiet[512];
        for (int i = 0; i < srv_lang_table_size(); i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s.lm", s->o.textcat_dir, srv_lang_table_code(i));
            if (access(path, R_OK) == 0 && !srv_langs_has(&L, srv_lang_table_code(i)))
                codes[n++] = srv_lang_table_code(i); /* libexttextcat prints a missing one */
        }
        srv_langid *all = srv_langid_new(s->o.textcat_dir, codes, n, quiet, sizeof quiet);
        if (all && srv_langid_count(all) > srv_langid_count(li)) {
            srv_langid_free(li);
            li = all;
        } else {
            srv_langid_free(all);
        }
    }
    if (!li) {
        snprintf(err, errlen, "language detection (--textcat-dir %s): %s", s->o.textcat_dir,
                 lerr);
        return NULL;
    }
    /* short texts: our profiles, for the languages that have one */
    if (s->o.langid_dir && *s->o.langid_dir) {
        char perr[1024];
        int np = srv_langid_load_profiles(li, s->o.langid_dir, perr, sizeof perr);
        if (perr[0])
            fprintf(stderr, "transformerd: language detection: %s\n", perr);
        if (np > 0)
            fprintf(stderr, "transformerd: language detection: profiles of %d language%s from "
                            "%s\n", np, np == 1 ? "" : "s", s->o.langid_dir);
    }
    /* without any fingerprint (libexttextcat-data not installed) the
     * service still starts: /detect answers [], source=auto takes the
     * first model's source language with confidence 0 */
    if (srv_langid_count(li) == 0)
        fprintf(stderr,
                "transformerd: language detection off (--textcat-dir %s: %s): /detect answers [], "
                "source=auto takes the first source language\n",
                s->o.textcat_dir, lerr);
    else if (lerr[0])
        fprintf(stderr, "transformerd: language detection: %s\n", lerr);
    return li;
}
