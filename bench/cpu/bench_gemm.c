/*
 * bench_gemm.c - the CPU backend's linear op on the shapes of a
 * transformer-base decoding step and encoder, by weight layout:
 *   openblas  row-major weights, OpenBLAS sgemm/sgemv per thread slice
 *             (what a CPU without AVX2 runs)
 *   packed    weights packed at load, the AVX-512 or AVX2 kernel (cpu_gemm.c)
 *   int8      --dtype int8's layout (cpu_int8.c: VNNI, AMX or AVX2), AVX2 up
 *   bfloat16  --dtype bfloat16's (cpu_bf16.c: AVX512-BF16 or AMX-BF16), where
 *             the CPU multiplies bfloat16
 * Interleaved rounds; prints min and median microseconds per call and the
 * GFLOP/s of the min.
 *
 *   bench_gemm [--threads N] [--rounds R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bench_util.h"
#include "cpu_backend.h"
#include "cpu_kernels.h"
int main(int argc, char **argv)
{
    int threads = 1, rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--rounds R]\n");
            return 2;
        }
    }
    char err[256];
    td_backend *be = td_cpu_backend_create(threads, err, sizeof err);
    if (!be) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    static const int64_t nk[][2] = {{512, 512}, {2048, 512}, {512, 2048}, {32000, 512}};
    static const int64_t ms[] = {1, 4, 32, 128, 768};
    const td_cpu_isa top = td_cpu_isa_max();
    const char *names[4] = {"openblas", "packed", "int8", "bfloat16"};
    td_backend *bes[4] = {be, be, NULL, NULL};
    int lay[4], n_lay = 0;
    lay[n_lay++] = 0;
    if (top >= TD_CPU_ISA_AVX2) {
        lay[n_lay++] = 1;
        bes[2] = bench_cpu_backend(TD_STORE_INT8, threads);
        lay[n_lay++] = 2;
    }
    if (td_cpu_has_bf16()) {
        bes[3] = bench_cpu_backend(TD_STORE_BF16, threads);
        lay[n_lay++] = 3;
    }
    printf("threads %d, %d interleaved rounds, isa %s\n", threads, rounds, td_cpu_isa_name(top));
    printf("| M | N | K | layout | min us | median us | GFLOP/s (min) |\n|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof nk / sizeof nk[0]; s++) {
        const int64_t N = nk[s][0], K = nk[s][1];
        float *w = malloc((size_t)(N * K) * sizeof *w);
        for (int64_t i = 0; i < N * K; i++)
            w[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        td_weight W[4];
        for (int li = 0; li < n_lay; li++) {
            const int l = lay[li];
            /* row-major when uploaded with the packed kernels off */
            td_cpu_isa_set(l ? top : TD_CPU_ISA_SCALAR);
            if (bes[l]->ops->weight_upload(bes[l], &W[l], w, N, K, TD_F32, 1.0f, err,
                                           sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            if (bes[l]->ops->reserve_linear)
                bes[l]->ops->reserve_linear(bes[l], &W[l], 768);
        }
        td_cpu_isa_set(top);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            const int64_t M = ms[mi];
            if (M * N > (int64_t)128 * 32000)
                continue;
            float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
            for (int64_t i = 0; i < M * K; i++)
                x[i] = (float)(i % 17) / 17.0f;
            const double flops = 2.0 * (double)M * (double)N * (double)K;
            int reps = (int)(2e8 / flops) + 1;
            double t[4][64];
            for (int r = 0; r < rounds && r < 64; r++)
                for (int li = 0; li < n_lay; li++) {
                    const int l = lay[li];
                    double t0 = bench_now();
                    for (int q = 0; q < reps; q++)
                        bes[l]->ops->linear(bes[l], y, N, x, K, M, &W[l], NULL);
                    t[l][r] = (bench_now() - t0) / reps * 1e6;
                }
            for (int li = 0; li < n_lay; li++) {
                const int l = lay[li];
                qsort(t[l], (size_t)rounds, sizeof(double), bench_cmpd);
                printf("| %lld | %lld | %lld | %s | %.1f | %.1f | %.1f |\n", (long long)M,
                       (long long)N, (long long)K, names[l], t[l][0], t[l][rounds / 2],
                       flops / t[l][0] * 1e-3);
            }
            free(x), free(y);
        }
        for (int li = 0; li < n_lay; li++)
            bes[lay[li]]->ops->weight_free(bes[lay[li]], &W[lay[li]]);
        free(w);
    }
    for (int l = 2; l < 4; l++)
        if (bes[l])
            bes[l]->ops->destroy(bes[l]);
    be->ops->destroy(be);
    return 0;
}
