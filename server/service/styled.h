/*
 * styled.h - a document's paragraphs as styled pieces, shared by the
 * formats whose inline formatting is carried by attention (spans.h):
 * markdown.c (cmark nodes) and office.c (XML elements).
 *
 * The format reads each paragraph into pieces: text under its chain of
 * inline elements (an emphasis, a link, a Word run), objects (nodes kept
 * whole: an image, a code span, a footnote mark) and separators (nodes
 * that end a segment: a hard line break, a tab). Here the text pieces get
 * their styles, the pieces are cut at the separators into segments (each
 * an srv_seg: the text for the model, its spans, once translated the
 * translation's pieces by srv_spans_map), and a paragraph with a
 * translated segment is written again through the format's callbacks:
 * the pieces of a segment not translated as they were, a translated
 * segment's pieces as the translation placed them (runs of one style,
 * objects where attention put them), each inside copies of its chain of
 * elements; consecutive pieces of one chain share the copies, objects and
 * separators are moved back.
 *
 * The format's nodes are pointers here (void *), never looked into.
 * Nothing here is thread-safe; a document is one thread's at a time.
 */
#ifndef SRV_STYLED_H
#define SRV_STYLED_H

#include <stddef.h>

#include "spans.h"

#define SRV_STYLED_DEPTH 8 /* a chain deeper than this: the element is an object */

enum { SRV_PIECE_TEXT, SRV_PIECE_OBJECT, SRV_PIECE_SEP };

typedef struct srv_piece {
    int kind;
    char *text;                    /* SRV_PIECE_TEXT: its bytes (owned) */
    void *node;                    /* the format's node; an object's or separator's is moved */
    void *chain[SRV_STYLED_DEPTH]; /* the inline elements around it, outermost first */
    int depth;
    int style; /* a text: the first text piece of the paragraph of its formatting */
} srv_piece;

/* A paragraph's pieces, in order. */
typedef struct srv_pieces {
    srv_piece *pc;
    int n, cap;
} srv_pieces;

/* Appends a piece: kind, the format's node, a copy of text (a text piece's
 * bytes; NULL for the others) and the chain of depth elements around it.
 * 0, or -1 when out of memory (nothing added). */
int srv_pieces_add(srv_pieces *p, int kind, void *node, const char *text, void *const *chain,
                   int depth);

/* Whether text pieces j < k of p have one formatting (ctx: the format's). */
typedef int (*srv_same_style)(const srv_pieces *p, int j, int k, void *ctx);

/* Gives every piece its style: a text piece the index of the first text
 * piece that same says has its formatting (same NULL: the one with the same
 * chain of elements, element for element), itself when none; an object or
 * separator its own index (its id in the segment's spans). */
void srv_pieces_style(srv_pieces *p, srv_same_style same, void *ctx);

void srv_pieces_free(srv_pieces *p); /* its texts and array; p empty after */

/* A segment: pieces [p0, p1) of paragraph para (the format's index). */
typedef struct srv_styled_seg {
    int para, p0, p1;
    srv_seg s;
} srv_styled_seg;

/* A document's segments, in the order of their paragraphs. */
typedef struct srv_styled {
    srv_styled_seg *sg;
    int n, cap;
    int max; /* at most this many (0: no bound); set by the format */
} srv_styled;

/* Cuts paragraph para's pieces (its styles given) at its separators into
 * segments and keeps those with a letter to translate; para comes after
 * every paragraph cut before. plain_outside: a segment's base style
 * (srv_seg's plain) is the style of its first text piece outside any
 * element (the text of the (X)HTML paragraph itself), when it has one;
 * else the style of most bytes. The number of segments kept, -1 when out
 * of memory, -2 when one more would pass d->max (those before kept). */
int srv_styled_cut(srv_styled *d, int para, const srv_pieces *p, int plain_outside);

/* Segment i's text for the model; whether it needs the alignment (more
 * than one style, or an object inside). */
const char *srv_styled_source(const srv_styled *d, int i);
int srv_styled_styled(const srv_styled *d, int i);

/* Segment i's translation t with its alignment (srv_seg_set); *lost: the
 * styles it lost. 0, or -1 when out of memory. */
int srv_styled_set(srv_styled *d, int i, const char *t, const srv_align *al, int n_al, int *lost);

/* Whether a segment of paragraph para has its translation (the paragraph
 * is to be written again). */
int srv_styled_translated(const srv_styled *d, int para);

/* How a format writes a paragraph again. */
typedef struct srv_styled_out {
    void *root; /* the paragraph written into (its old children taken out) */
    int once;   /* an element of the source is copied at most once: one
                 * closed is not opened again, a piece attention put apart
                 * from the rest of its element is written without it */
    /* a copy of element e without its children (but its properties),
     * added as parent's last child; NULL when out of memory */
    void *(*open)(void *ctx, void *parent, void *e);
    /* text t (n bytes) of piece pc added as parent's last child: 0 or -1 */
    int (*text)(void *ctx, void *parent, const srv_piece *pc, const char *t, size_t n);
    /* piece pc's node (an object, a separator) moved to parent: 0 or -1 */
    int (*move)(void *ctx, void *parent, const srv_piece *pc);
    void *ctx;
} srv_styled_out;

/* Writes paragraph para's pieces p through out: a segment with its
 * translation as the translation's pieces, the rest as they were. 0, or
 * -1 when out of memory or a callback failed. */
int srv_styled_write(const srv_styled *d, int para, const srv_pieces *p,
                     const srv_styled_out *out);

void srv_styled_free(srv_styled *d); /* its segments; d empty after */

#endif
