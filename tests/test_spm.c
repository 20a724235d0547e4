/*
 * test_spm.c - tokenizer/spm.h against the reference library (google/sentencepiece,
 * the Python package) and against corrupt input.
 *
 * Goldens: tests/data/spm/, written by tools/make_spm_fixtures.py (see its
 * header for the format). For every model and every line of lines.jsonl the
 * ids must be identical, the normalized text identical where the golden has
 * "norm", and decode(ids) identical to "dec" (absent "dec": the line itself).
 * The same for the raw byte strings of bytes.jsonl (malformed UTF-8) and for
 * the arbitrary id sequences of <name>.decode_golden.jsonl. Missing golden
 * files are a failure, never a skip.
 *
 * Proto reader: hand-built ModelProtos broken one way each (truncated varint,
 * length past end, wrong wire type, ...) must be rejected with a message
 * naming the field; unknown fields of every wire type must be skipped.
 */
#include <check.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm.h"

static const char *const kModels[] = {"unigram_nfkc", "unigram_bytefb", "bpe", "unigram_identity"};
enum { NMODELS = sizeof kModels / sizeof kModels[0] };

static void data_path(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/spm/%s", TD_TEST_DATA, file);
}

static spm_model *load_model(const char *name)
{
    char path[512], err[512] = "";
    char file[128];
    snprintf(file, sizeof file, "%s.model", name);
    data_path(path, sizeof path, file);
    spm_model *m = NULL;
    int rc = spm_load(&m, path, err, sizeof err);
    ck_assert_msg(rc == 0, "cannot load %s: %s", path, err);
    return m;
}

/* Reads a .jsonl file into a JSON array (one element per line); fails the
 * test when the file is missing or a line does not parse. */
static json_t *load_jsonl(const char *file)
{
    char path[512];
    data_path(path, sizeof path, file);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "missing golden file %s", path);
    json_t *arr = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t r;
    int no = 0;
    while ((r = getline(&line, &cap, f)) > 0) {
        no++;
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)r, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        ck_assert_msg(j != NULL, "%s:%d: %s", path, no, je.text);
        json_array_append_new(arr, j);
    }
    free(line);
    fclose(f);
    return arr;
}

/* A JSON value as bytes: a string, or a list of byte values. Returns a
 * malloc'd buffer. */
static char *json_bytes(const json_t *j, size_t *n)
{
    if (json_is_string(j)) {
        *n = json_string_length(j);
        char *b = malloc(*n + 1);
        ck_assert_ptr_nonnull(b);
        memcpy(b, json_string_value(j), *n);
        b[*n] = '\0';
        return b;
    }
    ck_assert(json_is_array(j));
    *n = json_array_size(j);
    char *b = malloc(*n + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < *n; i++)
        b[i] = (char)json_integer_value(json_array_get(j, i));
    b[*n] = '\0';
    return b;
}

typedef struct tally {
    int lines, bad_ids, bad_norm, bad_dec, norm_checked, dec_checked;
    char first[768];
} tally;

static void note(tally *t, const char *what, const char *model, const char *file, size_t line)
{
    if (!t->first[0])
        snprintf(t->first, sizeof t->first, "%s: %s line %zu: %s differs", model, file, line + 1,
                 what);
}

