/*
 * languages.c - the languages of the serving models, their names, and the
 * detector of a text's language among them (languages.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "languages.h"
#include "models.h"

static const char *const k_lang_names[][2] = {
    {"en", "English"},   {"de", "German"},     {"fr", "French"},    {"es", "Spanish"},
    {"it", "Italian"},   {"pt", "Portuguese"}, {"nl", "Dutch"},     {"ru", "Russian"},
    {"zh", "Chinese"},   {"ja", "Japanese"},   {"ar", "Arabic"},    {"pl", "Polish"},
    {"sv", "Swedish"},   {"cs", "Czech"},      {"fi", "Finnish"},   {"uk", "Ukrainian"},
    {"da", "Danish"},    {"el", "Greek"},      {"hu", "Hungarian"}, {"ro", "Romanian"},
    {"tr", "Turkish"},   {"ko", "Korean"},     {"hi", "Hindi"},     {"nb", "Norwegian"},
};

const char *srv_lang_name(const char *code)
{
    for (size_t i = 0; i < sizeof k_lang_names / sizeof k_lang_names[0]; i++)
        if (!strcmp(k_lang_names[i][0], code))
            return k_lang_names[i][1];
    return code;
}

void srv_langs_now(const srv_server *s, srv_langs *L)
{
    L->np = srv_models_pairs(s->models, L->p, 64);
    if (L->np > 64)
        L->np = 64;
    L->n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < L->np; i++) {
            const char *c = pass ? L->p[i].tgt : L->p[i].src;
            int seen = 0;
            for (int k = 0; k < L->n; k++)
                seen |= !strcmp(L->codes[k], c);
            if (!seen)
                L->codes[L->n++] = c;
        }
}

int srv_langs_has(const srv_langs *L, const char *code)
{
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->codes[i], code))
            return 1;
    return 0;
}

int srv_langs_sources(const srv_langs *L, const char *tgt, const char **codes)
{
    int n = 0;
    for (int i = 0; i < L->np; i++) {
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= !strcmp(codes[k], L->p[i].src);
        if (!seen && (!tgt || !strcmp(L->p[i].tgt, tgt)))
            codes[n++] = L->p[i].src;
    }
    return n;
}

int srv_detect_source(const srv_server *s, const char *text, size_t n, const char *tgt,
                            char *out, size_t outlen)
{
    srv_langs L;
    srv_langs_now(s, &L);
    const char *codes[64];
    int nc = srv_langs_sources(&L, tgt, codes);
    srv_lang_score sc[128];
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
    const char *codes[128 + 32];
    int n = 0;
    for (int i = 0; i < L.n; i++)
        codes[n++] = L.codes[i];
    char lerr[512];
    li = srv_langid_new(s->o.textcat_dir, codes, n, lerr, sizeof lerr);
    if (li && srv_langid_count(li) > 0) {
        /* the warning names the models' languages only; the table's
         * languages without a fingerprint are simply not detected */
        char quiet[512];
        for (size_t i = 0; i < sizeof k_lang_names / sizeof k_lang_names[0]; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s.lm", s->o.textcat_dir, k_lang_names[i][0]);
            if (access(path, R_OK) == 0) /* libexttextcat itself prints a missing one */
                codes[n++] = k_lang_names[i][0];
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
