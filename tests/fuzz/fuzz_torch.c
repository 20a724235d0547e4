/*
 * fuzz_torch.c - libFuzzer target for pytorch_model.bin (model/wf_torch.c
 * over the restricted unpickler of model/torch_pickle.c), through the
 * format seam's own calls (td_wformat_torch: open, count, tensor, find,
 * read_f32, raw, close).
 *
 * Input: a whole pytorch_model.bin (zip or legacy layout), or 'W' and a
 * pickle, which the target wraps in torch's zip layout with storages
 * 0..3 of 4096 bytes each (so that mutations of the pickle reach the
 * tensors' checks instead of the zip's offsets). The file is written to
 * a per-process temporary directory and opened.
 *
 * Invariants (a violation aborts):
 *   - a refusal has a message that starts with "pytorch_model.bin: " and
 *     leaves the source empty;
 *   - an opened source has count() tensors, tensor(i) sorted by name and
 *     unique, find(name) == tensor(i), find("") NULL, tensor(count) NULL;
 *     each of dtype F32/F16/BF16, rank <= 8, non-negative shape whose
 *     product is n_elements;
 *   - read_f32 of every tensor (up to 1M elements) succeeds, twice with
 *     the same bits; where raw is not NULL, td_to_f32 of its bytes gives
 *     those same bits (contiguous views read in place are the gathered
 *     values), so ASan sees every byte either path reads.
 *
 * Build and run: tests/fuzz/run.sh fuzz_torch (see tests/fuzz/README.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "wformat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const td_wformat td_wformat_torch; /* model/wf_torch.c */

#define FUZZ_MAX_CONVERT ((int64_t)1 << 20)
#define FUZZ_STORAGE 4096

#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            abort();                                                            \
        }                                                                       \
    } while (0)

static char g_dir[] = "/tmp/td_fuzz_torch_XXXXXX";
static char g_path[64];

static void cleanup(void)
{
    unlink(g_path);
    rmdir(g_dir);
}

static void put16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v) { put16(p, v & 0xffff), put16(p + 2, v >> 16); }

/* Appends a stored zip entry's local header and data at *at of buf, and
 * its central record at *cd of dir. */
static void zip_add(unsigned char *buf, size_t *at, unsigned char *dir, size_t *cd,
                    const char *name, const unsigned char *data, size_t n)
{
    size_t nl = strlen(name);
    unsigned char *l = buf + *at, *c = dir + *cd;
    memset(l, 0, 30);
    memcpy(l, "PK\3\4", 4);
    put32(l + 18, (uint32_t)n);
    put32(l + 22, (uint32_t)n);
    put16(l + 26, (unsigned)nl);
    memcpy(l + 30, name, nl);
    if (n)
        memcpy(l + 30 + nl, data, n);
    memset(c, 0, 46);
    memcpy(c, "PK\1\2", 4);
    put32(c + 20, (uint32_t)n);
    put32(c + 24, (uint32_t)n);
    put16(c + 28, (unsigned)nl);
    put32(c + 42, (uint32_t)*at);
    memcpy(c + 46, name, nl);
    *at += 30 + nl + n;
    *cd += 46 + nl;
}

/* torch's zip layout around the pickle p[0..n): archive/data.pkl and
 * archive/data/0..3 (FUZZ_STORAGE bytes of a ramp each); malloc'd. */
