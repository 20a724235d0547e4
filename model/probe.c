/*
 * probe.c - td_model_probe (translator.h): what a directory holds, from its
 * files' names and sizes, through the weight-format table (wformat.h) and
 * the tokenizer's list of files (tokenizer.h); an Argos Translate package's
 * model is in its directory model/.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer.h"
#include "translator.h"
#include "wformat.h"

/* 1 when dir/name is a regular file (symbolic links followed); name may
 * list alternatives, "a|b": any one of them (the one found into found,
 * when not NULL). */
static int has_file_as(const char *dir, const char *name, char *found, size_t fn)
{
    char p[4400];
    struct stat st;
    while (*name) {
        size_t n = strcspn(name, "|");
        snprintf(p, sizeof p, "%s/%.*s", dir, (int)n, name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            if (found)
                snprintf(found, fn, "%.*s", (int)n, name);
            return 1;
        }
        name += n + (name[n] == '|');
    }
    return 0;
}

static int has_file(const char *dir, const char *name)
{
    return has_file_as(dir, name, NULL, 0);
}

/* The first alternative of a file entry ("a|b": a), for messages. */
static void first_name(char *out, size_t n, const char *entry)
{
    snprintf(out, n, "%.*s", (int)strcspn(entry, "|"), entry);
}

void td_model_files_dir(const char *dir, char *out, size_t n)
{
    if (td_tok_argos_package(dir))
        snprintf(out, n, "%s/model", dir);
    else
        snprintf(out, n, "%s", dir);
}

int td_model_probe(const char *dir, td_probe *p)
{
    memset(p, 0, sizeof *p);
    char files[4200];
    td_model_files_dir(dir, files, sizeof files);
    const td_wformat *f = td_wformat_probe(files, p->weights, sizeof p->weights, &p->weight_bytes);
    /* a format that carries its architecture needs no config.json */
    p->has_config = has_file(files, "config.json") || (f && f->config);
    p->format = f ? f->name : NULL;
    const char *const *tok;
    int required = 0, n = td_tok_files_in(dir, &tok, &required);
    size_t off = 0;
    const char *missing_tok = NULL;
    for (int i = 0; i < n; i++) {
        char name[128];
        if (has_file_as(dir, tok[i], name, sizeof name)) {
            if (off < sizeof p->tokenizer)
                off += (size_t)snprintf(p->tokenizer + off, sizeof p->tokenizer - off, "%s%s",
                                        off ? " " : "", name);
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
        first_name(p->missing, sizeof p->missing, missing_tok);
    }
    return p->missing[0] == 0;
}
