/*
 * probe.c - td_model_probe (translator.h): what a directory holds, from its
 * files' names and sizes, through the weight-format table (wformat.h) and
 * the tokenizer's list of files (tokenizer.h).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer.h"
#include "translator.h"
#include "wformat.h"

/* 1 when dir/name is a regular file (symbolic links followed). */
static int has_file(const char *dir, const char *name)
{
    char p[4400];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int td_model_probe(const char *dir, td_probe *p)
{
    memset(p, 0, sizeof *p);
    p->has_config = has_file(dir, "config.json");
    const td_wformat *f = td_wformat_probe(dir, p->weights, sizeof p->weights, &p->weight_bytes);
    p->format = f ? f->name : NULL;
    const char *const *tok;
    int required = 0, n = td_tok_files_in(dir, &tok, &required);
    size_t off = 0;
    const char *missing_tok = NULL;
    for (int i = 0; i < n; i++) {
        if (has_file(dir, tok[i])) {
            if (off < sizeof p->tokenizer)
                off += (size_t)snprintf(p->tokenizer + off, sizeof p->tokenizer - off, "%s%s",
                                        off ? " " : "", tok[i]);
        } else if (i < required && !missing_tok) {
            missing_tok = tok[i];
        }
    }
    if (!p->has_config) {
        snprintf(p->missing, sizeof p->missing, "config.json");
    } else if (!f) {
        int nf;
        const td_wformat *const *all = td_wformats(&nf);
        size_t o = 0;
        for (int i = 0; i < nf && o < sizeof p->missing; i++)
            o += (size_t)snprintf(p->missing + o, sizeof p->missing - o, "%s%s",
                                  i ? " or " : "", all[i]->file);
    } else if (missing_tok) {
        snprintf(p->missing, sizeof p->missing, "%s", missing_tok);
    }
    return p->missing[0] == 0;
}
