/*
 * weights.c - binds a checkpoint's tensors (read through the weight-format
 * seam, wformat.h: model.safetensors, ...) to the model's weight structs by
 * transformers' state-dict names, checks every shape against the config,
 * rejects non-finite values and uploads through the backend. Messages name
 * the weight file ("model.safetensors: tensor '...': ...").
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "safetensors.h" /* td_dtype_size */
#include "wformat.h"

typedef struct loader {
    td_model *m;
    td_wsrc src;         /* the checkpoint's tensors */
    float *buf;          /* host conversion buffer */
    size_t buf_cap;      /* floats */
    char *err;
    size_t errlen;
} loader;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(loader *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, L->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static const td_owned_w *find_owned(const td_model *m, const char *name)
{
    for (int i = 0; i < m->n_owned; i++)
        if (strcmp(m->owned[i].name, name) == 0)
            return &m->owned[i];
    return NULL;
}

static int add_owned(loader *L, const char *name, const td_weight *w)
{
    td_model *m = L->m;
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        td_owned_w *o = realloc(m->owned, (size_t)cap * sizeof(*o));
        if (!o)
            return fail(L, "%s: out of memory", L->src.file);
        m->owned = o;
        m->cap_owned = cap;
    }
    char *dup = strdup(name);
    if (!dup)
        return fail(L, "%s: out of memory", L->src.file);
    m->owned[m->n_owned].name = dup;
    m->owned[m->n_owned].w = *w;
    m->n_owned++;
    return 0;
}

static void shape_str(char *out, size_t n, const td_wt *t)
{
    size_t off = 0;
    off += (size_t)snprintf(out + off, n - off, "[");
    for (int i = 0; i < t->rank && off < n; i++)
        off += (size_t)snprintf(out + off, n - off, "%s%lld", i ? ", " : "",
                                (long long)t->shape[i]);
    if (off < n)
        snprintf(out + off, n - off, "]");
}

/* Checks that tensor t has `rows x cols` elements in one of the accepted
 * shapes: (rows, cols); for rows == 1 also (cols). Converts it to float32 in
 * L->buf and rejects non-finite values. */
static int fetch_f32(loader *L, const td_wt *t, int64_t rows, int64_t cols)
{
    int ok = 0;
    if (t->rank == 2 && t->shape[0] == rows && t->shape[1] == cols)
        ok = 1;
    if (rows == 1 && t->rank == 1 && t->shape[0] == cols)
        ok = 1;
    if (!ok) {
        char got[128];
        shape_str(got, sizeof got, t);
        if (rows == 1)
            return fail(L, "%s: tensor '%s': shape %s does not match the config: expected [%lld]",
                        L->src.file, t->name, got, (long long)cols);
        return fail(L, "%s: tensor '%s': shape %s does not match the config: expected [%lld, %lld]",
                    L->src.file, t->name, got, (long long)rows, (long long)cols);
    }
    size_t n = (size_t)(rows * cols);
    if (n > L->buf_cap) {
        float *b = realloc(L->buf, n * sizeof(float));
        if (!b)
            return fail(L, "%s: tensor '%s': out of memory converting %zu values", L->src.file,
                        t->name, n);
        L->buf = b;
        L->buf_cap = n;
    }
    char rerr[512];
    if (L->src.fmt->read_f32(&L->src, t, L->buf, rerr, sizeof rerr) != 0)
        return fail(L, "%s: tensor '%s': %s", L->src.file, t->name, rerr);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(L->buf[i]))
            return fail(L, "%s: tensor '%s': non-finite value %g at flat index %zu",
                        L->src.file, t->name, (double)L->buf[i], i);
    }
    return 0;
}

/* Binds the tensor `name` (rows x cols) to *w. A tensor already uploaded
 * under the same name (tied weights) is shared, not uploaded twice.
 * Missing + required is an error; missing + optional returns 1. */
