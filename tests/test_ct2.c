/*
 * test_ct2.c - CTranslate2 model directories (model/wf_ct2.c,
 * model/ct2_config.c, model/arch_ct2.c, tokenizer/tok_list.c) against
 * CTranslate2 itself: tests/data/ct2 and its golden.json are written by
 * tools/make_ct2_fixtures.py (tests/data/ct2/README.md).
 *   - the probe and the configuration read from model.bin;
 *   - float32 (the Marian test model converted, and a pre-norm spec-API
 *     model in binary versions 6 and 3, and without its position table): the tokens of every line
 *     identical to ctranslate2's translate_batch, greedy and beam 4, and
 *     the source ids of the tokenizer identical to sentencepiece's pieces
 *     mapped through the vocabulary;
 *   - float16 and int8: the share of lines identical, bounded below
 *     (docs/benchmarks.md records it);
 *   - int8: stays int8 on the CPU, and requantizing each dequantized row
 *     (absmax / 127) gives back the stored integers;
 *   - broken files refused at load, naming model.bin (or the vocabulary)
 *     and the reason.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "tokenizer.h"
#include "translator.h"
#include "wformat.h"

#define CT2 TD_TEST_DATA "/ct2"
#define MAXLEN 32

static json_t *g_root; /* golden.json, read once, freed by main */

static json_t *model_golden(const char *name)
{
    if (!g_root) {
        json_error_t je;
        g_root = json_load_file(CT2 "/golden.json", 0, &je);
        ck_assert_msg(g_root != NULL, "golden.json: %s", je.text);
    }
    json_t *m = json_object_get(json_object_get(g_root, "models"), name);
    ck_assert_msg(m != NULL, "golden.json: no model %s", name);
    return m;
}

