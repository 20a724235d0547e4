/*
 * bench_dnnl.c - oneDNN (Debian's libdnnl, its BLAS-like dnnl_sgemm and
 * dnnl_gemm_u8s8s32) against the CPU backend's linear op (float32 packed
 * weights; --dtype int8: quantized weights, AMX / VNNI) on the shapes of a
 * transformer-base decoding step, one thread each, interleaved rounds;
 * min and median microseconds per call and GFLOP/s of the min. oneDNN
 * gets row-major weights (it has no pack-once entry point for these) and,
 * for int8, already-quantized operands and int32 output: its time leaves
 * out the quantization and the float epilogue that ours includes.
 * Built only where libdnnl-dev is installed; run with OMP_NUM_THREADS=1.
 *
 *   OMP_NUM_THREADS=1 bench_dnnl [--rounds R]
 */
#include <dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bench_util.h"
#include "device.h"

int main(int argc, char **argv)
{
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_dnnl [--rounds R]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64)
        rounds = 5;
    const dnnl_version_t *v = dnnl_version();
    printf("oneDNN %d.%d.%d, one thread, %d interleaved rounds\n", v->major, v->minor, v->patch,
           rounds);
    td_backend *bf = bench_cpu_backend(TD_STORE_AUTO, 1);
    td_backend *bq = bench_cpu_backend(TD_STORE_INT8, 1);
    static const int64_t nk[][2] = {{2048, 512}, {512, 2048}, {32000, 512}};
    static const int64_t ms[] = {1, 4, 32, 128};
    const char *names[4] = {"transformerd f32", "oneDNN sgemm", "transformerd int8",
                            "oneDNN u8s8s32"};
    printf("| M | N | K | engine | min us | median us | GFLOP/s (min) |\n"
           "|---|---|---|---|---|---|---|\n");
    char err[256];
    for (size_t s = 0; s < sizeof nk / sizeof nk[0]; s++) {
        const int64_t N = nk[s][0], K = nk[s][1];
        float *w = malloc((size_t)(N * K) * sizeof *w);
        int8_t *w8 = malloc((size_t)(N * K));
        for (int64_t i = 0; i < N * K; i++) {
            w[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
            w8[i] = (int8_t)((i * 2654435761u) % 255 - 127);
        }
        td_weight Wf, Wq;
        if (bf->ops->weight_upload(bf, &Wf, w, N, K, TD_F32, 1.0f, err, sizeof err) ||
            bq->ops->weight_upload(bq, &Wq, w, N, K, TD_F32, 1.0f, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            const int64_t M = ms[mi];
            float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
            uint8_t *x8 = malloc((size_t)(M * K));
            int32_t *y32 = malloc((size_t)(M * N) * sizeof *y32);
            for (int64_t i = 0; i < M * K; i++) {
                x[i] = (float)(i % 17) / 17.0f;
                x8[i] = (uint8_t)(i % 251);
            }
            bq->ops->reserve_linear(bq, &Wq, M);
            const int32_t co = 0;
            const double flops = 2.0 * (double)M * (double)N * (double)K;
            const int reps = (int)(2e8 / flops) + 1;
            double t[4][64];
            for (int r = 0; r < rounds; r++)
                for (int e = 0; e < 4; e++) {
                    const double t0 = bench_now();
                    for (int q = 0; q < reps; q++) {
                        if (e == 0)
                            bf->ops->linear(bf, y, N, x, K, M, &Wf, NULL);
                        else if (e == 1)
                            dnnl_sgemm('N', 'T', M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
                        else if (e == 2)
                            bq->ops->linear(bq, y, N, x, K, M, &Wq, NULL);
                        else
                            dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.0f, x8, K, 0, w8, K, 0,
                                              0.0f, y32, N, &co);
                    }
                    t[e][r] = (bench_now() - t0) / reps * 1e6;
                }
            for (int e = 0; e < 4; e++) {
                qsort(t[e], (size_t)rounds, sizeof(double), bench_cmpd);
                printf("| %lld | %lld | %lld | %s | %.1f | %.1f | %.1f |\n", (long long)M,
                       (long long)N, (long long)K, names[e], t[e][0], t[e][rounds / 2],
                       flops / t[e][0] * 1e-3);
            }
            free(x), free(y), free(x8), free(y32);
        }
        bf->ops->weight_free(bf, &Wf);
        bq->ops->weight_free(bq, &Wq);
        free(w), free(w8);
    }
    bf->ops->destroy(bf);
    bq->ops->destroy(bq);
    return 0;
}
