/*
 * subtitles.h - SubRip (.srt) and WebVTT (.vtt) files for /translate_file:
 * the file cut into blocks at its blank lines; a cue's text (the lines
 * after its timing line) is what is translated, everything else - the
 * WEBVTT header, NOTE, STYLE and REGION blocks, cue numbers and
 * identifiers, timing lines with their settings, the blank lines between -
 * is written back byte for byte.
 *
 * A cue's lines are one text for the model (a subtitle's sentence is
 * broken over its lines for the screen, not by meaning), and its
 * translation is broken again over as many lines, at the spaces nearest to
 * an even share of its characters. A cue whose every line starts with "-"
 * (two speakers) has each line translated alone, its dash kept out of the
 * model's text and written back before the translation. A cue's markup
 * (WebVTT's tags and character references, SubRip's <i>, <font> and
 * {\an8}) never goes to the model: cuetext.h keeps it out and puts it
 * back, by the model's attention where it is inside the text.
 * A cue ends at a blank line or, as WebVTT's parsing algorithm ends it, at
 * a second timing line (files written without blank lines between cues);
 * a line of digits just before that line is the next cue's number.
 */
#ifndef SRV_SUBTITLES_H
#define SRV_SUBTITLES_H

#include <stddef.h>

#include "cuetext.h"

/* One piece of the file: verbatim bytes, or one text to translate. */
typedef struct srv_sub_piece {
    const char *verbatim; /* not NULL: these bytes as they are */
    size_t verbatim_len;
    srv_cue cue;          /* else: a cue's text with its markup (cuetext.h) */
    const char *text;     /* ... the text for the model (the cue's) */
    size_t text_len;
    int lines;            /* its translation broken over this many lines */
    const char *nl;       /* ... separated by this ("\n" or "\r\n") */
} srv_sub_piece;

/* The pieces of data (len bytes of UTF-8), in order: their verbatim bytes
 * and texts' translations written one after another make the file. n: how
 * many; *cues: how many texts. Returns 0, -1 when out of memory, -2 when
 * it is no subtitle file (no timing line; why in err). Free with
 * srv_subtitles_free. */
int srv_subtitles_parse(const char *data, size_t len, srv_sub_piece **out, int *n, int *cues,
                        char *err, size_t errlen);
void srv_subtitles_free(srv_sub_piece *p, int n);

/* 1 when a text piece has markup inside its text, placed by attention:
 * its translation should capture it (srv_subtitles_render's al). */
int srv_subtitles_styled(const srv_sub_piece *p);

/* A text piece's translation t (n bytes) as the file gets it: its markup
 * put back (by the alignment al of n_al sentences, srv_api_text_align;
 * NULL and 0 when not styled), broken over p->lines lines (malloc'd,
 * NUL-terminated; NULL when out of memory). *lost: its tags that no word
 * of the translation took. */
char *srv_subtitles_render(srv_sub_piece *p, const char *t, size_t n, const srv_align *al,
                           int n_al, int *lost);

#endif /* SRV_SUBTITLES_H */
