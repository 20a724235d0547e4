/*
 * cpu_kernels.h - the CPU backend's vectorised kernels and the instruction
 * set they run with (private to cpu/ and its white-box tests).
 *
 * Instruction set: chosen once at run time from what the CPU reports
 * (__builtin_cpu_supports), never from the build machine: AVX-512
 * (F+BW+VL+DQ), else AVX2+FMA, else plain C. TD_CPU_ISA=scalar|avx2|avx512
 * in the environment lowers the choice (never raises it above the CPU's);
 * td_cpu_isa_set() does the same for tests; TD_CPU_AMX=0 keeps the int8
 * kernels off AMX (td_cpu_amx_set). Every kernel has a plain-C
 * version, which is also the reference the tests compare against.
 */
#ifndef TD_CPU_KERNELS_H
#define TD_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "activation.h"

typedef enum td_cpu_isa {
    TD_CPU_ISA_SCALAR = 0,
    TD_CPU_ISA_AVX2 = 1,   /* AVX2 + FMA */
    TD_CPU_ISA_AVX512 = 2, /* AVX-512 F, BW, VL, DQ */
} td_cpu_isa;

/* The instruction set kernels use now. */
td_cpu_isa td_cpu_isa_get(void);
/* The best the CPU has (ignoring TD_CPU_ISA and td_cpu_isa_set). */
td_cpu_isa td_cpu_isa_max(void);
/* Lowers (or restores) the instruction set, clamped to td_cpu_isa_max();
 * returns the previous one. For tests and benchmarks: not thread-safe
 * against kernels running at the same time. */
td_cpu_isa td_cpu_isa_set(td_cpu_isa isa);
/* AVX-512 VNNI (vpdpbusd) is usable: the CPU has it and the current
 * instruction set is AVX512. */
int td_cpu_has_vnni(void);
/* AMX int8 (tdpbusd) is usable: VNNI is, the CPU has AMX-TILE and
 * AMX-INT8, the kernel granted this process the tile state, and neither
 * TD_CPU_AMX=0 in the environment nor td_cpu_amx_set(0) turned it off. */
int td_cpu_has_amx(void);
/* AMX-BF16 (tdpbf16ps) is usable: as td_cpu_has_amx, with AMX-BF16. */
int td_cpu_has_amx_bf16(void);
/* AVX512-BF16 (vdpbf16ps) is usable: the CPU has it and the current
 * instruction set is AVX512 (Cooper Lake, Sapphire Rapids and later, AMD
 * Zen 4 and later). */
int td_cpu_has_avx512_bf16(void);
/* bfloat16 products run in hardware: AVX512-BF16 or AMX-BF16 (the
 * condition for --dtype bfloat16 on the CPU). */
int td_cpu_has_bf16(void);
/* Turns AMX on or off (for tests and benchmarks, as td_cpu_isa_set);
 * returns the previous setting. */
int td_cpu_amx_set(int on);
const char *td_cpu_isa_name(td_cpu_isa isa);

/* One row of the decoding scores (backend.h, logprobs_topk): x (vocab) in
 * place becomes log_softmax(x), suppressed ids -inf, all -inf but eos_id = 0
 * when forced; out_val/out_idx (k) the top-k of x + b, sorted descending,
 * ties toward the lower id. 1 <= k <= min(vocab, 64) (the caller checks).
 * Dispatches on td_cpu_isa_get(). */
void td_cpu_logprobs_row(float *x, int64_t vocab, const int32_t *suppress,
                         int n_suppress, int forced, int eos_id, float b, int k,
                         float *out_val, int32_t *out_idx);
/* The plain-C version (libm expf, float64 sum), the reference. */
void td_cpu_logprobs_row_ref(float *x, int64_t vocab, const int32_t *suppress,
                             int n_suppress, int forced, int eos_id, float b,
                             int k, float *out_val, int32_t *out_idx);

/* exp of n floats, x <= 0 or -inf (the range the log-softmax needs), with
 * the instruction set's polynomial: y[i] = exp(x[i]). For the tests. */
void td_cpu_exp_neg(float *y, const float *x, int64_t n);

/* One row of bias_act (cpu_act.c): x (d) = act(x + b), b optional.
 * ReLU, SiLU and no activation run with AVX2 where the CPU has it (SiLU
 * within a few ulp of the plain-C row, the others its exact bits); the
 * GELUs and CPUs without AVX2 take the plain-C row. Dispatches on
 * td_cpu_isa_get(). */
void td_cpu_bias_act_row(float *x, const float *b, int64_t d, td_activation act);
/* The plain-C row: td_act (backend/activation.h) per element, the reference. */
void td_cpu_bias_act_row_ref(float *x, const float *b, int64_t d, td_activation act);

/* --- packed float32 GEMM (cpu_gemm.c) ------------------------------------
 * A weight (rows = output features, cols = input features) packed into
 * panels of GEMM_NR output features: P[(p*cols + c)*GEMM_NR + j] =
 * W[p*GEMM_NR + j][c], zero past rows. */