static unsigned char *wrap(const uint8_t *p, size_t n, size_t *out)
{
    static unsigned char storage[FUZZ_STORAGE];
    for (size_t i = 0; i < sizeof storage; i++)
        storage[i] = (unsigned char)(i * 7 + 1);
    size_t cap = n + 5 * (30 + 64) + 4 * FUZZ_STORAGE;
    unsigned char *buf = malloc(cap + 5 * (46 + 64) + 22), *dir = malloc(5 * (46 + 64));
    FUZZ_CHECK(buf && dir);
    size_t at = 0, cd = 0;
    zip_add(buf, &at, dir, &cd, "archive/data.pkl", p, n);
    char name[32];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "archive/data/%d", i);
        zip_add(buf, &at, dir, &cd, name, storage, sizeof storage);
    }
    memcpy(buf + at, dir, cd);
    unsigned char *e = buf + at + cd;
    memset(e, 0, 22);
    memcpy(e, "PK\5\6", 4);
    put16(e + 8, 5);
    put16(e + 10, 5);
    put32(e + 12, (uint32_t)cd);
    put32(e + 16, (uint32_t)at);
    *out = at + cd + 22;
    free(dir);
    return buf;
}

static void write_input(const uint8_t *data, size_t size)
{
    if (!g_path[0]) {
        FUZZ_CHECK(mkdtemp(g_dir) != NULL);
        snprintf(g_path, sizeof g_path, "%s/pytorch_model.bin", g_dir);
        atexit(cleanup);
    }
    FILE *f = fopen(g_path, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    FUZZ_CHECK(fclose(f) == 0);
}

static void check_open(const td_wsrc *s)
{
    const td_wformat *f = s->fmt;
    int n = f->count(s);
    FUZZ_CHECK(n >= 0);
    for (int i = 0; i < n; i++) {
        const td_wt *t = f->tensor(s, i);
        FUZZ_CHECK(t != NULL && t->name != NULL && t->name[0] != 0);
        if (i > 0)
            FUZZ_CHECK(strcmp(f->tensor(s, i - 1)->name, t->name) < 0);
        FUZZ_CHECK(f->find(s, t->name) == t);
        FUZZ_CHECK(t->dtype == TD_F32 || t->dtype == TD_F16 || t->dtype == TD_BF16);
        FUZZ_CHECK(t->rank >= 0 && t->rank <= TD_WT_MAX_RANK);
        int64_t e = 1;
        for (int d = 0; d < t->rank; d++) {
            FUZZ_CHECK(t->shape[d] >= 0);
            e *= t->shape[d];
        }
        FUZZ_CHECK(e == t->n_elements);
        if (t->n_elements > FUZZ_MAX_CONVERT)
            continue;
        size_t bytes = (size_t)t->n_elements * sizeof(float) + 1;
        float *a = malloc(bytes), *b = malloc(bytes);
        char err[256];
        FUZZ_CHECK(a && b);
        FUZZ_CHECK(f->read_f32(s, t, a, err, sizeof err) == 0);
        FUZZ_CHECK(f->read_f32(s, t, b, err, sizeof err) == 0);
        FUZZ_CHECK(memcmp(a, b, bytes - 1) == 0);
        const void *raw = f->raw(s, t);
        if (raw) {
            td_to_f32(b, raw, t->dtype, t->n_elements);
            FUZZ_CHECK(memcmp(a, b, bytes - 1) == 0);
        }
        free(a);
        free(b);
    }
    FUZZ_CHECK(f->tensor(s, n) == NULL && f->tensor(s, -1) == NULL);
    FUZZ_CHECK(f->find(s, "") == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && data[0] == 'W') {
        size_t n = 0;
        unsigned char *z = wrap(data + 1, size - 1, &n);
        write_input(z, n);
        free(z);
    } else {
        write_input(data, size);
    }
    td_wsrc s;
    memset(&s, 0, sizeof s);
    s.fmt = &td_wformat_torch;
    char err[512];
    err[0] = 0;
    if (td_wformat_torch.open(&s, g_dir, err, sizeof err) != 0) {
        FUZZ_CHECK(strncmp(err, "pytorch_model.bin: ", 19) == 0);
        FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL);
        FUZZ_CHECK(s.ctx == NULL);
        return 0;
    }
    check_open(&s);
    td_wformat_torch.close(&s);
    FUZZ_CHECK(s.ctx == NULL);
    return 0;
}
