/*
 * safetensors.h - a validating reader of the safetensors format (the file is
 * read into memory once; never mapped, so that a file rewritten during a
 * load fails it with a message instead of a SIGBUS).
 *
 * Format (https://huggingface.co/docs/safetensors): 8-byte little-endian
 * header length N, N bytes of JSON header, then the data buffer. The header
 * maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data buffer) plus an optional "__metadata__"
 * object of string values.
 *
 * td_st_open() validates everything before returning, so that no later
 * access can read out of bounds:
 *   - file at least 8 bytes; header length <= TD_ST_MAX_HEADER and within
 *     the file;
 *   - header is UTF-8 JSON parsed with JSON_REJECT_DUPLICATES, an object;
 *   - every tensor entry is an object with exactly dtype/shape/data_offsets;
 *     dtype is F32, F16 or BF16; shape entries are non-negative integers,
 *     rank <= TD_ST_MAX_RANK, element count computed with overflow checks;
 *   - data_offsets are two non-negative integers, begin <= end,
 *     end - begin == elements * dtype size, end within the data buffer;
 *   - the tensors tile the data buffer contiguously with no gap or overlap
 *     (sorted by begin, the first starts at 0, each starts where the
 *     previous ended, the last ends at the end of the file).
 * Each failure writes a message naming the file, the tensor (when there is
 * one) and the rule broken, e.g.
 *   "model.safetensors: tensor 'lm_head.weight': data_offsets end 4096 is
 *    past the data buffer (2048 bytes)".
 *
 * Thread safety: a td_st is immutable after open; concurrent readers are
 * fine.
 */
#ifndef TD_SAFETENSORS_H
#define TD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h" /* td_dtype */

#ifdef __cplusplus
extern "C" {
#endif

#define TD_ST_MAX_HEADER (100u * 1024u * 1024u) /* 100 MiB, as the reference */
#define TD_ST_MAX_RANK 8

typedef struct td_st_tensor {
    char *name;              /* owned */
    td_dtype dtype;
    int rank;
    int64_t shape[TD_ST_MAX_RANK];
    int64_t n_elements;
    const void *data;        /* points into file; may be unaligned */
    size_t n_bytes;
} td_st_tensor;

typedef struct td_st {
    char *path;              /* owned copy */
    void *file;              /* the whole file, read once (malloc'd) */
    size_t file_size;
    td_st_tensor *tensors;   /* sorted by name */
    int n_tensors;
} td_st;

/* Opens and fully validates path. Returns 0 and fills *st, or -1 with a
 * message in err (st is then zeroed and owns nothing). */
int td_st_open(td_st *st, const char *path, char *err, size_t errlen);

/* Frees. Accepts a zeroed or NULL st. */
void td_st_close(td_st *st);

/* Looks a tensor up by exact name; NULL when absent. */
const td_st_tensor *td_st_find(const td_st *st, const char *name);

/* Size in bytes of one element of dtype (4, 2, 2). */
size_t td_dtype_size(td_dtype dt);

/* "F32", "F16", "BF16". */
const char *td_dtype_name(td_dtype dt);

/* Converts n elements of src (dtype dt, possibly unaligned, little-endian)
 * to float32 in dst. F16 subnormals, infinities and NaNs are converted
 * exactly; BF16 is the top half of a float32. */
void td_to_f32(float *dst, const void *src, td_dtype dt, int64_t n);

/* Converts float32 to F16 with round-to-nearest-even (for tests/tools). */
uint16_t td_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif

#endif /* TD_SAFETENSORS_H */
