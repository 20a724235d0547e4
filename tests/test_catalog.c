/*
 * test_catalog.c - the XML catalogues of /translate_file
 * (server/service/catalog.c), without a model:
 *   - placeholders: printf (%s, %1$d, %-5.2f, %%), Python's %(name)s, Qt's
 *     %1, %n, %L2, braces {0} {name}, Twig's {{ name }}, Symfony's %name%,
 *     Rails' %{name}, ${name}; the same multiset in any order;
 *   - a unit whose translation loses or adds one is left as it was and
 *     counted;
 *   - which units are taken (untranslated, or every one with overwrite;
 *     not translate="no", not obsolete, not a source with markup) and where
 *     the translation goes in TS, XLIFF 1.2 and 2.0; translate="no" of a
 *     <group> or <file> holds for the units inside until one says "yes";
 *     the target language written where each format keeps it;
 *   - refused: not XML, another root, an XLIFF of another version; an
 *     external entity is never read and a billion-laughs file does not
 *     expand;
 *   - gettext catalogues through the helper: units, refusals with their
 *     line and field (strings that are not UTF-8, not ASCII without a
 *     charset), a header written where there was none, and the helper's
 *     answer malformed; a catalogue in another charset its header names
 *     read in it and written in UTF-8, an unknown or lying charset refused.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "po.h"

static void ph_eq(const char *a, const char *b, int same)
{
    char x[512], y[512];
    ck_assert_int_eq(srv_catalog_placeholders(a, x, sizeof x), 0);
    ck_assert_int_eq(srv_catalog_placeholders(b, y, sizeof y), 0);
    ck_assert_msg((strcmp(x, y) == 0) == same, "'%s' / '%s': %s", a, b, same ? "differ" : "same");
}

START_TEST(test_placeholders)
{
    ph_eq("Hello %s, %d new", "Hallo %s, %d neu", 1);
    ph_eq("%1$s of %2$d", "%2$d von %1$s", 1);
    ph_eq("%-5.2f%% done", "%-5.2f%% fertig", 1);
    ph_eq("100%% sure", "100 % sicher", 1); /* %% and a lone % are no placeholder */
    ph_eq("%(name)s saved", "%(name)s gespeichert", 1);
    ph_eq("%(name)s saved", "%(nom)s gespeichert", 0);
    ph_eq("Open %1 of %2", "%2: %1 öffnen", 1);
    ph_eq("%n file(s)", "%n Datei(en)", 1);
    ph_eq("%L1 bytes", "%1 Bytes", 0);
    ph_eq("{0} of {total}", "{total}: {0}", 1);
    ph_eq("{0} of {total}", "{0} von {gesamt}", 0);
    ph_eq("Hello %s", "Hallo", 0);
    ph_eq("Hello", "Hallo %s", 0);
    ph_eq("%s and %s", "%s und", 0);
    /* Twig/Symfony, Symfony's parameters, Ruby on Rails, ${} */
    ph_eq("This value should be of type {{ type }}.", "Dieser Wert sollte vom Typ {{ type }} sein.",
          1);
    ph_eq("This value should be of type {{ type }}.", "Dieser Wert sollte vom Typ {{ Typ }} sein.",
          0);
    ph_eq("at most {{ limit|number }} characters", "höchstens {{ limit }} Zeichen", 0);
    ph_eq("You have %count% messages", "Sie haben %count% Nachrichten", 1);
    ph_eq("You have %count% messages", "Sie haben %Anzahl% Nachrichten", 0);
    ph_eq("Hello %{user}, ${n} left", "Hallo %{user}, noch ${n}", 1);
    ph_eq("Hello %{user}", "Hallo %{Benutzer}", 0);
    ph_eq("%c%s%", "%c%s%", 1); /* printf's %c and %s, a lone % */
    char small[4];
    ck_assert_int_eq(srv_catalog_placeholders("%s %d %f", small, sizeof small), -1);
}
END_TEST

