/*
 * langcodes.h - language codes as users write them: LibreTranslate's
 * two-letter codes ("de", "zt") and NLLB-200's FLORES-200 codes
 * ("deu_Latn", "zho_Hant") for the common languages, with their English
 * names (docs/api.md, "Language codes"). One table, read-only.
 *
 * Routing compares a language by its canonical code: the short code when
 * the table knows the language (so "deu_Latn" and "de" are one language),
 * the code as written otherwise. A multilingual model's tokenizer is then
 * asked for the code, its FLORES-200 form, or its short form.
 *
 * Threads: any (no state).
 */
#ifndef SRV_LANGCODES_H
#define SRV_LANGCODES_H

#include <stddef.h>

#include "tokenizer.h"

/* The FLORES-200 code of a short code ("de" -> "deu_Latn"), or NULL when
 * the table does not have it. */
const char *srv_lang_flores(const char *code);

/* The short code of a FLORES-200 code ("deu_Latn" -> "de"), or NULL. */
const char *srv_lang_short(const char *code);

/* code's canonical form into out (n bytes): its short code when the table
 * knows it, else code itself. */
void srv_lang_canon(const char *code, char *out, size_t n);

/* Whether a and b name one language (equal canonical forms). */
int srv_lang_same(const char *a, const char *b);

/* The English name of a code (either form), or the code itself. */
const char *srv_lang_name(const char *code);

/* The number of tok's language (td_tok_lang_find) that code names: code
 * itself, its FLORES-200 form or its short form; -1 when tok has none of
 * them (or no languages at all). */
int srv_lang_in_tok(const td_tokenizer *tok, const char *code);

/* The table's rows: their number, and row i's short code. */
int srv_lang_table_size(void);
const char *srv_lang_table_code(int i);

#endif /* SRV_LANGCODES_H */
