/*
 * test_gpu_attention.c - the CUDA backend's attention op against the CPU
 * backend's (cpu/cpu_backend.c), for each of its kernels: the one the op
 * picks (the row kernel when probabilities are captured), the flash kernel
 * (gpu/gpu_attn_flash.cu; no capture, and the test asserts the op picks it
 * wherever it can run), and the row kernel (TD_GPU_ATTN=naive) with and
 * without capture. Cases: encoder self-attention (kv_len masks, padding-only
 * sequences, lengths past n_k), causal chunks and decoding steps at q_pos0 or
 * per-sequence q_pos, cross-attention of beams sharing K/V (kv_index), Shaw
 * relative keys/values, head_dim 1 to 257 (past the flash kernel's 256),
 * one key to 3000; K/V rows no query may see are NaN. Each case runs with odd
 * strides and with 16-byte aligned ones.
 *
 * Tolerance: 2e-5 + 1e-4 rel on outputs and probabilities. Fixture and
 * helpers: tests/gpu/gpu_op_test.h. No CUDA device: exit 77 (skip).
 */
#include "gpu_op_test.h"

typedef struct attn_case {
    const char *name;
    int n_seq, n_kseq, n_q, n_k, kv_cap, heads, hd;
    int causal, q_pos0, rel_max, rel_k, rel_v, capture;
    int use_kv_len, use_kv_index;
    int use_q_pos; /* per-sequence positions (q_pos); q_pos0 then garbage */
} attn_case;

/* A CUDA backend made with TD_GPU_ATTN=naive (the row attention kernel),
 * shared by the attention cases (made once: creation costs a cuBLAS handle),
 * destroyed by main. */
static td_backend *bn_naive;

static td_backend *naive_backend(void)
{
    if (!bn_naive) {
        char err[512] = "";
        ck_assert_int_eq(setenv("TD_GPU_ATTN", "naive", 1), 0);
        bn_naive = td_cuda_backend_create(0, NULL, err, sizeof err);
        ck_assert_int_eq(unsetenv("TD_GPU_ATTN"), 0);
        ck_assert_msg(bn_naive != NULL, "cuda (naive attention): %s", err);
    }
    return bn_naive;
}

/* Strides of a case's buffers: odd (every row start unaligned) or
 * aligned (rows and heads on 16-byte boundaries where head_dim allows: the
 * flash kernel's 16-byte K/V loads). */
typedef struct attn_layout {
    int64_t ld_q, q_ss, ld_kv, kv_ss, ld_out, out_ss, probs_ld;
} attn_layout;

static attn_layout attn_layout_for(const attn_case *t, int aligned)
{
    const int64_t d = (int64_t)t->heads * t->hd, d4 = (d + 3) / 4 * 4;
    attn_layout l;
    l.ld_q = aligned ? d4 : d + 3;
    l.q_ss = t->n_q * l.ld_q + (aligned ? 0 : 5);
    l.ld_kv = aligned ? d4 : d + 1;
    l.kv_ss = t->kv_cap * l.ld_kv + (aligned ? 0 : 7);
    l.ld_out = aligned ? d4 : d + 2;
    l.out_ss = t->n_q * l.ld_out + (aligned ? 0 : 1);
    l.probs_ld = t->n_k + 2;
    return l;
}

/* The op's arguments for a case, pointing at the CPU (side 0) or GPU
 * (side 1) copy of each buffer; strides as run_attention lays them out. */
static td_attn_args attn_args(const attn_case *t, const attn_layout *l, int side,
                              const pair *q, const pair *k, const pair *v, const pair *o,
                              const pair *p, const pair *kl, const pair *ki, const pair *qp,
                              const pair *rk, const pair *rv)
{
#define PICK(pp) (side ? (pp)->g : (pp)->c)
    td_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = PICK(q);
    a.k = PICK(k);
    a.v = PICK(v);
    a.out = PICK(o);
    a.n_seq = t->n_seq;
    a.n_q = t->n_q;
    a.n_k = t->n_k;
    a.n_heads = t->heads;
    a.head_dim = t->hd;
    a.ld_q = l->ld_q;
    a.q_seq_stride = l->q_ss;
    a.ld_kv = l->ld_kv;
    a.kv_seq_stride = l->kv_ss;
    a.ld_out = l->ld_out;
    a.out_seq_stride = l->out_ss;
    a.kv_index = t->use_kv_index ? PICK(ki) : NULL;
    a.kv_len = t->use_kv_len ? PICK(kl) : NULL;
    a.causal = t->causal;
    a.q_pos0 = t->use_q_pos ? 1 << 20 : t->q_pos0; /* ignored under q_pos */
    a.q_pos = t->use_q_pos ? PICK(qp) : NULL;
    a.rel_k = t->rel_k ? PICK(rk) : NULL;
    a.rel_v = t->rel_v ? PICK(rv) : NULL;
    a.rel_max = t->rel_max;
    a.probs = t->capture ? PICK(p) : NULL;
    a.probs_ld = l->probs_ld;
#undef PICK
    return a;
}