static int bind_scaled(loader *L, td_weight *w, const char *name, int64_t rows,
                       int64_t cols, int required, float scale)
{
    char key[320];
    if (scale != 1.0f)
        snprintf(key, sizeof key, "%s*%.9g", name, (double)scale);
    else
        snprintf(key, sizeof key, "%s", name);
    const td_owned_w *o = find_owned(L->m, key);
    if (o) {
        if (o->w.rows != rows || o->w.cols != cols)
            return fail(L, "%s: tensor '%s': used as [%lld, %lld] and [%lld, %lld]",
                        L->src.file, name, (long long)o->w.rows, (long long)o->w.cols,
                        (long long)rows, (long long)cols);
        *w = o->w;
        return 0;
    }
    const td_wt *t = L->src.fmt->find(&L->src, name);
    if (!t) {
        if (required)
            return fail(L, "%s: missing tensor '%s'", L->src.file, name);
        return 1;
    }
    if (fetch_f32(L, t, rows, cols) != 0)
        return -1;
    td_backend *be = L->m->be;
    char berr[256];
    /* the backend applies scale (folded in float32, or at use for half) */
    if (be->ops->weight_upload(be, w, L->buf, rows, cols, t->dtype, scale, berr,
                               sizeof berr) != 0)
        return fail(L, "%s: tensor '%s': upload failed: %s", L->src.file, name, berr);
    L->m->weight_bytes += (size_t)(rows * cols) * td_dtype_size(w->dtype);
    if (rows > 1 && !be->keep_float)
        L->m->matrix_dtype = w->dtype;
    if (add_owned(L, key, w) != 0) {
        be->ops->weight_free(be, w);
        return -1;
    }
    return 0;
}

static int bind(loader *L, td_weight *w, const char *name, int64_t rows, int64_t cols)
{
    return bind_scaled(L, w, name, rows, cols, 1, 1.0f);
}

/* Uploads a float32 table (position tables, relative embeddings) that ops
 * take as raw device pointers rather than td_weight. */
static int bind_raw(loader *L, float **out, const char *name, int64_t rows,
                    int64_t cols, int required)
{
    const td_wt *t = L->src.fmt->find(&L->src, name);
    if (!t) {
        if (required)
            return fail(L, "%s: missing tensor '%s'", L->src.file, name);
        return 1;
    }
    if (fetch_f32(L, t, rows, cols) != 0)
        return -1;
    size_t bytes = (size_t)(rows * cols) * sizeof(float);
    float *dev = L->m->be->ops->alloc(L->m->be, bytes);
    if (!dev)
        return fail(L, "%s: tensor '%s': cannot allocate %zu bytes on the device",
                    L->src.file, name, bytes);
    L->m->be->ops->upload(L->m->be, dev, L->buf, bytes);
    L->m->weight_bytes += bytes;
    *out = dev;
    return 0;
}

static int bind_attn(loader *L, td_attn_w *a, const char *prefix, int heads,
                     int relative)
{
    const td_config *c = &L->m->cfg;
    int64_t d = c->d_model;
    int head_dim = c->d_model / heads;
    float scaling = 1.0f / sqrtf((float)head_dim);
    char n[256];
#define NAME(suffix) (snprintf(n, sizeof n, "%s.%s", prefix, suffix), n)
    if (bind_scaled(L, &a->q, NAME("q_proj.weight"), d, d, 1, scaling) ||
        bind_scaled(L, &a->q_b, NAME("q_proj.bias"), 1, d, 1, scaling) ||
        bind(L, &a->k, NAME("k_proj.weight"), d, d) ||
        bind(L, &a->k_b, NAME("k_proj.bias"), 1, d) ||
        bind(L, &a->v, NAME("v_proj.weight"), d, d) ||
        bind(L, &a->v_b, NAME("v_proj.bias"), 1, d) ||
        bind(L, &a->o, NAME("out_proj.weight"), d, d) ||
        bind(L, &a->o_b, NAME("out_proj.bias"), 1, d))
        return -1;
    if (relative) {
        int64_t span = 2 * (int64_t)c->relative_attention_max_distance + 1;
        if (bind_raw(L, &a->rel_k, NAME("relative_key.weight"), span, head_dim, 1) != 0)
            return -1;
        int rc = bind_raw(L, &a->rel_v, NAME("relative_value.weight"), span, head_dim, 0);
        if (rc < 0)
            return -1;
        int has_v = rc == 0;
        if (has_v != L->m->cfg.relative_attention_values)
            return fail(L, "%s: tensor '%s': relative_value weights must be present in every self-attention layer or in none",
                        L->src.file, NAME("relative_value.weight"));
    }
#undef NAME
    return 0;
}

static int bind_ln(loader *L, td_ln_w *ln, const char *prefix)
{
    char n[320]; /* prefixes are at most 255 bytes */
    int64_t d = L->m->cfg.d_model;
    snprintf(n, sizeof n, "%s.weight", prefix);
    if (bind(L, &ln->g, n, 1, d))
        return -1;
    snprintf(n, sizeof n, "%s.bias", prefix);
    return bind(L, &ln->b, n, 1, d) ? -1 : 0;
}

