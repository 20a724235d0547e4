/*
 * gpu_attn_flash.cu - the fused, IO-aware attention kernel behind the
 * attention op when no probabilities are captured (backend.h,
 * td_attn_args): the logits never reach global memory. The idea is
 * FlashAttention's (Dao et al. 2022, "FlashAttention: Fast and
 * Memory-Efficient Exact Attention with IO-Awareness", algorithm 1): keys
 * in tiles, a running max m and sum l per query row, the output rescaled
 * by exp(m_old - m_new) whenever the max grows, one division by l at the
 * end. Everything is float32 (FMA on the CUDA cores, no tensor cores), so
 * the result is the CPU's up to summation order.
 *
 * Work split. One block per (sequence s, head h, tile of BQ query rows);
 * its NW warps split the keys: warp w takes the 32-key tiles w, w + NW,
 * ... (lane = key within the tile), so each K/V row is read from global
 * memory once per block, and the tiles live in warp-private shared memory
 * (no block barrier inside the loop). For each tile a warp
 *   1. stages K (32 rows of head_dim) in shared memory, row stride
 *      head_dim + 1 so that lane j reading its own row hits bank j;
 *   2. computes the tile's logits for all BQ rows (lane j: key j; the query
 *      rows are broadcast from shared memory), adds the relative-key term
 *      (Shaw et al. 2018, eq. 3; q_i . rel_k[r] precomputed per row and
 *      distance bucket r), masks invisible keys to -inf;
 *   3. updates m, l (l kept per lane, summed at the end: the rescale factor
 *      is the same on every lane) and rescales its output accumulators;
 *   4. stages V in the same buffer and accumulates P V (lane: columns lane,
 *      lane + 32, ...; up to HDL = 8 per lane, head_dim <= 256), plus
 *      P rel_v (eq. 5) when asked.
 * At the end the NW partial states (m, l, o) are merged through shared
 * memory: out = sum_w exp(m_w - M) o_w / sum_w exp(m_w - M) l_w.
 *
 * Masks and garbage. Row i sees keys j < lim_i (kv_len, n_k, causal bound
 * at its position). The block reads K/V rows below lblk = max_i lim_i only:
 * every such row is visible to some query, so it was written (finite);
 * rows of a tile beyond lblk are staged as zeros. A masked key's logit is
 * -inf and its weight exactly 0; while a row has seen no visible key its
 * max stays -inf and both exponentials are skipped (exp(-inf - -inf) would
 * be NaN), so a row with no visible key ends with l = 0 and gets zeros,
 * as the CPU twin.
 */
#include "gpu_internal.cuh"

#define FA_TILE 32    /* keys per warp tile: one per lane */
#define FA_WARPS 4    /* warps per block (fewer when shared memory is short) */
#define FA_MAX_HD 256 /* head_dim <= 32 * 8 columns per lane */

/* Shared memory of one block, in floats, for nw warps. */
static size_t fa_smem_floats(int bq, int hd, int64_t nqr, int nw)
{
    const size_t warp = (size_t)FA_TILE * (size_t)(hd + 1) + (size_t)FA_TILE * (size_t)bq;
    return (size_t)bq * (size_t)hd + (size_t)nqr + (size_t)nw * warp;
}

/* Query rows per block and columns per lane for head_dim hd: the output
 * accumulators (BQ * HDL per lane) stay within 32 registers. */
static int fa_hdl(int hd)
{
    return hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : 8;
}

static int fa_bq(int n_q, int hd)
{
    if (n_q == 1)
        return 1;
    const int hdl = fa_hdl(hd);
    return hdl <= 2 ? 16 : hdl == 4 ? 8 : 4;
}

static __device__ __forceinline__ float fa_warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

static __device__ __forceinline__ float fa_warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Distance bucket of key j for a query at absolute position qpos: the
 * index into rel_k / rel_v rows (backend.h). */
static __device__ __forceinline__ int fa_rel_bucket(int64_t j, int64_t qpos, int R)
{
    int64_t r = j - qpos;
    r = r < -R ? -R : (r > R ? R : r);
    return (int)(r + R);
}

/* One warp stages rows j0 .. j0 + FA_TILE - 1 of a K or V head (head_dim
 * hd, row stride ld) into dst (row stride hd + 1); rows r >= nv are zeros.
 * vec: hd, ld and base are multiples of 4 floats (16-byte loads). */
