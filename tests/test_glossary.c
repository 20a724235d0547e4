/*
 * test_glossary.c - the glossary store and its application
 * (server/service/glossary.c, glossplace.c), without a daemon:
 *   - TSV and CSV entries parsed (quotes, CRLF, blank lines, "~" terms),
 *     each bad line refused naming its line (no tab, two tabs, empty term,
 *     white space at an end, control character, invalid UTF-8, a source
 *     term twice in any case, CSV language columns of another pair);
 *   - the bounds: glossaries in the store, bytes and entries of one;
 *   - create, get, list, delete; the stored file reloaded by a new store
 *     (a restart), a deleted one gone after it, a broken file skipped;
 *   - edits (DeepL's v3): a dictionary merged (a source term given again in
 *     any case replaced, "~" kept on the others), replaced, added, dropped;
 *     the last one and a missing pair refused; a refused edit changes
 *     nothing; a reference to the old glossary stays readable; on disk;
 *   - a dictionary found by its pair in any case or variant, not another;
 *   - terms found case-insensitively at word bounds (a letter, digit or '_'
 *     before or after is not one), longest first;
 *   - a term placed at the target words its source words are linked to
 *     (scripted alignments as in test_spans), punctuation kept, the first
 *     word's capital kept, an inflectable term's form kept, others placed
 *     verbatim; no hit, no change; offsets moved with the edits.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glossary.h"

static const srv_gloss_limits k_lim = {4, 4096, 20};

static srv_err make(srv_glossaries *st, const char *entries, const char *fmt, srv_glossary **g,
                    char *msg)
{
    srv_gloss_input in = {"en", "de", entries, strlen(entries), fmt};
    const char *param = NULL;
    return srv_glossaries_create(st, "test", &in, 1, g, &param, msg, 256);
}

/* The message of a refused entries text (INVALID expected). */
static const char *refused(const char *entries, const char *fmt)
{
    static char msg[256];
    srv_glossaries *st = srv_glossaries_open(NULL, &k_lim, NULL, 0, msg, sizeof msg);
    srv_glossary *g = NULL;
    srv_err rc = make(st, entries, fmt, &g, msg);
    ck_assert_int_eq(rc, SRV_ERR_INVALID);
    ck_assert_ptr_null(g);
    srv_glossary **all;
    ck_assert_int_eq(srv_glossaries_list(st, &all), 0);
    free(all);
    srv_glossaries_close(st);
    return msg;
}

START_TEST(test_parse)
{
    char msg[256];
    srv_glossaries *st = srv_glossaries_open(NULL, &k_lim, NULL, 0, msg, sizeof msg);
    srv_glossary *g = NULL;
    ck_assert_int_eq(make(st, "engine\tMotor\r\n\nbrake pads\t~Bremsbelag\n", "tsv", &g, msg),
                     SRV_OK);
    const srv_gloss_dict *d = &g->d[0];
    ck_assert_int_eq(d->n, 2);
    ck_assert_str_eq(d->e[0].src, "engine");
    ck_assert_str_eq(d->e[0].tgt, "Motor");
    ck_assert_int_eq(d->e[0].inflect, 0);
    ck_assert_str_eq(d->e[1].tgt, "Bremsbelag");
    ck_assert_int_eq(d->e[1].inflect, 1);
    ck_assert_str_eq(d->tsv, "engine\tMotor\nbrake pads\t~Bremsbelag\n");
    srv_glossary_put(g);
    ck_assert_int_eq(make(st, "\"say \"\"hi\"\"\",\"sag, hallo\"\nwheel,Rad,EN,de\n", "csv", &g, msg),
                     SRV_OK);
    ck_assert_str_eq(g->d[0].e[0].src, "say \"hi\"");
    ck_assert_str_eq(g->d[0].e[0].tgt, "sag, hallo");
    ck_assert_str_eq(g->d[0].e[1].tgt, "Rad");
    srv_glossary_put(g);
    srv_glossaries_close(st);

    ck_assert_str_eq(refused("a\tb\nno tab here\n", "tsv"),
                     "entries line 2 has no tab (a TSV entry is SOURCE<TAB>TARGET)");
    ck_assert_str_eq(refused("a\tb\tc\n", "tsv"),
                     "entries line 1 has more than one tab (a TSV entry is SOURCE<TAB>TARGET)");
    ck_assert_str_eq(refused("a\tb\n\n\tx\n", "tsv"), "entries line 3: the source term is empty");
    ck_assert_str_eq(refused("a\t\n", "tsv"), "entries line 1: the target term is empty");
    ck_assert_str_eq(refused("a\t~\n", "tsv"), "entries line 1: the target term is empty");
    ck_assert_str_eq(refused("a \tb\n", "tsv"),
                     "entries line 1: the source term has white space at an end");
    ck_assert_str_eq(refused("a\tb\x01\n", "tsv"),
                     "entries line 1: the target term has a control character");
    ck_assert_str_eq(refused("a\xff\tb\n", "tsv"), "entries line 1: the source term is not valid UTF-8");
    ck_assert_str_eq(refused("Engine\tMotor\nb\tc\nengine\tMaschine\n", "tsv"),
                     "entries line 3: the source term 'engine' is line 1's already");
    ck_assert_str_eq(refused("\xC3\x84pfel\ta\n\xC3\xA4pfel\tb\n", "tsv"),
                     "entries line 2: the source term '\xC3\xA4pfel' is line 1's already");
    ck_assert_str_eq(refused("a,b,en,fr\n", "csv"),
                     "entries line 1 names the target language 'fr'; the dictionary's is 'de'");
    ck_assert_str_eq(refused("a,b,c\n", "csv"),
                     "entries line 1 has 3 fields (SOURCE,TARGET[,SOURCE_LANG,TARGET_LANG])");
    ck_assert_str_eq(refused("\"a,b\n", "csv"), "entries line 1 has a quote that is not closed");
    ck_assert_str_eq(refused("\n\n", "tsv"), "entries: no entry (a glossary needs at least one)");
}
END_TEST

