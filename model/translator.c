/*
 * translator.c - model and worker lifecycle: load a model directory once,
 * make workers whose memory is sized for the worst case at start-up.
 */
#include <math.h>
#include <stdatomic.h>
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

static int min_int(int a, int b)
{
    return a < b ? a : b;
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

void td_model_unload(td_model *m)
{
    char why[256];
    td_weights_free(m);
    m->weight_bytes = 0;
    (void)m->be->ops->sync(m->be, why, sizeof why);
}

int td_model_reload(td_model *m, char *err, size_t errlen)
{
    m->weight_bytes = 0;
    if (td_weights_load(m, err, errlen) != 0 || td_posenc_build(m, err, errlen) != 0 ||
        m->be->ops->sync(m->be, err, errlen) != 0) {
        td_model_unload(m);
        return -1;
    }
    return 0;
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
    static _Atomic uint64_t next_id = 1;
    m->id = next_id++;
    char files[4200];
    td_model_files_dir(dir, files, sizeof files);
    m->dir = strdup(files);
    if (!m->dir) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (td_config_load(&m->cfg, files, err, errlen) != 0)
        goto fail;
    if (parse_numerics(opts, &m->store, &m->half_activations, err, errlen) != 0)
        goto fail;
    if (dev)
        m->dev = *dev;
    else if (td_device_resolve(device_text, &m->dev, err, errlen) != 0)
        goto fail;
    /* a checkpoint of int8 matrices stays int8 on the CPU unless asked
     * otherwise: requantizing its dequantized rows (per row, absmax / 127)
     * gives back its integers (test_ct2); with int8 embeddings (CTranslate2
     * quantizes them too) those and the output projection stay int8 as well,
     * so that the weights take what the file takes (docs/benchmarks.md) */
    if (m->store == TD_STORE_AUTO && m->cfg.weights_int8 && m->dev.kind == TD_DEVICE_CPU)
        m->store = m->cfg.weights_int8 == 2 ? TD_STORE_INT8_ALL : TD_STORE_INT8;
    m->be = backend_create(m, opts ? opts->n_threads : 0, err, errlen);
    if (!m->be)
        goto fail;
    m->embed_scale = m->cfg.embedding_scale > 0.0f ? m->cfg.embedding_scale
                     : m->cfg.scale_embedding   ? sqrtf((float)m->cfg.d_model)
                                                : 1.0f;
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
        td_wbufs_free(w);
        w->be->ops->destroy(w->be);
    }
    td_decode_scratch_free(w);
#define FREE_LAYER_ARRAY(name, type, rows, width) free(w->name);
    TD_WORKER_LAYER_BUFFERS(FREE_LAYER_ARRAY)
#undef FREE_LAYER_ARRAY
    free(w);
}

/* opts completed for m (the defaults td_worker_opts describes) and checked. */
static int resolve_opts(const td_model *m, const td_worker_opts *opts, td_worker_opts *out,
                        char *err, size_t errlen)
{
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
    *out = o;
    return 0;
}

/* The worker's buffers and host scratch for model m with options o (the
 * backend made already); what it held before is freed first. */
static int worker_build(td_worker *w, const td_model *m, const td_worker_opts *o, char *err,
                        size_t errlen)
{
    if (w->be)
        td_wbufs_free(w);
    td_decode_scratch_free(w);
#define FREE_LAYER_ARRAY(name, type, rows, width) free(w->name); w->name = NULL;
    TD_WORKER_LAYER_BUFFERS(FREE_LAYER_ARRAY)
#undef FREE_LAYER_ARRAY
    w->m = m;
    w->model_id = m->id;
    w->cfg = m->cfg;
    w->o = *o;
    w->reserved_enc = w->reserved_dec = 0;
    w->cap_max = (td_wcap){o->max_batch, o->max_batch * o->max_beam, o->max_src_len,
                           o->max_length};
    w->cap_min = w->cap_max;
    if (o->grow)
        w->cap_min = (td_wcap){min_int(TD_WCAP_SLOTS0, o->max_batch),
                               min_int(TD_WCAP_ROWS0, w->cap_max.rows),
                               min_int(TD_WCAP_SRC0, o->max_src_len),
                               min_int(TD_WCAP_LEN0, o->max_length)};
    const int64_t L = m->cfg.decoder_layers;
    int failed = 0;
#define ALLOC_LAYER_ARRAY(name, type, rows, width)                              \
    if (!(w->name = calloc((size_t)L, sizeof *w->name)))                        \
        failed = 1;
    TD_WORKER_LAYER_BUFFERS(ALLOC_LAYER_ARRAY)
#undef ALLOC_LAYER_ARRAY
    char why[512] = "out of host memory";
    if (failed || td_wbufs_alloc(w, w->cap_min, why, sizeof why) != 0) {
        snprintf(err, errlen,
                 "worker: cannot allocate its memory on %s (%zu bytes allocated before the "
                 "failure) for max_batch %d, max_src_len %d, max_length %d, max_beam %d: %s; "
                 "lower --max-batch-size, --max-input-tokens or --max-beam",
                 m->dev.name, w->arena_bytes, w->cap_min.slots, w->cap_min.src,
                 w->cap_min.len, o->max_beam, why);
        return -1;
    }
    return td_decode_scratch_init(w, err, errlen);
}