static __device__ __forceinline__ void fa_load_tile(float *dst, const float *base, int j0,
                                                    int nv, int hd, int64_t ld, int vec)
{
    const int lane = threadIdx.x & 31, kv_ld = hd + 1;
    if (vec) {
        const int hd4 = hd >> 2;
        for (int e = lane; e < FA_TILE * hd4; e += 32) {
            const int r = e / hd4, c = (e - r * hd4) << 2;
            float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < nv)
                f = __ldg((const float4 *)(base + (int64_t)(j0 + r) * ld + c));
            float *d = dst + r * kv_ld + c;
            d[0] = f.x;
            d[1] = f.y;
            d[2] = f.z;
            d[3] = f.w;
        }
        return;
    }
    for (int e = lane; e < FA_TILE * hd; e += 32) {
        const int r = e / hd, c = e - r * hd;
        dst[r * kv_ld + c] = r < nv ? base[(int64_t)(j0 + r) * ld + c] : 0.0f;
    }
}

template <int BQ, int HDL>
static __global__ void __launch_bounds__(FA_WARPS * 32)
k_attn_flash(td_attn_args a, int q_tiles)
{
    extern __shared__ __align__(16) float fa_smem[];
    const int hd = a.head_dim, R = a.rel_max;
    const int nrel = a.rel_k ? 2 * R + 1 : 0; /* fits: checked by the launcher */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int kv_ld = hd + 1;

    /* block -> (s, h, query tile), the tile fastest: neighbouring blocks
     * read the same K/V head from L2 */
    const int qt = (int)(blockIdx.x % (unsigned)q_tiles);
    const int h = (int)(blockIdx.x / (unsigned)q_tiles % (unsigned)a.n_heads);
    const int s = (int)(blockIdx.x / (unsigned)q_tiles / (unsigned)a.n_heads);
    const int i0 = qt * BQ;
    const int ks = a.kv_index ? a.kv_index[s] : s;
    const int64_t pos0 = (a.q_pos ? (int64_t)a.q_pos[s] : (int64_t)a.q_pos0) + i0;
    int64_t Ls = a.n_k;
    if (a.kv_len && a.kv_len[s] < Ls)
        Ls = a.kv_len[s];

    int lim[BQ]; /* visible keys of row i0 + i (0 for rows past n_q) */
    int lblk = 0;
#pragma unroll
    for (int i = 0; i < BQ; i++) {
        int64_t L = i0 + i < a.n_q ? Ls : 0;
        if (a.causal && pos0 + i + 1 < L)
            L = pos0 + i + 1;
        lim[i] = L < 0 ? 0 : (int)L;
        lblk = lim[i] > lblk ? lim[i] : lblk;
    }

    float *q_s = fa_smem;                               /* (BQ, hd) */
    float *qr_s = q_s + BQ * hd;                        /* (BQ, nrel): q_i . rel_k[r] */
    const int warp_floats = FA_TILE * kv_ld + BQ * FA_TILE;
    float *kv_s = qr_s + BQ * nrel + w * warp_floats;   /* (FA_TILE, kv_ld): K, then V */
    float *p_s = kv_s + FA_TILE * kv_ld;                /* (BQ, FA_TILE) weights */

    const float *qb = a.q + s * a.q_seq_stride + (int64_t)h * hd;
    for (int e = threadIdx.x; e < BQ * hd; e += blockDim.x) {
        const int i = e / hd, c = e - i * hd;
        q_s[e] = i0 + i < a.n_q ? qb[(int64_t)(i0 + i) * a.ld_q + c] : 0.0f;
    }
    __syncthreads();
    if (nrel) {
        for (int e = threadIdx.x; e < BQ * nrel; e += blockDim.x) {
            const int i = e / nrel, r = e - i * nrel;
            const float *rk = a.rel_k + (int64_t)r * hd;
            float acc = 0.0f;
            for (int c = 0; c < hd; c++)
                acc = fmaf(q_s[i * hd + c], __ldg(rk + c), acc);
            qr_s[e] = acc;
        }
        __syncthreads();
    }

    float m[BQ], l[BQ], o[BQ][HDL];
#pragma unroll
    for (int i = 0; i < BQ; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int u = 0; u < HDL; u++)
            o[i][u] = 0.0f;
    }

    const float *Kb = a.k + ks * a.kv_seq_stride + (int64_t)h * hd;
    const float *Vb = a.v + ks * a.kv_seq_stride + (int64_t)h * hd;
    const int vec4 = (hd & 3) == 0; /* q rows 16-byte aligned in q_s */
    /* K/V rows as 16-byte loads when every row start is 16-byte aligned */
    const int kv4 = vec4 && (a.ld_kv & 3) == 0 && ((uintptr_t)Kb & 15) == 0 &&
                    ((uintptr_t)Vb & 15) == 0;
    for (int j0 = w * FA_TILE; j0 < lblk; j0 += nw * FA_TILE) {
        const int nv = lblk - j0 < FA_TILE ? lblk - j0 : FA_TILE;
        /* 1. K tile (rows past lblk as zeros: never read from memory) */
        fa_load_tile(kv_s, Kb, j0, nv, hd, a.ld_kv, kv4);
        __syncwarp();

        /* 2. logits of key j = j0 + lane for every row */
        const int j = j0 + lane;
        const float *kr = kv_s + lane * kv_ld;
        float sc[BQ];
#pragma unroll
        for (int i = 0; i < BQ; i++)
            sc[i] = 0.0f;
        if (vec4) {
            for (int c = 0; c < hd; c += 4) {
                const float k0 = kr[c], k1 = kr[c + 1], k2 = kr[c + 2], k3 = kr[c + 3];
#pragma unroll
                for (int i = 0; i < BQ; i++) {
                    const float4 qv = *(const float4 *)(q_s + i * hd + c);
                    sc[i] = fmaf(qv.x, k0, sc[i]);
                    sc[i] = fmaf(qv.y, k1, sc[i]);
                    sc[i] = fmaf(qv.z, k2, sc[i]);
                    sc[i] = fmaf(qv.w, k3, sc[i]);
                }
            }
        } else {
            for (int c = 0; c < hd; c++) {
                const float kc = kr[c];
#pragma unroll
                for (int i = 0; i < BQ; i++)
                    sc[i] = fmaf(q_s[i * hd + c], kc, sc[i]);
            }
        }
#pragma unroll
        for (int i = 0; i < BQ; i++) {
            if (nrel)
                sc[i] += qr_s[i * nrel + fa_rel_bucket(j, pos0 + i, R)];
            if (!(j < lim[i]))
                sc[i] = -INFINITY;
        }

        /* 3. running max and sum; the tile's weights to p_s */
#pragma unroll
        for (int i = 0; i < BQ; i++) {
            const float mnew = fmaxf(m[i], fa_warp_max(sc[i]));
            float p = 0.0f, scale = 1.0f;
            if (mnew != -INFINITY) { /* else nothing visible yet: keep zeros */
                p = expf(sc[i] - mnew);
                scale = expf(m[i] - mnew);
            }
            m[i] = mnew;
            l[i] = fmaf(l[i], scale, p);
#pragma unroll
            for (int u = 0; u < HDL; u++)
                o[i][u] *= scale;
            p_s[i * FA_TILE + lane] = p;
        }
        __syncwarp(); /* every lane done with K, p_s written */

        /* 4. V tile into the same buffer, then o += P V (+ P rel_v) */
        fa_load_tile(kv_s, Vb, j0, nv, hd, a.ld_kv, kv4);
        __syncwarp();
        for (int jj = 0; jj < nv; jj++) {
            const float *vr = kv_s + jj * kv_ld;
            float pj[BQ];
#pragma unroll
            for (int i = 0; i < BQ; i++)
                pj[i] = p_s[i * FA_TILE + jj];
#pragma unroll
            for (int u = 0; u < HDL; u++) {
                const int c = lane + 32 * u;
                if (c < hd) {
                    const float vc = vr[c];
#pragma unroll
                    for (int i = 0; i < BQ; i++)
                        o[i][u] = fmaf(pj[i], vc, o[i][u]);
                }
            }
            if (a.rel_v) {
#pragma unroll
                for (int i = 0; i < BQ; i++) {
                    const float *rv = a.rel_v + (int64_t)fa_rel_bucket(j0 + jj, pos0 + i, R) * hd;
#pragma unroll
                    for (int u = 0; u < HDL; u++) {
                        const int c = lane + 32 * u;
                        if (c < hd)
                            o[i][u] = fmaf(pj[i], __ldg(rv + c), o[i][u]);
                    }
                }
            }
        }
        __syncwarp(); /* the next tile overwrites kv_s and p_s */
    }

    /* Merge: each warp leaves (m, l, o[hd]) per row in its own buffer
     * (BQ * (hd + 2) <= warp_floats for BQ <= 32). */
    float *st = kv_s;