START_TEST(test_fields_and_bounds)
{
    char msg[256];
    const char *param;
    srv_glossaries *st = srv_glossaries_open(NULL, &k_lim, NULL, 0, msg, sizeof msg);
    srv_glossary *g = NULL;
    srv_gloss_input in = {"en-GB", "DE", "a\tb\n", 4, NULL};
    ck_assert_int_eq(srv_glossaries_create(st, "", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_str_eq(param, "name");
    /* a name: at most 1024 characters, however many bytes (/openapi.json's
     * maxLength) */
    char name[2 * 1025 + 1] = "";
    for (int i = 0; i < 1024; i++)
        strcat(name, "\xc3\xa9"); /* U+00E9, 2 bytes */
    ck_assert_int_eq(srv_glossaries_create(st, name, &in, 1, &g, &param, msg, sizeof msg), SRV_OK);
    ck_assert_int_eq(srv_glossaries_delete(st, g->id, NULL, 0), SRV_OK);
    srv_glossary_put(g);
    g = NULL;
    strcat(name, "e");
    ck_assert_int_eq(srv_glossaries_create(st, name, &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_str_eq(param, "name");
    ck_assert_ptr_nonnull(strstr(msg, "at most 1024 characters"));
    in.src_lang = "english";
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_str_eq(param, "source_lang");
    in.src_lang = "de";
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_str_eq(param, "target_lang");
    in.src_lang = "en-GB";
    in.format = "xlsx";
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_str_eq(param, "entries_format");
    in.format = "tsv";
    /* entries: at most 20; bytes: at most 4096 */
    char big[8192] = "";
    for (int i = 0; i < 21; i++)
        sprintf(big + strlen(big), "w%d\tx\n", i);
    in.entries = big;
    in.entries_n = strlen(big);
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_TOO_LONG);
    ck_assert_str_eq(msg, "entries line 21: a glossary holds at most 20 entries "
                          "(--max-glossary-entries)");
    memset(big, 'a', 4097);
    big[4097] = 0;
    big[10] = '\t';
    in.entries_n = 4097;
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_TOO_LONG);
    ck_assert_str_eq(param, "entries");
    in.entries_n = 4096;
    big[4096] = 0;
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_INVALID); /* 4096 is allowed: the term is too long */
    in.entries = "a\tb\n";
    in.entries_n = 4;
    /* glossaries: at most 4 */
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                         SRV_OK);
        ck_assert_str_eq(g->d[0].src_lang, "en");
        ck_assert_str_eq(g->d[0].tgt_lang, "de");
        srv_glossary_put(g);
    }
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_ERR_NO_ROOM);
    srv_glossary **all;
    ck_assert_int_eq(srv_glossaries_list(st, &all), 4);
    ck_assert_ptr_nonnull(srv_glossary_dict(all[0], "EN-us", "de"));
    ck_assert_ptr_null(srv_glossary_dict(all[0], "de", "en"));
    ck_assert_ptr_null(srv_glossary_dict(all[0], "en", "fr"));
    ck_assert_int_eq(srv_glossaries_delete(st, all[0]->id, msg, sizeof msg), SRV_OK);
    ck_assert_int_eq(srv_glossaries_delete(st, all[0]->id, msg, sizeof msg), SRV_ERR_NOT_FOUND);
    char want[80];
    snprintf(want, sizeof want, "no glossary '%s'", all[0]->id);
    ck_assert_str_eq(msg, want);
    g = all[0];
    ck_assert_int_eq(srv_glossaries_get(st, all[0]->id, &g, msg, sizeof msg), SRV_ERR_NOT_FOUND);
    ck_assert_ptr_null(g);
    ck_assert_str_eq(msg, want);
    ck_assert_int_eq(srv_glossaries_create(st, "n", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_OK);
    srv_glossary_put(g);
    for (int i = 0; i < 4; i++)
        srv_glossary_put(all[i]); /* the deleted one is freed here */
    free(all);
    srv_glossaries_close(st);
}
END_TEST