static int bind_layer(loader *L, td_layer_w *lw, const char *side, int i, int is_dec)
{
    const td_config *c = &L->m->cfg;
    int heads = is_dec ? c->decoder_attention_heads : c->encoder_attention_heads;
    int64_t ffn = is_dec ? c->decoder_ffn_dim : c->encoder_ffn_dim;
    int64_t d = c->d_model;
    int rel = c->position_encoding == TD_POS_RELATIVE;
    char p[192], n[256];
    snprintf(p, sizeof p, "model.%s.layers.%d", side, i);

    snprintf(n, sizeof n, "%s.self_attn", p);
    if (bind_attn(L, &lw->self_attn, n, heads, rel))
        return -1;
    snprintf(n, sizeof n, "%s.self_attn_layer_norm", p);
    if (bind_ln(L, &lw->self_attn_ln, n))
        return -1;
    if (is_dec) {
        snprintf(n, sizeof n, "%s.encoder_attn", p);
        if (bind_attn(L, &lw->cross_attn, n, heads, 0))
            return -1;
        snprintf(n, sizeof n, "%s.encoder_attn_layer_norm", p);
        if (bind_ln(L, &lw->cross_attn_ln, n))
            return -1;
    }
    snprintf(n, sizeof n, "%s.fc1.weight", p);
    if (bind(L, &lw->fc1, n, ffn, d))
        return -1;
    snprintf(n, sizeof n, "%s.fc1.bias", p);
    if (bind(L, &lw->fc1_b, n, 1, ffn))
        return -1;
    snprintf(n, sizeof n, "%s.fc2.weight", p);
    if (bind(L, &lw->fc2, n, d, ffn))
        return -1;
    snprintf(n, sizeof n, "%s.fc2.bias", p);
    if (bind(L, &lw->fc2_b, n, 1, d))
        return -1;
    snprintf(n, sizeof n, "%s.final_layer_norm", p);
    return bind_ln(L, &lw->final_ln, n);
}

/* The first present name wins; a present name with the wrong shape is an
 * error, not a reason to fall through (it means a broken checkpoint). */
static int bind_first(loader *L, td_weight *w, const char *const *names, int n_names,
                      int64_t rows, int64_t cols, const char *what)
{
    for (int i = 0; i < n_names; i++) {
        if (!names[i])
            continue;
        int rc = bind_scaled(L, w, names[i], rows, cols, 0, 1.0f);
        if (rc <= 0)
            return rc;
    }
    char list[512];
    size_t off = 0;
    list[0] = 0;
    for (int i = 0; i < n_names; i++)
        if (names[i] && off < sizeof list)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s'",
                                    off ? ", " : "", names[i]);
    return fail(L, "%s: missing tensor for %s (looked for %s)", L->src.file, what, list);
}

static int bind_embeddings(loader *L)
{
    td_model *m = L->m;
    const td_config *c = &m->cfg;
    int64_t d = c->d_model;
    int shared_ok = c->share_encoder_decoder_embeddings;

    const char *enc[] = {"model.encoder.embed_tokens.weight", "model.shared.weight"};
    if (bind_first(L, &m->enc_embed, enc, 2, c->vocab_size, d, "the encoder embeddings"))
        return -1;
    const char *dec[] = {"model.decoder.embed_tokens.weight",
                         shared_ok ? "model.shared.weight" : NULL};
    if (bind_first(L, &m->dec_embed, dec, 2, c->decoder_vocab_size, d, "the decoder embeddings"))
        return -1;
    /* lm_head.weight, then (tied) model.shared.weight, then
     * model.decoder.embed_tokens.weight. */
    const char *head[] = {"lm_head.weight",
                          (c->tie_word_embeddings && shared_ok) ? "model.shared.weight" : NULL,
                          c->tie_word_embeddings ? "model.decoder.embed_tokens.weight" : NULL};
    if (bind_first(L, &m->lm_head, head, 3, c->decoder_vocab_size, d,
                   c->tie_word_embeddings ? "the output projection"
                                          : "the output projection (tie_word_embeddings is false)"))
        return -1;
    int rc = bind_scaled(L, &m->lm_bias, "final_logits_bias", 1, c->decoder_vocab_size, 0, 1.0f);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        /* transformers registers final_logits_bias as a zero buffer. */
        size_t n = (size_t)c->decoder_vocab_size;
        float *z = calloc(n, sizeof(float));
        if (!z)
            return fail(L, "final_logits_bias: out of memory");
        char berr[256];
        int urc = m->be->ops->weight_upload(m->be, &m->lm_bias, z, 1, (int64_t)n, TD_F32,
                                            1.0f, berr, sizeof berr);
        free(z);
        if (urc != 0)
            return fail(L, "final_logits_bias: upload failed: %s", berr);
        m->weight_bytes += n * sizeof(float);
        if (add_owned(L, "final_logits_bias", &m->lm_bias))
            return -1;
    }
    return 0;
}

