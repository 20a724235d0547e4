/*
 * languages.h - the languages the daemon serves: the pairs of the serving
 * models (copied: models come and go), every language once, their English
 * names, and the detector (libexttextcat's fingerprints, langid.h) of a
 * text's language among the models' sources. Both APIs route with these:
 * the native API's source "auto", LibreTranslate's /detect, /languages and
 * source=auto.
 *
 * Threads: any; the detector is made once before the daemon serves and
 * read-only after.
 */
#ifndef SRV_LANGUAGES_H
#define SRV_LANGUAGES_H

#include <stddef.h>

#include "langcodes.h"
#include "langid.h"
#include "models.h"
#include "state.h"

/* The languages of the serving models at one moment: their pairs (a
 * multilingual model's: every two different languages of it), and every
 * language once, sources first. Codes are canonical (langcodes.h: "de"
 * for NLLB's "deu_Latn"). About 25 KB: fine on a thread's stack. */
#define SRV_LANGS_MAX 640
typedef struct srv_langs {
    srv_pair p[64];          /* one per serving model */
    int np;
    char ml[512][16];        /* the multilingual models' languages, model after model */
    int nml;
    int ml0[64], mln[64];    /* p[i]'s languages: ml[ml0[i] .. ml0[i] + mln[i]) */
    const char *codes[SRV_LANGS_MAX]; /* into p and ml */
    int n;
} srv_langs;

void srv_langs_now(const srv_server *s, srv_langs *L);
/* Whether code (either form) is one of L's languages. */
int srv_langs_has(const srv_langs *L, const char *code);
/* Whether model i of L translates src to tgt (either form). */
int srv_langs_pair(const srv_langs *L, int i, const char *src, const char *tgt);
/* The source languages of the models that translate into tgt (any target
 * when tgt is NULL), each once, into codes (SRV_LANGS_MAX); returns how
 * many. */
int srv_langs_sources(const srv_langs *L, const char *tgt, const char **codes);
/* The targets of src (either form), each once, sorted, into codes
 * (SRV_LANGS_MAX); returns how many. */
int srv_langs_targets(const srv_langs *L, const char *src, const char **codes);

/* The detector over the serving models' languages and every named one
 * that has a fingerprint under --textcat-dir (a model loaded at run time
 * may bring one). NULL with err when the fingerprints cannot be read; none
 * at all is a detector that detects nothing (said on stderr). */
srv_langid *srv_detector_new(const srv_server *s, char *err, size_t errlen);

/* The source language of text among the sources of the models into tgt
 * (NULL: any), by s->langid; the first such source when none has a
 * fingerprint. 0, or -1 when no model translates into tgt. */
int srv_detect_source(const srv_server *s, const char *text, size_t n, const char *tgt,
                      char *out, size_t outlen);

#endif /* SRV_LANGUAGES_H */
