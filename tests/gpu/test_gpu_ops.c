/*
 * test_gpu_ops.c - every op of the CUDA backend against the same op of the
 * CPU backend (the reference: cpu/cpu_backend.c, itself checked against a
 * double-precision reference by tests/test_cpu_ops.c), on seeded random
 * inputs of awkward shapes (1, 7, 33, 513). Both backends get identical
 * host inputs through alloc/upload; outputs are downloaded and compared
 * with |gpu - cpu| <= tol_abs + tol_rel*|cpu|. Any NaN/Inf mismatch fails.
 * Attention has its own program, test_gpu_attention.c; the fixture and
 * helpers are tests/gpu/gpu_op_test.h.
 *
 * Tolerances (per op, float32 unless stated):
 *   linear F32 weights        1e-4 + 1e-4 rel (float32 GEMM, other summation order;
 *                             n <= 8 rows take our own kernel, with float32
 *                             activations whatever the weights' dtype)
 *   linear F16 weights, split 1e-4 + 1e-5*sqrt(in) + 1e-4 rel: the activations enter
 *                             as hi + lo F16 terms (22 bits); the weights are the same
 *   linear BF16 weights, split 1e-4 + 2e-5*sqrt(in) + 1e-4 rel (16 bits)
 *   linear F16, half          2e-3*sqrt(in) + 1e-2 rel: the activations are rounded
 *                             to F16 (2^-11) before the GEMM (precision "half")
 *   linear BF16, half         1.6e-2*sqrt(in) + 4e-2 rel (activations rounded to 2^-8)
 *   element-wise, embed, rope 1e-6 + 1e-6 rel (same float formulas)
 *   rope_rows                 1e-6 + 1e-6 rel, and bit-identical to the CUDA rope
 *                             over the same rows (backend.h)
 *   gather_rows, scatter_rows exact (copies)
 *   upload, download          exact: many small uploads through the pinned ring
 *                             (source rewritten right after each), and transfers
 *                             larger than the ring
 *   layer_norm                1e-4 + 1e-4 rel (float vs double statistics); widths
 *                             up to 2048 (warp-per-row kernel to 1024, block kernel
 *                             beyond)
 *   logprobs_topk             1e-5 + 1e-5 rel on values; ids equal, or (for random
 *                             near-ties) the GPU's id has the CPU's value there;
 *                             with force_eos, force_rows or both; k of every list
 *                             size (1, 2, 3, 8, 17, 64), rows all or partly -inf,
 *                             a vocabulary of 2000003 (suppression without the
 *                             shared-memory bitmap)
 *   beam_step                 bits: the end flags, back-pointers, tokens and
 *                             the whole search state after every step, CUDA
 *                             against the CPU twin (the same rules,
 *                             backend/beam_rules.h), on beam_script.h's
 *                             scripted steps (1..16 beams, ties, forced </s>)
 *
 * No CUDA device: the program exits 77, ctest's skip code.
 */
#include "gpu_op_test.h"
#include "../beam_script.h"

/* --- memory and errors ---------------------------------------------------- */

START_TEST(test_memory)
{
    rng_seed(1);
    const size_t n = 1000;
    float *h = frand_vec(n, 1.0f), *back = filled(n, 0.0f);
    float *a = bg->ops->alloc(bg, n * 4), *b = bg->ops->alloc(bg, n * 4);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    bg->ops->upload(bg, a, h, n * 4);
    bg->ops->copy(bg, b, a, n * 4);
    bg->ops->memset0(bg, a, 10 * 4);
    bg->ops->download(bg, back, b, n * 4);
    ck_assert_int_eq(memcmp(back, h, n * 4), 0);
    bg->ops->download(bg, back, a, n * 4);
    for (int i = 0; i < 10; i++)
        ck_assert(back[i] == 0.0f);
    ck_assert(back[10] == h[10]);
    bg->ops->dealloc(bg, a);
    bg->ops->dealloc(bg, b);
    bg->ops->dealloc(bg, NULL);
    ck_assert_str_eq(bg->ops->name, "cuda");
    free(h);
    free(back);
}
END_TEST

/* upload() stages through a pinned ring: the caller's buffer is reusable as
 * soon as upload returns (rewritten here before the copies run), the ring
 * wraps many times, and transfers larger than the ring (pageable upload,
 * chunked download) arrive whole. */
