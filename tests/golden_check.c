/*
 * golden_check.c - see golden_check.h.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_check.h"

int golden_list(char (*names)[256], int max)
{
    int n = 0;
    DIR *d = opendir(TD_TEST_DATA "/fixtures");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (e->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/fixtures/%.200s/golden.json", TD_TEST_DATA, e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        fclose(f);
        snprintf(names[n++], 256, "%.200s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
    return n;
}

/* NaN on either side is never close: every comparison here is written so
 * that a NaN fails it (a "worst difference" kept with `diff > worst` would
 * silently skip NaN). */
static int close_enough(const golden_tol *tol, double got, double want)
{
    if (isnan(got) || isnan(want))
        return 0;
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs(got - want) <= tol->abs + tol->rel * fabs(want);
}

/* Compares one result against its golden object; returns the number of
 * mismatches and prints them. */
static int compare(const char *where, const td_result *r, json_t *gold, int want_attn,
                   const golden_tol *tol, golden_count *count)
{
    int bad = 0, tokens_differ = 0;
    json_t *hyps = json_object_get(gold, "hypotheses");
    if ((int)json_array_size(hyps) != r->n_hyps) {
        fprintf(stderr, "%s: %d hypotheses, golden has %zu\n", where, r->n_hyps,
                json_array_size(hyps));
        return 1;
    }
    for (int h = 0; h < r->n_hyps; h++) {
        json_t *gh = json_array_get(hyps, (size_t)h);
        json_t *toks = json_object_get(gh, "tokens");
        const td_hypothesis *hy = &r->hyps[h];
        int same = (int)json_array_size(toks) == hy->n_tokens;
        for (int t = 0; same && t < hy->n_tokens; t++)
            same = json_integer_value(json_array_get(toks, (size_t)t)) == hy->tokens[t];
        count->hyps++;
        count->exact += same;
        if (!same && tol->half) {
            fprintf(stderr, "%s: hypothesis %d tokens differ (counted against the 98%%)\n",
                    where, h);
            tokens_differ = 1; /* attention rows follow the tokens */
            continue;
        }
        if (!same) {
            fprintf(stderr, "%s: hypothesis %d tokens differ:\n  got ", where, h);
            for (int t = 0; t < hy->n_tokens; t++)
                fprintf(stderr, "%d ", hy->tokens[t]);
            fprintf(stderr, "\n  want ");
            for (size_t t = 0; t < json_array_size(toks); t++)
                fprintf(stderr, "%lld ", (long long)json_integer_value(json_array_get(toks, t)));
            fprintf(stderr, "\n");
            bad++;
            continue;
        }
        double want = json_number_value(json_object_get(gh, "score"));
        if (!close_enough(tol, hy->score, want)) {
            fprintf(stderr, "%s: hypothesis %d score %.7g, golden %.7g\n", where, h,
                    (double)hy->score, want);
            bad++;
        }
    }
    json_t *att = json_object_get(gold, "attention");
    if (want_attn && !json_is_array(att)) {
        /* the case asks for attention: a golden without it is a broken
         * fixture, never a pass */
        fprintf(stderr, "%s: the case asks for attention but the golden has none\n", where);
        return bad + 1;
    }
    if (!want_attn && att) {
        fprintf(stderr, "%s: the golden has attention the case does not ask for\n", where);
        return bad + 1;
    }
    if (want_attn && (r->n_hyps < 1 || !r->attention)) {
        fprintf(stderr, "%s: no attention returned\n", where);
        return bad + 1;
    }
    if (want_attn && !tokens_differ) {
        size_t L = json_array_size(att);
        if ((int)L != r->attn_n_layers) {
            fprintf(stderr, "%s: attention layers %d, golden %zu\n", where, r->attn_n_layers, L);
            return bad + 1;
        }
        double worst = 0;
        long n_nan = 0;
        for (size_t l = 0; l < L; l++) {
            json_t *hl = json_array_get(att, l);
            if ((int)json_array_size(hl) != r->attn_n_heads)
                return bad + 1;
            for (size_t h = 0; h < json_array_size(hl); h++) {
                json_t *ht = json_array_get(hl, h);
                if ((int)json_array_size(ht) != r->attn_n_t) {
                    fprintf(stderr, "%s: attention rows %d, golden %zu\n", where, r->attn_n_t,
                            json_array_size(ht));
                    return bad + 1;
                }
                for (size_t t = 0; t < json_array_size(ht); t++) {
                    json_t *row = json_array_get(ht, t);
                    if ((int)json_array_size(row) != r->attn_n_s)
                        return bad + 1;
                    for (size_t s = 0; s < json_array_size(row); s++) {
                        double want = json_number_value(json_array_get(row, s));
                        double got = r->attention[((l * (size_t)r->attn_n_heads + h) *
                                                       (size_t)r->attn_n_t + t) *
                                                      (size_t)r->attn_n_s + s];
                        double diff = fabs(got - want);
                        if (isnan(diff))
                            n_nan++;
                        else if (diff > worst)
                            worst = diff;
                    }
                }
            }
        }
        if (n_nan > 0) {
            fprintf(stderr, "%s: %ld attention values are NaN\n", where, n_nan);
            bad++;
        } else if (!(worst <= tol->attn)) {
            fprintf(stderr, "%s: attention max abs difference %.3g > %.1g\n", where, worst,
                    tol->attn);
            bad++;
        }
    }
    return bad;
}