/* Key row j of key sequence ks is visible to some query of some sequence
 * reading ks; every other row of the (n_kseq, kv_cap) K/V is NaN. */
static void run_attention(const attn_case *t, int aligned)
{
    const int H = t->heads, hd = t->hd;
    const attn_layout lay = attn_layout_for(t, aligned);
    const int64_t ld_kv = lay.ld_kv, q_ss = lay.q_ss, kv_ss = lay.kv_ss, out_ss = lay.out_ss;
    const int64_t probs_ld = lay.probs_ld;
    char label[96];
    snprintf(label, sizeof label, "%s%s", t->name, aligned ? ", aligned" : "");
    int32_t *kv_len = xmalloc((size_t)t->n_seq * 4), *kv_index = xmalloc((size_t)t->n_seq * 4);
    int32_t *q_pos = xmalloc((size_t)t->n_seq * 4);
    for (int s = 0; s < t->n_seq; s++) {
        /* positions: 0, the last that keeps the chunk within n_k, beyond
         * n_k (every key visible), random */
        q_pos[s] = s == 0 ? 0 : s == 1 ? t->n_k - t->n_q : s == 2 ? t->n_k + 2 : irand(t->n_k);
        if (q_pos[s] < 0)
            q_pos[s] = 0;
        kv_index[s] = t->use_kv_index ? irand(t->n_kseq) : s;
        /* lengths 0 (padding-only sequence), full, beyond n_k, random */
        int L = irand(t->n_k + 1);
        if (s == 0)
            L = t->n_k;
        if (s == 1)
            L = 0;
        if (s == 2)
            L = t->n_k + 3;
        kv_len[s] = t->use_kv_len ? L : t->n_k;
    }
    /* visible key bound per key sequence (the max over its readers) */
    int *kbound = xmalloc((size_t)t->n_kseq * sizeof(int));
    for (int k = 0; k < t->n_kseq; k++)
        kbound[k] = 0;
    for (int s = 0; s < t->n_seq; s++) {
        int L = kv_len[s] < t->n_k ? kv_len[s] : t->n_k;
        const int p0 = t->use_q_pos ? q_pos[s] : t->q_pos0;
        if (t->causal && p0 + t->n_q < L)
            L = p0 + t->n_q;
        if (L > kbound[kv_index[s]])
            kbound[kv_index[s]] = L;
    }
    const size_t nq = (size_t)(t->n_seq * q_ss), nkv = (size_t)(t->n_kseq * kv_ss),
                 nout = (size_t)(t->n_seq * out_ss),
                 nprobs = (size_t)t->n_seq * H * t->n_q * probs_ld;
    float *Q = frand_vec(nq, 0.5f), *K = frand_vec(nkv, 1.0f), *V = frand_vec(nkv, 1.0f);
    for (int k = 0; k < t->n_kseq; k++)
        for (int j = kbound[k]; j < t->kv_cap; j++)
            for (int64_t c = 0; c < ld_kv; c++)
                K[k * kv_ss + j * ld_kv + c] = V[k * kv_ss + j * ld_kv + c] = NAN;
    const int n_rel = 2 * t->rel_max + 1;
    float *RK = frand_vec((size_t)n_rel * hd, 0.5f), *RV = frand_vec((size_t)n_rel * hd, 0.5f);
    float *O = filled(nout, SENTINEL), *P = filled(nprobs, SENTINEL);
    pair q = pair_from(Q, nq * 4), k = pair_from(K, nkv * 4), v = pair_from(V, nkv * 4),
         rk = pair_from(RK, (size_t)n_rel * hd * 4), rv = pair_from(RV, (size_t)n_rel * hd * 4),
         o = pair_from(O, nout * 4), p = pair_from(P, nprobs * 4),
         kl = pair_from(kv_len, (size_t)t->n_seq * 4), ki = pair_from(kv_index, (size_t)t->n_seq * 4),
         qp = pair_from(q_pos, (size_t)t->n_seq * 4);
    /* on the CPU, and on the GPU with the kernel the op picks (the row
     * kernel when capturing) */
    td_attn_args ac = attn_args(t, &lay, 0, &q, &k, &v, &o, &p, &kl, &ki, &qp, &rk, &rv);
    td_attn_args ag = attn_args(t, &lay, 1, &q, &k, &v, &o, &p, &kl, &ki, &qp, &rk, &rv);
    bc->ops->attention(bc, &ac);
    bg->ops->attention(bg, &ag);
    char what[160];
    snprintf(what, sizeof what, "attention[%s] out (%s)", label,
             td_cuda_attention_kernel(bg, &ag));
    check_pair(what, &o, nout, 2e-5, 1e-4);
    snprintf(what, sizeof what, "attention[%s] probs", label);
    check_pair(what, &p, nprobs, 2e-5, 1e-4);

    /* the flash kernel: no capture (output only) */
    float *o_flash = bg->ops->alloc(bg, nout * 4);
    ck_assert_ptr_nonnull(o_flash);
    bg->ops->upload(bg, o_flash, O, nout * 4);
    td_attn_args af = ag;
    af.out = o_flash;
    af.probs = NULL;
    const int flash_ok = t->hd <= 256 && 2 * t->rel_max + 1 <= 65536;
    ck_assert_str_eq(td_cuda_attention_kernel(bg, &af), flash_ok ? "flash" : "naive");
    bg->ops->attention(bg, &af);
    snprintf(what, sizeof what, "attention[%s] out (%s, no capture)", label,
             td_cuda_attention_kernel(bg, &af));
    check_gpu(what, bg, o_flash, o.c, nout, 2e-5, 1e-4);

    /* the row kernel (TD_GPU_ATTN=naive) with and without capture */
    char err[512] = "";
    td_backend *bn = naive_backend();
    ck_assert_str_eq(td_cuda_attention_kernel(bn, &af), "naive");
    float *o_naive = bg->ops->alloc(bg, nout * 4), *p_naive = bg->ops->alloc(bg, nprobs * 4);
    ck_assert_ptr_nonnull(o_naive);
    ck_assert_ptr_nonnull(p_naive);
    for (int cap = 0; cap < 2; cap++) {
        if (cap && !t->capture)
            break;
        bg->ops->upload(bg, o_naive, O, nout * 4);
        bg->ops->upload(bg, p_naive, P, nprobs * 4);
        ck_assert_msg(bg->ops->sync(bg, err, sizeof err) == 0, "%s", err);
        td_attn_args an = ag;
        an.out = o_naive;
        an.probs = cap ? p_naive : NULL;
        bn->ops->attention(bn, &an);
        snprintf(what, sizeof what, "attention[%s] out (naive, capture %d)", label, cap);
        check_gpu(what, bn, o_naive, o.c, nout, 2e-5, 1e-4);
        if (cap) {
            snprintf(what, sizeof what, "attention[%s] probs (naive)", label);
            check_gpu(what, bn, p_naive, p.c, nprobs, 2e-5, 1e-4);
        }
    }
    bg->ops->dealloc(bg, o_flash);
    bg->ops->dealloc(bg, o_naive);
    bg->ops->dealloc(bg, p_naive);
    pair *all[] = {&q, &k, &v, &rk, &rv, &o, &p, &kl, &ki, &qp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
    free(Q), free(K), free(V), free(RK), free(RV), free(O), free(P);
    free(kv_len), free(kv_index), free(q_pos), free(kbound);
}

static const attn_case ATTN_CASES[] = {
    /* name        n_seq kseq n_q  n_k  cap heads hd caus pos0 R  rk rv cap kvl kvi qp */
    {"enc 1",          3,  3,   1,   1,   1,  2, 64, 0, 0, 0, 0, 0, 1, 1, 0, 0},
    {"enc 7",          4,  4,   7,   7,   7,  3,  9, 0, 0, 0, 0, 0, 1, 1, 0, 0},
    {"enc 33",         3,  3,  33,  33,  40,  4, 16, 0, 0, 0, 0, 0, 0, 1, 0, 0},
    {"enc 513",        3,  3, 513, 513, 513,  2, 64, 0, 0, 0, 0, 0, 1, 1, 0, 0},
    {"causal 33",      3,  3,  33,  33,  33,  2,  7, 1, 0, 0, 0, 0, 1, 0, 0, 0},
    {"causal pos0",    2,  2,   7,  20,  24,  2, 32, 1, 9, 0, 0, 0, 1, 0, 0, 0},
    {"decode 1",       5,  5,   1,   1,  16,  4, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {"decode 33",      6,  6,   1,  34,  64,  8, 64, 1, 33, 0, 0, 0, 0, 0, 0, 0},
    {"decode 513",     3,  3,   1, 513, 600,  2, 64, 1, 512, 0, 0, 0, 0, 0, 0, 0},
    {"cross beams",   12,  3,   1,  33,  33,  4, 16, 0, 0, 0, 0, 0, 1, 1, 1, 0},
    {"cross 513",      8,  2,   1, 513, 513,  2, 64, 0, 0, 0, 0, 0, 1, 1, 1, 0},
    {"relative kv",    3,  3,   7,   7,   7,  4,  6, 0, 0, 3, 1, 1, 1, 1, 0, 0},
    {"relative keys",  3,  3,  33,  33,  33,  2,  8, 0, 0, 2, 1, 0, 1, 1, 0, 0},
    {"relative dec",   4,  4,   1,  30,  32,  2,  8, 1, 29, 3, 1, 1, 0, 0, 0, 0},
    {"wide head",      3,  3,   7,  33,  33,  2, 160, 0, 0, 0, 0, 0, 1, 1, 0, 0},
    /* per-sequence positions (q_pos, the last column): in-flight decoding */
    {"q_pos decode",   6,  6,   1,  34,  40,  4, 16, 1, 0, 0, 0, 0, 1, 1, 0, 1},
    {"q_pos dec 513",  3,  3,   1, 513, 600,  2, 64, 1, 0, 0, 0, 0, 1, 0, 0, 1},
    {"q_pos chunk",    4,  4,   7,  24,  24,  2, 32, 1, 0, 0, 0, 0, 1, 0, 0, 1},
    {"q_pos rel dec",  4,  4,   1,  30,  32,  2,  8, 1, 0, 3, 1, 1, 1, 0, 0, 1},
    {"q_pos rel chunk", 3, 3,   7,  20,  24,  4,  6, 1, 0, 2, 1, 1, 1, 1, 0, 1},
    {"q_pos rel enc",  3,  3,   7,   7,   7,  4,  6, 0, 0, 3, 1, 1, 1, 1, 0, 1},
    {"q_pos kv_index", 6,  2,   1,  33,  33,  4, 16, 1, 0, 0, 0, 0, 1, 1, 1, 1},
    /* the flash kernel's tiles: head_dim off multiples of 32 and at its
     * limit (256; 257 goes to the row kernel), query rows off the 4/8/16
     * row tiles, key counts off the 32-key tiles, one key, many keys */
    {"enc 257 hd 100", 2,  2, 257, 257, 257,  3, 100, 0, 0, 0, 0, 0, 0, 1, 0, 0},
    {"enc hd 256",     3,  3,  17,  40,  40,  2, 256, 0, 0, 0, 0, 0, 1, 1, 0, 0},
    {"dec hd 33",      5,  5,   1, 257, 300,  3, 33, 1, 256, 0, 0, 0, 0, 1, 0, 0},
    {"dec hd 128",     4,  4,   1,  77,  80,  2, 128, 1, 76, 0, 0, 0, 0, 0, 0, 0},
    {"hd 257 naive",   3,  3,   3,   9,   9,  2, 257, 0, 0, 0, 0, 0, 1, 1, 0, 0},
    {"hd 1 causal",    3,  3,   9,   9,   9,  3,  1, 1, 0, 0, 0, 0, 1, 1, 0, 0},
    {"cross src 1",    8,  2,   1,   1,   1,  4, 64, 0, 0, 0, 0, 0, 1, 1, 1, 0},
    {"dec 2000 keys",  3,  3,   1, 2000, 2048, 2, 64, 1, 1999, 0, 0, 0, 0, 1, 0, 0},
    {"cross 33x3000",  2,  2,  33, 3000, 3000, 2, 64, 0, 0, 0, 0, 0, 0, 1, 0, 0},
    {"causal 17 pos0", 2,  2,  17,  40,  48,  2, 48, 1, 5, 0, 0, 0, 1, 0, 0, 0},
    {"rel enc R 16",   3,  3,  33,  33,  33,  2, 64, 0, 0, 16, 1, 1, 1, 1, 0, 0},
    {"rel chunk 17",   3,  3,  17,  40,  40,  3, 20, 1, 5, 4, 1, 1, 1, 1, 0, 0},
    {"rel q_pos 257",  3,  3,  17, 257, 260,  2, 96, 1, 0, 8, 1, 0, 0, 1, 0, 1},
    {"rel big R",      3,  3,   5,   9,   9,  2,  4, 0, 0, 40000, 1, 1, 0, 1, 0, 0},
};

/* _i: case _i / 2, strides odd (_i even) or 16-byte aligned (_i odd) */
START_TEST(test_attention)
{
    rng_seed(100 + (uint64_t)_i);
    run_attention(&ATTN_CASES[_i / 2], _i % 2);
}
END_TEST

static void attention_done(void)
{
    if (bn_naive)
        bn_naive->ops->destroy(bn_naive);
}

static Suite *attention_suite(void)
{
    Suite *s = suite_create("gpu_attention");
    TCase *tc = gpu_op_tcase(s, "attention");
    tcase_add_loop_test(tc, test_attention, 0,
                        2 * (int)(sizeof ATTN_CASES / sizeof ATTN_CASES[0]));
    return s;
}

int main(void)
{
    return gpu_op_test_main("test_gpu_attention", attention_suite, attention_done);
}