#pragma unroll
    for (int i = 0; i < BQ; i++) {
        const float lt = fa_warp_sum(l[i]);
        if (lane == 0) {
            st[i * (hd + 2)] = m[i];
            st[i * (hd + 2) + 1] = lt;
        }
#pragma unroll
        for (int u = 0; u < HDL; u++) {
            const int c = lane + 32 * u;
            if (c < hd)
                st[i * (hd + 2) + 2 + c] = o[i][u];
        }
    }
    __syncthreads();
    const float *st0 = qr_s + BQ * nrel; /* warp 0's buffer */
    float *ob = a.out + s * a.out_seq_stride + (int64_t)h * hd;
    for (int e = threadIdx.x; e < BQ * hd; e += blockDim.x) {
        const int i = e / hd, c = e - i * hd;
        if (i0 + i >= a.n_q)
            break; /* e grows with i: every later e is past n_q too */
        float M = -INFINITY;
        for (int ww = 0; ww < nw; ww++)
            M = fmaxf(M, st0[(size_t)ww * warp_floats + i * (hd + 2)]);
        float L = 0.0f, O = 0.0f;
        if (M != -INFINITY)
            for (int ww = 0; ww < nw; ww++) {
                const float *sw = st0 + (size_t)ww * warp_floats + i * (hd + 2);
                if (sw[0] != -INFINITY) {
                    const float f = expf(sw[0] - M);
                    L = fmaf(sw[1], f, L);
                    O = fmaf(sw[2 + c], f, O);
                }
            }
        ob[(int64_t)(i0 + i) * a.ld_out + c] = M == -INFINITY ? 0.0f : O / L;
    }
}

