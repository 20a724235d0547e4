/*
 * test_torch.c - pytorch_model.bin through the weight-format seam
 * (model/wf_torch.c), on files torch.save wrote (tests/data/torch, made by
 * tools/make_torch_fixtures.py from the test models):
 *   - a directory with only pytorch_model.bin (config and tokenizer files
 *     linked from the model's own directory) is probed and opened as
 *     "torch"; with model.safetensors beside it, safetensors is read;
 *   - every tensor of the model's model.safetensors is there, with the
 *     same dtype and shape, read_f32 equal in bits and raw equal in bytes;
 *     tied names (several tensors on one storage) equal what they tie to;
 *     for the zip layout, the legacy one, float16, bfloat16, a ZIP64
 *     archive and a checkpoint of views (a transposed weight, layer norms
 *     as slices of one storage);
 *   - the model loaded from it translates exactly as from safetensors:
 *     the same token ids and the same scores in bits (the fixtures' golden
 *     cases; the text models' golden texts, greedy and beam 4);
 *   - the fuzz seeds' views (transposed, sliced, expanded, empty, scalar,
 *     one tensor under two names), the same in every layout;
 *   - files to refuse (pickles calling os.system, builtins.eval,
 *     torch.storage._load_from_bytes, an opcode torch.save never writes,
 *     tensors past their storage, a short record, int64, huge declared
 *     lengths, truncated files) are refused with a message that names
 *     pytorch_model.bin and the reason, and no allocation while opening
 *     one is larger than a megabyte (malloc, calloc and realloc are
 *     wrapped: tests/CMakeLists.txt).
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "tokenizer.h"
#include "translator.h"
#include "wformat.h"

#define TORCH TD_TEST_DATA "/torch"
#define SEEDS TD_TEST_DATA "/../fuzz/corpus/torch"

/* ---- the largest single allocation while g_track is set ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
static int g_track;
static size_t g_peak;

static void note(size_t n)
{
    if (g_track && n > g_peak)
        g_peak = n;
}
void *__wrap_malloc(size_t n)
{
    note(n);
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size)
{
    note(size && n > (size_t)-1 / size ? (size_t)-1 : n * size);
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n)
{
    note(n);
    return __real_realloc(p, n);
}

/* ---- model directories made of links ---- */

typedef struct tcase {
    const char *bin; /* under tests/data/torch */
    const char *src; /* the model it was saved from, under tests/data */
    int text;        /* a text model (tokenizer, text goldens) */
    int strided;     /* tensors read by gathering (raw NULL) */
} tcase;

static const tcase k_cases[] = {
    {"marian_en_de.zip.bin", "text/marian_en_de", 1, 0},
    {"marian_sep.legacy.bin", "text/marian_sep", 1, 0},
    {"marian_tied_f16.zip.bin", "fixtures/marian_tied_f16", 0, 0},
    {"marian_tied_f16.legacy.bin", "fixtures/marian_tied_f16", 0, 0},
    {"marian_tied_f16.views.bin", "fixtures/marian_tied_f16", 0, 1},
    {"marian_tied_bf16.zip.bin", "fixtures/marian_tied_bf16", 0, 0},
    {"marian_tied_bf16.legacy.bin", "fixtures/marian_tied_bf16", 0, 0},
    {"marian_tied_bf16.zip64.bin", "fixtures/marian_tied_bf16", 0, 0},
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))

static const char *const k_side_files[] = {
    "config.json", "generation_config.json", "golden.json",     "source.spm",
    "target.spm",  "vocab.json",             "target_vocab.json", "tokenizer_config.json",
};

static void link_as(const char *from, const char *dir, const char *name)
{
    char to[700];
    snprintf(to, sizeof to, "%s/%s", dir, name);
    ck_assert_msg(symlink(from, to) == 0, "symlink %s -> %s", to, from);
}

/* A new directory holding src's side files and bin as pytorch_model.bin
 * (bin: a path, or NULL for none); with_st: src's model.safetensors too. */
