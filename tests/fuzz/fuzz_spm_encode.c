/*
 * fuzz_spm_encode.c - libFuzzer target for SentencePiece normalisation,
 * segmentation and decoding on arbitrary bytes (invalid UTF-8, NULs, long
 * runs), with the four test models of tests/data/spm (unigram with the
 * nmt_nfkc charsmap, unigram with byte fallback, BPE, identity). Checks:
 * ids in range, piece spans inside the normalized text, decode succeeds,
 * and encode is deterministic.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_MODELS 4
static spm_model *g_models[N_MODELS];

static void load_models(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *names[N_MODELS] = {"unigram_nfkc", "unigram_bytefb", "bpe", "unigram_identity"};
    for (int i = 0; i < N_MODELS; i++) {
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/spm/%s.model", TD_TEST_DATA, names[i]);
        if (spm_load(&g_models[i], path, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_spm_encode: %s\n", err);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_models();
    if (size > 1 << 16)
        return 0;
    for (int k = 0; k < N_MODELS; k++) {
        const spm_model *m = g_models[k];
        int32_t *ids = NULL, *ids2 = NULL;
        int n = 0, n2 = 0;
        char *norm = NULL;
        size_t *spans = NULL;
        size_t nlen = 0;
        if (spm_encode_pieces(m, (const char *)data, size, &ids, &n, &norm, &nlen, &spans) != 0)
            abort();
        for (int i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= spm_size(m))
                abort();
            if (spans[2 * i] > nlen || spans[2 * i + 1] > nlen - spans[2 * i])
                abort();
        }
        if (spm_encode(m, (const char *)data, size, &ids2, &n2) != 0 || n2 != n ||
            memcmp(ids, ids2, (size_t)n * sizeof *ids) != 0)
            abort(); /* both entry points segment identically */
        char *text = NULL;
        size_t len = 0;
        if (spm_decode(m, ids, n, &text, &len) != 0)
            abort();
        free(text);
        free(ids);
        free(ids2);
        free(norm);
        free(spans);
    }
    return 0;
}
