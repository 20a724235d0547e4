/*
 * cpu_amx.h - the AMX tile blocks the int8 and bfloat16 kernels share
 * (private to cpu/; only included by translation units that compile the
 * functions using it with the amx-tile target).
 *
 * A block is up to 32 rows x one 32-feature panel: tiles 0-3 the sums
 * (rows 0-15 / 16-31 x features 0-15 / 16-31), 4-5 the activations (16
 * rows x 64 bytes, at the rows' stride), 6-7 the weights (16 rows of 64
 * bytes of one panel half, 128 bytes apart), each step 64 bytes of every
 * activation row and 16 weight rows on.
 */
#ifndef TD_CPU_AMX_H
#define TD_CPU_AMX_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef struct td_amx_tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} td_amx_tilecfg;

/* Tiles for a block of r (1..32) rows. */
__attribute__((target("amx-tile"))) static inline void td_amx_config(int r)
{
    td_amx_tilecfg t;
    memset(&t, 0, sizeof t);
    t.palette = 1;
    const int r0 = r > 16 ? 16 : r, r1 = r > 16 ? r - 16 : 0;
    t.rows[0] = t.rows[1] = t.rows[4] = (uint8_t)r0;
    t.colsb[0] = t.colsb[1] = t.colsb[4] = 64;
    if (r1) {
        t.rows[2] = t.rows[3] = t.rows[5] = (uint8_t)r1;
        t.colsb[2] = t.colsb[3] = t.colsb[5] = 64;
    }
    t.rows[6] = t.rows[7] = 16;
    t.colsb[6] = t.colsb[7] = 64;
    _tile_loadconfig(&t);
}

/* The sums of one block into acc (32 x 32 values of 4 bytes): r rows of A
 * (bytes, row stride lda) times the panel at B over `steps` steps, with the
 * tile product DP (_tile_dpbusd, _tile_dpbf16ps). Tiles configured for r
 * by td_amx_config. */
#define TD_AMX_BLOCK(DP, r, A, lda, B, steps, acc)                                      \
    do {                                                                                \
        _tile_zero(0);                                                                  \
        _tile_zero(1);                                                                  \
        if ((r) > 16) {                                                                 \
            _tile_zero(2);                                                              \
            _tile_zero(3);                                                              \
        }                                                                               \
        for (int64_t s_ = 0; s_ < (steps); s_++) {                                      \
            _tile_loadd(4, (A) + 64 * s_, (lda));                                       \
            _tile_loadd(6, (B) + 2048 * s_, 128);                                       \
            _tile_loadd(7, (B) + 2048 * s_ + 64, 128);                                  \
            DP(0, 4, 6);                                                                \
            DP(1, 4, 7);                                                                \
            if ((r) > 16) {                                                             \
                _tile_loadd(5, (A) + 16 * (lda) + 64 * s_, (lda));                      \
                DP(2, 5, 6);                                                            \
                DP(3, 5, 7);                                                            \
            }                                                                           \
        }                                                                               \
        _tile_stored(0, &(acc)[0][0], 128);                                             \
        _tile_stored(1, &(acc)[0][16], 128);                                            \
        if ((r) > 16) {                                                                 \
            _tile_stored(2, &(acc)[16][0], 128);                                        \
            _tile_stored(3, &(acc)[16][16], 128);                                       \
        }                                                                               \
    } while (0)

#endif /* TD_CPU_AMX_H */