START_TEST(test_transfers)
{
    rng_seed(11);
    const size_t chunk = 1000, n_chunks = 3001; /* 12 MB of 4000-byte uploads */
    float *dev = bg->ops->alloc(bg, chunk * n_chunks * 4);
    ck_assert_ptr_nonnull(dev);
    float *src = xmalloc(chunk * 4), *back = xmalloc(chunk * n_chunks * 4);
    for (size_t i = 0; i < n_chunks; i++) {
        for (size_t j = 0; j < chunk; j++)
            src[j] = (float)(i * chunk + j);
        bg->ops->upload(bg, dev + i * chunk, src, chunk * 4);
        memset(src, 0xff, chunk * 4); /* reused at once: NaN if it were read late */
    }
    bg->ops->download(bg, back, dev, chunk * n_chunks * 4);
    sync_both("transfers (ring)");
    for (size_t i = 0; i < chunk * n_chunks; i++)
        ck_assert_msg(back[i] == (float)i, "ring upload: [%zu] = %g", i, (double)back[i]);
    bg->ops->dealloc(bg, dev);
    free(src);
    free(back);

    const size_t big = (5u << 20) / 4 + 3; /* over the ring: one pageable upload, 2 chunks down */
    float *h = frand_vec(big, 1.0f), *hb = filled(big, 0.0f);
    float *d = bg->ops->alloc(bg, big * 4);
    ck_assert_ptr_nonnull(d);
    bg->ops->upload(bg, d, h, big * 4);
    bg->ops->download(bg, hb, d, big * 4);
    sync_both("transfers (large)");
    ck_assert_int_eq(memcmp(h, hb, big * 4), 0);
    bg->ops->dealloc(bg, d);
    free(h);
    free(hb);
}
END_TEST

START_TEST(test_latched_error)
{
    char err[512] = "";
    pair l = pair_from(NULL, 16 * 4), v = pair_from(NULL, 65 * 4), ix = pair_from(NULL, 65 * 4);
    bg->ops->memset0(bg, l.g, 16 * 4);
    bg->ops->logprobs_topk(bg, l.g, 1, 16, NULL, 0, 0, NULL, 0, NULL, 65, v.g, ix.g);
    ck_assert_int_eq(bg->ops->sync(bg, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "logprobs_topk") != NULL, "%s", err);
    ck_assert_int_eq(bg->ops->sync(bg, err, sizeof err), 0); /* cleared */
    pair_free(&l);
    pair_free(&v);
    pair_free(&ix);
    /* out of device memory: NULL, and the latched message has the numbers */
    void *huge = bg->ops->alloc(bg, (size_t)1 << 50);
    ck_assert_ptr_null(huge);
    ck_assert_int_eq(bg->ops->sync(bg, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "1125899906842624 bytes") && strstr(err, "bytes free on device"),
                  "%s", err);
    /* out-of-range device: a clear error */
    td_backend *x = td_cuda_backend_create(td_cuda_device_count(), NULL, err, sizeof err);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(err, "--device cpu") != NULL, "%s", err);
    /* an unknown attention kernel: creation fails and names the variable */
    ck_assert_int_eq(setenv("TD_GPU_ATTN", "fast", 1), 0);
    x = td_cuda_backend_create(0, NULL, err, sizeof err);
    ck_assert_int_eq(unsetenv("TD_GPU_ATTN"), 0);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(err, "TD_GPU_ATTN") != NULL, "%s", err);
}
END_TEST

/* --- linear ----------------------------------------------------------------- */

/* gh: the GPU backend that computes (bg, or one with half_activations; it
 * shares bg's device, so bg's buffers are valid there). */
static void run_linear(td_backend *gh, td_dtype dt, int n, int in, int out, int with_bias)
{
    const int half = gh != bg;
    const int ld_x = in + 3, ld_y = out + 5;
    float *W = frand_vec((size_t)out * in, 1.0f);
    for (size_t i = 0; i < (size_t)out * in; i++)
        W[i] = dt == TD_F16 ? round_f16(W[i]) : dt == TD_BF16 ? round_bf16(W[i]) : W[i];
    float *B = frand_vec((size_t)out, 1.0f);
    float *X = frand_vec((size_t)n * ld_x, 1.0f);
    float *Y = filled((size_t)n * ld_y, SENTINEL);
    /* with a bias: a load-time scale (folded on the CPU, alpha for half) */
    const float scale = with_bias ? 0.40824829f : 1.0f;
    wpair w = wpair_scaled(W, out, in, dt, scale), b = wpair_scaled(B, 1, out, TD_F32, scale);
    pair x = pair_from(X, (size_t)n * ld_x * 4), y = pair_from(Y, (size_t)n * ld_y * 4);
    bc->ops->linear(bc, y.c, ld_y, x.c, ld_x, n, &w.c, with_bias ? &b.c : NULL);
    char err[512] = "";
    if (half) /* bg's uploads done before gh's stream reads them */
        ck_assert_msg(bg->ops->sync(bg, err, sizeof err) == 0, "%s", err);
    gh->ops->linear(gh, y.g, ld_y, x.g, ld_x, n, &w.g, with_bias ? &b.g : NULL);
    if (half) /* and gh's work done before bg downloads */
        ck_assert_msg(gh->ops->sync(gh, err, sizeof err) == 0, "%s", err);
    char what[128];
    snprintf(what, sizeof what, "linear dtype %d%s n %d in %d out %d bias+scale %d", (int)dt,
             half ? " half" : "", n, in, out, with_bias);
    const double s = sqrt((double)(in > 0 ? in : 1));
    double ta = 1e-4, tr = 1e-4;
    if (dt == TD_F16)
        ta = half ? 2e-3 * s : 1e-4 + 1e-5 * s, tr = half ? 1e-2 : 1e-4;
    else if (dt == TD_BF16)
        ta = half ? 1.6e-2 * s : 1e-4 + 2e-5 * s, tr = half ? 4e-2 : 1e-4;
    check_pair(what, &y, (size_t)n * ld_y, ta, tr); /* padding columns stay SENTINEL */
    wpair_free(&w);
    wpair_free(&b);
    pair_free(&x);
    pair_free(&y);
    free(W), free(B), free(X), free(Y);
}

