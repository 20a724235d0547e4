/*
 * test_model_errors.c - a broken model directory is rejected at load with a
 * message naming the file, tensor or key; bad calls to td_translate_batch
 * are rejected with a message and no effect on later calls.
 *
 * Broken models are made from the marian_tied fixture: its safetensors file
 * is re-written with one change (a tensor dropped, reshaped, poisoned).
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "translator.h"

#define FIXTURE TD_TEST_DATA "/fixtures/marian_tied"

static char g_dir[256];

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    ck_assert_msg(a && b, "copy %s -> %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        ck_assert(fwrite(buf, 1, n, b) == n);
    fclose(a);
    fclose(b);
}

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/td_model_errors_XXXXXX");
    ck_assert(mkdtemp(g_dir) != NULL);
    const char *files[] = {"config.json", "generation_config.json", "model.safetensors"};
    char a[512], b[512];
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", FIXTURE, files[i]);
        snprintf(b, sizeof b, "%s/%s", g_dir, files[i]);
        copy_file(a, b);
    }
}

static void teardown(void)
{
    const char *files[] = {"config.json", "generation_config.json", "model.safetensors"};
    char p[512];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        unlink(p);
    }
    rmdir(g_dir);
}

typedef enum edit_kind { EDIT_DROP, EDIT_RESHAPE, EDIT_NAN, EDIT_TRUNCATE } edit_kind;

/* Rewrites g_dir/model.safetensors from the fixture with one edit applied
 * to tensor `name`. */
static void rewrite_st(const char *name, edit_kind kind)
{
    td_st st;
    char err[512], path[512];
    ck_assert_msg(td_st_open(&st, FIXTURE "/model.safetensors", err, sizeof err) == 0, "%s", err);
    ck_assert_msg(td_st_find(&st, name) != NULL, "fixture lacks %s", name);
    json_t *hdr = json_object();
    size_t off = 0;
    for (int i = 0; i < st.n_tensors; i++) {
        const td_st_tensor *t = &st.tensors[i];
        if (kind == EDIT_DROP && strcmp(t->name, name) == 0)
            continue;
        json_t *shape = json_array();
        if (kind == EDIT_RESHAPE && strcmp(t->name, name) == 0 && t->rank == 2) {
            json_array_append_new(shape, json_integer(t->shape[1]));
            json_array_append_new(shape, json_integer(t->shape[0]));
        } else {
            for (int r = 0; r < t->rank; r++)
                json_array_append_new(shape, json_integer(t->shape[r]));
        }
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(td_dtype_name(t->dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)off, (json_int_t)(off + t->n_bytes)));
        json_object_set_new(hdr, t->name, e);
        off += t->n_bytes;
    }
    char *h = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    FILE *f = fopen(path, "wb");
    ck_assert(f);
    uint64_t hl = strlen(h);
    fwrite(&hl, 8, 1, f);
    fwrite(h, 1, hl, f);
    free(h);
    for (int i = 0; i < st.n_tensors; i++) {
        const td_st_tensor *t = &st.tensors[i];
        if (kind == EDIT_DROP && strcmp(t->name, name) == 0)
            continue;
        unsigned char *copy = malloc(t->n_bytes ? t->n_bytes : 1);
        memcpy(copy, t->data, t->n_bytes);
        if (kind == EDIT_NAN && strcmp(t->name, name) == 0) {
            ck_assert(t->dtype == TD_F32);
            float nan = NAN;
            memcpy(copy + 4 * 3, &nan, 4);
        }
        size_t len = t->n_bytes;
        if (kind == EDIT_TRUNCATE && strcmp(t->name, name) == 0)
            len /= 2;
        fwrite(copy, 1, len, f);
        free(copy);
    }
    fclose(f);
    td_st_close(&st);
}

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    ck_assert(f);
    fputs(text, f);
    fclose(f);
}

/* Edits config.json: sets key to the JSON value text (NULL deletes it). */
static void edit_config(const char *key, const char *value_json)
{
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    ck_assert(c);
    if (value_json)
        json_object_set_new(c, key, json_loads(value_json, JSON_DECODE_ANY, &je));
    else
        json_object_del(c, key);
    ck_assert(json_dump_file(c, path, JSON_INDENT(1)) == 0);
    json_decref(c);
}