static srv_catalog *parse(const char *xml, int overwrite)
{
    srv_catalog *c = NULL;
    char err[256];
    int rc = srv_catalog_parse(xml, strlen(xml), overwrite, &c, err, sizeof err);
    ck_assert_msg(rc == 0, "%d %s", rc, err);
    return c;
}

static char *render(srv_catalog *c)
{
    size_t n = 0;
    char err[256];
    char *t = srv_catalog_render(c, &n, err, sizeof err);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(strlen(t), n);
    return t;
}

START_TEST(test_ts)
{
    const char *ts =
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!DOCTYPE TS>\n<TS version=\"2.1\">\n"
        "<context><name>W</name>\n"
        "<message><source>Save?</source><translation type=\"unfinished\"></translation></message>\n"
        "<message><source>Done</source><translation>Fertig</translation></message>\n"
        "<message numerus=\"yes\"><source>%n files</source><translation type=\"unfinished\">"
        "<numerusform></numerusform><numerusform></numerusform></translation></message>\n"
        "<message><source>Old</source><translation type=\"obsolete\"></translation></message>\n"
        "<message><source>Open %1</source></message>\n"
        "<message><source>&lt;html&gt;&lt;head/&gt;&lt;body&gt;&lt;p&gt;&lt;span style=\" "
        "font-weight:600;\"&gt;%1 &lt;/span&gt;files&lt;/p&gt;&lt;/body&gt;&lt;/html&gt;</source>"
        "<translation type=\"unfinished\"></translation></message>\n"
        "<message><source>a &lt; b and c &gt; d</source>"
        "<translation type=\"unfinished\"></translation></message>\n"
        "</context></TS>\n";
    srv_catalog *c = parse(ts, 0);
    /* Qt's rich text (escaped HTML) is left for a person and counted; a
     * comparison's < and > are no markup */
    ck_assert_int_eq(srv_catalog_n(c), 4);
    ck_assert_int_eq(srv_catalog_kept(c), 1);
    ck_assert_str_eq(srv_catalog_source(c, 0), "Save?");
    ck_assert_str_eq(srv_catalog_source(c, 1), "%n files");
    ck_assert_str_eq(srv_catalog_source(c, 2), "Open %1");
    ck_assert_str_eq(srv_catalog_source(c, 3), "a < b and c > d");
    ck_assert_int_eq(srv_catalog_set(c, 0, "Speichern?"), 1);
    ck_assert_int_eq(srv_catalog_set(c, 1, "%n Dateien"), 1);
    ck_assert_int_eq(srv_catalog_set(c, 2, "Öffnen"), 0); /* %1 lost */
    ck_assert_int_eq(srv_catalog_kept(c), 2);
    char *t = render(c);
    ck_assert_msg(strstr(t, "<translation type=\"unfinished\">Speichern?</translation>"), "%s", t);
    ck_assert_msg(strstr(t, "<numerusform>%n Dateien</numerusform><numerusform>%n "
                            "Dateien</numerusform>"), "%s", t);
    ck_assert_msg(strstr(t, "<translation>Fertig</translation>"), "%s", t);
    ck_assert_msg(strstr(t, "<message><source>Open %1</source></message>"), "%s", t);
    ck_assert_msg(strstr(t, "<!DOCTYPE TS>"), "%s", t);
    free(t);
    srv_catalog_free(c);
    /* overwrite: the translated one too, never the obsolete */
    c = parse(ts, 1);
    ck_assert_int_eq(srv_catalog_n(c), 5);
    srv_catalog_free(c);
}
END_TEST

