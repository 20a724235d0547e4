/*
 * beam_script.h - scripted steps for the beam_step op's tests
 * (test_beam_op.c against the reference rules, tests/gpu/test_gpu_ops.c
 * the CUDA op against the CPU twin): sentences of 1..16 beams and
 * max_length 1..BS_ML in distinct slots of a shared state, joining at
 * different steps, their rows laid out afresh in a random order at every
 * step (as the in-flight decode compacts them), and each row's top-k made
 * as logprobs_topk makes it (running score + log-prob, sorted, ties toward
 * the lower id) from log-probs on a coarse grid, so that ties within and
 * across rows are common, </s> often among them, and </s> forced at a
 * sentence's last step when it asks. Included by one file of each test
 * program: its definitions are that program's.
 */
#ifndef TD_BEAM_SCRIPT_H
#define TD_BEAM_SCRIPT_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "beam_rules.h"

#define BS_MAX_SENT 8
#define BS_MB 16 /* the state's max_beam */
#define BS_ML 12 /* the state's max_len */
#define BS_V 40  /* vocabulary: small, so that </s> comes often */
#define BS_EOS 2
#define BS_MAX_ROWS (BS_MAX_SENT * BS_MB)
#define BS_MAX_KS (2 * BS_MB + 3)

typedef struct bs_sent {
    int slot, B, M, es, forced, t0; /* t0: the script step it joins at */
    float lp;
    int t, done;
} bs_sent;

typedef struct bs_case {
    int n_sent, n_slots;
    bs_sent s[BS_MAX_SENT];
} bs_case;

static inline uint32_t bs_rand(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return (uint32_t)((*x * 0x2545F4914F6CDD1Dull) >> 32);
}