/* A backend for m: w's own when m has w's device and numerics, else a new
 * one (w's freed with its buffers). */
static int worker_backend(td_worker *w, const td_model *m, int n_threads, char *err,
                          size_t errlen)
{
    if (w->be && !strcmp(w->dev.name, m->dev.name) && w->dev.kind == m->dev.kind &&
        w->store == m->store && w->half_activations == m->half_activations &&
        w->o.n_threads == n_threads)
        return 0;
    if (w->be) {
        td_wbufs_free(w);
        w->be->ops->destroy(w->be);
    }
    w->be = backend_create(m, n_threads, err, errlen);
    w->dev = m->dev;
    w->store = m->store;
    w->half_activations = m->half_activations;
    return w->be ? 0 : -1;
}

int td_worker_init(td_worker **out, const td_model *m, const td_worker_opts *opts, char *err,
                   size_t errlen)
{
    *out = NULL;
    td_worker_opts o;
    if (resolve_opts(m, opts, &o, err, errlen) != 0)
        return -1;
    td_worker *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (worker_backend(w, m, o.n_threads, err, errlen) != 0 ||
        worker_build(w, m, &o, err, errlen) != 0) {
        td_worker_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

/* Buffers and scratch sized for w's model serve m with options o as they
 * are: the same options, numerics and every dimension they are sized by. */
static int same_shape(const td_worker *w, const td_model *m, const td_worker_opts *o)
{
    const td_config *a = &w->cfg, *b = &m->cfg;
    int ffn_a = a->encoder_ffn_dim > a->decoder_ffn_dim ? a->encoder_ffn_dim : a->decoder_ffn_dim;
    int ffn_b = b->encoder_ffn_dim > b->decoder_ffn_dim ? b->encoder_ffn_dim : b->decoder_ffn_dim;
    return !memcmp(&w->o, o, sizeof *o) && a->d_model == b->d_model && ffn_a == ffn_b && /* all */
           a->decoder_vocab_size == b->decoder_vocab_size &&
           a->decoder_attention_heads == b->decoder_attention_heads &&
           a->encoder_attention_heads == b->encoder_attention_heads &&
           a->decoder_layers == b->decoder_layers;
}

int td_worker_bind(td_worker *w, const td_model *m, const td_worker_opts *opts, char *err,
                   size_t errlen)
{
    td_worker_opts o;
    if (resolve_opts(m, opts, &o, err, errlen) != 0)
        return -1;
    if (td_run_live(w) > 0) {
        snprintf(err, errlen, "worker: bound to another model while it decodes");
        return -1;
    }
    if (worker_backend(w, m, o.n_threads, err, errlen) != 0)
        return -1;
    if (w->model_id == m->id && w->d_suppress && !memcmp(&w->o, &o, sizeof o)) {
        w->m = m; /* the same model (its weights may have been loaded again) */
        return 0;
    }
    if (!w->d_suppress || !same_shape(w, m, &o))
        return worker_build(w, m, &o, err, errlen);
    w->m = m; /* the same shape: every buffer serves as it is */
    w->model_id = m->id;
    w->cfg = m->cfg;
    w->be->ops->upload(w->be, w->d_suppress, m->cfg.suppress,
                       (size_t)m->cfg.n_suppress * sizeof(int32_t));
    return w->be->ops->sync(w->be, err, errlen) != 0 ? -1 : 0;
}

size_t td_worker_arena_bytes(const td_worker *w)
{
    return w->arena_bytes;
}

int td_worker_max_src_len(const td_worker *w)
{
    return w->o.max_src_len;
}