/* _i: 0 F32, 1 F16, 2 BF16 (split, the default), 3 F16, 4 BF16 (half) */
START_TEST(test_linear)
{
    static const td_dtype dts[5] = {TD_F32, TD_F16, TD_BF16, TD_F16, TD_BF16};
    rng_seed(2 + (uint64_t)_i);
    const td_dtype dt = dts[_i];
    td_backend *gh = bg;
    if (_i >= 3) {
        char err[512] = "";
        const td_cuda_opts ho = {.half_activations = 1};
        gh = td_cuda_backend_create(0, &ho, err, sizeof err);
        ck_assert_msg(gh != NULL, "cuda (half): %s", err);
    }
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                run_linear(gh, dt, SHAPES[a], SHAPES[b], SHAPES[c], (a + b + c) % 2);
    run_linear(gh, dt, 7, 0, 33, 1); /* in == 0: y = bias */
    /* widths that are multiples of 8: the vectorised loads of the few-rows
     * kernel (n <= 8) and the half GEMM's aligned paths */
    static const int EVEN[][3] = {{1, 64, 40}, {4, 512, 1000}, {8, 2048, 33},
                                  {3, 24, 7},  {9, 512, 96},   {2, 8, 1}};
    for (size_t k = 0; k < sizeof EVEN / sizeof EVEN[0]; k++)
        run_linear(gh, dt, EVEN[k][0], EVEN[k][1], EVEN[k][2], (int)(k % 2));
    if (gh != bg)
        gh->ops->destroy(gh);
}
END_TEST

/* --- element-wise --------------------------------------------------------- */

START_TEST(test_bias_act)
{
    rng_seed(3);
    /* widths of 4k: the float4 path; the others one float at a time */
    static const int widths[6] = {1, 7, 33, 513, 4, 2048};
    for (int act = TD_ACT_NONE; act <= TD_ACT_SILU; act++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 6; b++) {
                const int n = SHAPES[a], d = widths[b];
                float *X = frand_vec((size_t)n * d, 4.0f), *B = frand_vec((size_t)d, 1.0f);
                wpair bias = wpair_from(B, 1, d, TD_F32);
                pair x = pair_from(X, (size_t)n * d * 4);
                const int use_b = (a + b + act) % 2;
                bc->ops->bias_act(bc, x.c, n, d, use_b ? &bias.c : NULL, (td_activation)act);
                bg->ops->bias_act(bg, x.g, n, d, use_b ? &bias.g : NULL, (td_activation)act);
                char what[96];
                snprintf(what, sizeof what, "bias_act act %d n %d d %d bias %d", act, n, d, use_b);
                check_pair(what, &x, (size_t)n * d, 1e-6, 1e-6);
                wpair_free(&bias);
                pair_free(&x);
                free(X), free(B);
            }
}
END_TEST

START_TEST(test_add)
{
    rng_seed(4);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            const int n = SHAPES[a], d = SHAPES[b];
            float *X = frand_vec((size_t)n * d, 1.0f), *Y = frand_vec((size_t)n * d, 1.0f);
            pair x = pair_from(X, (size_t)n * d * 4), y = pair_from(Y, (size_t)n * d * 4);
            bc->ops->add(bc, y.c, x.c, n, d);
            bg->ops->add(bg, y.g, x.g, n, d);
            check_pair("add", &y, (size_t)n * d, 0.0, 0.0);
            pair_free(&x);
            pair_free(&y);
            free(X), free(Y);
        }
}
END_TEST

/* alias: 0 distinct y, 1 y == x, 2 y == res; sum_out on or off. */
/* widths past SHAPES: each register count of the warp-per-row kernel at its
 * limit (32 x 1, 2, ... 32 values per lane), and the block kernel beyond 1024 */