/* The launch geometry of one call, or 0 when the flash kernel cannot take
 * it (head_dim > FA_MAX_HD, a relative table or grid too large). */
typedef struct fa_plan {
    int bq, hdl, nw, q_tiles;
    unsigned blocks;
    size_t smem;
} fa_plan;

static int fa_plan_for(const gpu_ctx *c, const td_attn_args *a, fa_plan *p)
{
    if (a->head_dim > FA_MAX_HD || a->n_q <= 0 || a->n_seq <= 0 || a->n_heads <= 0)
        return 0;
    const int64_t nrel = a->rel_k ? 2 * (int64_t)a->rel_max + 1 : 0;
    p->hdl = fa_hdl(a->head_dim);
    p->bq = fa_bq(a->n_q, a->head_dim);
    if (nrel > (1 << 16))
        return 0;
    p->q_tiles = (a->n_q + p->bq - 1) / p->bq;
    const int64_t blocks = (int64_t)a->n_seq * a->n_heads * p->q_tiles;
    if (blocks > 0x7fffffffLL)
        return 0;
    p->blocks = (unsigned)blocks;
    for (p->nw = FA_WARPS; p->nw > 0; p->nw--) {
        p->smem = fa_smem_floats(p->bq, a->head_dim, nrel * p->bq, p->nw) * sizeof(float);
        if (p->smem <= (size_t)c->max_smem_optin)
            return 1;
    }
    return 0;
}

extern "C" int gpu_attn_flash_fits(const gpu_ctx *c, const td_attn_args *a)
{
    fa_plan p;
    return fa_plan_for(c, a, &p);
}

template <int BQ, int HDL>
static void fa_launch(gpu_ctx *c, const td_attn_args *a, const fa_plan *p)
{
    if (p->smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(k_attn_flash<BQ, HDL>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)p->smem));
    k_attn_flash<BQ, HDL><<<p->blocks, p->nw * 32, p->smem, c->stream>>>(*a, p->q_tiles);
    CUDA_CHECK_LAUNCH();
}

extern "C" void gpu_attn_flash(gpu_ctx *c, const td_attn_args *a)
{
    fa_plan p;
    if (!fa_plan_for(c, a, &p)) {
        gpu_fail(c, "cuda: attention: the flash kernel cannot take head_dim %d, rel_max %d",
                 a->head_dim, a->rel_max);
        return;
    }
    /* the (BQ, HDL) pairs fa_bq() and fa_hdl() produce */
    switch (p.bq * 16 + p.hdl) {
    case 1 * 16 + 1: fa_launch<1, 1>(c, a, &p); break;
    case 1 * 16 + 2: fa_launch<1, 2>(c, a, &p); break;
    case 1 * 16 + 4: fa_launch<1, 4>(c, a, &p); break;
    case 1 * 16 + 8: fa_launch<1, 8>(c, a, &p); break;
    case 16 * 16 + 1: fa_launch<16, 1>(c, a, &p); break;
    case 16 * 16 + 2: fa_launch<16, 2>(c, a, &p); break;
    case 8 * 16 + 4: fa_launch<8, 4>(c, a, &p); break;
    case 4 * 16 + 8: fa_launch<4, 8>(c, a, &p); break;
    default:
        gpu_fail(c, "cuda: attention: no flash kernel for %d rows x %d columns per lane", p.bq,
                 p.hdl);
    }
}
