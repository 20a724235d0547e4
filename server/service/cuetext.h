/*
 * cuetext.h - a subtitle cue's text with its markup: WebVTT's cue text
 * tags (<v Name>, <c.class>, <i>, <b>, <u>, <ruby>/<rt>, <lang xx>,
 * timestamps <00:05:04.199>) and character references (&amp; &lt; &gt;
 * &lrm; &rlm; &nbsp; and numeric ones: WebVTT's cue text parsing rules),
 * SubRip's <i>, <b>, <u>, <s>, <font ...> and the ASS-style overrides
 * ({\an8}) that SubRip files carry.
 *
 * The model is given the text alone. The markup goes back by the span
 * machinery of the documents (spans.h): each run of text has the style of
 * the tags open around it, a timestamp or an override is an object; the
 * translation's words take the styles their source words had, by the
 * model's attention. Two parts never go through that mapping and are
 * written back as they were:
 *
 * - the head: the tags before the cue's first word that stay open to its
 *   last (a voice <v Name>, a whole-cue <i>, an override {\an8}), and a
 *   speaker's dash ("- ") when the caller asks for one;
 * - the tail: what follows the last word and closes those (</i>, </v>).
 *
 * A tag whose text no target word takes is lost (counted, as a document's
 * lost formatting). A close tag that closes nothing open is an object.
 */
#ifndef SRV_CUETEXT_H
#define SRV_CUETEXT_H

#include <stddef.h>

#include "spans.h"

typedef struct srv_cue {
    char *head, *tail;   /* verbatim before and after the text (malloc'd) */
    char *plain;         /* no markup inside: the text for the model, else NULL */
    size_t plain_len;
    srv_seg seg;         /* markup inside: its text (seg.src for the model), styles, objects */
    char **tag_open;     /* a tag opened inside: its bytes as written */
    char **tag_close;    /* ... the bytes that close it */
    int *tag_closed;     /* ... 1 when the source closed it (else left open at the end) */
    int n_tags;
    int *style_tags;     /* style k: tags style_tags[style_at[k] .. style_at[k + 1]) open, outermost first */
    int *style_at;
    int n_styles, style_cap;
    char **obj;          /* an object's bytes (a timestamp, an override, a stray close tag) */
    int n_obj;
    int vtt;             /* WebVTT: character references read and written */
    unsigned refs;       /* the references the source wrote for U+00A0, U+200E, U+200F (bits 1, 2, 4) */
} srv_cue;

/* What srv_cue_parse takes into the head besides the leading tags. */
typedef enum srv_cue_dash { SRV_CUE_NO_DASH = 0, SRV_CUE_DASH = 1 } srv_cue_dash;

/* The cue text [a, b) (its lines: a line break is a space to the model)
 * into c, WebVTT's rules when vtt, SubRip's else. 1 when it has text for
 * the model, 0 when it is markup and spaces alone (c empty: the caller
 * keeps the bytes), -1 when out of memory. Free with srv_cue_free. */
int srv_cue_parse(srv_cue *c, const char *a, const char *b, int vtt, srv_cue_dash dash);
void srv_cue_free(srv_cue *c); /* accepts a zeroed or half-built c */

/* The text the model is given (owned by c), its length in *n. */
const char *srv_cue_text(const srv_cue *c, size_t *n);

/* 1 when markup inside the text is placed by attention: the model's
 * attention should be captured for it (srv_cue_render's al). */
int srv_cue_styled(const srv_cue *c);

/* Where 1 starts a tag of the cue text markup at s[0] (the caller skips
 * it): its length, else 0. */
size_t srv_cue_tag_len(const char *s, const char *end, int vtt);

/* The cue's translation t (n bytes of the model's text) with its markup:
 * the head, the translation with the styles and objects put back by the
 * alignment al (n_al sentences; NULL and 0: none, every word in the base
 * style and the objects at the end) and broken over `lines` lines
 * separated by nl at the spaces nearest to an even share of its
 * characters (never inside a tag), the tail. *lost: styles no target word
 * took. malloc'd, NUL-terminated; NULL when out of memory. */
char *srv_cue_render(srv_cue *c, const char *t, size_t n, const srv_align *al, int n_al,
                     int lines, const char *nl, int *lost);

#endif /* SRV_CUETEXT_H */