int td_weights_load(td_model *m, char *err, size_t errlen)
{
    loader L;
    memset(&L, 0, sizeof L);
    L.m = m;
    L.err = err;
    L.errlen = errlen;
    td_config *c = &m->cfg;

    if (td_wsrc_open(&L.src, m->dir, err, errlen) != 0)
        return -1;
    const td_wt *first = L.src.fmt->count(&L.src) > 0 ? L.src.fmt->tensor(&L.src, 0) : NULL;
    m->file_dtype = first ? first->dtype : TD_F32;

    int rc = -1;
    if (c->position_encoding == TD_POS_RELATIVE) {
        /* relative_value is optional: its presence in the first encoder
         * layer decides, every other layer must agree. */
        c->relative_attention_values =
            L.src.fmt->find(&L.src, "model.encoder.layers.0.self_attn.relative_value.weight") != NULL;
    }
    m->enc = calloc((size_t)c->encoder_layers, sizeof(td_layer_w));
    m->dec = calloc((size_t)c->decoder_layers, sizeof(td_layer_w));
    if (!m->enc || !m->dec) {
        fail(&L, "%s: out of memory", L.src.file);
        goto done;
    }
    /* the embedding tables and the output projection stay float32 under a
     * lossy integer storage (backend.h, keep_float) */
    m->be->keep_float = 1;
    const int emb_rc = bind_embeddings(&L);
    m->be->keep_float = 0;
    if (emb_rc)
        goto done;
    for (int i = 0; i < c->encoder_layers; i++)
        if (bind_layer(&L, &m->enc[i], "encoder", i, 0))
            goto done;
    for (int i = 0; i < c->decoder_layers; i++)
        if (bind_layer(&L, &m->dec[i], "decoder", i, 1))
            goto done;
    if (c->normalize_before) {
        if (bind_ln(&L, &m->enc_final_ln, "model.encoder.layer_norm") ||
            bind_ln(&L, &m->dec_final_ln, "model.decoder.layer_norm"))
            goto done;
    }
    if (c->position_encoding == TD_POS_LEARNED) {
        if (bind_raw(&L, &m->enc_pos, "model.encoder.embed_positions.weight",
                     c->max_position_embeddings, c->d_model, 1) ||
            bind_raw(&L, &m->dec_pos, "model.decoder.embed_positions.weight",
                     c->max_position_embeddings, c->d_model, 1))
            goto done;
    }
    rc = 0;
done:
    free(L.buf);
    td_wsrc_close(&L.src);
    return rc;
}

static void free_raw(td_model *m, float **p)
{
    if (*p)
        m->be->ops->dealloc(m->be, *p);
    *p = NULL;
}

void td_weights_free(td_model *m)
{
    if (!m || !m->be)
        return;
    for (int i = 0; i < m->n_owned; i++) {
        m->be->ops->weight_free(m->be, &m->owned[i].w);
        free(m->owned[i].name);
    }
    free(m->owned);
    m->owned = NULL;
    m->n_owned = m->cap_owned = 0;
    for (int side = 0; side < 2; side++) {
        td_layer_w *layers = side ? m->dec : m->enc;
        int n = side ? m->cfg.decoder_layers : m->cfg.encoder_layers;
        for (int i = 0; layers && i < n; i++) {
            free_raw(m, &layers[i].self_attn.rel_k);
            free_raw(m, &layers[i].self_attn.rel_v);
        }
    }
    free(m->enc);
    free(m->dec);
    m->enc = m->dec = NULL;
    if (m->dec_pos == m->enc_pos)
        m->dec_pos = NULL;
    free_raw(m, &m->enc_pos);
    free_raw(m, &m->dec_pos);
    if (m->dec_rope == m->enc_rope)
        m->dec_rope = NULL;
    free_raw(m, &m->enc_rope);
    free_raw(m, &m->dec_rope);
}