static int run_case(td_worker *w, const char *variant, json_t *cs, const golden_tol *tol,
                    golden_count *count)
{
    const char *name = json_string_value(json_object_get(cs, "name"));
    json_t *srcs = json_object_get(cs, "sources");
    json_t *results = json_object_get(cs, "results");
    int n = (int)json_array_size(srcs);
    int want_attn = json_is_true(json_object_get(cs, "attention"));
    td_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam_size = (int)json_integer_value(json_object_get(cs, "beam_size"));
    o.num_hypotheses = (int)json_integer_value(json_object_get(cs, "num_hypotheses"));
    o.length_penalty = (float)json_number_value(json_object_get(cs, "length_penalty"));
    o.max_length = (int)json_integer_value(json_object_get(cs, "max_length"));
    o.return_attention = want_attn;

    int32_t **src = calloc((size_t)n, sizeof(int32_t *));
    int *len = calloc((size_t)n, sizeof(int));
    td_result *res = calloc((size_t)n, sizeof(td_result));
    if (!src || !len || !res) {
        fprintf(stderr, "out of memory\n");
        abort();
    }
    for (int i = 0; i < n; i++) {
        json_t *a = json_array_get(srcs, (size_t)i);
        len[i] = (int)json_array_size(a);
        src[i] = malloc((size_t)len[i] * sizeof(int32_t));
        for (int j = 0; j < len[i]; j++)
            src[i][j] = (int32_t)json_integer_value(json_array_get(a, (size_t)j));
    }
    int bad = 0;
    char err[512], where[256];
    /* the whole batch */
    if (td_translate_batch(w, (const int32_t *const *)src, len, n, &o, res, err, sizeof err)) {
        fprintf(stderr, "%s/%s: translate failed: %s\n", variant, name, err);
        bad++;
    } else {
        for (int i = 0; i < n; i++) {
            snprintf(where, sizeof where, "%s/%s[%d] (batch of %d)", variant, name, i, n);
            bad += compare(where, &res[i], json_array_get(results, (size_t)i), want_attn, tol,
                           count);
            td_result_free(&res[i]);
        }
    }
    /* each sentence alone */
    for (int i = 0; i < n && n > 1; i++) {
        td_result one;
        if (td_translate_batch(w, (const int32_t *const *)&src[i], &len[i], 1, &o, &one, err,
                               sizeof err)) {
            fprintf(stderr, "%s/%s[%d] alone: translate failed: %s\n", variant, name, i, err);
            bad++;
            continue;
        }
        snprintf(where, sizeof where, "%s/%s[%d] (alone)", variant, name, i);
        bad += compare(where, &one, json_array_get(results, (size_t)i), want_attn, tol, count);
        td_result_free(&one);
    }
    for (int i = 0; i < n; i++)
        free(src[i]);
    free(src);
    free(len);
    free(res);
    return bad;
}

