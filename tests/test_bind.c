/*
 * test_bind.c - one worker shared by several models (td_worker_bind, what
 * the daemon's shared workers do between two models' batches): bound in
 * turn to models of other shapes, numerics and kinds of position, to the
 * same directory loaded twice and back, it translates each model's
 * sentences exactly as a worker of that model's own does (tokens, scores,
 * attention), by whole batches and through the running decode. A model of
 * the same shape keeps the buffers as they grew; another shape starts at
 * the first capacities; a bind while a decode runs is refused; a model
 * freed while the worker is bound to it is never read again (a trim, a
 * bind to the next model: AddressSanitizer watches). On the device named
 * by TD_TEST_DEVICE (default cpu; tools/gpu-check.sh runs it with cuda).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translator.h"

enum { N_SENT = 6, MAX_SRC = 12 };

/* Models of one shape (other weights: the float16 checkpoint's values;
 * the same directory loaded twice), other shapes, other positions; k_shape
 * tells the shapes apart. */
static const char *const k_models[] = {"marian_tied", "marian_tied_f16", "ext_relative",
                                       "marian_separate", "ext_rope", "marian_untied",
                                       "marian_tied"};
static const int k_shape[] = {0, 0, 1, 2, 3, 4, 0};
#define N_MODELS ((int)(sizeof k_models / sizeof k_models[0]))

typedef struct sent {
    int32_t src[MAX_SRC];
    int len;
    td_decode_opts o;
} sent;

static td_model *load(const char *name)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/fixtures/%s", TD_TEST_DATA, name);
    const char *dev = getenv("TD_TEST_DEVICE");
    td_load_opts lo = {.device = dev && *dev ? dev : "cpu", .n_threads = 1};
    td_model *m;
    ck_assert_msg(td_model_load(&m, dir, &lo, err, sizeof err) == 0, "%s", err);
    return m;
}

static td_worker_opts opts(int grow)
{
    td_worker_opts wo = {.max_batch = 6, .max_length = 16, .max_beam = 3,
                         .max_src_len = MAX_SRC, .n_threads = 1, .grow = grow};
    return wo;
}

static void make(const td_model *m, sent *s, unsigned seed)
{
    const td_config *c = td_model_config(m);
    for (int i = 0; i < N_SENT; i++) {
        seed = seed * 1103515245u + 12345u;
        s[i].len = 2 + (int)(seed >> 16) % (MAX_SRC - 2);
        for (int j = 0; j < s[i].len - 1; j++) {
            seed = seed * 1103515245u + 12345u;
            s[i].src[j] = 2 + (int)((seed >> 16) % (unsigned)(c->vocab_size - 4));
        }
        s[i].src[s[i].len - 1] = c->eos_token_id;
        td_decode_opts_default(m, &s[i].o);
        s[i].o.beam_size = 1 + i % 3;
        s[i].o.num_hypotheses = 1;
        s[i].o.max_length = 4 + i * 2;
        s[i].o.return_attention = i % 2;
    }
}

static void same(const char *what, const td_result *a, const td_result *b)
{
    ck_assert_msg(a->n_hyps == b->n_hyps, "%s: hypotheses", what);
    for (int h = 0; h < a->n_hyps; h++) {
        ck_assert_msg(a->hyps[h].n_tokens == b->hyps[h].n_tokens &&
                          !memcmp(a->hyps[h].tokens, b->hyps[h].tokens,
                                  (size_t)a->hyps[h].n_tokens * sizeof(int32_t)),
                      "%s: tokens differ from the model's own worker", what);
        ck_assert_msg(fabsf(a->hyps[h].score - b->hyps[h].score) <= 1e-5f, "%s: score", what);
    }
    ck_assert_int_eq(a->attention != NULL, b->attention != NULL);
    size_t cells = a->attention ? (size_t)a->attn_n_layers * a->attn_n_heads * a->attn_n_t *
                                      a->attn_n_s
                                : 0;
    for (size_t k = 0; k < cells; k++)
        ck_assert_msg(fabsf(a->attention[k] - b->attention[k]) <= 1e-5f, "%s: attention", what);
}

/* Each sentence alone through a batch of one, and all of them through the
 * running decode, on w; compared with want (the model's own worker's). */
