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
        {"bf16", TD_STORE_BF16},
    };
    const char *dt = opts && opts->dtype && *opts->dtype ? opts->dtype : "auto";
    const char *pr = opts && opts->precision && *opts->precision ? opts->precision : "full";
    size_t i = 0;
    while (i < sizeof stores / sizeof stores[0] && strcmp(stores[i].name, dt) != 0)
        i++;
    if (i == sizeof stores / sizeof stores[0]) {
        snprintf(err, errlen, "dtype '%s': expected auto, float32, float16 or bfloat16", dt);
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
    return m->matrix_dtype == TD_F16 ? "float16" : m->matrix_dtype == TD_BF16 ? "bfloat16"
                                                                                : "float32";
}

/* ------------------------------------------------------------------------ */

void td_worker_free(td_worker *w)
{
    if (!w)
        return;
    if (w->be) {
        td_backend *be = w->be;
        void *flat[] = {w->ex, w->eh, w->eq, w->ek, w->ev, w->ectx, w->effn, w->e_ids,
                        w->e_pos, w->e_len, w->dx, w->dh, w->dq, w->dctx, w->dffn,
                        w->logits, w->topk, w->row_bias, w->d_ids,
                        w->d_pos, w->d_kv_index, w->d_kv_len, w->d_gather, w->d_suppress,
                        w->cache_tmp};
        for (size_t i = 0; i < sizeof flat / sizeof flat[0]; i++)
            be->ops->dealloc(be, flat[i]);
        int L = w->m->cfg.decoder_layers;
        for (int l = 0; l < L; l++) {
            if (w->self_k)
                be->ops->dealloc(be, w->self_k[l]);
            if (w->self_v)
                be->ops->dealloc(be, w->self_v[l]);
            if (w->cross_k)
                be->ops->dealloc(be, w->cross_k[l]);
            if (w->cross_v)
                be->ops->dealloc(be, w->cross_v[l]);
            if (w->probs)
                be->ops->dealloc(be, w->probs[l]);
        }
        be->ops->destroy(be);
    }
    td_decode_scratch_free(w);
    free(w->self_k);
    free(w->self_v);
    free(w->cross_k);
    free(w->cross_v);
    free(w->probs);
    free(w);
}

/* Allocates `count` elements of `size` bytes with overflow checks, adding
 * the bytes to the worker's arena total. */
static void *walloc(td_worker *w, int64_t count, size_t size, int *failed)
{
    if (*failed)
        return NULL;
    if (count <= 0)
        count = 1;
    if ((uint64_t)count > SIZE_MAX / size) {
        *failed = 1;
        return NULL;
    }
    size_t bytes = (size_t)count * size;
    void *p = w->be->ops->alloc(w->be, bytes);
    if (!p) {
        *failed = 1;
        return NULL;
    }
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
    const int64_t d = c->d_model, L = c->decoder_layers;
    const int64_t ffn = c->encoder_ffn_dim > c->decoder_ffn_dim ? c->encoder_ffn_dim
                                                                 : c->decoder_ffn_dim;
    const int64_t ER = (int64_t)o.max_batch * o.max_src_len;
    const int64_t N = (int64_t)o.max_batch * o.max_beam;
    const int64_t T = o.max_length, S = o.max_src_len;
    const int K = 2 * o.max_beam;
    int failed = 0;
    w->enc_rows = ER;
    w->dec_rows = N;
    w->ex = walloc(w, ER * d, sizeof(float), &failed);
    w->eh = walloc(w, ER * d, sizeof(float), &failed);
    w->eq = walloc(w, ER * d, sizeof(float), &failed);
    w->ek = walloc(w, ER * d, sizeof(float), &failed);
    w->ev = walloc(w, ER * d, sizeof(float), &failed);
    w->ectx = walloc(w, ER * d, sizeof(float), &failed);
    w->effn = walloc(w, ER * ffn, sizeof(float), &failed);
    w->e_ids = walloc(w, ER, sizeof(int32_t), &failed);
    w->e_pos = walloc(w, ER, sizeof(int32_t), &failed);
    w->e_len = walloc(w, o.max_batch, sizeof(int32_t), &failed);
    w->dx = walloc(w, N * d, sizeof(float), &failed);
    w->dh = walloc(w, N * d, sizeof(float), &failed);
    w->dq = walloc(w, N * d, sizeof(float), &failed);
    w->dctx = walloc(w, N * d, sizeof(float), &failed);
    w->dffn = walloc(w, N * ffn, sizeof(float), &failed);
    w->logits = walloc(w, N * c->decoder_vocab_size, sizeof(float), &failed);
    w->topk = walloc(w, 2 * N * K, sizeof(float), &failed);
    w->row_bias = walloc(w, N, sizeof(float), &failed);
    w->d_ids = walloc(w, N, sizeof(int32_t), &failed);
    w->d_pos = walloc(w, N, sizeof(int32_t), &failed);
    w->d_kv_index = walloc(w, N, sizeof(int32_t), &failed);
    w->d_kv_len = walloc(w, N, sizeof(int32_t), &failed);
    w->d_gather = walloc(w, N, sizeof(int32_t), &failed);
    w->d_suppress = walloc(w, TD_MAX_SUPPRESS, sizeof(int32_t), &failed);
    w->cache_tmp = walloc(w, N * T * d, sizeof(float), &failed);
    w->self_k = calloc((size_t)L, sizeof(float *));
    w->self_v = calloc((size_t)L, sizeof(float *));
    w->cross_k = calloc((size_t)L, sizeof(float *));
    w->cross_v = calloc((size_t)L, sizeof(float *));
    w->probs = calloc((size_t)L, sizeof(float *));
    if (!w->self_k || !w->self_v || !w->cross_k || !w->cross_v || !w->probs)
        failed = 1;
    for (int64_t l = 0; !failed && l < L; l++) {
        w->self_k[l] = walloc(w, N * T * d, sizeof(float), &failed);
        w->self_v[l] = walloc(w, N * T * d, sizeof(float), &failed);
        w->cross_k[l] = walloc(w, ER * d, sizeof(float), &failed);
        w->cross_v[l] = walloc(w, ER * d, sizeof(float), &failed);
        w->probs[l] = walloc(w, N * c->decoder_attention_heads * S, sizeof(float), &failed);
    }
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
