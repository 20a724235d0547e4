/*
 * glossary.h - glossaries: a store of named term lists (DeepL's glossaries:
 * one or more dictionaries, each a language pair with its entries), kept on
 * disk under the daemon's state directory, and the two steps that apply one
 * to a translation: the terms found in a source sentence
 * (srv_gloss_match), and their target terms placed in the model's
 * translation where its attention aligns the source terms
 * (srv_gloss_place; docs/decisions.md, "Glossaries").
 *
 * Entries are TSV (SOURCE<TAB>TARGET a line) or CSV (SOURCE,TARGET or
 * SOURCE,TARGET,SOURCE_LANG,TARGET_LANG, RFC 4180 quoting), as DeepL takes
 * them. A target term written "~Term" may be inflected by the model (its
 * own word is kept when it starts with the term less its last letter);
 * any other is placed verbatim. Blank lines are skipped; a line with an
 * empty term, a term with white space at an end, a control character,
 * invalid UTF-8, a term over 1024 bytes or a source term already given
 * (case-insensitively) is refused naming its line.
 *
 * No HTTP here: the store's calls return errors.h's kinds with a reason,
 * each door maps them to its status and shape (server/api/glossaries.c,
 * DeepL's and the translate paths' glossary ids):
 *   SRV_ERR_INVALID    a field or an entry is wrong; the reason names it
 *   SRV_ERR_NOT_FOUND  no glossary of that id
 *   SRV_ERR_NO_ROOM    the store holds its most glossaries (--max-glossaries)
 *   SRV_ERR_TOO_LONG   the entries are over the bytes or entries bound
 *   SRV_ERR_INTERNAL   the state directory could not be written (or no id)
 *   SRV_ERR_NOMEM      out of memory
 *
 * Threads: the store's calls take its mutex (an edit also its own, so edits
 * run one at a time); a glossary is immutable once
 * made and reference-counted (srv_glossaries_get / srv_glossary_put), so a
 * request may keep using one that is deleted meanwhile. The matching and
 * placement functions are pure.
 */
#ifndef SRV_GLOSSARY_H
#define SRV_GLOSSARY_H

#include <stdatomic.h>
#include <stddef.h>

#include "errors.h"
#include "spans.h"

#define SRV_GLOSS_MAX_TERM 1024 /* bytes of one term */
#define SRV_GLOSS_MAX_NAME 1024 /* characters (code points) of a glossary's name */
#define SRV_GLOSS_MAX_DICTS 32  /* dictionaries of one glossary */

typedef struct srv_gloss_entry {
    const char *src, *tgt; /* NUL-terminated; tgt without the "~" */
    char *fold;            /* src case-folded (same bytes as src) */
    size_t src_n, tgt_n;
    int inflect;           /* "~": the model may inflect the term */
} srv_gloss_entry;

typedef struct srv_gloss_dict {
    char src_lang[16], tgt_lang[16]; /* lower case base codes: "en", "de" */
    int n;
    srv_gloss_entry *e; /* in the order given */
    int *by_first;      /* entries by their folded source's first byte, longest first */
    char *tsv;          /* the entries as TSV lines (what is stored and answered) */
    size_t tsv_n;
    char *terms;        /* the terms' bytes (e's strings point here) */
} srv_gloss_dict;

typedef struct srv_glossary {
    char id[40];        /* a random UUID */
    char *name;
    char created[40];   /* ISO 8601 UTC with milliseconds: 2026-12-07T11:04:08.123Z */
    int n_dicts;
    srv_gloss_dict *d;
    atomic_int refs;    /* the store's + one per user */
} srv_glossary;

typedef struct srv_gloss_limits {
    int max_glossaries;  /* glossaries in the store */
    long max_bytes;      /* bytes of one glossary's entries, as given, all dictionaries */
    int max_entries;     /* entries of one glossary, all dictionaries */
} srv_gloss_limits;

/* One dictionary to make: its pair, its entries and their format ("tsv"
 * or "csv"; NULL: tsv). */
typedef struct srv_gloss_input {
    const char *src_lang, *tgt_lang;
    const char *entries;
    size_t entries_n;
    const char *format;
} srv_gloss_input;

typedef struct srv_glossaries srv_glossaries;

/* The store: dir (its glossaries/ subfolder, made at the first create) or
 * NULL for a store in memory only. Loads every glossary stored there; a
 * file that cannot be read is skipped and named in *warn (the last one, ""
 * when none). NULL when out of memory or dir cannot be listed (err). */
srv_glossaries *srv_glossaries_open(const char *dir, const srv_gloss_limits *lim, char *warn,
                                    size_t warn_n, char *err, size_t err_n);
void srv_glossaries_close(srv_glossaries *st); /* accepts NULL */

/* Whether the store keeps glossaries on disk. */
int srv_glossaries_persistent(const srv_glossaries *st);

/* Makes a glossary of n dictionaries (1..SRV_GLOSS_MAX_DICTS, pairs
 * distinct) named name (not empty), stores it (atomically: a temporary
 * file renamed over) and returns it with a reference for the caller in
 * *out. SRV_OK, or INVALID, NO_ROOM, TOO_LONG, INTERNAL or NOMEM, which
 * leave the store as it was, with msg saying why (the field, "entries line
 * N: ...", "out of memory") and *param the field's name ("name",
 * "source_lang", "target_lang", "entries_format", "entries") or NULL. */
srv_err srv_glossaries_create(srv_glossaries *st, const char *name, const srv_gloss_input *in,
                              int n, srv_glossary **out, const char **param, char *msg,
                              size_t msg_n);

