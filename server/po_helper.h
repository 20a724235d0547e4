/*
 * po_helper.h - `transformerd po-helper`: gettext catalogues read and
 * written by libgettextpo for the daemon, in a process of their own
 * (po_helper.c; server/service/po.c runs it). The reading is callable in
 * a process too (tests/fuzz/fuzz_po.c): po_file_read with po_helper_xerror,
 * then po_helper_json.
 */
#ifndef PO_HELPER_H
#define PO_HELPER_H

#include <stddef.h>

#include <gettext-po.h>
#include <jansson.h>

/* The arguments after "po-helper"; 0, 2 (usage) or 3 (the catalogue
 * refused, the reason on stderr). */
int cli_po_helper(int argc, char **argv);

/* libgettextpo's error handler: a warning is ignored, the first error
 * kept ("line N: ..."), a fatal error handed to the fatal hook (default:
 * the reason on stderr and exit(3); a hook must not return). */
extern const struct po_xerror_handler po_helper_xerror;
void po_helper_on_fatal(void (*fatal)(const char *reason));
/* The first error since the last po_helper_reset ("" when none). */
const char *po_helper_error(void);
void po_helper_reset(void);

/* The reading of a catalogue libgettextpo read without error (text: its
 * bytes, for the lines of the fields; NULL: a message's line only):
 * *out = {"header": S, "entries": [...]} (po_helper.c), in UTF-8 (f's
 * strings converted when its header names another charset). 0; -2 when
 * the header names a charset iconv does not know, a string is not in the
 * charset named (UTF-8 when none), or is not ASCII in a catalogue whose
 * header names no charset (err: "line N: FIELD ..."); -1 when out of
 * memory. */
int po_helper_json(po_file_t f, const char *text, size_t len, json_t **out, char *err,
                   size_t errlen);

#endif