START_TEST(test_xliff)
{
    const char *x1 =
        "<xliff version=\"1.2\" xmlns=\"urn:oasis:names:tc:xliff:document:1.2\"><file><body>"
        "<trans-unit id=\"1\"><source>Close</source></trans-unit>"
        "<trans-unit id=\"2\"><source>Keep</source><target>Behalten</target></trans-unit>"
        "<trans-unit id=\"3\" translate=\"no\"><source>ACME</source></trans-unit>"
        "<trans-unit id=\"4\"><source>Click <g id=\"b\">here</g></source></trans-unit>"
        "<trans-unit id=\"5\"><source>Hi %s</source><target/></trans-unit>"
        "</body></file></xliff>";
    srv_catalog *c = parse(x1, 0);
    ck_assert_int_eq(srv_catalog_n(c), 2);
    ck_assert_int_eq(srv_catalog_kept(c), 1); /* the <g> */
    ck_assert_int_eq(srv_catalog_set(c, 0, "Schließen"), 1);
    ck_assert_int_eq(srv_catalog_set(c, 1, "Hallo %s"), 1);
    char *t = render(c);
    ck_assert_msg(strstr(t, "<source>Close</source><target state=\"needs-review-translation\">"
                            "Schließen</target>"), "%s", t);
    ck_assert_msg(strstr(t, "<target state=\"needs-review-translation\">Hallo %s</target>"), "%s",
                  t);
    ck_assert_msg(strstr(t, "<target>Behalten</target>"), "%s", t);
    free(t);
    srv_catalog_free(c);
    const char *x2 = "<xliff xmlns=\"urn:oasis:names:tc:xliff:document:2.0\" version=\"2.0\" "
                     "srcLang=\"en\"><file id=\"f\"><unit id=\"u\"><segment><source>Go</source>"
                     "</segment></unit><unit id=\"v\" translate=\"no\"><segment><source>X"
                     "</source></segment></unit></file></xliff>";
    c = parse(x2, 0);
    ck_assert_int_eq(srv_catalog_n(c), 1);
    ck_assert_int_eq(srv_catalog_set(c, 0, "Los"), 1);
    t = render(c);
    ck_assert_msg(strstr(t, "<segment state=\"translated\"><source>Go</source><target>Los</target>"),
                  "%s", t);
    free(t);
    srv_catalog_free(c);
}
END_TEST

/* translate="no" on a <file> or <group> holds for what is inside (a unit
 * may say "yes" again); the language translated into is written where
 * each format keeps it. */
START_TEST(test_inherited_and_target)
{
    const char *x1 =
        "<xliff version=\"1.2\" xmlns=\"urn:oasis:names:tc:xliff:document:1.2\">"
        "<file source-language=\"en\" target-language=\"en\" datatype=\"plaintext\" "
        "original=\"a\"><body><group translate=\"no\">"
        "<trans-unit id=\"1\"><source>ACME Corp</source></trans-unit>"
        "<trans-unit id=\"2\" translate=\"yes\"><source>Open</source></trans-unit></group>"
        "<trans-unit id=\"3\"><source>Close</source></trans-unit></body></file>"
        "<file source-language=\"en\" datatype=\"plaintext\" original=\"b\" translate=\"no\">"
        "<body><trans-unit id=\"4\"><source>Brand</source></trans-unit></body></file></xliff>";
    srv_catalog *c = parse(x1, 0);
    ck_assert_int_eq(srv_catalog_n(c), 2);
    ck_assert_str_eq(srv_catalog_source(c, 0), "Open");
    ck_assert_str_eq(srv_catalog_source(c, 1), "Close");
    srv_catalog_target(c, "de");
    char *t = render(c);
    ck_assert_msg(strstr(t, "target-language=\"de\" datatype") &&
                      strstr(t, "original=\"b\" translate=\"no\" target-language=\"de\""),
                  "%s", t);
    free(t);
    srv_catalog_free(c);
    const char *x2 = "<xliff xmlns=\"urn:oasis:names:tc:xliff:document:2.0\" version=\"2.0\" "
                     "srcLang=\"en\"><file id=\"f\" translate=\"no\"><unit id=\"u\"><segment>"
                     "<source>Go</source></segment></unit><group id=\"g\" translate=\"yes\">"
                     "<unit id=\"v\"><segment><source>Stop</source></segment></unit></group>"
                     "</file></xliff>";
    c = parse(x2, 0);
    ck_assert_int_eq(srv_catalog_n(c), 1);
    ck_assert_str_eq(srv_catalog_source(c, 0), "Stop");
    srv_catalog_target(c, "de");
    t = render(c);
    ck_assert_msg(strstr(t, "srcLang=\"en\" trgLang=\"de\""), "%s", t);
    free(t);
    srv_catalog_free(c);
    const char *ts = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!DOCTYPE TS>\n"
                     "<TS version=\"2.1\" language=\"en_US\" sourcelanguage=\"en_US\">"
                     "<context><name>W</name><message><source>Save?</source>"
                     "<translation type=\"unfinished\"></translation></message></context></TS>\n";
    c = parse(ts, 0);
    srv_catalog_target(c, "de");
    t = render(c);
    ck_assert_msg(strstr(t, "language=\"de\" sourcelanguage=\"en_US\""), "%s", t);
    free(t);
    srv_catalog_free(c);
}
END_TEST

