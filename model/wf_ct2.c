/*
 * wf_ct2.c - CTranslate2's model.bin behind the format seam (wformat.h).
 *
 * The layout, as CTranslate2 writes it (python/ctranslate2/specs/
 * model_spec.py, ModelSpec._serialize) and reads it (src/models/model.cc,
 * Model::load), all integers little-endian:
 *   u32 binary version (1 to 6 here; a newer one is refused by number)
 *   version >= 2: string spec name, u32 spec revision
 *   u32 variable count, then each variable:
 *     string name, u8 rank, rank x u32 dimensions,
 *     version >= 4: u8 type id (0 float32, 1 int8, 2 int16, 3 int32,
 *                   4 float16, 5 bfloat16), u32 byte count;
 *     before: u8 item size (4 float32, 2 int16, 1 int8), u32 item count;
 *     then the bytes
 *   version >= 3: u32 alias count, then each: string alias, string target
 * where a string is a u16 length that counts a final NUL, then the bytes.
 *
 * Attributes are variables too: a bool is an int8 scalar, a float a
 * float32 scalar, small integers int8/int16/int32 scalars. A quantized
 * weight W (int8, per row; int16, one scalar) has its scale in W_scale,
 * float32: the stored integer is rint(value * scale), so read_f32 gives
 * integer / scale. An alias names its target's scale too (alias_scale is
 * target_scale), as Model::load registers it.
 *
 * Every count, rank, size and offset is checked against the file before it
 * is used; a variable whose byte count does not match its shape and type,
 * a name used twice or an alias to nothing refuses the file by name. int16
 * and int32 variables are read as float32 (raw gives NULL for them).
 *
 * The whole file is read into memory (not mapped: see safetensors.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "safetensors.h" /* td_to_f32 */
#include "wfile.h"
#include "wformat.h"

#define C2_FILE "model.bin"
#define C2_MAX_VERSION 6

/* CTranslate2's DataType ids (include/ctranslate2/types.h) */
enum { C2_F32 = 0, C2_I8 = 1, C2_I16 = 2, C2_I32 = 3, C2_F16 = 4, C2_BF16 = 5 };

typedef struct c2_var {
    td_wt wt;
    int ct2_type;         /* C2_* */
    const uint8_t *data;  /* into the file image */
    uint64_t n_bytes;
    int scale;            /* index of the W_scale twin, -1 when none */
} c2_var;