/* Checks one input against its golden row {"ids", "norm"?, "dec"?}. */
static void check_row(const spm_model *m, const char *model, const char *file, size_t line,
                      const char *text, size_t len, const json_t *row, tally *t)
{
    t->lines++;
    int32_t *ids = NULL;
    int n = 0;
    ck_assert_int_eq(spm_encode(m, text, len, &ids, &n), 0);
    const json_t *want = json_object_get(row, "ids");
    ck_assert_ptr_nonnull(want);
    bool same = (size_t)n == json_array_size(want);
    for (int i = 0; same && i < n; i++)
        same = ids[i] == json_integer_value(json_array_get(want, (size_t)i));
    if (!same) {
        t->bad_ids++;
        note(t, "ids", model, file, line);
    }
    const json_t *norm = json_object_get(row, "norm");
    if (norm) {
        t->norm_checked++;
        char *got;
        size_t gl, wl;
        ck_assert_int_eq(spm_normalize(m, text, len, &got, &gl), 0);
        char *w = json_bytes(norm, &wl);
        if (gl != wl || memcmp(got, w, gl) != 0) {
            t->bad_norm++;
            note(t, "normalized", model, file, line);
        }
        free(w);
        free(got);
    }
    /* decode the golden ids (so a decode check does not hinge on encode) */
    size_t nw = json_array_size(want);
    int32_t *wids = malloc((nw + 1) * sizeof *wids);
    ck_assert_ptr_nonnull(wids);
    for (size_t i = 0; i < nw; i++)
        wids[i] = (int32_t)json_integer_value(json_array_get(want, i));
    char *dec;
    size_t dl;
    ck_assert_int_eq(spm_decode(m, wids, (int)nw, &dec, &dl), 0);
    ck_assert_uint_eq(strlen(dec) <= dl, 1);
    const json_t *jd = json_object_get(row, "dec");
    size_t el;
    char *exp = jd ? json_bytes(jd, &el) : NULL;
    const char *e = exp ? exp : text;
    if (!exp)
        el = len;
    t->dec_checked++;
    if (dl != el || memcmp(dec, e, dl) != 0) {
        t->bad_dec++;
        note(t, "decoded", model, file, line);
    }
    free(exp);
    free(dec);
    free(wids);
    free(ids);
}

static void report(const char *model, const char *what, const tally *t)
{
    fprintf(stderr, "spm golden %-17s %-7s lines %5d  ids bad %d  norm bad %d/%d  dec bad %d/%d\n",
            model, what, t->lines, t->bad_ids, t->bad_norm, t->norm_checked, t->bad_dec,
            t->dec_checked);
    ck_assert_msg(t->bad_ids == 0 && t->bad_norm == 0 && t->bad_dec == 0,
                  "%d/%d/%d mismatches (ids/norm/dec); first: %s", t->bad_ids, t->bad_norm,
                  t->bad_dec, t->first);
}

START_TEST(test_golden_lines)
{
    const char *name = kModels[_i];
    spm_model *m = load_model(name);
    json_t *lines = load_jsonl("lines.jsonl");
    char gfile[128];
    snprintf(gfile, sizeof gfile, "%s.golden.jsonl", name);
    json_t *gold = load_jsonl(gfile);
    ck_assert_uint_eq(json_array_size(lines), json_array_size(gold));
    ck_assert_uint_ge(json_array_size(lines), 1000);
    tally t = {0};
    for (size_t i = 0; i < json_array_size(lines); i++) {
        const json_t *s = json_array_get(lines, i);
        ck_assert(json_is_string(s));
        check_row(m, name, gfile, i, json_string_value(s), json_string_length(s),
                  json_array_get(gold, i), &t);
    }
    ck_assert_int_gt(t.norm_checked, 0);
    report(name, "lines", &t);
    json_decref(lines);
    json_decref(gold);
    spm_free(m);
}
END_TEST

START_TEST(test_golden_bytes)
{
    const char *name = kModels[_i];
    spm_model *m = load_model(name);
    json_t *inputs = load_jsonl("bytes.jsonl");
    char gfile[128];
    snprintf(gfile, sizeof gfile, "%s.bytes_golden.jsonl", name);
    json_t *gold = load_jsonl(gfile);
    ck_assert_uint_eq(json_array_size(inputs), json_array_size(gold));
    ck_assert_uint_gt(json_array_size(inputs), 0);
    tally t = {0};
    for (size_t i = 0; i < json_array_size(inputs); i++) {
        size_t n;
        char *b = json_bytes(json_array_get(inputs, i), &n);
        check_row(m, name, gfile, i, b, n, json_array_get(gold, i), &t);
        free(b);
    }
    report(name, "bytes", &t);
    json_decref(inputs);
    json_decref(gold);
    spm_free(m);
}
END_TEST