static void make_dir(char *dir, size_t n, const char *src, const char *bin, int with_st)
{
    snprintf(dir, n, "/tmp/td_torch_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char from[700];
    struct stat sb;
    for (size_t i = 0; i < sizeof k_side_files / sizeof k_side_files[0]; i++) {
        snprintf(from, sizeof from, "%s/%s/%s", TD_TEST_DATA, src, k_side_files[i]);
        if (stat(from, &sb) == 0)
            link_as(from, dir, k_side_files[i]);
    }
    if (with_st) {
        snprintf(from, sizeof from, "%s/%s/model.safetensors", TD_TEST_DATA, src);
        link_as(from, dir, "model.safetensors");
    }
    if (bin)
        link_as(bin, dir, "pytorch_model.bin");
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void case_dir(char *dir, size_t n, const tcase *c, int with_st)
{
    char bin[600];
    snprintf(bin, sizeof bin, "%s/%s", TORCH, c->bin);
    make_dir(dir, n, c->src, bin, with_st);
}

/* t's values as float32 (malloc'd) */
static float *read_all(const td_wsrc *s, const td_wt *t)
{
    char err[256];
    float *x = malloc((size_t)t->n_elements * sizeof *x + 4);
    ck_assert_ptr_nonnull(x);
    ck_assert_msg(s->fmt->read_f32(s, t, x, err, sizeof err) == 0, "%s", err);
    return x;
}

/* ---- the table and the probe ---- */

START_TEST(test_table_and_probe)
{
    int n = 0;
    const td_wformat *const *f = td_wformats(&n);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(f[0]->name, "safetensors"); /* preferred */
    ck_assert_str_eq(f[1]->name, "torch");
    ck_assert_str_eq(f[1]->file, "pytorch_model.bin");
    ck_assert_str_eq(f[2]->name, "ctranslate2"); /* test_ct2 */

    char dir[64], path[700];
    td_probe p;
    case_dir(dir, sizeof dir, &k_cases[0], 0);
    ck_assert_int_eq(td_model_probe(dir, &p), 1);
    ck_assert_str_eq(p.format, "torch");
    snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
    ck_assert_str_eq(p.weights, path);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(p.weight_bytes, (uint64_t)sb.st_size);
    remove_dir(dir);

    /* neither: both files named */
    make_dir(dir, sizeof dir, "text/marian_en_de", NULL, 0);
    ck_assert_int_eq(td_model_probe(dir, &p), 0);
    ck_assert_str_eq(p.missing, "model.safetensors or pytorch_model.bin or model.bin");
    td_wsrc s;
    char err[512];
    ck_assert_int_eq(td_wsrc_open(&s, dir, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "model.safetensors, pytorch_model.bin"), "%s", err);
    remove_dir(dir);
}
END_TEST

/* Both files: safetensors, and the torch file is never read (a hostile one
 * here). */
START_TEST(test_prefer_safetensors)
{
    char dir[64], err[512];
    td_probe p;
    make_dir(dir, sizeof dir, "text/marian_en_de", TORCH "/refuse/os_system.bin", 1);
    ck_assert_int_eq(td_model_probe(dir, &p), 1);
    ck_assert_str_eq(p.format, "safetensors");
    td_wsrc s;
    ck_assert_msg(td_wsrc_open(&s, dir, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(s.fmt->name, "safetensors");
    ck_assert_str_eq(s.file, "model.safetensors");
    td_wsrc_close(&s);
    td_model *m = NULL;
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(&m, dir, &lo, err, sizeof err) == 0, "%s", err);
    td_model_free(m);
    remove_dir(dir);
}
END_TEST

/* ---- every tensor against safetensors ---- */

static const char *const k_tied[] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                     "model.decoder.embed_tokens.weight", "lm_head.weight"};

START_TEST(test_same_tensors)
{
    const tcase *c = &k_cases[_i];
    char dir[64], err[512], stp[600];
    case_dir(dir, sizeof dir, c, 0);
    td_wsrc s;
    ck_assert_msg(td_wsrc_open(&s, dir, err, sizeof err) == 0, "%s: %s", c->bin, err);
    ck_assert_str_eq(s.fmt->name, "torch");
    ck_assert_str_eq(s.file, "pytorch_model.bin");
    td_st st;
    snprintf(stp, sizeof stp, "%s/%s/model.safetensors", TD_TEST_DATA, c->src);
    ck_assert_msg(td_st_open(&st, stp, err, sizeof err) == 0, "%s", err);
    int n_gathered = 0;
    for (int i = 0; i < st.n_tensors; i++) {
        const td_st_tensor *a = &st.tensors[i];
        const td_wt *b = s.fmt->find(&s, a->name);
        ck_assert_msg(b != NULL, "%s: %s missing", c->bin, a->name);
        ck_assert_str_eq(b->name, a->name);
        ck_assert_int_eq(b->dtype, a->dtype);
        ck_assert_int_eq(b->rank, a->rank);
        for (int k = 0; k < a->rank; k++)
            ck_assert_int_eq(b->shape[k], a->shape[k]);
        ck_assert_int_eq(b->n_elements, a->n_elements);
        float *x = malloc((size_t)a->n_elements * sizeof *x + 4);
        ck_assert_ptr_nonnull(x);
        td_to_f32(x, a->data, a->dtype, a->n_elements);
        float *y = read_all(&s, b);
        ck_assert_msg(memcmp(x, y, (size_t)a->n_elements * sizeof *x) == 0, "%s: %s", c->bin,
                      a->name);
        const void *raw = s.fmt->raw(&s, b);
        if (raw)
            ck_assert_msg(memcmp(raw, a->data, a->n_bytes) == 0, "%s: %s raw", c->bin, a->name);
        else
            n_gathered++;
        free(x);
        free(y);
    }
    /* names torch keeps that safetensors drops: tied weights equal a tensor
     * they tie to; the sinusoidal position tables read */
    int n_extra = 0;
    for (int i = 0; i < s.fmt->count(&s); i++) {
        const td_wt *t = s.fmt->tensor(&s, i);
        ck_assert_ptr_eq(s.fmt->find(&s, t->name), t);
        if (i > 0)
            ck_assert_int_lt(strcmp(s.fmt->tensor(&s, i - 1)->name, t->name), 0);
        if (td_st_find(&st, t->name))
            continue;
        n_extra++;
        float *y = read_all(&s, t);
        int tied = 0;
        for (size_t k = 0; k < sizeof k_tied / sizeof k_tied[0]; k++) {
            const td_st_tensor *a = td_st_find(&st, k_tied[k]);
            if (!strcmp(t->name, k_tied[k]) || !a || a->n_elements != t->n_elements)
                continue;
            float *x = malloc((size_t)a->n_elements * sizeof *x + 4);
            td_to_f32(x, a->data, a->dtype, a->n_elements);
            tied |= memcmp(x, y, (size_t)a->n_elements * sizeof *x) == 0;
            free(x);
        }
        ck_assert_msg(tied || strstr(t->name, "embed_positions"), "%s: %s", c->bin, t->name);
        free(y);
    }
    ck_assert_int_ge(n_extra, 2); /* the position tables at least */
    ck_assert_int_eq(n_gathered, c->strided);
    ck_assert_ptr_null(s.fmt->find(&s, "no.such.tensor"));
    ck_assert_ptr_null(s.fmt->tensor(&s, s.fmt->count(&s)));
    td_st_close(&st);
    td_wsrc_close(&s);
    remove_dir(dir);
}
END_TEST

/* ---- the same translations ---- */

static void same_result(const char *where, const td_result *a, const td_result *b)
{
    ck_assert_msg(a->n_hyps == b->n_hyps, "%s: hypotheses", where);
    for (int h = 0; h < a->n_hyps; h++) {
        const td_hypothesis *x = &a->hyps[h], *y = &b->hyps[h];
        ck_assert_msg(x->n_tokens == y->n_tokens &&
                          (x->n_tokens == 0 || !memcmp(x->tokens, y->tokens,
                                                       (size_t)x->n_tokens * sizeof *x->tokens)),
                      "%s: hypothesis %d tokens differ", where, h);
        ck_assert_msg(memcmp(&x->score, &y->score, sizeof x->score) == 0,
                      "%s: hypothesis %d score %.9g against %.9g", where, h, (double)y->score,
                      (double)x->score);
    }
}

/* The fixture's golden cases (token ids) on both models. */
static int same_cases(td_worker *wa, td_worker *wb, json_t *g, const char *name)
{
    int n_hyps = 0;
    json_t *cases = json_object_get(g, "cases");
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *cs = json_array_get(cases, c), *srcs = json_object_get(cs, "sources");
        td_decode_opts o;
        memset(&o, 0, sizeof o);
        o.beam_size = (int)json_integer_value(json_object_get(cs, "beam_size"));
        o.num_hypotheses = (int)json_integer_value(json_object_get(cs, "num_hypotheses"));
        o.length_penalty = (float)json_number_value(json_object_get(cs, "length_penalty"));
        o.max_length = (int)json_integer_value(json_object_get(cs, "max_length"));
        int n = (int)json_array_size(srcs);
        int32_t **src = calloc((size_t)n, sizeof *src);
        int *len = calloc((size_t)n, sizeof *len);
        td_result *ra = calloc((size_t)n, sizeof *ra), *rb = calloc((size_t)n, sizeof *rb);
        ck_assert(src && len && ra && rb);
        for (int i = 0; i < n; i++) {
            json_t *a = json_array_get(srcs, (size_t)i);
            len[i] = (int)json_array_size(a);
            src[i] = malloc((size_t)len[i] * sizeof **src + 4);
            for (int j = 0; j < len[i]; j++)
                src[i][j] = (int32_t)json_integer_value(json_array_get(a, (size_t)j));
        }
        char err[512], where[300];
        ck_assert_msg(td_translate_batch(wa, (const int32_t *const *)src, len, n, &o, ra, err,
                                         sizeof err) == 0, "%s", err);
        ck_assert_msg(td_translate_batch(wb, (const int32_t *const *)src, len, n, &o, rb, err,
                                         sizeof err) == 0, "%s", err);
        for (int i = 0; i < n; i++) {
            snprintf(where, sizeof where, "%s case %zu sentence %d", name, c, i);
            same_result(where, &ra[i], &rb[i]);
            n_hyps += ra[i].n_hyps;
            td_result_free(&ra[i]);
            td_result_free(&rb[i]);
            free(src[i]);
        }
        free(src);
        free(len);
        free(ra);
        free(rb);
    }
    return n_hyps;
}

/* The text model's golden texts, greedy and beam 4, on both models. */
static int same_texts(td_worker *wa, td_worker *wb, const td_model *ma, const td_model *mb,
                      const char *da, const char *db, json_t *g, const char *name)
{
    char err[512];
    struct td_tokenizer *ta = NULL, *tb = NULL;
    ck_assert_msg(td_model_tokenizer_load(ma, da, &ta, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(td_model_tokenizer_load(mb, db, &tb, err, sizeof err) == 0, "%s", err);
    json_t *cases = json_object_get(g, "cases");
    int n = (int)json_array_size(cases), n_hyps = 0;
    const char **texts = calloc((size_t)n, sizeof *texts);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    td_text_result *ra = calloc((size_t)n, sizeof *ra), *rb = calloc((size_t)n, sizeof *rb);
    ck_assert(texts && lens && ra && rb);
    for (int i = 0; i < n; i++) {
        json_t *t = json_object_get(json_array_get(cases, (size_t)i), "text");
        texts[i] = json_string_value(t);
        lens[i] = json_string_length(t);
    }
    for (int beam = 1; beam <= 4; beam += 3) {
        td_decode_opts o;
        memset(&o, 0, sizeof o);
        o.beam_size = beam;
        o.num_hypotheses = 1;
        o.length_penalty = 1.0f;
        o.max_length = (int)json_integer_value(json_object_get(g, "max_length")) - 1;
        ck_assert_msg(td_translate_text(wa, ta, texts, lens, n, &o, ra, err, sizeof err) == 0,
                      "%s", err);
        ck_assert_msg(td_translate_text(wb, tb, texts, lens, n, &o, rb, err, sizeof err) == 0,
                      "%s", err);
        char where[300];
        for (int i = 0; i < n; i++) {
            snprintf(where, sizeof where, "%s beam %d text %d", name, beam, i);
            same_result(where, &ra[i].r, &rb[i].r);
            ck_assert_str_eq(ra[i].text, rb[i].text);
            n_hyps += ra[i].r.n_hyps;
            td_text_result_free(&ra[i]);
            td_text_result_free(&rb[i]);
        }
    }
    free(texts);
    free(lens);
    free(ra);
    free(rb);
    td_tok_free(ta);
    td_tok_free(tb);
    return n_hyps;
}

START_TEST(test_same_translations)
{
    const tcase *c = &k_cases[_i];
    char dir[64], err[512], src[600];
    case_dir(dir, sizeof dir, c, 0);
    snprintf(src, sizeof src, "%s/%s", TD_TEST_DATA, c->src);
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    td_model *ma = NULL, *mb = NULL;
    ck_assert_msg(td_model_load(&ma, src, &lo, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(td_model_load(&mb, dir, &lo, err, sizeof err) == 0, "%s: %s", c->bin, err);
    td_worker_opts wo = {.max_batch = 16, .max_length = 32, .max_beam = 16, .n_threads = 1};
    td_worker *wa = NULL, *wb = NULL;
    ck_assert_msg(td_worker_init(&wa, ma, &wo, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(td_worker_init(&wb, mb, &wo, err, sizeof err) == 0, "%s", err);
    char gp[700];
    snprintf(gp, sizeof gp, "%s/golden.json", src);
    json_error_t je;
    json_t *g = json_load_file(gp, 0, &je);
    ck_assert_msg(g != NULL, "%s: %s", gp, je.text);
    int n = c->text ? same_texts(wa, wb, ma, mb, src, dir, g, c->bin)
                    : same_cases(wa, wb, g, c->bin);
    ck_assert_int_ge(n, 10); /* not vacuous */
    json_decref(g);
    td_worker_free(wa);
    td_worker_free(wb);
    td_model_free(ma);
    td_model_free(mb);
    remove_dir(dir);
}
END_TEST

/* ---- views, in every layout (the fuzz seeds) ---- */

static const char *const k_seeds[] = {"seed_zip.bin", "seed_legacy.bin", "seed_zip_proto4.bin",
                                      "seed_legacy_proto4.bin", "seed_zip64.bin"};

static const td_wt *must(const td_wsrc *s, const char *name, td_dtype dt, int rank, int64_t d0,
                         int64_t d1)
{
    const td_wt *t = s->fmt->find(s, name);
    ck_assert_msg(t != NULL, "%s", name);
    ck_assert_int_eq(t->dtype, dt);
    ck_assert_int_eq(t->rank, rank);
    if (rank > 0)
        ck_assert_int_eq(t->shape[0], d0);
    if (rank > 1)
        ck_assert_int_eq(t->shape[1], d1);
    return t;
}

START_TEST(test_views)
{
    float *first[16] = {0};
    int n0 = 0;
    for (size_t f = 0; f < sizeof k_seeds / sizeof k_seeds[0]; f++) {
        char dir[64], bin[600], err[512];
        snprintf(bin, sizeof bin, "%s/%s", SEEDS, k_seeds[f]);
        make_dir(dir, sizeof dir, "text/marian_en_de", bin, 0);
        td_wsrc s;
        ck_assert_msg(td_wsrc_open(&s, dir, err, sizeof err) == 0, "%s: %s", k_seeds[f], err);
        ck_assert_int_eq(s.fmt->count(&s), 9);
        const td_wt *a = must(&s, "a.weight", TD_F32, 2, 4, 6);
        const td_wt *tied = must(&s, "a.tied", TD_F32, 2, 4, 6);
        const td_wt *bt = must(&s, "b.t", TD_F32, 2, 6, 4);
        const td_wt *cs = must(&s, "c.slice", TD_F32, 1, 6, 0);
        must(&s, "d.half", TD_F16, 2, 3, 2);
        must(&s, "e.bf16", TD_BF16, 1, 5, 0);
        const td_wt *sc = must(&s, "f.scalar", TD_F32, 0, 0, 0);
        const td_wt *em = must(&s, "g.empty", TD_F32, 2, 0, 3);
        const td_wt *ex = must(&s, "h.expand", TD_F32, 2, 4, 3);
        ck_assert_int_eq(sc->n_elements, 1);
        ck_assert_int_eq(em->n_elements, 0);
        float *va = read_all(&s, a), *vt = read_all(&s, tied), *vb = read_all(&s, bt),
              *vc = read_all(&s, cs), *vs = read_all(&s, sc), *vx = read_all(&s, ex);
        ck_assert(memcmp(va, vt, 24 * sizeof *va) == 0);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++)
                ck_assert(vb[j * 4 + i] == va[i * 6 + j]); /* the transpose */
        ck_assert(memcmp(vc, va + 5, 6 * sizeof *va) == 0); /* offset 5 */
        ck_assert(vs[0] == 2.5f);
        for (int i = 0; i < 12; i++)
            ck_assert(vx[i] == 1.0f); /* stride 0 */
        ck_assert_ptr_nonnull(s.fmt->raw(&s, a));
        ck_assert_ptr_nonnull(s.fmt->raw(&s, cs));
        ck_assert_ptr_null(s.fmt->raw(&s, bt));
        ck_assert_ptr_null(s.fmt->raw(&s, ex));
        free(va), free(vt), free(vb), free(vc), free(vs), free(vx);
        /* every layout: the same bits */
        for (int i = 0; i < s.fmt->count(&s); i++) {
            const td_wt *t = s.fmt->tensor(&s, i);
            float *v = read_all(&s, t);
            if (f == 0) {
                first[n0++] = v;
                continue;
            }
            ck_assert_msg(memcmp(v, first[i], (size_t)t->n_elements * sizeof *v) == 0, "%s: %s",
                          k_seeds[f], t->name);
            free(v);
        }
        td_wsrc_close(&s);
        remove_dir(dir);
    }
    for (int i = 0; i < n0; i++)
        free(first[i]);
}
END_TEST

/* ---- refused ---- */

typedef struct refuse_case {
    const char *file; /* under tests/data/torch/refuse */
    const char *why;  /* in the message */
} refuse_case;

static const refuse_case k_refuse[] = {
    {"os_system.bin", "global 'posix.system' is not allowed"},
    {"os_system.legacy.bin", "pickle 4 at byte 173: global 'posix.system' is not allowed"},
    {"eval.bin", "global '__builtin__.eval' is not allowed"}, /* protocol 2's name */
    {"eval_proto4.bin", "global 'builtins.eval' is not allowed"},
    {"load_from_bytes.bin", "global 'torch.storage._load_from_bytes' is not allowed"},
    {"float_opcode.bin", "opcode 0x47 ('G') is not one torch.save writes"},
    {"not_a_tensor.bin", "'b' is an int, not a tensor"},
    /* one element past the storage's end, in place and by strides */
    {"past_storage.bin", "tensor 'a': reaches element 10 of storage '0', which has 10 elements"},
    {"strided_past.bin", "tensor 'a': reaches element 10 of storage '0', which has 10 elements"},
    {"record_short.bin", "storage '0': record archive/data/0 holds 40 bytes, not the 16 elements"},
    {"int64.bin", "tensor 'position_ids': dtype int64 (torch.LongStorage)"},
    {"huge_numel.bin", "holds 0 bytes, not the 2305843009213693952 elements"},
    {"huge_string.bin", "archive/data.pkl at byte 2: needs 4294967280 bytes, 3 left"},
    {"huge_memo.bin", "memo index 4294967295"},
    {"deep_marks.bin", "more than 64 nested MARKs"},
    {"no_stop.bin", "ends without STOP"},
    {"setitems_list.bin", "SETITEMS on a list"},
};
#define N_REFUSE ((int)(sizeof k_refuse / sizeof k_refuse[0]))

/* Opens dir's weights expecting a refusal that says why; no allocation
 * over 1 MiB on the way. */
static void expect_refused(const char *dir, const char *what, const char *why)
{
    td_wsrc s;
    char err[512] = "";
    g_peak = 0;
    g_track = 1;
    int rc = td_wsrc_open(&s, dir, err, sizeof err);
    g_track = 0;
    ck_assert_msg(rc == -1, "%s: opened", what);
    ck_assert_ptr_null(s.fmt);
    ck_assert_msg(strncmp(err, "pytorch_model.bin: ", 19) == 0, "%s: %s", what, err);
    ck_assert_msg(strstr(err, why), "%s: '%s' does not say '%s'", what, err, why);
    ck_assert_msg(g_peak <= (1u << 20), "%s: an allocation of %zu bytes", what, g_peak);
}

START_TEST(test_refused)
{
    const refuse_case *r = &k_refuse[_i];
    char dir[64], bin[600];
    snprintf(bin, sizeof bin, "%s/refuse/%s", TORCH, r->file);
    make_dir(dir, sizeof dir, "fixtures/marian_tied", bin, 0);
    expect_refused(dir, r->file, r->why);
    remove_dir(dir);
}
END_TEST

/* The model load says it too, naming the file. */
START_TEST(test_refused_load)
{
    char dir[64], err[512];
    make_dir(dir, sizeof dir, "fixtures/marian_tied", TORCH "/refuse/os_system.bin", 0);
    td_model *m = NULL;
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_int_eq(td_model_load(&m, dir, &lo, err, sizeof err), -1);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, "pytorch_model.bin") && strstr(err, "posix.system"), "%s", err);
    remove_dir(dir);
}
END_TEST

/* Copies the first n bytes of from (n < 0: the whole file) into
 * dir/pytorch_model.bin, with the byte off after the first occurrence of
 * the 4 bytes sig (when sig is not NULL) set to value. */
static void write_cut(const char *from, const char *dir, long n, const char *sig, int off,
                      int value)
{
    FILE *f = fopen(from, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size);
    ck_assert(buf && fread(buf, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    if (sig) {
        long at = 0;
        while (at + 4 <= size && memcmp(buf + at, sig, 4) != 0)
            at++;
        ck_assert_int_lt(at + off, size);
        buf[at + off] = (unsigned char)value;
    }
    char to[700];
    snprintf(to, sizeof to, "%s/pytorch_model.bin", dir);
    f = fopen(to, "wb");
    ck_assert_ptr_nonnull(f);
    size_t len = n < 0 ? (size_t)size : (size_t)n;
    ck_assert(fwrite(buf, 1, len, f) == len);
    fclose(f);
    free(buf);
}

START_TEST(test_truncated_and_damaged)
{
    static const struct {
        const char *bin;
        long cut;
        const char *sig;
        int off, value;
        const char *why;
    } k[] = {
        {"marian_tied_f16.zip.bin", 40000, NULL, 0, 0, "without an end of central directory"},
        {"marian_tied_f16.zip.bin", 3, NULL, 0, 0, "neither torch.save's zip archive"},
        {"marian_tied_f16.zip.bin", 0, NULL, 0, 0, "neither torch.save's zip archive"},
        {"marian_tied_f16.legacy.bin", 60000, NULL, 0, 0, "do not follow"},
        {"marian_tied_f16.legacy.bin", 200, NULL, 0, 0, "pickle 4 at byte 58: GLOBAL's module is "
                                                      "not a line of at most 255 bytes (truncated)"},
        /* the ZIP64 end record's directory offset, its top byte */
        {"marian_tied_bf16.zip64.bin", -1, "PK\6\6", 55, 0x40, "zip central directory"},
        /* the first entry deflated */
        {"marian_tied_f16.zip.bin", -1, "PK\1\2", 10, 8, "compressed or encrypted (method 8)"},
        /* its local header elsewhere */
        {"marian_tied_f16.zip.bin", -1, "PK\1\2", 42, 1, "no local header at 1"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char dir[64], from[600];
        snprintf(from, sizeof from, "%s/%s", TORCH, k[i].bin);
        make_dir(dir, sizeof dir, "fixtures/marian_tied", NULL, 0);
        write_cut(from, dir, k[i].cut, k[i].sig, k[i].off, k[i].value);
        expect_refused(dir, k[i].bin, k[i].why);
        remove_dir(dir);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("torch");
    TCase *tc = tcase_create("torch");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_table_and_probe);
    tcase_add_test(tc, test_prefer_safetensors);
    tcase_add_loop_test(tc, test_same_tensors, 0, N_CASES);
    tcase_add_loop_test(tc, test_same_translations, 0, N_CASES);
    tcase_add_test(tc, test_views);
    tcase_add_loop_test(tc, test_refused, 0, N_REFUSE);
    tcase_add_test(tc, test_refused_load);
    tcase_add_test(tc, test_truncated_and_damaged);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
