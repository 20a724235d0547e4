/*
 * wformat.h - the weight-format seam: how the engine reads a checkpoint's
 * tensors without knowing the file they come from.
 *
 * A format is one file (model/wf_NAME.c) exporting one td_wformat and one
 * row in wformat.c's table; nothing else in the engine, the server or the
 * command line names a weight file. The engine asks td_wsrc_open for the
 * directory's weights (the first format of the table whose probe claims the
 * directory: the table's order is the preference when a directory holds
 * several), finds tensors by their state-dict name, reads each converted to
 * float32 (or its bytes as stored, where the format keeps them so), and
 * closes the source when every tensor is uploaded.
 *
 * Contract of every format:
 *   - probe(dir) looks at file names and sizes only (no parsing): 1 with
 *     the weight file's path and size when dir holds this format's weight
 *     file (whatever its type: open refuses a FIFO or a directory by name),
 *     else 0;
 *   - open validates everything a later call relies on (bounds, shapes,
 *     dtypes, offsets), so that find, read_f32 and raw never read out of
 *     bounds; on failure it returns -1 with a message that names the file
 *     (and the tensor, when there is one) and leaves the source empty;
 *   - find is by exact name, NULL when absent; the tensors' names are
 *     unique; td_wt pointers stay valid until close;
 *   - read_f32 writes n_elements floats (infinities and NaNs as stored: the
 *     engine rejects them by name); raw gives the stored bytes where the
 *     format holds them in memory;
 *   - a source is read-only after open: concurrent finds and reads are fine.
 */
#ifndef TD_WFORMAT_H
#define TD_WFORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "backend.h" /* td_dtype */

#define TD_WT_MAX_RANK 8

/* A tensor as its format stores it. */
typedef struct td_wt {
    const char *name;               /* the state-dict name (owned by the source) */
    td_dtype dtype;                 /* as stored */
    int rank;
    int64_t shape[TD_WT_MAX_RANK];
    int64_t n_elements;
} td_wt;

typedef struct td_wformat td_wformat;
struct td_config;

/* An open weight source: the format and its private state. */
typedef struct td_wsrc {
    const td_wformat *fmt;
    void *ctx;
    char file[64]; /* the weight file's base name, for messages ("model.safetensors") */
} td_wsrc;

struct td_wformat {
    const char *name; /* "safetensors" */
    const char *file; /* the weight file it reads, as a user would look for it */
    int (*probe)(const char *dir, char *path, size_t n, uint64_t *bytes);
    int (*open)(td_wsrc *s, const char *dir, char *err, size_t errlen);
    void (*close)(td_wsrc *s);
    int (*count)(const td_wsrc *s);
    const td_wt *(*tensor)(const td_wsrc *s, int i); /* i in [0, count) */
    const td_wt *(*find)(const td_wsrc *s, const char *name);
    /* t (of this source) converted to float32 into dst: 0, or -1 with err */
    int (*read_f32)(const td_wsrc *s, const td_wt *t, float *dst, char *err, size_t errlen);
    /* t's n_elements values as stored (dtype, little-endian, possibly
     * unaligned), valid until close; NULL when the format keeps no such
     * bytes (then only read_f32) */
    const void *(*raw)(const td_wsrc *s, const td_wt *t);
    /* A format that carries the model's architecture (CTranslate2's
     * model.bin: its spec's attributes and the variables' shapes) fills cfg
     * from the open source s and dir's side files, in place of config.json
     * (td_config_load calls it); 0, or -1 with a message naming the file.
     * NULL for the formats that come with a config.json. */
    int (*config)(const td_wsrc *s, const char *dir, struct td_config *cfg, char *err,
                  size_t errlen);
};

/* A probe for a format of one weight file: 1 when dir/file exists, whatever
 * it is (open then refuses a FIFO or a directory by name), its path and
 * size (0 when not a regular file); else 0. (Inline: the formats use it
 * and the table uses the formats.) */
static inline int td_wformat_file_probe(const char *dir, const char *file, char *path, size_t n,
                                        uint64_t *bytes)
{
    struct stat sb;
    snprintf(path, n, "%s/%s", dir, file);
    if (stat(path, &sb) != 0)
        return 0;
    *bytes = S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
    return 1;
}

/* The registered formats, in preference order; *n is their count. */
const td_wformat *const *td_wformats(int *n);

/* The first format (in preference order) whose probe claims dir: its
 * weight file's path and size into path/bytes; NULL when none does. */
const td_wformat *td_wformat_probe(const char *dir, char *path, size_t n, uint64_t *bytes);

/* Opens dir's weights through td_wformat_probe's format. 0, or -1 with a
 * message naming the directory's missing weights (every format's file
 * looked for) or the format's own failure; *s is then empty. */
int td_wsrc_open(td_wsrc *s, const char *dir, char *err, size_t errlen);

/* Closes; accepts an empty source. */
void td_wsrc_close(td_wsrc *s);

#endif /* TD_WFORMAT_H */
