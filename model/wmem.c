/*
 * wmem.c - a worker's device buffers: the table of model_internal.h
 * allocated, freed and totalled for a set of capacities, and grown along
 * their ladders with the running decode's state carried over
 * (td_worker_grow). translator.c makes and frees workers with it, decode.c
 * grows them as sentences need.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* The device buffers, freed (the per-layer pointer arrays stay). */
void td_wbufs_free(td_worker *w)
{
    td_backend *be = w->be;
    const int L = w->cfg.decoder_layers;
#define FREE_BUF(name, type, rows, width)                                       \
    be->ops->dealloc(be, w->name);                                              \
    w->name = NULL;
#define FREE_LAYER_BUF(name, type, rows, width)                                 \
    for (int l = 0; w->name && l < L; l++) {                                    \
        be->ops->dealloc(be, w->name[l]);                                       \
        w->name[l] = NULL;                                                      \
    }
    TD_WORKER_BUFFERS(FREE_BUF)
    TD_WORKER_SLOT_BUFFERS(FREE_BUF)
    TD_WORKER_LAYER_BUFFERS(FREE_LAYER_BUF)
#undef FREE_BUF
#undef FREE_LAYER_BUF
    w->arena_bytes = 0;
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
    const td_config *c = &w->cfg;
    const int64_t ER = (int64_t)cap.slots * cap.src;
    const td_wsizes sz = {
        .n_enc = ER, .n_dec = cap.rows, .n_dec_t = (int64_t)cap.rows * cap.len,
        .n_batch = cap.slots, .n_one = 1, .w_d = c->d_model,
        .w_ffn = c->encoder_ffn_dim > c->decoder_ffn_dim ? c->encoder_ffn_dim
                                                          : c->decoder_ffn_dim,
        .w_vocab = c->decoder_vocab_size, .w_topk = 2 * 2 * (int64_t)w->o.max_beam,
        .w_heads_s = (int64_t)c->decoder_attention_heads * cap.src,
        .w_suppress = TD_MAX_SUPPRESS, .w_rowf = TD_STEP_ROW_FIELDS,
        .w_beams = TD_BEAM_FIELDS, .w_beamf = td_beam_f_stride(w->o.max_beam),
        .w_beami = td_beam_i_stride(w->o.max_beam, w->o.max_length), .w_three = 3, .w_two = 2,
        .w_one = 1,
    };
    return sz;
}

/* The bytes of the buffer table for capacities cap (0: it overflows). */
static size_t wbytes(const td_worker *w, td_wcap cap)
{
    const td_wsizes sz = wsizes(w, cap);
    const int64_t L = w->cfg.decoder_layers;
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
    TD_WORKER_SLOT_BUFFERS(SUM_BUF)
    TD_WORKER_LAYER_BUFFERS(SUM_LAYER_BUF)
#undef SUM_BUF
#undef SUM_LAYER_BUF
    return over ? 0 : total;
}

/* Allocates every buffer for capacities cap (after bufs_free) and readies
 * them (GEMM scratch, the suppressed ids). Returns 0, or -1 with the
 * backend's message (the buffers allocated so far stay for bufs_free). */