START_TEST(test_persistence)
{
    char dir[] = "/tmp/td-gloss-XXXXXX", msg[256], warn[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    srv_glossaries *st = srv_glossaries_open(dir, &k_lim, warn, sizeof warn, msg, sizeof msg);
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(srv_glossaries_persistent(st), 1);
    srv_glossary *a, *b;
    const char *param;
    srv_gloss_input in[2] = {{"en", "de", "engine\tMotor\n", 13, "tsv"},
                             {"de", "en", "Motor\tengine\n", 13, "tsv"}};
    ck_assert_int_eq(srv_glossaries_create(st, "first", in, 2, &a, &param, msg, sizeof msg),
                     SRV_OK);
    ck_assert_int_eq(srv_glossaries_create(st, "second", in, 1, &b, &param, msg, sizeof msg),
                     SRV_OK);
    char ida[40], idb[40], created[40];
    strcpy(ida, a->id);
    strcpy(idb, b->id);
    strcpy(created, a->created);
    srv_glossary_put(a);
    srv_glossary_put(b);
    ck_assert_int_eq(srv_glossaries_delete(st, idb, NULL, 0), SRV_OK);
    srv_glossaries_close(st);
    /* a broken file beside them is skipped, named */
    char path[512];
    snprintf(path, sizeof path, "%s/glossaries/00000000-0000-4000-8000-000000000000.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"glossary_id\":", f);
    fclose(f);
    st = srv_glossaries_open(dir, &k_lim, warn, sizeof warn, msg, sizeof msg);
    ck_assert_ptr_nonnull(st);
    ck_assert_ptr_nonnull(strstr(warn, "00000000-0000-4000-8000-000000000000.json skipped"));
    ck_assert_int_eq(srv_glossaries_get(st, idb, &b, NULL, 0), SRV_ERR_NOT_FOUND);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(srv_glossaries_get(st, ida, &a, msg, sizeof msg), SRV_OK);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(a->name, "first");
    ck_assert_str_eq(a->created, created);
    ck_assert_int_eq(a->n_dicts, 2);
    ck_assert_str_eq(a->d[1].src_lang, "de");
    ck_assert_str_eq(a->d[1].tsv, "Motor\tengine\n");
    srv_glossary_put(a);
    ck_assert_int_eq(srv_glossaries_delete(st, ida, NULL, 0), SRV_OK);
    srv_glossaries_close(st);
    unlink(path);
    /* nothing left but the folder: no temporary file either */
    snprintf(path, sizeof path, "%s/glossaries", dir);
    DIR *dh = opendir(path);
    struct dirent *de;
    int left = 0;
    while ((de = readdir(dh)) != NULL)
        left += de->d_name[0] != '.' || strlen(de->d_name) > 2;
    closedir(dh);
    ck_assert_int_eq(left, 0);
    rmdir(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_edit)
{
    char dir[] = "/tmp/td-gloss-XXXXXX", msg[256], warn[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    srv_glossaries *st = srv_glossaries_open(dir, &k_lim, warn, sizeof warn, msg, sizeof msg);
    srv_glossary *g, *e;
    const char *param;
    const char *first = "file\t~Datei\nuser\tBenutzer\nfolder\tOrdner\n";
    srv_gloss_input in = {"en", "de", first, strlen(first), "tsv"};
    ck_assert_int_eq(srv_glossaries_create(st, "terms", &in, 1, &g, &param, msg, sizeof msg),
                     SRV_OK);
    char id[40];
    strcpy(id, g->id);
    /* merged: "USER" replaces "user", the others (with their "~") kept first */
    srv_gloss_input add = {"EN-GB", "de", "USER,Anwender\nwindow,Fenster\n", 29, "csv"};
    ck_assert_int_eq(srv_glossaries_edit(st, id, "renamed", &add, 1, SRV_GLOSS_MERGE, &e, &param,
                                         msg, sizeof msg),
                     SRV_OK);
    ck_assert_str_eq(e->d[0].tsv, "file\t~Datei\nfolder\tOrdner\nUSER\tAnwender\nwindow\tFenster\n");
    ck_assert_str_eq(e->name, "renamed");
    ck_assert_str_eq(e->id, id);
    ck_assert_str_eq(e->created, g->created);
    ck_assert_int_eq(e->d[0].e[0].inflect, 1);
    /* the old one, still held, as it was */
    ck_assert_str_eq(g->d[0].tsv, first);
    ck_assert_str_eq(g->name, "terms");
    srv_glossary_put(g);
    srv_glossary_put(e);
    /* a new pair merged in is added; replaced; dropped */
    srv_gloss_input fr = {"en", "fr", "file\tfichier\n", 13, "tsv"};
    ck_assert_int_eq(srv_glossaries_edit(st, id, NULL, &fr, 1, SRV_GLOSS_MERGE, &e, &param, msg,
                                         sizeof msg),
                     SRV_OK);
    ck_assert_int_eq(e->n_dicts, 2);
    ck_assert_str_eq(e->name, "renamed");
    srv_glossary_put(e);
    srv_gloss_input rep = {"en", "de", "disk\tPlatte\n", 12, "tsv"};
    ck_assert_int_eq(srv_glossaries_edit(st, id, NULL, &rep, 1, SRV_GLOSS_REPLACE, &e, &param,
                                         msg, sizeof msg),
                     SRV_OK);
    ck_assert_str_eq(srv_glossary_dict(e, "en", "de")->tsv, "disk\tPlatte\n");
    ck_assert_str_eq(srv_glossary_dict(e, "en", "fr")->tsv, "file\tfichier\n");
    srv_glossary_put(e);
    ck_assert_int_eq(srv_glossaries_edit(st, id, NULL, &fr, 1, SRV_GLOSS_DROP, &e, &param, msg,
                                         sizeof msg),
                     SRV_OK);
    ck_assert_int_eq(e->n_dicts, 1);
    srv_glossary_put(e);
    /* refused, nothing changed: a missing pair, the last one, a bad line,
     * over the entries' bound, an unknown id */
    ck_assert_int_eq(srv_glossaries_edit(st, id, NULL, &fr, 1, SRV_GLOSS_DROP, &e, &param, msg,
                                         sizeof msg),
                     SRV_ERR_NOT_FOUND);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(srv_glossaries_edit(st, id, NULL, &rep, 1, SRV_GLOSS_DROP, &e, &param, msg,
                                         sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(msg, "at least one dictionary"));
    srv_gloss_input bad = {"en", "de", "ok\tgut\nno tab\n", 14, "tsv"};
    ck_assert_int_eq(srv_glossaries_edit(st, id, "x", &bad, 1, SRV_GLOSS_MERGE, &e, &param, msg,
                                         sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(msg, "line 2"));
    char many[400] = "";
    for (int i = 0; i < 21; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "w%d\tx\n", i);
    srv_gloss_input big = {"en", "de", many, strlen(many), "tsv"};
    ck_assert_int_eq(srv_glossaries_edit(st, id, NULL, &big, 1, SRV_GLOSS_MERGE, &e, &param, msg,
                                         sizeof msg),
                     SRV_ERR_TOO_LONG);
    ck_assert_int_eq(srv_glossaries_edit(st, "00000000-0000-4000-8000-000000000000", NULL, &rep,
                                         1, SRV_GLOSS_MERGE, &e, &param, msg, sizeof msg),
                     SRV_ERR_NOT_FOUND);
    srv_glossaries_close(st);
    /* on disk: a new store reads the edited one */
    st = srv_glossaries_open(dir, &k_lim, warn, sizeof warn, msg, sizeof msg);
    ck_assert_int_eq(srv_glossaries_get(st, id, &g, msg, sizeof msg), SRV_OK);
    ck_assert_ptr_nonnull(g);
    ck_assert_str_eq(g->name, "renamed");
    ck_assert_int_eq(g->n_dicts, 1);
    ck_assert_str_eq(g->d[0].tsv, "disk\tPlatte\n");
    srv_glossary_put(g);
    ck_assert_int_eq(srv_glossaries_delete(st, id, NULL, 0), SRV_OK);
    srv_glossaries_close(st);
    char path[512];
    snprintf(path, sizeof path, "%s/glossaries", dir);
    rmdir(path);
    rmdir(dir);
}
END_TEST

/* A merge into a pair's dictionary, then more new pairs than a glossary
 * holds: refused (SRV_ERR_INVALID naming dictionaries), never SRV_OK with
 * no glossary (the PATCH that answered it crashed). */
START_TEST(test_edit_dict_bound)
{
    const srv_gloss_limits lim = {4, 1 << 20, 1000};
    char msg[256];
    srv_glossaries *st = srv_glossaries_open(NULL, &lim, NULL, 0, msg, sizeof msg);
    srv_glossary *g, *e = NULL;
    const char *param;
    srv_gloss_input over[SRV_GLOSS_MAX_DICTS + 1];
    char tgt[SRV_GLOSS_MAX_DICTS + 1][8];
    for (int i = 0; i <= SRV_GLOSS_MAX_DICTS; i++) {
        snprintf(tgt[i], sizeof tgt[i], "q%c%c", 'a' + i % 26, 'a' + i / 26);
        over[i] = (srv_gloss_input){"en", tgt[i], "disk\tx\n", 7, "tsv"};
    }
    ck_assert_int_eq(srv_glossaries_create(st, "full", over, SRV_GLOSS_MAX_DICTS, &g, &param, msg,
                                           sizeof msg),
                     SRV_OK);
    /* over[0] merged into its own, over[32] a 33rd pair */
    over[1] = over[SRV_GLOSS_MAX_DICTS];
    ck_assert_int_eq(srv_glossaries_edit(st, g->id, NULL, over, 2, SRV_GLOSS_MERGE, &e, &param,
                                         msg, sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_ptr_null(e);
    ck_assert_str_eq(param, "dictionaries");
    ck_assert_ptr_nonnull(strstr(msg, "at most 32 dictionaries"));
    /* the new pair alone: the same answer */
    ck_assert_int_eq(srv_glossaries_edit(st, g->id, NULL, &over[1], 1, SRV_GLOSS_MERGE, &e, &param,
                                         msg, sizeof msg),
                     SRV_ERR_INVALID);
    ck_assert_ptr_null(e);
    srv_glossary_put(g);
    srv_glossaries_close(st);
}
END_TEST

static srv_glossary *dict_of(srv_glossaries **st, const char *entries)
{
    char msg[256];
    *st = srv_glossaries_open(NULL, &k_lim, NULL, 0, msg, sizeof msg);
    srv_glossary *g = NULL;
    ck_assert_int_eq(make(*st, entries, "tsv", &g, msg), SRV_OK);
    return g;
}

START_TEST(test_match)
{
    srv_glossaries *st;
    srv_glossary *g = dict_of(&st, "engine\tMotor\nengine oil\tMotoröl\nÖl\tOil\nC++\tC++\n");
    const char *t = "Engine oil, engines, the ENGINE. Öl-engine; C++!";
    srv_gloss_hit *h;
    int n = srv_gloss_match(&g->d[0], t, strlen(t), &h);
    ck_assert_int_eq(n, 5);
    ck_assert_uint_eq(h[0].a, 0);
    ck_assert_uint_eq(h[0].b, 10); /* the longest: "Engine oil" */
    ck_assert_str_eq(h[0].e->tgt, "Motoröl");
    ck_assert_uint_eq(h[1].a, 25); /* "engines" is not "engine" */
    ck_assert_str_eq(h[2].e->tgt, "Oil");
    ck_assert_str_eq(h[3].e->src, "engine");
    ck_assert_str_eq(h[4].e->src, "C++");
    free(h);
    /* a letter or '_' before the term: not it either */
    n = srv_gloss_match(&g->d[0], "turboengine my_engine engine", 28, &h);
    ck_assert_int_eq(n, 1);
    ck_assert_uint_eq(h[0].a, 22);
    free(h);
    n = srv_gloss_match(&g->d[0], "no term", 7, &h);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(h);
    srv_glossary_put(g);
    srv_glossaries_close(st);
}
END_TEST

typedef struct wd {
    size_t a, b;
} wd;

static int words(const char *t, wd *w)
{
    int n = 0;
    for (size_t i = 0; t[i];) {
        if (t[i] == ' ') {
            i++;
            continue;
        }
        size_t a = i;
        while (t[i] && t[i] != ' ')
            i++;
        w[n++] = (wd){a, i};
    }
    return n;
}

/* One block, a token a word: target word t attends to source word link[t]. */
static srv_align block(const char *src, const char *tgt, const int *link)
{
    wd s[64], t[64];
    int ns = words(src, s), nt = words(tgt, t);
    srv_align a = {nt, ns, malloc(2 * (size_t)nt * sizeof(size_t)),
                   malloc(2 * (size_t)ns * sizeof(size_t)), malloc((size_t)(nt * ns) * sizeof(float))};
    for (int i = 0; i < nt; i++) {
        a.t_off[2 * i] = i ? t[i - 1].b : 0;
        a.t_off[2 * i + 1] = t[i].b;
        for (int j = 0; j < ns; j++)
            a.w[i * ns + j] = link[i] < 0 ? 1.0f / (float)ns
                              : j == link[i] ? 0.7f
                                             : 0.3f / (float)(ns > 1 ? ns - 1 : 1);
    }
    for (int j = 0; j < ns; j++) {
        a.s_off[2 * j] = j ? s[j - 1].b : 0;
        a.s_off[2 * j + 1] = s[j].b;
    }
    return a;
}

/* tgt with d's terms of src placed by the links. */
static char *placed(const srv_gloss_dict *d, const char *src, const char *tgt, const int *link)
{
    srv_align al = block(src, tgt, link);
    srv_gloss_hit *h = NULL;
    srv_gloss_edit *ed = NULL;
    int nh = srv_gloss_match(d, src, strlen(src), &h);
    ck_assert_int_ge(nh, 0);
    int ne = srv_gloss_place(src, strlen(src), tgt, strlen(tgt), h, nh, &al, 1, &ed);
    ck_assert_int_ge(ne, 0);
    size_t n;
    char *out = srv_gloss_apply(tgt, strlen(tgt), ed, ne, NULL, 0, &n);
    ck_assert_uint_eq(strlen(out), n);
    free(h);
    free(ed);
    free(al.t_off);
    free(al.s_off);
    free(al.w);
    return out;
}

#define CHECK_PLACED(d, src, tgt, link, want)                                                     \
    do {                                                                                          \
        char *o_ = placed(d, src, tgt, link);                                                     \
        ck_assert_str_eq(o_, want);                                                               \
        free(o_);                                                                                 \
    } while (0)

START_TEST(test_place)
{
    srv_glossaries *st;
    srv_glossary *g = dict_of(&st, "engine\tTriebwerk\nbrake pads\t~Bremsbelag\nfast\tschnell\n"
                                   "oil\tÖl\n");
    const srv_gloss_dict *d = &g->d[0];
    /* the term goes where its source word is aligned, not where it was */
    CHECK_PLACED(d, "The engine is old.", "Der Motor ist alt.", ((int[]){0, 1, 2, 3}),
                 "Der Triebwerk ist alt.");
    CHECK_PLACED(d, "The engine is old.", "Alt ist der Motor.", ((int[]){3, 2, 0, 1}),
                 "Alt ist der Triebwerk.");
    /* punctuation around the word stays */
    CHECK_PLACED(d, "Check the engine.", "Prüfe den Motor.", ((int[]){0, 1, 2}),
                 "Prüfe den Triebwerk.");
    /* no term: the translation as it is */
    CHECK_PLACED(d, "Check the wheel.", "Prüfe das Rad.", ((int[]){0, 1, 2}), "Prüfe das Rad.");
    /* two source words, one target word; and two target words of one */
    CHECK_PLACED(d, "New brake pads now.", "Neue Bremsklötze jetzt.", ((int[]){0, 1, 3}),
                 "Neue Bremsbelag jetzt.");
    CHECK_PLACED(d, "New brake pads now.", "Neue Belege der Bremse jetzt.",
                 ((int[]){0, 2, 2, 1, 3}), "Neue Bremsbelag jetzt.");
    /* an inflectable term: the model's form of it stays */
    CHECK_PLACED(d, "New brake pads now.", "Neue Bremsbeläge jetzt.", ((int[]){0, 1, 3}),
                 "Neue Bremsbelag jetzt."); /* "Bremsbeläge" is not "Bremsbela..." */
    CHECK_PLACED(d, "New brake pads now.", "Neue Bremsbelage jetzt.", ((int[]){0, 1, 3}),
                 "Neue Bremsbelage jetzt.");
    /* a verbatim term is placed even over a form of it */
    CHECK_PLACED(d, "The engine runs.", "Das Triebwerke läuft.", ((int[]){0, 1, 2}),
                 "Das Triebwerk läuft.");
    /* the term inside the model's compound stays; a verbatim term's
     * inflection becomes the term, lower case inside a word */
    CHECK_PLACED(d, "The engine block.", "Der Triebwerksblock.", ((int[]){0, 1}),
                 "Der Triebwerksblock.");
    CHECK_PLACED(d, "The engine block.", "Der Haupttriebwerke.", ((int[]){0, 1}),
                 "Der Haupttriebwerk.");
    /* the term elsewhere in the translation: the links pointed a word off */
    CHECK_PLACED(d, "The engine is old.", "Das alte Triebwerk.", ((int[]){0, 1, 3}),
                 "Das alte Triebwerk.");
    CHECK_PLACED(d, "The engine is old.", "Das alte Ding.", ((int[]){0, 1, 3}),
                 "Das Triebwerk Ding.");
    /* the first word's capital */
    CHECK_PLACED(d, "Fast cars.", "Schnelle Autos.", ((int[]){0, 1}), "Schnell Autos.");
    CHECK_PLACED(d, "Very fast.", "Sehr rasch.", ((int[]){0, 1}), "Sehr schnell.");
    /* two terms, each its own words */
    CHECK_PLACED(d, "The engine is fast.", "Der Motor ist rasant.", ((int[]){0, 1, 2, 3}),
                 "Der Triebwerk ist schnell.");
    /* a term whose target word another term took is not placed twice */
    /* a word that is another source word's strongest is not taken from it */
    CHECK_PLACED(d, "Engine oil.", "Motoröl.", ((int[]){0}), "Motoröl.");
    srv_glossary_put(g);
    srv_glossaries_close(st);
}
END_TEST

START_TEST(test_apply_offsets)
{
    srv_gloss_edit ed[2] = {{.a = 4, .b = 9, .rep_n = 9}, {.a = 14, .b = 18, .rep_n = 2}};
    memcpy(ed[0].rep, "Triebwerk", 9);
    memcpy(ed[1].rep, "ab", 2);
    const char *t = "Der Motor ist alt.";
    size_t off[8] = {0, 3, 3, 9, 9, 13, 13, 18}, n;
    char *o = srv_gloss_apply(t, strlen(t), ed, 2, off, 4, &n);
    ck_assert_str_eq(o, "Der Triebwerk ist ab");
    size_t want[8] = {0, 3, 3, 13, 13, 17, 17, 20};
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(off[i], want[i]);
    free(o);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("glossary");
    TCase *tc = tcase_create("glossary");
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_fields_and_bounds);
    tcase_add_test(tc, test_persistence);
    tcase_add_test(tc, test_edit);
    tcase_add_test(tc, test_edit_dict_bound);
    tcase_add_test(tc, test_match);
    tcase_add_test(tc, test_place);
    tcase_add_test(tc, test_apply_offsets);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