/* A case from its seed; beams: 0 for random, else every sentence's. */
static inline void bs_make(bs_case *c, uint64_t *rng, int beams)
{
    static const float lps[] = {1.0f, 0.5f, 2.0f, 0.0f, -1.5f, 1.3f};
    memset(c, 0, sizeof *c);
    c->n_sent = 1 + (int)(bs_rand(rng) % BS_MAX_SENT);
    c->n_slots = c->n_sent + 2;
    int perm[BS_MAX_SENT + 2];
    for (int i = 0; i < c->n_slots; i++)
        perm[i] = i;
    for (int i = c->n_slots - 1; i > 0; i--) {
        int j = (int)(bs_rand(rng) % (uint32_t)(i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int i = 0; i < c->n_sent; i++) {
        bs_sent *s = &c->s[i];
        s->slot = perm[i];
        s->B = beams ? beams : 1 + (int)(bs_rand(rng) % BS_MB);
        s->M = 1 + (int)(bs_rand(rng) % BS_ML);
        s->es = (int)(bs_rand(rng) % 3);
        s->forced = (int)(bs_rand(rng) % 2);
        s->t0 = (int)(bs_rand(rng) % 4);
        s->lp = lps[bs_rand(rng) % (sizeof lps / sizeof lps[0])];
    }
}

/* The sentences live at script step `step`, in a random row order: their
 * indices in live[], their op rows in sent (row0 consecutive in that
 * order). Returns the rows; *n_live and *ks (2B of the widest beam
 * sentence, 1 when all are greedy, sometimes a little more: the op reads
 * only the first 2B of a row). */
static inline int bs_layout(bs_case *c, int step, uint64_t *rng, int *live, int *n_live,
                            int32_t *sent, int *ks)
{
    int n = 0;
    *n_live = 0;
    *ks = 1;
    for (int i = 0; i < c->n_sent; i++)
        if (!c->s[i].done && step >= c->s[i].t0)
            live[(*n_live)++] = i;
    for (int i = *n_live - 1; i > 0; i--) {
        int j = (int)(bs_rand(rng) % (uint32_t)(i + 1)), x = live[i];
        live[i] = live[j];
        live[j] = x;
    }
    for (int k = 0; k < *n_live; k++) {
        const bs_sent *s = &c->s[live[k]];
        int32_t *r = sent + (int64_t)k * TD_BEAM_FIELDS;
        r[TD_BEAM_SLOT] = s->slot;
        r[TD_BEAM_ROW0] = n;
        r[TD_BEAM_B] = s->B;
        r[TD_BEAM_T] = s->t;
        r[TD_BEAM_M] = s->M;
        r[TD_BEAM_ES] = s->es;
        memcpy(&r[TD_BEAM_LP], &s->lp, sizeof(float));
        n += s->B;
        if (s->B > 1 && 2 * s->B > *ks)
            *ks = 2 * s->B;
    }
    if (*n_live > 0 && bs_rand(rng) % 3 == 0)
        *ks += (int)(bs_rand(rng) % 4);
    return n;
}

typedef struct bs_tv {
    float v;
    int32_t id;
} bs_tv;

static inline int bs_tv_cmp(const void *a, const void *b)
{
    const bs_tv *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* One row's top-ks, as logprobs_topk writes it: run + log p (float32),
 * sorted by value, ties toward the lower id. Log-probs on a grid of 0.25
 * (ties); at a forced last step </s> at log p 0 and the others -inf. */
static inline void bs_row(uint64_t *rng, float run, int forced_now, int ks, float *val,
                          int32_t *idx)
{
    bs_tv all[BS_V];
    const int eos_bias = (int)(bs_rand(rng) % 3); /* </s> likelier in some rows */
    for (int v = 0; v < BS_V; v++) {
        float lp = -0.25f * (float)(1 + bs_rand(rng) % 12);
        if (v == BS_EOS)
            lp = -0.25f * (float)(1 + bs_rand(rng) % (4 - eos_bias));
        if (forced_now)
            lp = v == BS_EOS ? 0.0f : -INFINITY;
        all[v].v = run + lp;
        all[v].id = v;
    }
    qsort(all, BS_V, sizeof all[0], bs_tv_cmp);
    for (int k = 0; k < ks; k++) {
        val[k] = all[k].v;
        idx[k] = all[k].id;
    }
}

/* The op's buffers on one backend. */
typedef struct bs_dev {
    td_backend *be;
    float *st_f, *val;
    int32_t *st_i, *idx, *sent, *out;
} bs_dev;

static inline int64_t bs_fs(void) { return td_beam_f_stride(BS_MB); }
static inline int64_t bs_is(void) { return td_beam_i_stride(BS_MB, BS_ML); }

/* The state of every slot poisoned (the back-pointers are written before
 * they are read; a slot no sentence holds must stay as it is), then each
 * sentence's slot initialised as decode.c does at admission. */
static inline void bs_dev_init(bs_dev *d, td_backend *be, const bs_case *c)
{
    const td_backend_ops *o = be->ops;
    d->be = be;
    const size_t fb = (size_t)(c->n_slots * bs_fs()) * sizeof(float);
    const size_t ib = (size_t)(c->n_slots * bs_is()) * sizeof(int32_t);
    d->st_f = o->alloc(be, fb);
    d->st_i = o->alloc(be, ib);
    d->val = o->alloc(be, (size_t)BS_MAX_ROWS * BS_MAX_KS * sizeof(float));
    d->idx = o->alloc(be, (size_t)BS_MAX_ROWS * BS_MAX_KS * sizeof(int32_t));
    d->sent = o->alloc(be, (size_t)BS_MAX_SENT * TD_BEAM_FIELDS * sizeof(int32_t));
    d->out = o->alloc(be, (size_t)(3 * BS_MAX_ROWS) * sizeof(int32_t));
    ck_assert(d->st_f && d->st_i && d->val && d->idx && d->sent && d->out);
    float *pf = malloc(fb);
    int32_t *pi = malloc(ib);
    ck_assert(pf && pi);
    for (size_t k = 0; k < fb / sizeof(float); k++)
        pf[k] = 777.0f;
    for (size_t k = 0; k < ib / sizeof(int32_t); k++)
        pi[k] = 0x5a5a5a5a;
    for (int i = 0; i < c->n_sent; i++)
        td_beam_init(pf + c->s[i].slot * bs_fs(), pi + c->s[i].slot * bs_is(), BS_MB);
    o->upload(be, d->st_f, pf, fb);
    o->upload(be, d->st_i, pi, ib);
    free(pf);
    free(pi);
}

static inline void bs_dev_free(bs_dev *d)
{
    const td_backend_ops *o = d->be->ops;
    o->dealloc(d->be, d->st_f);
    o->dealloc(d->be, d->st_i);
    o->dealloc(d->be, d->val);
    o->dealloc(d->be, d->idx);
    o->dealloc(d->be, d->sent);
    o->dealloc(d->be, d->out);
}

/* One op call through the backend's table: the inputs uploaded, out
 * (2n + n_sent entries) downloaded; the backend's sync must succeed. */
static inline void bs_dev_step(bs_dev *d, int n, int ks, int n_sent, const float *val,
                               const int32_t *idx, const int32_t *sent, int32_t *out)
{
    const td_backend_ops *o = d->be->ops;
    o->upload(d->be, d->val, val, (size_t)n * ks * sizeof(float));
    o->upload(d->be, d->idx, idx, (size_t)n * ks * sizeof(int32_t));
    o->upload(d->be, d->sent, sent, (size_t)n_sent * TD_BEAM_FIELDS * sizeof(int32_t));
    td_beam_args a = {
        .val = d->val, .idx = d->idx, .n_rows = n, .ks = ks, .sent = d->sent,
        .n_sent = n_sent, .st_f = d->st_f, .st_i = d->st_i, .max_beam = BS_MB,
        .max_len = BS_ML, .vocab = BS_V, .eos_id = BS_EOS, .out = d->out,
    };
    o->beam_step(d->be, &a);
    o->download(d->be, out, d->out, (size_t)(2 * n + n_sent) * sizeof(int32_t));
    char err[512] = "";
    ck_assert_msg(o->sync(d->be, err, sizeof err) == 0, "%s: beam_step: %s", o->name, err);
}

/* Every slot's state read back: (n_slots * bs_fs()) floats and
 * (n_slots * bs_is()) int32. */
static inline void bs_dev_state(bs_dev *d, const bs_case *c, float *f, int32_t *i)
{
    const td_backend_ops *o = d->be->ops;
    o->download(d->be, f, d->st_f, (size_t)(c->n_slots * bs_fs()) * sizeof(float));
    o->download(d->be, i, d->st_i, (size_t)(c->n_slots * bs_is()) * sizeof(int32_t));
}

#endif /* TD_BEAM_SCRIPT_H */