START_TEST(test_golden_decode)
{
    const char *name = kModels[_i];
    spm_model *m = load_model(name);
    char gfile[128];
    snprintf(gfile, sizeof gfile, "%s.decode_golden.jsonl", name);
    json_t *gold = load_jsonl(gfile);
    ck_assert_uint_gt(json_array_size(gold), 0);
    tally t = {0};
    for (size_t i = 0; i < json_array_size(gold); i++) {
        const json_t *row = json_array_get(gold, i);
        const json_t *ids = json_object_get(row, "ids");
        size_t n = json_array_size(ids);
        int32_t *v = malloc((n + 1) * sizeof *v);
        ck_assert_ptr_nonnull(v);
        for (size_t k = 0; k < n; k++)
            v[k] = (int32_t)json_integer_value(json_array_get(ids, k));
        char *dec;
        size_t dl, el;
        ck_assert_int_eq(spm_decode(m, v, (int)n, &dec, &dl), 0);
        char *e = json_bytes(json_object_get(row, "dec"), &el);
        t.lines++;
        t.dec_checked++;
        if (dl != el || memcmp(dec, e, dl) != 0) {
            t.bad_dec++;
            note(&t, "decoded", name, gfile, i);
        }
        free(e);
        free(dec);
        free(v);
    }
    report(name, "decode", &t);
    json_decref(gold);
    spm_free(m);
}
END_TEST

/* ---- 1 MB lines: against the library's fingerprints ---------------------- */

/* FNV-1a 64 of bytes, as tools/make_spm_megabyte_golden.py writes it. */
static uint64_t fnv1a64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static void expect_fnv(const char *what, const void *data, size_t n, json_t *gold,
                       const char *bytes_key, const char *fnv_key)
{
    ck_assert_msg((json_int_t)n == json_integer_value(json_object_get(gold, bytes_key)),
                  "%s: %zu bytes, the library's %lld", what, n,
                  (long long)json_integer_value(json_object_get(gold, bytes_key)));
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a64(data, n));
    ck_assert_msg(!strcmp(hex, json_string_value(json_object_get(gold, fnv_key))),
                  "%s: fingerprint %s, the library's %s", what, hex,
                  json_string_value(json_object_get(gold, fnv_key)));
}

/* Builds line k of tools/make_spm_megabyte_golden.py into text (size + 1
 * bytes); returns its length. */
static size_t megabyte_line(char *text, size_t size, int k)
{
    static const char *const chunk[2][5] = {
        {"translation", "\xc3\xa9t\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "42",
         "\xd0\xbc\xd0\xb8\xd1\x80"},
        {"translation", "\xf0\x9f\x98\x80", "\xe1\x9a\xa0\xe1\x9b\x87\xe1\x9a\xbb", "42",
         "\xe2\x98\x83x"},
    };
    int spaced = k > 0;
    size_t n = 0;
    for (int i = 0;; i++) {
        const char *c = chunk[k == 2][i % 5];
        size_t cl = strlen(c);
        if (n + cl + 1 > size)
            break;
        memcpy(text + n, c, cl);
        n += cl;
        if (spaced)
            text[n++] = ' ';
    }
    if (spaced)
        n--; /* no trailing space */
    text[n] = '\0';
    return n;
}

/* Three 1 MB lines (one "word"; words and spaces; words the models lack)
 * per model: normalized text, ids and decoded text identical to the
 * library's, by length and fingerprint (tests/data/spm/megabyte_golden.json). */