typedef struct wf_ct2 {
    uint8_t *file;
    size_t size, pos;
    uint32_t version;
    char spec[128];
    uint32_t revision;
    c2_var *v;            /* variables, then aliases (copies naming their target's bytes) */
    int n, n_vars;
    char **names;         /* owned names, n of them */
    char *err;
    size_t errlen;
} wf_ct2;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int c2_fail(wf_ct2 *w, const char *fmt, ...)
{
    int k = snprintf(w->err, w->errlen, "%s: ", C2_FILE);
    if (k < 0 || (size_t)k >= w->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err + k, w->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- the cursor ---------------------------------------------------------- */

static int get_bytes(wf_ct2 *w, void *out, size_t n, const char *what)
{
    if (w->size - w->pos < n)
        return c2_fail(w, "truncated: %s at byte %zu needs %zu bytes, the file has %zu",
                       what, w->pos, n, w->size);
    memcpy(out, w->file + w->pos, n);
    w->pos += n;
    return 0;
}

static int get_u32(wf_ct2 *w, uint32_t *v, const char *what)
{
    uint8_t b[4] = {0};
    if (get_bytes(w, b, 4, what))
        return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int get_u16(wf_ct2 *w, uint16_t *v, const char *what)
{
    uint8_t b[2] = {0};
    if (get_bytes(w, b, 2, what))
        return -1;
    *v = (uint16_t)(b[0] | b[1] << 8);
    return 0;
}

static int get_u8(wf_ct2 *w, uint8_t *v, const char *what)
{
    return get_bytes(w, v, 1, what);
}

/* A string: u16 length counting the final NUL, the bytes, the NUL. The
 * result is malloc'd. */
static int get_string(wf_ct2 *w, char **out, const char *what)
{
    uint16_t n;
    *out = NULL;
    if (get_u16(w, &n, what))
        return -1;
    if (n == 0)
        return c2_fail(w, "%s at byte %zu: length 0 (a string counts its final NUL)", what,
                       w->pos - 2);
    if (w->size - w->pos < n)
        return c2_fail(w, "truncated: %s at byte %zu needs %u bytes, the file has %zu", what,
                       w->pos, (unsigned)n, w->size);
    const char *s = (const char *)w->file + w->pos;
    if (s[n - 1] != 0 || memchr(s, 0, (size_t)n - 1))
        return c2_fail(w, "%s at byte %zu: not a NUL-terminated string of %u bytes", what,
                       w->pos, (unsigned)n);
    *out = malloc(n);
    if (!*out)
        return c2_fail(w, "out of memory");
    memcpy(*out, s, n);
    w->pos += n;
    return 0;
}

/* ---- variables ------------------------------------------------------------- */

static size_t c2_type_size(int t)
{
    switch (t) {
    case C2_F32: case C2_I32: return 4;
    case C2_I16: case C2_F16: case C2_BF16: return 2;
    case C2_I8: return 1;
    }
    return 0;
}

static const char *c2_type_name(int t)
{
    static const char *const names[] = {"float32", "int8", "int16", "int32", "float16",
                                        "bfloat16"};
    return t >= 0 && t <= C2_BF16 ? names[t] : "?";
}

/* The dtype the seam reports: as stored where the engine has it, else
 * float32 (the integers are converted by read_f32). */
static td_dtype c2_dtype(int t)
{
    return t == C2_F16 ? TD_F16 : t == C2_BF16 ? TD_BF16 : t == C2_I8 ? TD_I8 : TD_F32;
}

static int c2_index(const wf_ct2 *w, const char *name, int upto)
{
    for (int i = 0; i < upto; i++)
        if (strcmp(w->v[i].wt.name, name) == 0)
            return i;
    return -1;
}

/* One variable's header and bytes. */
static int read_var(wf_ct2 *w, int i)
{
    c2_var *v = &w->v[i];
    char *name;
    if (get_string(w, &name, "variable name"))
        return -1;
    w->names[i] = name;
    v->wt.name = name;
    v->scale = -1;
    uint8_t rank = 0;
    if (get_u8(w, &rank, "rank"))
        return -1;
    if (rank > TD_WT_MAX_RANK)
        return c2_fail(w, "variable '%s': rank %u (at most %d)", name, (unsigned)rank,
                       TD_WT_MAX_RANK);
    v->wt.rank = rank;
    uint64_t count = 1;
    for (int k = 0; k < rank; k++) {
        uint32_t d;
        if (get_u32(w, &d, "dimension"))
            return -1;
        v->wt.shape[k] = d;
        /* at most 2^60 elements: times a 4-byte type, no overflow */
        if (d && count > (UINT64_C(1) << 60) / d)
            return c2_fail(w, "variable '%s': %" PRIu64 " x %u elements overflow", name, count,
                           (unsigned)d);
        count *= d;
    }
    v->wt.n_elements = (int64_t)count;
    uint8_t t = 0;
    uint32_t n;
    if (w->version >= 4) {
        if (get_u8(w, &t, "type id") || get_u32(w, &n, "byte count"))
            return -1;
        if (!c2_type_size(t) || t > C2_BF16)
            return c2_fail(w, "variable '%s': unknown type id %u (known: 0 float32, 1 int8, "
                           "2 int16, 3 int32, 4 float16, 5 bfloat16)", name, (unsigned)t);
        v->n_bytes = n;
    } else {
        uint8_t item = 0;
        if (get_u8(w, &item, "item size") || get_u32(w, &n, "item count"))
            return -1;
        /* binary versions 1 to 3 named the type by its item size */
        t = item == 4 ? C2_F32 : item == 2 ? C2_I16 : item == 1 ? C2_I8 : 0xff;
        if (t == 0xff)
            return c2_fail(w, "variable '%s': unknown item size %u (known: 4, 2, 1)", name,
                           (unsigned)item);
        v->n_bytes = (uint64_t)n * item;
    }
    v->ct2_type = t;
    v->wt.dtype = c2_dtype(t);
    if (v->n_bytes != count * c2_type_size(t))
        return c2_fail(w, "variable '%s': %" PRIu64 " bytes for %" PRIu64 " %s elements "
                       "(expected %" PRIu64 ")", name, v->n_bytes, count, c2_type_name(t),
                       count * c2_type_size(t));
    if (w->size - w->pos < v->n_bytes)
        return c2_fail(w, "truncated: variable '%s' at byte %zu needs %" PRIu64
                       " bytes, the file has %zu", name, w->pos, v->n_bytes, w->size);
    v->data = w->file + w->pos;
    w->pos += (size_t)v->n_bytes;
    if (c2_index(w, name, i) >= 0)
        return c2_fail(w, "variable '%s' is stored twice", name);
    return 0;
}

/* Aliases (version >= 3), appended to w->v: each names a variable or an
 * earlier alias (CTranslate2 writes them in name order and registers them
 * in that order). */
static int read_aliases(wf_ct2 *w, uint32_t n_alias)
{
    for (uint32_t k = 0; k < n_alias; k++) {
        int i = w->n;
        char *alias = NULL, *target = NULL;
        if (get_string(w, &alias, "alias name"))
            return -1;
        w->names[i] = alias;
        w->n++;
        if (get_string(w, &target, "alias target"))
            return -1;
        int to = c2_index(w, target, i);
        if (to < 0) {
            c2_fail(w, "alias '%s' names '%s', which the file does not hold", alias, target);
            free(target);
            return -1;
        }
        free(target);
        if (c2_index(w, alias, i) >= 0)
            return c2_fail(w, "alias '%s' is also a variable's name", alias);
        w->v[i] = w->v[to];
        w->v[i].wt.name = alias;
        w->v[i].scale = -1;
    }
    return 0;
}

/* Each quantized weight's W_scale twin (aliases' through their target's
 * name), checked: float32, one value per row (int8) or one (int16). */
static int bind_scales(wf_ct2 *w)
{
    char key[4200];
    for (int i = 0; i < w->n; i++) {
        c2_var *v = &w->v[i];
        if (v->ct2_type != C2_I8 && v->ct2_type != C2_I16)
            continue;
        snprintf(key, sizeof key, "%s_scale", v->wt.name);
        int s = c2_index(w, key, w->n);
        if (s < 0 && i >= w->n_vars) {
            /* an alias: its target's twin, found by the bytes they share */
            for (int j = 0; j < w->n_vars && s < 0; j++)
                if (w->v[j].data == v->data && w->v[j].scale >= 0)
                    s = w->v[j].scale;
        }
        if (s < 0)
            continue; /* an integer attribute (a flag, a count) */
        const c2_var *sv = &w->v[s];
        int64_t rows = v->wt.rank >= 2 ? v->wt.shape[0] : 1;
        int64_t want = v->ct2_type == C2_I8 ? rows : 1;
        if (sv->ct2_type != C2_F32 || sv->wt.n_elements != want)
            return c2_fail(w, "variable '%s': %s %s with %" PRId64 " values does not scale it "
                           "(expected float32 with %" PRId64 ")", v->wt.name, sv->wt.name,
                           c2_type_name(sv->ct2_type), sv->wt.n_elements, want);
        v->scale = s;
    }
    return 0;
}

static int c2_parse(wf_ct2 *w)
{
    if (get_u32(w, &w->version, "binary version"))
        return -1;
    if (w->version == 0 || w->version > C2_MAX_VERSION)
        return c2_fail(w, "binary version %" PRIu32 " is not supported (this reader knows "
                       "versions 1 to %d)", w->version, C2_MAX_VERSION);
    snprintf(w->spec, sizeof w->spec, "TransformerBase");
    w->revision = 1;
    if (w->version >= 2) {
        char *spec;
        if (get_string(w, &spec, "spec name"))
            return -1;
        snprintf(w->spec, sizeof w->spec, "%s", spec);
        free(spec);
        if (get_u32(w, &w->revision, "spec revision"))
            return -1;
    }
    uint32_t n_vars, n_alias = 0;
    if (get_u32(w, &n_vars, "variable count"))
        return -1;
    /* a variable takes at least 2 + 1 + 1 + 1 + 4 bytes */
    if (n_vars > (w->size - w->pos) / 9)
        return c2_fail(w, "%" PRIu32 " variables cannot fit the %zu bytes left", n_vars,
                       w->size - w->pos);
    w->v = calloc((size_t)n_vars + 1, sizeof *w->v);
    w->names = calloc((size_t)n_vars + 1, sizeof *w->names);
    if (!w->v || !w->names)
        return c2_fail(w, "out of memory for %" PRIu32 " variables", n_vars);
    for (uint32_t i = 0; i < n_vars; i++) {
        w->n = (int)i + 1;
        if (read_var(w, (int)i))
            return -1;
    }
    w->n = w->n_vars = (int)n_vars;
    if (w->version >= 3) {
        if (get_u32(w, &n_alias, "alias count"))
            return -1;
        /* an alias takes at least 2 + 1 + 2 + 1 bytes */
        if (n_alias > (w->size - w->pos) / 6)
            return c2_fail(w, "%" PRIu32 " aliases cannot fit the %zu bytes left", n_alias,
                           w->size - w->pos);
        size_t cap = (size_t)n_vars + n_alias + 1;
        c2_var *nv = realloc(w->v, cap * sizeof *nv);
        if (nv)
            w->v = nv;
        char **nn = nv ? realloc(w->names, cap * sizeof *nn) : NULL;
        if (nn)
            w->names = nn;
        if (!nv || !nn)
            return c2_fail(w, "out of memory for %" PRIu32 " aliases", n_alias);
        if (read_aliases(w, n_alias))
            return -1;
    }
    return bind_scales(w);
}

/* ---- the file ---------------------------------------------------------- */

static int c2_read_file(wf_ct2 *w, const char *path)
{
    char msg[400];
    char *buf = NULL;
    if (td_wfile_read(path, &buf, &w->size, msg, sizeof msg) != 0)
        return c2_fail(w, "%s", msg);
    w->file = (uint8_t *)buf;
    return 0;
}

static void c2_free(wf_ct2 *w)
{
    if (!w)
        return;
    for (int i = 0; w->names && i < w->n; i++)
        free(w->names[i]);
    free(w->names);
    free(w->v);
    free(w->file);
    free(w);
}

static int c2_probe(const char *dir, char *path, size_t n, uint64_t *bytes)
{
    return td_wformat_file_probe(dir, C2_FILE, path, n, bytes);
}

static int c2_open(td_wsrc *s, const char *dir, char *err, size_t errlen)
{
    wf_ct2 *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", C2_FILE);
        return -1;
    }
    w->err = err;
    w->errlen = errlen;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, C2_FILE);
    if (c2_read_file(w, path) != 0 || c2_parse(w) != 0) {
        c2_free(w);
        return -1;
    }
    w->err = NULL;
    w->errlen = 0;
    s->ctx = w;
    return 0;
}

static void c2_close(td_wsrc *s)
{
    c2_free(s->ctx);
    s->ctx = NULL;
}

static int c2_count(const td_wsrc *s)
{
    const wf_ct2 *w = s->ctx;
    return w->n;
}

static const td_wt *c2_tensor(const td_wsrc *s, int i)
{
    const wf_ct2 *w = s->ctx;
    return i >= 0 && i < w->n ? &w->v[i].wt : NULL;
}

static const td_wt *c2_find(const td_wsrc *s, const char *name)
{
    const wf_ct2 *w = s->ctx;
    int i = c2_index(w, name, w->n);
    return i >= 0 ? &w->v[i].wt : NULL;
}

static const c2_var *c2_of(const td_wt *t)
{
    return (const c2_var *)(const void *)t; /* wt is c2_var's first member */
}

static float c2_load_f32(const uint8_t *p)
{
    float f;
    memcpy(&f, p, 4);
    return f;
}

static int c2_read_f32(const td_wsrc *s, const td_wt *t, float *dst, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    const wf_ct2 *w = s->ctx;
    const c2_var *v = c2_of(t);
    const int64_t n = v->wt.n_elements;
    switch (v->ct2_type) {
    case C2_F32:
    case C2_F16:
    case C2_BF16:
        td_to_f32(dst, v->data, v->wt.dtype, n);
        return 0;
    case C2_I32:
        for (int64_t i = 0; i < n; i++) {
            int32_t x;
            memcpy(&x, v->data + 4 * i, 4);
            dst[i] = (float)x;
        }
        return 0;
    case C2_I16:
        for (int64_t i = 0; i < n; i++) {
            int16_t x;
            memcpy(&x, v->data + 2 * i, 2);
            dst[i] = (float)x;
        }
        break;
    case C2_I8:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)(int8_t)v->data[i];
        break;
    }
    if (v->scale < 0)
        return 0;
    /* stored = rint(value * scale): value = stored / scale, one scale a row
     * (int8) or one for all (int16) */
    const c2_var *sv = &w->v[v->scale];
    const int64_t rows = sv->wt.n_elements, cols = rows ? n / rows : 0;
    for (int64_t r = 0; r < rows; r++) {
        const float sc = c2_load_f32(sv->data + 4 * r);
        for (int64_t c = 0; c < cols; c++)
            dst[r * cols + c] /= sc;
    }
    return 0;
}

static const void *c2_raw(const td_wsrc *s, const td_wt *t)
{
    (void)s;
    const c2_var *v = c2_of(t);
    return v->ct2_type == C2_I16 || v->ct2_type == C2_I32 ? NULL : v->data;
}

int td_ct2_config(const td_wsrc *s, const char *dir, td_config *cfg, char *err, size_t errlen);

const td_wformat td_wformat_ct2 = {
    .name = "ctranslate2",
    .file = C2_FILE,
    .probe = c2_probe,
    .open = c2_open,
    .close = c2_close,
    .count = c2_count,
    .tensor = c2_tensor,
    .find = c2_find,
    .read_f32 = c2_read_f32,
    .raw = c2_raw,
    .config = td_ct2_config, /* ct2_config.c: the architecture from the spec's attributes */
};
