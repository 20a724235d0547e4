/*
 * lidprof.h - a language's word and character profile (made by
 * tools/make_langid_profiles.py from the bundled models' training text),
 * and the likelihood of a text under it: the detector's model for short
 * texts, where character fingerprints (langid.c's textcat) guess.
 *
 * The model, per word w of the text (letter runs joined by one ' ’ or -;
 * as written, and lower case lw):
 *   P(w)  = (c(w) + 100 Pl(lw)) / (N + 100)      c: counts of words as written
 *   Pl(lw) = (l(lw) + 1000 Pc(lw)) / (N + 1000)  l: counts of lower-case words
 *   Pc(lw) = prod over the characters x_i of "<lw>" (after "<") of
 *            sum_n lambda_n P(x_i | the n-1 before it), n = 1..4, lambda =
 *            .05 .15 .3 .5; P of a unigram add-one over 300 symbols
 * so a known word counts as itself, an unknown one as its letters; N is the
 * tokens counted. A word's first 64 characters are scored (lw: each of
 * them lowered alone). The score of a text is sum log P(w) over its first 256
 * words; two languages' scores give their posterior at equal priors.
 *
 * Threads: a loaded profile is read-only; score may run on many at once.
 */
#ifndef SRV_LIDPROF_H
#define SRV_LIDPROF_H

#include <stddef.h>

typedef struct srv_lidprof srv_lidprof;

/* Loads the gzip'd profile at path for language code. NULL with a message
 * in err when it is malformed or names another language, or with err ""
 * when there is no such file. */
srv_lidprof *srv_lidprof_load(const char *path, const char *code, char *err, size_t errlen);

/* log P(text) under the profile; *words: the words scored (0: the text has
 * none, and the score is 0). */
double srv_lidprof_score(const srv_lidprof *p, const char *text, size_t n, int *words);

void srv_lidprof_free(srv_lidprof *p); /* accepts NULL */

/* The bytes p holds (its tables and their keys); 0 for NULL. */
size_t srv_lidprof_bytes(const srv_lidprof *p);

#endif /* SRV_LIDPROF_H */
