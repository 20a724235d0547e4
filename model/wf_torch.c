/*
 * wf_torch.c - PyTorch's pytorch_model.bin (torch.save of a state dict)
 * behind the format seam (wformat.h), read without running Python.
 *
 * Two layouts, told apart by the first bytes (torch/serialization.py):
 *   - the zip archive torch.save has written since 1.6 (`_save`): stored
 *     (uncompressed) entries PREFIX/data.pkl (the pickle), PREFIX/data/KEY
 *     (one a storage, its raw little-endian bytes), PREFIX/version, maybe
 *     PREFIX/byteorder; PREFIX is the first entry's folder (torch names
 *     it after the file: "pytorch_model/"). The central directory
 *     is read here, with ZIP64's end records and extra fields;
 *   - the legacy single stream (`_legacy_save`,
 *     _use_new_zipfile_serialization=False): pickles of the magic number,
 *     the protocol version and the system's sizes, the object's pickle,
 *     the list of storage keys, then each storage as an 8-byte element
 *     count and its bytes, in the list's order.
 * In both the object's pickle names each storage by a persistent id,
 * ('storage', torch.<T>Storage, key, location, numel[, None]), and each
 * tensor is torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
 * requires_grad, hooks[, metadata]).
 *
 * The pickles are read by torch_pickle.c's restricted machine, never by a
 * general unpickler (torch_pickle.h: the opcodes and the allow-list of
 * globals; os.system, builtins.eval, torch.storage._load_from_bytes, any
 * other opcode or call refuses the file naming it). This file checks what
 * the machine gives: a dict of names to tensors, each storage's bytes
 * there (a zip record of exactly numel x its type's size, or the legacy
 * stream's count and bytes), zip entries stored, inside the file and
 * named once; counts are checked before anything is allocated for them.
 *
 * Tensors may be views: a storage offset, any non-negative strides,
 * several tensors on one storage (tied weights). Every element a view
 * reaches is checked inside its storage at open; contiguous views are
 * read in place (raw), others gathered element by element by read_f32.
 * Only float32, float16 and bfloat16 are read; a tensor of another dtype
 * is refused by name.
 *
 * The whole file is read into memory once (never mapped: see
 * safetensors.h) and kept until close; the tensors' bytes stay there.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h" /* td_to_f32, td_dtype_size */
#include "torch_pickle.h"
#include "wfile.h"
#include "wformat.h"

#define TW_FILE "pytorch_model.bin"

#define TW_MAX_NAME 1024         /* bytes of a tensor name */
#define TW_MAX_ENTRIES (1 << 20) /* zip entries */

/* ------------------------------------------------------------------ */
/* the source                                                          */

/* A storage: the persistent ids of one key. */
typedef struct tw_storage {
    const unsigned char *key;
    int key_len;
    int cls;                   /* its type: a row of tp_globals */
    int64_t numel;             /* elements, as declared */
    const unsigned char *data; /* numel elements, inside the file */
} tw_storage;

/* A tensor as _rebuild_tensor_v2 describes it. */
typedef struct tw_view {
    int rank;
    int64_t offset;            /* elements */
    int64_t size[TD_WT_MAX_RANK], stride[TD_WT_MAX_RANK];
    const unsigned char *data; /* the element at offset, after validation */
    int contiguous;
} tw_view;

typedef struct wf_torch {
    unsigned char *file;
    size_t file_size;
    tw_storage *storages; /* sorted by key, while opening */
    int n_storages;
    td_wt *wt;      /* sorted by name */
    tw_view *wv;    /* wt[i]'s view */
    int n;
    char *names;
    char *err;
    size_t errlen;
} wf_torch;

