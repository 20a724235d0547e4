/*
 * test_m2m.c - M2M100ForConditionalGeneration (model_type m2m_100) in both
 * tokenizer layouts, M2M100's and NLLB-200's, against transformers
 * (tests/data/m2m/golden.json, made by tools/make_m2m_fixtures.py):
 *   - the source ids ("src_lang pieces </s>") token for token, and the
 *     decoded text of every golden hypothesis;
 *   - greedy and 4 beams with the target language forced (a target prefix
 *     of one token): tokens identical, scores within 1e-4, every golden
 *     line and target language, the lines of a layout as one batch and
 *     through td_translate_text_lang;
 *   - prefixes of different lengths side by side in one running decode: a
 *     forced token counts 0 in the score, whatever its log-prob was;
 *   - a source with a pad token inside (fairseq's positions skip it);
 *   - refusals: a language the model lacks, an architecture the table
 *     lacks, a prefix that leaves no room.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "tokenizer.h"
#include "translator.h"

#define SCORE_TOL 1e-4
#define MAX_CASES 64

static json_t *g_golden;

static json_t *golden(void)
{
    if (!g_golden) {
        json_error_t je;
        g_golden = json_load_file(TD_TEST_DATA "/m2m/golden.json", 0, &je);
        ck_assert_msg(g_golden != NULL, "golden.json: %s", je.text);
    }
    return g_golden;
}

typedef struct fixture {
    td_model *m;
    td_tokenizer *tok;
    td_worker *w;
    json_t *cases; /* borrowed */
    int max_length; /* the engine's: transformers' max_length - 1 */
} fixture;

static void fixture_open(fixture *f, const char *layout)
{
    char dir[512], err[512];
    json_t *l = json_object_get(json_object_get(golden(), "layouts"), layout);
    ck_assert_ptr_nonnull(l);
    snprintf(dir, sizeof dir, "%s/m2m/%s", TD_TEST_DATA, json_string_value(json_object_get(l, "dir")));
    td_probe pr;
    ck_assert_msg(td_model_probe(dir, &pr) == 1, "%s: probe says '%s' is missing", layout,
                  pr.missing);
    ck_assert_msg(strstr(pr.tokenizer, "sentencepiece.bpe.model") != NULL, "%s", pr.tokenizer);
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(&f->m, dir, &lo, err, sizeof err) == 0, "%s: %s", layout, err);
    ck_assert_str_eq(td_model_config(f->m)->model_type, "m2m_100");
    ck_assert_msg(td_model_tokenizer_load(f->m, dir, &f->tok, err, sizeof err) == 0, "%s: %s",
                  layout, err);
    td_worker_opts wo = {.max_batch = 8, .max_length = 32, .max_beam = 4, .n_threads = 1};
    ck_assert_msg(td_worker_init(&f->w, f->m, &wo, err, sizeof err) == 0, "%s", err);
    f->cases = json_object_get(l, "cases");
    ck_assert_int_gt((int)json_array_size(f->cases), 0);
    f->max_length = (int)json_integer_value(json_object_get(golden(), "max_length")) - 1;
}

static void fixture_close(fixture *f)
{
    td_worker_free(f->w);
    td_tok_free(f->tok);
    td_model_free(f->m);
}

