/*
 * spans.h - inline formatting carried from a source paragraph to its
 * translation by the model's own cross-attention.
 *
 * A paragraph's source text comes with its styled pieces (spans of bytes,
 * each with a style: a bold run, a link, plain text) and its objects
 * (zero-length spans: a footnote mark, an image, a field). The
 * translation comes with an alignment: for each sentence, its source and
 * target tokens' bytes and the attention each target token paid to each
 * source token. srv_spans_map gives the translation's pieces:
 *
 * - words are runs of non-space bytes; a pair of words weighs the sum of
 *   the attention between their tokens; each target word links to the
 *   source word it weighs most with, each source word to the target word
 *   it weighs most with; a source word's style is the style of most of
 *   its bytes; the base style is the plain one (srv_seg's plain: the
 *   text outside any element) when the caller names one that has a word,
 *   else the style of most of the source's non-space bytes, and every
 *   target word has it unless:
 * - a style other than the base goes to the target words linked both ways
 *   with its source words; when there is none, to those linked one way
 *   (target to source); when there is none either, to the target words its
 *   source words link to; one whose source words are one run is made one
 *   run again in the target (the words between its first and last target
 *   word that have the base style take it) when that run is at most twice
 *   its source run's words plus two; the styles are given in the order of
 *   their first piece, a later one taking a word an earlier one took only
 *   by a weaker link (both ways beats one way beats the other way); a
 *   style that has no target word in the end is lost (counted: "file
 *   manager" in two styles becomes one German word in one of them); a
 *   style never has more runs in the target than in the source: the
 *   weakest (fewest words linked both ways, then fewest words, then the
 *   later) go back to the base style;
 * - the spaces between two words of one style have that style, others (and
 *   the spaces before the first word and after the last) the base style,
 *   but that the spaces between a word of one style and a word of another
 *   have the style the source's spaces between two such words had, when
 *   that was one of the two; the edge punctuation of a styled run (a comma
 *   or full stop after its last word, a bracket or quote before its
 *   first) takes the base style unless the style's source text ends in
 *   punctuation itself;
 * - an object goes before the target word that weighs most with the
 *   source word after it (the end when none follows), never before an
 *   earlier object of the source (one that touched the word before it,
 *   a footnote mark, goes right after that word's translation instead);
 *   one that a space followed in the source gets one after it in the
 *   target (the only bytes added).
 *
 * Pure functions, no allocation the caller does not free; the decision is
 * documented in docs/decisions.md ("Documents: whole paragraphs,
 * formatting carried by attention").
 */
#ifndef SRV_SPANS_H
#define SRV_SPANS_H

#include <stddef.h>

/* A styled piece [a, b) of a text, or an object (obj: a == b, style its id). */
typedef struct srv_span {
    size_t a, b;
    int style;
    int obj;
} srv_span;

/* One sentence's alignment: its tokens' bytes in the paragraph's source
 * (s_off, 2 ns) and in its translation (t_off, 2 nt), w[t * ns + s] the
 * attention target token t paid to source token s. */
typedef struct srv_align {
    int nt, ns;
    size_t *t_off;
    size_t *s_off;
    float *w;
} srv_align;

void srv_align_free(srv_align *a, int n); /* frees the blocks' arrays and a */

/* Maps src's pieces (n_in, in order, text spans covering [0, src_n) and
 * objects between them) onto tgt by the alignment (n_blocks sentences).
 * *text (malloc'd, NUL-terminated): tgt with a space after the objects
 * that get one; *out (malloc'd, *n_out): its pieces in order, covering it,
 * with every object of in exactly once. *lost: styles given to no target
 * word. 0, or -1 when out of memory. */
int srv_spans_map(const char *src, size_t src_n, const srv_span *in, int n_in, const char *tgt,
                  size_t tgt_n, const srv_align *blocks, int n_blocks, srv_span **out,
                  int *n_out, char **text, int *lost);

/* The word links srv_spans_map decides by, for other uses of the
 * alignment (glossary.h places a term by them): the words of src and tgt
 * (runs of non-space bytes, [sw[2i], sw[2i+1]) and [tw[2i], tw[2i+1])),
 * for each target word the source word it weighs most with (t_best, -1:
 * none, its weight t_bw) and for each source word the target word (s_best,
 * s_bw). */
typedef struct srv_word_links {
    int nsw, ntw;
    size_t *sw, *tw;
    int *s_best, *t_best; /* one allocation: s_best's */
    float *t_bw, *s_bw;   /* one allocation: t_bw's */
} srv_word_links;

/* Fills *l from the blocks (as srv_spans_map reads them). 0, or -1 when out
 * of memory (*l empty). */
int srv_word_links_make(const char *src, size_t src_n, const char *tgt, size_t tgt_n,
                        const srv_align *blocks, int n_blocks, srv_word_links *l);
void srv_word_links_free(srv_word_links *l); /* accepts NULL and an empty one */

/* A segment of a document's paragraph (styled.h, for markdown.c and
 * office.c; a subtitle cue's, cuetext.c): its pieces' text joined and
 * their spans, what the model is given, and once translated, the
 * translation's pieces. */
typedef struct srv_seg {
    char *full;       /* the pieces' text joined */
    char *src;        /* what is translated: full without the whitespace around it */
    size_t lead, len; /* src's place in full */
    srv_span *in;     /* full's pieces: texts (their style) and objects (their id) */
    int n_in, styled; /* styled: more than one style, or an object inside */
    int plain;        /* the style of the text outside any element, the base (the
                       * style of unaligned words and of the spaces between two
                       * styles); -1 (srv_seg_make's): the style of most bytes */
    char *tgt;        /* the translation, full's whitespace around it, once set */
    srv_span *out;    /* its pieces (srv_spans_map) */
    int n_out;
} srv_seg;

/* Fills s from n pieces: text[k] (NULL: an object) with id[k] (a text's
 * style, an object's id). 1 when it has a letter to translate, 0 when not
 * (nothing kept), -1 when out of memory. */
int srv_seg_make(srv_seg *s, const char *const *text, const int *id, int n);

/* s's translation t (of s->src) with its alignment (offsets into src and
 * t; NULL and 0 without): s->tgt and s->out by srv_spans_map; *lost: the
 * styles it lost. 0, or -1 when out of memory. */
int srv_seg_set(srv_seg *s, const char *t, const srv_align *al, int n_al, int *lost);

void srv_seg_free(srv_seg *s);

#endif