START_TEST(test_megabyte_line)
{
    const char *name = kModels[_i];
    spm_model *m = load_model(name);
    char path[1024];
    data_path(path, sizeof path, "megabyte_golden.json");
    json_error_t je;
    json_t *gold = json_load_file(path, 0, &je);
    ck_assert_msg(gold != NULL, "%s: %s", path, je.text);
    json_t *rows = json_object_get(json_object_get(gold, "models"), name);
    ck_assert_int_eq(json_array_size(rows), 3);
    const size_t size = (size_t)json_integer_value(json_object_get(gold, "size"));
    ck_assert_uint_eq(size, (size_t)1 << 20);
    char *text = malloc(size + 1);
    ck_assert_ptr_nonnull(text);
    for (int k = 0; k < 3; k++) {
        json_t *g = json_array_get(rows, (size_t)k);
        size_t n = megabyte_line(text, size, k);
        ck_assert_int_eq((json_int_t)n, json_integer_value(json_object_get(g, "line_bytes")));
        char what[128];
        int32_t *ids;
        int nids;
        ck_assert_int_eq(spm_encode(m, text, n, &ids, &nids), 0);
        snprintf(what, sizeof what, "%s line %d ids", name, k);
        ck_assert_int_eq(nids, json_integer_value(json_object_get(g, "n_ids")));
        unsigned char *le = malloc((size_t)nids * 4 + 1);
        ck_assert_ptr_nonnull(le);
        int n_unk = 0;
        for (int i = 0; i < nids; i++) {
            uint32_t v = (uint32_t)ids[i];
            for (int b = 0; b < 4; b++)
                le[(size_t)i * 4 + (size_t)b] = (unsigned char)(v >> (8 * b));
            n_unk += ids[i] == spm_unk_id(m);
        }
        expect_fnv(what, le, (size_t)nids * 4, g, "n_ids_bytes", "ids_fnv");
        free(le);
        ck_assert_int_eq(n_unk, json_integer_value(json_object_get(g, "n_unk")));
        char *norm;
        size_t nl;
        ck_assert_int_eq(spm_normalize(m, text, n, &norm, &nl), 0);
        snprintf(what, sizeof what, "%s line %d normalized", name, k);
        expect_fnv(what, norm, nl, g, "norm_bytes", "norm_fnv");
        char *dec;
        size_t dl;
        ck_assert_int_eq(spm_decode(m, ids, nids, &dec, &dl), 0);
        snprintf(what, sizeof what, "%s line %d decoded", name, k);
        expect_fnv(what, dec, dl, g, "dec_bytes", "dec_fnv");
        free(dec);
        free(norm);
        free(ids);
    }
    free(text);
    json_decref(gold);
    spm_free(m);
}
END_TEST

/* ---- hand-built ModelProtos ---------------------------------------------- */

typedef struct pb {
    unsigned char b[4096];
    size_t n;
} pb;

static void pb_byte(pb *p, unsigned v)
{
    ck_assert_uint_lt(p->n, sizeof p->b);
    p->b[p->n++] = (unsigned char)v;
}

static void pb_varint(pb *p, uint64_t v)
{
    while (v >= 0x80) {
        pb_byte(p, (unsigned)(v & 0x7f) | 0x80);
        v >>= 7;
    }
    pb_byte(p, (unsigned)v);
}

static void pb_tag(pb *p, unsigned field, unsigned wt) { pb_varint(p, (uint64_t)field << 3 | wt); }

static void pb_bytes(pb *p, unsigned field, const void *s, size_t n)
{
    pb_tag(p, field, 2);
    pb_varint(p, n);
    ck_assert_uint_le(p->n + n, sizeof p->b);
    memcpy(p->b + p->n, s, n);
    p->n += n;
}

static void pb_sub(pb *p, unsigned field, const pb *sub) { pb_bytes(p, field, sub->b, sub->n); }

static void pb_float(pb *p, unsigned field, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    pb_tag(p, field, 5);
    for (int i = 0; i < 4; i++)
        pb_byte(p, (u >> (8 * i)) & 0xff);
}

static void piece(pb *p, const char *s, float score, int type)
{
    pb sp = {.n = 0};
    pb_bytes(&sp, 1, s, strlen(s));
    pb_float(&sp, 2, score);
    if (type != SPM_NORMAL) {
        pb_tag(&sp, 3, 0);
        pb_varint(&sp, (uint64_t)type);
    }
    pb_sub(p, 1, &sp);
}

/* A tiny unigram model: <unk> <s> </s> ▁ a b ▁ab ab, no charsmap. */
static void tiny_model(pb *p)
{
    p->n = 0;
    piece(p, "<unk>", 0, SPM_UNKNOWN);
    piece(p, "<s>", 0, SPM_CONTROL);
    piece(p, "</s>", 0, SPM_CONTROL);
    piece(p, "\xe2\x96\x81", -1, SPM_NORMAL);
    piece(p, "a", -2, SPM_NORMAL);
    piece(p, "b", -2, SPM_NORMAL);
    piece(p, "\xe2\x96\x81" "ab", -1.5f, SPM_NORMAL);
    piece(p, "ab", -1, SPM_NORMAL);
    pb ts = {.n = 0};
    pb_tag(&ts, 3, 0);
    pb_varint(&ts, SPM_UNIGRAM);
    pb_sub(p, 2, &ts);
}