static int json_ids(const json_t *a, int32_t *out, int max)
{
    int n = (int)json_array_size(a);
    ck_assert_int_le(n, max);
    for (int i = 0; i < n; i++)
        out[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return n;
}

/* Tokens equal and the score within SCORE_TOL (NaN fails). Returns the
 * number of mismatches, printed. */
static int compare_hyp(const char *what, int ci, const td_hypothesis *h, const json_t *gold,
                       double want_score)
{
    int32_t want[64];
    int n = json_ids(json_object_get(gold, "tokens"), want, 64);
    int bad = h->n_tokens != n;
    for (int i = 0; !bad && i < n; i++)
        bad = h->tokens[i] != want[i];
    if (bad) {
        fprintf(stderr, "%s case %d: tokens differ (%d against %d):", what, ci, h->n_tokens, n);
        for (int i = 0; i < h->n_tokens && i < 24; i++)
            fprintf(stderr, " %d", h->tokens[i]);
        fprintf(stderr, "\n");
        return 1;
    }
    if (!(fabs((double)h->score - want_score) <= SCORE_TOL)) {
        fprintf(stderr, "%s case %d: score %.7f, transformers %.7f\n", what, ci, (double)h->score,
                want_score);
        return 1;
    }
    return 0;
}

/* Source ids and the decoded text of each golden hypothesis. */
static void check_tokenization(const char *layout)
{
    fixture f = {0};
    fixture_open(&f, layout);
    size_t ci;
    json_t *c;
    json_array_foreach(f.cases, ci, c) {
        const char *sl = json_string_value(json_object_get(c, "src_lang"));
        const char *tl = json_string_value(json_object_get(c, "tgt_lang"));
        const char *text = json_string_value(json_object_get(c, "text"));
        int li = td_tok_lang_find(f.tok, sl), ti = td_tok_lang_find(f.tok, tl);
        ck_assert_msg(li >= 0 && ti >= 0, "%s: languages %s, %s", layout, sl, tl);
        ck_assert_int_eq(td_tok_lang_token(f.tok, ti),
                         (int)json_integer_value(json_object_get(c, "tgt_lang_id")));
        int32_t want[256], *ids = NULL;
        int n = json_ids(json_object_get(c, "input_ids"), want, 256), got = 0;
        ck_assert_int_eq(td_tok_encode_lang(f.tok, TD_TOK_SOURCE, li, text, strlen(text), &ids, &got), 0);
        ck_assert_msg(got == n, "%s case %zu: %d source ids, transformers %d", layout, ci, got, n);
        for (int i = 0; i < n; i++)
            ck_assert_msg(ids[i] == want[i], "%s case %zu: source id %d is %d, transformers %d",
                          layout, ci, i, ids[i], want[i]);
        /* one span a token, the language's empty at the start, </s>'s at the end */
        size_t *off = NULL, tl_len = strlen(text);
        ck_assert_int_eq(td_tok_source_offsets(f.tok, text, tl_len, ids, got, &off), 0);
        ck_assert(off[0] == 0 && off[1] == 0);
        ck_assert(off[2 * (got - 1)] == tl_len && off[2 * got - 1] == tl_len);
        for (int i = 1; i < got; i++)
            ck_assert(off[2 * i] == off[2 * i - 1]);
        free(off);
        free(ids);
        static const char *const modes[2] = {"greedy", "beam4"};
        for (int k = 0; k < 2; k++) {
            json_t *h = json_object_get(c, modes[k]);
            int32_t toks[64];
            int nt = json_ids(json_object_get(h, "tokens"), toks, 64);
            char *s = NULL;
            ck_assert_int_eq(td_tok_decode(f.tok, toks, nt, &s), 0);
            ck_assert_msg(strcmp(s, json_string_value(json_object_get(h, "text"))) == 0,
                          "%s case %zu %s: text '%s', transformers '%s'", layout, ci, modes[k], s,
                          json_string_value(json_object_get(h, "text")));
            free(s);
        }
    }
    fixture_close(&f);
}

/* Every case, greedy and 4 beams, each mode's cases as one batch (the
 * target language each sentence's own prefix: a running decode with
 * per-sentence options), then one by one through td_translate_text_lang. */
static void check_decode(const char *layout)
{
    fixture f = {0};
    fixture_open(&f, layout);
    const int n = (int)json_array_size(f.cases);
    ck_assert_int_le(n, MAX_CASES);
    char err[512];
    int bad = 0;
    static const char *const modes[2] = {"greedy", "beam4"};
    for (int k = 0; k < 2; k++) {
        int32_t src[MAX_CASES][256], lang[MAX_CASES];
        const int32_t *srcp[MAX_CASES];
        int slen[MAX_CASES];
        td_decode_opts o[MAX_CASES];
        const td_decode_opts *op[MAX_CASES];
        td_seq seq[MAX_CASES];
        for (int i = 0; i < n; i++) {
            json_t *c = json_array_get(f.cases, (size_t)i);
            slen[i] = json_ids(json_object_get(c, "input_ids"), src[i], 256);
            srcp[i] = src[i];
            lang[i] = (int32_t)json_integer_value(json_object_get(c, "tgt_lang_id"));
            td_decode_opts_default(f.m, &o[i]);
            o[i].beam_size = k ? 4 : 1;
            o[i].num_hypotheses = 1;
            o[i].length_penalty = 1.0f;
            o[i].max_length = f.max_length;
            o[i].prefix = &lang[i];
            o[i].n_prefix = 1;
            op[i] = &o[i];
        }
        /* in groups of the worker's 8 slots, each joining the running decode */
        int taken = 0;
        for (int i0 = 0; i0 < n || taken < n;) {
            while (i0 < n && td_run_room(f.w, o[i0].beam_size) > 0) {
                ck_assert_msg(td_run_add(f.w, &srcp[i0], &slen[i0], 1, &op[i0], &seq[i0], err,
                                         sizeof err) == 0, "%s", err);
                i0++;
            }
            ck_assert_int_ge(td_run_step(f.w, err, sizeof err), 0);
            td_seq s;
            td_result r;
            while (td_run_take(f.w, &s, &r) == 1) {
                int i = 0;
                while (i < n && seq[i] != s)
                    i++;
                ck_assert_int_lt(i, n);
                json_t *h = json_object_get(json_array_get(f.cases, (size_t)i), modes[k]);
                bad += compare_hyp(modes[k], i, &r.hyps[0], h,
                                   json_real_value(json_object_get(h, "score")));
                td_result_free(&r);
                taken++;
            }
        }
        /* the text pipeline: languages by their codes */
        for (int i = 0; i < n; i++) {
            json_t *c = json_array_get(f.cases, (size_t)i);
            json_t *h = json_object_get(c, modes[k]);
            const char *text = json_string_value(json_object_get(c, "text"));
            td_decode_opts d = o[i];
            d.prefix = NULL;
            d.n_prefix = 0;
            td_text_result tr;
            ck_assert_msg(td_translate_text_lang(f.w, f.tok,
                                                 json_string_value(json_object_get(c, "src_lang")),
                                                 json_string_value(json_object_get(c, "tgt_lang")),
                                                 &text, NULL, 1, &d, &tr, err, sizeof err) == 0,
                          "%s", err);
            bad += compare_hyp(modes[k], i, &tr.r.hyps[0], h,
                               json_real_value(json_object_get(h, "score")));
            ck_assert_str_eq(tr.text, json_string_value(json_object_get(h, "text")));
            td_text_result_free(&tr);
        }
    }
    ck_assert_msg(bad == 0, "%s: %d hypotheses differ from transformers", layout, bad);
    fixture_close(&f);
}

/* Greedy prefixes of 1, 2, 3 and 5 tokens (the golden's own first tokens,
 * so the tokens do not change) in one running decode, against the golden's
 * step log-probs: each forced step adds 0, every step counts in the
 * length. */
static void check_prefix_lengths(const char *layout)
{
    fixture f = {0};
    fixture_open(&f, layout);
    static const int ks[4] = {1, 2, 3, 5};
    int32_t src[4][256], pre[4][8];
    const int32_t *srcp[4];
    int slen[4];
    td_decode_opts o[4];
    const td_decode_opts *op[4];
    td_seq seq[4];
    double want[4];
    char err[512];
    for (int i = 0; i < 4; i++) {
        json_t *c = json_array_get(f.cases, (size_t)i % json_array_size(f.cases));
        json_t *g = json_object_get(c, "greedy");
        slen[i] = json_ids(json_object_get(c, "input_ids"), src[i], 256);
        srcp[i] = src[i];
        int32_t toks[64];
        int nt = json_ids(json_object_get(g, "tokens"), toks, 64);
        ck_assert_int_gt(nt, ks[i]);
        memcpy(pre[i], toks, (size_t)ks[i] * sizeof(int32_t));
        double sum = 0;
        for (int t = ks[i]; t < nt; t++)
            sum += json_real_value(json_array_get(json_object_get(g, "step_logprobs"), (size_t)t));
        want[i] = sum / nt;
        td_decode_opts_default(f.m, &o[i]);
        o[i].beam_size = 1;
        o[i].num_hypotheses = 1;
        o[i].length_penalty = 1.0f;
        o[i].max_length = f.max_length;
        o[i].prefix = pre[i];
        o[i].n_prefix = ks[i];
        op[i] = &o[i];
    }
    ck_assert_msg(td_run_add(f.w, srcp, slen, 4, op, seq, err, sizeof err) == 0, "%s", err);
    memset(pre, 0xff, sizeof pre); /* td_run_add copied them */
    int taken = 0, bad = 0;
    while (taken < 4) {
        ck_assert_int_ge(td_run_step(f.w, err, sizeof err), 0);
        td_seq s;
        td_result r;
        while (td_run_take(f.w, &s, &r) == 1) {
            int i = 0;
            while (i < 4 && seq[i] != s)
                i++;
            ck_assert_int_lt(i, 4);
            json_t *c = json_array_get(f.cases, (size_t)i % json_array_size(f.cases));
            bad += compare_hyp("prefix", i, &r.hyps[0], json_object_get(c, "greedy"), want[i]);
            td_result_free(&r);
            taken++;
        }
    }
    ck_assert_msg(bad == 0, "%s: %d prefixed hypotheses wrong", layout, bad);
    fixture_close(&f);
}

/* A source with a pad token inside: its position is the zero row and the
 * positions after it do not count it (fairseq's make_positions). */
static void check_pad_source(const char *layout)
{
    fixture f = {0};
    fixture_open(&f, layout);
    json_t *pc = json_object_get(json_object_get(json_object_get(golden(), "layouts"), layout),
                                 "pad_case");
    ck_assert_ptr_nonnull(pc);
    int32_t src[256], lang = (int32_t)json_integer_value(json_object_get(pc, "tgt_lang_id"));
    int n = json_ids(json_object_get(pc, "input_ids"), src, 256);
    ck_assert_int_eq(src[3], td_model_config(f.m)->pad_token_id);
    const int32_t *sp = src;
    static const char *const modes[2] = {"greedy", "beam4"};
    char err[512];
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        td_decode_opts o;
        td_decode_opts_default(f.m, &o);
        o.beam_size = k ? 4 : 1;
        o.num_hypotheses = 1;
        o.length_penalty = 1.0f;
        o.max_length = f.max_length;
        o.prefix = &lang;
        o.n_prefix = 1;
        td_result r;
        ck_assert_msg(td_translate_batch(f.w, &sp, &n, 1, &o, &r, err, sizeof err) == 0, "%s", err);
        json_t *h = json_object_get(pc, modes[k]);
        bad += compare_hyp(modes[k], -1, &r.hyps[0], h, json_real_value(json_object_get(h, "score")));
        td_result_free(&r);
    }
    ck_assert_msg(bad == 0, "%s: the source with a pad differs from transformers", layout);
    fixture_close(&f);
}

