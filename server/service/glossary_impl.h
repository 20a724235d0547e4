/*
 * glossary_impl.h - what glossary.c (the store) and glossplace.c (matching
 * and placement) share; not for other modules.
 */
#ifndef SRV_GLOSSARY_IMPL_H
#define SRV_GLOSSARY_IMPL_H

#include <stddef.h>

#include "glossary.h"

/* The code point at s (n bytes left) into *cp; its bytes, or 0 when the
 * UTF-8 is invalid. */
int srv_gloss_utf8(const unsigned char *s, size_t n, unsigned *cp);

/* s (n bytes) case-folded into out (n bytes): the letters whose lower case
 * has the same bytes' count (ASCII, Latin-1, Latin Extended-A, Greek,
 * Cyrillic) lowered, every other byte as it is; positions are kept. */
void srv_gloss_fold(const char *s, size_t n, char *out);

void srv_gloss_dict_free(srv_gloss_dict *d);

#endif
