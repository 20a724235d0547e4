/*
 * test_wformat.c - the weight-format seam (model/wformat.h) and the probe
 * (td_model_probe, translator.h):
 *   - the table: every format named, its file named, no two alike;
 *   - the probe of the test models: safetensors, the weight file's size,
 *     the tokenizer files there (target_vocab.json where separate), nothing
 *     missing; of broken directories: the first missing file named (no
 *     config, no weights: every format's file, no tokenizer piece);
 *   - the safetensors source against the reader it wraps (safetensors.h),
 *     opened on the same file: the same tensors by name, dtype, shape and
 *     element count, read_f32 equal in bits to td_to_f32 of the stored
 *     bytes, raw the stored bytes; a directory without weights refused
 *     naming the files looked for.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "translator.h"
#include "wformat.h"

#define EN_DE TD_TEST_DATA "/text/marian_en_de"
#define SEP TD_TEST_DATA "/text/marian_sep"

START_TEST(test_table)
{
    int n = 0;
    const td_wformat *const *f = td_wformats(&n);
    ck_assert_int_ge(n, 1);
    ck_assert_str_eq(f[0]->name, "safetensors"); /* preferred when several are there */
    for (int i = 0; i < n; i++) {
        ck_assert(f[i]->name && *f[i]->name && f[i]->file && *f[i]->file);
        ck_assert(f[i]->probe && f[i]->open && f[i]->close && f[i]->count && f[i]->tensor &&
                  f[i]->find && f[i]->read_f32 && f[i]->raw);
        for (int k = 0; k < i; k++) {
            ck_assert_str_ne(f[i]->name, f[k]->name);
            ck_assert_str_ne(f[i]->file, f[k]->file);
        }
    }
}
END_TEST

START_TEST(test_probe_models)
{
    td_probe p;
    ck_assert_int_eq(td_model_probe(EN_DE, &p), 1);
    ck_assert_str_eq(p.format, "safetensors");
    ck_assert_str_eq(p.missing, "");
    ck_assert_int_eq(p.has_config, 1);
    struct stat st;
    ck_assert_int_eq(stat(EN_DE "/model.safetensors", &st), 0);
    ck_assert_uint_eq(p.weight_bytes, (uint64_t)st.st_size);
    ck_assert_str_eq(p.weights, EN_DE "/model.safetensors");
    ck_assert_str_eq(p.tokenizer, "source.spm target.spm vocab.json");
    ck_assert_int_eq(td_model_probe(SEP, &p), 1);
    ck_assert_str_eq(p.tokenizer, "source.spm target.spm vocab.json target_vocab.json");
}
END_TEST

/* dir/name: a link to EN_DE's file of that name. */
static void link_in(const char *dir, const char *name)
{
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/%s", EN_DE, name);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    ck_assert_int_eq(symlink(from, to), 0);
}

START_TEST(test_probe_broken)
{
    char dir[] = "/tmp/td_wformat_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    td_probe p;
    ck_assert_int_eq(td_model_probe(dir, &p), 0);
    ck_assert_str_eq(p.missing, "config.json");
    ck_assert_ptr_null(p.format);
    link_in(dir, "config.json");
    ck_assert_int_eq(td_model_probe(dir, &p), 0);
    ck_assert_str_eq(p.missing, "model.safetensors or pytorch_model.bin or model.bin"); /* every format's */
    link_in(dir, "model.safetensors");
    ck_assert_int_eq(td_model_probe(dir, &p), 0);
    ck_assert_str_eq(p.format, "safetensors");
    ck_assert_str_eq(p.missing, "source.spm");
    link_in(dir, "source.spm");
    link_in(dir, "target.spm");
    ck_assert_int_eq(td_model_probe(dir, &p), 0);
    ck_assert_str_eq(p.missing, "vocab.json");
    link_in(dir, "vocab.json");
    ck_assert_int_eq(td_model_probe(dir, &p), 1);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_safetensors_source)
{
    char err[512] = "";
    td_wsrc s;
    ck_assert_msg(td_wsrc_open(&s, EN_DE, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(s.fmt->name, "safetensors");
    ck_assert_str_eq(s.file, "model.safetensors");
    td_st st;
    ck_assert_msg(td_st_open(&st, EN_DE "/model.safetensors", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(s.fmt->count(&s), st.n_tensors);
    for (int i = 0; i < st.n_tensors; i++) {
        const td_st_tensor *a = &st.tensors[i];
        const td_wt *b = s.fmt->find(&s, a->name);
        ck_assert_msg(b != NULL, "%s not found through the seam", a->name);
        ck_assert_ptr_eq(s.fmt->tensor(&s, i), b); /* the same order */
        ck_assert_str_eq(b->name, a->name);
        ck_assert_int_eq(b->dtype, a->dtype);
        ck_assert_int_eq(b->rank, a->rank);
        for (int k = 0; k < a->rank; k++)
            ck_assert_int_eq(b->shape[k], a->shape[k]);
        ck_assert_int_eq(b->n_elements, a->n_elements);
        float *x = malloc((size_t)a->n_elements * sizeof *x + 1),
              *y = malloc((size_t)a->n_elements * sizeof *y + 1);
        ck_assert(x && y);
        td_to_f32(x, a->data, a->dtype, a->n_elements);
        ck_assert_int_eq(s.fmt->read_f32(&s, b, y, err, sizeof err), 0);
        ck_assert_msg(memcmp(x, y, (size_t)a->n_elements * sizeof *x) == 0, "%s", a->name);
        const void *raw = s.fmt->raw(&s, b);
        ck_assert(raw && memcmp(raw, a->data, a->n_bytes) == 0);
        free(x);
        free(y);
    }
    ck_assert_ptr_null(s.fmt->find(&s, "no.such.tensor"));
    ck_assert_ptr_null(s.fmt->tensor(&s, st.n_tensors));
    td_st_close(&st);
    td_wsrc_close(&s);
    ck_assert_ptr_null(s.fmt);
    td_wsrc_close(&s); /* twice: an empty source */
    ck_assert_int_eq(td_wsrc_open(&s, TD_TEST_DATA, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "no weights") && strstr(err, "model.safetensors"), "%s", err);
    ck_assert_ptr_null(s.fmt);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wformat");
    TCase *tc = tcase_create("seam");
    tcase_add_test(tc, test_table);
    tcase_add_test(tc, test_probe_models);
    tcase_add_test(tc, test_probe_broken);
    tcase_add_test(tc, test_safetensors_source);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
