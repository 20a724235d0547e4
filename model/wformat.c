/*
 * wformat.c - the table of weight formats (wformat.h) and the opening of a
 * directory's weights through it. A new format: its file and one row here.
 */
#include "wformat.h"

#include <stdio.h>
#include <string.h>

extern const td_wformat td_wformat_safetensors; /* wf_safetensors.c */
extern const td_wformat td_wformat_torch;       /* wf_torch.c */
extern const td_wformat td_wformat_ct2;         /* wf_ct2.c */

/* Preference order: when a directory holds several formats' files, the
 * first row's is read. */
static const td_wformat *const k_formats[] = {
    &td_wformat_safetensors,
    &td_wformat_torch, /* pytorch_model.bin: read when no model.safetensors is there */
    &td_wformat_ct2,   /* CTranslate2's model.bin (its own architecture, no config.json) */
};

const td_wformat *const *td_wformats(int *n)
{
    *n = (int)(sizeof k_formats / sizeof k_formats[0]);
    return k_formats;
}

const td_wformat *td_wformat_probe(const char *dir, char *path, size_t n, uint64_t *bytes)
{
    for (size_t i = 0; i < sizeof k_formats / sizeof k_formats[0]; i++)
        if (k_formats[i]->probe(dir, path, n, bytes) == 1)
            return k_formats[i];
    return NULL;
}

int td_wsrc_open(td_wsrc *s, const char *dir, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    char path[4200];
    uint64_t bytes = 0;
    const td_wformat *f = td_wformat_probe(dir, path, sizeof path, &bytes);
    if (!f) {
        char list[256];
        size_t off = 0;
        list[0] = 0;
        for (size_t i = 0; i < sizeof k_formats / sizeof k_formats[0] && off < sizeof list; i++)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "",
                                    k_formats[i]->file);
        snprintf(err, errlen, "%.3000s: no weights (looked for %s)", dir, list);
        return -1;
    }
    s->fmt = f;
    snprintf(s->file, sizeof s->file, "%s", f->file);
    if (f->open(s, dir, err, errlen) != 0) {
        memset(s, 0, sizeof *s);
        return -1;
    }
    return 0;
}

void td_wsrc_close(td_wsrc *s)
{
    if (s && s->fmt)
        s->fmt->close(s);
    if (s)
        memset(s, 0, sizeof *s);
}
