/*
 * langid.h - language identification for the LibreTranslate endpoints
 * (/detect, source=auto): word and character profiles of our own where
 * every candidate has one (lidprof.h: short texts, where fingerprints
 * guess), else libexttextcat's character n-gram fingerprints (Cavnar &
 * Trenkle's out-of-place distance), restricted to the languages the loaded
 * models accept, with a confidence in 0..100.
 *
 * Promise: the candidates are exactly the languages given to
 * srv_langid_new that libexttextcat has a fingerprint for; the answer is
 * every candidate, best first, the confidences summing to 100 (up to
 * rounding). Equal distances give equal confidences: two candidates within
 * textcat's own 3% tie margin never get one near 100.
 *
 * Threads: srv_langid_detect may run on any number of threads at once.
 */
#ifndef SRV_LANGID_H
#define SRV_LANGID_H

#include <stddef.h>

typedef struct srv_langid srv_langid;

typedef struct srv_lang_score {
    char lang[16];      /* the code given to srv_langid_new */
    double confidence;  /* 0..100, one decimal */
} srv_lang_score;

/* Loads the fingerprints <dir>/<code>.lm of the n codes; codes without one
 * are left out (listed in err, which is "" otherwise). With none left the
 * detector has no candidate (srv_langid_count 0: every detection answers
 * none) and err says why; NULL only when out of memory. */
srv_langid *srv_langid_new(const char *dir, const char *const *codes, int n, char *err,
                           size_t errlen);

/* The number of candidate languages. */
int srv_langid_count(const srv_langid *li);

/* At most this many candidates take part in one answer by profiles. */
#define SRV_LANGID_MAX 160

/* Loads <dir>/<code>.lid.gz (lidprof.h) for every candidate that has one;
 * returns how many. A malformed profile is left out and named in err ("":
 * none). Before any detection: not thread-safe with one. When every
 * candidate of a detection has a profile and the text has a word, the
 * profiles answer (the posterior at equal priors); else the fingerprints. */
int srv_langid_load_profiles(srv_langid *li, const char *dir, char *err, size_t errlen);

/* 1 when every candidate among only[0..n_only) has a profile (and there is
 * at least one): a short text is then detected as well as a long one. */
int srv_langid_profiles_cover(const srv_langid *li, const char *const *only, int n_only);

/* Scores text (n bytes of UTF-8) against every candidate into
 * out[0..count), best first; returns count, or -1 when out of memory. */
int srv_langid_detect(const srv_langid *li, const char *text, size_t n, srv_lang_score *out);

/* As srv_langid_detect among the candidates whose code is one of only[0..n)
 * (the others are left out of the answer and of the confidences); returns
 * how many were scored (0 when none of them is a candidate), or -1 when
 * out of memory. */
int srv_langid_detect_among(const srv_langid *li, const char *text, size_t n,
                            const char *const *only, int n_only, srv_lang_score *out);

void srv_langid_free(srv_langid *li); /* accepts NULL */

/* The bytes the detector's profiles hold (lidprof.h). */
size_t srv_langid_bytes(const srv_langid *li);

#endif /* SRV_LANGID_H */