#define GEMM_NR 32
/* td_weight.layout of a packed float32 matrix. */
#define TD_CPU_LAYOUT_PACKED 1

/* Whether weight_upload packs a (rows, cols) matrix now: with AVX2 or
 * AVX-512 (the packed kernels' instruction sets) and at least one panel
 * of rows. */
int td_cpu_pack_wanted(int64_t rows, int64_t cols);
/* Floats of the packed form (rows rounded up to whole panels). */
int64_t td_cpu_packed_floats(int64_t rows, int64_t cols);
/* Packs W (rows, cols) row-major, times scale, into dst. */
void td_cpu_pack(float *dst, const float *W, int64_t rows, int64_t cols, float scale);
/* Row r of a packed matrix, times scale, into dst (cols floats): the
 * embedding lookup of a packed (tied) table. */
void td_cpu_packed_row(float *dst, const float *P, int64_t cols, int64_t r, float scale);
/* y[:, p0*NR .. p1*NR) (m rows, clipped to n_out) = x (m, k) @ W^T + bias for
 * the panels [p0, p1) of the packed W (n_out, k); bias optional (n_out).
 * AVX-512 or AVX2 kernel (the same bits), or the plain-C one over the same
 * layout. */
void td_cpu_gemm_packed(float *y, int64_t ld_y, const float *x, int64_t ld_x, int64_t m,
                        const float *P, int64_t n_out, int64_t k, const float *bias,
                        int64_t p0, int64_t p1);

/* --- int8 weights (cpu_int8.c) -------------------------------------------
 * Per-feature symmetric scales at load, per-row activation scales per call,
 * int32 sums (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw, or plain C: the same
 * bits). */
#define TD_CPU_LAYOUT_INT8 2

/* Input features rounded up to groups of 4 (K4 groups). */
int64_t td_cpu_q8_k4(int64_t cols);
/* Bytes of a quantized (rows, cols) matrix: weights, scales, compensations. */
size_t td_cpu_q8_bytes(int64_t rows, int64_t cols);
/* Quantizes W (rows, cols) times scale into dst (td_cpu_q8_bytes). */
void td_cpu_q8_pack(void *dst, const float *W, int64_t rows, int64_t cols, float scale);
/* Row r dequantized, times scale (the embedding lookup of a tied table). */
void td_cpu_q8_row(float *dst, const void *P, int64_t rows, int64_t cols, int64_t r,
                   float scale);
/* Quantizes m rows of x (k) to u (m rows of 4*K4 bytes, value + 128, padded
 * with 128) and their scales xs (m). */
void td_cpu_q8_quant_rows(uint8_t *u, float *xs, const float *x, int64_t ld_x, int64_t m,
                          int64_t k);
/* y (m, panels [p0, p1) of 32 features, clipped to n_out) from quantized
 * rows and the quantized W (n_out, k), plus bias (optional). */
void td_cpu_gemm_q8(float *y, int64_t ld_y, const uint8_t *u, const float *xs, int64_t m,
                    const void *P, int64_t n_out, int64_t k, const float *bias, int64_t p0,
                    int64_t p1);

/* --- bfloat16 weights (cpu_bf16.c) ---------------------------------------
 * Weights rounded to bfloat16 at load, activations per call, float32 sums
 * on AMX tiles (tdpbf16ps), with AVX512-BF16 (vdpbf16ps) or in plain C. */
#define TD_CPU_LAYOUT_BF16 3

/* Round to nearest even of the float32 bits (NaN stays a quiet NaN). */
uint16_t td_cpu_bf16_round(float f);
float td_cpu_bf16_float(uint16_t h);
/* Input features rounded up to pairs (K2 pairs). */
int64_t td_cpu_b16_k2(int64_t cols);
/* Bytes of a packed bfloat16 (rows, cols) matrix. */
size_t td_cpu_b16_bytes(int64_t rows, int64_t cols);
/* Rounds W (rows, cols) times scale into dst (td_cpu_b16_bytes). */
void td_cpu_b16_pack(void *dst, const float *W, int64_t rows, int64_t cols, float scale);
/* Row r back in float32, times scale (the embedding lookup of a tied table). */
void td_cpu_b16_row(float *dst, const void *P, int64_t rows, int64_t cols, int64_t r,
                    float scale);
/* Rounds m rows of x (k) to a (m rows of 2*K2 values, zero-padded). */
void td_cpu_b16_round_rows(uint16_t *a, const float *x, int64_t ld_x, int64_t m, int64_t k);
/* y (m, panels [p0, p1) of 32 features, clipped to n_out) from rounded rows
 * and the packed W (n_out, k), plus bias (optional): AMX when the CPU has
 * AMX-BF16 and k is a multiple of 32, else AVX512-BF16 where the CPU has
 * it, else plain C. */
void td_cpu_gemm_b16(float *y, int64_t ld_y, const uint16_t *a, int64_t m, const void *P,
                     int64_t n_out, int64_t k, const float *bias, int64_t p0, int64_t p1);

#endif /* TD_CPU_KERNELS_H */