static const int LN_WIDTHS[] = {1, 7, 33, 513, 32, 64, 256, 512, 1024, 1025, 2048};

START_TEST(test_layer_norm)
{
    rng_seed(5);
    const int n_widths = (int)(sizeof LN_WIDTHS / sizeof LN_WIDTHS[0]);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < n_widths; b++)
            for (int mode = 0; mode < 6; mode++) {
                const int n = b < 4 || a < 3 ? SHAPES[a] : 17, d = LN_WIDTHS[b];
                const int alias = mode % 3, use_sum = mode / 3;
                const size_t cnt = (size_t)n * d;
                float *X = frand_vec(cnt, 3.0f), *R = frand_vec(cnt, 1.0f);
                float *G = frand_vec((size_t)d, 1.0f), *B = frand_vec((size_t)d, 1.0f);
                for (size_t i = 0; i < cnt; i++)
                    X[i] += 0.5f; /* a non-zero mean */
                wpair g = wpair_from(G, 1, d, TD_F32), bt = wpair_from(B, 1, d, TD_F32);
                pair x = pair_from(X, cnt * 4), r = pair_from(R, cnt * 4);
                pair y = pair_from(NULL, cnt * 4), so = pair_from(NULL, cnt * 4);
                const int use_res = alias == 2 || (a + b) % 2;
                float *yc = alias == 1 ? x.c : alias == 2 ? r.c : y.c;
                float *yg = alias == 1 ? x.g : alias == 2 ? r.g : y.g;
                bc->ops->layer_norm(bc, yc, x.c, use_res ? r.c : NULL, use_sum ? so.c : NULL, n,
                                    d, &g.c, &bt.c, 1e-5f);
                bg->ops->layer_norm(bg, yg, x.g, use_res ? r.g : NULL, use_sum ? so.g : NULL, n,
                                    d, &g.g, &bt.g, 1e-5f);
                pair out = {yc, yg, cnt * 4};
                char what[128];
                snprintf(what, sizeof what, "layer_norm n %d d %d alias %d res %d sum %d", n, d,
                         alias, use_res, use_sum);
                check_pair(what, &out, cnt, 1e-4, 1e-4);
                if (use_sum)
                    check_pair("layer_norm sum_out", &so, cnt, 1e-6, 1e-6);
                wpair_free(&g);
                wpair_free(&bt);
                pair_free(&x);
                pair_free(&r);
                pair_free(&y);
                pair_free(&so);
                free(X), free(R), free(G), free(B);
            }
}
END_TEST

START_TEST(test_embed)
{
    rng_seed(6);
    for (int dti = 0; dti < 3; dti++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                const td_dtype dt = (td_dtype)dti;
                const int n = SHAPES[a], d = SHAPES[b], vocab = 40, max_pos = 50;
                float *T = frand_vec((size_t)vocab * d, 1.0f);
                for (size_t i = 0; i < (size_t)vocab * d; i++)
                    T[i] = dt == TD_F16 ? round_f16(T[i]) : dt == TD_BF16 ? round_bf16(T[i]) : T[i];
                float *P = frand_vec((size_t)max_pos * d, 1.0f);
                int32_t *ids = xmalloc((size_t)n * 4), *pos = xmalloc((size_t)n * 4);
                for (int r = 0; r < n; r++)
                    ids[r] = irand(vocab), pos[r] = irand(max_pos);
                wpair t = wpair_from(T, vocab, d, dt);
                pair p = pair_from(P, (size_t)max_pos * d * 4), di = pair_from(ids, (size_t)n * 4),
                     dp = pair_from(pos, (size_t)n * 4), y = pair_from(NULL, (size_t)n * d * 4);
                const int use_pos = (a + b + dti) % 2;
                bc->ops->embed(bc, y.c, &t.c, di.c, n, 4.5f, use_pos ? p.c : NULL, dp.c);
                bg->ops->embed(bg, y.g, &t.g, di.g, n, 4.5f, use_pos ? p.g : NULL, dp.g);
                check_pair("embed", &y, (size_t)n * d, 1e-6, 1e-6);
                wpair_free(&t);
                pair_free(&p);
                pair_free(&di);
                pair_free(&dp);
                pair_free(&y);
                free(T), free(P), free(ids), free(pos);
            }
}
END_TEST