/* "pytorch_model.bin: <fmt...>" into w->err; always -1. */
static __attribute__((format(printf, 2, 3))) int tw_fail(wf_torch *w, const char *fmt, ...)
{
    if (!w->err || w->errlen == 0)
        return -1;
    int n = snprintf(w->err, w->errlen, "%s: ", TW_FILE);
    if (n < 0 || (size_t)n >= w->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err + n, w->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ------------------------------------------------------------------ */
/* storages and tensors                                                */

static int tw_keycmp(const unsigned char *a, int al, const unsigned char *b, int bl)
{
    int c = memcmp(a, b, (size_t)(al < bl ? al : bl));
    return c ? c : (al > bl) - (al < bl);
}

static tw_storage *tw_find_storage(wf_torch *w, const unsigned char *key, int len);

/* tp_load, its message after the file's name. */
static int tw_run(wf_torch *w, tp_pickle *k, const char *what, const unsigned char *p,
                  const unsigned char *end, int32_t *root, size_t *used)
{
    char perr[512];
    if (tp_load(k, what, p, end, root, used, perr, sizeof perr) == 0)
        return 0;
    return tw_fail(w, "%s", perr);
}

static int tw_value_key_cmp(const void *x, const void *y)
{
    const tp_value *a = *(tp_value *const *)x, *b = *(tp_value *const *)y;
    return tw_keycmp(a->u.s, a->n, b->u.s, b->n);
}

/* The pickle's storages (its persistent ids), one per key: into
 * w->storages, sorted by key; each TP_STORAGE's tag is its storage. The
 * ids of one key must agree on type and element count. */
static int tw_storages(wf_torch *w, tp_pickle *k)
{
    int n = 0;
    for (int32_t i = 0; i < k->n; i++)
        n += k->v[i].kind == TP_STORAGE;
    if (n == 0)
        return 0;
    tp_value **ord = malloc((size_t)n * sizeof *ord); /* by key: the key's value */
    tp_value **ids = malloc((size_t)n * sizeof *ids);
    w->storages = calloc((size_t)n, sizeof *w->storages);
    int rc = -1;
    if (!ord || !ids || !w->storages) {
        tw_fail(w, "out of memory");
        goto done;
    }
    for (int32_t i = 0, j = 0; i < k->n; i++)
        if (k->v[i].kind == TP_STORAGE) {
            ids[j] = &k->v[i];
            ord[j++] = &k->v[k->v[i].u.items[2]];
        }
    /* sort the keys, then find each id's storage by its key */
    qsort(ord, (size_t)n, sizeof *ord, tw_value_key_cmp);
    for (int i = 0; i < n; i++)
        if (i == 0 || tw_keycmp(ord[i - 1]->u.s, ord[i - 1]->n, ord[i]->u.s, ord[i]->n) != 0)
            w->storages[w->n_storages++] =
                (tw_storage){.key = ord[i]->u.s, .key_len = ord[i]->n, .cls = -1};
    for (int i = 0; i < n; i++) {
        const int32_t *x = ids[i]->u.items;
        const tp_value *key = &k->v[x[2]];
        tw_storage *st = tw_find_storage(w, key->u.s, key->n);
        int cls = (int)k->v[x[1]].u.i;
        int64_t numel = k->v[x[4]].u.i;
        if (st->cls >= 0 && (st->cls != cls || st->numel != numel)) {
            char b[96];
            tw_fail(w, "storage '%s' declared twice with other types or sizes",
                    tp_show(b, sizeof b, key->u.s, (size_t)key->n));
            goto done;
        }
        st->cls = cls;
        st->numel = numel;
        ids[i]->tag = (int32_t)(st - w->storages);
    }
    rc = 0;
done:
    free(ord);
    free(ids);
    return rc;
}

static tw_storage *tw_find_storage(wf_torch *w, const unsigned char *key, int len)
{
    int lo = 0, hi = w->n_storages;
    while (lo < hi) {
        int mid = (lo + hi) / 2, c = tw_keycmp(w->storages[mid].key, w->storages[mid].key_len,
                                               key, len);
        if (c == 0)
            return &w->storages[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A storage's bytes: numel x the type's size, overflow-checked; -1 when
 * it does not fit in 2^62. */
static int64_t tw_storage_bytes(const tw_storage *s)
{
    int64_t es = tp_globals[s->cls].elsize;
    return s->numel > ((int64_t)1 << 62) / es ? -1 : s->numel * es;
}

/* Tensor value t (_rebuild_tensor_v2's arguments), named name: its view
 * in *v, checked inside its storage, and its dtype and shape in *wt. */
static int tw_view_of(wf_torch *w, const tp_pickle *k, const tp_value *t, const char *name,
                      tw_view *v, td_wt *wt)
{
    const int32_t *x = t->u.items; /* storage, offset, size, stride, ...: tp_load checked */
    const tw_storage *s = &w->storages[k->v[x[0]].tag];
    const tp_global *g = &tp_globals[s->cls];
    if (g->dtype < 0)
        return tw_fail(w, "tensor '%s': dtype %s (torch.%s): only float32, float16 and bfloat16 "
                       "are read", name, g->what, g->name);
    v->offset = k->v[x[1]].u.i;
    v->rank = wt->rank = k->v[x[2]].n;
    wt->dtype = (td_dtype)g->dtype;
    if (v->offset < 0)
        return tw_fail(w, "tensor '%s': negative storage offset %" PRId64, name, v->offset);
    int64_t n = 1, last = v->offset, want = 1;
    v->contiguous = 1;
    for (int d = v->rank - 1; d >= 0; d--) {
        int64_t sz = k->v[k->v[x[2]].u.items[d]].u.i, st = k->v[k->v[x[3]].u.items[d]].u.i;
        if (sz < 0 || st < 0)
            return tw_fail(w, "tensor '%s': negative size or stride in dimension %d", name, d);
        if (sz > 0 && n > INT64_MAX / sz)
            return tw_fail(w, "tensor '%s': element count overflows", name);
        n *= sz;
        wt->shape[d] = v->size[d] = sz;
        v->stride[d] = st;
        if (sz > 1 && st != want) /* torch's is_contiguous: dimensions of 1 do not count */
            v->contiguous = 0;
        if (sz > 0 && want <= INT64_MAX / sz)
            want *= sz;
        if (sz > 0 && st > 0 && (sz - 1 > (INT64_MAX - last) / st))
            return tw_fail(w, "tensor '%s': its last element's offset overflows", name);
        if (sz > 0)
            last += (sz - 1) * st;
    }
    wt->n_elements = n;
    if (n > 0 && last >= s->numel) {
        char b[96];
        return tw_fail(w,
                       "tensor '%s': reaches element %" PRId64 " of storage '%s', which has %"
                       PRId64 " elements",
                       name, last, tp_show(b, sizeof b, s->key, (size_t)s->key_len), s->numel);
    }
    if (n == 0)
        v->contiguous = 1;
    v->data = n > 0 ? s->data + v->offset * g->elsize : s->data;
    return 0;
}

static int tw_name_cmp(const void *x, const void *y)
{
    return strcmp(((const td_wt *)x)->name, ((const td_wt *)y)->name);
}

/* The state dict (a dict of names to tensors) into w->wt and w->wv,
 * sorted by name; every storage's data found before. */
static int tw_take_dict(wf_torch *w, const tp_pickle *k, int32_t root)
{
    const tp_value *d = &k->v[root];
    if (d->kind != TP_DICT)
        return tw_fail(w, "the pickle holds %s, not a state dict", tp_kind_name(d->kind));
    int n = d->n / 2;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        const tp_value *key = &k->v[d->u.items[2 * i]], *val = &k->v[d->u.items[2 * i + 1]];
        char b[96];
        if (key->kind != TP_STR || key->n < 1 || key->n > TW_MAX_NAME ||
            memchr(key->u.s, 0, (size_t)key->n))
            return tw_fail(w, "state dict key %d is not a name of 1 to %d bytes without NUL", i,
                           TW_MAX_NAME);
        if (val->kind != TP_TENSOR)
            return tw_fail(w, "'%s' is %s, not a tensor",
                           tp_show(b, sizeof b, key->u.s, (size_t)key->n), tp_kind_name(val->kind));
        bytes += (size_t)key->n + 1;
    }
    w->wt = calloc((size_t)n + 1, sizeof *w->wt);
    w->wv = calloc((size_t)n + 1, sizeof *w->wv);
    w->names = malloc(bytes + 1);
    if (!w->wt || !w->wv || !w->names)
        return tw_fail(w, "out of memory");
    char *at = w->names;
    for (int i = 0; i < n; i++) { /* names first: n_elements holds the tensor's value for now */
        const tp_value *key = &k->v[d->u.items[2 * i]];
        memcpy(at, key->u.s, (size_t)key->n);
        at[key->n] = 0;
        w->wt[i].name = at;
        w->wt[i].n_elements = d->u.items[2 * i + 1];
        at += key->n + 1;
    }
    qsort(w->wt, (size_t)n, sizeof *w->wt, tw_name_cmp);
    for (int i = 0; i < n; i++) {
        if (i > 0 && strcmp(w->wt[i - 1].name, w->wt[i].name) == 0)
            return tw_fail(w, "tensor '%s' appears twice", w->wt[i].name);
        if (tw_view_of(w, k, &k->v[w->wt[i].n_elements], w->wt[i].name, &w->wv[i], &w->wt[i]))
            return -1;
    }
    w->n = n;
    return 0;
}

/* ------------------------------------------------------------------ */
/* the zip layout                                                      */

typedef struct tw_entry {
    const unsigned char *name;
    int name_len;
    const unsigned char *data;
    uint64_t size;
} tw_entry;

static int tw_entry_cmp(const void *x, const void *y)
{
    const tw_entry *a = x, *b = y;
    return tw_keycmp(a->name, a->name_len, b->name, b->name_len);
}

static const tw_entry *tw_entry_find(const tw_entry *e, int n, const unsigned char *name,
                                     int len)
{
    tw_entry key = {.name = name, .name_len = len};
    return bsearch(&key, e, (size_t)n, sizeof *e, tw_entry_cmp);
}

/* The end of central directory (ZIP64's when its locator is there):
 * where the directory is, its size and its number of entries. */
static int zip_end(wf_torch *w, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count)
{
    const unsigned char *f = w->file;
    size_t size = w->file_size;
    if (size < 22)
        return tw_fail(w, "zip archive of %zu bytes has no end of central directory", size);
    size_t lo = size > 22 + 65535 ? size - 22 - 65535 : 0, e = size - 22 + 1;
    do {
        e--;
        if (memcmp(f + e, "PK\5\6", 4) == 0 && e + 22 + rd16(f + e + 20) <= size)
            break;
    } while (e > lo);
    if (memcmp(f + e, "PK\5\6", 4) != 0)
        return tw_fail(w, "zip archive without an end of central directory (truncated?)");
    if (rd16(f + e + 4) != 0 || rd16(f + e + 6) != 0)
        return tw_fail(w, "zip archive on several disks");
    *count = rd16(f + e + 10);
    *cd_size = rd32(f + e + 12);
    *cd_off = rd32(f + e + 16);
    if (e >= 20 && memcmp(f + e - 20, "PK\6\7", 4) == 0) { /* ZIP64 locator */
        uint64_t z = rd64(f + e - 20 + 8);
        if (z > e - 20 || e - 20 - z < 56 || memcmp(f + z, "PK\6\6", 4) != 0)
            return tw_fail(w, "zip64 end of central directory at %" PRIu64 " is not one", z);
        if (rd32(f + z + 16) != 0 || rd32(f + z + 20) != 0)
            return tw_fail(w, "zip archive on several disks");
        *count = rd64(f + z + 32);
        *cd_size = rd64(f + z + 40);
        *cd_off = rd64(f + z + 48);
    }
    if (*cd_off > size || *cd_size > size - *cd_off)
        return tw_fail(w, "zip central directory (%" PRIu64 " bytes at %" PRIu64
                       ") is past the end of the file (%zu bytes)", *cd_size, *cd_off, size);
    if (*count > *cd_size / 46 || *count > TW_MAX_ENTRIES)
        return tw_fail(w, "zip central directory declares %" PRIu64 " entries in %" PRIu64
                       " bytes", *count, *cd_size);
    return 0;
}

/* One central directory record at *p: its entry, after its ZIP64 extra
 * field and its local header; *p moves past it. */
static int zip_entry(wf_torch *w, const unsigned char **p, const unsigned char *cd_end,
                     tw_entry *out)
{
    const unsigned char *c = *p, *f = w->file;
    if (cd_end - c < 46 || memcmp(c, "PK\1\2", 4) != 0)
        return tw_fail(w, "zip central directory record at %td is malformed", c - f);
    int flags = rd16(c + 8), method = rd16(c + 10);
    uint64_t csize = rd32(c + 20), usize = rd32(c + 24), loc = rd32(c + 42);
    int nl = rd16(c + 28), xl = rd16(c + 30), cl = rd16(c + 32);
    if (cd_end - c - 46 < (ptrdiff_t)nl + xl + cl)
        return tw_fail(w, "zip central directory record at %td is malformed", c - f);
    out->name = c + 46;
    out->name_len = nl;
    char b[96];
    /* ZIP64 extra (id 1): the 8-byte values of those fields that read 0xffffffff, in order */
    for (const unsigned char *x = c + 46 + nl, *xe = x + xl; xe - x >= 4;) {
        int id = rd16(x), len = rd16(x + 2);
        if (xe - x - 4 < len)
            break;
        if (id == 1) {
            const unsigned char *v = x + 4, *ve = v + len;
            uint64_t *fld[3] = {&usize, &csize, &loc};
            for (int i = 0; i < 3; i++)
                if (*fld[i] == 0xffffffffu) {
                    if (ve - v < 8)
                        return tw_fail(w, "zip entry '%s': zip64 extra field too short",
                                       tp_show(b, sizeof b, out->name, (size_t)nl));
                    *fld[i] = rd64(v);
                    v += 8;
                }
        }
        x += 4 + len;
    }
    if (method != 0 || (flags & 1) || csize != usize)
        return tw_fail(w, "zip entry '%s' is compressed or encrypted (method %d): torch.save "
                       "stores entries", tp_show(b, sizeof b, out->name, (size_t)nl), method);
    if (loc > w->file_size || w->file_size - loc < 30 || memcmp(f + loc, "PK\3\4", 4) != 0)
        return tw_fail(w, "zip entry '%s': no local header at %" PRIu64,
                       tp_show(b, sizeof b, out->name, (size_t)nl), loc);
    uint64_t data = loc + 30 + rd16(f + loc + 26) + rd16(f + loc + 28);
    if (rd16(f + loc + 26) != nl || data > w->file_size ||
        memcmp(f + loc + 30, out->name, (size_t)nl) != 0 || usize > w->file_size - data)
        return tw_fail(w, "zip entry '%s': its local header or its %" PRIu64
                       " bytes do not fit in the file",
                       tp_show(b, sizeof b, out->name, (size_t)nl), usize);
    out->data = f + data;
    out->size = usize;
    *p = c + 46 + nl + xl + cl;
    return 0;
}

static int tw_open_zip(wf_torch *w)
{
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    if (zip_end(w, &cd_off, &cd_size, &count) != 0)
        return -1;
    if (count == 0)
        return tw_fail(w, "zip archive without entries");
    tw_entry *e = calloc((size_t)count, sizeof *e);
    if (!e)
        return tw_fail(w, "out of memory");
    int rc = -1, n = (int)count;
    const unsigned char *p = w->file + cd_off, *cd_end = p + cd_size;
    for (int i = 0; i < n; i++)
        if (zip_entry(w, &p, cd_end, &e[i]) != 0)
            goto done;
    /* PREFIX: the first entry's folder (torch's reader takes it so) */
    const unsigned char *slash = memchr(e[0].name, '/', (size_t)e[0].name_len);
    int pl = slash ? (int)(slash - e[0].name) + 1 : 0;
    char path[2 * TW_MAX_NAME + 16], b[96];
    if (!slash || pl > TW_MAX_NAME) {
        tw_fail(w, "zip entry '%s' is not in an archive folder",
                tp_show(b, sizeof b, e[0].name, (size_t)e[0].name_len));
        goto done;
    }
    memcpy(path, e[0].name, (size_t)pl);
    qsort(e, (size_t)n, sizeof *e, tw_entry_cmp);
    for (int i = 1; i < n; i++)
        if (tw_entry_cmp(&e[i - 1], &e[i]) == 0) {
            tw_fail(w, "zip entry '%s' appears twice",
                    tp_show(b, sizeof b, e[i].name, (size_t)e[i].name_len));
            goto done;
        }
    memcpy(path + pl, "byteorder", 9);
    const tw_entry *bo = tw_entry_find(e, n, (const unsigned char *)path, pl + 9);
    if (bo && !(bo->size == 6 && memcmp(bo->data, "little", 6) == 0)) {
        tw_fail(w, "%.*sbyteorder is not 'little'", pl, path);
        goto done;
    }
    memcpy(path + pl, "data.pkl", 8);
    const tw_entry *pkl = tw_entry_find(e, n, (const unsigned char *)path, pl + 8);
    if (!pkl) {
        tw_fail(w, "zip archive without %.*sdata.pkl", pl, path);
        goto done;
    }
    char what[TW_MAX_NAME + 64];
    snprintf(what, sizeof what, "%.*sdata.pkl", pl, path);
    tp_pickle k;
    int32_t root;
    size_t used;
    if (tw_run(w, &k, what, pkl->data, pkl->data + pkl->size, &root, &used) != 0 ||
        tw_storages(w, &k) != 0) {
        tp_free(&k);
        goto done;
    }
    for (int i = 0; i < w->n_storages; i++) { /* PREFIX/data/KEY */
        tw_storage *s = &w->storages[i];
        memcpy(path + pl, "data/", 5);
        memcpy(path + pl + 5, s->key, (size_t)s->key_len);
        const tw_entry *d = tw_entry_find(e, n, (const unsigned char *)path, pl + 5 + s->key_len);
        int64_t want = tw_storage_bytes(s);
        if (!d || want < 0 || (uint64_t)want != d->size) {
            tw_fail(w, "storage '%s': record %.*s %s %" PRIu64 " bytes, not the %" PRId64
                    " elements of torch.%s the pickle declares",
                    tp_show(b, sizeof b, s->key, (size_t)s->key_len), pl + 5 + s->key_len, path,
                    d ? "holds" : "is missing:", d ? d->size : 0, s->numel,
                    tp_globals[s->cls].name);
            tp_free(&k);
            goto done;
        }
        s->data = d->data;
    }
    rc = tw_take_dict(w, &k, root);
    tp_free(&k);
done:
    free(e);
    return rc;
}

/* ------------------------------------------------------------------ */
/* the legacy layout                                                   */

/* The pickle at *at (an int, a dict or a list, per want): checks it and
 * moves *at past it. */
static int tw_legacy_header(wf_torch *w, size_t *at, int step)
{
    static const unsigned char magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                            0x20, 0x6a, 0xa8, 0x50, 0x19};
    tp_pickle k;
    int32_t r;
    size_t used;
    char what[32];
    snprintf(what, sizeof what, "pickle %d", step + 1);
    if (tw_run(w, &k, what, w->file + *at, w->file + w->file_size, &r, &used) != 0) {
        tp_free(&k);
        return -1;
    }
    const tp_value *v = &k.v[r];
    int ok = 1;
    if (step == 0) /* torch's MAGIC_NUMBER, 0x1950a86a20f9469cfc6c */
        ok = v->kind == TP_BIGINT && v->n == 10 && memcmp(v->u.s, magic, 10) == 0;
    else if (step == 1) /* PROTOCOL_VERSION */
        ok = v->kind == TP_INT && v->u.i == 1001;
    else if (step == 2) { /* sys_info: little_endian must not be False */
        ok = v->kind == TP_DICT;
        for (int i = 0; ok && i + 1 < v->n; i += 2) {
            const tp_value *key = &k.v[v->u.items[i]], *val = &k.v[v->u.items[i + 1]];
            if (key->kind == TP_STR && key->n == 13 && memcmp(key->u.s, "little_endian", 13) == 0)
                ok = val->kind == TP_BOOL && val->u.i == 1;
        }
    }
    tp_free(&k);
    *at += used;
    if (!ok)
        return tw_fail(w, "%s is not torch's %s", what,
                       step == 0 ? "magic number (not a torch.save file)"
                       : step == 1 ? "protocol version 1001"
                                   : "system information of a little-endian machine");
    return 0;
}

static int tw_open_legacy(wf_torch *w)
{
    size_t at = 0, used;
    for (int i = 0; i < 3; i++)
        if (tw_legacy_header(w, &at, i) != 0)
            return -1;
    tp_pickle k, keys;
    int32_t root, list;
    int rc = -1;
    memset(&keys, 0, sizeof keys);
    if (tw_run(w, &k, "pickle 4", w->file + at, w->file + w->file_size, &root, &used) != 0)
        goto done;
    at += used;
    if (tw_run(w, &keys, "pickle 5 (storage keys)", w->file + at, w->file + w->file_size, &list,
               &used) != 0 || tw_storages(w, &k) != 0)
        goto done;
    at += used;
    const tp_value *l = &keys.v[list];
    if (l->kind != TP_LIST) {
        tw_fail(w, "pickle 5 is %s, not the list of storage keys", tp_kind_name(l->kind));
        goto done;
    }
    char b[96];
    for (int i = 0; i < l->n; i++) { /* each: int64 count, then the bytes */
        const tp_value *key = &keys.v[l->u.items[i]];
        tw_storage *s = key->kind == TP_STR ? tw_find_storage(w, key->u.s, key->n) : NULL;
        if (!s || s->data) {
            tw_fail(w, "storage key %d of the list is not a storage of the pickle, or twice", i);
            goto done;
        }
        int64_t want = tw_storage_bytes(s);
        if (w->file_size - at < 8 || want < 0 || rd64(w->file + at) != (uint64_t)s->numel ||
            (uint64_t)want > w->file_size - at - 8) {
            tw_fail(w, "storage '%s' at byte %zu: %" PRId64 " elements of %s do not follow "
                    "(%zu bytes left)", tp_show(b, sizeof b, s->key, (size_t)s->key_len), at,
                    s->numel, tp_globals[s->cls].name, w->file_size - at);
            goto done;
        }
        s->data = w->file + at + 8;
        at += 8 + (size_t)want;
    }
    for (int i = 0; i < w->n_storages; i++)
        if (!w->storages[i].data) {
            tw_fail(w, "storage '%s' has no data (not in the list of keys)",
                    tp_show(b, sizeof b, w->storages[i].key, (size_t)w->storages[i].key_len));
            goto done;
        }
    rc = tw_take_dict(w, &k, root);
done:
    tp_free(&k);
    tp_free(&keys);
    return rc;
}

/* ------------------------------------------------------------------ */
/* the format                                                          */

/* The whole file (wfile.h). */
static int tw_read_file(wf_torch *w, const char *path)
{
    char msg[400];
    char *buf = NULL;
    if (td_wfile_read(path, &buf, &w->file_size, msg, sizeof msg) != 0)
        return tw_fail(w, "%s", msg);
    w->file = (unsigned char *)buf;
    return 0;
}

static int tw_probe(const char *dir, char *path, size_t n, uint64_t *bytes)
{
    return td_wformat_file_probe(dir, TW_FILE, path, n, bytes);
}

static void tw_free(wf_torch *w)
{
    if (!w)
        return;
    free(w->file);
    free(w->storages);
    free(w->wt);
    free(w->wv);
    free(w->names);
    free(w);
}

static int tw_open(td_wsrc *s, const char *dir, char *err, size_t errlen)
{
    wf_torch *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", TW_FILE);
        return -1;
    }
    w->err = err;
    w->errlen = errlen;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, TW_FILE);
    int rc = tw_read_file(w, path);
    if (rc == 0) {
        if (w->file_size >= 4 && memcmp(w->file, "PK\3\4", 4) == 0)
            rc = tw_open_zip(w);
        else if (w->file_size >= 2 && w->file[0] == 0x80)
            rc = tw_open_legacy(w);
        else
            rc = tw_fail(w, "neither torch.save's zip archive nor its legacy pickle layout");
    }
    if (rc != 0) {
        tw_free(w);
        return -1;
    }
    free(w->storages); /* the views hold their data pointers now */
    w->storages = NULL;
    w->err = NULL;
    s->ctx = w;
    return 0;
}

static void tw_close(td_wsrc *s)
{
    tw_free(s->ctx);
    s->ctx = NULL;
}

static int tw_count(const td_wsrc *s) { return ((const wf_torch *)s->ctx)->n; }

static const td_wt *tw_tensor(const td_wsrc *s, int i)
{
    const wf_torch *w = s->ctx;
    return i >= 0 && i < w->n ? &w->wt[i] : NULL;
}

static const td_wt *tw_find(const td_wsrc *s, const char *name)
{
    const wf_torch *w = s->ctx;
    td_wt key = {.name = name};
    return bsearch(&key, w->wt, (size_t)w->n, sizeof *w->wt, tw_name_cmp);
}

static int tw_read_f32(const td_wsrc *s, const td_wt *t, float *dst, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    const wf_torch *w = s->ctx;
    const tw_view *v = &w->wv[t - w->wt];
    if (v->contiguous) {
        td_to_f32(dst, v->data, t->dtype, t->n_elements);
        return 0;
    }
    /* a strided view: element by element, its index counted in row-major order */
    size_t es = td_dtype_size(t->dtype);
    int64_t idx[TD_WT_MAX_RANK] = {0};
    for (int64_t i = 0; i < t->n_elements; i++) {
        int64_t off = 0;
        for (int d = 0; d < v->rank; d++)
            off += idx[d] * v->stride[d];
        td_to_f32(dst + i, v->data + (size_t)off * es, t->dtype, 1);
        for (int d = v->rank - 1; d >= 0 && ++idx[d] == v->size[d]; d--)
            idx[d] = 0;
    }
    return 0;
}

static const void *tw_raw(const td_wsrc *s, const td_wt *t)
{
    const wf_torch *w = s->ctx;
    const tw_view *v = &w->wv[t - w->wt];
    return v->contiguous ? v->data : NULL;
}

const td_wformat td_wformat_torch = {
    .name = "torch",
    .file = TW_FILE,
    .probe = tw_probe,
    .open = tw_open,
    .close = tw_close,
    .count = tw_count,
    .tensor = tw_tensor,
    .find = tw_find,
    .read_f32 = tw_read_f32,
    .raw = tw_raw,
};
