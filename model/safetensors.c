/*
 * safetensors.c - validating safetensors reader (see
 * safetensors.h for the format and every rule enforced).
 *
 * The reader trusts nothing in the file: sizes are checked before they are
 * used, integer products are overflow-checked, and the tensors must tile the
 * data buffer exactly, as the reference implementation
 * (huggingface/safetensors, `Metadata::validate`) requires.
 */
#include "safetensors.h"
#include "wfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

/* The file format is little-endian and we read header length, F16 and BF16
 * values by reinterpreting bytes: only little-endian hosts are supported. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors.c assumes a little-endian host");
#endif
_Static_assert(sizeof(float) == 4, "float must be IEEE-754 binary32");

/* Where error messages go, and the file name they start with. */
typedef struct st_errctx {
    char *err;
    size_t errlen;
    const char *base; /* basename of the path */
} st_errctx;

/* Writes "<base>: tensor '<tensor>': <fmt...>" (or "<base>: header: ..."
 * when tensor is NULL) into ctx->err, truncating to errlen. Accepts a NULL
 * or zero-length err buffer. */
static void st_fail(const st_errctx *ctx, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void st_fail(const st_errctx *ctx, const char *tensor, const char *fmt, ...)
{
    if (ctx->err == NULL || ctx->errlen == 0)
        return;
    int n;
    if (tensor != NULL)
        n = snprintf(ctx->err, ctx->errlen, "%s: tensor '%s': ", ctx->base, tensor);
    else
        n = snprintf(ctx->err, ctx->errlen, "%s: header: ", ctx->base);
    if (n < 0 || (size_t)n >= ctx->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err + n, ctx->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static const char *st_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

size_t td_dtype_size(td_dtype dt)
{
    switch (dt) {
    case TD_F32: return 4;
    case TD_F16: return 2;
    case TD_BF16: return 2;
    case TD_I8: return 1;
    }
    return 0;
}

const char *td_dtype_name(td_dtype dt)
{
    switch (dt) {
    case TD_F32: return "F32";
    case TD_F16: return "F16";
    case TD_BF16: return "BF16";
    case TD_I8: return "I8";
    }
    return "?";
}

/* Maps a safetensors dtype string to td_dtype; -1 for anything else (the
 * format has more dtypes, e.g. I64, F64, but the engine only reads floats of
 * these three widths). */
static int st_parse_dtype(const char *s, td_dtype *out)
{
    if (strcmp(s, "F32") == 0) { *out = TD_F32; return 0; }
    if (strcmp(s, "F16") == 0) { *out = TD_F16; return 0; }
    if (strcmp(s, "BF16") == 0) { *out = TD_BF16; return 0; }
    return -1;
}

/* A tensor's offsets, kept beside td_st_tensor during validation. */
typedef struct st_span {
    uint64_t begin, end;
    const char *name; /* the td_st_tensor's name */
} st_span;

static int st_span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int st_tensor_cmp(const void *a, const void *b)
{
    const td_st_tensor *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Validates __metadata__: an object whose values are all strings. */
static int st_check_metadata(const st_errctx *ctx, json_t *meta)
{
    if (!json_is_object(meta)) {
        st_fail(ctx, NULL, "__metadata__ is not an object");
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v)) {
            st_fail(ctx, NULL, "__metadata__ value for key '%s' is not a string", k);
            return -1;
        }
    }
    return 0;
}

/* Parses and validates one tensor entry: exactly dtype/shape/data_offsets,
 * a supported dtype, a non-negative integer shape of rank <= TD_ST_MAX_RANK
 * whose element count and byte size do not overflow, and data_offsets
 * [begin, end] with begin <= end <= data_size and end - begin equal to the
 * byte size. On success fills t (except name and data) and span's offsets. */
static int st_parse_tensor(const st_errctx *ctx, const char *name, json_t *entry,
                           uint64_t data_size, td_st_tensor *t, st_span *span)
{
    if (!json_is_object(entry)) {
        st_fail(ctx, name, "entry is not an object");
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(entry, k, v) {
        if (strcmp(k, "dtype") != 0 && strcmp(k, "shape") != 0 &&
            strcmp(k, "data_offsets") != 0) {
            st_fail(ctx, name, "unexpected key '%s' (allowed: dtype, shape, data_offsets)", k);
            return -1;
        }
    }

    json_t *jd = json_object_get(entry, "dtype");
    json_t *js = json_object_get(entry, "shape");
    json_t *jo = json_object_get(entry, "data_offsets");
    if (jd == NULL) { st_fail(ctx, name, "missing dtype"); return -1; }
    if (js == NULL) { st_fail(ctx, name, "missing shape"); return -1; }
    if (jo == NULL) { st_fail(ctx, name, "missing data_offsets"); return -1; }

    if (!json_is_string(jd)) {
        st_fail(ctx, name, "dtype is not a string");
        return -1;
    }
    if (st_parse_dtype(json_string_value(jd), &t->dtype) != 0) {
        st_fail(ctx, name, "unsupported dtype '%s' (supported: F32, F16, BF16)",
                json_string_value(jd));
        return -1;
    }

    if (!json_is_array(js)) {
        st_fail(ctx, name, "shape is not an array");
        return -1;
    }
    size_t rank = json_array_size(js);
    if (rank > TD_ST_MAX_RANK) {
        st_fail(ctx, name, "shape rank %zu exceeds the maximum %d", rank, TD_ST_MAX_RANK);
        return -1;
    }
    int64_t n = 1; /* rank 0 is a scalar */
    for (size_t i = 0; i < rank; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d)) {
            st_fail(ctx, name, "shape[%zu] is not an integer", i);
            return -1;
        }
        json_int_t dim = json_integer_value(d);
        if (dim < 0) {
            st_fail(ctx, name, "shape[%zu] is negative (%lld)", i, (long long)dim);
            return -1;
        }
        if (dim != 0 && n > INT64_MAX / (int64_t)dim) {
            st_fail(ctx, name, "element count overflows at shape[%zu] (%lld)", i,
                    (long long)dim);
            return -1;
        }
        n *= (int64_t)dim;
        t->shape[i] = (int64_t)dim;
    }
    t->rank = (int)rank;
    t->n_elements = n;
    size_t esize = td_dtype_size(t->dtype);
    if ((uint64_t)n > SIZE_MAX / esize) {
        st_fail(ctx, name, "byte size of %" PRId64 " elements of %s overflows size_t", n,
                td_dtype_name(t->dtype));
        return -1;
    }
    t->n_bytes = (size_t)n * esize;

    if (!json_is_array(jo) || json_array_size(jo) != 2) {
        st_fail(ctx, name, "data_offsets is not an array of 2 integers");
        return -1;
    }
    json_int_t off[2];
    for (size_t i = 0; i < 2; i++) {
        json_t *o = json_array_get(jo, i);
        if (!json_is_integer(o)) {
            st_fail(ctx, name, "data_offsets[%zu] is not an integer", i);
            return -1;
        }
        off[i] = json_integer_value(o);
        if (off[i] < 0) {
            st_fail(ctx, name, "data_offsets[%zu] is negative (%lld)", i, (long long)off[i]);
            return -1;
        }
    }
    uint64_t begin = (uint64_t)off[0], end = (uint64_t)off[1];
    if (begin > end) {
        st_fail(ctx, name, "data_offsets begin %" PRIu64 " is after end %" PRIu64, begin, end);
        return -1;
    }
    if (end - begin != (uint64_t)t->n_bytes) {
        st_fail(ctx, name,
                "data_offsets span %" PRIu64 " bytes but %" PRId64 " elements of %s need %zu",
                end - begin, n, td_dtype_name(t->dtype), t->n_bytes);
        return -1;
    }
    if (end > data_size) {
        st_fail(ctx, name, "data_offsets end %" PRIu64 " is past the data buffer (%" PRIu64
                " bytes)", end, data_size);
        return -1;
    }
    span->begin = begin;
    span->end = end;
    return 0;
}

/* Checks that the spans, sorted by begin, tile [0, data_size) exactly. */
static int st_check_tiling(const st_errctx *ctx, st_span *spans, size_t n, uint64_t data_size)
{
    if (n == 0) {
        if (data_size != 0) {
            st_fail(ctx, NULL, "no tensors but the data buffer has %" PRIu64 " bytes",
                    data_size);
            return -1;
        }
        return 0;
    }
    qsort(spans, n, sizeof spans[0], st_span_cmp);
    if (spans[0].begin != 0) {
        st_fail(ctx, spans[0].name,
                "gap of %" PRIu64 " bytes at the start of the data buffer (first tensor "
                "begins at %" PRIu64 ")", spans[0].begin, spans[0].begin);
        return -1;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t prev = spans[i - 1].end;
        if (spans[i].begin < prev) {
            st_fail(ctx, spans[i].name,
                    "data_offsets [%" PRIu64 ", %" PRIu64 ") overlap tensor '%s' which ends at %"
                    PRIu64, spans[i].begin, spans[i].end, spans[i - 1].name, prev);
            return -1;
        }
        if (spans[i].begin > prev) {
            st_fail(ctx, spans[i].name,
                    "gap of %" PRIu64 " bytes before data_offsets begin %" PRIu64
                    " (previous tensor '%s' ends at %" PRIu64 ")",
                    spans[i].begin - prev, spans[i].begin, spans[i - 1].name, prev);
            return -1;
        }
    }
    if (spans[n - 1].end != data_size) {
        st_fail(ctx, spans[n - 1].name,
                "last tensor ends at %" PRIu64 " but the data buffer has %" PRIu64
                " bytes (%" PRIu64 " trailing bytes)", spans[n - 1].end, data_size,
                data_size - spans[n - 1].end);
        return -1;
    }
    return 0;
}

/* Reads the whole of path into memory (malloc'd). Returns 0 with *buf and
 * *size set (size >= 8), or -1 with a message. The file is read, never
 * mapped: a mapped file that another process truncates (`cp new
 * model.safetensors` during a reload) turns the next read of it into
 * SIGBUS, which kills the daemon. A file that changes while it is read
 * (shorter than its size said, or another size or modification time
 * after the read) fails the load with a message saying so. The
 * descriptor is closed before returning either way. */
static int st_read_file(const st_errctx *ctx, const char *path, void **buf, size_t *size)
{
    char msg[400], *m = NULL;
    size_t n = 0;
    if (td_wfile_read(path, &m, &n, msg, sizeof msg) != 0) {
        st_fail(ctx, NULL, "%s", msg);
        return -1;
    }
    if (n < 8) {
        st_fail(ctx, NULL, "file is %zu bytes, shorter than the 8-byte header length", n);
        free(m);
        return -1;
    }
    *buf = m;
    *size = n;
    return 0;
}

/* Opens and validates; see safetensors.h. All checks run before *st is
 * filled, and every failure path releases what was built so far through
 * td_st_close, leaving *st zeroed. */
int td_st_open(td_st *st, const char *path, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    st_errctx ctx = {err, errlen, st_basename(path)};
    json_t *root = NULL;
    st_span *spans = NULL;

    st->path = strdup(path);
    if (st->path == NULL) {
        st_fail(&ctx, NULL, "out of memory");
        goto fail;
    }
    if (st_read_file(&ctx, path, &st->file, &st->file_size) != 0)
        goto fail;

    const unsigned char *base = st->file;
    uint64_t hlen;
    memcpy(&hlen, base, 8); /* little-endian host: see the static assert */
    if (hlen > TD_ST_MAX_HEADER) {
        st_fail(&ctx, NULL, "header length %" PRIu64 " exceeds the maximum %u", hlen,
                TD_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > st->file_size - 8) {
        st_fail(&ctx, NULL, "header length %" PRIu64 " runs past the end of the file (%zu bytes)",
                hlen, st->file_size);
        goto fail;
    }
    uint64_t data_size = st->file_size - 8 - hlen;
    const unsigned char *data = base + 8 + hlen;

    json_error_t jerr;
    root = json_loadb((const char *)base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        st_fail(&ctx, NULL, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                jerr.text);
        goto fail;
    }
    if (!json_is_object(root)) {
        st_fail(&ctx, NULL, "JSON is not an object");
        goto fail;
    }

    size_t n_keys = json_object_size(root);
    json_t *meta = json_object_get(root, "__metadata__");
    if (meta != NULL && st_check_metadata(&ctx, meta) != 0)
        goto fail;
    size_t n_tensors = n_keys - (meta != NULL ? 1 : 0);
    if (n_tensors > (size_t)INT32_MAX) {
        st_fail(&ctx, NULL, "too many tensors (%zu)", n_tensors);
        goto fail;
    }
    if (n_tensors > 0) {
        st->tensors = calloc(n_tensors, sizeof st->tensors[0]);
        spans = calloc(n_tensors, sizeof spans[0]);
        if (st->tensors == NULL || spans == NULL) {
            st_fail(&ctx, NULL, "out of memory for %zu tensors", n_tensors);
            goto fail;
        }
    }

    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        if (key[0] == '\0') {
            st_fail(&ctx, NULL, "tensor with an empty name");
            goto fail;
        }
        td_st_tensor *t = &st->tensors[st->n_tensors];
        st_span *sp = &spans[st->n_tensors];
        if (st_parse_tensor(&ctx, key, val, data_size, t, sp) != 0)
            goto fail;
        t->name = strdup(key);
        if (t->name == NULL) {
            st_fail(&ctx, key, "out of memory");
            goto fail;
        }
        t->data = data + sp->begin;
        sp->name = t->name;
        st->n_tensors++;
    }

    if (st_check_tiling(&ctx, spans, (size_t)st->n_tensors, data_size) != 0)
        goto fail;
    if (st->n_tensors > 0)
        qsort(st->tensors, (size_t)st->n_tensors, sizeof st->tensors[0], st_tensor_cmp);

    free(spans);
    json_decref(root);
    return 0;

fail:
    free(spans);
    json_decref(root);
    td_st_close(st);
    return -1;
}

void td_st_close(td_st *st)
{
    if (st == NULL)
        return;
    for (int i = 0; i < st->n_tensors; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    free(st->file);
    free(st->path);
    memset(st, 0, sizeof *st);
}

static int st_find_cmp(const void *key, const void *elem)
{
    const td_st_tensor *t = elem;
    return strcmp((const char *)key, t->name);
}

const td_st_tensor *td_st_find(const td_st *st, const char *name)
{
    if (st == NULL || st->n_tensors <= 0 || name == NULL)
        return NULL;
    return bsearch(name, st->tensors, (size_t)st->n_tensors, sizeof st->tensors[0],
                   st_find_cmp);
}

/* IEEE-754 binary16 -> binary32, exact for every input: normals rebias the
 * exponent, subnormals are m * 2^-24 (exact in binary32), inf stays inf and
 * a NaN keeps its sign and payload (quiet bit 9 lands on bit 22). */
static float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f;
        return (h & 0x8000u) ? -v : v;
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127u - 15u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

void td_to_f32(float *dst, const void *src, td_dtype dt, int64_t n)
{
    const unsigned char *s = src;
    if (n <= 0)
        return;
    switch (dt) {
    case TD_F32:
        memcpy(dst, s, (size_t)n * 4);
        return;
    case TD_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = st_f16_to_f32(h);
        }
        return;
    case TD_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, 4);
        }
        return;
    case TD_I8: /* a backend's storage, never a checkpoint's */
        return;
    }
}

/* binary32 -> binary16, round to nearest, ties to even. Values at or above
 * 65520 (halfway between 65504 and 2^16) become inf; NaNs stay NaN with the
 * sign and the top payload bits, forced quiet so the payload never reads as
 * inf. */
uint16_t td_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520, including inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: normal */
        uint32_t h = (((ax >> 23) - 127u + 15u) << 10) | ((ax >> 13) & 0x3ffu);
        uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++; /* a carry into the exponent is the correct result */
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u) /* <= 2^-25: rounds to (signed) zero */
        return sign;
    /* Subnormal: value = m * 2^(e-150) = (m >> shift) * 2^-24. */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}
