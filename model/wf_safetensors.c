/*
 * wf_safetensors.c - the safetensors weight format (Hugging Face's
 * model.safetensors) behind the format seam (wformat.h), over the
 * validating reader of safetensors.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "safetensors.h"
#include "wformat.h"

#define WF_ST_FILE "model.safetensors"

typedef struct wf_st {
    td_st st;
    td_wt *wt; /* one a tensor, in st's (name) order */
} wf_st;

/* Claims dir when its model.safetensors exists, whatever it is: a FIFO or
 * a directory of that name is then refused by the reader, by name, rather
 * than reported as no weights. */
static int st_probe(const char *dir, char *path, size_t n, uint64_t *bytes)
{
    return td_wformat_file_probe(dir, WF_ST_FILE, path, n, bytes);
}

static int st_open(td_wsrc *s, const char *dir, char *err, size_t errlen)
{
    wf_st *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", WF_ST_FILE);
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, WF_ST_FILE);
    if (td_st_open(&w->st, path, err, errlen) != 0) {
        free(w);
        return -1;
    }
    w->wt = calloc((size_t)w->st.n_tensors + 1, sizeof *w->wt);
    if (!w->wt) {
        td_st_close(&w->st);
        free(w);
        snprintf(err, errlen, "%s: out of memory", WF_ST_FILE);
        return -1;
    }
    for (int i = 0; i < w->st.n_tensors; i++) {
        const td_st_tensor *t = &w->st.tensors[i];
        td_wt *o = &w->wt[i];
        o->name = t->name;
        o->dtype = t->dtype;
        o->rank = t->rank;
        for (int k = 0; k < t->rank && k < TD_WT_MAX_RANK; k++)
            o->shape[k] = t->shape[k];
        o->n_elements = t->n_elements;
    }
    s->ctx = w;
    return 0;
}

static void st_close(td_wsrc *s)
{
    wf_st *w = s->ctx;
    if (!w)
        return;
    free(w->wt);
    td_st_close(&w->st);
    free(w);
    s->ctx = NULL;
}

static int st_count(const td_wsrc *s)
{
    const wf_st *w = s->ctx;
    return w->st.n_tensors;
}

static const td_wt *st_tensor(const td_wsrc *s, int i)
{
    const wf_st *w = s->ctx;
    return i >= 0 && i < w->st.n_tensors ? &w->wt[i] : NULL;
}

/* The reader's tensor behind one of ours (same index: the two arrays are
 * in the same order). */
static const td_st_tensor *st_of(const wf_st *w, const td_wt *t)
{
    return &w->st.tensors[t - w->wt];
}

static const td_wt *st_find(const td_wsrc *s, const char *name)
{
    const wf_st *w = s->ctx;
    const td_st_tensor *t = td_st_find(&w->st, name);
    return t ? &w->wt[t - w->st.tensors] : NULL;
}

static int st_read_f32(const td_wsrc *s, const td_wt *t, float *dst, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    const wf_st *w = s->ctx;
    const td_st_tensor *x = st_of(w, t);
    td_to_f32(dst, x->data, x->dtype, x->n_elements);
    return 0;
}

static const void *st_raw(const td_wsrc *s, const td_wt *t)
{
    return st_of(s->ctx, t)->data;
}

const td_wformat td_wformat_safetensors = {
    .name = "safetensors",
    .file = WF_ST_FILE,
    .probe = st_probe,
    .open = st_open,
    .close = st_close,
    .count = st_count,
    .tensor = st_tensor,
    .find = st_find,
    .read_f32 = st_read_f32,
    .raw = st_raw,
};