static void expect_load_fail(const pb *p, const char *want)
{
    spm_model *m = (spm_model *)1;
    char err[512] = "";
    ck_assert_int_eq(spm_load_mem(&m, p->b, p->n, "tiny", err, sizeof err), -1);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);
    ck_assert_msg(strncmp(err, "tiny", 4) == 0, "error \"%s\" lacks the name", err);
}

static void expect_ids(const spm_model *m, const char *text, const int32_t *want, int nwant)
{
    int32_t *ids;
    int n;
    ck_assert_int_eq(spm_encode(m, text, strlen(text), &ids, &n), 0);
    ck_assert_int_eq(n, nwant);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], want[i]);
    free(ids);
}

START_TEST(test_proto_tiny_model)
{
    pb p;
    tiny_model(&p);
    spm_model *m = NULL;
    char err[256];
    ck_assert_msg(spm_load_mem(&m, p.b, p.n, "tiny", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(spm_size(m), 8);
    ck_assert_int_eq(spm_type(m), SPM_UNIGRAM);
    ck_assert_int_eq(spm_unk_id(m), 0);
    ck_assert_int_eq(spm_bos_id(m), 1);
    ck_assert_int_eq(spm_eos_id(m), 2);
    ck_assert_int_eq(spm_pad_id(m), -1);
    ck_assert_str_eq(spm_id_to_piece(m, 6), "\xe2\x96\x81" "ab");
    ck_assert_ptr_null(spm_id_to_piece(m, 8));
    ck_assert_int_eq(spm_piece_kind(m, 1), SPM_CONTROL);
    ck_assert(spm_piece_score(m, 6) == -1.5f);
    ck_assert_int_eq(spm_piece_to_id(m, "ab", 2), 7);
    ck_assert_int_eq(spm_piece_to_id(m, "zz", 2), 0);
    /* "▁ab" (-1.5) beats "▁"+"ab" (-2); unknown c, d merge into one <unk> */
    expect_ids(m, "ab", (const int32_t[]){6}, 1);
    expect_ids(m, "  ab   ab ", (const int32_t[]){6, 6}, 2);
    expect_ids(m, "ab cd", (const int32_t[]){6, 3, 0}, 3);
    expect_ids(m, "", NULL, 0);
    expect_ids(m, "   ", NULL, 0);
    int32_t ids[] = {1, 6, 0, 3, 4, 2, 99, -5};
    char *dec;
    size_t dl;
    ck_assert_int_eq(spm_decode(m, ids, 8, &dec, &dl), 0);
    ck_assert_str_eq(dec, "ab \xe2\x81\x87  a");
    free(dec);
    spm_free(m);
    spm_free(NULL);
}
END_TEST

START_TEST(test_proto_unknown_fields_skipped)
{
    pb p;
    tiny_model(&p);
    /* every wire type under an unknown field number, top level and nested */
    pb_tag(&p, 100, 0);
    pb_varint(&p, UINT64_MAX);
    pb_tag(&p, 101, 1);
    for (int i = 0; i < 8; i++)
        pb_byte(&p, 0xaa);
    pb_bytes(&p, 102, "xyz", 3);
    pb_tag(&p, 103, 5);
    for (int i = 0; i < 4; i++)
        pb_byte(&p, 0xbb);
    pb_tag(&p, 104, 3); /* group with a nested group inside */
    pb_tag(&p, 1, 0);
    pb_varint(&p, 7);
    pb_tag(&p, 2, 3);
    pb_tag(&p, 2, 4);
    pb_tag(&p, 104, 4);
    pb ns = {.n = 0};
    pb_tag(&ns, 77, 1);
    for (int i = 0; i < 8; i++)
        pb_byte(&ns, 0);
    pb_tag(&ns, 3, 0); /* add_dummy_prefix = false */
    pb_varint(&ns, 0);
    pb_sub(&p, 3, &ns);
    pb_bytes(&p, 4, "\x0a\x00", 2); /* self_test_data: ignored */
    spm_model *m = NULL;
    char err[256];
    ck_assert_msg(spm_load_mem(&m, p.b, p.n, "tiny", err, sizeof err) == 0, "%s", err);
    /* no dummy prefix now: "ab" is piece 7 */
    expect_ids(m, "ab", (const int32_t[]){7}, 1);
    spm_free(m);
}
END_TEST

START_TEST(test_proto_corrupt)
{
    pb p;
    /* truncated varint: a tag whose continuation bit runs off the end */
    tiny_model(&p);
    pb_byte(&p, 0x80);
    expect_load_fail(&p, "truncated varint");
    /* truncated varint inside a field value */
    tiny_model(&p);
    pb ts = {.n = 0};
    pb_tag(&ts, 4, 0);
    pb_byte(&ts, 0xff);
    pb_sub(&p, 2, &ts);
    expect_load_fail(&p, "trainer_spec.vocab_size: truncated varint");
    /* overlong varint: 11 bytes */
    tiny_model(&p);
    pb_tag(&p, 100, 0);
    for (int i = 0; i < 10; i++)
        pb_byte(&p, 0xff);
    pb_byte(&p, 0x01);
    expect_load_fail(&p, "overlong varint");
    /* length past the end */
    tiny_model(&p);
    pb_tag(&p, 1, 2);
    pb_varint(&p, 50);
    pb_byte(&p, 0x0a);
    expect_load_fail(&p, "pieces: length past end of data");
    /* length past the end of the enclosing message (nested) */
    tiny_model(&p);
    pb sp = {.n = 0};
    pb_tag(&sp, 1, 2);
    pb_varint(&sp, 9);
    pb_byte(&sp, 'x');
    pb_sub(&p, 1, &sp);
    expect_load_fail(&p, "pieces.piece: length past end of data");
    /* wrong wire type: score as a varint */
    tiny_model(&p);
    sp.n = 0;
    pb_bytes(&sp, 1, "zz", 2);
    pb_tag(&sp, 2, 0);
    pb_varint(&sp, 1);
    pb_sub(&p, 1, &sp);
    expect_load_fail(&p, "pieces.score: wrong wire type");
    /* wrong wire type: trainer_spec as a varint */
    tiny_model(&p);
    pb_tag(&p, 2, 0);
    pb_varint(&p, 1);
    expect_load_fail(&p, "trainer_spec: wrong wire type");
    /* truncated fixed32 */
    tiny_model(&p);
    sp.n = 0;
    pb_bytes(&sp, 1, "zz", 2);
    pb_tag(&sp, 2, 5);
    pb_byte(&sp, 0);
    pb_sub(&p, 1, &sp);
    expect_load_fail(&p, "pieces.score: truncated fixed32");
    /* invalid wire types 6, 7; unterminated group; stray end-group */
    tiny_model(&p);
    pb_tag(&p, 100, 7);
    expect_load_fail(&p, "invalid wire type");
    tiny_model(&p);
    pb_tag(&p, 100, 3);
    pb_tag(&p, 1, 0);
    pb_varint(&p, 1);
    expect_load_fail(&p, "unterminated group");
    tiny_model(&p);
    pb_tag(&p, 100, 4);
    expect_load_fail(&p, "unexpected end-group");
    /* field number 0 */
    tiny_model(&p);
    pb_tag(&p, 0, 0);
    pb_varint(&p, 1);
    expect_load_fail(&p, "invalid field number");
}
END_TEST

START_TEST(test_proto_semantic_errors)
{
    pb p;
    /* duplicate piece */
    tiny_model(&p);
    piece(&p, "ab", -3, SPM_NORMAL);
    expect_load_fail(&p, "already defined");
    /* empty piece */
    tiny_model(&p);
    piece(&p, "", -3, SPM_NORMAL);
    expect_load_fail(&p, "must not be empty");
    /* no unk */
    p.n = 0;
    piece(&p, "a", -1, SPM_NORMAL);
    expect_load_fail(&p, "unk is not defined");
    /* two unks */
    tiny_model(&p);
    piece(&p, "<unk2>", 0, SPM_UNKNOWN);
    expect_load_fail(&p, "unk is already defined");
    /* byte piece without byte_fallback */
    tiny_model(&p);
    piece(&p, "<0x41>", 0, SPM_BYTE);
    expect_load_fail(&p, "byte_fallback");
    /* byte_fallback without the 256 byte pieces */
    tiny_model(&p);
    pb ts = {.n = 0};
    pb_tag(&ts, 35, 0);
    pb_varint(&ts, 1);
    pb_sub(&p, 2, &ts);
    expect_load_fail(&p, "256 byte pieces");
    /* precompiled charsmap whose trie size exceeds the blob */
    tiny_model(&p);
    pb ns = {.n = 0};
    pb_bytes(&ns, 2, "\xff\x00\x00\x00\x01\x02\x03\x04", 8);
    pb_sub(&p, 3, &ns);
    expect_load_fail(&p, "precompiled_charsmap");
    /* empty input is not a model */
    p.n = 0;
    expect_load_fail(&p, "unk is not defined");
    /* a missing file */
    spm_model *m = (spm_model *)1;
    char err[256];
    ck_assert_int_eq(spm_load(&m, "/nonexistent/x.model", err, sizeof err), -1);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.model"));
}
END_TEST

/* Every prefix (and a bit-flipped copy) of a real model either loads or is
 * rejected with a message; nothing crashes (ASan/UBSan builds check). */
START_TEST(test_proto_truncations)
{
    char path[512];
    data_path(path, sizeof path, "unigram_bytefb.model");
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "missing %s", path);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(n, 100);
    int loaded = 0, rejected = 0;
    for (size_t cut = 0; cut < n; cut += 1 + cut / 50) {
        spm_model *m = NULL;
        char err[512] = "";
        if (spm_load_mem(&m, buf, cut, "cut", err, sizeof err) == 0) {
            loaded++;
            int32_t *ids;
            int k;
            ck_assert_int_eq(spm_encode(m, "Hello w\xc3\xb6rld \xff!", 15, &ids, &k), 0);
            free(ids);
            spm_free(m);
        } else {
            rejected++;
            ck_assert_msg(err[0] != '\0', "no message at cut %zu", cut);
        }
    }
    ck_assert_int_gt(rejected, 0);
    unsigned seed = 12345;
    for (int trial = 0; trial < 300; trial++) {
        static unsigned char cp[1 << 20];
        memcpy(cp, buf, n);
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            cp[(seed >> 8) % n] ^= (unsigned char)(1u << ((seed >> 4) & 7));
        }
        spm_model *m = NULL;
        char err[512] = "";
        if (spm_load_mem(&m, cp, n, "flip", err, sizeof err) == 0) {
            int32_t *ids;
            int k;
            ck_assert_int_eq(spm_encode(m, "Hello w\xc3\xb6rld \xff!", 15, &ids, &k), 0);
            char *dec;
            size_t dl;
            ck_assert_int_eq(spm_decode(m, ids, k, &dec, &dl), 0);
            free(dec);
            free(ids);
            spm_free(m);
        } else {
            ck_assert(err[0] != '\0');
        }
    }
    (void)loaded;
}
END_TEST

static Suite *spm_suite(void)
{
    Suite *s = suite_create("spm");
    TCase *tc = tcase_create("proto");
    tcase_add_test(tc, test_proto_tiny_model);
    tcase_add_test(tc, test_proto_unknown_fields_skipped);
    tcase_add_test(tc, test_proto_corrupt);
    tcase_add_test(tc, test_proto_semantic_errors);
    tcase_add_test(tc, test_proto_truncations);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("golden");
    tcase_set_timeout(tg, 600);
    tcase_add_loop_test(tg, test_golden_lines, 0, NMODELS);
    tcase_add_loop_test(tg, test_golden_bytes, 0, NMODELS);
    tcase_add_loop_test(tg, test_golden_decode, 0, NMODELS);
    tcase_add_loop_test(tg, test_megabyte_line, 0, NMODELS);
    suite_add_tcase(s, tg);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(spm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