START_TEST(test_rope)
{
    rng_seed(7);
    static const int hds[3] = {2, 8, 64};
    for (int hi = 0; hi < 3; hi++)
        for (int a = 0; a < 3; a++)
            for (int pos0 = 0; pos0 < 10; pos0 += 5) {
                const int hd = hds[hi], n_t = SHAPES[a], n_seq = 3, heads = 3, max_pos = 60;
                const int64_t ld = heads * hd + 2, ss = n_t * ld + 4;
                const size_t cnt = (size_t)(n_seq * ss);
                float *X = frand_vec(cnt, 1.0f), *CS = frand_vec((size_t)max_pos * hd, 1.0f);
                pair x = pair_from(X, cnt * 4), cs = pair_from(CS, (size_t)max_pos * hd * 4);
                bc->ops->rope(bc, x.c, n_seq, n_t, ld, ss, heads, hd, pos0, cs.c);
                bg->ops->rope(bg, x.g, n_seq, n_t, ld, ss, heads, hd, pos0, cs.g);
                check_pair("rope", &x, cnt, 1e-6, 1e-6);
                pair_free(&x);
                pair_free(&cs);
                free(X), free(CS);
            }
}
END_TEST

START_TEST(test_gather_rows)
{
    rng_seed(8);
    static const int elems[5] = {1, 7, 33, 513, 512};
    for (int a = 0; a < 4; a++)
        for (int e = 0; e < 5; e++) {
            const int n = SHAPES[a], re = elems[e];
            const int64_t ld = re + (e == 4 ? 4 : 3), src_rows = n + 3;
            float *S = frand_vec((size_t)(src_rows * ld), 1.0f);
            float *D = filled((size_t)(n * ld), SENTINEL);
            int32_t *ix = xmalloc((size_t)n * 4);
            for (int r = 0; r < n; r++)
                ix[r] = irand((int)src_rows);
            pair s = pair_from(S, (size_t)(src_rows * ld) * 4), d = pair_from(D, (size_t)(n * ld) * 4),
                 di = pair_from(ix, (size_t)n * 4);
            bc->ops->gather_rows(bc, d.c, s.c, di.c, n, re, ld, NULL);
            bg->ops->gather_rows(bg, d.g, s.g, di.g, n, re, ld, NULL);
            check_pair("gather_rows", &d, (size_t)(n * ld), 0.0, 0.0);
            /* with a length per row (odd ones: the float4 path's tail) */
            int32_t *ln = xmalloc((size_t)n * 4);
            for (int r = 0; r < n; r++)
                ln[r] = r % 5 == 0 ? re : irand(re + 2) - 1;
            pair dl = pair_from(ln, (size_t)n * 4);
            pair d2 = pair_from(D, (size_t)(n * ld) * 4);
            bc->ops->gather_rows(bc, d2.c, s.c, di.c, n, re, ld, dl.c);
            bg->ops->gather_rows(bg, d2.g, s.g, di.g, n, re, ld, dl.g);
            check_pair("gather_rows with row_len", &d2, (size_t)(n * ld), 0.0, 0.0);
            pair_free(&dl);
            pair_free(&d2);
            free(ln);
            pair_free(&s);
            pair_free(&d);
            pair_free(&di);
            free(S), free(D), free(ix);
        }
}
END_TEST

/* Source row r to destination row perm[r] of n + 3 rows (distinct), with
 * the source and destination strides apart; elems 512 with strides that are
 * multiples of 4 takes the float4 path. */
START_TEST(test_scatter_rows)
{
    rng_seed(9);
    static const int ns[5] = {0, 1, 7, 33, 513};
    static const int elems[5] = {1, 7, 33, 513, 512};
    for (int a = 0; a < 5; a++)
        for (int e = 0; e < 5; e++) {
            const int n = ns[a], re = elems[e], n_dst = n + 3;
            const int64_t ld_src = re + (e == 4 ? 4 : 3), ld_dst = re + (e == 4 ? 8 : 5);
            float *S = frand_vec((size_t)(n * ld_src), 1.0f);
            float *D = filled((size_t)(n_dst * ld_dst), SENTINEL);
            int32_t *perm = xmalloc((size_t)n_dst * 4);
            for (int i = 0; i < n_dst; i++)
                perm[i] = i;
            for (int i = n_dst - 1; i > 0; i--) { /* Fisher-Yates */
                const int j = irand(i + 1);
                const int32_t t = perm[i];
                perm[i] = perm[j], perm[j] = t;
            }
            pair s = pair_from(S, (size_t)(n * ld_src) * 4),
                 d = pair_from(D, (size_t)(n_dst * ld_dst) * 4), di = pair_from(perm, (size_t)n * 4);
            bc->ops->scatter_rows(bc, d.c, ld_dst, s.c, ld_src, di.c, n, re);
            bg->ops->scatter_rows(bg, d.g, ld_dst, s.g, ld_src, di.g, n, re);
            char what[96];
            snprintf(what, sizeof what, "scatter_rows n %d elems %d", n, re);
            check_pair(what, &d, (size_t)(n_dst * ld_dst), 0.0, 0.0);
            pair_free(&s);
            pair_free(&d);
            pair_free(&di);
            free(S), free(D), free(perm);
        }
}
END_TEST