static void expect_load_error(const char *device, const char *needle1, const char *needle2)
{
    char err[1024] = "";
    td_model *m = NULL;
    td_load_opts lo = {.device = device, .n_threads = 1};
    int rc = td_model_load(&m, g_dir, &lo, err, sizeof err);
    ck_assert_msg(rc == -1 && m == NULL, "load unexpectedly succeeded");
    ck_assert_msg(strstr(err, needle1) != NULL, "'%s' lacks '%s'", err, needle1);
    if (needle2)
        ck_assert_msg(strstr(err, needle2) != NULL, "'%s' lacks '%s'", err, needle2);
}

START_TEST(test_intact_copy_loads)
{
    char err[512];
    td_model *m = NULL;
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(&m, g_dir, &lo, err, sizeof err) == 0, "%s", err);
    ck_assert_int_gt((int)td_model_weight_bytes(m), 0);
    td_model_free(m);
}
END_TEST

START_TEST(test_missing_tensor)
{
    rewrite_st("model.encoder.layers.1.fc1.weight", EDIT_DROP);
    expect_load_error("cpu", "missing tensor 'model.encoder.layers.1.fc1.weight'", NULL);
}
END_TEST

START_TEST(test_wrong_shape)
{
    rewrite_st("model.decoder.layers.0.fc2.weight", EDIT_RESHAPE);
    expect_load_error("cpu", "model.decoder.layers.0.fc2.weight", "does not match the config");
}
END_TEST

START_TEST(test_non_finite)
{
    rewrite_st("model.decoder.layers.1.encoder_attn.v_proj.weight", EDIT_NAN);
    expect_load_error("cpu", "model.decoder.layers.1.encoder_attn.v_proj.weight", "non-finite");
}
END_TEST

START_TEST(test_truncated_file)
{
    rewrite_st("model.shared.weight", EDIT_TRUNCATE);
    expect_load_error("cpu", "model.safetensors", NULL);
}
END_TEST

START_TEST(test_no_embeddings)
{
    rewrite_st("model.shared.weight", EDIT_DROP);
    expect_load_error("cpu", "encoder embeddings", "model.shared.weight");
}
END_TEST

START_TEST(test_untied_without_lm_head)
{
    edit_config("tie_word_embeddings", "false");
    expect_load_error("cpu", "tie_word_embeddings is false", "lm_head.weight");
}
END_TEST

START_TEST(test_config_mismatch)
{
    edit_config("encoder_ffn_dim", "40");
    expect_load_error("cpu", "model.encoder.layers.0.fc1.weight", "does not match the config");
}
END_TEST

START_TEST(test_config_missing_key)
{
    edit_config("d_model", NULL);
    expect_load_error("cpu", "config.json", "d_model");
}
END_TEST

START_TEST(test_relative_without_tables)
{
    edit_config("position_encoding", "\"relative\"");
    edit_config("relative_attention_max_distance", "4");
    expect_load_error("cpu", "missing tensor", "relative_key.weight");
}
END_TEST

START_TEST(test_missing_safetensors)
{
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
    unlink(p);
    expect_load_error("cpu", "model.safetensors", NULL);
}
END_TEST

START_TEST(test_bad_generation_config)
{
    write_file("generation_config.json", "{\"num_beams\": 99}");
    expect_load_error("cpu", "generation_config.json", "num_beams");
}
END_TEST

START_TEST(test_unknown_device)
{
    expect_load_error("tpu", "tpu", "cpu");
    /* no such device anywhere: with or without a CUDA build and a GPU */
    expect_load_error("cuda:999", "--device cpu", NULL);
}
END_TEST