START_TEST(test_refused)
{
    static const char *const bad[][2] = {
        {"<TS><message>", "well-formed"},
        {"<html><body/></html>", "not a Qt TS or XLIFF"},
        {"<xliff version=\"3.0\"/>", "not a Qt TS or XLIFF"},
        {"", "well-formed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_catalog *c = NULL;
        char err[256] = "";
        ck_assert_int_eq(srv_catalog_parse(bad[i][0], strlen(bad[i][0]), 0, &c, err, sizeof err), -2);
        ck_assert_ptr_null(c);
        ck_assert_msg(strstr(err, bad[i][1]), "case %zu: %s", i, err);
    }
    /* an external entity: never read (the unit's source holds a reference,
     * not /etc/hostname's text, so it is not plain text and is kept) */
    const char *xxe = "<?xml version=\"1.0\"?><!DOCTYPE TS [<!ENTITY x SYSTEM \"file:///etc/hostname\">]>"
                      "<TS><context><message><source>&x;</source></message></context></TS>";
    srv_catalog *c = parse(xxe, 0);
    ck_assert_int_eq(srv_catalog_n(c), 0);
    char *t = render(c);
    ck_assert_msg(strstr(t, "&x;"), "%s", t);
    free(t);
    srv_catalog_free(c);
    /* a billion laughs: not expanded (kept as references, or refused) */
    char lol[4096];
    size_t k = (size_t)snprintf(lol, sizeof lol, "<?xml version=\"1.0\"?><!DOCTYPE TS [<!ENTITY l0 \"lol\">");
    for (int i = 1; i < 10; i++)
        k += (size_t)snprintf(lol + k, sizeof lol - k,
                              "<!ENTITY l%d \"&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;&l%d;\">", i,
                              i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
    snprintf(lol + k, sizeof lol - k, "]><TS><context><message><source>&l9;</source></message>"
                                      "</context></TS>");
    c = NULL;
    char err[256];
    int rc = srv_catalog_parse(lol, strlen(lol), 0, &c, err, sizeof err);
    ck_assert(rc == 0 || rc == -2);
    if (rc == 0) {
        ck_assert_int_eq(srv_catalog_n(c), 0);
        t = render(c);
        ck_assert_uint_lt(strlen(t), 2 * strlen(lol));
        free(t);
        srv_catalog_free(c);
    }
}
END_TEST

/* gettext catalogues: units, the helper's refusals, the written file */
START_TEST(test_po)
{
    static const char po[] =
        "msgid \"\"\nmsgstr \"\"\n\"Content-Type: text/plain; charset=UTF-8\\n\"\n\n"
        "#: a.c:1\n#, c-format\nmsgid \"Hello %s\"\nmsgstr \"\"\n\n"
        "msgid \"%d file\"\nmsgid_plural \"%d files\"\nmsgstr[0] \"\"\nmsgstr[1] \"\"\n\n"
        "msgid \"Done\"\nmsgstr \"Fertig\"\n\n"
        "#~ msgid \"Old\"\n#~ msgstr \"\"\n";
    srv_catalog *c = NULL;
    char err[256] = "";
    /* no helper (a program that is not transformerd): refused, never run */
    ck_assert_int_eq(srv_catalog_parse(po, strlen(po), 0, &c, err, sizeof err), -2);
    ck_assert_msg(strstr(err, "po-helper"), "%s", err);
    srv_po_helper("/nonexistent/transformerd");
    ck_assert_int_eq(srv_catalog_parse(po, strlen(po), 0, &c, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot run"), "%s", err);
    srv_po_helper(TD_TRANSFORMERD);
    c = parse(po, 0);
    /* "Hello %s", then the plural message's two; not "Done", not obsolete */
    ck_assert_int_eq(srv_catalog_n(c), 3);
    ck_assert_str_eq(srv_catalog_source(c, 0), "Hello %s");
    ck_assert_str_eq(srv_catalog_source(c, 1), "%d file");
    ck_assert_str_eq(srv_catalog_source(c, 2), "%d files");
    ck_assert_int_eq(srv_catalog_set(c, 0, "Hallo %d"), 0); /* a placeholder changed: kept */
    ck_assert_int_eq(srv_catalog_set(c, 1, "%d Datei"), 1);
    ck_assert_int_eq(srv_catalog_set(c, 2, "%d Dateien"), 1);
    ck_assert_int_eq(srv_catalog_kept(c), 1);
    srv_catalog_target(c, "pl"); /* three forms: [0] the singular, the rest the plural */
    char *t = render(c);
    ck_assert_msg(strstr(t, "msgstr[0] \"%d Datei\"\nmsgstr[1] \"%d Dateien\"\n"
                            "msgstr[2] \"%d Dateien\"") && strstr(t, "\"Language: pl\\n\"") &&
                      strstr(t, "nplurals=3;") && strstr(t, "#, fuzzy\nmsgid \"%d file\"") &&
                      strstr(t, "msgid \"Hello %s\"\nmsgstr \"\"") &&
                      strstr(t, "msgid \"Done\"\nmsgstr \"Fertig\""),
                  "%s", t);
    free(t);
    srv_catalog_free(c);
    /* overwrite: "Done" too */
    c = parse(po, 1);
    ck_assert_int_eq(srv_catalog_n(c), 4);
    srv_catalog_free(c);
    /* refused with libgettextpo's line */
    c = NULL;
    ck_assert_int_eq(srv_catalog_parse("msgid \"x\"\nmsgstr \"y\n", 15, 0, &c, err, sizeof err), -2);
    ck_assert_msg(strstr(err, "line "), "%s", err);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(srv_catalog_parse("msgid \"x\"\0", 11, 0, &c, err, sizeof err), -2);
    ck_assert_msg(strstr(err, "NUL"), "%s", err);
    ck_assert_str_eq(srv_po_plural_forms("de"), "nplurals=2; plural=(n != 1);");
    ck_assert_ptr_null(srv_po_plural_forms("xx"));
}
END_TEST

#define PO_HDR "msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=UTF-8\\n\"\n\n"

/* A catalogue the helper refuses: -2, the reason naming line and field. */
static void po_refused(const char *po, const char *line, const char *field)
{
    srv_catalog *c = NULL;
    char err[256] = "";
    int rc = srv_catalog_parse(po, strlen(po), 0, &c, err, sizeof err);
    ck_assert_msg(rc == -2, "%d %s\n%s", rc, err, po);
    ck_assert_ptr_null(c);
    char want[64];
    snprintf(want, sizeof want, "%s: %s ", line, field);
    ck_assert_msg(!strncmp(err, want, strlen(want)), "'%s' for '%s'", err, want);
}

/* gettext catalogues the helper's reading refuses before anything is
 * translated: a string whose escapes make bytes that are not UTF-8 (in each
 * field, an obsolete message's too), and a catalogue without a charset
 * (no header) that is not ASCII; one that is ASCII gets a header naming
 * UTF-8 for its translations. po.c reads a malformed answer of the helper
 * as an error, never a missing field. */
START_TEST(test_po_strings)
{
    srv_po_helper(TD_TRANSFORMERD);
    po_refused(PO_HDR "#: a.c:1\nmsgid \"Open\"\nmsgstr \"\\377\"\n", "line 6", "msgstr");
    po_refused(PO_HDR "msgid \"Op\\300\\200en\"\nmsgstr \"\"\n", "line 4", "msgid");
    po_refused(PO_HDR "msgctxt \"\\355\\240\\200\"\nmsgid \"Open\"\nmsgstr \"\"\n", "line 4",
               "msgctxt");
    po_refused(PO_HDR "msgid \"file\"\nmsgid_plural \"fi\\377les\"\nmsgstr[0] \"\"\nmsgstr[1] \"\"\n",
               "line 5", "msgid_plural");
    po_refused(PO_HDR "msgid \"file\"\nmsgid_plural \"files\"\nmsgstr[0] \"Datei\"\n"
                      "msgstr[1] \"\"\n\"\\370\\210\\200\\200\\200\"\n",
               "line 7", "msgstr[1]");
    po_refused(PO_HDR "msgid \"a\"\nmsgstr \"\"\n\n#~ msgid \"old\"\n#~ msgstr \"\\377\"\n", "line 8",
               "msgstr");
    po_refused("msgid \"x\"\nmsgstr \"\\377\"\n", "line 2", "msgstr"); /* before the charset */
    po_refused("# no header\nmsgid \"The caf\xc3\xa9 is open.\"\nmsgstr \"\"\n", "line 2", "msgid");
    po_refused("msgid \"\"\nmsgstr \"Project-Id-Version: x\\n\"\n\nmsgid \"x\"\nmsgstr \"\xc3\xa9\"\n",
               "line 5", "msgstr"); /* a header naming no charset */
    srv_catalog *c = NULL;
    char err[256] = "";
    static const char nohdr[] = "msgid \"The cafe is open.\"\nmsgstr \"\"\n";
    ck_assert_int_eq(srv_catalog_parse(nohdr, strlen(nohdr), 0, &c, err, sizeof err), 0);
    ck_assert_int_eq(srv_catalog_n(c), 1);
    ck_assert_int_eq(srv_catalog_set(c, 0, "Das Café ist geöffnet."), 1);
    srv_catalog_target(c, "de");
    char *t = render(c);
    ck_assert_msg(strstr(t, "msgid \"\"\nmsgstr \"\"\n") &&
                      strstr(t, "\"Content-Type: text/plain; charset=UTF-8\\n\"") &&
                      strstr(t, "#, fuzzy\nmsgid \"The cafe is open.\"\n"
                                "msgstr \"Das Café ist geöffnet.\""),
                  "%s", t);
    free(t);
    srv_catalog_free(c);
    /* the helper's answer, malformed */
    static const char *const bad[] = {
        "", "[]", "{\"entries\":[]}", "{\"header\":1,\"entries\":[]}", "{\"header\":\"\"}",
        "{\"header\":\"\",\"entries\":[1]}",
        "{\"header\":\"\",\"entries\":[{\"msgid\":\"x\",\"msgid_plural\":null,\"msgstr_plural\":[],"
        "\"fuzzy\":false,\"obsolete\":false}]}",
        "{\"header\":\"\",\"entries\":[{\"msgid\":\"x\",\"msgid_plural\":null,\"msgstr\":\"\","
        "\"msgstr_plural\":[\"y\"],\"fuzzy\":false,\"obsolete\":false}]}",
        "{\"header\":\"\",\"entries\":[{\"msgid\":\"x\",\"msgid_plural\":\"xs\",\"msgstr\":\"\","
        "\"msgstr_plural\":[null],\"fuzzy\":false,\"obsolete\":false}]}",
        "{\"header\":\"\",\"entries\":[{\"msgid\":\"x\",\"msgstr\":\"\",\"msgstr_plural\":[],"
        "\"fuzzy\":false,\"obsolete\":false}]}",
        "{\"header\":\"\",\"entries\":[{\"msgid\":2,\"msgid_plural\":null,\"msgstr\":\"\","
        "\"msgstr_plural\":[],\"fuzzy\":false,\"obsolete\":0}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_po *p = NULL;
        err[0] = 0;
        ck_assert_int_eq(srv_po_from_reply(bad[i], strlen(bad[i]), 0, &p, err, sizeof err), -1);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(err, "the catalogue helper's answer"), "%s", err);
    }
    static const char good[] = "{\"header\":\"\",\"entries\":[{\"msgid\":\"x\",\"msgid_plural\":\"xs\","
                               "\"msgstr\":\"\",\"msgstr_plural\":[\"\",\"\"],\"fuzzy\":false,"
                               "\"obsolete\":false}]}";
    srv_po *p = NULL;
    ck_assert_int_eq(srv_po_from_reply(good, strlen(good), 0, &p, err, sizeof err), 0);
    ck_assert_int_eq(srv_po_n(p), 2);
    ck_assert_str_eq(srv_po_source(p, 1), "xs");
    srv_po_free(p);
}
END_TEST

/* A catalogue in the charset its header names (ISO-8859-15 here: "\xa4"
 * is the euro sign, "\xe9" e acute) is read in it and written in UTF-8,
 * the header saying so, every string converted (the untouched translation,
 * the comment, the reference's file name); a charset iconv does not know,
 * or a string that is not in the one named, refused naming the charset. */
START_TEST(test_po_charset)
{
    srv_po_helper(TD_TRANSFORMERD);
    static const char latin[] =
        "# Fran\347ais\nmsgid \"\"\nmsgstr \"\"\n\"Project-Id-Version: Vim(Fran\347ais)\\n\"\n"
        "\"Content-Type: text/plain; charset=ISO_8859-15\\n\"\n\n"
        "# co\373t en \244\n#: caf\351.c:3\nmsgid \"Price\"\nmsgstr \"Prix \244\"\n\n"
        "msgid \"Caf\351 open\"\nmsgstr \"\"\n";
    srv_catalog *c = parse(latin, 0);
    ck_assert_int_eq(srv_catalog_n(c), 1);
    ck_assert_str_eq(srv_catalog_source(c, 0), "Caf\303\251 open");
    ck_assert_int_eq(srv_catalog_set(c, 0, "Caf\303\251 ge\303\266ffnet \342\200\2361\342\200\234"), 1);
    srv_catalog_target(c, "de");
    char *t = render(c);
    ck_assert_msg(strstr(t, "\"Content-Type: text/plain; charset=UTF-8\\n\"") && !strstr(t, "8859") &&
                      strstr(t, "Vim(Fran\303\247ais)") && strstr(t, "# co\303\273t en \342\202\254\n") &&
                      strstr(t, "#: caf\303\251.c:3\n") &&
                      strstr(t, "msgid \"Price\"\nmsgstr \"Prix \342\202\254\"") &&
                      strstr(t, "msgstr \"Caf\303\251 ge\303\266ffnet \342\200\2361\342\200\234\""),
                  "%s", t);
    free(t);
    srv_catalog_free(c);
    /* a charset iconv does not know, one the file's bytes are not in
     * (libgettextpo's refusal, or ours for a string made by an escape) */
    static const char *const bad[][2] = {
        {"msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=KLINGON-8\\n\"\n\n"
         "msgid \"x\"\nmsgstr \"\351\"\n",
         "\"KLINGON-8\""},
        {"msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=SHIFT_JIS\\n\"\n\n"
         "msgid \"x\"\nmsgstr \"\202\"\n",
         "line 5: invalid multibyte sequence in the charset \"SHIFT_JIS\""},
        {"msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=EUC-JP\\n\"\n\n"
         "msgid \"x\"\nmsgstr \"\\244\"\n",
         "line 5: msgstr is not valid EUC-JP"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        c = NULL;
        ck_assert_int_eq(srv_catalog_parse(bad[i][0], strlen(bad[i][0]), 0, &c, err, sizeof err), -2);
        ck_assert_ptr_null(c);
        ck_assert_msg(strstr(err, bad[i][1]), "'%s' for '%s'", err, bad[i][1]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("catalog");
    TCase *tc = tcase_create("catalog");
    tcase_add_test(tc, test_placeholders);
    tcase_add_test(tc, test_ts);
    tcase_add_test(tc, test_xliff);
    tcase_add_test(tc, test_inherited_and_target);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_po);
    tcase_add_test(tc, test_po_strings);
    tcase_add_test(tc, test_po_charset);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