/* An edit of a glossary's dictionaries (DeepL's v3): each dictionary
 * given merged into the one of its pair (its entries replace those of the
 * same source term, case-insensitively; the others kept) or added
 * (MERGE, PATCH); the pair's replaced or added (REPLACE, PUT); the pair's
 * removed (DROP, DELETE; the entries are not read). */
typedef enum srv_gloss_edit_kind {
    SRV_GLOSS_MERGE,
    SRV_GLOSS_REPLACE,
    SRV_GLOSS_DROP,
} srv_gloss_edit_kind;

/* Edits glossary id: name (NULL: kept) and the n dictionaries of in by
 * kind, into a new glossary of the same id and creation time that takes
 * the old one's place in the store and its file (a request holding the old
 * one keeps it). Returned with a reference in *out. SRV_ERR_NOT_FOUND: no
 * such glossary, or (DROP) no dictionary of a pair; INVALID: a field or
 * entry (*param, msg; also a glossary left without a dictionary); TOO_LONG:
 * over the bounds; INTERNAL (storage); NOMEM. Any kind but SRV_OK changes
 * nothing. */
srv_err srv_glossaries_edit(srv_glossaries *st, const char *id, const char *name,
                            const srv_gloss_input *in, int n, srv_gloss_edit_kind kind,
                            srv_glossary **out, const char **param, char *msg, size_t msg_n);

/* The glossary of id with a reference (srv_glossary_put) in *out: SRV_OK,
 * or SRV_ERR_NOT_FOUND (*out NULL; st NULL: no store) with msg "no glossary
 * 'ID'" (the id's first 64 bytes). msg may be NULL. */
srv_err srv_glossaries_get(srv_glossaries *st, const char *id, srv_glossary **out, char *msg,
                           size_t msg_n);
void srv_glossary_put(srv_glossary *g); /* accepts NULL */

/* Every glossary, oldest first, each with a reference, into *out
 * (malloc'd; put each and free it). The count, or -1 when out of memory. */
int srv_glossaries_list(srv_glossaries *st, srv_glossary ***out);

/* Removes id from the store and its file: SRV_OK, or NOT_FOUND or
 * INTERNAL (the file could not be removed: the glossary stays) with msg
 * (NULL: none wanted). */
srv_err srv_glossaries_delete(srv_glossaries *st, const char *id, char *msg, size_t msg_n);

/* g's dictionary for the pair (codes compared by their base, any case),
 * or NULL. */
const srv_gloss_dict *srv_glossary_dict(const srv_glossary *g, const char *src,
                                        const char *tgt);

/* A language code as glossaries keep it: its base, lower case ("EN-GB" ->
 * "en"), into out; 0, or -1 when code is not 2 or 3 letters (+ a region). */
int srv_gloss_lang(const char *code, char *out, size_t n);

/* ---- applying one --------------------------------------------------------- */

/* A term found in a source sentence: its bytes [a, b) and its entry. */
typedef struct srv_gloss_hit {
    size_t a, b;
    const srv_gloss_entry *e;
} srv_gloss_hit;

/* The terms of d in text (n bytes): each occurrence of a source term,
 * case-insensitively, with no letter or digit right before or after it;
 * the longest term wins where two start at one place, and occurrences do
 * not overlap. In text order into *out (malloc'd). The count, or -1 when
 * out of memory. */
int srv_gloss_match(const srv_gloss_dict *d, const char *text, size_t n, srv_gloss_hit **out);

/* A change of a translation: bytes [a, b) become rep (rep_n bytes, in the
 * hit's entry or the edit's own buffer). */
typedef struct srv_gloss_edit {
    size_t a, b;
    char rep[SRV_GLOSS_MAX_TERM + 8];
    size_t rep_n;
} srv_gloss_edit;

/* Where the hits of src go in tgt, its translation, by the word links of
 * the alignment: a term's target words are those linked both ways with its
 * source words, else those linked to them, else those they link to (made
 * one run; never wider than its source words plus two, else the one most
 * weighed), less the punctuation at the run's ends. There, in order:
 *   - the run holds the target term (case-insensitively; an inflectable
 *     entry's: the term less its last letter): kept when it ends the word
 *     or 3 letters or more follow (a compound: "Dateiname" has "Datei");
 *     1 or 2 letters after a verbatim term are its inflection, made the
 *     term ("Dateien" -> "Datei", lower case inside a word);
 *   - the term is elsewhere in the translation, not yet another hit's: kept
 *     there (the links pointed a word off);
 *   - else the run becomes the target term (its first letter upper case
 *     when it replaces the capitalized first word).
 * A run whose words another hit took, or none, leaves the hit unplaced.
 * Edits in tgt order into *out (malloc'd). The count, or -1 when out of
 * memory. */
int srv_gloss_place(const char *src, size_t src_n, const char *tgt, size_t tgt_n,
                    const srv_gloss_hit *hits, int n_hits, const srv_align *blocks, int n_blocks,
                    srv_gloss_edit **out);

/* tgt with the edits made (malloc'd, NUL-terminated, *n_out its bytes);
 * offsets (2 n_off byte positions in tgt, or NULL) moved to the new text:
 * a position inside an edit clamps to its replacement. NULL when out of
 * memory. */
char *srv_gloss_apply(const char *tgt, size_t tgt_n, const srv_gloss_edit *ed, int n_ed,
                      size_t *offsets, int n_off, size_t *n_out);

#endif /* SRV_GLOSSARY_H */