/* Rows at random positions against the CPU; then the same bits as the CUDA
 * rope over a (n_seq, n_t) block whose rows are given positions pos0 + t. */
START_TEST(test_rope_rows)
{
    rng_seed(10);
    static const int hds[3] = {2, 8, 64};
    static const int ns[5] = {0, 1, 7, 33, 513};
    for (int hi = 0; hi < 3; hi++)
        for (int a = 0; a < 5; a++) {
            const int hd = hds[hi], n = ns[a], heads = 1 + (hi + a) % 3, max_pos = 60;
            const int64_t ld = heads * hd + 2;
            const size_t cnt = (size_t)((n + 1) * ld); /* + a row the op must not touch */
            float *X = frand_vec(cnt, 1.0f), *CS = frand_vec((size_t)max_pos * hd, 1.0f);
            int32_t *P = xmalloc((size_t)n * 4);
            for (int r = 0; r < n; r++)
                P[r] = r == 0 ? max_pos - 1 : irand(max_pos);
            pair x = pair_from(X, cnt * 4), cs = pair_from(CS, (size_t)max_pos * hd * 4),
                 p = pair_from(P, (size_t)n * 4);
            bc->ops->rope_rows(bc, x.c, n, ld, heads, hd, p.c, cs.c);
            bg->ops->rope_rows(bg, x.g, n, ld, heads, hd, p.g, cs.g);
            char what[96];
            snprintf(what, sizeof what, "rope_rows n %d heads %d hd %d", n, heads, hd);
            check_pair(what, &x, cnt, 1e-6, 1e-6);
            pair_free(&x);
            pair_free(&cs);
            pair_free(&p);
            free(X), free(CS), free(P);
        }

    const int n_seq = 3, n_t = 33, heads = 2, hd = 64, pos0 = 5, max_pos = 40;
    const int64_t ld = heads * hd + 2, ss = n_t * ld; /* rows contiguous */
    const size_t cnt = (size_t)(n_seq * ss);
    float *X = frand_vec(cnt, 1.0f), *CS = frand_vec((size_t)max_pos * hd, 1.0f);
    int32_t *P = xmalloc((size_t)n_seq * n_t * 4);
    for (int r = 0; r < n_seq * n_t; r++)
        P[r] = pos0 + r % n_t;
    pair xa = pair_from(X, cnt * 4), xb = pair_from(X, cnt * 4),
         cs = pair_from(CS, (size_t)max_pos * hd * 4), p = pair_from(P, (size_t)n_seq * n_t * 4);
    bg->ops->rope(bg, xa.g, n_seq, n_t, ld, ss, heads, hd, pos0, cs.g);
    bg->ops->rope_rows(bg, xb.g, (int64_t)n_seq * n_t, ld, heads, hd, p.g, cs.g);
    float *ha = xmalloc(cnt * 4), *hb = xmalloc(cnt * 4);
    bg->ops->download(bg, ha, xa.g, cnt * 4);
    bg->ops->download(bg, hb, xb.g, cnt * 4);
    sync_both("rope_rows vs rope");
    ck_assert_msg(memcmp(ha, hb, cnt * 4) == 0, "cuda rope_rows differs from cuda rope");
    pair_free(&xa);
    pair_free(&xb);
    pair_free(&cs);
    pair_free(&p);
    free(X), free(CS), free(P), free(ha), free(hb);
}
END_TEST

/* --- logprobs_topk ------------------------------------------------------------ */

/* force_rows: 0 NULL, 1 every other row forced (odd rows) to a token of its
 * own (a target prefix's: ids anywhere in the vocabulary, eos among them,
 * now and then one outside it), 2 rows 0 and 1 forced under force_eos too;
 * -1 elsewhere (not forced). */
