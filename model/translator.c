/*
 * translator.c - model and worker lifecycle: load a model directory once,
 * make workers whose memory is sized for the worst case at start-up.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "model_internal.h"

/* Parses td_load_opts.dtype / .precision (NULL or "": the defaults). */
static int parse_numerics(const td_load_opts *opts, td_store *store, int *half_activations,
                          char *err, size_t errlen)
{
    static const struct { const char *name; td_store store; } stores[] = {
        {"auto", TD_STORE_AUTO},      {"float32", TD_STORE_F32}, {"f32", TD_STORE_F32},
        {"float16", TD_STORE_F16},    {"f16", TD_STORE_F16},     {"bfloat16", TD_STORE_BF16},
        {"bf16", TD_STORE_BF16},      {"int8", TD_STORE_INT8},   {"int8-all", TD_STORE_INT8_ALL},
    };
    const char *dt = opts && opts->dtype && *opts->dtype ? opts->dtype : "auto";
    const char *pr = opts && opts->precision && *opts->precision ? opts->precision : "full";
    size_t i = 0;
    while (i < sizeof stores / sizeof stores[0] && strcmp(stores[i].name, dt) != 0)
        i++;
    if (i == sizeof stores / sizeof stores[0]) {
        snprintf(err, errlen, "dtype '%s': expected auto, float32, float16, bfloat16, int8 or int8-all",
                 dt);
        return -1;
    }
    if (strcmp(pr, "full") != 0 && strcmp(pr, "half") != 0) {
        snprintf(err, errlen, "precision '%s': expected full or half", pr);
        return -1;
    }
    *store = stores[i].store;
    *half_activations = strcmp(pr, "half") == 0;
    return 0;
}

int td_load_opts_check(const td_load_opts *opts, char *err, size_t errlen)
{
    td_store store;
    int half;
    return parse_numerics(opts, &store, &half, err, errlen);
}

/* A backend on the model's device with the model's numerics. */
static td_backend *backend_create(const td_model *m, int n_threads, char *err, size_t errlen)
{
    const td_backend_params p = {.n_threads = n_threads, .store = m->store,
                                 .half_activations = m->half_activations};
    return m->dev.create(&m->dev, &p, err, errlen);
}

void td_model_free(td_model *m)
{
    if (!m)
        return;
    td_weights_free(m);
    if (m->be)
        m->be->ops->destroy(m->be);
    free(m->dir);
    free(m);
}

/* Loads the model on dev, or (dev NULL) on the device the registry resolves
 * from device_text, after the config and the numerics have been checked. */
