/*
 * fuzz_ct2.c - libFuzzer target for CTranslate2's model.bin (model/wf_ct2.c)
 * through the format seam's own calls (td_wformat_ct2: open, count, tensor,
 * find, read_f32, raw, config, close).
 *
 * Input: a whole model.bin, written to a per-process temporary directory
 * (with a two-token shared_vocabulary.json, so that the config hook,
 * model/ct2_config.c, reaches its token checks) and opened.
 *
 * Invariants (a violation aborts):
 *   - a refusal has a message that starts with "model.bin: " and leaves the
 *     source empty;
 *   - an opened source has count() tensors with unique names,
 *     find(name) == tensor(i), find("") NULL, tensor(count) NULL; each of
 *     dtype F32/F16/BF16/I8, rank <= 8, a shape whose product is
 *     n_elements;
 *   - read_f32 of every tensor (up to 1M elements) succeeds, twice with
 *     the same bits; for float tensors raw's bytes through td_to_f32 give
 *     those bits, so ASan sees every byte either path reads;
 *   - the config hook returns 0 or -1 with a message, never crashes.
 *
 * Build and run: tests/fuzz/run.sh fuzz_ct2 (see tests/fuzz/README.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "safetensors.h"
#include "wformat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const td_wformat td_wformat_ct2; /* model/wf_ct2.c */

#define FUZZ_MAX_CONVERT ((int64_t)1 << 20)

#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            abort();                                                            \
        }                                                                       \
    } while (0)

static char g_dir[] = "/tmp/td_fuzz_ct2_XXXXXX";
static char g_path[64], g_vocab[80];

static void cleanup(void)
{
    unlink(g_path);
    unlink(g_vocab);
    rmdir(g_dir);
}

static void write_input(const uint8_t *data, size_t size)
{
    if (!g_path[0]) {
        FUZZ_CHECK(mkdtemp(g_dir) != NULL);
        snprintf(g_path, sizeof g_path, "%s/model.bin", g_dir);
        snprintf(g_vocab, sizeof g_vocab, "%s/shared_vocabulary.json", g_dir);
        FILE *v = fopen(g_vocab, "w");
        FUZZ_CHECK(v && fputs("[\"<unk>\", \"</s>\"]\n", v) >= 0 && fclose(v) == 0);
        atexit(cleanup);
    }
    FILE *f = fopen(g_path, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    FUZZ_CHECK(fclose(f) == 0);
}

static void check_tensor(const td_wsrc *s, const td_wt *t)
{
    const td_wformat *f = s->fmt;
    FUZZ_CHECK(f->find(s, t->name) == t);
    FUZZ_CHECK(t->dtype == TD_F32 || t->dtype == TD_F16 || t->dtype == TD_BF16 ||
               t->dtype == TD_I8);
    FUZZ_CHECK(t->rank >= 0 && t->rank <= TD_WT_MAX_RANK);
    int64_t e = 1;
    for (int d = 0; d < t->rank; d++) {
        FUZZ_CHECK(t->shape[d] >= 0);
        e *= t->shape[d];
    }
    FUZZ_CHECK(e == t->n_elements);
    if (t->n_elements > FUZZ_MAX_CONVERT)
        return;
    size_t bytes = (size_t)t->n_elements * sizeof(float) + 1;
    float *a = malloc(bytes), *b = malloc(bytes);
    char err[256];
    FUZZ_CHECK(a && b);
    FUZZ_CHECK(f->read_f32(s, t, a, err, sizeof err) == 0);
    FUZZ_CHECK(f->read_f32(s, t, b, err, sizeof err) == 0);
    FUZZ_CHECK(memcmp(a, b, bytes - 1) == 0);
    const void *raw = f->raw(s, t);
    if (raw && t->dtype != TD_I8) {
        td_to_f32(b, raw, t->dtype, t->n_elements);
        FUZZ_CHECK(memcmp(a, b, bytes - 1) == 0);
    }
    free(a);
    free(b);
}

static void check_open(const td_wsrc *s)
{
    const td_wformat *f = s->fmt;
    int n = f->count(s);
    FUZZ_CHECK(n >= 0);
    for (int i = 0; i < n; i++) {
        const td_wt *t = f->tensor(s, i);
        FUZZ_CHECK(t != NULL && t->name != NULL);
        check_tensor(s, t);
    }
    FUZZ_CHECK(f->tensor(s, n) == NULL && f->tensor(s, -1) == NULL);
    if (!f->find(s, ""))
        FUZZ_CHECK(1);
    td_config c;
    memset(&c, 0, sizeof c);
    char err[512] = "";
    if (f->config(s, g_dir, &c, err, sizeof err) != 0)
        FUZZ_CHECK(err[0] != 0 && memchr(err, 0, sizeof err) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_input(data, size);
    td_wsrc s;
    memset(&s, 0, sizeof s);
    s.fmt = &td_wformat_ct2;
    char err[512];
    err[0] = 0;
    if (td_wformat_ct2.open(&s, g_dir, err, sizeof err) != 0) {
        FUZZ_CHECK(strncmp(err, "model.bin: ", 11) == 0);
        FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL);
        FUZZ_CHECK(s.ctx == NULL);
        return 0;
    }
    check_open(&s);
    td_wformat_ct2.close(&s);
    FUZZ_CHECK(s.ctx == NULL);
    return 0;
}
