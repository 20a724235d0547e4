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

void td_worker_free(td_worker *w)
{
    if (!w)
        return;
    if (w->be) {
        td_backend *be = w->be;
        const int L = w->m->cfg.decoder_layers;
#define FREE_BUF(name, type, rows, width) be->ops->dealloc(be, w->name);
#define FREE_LAYER_BUF(name, type, rows, width)                                 \
        for (int l = 0; w->name && l < L; l++)                                  \
            be->ops->dealloc(be, w->name[l]);
        TD_WORKER_BUFFERS(FREE_BUF)
        TD_WORKER_LAYER_BUFFERS(FREE_LAYER_BUF)
#undef FREE_BUF
#undef FREE_LAYER_BUF
        be->ops->destroy(be);
    }
    td_decode_scratch_free(w);
#define FREE_LAYER_ARRAY(name, type, rows, width) free(w->name);
    TD_WORKER_LAYER_BUFFERS(FREE_LAYER_ARRAY)
#undef FREE_LAYER_ARRAY
    free(w);
}

/* Allocates rows x width elements of `size` bytes with overflow checks,
 * adding the bytes to the worker's arena total. */
static void *walloc(td_worker *w, int64_t rows, int64_t width, size_t size, int *failed)
{
    if (*failed)
        return NULL;
    if (rows < 1)
        rows = 1;
    if (width < 1)
        width = 1;
    if ((uint64_t)rows > (uint64_t)INT64_MAX / (uint64_t)width ||
        (uint64_t)(rows * width) > SIZE_MAX / size) {
        *failed = 1;
        return NULL;
    }
    size_t bytes = (size_t)(rows * width) * size;
    void *p = w->be->ops->alloc(w->be, bytes);
    if (!p) {
        *failed = 1;
        return NULL;
    }
    /* Written once now, so that the memory is committed at start-up (on
     * the CPU the pages are resident: the arena the daemon reports is its
     * RSS, and a request never faults a page in or meets an OOM). */
    w->be->ops->memset0(w->be, p, bytes);
    w->arena_bytes += bytes;
    return p;
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
    w->be = backend_create(m, o.n_threads, err, errlen);
    if (!w->be) {
        free(w);
        return -1;
    }
    const int64_t L = c->decoder_layers;
    const int64_t ER = (int64_t)o.max_batch * o.max_src_len;
    const int64_t N = (int64_t)o.max_batch * o.max_beam;
    const td_wsizes sz = {
        .n_enc = ER, .n_dec = N, .n_dec_t = N * o.max_length, .n_batch = o.max_batch,
        .n_one = 1, .w_d = c->d_model,
        .w_ffn = c->encoder_ffn_dim > c->decoder_ffn_dim ? c->encoder_ffn_dim
                                                          : c->decoder_ffn_dim,
        .w_vocab = c->decoder_vocab_size, .w_topk = 2 * 2 * (int64_t)o.max_beam,
        .w_heads_s = (int64_t)c->decoder_attention_heads * o.max_src_len,
        .w_suppress = TD_MAX_SUPPRESS, .w_rowf = TD_STEP_ROW_FIELDS, .w_two = 2,
        .w_one = 1,
    };
    int failed = 0;
    w->enc_rows = ER;
    w->dec_rows = N;
#define ALLOC_BUF(name, type, rows, width)                                      \
    w->name = walloc(w, sz.n_##rows, sz.w_##width, sizeof(type), &failed);
#define ALLOC_LAYER_ARRAY(name, type, rows, width)                              \
    if (!(w->name = calloc((size_t)L, sizeof *w->name)))                        \
        failed = 1;
#define ALLOC_LAYER_BUF(name, type, rows, width)                                \
    w->name[l] = walloc(w, sz.n_##rows, sz.w_##width, sizeof(type), &failed);
    TD_WORKER_BUFFERS(ALLOC_BUF)
    TD_WORKER_LAYER_BUFFERS(ALLOC_LAYER_ARRAY)
    for (int64_t l = 0; !failed && l < L; l++) {
        TD_WORKER_LAYER_BUFFERS(ALLOC_LAYER_BUF)
    }
#undef ALLOC_BUF
#undef ALLOC_LAYER_ARRAY
#undef ALLOC_LAYER_BUF
    if (failed) {
        /* the backend latched the failing allocation (size, free memory) */
        char why[512] = "out of memory";
        (void)w->be->ops->sync(w->be, why, sizeof why);
        snprintf(err, errlen,
                 "worker: cannot allocate its memory on %s (%zu bytes allocated before the "
                 "failure) for max_batch %d, max_src_len %d, max_length %d, max_beam %d: %s; "
                 "lower --max-batch-size, --max-input-tokens or --max-beam",
                 m->dev.name, w->arena_bytes, o.max_batch, o.max_src_len, o.max_length,
                 o.max_beam, why);
        td_worker_free(w);
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
            w->be->ops->reserve_linear(w->be, enc_w[i], ER);
        for (size_t i = 0; i < sizeof dec_w / sizeof dec_w[0]; i++)
            w->be->ops->reserve_linear(w->be, dec_w[i], N);
    }
    if (td_decode_scratch_init(w, err, errlen) != 0) {
        td_worker_free(w);
        return -1;
    }
    w->be->ops->upload(w->be, w->d_suppress, c->suppress,
                       (size_t)c->n_suppress * sizeof(int32_t));
    if (w->be->ops->sync(w->be, err, errlen) != 0) {
        td_worker_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

size_t td_worker_arena_bytes(const td_worker *w)
{
    return w->arena_bytes;
}

int td_worker_max_src_len(const td_worker *w)
{
    return w->o.max_src_len;
}