START_TEST(m2m100_pad_source) { check_pad_source("m2m100"); }
END_TEST
START_TEST(nllb_pad_source) { check_pad_source("nllb"); }
END_TEST
START_TEST(m2m100_tokens) { check_tokenization("m2m100"); }
END_TEST
START_TEST(nllb_tokens) { check_tokenization("nllb"); }
END_TEST
START_TEST(m2m100_decode) { check_decode("m2m100"); }
END_TEST
START_TEST(nllb_decode) { check_decode("nllb"); }
END_TEST
START_TEST(m2m100_prefix_lengths) { check_prefix_lengths("m2m100"); }
END_TEST
START_TEST(nllb_prefix_lengths) { check_prefix_lengths("nllb"); }
END_TEST

/* The model lists its languages; one it lacks is refused by name. */
START_TEST(languages)
{
    fixture f = {0};
    fixture_open(&f, "nllb");
    ck_assert_int_eq(td_tok_n_langs(f.tok), 5);
    ck_assert_str_eq(td_tok_lang(f.tok, 0), "deu_Latn");
    ck_assert_int_eq(td_tok_lang_find(f.tok, "fra_Latn"), 2);
    ck_assert_int_eq(td_tok_lang_find(f.tok, "fr"), -1);
    ck_assert_ptr_null(td_tok_lang(f.tok, 5));
    fixture_close(&f);

    fixture_open(&f, "m2m100");
    ck_assert_int_eq(td_tok_n_langs(f.tok), 100);
    ck_assert_int_ge(td_tok_lang_find(f.tok, "de"), 0);
    ck_assert_str_eq(td_tok_lang(f.tok, td_tok_lang_find(f.tok, "de")), "de");
    const char *text = "Hello";
    td_text_result tr;
    td_decode_opts o;
    td_decode_opts_default(f.m, &o);
    o.beam_size = 1;
    char err[512];
    ck_assert_int_ne(td_translate_text_lang(f.w, f.tok, "en", "xx", &text, NULL, 1, &o, &tr, err,
                                            sizeof err), 0);
    ck_assert_msg(strstr(err, "'xx'") && strstr(err, "target"), "%s", err);
    ck_assert_int_ne(td_translate_text_lang(f.w, f.tok, "__en__", "de", &text, NULL, 1, &o, &tr,
                                            err, sizeof err), 0);
    ck_assert_msg(strstr(err, "'__en__'") && strstr(err, "source"), "%s", err);
    ck_assert_int_ne(td_translate_text_lang(f.w, f.tok, "en", NULL, &text, NULL, 1, &o, &tr, err,
                                            sizeof err), 0);
    ck_assert_msg(strstr(err, "target language is required"), "%s", err);
    /* a prefix that leaves no room for anything else */
    int32_t p[2] = {5, 6};
    o.prefix = p;
    o.n_prefix = 2;
    o.max_length = 2;
    const char *param = NULL;
    td_decode_limits lim = {.max_beam = 4, .max_length = 32};
    ck_assert_int_ne(td_decode_opts_check(td_model_config(f.m), &lim, &o, &param, err, sizeof err), 0);
    ck_assert_str_eq(param, "target_prefix");
    fixture_close(&f);
}
END_TEST

