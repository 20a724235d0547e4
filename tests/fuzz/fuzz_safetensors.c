/*
 * fuzz_safetensors.c - libFuzzer target for td_st_open (model/safetensors.c).
 *
 * The input is written to one per-process temporary file (td_st_open takes a
 * path, and the real loader mmaps it) and opened. The contract under test is
 * safetensors.h's: td_st_open either fails with a message and a zeroed td_st,
 * or returns tensors whose data lie inside the data buffer, tile it exactly,
 * and can all be read. The tiling and bounds are re-checked here from the
 * returned tensors alone (an independent oracle: a read past the end of a
 * mapping that stays inside its last page would not fault), then every tensor
 * is looked up by name and converted with td_to_f32 so that ASan/UBSan see
 * every byte that the engine would read. Violations abort().
 *
 * A custom mutator keeps the 8-byte header length in step with the JSON
 * header most of the time: a plain byte mutation that inserts or erases a
 * header byte leaves a length that no longer matches, and such inputs only
 * ever reach the first check.
 *
 * Build and run: tests/fuzz/run.sh (see tests/fuzz/README.md).
 */
#include "safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

/* Tensors above this many elements are bounds-checked but not converted. */
#define FUZZ_MAX_CONVERT ((int64_t)1 << 20)

static char g_path[] = "/tmp/td_fuzz_st_XXXXXX";
static int g_fd = -1;

static void fuzz_cleanup(void)
{
    if (g_fd >= 0) {
        close(g_fd);
        unlink(g_path);
    }
}

#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            abort();                                                            \
        }                                                                       \
    } while (0)

/* Rewrites the temp file with exactly data[0..size). */
static void write_input(const uint8_t *data, size_t size)
{
    if (g_fd < 0) {
        g_fd = mkstemp(g_path);
        if (g_fd < 0) {
            perror("mkstemp");
            abort();
        }
        atexit(fuzz_cleanup);
    }
    if (ftruncate(g_fd, 0) != 0) {
        perror("ftruncate");
        abort();
    }
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(g_fd, data + done, size - done, (off_t)done);
        if (w <= 0) {
            perror("pwrite");
            abort();
        }
        done += (size_t)w;
    }
}

static int cmp_ptr(const void *a, const void *b)
{
    const td_st_tensor *x = *(const td_st_tensor *const *)a;
    const td_st_tensor *y = *(const td_st_tensor *const *)b;
    uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
    if (px != py)
        return px < py ? -1 : 1;
    /* zero-byte tensors may share an address with the next one */
    return x->n_bytes < y->n_bytes ? -1 : x->n_bytes > y->n_bytes;
}

