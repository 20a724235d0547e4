/*
 * langid.c - libexttextcat fingerprints, one per candidate language
 * (langid.h).
 *
 * The text's fingerprint (its 400 most frequent UTF-8 character 1..5-grams)
 * is compared with each language's by textcat's out-of-place distance d.
 * textcat itself calls two languages a tie when d2 <= 1.03 d1; the
 * confidence keeps that scale: w = exp(-(d / d_best - 1) / 0.03), the
 * confidences are 100 w / sum(w). A text that is clearly one language
 * (the next distance 10% or more above the best) gets over 95; two
 * languages at the same distance get 50 each. Below textcat's own minimum
 * document size (25 bytes: "SHORT") the margin widens as 0.03 x 25 / n, so
 * that a two-letter text is never reported with a confidence a sentence
 * would earn.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libexttextcat/fingerprint.h>

#include "langid.h"
#include "lidprof.h"

#define LANGID_MAXNGRAMS 400
#define LANGID_TIE 0.03 /* textcat's THRESHOLDVALUE - 1 */
#define LANGID_SHORT 25 /* textcat's minimum document size, bytes */

struct srv_langid {
    int n;
    void **fp;
    char (*code)[16];
    srv_lidprof **prof; /* per candidate, NULL without a profile */
};

srv_langid *srv_langid_new(const char *dir, const char *const *codes, int n, char *err,
                           size_t errlen)
{
    err[0] = 0;
    srv_langid *li = calloc(1, sizeof *li);
    if (!li || n < 0) {
        free(li);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    li->fp = calloc((size_t)(n > 0 ? n : 1), sizeof *li->fp);
    li->code = calloc((size_t)(n > 0 ? n : 1), sizeof *li->code);
    li->prof = calloc((size_t)(n > 0 ? n : 1), sizeof *li->prof);
    if (!li->fp || !li->code || !li->prof) {
        srv_langid_free(li);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t el = 0;
    for (int i = 0; i < n; i++) {
        char path[1024];
        if (strlen(codes[i]) >= sizeof li->code[0] || strchr(codes[i], '/'))
            continue;
        int dup = 0;
        for (int k = 0; k < li->n; k++)
            dup |= !strcmp(li->code[k], codes[i]);
        if (dup)
            continue;
        snprintf(path, sizeof path, "%s/%s.lm", dir, codes[i]);
        void *fp = fp_Init(codes[i]);
        if (!fp) {
            srv_langid_free(li);
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        if (fp_Read(fp, path, LANGID_MAXNGRAMS) == 0) {
            fp_Done(fp);
            if (el < errlen)
                el += (size_t)snprintf(err + el, errlen - el, "%sno fingerprint %s",
                                       el ? "; " : "", path);
            continue;
        }
        li->fp[li->n] = fp;
        snprintf(li->code[li->n], sizeof li->code[0], "%s", codes[i]);
        li->n++;
    }
    if (li->n == 0 && !err[0])
        snprintf(err, errlen, "no candidate language");
    return li;
}

int srv_langid_count(const srv_langid *li)
{
    return li->n;
}

int srv_langid_load_profiles(srv_langid *li, const char *dir, char *err, size_t errlen)
{
    err[0] = 0;
    size_t el = 0;
    int got = 0;
    for (int i = 0; dir && *dir && i < li->n; i++) {
        char path[1024], why[512];
        snprintf(path, sizeof path, "%s/%s.lid.gz", dir, li->code[i]);
        srv_lidprof_free(li->prof[i]);
        li->prof[i] = srv_lidprof_load(path, li->code[i], why, sizeof why);
        got += li->prof[i] != NULL;
        if (why[0] && el < errlen)
            el += (size_t)snprintf(err + el, errlen - el, "%s%s", el ? "; " : "", why);
    }
    return got;
}

static int score_cmp(const void *a, const void *b)
{
    const srv_lang_score *x = a, *y = b;
    if (x->confidence != y->confidence)
        return x->confidence < y->confidence ? 1 : -1;
    return strcmp(x->lang, y->lang);
}

/* Whether candidate i takes part (every one when only is NULL). */
static int among(const srv_langid *li, int i, const char *const *only, int n_only)
{
    if (!only)
        return 1;
    for (int k = 0; k < n_only; k++)
        if (!strcmp(li->code[i], only[k]))
            return 1;
    return 0;
}

int srv_langid_detect(const srv_langid *li, const char *text, size_t n, srv_lang_score *out)
{
    return srv_langid_detect_among(li, text, n, NULL, 0, out);
}

int srv_langid_profiles_cover(const srv_langid *li, const char *const *only, int n_only)
{
    int k = 0;
    for (int i = 0; i < li->n; i++)
        if (among(li, i, only, n_only)) {
            if (!li->prof[i])
                return 0;
            k++;
        }
    return k > 0;
}

/* The profiles' answer (lidprof.h): the posterior of each candidate taking
 * part, at equal priors. 0 (textcat answers) when one of them has no
 * profile or the text has no word. */
static int detect_profiles(const srv_langid *li, const char *text, size_t n,
                           const char *const *only, int n_only, srv_lang_score *out)
{
    double s[SRV_LANGID_MAX], best = -INFINITY, sum = 0;
    int idx[SRV_LANGID_MAX], k = 0;
    if (!srv_langid_profiles_cover(li, only, n_only))
        return 0;
    for (int i = 0; i < li->n && k < SRV_LANGID_MAX; i++) {
        if (!among(li, i, only, n_only))
            continue;
        int words = 0;
        s[k] = srv_lidprof_score(li->prof[i], text, n, &words);
        if (!words)
            return 0;
        best = s[k] > best ? s[k] : best;
        idx[k++] = i;
    }
    for (int j = 0; j < k; j++)
        sum += s[j] = exp(s[j] - best);
    for (int j = 0; j < k; j++) {
        snprintf(out[j].lang, sizeof out[j].lang, "%s", li->code[idx[j]]);
        out[j].confidence = round(1000.0 * s[j] / sum) / 10.0;
    }
    qsort(out, (size_t)k, sizeof *out, score_cmp);
    return k;
}

int srv_langid_detect_among(const srv_langid *li, const char *text, size_t n,
                            const char *const *only, int n_only, srv_lang_score *out)
{
    int byprof = detect_profiles(li, text, n, only, n_only, out);
    if (byprof > 0)
        return byprof;
    void *fp = fp_Init(NULL);
    if (!fp)
        return -1;
    fp_SetProperty(fp, TCPROP_UTF8AWARE, TC_TRUE);
    fp_SetProperty(fp, TCPROP_MINIMUM_DOCUMENT_SIZE, 1);
    double *d = malloc((size_t)(li->n > 0 ? li->n : 1) * sizeof *d);
    if (!d) {
        fp_Done(fp);
        return -1;
    }
    /* fp_Create fails on a text with no n-gram at all (empty, or only
     * characters textcat skips): every language is then as likely. */
    int have = n > 0 && n < UINT_MAX && fp_Create(fp, text, (uint4)n, LANGID_MAXNGRAMS) != 0;
    double best = INFINITY;
    for (int i = 0; i < li->n; i++) {
        d[i] = !among(li, i, only, n_only) ? -1.0
               : have                       ? (double)fp_Compare(li->fp[i], fp, INT_MAX)
                                            : 0.0;
        if (d[i] >= 0 && d[i] < best)
            best = d[i];
    }
    double sum = 0, tie = n < LANGID_SHORT ? LANGID_TIE * LANGID_SHORT / (double)(n ? n : 1)
                                           : LANGID_TIE;
    for (int i = 0; i < li->n; i++) {
        if (d[i] < 0)
            continue;
        double rel = best > 0 ? d[i] / best - 1.0 : (d[i] > best ? INFINITY : 0.0);
        d[i] = exp(-rel / tie);
        sum += d[i];
    }
    int k = 0;
    for (int i = 0; i < li->n; i++) {
        if (d[i] < 0)
            continue;
        snprintf(out[k].lang, sizeof out[k].lang, "%s", li->code[i]);
        out[k++].confidence = round(1000.0 * d[i] / sum) / 10.0;
    }
    qsort(out, (size_t)k, sizeof *out, score_cmp);
    free(d);
    fp_Done(fp);
    return k;
}

void srv_langid_free(srv_langid *li)
{
    if (!li)
        return;
    for (int i = 0; li->fp && i < li->n; i++)
        fp_Done(li->fp[i]);
    for (int i = 0; li->prof && i < li->n; i++)
        srv_lidprof_free(li->prof[i]);
    free(li->prof);
    free(li->fp);
    free(li->code);
    free(li);
}

size_t srv_langid_bytes(const srv_langid *li)
{
    size_t n = 0;
    for (int i = 0; li && i < li->n; i++)
        n += srv_lidprof_bytes(li->prof[i]);
    return n;
}
