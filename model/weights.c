/*
 * weights.c - binds a checkpoint's tensors (read through the weight-format
 * seam, wformat.h: model.safetensors, ...) to the model's weight structs by
 * role, named by the model's architecture (arch.h), checks every shape against the config,
 * rejects non-finite values and uploads through the backend. Messages name
 * the weight file ("model.safetensors: tensor '...': ...").
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "model_internal.h"
#include "safetensors.h" /* td_dtype_size */
#include "wformat.h"

typedef struct loader {
    td_model *m;
    const td_arch *arch; /* the names of the tensors by role */
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

/* Checks that tensor t holds `parts` stacked blocks of `rows x cols`
 * elements in one of the accepted shapes: (parts*rows, cols); for rows == 1
 * also (parts*cols). Converts it to float32 in L->buf, rejects non-finite
 * values and moves block `part` to the front of L->buf. */
static int fetch_f32(loader *L, const td_wt *t, int64_t rows, int64_t cols, int part, int parts)
{
    int ok = 0;
    if (t->rank == 2 && t->shape[0] == rows * parts && t->shape[1] == cols)
        ok = 1;
    if (rows == 1 && t->rank == 1 && t->shape[0] == cols * parts)
        ok = 1;
    if (!ok) {
        char got[128];
        shape_str(got, sizeof got, t);
        if (rows == 1)
            return fail(L, "%s: tensor '%s': shape %s does not match the config: expected [%lld]",
                        L->src.file, t->name, got, (long long)(cols * parts));
        return fail(L, "%s: tensor '%s': shape %s does not match the config: expected [%lld, %lld]",
                    L->src.file, t->name, got, (long long)(rows * parts), (long long)cols);
    }
    size_t n = (size_t)(rows * cols) * (size_t)parts;
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
    if (part > 0)
        memmove(L->buf, L->buf + (size_t)part * (size_t)(rows * cols),
                (size_t)(rows * cols) * sizeof(float));
    return 0;
}

/* The owned-weight key of a candidate: its name, its part, its scale. */
static void tref_key(char *key, size_t n, const td_tref *t, float scale)
{
    size_t off = (size_t)snprintf(key, n, "%s", t->name);
    if (t->parts > 1 && off < n)
        off += (size_t)snprintf(key + off, n - off, "#%d/%d", t->part, t->parts);
    if (scale != 1.0f && off < n)
        snprintf(key + off, n - off, "*%.9g", (double)scale);
}

/* Binds one candidate (rows x cols) to *w. A tensor already uploaded under
 * the same key (tied weights) is shared, not uploaded twice. Returns 0, 1
 * when the tensor is absent, -1 on error. */
static int bind_tref(loader *L, td_weight *w, const td_tref *t, int64_t rows, int64_t cols,
                     float scale)
{
    char key[320];
    tref_key(key, sizeof key, t, scale);
    const td_owned_w *o = find_owned(L->m, key);
    if (o) {
        if (o->w.rows != rows || o->w.cols != cols)
            return fail(L, "%s: tensor '%s': used as [%lld, %lld] and [%lld, %lld]",
                        L->src.file, t->name, (long long)o->w.rows, (long long)o->w.cols,
                        (long long)rows, (long long)cols);
        *w = o->w;
        return 0;
    }
    const td_wt *wt = L->src.fmt->find(&L->src, t->name);
    if (!wt)
        return 1;
    if (fetch_f32(L, wt, rows, cols, t->part, t->parts) != 0)
        return -1;
    td_backend *be = L->m->be;
    char berr[256];
    /* the backend applies scale (folded in float32, or at use for half) */
    if (be->ops->weight_upload(be, w, L->buf, rows, cols, wt->dtype, scale, berr,
                               sizeof berr) != 0)
        return fail(L, "%s: tensor '%s': upload failed: %s", L->src.file, t->name, berr);
    L->m->weight_bytes += (size_t)(rows * cols) * td_dtype_size(w->dtype);
    if (rows > 1 && !be->keep_float)
        L->m->matrix_dtype = w->dtype;
    if (add_owned(L, key, w) != 0) {
        be->ops->weight_free(be, w);
        return -1;
    }
    return 0;
}

/* The architecture's candidates of a role; 0 when it has none. */
static int role_names(loader *L, td_role r, int dec, int layer, td_tref c[TD_ARCH_CANDIDATES])
{
    return L->arch->names(&L->m->cfg, r, dec, layer, c);
}

/* "the candidates a, b" for a missing role's message. */
static void list_names(char *list, size_t size, const td_tref *c, int n)
{
    size_t off = 0;
    list[0] = 0;
    for (int i = 0; i < n && off < size; i++)
        off += (size_t)snprintf(list + off, size - off, "%s'%s'", off ? ", " : "", c[i].name);
}

/* Binds role r (rows x cols): the first present candidate wins; a present
 * one with the wrong shape is an error, not a reason to fall through (it
 * means a broken checkpoint). Missing + required is an error naming the
 * candidates (and `what` when there are several); missing + optional
 * returns 1. */
static int bind_role(loader *L, td_weight *w, td_role r, int dec, int layer, int64_t rows,
                     int64_t cols, int required, float scale, const char *what)
{
    td_tref c[TD_ARCH_CANDIDATES];
    int n = role_names(L, r, dec, layer, c);
    for (int i = 0; i < n; i++) {
        int rc = bind_tref(L, w, &c[i], rows, cols, scale);
        if (rc <= 0)
            return rc;
    }
    if (!required)
        return 1;
    if (n == 0)
        return fail(L, "%s: architecture '%s' has no tensor for %s", L->src.file,
                    L->arch->model_type, what ? what : td_role_name(r));
    if (n == 1 && !what)
        return fail(L, "%s: missing tensor '%s'", L->src.file, c[0].name);
    char list[512];
    list_names(list, sizeof list, c, n);
    return fail(L, "%s: missing tensor for %s (looked for %s)", L->src.file,
                what ? what : td_role_name(r), list);
}

static int bind(loader *L, td_weight *w, td_role r, int dec, int layer, int64_t rows,
                int64_t cols)
{
    return bind_role(L, w, r, dec, layer, rows, cols, 1, 1.0f, NULL);
}

/* Uploads a float32 table (position tables, relative embeddings) that ops
 * take as raw device pointers rather than td_weight. */
static int bind_raw(loader *L, float **out, td_role r, int dec, int layer, int64_t rows,
                    int64_t cols, int required)
{
    td_tref c[TD_ARCH_CANDIDATES];
    int n = role_names(L, r, dec, layer, c);
    const td_wt *t = NULL;
    int i = 0;
    for (; i < n && !t; i++)
        t = L->src.fmt->find(&L->src, c[i].name);
    if (!t) {
        if (required && n > 0)
            return fail(L, "%s: missing tensor '%s'", L->src.file, c[0].name);
        if (required)
            return fail(L, "%s: architecture '%s' has no tensor for %s", L->src.file,
                        L->arch->model_type, td_role_name(r));
        return 1;
    }
    if (fetch_f32(L, t, rows, cols, c[i - 1].part, c[i - 1].parts) != 0)
        return -1;
    size_t bytes = (size_t)(rows * cols) * sizeof(float);
    float *dev = L->m->be->ops->alloc(L->m->be, bytes);
    if (!dev)
        return fail(L, "%s: tensor '%s': cannot allocate %zu bytes on the device",
                    L->src.file, t->name, bytes);
    L->m->be->ops->upload(L->m->be, dev, L->buf, bytes);
    L->m->weight_bytes += bytes;
    *out = dev;
    return 0;
}

/* The roles of one attention block, from its Q weight role on (arch.h
 * lists each block's roles in the same order). */
enum { A_Q_W, A_Q_B, A_K_W, A_K_B, A_V_W, A_V_B, A_O_W, A_O_B };

static int bind_attn(loader *L, td_attn_w *a, td_role first, int dec, int layer, int heads,
                     int relative)
{
    const td_config *c = &L->m->cfg;
    int64_t d = c->d_model;
    int head_dim = c->d_model / heads;
    float scaling = 1.0f / sqrtf((float)head_dim);
#define R(k) ((td_role)(first + (k)))
    if (bind_role(L, &a->q, R(A_Q_W), dec, layer, d, d, 1, scaling, NULL) ||
        bind_role(L, &a->q_b, R(A_Q_B), dec, layer, 1, d, 1, scaling, NULL) ||
        bind(L, &a->k, R(A_K_W), dec, layer, d, d) ||
        bind(L, &a->k_b, R(A_K_B), dec, layer, 1, d) ||
        bind(L, &a->v, R(A_V_W), dec, layer, d, d) ||
        bind(L, &a->v_b, R(A_V_B), dec, layer, 1, d) ||
        bind(L, &a->o, R(A_O_W), dec, layer, d, d) ||
        bind(L, &a->o_b, R(A_O_B), dec, layer, 1, d))
        return -1;
#undef R
    if (relative) {
        int64_t span = 2 * (int64_t)c->relative_attention_max_distance + 1;
        if (bind_raw(L, &a->rel_k, TD_R_SA_REL_K, dec, layer, span, head_dim, 1) != 0)
            return -1;
        int rc = bind_raw(L, &a->rel_v, TD_R_SA_REL_V, dec, layer, span, head_dim, 0);
        if (rc < 0)
            return -1;
        int has_v = rc == 0;
        if (has_v != L->m->cfg.relative_attention_values) {
            td_tref n[TD_ARCH_CANDIDATES];
            int k = role_names(L, TD_R_SA_REL_V, dec, layer, n);
            return fail(L, "%s: tensor '%s': relative_value weights must be present in every self-attention layer or in none",
                        L->src.file, k ? n[0].name : "relative_value");
        }
    }
    return 0;
}

static int bind_ln(loader *L, td_ln_w *ln, td_role g, int dec, int layer)
{
    int64_t d = L->m->cfg.d_model;
    if (bind(L, &ln->g, g, dec, layer, 1, d))
        return -1;
    return bind(L, &ln->b, (td_role)(g + 1), dec, layer, 1, d) ? -1 : 0;
}

static int bind_layer(loader *L, td_layer_w *lw, int i, int is_dec)
{
    const td_config *c = &L->m->cfg;
    int heads = is_dec ? c->decoder_attention_heads : c->encoder_attention_heads;
    int64_t ffn = is_dec ? c->decoder_ffn_dim : c->encoder_ffn_dim;
    int64_t d = c->d_model;
    int rel = c->position_encoding == TD_POS_RELATIVE;

    if (bind_attn(L, &lw->self_attn, TD_R_SA_Q_W, is_dec, i, heads, rel) ||
        bind_ln(L, &lw->self_attn_ln, TD_R_SA_LN_W, is_dec, i))
        return -1;
    if (is_dec) {
        if (bind_attn(L, &lw->cross_attn, TD_R_CA_Q_W, is_dec, i, heads, 0) ||
            bind_ln(L, &lw->cross_attn_ln, TD_R_CA_LN_W, is_dec, i))
            return -1;
    }
    if (bind(L, &lw->fc1, TD_R_FC1_W, is_dec, i, ffn, d) ||
        bind(L, &lw->fc1_b, TD_R_FC1_B, is_dec, i, 1, ffn) ||
        bind(L, &lw->fc2, TD_R_FC2_W, is_dec, i, d, ffn) ||
        bind(L, &lw->fc2_b, TD_R_FC2_B, is_dec, i, 1, d))
        return -1;
    return bind_ln(L, &lw->final_ln, TD_R_FFN_LN_W, is_dec, i);
}

/* The decoder embeddings with one more row, zero, after the vocabulary's:
 * the decoder's first input when it starts from a zero vector
 * (decoder_start_zero, CTranslate2's start_from_zero_embedding), named by
 * decoder_start_token_id = decoder_vocab_size. */
static int bind_dec_embed_zero(loader *L, td_weight *w)
{
    const td_config *c = &L->m->cfg;
    const int64_t V = c->decoder_vocab_size, d = c->d_model;
    td_tref cand[TD_ARCH_CANDIDATES];
    int n = role_names(L, TD_R_DEC_EMBED, 1, 0, cand), i = 0;
    const td_wt *t = NULL;
    for (; i < n && !t; i++)
        t = L->src.fmt->find(&L->src, cand[i].name);
    if (!t)
        return fail(L, "%s: missing tensor for the decoder embeddings", L->src.file);
    if (fetch_f32(L, t, V, d, cand[i - 1].part, cand[i - 1].parts) != 0)
        return -1;
    float *b = realloc(L->buf, (size_t)((V + 1) * d) * sizeof(float));
    if (!b)
        return fail(L, "%s: tensor '%s': out of memory", L->src.file, t->name);
    L->buf = b;
    L->buf_cap = (size_t)((V + 1) * d);
    memset(b + V * d, 0, (size_t)d * sizeof(float));
    td_backend *be = L->m->be;
    char berr[256], key[320];
    if (be->ops->weight_upload(be, w, b, V + 1, d, t->dtype, 1.0f, berr, sizeof berr) != 0)
        return fail(L, "%s: tensor '%s': upload failed: %s", L->src.file, t->name, berr);
    L->m->weight_bytes += (size_t)((V + 1) * d) * td_dtype_size(w->dtype);
    snprintf(key, sizeof key, "%s#zero-start", t->name);
    if (add_owned(L, key, w) != 0) {
        be->ops->weight_free(be, w);
        return -1;
    }
    return 0;
}

static int bind_embeddings(loader *L)
{
    td_model *m = L->m;
    const td_config *c = &m->cfg;
    int64_t d = c->d_model;

    if (bind_role(L, &m->enc_embed, TD_R_ENC_EMBED, 0, 0, c->vocab_size, d, 1, 1.0f,
                  "the encoder embeddings") ||
        (c->decoder_start_zero
             ? bind_dec_embed_zero(L, &m->dec_embed)
             : bind_role(L, &m->dec_embed, TD_R_DEC_EMBED, 1, 0, c->decoder_vocab_size, d, 1,
                         1.0f, "the decoder embeddings")) ||
        bind_role(L, &m->lm_head, TD_R_LM_HEAD, 1, 0, c->decoder_vocab_size, d, 1, 1.0f,
                  c->tie_word_embeddings
                      ? "the output projection"
                      : "the output projection (tie_word_embeddings is false)"))
        return -1;
    int rc = bind_role(L, &m->lm_bias, TD_R_LM_BIAS, 1, 0, 1, c->decoder_vocab_size, 0, 1.0f,
                       NULL);
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

    L.arch = td_arch_find(c->model_type);
    if (!L.arch) {
        snprintf(err, errlen, "config.json: key 'model_type': unknown architecture '%s'",
                 c->model_type);
        return -1;
    }
    if (td_wsrc_open(&L.src, m->dir, err, errlen) != 0)
        return -1;
    const td_wt *first = L.src.fmt->count(&L.src) > 0 ? L.src.fmt->tensor(&L.src, 0) : NULL;
    m->file_dtype = first ? first->dtype : TD_F32;

    int rc = -1;
    if (c->position_encoding == TD_POS_RELATIVE) {
        /* relative_value is optional: its presence in the first encoder
         * layer decides, every other layer must agree. */
        td_tref rv[TD_ARCH_CANDIDATES];
        int n = role_names(&L, TD_R_SA_REL_V, 0, 0, rv);
        c->relative_attention_values = n > 0 && L.src.fmt->find(&L.src, rv[0].name) != NULL;
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
        if (bind_layer(&L, &m->enc[i], i, 0))
            goto done;
    for (int i = 0; i < c->decoder_layers; i++)
        if (bind_layer(&L, &m->dec[i], i, 1))
            goto done;
    if (c->normalize_before) {
        if (bind_ln(&L, &m->enc_final_ln, TD_R_ENC_NORM_W, 0, 0) ||
            bind_ln(&L, &m->dec_final_ln, TD_R_DEC_NORM_W, 1, 0))
            goto done;
    }
    if (c->position_encoding == TD_POS_LEARNED) {
        /* position_offset rows before position 0 (td_pos_row) */
        const int64_t n_abs = (int64_t)c->max_position_embeddings + c->position_offset;
        if (bind_raw(&L, &m->enc_pos, TD_R_ENC_POS, 0, 0, n_abs, c->d_model, 1) ||
            bind_raw(&L, &m->dec_pos, TD_R_DEC_POS, 1, 0, n_abs, c->d_model, 1))
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