static void translate_all(td_worker *w, const sent *s, const td_result *want, const char *name)
{
    char err[512], what[128];
    for (int i = 0; i < N_SENT; i++) {
        const int32_t *src = s[i].src;
        td_result r;
        ck_assert_msg(td_translate_batch(w, &src, &s[i].len, 1, &s[i].o, &r, err, sizeof err) ==
                          0,
                      "%s", err);
        snprintf(what, sizeof what, "%s batch %d", name, i);
        same(what, &r, &want[i]);
        td_result_free(&r);
    }
    const int32_t *src[N_SENT];
    int len[N_SENT];
    const td_decode_opts *o[N_SENT];
    td_seq seq[N_SENT];
    for (int i = 0; i < N_SENT; i++) {
        src[i] = s[i].src;
        len[i] = s[i].len;
        o[i] = &s[i].o;
    }
    int done = 0;
    for (int first = 0; first < N_SENT; first += 3)
        ck_assert_msg(td_run_add(w, src + first, len + first, 3, o + first, seq + first, err,
                                 sizeof err) == 0,
                      "%s", err);
    while (done < N_SENT) {
        ck_assert_msg(td_run_step(w, err, sizeof err) >= 0, "%s", err);
        td_seq q;
        td_result r;
        while (td_run_take(w, &q, &r) > 0) {
            int i = 0;
            while (seq[i] != q)
                i++;
            snprintf(what, sizeof what, "%s running %d", name, i);
            same(what, &r, &want[i]);
            td_result_free(&r);
            done++;
        }
    }
}

static void run(int grow)
{
    td_model *m[N_MODELS];
    sent s[N_MODELS][N_SENT];
    td_result want[N_MODELS][N_SENT];
    size_t fresh[N_MODELS]; /* a new worker's arena for each model */
    char err[512];
    const td_worker_opts wo = opts(grow);
    for (int k = 0; k < N_MODELS; k++) {
        m[k] = load(k_models[k]);
        make(m[k], s[k], 17u + (unsigned)k);
        td_worker *own;
        ck_assert_msg(td_worker_init(&own, m[k], &wo, err, sizeof err) == 0, "%s", err);
        fresh[k] = td_worker_arena_bytes(own);
        for (int i = 0; i < N_SENT; i++) {
            const int32_t *src = s[k][i].src;
            ck_assert_msg(td_translate_batch(own, &src, &s[k][i].len, 1, &s[k][i].o,
                                             &want[k][i], err, sizeof err) == 0,
                          "%s", err);
        }
        td_worker_free(own);
    }
    td_worker *w;
    ck_assert_msg(td_worker_init(&w, m[0], &wo, err, sizeof err) == 0, "%s", err);
    /* every model in turn, then back to the first ones */
    const int order[] = {0, 1, 6, 0, 2, 3, 1, 4, 5, 2, 0, 6};
    for (size_t t = 0; t < sizeof order / sizeof order[0]; t++) {
        int k = order[t];
        size_t before = td_worker_arena_bytes(w);
        int same_shape = t > 0 && k_shape[order[t - 1]] == k_shape[k];
        ck_assert_msg(td_worker_bind(w, m[k], &wo, err, sizeof err) == 0, "%s", err);
        if (same_shape) /* the same shape: the buffers kept as they grew */
            ck_assert_uint_eq(td_worker_arena_bytes(w), before);
        else if (t > 0) /* another: made again as for that model alone */
            ck_assert_uint_eq(td_worker_arena_bytes(w), fresh[k]);
        char name[64];
        snprintf(name, sizeof name, "%s (step %zu)", k_models[k], t);
        translate_all(w, s[k], want[k], name);
        ck_assert_int_eq(td_run_live(w), 0);
    }
    /* a bind while a decode runs is refused; the decode goes on */
    const int32_t *src = s[0][5].src;
    const td_decode_opts *o = &s[0][5].o;
    td_seq q;
    ck_assert_msg(td_worker_bind(w, m[0], &wo, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(td_run_add(w, &src, &s[0][5].len, 1, &o, &q, err, sizeof err), 0);
    ck_assert_int_eq(td_worker_bind(w, m[2], &wo, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "decodes") != NULL, "%s", err);
    td_run_reset(w);
    /* the model bound freed: a trim and the next bind (one of its shape,
     * then another) never read it */
    td_model_free(m[0]);
    m[0] = NULL;
    ck_assert_int_ge(td_worker_trim(w, err, sizeof err), 0);
    ck_assert_msg(td_worker_bind(w, m[1], &wo, err, sizeof err) == 0, "%s", err);
    translate_all(w, s[1], want[1], "after the bound model was freed");
    td_model_free(m[1]);
    m[1] = NULL;
    ck_assert_msg(td_worker_bind(w, m[3], &wo, err, sizeof err) == 0, "%s", err);
    translate_all(w, s[3], want[3], "another shape after the bound model was freed");
    td_worker_free(w);
    for (int k = 0; k < N_MODELS; k++) {
        for (int i = 0; i < N_SENT; i++)
            td_result_free(&want[k][i]);
        td_model_free(m[k]);
    }
}

START_TEST(test_bind_full)
{
    run(0);
}
END_TEST

START_TEST(test_bind_grow)
{
    run(1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bind");
    TCase *tc = tcase_create("bind");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bind_full);
    tcase_add_test(tc, test_bind_grow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