int td_wbufs_alloc(td_worker *w, td_wcap cap, char *why, size_t whylen)
{
    const td_config *c = &w->cfg;
    const int64_t L = c->decoder_layers;
    const td_wsizes sz = wsizes(w, cap);
    int failed = 0;
    w->cap = cap;
#define ALLOC_BUF(name, type, rows, width)                                      \
    w->name = walloc(w, sz.n_##rows, sz.w_##width, sizeof(type), &failed);
#define ALLOC_SLOT_BUF(name, type, rows, width)                                 \
    if (!w->name) /* a running decode's state, moved in by resize */            \
        w->name = walloc(w, sz.n_##rows, sz.w_##width, sizeof(type), &failed);
#define ALLOC_LAYER_BUF(name, type, rows, width)                                \
    if (!w->name[l]) /* a running decode's state, moved in by resize */         \
        w->name[l] = walloc(w, sz.n_##rows, sz.w_##width, sizeof(type), &failed);
    TD_WORKER_BUFFERS(ALLOC_BUF)
    TD_WORKER_SLOT_BUFFERS(ALLOC_SLOT_BUF)
    for (int64_t l = 0; !failed && l < L; l++) {
        TD_WORKER_LAYER_BUFFERS(ALLOC_LAYER_BUF)
    }
#undef ALLOC_BUF
#undef ALLOC_SLOT_BUF
#undef ALLOC_LAYER_BUF
    if (failed) {
        /* the backend latched the failing allocation (size, free memory) */
        snprintf(why, whylen, "out of memory");
        (void)w->be->ops->sync(w->be, why, whylen);
        return -1;
    }
    /* temporary memory of the largest linears (GPU GEMM scratch, int8
     * activations), now rather than during the first request that needs
     * it; only for more rows than reserved before (never on a trim, which
     * may run while the model bound is gone) */
    if (w->be->ops->reserve_linear && c->encoder_layers > 0 && c->decoder_layers > 0 &&
        (sz.n_enc > w->reserved_enc || sz.n_dec > w->reserved_dec)) {
        const td_model *m = w->m;
        const td_layer_w *el = &m->enc[0], *dl = &m->dec[0];
        const td_weight *enc_w[] = {&el->self_attn.q, &el->fc1, &el->fc2, &dl->cross_attn.k};
        const td_weight *dec_w[] = {&dl->self_attn.q, &dl->cross_attn.q, &dl->fc1, &dl->fc2,
                                    &m->lm_head};
        for (size_t i = 0; i < sizeof enc_w / sizeof enc_w[0]; i++)
            w->be->ops->reserve_linear(w->be, enc_w[i], sz.n_enc);
        for (size_t i = 0; i < sizeof dec_w / sizeof dec_w[0]; i++)
            w->be->ops->reserve_linear(w->be, dec_w[i], sz.n_dec);
        w->reserved_enc = sz.n_enc > w->reserved_enc ? (int)sz.n_enc : w->reserved_enc;
        w->reserved_dec = sz.n_dec > w->reserved_dec ? (int)sz.n_dec : w->reserved_dec;
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

/* Reallocates the buffers for capacities cap. The running decode's state
 * (the self-attention caches of its rows, the cross K/V of its slots) is
 * copied into new buffers first, row by row at the new strides
 * (scatter_rows through an identity index), and so is the slots' search
 * state (copied, its stride unchanged), so a decode goes on across a
 * growth; the other buffers hold nothing between two steps and are
 * reallocated. Growing only when rows run (a trim waits for an idle
 * worker). On failure to get the new state buffers nothing changed
 * (TD_EINVAL); a failure after that is TD_EDEVICE. */
int td_worker_resize(td_worker *w, td_wcap cap, int rows_live, int carry, char *err,
                     size_t errlen)
{
    const td_wcap old = w->cap;
    const td_config *c = &w->cfg;
    const td_backend_ops *ops = w->be->ops;
    const int L = c->decoder_layers;
    const int64_t d = c->d_model;
    const td_wsizes sn = wsizes(w, cap);
    float **st = calloc((size_t)4 * L, sizeof *st); /* new self_k, self_v, cross_k, cross_v */
    int failed = st == NULL;
    const size_t arena = w->arena_bytes;
    for (int l = 0; carry && !failed && l < L; l++) {
        st[4 * l] = walloc(w, sn.n_dec_t, sn.w_d, sizeof(float), &failed);
        st[4 * l + 1] = walloc(w, sn.n_dec_t, sn.w_d, sizeof(float), &failed);
        st[4 * l + 2] = walloc(w, sn.n_enc, sn.w_d, sizeof(float), &failed);
        st[4 * l + 3] = walloc(w, sn.n_enc, sn.w_d, sizeof(float), &failed);
    }
    /* the slots' search state, at the same stride */
    float *beam_f = NULL;
    int32_t *beam_i = NULL;
    if (carry && !failed) {
        beam_f = walloc(w, sn.n_batch, sn.w_beamf, sizeof(float), &failed);
        beam_i = walloc(w, sn.n_batch, sn.w_beami, sizeof(int32_t), &failed);
    }
    char why[512] = "out of host memory";
    if (failed) {
        for (int l = 0; st && l < 4 * L; l++)
            ops->dealloc(w->be, st[l]);
        free(st);
        ops->dealloc(w->be, beam_f);
        ops->dealloc(w->be, beam_i);
        (void)ops->sync(w->be, why, sizeof why);
        w->arena_bytes = arena;
        snprintf(err, errlen,
                 "worker: cannot grow its memory on %s to %d sentences, %d rows, %d source and "
                 "%d generated tokens (%zu bytes): %s",
                 w->dev.name, cap.slots, cap.rows, cap.src, cap.len, wbytes(w, cap), why);
        return TD_EINVAL;
    }
    if (carry) {
        /* an identity index over the old rows and slots (the old gather
         * buffer holds 2 x rows >= both) */
        const int n_ident = rows_live > old.slots ? rows_live : old.slots;
        int32_t *ident = malloc((size_t)n_ident * sizeof *ident);
        if (!ident) {
            for (int l = 0; l < 4 * L; l++)
                ops->dealloc(w->be, st[l]);
            free(st);
            ops->dealloc(w->be, beam_f);
            ops->dealloc(w->be, beam_i);
            w->arena_bytes = arena;
            snprintf(err, errlen, "worker: out of host memory growing its buffers");
            return TD_EINVAL;
        }
        for (int i = 0; i < n_ident; i++)
            ident[i] = i;
        ops->upload(w->be, w->d_gather, ident, (size_t)n_ident * sizeof *ident);
        for (int l = 0; l < L; l++) {
            if (rows_live > 0) {
                ops->scatter_rows(w->be, st[4 * l], cap.len * d, w->self_k[l], old.len * d,
                                  w->d_gather, rows_live, old.len * d);
                ops->scatter_rows(w->be, st[4 * l + 1], cap.len * d, w->self_v[l],
                                  old.len * d, w->d_gather, rows_live, old.len * d);
            }
            ops->scatter_rows(w->be, st[4 * l + 2], cap.src * d, w->cross_k[l], old.src * d,
                              w->d_gather, old.slots, old.src * d);
            ops->scatter_rows(w->be, st[4 * l + 3], cap.src * d, w->cross_v[l], old.src * d,
                              w->d_gather, old.slots, old.src * d);
        }
        ops->copy(w->be, beam_f, w->beam_f, (size_t)old.slots * sn.w_beamf * sizeof(float));
        ops->copy(w->be, beam_i, w->beam_i, (size_t)old.slots * sn.w_beami * sizeof(int32_t));
        int rc = ops->sync(w->be, why, sizeof why);
        free(ident);
        if (rc != 0) {
            for (int l = 0; l < 4 * L; l++)
                ops->dealloc(w->be, st[l]);
            free(st);
            ops->dealloc(w->be, beam_f);
            ops->dealloc(w->be, beam_i);
            snprintf(err, errlen, "worker: copying its state to grown buffers: %s", why);
            return TD_EDEVICE;
        }
    }
    td_wbufs_free(w);
    for (int l = 0; carry && l < L; l++) {
        w->self_k[l] = st[4 * l];
        w->self_v[l] = st[4 * l + 1];
        w->cross_k[l] = st[4 * l + 2];
        w->cross_v[l] = st[4 * l + 3];
    }
    free(st);
    w->beam_f = beam_f; /* NULL without carry: allocated afresh */
    w->beam_i = beam_i;
    if (td_wbufs_alloc(w, cap, why, sizeof why) == 0) {
        w->arena_bytes = wbytes(w, cap);
        return 0;
    }
    td_wbufs_free(w);
    snprintf(err, errlen, "worker: cannot reallocate its memory on %s (%d sentences, %d rows, "
             "%d source and %d generated tokens): %s", w->dev.name, cap.slots, cap.rows,
             cap.src, cap.len, why);
    if (!carry && td_wbufs_alloc(w, old, why, sizeof why) == 0) {
        w->arena_bytes = wbytes(w, old);
        return TD_EINVAL;
    }
    return TD_EDEVICE;
}

int td_worker_grow(td_worker *w, td_wcap need, int rows_live, int carry, char *err,
                   size_t errlen)
{
    td_wcap want = {
        .slots = ladder(need.slots, w->cap.slots, w->cap_max.slots),
        .src = ladder(need.src, w->cap.src, w->cap_max.src),
        .len = ladder(need.len, w->cap.len, w->cap_max.len),
    };
    /* at least as many rows as slots: the identity index of a growth
     * covers both (resize) */
    want.rows = ladder(need.rows > want.slots ? need.rows : want.slots, w->cap.rows,
                       w->cap_max.rows);
    if (!memcmp(&want, &w->cap, sizeof want))
        return 0;
    return td_worker_resize(w, want, rows_live, carry, err, errlen);
}


size_t td_worker_max_bytes(const td_worker *w)
{
    return wbytes(w, w->cap_max);
}
