/*
 * fuzz_spm_model.c - libFuzzer target for the SentencePiece ModelProto
 * reader (tokenizer/spm_proto.c) and everything built from it at load (piece
 * tables, the charsmap trie, byte pieces). A model that loads must then
 * encode and decode without faults, with every id in range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const kTexts[] = {
    "", " ", "Hello, world!", "  runs   of  spaces ", "caf\xc3\xa9 \xef\xbc\xa1\xef\xbc\xa2",
    "\xff\xfe bad \xc3", "a\tb\nc", "\xe2\x96\x81\xe2\x96\x81x",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spm_model *m = NULL;
    char err[256];
    if (spm_load_mem(&m, data, size, "fuzz", err, sizeof err) != 0) {
        if (m != NULL || err[0] == '\0')
            abort(); /* a failure must leave nothing and say why */
        return 0;
    }
    const int n_pieces = spm_size(m);
    for (size_t t = 0; t < sizeof kTexts / sizeof kTexts[0]; t++) {
        int32_t *ids = NULL;
        int n = 0;
        if (spm_encode(m, kTexts[t], strlen(kTexts[t]), &ids, &n) != 0)
            abort();
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= n_pieces)
                abort();
        char *text = NULL;
        size_t len = 0;
        if (spm_decode(m, ids, n, &text, &len) != 0 || strlen(text) > len)
            abort();
        free(text);
        free(ids);
    }
    /* every id decodes alone */
    for (int id = 0; id < n_pieces && id < 4096; id++) {
        char *text = NULL;
        size_t len = 0;
        int32_t one = id;
        if (spm_decode(m, &one, 1, &text, &len) != 0)
            abort();
        free(text);
    }
    spm_free(m);
    return 0;
}