static json_t *load_golden(const char *variant, char *dir, size_t dlen, char *err, size_t errlen)
{
    char path[600];
    snprintf(dir, dlen, "%s/fixtures/%s", TD_TEST_DATA, variant);
    snprintf(path, sizeof path, "%s/golden.json", dir);
    json_error_t jerr;
    json_t *g = json_load_file(path, 0, &jerr);
    if (!g)
        snprintf(err, errlen, "%s: %s", path, jerr.text);
    return g;
}

static int run_all_cases(const td_model *m, const char *variant, json_t *g, int reps,
                         const golden_tol *tol, golden_count *count, char *err, size_t errlen)
{
    td_worker_opts wo = {.max_batch = 16, .max_src_len = 0, .max_length = 32, .max_beam = 16,
                         .n_threads = 1};
    td_worker *w = NULL;
    if (td_worker_init(&w, m, &wo, err, errlen) != 0)
        return -1;
    json_t *cases = json_object_get(g, "cases");
    int bad = 0;
    for (int r = 0; r < reps; r++)
        for (size_t c = 0; c < json_array_size(cases); c++)
            bad += run_case(w, variant, json_array_get(cases, c), tol, count);
    td_worker_free(w);
    if (json_array_size(cases) == 0) {
        snprintf(err, errlen, "%s: golden.json has no cases", variant);
        return -1;
    }
    return bad;
}

/* The golden of a fixture and its model loaded with lo_in (n_threads 0 taken
 * as 1); NULL with err set when either fails. */
static json_t *load_fixture(const char *variant, const td_load_opts *lo_in, td_model **m,
                            char *err, size_t errlen)
{
    char dir[512];
    json_t *g = load_golden(variant, dir, sizeof dir, err, errlen);
    if (!g)
        return NULL;
    td_load_opts lo = *lo_in;
    if (lo.n_threads == 0)
        lo.n_threads = 1;
    if (td_model_load(m, dir, &lo, err, errlen) != 0) {
        json_decref(g);
        return NULL;
    }
    return g;
}

int golden_run_fixture(const char *variant, const td_load_opts *lo_in, const golden_tol *tol,
                       golden_count *count, char *err, size_t errlen)
{
    td_model *m = NULL;
    json_t *g = load_fixture(variant, lo_in, &m, err, errlen);
    if (!g)
        return -1;
    int bad = run_all_cases(m, variant, g, 1, tol, count, err, errlen);
    td_model_free(m);
    json_decref(g);
    return bad;
}

typedef struct shared_job {
    const td_model *m;
    const char *variant;
    json_t *golden;
    const golden_tol *tol;
    golden_count *count;
    int bad;
    char err[256];
} shared_job;

static void *shared_main(void *arg)
{
    shared_job *j = arg;
    j->bad = run_all_cases(j->m, j->variant, j->golden, 2, j->tol, j->count, j->err,
                           sizeof j->err);
    return NULL;
}

int golden_run_shared(const char *variant, const td_load_opts *lo_in, int n_workers,
                      const golden_tol *tol, golden_count *count, char *err, size_t errlen)
{
    td_model *m = NULL;
    json_t *g = load_fixture(variant, lo_in, &m, err, errlen);
    if (!g)
        return -1;
    shared_job jobs[8];
    pthread_t th[8];
    if (n_workers > 8)
        n_workers = 8;
    int started = 0, bad = 0;
    for (int i = 0; i < n_workers; i++) {
        jobs[i] = (shared_job){.m = m, .variant = variant, .golden = g, .tol = tol,
                               .count = count};
        if (pthread_create(&th[i], NULL, shared_main, &jobs[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].bad < 0) {
            snprintf(err, errlen, "%s", jobs[i].err);
            bad = -1;
        } else if (bad >= 0) {
            bad += jobs[i].bad;
        }
    }
    if (started < n_workers && bad >= 0) {
        snprintf(err, errlen, "pthread_create failed");
        bad = -1;
    }
    td_model_free(m);
    json_decref(g);
    return bad;
}