static int32_t *ids_of(const json_t *a, int *n)
{
    *n = (int)json_array_size(a);
    int32_t *v = malloc(((size_t)*n + 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

typedef struct agree {
    int lines, same[2]; /* [greedy, beam4] */
    double max_score_diff; /* |score - CTranslate2's| over the identical lines */
} agree;

/* Translates every golden line of model `name` (from dir) greedy and with
 * beam 4; counts the lines whose tokens equal CTranslate2's. With text,
 * the source comes from transformerd's tokenizer (checked against the
 * golden ids), else from the golden ids. */
static agree run_model(const char *dir, const char *name, int text)
{
    json_t *g = model_golden(name);
    td_model *m = NULL;
    td_worker *w = NULL;
    td_tokenizer *tok = NULL;
    char err[1024];
    ck_assert_msg(td_model_load(&m, dir, NULL, err, sizeof err) == 0, "%s: %s", dir, err);
    td_worker_opts wo = {.max_batch = 1, .max_length = MAXLEN, .max_beam = 4, .n_threads = 1};
    ck_assert_msg(td_worker_init(&w, m, &wo, err, sizeof err) == 0, "%s", err);
    if (text)
        ck_assert_msg(td_model_tokenizer_load(m, dir, &tok, err, sizeof err) == 0, "%s", err);
    const int eos = td_model_config(m)->eos_token_id;
    const json_t *lines = json_object_get(g, "lines");
    agree a = {(int)json_array_size(lines), {0, 0}, 0.0};
    for (int i = 0; i < a.lines; i++) {
        const json_t *ln = json_array_get(lines, (size_t)i);
        int ns;
        int32_t *src = ids_of(json_object_get(ln, "source_ids"), &ns);
        if (tok) {
            const char *t = json_string_value(json_object_get(ln, "text"));
            int32_t *mine = NULL;
            int nm = 0;
            ck_assert_int_eq(td_tok_encode(tok, TD_TOK_SOURCE, t, strlen(t), &mine, &nm), 0);
            ck_assert_msg(nm == ns && !memcmp(mine, src, (size_t)ns * sizeof *src),
                          "%s line %d: the tokenizer's ids differ from sentencepiece's", name, i);
            free(mine);
        }
        for (int k = 0; k < 2; k++) {
            td_decode_opts o = {.beam_size = k ? 4 : 1, .num_hypotheses = 1,
                                .length_penalty = 1.0f, .max_length = MAXLEN};
            td_result r;
            const int32_t *sp = src;
            ck_assert_msg(td_translate_batch(w, &sp, &ns, 1, &o, &r, err, sizeof err) == 0, "%s",
                          err);
            const json_t *h = json_array_get(json_object_get(g, k ? "beam4" : "greedy"),
                                             (size_t)i);
            int ng;
            int32_t *want = ids_of(json_object_get(h, "ids"), &ng);
            int n = r.hyps[0].n_tokens;
            if (n > 0 && r.hyps[0].tokens[n - 1] == eos)
                n--; /* CTranslate2 leaves the end token out */
            double ref = json_number_value(json_object_get(h, "score"));
            if (n == ng && !memcmp(r.hyps[0].tokens, want, (size_t)n * sizeof *want)) {
                a.same[k]++;
                if (fabs(r.hyps[0].score - ref) > a.max_score_diff)
                    a.max_score_diff = fabs(r.hyps[0].score - ref);
            }
            else
                fprintf(stderr, "%s line %d %s: %d tokens, CTranslate2 %d\n", name, i,
                        k ? "beam4" : "greedy", n, ng);
            free(want);
            td_result_free(&r);
        }
        free(src);
    }
    td_tok_free(tok);
    td_worker_free(w);
    td_model_free(m);
    fprintf(stderr, "%s: %d/%d lines identical greedy, %d/%d beam 4, scores within %.3g\n", name,
            a.same[0], a.lines, a.same[1], a.lines, a.max_score_diff);
    return a;
}

START_TEST(test_probe_config)
{
    td_probe p;
    ck_assert_int_eq(td_model_probe(CT2 "/marian_float32", &p), 1);
    ck_assert_str_eq(p.format, "ctranslate2");
    ck_assert_str_eq(p.tokenizer, "source.spm target.spm shared_vocabulary.json");
    td_config c;
    char err[512];
    ck_assert_msg(td_config_load(&c, CT2 "/marian_float32", err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(c.model_type, "ctranslate2");
    ck_assert_int_eq(c.d_model, 32);
    ck_assert_int_eq(c.encoder_layers, 2);
    ck_assert_int_eq(c.decoder_layers, 2);
    ck_assert_int_eq(c.encoder_attention_heads, 4);
    ck_assert_int_eq(c.encoder_ffn_dim, 64);
    ck_assert_int_eq(c.vocab_size, 689); /* the converter drops Marian's <pad> */
    ck_assert_int_eq(c.decoder_vocab_size, 689);
    ck_assert_int_eq(c.decoder_start_zero, 1);
    ck_assert_int_eq(c.decoder_start_token_id, 689);
    ck_assert_int_eq(c.normalize_before, 0);
    ck_assert_int_eq(c.activation, TD_ACT_SILU);
    ck_assert_int_eq(c.position_encoding, TD_POS_LEARNED);
    ck_assert_int_eq(c.max_position_embeddings, 128);
    ck_assert_int_eq(c.share_encoder_decoder_embeddings, 1);
    ck_assert_int_eq(c.tie_word_embeddings, 1);
    ck_assert_int_eq(c.eos_token_id, 0);
    ck_assert_int_eq(c.weights_int8, 0);
    ck_assert(fabsf(c.layer_norm_eps - 1e-6f) < 1e-12f);
    ck_assert_msg(td_config_load(&c, CT2 "/prenorm", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.normalize_before, 1);
    ck_assert_int_eq(c.activation, TD_ACT_RELU);
    ck_assert_int_eq(c.decoder_start_zero, 0);
    ck_assert_int_eq(c.decoder_start_token_id, 2); /* <s> */
    ck_assert_int_eq(c.eos_token_id, 3);
    ck_assert_int_eq(c.max_position_embeddings, 64);
    ck_assert(fabsf(c.embedding_scale - sqrtf(32.0f)) < 1e-6f);
    ck_assert_msg(td_config_load(&c, CT2 "/marian_int8", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.weights_int8, 2); /* its embeddings int8 too */
    /* separate vocabularies: the end token is the target's */
    ck_assert_msg(td_config_load(&c, CT2 "/prenorm_sep", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.eos_token_id, 5);
    ck_assert_int_eq(td_model_probe(CT2 "/prenorm_sep", &p), 0); /* no .spm: not servable */
    ck_assert_str_eq(p.missing, "source.spm");
}
END_TEST

START_TEST(test_float32_identical)
{
    static const char *const dirs[][2] = {
        {CT2 "/marian_float32", "marian_float32"},
        {CT2 "/prenorm", "prenorm"},
        {CT2 "/prenorm_v3", "prenorm"}, /* binary version 3: the same model */
        {CT2 "/prenorm_sinus", "prenorm_sinus"}, /* no stored table: the generated one */
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        agree a = run_model(dirs[i][0], dirs[i][1], i == 0);
        ck_assert_int_gt(a.lines, 0);
        ck_assert_int_eq(a.same[0], a.lines);
        ck_assert_int_eq(a.same[1], a.lines);
        ck_assert_msg(a.max_score_diff < 1e-4, "%s: scores differ by %g", dirs[i][0],
                      a.max_score_diff);
    }
}
END_TEST

/* float16 weights: both compute in float32 on the CPU, the lines agree.
 * int8: each quantizes the activations its own way (CTranslate2 per row of
 * its int8 GEMM, transformerd's cpu_int8.c per row too but over other
 * blocks), and this random test model has many near ties: the bound is
 * what docs/benchmarks.md records (7/12 greedy, 5/12 beam 4), less a
 * margin of one line. */
START_TEST(test_reduced_agree)
{
    agree h = run_model(CT2 "/marian_float16", "marian_float16", 1);
    ck_assert_int_eq(h.same[0], h.lines);
    ck_assert_int_eq(h.same[1], h.lines);
    agree q = run_model(CT2 "/marian_int8", "marian_int8", 1);
    ck_assert_int_ge(q.same[0], 6);
    ck_assert_int_ge(q.same[1], 4);
}
END_TEST

START_TEST(test_int8_requantize)
{
    td_model *m = NULL;
    char err[512];
    ck_assert_msg(td_model_load(&m, CT2 "/marian_int8", NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(td_model_weight_dtype(m), "int8");
    /* its embeddings are int8 in the file: they and the output projection
     * stay int8 too, the weights within 1.3 times model.bin (the position
     * table and the zero start row are float32) */
    struct stat sb;
    ck_assert_int_eq(stat(CT2 "/marian_int8/model.bin", &sb), 0);
    ck_assert_msg((double)td_model_weight_bytes(m) <= 1.3 * (double)sb.st_size,
                  "%zu bytes of weights for a model.bin of %lld", td_model_weight_bytes(m),
                  (long long)sb.st_size);
    td_model_free(m);

    td_wsrc s;
    ck_assert_msg(td_wsrc_open(&s, CT2 "/marian_int8", err, sizeof err) == 0, "%s", err);
    int matrices = 0;
    for (int i = 0; i < s.fmt->count(&s); i++) {
        const td_wt *t = s.fmt->tensor(&s, i);
        if (t->dtype != TD_I8 || t->rank != 2)
            continue;
        matrices++;
        const int8_t *q = s.fmt->raw(&s, t);
        float *x = malloc((size_t)t->n_elements * sizeof *x);
        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(s.fmt->read_f32(&s, t, x, err, sizeof err), 0);
        const int64_t rows = t->shape[0], cols = t->shape[1];
        for (int64_t r = 0; r < rows; r++) {
            float amax = 0.0f;
            for (int64_t c = 0; c < cols; c++)
                amax = fmaxf(amax, fabsf(x[r * cols + c]));
            if (amax == 0.0f)
                continue;
            const float step = amax / 127.0f;
            for (int64_t c = 0; c < cols; c++)
                ck_assert_msg((int)rintf(x[r * cols + c] / step) == q[r * cols + c],
                              "%s row %lld col %lld", t->name, (long long)r, (long long)c);
        }
        free(x);
    }
    ck_assert_int_gt(matrices, 10);
    /* an alias reads as its target, through the target's scale */
    const td_wt *a = s.fmt->find(&s, "decoder/projection/weight"),
                *t = s.fmt->find(&s, "decoder/embeddings/weight");
    ck_assert(a && t && a != t && a->n_elements == t->n_elements);
    float *xa = malloc((size_t)a->n_elements * sizeof *xa), *xt = malloc((size_t)t->n_elements * sizeof *xt);
    ck_assert(xa && xt);
    ck_assert_int_eq(s.fmt->read_f32(&s, a, xa, err, sizeof err), 0);
    ck_assert_int_eq(s.fmt->read_f32(&s, t, xt, err, sizeof err), 0);
    ck_assert(memcmp(xa, xt, (size_t)a->n_elements * sizeof *xa) == 0);
    ck_assert(xt[0] != (float)((const int8_t *)s.fmt->raw(&s, t))[0] || xt[0] == 0.0f);
    free(xa);
    free(xt);
    td_wsrc_close(&s);
}
END_TEST

/* An Argos Translate package of marian_float32 (tests/data/argos): a model
 * directory as it is (its model in model/, probed and loaded there), one
 * SentencePiece model both sides, model/'s vocabulary: the ids of the
 * converted directory with its </s> (add_source_eos) and without it. */
START_TEST(test_argos_package)
{
    const char *pkg = TD_TEST_DATA "/argos/translate-en_de-1_0";
    char files[4200], err[512];
    td_model_files_dir(pkg, files, sizeof files);
    ck_assert_str_eq(files, TD_TEST_DATA "/argos/translate-en_de-1_0/model");
    td_model_files_dir(CT2 "/marian_float32", files, sizeof files);
    ck_assert_str_eq(files, CT2 "/marian_float32");
    td_probe pr;
    ck_assert_msg(td_model_probe(pkg, &pr), "%s", pr.missing);
    ck_assert_str_eq(pr.format, "ctranslate2");
    ck_assert(strstr(pr.tokenizer, "sentencepiece.model") != NULL);
    td_model *m = NULL;
    ck_assert_msg(td_model_load(&m, pkg, NULL, err, sizeof err) == 0, "%s", err);
    td_tokenizer *a = NULL, *b = NULL;
    ck_assert_msg(td_model_tokenizer_load(m, pkg, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(td_tok_load(&b, CT2 "/marian_float32", 0, 0, err, sizeof err) == 0, "%s", err);
    const char *text = "The weather is nice today.";
    int32_t *ia = NULL, *ib = NULL;
    int na = 0, nb = 0;
    ck_assert_int_eq(td_tok_encode(a, TD_TOK_SOURCE, text, strlen(text), &ia, &na), 0);
    ck_assert_int_eq(td_tok_encode(b, TD_TOK_SOURCE, text, strlen(text), &ib, &nb), 0);
    ck_assert_int_eq(na, nb);
    ck_assert(memcmp(ia, ib, (size_t)na * sizeof *ia) == 0);
    char *out = NULL;
    ck_assert_int_eq(td_tok_decode(a, ia, na, &out), 0);
    ck_assert_str_eq(out, "The weather is nice today.");
    free(out);
    free(ia);
    free(ib);
    td_tok_free(a);
    td_tok_free(b);
    td_model_free(m);
}
END_TEST

START_TEST(test_refused)
{
    static const char *const cases[][3] = {
        {"bad_version", "model.bin", "binary version 7 is not supported"},
        {"bad_truncated", "model.bin", "truncated"},
        {"bad_size", "model.bin", "'decoder/activation': 1000 bytes for 1 int8 elements"},
        {"bad_dtype", "model.bin", "unknown type id 9"},
        {"bad_rank", "model.bin", "rank 200"},
        {"bad_alias", "model.bin", "names 'decoder/nothing/weight', which the file does not hold"},
        {"bad_vocab", "shared_vocabulary.json", "39 tokens, but model.bin's source embeddings have 40 rows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[512], err[1024] = "";
        snprintf(dir, sizeof dir, "%s/%s", CT2, cases[i][0]);
        td_model *m = NULL;
        ck_assert_int_eq(td_model_load(&m, dir, NULL, err, sizeof err), -1);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(err, cases[i][1]) && strstr(err, cases[i][2]), "%s: %s",
                      cases[i][0], err);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ct2");
    TCase *tc = tcase_create("ct2");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_probe_config);
    tcase_add_test(tc, test_float32_identical);
    tcase_add_test(tc, test_reduced_agree);
    tcase_add_test(tc, test_int8_requantize);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_argos_package);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    json_decref(g_root);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