static void run_topk(int n, int vocab, int k, int force_eos, int quantized, int use_bias,
                     int force_rows)
{
    const size_t cnt = (size_t)n * vocab;
    float *L = frand_vec(cnt, 8.0f);
    if (quantized) /* exact ties everywhere: ids must match exactly */
        for (size_t i = 0; i < cnt; i++)
            L[i] = roundf(L[i] * 0.5f) * 2.0f;
    if (n > 1) /* an all -inf row */
        for (int t = 0; t < vocab; t++)
            L[(size_t)vocab + t] = -INFINITY;
    if (n > 2) /* a row with every third logit -inf */
        for (int t = 0; t < vocab; t += 3)
            L[2 * (size_t)vocab + t] = -INFINITY;
    float *RB = frand_vec((size_t)n, 10.0f);
    int32_t sup[3] = {vocab - 1, 0, vocab + 5};
    const int eos = vocab / 2;
    int32_t *FR = xmalloc((size_t)n * 4);
    for (int r = 0; r < n; r++)
        FR[r] = force_rows == 1   ? (r % 2 ? (int32_t)(((int64_t)r * 7919) % (vocab + 2)) : -1)
                : force_rows == 2 ? (r < 2 ? vocab - 1 - r % vocab : -1)
                                  : -1;
    pair l = pair_from(L, cnt * 4), rb = pair_from(RB, (size_t)n * 4), s = pair_from(sup, 12),
         ov = pair_from(NULL, (size_t)n * k * 4), oi = pair_from(NULL, (size_t)n * k * 4),
         fr = pair_from(FR, (size_t)n * 4);
    bc->ops->logprobs_topk(bc, l.c, n, vocab, s.c, 3, force_eos, force_rows ? fr.c : NULL, eos,
                           use_bias ? rb.c : NULL, k, ov.c, oi.c);
    bg->ops->logprobs_topk(bg, l.g, n, vocab, s.g, 3, force_eos, force_rows ? fr.g : NULL, eos,
                           use_bias ? rb.g : NULL, k, ov.g, oi.g);
    char what[128];
    snprintf(what, sizeof what,
             "logprobs_topk n %d vocab %d k %d eos %d rows %d quant %d bias %d", n, vocab, k,
             force_eos, force_rows, quantized, use_bias);
    check_pair(what, &l, cnt, 1e-5, 1e-5);
    check_pair(what, &ov, (size_t)n * k, 1e-5, 1e-5);
    float *lp = xmalloc(cnt * 4), *vc = xmalloc((size_t)n * k * 4);
    int32_t *ic = xmalloc((size_t)n * k * 4), *ig = xmalloc((size_t)n * k * 4);
    bc->ops->download(bc, lp, l.c, cnt * 4);
    bc->ops->download(bc, vc, ov.c, (size_t)n * k * 4);
    bc->ops->download(bc, ic, oi.c, (size_t)n * k * 4);
    bg->ops->download(bg, ig, oi.g, (size_t)n * k * 4);
    sync_both(what);
    size_t bad = 0;
    for (int r = 0; r < n; r++)
        for (int j = 0; j < k; j++) {
            const int32_t g = ig[r * k + j], c = ic[r * k + j];
            int ok = g == c;
            if (!ok && !quantized && g >= 0 && g < vocab) {
                /* a random near-tie may order differently after rounding:
                 * accept an id whose CPU score equals the CPU's value here */
                const float sc = lp[(size_t)r * vocab + g] + (use_bias ? RB[r] : 0.0f);
                ok = close_f(sc, vc[r * k + j], 1e-5, 1e-5);
                for (int jj = 0; ok && jj < j; jj++)
                    ok = ig[r * k + jj] != g; /* no duplicates */
            }
            if (!ok && bad++ < 5)
                fprintf(stderr, "%s: row %d rank %d: cuda id %d, cpu id %d\n", what, r, j, g, c);
        }
    ck_assert_msg(bad == 0, "%s: %zu ids differ", what, bad);
    pair *all[] = {&l, &rb, &s, &ov, &oi, &fr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
    free(L), free(RB), free(FR), free(lp), free(vc), free(ic), free(ig);
}

START_TEST(test_logprobs_topk)
{
    rng_seed(200);
    static const int vocabs[5] = {1, 7, 33, 513, 32000};
    static const int ks[6] = {1, 2, 3, 8, 17, 64}; /* each list size of the GPU kernel */
    for (int vi = 0; vi < 5; vi++)
        for (int ki = 0; ki < 6; ki++)
            for (int mode = 0; mode < 4; mode++) {
                if (ks[ki] > vocabs[vi])
                    continue;
                const int n = SHAPES[(vi + ki + mode) % 3];
                run_topk(n, vocabs[vi], ks[ki], mode == 3, mode == 1 || mode == 2, mode >= 2, 0);
            }
    /* a vocabulary whose suppression bitmap does not fit in shared memory
     * (the kernel scans the list instead) */
    run_topk(3, 2000003, 8, 0, 0, 1, 0);
}
END_TEST

/* A mix of forced and unforced rows (force_rows), alone and under force_eos. */
START_TEST(test_logprobs_topk_force_rows)
{
    rng_seed(201);
    static const int vocabs[4] = {7, 33, 513, 32000};
    static const int ks[3] = {1, 8, 64};
    for (int vi = 0; vi < 4; vi++)
        for (int ki = 0; ki < 3; ki++)
            for (int mode = 0; mode < 3; mode++) {
                if (ks[ki] > vocabs[vi])
                    continue;
                const int n = SHAPES[1 + (vi + ki + mode) % 3]; /* 7, 33, 513 */
                run_topk(n, vocabs[vi], ks[ki], mode == 2, mode == 1, mode != 1,
                         mode == 2 ? 2 : 1);
            }
}
END_TEST

/* beam_step on both backends, step after step, the same inputs (made from
 * the CPU's running scores): every output and the state bit for bit. */
static void run_beam_case(uint64_t seed, int beams)
{
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    bs_case c;
    bs_make(&c, &rng, beams);
    bs_dev dc, dg;
    bs_dev_init(&dc, bc, &c);
    bs_dev_init(&dg, bg, &c);
    const size_t nf = (size_t)(c.n_slots * bs_fs()), ni = (size_t)(c.n_slots * bs_is());
    float *val = xmalloc(sizeof(float) * BS_MAX_ROWS * BS_MAX_KS);
    int32_t *idx = xmalloc(sizeof(int32_t) * BS_MAX_ROWS * BS_MAX_KS);
    float *fc = xmalloc(nf * sizeof(float)), *fg = xmalloc(nf * sizeof(float));
    int32_t *ic = xmalloc(ni * sizeof(int32_t)), *ig = xmalloc(ni * sizeof(int32_t));
    bs_dev_state(&dc, &c, fc, ic);
    int left = c.n_sent;
    for (int step = 0; left > 0; step++) {
        ck_assert_int_lt(step, BS_ML + 8);
        int live[BS_MAX_SENT], n_live, ks;
        int32_t sent[BS_MAX_SENT * TD_BEAM_FIELDS], oc[3 * BS_MAX_ROWS], og[3 * BS_MAX_ROWS];
        const int n = bs_layout(&c, step, &rng, live, &n_live, sent, &ks);
        if (n_live == 0)
            continue;
        for (int k = 0; k < n_live; k++) {
            const bs_sent *s = &c.s[live[k]];
            const int row0 = sent[k * TD_BEAM_FIELDS + TD_BEAM_ROW0];
            for (int b = 0; b < s->B; b++)
                bs_row(&rng, s->B > 1 ? fc[s->slot * bs_fs() + b] : 0.0f,
                       s->forced && s->t == s->M - 1, ks, val + (int64_t)(row0 + b) * ks,
                       idx + (int64_t)(row0 + b) * ks);
        }
        bs_dev_step(&dc, n, ks, n_live, val, idx, sent, oc);
        bs_dev_step(&dg, n, ks, n_live, val, idx, sent, og);
        ck_assert_int_eq(memcmp(oc, og, (size_t)(2 * n + n_live) * sizeof(int32_t)), 0);
        bs_dev_state(&dc, &c, fc, ic);
        bs_dev_state(&dg, &c, fg, ig);
        ck_assert_msg(memcmp(fc, fg, nf * sizeof(float)) == 0, "seed %llu step %d: scores",
                      (unsigned long long)seed, step);
        ck_assert_msg(memcmp(ic, ig, ni * sizeof(int32_t)) == 0, "seed %llu step %d: lists",
                      (unsigned long long)seed, step);
        for (int k = 0; k < n_live; k++) {
            bs_sent *s = &c.s[live[k]];
            s->t++;
            if (oc[2 * n + k]) {
                s->done = 1;
                left--;
            }
        }
    }
    bs_dev_free(&dc);
    bs_dev_free(&dg);
    free(val);
    free(idx);
    free(fc);
    free(fg);
    free(ic);
    free(ig);
}

START_TEST(test_beam_step)
{
    for (uint64_t seed = 1; seed <= 200; seed++)
        run_beam_case(seed, 0);
    for (int beams = 1; beams <= 16; beams++)
        for (uint64_t seed = 1; seed <= 5; seed++)
            run_beam_case(1000 * (uint64_t)beams + seed, beams);
}
END_TEST

static Suite *ops_suite(void)
{
    /* two cases, so that one can run alone (CK_RUN_CASE=logprobs, e.g.
     * under compute-sanitizer's racecheck in tools/gpu-check.sh) */
    Suite *s = suite_create("gpu_ops");
    TCase *tc = gpu_op_tcase(s, "ops");
    TCase *tl = gpu_op_tcase(s, "logprobs");
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_transfers);
    tcase_add_test(tc, test_latched_error);
    tcase_add_loop_test(tc, test_linear, 0, 5);
    tcase_add_test(tc, test_bias_act);
    tcase_add_test(tc, test_add);
    tcase_add_test(tc, test_layer_norm);
    tcase_add_test(tc, test_embed);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_gather_rows);
    tcase_add_test(tc, test_scatter_rows);
    tcase_add_test(tc, test_rope_rows);
    tcase_add_test(tl, test_logprobs_topk);
    tcase_add_test(tl, test_logprobs_topk_force_rows);
    TCase *tb = gpu_op_tcase(s, "beam");
    tcase_add_test(tb, test_beam_step);
    return s;
}

int main(void)
{
    return gpu_op_test_main("test_gpu_ops", ops_suite, NULL);
}