static int model_load(td_model **out, const char *dir, const td_device *dev,
                      const char *device_text, const td_load_opts *opts, char *err,
                      size_t errlen)
{
    *out = NULL;
    td_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->dir = strdup(dir);
    if (!m->dir) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (td_config_load(&m->cfg, dir, err, errlen) != 0)
        goto fail;
    if (parse_numerics(opts, &m->store, &m->half_activations, err, errlen) != 0)
        goto fail;
    if (dev)
        m->dev = *dev;
    else if (td_device_resolve(device_text, &m->dev, err, errlen) != 0)
        goto fail;
    m->be = backend_create(m, opts ? opts->n_threads : 0, err, errlen);
    if (!m->be)
        goto fail;
    m->embed_scale = m->cfg.scale_embedding ? sqrtf((float)m->cfg.d_model) : 1.0f;
    if (td_weights_load(m, err, errlen) != 0)
        goto fail;
    if (td_posenc_build(m, err, errlen) != 0)
        goto fail;
    if (m->be->ops->sync(m->be, err, errlen) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    td_model_free(m);
    return -1;
}

int td_model_load(td_model **out, const char *dir, const td_load_opts *opts, char *err,
                  size_t errlen)
{
    return model_load(out, dir, NULL, opts ? opts->device : NULL, opts, err, errlen);
}

int td_model_load_on(td_model **out, const char *dir, const td_device *dev,
                     const td_load_opts *opts, char *err, size_t errlen)
{
    return model_load(out, dir, dev, NULL, opts, err, errlen);
}

const td_config *td_model_config(const td_model *m)
{
    return &m->cfg;
}

size_t td_model_weight_bytes(const td_model *m)
{
    return m->weight_bytes;
}

const char *td_model_weight_dtype(const td_model *m)
{
    return m->matrix_dtype == TD_F16    ? "float16"
           : m->matrix_dtype == TD_BF16 ? "bfloat16"
           : m->matrix_dtype == TD_I8   ? "int8"
                                        : "float32";
}

/* ------------------------------------------------------------------------ */

/* The device buffers, freed (the per-layer pointer arrays stay). */
static void bufs_free(td_worker *w)
{
    td_backend *be = w->be;
    const int L = w->m->cfg.decoder_layers;
#define FREE_BUF(name, type, rows, width)                                       \
    be->ops->dealloc(be, w->name);                                              \
    w->name = NULL;
#define FREE_LAYER_BUF(name, type, rows, width)                                 \
    for (int l = 0; w->name && l < L; l++) {                                    \
        be->ops->dealloc(be, w->name[l]);                                       \
        w->name[l] = NULL;                                                      \
    }
    TD_WORKER_BUFFERS(FREE_BUF)
    TD_WORKER_LAYER_BUFFERS(FREE_LAYER_BUF)
#undef FREE_BUF
#undef FREE_LAYER_BUF
    w->arena_bytes = 0;
}

void td_worker_free(td_worker *w)
{
    if (!w)
        return;
    if (w->be) {
        bufs_free(w);
        w->be->ops->destroy(w->be);
    }
    td_decode_scratch_free(w);
#define FREE_LAYER_ARRAY(name, type, rows, width) free(w->name);
    TD_WORKER_LAYER_BUFFERS(FREE_LAYER_ARRAY)
#undef FREE_LAYER_ARRAY
    free(w);
}

/* rows x width elements of `size` bytes with overflow checks: the bytes,
 * or 0 when they overflow. */
static size_t buf_bytes(int64_t rows, int64_t width, size_t size)
{
    if (rows < 1)
        rows = 1;
    if (width < 1)
        width = 1;
    if ((uint64_t)rows > (uint64_t)INT64_MAX / (uint64_t)width ||
        (uint64_t)(rows * width) > SIZE_MAX / size)
        return 0;
    return (size_t)(rows * width) * size;
}

/* Allocates rows x width elements of `size` bytes, adding the bytes to the
 * worker's arena total. */
static void *walloc(td_worker *w, int64_t rows, int64_t width, size_t size, int *failed)
{
    if (*failed)
        return NULL;
    size_t bytes = buf_bytes(rows, width, size);
    void *p = bytes ? w->be->ops->alloc(w->be, bytes) : NULL;
    if (!p) {
        *failed = 1;
        return NULL;
    }
    /* Written once now, so that the memory is committed before a decode
     * uses it (on the CPU the pages are resident: the arena the daemon
     * reports is its RSS, and a step never faults a page in or meets an
     * OOM). */
    w->be->ops->memset0(w->be, p, bytes);
    w->arena_bytes += bytes;
    return p;
}

/* The rows and widths of the buffer table for capacities cap. */
static td_wsizes wsizes(const td_worker *w, td_wcap cap)
{
    const td_config *c = &w->m->cfg;
    const int64_t ER = (int64_t)cap.slots * cap.src;
    const td_wsizes sz = {
        .n_enc = ER, .n_dec = cap.rows, .n_dec_t = (int64_t)cap.rows * cap.len,
        .n_batch = cap.slots, .n_one = 1, .w_d = c->d_model,
        .w_ffn = c->encoder_ffn_dim > c->decoder_ffn_dim ? c->encoder_ffn_dim
                                                          : c->decoder_ffn_dim,
        .w_vocab = c->decoder_vocab_size, .w_topk = 2 * 2 * (int64_t)w->o.max_beam,
        .w_heads_s = (int64_t)c->decoder_attention_heads * cap.src,
        .w_suppress = TD_MAX_SUPPRESS, .w_rowf = TD_STEP_ROW_FIELDS, .w_two = 2,
        .w_one = 1,
    };
    return sz;
}

/* The bytes of the buffer table for capacities cap (0: it overflows). */
static size_t wbytes(const td_worker *w, td_wcap cap)
{
    const td_wsizes sz = wsizes(w, cap);
    const int64_t L = w->m->cfg.decoder_layers;
    size_t total = 0, b;
    int over = 0;
#define SUM_BUF(name, type, rows, width)                                        \
    b = buf_bytes(sz.n_##rows, sz.w_##width, sizeof(type));                     \
    over |= b == 0;                                                             \
    total += b;
#define SUM_LAYER_BUF(name, type, rows, width)                                  \
    b = buf_bytes(sz.n_##rows, sz.w_##width, sizeof(type));                     \
    over |= b == 0 || b > SIZE_MAX / (size_t)(L > 0 ? L : 1);                   \
    total += b * (size_t)L;
    TD_WORKER_BUFFERS(SUM_BUF)
    TD_WORKER_LAYER_BUFFERS(SUM_LAYER_BUF)
#undef SUM_BUF
#undef SUM_LAYER_BUF
    return over ? 0 : total;
}

/* Allocates every buffer for capacities cap (after bufs_free) and readies
 * them (GEMM scratch, the suppressed ids). Returns 0, or -1 with the
 * backend's message (the buffers allocated so far stay for bufs_free). */
static int bufs_alloc(td_worker *w, td_wcap cap, char *why, size_t whylen)
{
    const td_model *m = w->m;
    const td_config *c = &m->cfg;
    const int64_t L = c->decoder_layers;
    const td_wsizes sz = wsizes(w, cap);
    int failed = 0;
    w->cap = cap;
#define ALLOC_BUF(name, type, rows, width)                                      \
    w->name = walloc(w, sz.n_##rows, sz.w_##width, sizeof(type), &failed);
#define ALLOC_LAYER_BUF(name, type, rows, width)                                \
    w->name[l] = walloc(w, sz.n_##rows, sz.w_##width, sizeof(type), &failed);
    TD_WORKER_BUFFERS(ALLOC_BUF)
    for (int64_t l = 0; !failed && l < L; l++) {
        TD_WORKER_LAYER_BUFFERS(ALLOC_LAYER_BUF)
    }
#undef ALLOC_BUF
#undef ALLOC_LAYER_BUF
    if (failed) {
        /* the backend latched the failing allocation (size, free memory) */
        snprintf(why, whylen, "out of memory");
        (void)w->be->ops->sync(w->be, why, whylen);
        return -1;
    }
    /* temporary memory of the largest linears (GPU GEMM scratch), now
     * rather than during the first request that needs it */
    if (w->be->ops->reserve_linear && c->encoder_layers > 0 && c->decoder_layers > 0) {
        const td_layer_w *el = &m->enc[0], *dl = &m->dec[0];
        const td_weight *enc_w[] = {&el->self_attn.q, &el->fc1, &el->fc2, &dl->cross_attn.k};
        const td_weight *dec_w[] = {&dl->self_attn.q, &dl->cross_attn.q, &dl->fc1, &dl->fc2,
                                    &m->lm_head};
        for (size_t i = 0; i < sizeof enc_w / sizeof enc_w[0]; i++)
            w->be->ops->reserve_linear(w->be, enc_w[i], sz.n_enc);
        for (size_t i = 0; i < sizeof dec_w / sizeof dec_w[0]; i++)
            w->be->ops->reserve_linear(w->be, dec_w[i], sz.n_dec);
    }
    w->be->ops->upload(w->be, w->d_suppress, c->suppress,
                       (size_t)c->n_suppress * sizeof(int32_t));
    return w->be->ops->sync(w->be, why, whylen) != 0 ? -1 : 0;
}

/* The next capacity of a ladder: cur, or cur doubled until it holds need,
 * at most max. */
static int ladder(int need, int cur, int max)
{
    int v = cur > 0 ? cur : 1;
    while (v < need && v < max)
        v = v > max / 2 ? max : v * 2;
    return v < max ? v : max;
}

/* Reallocates the buffers for cap (no rows may be running). */
static int resize(td_worker *w, td_wcap cap, char *err, size_t errlen)
{
    const td_wcap old = w->cap;
    char why[512];
    bufs_free(w);
    if (bufs_alloc(w, cap, why, sizeof why) == 0)
        return 0;
    bufs_free(w);
    char again[256];
    if (bufs_alloc(w, old, again, sizeof again) != 0) {
        bufs_free(w);
        snprintf(err, errlen, "worker: its memory could not be reallocated on %s: %s",
                 w->m->dev.name, again);
        return TD_EDEVICE;
    }
    snprintf(err, errlen,
             "worker: cannot grow its memory on %s to %d sentences, %d rows, %d source and %d "
             "generated tokens (%zu bytes): %s",
             w->m->dev.name, cap.slots, cap.rows, cap.src, cap.len, wbytes(w, cap), why);
    return TD_EINVAL;
}

int td_worker_grow(td_worker *w, td_wcap need, char *err, size_t errlen)
{
    td_wcap want = {
        .slots = ladder(need.slots, w->cap.slots, w->cap_max.slots),
        .rows = ladder(need.rows, w->cap.rows, w->cap_max.rows),
        .src = ladder(need.src, w->cap.src, w->cap_max.src),
        .len = ladder(need.len, w->cap.len, w->cap_max.len),
    };
    if (!memcmp(&want, &w->cap, sizeof want))
        return 0;
    return resize(w, want, err, errlen);
}

long td_worker_trim(td_worker *w, char *err, size_t errlen)
{
    if (td_run_live(w) > 0 || !memcmp(&w->cap, &w->cap_min, sizeof w->cap))
        return 0;
    size_t before = w->arena_bytes;
    int rc = resize(w, w->cap_min, err, errlen);
    if (rc != 0)
        return rc == TD_EDEVICE ? -1 : 0;
    return (long)(before - w->arena_bytes);
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

int td_worker_init(td_worker **out, const td_model *m, const td_worker_opts *opts, char *err,
                   size_t errlen)
{
    *out = NULL;
    const td_config *c = &m->cfg;
    td_worker_opts o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    if (o.max_batch <= 0)
        o.max_batch = 32;
    if (o.max_src_len <= 0 || o.max_src_len > c->max_position_embeddings)
        o.max_src_len = c->max_position_embeddings;
    if (o.max_length <= 0) {
        td_decode_opts dflt;
        td_decode_opts_default(m, &dflt);
        o.max_length = dflt.max_length;
    }
    if (o.max_length > td_generated_cap(c)) {
        snprintf(err, errlen, "worker: max_length %d exceeds %d (max_position_embeddings %d, "
                 "at most %d)", o.max_length, td_generated_cap(c),
                 c->max_position_embeddings, TD_MAX_GENERATED);
        return -1;
    }
    if (o.max_beam <= 0)
        o.max_beam = c->num_beams;
    if (o.max_beam > TD_MAX_BEAM) {
        snprintf(err, errlen, "worker: max_beam %d exceeds %d", o.max_beam, TD_MAX_BEAM);
        return -1;
    }
    if (o.max_batch > 1 << 16) {
        snprintf(err, errlen, "worker: max_batch %d is too large", o.max_batch);
        return -1;
    }

    td_worker *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->m = m;
    w->o = o;
    w->cap_max = (td_wcap){o.max_batch, o.max_batch * o.max_beam, o.max_src_len,
                           o.max_length};
    w->cap_min = w->cap_max;
    if (o.grow)
        w->cap_min = (td_wcap){min_int(TD_WCAP_SLOTS0, o.max_batch),
                               min_int(TD_WCAP_ROWS0, w->cap_max.rows),
                               min_int(TD_WCAP_SRC0, o.max_src_len),
                               min_int(TD_WCAP_LEN0, o.max_length)};
    w->be = backend_create(m, o.n_threads, err, errlen);
    if (!w->be) {
        free(w);
        return -1;
    }
    const int64_t L = c->decoder_layers;
    int failed = 0;
#define ALLOC_LAYER_ARRAY(name, type, rows, width)                              \
    if (!(w->name = calloc((size_t)L, sizeof *w->name)))                        \
        failed = 1;
    TD_WORKER_LAYER_BUFFERS(ALLOC_LAYER_ARRAY)
#undef ALLOC_LAYER_ARRAY
    char why[512] = "out of host memory";
    if (failed || bufs_alloc(w, w->cap_min, why, sizeof why) != 0) {
        snprintf(err, errlen,
                 "worker: cannot allocate its memory on %s (%zu bytes allocated before the "
                 "failure) for max_batch %d, max_src_len %d, max_length %d, max_beam %d: %s; "
                 "lower --max-batch-size, --max-input-tokens or --max-beam",
                 m->dev.name, w->arena_bytes, w->cap_min.slots, w->cap_min.src,
                 w->cap_min.len, o.max_beam, why);
        td_worker_free(w);
        return -1;
    }
    if (td_decode_scratch_init(w, err, errlen) != 0) {
        td_worker_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

size_t td_worker_max_bytes(const td_worker *w)
{
    return wbytes(w, w->cap_max);
}

size_t td_worker_arena_bytes(const td_worker *w)
{
    return w->arena_bytes;
}

int td_worker_max_src_len(const td_worker *w)
{
    return w->o.max_src_len;
}
