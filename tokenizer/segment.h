/*
 * segment.h - a text into sentences, and the translated sentences back into
 * the text's layout (docs/api.md, "Long texts").
 *
 * td_segment splits with ICU's sentence BreakIterator (ubrk_open with the
 * source language's locale, without ICU's abbreviation suppressions, which
 * merged sentences at "app." or "OK.", over the UTF-8 text through UText),
 * and then:
 *   - line breaks (LF, CR, VT, FF, NEL, U+2028, U+2029) are hard
 *     boundaries: a sentence never spans lines, blank lines included;
 *   - a boundary ICU found is dropped when the word before it is an
 *     abbreviation of the source language's list (Dr. and Mr. in English,
 *     Nr. and bzw. in German, ...), letters with dots in any language (z.B.,
 *     e.g., U.S.; not a format directive such as "%s."), a German ordinal ("am 3.
 *     Mai"), or when the next sentence starts with a lower-case letter
 *     ("Really?" she asked.);
 *   - each sentence is trimmed of the white space around it (Unicode
 *     White_Space); what lies between two sentences is the separator that
 *     td_segment_join writes back unchanged.
 * A text of white space only has no sentence.
 *
 * Thread safety: every function may be called from any thread at once
 * (one ICU iterator per language is kept as a template under a mutex and
 * cloned per call).
 */
#ifndef TD_SEGMENT_H
#define TD_SEGMENT_H

#include <stddef.h>

/* One sentence: bytes [start, end) of the text. */
typedef struct td_sentence {
    size_t start, end;
} td_sentence;

/* Splits text (len bytes, UTF-8; invalid bytes are kept where they are)
 * into sentences for language lang (a BCP 47 / ICU language code such as
 * "en", "de", "ja"; NULL or "und": ICU's root rules). Returns the number of
 * sentences (0 for a blank text) and *out (malloc'd, NULL when 0), or -1
 * with a message in err (out of memory, ICU failure). */
int td_segment(const char *lang, const char *text, size_t len, td_sentence **out, char *err,
               size_t errlen);

/* The reassembly: text with sentence k replaced by parts[k] (plens[k]
 * bytes), every separator (the bytes before the first sentence, between
 * two, after the last) copied as it is. *out is malloc'd and
 * NUL-terminated, *out_len its length; ranges (2n entries, or NULL) gets
 * where each part is in *out, in bytes. 0, or -1 when out of memory. */
int td_segment_join(const char *text, size_t len, const td_sentence *sent, int n,
                    const char *const *parts, const size_t *plens, char **out,
                    size_t *out_len, size_t *ranges);

#endif /* TD_SEGMENT_H */