/* Checks everything safetensors.h promises about an opened file. */
static void check_open(const td_st *st, size_t file_size)
{
    FUZZ_CHECK(st->file != NULL && st->file_size == file_size);
    FUZZ_CHECK(st->n_tensors >= 0);
    uint64_t hlen;
    memcpy(&hlen, st->file, 8);
    FUZZ_CHECK(hlen <= file_size - 8);
    const unsigned char *dbeg = (const unsigned char *)st->file + 8 + hlen;
    const unsigned char *dend = (const unsigned char *)st->file + file_size;

    const td_st_tensor **by_addr = NULL;
    if (st->n_tensors > 0) {
        by_addr = malloc((size_t)st->n_tensors * sizeof by_addr[0]);
        FUZZ_CHECK(by_addr != NULL);
    }
    for (int i = 0; i < st->n_tensors; i++) {
        const td_st_tensor *t = &st->tensors[i];
        FUZZ_CHECK(t->name != NULL && t->name[0] != '\0');
        if (i > 0)
            FUZZ_CHECK(strcmp(st->tensors[i - 1].name, t->name) < 0); /* sorted, unique */
        FUZZ_CHECK(td_st_find(st, t->name) == t);
        FUZZ_CHECK(t->dtype == TD_F32 || t->dtype == TD_F16 || t->dtype == TD_BF16);
        FUZZ_CHECK(t->rank >= 0 && t->rank <= TD_ST_MAX_RANK);
        int64_t n = 1;
        for (int d = 0; d < t->rank; d++) {
            FUZZ_CHECK(t->shape[d] >= 0);
            FUZZ_CHECK(t->shape[d] == 0 || n <= INT64_MAX / t->shape[d]);
            n *= t->shape[d];
        }
        FUZZ_CHECK(n == t->n_elements);
        FUZZ_CHECK((uint64_t)n <= SIZE_MAX / td_dtype_size(t->dtype));
        FUZZ_CHECK(t->n_bytes == (size_t)n * td_dtype_size(t->dtype));
        const unsigned char *p = t->data;
        FUZZ_CHECK(p >= dbeg && p <= dend && t->n_bytes <= (size_t)(dend - p));
        by_addr[i] = t;
    }

    /* The tensors tile [dbeg, dend) exactly. */
    if (st->n_tensors == 0) {
        FUZZ_CHECK(dbeg == dend);
    } else {
        qsort(by_addr, (size_t)st->n_tensors, sizeof by_addr[0], cmp_ptr);
        const unsigned char *at = dbeg;
        for (int i = 0; i < st->n_tensors; i++) {
            FUZZ_CHECK((const unsigned char *)by_addr[i]->data == at);
            at += by_addr[i]->n_bytes;
        }
        FUZZ_CHECK(at == dend);
    }
    free(by_addr);

    /* Every byte the engine would read, read through the public API. */
    for (int i = 0; i < st->n_tensors; i++) {
        const td_st_tensor *t = td_st_find(st, st->tensors[i].name);
        FUZZ_CHECK(t != NULL);
        if (t->n_elements == 0 || t->n_elements > FUZZ_MAX_CONVERT)
            continue;
        float *buf = malloc((size_t)t->n_elements * sizeof *buf);
        FUZZ_CHECK(buf != NULL);
        td_to_f32(buf, t->data, t->dtype, t->n_elements);
        free(buf);
    }
    FUZZ_CHECK(td_st_find(st, "") == NULL);
}

/* Three times in four, when the input has a plausible header length, mutates
 * only the JSON header (with the dictionary) and rewrites the length so that
 * the data buffer after it is kept; otherwise mutates the raw bytes. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    static uint8_t *tail_copy;
    static size_t tail_cap;
    uint64_t hlen;
    if (size < 8 || seed % 4 == 0)
        return LLVMFuzzerMutate(data, size, max_size);
    memcpy(&hlen, data, 8);
    if (hlen > size - 8)
        return LLVMFuzzerMutate(data, size, max_size);
    size_t tail = size - 8 - (size_t)hlen;
    if (max_size < 8 + tail + 1)
        return LLVMFuzzerMutate(data, size, max_size);
    if (tail > tail_cap) {
        uint8_t *p = realloc(tail_copy, tail);
        if (p == NULL)
            return LLVMFuzzerMutate(data, size, max_size);
        tail_copy = p;
        tail_cap = tail;
    }
    if (tail > 0)
        memcpy(tail_copy, data + 8 + hlen, tail);
    size_t nh = LLVMFuzzerMutate(data + 8, (size_t)hlen, max_size - 8 - tail);
    if (tail > 0)
        memcpy(data + 8 + nh, tail_copy, tail);
    uint64_t nh64 = nh;
    memcpy(data, &nh64, 8);
    return 8 + nh + tail;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_input(data, size);
    td_st st;
    char err[256];
    if (td_st_open(&st, g_path, err, sizeof err) != 0) {
        /* Failure: a message, and a td_st that owns nothing. */
        static const td_st zero;
        FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', sizeof err) != NULL);
        FUZZ_CHECK(memcmp(&st, &zero, sizeof st) == 0);
        td_st_close(&st);
        return 0;
    }
    check_open(&st, size);
    td_st_close(&st);
    td_st_close(&st); /* close is idempotent on the zeroed struct */
    return 0;
}