/* An architecture the table lacks: refused naming the file and the
 * model_type; m2m_100's defaults where config.json is silent. */
START_TEST(architecture)
{
    td_config c;
    char err[512];
    const char *base = "{\"d_model\": 32, \"encoder_layers\": 1, \"decoder_layers\": 1, "
                       "\"encoder_attention_heads\": 4, \"decoder_attention_heads\": 4, "
                       "\"encoder_ffn_dim\": 64, \"decoder_ffn_dim\": 64, "
                       "\"max_position_embeddings\": 64, \"vocab_size\": 100, \"model_type\": ";
    char js[1024];
    snprintf(js, sizeof js, "%s\"nllb_moe\"}", base);
    ck_assert_int_ne(td_config_parse(&c, js, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "config.json") && strstr(err, "'nllb_moe'") &&
                      strstr(err, "m2m_100"), "%s", err);
    snprintf(js, sizeof js, "%s\"m2m_100\"}", base);
    ck_assert_msg(td_config_parse(&c, js, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(c.pad_token_id, 1);
    ck_assert_int_eq(c.eos_token_id, 2);
    ck_assert_int_eq(c.decoder_start_token_id, 2);
    ck_assert_int_eq(c.forced_eos_token_id, -1);
    ck_assert_int_eq(c.scale_embedding, 1);
    ck_assert_int_eq(c.normalize_before, 1);
    ck_assert_int_eq(c.n_suppress, 0);
    ck_assert_int_eq(c.position_encoding, TD_POS_SINUSOIDAL_FAIRSEQ);
    ck_assert_int_eq(c.position_offset, 2);
    ck_assert_int_eq(c.position_pad, 1);
    ck_assert_str_eq(td_activation_name(c.activation), "relu");
}
END_TEST

static Suite *m2m_suite(void)
{
    Suite *s = suite_create("m2m");
    TCase *tc = tcase_create("m2m");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, architecture);
    tcase_add_test(tc, m2m100_tokens);
    tcase_add_test(tc, nllb_tokens);
    tcase_add_test(tc, languages);
    tcase_add_test(tc, m2m100_decode);
    tcase_add_test(tc, nllb_decode);
    tcase_add_test(tc, m2m100_prefix_lengths);
    tcase_add_test(tc, m2m100_pad_source);
    tcase_add_test(tc, nllb_pad_source);
    tcase_add_test(tc, nllb_prefix_lengths);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(m2m_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    json_decref(g_golden);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
