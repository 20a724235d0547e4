/*
 * po.h - gettext catalogues (.po, .pot) for /translate_file, read and
 * written by libgettextpo in a helper process (`transformerd po-helper`,
 * server/po_helper.c): one run reads the upload, one writes the answer,
 * each with its own memory and CPU limits, killed past a deadline; a
 * malformed catalogue is refused with libgettextpo's message.
 *
 * A unit is a message's msgid, and its msgid_plural for a plural message
 * (two units). Only messages without a translation are taken (every one
 * but the obsolete with overwrite). What the model writes is marked fuzzy;
 * a plural message gets the target language's forms (msgstr[0] the
 * singular's translation, the others the plural's); the header gets the
 * target's Language and Plural-Forms, a UTF-8 Content-Type and the time
 * as PO-Revision-Date. Everything else (comments, references, flags,
 * msgctxt, obsolete messages) is written back by libgettextpo as it read
 * it, in its own line breaking; it drops an obsolete message without a
 * translation, as msgcat and msgmerge do.
 */
#ifndef SRV_PO_H
#define SRV_PO_H

#include <stddef.h>

typedef struct srv_po srv_po;

/* The helper's executable: transformerd sets /proc/self/exe (itself);
 * without one (another program linking the service) a gettext catalogue
 * is refused (-2), never run by a program that is not transformerd. */
void srv_po_helper(const char *exe);

/* Reads a catalogue. 0, -1 when out of memory or the helper cannot run
 * or answers something else than its reading (err), -2 when it is not a
 * catalogue libgettextpo reads, or has a string that is not UTF-8 (an
 * escape such as \377), or one that is not ASCII without a charset in
 * the header (err: the helper's reason, "line N: FIELD ..."). */
int srv_po_parse(const char *data, size_t len, int overwrite, srv_po **out, char *err,
                 size_t errlen);

/* The helper's reading alone (srv_po_parse's second half; the fuzz target
 * tests/fuzz/fuzz_po.c): every field checked for its type, never assumed.
 * 0, or -1 (err); such a srv_po cannot be rendered. */
int srv_po_from_reply(const char *reply, size_t len, int overwrite, srv_po **out, char *err,
                      size_t errlen);

/* What the second run would set for target (JSON, malloc'd), or NULL when
 * out of memory. */
char *srv_po_set_text(const srv_po *p, const char *target);

int srv_po_n(const srv_po *p);
const char *srv_po_source(const srv_po *p, int i);

/* Unit i's translation (copied); a message is written once all its units
 * have one. 0, or -1 when out of memory. */
int srv_po_set(srv_po *p, int i, const char *t);

/* The catalogue with the translations, for target (malloc'd, *len), or
 * NULL (err). */
char *srv_po_render(srv_po *p, const char *target, size_t *len, char *err, size_t errlen);

/* The Plural-Forms of a language ("de", "pt_BR"), or NULL when unknown. */
const char *srv_po_plural_forms(const char *lang);

void srv_po_free(srv_po *p); /* accepts NULL */

#endif