/* Bad calls fail cleanly and leave the worker usable. */
START_TEST(test_bad_calls)
{
    char err[512];
    td_model *m = NULL;
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(&m, FIXTURE, &lo, err, sizeof err) == 0, "%s", err);
    td_worker_opts wo = {.max_batch = 4, .max_src_len = 16, .max_length = 10, .max_beam = 4,
                         .n_threads = 1};
    td_worker *w = NULL;
    ck_assert_msg(td_worker_init(&w, m, &wo, err, sizeof err) == 0, "%s", err);
    const td_config *c = td_model_config(m);

    int32_t good[3] = {5, 7, 0};
    int32_t bad_tok[3] = {5, c->vocab_size, 0};
    int32_t long_src[17] = {0};
    const int32_t *src[5] = {good, good, good, good, good};
    int len[5] = {3, 3, 3, 3, 3};
    td_result res[5];
    td_decode_opts o;
    td_decode_opts_default(m, &o);
    o.beam_size = 2;
    o.max_length = 8;

    const int32_t *bt[1] = {bad_tok};
    ck_assert_int_eq(td_translate_batch(w, bt, len, 1, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "outside the vocabulary"), "%s", err);
    const int32_t *ls[1] = {long_src};
    int ll[1] = {17};
    ck_assert_int_eq(td_translate_batch(w, ls, ll, 1, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "tokens"), "%s", err);
    ck_assert_int_eq(td_translate_batch(w, src, len, 5, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "batch of 5"), "%s", err);
    o.beam_size = 5;
    ck_assert_int_eq(td_translate_batch(w, src, len, 1, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "beam_size"), "%s", err);
    o.beam_size = 2;
    o.num_hypotheses = 3;
    ck_assert_int_eq(td_translate_batch(w, src, len, 1, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "num_hypotheses"), "%s", err);
    o.num_hypotheses = 1;
    o.max_length = 11;
    ck_assert_int_eq(td_translate_batch(w, src, len, 1, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "max_length"), "%s", err);
    o.max_length = 8;
    o.return_attention = 1;
    int layers[1] = {c->decoder_layers};
    o.attn_layers = layers;
    o.n_attn_layers = 1;
    ck_assert_int_eq(td_translate_batch(w, src, len, 1, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "attention_layers"), "%s", err);
    int heads[1] = {-1};
    layers[0] = -1;
    o.attn_heads = heads;
    o.n_attn_heads = 1;
    ck_assert_int_eq(td_translate_batch(w, src, len, 1, &o, res, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "attention_heads"), "%s", err);

    /* still usable, with attention of the last layer, head 1 */
    heads[0] = 1;
    ck_assert_msg(td_translate_batch(w, src, len, 4, &o, res, err, sizeof err) == 0, "%s", err);
    int first_len = res[0].hyps[0].n_tokens;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(res[i].n_hyps, 1);
        ck_assert_int_eq(res[i].attn_n_layers, 1);
        ck_assert_int_eq(res[i].attn_layer_ids[0], c->decoder_layers - 1);
        ck_assert_int_eq(res[i].attn_n_t, res[i].hyps[0].n_tokens);
        ck_assert_int_eq(res[i].attn_n_s, 3);
        for (int t = 0; t < res[i].attn_n_t; t++) {
            double sum = 0;
            for (int s = 0; s < 3; s++)
                sum += res[i].attention[t * 3 + s];
            ck_assert_msg(fabs(sum - 1.0) < 1e-5, "row %d sums to %g", t, sum);
        }
        /* same source, same batch: same translation */
        ck_assert_int_eq(res[i].hyps[0].n_tokens, first_len);
        td_result_free(&res[i]);
    }
    td_worker_free(w);
    td_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_errors");
    TCase *tc = tcase_create("load");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_intact_copy_loads);
    tcase_add_test(tc, test_missing_tensor);
    tcase_add_test(tc, test_wrong_shape);
    tcase_add_test(tc, test_non_finite);
    tcase_add_test(tc, test_truncated_file);
    tcase_add_test(tc, test_no_embeddings);
    tcase_add_test(tc, test_untied_without_lm_head);
    tcase_add_test(tc, test_config_mismatch);
    tcase_add_test(tc, test_config_missing_key);
    tcase_add_test(tc, test_relative_without_tables);
    tcase_add_test(tc, test_missing_safetensors);
    tcase_add_test(tc, test_bad_generation_config);
    tcase_add_test(tc, test_unknown_device);
    suite_add_tcase(s, tc);
    TCase *tc2 = tcase_create("calls");
    tcase_add_test(tc2, test_bad_calls);
    suite_add_tcase(s, tc2);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
