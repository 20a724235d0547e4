/*
 * catalog.h - software translation catalogues for /translate_file: gettext
 * .po/.pot (a file that does not start with '<': po.h), and in XML:
 * Qt Linguist (.ts) and XLIFF 1.2 (1.0, 1.1 alike) and 2.0 (.xlf, .xliff), read and written
 * with libxml2 (no network, no DTD loaded, no external entity read, an
 * internal entity of plain text its text; xmllimits.h's bounds). A unit is a
 * TS <message>, an XLIFF 1.2 <trans-unit> (not translate="no") or an XLIFF
 * 2.0 <segment>; its source text is what is translated, and only a unit
 * without a translation (none, or an empty one) unless overwrite.
 *
 * The translation goes where the format keeps it, marked for review: a TS
 * <translation type="unfinished"> (every <numerusform> of a numerus message
 * gets it), an XLIFF 1.2 <target state="needs-review-translation"> right
 * after the <source>, an XLIFF 2.0 <target> with the <segment>'s state
 * "translated". A unit whose source holds markup (XLIFF inline elements)
 * is left as it is, and so is one whose translation does not keep the
 * source's placeholders (printf's %s, %1$d, %(name)s; Qt's %1, %n, %L1;
 * {0}, {name}) as the same multiset; both are counted as kept. Everything
 * else - other elements, attributes, comments, the DOCTYPE - is written
 * back as libxml2 reads it.
 */
#ifndef SRV_CATALOG_H
#define SRV_CATALOG_H

#include <stddef.h>

typedef struct srv_catalog srv_catalog;

/* Parses data (len bytes) as a catalogue; overwrite: every unit, else the
 * untranslated ones. 0, -1 when out of memory (or a gettext catalogue's
 * helper cannot run), -2 when it is not a well-formed TS or XLIFF 1.2/2.0
 * document or a catalogue libgettextpo reads (why in err). */
int srv_catalog_parse(const char *data, size_t len, int overwrite, srv_catalog **out, char *err,
                      size_t errlen);

/* The units to translate and unit i's source text (plain, NUL-terminated). */
int srv_catalog_n(const srv_catalog *c);
const char *srv_catalog_source(const srv_catalog *c, int i);

/* Unit i's translation t: written where the format keeps it when it keeps
 * the source's placeholders (1), else the unit is left as it was (0);
 * -1 when out of memory. */
int srv_catalog_set(srv_catalog *c, int i, const char *t);

/* Units left as they were so far (markup in the source, placeholders
 * lost). */
int srv_catalog_kept(const srv_catalog *c);

/* The language a catalogue is translated into (a gettext catalogue's
 * header and plural forms; "en" until set). */
void srv_catalog_target(srv_catalog *c, const char *lang);

/* The document (malloc'd, *len bytes, UTF-8), or NULL (why in err: out of
 * memory, a gettext catalogue's helper failing). */
char *srv_catalog_render(srv_catalog *c, size_t *len, char *err, size_t errlen);

void srv_catalog_free(srv_catalog *c); /* accepts NULL */

/* The placeholders of t, sorted, into buf as "a\x1fb\x1f..." (for tests and
 * the check); 0, or -1 when buf is too small. */
int srv_catalog_placeholders(const char *t, char *buf, size_t n);

#endif /* SRV_CATALOG_H */
